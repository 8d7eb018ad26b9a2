// Package sqldbtest gives tests a database of their own: a fresh PostgreSQL
// schema on the server STREAMGATE_TEST_POSTGRES names (the test skips, and
// says so, when it is unset), dropped when the test ends.
package sqldbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDSN returns the DSN of STREAMGATE_TEST_POSTGRES with a fresh
// schema as its search_path, so that tests running in parallel never share
// a table; the schema is dropped when the test ends. It skips the test when
// the variable is unset.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("STREAMGATE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("STREAMGATE_TEST_POSTGRES not set: skipping PostgreSQL test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b [6]byte
	rand.Read(b[:])
	schema := "sg_test_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to STREAMGATE_TEST_POSTGRES: %v", err)
	}
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	admin.Close(ctx)
	if err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}

// SQLiteDSN returns the DSN of a fresh SQLite file in the test's temporary
// directory.
func SQLiteDSN(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "test.db")
}

// Kinds are the databases a store test runs over, each giving the DSN of a
// fresh, empty database: SQLite always, PostgreSQL when
// STREAMGATE_TEST_POSTGRES is set (else that case skips, saying so).
var Kinds = []struct {
	Name string
	DSN  func(t testing.TB) string
}{
	{"sqlite", SQLiteDSN},
	{"postgres", PostgresDSN},
}

// Context returns a context that ends after 20 s or with the test, for
// store calls that must not hang a test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
