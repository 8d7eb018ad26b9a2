// Package keys keeps the gateway's virtual API keys in its database (SQLite
// or PostgreSQL, opened through sqldb): create, list, revoke and rotate them
// from the CLI or the admin API, and look a request's bearer secret up on the
// request path. The database holds a secret's SHA-256 and a display prefix,
// never the secret, which Create and Rotate return once.
//
// It also keeps the database's teams (teams.go): limits and a budget shared
// by the keys that name one. A key's team must be a team of the database or
// one the caller declared with AllowTeams (the gateway's config teams); a
// team cannot be deleted while an active key names it.
package keys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/sqldb"
)

// Errors of the Store, matched with errors.Is.
var (
	// ErrNotFound: no key has that ID, no active key that name, or no key
	// that secret.
	ErrNotFound = errors.New("key not found")
	// ErrNameTaken: Create was given the name of an active key.
	ErrNameTaken = errors.New("name taken by an active key")
	// ErrInvalid: Create's input failed validation; the message names each
	// failing field by its JSON name.
	ErrInvalid = errors.New("invalid key")
	// ErrRevoked: Rotate was asked for a revoked key. It is also ErrInvalid.
	ErrRevoked = fmt.Errorf("%w: key is revoked", ErrInvalid)
)

// Key is a virtual API key as stored: never its secret.
type Key struct {
	ID   string `json:"id"`   // "key_" + 16 random base62 chars
	Name string `json:"name"` // unique among keys not revoked
	// Prefix shows which secret a key has without revealing it: "sg-" and
	// the first 6 characters of the secret's random part, e.g. "sg-a8Kx2Q".
	Prefix string `json:"prefix"`
	// Models are the models the key may use; empty means all. Never nil in a
	// Key the Store returns.
	Models     []string `json:"models"`
	MaxStreams int      `json:"max_streams"` // concurrent requests; 0 = the gateway's default
	RPM        int      `json:"rpm"`         // requests per minute; 0 = no limit
	TPM        int      `json:"tpm"`         // tokens per minute; 0 = no limit
	// BudgetUSD is what the key may spend per BudgetPeriod ("month", "day"
	// or "total"; "" means month); 0 = no budget.
	BudgetUSD    float64 `json:"budget_usd"`
	BudgetPeriod string  `json:"budget_period"`
	// Team is the key's team ("" none): a team of the database (Teams),
	// or one of the gateway's config that the Store was told of
	// (AllowTeams).
	Team string `json:"team"`
	// MCPTools are globs ('*': any run of characters) over the MCP tools
	// the key may call through /mcp, by their prefixed names
	// ("server__tool"), like a static key's keys[].mcp_tools; nil (stored
	// NULL) means every tool. The Store never returns an empty, non-nil
	// slice.
	MCPTools  []string  `json:"mcp_tools,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"` // zero: never
	RevokedAt time.Time `json:"revoked_at,omitzero"` // zero: active
}

// Revoked reports whether the key was revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// Expired reports whether the key has an expiry at or before now.
func (k Key) Expired(now time.Time) bool { return !k.ExpiresAt.IsZero() && !k.ExpiresAt.After(now) }

