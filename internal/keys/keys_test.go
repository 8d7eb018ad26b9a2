package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb"
	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(sqldbtest.Context(t), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// forEachStore runs body as a parallel subtest per database kind, on a
// fresh store.
func forEachStore(t *testing.T, body func(t *testing.T, s *Store)) {
	t.Helper()
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			body(t, openStore(t, tc.DSN(t)))
		})
	}
}

func mustCreate(t *testing.T, s *Store, k Key) (Key, string) {
	t.Helper()
	got, secret, err := s.Create(sqldbtest.Context(t), k)
	if err != nil {
		t.Fatalf("Create(%q): %v", k.Name, err)
	}
	return got, secret
}

// TestLifecycle: create, look up, list, get; the secret appears nowhere but
// in Create's answer.
func TestLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := sqldbtest.Context(t)
		before := time.Now().Add(-time.Second)
		expires := time.Now().Add(30 * 24 * time.Hour)
		app, secret := mustCreate(t, s, Key{Name: "app", Models: []string{"gpt-4.1", "sim-fast"}, MaxStreams: 8, ExpiresAt: expires})
		other, otherSecret := mustCreate(t, s, Key{Name: "other"})

		if !strings.HasPrefix(app.ID, "key_") || len(app.ID) != 4+16 {
			t.Errorf("ID: got %q, want key_ and 16 characters", app.ID)
		}
		if want := secret[:9]; app.Prefix != want {
			t.Errorf("Prefix: got %q, want %q", app.Prefix, want)
		}
		if app.CreatedAt.Before(before) || app.CreatedAt.After(time.Now()) || app.CreatedAt.Location() != time.UTC {
			t.Errorf("CreatedAt: got %v, want now in UTC", app.CreatedAt)
		}
		if !app.ExpiresAt.Equal(expires.Truncate(time.Microsecond)) {
			t.Errorf("ExpiresAt: got %v, want %v", app.ExpiresAt, expires)
		}
		if !reflect.DeepEqual(other.Models, []string{}) {
			t.Errorf("Models of a key for all models: got %#v, want an empty slice", other.Models)
		}

		got, err := s.Lookup(ctx, secret)
		if err != nil || !reflect.DeepEqual(got, app) {
			t.Errorf("Lookup:\ngot  %+v, %v\nwant %+v", got, err, app)
		}
		if got, err := s.Lookup(ctx, otherSecret); err != nil || got.ID != other.ID {
			t.Errorf("Lookup of the other secret: got %s, %v; want %s", got.ID, err, other.ID)
		}

		list, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if want := []Key{app, other}; !reflect.DeepEqual(list, want) {
			t.Errorf("List:\ngot  %+v\nwant %+v", list, want)
		}
		js, err := json.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{secret, otherSecret, secret[9:], hash(secret)} {
			if strings.Contains(string(js), sec) {
				t.Errorf("JSON of List reveals a secret or its hash: %s", js)
			}
			if f := fmt.Sprintf("%v %+v %#v", app, app, list); strings.Contains(f, sec) {
				t.Errorf("formatted keys reveal a secret: %s", f)
			}
		}
		if strings.Contains(string(js), "revoked_at") {
			t.Errorf("JSON of active keys: got revoked_at in %s, want it omitted", js)
		}

		for _, ref := range []string{app.ID, "app"} {
			if got, err := s.Get(ctx, ref); err != nil || !reflect.DeepEqual(got, app) {
				t.Errorf("Get(%q):\ngot  %+v, %v\nwant %+v", ref, got, err, app)
			}
		}
		if _, err := s.Get(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(nobody): got %v, want ErrNotFound", err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
	})
}

