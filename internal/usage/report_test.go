package usage

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reportEntries straddle midnight UTC of 2025-06-01: two entries on the
// first day (the second a microsecond before midnight), four on the next
// (the first exactly at midnight).
func reportEntries(t0 time.Time) []Entry {
	mk := func(id, key, model, route, outcome string, at time.Duration, attempts int, hedged bool, cont, in, out int, cost float64) Entry {
		return Entry{ID: id, Time: t0.Add(at), KeyID: key, Model: model, Route: route, Outcome: outcome,
			Attempts: attempts, Hedged: hedged, Continuations: cont, InputTokens: in, OutputTokens: out, CostUSD: cost}
	}
	cached := func(e Entry, read, write int) Entry {
		e.CacheReadTokens, e.CacheWriteTokens = read, write
		return e
	}
	return []Entry{
		mk("1", "a", "m1", "p/x", OutcomeOK, 0, 1, false, 0, 10, 100, 0.25),
		mk("2", "a", "m1", "", OutcomeUpstreamError, time.Minute-time.Microsecond, 2, false, 0, 20, 0, 0),
		cached(mk("3", "a", "m2", "p/y", OutcomeOK, time.Minute, 2, true, 0, 30, 300, 0.5), 20, 5),
		cached(mk("4", "b", "m1", "p/y", OutcomeOK, 2*time.Minute, 2, false, 0, 40, 400, 1), 0, 10),
		cached(mk("5", "b", "m1", "p/x", OutcomeOK, 3*time.Minute, 3, true, 1, 50, 500, 0.125), 40, 0),
		mk("6", "", "m1", "", OutcomeRejected, 4*time.Minute, 0, false, 0, 0, 0, 0),
	}
}

