package usage

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/sqldb"
	"github.com/streamgate/streamgate/internal/usd"
)

// schemaComponent is this package's row in streamgate_schema, the version table
// shared with other packages that keep tables in the same database.
const schemaComponent = "usage"

// maxErrorLen caps Entry.Error as stored: an upstream may send a huge body.
const maxErrorLen = 4096

// columns of usage_entries in the order insert and scan use them.
const columns = columnsV2 + ", hedged, continuations, cache_read_tokens, cache_write_tokens, team, provider_key"

const numColumns = 23

// columnsV2 are the columns of schema versions 1 and 2. A migration names its
// columns itself: it must keep doing what it did when columns grows.
const columnsV2 = "id, request_id, arrived_at, key_id, model, route, attempts, stream, status, outcome, " +
	"input_tokens, output_tokens, token_source, cost_usd, ttft_ns, duration_ns, error"

// dialect holds what differs between SQLite and PostgreSQL. Both drivers accept
// $N placeholders, so every statement text is shared but the INSERT's (see
// positional).
type dialect struct {
	name string
	// migrations[i] brings the schema from version i to i+1.
	migrations [][]string
	// maxRows bounds the rows of one INSERT statement (PostgreSQL allows
	// 65535 parameters); 1 means one prepared statement executed per row.
	maxRows int
	// timeArg converts Entry.Time to the stored form of arrived_at.
	timeArg func(time.Time) any
	// positional makes the INSERT use "?" placeholders: modernc's SQLite
	// binds "$N" by looking each name up, an allocation per column and row
	// more (BenchmarkSQLiteInsert: 42 a row instead of 23).
	positional bool
}

var sqliteDialect = &dialect{
	name: "sqlite",
	migrations: [][]string{{
		// arrived_at is Unix microseconds (UTC), the precision of PostgreSQL's
		// timestamptz, so both stores give back the same value.
		`CREATE TABLE IF NOT EXISTS usage_entries (
			id            TEXT PRIMARY KEY,
			request_id    TEXT NOT NULL,
			arrived_at    INTEGER NOT NULL,
			key_id        TEXT NOT NULL,
			model         TEXT NOT NULL,
			route         TEXT NOT NULL,
			attempts      INTEGER NOT NULL,
			stream        INTEGER NOT NULL,
			status        INTEGER NOT NULL,
			outcome       TEXT NOT NULL,
			input_tokens  INTEGER NOT NULL,
			output_tokens INTEGER NOT NULL,
			token_source  TEXT NOT NULL,
			cost_usd      REAL NOT NULL,
			ttft_ns       INTEGER NOT NULL,
			duration_ns   INTEGER NOT NULL,
			error         TEXT NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS usage_entries_arrived_at ON usage_entries (arrived_at)`,
		`CREATE INDEX IF NOT EXISTS usage_entries_key_arrived_at ON usage_entries (key_id, arrived_at)`,
	}, {
		// Version 2: ttft_ns is NULL when there was no first token (a
		// non-stream, a stream that failed before content). SQLite cannot
		// drop a NOT NULL: the table is rebuilt.
		`CREATE TABLE usage_entries_v2 (
			id            TEXT PRIMARY KEY,
			request_id    TEXT NOT NULL,
			arrived_at    INTEGER NOT NULL,
			key_id        TEXT NOT NULL,
			model         TEXT NOT NULL,
			route         TEXT NOT NULL,
			attempts      INTEGER NOT NULL,
			stream        INTEGER NOT NULL,
			status        INTEGER NOT NULL,
			outcome       TEXT NOT NULL,
			input_tokens  INTEGER NOT NULL,
			output_tokens INTEGER NOT NULL,
			token_source  TEXT NOT NULL,
			cost_usd      REAL NOT NULL,
			ttft_ns       INTEGER,
			duration_ns   INTEGER NOT NULL,
			error         TEXT NOT NULL
		)`,
		`INSERT INTO usage_entries_v2 (` + columnsV2 + `)
			SELECT id, request_id, arrived_at, key_id, model, route, attempts, stream, status, outcome,
				input_tokens, output_tokens, token_source, cost_usd, NULLIF(ttft_ns, 0), duration_ns, error
			FROM usage_entries`,
		`DROP TABLE usage_entries`,
		`ALTER TABLE usage_entries_v2 RENAME TO usage_entries`,
		`CREATE INDEX usage_entries_arrived_at ON usage_entries (arrived_at)`,
		`CREATE INDEX usage_entries_key_arrived_at ON usage_entries (key_id, arrived_at)`,
	}, {
		// Version 3: hedging and mid-stream continuation. Rows written before
		// had neither.
		`ALTER TABLE usage_entries ADD COLUMN hedged INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE usage_entries ADD COLUMN continuations INTEGER NOT NULL DEFAULT 0`,
	}, {
		// Version 4: prompt cache reads and writes, parts of input_tokens.
		// Rows written before counted none.
		`ALTER TABLE usage_entries ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE usage_entries ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0`,
	}, {
		// Version 5: the request log finds a request by its id
		// (X-Request-Id) without reading the whole ledger.
		`CREATE INDEX IF NOT EXISTS usage_entries_request_id ON usage_entries (request_id)`,
	}, {
		// Version 6: the key's team and the provider key (its name) that
		// served the request. Rows written before had neither.
		`ALTER TABLE usage_entries ADD COLUMN team TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE usage_entries ADD COLUMN provider_key TEXT NOT NULL DEFAULT ''`,
	}, {
		// Version 7: a team's budget reads its spend in a window (SpentTeam)
		// without reading the other teams' rows.
		`CREATE INDEX IF NOT EXISTS usage_entries_team_arrived_at ON usage_entries (team, arrived_at)`,
	}},
	maxRows:    1,
	timeArg:    func(t time.Time) any { return t.UnixMicro() },
	positional: true,
}