// TestNames: an active key's name is taken, a revoked key's free again; the
// name then finds the new key, the ID still the old.
func TestNames(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := sqldbtest.Context(t)
		old, _ := mustCreate(t, s, Key{Name: "team-a"})
		if _, secret, err := s.Create(ctx, Key{Name: "team-a"}); !errors.Is(err, ErrNameTaken) || secret != "" {
			t.Fatalf("Create of an active name: got %q, %v; want ErrNameTaken", secret, err)
		} else if !strings.Contains(err.Error(), `"team-a"`) {
			t.Errorf("ErrNameTaken: got %q, want it to name team-a", err)
		}
		if _, err := s.Revoke(ctx, "team-a"); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		reused, _ := mustCreate(t, s, Key{Name: "team-a"})
		if got, err := s.Get(ctx, "team-a"); err != nil || got.ID != reused.ID {
			t.Errorf("Get(name): got %s, %v; want the new key %s", got.ID, err, reused.ID)
		}
		if got, err := s.Get(ctx, old.ID); err != nil || got.ID != old.ID || !got.Revoked() {
			t.Errorf("Get(old ID): got %+v, %v; want the revoked key %s", got, err, old.ID)
		}
		if list, err := s.List(ctx); err != nil || len(list) != 2 {
			t.Errorf("List: got %d keys, %v; want 2 (revoked included)", len(list), err)
		}
	})
}

// TestRevoke: Lookup still finds a revoked key, with RevokedAt, for the
// caller to refuse; the name no longer finds it; revoking again changes
// nothing; a revoked key cannot be rotated.
func TestRevoke(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := sqldbtest.Context(t)
		k, secret := mustCreate(t, s, Key{Name: "gone"})
		revoked, err := s.Revoke(ctx, "gone")
		if err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		if !revoked.Revoked() || revoked.RevokedAt.Before(k.CreatedAt) {
			t.Errorf("RevokedAt: got %v, want set, not before %v", revoked.RevokedAt, k.CreatedAt)
		}
		got, err := s.Lookup(ctx, secret)
		if err != nil || !reflect.DeepEqual(got, revoked) {
			t.Errorf("Lookup of a revoked key:\ngot  %+v, %v\nwant %+v", got, err, revoked)
		}
		if _, err := s.Get(ctx, "gone"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(name) of a revoked key: got %v, want ErrNotFound", err)
		}
		again, err := s.Revoke(ctx, k.ID)
		if err != nil || !again.RevokedAt.Equal(revoked.RevokedAt) {
			t.Errorf("Revoke again: got %v, %v; want %v, nil", again.RevokedAt, err, revoked.RevokedAt)
		}
		if _, _, err := s.Rotate(ctx, k.ID); !errors.Is(err, ErrRevoked) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Rotate of a revoked key: got %v, want ErrRevoked (an ErrInvalid)", err)
		}
		if _, err := s.Revoke(ctx, "key_nonexistent00000"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Revoke of no key: got %v, want ErrNotFound", err)
		}
		js, _ := json.Marshal(revoked)
		if !strings.Contains(string(js), `"revoked_at"`) {
			t.Errorf("JSON of a revoked key: got %s, want revoked_at", js)
		}
	})
}

// TestRotate: the old secret stops working, the new one finds the same key
// with a new prefix.
func TestRotate(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := sqldbtest.Context(t)
		k, oldSecret := mustCreate(t, s, Key{Name: "rot", Models: []string{"m"}})
		rotated, newSecret, err := s.Rotate(ctx, "rot")
		if err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		if newSecret == oldSecret || !wellFormed(newSecret) {
			t.Fatalf("new secret: got a %d-byte secret equal to the old: %v", len(newSecret), newSecret == oldSecret)
		}
		if rotated.ID != k.ID || rotated.Prefix != newSecret[:9] {
			t.Errorf("rotated: got ID %s prefix %s; want %s, %s", rotated.ID, rotated.Prefix, k.ID, newSecret[:9])
		}
		if _, err := s.Lookup(ctx, oldSecret); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup of the old secret: got %v, want ErrNotFound", err)
		} else if strings.Contains(err.Error(), oldSecret) || strings.Contains(err.Error(), oldSecret[9:]) {
			t.Errorf("Lookup error reveals the secret: %q", err)
		}
		got, err := s.Lookup(ctx, newSecret)
		if err != nil || !reflect.DeepEqual(got, rotated) {
			t.Errorf("Lookup of the new secret:\ngot  %+v, %v\nwant %+v", got, err, rotated)
		}
		if got, err := s.Get(ctx, k.ID); err != nil || got.Prefix != rotated.Prefix {
			t.Errorf("Get after Rotate: got prefix %q, %v; want %q", got.Prefix, err, rotated.Prefix)
		}
	})
}