func TestReport(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		t0 := time.Date(2025, 6, 1, 23, 59, 0, 0, time.UTC)
		if err := s.Insert(ctx, reportEntries(t0)); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		tests := []struct {
			name string
			q    ReportQuery
			want []ReportRow
		}{
			{"by model", ReportQuery{By: "model"}, []ReportRow{
				{Group: "m1", Requests: 5, Refused: 1, Failed: 1, Fallbacks: 2, Hedged: 1, Continued: 1, InputTokens: 120, OutputTokens: 1000, CacheReadTokens: 40, CacheWriteTokens: 10, CostUSD: 1.375},
				{Group: "m2", Requests: 1, Hedged: 1, InputTokens: 30, OutputTokens: 300, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.5},
			}},
			{"empty by is model", ReportQuery{}, []ReportRow{
				{Group: "m1", Requests: 5, Refused: 1, Failed: 1, Fallbacks: 2, Hedged: 1, Continued: 1, InputTokens: 120, OutputTokens: 1000, CacheReadTokens: 40, CacheWriteTokens: 10, CostUSD: 1.375},
				{Group: "m2", Requests: 1, Hedged: 1, InputTokens: 30, OutputTokens: 300, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.5},
			}},
			{"by key", ReportQuery{By: "key"}, []ReportRow{
				{Group: "", Requests: 1, Refused: 1},
				{Group: "a", Requests: 3, Failed: 1, Fallbacks: 1, Hedged: 1, InputTokens: 60, OutputTokens: 400, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.75},
				{Group: "b", Requests: 2, Fallbacks: 1, Hedged: 1, Continued: 1, InputTokens: 90, OutputTokens: 900, CacheReadTokens: 40, CacheWriteTokens: 10, CostUSD: 1.125},
			}},
			{"by route", ReportQuery{By: "route"}, []ReportRow{
				{Group: "", Requests: 2, Refused: 1, Failed: 1, Fallbacks: 1, InputTokens: 20},
				{Group: "p/x", Requests: 2, Hedged: 1, Continued: 1, InputTokens: 60, OutputTokens: 600, CacheReadTokens: 40, CostUSD: 0.375},
				{Group: "p/y", Requests: 2, Fallbacks: 1, Hedged: 1, InputTokens: 70, OutputTokens: 700, CacheReadTokens: 20, CacheWriteTokens: 15, CostUSD: 1.5},
			}},
			{"by day (UTC, midnight belongs to the next day)", ReportQuery{By: "day"}, []ReportRow{
				{Group: "2025-06-01", Requests: 2, Failed: 1, Fallbacks: 1, InputTokens: 30, OutputTokens: 100, CostUSD: 0.25},
				{Group: "2025-06-02", Requests: 4, Refused: 1, Fallbacks: 1, Hedged: 2, Continued: 1, InputTokens: 120, OutputTokens: 1200, CacheReadTokens: 60, CacheWriteTokens: 15, CostUSD: 1.625},
			}},
			{"since inclusive, until exclusive", ReportQuery{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute), By: "model"}, []ReportRow{
				{Group: "m1", Requests: 1, Fallbacks: 1, InputTokens: 40, OutputTokens: 400, CacheWriteTokens: 10, CostUSD: 1},
				{Group: "m2", Requests: 1, Hedged: 1, InputTokens: 30, OutputTokens: 300, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.5},
			}},
			{"since only", ReportQuery{Since: t0.Add(3 * time.Minute), By: "key"}, []ReportRow{
				{Group: "", Requests: 1, Refused: 1},
				{Group: "b", Requests: 1, Hedged: 1, Continued: 1, InputTokens: 50, OutputTokens: 500, CacheReadTokens: 40, CostUSD: 0.125},
			}},
			{"until only, a microsecond before midnight", ReportQuery{Until: t0.Add(time.Minute - time.Microsecond), By: "day"}, []ReportRow{
				{Group: "2025-06-01", Requests: 1, InputTokens: 10, OutputTokens: 100, CostUSD: 0.25},
			}},
			{"non-UTC bounds", ReportQuery{Since: t0.Add(time.Minute).In(time.FixedZone("UTC-7", -7*3600)), By: "day"}, []ReportRow{
				{Group: "2025-06-02", Requests: 4, Refused: 1, Fallbacks: 1, Hedged: 2, Continued: 1, InputTokens: 120, OutputTokens: 1200, CacheReadTokens: 60, CacheWriteTokens: 15, CostUSD: 1.625},
			}},
			{"empty window", ReportQuery{Since: t0.Add(time.Hour), By: "route"}, []ReportRow{}},
		}
		for _, tt := range tests {
			got, err := Report(ctx, s, tt.q)
			if err != nil {
				t.Fatalf("%s: Report: %v", tt.name, err)
			}
			for i := range got {
				if !got[i].LedgerStart.Equal(t0) {
					t.Errorf("%s: row %d: LedgerStart %v, want the first entry's %v", tt.name, i, got[i].LedgerStart, t0)
				}
				got[i].LedgerStart = time.Time{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s:\ngot  %+v\nwant %+v", tt.name, got, tt.want)
			}
		}
	})
}

func TestReportErrors(t *testing.T) {
	s := openTestSQLite(t)
	ctx := testCtx(t)
	for _, by := range []string{"user", "Model", "model; DROP TABLE usage_entries", "key_id"} {
		_, err := Report(ctx, s, ReportQuery{By: by})
		if err == nil || !strings.Contains(err.Error(), "key, model, day, route") {
			t.Errorf("by %q: got %v, want an error naming the dimensions", by, err)
		}
		if err := (ReportQuery{By: by}).Validate(); err == nil {
			t.Errorf("by %q: Validate: got nil, want an error", by)
		}
	}
	if n, err := s.Count(ctx, Filter{}); err != nil || n != 0 {
		t.Errorf("after bad dimensions: Count got %d, %v; want 0, nil", n, err)
	}
	// A Store that is not the SQL store cannot report.
	wrapped := struct{ Store }{s}
	if _, err := Report(ctx, wrapped, ReportQuery{}); err == nil || !strings.Contains(err.Error(), "cannot report") {
		t.Errorf("wrapped store: got %v, want a cannot-report error", err)
	}
}

