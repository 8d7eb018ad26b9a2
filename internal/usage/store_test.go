package usage

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// storeCase opens a fresh, empty store of one kind; the store is closed and
// its data removed when the test ends.
type storeCase struct {
	name string
	open func(t *testing.T) Store
}

// stores is the table every store test runs over: the same body for SQLite
// and PostgreSQL.
var stores = []storeCase{
	{"sqlite", openTestSQLite},
	{"postgres", openTestPostgres},
}

func openTestSQLite(t *testing.T) Store {
	t.Helper()
	s, err := Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatalf("Open sqlite: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openTestPostgres opens the database of STREAMGATE_TEST_POSTGRES in a schema
// of its own (search_path), so that tests running in parallel never share a
// table, and drops the schema afterwards.
func openTestPostgres(t *testing.T) Store {
	t.Helper()
	dsn := testPostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// testPostgresDSN: see sqldbtest.PostgresDSN.
func testPostgresDSN(t *testing.T) string { return sqldbtest.PostgresDSN(t) }

// forEachStore runs body as a subtest per store kind.
func forEachStore(t *testing.T, body func(t *testing.T, s Store)) {
	t.Helper()
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			body(t, sc.open(t))
		})
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fullEntry has every field set to a value distinct from its zero value.
func fullEntry(id string, at time.Time) Entry {
	return Entry{
		ID:               id,
		RequestID:        "req-" + id,
		Time:             at,
		KeyID:            "team-a",
		Model:            "gpt-4.1",
		Route:            "local-sim/sim-fast",
		Attempts:         4, // two for the first token (hedged), one per continuation
		Continuations:    2,
		Hedged:           true,
		Stream:           true,
		Status:           200,
		Outcome:          OutcomeOK,
		InputTokens:      1234,
		CacheReadTokens:  1000,
		CacheWriteTokens: 200,
		OutputTokens:     987654,
		TokenSource:      "usage",
		CostUSD:          0.0123456789012345,
		TTFT:             123456789 * time.Nanosecond,
		Duration:         9*time.Second + 87654321*time.Nanosecond,
		Error:            "",
	}
}

func TestStoreRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		// Nanoseconds and a non-UTC zone: stores keep microseconds, in UTC.
		at := time.Date(2025, 3, 4, 5, 6, 7, 891234567, time.FixedZone("KST", 9*3600))
		failed := fullEntry("b", at.Add(time.Second))
		failed.Stream = false
		failed.Status = 502
		failed.Outcome = OutcomeUpstreamError
		failed.Error = "upstream local-sim: 503 Service Unavailable — 재시도"
		failed.TokenSource = "count"
		failed.Hedged = false
		failed.Continuations = 0
		want := []Entry{fullEntry("a", at), failed, {ID: "c", Time: at.Add(2 * time.Second)}}
		in := append([]Entry(nil), want...)
		if err := s.Insert(ctx, in); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		got, err := s.List(ctx, Filter{})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for i := range want {
			want[i].Time = want[i].Time.Truncate(time.Microsecond).UTC()
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List:\ngot  %+v\nwant %+v", got, want)
		}
		for i := range got {
			if got[i].Time.Location() != time.UTC {
				t.Errorf("entry %s: got location %v, want UTC", got[i].ID, got[i].Time.Location())
			}
		}
	})
}

func TestStoreInsertAssignsIDsAndIsIdempotent(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		batch := []Entry{fullEntry("", at), fullEntry("", at)}
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		if batch[0].ID == "" || batch[1].ID == "" || batch[0].ID == batch[1].ID {
			t.Fatalf("IDs after Insert: got %q and %q, want two distinct non-empty IDs", batch[0].ID, batch[1].ID)
		}
		// The same batch again (a retry after a lost commit reply) adds nothing.
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatalf("second Insert: %v", err)
		}
		if n, err := s.Count(ctx, Filter{}); err != nil || n != 2 {
			t.Errorf("Count: got %d, %v; want 2, nil", n, err)
		}
		if err := s.Insert(ctx, nil); err != nil {
			t.Errorf("Insert(nil): got %v, want nil", err)
		}
	})
}

func TestStoreLargeBatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		const n = 1234 // more than one multi-row INSERT statement
		batch := make([]Entry, n)
		at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range batch {
			batch[i] = fullEntry("", at.Add(time.Duration(i)*time.Millisecond))
		}
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		if got, err := s.Count(ctx, Filter{}); err != nil || got != n {
			t.Errorf("Count: got %d, %v; want %d, nil", got, err, n)
		}
	})
}

