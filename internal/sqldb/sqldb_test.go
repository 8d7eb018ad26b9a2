package sqldb

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, dsn string) *DB {
	t.Helper()
	db, err := Open(sqldbtest.Context(t), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func version(t *testing.T, db *DB, component string) int {
	t.Helper()
	var v int
	err := db.QueryRowContext(sqldbtest.Context(t), `SELECT version FROM streamgate_schema WHERE component = $1`, component).Scan(&v)
	if err != nil {
		t.Fatalf("version of %s: %v", component, err)
	}
	return v
}

var testMigrations = [][]string{
	{`CREATE TABLE t_a (id TEXT PRIMARY KEY)`},
	{`ALTER TABLE t_a ADD COLUMN n INTEGER NOT NULL DEFAULT 0`, `CREATE UNIQUE INDEX t_a_n ON t_a (n) WHERE n > 0`},
}

// TestMigrate: a fresh database gets every migration and its version; a
// second Migrate changes nothing; a later binary's extra migration runs
// alone; components keep versions of their own; a newer schema is refused.
func TestMigrate(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			db := open(t, tc.DSN(t))
			if err := db.Migrate(ctx, "a", testMigrations[:1]); err != nil {
				t.Fatalf("Migrate to 1: %v", err)
			}
			if v := version(t, db, "a"); v != 1 {
				t.Errorf("version: got %d, want 1", v)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO t_a (id) VALUES ($1)`, "x"); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second is a no-op
				if err := db.Migrate(ctx, "a", testMigrations); err != nil {
					t.Fatalf("Migrate to 2: %v", err)
				}
			}
			if v := version(t, db, "a"); v != 2 {
				t.Errorf("version: got %d, want 2", v)
			}
			var n int
			if err := db.QueryRowContext(ctx, `SELECT n FROM t_a WHERE id = 'x'`).Scan(&n); err != nil || n != 0 {
				t.Errorf("row after migration: got %d, %v; want 0, nil", n, err)
			}

			if err := db.Migrate(ctx, "b", [][]string{{`CREATE TABLE t_b (id TEXT)`}}); err != nil {
				t.Fatalf("Migrate b: %v", err)
			}
			if va, vb := version(t, db, "a"), version(t, db, "b"); va != 2 || vb != 1 {
				t.Errorf("versions a, b: got %d, %d; want 2, 1", va, vb)
			}

			err := db.Migrate(ctx, "a", testMigrations[:1])
			if err == nil || !strings.Contains(err.Error(), "a schema version 2 is newer than this binary's 1") {
				t.Errorf("Migrate of a newer schema: got %v, want an error naming versions 2 and 1", err)
			}
		})
	}
}

// TestMigrateRollback: a failing statement leaves neither the version nor
// the statements before it.
func TestMigrateRollback(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			db := open(t, tc.DSN(t))
			bad := [][]string{{`CREATE TABLE t_ok (id TEXT)`}, {`CREATE TABLE t_bad (`}}
			err := db.Migrate(ctx, "c", bad)
			if err == nil || !strings.Contains(err.Error(), "schema: c: migrate to version 2") {
				t.Fatalf("Migrate: got %v, want an error naming component c and version 2", err)
			}
			var n int
			err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM streamgate_schema WHERE component = 'c'`).Scan(&n)
			if err == nil && n != 0 {
				t.Errorf("version rows of c: got %d, want 0", n)
			}
			if _, err := db.ExecContext(ctx, `SELECT * FROM t_ok`); err == nil {
				t.Error("t_ok exists after a failed migration, want it rolled back")
			}
		})
	}
}

// TestMigrateConcurrent: processes starting together (pools of their own)
// migrate the same fresh database, several components at once: each
// succeeds, each migration runs once.
func TestMigrateConcurrent(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			dsn := tc.DSN(t)
			const n = 8
			dbs := make([]*DB, n)
			for i := range dbs {
				dbs[i] = open(t, dsn)
			}
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i, db := range dbs {
				wg.Go(func() {
					component := []string{"x", "y"}[i%2]
					errs[i] = db.Migrate(ctx, component, [][]string{{`CREATE TABLE t_` + component + ` (id TEXT)`}})
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("concurrent Migrate: %v", err)
			}
			if vx, vy := version(t, dbs[0], "x"), version(t, dbs[0], "y"); vx != 1 || vy != 1 {
				t.Errorf("versions x, y: got %d, %d; want 1, 1", vx, vy)
			}
		})
	}
}

func TestOpenSQLiteDefaults(t *testing.T) {
	ctx := sqldbtest.Context(t)
	db := open(t, "sqlite://"+filepath.Join(t.TempDir(), "d.db"))
	if db.Dialect != SQLite || !strings.HasPrefix(db.Name, `sqlite "`) {
		t.Errorf("Dialect, Name: got %q, %q; want %q, sqlite \"PATH\"", db.Dialect, db.Name, SQLite)
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "busy_timeout": "5000", "synchronous": "1"} {
		var got string
		if err := db.QueryRowContext(ctx, `PRAGMA `+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", pragma, got, err, want)
		}
	}
	if got := db.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("MaxOpenConnections: got %d, want 1", got)
	}

	// A pragma of the DSN wins over the default.
	db = open(t, "sqlite://"+filepath.Join(t.TempDir(), "e.db")+"?_pragma=synchronous(FULL)")
	var got string
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&got); err != nil || got != "2" {
		t.Errorf("synchronous with ?_pragma=synchronous(FULL): got %q, %v; want 2", got, err)
	}
}

