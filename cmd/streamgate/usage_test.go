package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
	"github.com/streamgate/streamgate/internal/usage"
)

// usageLedger creates a SQLite ledger with entries of the last hours and one
// from 40 days ago (outside the default window), and returns its DSN.
func usageLedger(t *testing.T) string {
	t.Helper()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "ledger.db")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := usage.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("usage.Open: %v", err)
	}
	defer s.Close()
	now := time.Now()
	entries := []usage.Entry{
		{Time: now.Add(-time.Hour), KeyID: "app", Model: "m1", Route: "p/a", Attempts: 1, Outcome: usage.OutcomeOK, InputTokens: 100, CacheReadTokens: 60, CacheWriteTokens: 10, OutputTokens: 1000, CostUSD: 1.5},
		{Time: now.Add(-2 * time.Hour), KeyID: "app", Model: "m1", Route: "p/b", Attempts: 2, Outcome: usage.OutcomeOK, InputTokens: 100, OutputTokens: 500, CostUSD: 0.5},
		{Time: now.Add(-3 * time.Hour), KeyID: "dev", Model: "m2", Route: "p/a", Attempts: 2, Hedged: true, Continuations: 1, Outcome: usage.OutcomeOK, InputTokens: 10, CacheReadTokens: 4, OutputTokens: 20, CostUSD: 1},
		{Time: now.Add(-4 * time.Hour), KeyID: "dev", Model: "m2", Attempts: 1, Outcome: usage.OutcomeUpstreamError},
		{Time: now.Add(-40 * 24 * time.Hour), KeyID: "old", Model: "m1", Route: "p/a", Attempts: 1, Outcome: usage.OutcomeOK, InputTokens: 5, OutputTokens: 5, CostUSD: 100},
	}
	if err := s.Insert(ctx, entries); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	return dsn
}

// The JSON shape end to end: groups, total, projection and window.
func TestUsageCLIJSON(t *testing.T) {
	db := usageLedger(t)
	code, out, errs := runCLI(t, nil, "usage", "--database", db, "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	keys := slices.Sorted(maps.Keys(rep))
	wantKeys := []string{"by", "groups", "projected_monthly_usd", "projection_days", "since", "total", "until"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("keys: got %v, want %v", keys, wantKeys)
	}
	var got usage.Breakdown
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	wantGroups := []usage.Group{
		{Group: "m1", Totals: usage.Totals{Requests: 2, Fallbacks: 1, InputTokens: 200, CacheReadTokens: 60, CacheWriteTokens: 10, CacheReadShare: 0.3, OutputTokens: 1500, CostUSD: 2}},
		{Group: "m2", Totals: usage.Totals{Requests: 2, Failed: 1, ErrorRate: 0.5, Hedged: 1, Continued: 1, InputTokens: 10, CacheReadTokens: 4, CacheReadShare: 0.4, OutputTokens: 20, CostUSD: 1}},
	}
	if got.By != "model" || !reflect.DeepEqual(got.Groups, wantGroups) {
		t.Errorf("by %q, groups %+v; want model, %+v", got.By, got.Groups, wantGroups)
	}
	wantTotal := usage.Totals{Requests: 4, Failed: 1, ErrorRate: 0.25, Fallbacks: 1, Hedged: 1, Continued: 1, InputTokens: 210, CacheReadTokens: 64, CacheWriteTokens: 10, CacheReadShare: 64.0 / 210, OutputTokens: 1520, CostUSD: 3}
	if got.Total != wantTotal {
		t.Errorf("total: got %+v, want %+v", got.Total, wantTotal)
	}
	since, err1 := time.Parse(time.RFC3339, got.Since)
	until, err2 := time.Parse(time.RFC3339, got.Until)
	if err1 != nil || err2 != nil || until.Sub(since).Round(time.Second) != 30*24*time.Hour {
		t.Errorf("window %s to %s (%v, %v); want 30 days", got.Since, got.Until, err1, err2)
	}
	if math.Abs(got.ProjectionDays-30) > 0.001 || math.Abs(got.ProjectedMonthlyUSD-3) > 0.001 {
		t.Errorf("projection: got $%v over %v days, want $3 over 30", got.ProjectedMonthlyUSD, got.ProjectionDays)
	}

	// A window of one day scales its cost by 30; --until bounds it.
	code, out, errs = runCLI(t, nil, "usage", "--database", db, "--json", "--since", "1d", "--by", "key")
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--since 1d: exit %d, %v, stderr %s", code, err, errs)
	}
	if len(got.Groups) != 2 || got.Groups[0].Group != "app" || got.Groups[1].Group != "dev" || math.Abs(got.ProjectedMonthlyUSD-90) > 0.01 {
		t.Errorf("--since 1d --by key: groups %+v, projected %v; want app, dev and $90", got.Groups, got.ProjectedMonthlyUSD)
	}
	code, out, _ = runCLI(t, nil, "usage", "--database", db, "--json", "--since", "60d", "--until", "30d")
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Total.Requests != 1 || got.Total.CostUSD != 100 {
		t.Errorf("--since 60d --until 30d: exit %d, %v, total %+v; want the old entry alone", code, err, got.Total)
	}
	code, out, _ = runCLI(t, nil, "usage", "--database", db, "--json", "--since", "2001-01-01", "--until", "2001-02-01T00:00:00Z")
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Groups == nil || len(got.Groups) != 0 || got.ProjectedMonthlyUSD != 0 {
		t.Errorf("empty window: exit %d, %v, %+v; want [] groups and $0", code, err, got)
	}
}