// TestExpired: Lookup returns an expired key as it is; the caller refuses it.
func TestExpired(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := sqldbtest.Context(t)
		past := time.Now().Add(-time.Hour)
		s.now = func() time.Time { return past.Add(-time.Hour) } // created when the expiry was ahead
		k, secret := mustCreate(t, s, Key{Name: "old", ExpiresAt: past})
		s.now = time.Now
		got, err := s.Lookup(ctx, secret)
		if err != nil || !reflect.DeepEqual(got, k) {
			t.Fatalf("Lookup of an expired key:\ngot  %+v, %v\nwant %+v", got, err, k)
		}
		if !got.Expired(time.Now()) || got.Revoked() {
			t.Errorf("Expired, Revoked: got %v, %v; want true, false", got.Expired(time.Now()), got.Revoked())
		}
		if (Key{}).Expired(time.Now()) {
			t.Error("Expired of a key without expiry: got true")
		}
	})
}

func TestLookupUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := sqldbtest.Context(t)
		mustCreate(t, s, Key{Name: "k"})
		wellFormedUnknown, _ := newSecret()
		for _, secret := range []string{"", "sg-", "sk-proj-abc", wellFormedUnknown, wellFormedUnknown + "x", "sg-" + strings.Repeat("!", 40)} {
			_, err := s.Lookup(ctx, secret)
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Lookup(%q): got %v, want ErrNotFound", secret, err)
			}
			if secret != "" && strings.Contains(err.Error(), secret) {
				t.Errorf("Lookup(%q): error %q contains the secret", secret, err)
			}
		}
		// A secret passed as a ref by mistake is not echoed either.
		_, err := s.Get(ctx, wellFormedUnknown)
		if !errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), wellFormedUnknown[9:]) {
			t.Errorf("Get(secret): got %q, want ErrNotFound without the secret", err)
		}
	})
}

