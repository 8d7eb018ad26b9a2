package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/usage"
)

// requestRow is one line of the request log.
type requestRow struct {
	Time      string `json:"time"` // RFC 3339, ms
	RequestID string `json:"request_id"`
	Key       string `json:"key"`
	Team      string `json:"team"` // "": the key has none
	Model     string `json:"model"`
	Route     string `json:"route"`
	// ProviderKey names the provider API key that served the request ("":
	// a provider with a single key, or none served it).
	ProviderKey  string `json:"provider_key"`
	Status       int    `json:"status"`
	Outcome      string `json:"outcome"`
	Stream       bool   `json:"stream"`
	Attempts     int    `json:"attempts"`
	TTFTMs       num    `json:"ttft_ms"` // null: no first token
	DurationMs   num    `json:"duration_ms"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	// CacheReadTokens are the prompt tokens read from the upstream's prompt
	// cache; CacheHit is whether there were any.
	CacheReadTokens int    `json:"cache_read_tokens"`
	CacheHit        bool   `json:"cache_hit"`
	CostUSD         num    `json:"cost_usd"`
	Error           string `json:"error"`
}

// requestPage is the answer of the request log.
type requestPage struct {
	Requests []requestRow `json:"requests"`
	Page     int          `json:"page"`  // from 0
	Limit    int          `json:"limit"` // rows per page
	More     bool         `json:"more"`  // a next page exists
}

// errLedgerOff answers the ledger's views when the gateway keeps no ledger.
var errLedgerOff = errors.New("the usage ledger is off: set database in the config")

// ServeRequests serves the request log: GET with q (a request id, key or
// model), request_id, key, team, model, status, outcome, since (30m, 2h, 7d or
// RFC 3339), limit (default 50, at most usage.MaxSearchLimit) and page
// (from 0); newest first. It checks no credential: /dashboard/requests
// asks for the dashboard's login, /admin/requests for the admin key.
func (d *Dashboard) ServeRequests(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "method not allowed: use GET")
		return
	}
	if d.search == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "usage_ledger_off", errLedgerOff.Error())
		return
	}
	q, page, err := searchQuery(r, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	entries, more, err := d.search(ctx, q)
	if err != nil {
		d.log.Warn("dashboard: request log from the ledger", "error", err.Error())
		writeError(w, http.StatusServiceUnavailable, "server_error", "usage_ledger_unreachable", "the usage ledger did not answer")
		return
	}
	out := requestPage{Requests: make([]requestRow, 0, len(entries)), Page: page, Limit: q.Limit, More: more}
	for _, e := range entries {
		row := requestRow{Time: e.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), RequestID: e.RequestID, Key: e.KeyID, Team: e.Team,
			Model: e.Model, Route: e.Route, ProviderKey: e.ProviderKey, Status: e.Status, Outcome: e.Outcome, Stream: e.Stream, Attempts: e.Attempts,
			TTFTMs: num(math.NaN()), DurationMs: num(ms(e.Duration)), InputTokens: e.InputTokens, OutputTokens: e.OutputTokens,
			CacheReadTokens: e.CacheReadTokens, CacheHit: e.CacheReadTokens > 0, CostUSD: num(e.CostUSD), Error: e.Error}
		if e.TTFT > 0 {
			row.TTFTMs = num(ms(e.TTFT))
		}
		out.Requests = append(out.Requests, row)
	}
	writeJSON(w, out)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// searchQuery reads the request log's parameters.
func searchQuery(r *http.Request, now time.Time) (usage.SearchQuery, int, error) {
	v := r.URL.Query()
	q := usage.SearchQuery{RequestID: v.Get("request_id"), KeyID: v.Get("key"), Model: v.Get("model"), Team: v.Get("team"),
		Outcome: v.Get("outcome"), Text: strings.TrimSpace(v.Get("q")), Limit: 50}
	// A search box's three digits are a status code: nobody names a key 404.
	if n, err := strconv.Atoi(q.Text); err == nil && n >= 100 && n <= 599 {
		q.Status, q.Text = n, ""
	}
	if s := v.Get("status"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return q, 0, fmt.Errorf("status %q: want an HTTP status code (100-599)", s)
		}
		q.Status = n
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > usage.MaxSearchLimit {
			return q, 0, fmt.Errorf("limit %q: want 1 to %d", s, usage.MaxSearchLimit)
		}
		q.Limit = n
	}
	page := 0
	if s := v.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 1_000_000 {
			return q, 0, fmt.Errorf("page %q: want a page number from 0", s)
		}
		page = n
	}
	q.Offset = page * q.Limit
	if s := v.Get("since"); s != "" {
		t, err := usage.ParseWhen(s, now)
		if err != nil {
			return q, 0, fmt.Errorf("since: %v", err)
		}
		q.Since = t
	}
	return q, page, nil
}

// historyRanges are the ranges of /dashboard/history: the hour from
// memory, longer ones from the ledger with a step that keeps ~300 points.
var historyRanges = map[string]struct{ span, step time.Duration }{
	"1h":  {time.Hour, 10 * time.Second},
	"6h":  {6 * time.Hour, time.Minute},
	"24h": {24 * time.Hour, 5 * time.Minute},
	"7d":  {7 * 24 * time.Hour, time.Hour},
}

// historyPage is the answer of /dashboard/history: one value per step from
// Start, null where nothing was measured (before the gateway started, or
// a step without requests in the ledger).
type historyPage struct {
	Range     string `json:"range"`
	Source    string `json:"source"` // "memory" (this replica since it started) or "ledger" (every replica sharing it)
	StartMs   int64  `json:"start"`  // Unix ms of the first step
	StepS     int    `json:"step_s"`
	Requests  series `json:"requests_per_s"`
	Errors    series `json:"errors_per_s"`
	Rejected  series `json:"rejected_per_s"`
	OutTokens series `json:"output_tokens_per_s"`
	Open      series `json:"open_streams,omitempty"` // memory only
	TTFTP99   series `json:"ttft_p99_s,omitempty"`   // memory only
	Cost      series `json:"cost_usd,omitempty"`     // ledger only: per step
	// CacheReadShare is the share of each step's prompt tokens read from
	// the prompt caches; Savings what the caches saved in each step, at
	// the current prices (absent without them).
	CacheReadShare series `json:"cache_read_share"`
	Savings        series `json:"savings_usd,omitempty"`
	Error          string `json:"error,omitempty"`
}

// ServeHistory serves GET ?range=1h|6h|24h|7d: the last hour from the ring
// kept in memory, longer ranges from the ledger.
func (d *Dashboard) ServeHistory(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "method not allowed: use GET")
		return
	}
	name := r.URL.Query().Get("range")
	if name == "" {
		name = "1h"
	}
	rg, ok := historyRanges[name]
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", fmt.Sprintf("range %q: want 1h, 6h, 24h or 7d", name))
		return
	}
	now := time.Now()
	if name == "1h" {
		writeJSON(w, d.hourHistory(now, rg.step))
		return
	}
	if d.series == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "usage_ledger_off", errLedgerOff.Error())
		return
	}
	end := now.Truncate(rg.step).Add(rg.step)
	start := end.Add(-rg.span)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	buckets, err := d.series(ctx, usage.SeriesQuery{Since: start, Until: end, Step: rg.step, Savings: d.savings})
	if err != nil {
		d.log.Warn("dashboard: history from the ledger", "error", err.Error())
		writeError(w, http.StatusServiceUnavailable, "server_error", "usage_ledger_unreachable", "the usage ledger did not answer")
		return
	}
	writeJSON(w, ledgerHistory(name, start, rg.step, int(rg.span/rg.step), buckets, d.savings != nil))
}

// ledgerHistory lays the ledger's buckets out on n steps from start;
// priced: the buckets' savings were priced.
func ledgerHistory(name string, start time.Time, step time.Duration, n int, buckets []usage.Bucket, priced bool) historyPage {
	h := historyPage{Range: name, Source: "ledger", StartMs: start.UnixMilli(), StepS: int(step / time.Second),
		Requests: nans(n), Errors: nans(n), Rejected: nans(n), OutTokens: nans(n), Cost: nans(n), CacheReadShare: nans(n)}
	if priced {
		h.Savings = nans(n)
	}
	sec := step.Seconds()
	for _, b := range buckets {
		i := int(b.Start.Sub(start) / step)
		if i < 0 || i >= n {
			continue
		}
		h.Requests[i], h.Errors[i], h.Rejected[i] = num(float64(b.Requests)/sec), num(float64(b.Failed)/sec), num(float64(b.Rejected)/sec)
		h.OutTokens[i], h.Cost[i] = num(float64(b.OutputTokens)/sec), num(b.CostUSD)
		h.CacheReadShare[i] = num(ratio(float64(b.CacheReadTokens), float64(b.InputTokens)))
		if priced {
			h.Savings[i] = num(b.SavingsUSD)
		}
	}
	return h
}

// hourHistory is the ring's last hour in steps of step ending now: rates
// averaged over each step's samplings, open streams and TTFT p99 their
// highest.
func (d *Dashboard) hourHistory(now time.Time, step time.Duration) historyPage {
	n := int(time.Hour / step)
	end := now.Truncate(step).Add(step)
	start := end.Add(-time.Hour)
	h := historyPage{Range: "1h", Source: "memory", StartMs: start.UnixMilli(), StepS: int(step / time.Second),
		Requests: nans(n), Errors: nans(n), Rejected: nans(n), OutTokens: nans(n), Open: nans(n), TTFTP99: nans(n), CacheReadShare: nans(n)}
	if d.savings != nil {
		h.Savings = nans(n)
	}
	type acc struct{ reqs, errs, rej, out, open, ttft, count float64 }
	accs := make([]acc, n)
	type cacheAcc struct{ in, read, saved float64 }
	caches := make([]cacheAcc, n)
	d.sampleMu.Lock()
	for _, s := range d.cacheHour.slots {
		i := int((s.at - start.Unix()) / int64(step/time.Second))
		if s.at == 0 || i < 0 || i >= n {
			continue
		}
		c := &caches[i]
		c.in, c.read, c.saved = c.in+float64(s.in), c.read+float64(s.read), c.saved+float64(s.saved)
	}
	d.hour.each(func(s slot) {
		i := int((s.at - start.Unix()) / int64(step/time.Second))
		if s.at == 0 || i < 0 || i >= n {
			return
		}
		a := &accs[i]
		a.reqs += float64(s.requests)
		a.errs += float64(s.errors)
		a.rej += float64(s.rejected)
		a.out += float64(s.outTokens)
		if o := float64(s.open); !math.IsNaN(o) {
			a.open = max(a.open, o)
		}
		if t := float64(s.ttftP99); !math.IsNaN(t) {
			a.ttft = max(a.ttft, t)
		}
		a.count++
	})
	d.sampleMu.Unlock()
	for i, a := range accs {
		if a.count == 0 {
			continue
		}
		// Over the whole step, so that rate × step is what happened in it
		// (a step the gateway started in is not extrapolated).
		span := step.Seconds()
		h.Requests[i], h.Errors[i], h.Rejected[i], h.OutTokens[i] = num(a.reqs/span), num(a.errs/span), num(a.rej/span), num(a.out/span)
		h.Open[i] = num(a.open)
		h.CacheReadShare[i] = num(ratio(caches[i].read, caches[i].in))
		if h.Savings != nil {
			h.Savings[i] = num(caches[i].saved)
		}
		if a.ttft > 0 {
			h.TTFTP99[i] = num(a.ttft)
		}
	}
	return h
}

func nans(n int) series {
	s := make(series, n)
	for i := range s {
		s[i] = num(math.NaN())
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "encode: "+err.Error())
		return
	}
	w.Write(b)
}