func TestStoreCleansUnstorableText(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		e := Entry{
			ID:    "x",
			Time:  time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			Model: "bad\xffmodel\x00",
			// Longer than maxErrorLen, with a 3-byte rune across the cut.
			Error:   strings.Repeat("a", maxErrorLen-1) + "한" + "tail",
			CostUSD: math.NaN(),
		}
		if err := s.Insert(ctx, []Entry{e}); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		got, err := s.List(ctx, Filter{})
		if err != nil || len(got) != 1 {
			t.Fatalf("List: got %d entries, %v; want 1, nil", len(got), err)
		}
		if want := "bad\uFFFDmodel"; got[0].Model != want {
			t.Errorf("Model: got %q, want %q", got[0].Model, want)
		}
		if want := strings.Repeat("a", maxErrorLen-1); got[0].Error != want {
			t.Errorf("Error: got %d bytes, want %d bytes of 'a'", len(got[0].Error), len(want))
		}
		if got[0].CostUSD != 0 {
			t.Errorf("CostUSD of NaN: got %v, want 0", got[0].CostUSD)
		}
	})
}

// TestStoreCostSaturates: a cost is stored in [0, $1e9] (usd.Clamp), so
// the ledger's sums, and the budgets loaded from them, stay finite: +Inf
// would make a key's spend +Inf for good and its reports unencodable.
func TestStoreCostSaturates(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		costs := []float64{math.Inf(1), math.MaxFloat64, -5, math.Inf(-1), 0.25}
		var in []Entry
		for i, c := range costs {
			in = append(in, Entry{ID: fmt.Sprint("c", i), Time: at, KeyID: "k", Model: "m", CostUSD: c})
		}
		if err := s.Insert(ctx, in); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		rows, err := s.Summarize(ctx, Filter{KeyID: "k"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("Summarize: got %d rows, %v; want 1, nil", len(rows), err)
		}
		if got, want := rows[0].CostUSD, 2e9+0.25; got != want {
			t.Errorf("sum of costs +Inf, MaxFloat64, -5, -Inf, 0.25: got %v, want %v", got, want)
		}
	})
}

func TestStoreFilterAndSummarize(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		mk := func(id, key, model, outcome string, min int, in, out int, cost float64) Entry {
			return Entry{ID: id, Time: t0.Add(time.Duration(min) * time.Minute), KeyID: key, Model: model,
				Outcome: outcome, InputTokens: in, OutputTokens: out, CostUSD: cost}
		}
		entries := []Entry{
			mk("1", "a", "m1", OutcomeOK, 0, 10, 100, 0.25),
			mk("2", "a", "m1", OutcomeTimeout, 1, 20, 0, 0),
			mk("3", "a", "m2", OutcomeOK, 2, 30, 300, 0.5),
			mk("4", "b", "m1", OutcomeClientCancelled, 3, 40, 4, 0.125),
			mk("5", "b", "m1", OutcomeOK, 4, 50, 500, 1),
			mk("6", "", "m1", OutcomeRejected, 5, 0, 0, 0),
		}
		if err := s.Insert(ctx, entries); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		ids := func(es []Entry) string {
			var b strings.Builder
			for _, e := range es {
				b.WriteString(e.ID)
			}
			return b.String()
		}
		listTests := []struct {
			name string
			f    Filter
			want string
		}{
			{"all", Filter{}, "123456"},
			{"since inclusive", Filter{Since: t0.Add(2 * time.Minute)}, "3456"},
			{"until exclusive", Filter{Until: t0.Add(2 * time.Minute)}, "12"},
			{"window", Filter{Since: t0.Add(time.Minute), Until: t0.Add(4 * time.Minute)}, "234"},
			{"key", Filter{KeyID: "b"}, "45"},
			{"model", Filter{Model: "m1"}, "12456"},
			{"key and model", Filter{KeyID: "a", Model: "m1"}, "12"},
			{"outcome", Filter{Outcome: OutcomeOK}, "135"},
			{"limit", Filter{Limit: 2}, "12"},
			{"no match", Filter{KeyID: "nobody"}, ""},
		}
		for _, tt := range listTests {
			got, err := s.List(ctx, tt.f)
			if err != nil {
				t.Fatalf("%s: List: %v", tt.name, err)
			}
			if ids(got) != tt.want {
				t.Errorf("%s: List IDs: got %q, want %q", tt.name, ids(got), tt.want)
			}
			wantCount := int64(len(tt.want))
			if tt.f.Limit > 0 {
				wantCount = int64(len(entries)) // Count ignores Limit
			}
			if n, err := s.Count(ctx, tt.f); err != nil || n != wantCount {
				t.Errorf("%s: Count: got %d, %v; want %d, nil", tt.name, n, err, wantCount)
			}
		}

		sum, err := s.Summarize(ctx, Filter{})
		if err != nil {
			t.Fatalf("Summarize: %v", err)
		}
		wantSum := []Summary{
			{KeyID: "", Model: "m1", Requests: 1, Failed: 1},
			{KeyID: "a", Model: "m1", Requests: 2, Failed: 1, InputTokens: 30, OutputTokens: 100, CostUSD: 0.25},
			{KeyID: "a", Model: "m2", Requests: 1, InputTokens: 30, OutputTokens: 300, CostUSD: 0.5},
			{KeyID: "b", Model: "m1", Requests: 2, Failed: 1, InputTokens: 90, OutputTokens: 504, CostUSD: 1.125},
		}
		if !reflect.DeepEqual(sum, wantSum) {
			t.Errorf("Summarize:\ngot  %+v\nwant %+v", sum, wantSum)
		}
		sum, err = s.Summarize(ctx, Filter{KeyID: "nobody"})
		if err != nil || sum == nil || len(sum) != 0 {
			t.Errorf("Summarize with no match: got %#v, %v; want empty non-nil slice, nil", sum, err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
	})
}

