// Package respstore keeps the responses of POST /v1/responses asked to be
// stored (store: true, the default) in the gateway's database, SQLite or
// PostgreSQL through sqldb, beside the usage ledger and the API keys: each
// response object as it was returned, its input items and its output
// items, owned by the API key that created it. It serves the Responses
// API's state: previous_response_id (Chain), item_reference (Item),
// GET/DELETE /v1/responses/{id} and its input_items. Rows older than the
// retention are invisible at once and purged periodically (Run).
package respstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb"
)

// ErrNotFound: no response (or item) of that id is visible to the key: it
// does not exist, another key created it, it was deleted, or it expired.
var ErrNotFound = errors.New("not found")

// DefaultRetention is how long a response is kept when Options give none:
// 30 days, as OpenAI keeps stored responses.
const DefaultRetention = 30 * 24 * time.Hour

// MaxChain bounds the responses a previous_response_id chain walks back.
const MaxChain = 10000

// Response is one stored response.
type Response struct {
	ID    string // "resp_…"
	KeyID string // the key that created it, as the ledger records it
	// PreviousID is the previous_response_id it continued; "" none.
	PreviousID string
	CreatedAt  time.Time
	// Body is the response object as it was returned.
	Body json.RawMessage
	// Input are its input items (normalised, with ids), Output its output
	// items, in order.
	Input, Output []Item
}

// Item is one input or output item of a stored response: its JSON and its
// "id" member ("" when it has none).
type Item struct {
	ID   string
	JSON json.RawMessage
}

// ItemsOf are raws as Items, each id read from its item.
func ItemsOf(raws []json.RawMessage) []Item {
	out := make([]Item, len(raws))
	for i, r := range raws {
		out[i] = Item{ID: itemID(r), JSON: r}
	}
	return out
}

// Options configure a Store.
type Options struct {
	// Retention is how long a response is kept after it was created; 0:
	// DefaultRetention.
	Retention time.Duration
	// PurgeEvery is Run's interval; 0: a tenth of the retention, between
	// one second and one hour.
	PurgeEvery time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

const schemaComponent = "responses"

// migrations[dialect][i] bring the schema from version i to i+1. Times
// are Unix microseconds in both dialects; JSON is text. response_items
// holds input (kind 'i') and output (kind 'o') items in order; item_id is
// indexed for item_reference.
var migrations = map[string][][]string{
	sqldb.SQLite: {{
		`CREATE TABLE responses (
			id          TEXT PRIMARY KEY,
			key_id      TEXT NOT NULL,
			previous_id TEXT,
			created_at  INTEGER NOT NULL,
			body        TEXT NOT NULL
		)`,
		`CREATE INDEX responses_created ON responses (created_at)`,
		`CREATE TABLE response_items (
			response_id TEXT NOT NULL,
			kind        TEXT NOT NULL,
			seq         INTEGER NOT NULL,
			item_id     TEXT NOT NULL,
			item        TEXT NOT NULL,
			PRIMARY KEY (response_id, kind, seq)
		)`,
		`CREATE INDEX response_items_item ON response_items (item_id)`,
	}},
	sqldb.Postgres: {{
		`CREATE TABLE responses (
			id          TEXT PRIMARY KEY,
			key_id      TEXT NOT NULL,
			previous_id TEXT,
			created_at  BIGINT NOT NULL,
			body        TEXT NOT NULL
		)`,
		`CREATE INDEX responses_created ON responses (created_at)`,
		`CREATE TABLE response_items (
			response_id TEXT NOT NULL,
			kind        TEXT NOT NULL,
			seq         INTEGER NOT NULL,
			item_id     TEXT NOT NULL,
			item        TEXT NOT NULL,
			PRIMARY KEY (response_id, kind, seq)
		)`,
		`CREATE INDEX response_items_item ON response_items (item_id)`,
	}},
}

// Schema is the stored responses' schema in dialect (sqldb.SQLite or
// sqldb.Postgres).
func Schema(dialect string) sqldb.Schema {
	return sqldb.Schema{Component: schemaComponent, Steps: migrations[dialect]}
}

// Store is the stored responses. It is safe for concurrent use.
type Store struct {
	db        *sqldb.DB
	retention time.Duration
	every     time.Duration
	now       func() time.Time

	// pending are the writes begun (Begin) and not yet ended, by response
	// id: a read of one waits for it, so that a client continuing a
	// response the moment it ended finds it.
	mu      sync.Mutex
	pending map[string]chan struct{}
	writes  sync.WaitGroup
}

// Open opens the database named by dsn (sqldb.Open) and creates or
// upgrades the responses' schema, component "responses" in
// streamgate_schema. Errors never contain the DSN's password.
func Open(ctx context.Context, dsn string, o Options) (*Store, error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("responses store: %w", err)
	}
	if err := db.MigrateSchema(ctx, Schema(db.Dialect)); err != nil {
		db.Close()
		return nil, fmt.Errorf("responses store: open %s: %w", db.Name, err)
	}
	s := &Store{db: db, retention: o.Retention, every: o.PurgeEvery, now: o.Now, pending: map[string]chan struct{}{}}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	if s.every <= 0 {
		s.every = min(max(s.retention/10, time.Second), time.Hour)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Close waits for the writes under way, then releases the database.
func (s *Store) Close() error {
	s.writes.Wait()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("responses store: close: %w", err)
	}
	return nil
}

// Retention is how long a response is kept.
func (s *Store) Retention() time.Duration { return s.retention }

// Begin announces the write of response id: until the returned function
// runs, reads of id wait for it (up to their context). Call the function
// once, after Put (or without it when nothing is written).
func (s *Store) Begin(id string) func() {
	ch := make(chan struct{})
	s.writes.Add(1)
	s.mu.Lock()
	s.pending[id] = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.pending[id] == ch {
			delete(s.pending, id)
		}
		s.mu.Unlock()
		close(ch)
		s.writes.Done()
	}
}