var postgresDialect = &dialect{
	name: "postgres",
	migrations: [][]string{{
		`CREATE TABLE IF NOT EXISTS usage_entries (
			id            TEXT PRIMARY KEY,
			request_id    TEXT NOT NULL,
			arrived_at    TIMESTAMPTZ NOT NULL,
			key_id        TEXT NOT NULL,
			model         TEXT NOT NULL,
			route         TEXT NOT NULL,
			attempts      INTEGER NOT NULL,
			stream        BOOLEAN NOT NULL,
			status        INTEGER NOT NULL,
			outcome       TEXT NOT NULL,
			input_tokens  BIGINT NOT NULL,
			output_tokens BIGINT NOT NULL,
			token_source  TEXT NOT NULL,
			cost_usd      DOUBLE PRECISION NOT NULL,
			ttft_ns       BIGINT NOT NULL,
			duration_ns   BIGINT NOT NULL,
			error         TEXT NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS usage_entries_arrived_at ON usage_entries (arrived_at)`,
		`CREATE INDEX IF NOT EXISTS usage_entries_key_arrived_at ON usage_entries (key_id, arrived_at)`,
	}, {
		// Version 2: ttft_ns is NULL when there was no first token.
		`ALTER TABLE usage_entries ALTER COLUMN ttft_ns DROP NOT NULL`,
		`UPDATE usage_entries SET ttft_ns = NULL WHERE ttft_ns = 0`,
	}, {
		// Version 3: hedging and mid-stream continuation. A constant default
		// is stored in the catalog (PostgreSQL 11+): no table rewrite.
		`ALTER TABLE usage_entries
			ADD COLUMN hedged BOOLEAN NOT NULL DEFAULT false,
			ADD COLUMN continuations INTEGER NOT NULL DEFAULT 0`,
	}, {
		// Version 4: prompt cache reads and writes, parts of input_tokens.
		`ALTER TABLE usage_entries
			ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0,
			ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0`,
	}, {
		// Version 5: the request log finds a request by its id.
		`CREATE INDEX IF NOT EXISTS usage_entries_request_id ON usage_entries (request_id)`,
	}, {
		// Version 6: the key's team and the provider key that served it.
		`ALTER TABLE usage_entries
			ADD COLUMN team TEXT NOT NULL DEFAULT '',
			ADD COLUMN provider_key TEXT NOT NULL DEFAULT ''`,
	}, {
		// Version 7: a team's spend in a window read by its index.
		`CREATE INDEX IF NOT EXISTS usage_entries_team_arrived_at ON usage_entries (team, arrived_at)`,
	}},
	maxRows: 500,
	timeArg: func(t time.Time) any { return t.UTC() },
}

// dialectOf returns the dialect of an open database.
func dialectOf(db *sqldb.DB) *dialect {
	if db.Dialect == sqldb.Postgres {
		return postgresDialect
	}
	return sqliteDialect
}

// sqlStore is the Store over database/sql for both dialects.
type sqlStore struct {
	db *sql.DB
	d  *dialect
}

var _ Store = (*sqlStore)(nil)

