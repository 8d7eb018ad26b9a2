package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/respstore"
	"github.com/streamgate/streamgate/internal/sqldb"
	"github.com/streamgate/streamgate/internal/usage"
)

func init() { subcommands = append(subcommands, newBackupCmd, newMigrateCmd) }

// gatewayTables are every table the gateway keeps in its database, the
// version table first (TestGatewayTables checks the list against a
// migrated database).
var gatewayTables = []string{"streamgate_schema", "usage_entries", "api_keys", "teams", "responses", "response_items", "streamgate_dev_key"}

// schemas are the components keeping tables in the gateway's database, in
// the order the gateway opens them.
func schemas(dialect string) []sqldb.Schema {
	return []sqldb.Schema{usage.Schema(dialect), keys.Schema(dialect), respstore.Schema(dialect), devKeySchema()}
}

// withDatabase runs f on the database chosen as chooseDatabase does (never
// created), opened for a command of at most 10 minutes (backup, migrate);
// dsn is the one opened.
func withDatabase(c *cobra.Command, e *env, flagDSN, cfgPath string, f func(ctx context.Context, db *sqldb.DB, dsn string) error) error {
	db, err := chooseDatabase(e, flagDSN, cfgPath, false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context(), 10*time.Minute)
	defer cancel()
	src, err := sqldb.Open(ctx, db.dsn)
	if err != nil {
		return err
	}
	defer src.Close()
	return f(ctx, src, db.dsn)
}

func newBackupCmd(e *env) *cobra.Command {
	var cfgPath, dsn, out string
	cmd := &cobra.Command{
		Use:   "backup --out PATH",
		Short: "Copy the gateway's database while it serves (SQLite), or print the pg_dump command (PostgreSQL)",
		Long: `backup takes a consistent copy of the gateway's database while gateways keep serving.

The gateway keeps everything in the one database of its database: setting: the usage
ledger, the API keys and teams of the database, and the stored /v1/responses (tables
` + strings.Join(gatewayTables, ", ") + `).

SQLite: the copy is SQLite's VACUUM INTO, one read transaction, so it holds every
transaction committed when it began, those still in the -wal file included, and
none after; the gateway keeps writing meanwhile. PATH is one self-contained SQLite
file (no -wal beside it), written under PATH.partial and renamed when complete; an
existing PATH is refused. The copy is then checked (PRAGMA integrity_check) and its
schema versions and row counts printed.

PostgreSQL: streamgate does not run pg_dump itself; it prints the pg_dump command that
dumps the gateway's tables (schema-qualified, read from the database) to PATH, and
the pg_restore command that restores them. pg_dump reads one snapshot while the
gateways serve.

Restore (SQLite): stop every gateway using the file, move the file and its -wal and
-shm aside, copy the backup to the file's path, start. Restore (PostgreSQL): into an
empty database, pg_restore --dbname=URL PATH, then point database: at it.

The database is the first of: --database, STREAMGATE_DATABASE, the database: of
--config FILE, that of ./streamgate.yaml when the working directory has one,
sqlite://streamgate.db; it is named on stderr.`,
		Example: `  streamgate backup --config streamgate.yaml --out /backups/streamgate-$(date +%F).db
  streamgate backup --database postgres://gw@db/streamgate --out streamgate.dump`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: required (the file to write)")
			}
			return withDatabase(c, e, dsn, cfgPath, func(ctx context.Context, src *sqldb.DB, dsn string) error {
				if src.Dialect == sqldb.Postgres {
					return printPgDump(ctx, e, src, dsn, out)
				}
				return backupSQLite(ctx, e, src, out)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "the backup file to write (SQLite: a SQLite file; PostgreSQL: pg_dump's --file); required, never overwritten")
	f.StringVar(&cfgPath, "config", "", "gateway config file whose database: to back up (default: ./streamgate.yaml if present, else sqlite://streamgate.db)")
	f.StringVar(&dsn, "database", "", "the database instead of the config's (sqlite://PATH or postgres://...; env STREAMGATE_DATABASE)")
	return cmd
}

// backupSQLite copies src into out with VACUUM INTO, checks the copy and
// prints what it holds.
func backupSQLite(ctx context.Context, e *env, src *sqldb.DB, out string) error {
	if strings.Contains(src.Name, ":memory:") {
		return errors.New("backup: an in-memory database has nothing to copy")
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("backup: %s exists: choose another --out (a backup never overwrites)", out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	partial := out + ".partial"
	os.Remove(partial) // a leftover of an interrupted backup
	start := time.Now()
	if _, err := src.ExecContext(ctx, `VACUUM INTO $1`, partial); err != nil {
		os.Remove(partial)
		return fmt.Errorf("backup: copy %s into %s: %w", src.Name, partial, err)
	}
	took := time.Since(start)
	counts, err := checkCopy(ctx, partial)
	if err != nil {
		os.Remove(partial)
		return fmt.Errorf("backup: the copy %s: %w", partial, err)
	}
	if err := os.Rename(partial, out); err != nil {
		os.Remove(partial)
		return fmt.Errorf("backup: %w", err)
	}
	size := int64(0)
	if fi, err := os.Stat(out); err == nil {
		size = fi.Size()
	}
	abs, _ := filepath.Abs(out)
	fmt.Fprintf(e.stdout, "streamgate: backup: %s (%.1f MiB, integrity ok, %v)\n", abs, float64(size)/(1<<20), took.Round(time.Millisecond))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	for _, c := range counts {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.what)
	}
	tw.Flush()
	live := strings.Trim(strings.TrimPrefix(src.Name, "sqlite "), `"`)
	if a, err := filepath.Abs(live); err == nil {
		live = a
	}
	fmt.Fprintf(e.stdout, "restore: stop the gateways using %s, move it and its -wal and -shm aside, copy %s in its place, start\n", live, abs)
	return nil
}

type tableCount struct{ name, what string }

// checkCopy opens the SQLite file at path read-only, runs its integrity
// check and returns its schema versions and row counts.
func checkCopy(ctx context.Context, path string) ([]tableCount, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var verdict string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&verdict); err != nil {
		return nil, fmt.Errorf("integrity check: %w", err)
	}
	if verdict != "ok" {
		return nil, fmt.Errorf("integrity check: %s", verdict)
	}
	var out []tableCount
	rows, err := db.QueryContext(ctx, `SELECT component, version FROM streamgate_schema ORDER BY component`)
	if err == nil {
		var parts []string
		for rows.Next() {
			var c string
			var v int
			if rows.Scan(&c, &v) == nil {
				parts = append(parts, fmt.Sprintf("%s %d", c, v))
			}
		}
		rows.Close()
		out = append(out, tableCount{"schema", strings.Join(parts, ", ")})
	}
	for _, t := range gatewayTables[1:] {
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&n); err != nil {
			continue // a table the database does not have (yet)
		}
		out = append(out, tableCount{t, fmt.Sprintf("%d rows", n)})
	}
	return out, nil
}

