package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// m1Savings prices m1 as input $2, cached_input $0.50 and cache_write
// $2.50 per 1M tokens would (config.Price.CacheSavings); other models save
// nothing.
func m1Savings(model string, read, write int64) float64 {
	if model != "m1" {
		return 0
	}
	return (1.5*float64(read) - 0.5*float64(write)) / 1e6
}

// The cache figures per model: live from streamgate_tokens_total (the
// share of the prompt read from the cache, the savings per hour at the
// prices given), today's from the ledger; the history of the hour in
// memory and of longer ranges from the ledger; the request log names the
// provider key and the cache hit; the page shows them all.
func TestCacheFigures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := usage.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now()
	if err := store.Insert(ctx, []usage.Entry{
		{RequestID: "hit", Time: now, KeyID: "app", Model: "m1", Route: "p/a", ProviderKey: "org-a", Status: 200, Outcome: usage.OutcomeOK,
			InputTokens: 10_000, CacheReadTokens: 8_000, OutputTokens: 10, CostUSD: 0.01},
		{RequestID: "miss", Time: now, KeyID: "app", Model: "m1", Route: "p/a", Status: 200, Outcome: usage.OutcomeOK,
			InputTokens: 10_000, CacheWriteTokens: 10_000, OutputTokens: 10, CostUSD: 0.03},
	}); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Known("m1", []string{"p/a"}, false, false)
	d := New(Options{Gatherer: reg, Open: true, Interval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Models: []string{"m1"}, Savings: m1Savings,
		Report: func(ctx context.Context, q usage.ReportQuery) ([]usage.ReportRow, error) {
			return usage.Report(ctx, store, q)
		},
		Search: func(ctx context.Context, q usage.SearchQuery) ([]usage.Entry, bool, error) {
			return usage.Search(ctx, store, q)
		},
		Series: func(ctx context.Context, q usage.SeriesQuery) ([]usage.Bucket, error) {
			return usage.Series(ctx, store, q)
		}})
	srv := httptest.NewServer(d)
	defer func() {
		d.Shutdown()
		srv.Close()
		d.Close()
	}()

	page := body(t, get(t, srv.URL+"/dashboard"))
	for _, k := range []string{`"cache_read_share"`, `"savings_usd_per_h"`, `"savings_usd"`, `"provider_key"`, `"cache_hit"`, ">Cache read<", ">Saved/h<", ">Provider key<"} {
		if !strings.Contains(page, k) {
			t.Errorf("the page lacks %s", k)
		}
	}

	resp := get(t, srv.URL+"/dashboard/events?window=1m")
	defer resp.Body.Close()
	firstEvent(t, resp) // sampled before the tokens below
	// A request of 1000 prompt tokens, 600 read from the cache, 100 written.
	m.Usage("m1", 1000, 10, 600, 100, 0.001)
	events := sse.NewReader(resp.Body, 0)
	var live *modelView
	var cost *costView
	for live == nil || cost == nil || len(cost.ByModel) == 0 {
		ev, err := events.Next()
		if err != nil {
			t.Fatalf("events ended before the figures came: %v", err)
		}
		var v view
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			t.Fatal(err)
		}
		for i := range v.Models {
			if v.Models[i].Model == "m1" && v.Models[i].CacheReadShare > 0 {
				live = &v.Models[i]
				// Savings per hour over the span: (600×1.5 − 100×0.5)/1e6 in it.
				if got, want := float64(live.SavingsUSDPerH)*float64(v.SpanS)/3600, 0.00085; math.Abs(got-want) > want*2e-3 {
					t.Errorf("live savings: got $%v/h over %v s ($%v), want $%v in the span", live.SavingsUSDPerH, v.SpanS, got, want)
				}
			}
		}
		cost = v.Cost
	}
	if live.CacheReadShare != 0.6 {
		t.Errorf("live cache-read share: got %v, want 0.6", live.CacheReadShare)
	}
	// Today's row of m1: 8k read of 20k; 8k × $1.50 − 10k × $0.50 per 1M.
	row := cost.ByModel[0]
	if row.Group != "m1" || row.Requests != 2 || row.CacheReadShare != 0.4 || math.Abs(float64(row.SavingsUSD)-0.007) > 1e-9 {
		t.Errorf("today's m1: got %+v, want 2 requests, share 0.4, $0.007 saved", row)
	}
	if len(cost.ByKey) != 1 || cost.ByKey[0].CacheReadShare != 0.4 || math.Abs(float64(cost.ByKey[0].SavingsUSD)-0.007) > 1e-9 {
		t.Errorf("today's keys: got %+v, want app with share 0.4 and $0.007 saved", cost.ByKey)
	}

	// The history: the hour from memory holds the live request, the 6 h
	// from the ledger its two entries.
	for _, tt := range []struct {
		rng, source  string
		share, saved float64
	}{{"1h", "memory", 0.6, 0.00085}, {"6h", "ledger", 0.4, 0.007}} {
		var h struct {
			Source  string
			Share   []*float64 `json:"cache_read_share"`
			Savings []*float64 `json:"savings_usd"`
		}
		if err := json.Unmarshal([]byte(body(t, get(t, srv.URL+"/dashboard/history?range="+tt.rng))), &h); err != nil || h.Source != tt.source {
			t.Fatalf("history %s: %v, source %q; want %s", tt.rng, err, h.Source, tt.source)
		}
		var shares []float64
		saved := 0.0
		for i := range h.Share {
			if h.Share[i] != nil {
				shares = append(shares, *h.Share[i])
			}
			if h.Savings[i] != nil {
				saved += *h.Savings[i]
			}
		}
		if len(shares) != 1 && tt.source == "ledger" || len(shares) == 0 || shares[len(shares)-1] != tt.share || math.Abs(saved-tt.saved) > tt.saved*1e-3 {
			t.Errorf("history %s: got shares %v, $%v saved; want a step of %v, $%v", tt.rng, shares, saved, tt.share, tt.saved)
		}
	}

	var log struct {
		Requests []requestRow `json:"requests"`
	}
	if err := json.Unmarshal([]byte(body(t, get(t, srv.URL+"/dashboard/requests?q=hit"))), &log); err != nil || len(log.Requests) != 1 {
		t.Fatalf("request log: %v, %+v; want the hit", err, log)
	}
	if r := log.Requests[0]; r.ProviderKey != "org-a" || !r.CacheHit || r.CacheReadTokens != 8000 {
		t.Errorf("the hit: got %+v, want provider key org-a, a cache hit of 8000 tokens", r)
	}
	if err := json.Unmarshal([]byte(body(t, get(t, srv.URL+"/dashboard/requests?q=miss"))), &log); err != nil || len(log.Requests) != 1 {
		t.Fatalf("request log: %v, %+v; want the miss", err, log)
	}
	if r := log.Requests[0]; r.ProviderKey != "" || r.CacheHit || r.CacheReadTokens != 0 {
		t.Errorf("the miss: got %+v, want no provider key and no cache hit", r)
	}
}
