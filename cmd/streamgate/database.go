package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/streamgate/streamgate/internal/config"
)

// workingConfig is the config file the database commands read from the
// working directory when neither --database, STREAMGATE_DATABASE nor
// --config says otherwise.
const workingConfig = "streamgate.yaml"

// database is the database a CLI command uses, and where that choice came
// from, for the line that names it.
type database struct {
	dsn  string
	from string // "--database", "STREAMGATE_DATABASE", "--config FILE", "./streamgate.yaml", "the default"
}

// chooseDatabase picks the database of `keys` and `usage`, the first of:
// --database (flagDSN); STREAMGATE_DATABASE; the database: of --config
// (cfgPath); that of ./streamgate.yaml when the working directory has one;
// the default sqlite://streamgate.db. It names the choice on stderr in one
// line ("streamgate: database: /abs/streamgate.db (sqlite; from the
// default)", a PostgreSQL URL without its password). A SQLite file that does
// not exist is an error naming its path and how to choose another, unless
// create (a command that writes, such as `keys create`): a command that
// reads must not leave an empty database behind.
func chooseDatabase(e *env, flagDSN, cfgPath string, create bool) (database, error) {
	db := database{dsn: flagDSN, from: "--database"}
	if db.dsn == "" {
		db = database{dsn: e.getenv(config.EnvDatabase), from: config.EnvDatabase}
	}
	if db.dsn == "" {
		path, from := cfgPath, "--config "+cfgPath
		if path == "" {
			if _, err := os.Stat(workingConfig); err == nil {
				path, from = workingConfig, "./"+workingConfig
			}
		}
		if path != "" {
			cfg, err := config.LoadWithoutSecrets(path, e.getenv)
			if err != nil {
				return database{}, configError{err}
			}
			if cfg.Database == "" {
				return database{}, fmt.Errorf("%s sets no database: (pass --database DSN or set %s)", path, config.EnvDatabase)
			}
			db = database{dsn: cfg.Database, from: from}
		} else {
			db = database{dsn: config.DefaultDatabase, from: "the default"}
		}
	}
	name, kind, file := describeDSN(db.dsn)
	note := ""
	if file != "" {
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			if !create {
				return database{}, fmt.Errorf("no database at %s (%s, from %s): run where the gateway keeps it, or choose it with --database DSN, --config FILE, %s or a %s in the working directory",
					name, db.dsn, db.from, config.EnvDatabase, workingConfig)
			}
			note = ", a new file"
		}
	}
	fmt.Fprintf(e.stderr, "streamgate: database: %s (%s%s; from %s)\n", name, kind, note, db.from)
	return db, nil
}

// describeDSN returns how a DSN is named to people (a SQLite file's
// absolute path, a PostgreSQL URL without its password), its kind, and the
// SQLite file whose existence matters ("" for PostgreSQL, :memory: or a DSN
// that is not understood: opening it will say what is wrong).
func describeDSN(dsn string) (name, kind, file string) {
	scheme, rest, ok := strings.Cut(dsn, "://")
	switch {
	case ok && strings.EqualFold(scheme, "sqlite"):
		path, _, _ := strings.Cut(rest, "?")
		path = strings.TrimPrefix(path, "file:")
		if path == "" || path == ":memory:" {
			return dsn, "sqlite", ""
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return path, "sqlite", path
	case ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")):
		u, err := url.Parse(dsn)
		if err != nil {
			return "(a postgres URL that does not parse, not shown)", "postgresql", ""
		}
		return u.Redacted(), "postgresql", ""
	}
	return "(not shown)", "unknown scheme", ""
}