func TestOpenPostgres(t *testing.T) {
	db := open(t, sqldbtest.PostgresDSN(t))
	if db.Dialect != Postgres || !strings.HasPrefix(db.Name, "postgres ") {
		t.Errorf("Dialect, Name: got %q, %q; want %q, postgres USER@HOST/DB", db.Dialect, db.Name, Postgres)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := sqldbtest.Context(t)
	tests := []struct {
		name, dsn string
		want      []string // substrings of the error
	}{
		{"unknown scheme", "mysql://u:secret@host/db", []string{`open database: unknown scheme "mysql"`}},
		{"no scheme", "streamgate.db", []string{"open database: no scheme"}},
		{"empty sqlite path", "sqlite://", []string{"open sqlite: empty path"}},
		{"sqlite directory missing", "sqlite://" + filepath.Join(t.TempDir(), "missing", "x.db"), []string{"open sqlite", "missing", "ping"}},
		{"bad sqlite query", "sqlite://x.db?a=%zz", []string{`open sqlite "x.db": query parameters`}},
		{"bad postgres dsn", "postgres://u:secret@127.0.0.1:notaport/db", []string{"open postgres"}},
		{"postgres unreachable", "postgres://u:secret@127.0.0.1:1/db?connect_timeout=2", []string{"open postgres u@127.0.0.1/db: ping"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(ctx, tt.dsn)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q): got nil error, want one", tt.dsn)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open(%q): got error %q, want it to contain %q", tt.dsn, err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("Open(%q): error %q reveals the password", tt.dsn, err)
			}
		})
	}
}

func TestIsUniqueViolation(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			db := open(t, tc.DSN(t))
			for _, stmt := range []string{
				`CREATE TABLE u (id TEXT PRIMARY KEY, name TEXT NOT NULL, gone INTEGER)`,
				`CREATE UNIQUE INDEX u_name ON u (name) WHERE gone IS NULL`,
				`INSERT INTO u (id, name) VALUES ('1', 'a')`,
			} {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			for _, tt := range []struct {
				stmt string
				want bool
			}{
				{`INSERT INTO u (id, name) VALUES ('2', 'a')`, true}, // partial unique index
				{`INSERT INTO u (id, name) VALUES ('1', 'b')`, true}, // primary key
				{`INSERT INTO u (id) VALUES ('3')`, false},           // NOT NULL
			} {
				_, err := db.ExecContext(ctx, tt.stmt)
				if err == nil {
					t.Fatalf("%s: got nil error, want one", tt.stmt)
				}
				if got := IsUniqueViolation(err); got != tt.want {
					t.Errorf("IsUniqueViolation(%v): got %v, want %v", err, got, tt.want)
				}
			}
			if IsUniqueViolation(errors.New("UNIQUE")) {
				t.Error("IsUniqueViolation of a plain error: got true, want false")
			}
		})
	}
}

// TestListen: a notification from one pool reaches a Listen on another;
// when the listening session is killed, Listen says so (fn("") and
// onError), connects again, and later notifications still arrive; it
// returns nil when its context ends. SQLite has no notifications.
func TestListen(t *testing.T) {
	if err := open(t, sqldbtest.SQLiteDSN(t)).Listen(sqldbtest.Context(t), "c", func(string) {}, nil); !errors.Is(err, ErrNoNotify) {
		t.Fatalf("Listen on SQLite: got %v, want ErrNoNotify", err)
	}
	dsn := sqldbtest.PostgresDSN(t)
	listener, sender := open(t, dsn), open(t, dsn)
	channel := "sg_test_" + strings.ReplaceAll(t.Name(), "/", "_") + time.Now().Format("150405.000000")
	got := make(chan string, 100)
	lost := make(chan error, 10)
	ctx, cancel := context.WithCancel(sqldbtest.Context(t))
	done := make(chan error, 1)
	go func() {
		done <- listener.Listen(ctx, channel, func(p string) { got <- p }, func(err error) { lost <- err })
	}()
	// Notify until one arrives: Listen has no "listening now" signal.
	await := func(payload string) {
		t.Helper()
		for {
			if err := sender.Notify(sqldbtest.Context(t), channel, payload); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			select {
			case p := <-got:
				if p == payload {
					return
				}
			case <-time.After(50 * time.Millisecond):
			case <-sqldbtest.Context(t).Done():
				t.Fatalf("no notification %q arrived", payload)
			}
		}
	}
	await("first")
	if _, err := sender.ExecContext(sqldbtest.Context(t), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN "' || $1 || '"'`, channel); err != nil {
		t.Fatalf("terminate the listening session: %v", err)
	}
	select {
	case err := <-lost:
		if !strings.Contains(err.Error(), channel) {
			t.Errorf("onError: got %q, want the channel named", err)
		}
	case <-sqldbtest.Context(t).Done():
		t.Fatal("onError not called after the listening session was killed")
	}
	// fn("") came before onError.
	sawEmpty := false
	for len(got) > 0 {
		if <-got == "" {
			sawEmpty = true
		}
	}
	if !sawEmpty {
		t.Error(`fn("") not called after the connection was lost`)
	}
	await("after reconnect")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Listen after its context ended: got %v, want nil", err)
	}
}
