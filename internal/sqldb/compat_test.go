package sqldb_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/respstore"
	"github.com/streamgate/streamgate/internal/sqldb"
	"github.com/streamgate/streamgate/internal/usage"
)

// additive matches the statements a compatible step may hold: a new table,
// a new non-unique index, new columns that are NULL or have a DEFAULT.
var (
	createTable = regexp.MustCompile(`^CREATE TABLE (IF NOT EXISTS )?\w+ \(`)
	createIndex = regexp.MustCompile(`^CREATE INDEX (IF NOT EXISTS )?\w+ ON \w+ \([\w, ]+\)$`)
	addColumn   = regexp.MustCompile(`^ADD COLUMN \w+ [A-Z ]+?( NOT NULL DEFAULT \S+)?$`)
)

// Every step a component marks compatible (the previous binary runs
// against it, README "Upgrade, back up and roll back") is additive.
func TestCompatibleStepsAreAdditive(t *testing.T) {
	for _, dialect := range []string{sqldb.SQLite, sqldb.Postgres} {
		for _, s := range []sqldb.Schema{usage.Schema(dialect), keys.Schema(dialect), respstore.Schema(dialect)} {
			if len(s.Steps) == 0 {
				t.Errorf("%s %s: no steps", dialect, s.Component)
			}
			for v := 1; v <= s.Latest(); v++ {
				if !slices.Contains(s.Compatible, v) {
					continue
				}
				for _, stmt := range s.Steps[v-1] {
					stmt = strings.Join(strings.Fields(stmt), " ")
					if !additive(stmt) {
						t.Errorf("%s %s version %d is marked compatible but %q is not additive", dialect, s.Component, v, stmt)
					}
				}
			}
		}
	}
}

func additive(stmt string) bool {
	switch {
	case createTable.MatchString(stmt), createIndex.MatchString(stmt):
		return true
	case strings.HasPrefix(stmt, "ALTER TABLE "):
		_, cols, ok := strings.Cut(strings.TrimPrefix(stmt, "ALTER TABLE "), " ")
		if !ok {
			return false
		}
		for _, c := range strings.Split(cols, ", ") {
			if !addColumn.MatchString(c) || (strings.Contains(c, "NOT NULL") && !strings.Contains(c, "DEFAULT")) {
				return false
			}
		}
		return true
	}
	return false
}

func TestAdditive(t *testing.T) {
	for stmt, want := range map[string]bool{
		`ALTER TABLE t ADD COLUMN a INTEGER NOT NULL DEFAULT 0`:                   true,
		`ALTER TABLE t ADD COLUMN a TEXT, ADD COLUMN b BIGINT NOT NULL DEFAULT 0`: true,
		`ALTER TABLE t ADD COLUMN a INTEGER NOT NULL`:                             false,
		`ALTER TABLE t DROP COLUMN a`:                                             false,
		`ALTER TABLE t RENAME TO u`:                                               false,
		`ALTER TABLE t ALTER COLUMN a DROP NOT NULL`:                              false,
		`CREATE INDEX IF NOT EXISTS i ON t (a, b)`:                                true,
		`CREATE UNIQUE INDEX i ON t (a)`:                                          false,
		`DROP TABLE t`:                                                            false,
		`UPDATE t SET a = NULL`:                                                   false,
		`CREATE TABLE x (id TEXT PRIMARY KEY)`:                                    true,
	} {
		if got := additive(stmt); got != want {
			t.Errorf("additive(%q): got %v, want %v", stmt, got, want)
		}
	}
}