// printPgDump prints the pg_dump command of the gateway's tables in src
// and the pg_restore command.
func printPgDump(ctx context.Context, e *env, src *sqldb.DB, dsn, out string) error {
	var schema string
	if err := src.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("backup: read the current schema of %s: %w", src.Name, err)
	}
	var args []string
	for _, t := range gatewayTables {
		var n int
		if err := src.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2`, schema, t).Scan(&n); err != nil {
			return fmt.Errorf("backup: read the tables of %s: %w", src.Name, err)
		}
		if n > 0 {
			args = append(args, "--table="+shellQuote(schema+"."+t))
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("backup: %s has no streamgate table in schema %s", src.Name, schema)
	}
	url := libpqURL(dsn) // without the password: pg_dump reads PGPASSWORD or ~/.pgpass
	create := ""
	if schema != "public" {
		create = fmt.Sprintf("  psql --dbname=%s --command='CREATE SCHEMA %s'\n", shellQuote("postgres://USER@HOST/NEWDB"), schema)
	}
	fmt.Fprintf(e.stdout, `streamgate: backup: the database is PostgreSQL: run pg_dump (one consistent snapshot while the gateways serve; the password from PGPASSWORD or ~/.pgpass):

  pg_dump --format=custom --file=%s %s %s

restore into an empty database, then point database: at it:

%s  pg_restore --no-owner --dbname=%s %s
`, shellQuote(out), strings.Join(args, " "), shellQuote(url), create, shellQuote("postgres://USER@HOST/NEWDB"), shellQuote(out))
	return nil
}

// libpqParams are the URL parameters pg_dump's libpq understands; pgx
// accepts more (search_path, pool settings), which libpq refuses. The
// tables pg_dump is given are schema-qualified, so search_path is not
// needed.
var libpqParams = map[string]bool{
	"sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true, "sslpassword": true,
	"connect_timeout": true, "application_name": true, "options": true, "target_session_attrs": true,
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "service": true,
	"channel_binding": true, "gssencmode": true, "krbsrvname": true, "sslsni": true,
}

// libpqURL is dsn without its password and the parameters libpq refuses.
func libpqURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		name, _, _ := describeDSN(dsn)
		return name
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		if !libpqParams[k] {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newMigrateCmd(e *env) *cobra.Command {
	var cfgPath, dsn, component string
	var dryRun bool
	var to int
	cmd := &cobra.Command{
		Use:   "migrate [--dry-run] [--component NAME --to N]",
		Short: "Show or apply the database's pending schema steps",
		Long: `migrate shows and applies the schema steps this binary has and the database lacks.
serve applies them all at start; migrate lets an operator see them first and take them
one at a time.

The database keeps a version per component (usage: the ledger; keys: API keys and
teams; responses: stored /v1/responses; dev_key: the embedded default's development key). --dry-run prints, per component, the
database's version, this binary's, and each pending step's statements, and changes
nothing. Without --dry-run every pending step is applied, each component in one
transaction; with --component NAME --to N only that component's steps up to version N.
No step ever goes down: --to below the database's version is refused, naming the way
back (restore the backup taken before the upgrade: streamgate backup).

Rolling upgrades: a binary may run against a database newer than itself when every
step between them is marked compatible (additive: new tables, new columns that are
NULL or have a default, new indexes). The database records, per component, the
oldest version that may still run against it (readable from); a binary older than
that refuses to start, naming both versions. --dry-run shows it.

The database is the first of: --database, STREAMGATE_DATABASE, the database: of
--config FILE, that of ./streamgate.yaml when the working directory has one,
sqlite://streamgate.db; it is named on stderr, and must exist.`,
		Example: `  streamgate migrate --config streamgate.yaml --dry-run
  streamgate migrate --config streamgate.yaml --component usage --to 7
  streamgate migrate --config streamgate.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			toSet := c.Flags().Changed("to")
			if toSet != (component != "") {
				return usagef("--to and --component go together (a version is a component's: usage, keys, responses or dev_key)")
			}
			return withDatabase(c, e, dsn, cfgPath, func(ctx context.Context, src *sqldb.DB, _ string) error {
				all := schemas(src.Dialect)
				if component != "" {
					var found []sqldb.Schema
					var names []string
					for _, s := range all {
						names = append(names, s.Component)
						if s.Component == component {
							found = append(found, s)
						}
					}
					if len(found) == 0 {
						return usagef("--component %q: unknown (want %s)", component, strings.Join(names, ", "))
					}
					all = found
				}
				return migrate(ctx, e, src, all, dryRun, toSet, to)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "show the versions and the pending steps; change nothing")
	f.StringVar(&component, "component", "", "the component whose schema --to moves: usage, keys, responses or dev_key")
	f.IntVar(&to, "to", 0, "apply --component's steps up to this version, not beyond (never down)")
	f.StringVar(&cfgPath, "config", "", "gateway config file whose database: to migrate (default: ./streamgate.yaml if present, else sqlite://streamgate.db)")
	f.StringVar(&dsn, "database", "", "the database instead of the config's (sqlite://PATH or postgres://...; env STREAMGATE_DATABASE)")
	return cmd
}

// migrate prints each schema's status and pending steps, and applies them
// unless dryRun (up to to when toSet).
func migrate(ctx context.Context, e *env, db *sqldb.DB, all []sqldb.Schema, dryRun, toSet bool, to int) error {
	var errs []error
	for _, s := range all {
		st, err := db.SchemaStatus(ctx, s)
		if err != nil {
			return err
		}
		target := s.Latest()
		if toSet {
			target = to
		}
		fmt.Fprintf(e.stdout, "%s: database version %d, this binary's %d%s\n", s.Component, st.Version, st.Latest, readable(st))
		switch {
		case toSet && (to < 0 || to > s.Latest()):
			errs = append(errs, usagef("--to %d: %s has versions 0 to %d in this binary", to, s.Component, s.Latest()))
			continue
		case toSet && to < st.Version:
			errs = append(errs, fmt.Errorf("%s is at version %d; --to %d would go down, which migrate never does: %s", s.Component, st.Version, to, sqldb.RestoreHint))
			continue
		case st.Version > st.Latest:
			if !st.Runnable() {
				errs = append(errs, fmt.Errorf("%s: this binary may not run against it: upgrade streamgate, or %s", s.Component, sqldb.RestoreHint))
			} else {
				fmt.Fprintf(e.stdout, "  newer than this binary, which may run against it (compatible steps); nothing to apply\n")
			}
			continue
		case target == st.Version:
			fmt.Fprintf(e.stdout, "  up to date\n")
			continue
		}
		for v := st.Version + 1; v <= target; v++ {
			fmt.Fprintf(e.stdout, "  step %d (%s):\n", v, compatibility(s, v))
			for _, stmt := range s.Steps[v-1] {
				fmt.Fprintf(e.stdout, "    %s\n", summarize(stmt))
			}
		}
		if dryRun {
			fmt.Fprintf(e.stdout, "  %d step(s) pending (--dry-run: nothing applied)\n", target-st.Version)
			continue
		}
		if err := db.MigrateTo(ctx, s, target); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "  applied: %s is at version %d, binaries of version %d or newer may run against it\n", s.Component, target, s.ReadableFrom(target))
	}
	return errors.Join(errs...)
}

func readable(st sqldb.Status) string {
	if st.ReadableFrom == 0 || st.Version == 0 {
		return ""
	}
	return fmt.Sprintf(" (binaries of version %d or newer may run against it)", st.ReadableFrom)
}

func compatibility(s sqldb.Schema, v int) string {
	if v > 1 && s.ReadableFrom(v) < v {
		return fmt.Sprintf("compatible: a binary of version %d runs against it", v-1)
	}
	return "not compatible: older binaries refuse the database after it"
}

// summarize is a statement on one line, long ones cut.
func summarize(stmt string) string {
	s := strings.Join(strings.Fields(stmt), " ")
	if len(s) > 110 {
		s = s[:107] + "..."
	}
	return s
}