func TestUsageCLITable(t *testing.T) {
	db := usageLedger(t)
	code, out, errs := runCLI(t, nil, "usage", "--database", db, "--by", "route")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines, want header, (none), p/a, p/b, total and the projection:\n%s", len(lines), out)
	}
	for i, want := range [][]string{
		{"route", "requests", "refused", "failed", "error", "rate", "cancelled", "fallbacks", "hedged", "continued", "input", "tok", "cache", "read", "cache", "write", "read", "share", "output", "tok", "cost", "USD", "saved", "USD"},
		{"(none)", "1", "0", "1", "100.00%", "0", "0", "0", "0", "0", "0", "0", "0.00%", "0", "0.00", "0.00"},
		{"p/a", "2", "0", "0", "0.00%", "0", "0", "1", "1", "110", "64", "10", "58.18%", "1020", "2.50", "0.00"},
		{"p/b", "1", "0", "0", "0.00%", "0", "1", "0", "0", "100", "0", "0", "0.00%", "500", "0.50", "0.00"},
		{"total", "4", "0", "1", "25.00%", "0", "1", "1", "1", "210", "64", "10", "30.48%", "1520", "3.00", "0.00"},
	} {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("line %d: got %q, want fields %q", i, lines[i], want)
		}
		// Aligned: every row as wide as the header.
		if len(lines[i]) != len(lines[0]) {
			t.Errorf("line %d: width %d, want %d (aligned):\n%s", i, len(lines[i]), len(lines[0]), out)
		}
	}
	if !strings.Contains(lines[5], "projected monthly cost $3.00") || !strings.Contains(lines[5], "30 days") {
		t.Errorf("projection line: got %q, want $3.00 over 30 days", lines[5])
	}
}

func TestUsageCLICSV(t *testing.T) {
	db := usageLedger(t)
	code, out, errs := runCLI(t, nil, "usage", "--database", db, "--by", "day", "--csv")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	wantHeader := []string{"day", "requests", "failed", "error_rate", "fallbacks", "hedged", "continued", "input_tokens", "output_tokens", "cost_usd",
		"cache_read_tokens", "cache_write_tokens", "refused", "cancelled", "cache_read_share", "savings_usd"}
	if len(records) < 2 || !reflect.DeepEqual(records[0], wantHeader) {
		t.Fatalf("got %q, want header %q and rows", records, wantHeader)
	}
	// The entries of the last 4 hours fall on one or two UTC days.
	var requests, cacheRead, cacheWrite int
	for _, r := range records[1:] {
		if _, err := time.Parse(time.DateOnly, r[0]); err != nil {
			t.Errorf("row %q: day not a date", r)
		}
		n, err := strconv.Atoi(r[1])
		if err != nil {
			t.Errorf("row %q: requests not a number", r)
		}
		requests += n
		read, err1 := strconv.Atoi(r[10])
		write, err2 := strconv.Atoi(r[11])
		if err1 != nil || err2 != nil {
			t.Errorf("row %q: cache tokens not numbers", r)
		}
		cacheRead, cacheWrite = cacheRead+read, cacheWrite+write
	}
	if requests != 4 || len(records) > 3 || cacheRead != 64 || cacheWrite != 10 {
		t.Errorf("got %d rows with %d requests, %d cache reads, %d writes; want 1 or 2 days with 4, 64, 10:\n%s", len(records)-1, requests, cacheRead, cacheWrite, out)
	}
}

