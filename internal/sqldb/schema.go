package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Schema is one component's versioned schema in one dialect.
//
// The rolling-upgrade rule: a binary whose schema for a component is at
// version L may run against a database at version V > L when the database
// says it is readable from version L or older. Migrating to V records
// readable_from = the smallest R such that every step R+1..V is in
// Compatible (a step the binary of the version before it runs against
// unchanged: a new table, a new column that is NULL or has a DEFAULT, a new
// non-unique index; never a dropped, renamed or retyped column). A step not
// in Compatible makes readable_from = its version: every older binary
// refuses. A database migrated by a release before this rule has
// readable_from 0 (unknown) and is refused by every older binary.
type Schema struct {
	Component string
	// Steps[i] holds the statements from version i to i+1.
	Steps [][]string
	// Compatible lists the versions (1-based: version v is Steps[v-1])
	// whose step the previous version's binary runs against unchanged.
	Compatible []int
}

// Latest is the version of the last step.
func (s Schema) Latest() int { return len(s.Steps) }

// ReadableFrom is the oldest binary version that may run against a database
// at version v of s (v itself when step v is not compatible).
func (s Schema) ReadableFrom(v int) int {
	r := v
	for r > 1 && slices.Contains(s.Compatible, r) {
		r--
	}
	return r
}

// Status is where a component's schema stands in a database.
type Status struct {
	Component string
	// Version is the database's version; 0 when the component has none yet.
	Version int
	// Latest is this binary's version.
	Latest int
	// ReadableFrom is the oldest binary version the database says may run
	// against it; 0 when unknown (a database migrated before the rule).
	ReadableFrom int
}

// Pending is how many steps this binary would apply.
func (st Status) Pending() int { return max(st.Latest-st.Version, 0) }

// Runnable reports whether this binary may run against the database: its
// version is at most Latest, or newer and readable from Latest.
func (st Status) Runnable() bool {
	return st.Version <= st.Latest || (st.ReadableFrom > 0 && st.ReadableFrom <= st.Latest)
}

// RestoreHint is what an error of a schema too new for the binary, or of a
// step down, says to do.
const RestoreHint = `to go back, restore the backup taken before the upgrade (streamgate backup; README "Upgrade, back up and roll back")`

// tooNew is the error of a database st this binary may not run against.
func (st Status) tooNew() error {
	why := "it records no older version that may run against it"
	if st.ReadableFrom > 0 {
		why = fmt.Sprintf("it may be run by binaries of version %d or newer", st.ReadableFrom)
	}
	return fmt.Errorf("schema: %s schema version %d is newer than this binary's %d and %s: upgrade streamgate, or %s",
		st.Component, st.Version, st.Latest, why, RestoreHint)
}

// prepare takes the migration lock (PostgreSQL), creates streamgate_schema
// or adds its readable_from column, and reads s's row.
func (db *DB) prepare(ctx context.Context, tx *sql.Tx, s Schema) (Status, error) {
	st := Status{Component: s.Component, Latest: s.Latest()}
	if db.Dialect == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(`+strconv.Itoa(migrationLock)+`)`); err != nil {
			return st, fmt.Errorf("schema: %s: lock: %w", s.Component, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS streamgate_schema (
		component     TEXT PRIMARY KEY,
		version       INTEGER NOT NULL,
		readable_from INTEGER NOT NULL DEFAULT 0
	)`); err != nil {
		return st, fmt.Errorf("schema: %s: create streamgate_schema: %w", s.Component, err)
	}
	// A table created by a release before readable_from: the column is
	// added (a release before ignores it; its INSERTs get the default).
	var has int
	if err := tx.QueryRowContext(ctx, db.columnExists(), "streamgate_schema", "readable_from").Scan(&has); err != nil {
		return st, fmt.Errorf("schema: %s: read streamgate_schema's columns: %w", s.Component, err)
	}
	if has == 0 {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE streamgate_schema ADD COLUMN readable_from INTEGER NOT NULL DEFAULT 0`); err != nil {
			return st, fmt.Errorf("schema: %s: add streamgate_schema.readable_from: %w", s.Component, err)
		}
	}
	err := tx.QueryRowContext(ctx, `SELECT version, readable_from FROM streamgate_schema WHERE component = $1`, s.Component).Scan(&st.Version, &st.ReadableFrom)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return st, fmt.Errorf("schema: %s: read version: %w", s.Component, err)
	}
	return st, nil
}

// columnExists is a query of one row counting the columns named $2 of
// table $1 (in the search path's first schema on PostgreSQL).
func (db *DB) columnExists() string {
	if db.Dialect == Postgres {
		return `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	}
	return `SELECT COUNT(*) FROM pragma_table_info($1) WHERE name = $2`
}