const (
	secretPrefix = "sg-"
	secretChars  = 40 // ≈ 238 bits
	prefixChars  = 6
	idPrefix     = "key_"
	idChars      = 16
	maxNameLen   = 64 // characters
	base62       = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// secretLen is the length in bytes of every secret.
const secretLen = len(secretPrefix) + secretChars

// schemaComponent is this package's row in streamgate_schema.
const schemaComponent = "keys"

// migrations[dialect][i] bring the schema from version i to i+1. Times are
// Unix microseconds (UTC) on SQLite, the precision of PostgreSQL's
// timestamptz, so both stores give back the same value. models is a JSON
// array. The name is unique among active keys only: a revoked key's name
// can be reused.
var migrations = map[string][][]string{
	sqldb.SQLite: {{
		`CREATE TABLE api_keys (
			id            TEXT PRIMARY KEY,
			name          TEXT NOT NULL,
			prefix        TEXT NOT NULL,
			secret_sha256 TEXT NOT NULL UNIQUE,
			models        TEXT NOT NULL,
			max_streams   INTEGER NOT NULL,
			rpm           INTEGER NOT NULL DEFAULT 0,
			tpm           INTEGER NOT NULL DEFAULT 0,
			budget_usd    REAL NOT NULL DEFAULT 0,
			budget_period TEXT NOT NULL DEFAULT 'month',
			created_at    INTEGER NOT NULL,
			expires_at    INTEGER,
			revoked_at    INTEGER
		)`,
		`CREATE UNIQUE INDEX api_keys_active_name ON api_keys (name) WHERE revoked_at IS NULL`,
	}, teamsMigration(`REAL`, `INTEGER`), mcpToolsMigration},
	sqldb.Postgres: {{
		`CREATE TABLE api_keys (
			id            TEXT PRIMARY KEY,
			name          TEXT NOT NULL,
			prefix        TEXT NOT NULL,
			secret_sha256 TEXT NOT NULL UNIQUE,
			models        TEXT NOT NULL,
			max_streams   INTEGER NOT NULL,
			rpm           INTEGER NOT NULL DEFAULT 0,
			tpm           INTEGER NOT NULL DEFAULT 0,
			budget_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
			budget_period TEXT NOT NULL DEFAULT 'month',
			created_at    TIMESTAMPTZ NOT NULL,
			expires_at    TIMESTAMPTZ,
			revoked_at    TIMESTAMPTZ
		)`,
		`CREATE UNIQUE INDEX api_keys_active_name ON api_keys (name) WHERE revoked_at IS NULL`,
	}, teamsMigration(`DOUBLE PRECISION`, `TIMESTAMPTZ`), mcpToolsMigration},
}

// mcpToolsMigration is schema version 3 of "keys", in both dialects: the
// key's MCP tool globs, a JSON array; NULL means every tool.
var mcpToolsMigration = []string{`ALTER TABLE api_keys ADD COLUMN mcp_tools TEXT`}

// Schema is the keys' schema in dialect (sqldb.SQLite or sqldb.Postgres).
// Version 2 (teams) adds a column with a default, a table and an index: a
// version-1 binary runs against it (its keys have no team). Version 3 adds
// the nullable mcp_tools column: a version-2 binary runs against it, and
// gives every key every MCP tool, as it did before.
func Schema(dialect string) sqldb.Schema {
	return sqldb.Schema{Component: schemaComponent, Steps: migrations[dialect], Compatible: []int{2, 3}}
}

// Store is the keys' table in the gateway's database. It is safe for
// concurrent use.
type Store struct {
	db  *sqldb.DB
	now func() time.Time // the clock; tests move it

	allowed map[string]bool // teams of the config (AllowTeams); read-only once set
}

// Open opens the database named by dsn (see sqldb.Open: sqlite://PATH or
// postgres://...) and creates or upgrades the keys' schema, component "keys"
// in streamgate_schema. It opens a pool of its own, beside the ledger's.
// Errors never contain the DSN's password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if err := db.MigrateSchema(ctx, Schema(db.Dialect)); err != nil {
		db.Close()
		return nil, fmt.Errorf("keys: open %s: %w", db.Name, err)
	}
	return &Store{db: db, now: time.Now}, nil
}

// Close releases the database. The Store is unusable afterwards.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("keys: close %s: %w", s.db.Dialect, err)
	}
	return nil
}

// Ping reports whether the database is reachable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("keys: ping %s: %w", s.db.Dialect, err)
	}
	return nil
}