func TestValidation(t *testing.T) {
	s := openStore(t, "sqlite://:memory:")
	ctx := sqldbtest.Context(t)
	long := strings.Repeat("é", 65)
	tests := []struct {
		name string
		k    Key
		want []string // substrings of the error
	}{
		{"no name", Key{}, []string{"name: required"}},
		{"long name", Key{Name: long}, []string{"name: 65 characters, want at most 64"}},
		{"control character", Key{Name: "a\nb"}, []string{"name", "not printable"}},
		{"invalid UTF-8", Key{Name: "a\xffb"}, []string{"name: not valid UTF-8"}},
		{"surrounding space", Key{Name: " a"}, []string{"name", "space"}},
		{"ID-shaped name", Key{Name: "key_abc"}, []string{"name", `"key_"`}},
		{"secret as name", Key{Name: "sg-" + strings.Repeat("a", 40)}, []string{"name: looks like a key secret"}},
		{"empty model", Key{Name: "a", Models: []string{"m", " "}}, []string{"models[1]: empty"}},
		{"negative max_streams", Key{Name: "a", MaxStreams: -1}, []string{"max_streams: -1 is negative"}},
		{"empty MCP tool glob", Key{Name: "a", MCPTools: []string{"docs__*", ""}}, []string{"mcp_tools[1]: empty"}},
		{"MCP tool glob with a space", Key{Name: "a", MCPTools: []string{"docs__read file"}}, []string{`mcp_tools[0]: "docs__read file" has ' '`}},
		{"MCP tool glob with '?'", Key{Name: "a", MCPTools: []string{"docs__?"}}, []string{`mcp_tools[0]: "docs__?" has '?'`, "'*' (any run of characters)"}},
		{"MCP tool glob with **", Key{Name: "a", MCPTools: []string{"docs__**"}}, []string{`mcp_tools[0]: "docs__**" has "**"`}},
		{"long MCP tool glob", Key{Name: "a", MCPTools: []string{strings.Repeat("a", 201)}}, []string{"mcp_tools[0]: 201 bytes, want at most 200"}},
		{"past expiry", Key{Name: "a", ExpiresAt: time.Now().Add(-time.Minute)}, []string{"expires_at", "not in the future"}},
		{"every problem at once", Key{Models: []string{""}, MaxStreams: -2, ExpiresAt: time.Unix(1, 0)},
			[]string{"name: required", "models[0]: empty", "max_streams: -2", "expires_at: 1970-01-01T00:00:01Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, secret, err := s.Create(ctx, tt.k)
			if !errors.Is(err, ErrInvalid) || secret != "" {
				t.Fatalf("Create(%+v): got %q, %v; want ErrInvalid", tt.k, secret, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "sg-aaaa") {
				t.Errorf("error %q echoes a secret-shaped name", err)
			}
		})
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List after invalid creates: got %d keys, %v; want 0", len(list), err)
	}
	if _, _, err := s.Create(ctx, Key{Name: strings.Repeat("é", 64), Models: []string{"m"}, MaxStreams: 0}); err != nil {
		t.Errorf("Create with a 64-character name: %v", err)
	}
}

// TestMCPTools: a key's MCP tool globs go through create, get, list and
// lookup unchanged; none (nil or empty) is NULL, every tool, read back as
// nil.
func TestMCPTools(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := sqldbtest.Context(t)
		globs := []string{"docs__*", "fs__read_file", "*search*"}
		limited, secret := mustCreate(t, s, Key{Name: "agent", MCPTools: globs})
		all, _ := mustCreate(t, s, Key{Name: "all"})
		empty, _ := mustCreate(t, s, Key{Name: "empty", MCPTools: []string{}})
		if !reflect.DeepEqual(limited.MCPTools, globs) || all.MCPTools != nil || empty.MCPTools != nil {
			t.Errorf("Create: got %q, %q, %q; want %q, nil, nil", limited.MCPTools, all.MCPTools, empty.MCPTools, globs)
		}
		if got, err := s.Get(ctx, "agent"); err != nil || !reflect.DeepEqual(got, limited) {
			t.Errorf("Get: got %+v, %v; want %+v", got, err, limited)
		}
		if got, err := s.Lookup(ctx, secret); err != nil || !reflect.DeepEqual(got.MCPTools, globs) {
			t.Errorf("Lookup: got %q, %v; want %q", got.MCPTools, err, globs)
		}
		list, err := s.List(ctx)
		if err != nil || len(list) != 3 || !reflect.DeepEqual(list[0].MCPTools, globs) || list[1].MCPTools != nil || list[2].MCPTools != nil {
			t.Fatalf("List: got %+v, %v", list, err)
		}
		var nulls int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE mcp_tools IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
			t.Errorf("keys with mcp_tools NULL: got %d, %v; want 2", nulls, err)
		}
		// JSON: absent when every tool, as for a static key.
		b, _ := json.Marshal(all)
		if strings.Contains(string(b), "mcp_tools") {
			t.Errorf("JSON of a key with every tool: %s has mcp_tools", b)
		}
		if b, _ := json.Marshal(limited); !strings.Contains(string(b), `"mcp_tools":["docs__*","fs__read_file","*search*"]`) {
			t.Errorf("JSON: got %s", b)
		}
	})
}