// SchemaStatus reads where s stands in the database without changing it
// (a database without streamgate_schema is at version 0 everywhere).
func (db *DB) SchemaStatus(ctx context.Context, s Schema) (Status, error) {
	st := Status{Component: s.Component, Latest: s.Latest()}
	var has int
	if err := db.QueryRowContext(ctx, db.columnExists(), "streamgate_schema", "version").Scan(&has); err != nil {
		return st, fmt.Errorf("schema: %s: read streamgate_schema: %w", s.Component, err)
	}
	if has == 0 {
		return st, nil
	}
	q := `SELECT version, 0 FROM streamgate_schema WHERE component = $1`
	if err := db.QueryRowContext(ctx, db.columnExists(), "streamgate_schema", "readable_from").Scan(&has); err != nil {
		return st, fmt.Errorf("schema: %s: read streamgate_schema: %w", s.Component, err)
	} else if has > 0 {
		q = `SELECT version, readable_from FROM streamgate_schema WHERE component = $1`
	}
	err := db.QueryRowContext(ctx, q, s.Component).Scan(&st.Version, &st.ReadableFrom)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("schema: %s: read version: %w", s.Component, err)
	}
	return st, nil
}

// MigrateSchema brings s to its latest version (MigrateTo s.Latest()).
func (db *DB) MigrateSchema(ctx context.Context, s Schema) error {
	return db.MigrateTo(ctx, s, s.Latest())
}

// MigrateTo brings s to version to in one transaction, recording the
// version and readable_from. A database already at to is left as it is
// (its readable_from filled in when a release before the rule left it
// unknown). A database newer than this binary runs unchanged when it is
// readable from this binary's version (see Schema), and is an error naming
// both versions and the restore path otherwise. A to below the database's
// version is an error: no step goes down. A to above s.Latest() is an
// error. A failing statement rolls everything back. On PostgreSQL a
// transaction-scoped advisory lock, shared by all components, serialises
// concurrent migrations; on SQLite the transaction's BEGIN IMMEDIATE does.
// Errors start with "schema:" and name the component.
func (db *DB) MigrateTo(ctx context.Context, s Schema, to int) error {
	if to < 0 || to > s.Latest() {
		return fmt.Errorf("schema: %s: no version %d (this binary knows 0 to %d)", s.Component, to, s.Latest())
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("schema: %s: begin: %w", s.Component, err)
	}
	defer tx.Rollback()
	st, err := db.prepare(ctx, tx, s)
	if err != nil {
		return err
	}
	switch {
	case st.Version > st.Latest:
		if !st.Runnable() {
			return st.tooNew()
		}
		return tx.Commit() // runs against a newer, compatible schema; the column may be new
	case to < st.Version:
		return fmt.Errorf("schema: %s is at version %d; migrating to %d would go down, which streamgate never does: %s",
			s.Component, st.Version, to, RestoreHint)
	case to == st.Version:
		if st.Version > 0 && st.ReadableFrom != s.ReadableFrom(to) {
			if _, err := tx.ExecContext(ctx, `UPDATE streamgate_schema SET readable_from = $2 WHERE component = $1`, s.Component, s.ReadableFrom(to)); err != nil {
				return fmt.Errorf("schema: %s: record readable_from: %w", s.Component, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("schema: %s: commit: %w", s.Component, err)
		}
		return nil
	}
	for v := st.Version; v < to; v++ {
		for _, stmt := range s.Steps[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("schema: %s: migrate to version %d: %w", s.Component, v+1, err)
			}
		}
	}
	if st.Version == 0 {
		_, err = tx.ExecContext(ctx, `INSERT INTO streamgate_schema (component, version, readable_from) VALUES ($1, $2, $3)`, s.Component, to, s.ReadableFrom(to))
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE streamgate_schema SET version = $2, readable_from = $3 WHERE component = $1`, s.Component, to, s.ReadableFrom(to))
	}
	if err != nil {
		return fmt.Errorf("schema: %s: record version %d: %w", s.Component, to, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("schema: %s: commit: %w", s.Component, err)
	}
	return nil
}