func TestOpenErrors(t *testing.T) {
	ctx := testCtx(t)
	tests := []struct {
		name, dsn string
		want      []string // substrings of the error
		notWant   string
	}{
		{"unknown scheme", "mysql://u:secret@host/db", []string{`unknown scheme "mysql"`}, "secret"},
		{"no scheme", "streamgate.db", []string{"no scheme"}, ""},
		{"empty sqlite path", "sqlite://", []string{"empty path"}, ""},
		{"sqlite directory missing", "sqlite://" + filepath.Join(t.TempDir(), "missing", "x.db"), []string{"open sqlite", "missing"}, ""},
		{"bad postgres dsn", "postgres://u:secret@127.0.0.1:notaport/db", []string{"open postgres"}, "secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.dsn)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q): got nil error, want one", tt.dsn)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open(%q): got error %q, want it to contain %q", tt.dsn, err, w)
				}
			}
			if tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
				t.Errorf("Open(%q): error %q reveals %q", tt.dsn, err, tt.notWant)
			}
		})
	}
}

func TestSQLiteReopenAndSchemaVersion(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Insert(ctx, []Entry{fullEntry("a", time.Now())}); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if n, err := s.Count(ctx, Filter{}); err != nil || n != 1 {
		t.Errorf("Count after reopen: got %d, %v; want 1, nil", n, err)
	}
	s.Close()

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var version int
	var mode string
	if err := db.QueryRow(`SELECT version FROM streamgate_schema WHERE component = 'usage'`).Scan(&version); err != nil || version != len(sqliteDialect.migrations) {
		t.Errorf("schema version: got %d, %v; want %d, nil", version, err, len(sqliteDialect.migrations))
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode: got %q, %v; want wal, nil", mode, err)
	}
	// A newer binary's compatible step: this one runs against it.
	if _, err := db.Exec(`UPDATE streamgate_schema SET version = $1 + 1 WHERE component = 'usage'`, version); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, "sqlite://"+path); err != nil {
		t.Fatalf("Open of a newer schema readable by this binary: %v", err)
	}
	s.Close()
	// A newer binary's step this one cannot read.
	if _, err := db.Exec(`UPDATE streamgate_schema SET version = 99, readable_from = 99 WHERE component = 'usage'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = Open(ctx, "sqlite://"+path)
	if err == nil {
		s.Close()
		t.Fatal("Open of a newer schema: got nil error, want one")
	}
	if !strings.Contains(err.Error(), "version 99") {
		t.Errorf("Open of a newer schema: got %q, want it to name version 99", err)
	}
}

func TestSQLiteMemory(t *testing.T) {
	ctx := testCtx(t)
	s, err := Open(ctx, "sqlite://:memory:")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.Insert(ctx, []Entry{fullEntry("a", time.Now()), fullEntry("b", time.Now())}); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	if n, err := s.Count(ctx, Filter{}); err != nil || n != 2 {
		t.Errorf("Count: got %d, %v; want 2, nil", n, err)
	}
}
