package usage

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// latestVersion is the schema version this binary writes. A change to it
// needs a migration test from the version before.
const latestVersion = 7

func TestSchemaLatestVersion(t *testing.T) {
	for _, d := range []*dialect{sqliteDialect, postgresDialect} {
		if got := len(d.migrations); got != latestVersion {
			t.Errorf("%s: got %d migrations, want %d", d.name, got, latestVersion)
		}
	}
	if got := len(strings.Split(columns, ",")); got != numColumns {
		t.Errorf("columns: got %d names, want numColumns = %d", got, numColumns)
	}
}

// migrationCase opens a raw connection to an empty database of one kind,
// closed when the test ends, and the DSN that Open takes for it.
type migrationCase struct {
	name string
	d    *dialect
	open func(t *testing.T) (dsn string, db *sql.DB)
}

var migrationCases = []migrationCase{
	{"sqlite", sqliteDialect, func(t *testing.T) (string, *sql.DB) {
		path := filepath.Join(t.TempDir(), "old.db")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return "sqlite://" + path, db
	}},
	{"postgres", postgresDialect, func(t *testing.T) (string, *sql.DB) {
		dsn := testPostgresDSN(t)
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		db := stdlib.OpenDB(*cfg)
		t.Cleanup(func() { db.Close() })
		return dsn, db
	}},
}

// oldLedger creates the schema of version (1 to 4) as a binary of that
// version left it, migrations[:version], and stores entries through the
// columns it had.
func oldLedger(ctx context.Context, t *testing.T, db *sql.DB, d *dialect, version int, entries []Entry) {
	t.Helper()
	stmts := []string{
		`CREATE TABLE streamgate_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)`,
		`INSERT INTO streamgate_schema (component, version) VALUES ('usage', ` + strconv.Itoa(version) + `)`,
	}
	for _, m := range d.migrations[:version] {
		stmts = append(stmts, m...)
	}
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("version-%d schema: %s: %v", version, stmt, err)
		}
	}
	for _, e := range entries {
		if _, err := db.ExecContext(ctx, oldInsertSQL(version), oldArgs(d, version, e)...); err != nil {
			t.Fatalf("version-%d row %s: %v", version, e.ID, err)
		}
	}
}

// insertV2SQL is the single-row INSERT of schema versions 1 and 2.
func insertV2SQL() string { return oldInsertSQL(2) }

// oldInsertSQL is the single-row INSERT of schema version (1, 2 or 3).
func oldInsertSQL(version int) string {
	cols, n := columnsV2, 17
	switch version {
	case 3:
		cols, n = columnsV2+", hedged, continuations", 19
	case 4, 5:
		cols, n = columnsV2+", hedged, continuations, cache_read_tokens, cache_write_tokens", 21
	case 6:
		cols, n = columnsV2+", hedged, continuations, cache_read_tokens, cache_write_tokens, team, provider_key", 23
	}
	var b strings.Builder
	b.WriteString("INSERT INTO usage_entries (" + cols + ") VALUES (")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("$" + strconv.Itoa(i+1))
	}
	b.WriteByte(')')
	return b.String()
}

// oldArgs are e's values for oldInsertSQL(version) as a binary of version
// wrote them: version 1 stored a missing TTFT as 0; version 3 added
// hedged and continuations.
func oldArgs(d *dialect, version int, e Entry) []any {
	ttft := ttftArg(e.TTFT)
	if version == 1 {
		ttft = int64(e.TTFT)
	}
	args := []any{e.ID, e.RequestID, d.timeArg(e.Time), e.KeyID, e.Model, e.Route, int64(e.Attempts), e.Stream,
		int64(e.Status), e.Outcome, int64(e.InputTokens), int64(e.OutputTokens), e.TokenSource, e.CostUSD,
		ttft, int64(e.Duration), e.Error}
	if version >= 3 {
		args = append(args, e.Hedged, int64(e.Continuations))
	}
	if version >= 4 {
		args = append(args, int64(e.CacheReadTokens), int64(e.CacheWriteTokens))
	}
	if version >= 6 {
		args = append(args, e.Team, e.ProviderKey)
	}
	return args
}

func schemaVersion(ctx context.Context, t *testing.T, db *sql.DB) int {
	t.Helper()
	var version int
	if err := db.QueryRowContext(ctx, `SELECT version FROM streamgate_schema WHERE component = 'usage'`).Scan(&version); err != nil {
		t.Fatalf("schema version: %v", err)
	}
	return version
}