// wait waits for a pending write of id, if any.
func (s *Store) wait(ctx context.Context, id string) error {
	s.mu.Lock()
	ch := s.pending[id]
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("responses store: wait for the write of %s: %w", id, context.Cause(ctx))
	}
}

// micros is t in Unix microseconds.
func micros(t time.Time) int64 { return t.UnixMicro() }

// horizon is the creation time before which rows are expired.
func (s *Store) horizon() int64 { return micros(s.now().Add(-s.retention)) }

// Put stores r in one transaction.
func (s *Store) Put(ctx context.Context, r *Response) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("responses store: put %s: %w", r.ID, err)
	}
	defer tx.Rollback()
	var prev any
	if r.PreviousID != "" {
		prev = r.PreviousID
	}
	created := r.CreatedAt
	if created.IsZero() {
		created = s.now()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO responses (id, key_id, previous_id, created_at, body) VALUES ($1, $2, $3, $4, $5)`,
		r.ID, r.KeyID, prev, micros(created), string(r.Body)); err != nil {
		return fmt.Errorf("responses store: put %s: %w", r.ID, err)
	}
	for _, part := range []struct {
		kind  string
		items []Item
	}{{"i", r.Input}, {"o", r.Output}} {
		for i, it := range part.items {
			if _, err := tx.ExecContext(ctx, `INSERT INTO response_items (response_id, kind, seq, item_id, item) VALUES ($1, $2, $3, $4, $5)`,
				r.ID, part.kind, i, it.ID, string(it.JSON)); err != nil {
				return fmt.Errorf("responses store: put %s: item %d: %w", r.ID, i, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("responses store: put %s: commit: %w", r.ID, err)
	}
	return nil
}

// itemID is the "id" member of an item, "" when it has none.
func itemID(item json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(item, &v)
	return v.ID
}

// Get returns the response object of id, as it was returned, if keyID
// created it and it has not expired; else ErrNotFound.
func (s *Store) Get(ctx context.Context, keyID, id string) (json.RawMessage, error) {
	if err := s.wait(ctx, id); err != nil {
		return nil, err
	}
	var body string
	err := s.db.QueryRowContext(ctx, `SELECT body FROM responses WHERE id = $1 AND key_id = $2 AND created_at > $3`,
		id, keyID, s.horizon()).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("responses store: get %s: %w", id, err)
	}
	return json.RawMessage(body), nil
}

// Delete deletes response id and its items if keyID created it (an
// expired one too); else ErrNotFound.
func (s *Store) Delete(ctx context.Context, keyID, id string) error {
	if err := s.wait(ctx, id); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("responses store: delete %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM responses WHERE id = $1 AND key_id = $2 AND created_at > $3`, id, keyID, s.horizon())
	if err != nil {
		return fmt.Errorf("responses store: delete %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM response_items WHERE response_id = $1`, id); err != nil {
		return fmt.Errorf("responses store: delete %s: items: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("responses store: delete %s: commit: %w", id, err)
	}
	return nil
}

// ListQuery pages a response's input items, as OpenAI's input_items
// endpoint does.
type ListQuery struct {
	Limit int    // 1 to 100
	After string // an item id: the items after it in Order; "" from the first
	Asc   bool   // ascending (oldest first); false: descending, OpenAI's default
}

// InputItems returns a page of the input items of response id (keyID's,
// not expired), and whether more follow it; ErrNotFound when the response
// is not visible, or After names no item of it.
func (s *Store) InputItems(ctx context.Context, keyID, id string, q ListQuery) ([]json.RawMessage, bool, error) {
	if _, err := s.Get(ctx, keyID, id); err != nil {
		return nil, false, err
	}
	order, cmp := "DESC", "<"
	if q.Asc {
		order, cmp = "ASC", ">"
	}
	from := -1
	if q.After != "" {
		// The first item of that id, in the order asked.
		err := s.db.QueryRowContext(ctx, `SELECT seq FROM response_items WHERE response_id = $1 AND kind = 'i' AND item_id = $2 ORDER BY seq `+order+` LIMIT 1`,
			id, q.After).Scan(&from)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("%w: item %q of response %s", ErrNotFound, q.After, id)
		}
		if err != nil {
			return nil, false, fmt.Errorf("responses store: input items of %s: %w", id, err)
		}
	}
	query := `SELECT item FROM response_items WHERE response_id = $1 AND kind = 'i'`
	args := []any{id}
	if from >= 0 {
		query += ` AND seq ` + cmp + ` $2`
		args = append(args, from)
	}
	query += fmt.Sprintf(` ORDER BY seq %s LIMIT %d`, order, q.Limit+1)
	items, err := s.items(ctx, query, args...)
	if err != nil {
		return nil, false, fmt.Errorf("responses store: input items of %s: %w", id, err)
	}
	more := len(items) > q.Limit
	if more {
		items = items[:q.Limit]
	}
	return items, more, nil
}

