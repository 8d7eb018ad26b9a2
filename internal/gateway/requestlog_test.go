package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
)

// GET /admin/requests pages the ledger's request log with the admin key:
// found by request id, by key and status; bad parameters named; none
// without the key; 404 usage_ledger_off without a ledger.
func TestAdminRequests(t *testing.T) {
	ctx := context.Background()
	store := tempLedger(t)
	now := time.Now()
	if err := store.Insert(ctx, []usage.Entry{
		{RequestID: "req-1", Time: now.Add(-time.Hour), KeyID: "app", Model: "m1", Route: "p/a", ProviderKey: "org-a", Status: 200, Outcome: usage.OutcomeOK,
			InputTokens: 100, CacheReadTokens: 64, OutputTokens: 10, CostUSD: 0.001, TTFT: 40 * time.Millisecond},
		{RequestID: "req-2", Time: now.Add(-time.Minute), KeyID: "dev", Model: "m2", Status: 502, Outcome: usage.OutcomeUpstreamError, Error: "connect: connection refused"},
		{RequestID: "req-3", Time: now, KeyID: "app", Model: "typo", Status: 404, Outcome: usage.OutcomeRejected},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1,
		Search: func(ctx context.Context, q usage.SearchQuery) ([]usage.Entry, bool, error) {
			return usage.Search(ctx, store, q)
		}})
	type page struct {
		Requests []struct {
			RequestID string `json:"request_id"`
			Key       string
			Status    int
			Error     string
			TTFTMs    *float64 `json:"ttft_ms"`
			// The provider key that served it and whether the prompt hit
			// the cache.
			ProviderKey     string `json:"provider_key"`
			CacheHit        bool   `json:"cache_hit"`
			CacheReadTokens int    `json:"cache_read_tokens"`
		}
		More bool
	}
	get := func(query string) (int, page) {
		t.Helper()
		status, body := adminDo(t, e, "GET", "/admin/requests"+query, "")
		var p page
		if status == 200 {
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("%s: %v in %s", query, err, body)
			}
		}
		return status, p
	}
	if status, p := get(""); status != 200 || len(p.Requests) != 3 || p.Requests[0].RequestID != "req-3" || p.More {
		t.Errorf("all: got %d %+v, want the 3 entries newest first", status, p)
	}
	if _, p := get("?q=req-1"); len(p.Requests) != 1 || p.Requests[0].Key != "app" || p.Requests[0].TTFTMs == nil || *p.Requests[0].TTFTMs != 40 {
		t.Errorf("req-1: got %+v, want key app with TTFT 40 ms", p.Requests)
	} else if r := p.Requests[0]; r.ProviderKey != "org-a" || !r.CacheHit || r.CacheReadTokens != 64 {
		t.Errorf("req-1: got %+v, want provider key org-a and a cache hit of 64 tokens", r)
	}
	if _, p := get("?q=req-2"); len(p.Requests) != 1 || p.Requests[0].ProviderKey != "" || p.Requests[0].CacheHit {
		t.Errorf("req-2: got %+v, want no provider key and no cache hit", p.Requests)
	}
	if _, p := get("?key=dev&status=502"); len(p.Requests) != 1 || !strings.Contains(p.Requests[0].Error, "refused") {
		t.Errorf("dev 502: got %+v, want req-2 with its error", p.Requests)
	}
	if _, p := get("?limit=1&page=1"); len(p.Requests) != 1 || p.Requests[0].RequestID != "req-2" || !p.More {
		t.Errorf("second page of 1: got %+v, want req-2 and more", p)
	}
	if status, body := adminDo(t, e, "GET", "/admin/requests?limit=9999", ""); status != 400 || !strings.Contains(string(body), "limit") {
		t.Errorf("limit=9999: got %d %s, want 400 naming limit", status, body)
	}
	resp := do(t, "GET", e.url+"/admin/requests", "wrong", "")
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("wrong admin key: got %d, want 401", resp.StatusCode)
	}
}