// Create stores a new key with k's Name, Models, MaxStreams, RPM, TPM,
// budget, Team, MCPTools and ExpiresAt;
// it sets ID, Prefix and CreatedAt and ignores what k has in them and in
// RevokedAt. It returns the key as stored and its secret, "sg-" and 40
// base62 characters from crypto/rand, which is not kept: show it once.
// Invalid input is an ErrInvalid naming every failing field; the name of
// an active key is ErrNameTaken.
func (s *Store) Create(ctx context.Context, k Key) (Key, string, error) {
	now := s.now()
	if err := validate(k, now); err != nil {
		return Key{}, "", err
	}
	if err := s.checkTeam(ctx, k.Team); err != nil {
		return Key{}, "", err
	}
	secret, err := newSecret()
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: create %q: %w", k.Name, err)
	}
	id, err := randomBase62(idChars)
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: create %q: %w", k.Name, err)
	}
	k.ID = idPrefix + id
	k.Prefix = displayPrefix(secret)
	k.Models = append([]string{}, k.Models...)
	k.MCPTools = cloneTools(k.MCPTools)
	if k.BudgetPeriod == "" {
		k.BudgetPeriod = "month"
	}
	k.CreatedAt = storedTime(now)
	k.ExpiresAt = storedTime(k.ExpiresAt)
	k.RevokedAt = time.Time{}
	models, err := json.Marshal(k.Models)
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: create %q: models: %w", k.Name, err)
	}
	var tools any // NULL: every tool
	if k.MCPTools != nil {
		b, err := json.Marshal(k.MCPTools)
		if err != nil {
			return Key{}, "", fmt.Errorf("keys: create %q: mcp_tools: %w", k.Name, err)
		}
		tools = string(b)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO api_keys
		(id, name, prefix, secret_sha256, models, max_streams, rpm, tpm, budget_usd, budget_period, created_at, expires_at, revoked_at, team, mcp_tools)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULL, $13, $14)`,
		k.ID, k.Name, k.Prefix, hash(secret), string(models), int64(k.MaxStreams), int64(k.RPM), int64(k.TPM), k.BudgetUSD, k.BudgetPeriod,
		s.timeArg(k.CreatedAt), s.timeArg(k.ExpiresAt), k.Team, tools)
	if err != nil {
		if sqldb.IsUniqueViolation(err) {
			// The ID and the hash are random: a violation is the name's,
			// unless a check says otherwise.
			if _, gerr := s.getByName(ctx, k.Name); gerr == nil {
				return Key{}, "", fmt.Errorf("keys: create %q: %w", k.Name, ErrNameTaken)
			}
		}
		return Key{}, "", fmt.Errorf("keys: create %q in %s: %w", k.Name, s.db.Dialect, err)
	}
	return k, secret, nil
}

// validate returns an ErrInvalid naming every problem of k, or nil.
func validate(k Key, now time.Time) error {
	var problems []string
	switch {
	case k.Name == "":
		problems = append(problems, "name: required")
	case !utf8.ValidString(k.Name):
		problems = append(problems, "name: not valid UTF-8")
	case utf8.RuneCountInString(k.Name) > maxNameLen:
		problems = append(problems, fmt.Sprintf("name: %d characters, want at most %d", utf8.RuneCountInString(k.Name), maxNameLen))
	case strings.IndexFunc(k.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		problems = append(problems, fmt.Sprintf("name %q: not printable", k.Name))
	case strings.TrimSpace(k.Name) != k.Name:
		problems = append(problems, fmt.Sprintf("name %q: leading or trailing space", k.Name))
	case strings.HasPrefix(k.Name, idPrefix):
		// Get takes an ID or a name: a name shaped like an ID would be ambiguous.
		problems = append(problems, fmt.Sprintf("name %q: must not start with %q (IDs do)", k.Name, idPrefix))
	case strings.HasPrefix(k.Name, secretPrefix) && len(k.Name) >= secretLen:
		// Names appear in logs and listings: refuse one that may be a secret
		// pasted in the wrong place, without echoing it.
		problems = append(problems, "name: looks like a key secret")
	}
	for i, m := range k.Models {
		if strings.TrimSpace(m) == "" {
			problems = append(problems, fmt.Sprintf("models[%d]: empty", i))
		}
	}
	if len(k.MCPTools) > maxMCPTools {
		problems = append(problems, fmt.Sprintf("mcp_tools: %d globs, want at most %d", len(k.MCPTools), maxMCPTools))
	}
	for i, g := range k.MCPTools {
		if msg := checkToolGlob(g); msg != "" {
			problems = append(problems, fmt.Sprintf("mcp_tools[%d]: %s", i, msg))
		}
	}
	if k.MaxStreams < 0 {
		problems = append(problems, fmt.Sprintf("max_streams: %d is negative", k.MaxStreams))
	}
	if k.RPM < 0 {
		problems = append(problems, fmt.Sprintf("rpm: %d is negative", k.RPM))
	}
	if k.TPM < 0 {
		problems = append(problems, fmt.Sprintf("tpm: %d is negative", k.TPM))
	}
	if b := k.BudgetUSD; math.IsNaN(b) || math.IsInf(b, 0) || b < 0 {
		problems = append(problems, fmt.Sprintf("budget_usd: %v is not a non-negative number", b))
	}
	switch k.BudgetPeriod {
	case "", "month", "day", "total":
	default:
		problems = append(problems, fmt.Sprintf("budget_period: %q is not month, day or total", k.BudgetPeriod))
	}
	if !k.ExpiresAt.IsZero() && !k.ExpiresAt.After(now) {
		problems = append(problems, fmt.Sprintf("expires_at: %s is not in the future", k.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("keys: %w: %s", ErrInvalid, strings.Join(problems, "; "))
}

// Bounds of a key's MCP tool globs.
const (
	maxMCPTools    = 256
	maxToolGlobLen = 200 // bytes: a full "server__tool" may be longer than the 64 of a shown name
)

// checkToolGlob says what is wrong with a glob of mcp_tools, "" when
// nothing. A glob holds what a prefixed tool name may hold (letters,
// digits, '_' and '-'; see package toolname) and '*', which matches any
// run of characters (mcp.MatchGlob).
func checkToolGlob(g string) string {
	switch {
	case g == "":
		return "empty (an empty glob allows nothing; leave mcp_tools out to allow every tool)"
	case len(g) > maxToolGlobLen:
		return fmt.Sprintf("%d bytes, want at most %d", len(g), maxToolGlobLen)
	case strings.Contains(g, "**"):
		return fmt.Sprintf("%q has \"**\" (one '*' matches any run of characters)", g)
	}
	for _, r := range g {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '*') {
			return fmt.Sprintf("%q has %q: a glob holds letters, digits, '_', '-' (as tool names such as docs__search do) and '*' (any run of characters)", g, r)
		}
	}
	return ""
}

// cloneTools copies globs; empty is nil (every tool).
func cloneTools(globs []string) []string {
	if len(globs) == 0 {
		return nil
	}
	return append([]string(nil), globs...)
}

// columns of api_keys in the order scan reads them.
const columns = "id, name, prefix, models, max_streams, rpm, tpm, budget_usd, budget_period, created_at, expires_at, revoked_at, team, mcp_tools"

// List returns every key, revoked and expired ones included, oldest first
// (ties by ID). No key gives an empty slice.
func (s *Store) List(ctx context.Context) ([]Key, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("keys: list from %s: %w", s.db.Dialect, err)
	}
	defer rows.Close()
	out := []Key{}
	for rows.Next() {
		k, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("keys: list from %s: %w", s.db.Dialect, err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keys: list from %s: %w", s.db.Dialect, err)
	}
	return out, nil
}

// Get returns the key whose ID is ref, revoked or not, or else the active
// key named ref; ErrNotFound when there is neither.
func (s *Store) Get(ctx context.Context, ref string) (Key, error) {
	k, err := s.get(ctx, `id = $1`, ref)
	if errors.Is(err, ErrNotFound) {
		k, err = s.getByName(ctx, ref)
	}
	if err != nil {
		return Key{}, fmt.Errorf("keys: get %s: %w", describe(ref), err)
	}
	return k, nil
}

func (s *Store) getByName(ctx context.Context, name string) (Key, error) {
	return s.get(ctx, `name = $1 AND revoked_at IS NULL`, name)
}

// get is the single key matching where (with one argument), or ErrNotFound.
func (s *Store) get(ctx context.Context, where string, arg any) (Key, error) {
	k, err := scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM api_keys WHERE `+where, arg))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Key{}, ErrNotFound
	case err != nil:
		return Key{}, fmt.Errorf("%s: %w", s.db.Dialect, err)
	}
	return k, nil
}

