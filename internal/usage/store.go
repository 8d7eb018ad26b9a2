package usage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb"
)

// Inserter writes a batch of entries. It is all the Writer needs from a Store.
type Inserter interface {
	// Insert writes entries atomically (all or none). It fills an empty ID in
	// place, so inserting the same slice again after an ambiguous failure cannot
	// write an entry twice: an entry whose ID is already stored is skipped.
	// Insert does not keep the slice after it returns. An empty slice is a no-op.
	Insert(ctx context.Context, entries []Entry) error
}

// Store is the ledger's database: SQLite or PostgreSQL, opened by Open.
type Store interface {
	Inserter
	// List returns the entries matching f, oldest first (ties by ID).
	List(ctx context.Context, f Filter) ([]Entry, error)
	// Count returns how many entries match f; f.Limit is ignored.
	Count(ctx context.Context, f Filter) (int64, error)
	// Summarize totals the entries matching f per key and model, ordered by
	// key then model; f.Limit is ignored. No matching entry gives an empty slice.
	Summarize(ctx context.Context, f Filter) ([]Summary, error)
	// Ping reports whether the database is reachable (for /readyz).
	Ping(ctx context.Context) error
	// Close releases the database. The Store is unusable afterwards.
	Close() error
}

// Filter selects entries. The zero Filter matches every entry.
type Filter struct {
	Since   time.Time // entries with Time >= Since; zero means no lower bound
	Until   time.Time // entries with Time < Until; zero means no upper bound
	KeyID   string    // "" matches any key
	Model   string    // "" matches any model
	Team    string    // "" matches any team (and none)
	Outcome string    // "" matches any outcome
	Limit   int       // List returns at most Limit entries; 0 or less means no limit
}

// Summary is the total of the entries of one key and model.
type Summary struct {
	KeyID        string
	Model        string
	Requests     int64   // entries
	Failed       int64   // entries whose Outcome is not OutcomeOK
	InputTokens  int64   // sum of InputTokens
	OutputTokens int64   // sum of OutputTokens
	CostUSD      float64 // sum of CostUSD
}

// Open opens the ledger database named by dsn and creates or upgrades its
// schema:
//
//   - sqlite://PATH, e.g. sqlite://streamgate.db (relative) or
//     sqlite:///var/lib/streamgate/ledger.db (absolute); sqlite://:memory: is a
//     private in-memory database. The file is created if missing (its directory
//     is not), opened in WAL mode with a 5 s busy timeout. Query parameters are
//     passed to modernc.org/sqlite (e.g. ?_pragma=synchronous(FULL)).
//   - postgres://... or postgresql://..., any connection string pgx accepts
//     (e.g. ?sslmode=disable&search_path=ledger).
//
// Any other scheme is an error naming it. Errors never contain the password of
// the DSN. Open connects and pings within ctx, which should carry a deadline:
// an unreachable PostgreSQL host otherwise waits for the TCP timeout.
func Open(ctx context.Context, dsn string) (Store, error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	d := dialectOf(db)
	if err := db.MigrateSchema(ctx, Schema(db.Dialect)); err != nil {
		db.Close()
		return nil, fmt.Errorf("usage: open %s: %w", db.Name, err)
	}
	return &sqlStore{db: db.DB, d: d}, nil
}

// Schema is the ledger's schema in dialect (sqldb.SQLite or
// sqldb.Postgres). Version 2 (ttft_ns NULL when there was no first token)
// is the one step a version-1 binary cannot read; every later step adds
// columns with defaults or indexes, so a binary of version 2 or later runs
// against any later schema (rows it writes lack the newer columns' data:
// a version-5 binary records no team).
func Schema(dialect string) sqldb.Schema {
	d := sqliteDialect
	if dialect == sqldb.Postgres {
		d = postgresDialect
	}
	return sqldb.Schema{Component: schemaComponent, Steps: d.migrations, Compatible: []int{3, 4, 5, 6, 7}}
}

// idPrefix makes IDs unique across processes; idSeq within one.
var (
	idPrefix = newIDPrefix()
	idSeq    atomic.Uint64
)

func newIDPrefix() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; the clock is a fallback that
		// still separates processes started at different times.
		return strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return hex.EncodeToString(b[:])
}

// newID returns a process-unique, cross-process random ledger ID.
func newID() string {
	var buf [40]byte
	b := append(buf[:0], idPrefix...)
	b = append(b, '-')
	b = strconv.AppendUint(b, idSeq.Add(1), 36)
	return string(b)
}

// assignIDs gives every entry without an ID a new one.
func assignIDs(entries []Entry) {
	for i := range entries {
		if entries[i].ID == "" {
			entries[i].ID = newID()
		}
	}
}

// Spent returns the cost s recorded for key (a key's name) since since
// (zero: all ever): what a budget's period has spent, as the gateway's
// budget ledger reads it at the start of a period.
func Spent(ctx context.Context, s Store, key string, since time.Time) (float64, error) {
	return spent(ctx, s, Filter{KeyID: key, Since: since})
}

// SpentTeam returns the cost s recorded for the keys of team (entries
// whose team is team) since since: a team budget's spend. The SQL stores
// read it by the index on (team, arrived_at), schema version 7.
func SpentTeam(ctx context.Context, s Store, team string, since time.Time) (float64, error) {
	if team == "" {
		return 0, nil
	}
	return spent(ctx, s, Filter{Team: team, Since: since})
}

// SpentKeyModel returns the cost s recorded for key on model since since:
// a key's budget for one model. The SQL stores read it by the index on
// (key_id, arrived_at): the key's rows of the window, of every model.
func SpentKeyModel(ctx context.Context, s Store, key, model string, since time.Time) (float64, error) {
	return spent(ctx, s, Filter{KeyID: key, Model: model, Since: since})
}

func spent(ctx context.Context, s Store, f Filter) (float64, error) {
	rows, err := s.Summarize(ctx, f)
	sum := 0.0
	for _, r := range rows {
		sum += r.CostUSD
	}
	return sum, err
}