// Outcomes apart: refused (the gateway's own checks) and cancelled (the
// client left) are not failures; the error rate is failed / served.
func TestReportOutcomes(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		var entries []Entry
		for i, o := range []string{OutcomeOK, OutcomeOK, OutcomeUpstreamError, OutcomeTimeout, OutcomeClientCancelled,
			OutcomeRejected, OutcomeRejected, OutcomeRejected, OutcomeRejected} {
			entries = append(entries, Entry{Time: t0.Add(time.Duration(i) * time.Minute), Model: "m", Outcome: o})
		}
		if err := s.Insert(ctx, entries); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		rows, err := Report(ctx, s, ReportQuery{Since: t0.Add(time.Minute)})
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		if len(rows) != 1 || !rows[0].LedgerStart.Equal(t0) {
			t.Fatalf("got %+v, want one row with the ledger's start %v (before since)", rows, t0)
		}
		rep := NewBreakdown(ReportQuery{Since: t0.Add(time.Minute), Until: t0.Add(time.Hour)}, rows, t0.Add(time.Hour))
		want := Totals{Requests: 8, Refused: 4, Cancelled: 1, Failed: 2, ErrorRate: 0.5}
		if rep.Total != want {
			t.Errorf("total: got %+v, want %+v (2 failed of 4 served)", rep.Total, want)
		}
	})
}

// The projection is the spend rate over the ledger's span within the
// window: a ledger an hour old with $3.47 projects 3.47 × 720, not the
// 30-day window's $3.47 (issue 25).
func TestBreakdownProjection(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	q := ReportQuery{Since: now.Add(-30 * 24 * time.Hour), Until: now}
	row := func(start time.Time) []ReportRow {
		return []ReportRow{{Group: "m", Requests: 1, CostUSD: 3.47, LedgerStart: start}}
	}
	tests := []struct {
		name    string
		q       ReportQuery
		rows    []ReportRow
		days    float64
		monthly float64
	}{
		{"ledger an hour old", q, row(now.Add(-time.Hour)), 1.0 / 24, 3.47 * 720},
		{"ledger older than the window", q, row(now.Add(-90 * 24 * time.Hour)), 30, 3.47},
		{"ledger ten days old", q, row(now.Add(-10 * 24 * time.Hour)), 10, 3.47 * 3},
		{"ledger a minute old counts an hour", q, row(now.Add(-time.Minute)), 1.0 / 24, 3.47 * 720},
		{"window shorter than an hour", ReportQuery{Since: now.Add(-10 * time.Minute), Until: now}, row(now.Add(-time.Minute)), 10.0 / 1440, 3.47 * 4320},
		{"until past now counts to now", ReportQuery{Since: now.Add(-24 * time.Hour), Until: now.Add(24 * time.Hour)}, row(now.Add(-48 * time.Hour)), 1, 3.47 * 30},
		{"no since: from the ledger's start", ReportQuery{Until: now}, row(now.Add(-2 * 24 * time.Hour)), 2, 3.47 * 15},
		{"no rows", q, nil, 0, 0},
	}
	for _, tt := range tests {
		rep := NewBreakdown(tt.q, tt.rows, now)
		if math.Abs(rep.ProjectionDays-tt.days) > 1e-9 || math.Abs(rep.ProjectedMonthlyUSD-tt.monthly) > 1e-6 {
			t.Errorf("%s: got $%v over %v days, want $%v over %v", tt.name, rep.ProjectedMonthlyUSD, rep.ProjectionDays, tt.monthly, tt.days)
		}
	}
}