// Insert implements Inserter: one transaction, multi-row INSERTs of at most
// maxRows rows, entries whose ID is already stored skipped.
func (s *sqlStore) Insert(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	assignIDs(entries)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("usage: insert %d entries into %s: begin: %w", len(entries), s.d.name, err)
	}
	defer tx.Rollback()
	if s.d.maxRows == 1 {
		// One prepared single-row statement executed per entry: SQLite is
		// in-process (no round trips), and its parse time of a multi-row
		// VALUES list grows quadratically with the placeholders.
		stmt, err := tx.PrepareContext(ctx, s.d.insertSQL(1))
		if err != nil {
			return fmt.Errorf("usage: insert %d entries into %s: prepare: %w", len(entries), s.d.name, err)
		}
		defer stmt.Close()
		args := make([]any, 0, numColumns)
		for i := range entries {
			if _, err := stmt.ExecContext(ctx, s.appendArgs(args[:0], &entries[i])...); err != nil {
				return fmt.Errorf("usage: insert %d entries into %s: %w", len(entries), s.d.name, err)
			}
		}
	} else {
		args := make([]any, 0, min(len(entries), s.d.maxRows)*numColumns)
		for start := 0; start < len(entries); start += s.d.maxRows {
			chunk := entries[start:min(start+s.d.maxRows, len(entries))]
			args = args[:0]
			for i := range chunk {
				args = s.appendArgs(args, &chunk[i])
			}
			if _, err := tx.ExecContext(ctx, s.d.insertSQL(len(chunk)), args...); err != nil {
				return fmt.Errorf("usage: insert %d entries into %s: %w", len(entries), s.d.name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("usage: insert %d entries into %s: commit: %w", len(entries), s.d.name, err)
	}
	return nil
}

func (s *sqlStore) appendArgs(args []any, e *Entry) []any {
	// In [0, $1e9]: SQLite stores NaN as NULL, which the NOT NULL column
	// refuses, and one ±Inf makes every SUM over it Inf, NaN or NULL, so a
	// key's spend could not be loaded again.
	cost := usd.Clamp(e.CostUSD)
	return append(args,
		e.ID,
		clean(e.RequestID, 0),
		s.d.timeArg(e.Time),
		clean(e.KeyID, 0),
		clean(e.Model, 0),
		clean(e.Route, 0),
		int64(e.Attempts),
		e.Stream,
		int64(e.Status),
		clean(e.Outcome, 0),
		int64(e.InputTokens),
		int64(e.OutputTokens),
		clean(e.TokenSource, 0),
		cost,
		ttftArg(e.TTFT),
		int64(e.Duration),
		clean(e.Error, maxErrorLen),
		e.Hedged,
		int64(e.Continuations),
		int64(e.CacheReadTokens),
		int64(e.CacheWriteTokens),
		clean(e.Team, 0),
		clean(e.ProviderKey, 0),
	)
}

// ttftArg stores a TTFT of 0 (no first token: not applicable) as NULL.
func ttftArg(d time.Duration) any {
	if d <= 0 {
		return nil
	}
	return int64(d)
}

// insertSQL returns the INSERT for rows entries.
func (d *dialect) insertSQL(rows int) string {
	var b strings.Builder
	b.Grow(120 + rows*numColumns*5)
	b.WriteString("INSERT INTO usage_entries (")
	b.WriteString(columns)
	b.WriteString(") VALUES ")
	n := 1
	for r := range rows {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range numColumns {
			if c > 0 {
				b.WriteByte(',')
			}
			if d.positional {
				b.WriteByte('?')
			} else {
				b.WriteByte('$')
				b.WriteString(strconv.Itoa(n))
			}
			n++
		}
		b.WriteByte(')')
	}
	b.WriteString(" ON CONFLICT (id) DO NOTHING")
	return b.String()
}

// clean makes s storable everywhere: PostgreSQL refuses invalid UTF-8 and NUL
// in TEXT, and one such entry would otherwise fail its whole batch forever.
// A maxLen above 0 truncates s to at most maxLen bytes on a rune boundary.
func clean(s string, maxLen int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if maxLen > 0 && len(s) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// query builds a statement with $N placeholders.
type query struct {
	b    strings.Builder
	args []any
}

func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func (q *query) where(d *dialect, f Filter) {
	var conds []string
	if !f.Since.IsZero() {
		conds = append(conds, "arrived_at >= "+q.arg(d.timeArg(f.Since)))
	}
	if !f.Until.IsZero() {
		conds = append(conds, "arrived_at < "+q.arg(d.timeArg(f.Until)))
	}
	if f.KeyID != "" {
		conds = append(conds, "key_id = "+q.arg(f.KeyID))
	}
	if f.Model != "" {
		conds = append(conds, "model = "+q.arg(f.Model))
	}
	if f.Team != "" {
		conds = append(conds, "team = "+q.arg(f.Team))
	}
	if f.Outcome != "" {
		conds = append(conds, "outcome = "+q.arg(f.Outcome))
	}
	if len(conds) > 0 {
		q.b.WriteString(" WHERE ")
		q.b.WriteString(strings.Join(conds, " AND "))
	}
}

// List implements Store.
func (s *sqlStore) List(ctx context.Context, f Filter) ([]Entry, error) {
	var q query
	q.b.WriteString("SELECT " + columns + " FROM usage_entries")
	q.where(s.d, f)
	q.b.WriteString(" ORDER BY arrived_at, id")
	if f.Limit > 0 {
		q.b.WriteString(" LIMIT " + strconv.Itoa(f.Limit))
	}
	rows, err := s.db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, fmt.Errorf("usage: list entries from %s: %w", s.d.name, err)
	}
	return s.scanEntries(rows)
}

// scanEntries reads rows of columns into entries and closes rows.
func (s *sqlStore) scanEntries(rows *sql.Rows) ([]Entry, error) {
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var (
			e       Entry
			arrived any
			ttft    sql.NullInt64 // NULL: no first token
			dur     int64
		)
		if err := rows.Scan(&e.ID, &e.RequestID, &arrived, &e.KeyID, &e.Model, &e.Route,
			&e.Attempts, &e.Stream, &e.Status, &e.Outcome, &e.InputTokens, &e.OutputTokens,
			&e.TokenSource, &e.CostUSD, &ttft, &dur, &e.Error, &e.Hedged, &e.Continuations,
			&e.CacheReadTokens, &e.CacheWriteTokens, &e.Team, &e.ProviderKey); err != nil {
			return nil, fmt.Errorf("usage: list entries from %s: %w", s.d.name, err)
		}
		switch v := arrived.(type) {
		case int64: // SQLite: Unix microseconds
			e.Time = time.UnixMicro(v).UTC()
		case time.Time: // PostgreSQL: timestamptz
			e.Time = v.UTC()
		default:
			return nil, fmt.Errorf("usage: list entries from %s: arrived_at of entry %q has type %T", s.d.name, e.ID, arrived)
		}
		e.TTFT = time.Duration(ttft.Int64)
		e.Duration = time.Duration(dur)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: list entries from %s: %w", s.d.name, err)
	}
	return out, nil
}

// Count implements Store.
func (s *sqlStore) Count(ctx context.Context, f Filter) (int64, error) {
	var q query
	q.b.WriteString("SELECT COUNT(*) FROM usage_entries")
	q.where(s.d, f)
	var n int64
	if err := s.db.QueryRowContext(ctx, q.b.String(), q.args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("usage: count entries in %s: %w", s.d.name, err)
	}
	return n, nil
}

// Summarize implements Store.
func (s *sqlStore) Summarize(ctx context.Context, f Filter) ([]Summary, error) {
	var q query
	ok := q.arg(OutcomeOK)
	// CAST: PostgreSQL's SUM(bigint) is numeric.
	q.b.WriteString("SELECT key_id, model, COUNT(*), " +
		"CAST(SUM(CASE WHEN outcome <> " + ok + " THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), SUM(cost_usd) " +
		"FROM usage_entries")
	q.where(s.d, f)
	q.b.WriteString(" GROUP BY key_id, model ORDER BY key_id, model")
	rows, err := s.db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, fmt.Errorf("usage: summarize entries in %s: %w", s.d.name, err)
	}
	defer rows.Close()
	out := []Summary{}
	for rows.Next() {
		var m Summary
		if err := rows.Scan(&m.KeyID, &m.Model, &m.Requests, &m.Failed, &m.InputTokens, &m.OutputTokens, &m.CostUSD); err != nil {
			return nil, fmt.Errorf("usage: summarize entries in %s: %w", s.d.name, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: summarize entries in %s: %w", s.d.name, err)
	}
	return out, nil
}

// Ping implements Store.
func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("usage: ping %s: %w", s.d.name, err)
	}
	return nil
}

// Close implements Store.
func (s *sqlStore) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("usage: close %s: %w", s.d.name, err)
	}
	return nil
}
