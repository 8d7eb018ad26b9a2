package sqldb

import (
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
)

// upgradeSteps: version 2 adds a column with a default (compatible),
// version 3 drops and renames (not).
var upgradeSteps = [][]string{
	{`CREATE TABLE t_u (id TEXT PRIMARY KEY, a INTEGER NOT NULL)`},
	{`ALTER TABLE t_u ADD COLUMN b INTEGER NOT NULL DEFAULT 7`},
	{`ALTER TABLE t_u RENAME COLUMN a TO c`},
}

// The rolling-upgrade rule: the previous binary runs against a schema one
// compatible step ahead, reading and writing its own columns; a step that
// is not compatible makes every older binary refuse, naming both versions
// and the restore path; the newer binary's rows stay.
func TestRollingUpgrade(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			db := open(t, tc.DSN(t))
			old := Schema{Component: "u", Steps: upgradeSteps[:1]}
			next := Schema{Component: "u", Steps: upgradeSteps[:2], Compatible: []int{2}}
			if err := db.MigrateSchema(ctx, old); err != nil {
				t.Fatalf("old binary: %v", err)
			}
			if err := db.MigrateSchema(ctx, next); err != nil {
				t.Fatalf("next binary: %v", err)
			}
			if st, err := db.SchemaStatus(ctx, next); err != nil || st.Version != 2 || st.ReadableFrom != 1 {
				t.Fatalf("status after the upgrade: got %+v, %v; want version 2 readable from 1", st, err)
			}
			// The previous binary starts again (a replica not yet upgraded,
			// or a rollback): it runs, the schema stays at 2.
			if err := db.MigrateSchema(ctx, old); err != nil {
				t.Fatalf("old binary against the compatible schema: got %v, want it to run", err)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO t_u (id, a) VALUES ('old', 1)`); err != nil {
				t.Fatalf("old binary's insert: %v", err)
			}
			var a, b int
			if err := db.QueryRowContext(ctx, `SELECT a, b FROM t_u WHERE id = 'old'`).Scan(&a, &b); err != nil || a != 1 || b != 7 {
				t.Errorf("old binary's row: got a=%d b=%d (%v), want 1 and the default 7", a, b, err)
			}
			if st, _ := db.SchemaStatus(ctx, old); st.Version != 2 || !st.Runnable() {
				t.Errorf("old binary's status: got %+v, want version 2 and runnable", st)
			}

			last := Schema{Component: "u", Steps: upgradeSteps, Compatible: []int{2}}
			if err := db.MigrateSchema(ctx, last); err != nil {
				t.Fatalf("last binary: %v", err)
			}
			for _, s := range []Schema{old, next} {
				err := db.MigrateSchema(ctx, s)
				want := "u schema version 3 is newer than this binary's " + string(rune('0'+s.Latest())) + " and it may be run by binaries of version 3 or newer"
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "streamgate backup") {
					t.Errorf("binary of version %d against version 3: got %v, want an error containing %q and the restore path", s.Latest(), err, want)
				}
			}
		})
	}
}

// A database migrated before readable_from existed: the column is added,
// the version kept, the readable_from of the binary's schema recorded; a
// binary newer than nothing it records (unknown) is refused as before.
func TestSchemaBeforeReadableFrom(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			db := open(t, tc.DSN(t))
			for _, stmt := range []string{
				`CREATE TABLE streamgate_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)`,
				`CREATE TABLE t_u (id TEXT PRIMARY KEY, a INTEGER NOT NULL)`,
				`ALTER TABLE t_u ADD COLUMN b INTEGER NOT NULL DEFAULT 7`,
				`INSERT INTO streamgate_schema (component, version) VALUES ('u', 2)`,
			} {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			old := Schema{Component: "u", Steps: upgradeSteps[:1]}
			if st, err := db.SchemaStatus(ctx, old); err != nil || st.Version != 2 || st.ReadableFrom != 0 || st.Runnable() {
				t.Errorf("status of a legacy table: got %+v, %v; want version 2, readable_from unknown, not runnable by version 1", st, err)
			}
			err := db.MigrateSchema(ctx, old)
			if err == nil || !strings.Contains(err.Error(), "u schema version 2 is newer than this binary's 1 and it records no older version") {
				t.Errorf("old binary against a legacy newer schema: got %v, want a refusal", err)
			}
			next := Schema{Component: "u", Steps: upgradeSteps[:2], Compatible: []int{2}}
			if err := db.MigrateSchema(ctx, next); err != nil {
				t.Fatalf("binary at the schema's version: %v", err)
			}
			if st, err := db.SchemaStatus(ctx, next); err != nil || st.Version != 2 || st.ReadableFrom != 1 {
				t.Errorf("status once opened by a binary of the rule: got %+v, %v; want version 2 readable from 1", st, err)
			}
			if err := db.MigrateSchema(ctx, old); err != nil {
				t.Errorf("old binary after the readable_from was recorded: %v", err)
			}
		})
	}
}

// MigrateTo stops at the version asked, never goes down (the error names
// the restore path), and refuses a version the binary does not know.
func TestMigrateTo(t *testing.T) {
	for _, tc := range sqldbtest.Kinds {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			db := open(t, tc.DSN(t))
			s := Schema{Component: "u", Steps: upgradeSteps, Compatible: []int{2}}
			if st, err := db.SchemaStatus(ctx, s); err != nil || st.Version != 0 || st.Pending() != 3 {
				t.Errorf("status of an empty database: got %+v, %v; want version 0, 3 pending", st, err)
			}
			if err := db.MigrateTo(ctx, s, 2); err != nil {
				t.Fatalf("MigrateTo 2: %v", err)
			}
			if st, err := db.SchemaStatus(ctx, s); err != nil || st.Version != 2 || st.Pending() != 1 || st.ReadableFrom != 1 {
				t.Errorf("status after --to 2: got %+v, %v; want version 2, 1 pending, readable from 1", st, err)
			}
			err := db.MigrateTo(ctx, s, 1)
			if err == nil || !strings.Contains(err.Error(), "u is at version 2; migrating to 1 would go down") || !strings.Contains(err.Error(), "restore the backup") {
				t.Errorf("MigrateTo 1: got %v, want a refusal naming the restore path", err)
			}
			if err := db.MigrateTo(ctx, s, 4); err == nil || !strings.Contains(err.Error(), "no version 4") {
				t.Errorf("MigrateTo 4: got %v, want an error", err)
			}
			if err := db.MigrateTo(ctx, s, 3); err != nil {
				t.Fatalf("MigrateTo 3: %v", err)
			}
			if st, _ := db.SchemaStatus(ctx, s); st.Version != 3 || st.ReadableFrom != 3 {
				t.Errorf("status after --to 3: got %+v, want version 3 readable from 3", st)
			}
		})
	}
}

func TestReadableFrom(t *testing.T) {
	s := Schema{Steps: make([][]string, 7), Compatible: []int{3, 4, 5, 6, 7}}
	for v, want := range map[int]int{1: 1, 2: 2, 3: 2, 5: 2, 7: 2} {
		if got := s.ReadableFrom(v); got != want {
			t.Errorf("ReadableFrom(%d): got %d, want %d", v, got, want)
		}
	}
	if got := (Schema{Compatible: []int{1, 2}}).ReadableFrom(2); got != 1 {
		t.Errorf("ReadableFrom with step 1 compatible: got %d, want 1 (no binary has version 0)", got)
	}
}