// Revoke revokes the key Get(ref) finds and returns it with RevokedAt set:
// Lookup keeps returning it, for the caller to refuse it. Revoking a revoked
// key (by ID) changes nothing and is no error.
func (s *Store) Revoke(ctx context.Context, ref string) (Key, error) {
	k, err := s.Get(ctx, ref)
	if err != nil {
		return Key{}, err
	}
	if k.Revoked() {
		return k, nil
	}
	at := storedTime(s.now())
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`,
		k.ID, s.timeArg(at))
	if err != nil {
		return Key{}, fmt.Errorf("keys: revoke %s in %s: %w", k.ID, s.db.Dialect, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		// Revoked meanwhile by another caller: give back its time.
		if k, err = s.get(ctx, `id = $1`, k.ID); err != nil {
			return Key{}, fmt.Errorf("keys: revoke %s: %w", k.ID, err)
		}
		return k, nil
	}
	k.RevokedAt = at
	s.changed(ctx, k.ID)
	return k, nil
}

// Rotate gives the key Get(ref) finds a new secret, returned once, and a new
// Prefix; the old secret stops working at once (for Lookup: callers that
// cache it, until their cache expires). A revoked key is ErrRevoked.
func (s *Store) Rotate(ctx context.Context, ref string) (Key, string, error) {
	k, err := s.Get(ctx, ref)
	if err != nil {
		return Key{}, "", err
	}
	if k.Revoked() {
		return Key{}, "", fmt.Errorf("keys: rotate %s: %w", k.ID, ErrRevoked)
	}
	secret, err := newSecret()
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: rotate %s: %w", k.ID, err)
	}
	prefix := displayPrefix(secret)
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET secret_sha256 = $2, prefix = $3 WHERE id = $1 AND revoked_at IS NULL`,
		k.ID, hash(secret), prefix)
	if err != nil {
		return Key{}, "", fmt.Errorf("keys: rotate %s in %s: %w", k.ID, s.db.Dialect, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return Key{}, "", fmt.Errorf("keys: rotate %s: %w", k.ID, ErrRevoked) // revoked meanwhile
	}
	k.Prefix = prefix
	s.changed(ctx, k.ID)
	return k, secret, nil
}

