package usage

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestMigrateTTFTNullable: a version-1 ledger (ttft_ns NOT NULL, 0 for a
// non-stream) opened by this version becomes version 2: the zero TTFTs are
// NULL (no first token), the others kept, every row and index still there,
// and a new non-stream entry is stored with a NULL TTFT.
func TestMigrateTTFTNullable(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    *dialect
		dsn  func(t *testing.T) (dsn string, db *sql.DB)
	}{
		{"sqlite", sqliteDialect, func(t *testing.T) (string, *sql.DB) {
			path := filepath.Join(t.TempDir(), "v1.db")
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			return "sqlite://" + path, db
		}},
		{"postgres", postgresDialect, func(t *testing.T) (string, *sql.DB) {
			dsn := testPostgresDSN(t)
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			return dsn, stdlib.OpenDB(*cfg)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			dsn, db := tt.dsn(t)
			defer db.Close()
			// The version-1 schema and two rows, as a version-1 binary left them.
			v1 := append([]string{`CREATE TABLE streamgate_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)`,
				`INSERT INTO streamgate_schema (component, version) VALUES ('usage', 1)`}, tt.d.migrations[0]...)
			for _, stmt := range v1 {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("v1 schema: %s: %v", stmt, err)
				}
			}
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			for _, e := range []Entry{
				{ID: "non-stream", Time: at, Status: 200, Outcome: OutcomeOK},
				{ID: "stream", Time: at, Stream: true, Status: 200, Outcome: OutcomeOK, TTFT: 5 * time.Millisecond},
			} {
				args := []any{e.ID, "", tt.d.timeArg(e.Time), "", "", "", 0, e.Stream, e.Status, e.Outcome, 0, 0, "", 0.0, int64(e.TTFT), 0, ""}
				if _, err := db.ExecContext(ctx, tt.d.insertSQL(1), args...); err != nil {
					t.Fatalf("v1 row: %v", err)
				}
			}

			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("Open of a version-1 ledger: %v", err)
			}
			defer s.Close()
			if err := s.Insert(ctx, []Entry{{ID: "new-non-stream", Time: at, Status: 200, Outcome: OutcomeOK}}); err != nil {
				t.Fatal(err)
			}
			var version, nulls, rows int
			if err := db.QueryRowContext(ctx, `SELECT version FROM streamgate_schema WHERE component = 'usage'`).Scan(&version); err != nil || version != 2 {
				t.Errorf("version: got %d, %v; want 2", version, err)
			}
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) - COUNT(ttft_ns) FROM usage_entries`).Scan(&rows, &nulls); err != nil || rows != 3 || nulls != 2 {
				t.Errorf("rows, NULL TTFTs: got %d, %d, %v; want 3, 2", rows, nulls, err)
			}
			got, err := s.List(ctx, Filter{})
			if err != nil {
				t.Fatal(err)
			}
			ttft := map[string]time.Duration{}
			for _, e := range got {
				ttft[e.ID] = e.TTFT
			}
			if ttft["stream"] != 5*time.Millisecond || ttft["non-stream"] != 0 || ttft["new-non-stream"] != 0 || len(ttft) != 3 {
				t.Errorf("TTFTs after migration: got %v", ttft)
			}
			if n, err := s.Count(ctx, Filter{KeyID: ""}); err != nil || n != 3 {
				t.Errorf("Count: got %d, %v; want 3", n, err)
			}
		})
	}
}
