package usage

import (
	"reflect"
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
				{Group: "m1", Requests: 5, Failed: 2, Fallbacks: 2, Hedged: 1, Continued: 1, InputTokens: 120, OutputTokens: 1000, CacheReadTokens: 40, CacheWriteTokens: 10, CostUSD: 1.375},
				{Group: "m2", Requests: 1, Hedged: 1, InputTokens: 30, OutputTokens: 300, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.5},
			}},
			{"empty by is model", ReportQuery{}, []ReportRow{
				{Group: "m1", Requests: 5, Failed: 2, Fallbacks: 2, Hedged: 1, Continued: 1, InputTokens: 120, OutputTokens: 1000, CacheReadTokens: 40, CacheWriteTokens: 10, CostUSD: 1.375},
				{Group: "m2", Requests: 1, Hedged: 1, InputTokens: 30, OutputTokens: 300, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.5},
			}},
			{"by key", ReportQuery{By: "key"}, []ReportRow{
				{Group: "", Requests: 1, Failed: 1},
				{Group: "a", Requests: 3, Failed: 1, Fallbacks: 1, Hedged: 1, InputTokens: 60, OutputTokens: 400, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.75},
				{Group: "b", Requests: 2, Fallbacks: 1, Hedged: 1, Continued: 1, InputTokens: 90, OutputTokens: 900, CacheReadTokens: 40, CacheWriteTokens: 10, CostUSD: 1.125},
			}},
			{"by route", ReportQuery{By: "route"}, []ReportRow{
				{Group: "", Requests: 2, Failed: 2, Fallbacks: 1, InputTokens: 20},
				{Group: "p/x", Requests: 2, Hedged: 1, Continued: 1, InputTokens: 60, OutputTokens: 600, CacheReadTokens: 40, CostUSD: 0.375},
				{Group: "p/y", Requests: 2, Fallbacks: 1, Hedged: 1, InputTokens: 70, OutputTokens: 700, CacheReadTokens: 20, CacheWriteTokens: 15, CostUSD: 1.5},
			}},
			{"by day (UTC, midnight belongs to the next day)", ReportQuery{By: "day"}, []ReportRow{
				{Group: "2025-06-01", Requests: 2, Failed: 1, Fallbacks: 1, InputTokens: 30, OutputTokens: 100, CostUSD: 0.25},
				{Group: "2025-06-02", Requests: 4, Failed: 1, Fallbacks: 1, Hedged: 2, Continued: 1, InputTokens: 120, OutputTokens: 1200, CacheReadTokens: 60, CacheWriteTokens: 15, CostUSD: 1.625},
			}},
			{"since inclusive, until exclusive", ReportQuery{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute), By: "model"}, []ReportRow{
				{Group: "m1", Requests: 1, Fallbacks: 1, InputTokens: 40, OutputTokens: 400, CacheWriteTokens: 10, CostUSD: 1},
				{Group: "m2", Requests: 1, Hedged: 1, InputTokens: 30, OutputTokens: 300, CacheReadTokens: 20, CacheWriteTokens: 5, CostUSD: 0.5},
			}},
			{"since only", ReportQuery{Since: t0.Add(3 * time.Minute), By: "key"}, []ReportRow{
				{Group: "", Requests: 1, Failed: 1},
				{Group: "b", Requests: 1, Hedged: 1, Continued: 1, InputTokens: 50, OutputTokens: 500, CacheReadTokens: 40, CostUSD: 0.125},
			}},
			{"until only, a microsecond before midnight", ReportQuery{Until: t0.Add(time.Minute - time.Microsecond), By: "day"}, []ReportRow{
				{Group: "2025-06-01", Requests: 1, InputTokens: 10, OutputTokens: 100, CostUSD: 0.25},
			}},
			{"non-UTC bounds", ReportQuery{Since: t0.Add(time.Minute).In(time.FixedZone("UTC-7", -7*3600)), By: "day"}, []ReportRow{
				{Group: "2025-06-02", Requests: 4, Failed: 1, Fallbacks: 1, Hedged: 2, Continued: 1, InputTokens: 120, OutputTokens: 1200, CacheReadTokens: 60, CacheWriteTokens: 15, CostUSD: 1.625},
			}},
			{"empty window", ReportQuery{Since: t0.Add(time.Hour), By: "route"}, []ReportRow{}},
		}
		for _, tt := range tests {
			got, err := Report(ctx, s, tt.q)
			if err != nil {
				t.Fatalf("%s: Report: %v", tt.name, err)
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