// TestMigrateTTFTNullable: a version-1 ledger (ttft_ns NOT NULL, 0 for a
// non-stream) opened by this version becomes the latest: the zero TTFTs are
// NULL (no first token), the others kept, every row and index still there,
// and a new non-stream entry is stored with a NULL TTFT.
func TestMigrateTTFTNullable(t *testing.T) {
	for _, tt := range migrationCases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			dsn, db := tt.open(t)
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			oldLedger(ctx, t, db, tt.d, 1, []Entry{
				{ID: "non-stream", Time: at, Status: 200, Outcome: OutcomeOK},
				{ID: "stream", Time: at, Stream: true, Status: 200, Outcome: OutcomeOK, TTFT: 5 * time.Millisecond},
			})

			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("Open of a version-1 ledger: %v", err)
			}
			defer s.Close()
			if err := s.Insert(ctx, []Entry{{ID: "new-non-stream", Time: at, Status: 200, Outcome: OutcomeOK}}); err != nil {
				t.Fatal(err)
			}
			if v := schemaVersion(ctx, t, db); v != latestVersion {
				t.Errorf("version: got %d, want %d", v, latestVersion)
			}
			var nulls, rows int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) - COUNT(ttft_ns) FROM usage_entries`).Scan(&rows, &nulls); err != nil || rows != 3 || nulls != 2 {
				t.Errorf("rows, NULL TTFTs: got %d, %d, %v; want 3, 2", rows, nulls, err)
			}
			got, err := s.List(ctx, Filter{})
			if err != nil {
				t.Fatal(err)
			}
			ttft := map[string]time.Duration{}
			for _, e := range got {
				ttft[e.ID] = e.TTFT
				if e.Hedged || e.Continuations != 0 {
					t.Errorf("entry %s: got Hedged %v, Continuations %d; want false, 0", e.ID, e.Hedged, e.Continuations)
				}
			}
			if ttft["stream"] != 5*time.Millisecond || ttft["non-stream"] != 0 || ttft["new-non-stream"] != 0 || len(ttft) != 3 {
				t.Errorf("TTFTs after migration: got %v", ttft)
			}
			if n, err := s.Count(ctx, Filter{KeyID: ""}); err != nil || n != 3 {
				t.Errorf("Count: got %d, %v; want 3", n, err)
			}
		})
	}
}

// TestMigrateHedgedContinuations: a version-2 ledger with rows opened by this
// version becomes version 3: every row kept as it was, neither hedged nor
// continued; new entries keep Hedged and Continuations; and a version-2
// binary still running during a rolling upgrade (its INSERT names the
// version-2 columns only) can still write, its rows read back as neither.
func TestMigrateHedgedContinuations(t *testing.T) {
	for _, tt := range migrationCases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			dsn, db := tt.open(t)
			at := time.Date(2026, 2, 3, 4, 5, 6, 789000, time.UTC)
			failed := fullEntry("v2-failed", at.Add(time.Second))
			failed.Status, failed.Outcome, failed.Error, failed.TTFT = 502, OutcomeUpstreamError, "upstream local-sim: 503", 0
			old := []Entry{fullEntry("v2-ok", at), failed}
			for i := range old {
				old[i].Hedged, old[i].Continuations = false, 0 // a version-2 binary had neither
				old[i].CacheReadTokens, old[i].CacheWriteTokens = 0, 0
			}
			oldLedger(ctx, t, db, tt.d, 2, old)

			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("Open of a version-2 ledger: %v", err)
			}
			defer s.Close()
			if v := schemaVersion(ctx, t, db); v != latestVersion {
				t.Errorf("version: got %d, want %d", v, latestVersion)
			}
			hedged := fullEntry("v3-hedged", at.Add(2*time.Second))
			hedged.Hedged, hedged.Continuations = true, 2
			if err := s.Insert(ctx, []Entry{hedged}); err != nil {
				t.Fatalf("Insert after migration: %v", err)
			}
			fromV2 := Entry{ID: "v2-binary", Time: at.Add(3 * time.Second), Status: 200, Outcome: OutcomeOK}
			if _, err := db.ExecContext(ctx, insertV2SQL(), oldArgs(tt.d, 2, fromV2)...); err != nil {
				t.Fatalf("version-2 INSERT into a version-3 ledger: %v", err)
			}

			got, err := s.List(ctx, Filter{})
			if err != nil {
				t.Fatal(err)
			}
			want := append(old, hedged, fromV2)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("List after migration:\ngot  %+v\nwant %+v", got, want)
			}
			if n, err := s.Count(ctx, Filter{}); err != nil || n != 4 {
				t.Errorf("Count: got %d, %v; want 4", n, err)
			}
		})
	}
}

// TestMigrateCacheTokens: a ledger of every earlier version, with rows,
// opened by this version becomes the latest: every row kept as it was,
// with no cache reads or writes; a new entry keeps its cache tokens, which
// List and Report give back; and a binary of the version before still
// running during a rolling upgrade (its INSERT names its own columns only)
// can still write, its rows read back without cache tokens.
func TestMigrateCacheTokens(t *testing.T) {
	for _, tt := range migrationCases {
		for version := 1; version < latestVersion; version++ {
			t.Run(tt.name+"/from-v"+strconv.Itoa(version), func(t *testing.T) {
				ctx := testCtx(t)
				dsn, db := tt.open(t)
				at := time.Date(2026, 3, 4, 5, 6, 7, 890000, time.UTC)
				old := []Entry{fullEntry("old-ok", at)}
				for i := range old {
					old[i].CacheReadTokens, old[i].CacheWriteTokens = 0, 0
					if version < 3 {
						old[i].Hedged, old[i].Continuations = false, 0
					}
				}
				oldLedger(ctx, t, db, tt.d, version, old)

				s, err := Open(ctx, dsn)
				if err != nil {
					t.Fatalf("Open of a version-%d ledger: %v", version, err)
				}
				defer s.Close()
				if v := schemaVersion(ctx, t, db); v != latestVersion {
					t.Errorf("version: got %d, want %d", v, latestVersion)
				}
				cached := fullEntry("v4-cached", at.Add(time.Second))
				cached.InputTokens, cached.CacheReadTokens, cached.CacheWriteTokens = 50_000, 45_000, 4_000
				if err := s.Insert(ctx, []Entry{cached}); err != nil {
					t.Fatalf("Insert after migration: %v", err)
				}
				fromOld := Entry{ID: "old-binary", Time: at.Add(2 * time.Second), Model: "gpt-4.1", Status: 200, Outcome: OutcomeOK, InputTokens: 7}
				if _, err := db.ExecContext(ctx, oldInsertSQL(version), oldArgs(tt.d, version, fromOld)...); err != nil {
					t.Fatalf("version-%d INSERT into a version-%d ledger: %v", version, latestVersion, err)
				}

				got, err := s.List(ctx, Filter{})
				if err != nil {
					t.Fatal(err)
				}
				want := append(old, cached, fromOld)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("List after migration:\ngot  %+v\nwant %+v", got, want)
				}
				rows, err := Report(ctx, s, ReportQuery{By: "model"})
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) != 1 || rows[0].InputTokens != 1234+50_000+7 || rows[0].CacheReadTokens != 45_000 || rows[0].CacheWriteTokens != 4_000 {
					t.Errorf("Report after migration: got %+v, want input 51241, cache reads 45000, writes 4000", rows)
				}
			})
		}
	}
}

// TestMigrateRequestIDIndex: a version-4 ledger opened by this version gets
// the index on request_id (version 5), which a lookup by id then uses.
func TestMigrateRequestIDIndex(t *testing.T) {
	for _, tt := range migrationCases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			dsn, db := tt.open(t)
			at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
			oldLedger(ctx, t, db, tt.d, 4, []Entry{fullEntry("v4-row", at)})
			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("Open of a version-4 ledger: %v", err)
			}
			defer s.Close()
			if v := schemaVersion(ctx, t, db); v != latestVersion {
				t.Errorf("version: got %d, want %d", v, latestVersion)
			}
			q := `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'usage_entries_request_id'`
			plan := `EXPLAIN QUERY PLAN SELECT id FROM usage_entries WHERE request_id = 'x'`
			if tt.name == "postgres" {
				q = `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'usage_entries_request_id'`
				plan = ""
			}
			var n int
			if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil || n != 1 {
				t.Fatalf("index usage_entries_request_id: got %d, %v; want it created", n, err)
			}
			if plan != "" {
				var id, parent, unused int
				var detail string
				if err := db.QueryRowContext(ctx, plan).Scan(&id, &parent, &unused, &detail); err != nil || !strings.Contains(detail, "usage_entries_request_id") {
					t.Errorf("a lookup by request id: plan %q, %v; want it to use the index", detail, err)
				}
			}
		})
	}
}

// TestMigrateTeamProviderKey: a version-5 ledger opened by this version
// keeps its rows (team and provider key empty) and stores both for new ones.
func TestMigrateTeamProviderKey(t *testing.T) {
	for _, tt := range migrationCases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			dsn, db := tt.open(t)
			at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
			old := fullEntry("v5-row", at)
			oldLedger(ctx, t, db, tt.d, 5, []Entry{old})
			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("Open of a version-5 ledger: %v", err)
			}
			defer s.Close()
			if v := schemaVersion(ctx, t, db); v != latestVersion {
				t.Errorf("version: got %d, want %d", v, latestVersion)
			}
			fresh := fullEntry("v6-row", at.Add(time.Second))
			if err := s.Insert(ctx, []Entry{fresh}); err != nil {
				t.Fatal(err)
			}
			got, err := s.List(ctx, Filter{})
			if err != nil || len(got) != 2 {
				t.Fatalf("List: %d entries, %v; want 2", len(got), err)
			}
			old.Team, old.ProviderKey = "", ""
			for i, want := range []Entry{old, fresh} {
				if got[i].ID != want.ID || got[i].Team != want.Team || got[i].ProviderKey != want.ProviderKey {
					t.Errorf("row %s: team %q provider key %q; want %q %q", want.ID, got[i].Team, got[i].ProviderKey, want.Team, want.ProviderKey)
				}
			}
		})
	}
}
