// Package toolname makes the function name a model is offered an MCP
// server's tool under, one rule for /mcp's aggregated list and for hosted
// MCP tools in /v1/responses, so that an agent sees the same name on both
// paths, on every replica and in every release (its prompt cache stays
// warm).
package toolname

import (
	"crypto/sha256"
	"encoding/hex"
)

// Max is the longest function name every provider takes (OpenAI's and
// Gemini's 64; Anthropic's is 128).
const Max = 64

// Sep joins a server's name and its tool's.
const Sep = "__"

// hashLen is the length of the hash a shortened name ends with ("_" and
// 8 hex digits).
const hashLen = 9

// Valid reports whether s is a function name every provider takes: 1 to
// 64 of [a-zA-Z0-9_-], not beginning with a digit or '-' (Gemini's rule).
func Valid(s string) bool {
	if len(s) == 0 || len(s) > Max {
		return false
	}
	if c := s[0]; c >= '0' && c <= '9' || c == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Join is the name of server's tool: "server__tool" when that is Valid;
// otherwise the same with every other character replaced by '_', a '_'
// put first where it began with a digit or '-', cut to leave room for '_'
// and 8 hex digits of a SHA-256 of (server, tool) — deterministic, and two
// tools whose cut names meet still differ.
func Join(server, tool string) string {
	n := server + Sep + tool
	if Valid(n) {
		return n
	}
	b := []byte(n)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	if c := b[0]; c >= '0' && c <= '9' || c == '-' {
		b = append([]byte{'_'}, b...)
	}
	if len(b) > Max-hashLen {
		b = b[:Max-hashLen]
	}
	h := sha256.Sum256([]byte(server + "\x00" + tool))
	b = append(b, '_')
	b = hex.AppendEncode(b, h[:4])
	return string(b)
}
