package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The key CLI end to end on a SQLite database: create (the secret shown
// once), list and show (never the secret), rotate, revoke, bad input.
func TestKeysCLI(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "keys.db")
	code, out, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "app", "--models", "m1,m2", "--max-streams", "3", "--expires", "30d")
	if code != 0 {
		t.Fatalf("create: exit %d, stderr %s", code, errs)
	}
	secret := regexp.MustCompile(`secret: (sg-[0-9A-Za-z]+)`).FindStringSubmatch(out)
	if secret == nil || !strings.Contains(out, "app") || !strings.Contains(out, "m1,m2") {
		t.Fatalf("create: got %q, want the key and its secret", out)
	}
	for _, args := range [][]string{{"list"}, {"show", "app"}, {"list", "--json"}} {
		code, out, errs := runCLI(t, nil, append(append([]string{"keys"}, args...), "--database", db)...)
		if code != 0 || !strings.Contains(out, "app") || strings.Contains(out, secret[1]) || strings.Contains(out, secret[1][3:]) {
			t.Errorf("%v: exit %d, out %q, stderr %s; want the key without its secret", args, code, out, errs)
		}
	}
	code, out, _ = runCLI(t, nil, "keys", "rotate", "app", "--database", db, "--json")
	var rotated struct {
		Name   string `json:"name"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(out), &rotated); code != 0 || err != nil || rotated.Name != "app" || rotated.Secret == "" || rotated.Secret == secret[1] {
		t.Errorf("rotate: exit %d, %q (%v); want a new secret", code, out, err)
	}
	if code, out, _ := runCLI(t, nil, "keys", "revoke", "app", "--database", db); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("revoke: exit %d, %q; want the key shown revoked", code, out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create", "--database", db}, "name"},
		{[]string{"keys", "create", "--database", db, "--name", "x", "--expires", "soon"}, "--expires"},
		{[]string{"keys", "show", "nope", "--database", db}, "nope"},
	} {
		if code, _, errs := runCLI(t, nil, tt.args...); code != 2 || !strings.Contains(errs, tt.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %q", tt.args, code, errs, tt.want)
		}
	}
}
