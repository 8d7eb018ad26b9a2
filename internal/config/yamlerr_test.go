package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A YAML syntax error names the line where it is (issue 39: it was
// reported one line early, two before the entry that revealed it).
func TestYAMLSyntaxErrorLine(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unclosed flow sequence", "listen: 127.0.0.1:8080\nmodels:\n  - name: m1\n    routes: [{provider: sim, model: x}\n  - name: m2\n", ":4: did not find expected ',' or ']' (the [ opened on this line is not closed)"},
		{"unclosed flow mapping", "listen: x\ntimeouts: {connect: 5s, idle: 1s\nkeys: []\n", ":2: did not find expected ',' or '}'"},
		{"bad indentation", "listen: x\ntimeouts:\n  connect: 1s\n  idle: 2s\n total: 3s\n", ":5: did not find expected key"},
		{"scanner error", "listen: x\ntimeouts:\n  connect: 1s\n   idle: 2s\n", ":4: mapping values are not allowed in this context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gw.yaml")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), path+tc.want) {
				t.Errorf("got %v, want %q", err, path+tc.want)
			}
		})
	}
}
