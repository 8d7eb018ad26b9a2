package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestServeHelpNamesEveryEndpoint reads the paths the gateway registers on
// its mux (internal/gateway's source) and wants each in serve --help: a path
// with a {wildcard} is named by its part before the wildcard.
func TestServeHelpNamesEveryEndpoint(t *testing.T) {
	files, err := filepath.Glob("../../internal/gateway/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("internal/gateway sources: %v (%d files)", err, len(files))
	}
	handle := regexp.MustCompile(`mux\.Handle(?:Func)?\("(?:[A-Z]+ )?(/[^"]*)"`)
	var paths []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range handle.FindAllStringSubmatch(string(b), -1) {
			paths = append(paths, m[1])
		}
	}
	if len(paths) < 10 {
		t.Fatalf("found %d registered paths (%q), want the gateway's whole table", len(paths), paths)
	}
	_, stdout, _ := runServe(t, context.Background(), nil, "--help")
	for _, p := range paths {
		if p == "/" {
			continue // the catch-all 404
		}
		name := strings.TrimSuffix(p, "/")
		if i := strings.Index(name, "/{"); i > 0 {
			name = name[:i]
		}
		if !strings.Contains(stdout, name) {
			t.Errorf("serve --help does not name %s (registered as %q)", name, p)
		}
	}
	for _, p := range []string{"/v1/messages", "/v1/embeddings", "/v1/responses"} {
		if !strings.Contains(stdout, "POST "+p) {
			t.Errorf("serve --help: no \"POST %s\"", p)
		}
	}
}
