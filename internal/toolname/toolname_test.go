package toolname

import (
	"strings"
	"testing"
)

func TestJoin(t *testing.T) {
	long := strings.Repeat("x", 70)
	for _, c := range []struct{ server, tool, want string }{
		{"docs", "search", "docs__search"},
		{"docs", "read-file_2", "docs__read-file_2"},
		// Fixed forever: replicas and releases show the same names.
		{"docs", long, "docs__" + strings.Repeat("x", 49) + "_b384a454"},
	} {
		if got := Join(c.server, c.tool); got != c.want {
			t.Errorf("Join(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
	}
	seen := map[string]string{}
	for _, tool := range []string{long, long + "y", "a.b", "a_b.", "ünï", "a b", strings.Repeat("z", 58)} {
		got := Join("docs", tool)
		if !Valid(got) {
			t.Errorf("Join(docs, %q) = %q: not a valid function name", tool, got)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q both join to %q", prev, tool, got)
		}
		seen[got] = tool
	}
	// Gemini wants a letter or '_' first.
	for _, server := range []string{"1docs", "-docs"} {
		if got := Join(server, "t"); !Valid(got) || got[0] != '_' {
			t.Errorf("Join(%q, t) = %q: want a valid name beginning with '_'", server, got)
		}
	}
}
