package dashboard

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
)

// num is a figure of the view; NaN and ±Inf (nothing to show: no request,
// no observation in the window) encode as null. Four significant digits
// are plenty for a screen and keep each event small.
type num float64

func (n num) MarshalJSON() ([]byte, error) { return n.append(nil), nil }

func (n num) append(b []byte) []byte {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', 4, 64)
}

// series is a history of figures, encoded in one buffer instead of one
// MarshalJSON call per point (a page's event carries 300 points a series).
type series []num

func (s series) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 6*len(s)+2)
	b = append(b, '[')
	for i, n := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = n.append(b)
	}
	return append(b, ']'), nil
}

// view is one event of /dashboard/events: every figure of the page.
type view struct {
	At      int64  `json:"at"`       // Unix milliseconds of the newest sample
	WindowS int    `json:"window_s"` // the window asked for
	SpanS   num    `json:"span_s"`   // the time the figures cover: the window, or less while the samples are younger
	Auth    string `json:"auth"`     // "open" (dashboard.open) or "login"

	OpenStreams      num `json:"open_streams"`
	RequestsPerS     num `json:"requests_per_s"`
	OutputTokensPerS num `json:"output_tokens_per_s"`
	ErrorRatio       num `json:"error_ratio"`

	GCPausesPerS  num         `json:"gc_pauses_per_s"`
	GCPauseP99S   num         `json:"gc_pause_p99_s"`
	GCPauseMaxS   num         `json:"gc_pause_max_s"` // the upper bound of the highest bucket with a pause
	ChunkOverP50S num         `json:"chunk_overhead_p50_s"`
	ChunkOverP99S num         `json:"chunk_overhead_p99_s"`
	Models        []modelView `json:"models"`
	Routes        []routeView `json:"routes"`
	MCP           []mcpView   `json:"mcp"`                  // the MCP servers (empty: none configured)
	Cost          *costView   `json:"cost_today,omitempty"` // nil: no ledger
	Budgets       *budgetView `json:"budgets,omitempty"`    // nil: no ledger
	History       historyView `json:"history"`

	// RejectedPerS are requests refused by the gateway's own checks (401,
	// 404, 429…): counted apart, never as errors.
	RejectedPerS num `json:"rejected_per_s"`
	// ErrorsByKind are the requests that failed over the window by how,
	// the rejected ones by status code, and the attempts abandoned for
	// another route by reason (a request may fail over and still succeed).
	ErrorsByKind    []kindRow `json:"errors_by_kind"`
	RejectedByCode  []kindRow `json:"rejected_by_code"`
	AttemptFailures []kindRow `json:"attempt_failures"`

	Replica string `json:"replica"` // this gateway's name among replicas
	Grafana string `json:"grafana"` // the board that sums every replica
}

// kindRow is one kind of failure over the window.
type kindRow struct {
	Kind  string `json:"kind"`  // the metric's label value
	Label string `json:"label"` // what the page says
	Count num    `json:"count"` // over the window
}

// budgetView is every key's budget in its current period.
type budgetView struct {
	AsOf  int64       `json:"as_of"`
	Error string      `json:"error"`
	Keys  []budgetRow `json:"keys"`
}

type budgetRow struct {
	Key          string `json:"key"`
	Period       string `json:"period"`
	Since        string `json:"since,omitempty"` // RFC 3339; absent for a total budget
	LimitUSD     num    `json:"limit_usd"`
	SpentUSD     num    `json:"spent_usd"`
	RemainingUSD num    `json:"remaining_usd"`
	UsedRatio    num    `json:"used_ratio"`
}

// outcomeLabels name the error outcomes of streamgate_requests_total.
var outcomeLabels = []struct{ kind, label string }{
	{"upstream_error", "upstream error (5xx, connect, refusal)"},
	{"timeout", "timeout"},
	{"error_event", "cut mid-stream (error event after 200)"},
	{"error", "gateway error"},
}

// reasonLabels name the reasons of streamgate_fallbacks_total; others show as they are.
var reasonLabels = map[string]string{
	"connect": "connect failed", "status_5xx": "upstream 5xx", "rate_limited": "upstream 429",
	"upstream_auth": "upstream 401/403", "upstream_not_found": "upstream 404", "upstream_error": "upstream 4xx (retryable)",
	"first_token_timeout": "first-token timeout", "idle_timeout": "idle timeout (stall)", "truncated": "cut (stream ended early)",
	"malformed": "malformed event", "error_event": "upstream error event", "untranslatable": "untranslatable request",
}