// Lookup returns the key whose secret is secret, by its SHA-256 (a unique
// index: no scan), revoked and expired keys included: the caller decides
// what to answer. No such key is ErrNotFound, returned without a query when
// secret does not have a secret's shape ("sg-" and 40 base62 characters).
// Its errors never contain the secret.
func (s *Store) Lookup(ctx context.Context, secret string) (Key, error) {
	if !wellFormed(secret) {
		return Key{}, fmt.Errorf("keys: lookup: %w", ErrNotFound)
	}
	k, err := s.get(ctx, `secret_sha256 = $1`, hash(secret))
	if err != nil {
		return Key{}, fmt.Errorf("keys: lookup %s…: %w", displayPrefix(secret), err)
	}
	return k, nil
}

// timeArg converts t to the stored form of a time column: Unix
// microseconds on SQLite, a timestamptz on PostgreSQL; NULL when zero.
func (s *Store) timeArg(t time.Time) any {
	switch {
	case t.IsZero():
		return nil
	case s.db.Dialect == sqldb.SQLite:
		return t.UnixMicro()
	default:
		return t.UTC()
	}
}

// storedTime is t as the database gives it back: UTC, whole microseconds.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// scanTime reads a time column of either dialect; NULL is the zero time.
func scanTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case int64: // SQLite: Unix microseconds
		return time.UnixMicro(v).UTC(), nil
	case time.Time: // PostgreSQL: timestamptz
		return v.UTC(), nil
	default:
		return time.Time{}, fmt.Errorf("time column of type %T", v)
	}
}

