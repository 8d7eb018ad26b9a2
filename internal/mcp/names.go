package mcp

import (
	"encoding/base64"
	"strings"

	"github.com/streamgate/streamgate/internal/toolname"
)

// Sep joins a server's name and a tool's (or prompt's) in the names /mcp
// shows: "docs__search". Server names never contain it (the config refuses
// one that does), so the server is what comes before the first Sep.
const Sep = toolname.Sep

// MaxName is the longest tool name the providers' function calling
// accepts (OpenAI, Anthropic, Gemini: ^[a-zA-Z0-9_-]{1,64}$).
const MaxName = toolname.Max

// ValidName reports whether s is a function name every provider takes
// (package toolname's rule).
func ValidName(s string) bool { return toolname.Valid(s) }

// PrefixedName is the name /mcp shows for server's tool (or prompt) named
// tool: "server__tool" when that is a valid provider function name, else
// shortened with a hash, deterministically (package toolname; the hosted
// MCP tools of /v1/responses are named by the same rule).
func PrefixedName(server, tool string) string { return toolname.Join(server, tool) }

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