type modelView struct {
	Model             string `json:"model"`
	RequestsPerS      num    `json:"requests_per_s"`
	InputTokensPerS   num    `json:"input_tokens_per_s"`
	OutputTokensPerS  num    `json:"output_tokens_per_s"`
	ErrorRatio        num    `json:"error_ratio"`
	FallbackRatio     num    `json:"fallback_ratio"`     // routes abandoned per request
	ContinuationRatio num    `json:"continuation_ratio"` // continuations tried per request
	HedgeRatio        num    `json:"hedge_ratio"`        // hedged races per request
	// CacheReadShare is the share of the prompt tokens read from the
	// upstreams' prompt caches over the window; null without prompt tokens.
	CacheReadShare num `json:"cache_read_share"`
	// SavingsUSDPerH is what the prompt caches saved over the window, per
	// hour, at the model's current price (Options.Savings): null without
	// prices; below 0 when the cache writes cost more than the reads saved.
	SavingsUSDPerH num `json:"savings_usd_per_h"`
}

type routeView struct {
	Model        string `json:"model"`
	Route        string `json:"route"`
	State        string `json:"state"`    // healthy, probing, ejected; "" unknown
	Inflight     num    `json:"inflight"` // requests open on the route now
	RequestsPerS num    `json:"requests_per_s"`
	ErrorRatio   num    `json:"error_ratio"`
	TTFTP50S     num    `json:"ttft_p50_s"`
	TTFTP99S     num    `json:"ttft_p99_s"`
	ITLP50S      num    `json:"itl_p50_s"`
	ITLP99S      num    `json:"itl_p99_s"`
	GapP99S      num    `json:"gap_p99_s"`
	ChunkP99S    num    `json:"chunk_overhead_p99_s"`
	// From the router's health (Options.Routes): attempts begun and failed
	// over the window, whether or not a request ended on this route.
	Attempts            num    `json:"attempts"`
	Failures            num    `json:"failures"`
	FailureRatio        num    `json:"failure_ratio"`
	ConsecutiveFailures int64  `json:"consecutive_failures"`
	Ejections           uint64 `json:"ejections"` // since the gateway started
}

// mcpView is one MCP server over the window: its tool calls, their errors
// and durations, and its health.
type mcpView struct {
	Server     string `json:"server"`
	Health     string `json:"health"` // ok, down, "" not known yet
	Error      string `json:"error"`  // the last failure while down
	CallsPerS  num    `json:"calls_per_s"`
	ErrorRatio num    `json:"error_ratio"`
	P50S       num    `json:"duration_p50_s"`
	P99S       num    `json:"duration_p99_s"`
}

// mcpViews are the MCP servers of now over the window since old.
func mcpViews(now, old *sample, span float64) []mcpView {
	names := map[string]struct{}{}
	for k := range now.mcp {
		names[k] = struct{}{}
	}
	health := map[string]MCPHealth{}
	for _, h := range now.mcpHealth {
		names[h.Server] = struct{}{}
		health[h.Server] = h
	}
	out := []mcpView{}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		r, o := now.mcp[name], old.mcp[name]
		if r == nil {
			r = &mcpSample{}
		}
		if o == nil {
			o = &mcpSample{}
		}
		v := mcpView{Server: name, CallsPerS: num(math.NaN()), ErrorRatio: num(math.NaN()), P50S: num(math.NaN()), P99S: num(math.NaN())}
		if h, ok := health[name]; ok && h.Known {
			v.Health = "down"
			if h.OK {
				v.Health = "ok"
			} else {
				v.Error = h.Error
			}
		}
		if span > 0 {
			v.CallsPerS = num(rate(r.calls, o.calls, span))
			v.ErrorRatio = num(ratio(increase(r.errors, o.errors), increase(r.calls, o.calls)))
			d := r.dur.sub(o.dur)
			v.P50S, v.P99S = num(d.quantile(.5)), num(d.quantile(.99))
		}
		out = append(out, v)
	}
	return out
}

// costView is the ledger's cost since 00:00 UTC.
type costView struct {
	Since   string    `json:"since"`  // RFC 3339
	AsOf    int64     `json:"as_of"`  // Unix milliseconds of the query
	Error   string    `json:"error"`  // the last query's failure; the rows are then the previous ones
	ByKey   []costRow `json:"by_key"` // "" group: requests without a key
	ByModel []costRow `json:"by_model"`
}