// scan reads one row of columns.
func scan(row interface{ Scan(...any) error }) (Key, error) {
	var (
		k                         Key
		models                    string
		maxStreams, rpm, tpm      int64
		created, expires, revoked any
		tools                     sql.NullString
	)
	if err := row.Scan(&k.ID, &k.Name, &k.Prefix, &models, &maxStreams, &rpm, &tpm, &k.BudgetUSD, &k.BudgetPeriod, &created, &expires, &revoked, &k.Team, &tools); err != nil {
		return Key{}, err
	}
	k.MaxStreams, k.RPM, k.TPM = int(maxStreams), int(rpm), int(tpm)
	if err := json.Unmarshal([]byte(models), &k.Models); err != nil {
		return Key{}, fmt.Errorf("models of key %s: %w", k.ID, err)
	}
	if k.Models == nil {
		k.Models = []string{}
	}
	if tools.Valid {
		if err := json.Unmarshal([]byte(tools.String), &k.MCPTools); err != nil {
			return Key{}, fmt.Errorf("mcp_tools of key %s: %w", k.ID, err)
		}
		k.MCPTools = cloneTools(k.MCPTools)
	}
	var err error
	if k.CreatedAt, err = scanTime(created); err != nil {
		return Key{}, fmt.Errorf("created_at of key %s: %w", k.ID, err)
	}
	if k.ExpiresAt, err = scanTime(expires); err != nil {
		return Key{}, fmt.Errorf("expires_at of key %s: %w", k.ID, err)
	}
	if k.RevokedAt, err = scanTime(revoked); err != nil {
		return Key{}, fmt.Errorf("revoked_at of key %s: %w", k.ID, err)
	}
	return k, nil
}

// newSecret returns "sg-" and secretChars random base62 characters.
func newSecret() (string, error) {
	r, err := randomBase62(secretChars)
	if err != nil {
		return "", err
	}
	return secretPrefix + r, nil
}

// randomBase62 returns n characters drawn uniformly from base62 with
// crypto/rand: bytes of 248 and above are rejected, so that the modulo does
// not favour the first characters.
func randomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("random: %w", err)
		}
		for _, b := range buf {
			if b < 248 && len(out) < n { // 248 = 4 × 62
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out), nil
}

// hash is the stored form of a secret: its SHA-256 in hex.
func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// displayPrefix is the shown part of a well-formed secret.
func displayPrefix(secret string) string {
	return secret[:len(secretPrefix)+prefixChars]
}

// wellFormed reports whether secret has the shape newSecret gives.
func wellFormed(secret string) bool {
	if len(secret) != secretLen || !strings.HasPrefix(secret, secretPrefix) {
		return false
	}
	for i := len(secretPrefix); i < len(secret); i++ {
		if strings.IndexByte(base62, secret[i]) < 0 {
			return false
		}
	}
	return true
}

// describe quotes a ref for an error message, unless it is shaped like a
// secret (a caller mixing up its arguments): then only its display prefix.
func describe(ref string) string {
	if wellFormed(ref) {
		return displayPrefix(ref) + "…"
	}
	return strconv.Quote(ref)
}

// changesChannel is the PostgreSQL notification channel of key changes.
const changesChannel = "streamgate_keys"

// changed tells every process that Watches that key id changed. It is
// best-effort: when the notification fails the change still reaches the
// others when their cache expires (auth.DefaultCacheTTL).
func (s *Store) changed(ctx context.Context, id string) {
	_ = s.db.Notify(ctx, changesChannel, id)
}

// Watch calls changed whenever a key is revoked or rotated, by any process
// sharing the database (PostgreSQL LISTEN/NOTIFY), and after it lost its
// listening connection (when changes may have been missed), until ctx ends.
// It returns nil then. On SQLite it returns sqldb.ErrNoNotify at once: the
// processes sharing a SQLite file see changes when their cache expires.
// onError (may be nil) hears of each lost connection; Watch reconnects.
func (s *Store) Watch(ctx context.Context, changed func(), onError func(error)) error {
	return s.db.Listen(ctx, changesChannel, func(string) { changed() }, onError)
}
