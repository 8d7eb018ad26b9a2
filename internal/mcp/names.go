package mcp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Sep joins a server's name and a tool's (or prompt's) in the names /mcp
// shows: "docs__search". Server names never contain it (the config refuses
// one that does), so the server is what comes before the first Sep.
const Sep = "__"

// MaxName is the longest tool name the providers' function calling
// accepts (OpenAI, Anthropic, Gemini: ^[a-zA-Z0-9_-]{1,64}$).
const MaxName = 64

// hashLen is the length of the hash a shortened name ends with ("_" and
// 8 hex digits).
const hashLen = 9

// ValidName reports whether s is a valid provider function name:
// 1 to 64 of [a-zA-Z0-9_-].
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxName {
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

// PrefixedName is the name /mcp shows for server's tool (or prompt) named
// tool: "server__tool" when that is a valid provider function name, else
// the same with every other character replaced by '_', cut to fit 64
// characters with room for '_' and 8 hex digits of a hash of (server,
// tool) — deterministic, so every replica and every call shows the same
// name, and two tools whose cut names meet still differ.
func PrefixedName(server, tool string) string {
	n := server + Sep + tool
	if ValidName(n) {
		return n
	}
	b := []byte(n)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) > MaxName-hashLen {
		b = b[:MaxName-hashLen]
	}
	h := sha256.Sum256([]byte(server + "\x00" + tool))
	b = append(b, '_')
	b = hex.AppendEncode(b, h[:4])
	return string(b)
}

// SplitName returns the server part of a name /mcp showed and the rest,
// false when it has no Sep.
func SplitName(name string) (server, rest string, ok bool) {
	return strings.Cut(name, Sep)
}

// uriScheme leads a resource URI /mcp shows: mcp://{server}/{the server's URI}.
const uriScheme = "mcp://"

// PrefixedURI is the URI /mcp shows for server's resource uri (or URI template).
func PrefixedURI(server, uri string) string { return uriScheme + server + "/" + uri }

// SplitURI returns the server and the server's own URI of a URI /mcp showed.
func SplitURI(uri string) (server, orig string, ok bool) {
	rest, ok := strings.CutPrefix(uri, uriScheme)
	if !ok {
		return "", "", false
	}
	server, orig, ok = strings.Cut(rest, "/")
	return server, orig, ok && server != ""
}

// MatchGlob reports whether name matches pattern, where '*' stands for
// any run of characters (the globs of keys' mcp_tools).
func MatchGlob(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	rest := name[len(first) : len(name)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// AllowGlobs returns the allow-list of globs (nil or empty: everything).
// A tool is allowed when a glob matches its name as /mcp shows it or its
// full, unshortened "server__tool".
func AllowGlobs(globs []string) func(string) bool {
	if len(globs) == 0 {
		return nil
	}
	return func(name string) bool {
		for _, g := range globs {
			if MatchGlob(g, name) {
				return true
			}
		}
		return false
	}
}

// cursor is the gateway's own pagination cursor of an aggregated list: the
// name of the last item of the page before, opaque to clients.
func encodeCursor(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("c1:" + last))
}

func decodeCursor(c string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", false
	}
	return strings.CutPrefix(string(b), "c1:")
}
