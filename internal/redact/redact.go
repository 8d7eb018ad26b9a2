// Package redact removes what a client must never read from an upstream's
// words: URLs, host:port pairs, IP addresses and credentials. Every string
// that comes from an upstream and reaches a client (an error status's
// message, an error event of any dialect, a stream's failure) passes
// through Text; the gateway, the relay and the provider adapters share it.
package redact

import (
	"regexp"
	"strings"
)

// The marks that replace what is removed.
const (
	Address = "[address]"
	Secret  = "[redacted]"
)

// h is one IPv6 group.
const h = `[0-9A-Fa-f]{1,4}`

var (
	// anywhere matches URLs of any scheme (up to the next blank or quote)
	// and bracketed IPv6 addresses ("[fe80::1]:99"): both are addresses
	// whatever comes before them. A bracket holds a colon, so field paths
	// (messages[0].content) are not addresses.
	anywhere = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>` + "`" + `]*` +
		`|\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?:%[0-9A-Za-z_.\-]+)?\](?::[0-9]{1,5})?`)
	// standalone matches, after a character that cannot be part of them,
	// bare IPv6 (full, or compressed with "::"; so 12:30:01 is not one), IPv4
	// with or without a port, and host:port of any host name, one label
	// (localhost:9000, vllm-svc:8000) or more, with a letter in it (so times
	// and ratios such as 3:1 are not addresses).
	standalone = regexp.MustCompile(`(^|[^A-Za-z0-9_.:%\-])(` +
		h + `(?::` + h + `){7}` +
		`|` + h + `(?::` + h + `){0,6}::(?:` + h + `(?::` + h + `){0,6})?` +
		`|::` + h + `(?::` + h + `){0,6}` +
		`)((?:\.[0-9]{1,3}){3})?(%[0-9A-Za-z_.\-]+)?` +
		`|(^|[^A-Za-z0-9_.:%\-])([0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]{1,5})?\b` +
		`|(?:[A-Za-z]|[0-9][A-Za-z0-9.\-]*[A-Za-z])[A-Za-z0-9.\-]*:[0-9]{1,5}\b)`)
	// secrets matches provider key shapes (OpenAI sk-…, sk-proj-…,
	// Anthropic sk-ant-…, Google AIza…) and bearer tokens.
	secrets = regexp.MustCompile(`(^|[^A-Za-z0-9_\-])(sk-[A-Za-z0-9_\-]{6,}|AIza[0-9A-Za-z_\-]{20,})` +
		`|(?i:(bearer\s+))[A-Za-z0-9._~+/=\-]{6,}`)
)

// Text returns s with every URL, network address and credential replaced
// by Address or Secret, and each of keys (the route's own api key, which
// may have any shape; keys shorter than 8 bytes are ignored) by Secret.
// Field paths (messages[0].content, tools[1].function.name), times
// (12:30:01) and ratios (3:1) are left as they are. Text is idempotent.
func Text(s string, keys ...string) string {
	for _, k := range keys {
		if len(k) >= 8 {
			s = strings.ReplaceAll(s, k, Secret)
		}
	}
	// A replacement can join what was around it into a new match ("a"
	// and ":80" around a removed URL); repeat until nothing changes, which
	// is at once for any ordinary text.
	for range 4 {
		r := pass(s)
		if r == s {
			break
		}
		s = r
	}
	return s
}

func pass(s string) string {
	if !strings.ContainsAny(s, ":.") && !strings.Contains(s, "sk-") && !strings.Contains(s, "AIza") &&
		!strings.Contains(strings.ToLower(s), "bearer") {
		return s // nothing to look for: the common case costs no regexp
	}
	s = anywhere.ReplaceAllLiteralString(s, Address)
	s = standalone.ReplaceAllString(s, "${1}${5}"+Address)
	return secrets.ReplaceAllString(s, "${1}${3}"+Secret)
}