type costRow struct {
	Group    string `json:"group"`
	Requests int64  `json:"requests"`
	CostUSD  num    `json:"cost_usd"`
	// CacheReadShare is the share of the prompt tokens read from a cache
	// (null without prompt tokens), SavingsUSD what the caches saved at the
	// current prices (null without prices), as streamgate usage has them.
	CacheReadShare num `json:"cache_read_share"`
	SavingsUSD     num `json:"savings_usd"`
}

// historyView is one point per sampling, oldest first, for the sparklines.
type historyView struct {
	StepS            num               `json:"step_s"`
	OpenStreams      series            `json:"open_streams"`
	OutputTokensPerS series            `json:"output_tokens_per_s"`
	Models           map[string]series `json:"models"` // output tokens/s of each model
}

// point is one sampling's figures for the history.
type point struct {
	open, outTPS float64
	models       map[string]float64
}

// historyRate is the window of the history's tokens/s: longer than one
// sampling so that the sparkline does not jump with each batch of chunks.
const historyRate = 5 * time.Second

// states names streamgate_route_state's values.
var states = []string{"healthy", "probing", "ejected"}

// at returns the sample the window of the newest one starts from: the
// newest sample at least window older, or the oldest there is while the
// samples span less. Nil with fewer than two samples.
func at(samples []*sample, window time.Duration) *sample {
	n := len(samples)
	if n < 2 {
		return nil
	}
	from := samples[n-1].at.Add(-window)
	for i := n - 2; i >= 0; i-- {
		if !samples[i].at.After(from) {
			return samples[i]
		}
	}
	return samples[0]
}