func (s *Store) items(ctx context.Context, query string, args ...any) ([]json.RawMessage, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []json.RawMessage
	for rows.Next() {
		var it string
		if err := rows.Scan(&it); err != nil {
			return nil, err
		}
		out = append(out, json.RawMessage(it))
	}
	return out, rows.Err()
}

// Chain returns the conversation that response id ends, for a request
// that continues it (previous_response_id): for each response of its
// chain, oldest first, its input items and then its output items. Every
// response of the chain must be keyID's and not expired or deleted: else
// ErrNotFound, as the conversation cannot be rebuilt whole. Instructions
// are not in it (they do not carry over, as OpenAI's do not).
func (s *Store) Chain(ctx context.Context, keyID, id string) ([]json.RawMessage, error) {
	if err := s.wait(ctx, id); err != nil {
		return nil, err
	}
	// The chain's ids, newest first, with each one's previous.
	rows, err := s.db.QueryContext(ctx, `WITH RECURSIVE chain(id, previous_id, depth) AS (
			SELECT id, previous_id, 0 FROM responses WHERE id = $1 AND key_id = $2 AND created_at > $3
			UNION ALL
			SELECT r.id, r.previous_id, c.depth + 1 FROM responses r JOIN chain c ON r.id = c.previous_id
			WHERE r.key_id = $2 AND r.created_at > $3 AND c.depth < $4
		) SELECT id, previous_id FROM chain ORDER BY depth`, id, keyID, s.horizon(), MaxChain)
	if err != nil {
		return nil, fmt.Errorf("responses store: chain of %s: %w", id, err)
	}
	var ids []string
	var last sql.NullString
	for rows.Next() {
		var rid string
		if err := rows.Scan(&rid, &last); err != nil {
			rows.Close()
			return nil, fmt.Errorf("responses store: chain of %s: %w", id, err)
		}
		ids = append(ids, rid)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("responses store: chain of %s: %w", id, err)
	}
	rows.Close()
	if len(ids) == 0 {
		return nil, ErrNotFound
	}
	if last.Valid && last.String != "" {
		return nil, fmt.Errorf("%w: response %s, which %s continues, is gone", ErrNotFound, last.String, id)
	}
	out := []json.RawMessage{}
	for i := len(ids) - 1; i >= 0; i-- {
		items, err := s.items(ctx, `SELECT item FROM response_items WHERE response_id = $1 ORDER BY kind, seq`, ids[i])
		if err != nil {
			return nil, fmt.Errorf("responses store: chain of %s: %w", id, err)
		}
		out = append(out, items...)
	}
	return out, nil
}

// Item returns the newest stored item (input or output) of id among
// keyID's responses not expired, for an item_reference; else ErrNotFound.
func (s *Store) Item(ctx context.Context, keyID, id string) (json.RawMessage, error) {
	var it string
	err := s.db.QueryRowContext(ctx, `SELECT i.item FROM response_items i JOIN responses r ON r.id = i.response_id
		WHERE i.item_id = $1 AND r.key_id = $2 AND r.created_at > $3 ORDER BY r.created_at DESC, i.kind DESC, i.seq DESC LIMIT 1`,
		id, keyID, s.horizon()).Scan(&it)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("responses store: item %s: %w", id, err)
	}
	return json.RawMessage(it), nil
}

// Purge deletes the responses older than the retention, and their items;
// it returns how many responses it deleted.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	h := s.horizon()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("responses store: purge: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM response_items WHERE response_id IN (SELECT id FROM responses WHERE created_at <= $1)`, h); err != nil {
		return 0, fmt.Errorf("responses store: purge items: %w", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM responses WHERE created_at <= $1`, h)
	if err != nil {
		return 0, fmt.Errorf("responses store: purge: %w", err)
	}
	n, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("responses store: purge: commit: %w", err)
	}
	return n, nil
}

// Run purges expired responses every PurgeEvery until ctx ends; failures
// go to onError (may be nil) and the next round tries again.
func (s *Store) Run(ctx context.Context, onError func(error)) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		if _, err := s.Purge(ctx); err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Ping reports whether the database is reachable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("responses store: ping: %w", err)
	}
	return nil
}
