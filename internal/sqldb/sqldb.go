// Package sqldb opens streamgate's database, SQLite or PostgreSQL, from one
// DSN and migrates the versioned schema of each component that keeps tables
// in it (the usage ledger, the API keys). Components share the database and
// its version table, streamgate_schema, but never each other's tables.
package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The dialects of DB.Dialect.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// migrationLock is an arbitrary constant shared by every streamgate process:
// on PostgreSQL it serialises schema migrations across processes and
// components (transaction-scoped), so that two processes starting together do
// not race on CREATE TABLE. Its value is the one the ledger used alone before.
const migrationLock = 7355608001

// DB is an open database. Both drivers accept $N placeholders, so statement
// texts can be shared between dialects unless a type differs.
type DB struct {
	*sql.DB
	// Dialect is SQLite or Postgres.
	Dialect string
	// Name names the database in messages without its password:
	// sqlite "PATH" or postgres USER@HOST/DATABASE.
	Name string
}

// Open opens the database named by dsn and pings it:
//
//   - sqlite://PATH, e.g. sqlite://streamgate.db (relative) or
//     sqlite:///var/lib/streamgate/ledger.db (absolute); sqlite://:memory: is a
//     private in-memory database. The file is created if missing (its directory
//     is not), opened in WAL mode with a 5 s busy timeout, synchronous NORMAL,
//     transactions that take the write lock at BEGIN, and one connection.
//     Query parameters are passed to modernc.org/sqlite (e.g.
//     ?_pragma=synchronous(FULL)) and win over these defaults.
//   - postgres://... or postgresql://..., any connection string pgx accepts
//     (e.g. ?sslmode=disable&search_path=ledger); a pool of 4 connections.
//
// Any other scheme is an error naming it. Errors never contain the password of
// the DSN; they start with "open database", "open sqlite" or "open postgres"
// and carry no package prefix, for the caller to add its own. Each Open
// gives its own pool: opening one SQLite file twice is fine in WAL mode, a
// writer waits up to the busy timeout for the other. Open connects within ctx,
// which should carry a deadline: an unreachable PostgreSQL host otherwise
// waits for the TCP timeout.
func Open(ctx context.Context, dsn string) (*DB, error) {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return nil, errors.New("open database: no scheme in DSN (want sqlite://PATH or postgres://...)")
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		return openSQLite(ctx, rest)
	case "postgres", "postgresql":
		return openPostgres(ctx, dsn)
	default:
		return nil, fmt.Errorf("open database: unknown scheme %q (want sqlite or postgres)", scheme)
	}
}

func openSQLite(ctx context.Context, rest string) (*DB, error) {
	path, rawQuery, _ := strings.Cut(rest, "?")
	if path == "" {
		return nil, errors.New("open sqlite: empty path in DSN (want sqlite://PATH)")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %q: query parameters: %w", path, err)
	}
	// Defaults, each unless the DSN sets that pragma itself: modernc runs
	// _pragma values sorted, so a duplicate would not simply override.
	defaults := []struct{ name, value string }{
		{"busy_timeout", "busy_timeout(5000)"},
		{"journal_mode", "journal_mode(WAL)"},
		// NORMAL is durable across process crashes in WAL mode; only an OS
		// crash can lose the last transactions.
		{"synchronous", "synchronous(NORMAL)"},
	}
	for _, def := range defaults {
		set := false
		for _, p := range q["_pragma"] {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), def.name) {
				set = true
			}
		}
		if !set {
			q.Add("_pragma", def.value)
		}
	}
	if q.Get("_txlock") == "" {
		// Take the write lock at BEGIN: a deferred transaction that upgrades
		// later can fail with SQLITE_BUSY without waiting for busy_timeout.
		q.Set("_txlock", "immediate")
	}
	name := "sqlite " + strconv.Quote(path)
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	// One connection: SQLite has one writer anyway, and :memory: is private to
	// its connection.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: ping: %w", name, err)
	}
	return &DB{DB: db, Dialect: SQLite, Name: name}, nil
}

func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn) // its errors redact the password
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	name := fmt.Sprintf("postgres %s@%s/%s", cfg.User, cfg.Host, cfg.Database)
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: ping: %w", name, err)
	}
	return &DB{DB: db, Dialect: Postgres, Name: name}, nil
}

// Migrate brings the schema of component to version len(migrations):
// MigrateSchema of a Schema with no step marked compatible, so that every
// binary older than the database refuses it. Components that state which
// steps are compatible call MigrateSchema.
func (db *DB) Migrate(ctx context.Context, component string, migrations [][]string) error {
	return db.MigrateSchema(ctx, Schema{Component: component, Steps: migrations})
}

// IsUniqueViolation reports whether err is a UNIQUE constraint (or unique
// index) violation of either driver. Which constraint is for the caller to
// find out: SQLite names columns, PostgreSQL the constraint.
func IsUniqueViolation(err error) bool {
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		// modernc turns extended result codes on; the primary code is a
		// fallback should it stop doing so.
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE ||
			se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY ||
			(se.Code() == sqlite3.SQLITE_CONSTRAINT && strings.Contains(se.Error(), "UNIQUE"))
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code == "23505" // unique_violation
	}
	return false
}

// Notify tells the processes that Listen on channel that payload happened:
// pg_notify on PostgreSQL (delivered to every listening session at commit);
// nothing on SQLite, whose readers are on one machine and poll instead.
func (db *DB) Notify(ctx context.Context, channel, payload string) error {
	if db.Dialect != Postgres {
		return nil
	}
	if _, err := db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s on %s: %w", channel, db.Name, err)
	}
	return nil
}

// listenRetry is the wait before Listen connects again after losing its
// connection (doubling up to listenRetryMax).
const (
	listenRetry    = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Listen calls fn with the payload of every Notify on channel, from any
// process, until ctx ends; it returns nil then. It holds one connection of
// the pool while it runs. When the connection fails it calls fn("") (the
// notifications sent meanwhile are lost: "" means "anything may have
// changed"), reports the failure to onError (may be nil), and connects again
// with a growing pause. On SQLite it returns ErrNoNotify at once. fn runs on
// Listen's goroutine and should be quick.
func (db *DB) Listen(ctx context.Context, channel string, fn func(payload string), onError func(error)) error {
	if db.Dialect != Postgres {
		return ErrNoNotify
	}
	wait := listenRetry
	for {
		err := db.listenOnce(ctx, channel, fn, func() { wait = listenRetry })
		if ctx.Err() != nil {
			return nil
		}
		fn("")
		if onError != nil {
			onError(fmt.Errorf("listen %s on %s: %w", channel, db.Name, err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// ErrNoNotify is Listen's answer on a database without notifications.
var ErrNoNotify = errors.New("the database has no notifications (SQLite)")

// listenOnce runs LISTEN channel on one connection and relays what arrives
// until the connection or ctx fails; listening is called once LISTEN is in
// place.
func (db *DB) listenOnce(ctx context.Context, channel string, fn func(string), listening func()) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return err
		}
		listening()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// ErrBadConn makes the pool drop the connection instead of
				// lending out a session that still listens.
				return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
			}
			fn(n.Payload)
		}
	})
}