// compute is the view of samples (oldest first) over window: rates from
// counter increases and quantiles from histogram bucket increases between
// the newest sample and the one a window before it; savings prices the
// cache's tokens (nil: no savings).
func compute(samples []*sample, window time.Duration, savings SavingsFunc) view {
	v := view{WindowS: int(window / time.Second), SpanS: num(math.NaN()), OpenStreams: num(math.NaN()),
		RequestsPerS: num(math.NaN()), OutputTokensPerS: num(math.NaN()), ErrorRatio: num(math.NaN()),
		GCPausesPerS: num(math.NaN()), GCPauseP99S: num(math.NaN()), GCPauseMaxS: num(math.NaN()),
		ChunkOverP50S: num(math.NaN()), ChunkOverP99S: num(math.NaN()), RejectedPerS: num(math.NaN()),
		Models: []modelView{}, Routes: []routeView{}, MCP: []mcpView{}, ErrorsByKind: []kindRow{}, RejectedByCode: []kindRow{}, AttemptFailures: []kindRow{}}
	if len(samples) == 0 {
		return v
	}
	now := samples[len(samples)-1]
	v.At = now.at.UnixMilli()
	v.OpenStreams = num(now.inflight)
	old := at(samples, window)
	if old == nil {
		old = &sample{at: now.at, routes: map[routeKey]*routeSample{}, models: map[string]*modelSample{}}
	}
	span := now.at.Sub(old.at).Seconds()
	if span > 0 {
		v.SpanS = num(span)
	}
	v.MCP = mcpViews(now, old, span)

	var chunks hist
	rkeys := map[routeKey]struct{}{}
	for k := range now.routes {
		rkeys[k] = struct{}{}
	}
	for k := range now.health {
		rkeys[k] = struct{}{}
	}
	keys := slices.SortedFunc(maps.Keys(rkeys), func(a, b routeKey) int {
		return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(a.route, b.route))
	})
	for _, k := range keys {
		r, o := now.routes[k], old.routes[k]
		if r == nil {
			r = &routeSample{state: math.NaN(), inflight: math.NaN()}
		}
		if o == nil {
			o = &routeSample{}
		}
		rv := routeView{Model: k.model, Route: k.route, Inflight: num(r.inflight),
			Attempts: num(math.NaN()), Failures: num(math.NaN()), FailureRatio: num(math.NaN())}
		if s := r.state; s >= 0 && int(s) < len(states) {
			rv.State = states[int(s)]
		}
		if h, ok := now.health[k]; ok {
			oh := old.health[k] // zero before the window: counts since start
			if oh.Attempts > h.Attempts || oh.Failures > h.Failures {
				oh = RouteHealth{} // the router restarted its counts
			}
			att, fail := float64(h.Attempts-oh.Attempts), float64(h.Failures-oh.Failures)
			rv.State = cmp.Or(h.State, rv.State)
			rv.Attempts, rv.Failures, rv.FailureRatio = num(att), num(fail), num(ratio(fail, att))
			rv.ConsecutiveFailures, rv.Ejections = h.ConsecutiveFailures, h.Ejections
		}
		reqs := increase(r.requests, o.requests)
		rv.RequestsPerS = num(rate(r.requests, o.requests, span))
		rv.ErrorRatio = num(ratio(increase(r.errors, o.errors), reqs))
		ttft, itl := r.ttft.sub(o.ttft), r.itl.sub(o.itl)
		rv.TTFTP50S, rv.TTFTP99S = num(ttft.quantile(.5)), num(ttft.quantile(.99))
		rv.ITLP50S, rv.ITLP99S = num(itl.quantile(.5)), num(itl.quantile(.99))
		rv.GapP99S = num(r.gap.sub(o.gap).quantile(.99))
		chunk := r.chunk.sub(o.chunk)
		rv.ChunkP99S = num(chunk.quantile(.99))
		chunks = chunks.add(chunk)
		if span <= 0 {
			rv.RequestsPerS, rv.ErrorRatio = num(math.NaN()), num(math.NaN())
			rv.TTFTP50S, rv.TTFTP99S, rv.ITLP50S, rv.ITLP99S = num(math.NaN()), num(math.NaN()), num(math.NaN()), num(math.NaN())
			rv.GapP99S, rv.ChunkP99S = num(math.NaN()), num(math.NaN())
		}
		v.Routes = append(v.Routes, rv)
	}
	if span <= 0 {
		for _, name := range slices.Sorted(maps.Keys(now.models)) {
			v.Models = append(v.Models, modelView{Model: name, RequestsPerS: num(math.NaN()), InputTokensPerS: num(math.NaN()),
				OutputTokensPerS: num(math.NaN()), ErrorRatio: num(math.NaN()), FallbackRatio: num(math.NaN()),
				ContinuationRatio: num(math.NaN()), HedgeRatio: num(math.NaN()), CacheReadShare: num(math.NaN()), SavingsUSDPerH: num(math.NaN())})
		}
		return v
	}
	v.ChunkOverP50S, v.ChunkOverP99S = num(chunks.quantile(.5)), num(chunks.quantile(.99))

	var reqs, errs, out, servedAll float64
	names := map[string]bool{}
	for name := range now.models {
		names[name] = true
	}
	for _, k := range keys {
		names[k.model] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		m, o := now.models[name], old.models[name]
		if m == nil {
			m = &modelSample{}
		}
		if o == nil {
			o = &modelSample{}
		}
		n := increase(m.requests, o.requests)
		e := increase(m.errors, o.errors)
		served := n - increase(m.rejected, o.rejected) // the error ratio's base, as in streamgate usage
		tok := increase(m.outTokens, o.outTokens)
		reqs, errs, out, servedAll = reqs+n, errs+e, out+tok, servedAll+served
		read, write := increase(m.cacheRead, o.cacheRead), increase(m.cacheWrite, o.cacheWrite)
		saved := math.NaN()
		if savings != nil {
			saved = savings(name, int64(math.Round(read)), int64(math.Round(write))) / span * 3600
		}
		v.Models = append(v.Models, modelView{
			Model:             name,
			RequestsPerS:      num(n / span),
			InputTokensPerS:   num(rate(m.inTokens, o.inTokens, span)),
			OutputTokensPerS:  num(tok / span),
			ErrorRatio:        num(ratio(e, served)),
			FallbackRatio:     num(ratio(increase(m.fallbacks, o.fallbacks), n)),
			ContinuationRatio: num(ratio(increase(m.continuations, o.continuations), n)),
			HedgeRatio:        num(ratio(increase(m.hedges, o.hedges), n)),
			CacheReadShare:    num(ratio(read, increase(m.inTokens, o.inTokens))),
			SavingsUSDPerH:    num(saved),
		})
	}
	v.RequestsPerS, v.OutputTokensPerS, v.ErrorRatio = num(reqs/span), num(out/span), num(ratio(errs, servedAll))
	v.RejectedPerS = num(increase(now.outcomes["rejected"], old.outcomes["rejected"]) / span)
	for _, o := range outcomeLabels {
		if n := increase(now.outcomes[o.kind], old.outcomes[o.kind]); n > 0 {
			v.ErrorsByKind = append(v.ErrorsByKind, kindRow{Kind: o.kind, Label: o.label, Count: num(n)})
		}
	}
	for _, code := range slices.Sorted(maps.Keys(now.rejected)) {
		if n := increase(now.rejected[code], old.rejected[code]); n > 0 {
			v.RejectedByCode = append(v.RejectedByCode, kindRow{Kind: code, Label: "rejected " + code, Count: num(n)})
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(now.reasons)) {
		if n := increase(now.reasons[reason], old.reasons[reason]); n > 0 {
			v.AttemptFailures = append(v.AttemptFailures, kindRow{Kind: reason, Label: cmp.Or(reasonLabels[reason], reason), Count: num(n)})
		}
	}

	gc := now.gc.sub(old.gc)
	v.GCPausesPerS = num(float64(gc.total()) / span)
	v.GCPauseP99S, v.GCPauseMaxS = num(gc.quantile(.99)), num(gc.maxBound())
	return v
}