// The database comes from --config (secrets unset), or from the embedded
// default with STREAMGATE_DATABASE; a missing SQLite file is not created.
func TestUsageCLIDatabaseFromConfig(t *testing.T) {
	db := usageLedger(t)
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := "database: " + db + `
providers:
  - {name: openai, kind: openai, base_url: https://api.openai.com/v1, api_key: ${OPENAI_API_KEY}}
keys:
  - {name: app, key: ${APP_KEY}}
models:
  - {name: m1, routes: [{provider: openai, model: gpt-4.1}]}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, nil, "usage", "--config", cfg, "--csv"); code != 0 || !strings.Contains(out, "m1,2,") {
		t.Errorf("--config: exit %d, out %q, stderr %s; want m1's row", code, out, errs)
	}
	if code, out, errs := runCLI(t, map[string]string{"STREAMGATE_DATABASE": db}, "usage", "--csv"); code != 0 || !strings.Contains(out, "m2,2,") {
		t.Errorf("default config with STREAMGATE_DATABASE: exit %d, out %q, stderr %s; want m2's row", code, out, errs)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	code, _, errs := runCLI(t, nil, "usage", "--database", "sqlite://"+missing)
	if code != 1 || !strings.Contains(errs, "no database at "+missing) || !strings.Contains(errs, "--database") || strings.Count(errs, "\n") != 1 {
		t.Errorf("missing ledger: exit %d, stderr %q; want 1 and one line naming %s and how to choose another", code, errs, missing)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("missing ledger: %s was created", missing)
	}
}

func TestUsageCLIBadFlags(t *testing.T) {
	db := usageLedger(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown by", []string{"--by", "user"}, "key, model, day, route"},
		{"bad since", []string{"--since", "last week"}, "30d, 720h"},
		{"negative since", []string{"--since", "-3d"}, "a date (2026-11-01)"},
		{"bad until", []string{"--until", "2026-13-01"}, "--until"},
		{"since after until", []string{"--since", "1d", "--until", "2d"}, "is not before --until"},
		{"json and csv", []string{"--json", "--csv"}, "exclude each other"},
		{"unknown flag", []string{"--format", "xml"}, "unknown flag"},
		{"argument", []string{"extra"}, "extra"},
	} {
		code, out, errs := runCLI(t, nil, append([]string{"usage", "--database", db}, tt.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, tt.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and one line naming %q", tt.name, code, out, errs, tt.want)
		}
	}
}

// The gateway's own refusals are counted apart and not as failures; the
// error rate is over what was served; a ledger an hour old projects an
// hour's spend rate (issue 25: 54 % errors, $0.00 projected).
func TestUsageCLIRefusedAndProjection(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "ledger.db")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := usage.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("usage.Open: %v", err)
	}
	now := time.Now()
	entries := []usage.Entry{
		{Time: now.Add(-time.Hour), KeyID: "app", Model: "m", Outcome: usage.OutcomeOK},
		{Time: now.Add(-30 * time.Minute), KeyID: "app", Model: "m", Outcome: usage.OutcomeOK, CostUSD: 3.47},
		{Time: now.Add(-25 * time.Minute), KeyID: "app", Model: "m", Outcome: usage.OutcomeClientCancelled, Status: 499},
		{Time: now.Add(-20 * time.Minute), Model: "m", Outcome: usage.OutcomeRejected, Status: 401},
		{Time: now.Add(-20 * time.Minute), KeyID: "app", Model: "m", Outcome: usage.OutcomeRejected, Status: 429},
		{Time: now.Add(-20 * time.Minute), KeyID: "app", Model: "m", Outcome: usage.OutcomeRejected, Status: 404},
		{Time: now.Add(-10 * time.Minute), KeyID: "app", Model: "m", Outcome: usage.OutcomeUpstreamError, Status: 502},
	}
	if err := s.Insert(ctx, entries); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	s.Close()

	code, out, errs := runCLI(t, nil, "usage", "--database", dsn, "--json")
	var rep usage.Breakdown
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %q (%v), stderr %s", code, out, err, errs)
	}
	want := usage.Totals{Requests: 7, Refused: 3, Cancelled: 1, Failed: 1, ErrorRate: 0.25, CostUSD: 3.47}
	if rep.Total != want {
		t.Errorf("total: got %+v, want %+v", rep.Total, want)
	}
	if math.Abs(rep.ProjectionDays*24-1) > 0.01 || math.Abs(rep.ProjectedMonthlyUSD-3.47*720) > 1 {
		t.Errorf("projection: got $%v over %v days, want about $%v over an hour", rep.ProjectedMonthlyUSD, rep.ProjectionDays, 3.47*720)
	}
	code, out, errs = runCLI(t, nil, "usage", "--database", dsn)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 4 {
		t.Fatalf("table: exit %d, stderr %s, got:\n%s", code, errs, out)
	}
	if got, want := strings.Fields(lines[2])[:6], []string{"total", "7", "3", "1", "25.00%", "1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("total line: got %q, want it to start %q", lines[2], want)
	}
	if !strings.Contains(lines[3], "projected monthly cost $2498") || !strings.Contains(lines[3], "over 1 hour") {
		t.Errorf("projection line: got %q, want about $2498 over 1 hour", lines[3])
	}
}

// The database is chosen as documented and named on stderr: --database,
// STREAMGATE_DATABASE, --config, ./streamgate.yaml, sqlite://streamgate.db;
// a read never creates it (issue 25: `keys list` from another directory
// created an empty database and exited 0).
func TestCLIDatabaseChoice(t *testing.T) {
	db := usageLedger(t)
	path := strings.TrimPrefix(db, "sqlite://")
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{{"keys", "list"}, {"keys", "show", "app"}, {"usage"}, {"keys", "revoke", "app"}} {
		code, out, errs := runCLI(t, nil, args...)
		abs := filepath.Join(dir, "streamgate.db")
		if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no database at "+abs) ||
			!strings.Contains(errs, "--database") || !strings.Contains(errs, "STREAMGATE_DATABASE") {
			t.Errorf("%v without a database: exit %d, stdout %q, stderr %q; want 1 and one line naming %s and the ways to choose", args, code, out, errs, abs)
		}
		if _, err := os.Stat(abs); err == nil {
			t.Fatalf("%v created %s", args, abs)
		}
	}

	// ./streamgate.yaml in the working directory.
	yaml := "database: " + db + `
providers: [{name: sim, kind: sim}]
models: [{name: m1, routes: [{provider: sim, model: sim-fast}]}]
`
	if err := os.WriteFile("streamgate.yaml", []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, nil, "usage", "--csv")
	if code != 0 || !strings.Contains(out, "m1,2,") || errs != "streamgate: database: "+path+" (sqlite; from ./streamgate.yaml)\nstreamgate: prices: from ./streamgate.yaml (savings at its current prices)\n" {
		t.Errorf("./streamgate.yaml: exit %d, out %q, stderr %q; want m1's row and the database named", code, out, errs)
	}
	// STREAMGATE_DATABASE wins over it, --database over both.
	other := "sqlite://" + filepath.Join(dir, "other.db")
	code, _, errs = runCLI(t, map[string]string{"STREAMGATE_DATABASE": other}, "keys", "list")
	if code != 1 || !strings.Contains(errs, "other.db (sqlite://") || !strings.Contains(errs, "from STREAMGATE_DATABASE") {
		t.Errorf("STREAMGATE_DATABASE: exit %d, stderr %q; want its missing file named", code, errs)
	}
	code, _, errs = runCLI(t, map[string]string{"STREAMGATE_DATABASE": other}, "keys", "list", "--database", db)
	if code != 0 || errs != "streamgate: database: "+path+" (sqlite; from --database)\n" {
		t.Errorf("--database: exit %d, stderr %q; want it named", code, errs)
	}
	// A command that writes may create the file, and says so.
	code, _, errs = runCLI(t, nil, "keys", "create", "--name", "new", "--database", other)
	if code != 0 || !strings.Contains(errs, "other.db (sqlite, a new file; from --database)") {
		t.Errorf("keys create on a new file: exit %d, stderr %q", code, errs)
	}
}

func TestDescribeDSN(t *testing.T) {
	for _, tt := range []struct{ dsn, name, kind string }{
		{"postgres://sg:hunter2@db:5432/streamgate?sslmode=disable", "postgres://sg:xxxxx@db:5432/streamgate?sslmode=disable", "postgresql"},
		{"postgresql://db/streamgate", "postgresql://db/streamgate", "postgresql"},
		{"sqlite:///var/lib/sg.db?_pragma=synchronous(FULL)", "/var/lib/sg.db", "sqlite"},
		{"sqlite://:memory:", "sqlite://:memory:", "sqlite"},
		{"mysql://root:pw@h/db", "(not shown)", "unknown scheme"},
	} {
		if name, kind, _ := describeDSN(tt.dsn); name != tt.name || kind != tt.kind {
			t.Errorf("describeDSN(%q): got %q, %q; want %q, %q", tt.dsn, name, kind, tt.name, tt.kind)
		}
	}
}

// --by team and --by provider_key: each group's totals are the ledger's
// entries summed by hand, the savings at the prices of --config, on SQLite
// and on PostgreSQL.
func TestUsageCLITeamsAndSavings(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			dsn := "sqlite://" + filepath.Join(t.TempDir(), "ledger.db")
			if kind == "postgres" {
				dsn = sqldbtest.PostgresDSN(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := usage.Open(ctx, dsn)
			if err != nil {
				t.Fatalf("usage.Open: %v", err)
			}
			now := time.Now()
			teams, pkeys, models := []string{"red", "", "blue"}, []string{"org-a", "org-b", ""}, []string{"m1", "m2", "gone"}
			var entries []usage.Entry
			for i := range 24 {
				in := 1000 * (i + 1)
				entries = append(entries, usage.Entry{Time: now.Add(-time.Duration(i+1) * time.Minute), KeyID: "k", Team: teams[i%3],
					ProviderKey: pkeys[i/3%3], Model: models[i%2+i/12], Route: "p/a", Attempts: 1, Outcome: usage.OutcomeOK,
					InputTokens: in, CacheReadTokens: in / 2 * (i % 2), CacheWriteTokens: in / 4 * (1 - i%2), OutputTokens: 10, CostUSD: 0.25})
			}
			if err := s.Insert(ctx, entries); err != nil {
				t.Fatalf("Insert: %v", err)
			}
			s.Close()
			cfg := filepath.Join(t.TempDir(), "gateway.yaml")
			yaml := `providers: [{name: sim, kind: sim}]
models:
  - {name: m1, routes: [{provider: sim, model: sim-fast}], price: {input: 2, output: 8, cached_input: 0.5, cache_write: 2.5}}
  - {name: m2, routes: [{provider: sim, model: sim-fast}], price: {input: 3, output: 15, cached_input: 0.3}}
`
			if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			// By hand: m1 saves 1.5 per 1M read, costs 0.5 more per 1M
			// written; m2 saves 2.7 per 1M read, writes at the input price;
			// "gone" is not in the config: nothing.
			saved := func(e usage.Entry) float64 {
				switch e.Model {
				case "m1":
					return (1.5*float64(e.CacheReadTokens) - 0.5*float64(e.CacheWriteTokens)) / 1e6
				case "m2":
					return 2.7 * float64(e.CacheReadTokens) / 1e6
				}
				return 0
			}
			for _, by := range []string{"team", "provider_key"} {
				code, out, errs := runCLI(t, nil, "usage", "--database", dsn, "--config", cfg, "--by", by, "--json")
				if code != 0 {
					t.Fatalf("--by %s: exit %d, stderr %s", by, code, errs)
				}
				if !strings.Contains(errs, "prices: from --config "+cfg) {
					t.Errorf("--by %s: stderr %q, want the prices' config named", by, errs)
				}
				var got usage.Breakdown
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("decode %q: %v", out, err)
				}
				want := map[string]*usage.Totals{}
				var total usage.Totals
				for _, e := range entries {
					g := e.Team
					if by == "provider_key" {
						g = e.ProviderKey
					}
					if g == "" {
						g = "(none)" // as the table says it
					}
					if want[g] == nil {
						want[g] = &usage.Totals{}
					}
					for _, w := range []*usage.Totals{want[g], &total} {
						w.Requests++
						w.InputTokens += int64(e.InputTokens)
						w.OutputTokens += int64(e.OutputTokens)
						w.CacheReadTokens += int64(e.CacheReadTokens)
						w.CacheWriteTokens += int64(e.CacheWriteTokens)
						w.CostUSD += e.CostUSD
						w.SavingsUSD += saved(e)
						w.CacheReadShare = float64(w.CacheReadTokens) / float64(w.InputTokens)
					}
				}
				if len(got.Groups) != len(want) || got.By != by {
					t.Fatalf("--by %s: got by %q, %d groups %+v; want %d", by, got.By, len(got.Groups), got.Groups, len(want))
				}
				near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
				check := func(name string, g, w usage.Totals) {
					gs, ws := g.SavingsUSD, w.SavingsUSD
					g.SavingsUSD, w.SavingsUSD = 0, 0
					gr, wr := g.CacheReadShare, w.CacheReadShare
					g.CacheReadShare, w.CacheReadShare = 0, 0
					if g != w || !near(gs, ws) || !near(gr, wr) {
						t.Errorf("--by %s, %s: got %+v (savings %v, share %v), want %+v (savings %v, share %v)", by, name, g, gs, gr, w, ws, wr)
					}
				}
				for _, g := range got.Groups {
					if w := want[g.Group]; w == nil {
						t.Errorf("--by %s: unexpected group %q", by, g.Group)
					} else {
						check("group "+strconv.Quote(g.Group), g.Totals, *w)
					}
				}
				check("total", got.Total, total)
				if !(got.Total.SavingsUSD > 0) {
					t.Errorf("--by %s: total savings %v, want above 0", by, got.Total.SavingsUSD)
				}
				// The table names the entries without one "(none)", as --by key does.
				code, out, errs = runCLI(t, nil, "usage", "--database", dsn, "--config", cfg, "--by", by)
				lines := strings.Split(out, "\n")
				if code != 0 || len(lines) < 2 || strings.Fields(lines[0])[0] != by || strings.Fields(lines[1])[0] != "(none)" {
					t.Errorf("--by %s table: exit %d, stderr %s, got:\n%s\nwant the first group (none)", by, code, errs, out)
				}
			}
		})
	}
}

// A ./streamgate.yaml that does not load does not stop a report whose
// database came from --database: its savings are not priced, and stderr
// says so in one line.
func TestUsageCLIBrokenWorkingConfig(t *testing.T) {
	db := usageLedger(t)
	t.Chdir(t.TempDir())
	if err := os.WriteFile("streamgate.yaml", []byte("models: [{name: m1, price: {input: -1}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, nil, "usage", "--database", db, "--csv")
	if code != 0 || !strings.Contains(out, "m1,2,") {
		t.Fatalf("exit %d, out %q, stderr %q; want m1's row", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "./streamgate.yaml does not load, savings not priced") {
		t.Errorf("stderr %q: want the database line, then one line saying the savings are not priced", errs)
	}
	// Named with --config, the same file is an error.
	if code, _, errs := runCLI(t, nil, "usage", "--database", db, "--config", "streamgate.yaml"); code == 0 {
		t.Errorf("--config of a broken file: exit 0, stderr %q; want an error", errs)
	}
}