// TestMigrateFromV2: a database at version 2 (before mcp_tools) is brought
// to version 3 by Open; its keys keep every MCP tool (NULL), and a binary
// at version 2 still runs against the migrated database (the step is
// compatible) and still reads and creates keys.
func TestMigrateFromV2(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			dsn := tc.DSN(t)
			v2 := func(t *testing.T) *sqldb.DB {
				db, err := sqldb.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				steps := migrations[db.Dialect][:2]
				if err := db.MigrateSchema(ctx, sqldb.Schema{Component: schemaComponent, Steps: steps, Compatible: []int{2}}); err != nil {
					t.Fatalf("migrate to version 2: %v", err)
				}
				return db
			}
			old := v2(t)
			now := time.Now().UTC().Truncate(time.Microsecond)
			var created any = now.UnixMicro()
			if old.Dialect == sqldb.Postgres {
				created = now
			}
			if _, err := old.ExecContext(ctx, `INSERT INTO api_keys
				(id, name, prefix, secret_sha256, models, max_streams, rpm, tpm, budget_usd, budget_period, created_at, team)
				VALUES ('key_0000000000000001', 'old', 'sg-aaaaaa', 'h1', '[]', 0, 0, 0, 0, 'month', $1, '')`, created); err != nil {
				t.Fatalf("insert at version 2: %v", err)
			}
			old.Close()

			s := openStore(t, dsn)
			var version int
			if err := s.db.QueryRowContext(ctx, `SELECT version FROM streamgate_schema WHERE component = 'keys'`).Scan(&version); err != nil || version != 3 {
				t.Fatalf("schema version after Open: got %d, %v; want 3", version, err)
			}
			k, err := s.Get(ctx, "old")
			if err != nil || k.MCPTools != nil || !k.CreatedAt.Equal(now) {
				t.Errorf("the version-2 key: got %+v, %v; want every MCP tool (nil)", k, err)
			}
			mustCreate(t, s, Key{Name: "new", MCPTools: []string{"docs__echo"}})

			// A version-2 binary: its migration finds nothing to do and
			// its queries (without mcp_tools) work.
			old = v2(t)
			if _, err := old.ExecContext(ctx, `INSERT INTO api_keys
				(id, name, prefix, secret_sha256, models, max_streams, rpm, tpm, budget_usd, budget_period, created_at, team)
				VALUES ('key_0000000000000002', 'by-v2', 'sg-bbbbbb', 'h2', '[]', 0, 0, 0, 0, 'month', $1, '')`, created); err != nil {
				t.Fatalf("insert by a version-2 binary: %v", err)
			}
			var n int
			if err := old.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys`).Scan(&n); err != nil || n != 3 {
				t.Errorf("keys seen by a version-2 binary: got %d, %v; want 3", n, err)
			}
			if k, err := s.Get(ctx, "by-v2"); err != nil || k.MCPTools != nil {
				t.Errorf("a key created by a version-2 binary: got %+v, %v; want every MCP tool", k, err)
			}
		})
	}
}

// TestSecrets: secrets and IDs have their shape and do not repeat.
func TestSecrets(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	for range 100 {
		secret, err := newSecret()
		if err != nil {
			t.Fatal(err)
		}
		if len(secret) != 43 || !strings.HasPrefix(secret, "sg-") || !wellFormed(secret) {
			t.Fatalf("secret %q: want sg- and 40 base62 characters", secret)
		}
		if seen[secret] {
			t.Fatalf("secret repeated after %d", len(seen))
		}
		seen[secret] = true
		for _, r := range secret[3:] {
			counts[r]++
		}
	}
	// 4,000 characters over 62: each is expected ~64 times; all should show.
	if len(counts) != 62 {
		t.Errorf("distinct characters in 100 secrets: got %d, want 62", len(counts))
	}
	for r := range counts {
		if !strings.ContainsRune(base62, r) {
			t.Errorf("character %q outside base62", r)
		}
	}
	id, err := randomBase62(idChars)
	if err != nil || len(id) != 16 {
		t.Errorf("ID part: got %q, %v; want 16 characters", id, err)
	}
}

// TestConcurrentCreate: 20 goroutines create keys at once, through two
// stores on one SQLite file (as the gateway and the CLI would) or on one
// PostgreSQL database: every create succeeds.
func TestConcurrentCreate(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			dsn := tc.DSN(t)
			stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
			const n = 20
			var wg sync.WaitGroup
			errs := make([]error, n)
			secrets := make([]string, n)
			for i := range n {
				wg.Go(func() {
					_, secrets[i], errs[i] = stores[i%2].Create(ctx, Key{Name: fmt.Sprintf("k%02d", i)})
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("concurrent Create: %v", err)
			}
			list, err := stores[0].List(ctx)
			if err != nil || len(list) != n {
				t.Fatalf("List: got %d keys, %v; want %d", len(list), err, n)
			}
			for i, secret := range secrets {
				if k, err := stores[1].Lookup(ctx, secret); err != nil || k.Name != fmt.Sprintf("k%02d", i) {
					t.Errorf("Lookup of secret %d: got %q, %v", i, k.Name, err)
				}
			}
		})
	}
}

// TestSchema: the keys' schema has its own version row and reopening keeps
// the keys; the secret is stored as its SHA-256 only.
func TestSchema(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			dsn := tc.DSN(t)
			s := openStore(t, dsn)
			k, secret := mustCreate(t, s, Key{Name: "persist"})
			s2 := openStore(t, dsn)
			if got, err := s2.Lookup(ctx, secret); err != nil || !reflect.DeepEqual(got, k) {
				t.Errorf("Lookup after reopen: got %+v, %v; want %+v", got, err, k)
			}
			var version int
			if err := s.db.QueryRowContext(ctx, `SELECT version FROM streamgate_schema WHERE component = 'keys'`).Scan(&version); err != nil || version != len(migrations[s.db.Dialect]) {
				t.Errorf("schema version: got %d, %v; want %d", version, err, len(migrations[s.db.Dialect]))
			}
			var stored string
			if err := s.db.QueryRowContext(ctx, `SELECT secret_sha256 FROM api_keys WHERE id = $1`, k.ID).Scan(&stored); err != nil || stored != hash(secret) || len(stored) != 64 {
				t.Errorf("secret_sha256: got %q, %v; want the SHA-256 hex", stored, err)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := sqldbtest.Context(t)
	for _, dsn := range []string{"mysql://u:secret@h/db", "postgres://u:secret@127.0.0.1:notaport/db"} {
		s, err := Open(ctx, dsn)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q): got nil error", dsn)
		}
		if !strings.HasPrefix(err.Error(), "keys: open") || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): got %q, want a keys: open error without the password", dsn, err)
		}
	}
}

// TestWatch: a revocation or rotation made through one Store reaches a
// Watch on another (another replica) at once, without waiting for a cache
// TTL; on SQLite Watch says it cannot.
func TestWatch(t *testing.T) {
	if err := openStore(t, sqldbtest.SQLiteDSN(t)).Watch(sqldbtest.Context(t), func() {}, nil); !errors.Is(err, sqldb.ErrNoNotify) {
		t.Fatalf("Watch on SQLite: got %v, want sqldb.ErrNoNotify", err)
	}
	dsn := sqldbtest.PostgresDSN(t)
	replica, admin := openStore(t, dsn), openStore(t, dsn)
	changed := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(sqldbtest.Context(t))
	done := make(chan error, 1)
	go func() { done <- replica.Watch(ctx, func() { changed <- struct{}{} }, nil) }()
	wait := func(what string) bool {
		select {
		case <-changed:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		case <-sqldbtest.Context(t).Done():
			t.Fatalf("%s: no change seen", what)
			return false
		}
	}
	// Rotate until Watch listens (it has no "listening now" signal).
	k, _ := mustCreate(t, admin, Key{Name: "rotated"})
	for {
		if _, _, err := admin.Rotate(sqldbtest.Context(t), k.ID); err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		if wait("rotate") {
			break
		}
	}
	for len(changed) > 0 {
		<-changed
	}
	mustCreate(t, admin, Key{Name: "revoked"})
	if _, err := admin.Revoke(sqldbtest.Context(t), "revoked"); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	select {
	case <-changed:
	case <-sqldbtest.Context(t).Done():
		t.Fatal("a revocation by another store did not reach Watch")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch after its context ended: got %v, want nil", err)
	}
}