// ttftWindow is the span of each hour slot's TTFT p99: long enough to hold
// a few first tokens at a low rate.
const ttftWindow = 10 * time.Second

// slotOf is the hour ring's slot for the newest of samples.
func slotOf(samples []*sample) slot {
	now := samples[len(samples)-1]
	s := slot{at: now.at.Unix(), open: float32(now.inflight), ttftP99: float32(math.NaN())}
	if len(samples) < 2 {
		return s
	}
	prev := samples[len(samples)-2]
	var reqs, errs, out float64
	for name, m := range now.models {
		o := prev.models[name]
		if o == nil {
			o = &modelSample{}
		}
		reqs += increase(m.requests, o.requests)
		errs += increase(m.errors, o.errors)
		out += increase(m.outTokens, o.outTokens)
	}
	s.requests, s.errors, s.outTokens = float32(reqs), float32(errs), float32(out)
	s.rejected = float32(increase(now.outcomes["rejected"], prev.outcomes["rejected"]))
	if old := at(samples, ttftWindow); old != nil {
		var ttft hist
		for k, r := range now.routes {
			if o := old.routes[k]; o != nil {
				ttft = ttft.add(r.ttft.sub(o.ttft))
			} else {
				ttft = ttft.add(r.ttft)
			}
		}
		s.ttftP99 = float32(ttft.quantile(.99))
	}
	return s
}

// cacheOf is what the prompt caches did from sample old to now, every
// model summed: prompt and cache-read tokens, and the USD they saved at
// the prices of savings (0 without it).
func cacheOf(old, now *sample, savings SavingsFunc) (in, read, saved float64) {
	for name, m := range now.models {
		o := old.models[name]
		if o == nil {
			o = &modelSample{}
		}
		r := increase(m.cacheRead, o.cacheRead)
		in += increase(m.inTokens, o.inTokens)
		read += r
		if w := increase(m.cacheWrite, o.cacheWrite); savings != nil && (r > 0 || w > 0) {
			saved += savings(name, int64(math.Round(r)), int64(math.Round(w)))
		}
	}
	return in, read, saved
}

// pointOf is the history's point for the newest of samples.
func pointOf(samples []*sample) point {
	now := samples[len(samples)-1]
	p := point{open: now.inflight, outTPS: math.NaN(), models: map[string]float64{}}
	old := at(samples, historyRate)
	if old == nil {
		return p
	}
	span := now.at.Sub(old.at).Seconds()
	p.outTPS = 0
	for name, m := range now.models {
		o := old.models[name]
		if o == nil {
			o = &modelSample{}
		}
		r := rate(m.outTokens, o.outTokens, span)
		p.models[name] = r
		p.outTPS += r
	}
	return p
}

// historyOf lays the points out as the view's series, one per figure.
func historyOf(points []point, step time.Duration) historyView {
	h := historyView{StepS: num(step.Seconds()), OpenStreams: make(series, len(points)),
		OutputTokensPerS: make(series, len(points)), Models: map[string]series{}}
	for i, p := range points {
		h.OpenStreams[i], h.OutputTokensPerS[i] = num(p.open), num(p.outTPS)
		for name := range p.models {
			if h.Models[name] == nil {
				s := make(series, len(points))
				for j := range s {
					s[j] = num(math.NaN())
				}
				h.Models[name] = s
			}
		}
	}
	for name, s := range h.Models {
		for i, p := range points {
			if r, ok := p.models[name]; ok {
				s[i] = num(r)
			}
		}
	}
	return h
}
