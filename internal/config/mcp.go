package config

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
)

// MCP is the `mcp:` block: the MCP servers the gateway serves at /mcp
// (every server a key may use, tools named server__tool) and
// /mcp/{server} (one server), and how it seals the sessions of MCP
// 2025-11-25 clients into their ids.
type MCP struct {
	Servers []MCPServer `yaml:"servers,omitempty"`
	// SessionSecret derives the key that seals session ids: replicas that
	// share it serve each other's sessions. Empty: derived from admin_key;
	// with no admin_key either, a random secret per process (sessions then
	// end when the process does and open on no other replica). At least 16
	// characters.
	SessionSecret string `yaml:"session_secret,omitempty"`
	// SessionTTL is how long a session id opens after initialize; 0s
	// means DefaultMCPSessionTTL. A client re-initializes past it.
	SessionTTL Duration `yaml:"session_ttl,omitempty"`
}

// DefaultMCPSessionTTL is mcp.session_ttl's default.
const DefaultMCPSessionTTL = 24 * time.Hour

// MCPServer is one MCP server (mcp.servers[]): exactly one of URL (a
// Streamable HTTP endpoint, either protocol era, or a legacy HTTP+SSE
// server) and Command (a stdio server the gateway runs and supervises).
type MCPServer struct {
	// Name names the server: its tools are server__tool on /mcp, its own
	// URL /mcp/{name}. Letters, digits, '-' and '_' (not "__", nor at
	// either end), at most 32 characters.
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// Command is a stdio server's argv.
	Command []string `yaml:"command"`
	// Env is a stdio server's environment besides PATH and HOME (nothing
	// else of the gateway's environment reaches it).
	Env map[string]string `yaml:"env"`
	// Headers are the only headers an HTTP server gets besides the
	// protocol's own (its credentials): nothing a client sends reaches it.
	Headers map[string]string `yaml:"headers"`
	// Timeout ends a call on which the server said nothing for this long
	// (a progress notification resets it); 0s means 10m.
	Timeout Duration `yaml:"timeout"`
	// MaxResultBytes caps one message from the server; a larger result
	// is cut and the client told so. 0 means 10 MiB.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// ToolPrices are USD per call by tool name (as the server names it);
	// "*" prices the tools not listed. A price is booked in the ledger and
	// counted against the key's and team's budgets.
	ToolPrices map[string]float64 `yaml:"tool_prices"`
}

// maxMCPServerName bounds a server's name: its tools' names must fit in 64
// characters with it.
const maxMCPServerName = 32

// mcpReservedHeaders are headers of the protocol or of the connection,
// which a server's headers may not set.
var mcpReservedHeaders = []string{"content-type", "accept", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
	"last-event-id", "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive", "proxy-connection"}