// By team and by provider key, each group's totals and savings are the
// ledger's rows summed by hand, a group's models priced apart.
func TestReportTeamsAndProviderKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		t0 := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
		teams := []string{"", "red", "blue", "red"}
		pkeys := []string{"", "org-a", "org-b"}
		models := []string{"m1", "m2", "gone"} // "gone": no longer priced
		outcomes := []string{OutcomeOK, OutcomeOK, OutcomeUpstreamError, OutcomeRejected, OutcomeClientCancelled}
		var entries []Entry
		for i := range 60 {
			in := 100 + 7*i
			entries = append(entries, Entry{Time: t0.Add(time.Duration(i) * time.Minute), KeyID: "k" + strconv.Itoa(i%5),
				Team: teams[i%len(teams)], ProviderKey: pkeys[i%len(pkeys)], Model: models[i%len(models)], Route: "p/x",
				Outcome: outcomes[i%len(outcomes)], Attempts: 1 + i%3, Hedged: i%7 == 0, Continuations: i % 11 / 10,
				InputTokens: in, CacheReadTokens: (in / 2) * (i % 2), CacheWriteTokens: (in / 4) * (i % 3 / 2), OutputTokens: 3 * i,
				CostUSD: float64(i%8) / 8})
		}
		if err := s.Insert(ctx, entries); err != nil {
			t.Fatalf("Insert: %v", err)
		}
		// Savings per token chosen to sum exactly in binary.
		savings := func(model string, read, write int64) float64 {
			switch model {
			case "m1":
				return float64(read)*0.5 - float64(write)*0.25
			case "m2":
				return float64(read) * 0.125
			}
			return 0
		}
		for _, by := range []string{"team", "provider_key"} {
			want := map[string]*ReportRow{}
			for _, e := range entries {
				g := e.Team
				if by == "provider_key" {
					g = e.ProviderKey
				}
				r := want[g]
				if r == nil {
					r = &ReportRow{Group: g, LedgerStart: t0}
					want[g] = r
				}
				r.Requests++
				switch e.Outcome {
				case OutcomeRejected:
					r.Refused++
				case OutcomeClientCancelled:
					r.Cancelled++
				case OutcomeUpstreamError:
					r.Failed++
				}
				if e.Attempts > 1 && !e.Hedged {
					r.Fallbacks++
				}
				if e.Hedged {
					r.Hedged++
				}
				if e.Continuations > 0 {
					r.Continued++
				}
				r.InputTokens += int64(e.InputTokens)
				r.OutputTokens += int64(e.OutputTokens)
				r.CacheReadTokens += int64(e.CacheReadTokens)
				r.CacheWriteTokens += int64(e.CacheWriteTokens)
				r.CostUSD += e.CostUSD
				r.SavingsUSD += savings(e.Model, int64(e.CacheReadTokens), int64(e.CacheWriteTokens))
			}
			got, err := Report(ctx, s, ReportQuery{By: by, Savings: savings})
			if err != nil {
				t.Fatalf("by %s: Report: %v", by, err)
			}
			if len(got) != len(want) {
				t.Fatalf("by %s: got %d groups %+v, want %d", by, len(got), got, len(want))
			}
			for i, r := range got {
				if i > 0 && got[i-1].Group >= r.Group {
					t.Errorf("by %s: group %q after %q, want ascending", by, r.Group, got[i-1].Group)
				}
				if w := want[r.Group]; w == nil || !reflect.DeepEqual(r, *w) {
					t.Errorf("by %s, group %q:\ngot  %+v\nwant %+v", by, r.Group, r, w)
				}
			}
			// The total of the groups is every entry's, whatever the grouping.
			rep := NewBreakdown(ReportQuery{By: by}, got, t0.Add(2*time.Hour))
			var in, read int64
			var saved float64
			for _, e := range entries {
				in += int64(e.InputTokens)
				read += int64(e.CacheReadTokens)
				saved += savings(e.Model, int64(e.CacheReadTokens), int64(e.CacheWriteTokens))
			}
			if rep.Total.Requests != int64(len(entries)) || rep.Total.InputTokens != in || rep.Total.SavingsUSD != saved ||
				rep.Total.CacheReadShare != float64(read)/float64(in) {
				t.Errorf("by %s: total %+v; want %d requests, %d input tokens, share %v, savings %v", by, rep.Total, len(entries), in, float64(read)/float64(in), saved)
			}
		}
	})
}
