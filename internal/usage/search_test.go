package usage

import (
	"context"
	"testing"
	"time"
)

func TestSearchAndSeries(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		var entries []Entry
		for i := range 30 {
			e := Entry{RequestID: "req-" + string(rune('a'+i%26)) + string(rune('0'+i/26)), Time: base.Add(time.Duration(i) * 20 * time.Second),
				KeyID: "alice", Model: "gpt", Status: 200, Outcome: OutcomeOK, OutputTokens: 10, InputTokens: 3, CostUSD: 0.001}
			switch {
			case i%10 == 3:
				e.KeyID, e.Status, e.Outcome = "bob", 429, OutcomeRejected
			case i%10 == 7:
				e.Status, e.Outcome, e.Error = 502, OutcomeUpstreamError, "connect refused"
			}
			entries = append(entries, e)
		}
		if err := s.Insert(ctx, entries); err != nil {
			t.Fatal(err)
		}
		page, more, err := Search(ctx, s, SearchQuery{Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 7 || !more || page[0].RequestID != entries[29].RequestID || page[6].RequestID != entries[23].RequestID {
			t.Fatalf("first page: got %d entries (more %v) from %q to %q, want 7 newest first from %q", len(page), more, page[0].RequestID, page[len(page)-1].RequestID, entries[29].RequestID)
		}
		page, more, err = Search(ctx, s, SearchQuery{Limit: 7, Offset: 28})
		if err != nil || len(page) != 2 || more {
			t.Fatalf("last page: got %d entries, more %v, err %v; want 2, false", len(page), more, err)
		}
		for _, c := range []struct {
			name string
			q    SearchQuery
			want int
		}{
			{"request id", SearchQuery{RequestID: entries[12].RequestID}, 1},
			{"text is a request id", SearchQuery{Text: entries[12].RequestID}, 1},
			{"text is a key", SearchQuery{Text: "bob"}, 3},
			{"key", SearchQuery{KeyID: "alice"}, 27},
			{"status", SearchQuery{Status: 502}, 3},
			{"status and key", SearchQuery{Status: 429, KeyID: "alice"}, 0},
			{"outcome", SearchQuery{Outcome: OutcomeRejected}, 3},
			{"model", SearchQuery{Model: "gpt", Limit: 100}, 30},
			{"since", SearchQuery{Since: base.Add(9 * time.Minute)}, 3},
		} {
			got, _, err := Search(ctx, s, c.q)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if len(got) != c.want {
				t.Errorf("%s: got %d entries, want %d", c.name, len(got), c.want)
			}
		}
		got, _, _ := Search(ctx, s, SearchQuery{RequestID: entries[17].RequestID})
		if len(got) != 1 || got[0].Error != "connect refused" || got[0].Status != 502 || !got[0].Time.Equal(entries[17].Time) {
			t.Errorf("entry 17: got %+v, want its status, error and time back", got)
		}

		buckets, err := Series(ctx, s, SeriesQuery{Since: base, Until: base.Add(time.Hour), Step: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// 30 entries 20 s apart: 3 a minute over 10 minutes.
		if len(buckets) != 10 {
			t.Fatalf("got %d buckets, want 10", len(buckets))
		}
		var reqs, failed, rejected, out int64
		for i, b := range buckets {
			if !b.Start.Equal(base.Add(time.Duration(i) * time.Minute)) {
				t.Errorf("bucket %d starts %s, want %s", i, b.Start, base.Add(time.Duration(i)*time.Minute))
			}
			reqs, failed, rejected, out = reqs+b.Requests, failed+b.Failed, rejected+b.Rejected, out+b.OutputTokens
		}
		if reqs != 30 || failed != 3 || rejected != 3 || out != 300 {
			t.Errorf("totals: got %d requests, %d failed, %d rejected, %d output tokens; want 30, 3, 3, 300", reqs, failed, rejected, out)
		}
		if _, err := Series(ctx, s, SeriesQuery{Since: base, Until: base, Step: time.Minute}); err == nil {
			t.Error("an empty window: got no error")
		}
	})
}

// A bucket's models are priced apart and summed: its cache reads and
// savings are its entries' summed by hand.
func TestSeriesCacheSavings(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		models := []string{"m1", "m2", "gone"}
		var entries []Entry
		for i := range 12 {
			entries = append(entries, Entry{Time: base.Add(time.Duration(i) * 15 * time.Second), Model: models[i%3], Outcome: OutcomeOK,
				InputTokens: 1000 + i, CacheReadTokens: 100 * i, CacheWriteTokens: 10 * (i % 2), CostUSD: 0.125})
		}
		if err := s.Insert(ctx, entries); err != nil {
			t.Fatal(err)
		}
		savings := func(model string, read, write int64) float64 {
			switch model {
			case "m1":
				return float64(read)*0.5 - float64(write)*0.25
			case "m2":
				return float64(read) * 0.125
			}
			return 0
		}
		buckets, err := Series(ctx, s, SeriesQuery{Since: base, Until: base.Add(time.Hour), Step: time.Minute, Savings: savings})
		if err != nil {
			t.Fatal(err)
		}
		if len(buckets) != 3 {
			t.Fatalf("got %d buckets %+v, want 3 (4 entries a minute)", len(buckets), buckets)
		}
		for i, b := range buckets {
			var want Bucket
			want.Start = base.Add(time.Duration(i) * time.Minute)
			for _, e := range entries[4*i : 4*i+4] {
				want.Requests++
				want.InputTokens += int64(e.InputTokens)
				want.CacheReadTokens += int64(e.CacheReadTokens)
				want.CostUSD += e.CostUSD
				want.SavingsUSD += savings(e.Model, int64(e.CacheReadTokens), int64(e.CacheWriteTokens))
			}
			if b != want {
				t.Errorf("bucket %d:\ngot  %+v\nwant %+v", i, b, want)
			}
		}
	})
}