func (v *problems) mcp(m MCP, keys []Key) {
	names := make(map[string]int, len(m.Servers))
	for i, s := range m.Servers {
		path := fmt.Sprintf("mcp.servers[%d]", i)
		if first, dup := names[s.Name]; dup && s.Name != "" {
			v.add(path+".name", "duplicate MCP server name %q (first at mcp.servers[%d])", s.Name, first)
		} else if s.Name == "" {
			v.add(path+".name", "required")
		} else {
			names[s.Name] = i
		}
		if s.Name != "" {
			if msg := mcpServerName(s.Name); msg != "" {
				v.add(path+".name", "%q %s", s.Name, msg)
			}
		}
		switch {
		case s.URL != "" && len(s.Command) > 0:
			v.add(path, "both url and command are set: a server is one or the other")
		case s.URL == "" && len(s.Command) == 0:
			v.add(path, "one of url (an HTTP server) and command (a stdio server) is required")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.add(path+".url", "%s is not an absolute http:// or https:// URL", redactURL(s.URL))
			}
			if len(s.Env) > 0 {
				v.add(path+".env", "only a stdio server (command) has an environment: it would not be used")
			}
		default:
			if s.Command[0] == "" {
				v.add(path+".command[0]", "the program is empty")
			}
			if len(s.Headers) > 0 {
				v.add(path+".headers", "only an HTTP server (url) gets headers: they would not be used")
			}
		}
		for _, k := range sortedKeys(s.Env) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				v.add(path+".env", "%q is not an environment variable name", k)
			}
		}
		for _, k := range sortedKeys(s.Headers) {
			lk := strings.ToLower(k)
			switch {
			case slices.Contains(mcpReservedHeaders, lk) || strings.HasPrefix(lk, "mcp-param-"):
				v.add(path+".headers", "%q is the protocol's own header and cannot be set", k)
			case !httpToken(k):
				v.add(path+".headers", "%q is not a valid HTTP header name", k)
			}
			if strings.ContainsAny(s.Headers[k], "\r\n\x00") {
				v.add(path+".headers."+k, "the value has a line break or NUL")
			}
		}
		v.nonNegative(path+".timeout", s.Timeout)
		if s.MaxResultBytes < 0 {
			v.add(path+".max_result_bytes", "must not be negative, got %d", s.MaxResultBytes)
		}
		for _, tool := range sortedKeys(s.ToolPrices) {
			p := s.ToolPrices[tool]
			switch {
			case tool == "":
				v.add(path+".tool_prices", "a tool name is empty")
			case math.IsNaN(p) || math.IsInf(p, 0) || p < 0:
				v.add(path+".tool_prices."+tool, "must be a finite number ≥ 0 (USD per call), got %v", p)
			}
		}
	}
	if s := m.SessionSecret; s != "" && len(s) < 16 {
		v.add("mcp.session_secret", "must be at least 16 characters (it seals the session ids of every replica)")
	}
	if d := m.SessionTTL.D(); d < 0 || (d > 0 && d < time.Minute) {
		v.add("mcp.session_ttl", "must be at least 1m (0s: the default, %s), got %s", DefaultMCPSessionTTL, d)
	}
	for i, k := range keys {
		for j, g := range k.MCPTools {
			p := fmt.Sprintf("keys[%d].mcp_tools[%d]", i, j)
			if msg := checkToolGlob(g); msg != "" {
				v.add(p, "%s", msg)
				continue
			}
			if len(m.Servers) == 0 {
				v.add(p, "no MCP server is configured (mcp.servers): it would allow nothing")
				continue
			}
			// A glob naming its server literally must name a configured one.
			if server, _, ok := strings.Cut(g, "__"); ok && !strings.Contains(server, "*") {
				if _, known := names[server]; !known {
					v.addRef("mcp.servers", p, "%q names MCP server %q, which is not configured", g, server)
				}
			}
		}
	}
}

// mcpServerName says what is wrong with a server's name, "" when nothing.
func mcpServerName(n string) string {
	switch {
	case len(n) > maxMCPServerName:
		return fmt.Sprintf("is longer than %d characters (its tools' names must fit in 64)", maxMCPServerName)
	case strings.Contains(n, "__"):
		return `has "__", which separates a server's name from its tools' (server__tool)`
	case n[0] == '_' || n[0] == '-' || n[len(n)-1] == '_' || n[len(n)-1] == '-':
		return "must begin and end with a letter or a digit"
	}
	for _, r := range n {
		if !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-')) {
			return fmt.Sprintf("has %q: only letters, digits, '-' and '_' (it is part of tool names)", r)
		}
	}
	return ""
}

// checkToolGlob says what is wrong with a glob of mcp_tools, "" when nothing.
func checkToolGlob(g string) string {
	switch {
	case g == "":
		return "an empty glob allows nothing"
	case strings.Contains(g, "**"):
		return fmt.Sprintf("%q has \"**\" (one '*' matches any run of characters)", g)
	}
	for _, r := range g {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Sprintf("%q has a space or control character", g)
		case strings.ContainsRune(`?[]\`, r):
			return fmt.Sprintf("%q has %q: only '*' is a wildcard (any run of characters)", g, r)
		}
	}
	return ""
}

// httpToken reports whether s is a valid HTTP field name (RFC 9110 token).
func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// clone copies m deeply.
func (m MCP) clone() MCP {
	out := m
	out.Servers = slices.Clone(m.Servers)
	for i := range out.Servers {
		s := &out.Servers[i]
		s.Command = slices.Clone(s.Command)
		s.Env = cloneMap(s.Env)
		s.Headers = cloneMap(s.Headers)
		s.ToolPrices = cloneMap(s.ToolPrices)
	}
	return out
}

func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// redact hides the session secret, header and environment values, and a
// password in a URL.
func (m *MCP) redact() {
	m.SessionSecret = Redact(m.SessionSecret)
	for i := range m.Servers {
		s := &m.Servers[i]
		if s.URL != "" {
			s.URL = redactURL(s.URL)
		}
		for k, val := range s.Headers {
			s.Headers[k] = Redact(val)
		}
		for k, val := range s.Env {
			s.Env[k] = Redact(val)
		}
	}
}
