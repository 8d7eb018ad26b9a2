// Package metrics holds the gateway's Prometheus collectors, named exactly as
// SPEC.md ("Metrics") fixes them. New builds them on a registerer of the
// caller's choosing (no global registry); Stream resolves one stream's label
// children once, so observing per chunk does not allocate.
package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Overhead stages of streamgate_gateway_overhead_seconds.
const (
	StageRequest = "request" // request arrival → upstream call
	StageChunk   = "chunk"   // upstream read → client flush
)

// Outcomes of streamgate_requests_total: how a request ended, which its
// status code alone does not tell (a stream that got 200 and then an error
// event).
const (
	OutcomeOK            = "ok"             // answered in full
	OutcomeErrorEvent    = "error_event"    // status 200, then the stream ended with an SSE error event
	OutcomeClientGone    = "client_gone"    // the client went away (code 499)
	OutcomeTimeout       = "timeout"        // a gateway timeout answered 504
	OutcomeUpstreamError = "upstream_error" // every route failed before the answer began
	OutcomeRejected      = "rejected"       // refused by the gateway's own checks (auth, input, limits)
	OutcomeError         = "error"          // any other failure of the gateway
	// OutcomeUntranslatable: code 400, route "": no route that could be
	// tried can be sent the request as written (the gateway's translation
	// refused it), not an upstream's failure.
	OutcomeUntranslatable = "untranslatable"
)

// RequestOutcomes are the outcomes of streamgate_requests_total.
var RequestOutcomes = []string{OutcomeOK, OutcomeErrorEvent, OutcomeClientGone, OutcomeTimeout, OutcomeUpstreamError, OutcomeRejected, OutcomeError, OutcomeUntranslatable}

// Reasons of streamgate_fallbacks_total: why an attempt was abandoned for
// the next route. The gateway labels with these constants only.
const (
	ReasonConnect           = "connect"             // no connection to the upstream
	ReasonUpstreamAuth      = "upstream_auth"       // 401 or 403: a wrong or revoked provider key
	ReasonUpstreamNotFound  = "upstream_not_found"  // 404: the model missing on that provider
	ReasonRateLimited       = "rate_limited"        // 429
	ReasonStatus5xx         = "status_5xx"          // a 5xx status
	ReasonUpstreamError     = "upstream_error"      // another retryable status (408, 409…)
	ReasonUntranslatable    = "untranslatable"      // the route's adapter cannot express the request
	ReasonFirstTokenTimeout = "first_token_timeout" // no content within timeouts.first_token
	ReasonIdleTimeout       = "idle_timeout"        // a stall past timeouts.idle (continue_on_cut)
	ReasonTruncated         = "truncated"           // the stream ended before its end
	ReasonMalformed         = "malformed"           // an event that is not what the dialect allows
	ReasonErrorEvent        = "error_event"         // the upstream's own error event
)

// FallbackReasons is every reason of streamgate_fallbacks_total.
var FallbackReasons = []string{ReasonConnect, ReasonUpstreamAuth, ReasonUpstreamNotFound, ReasonRateLimited, ReasonStatus5xx,
	ReasonUpstreamError, ReasonUntranslatable, ReasonFirstTokenTimeout, ReasonIdleTimeout, ReasonTruncated, ReasonMalformed, ReasonErrorEvent}

// Outcomes of streamgate_hedges_total.
const (
	HedgeWon  = "won"  // the hedge served
	HedgeLost = "lost" // the first route served
	HedgeNone = "none" // neither served
)

// HedgeOutcomes is every outcome of streamgate_hedges_total.
var HedgeOutcomes = []string{HedgeWon, HedgeLost, HedgeNone}

// Outcomes of streamgate_continuations_total.
const (
	ContinuationOK     = "ok"     // the next attempt went on
	ContinuationFailed = "failed" // it could not
)

// ContinuationOutcomes is every outcome of streamgate_continuations_total.
var ContinuationOutcomes = []string{ContinuationOK, ContinuationFailed}

// Kinds of streamgate_tokens_total. Input counts every prompt token;
// cache_read and cache_write count the parts of it read from and written
// to the upstreams' prompt caches (so input is not their sum with fresh
// tokens: fresh input is input - cache_read - cache_write).
const (
	KindInput      = "input"
	KindOutput     = "output"
	KindCacheRead  = "cache_read"
	KindCacheWrite = "cache_write"
)

// TokenKinds is every kind of streamgate_tokens_total.
var TokenKinds = []string{KindInput, KindOutput, KindCacheRead, KindCacheWrite}

// Scopes of streamgate_admission_rejected_total.
const (
	ScopeGateway = "gateway" // limits.max_streams
	ScopeKey     = "key"     // a key's concurrent requests
	ScopeRPM     = "rpm"     // a key's requests per minute
	ScopeTPM     = "tpm"     // a key's tokens per minute
	ScopeBudget  = "budget"  // a key's budget spent
	// A key's team: its concurrent requests (per replica), its requests
	// and tokens per minute, its budget spent.
	ScopeTeam       = "team"
	ScopeTeamRPM    = "team_rpm"
	ScopeTeamTPM    = "team_tpm"
	ScopeTeamBudget = "team_budget"
	// ScopeModelBudget: a key's budget for the model asked for (its
	// model_budgets) spent.
	ScopeModelBudget = "model_budget"
	// ScopeDecoding: max_decoding_bytes of large request bodies were being
	// read and decoded already.
	ScopeDecoding = "decoding"
)

// AdmissionScopes is every scope of streamgate_admission_rejected_total.
var AdmissionScopes = []string{ScopeGateway, ScopeKey, ScopeRPM, ScopeTPM, ScopeBudget, ScopeTeam, ScopeTeamRPM, ScopeTeamTPM, ScopeTeamBudget, ScopeModelBudget, ScopeDecoding}

// knownRequests are the code and outcome pairs of streamgate_requests_total
// a route has whatever happens to it, created at 0 by Known; other codes (a
// status the gateway refused with, an upstream's own) appear when first
// counted.
var knownRequests = [][2]string{
	{"200", OutcomeOK}, {"200", OutcomeErrorEvent}, {"499", OutcomeClientGone}, {"504", OutcomeTimeout}, {"502", OutcomeUpstreamError},
}

// Metrics is every collector of the gateway. Labels carry model and route
// names, never a key.
type Metrics struct {
	TTFT     *prometheus.HistogramVec // model, route
	ITL      *prometheus.HistogramVec // model, route
	MaxGap   *prometheus.HistogramVec // model, route
	TPS      *prometheus.HistogramVec // model, route
	Overhead *prometheus.HistogramVec // model, route, stage
	Requests *prometheus.CounterVec   // model, route, code, outcome
	Tokens   *prometheus.CounterVec   // model, kind (input|output|cache_read|cache_write)
	Cost     *prometheus.CounterVec   // model
	// CacheSavings and CacheLoss count what the prompt caches saved, at
	// the model's price, on the requests where they saved money and where
	// their writes cost more than their reads saved: the net savings are
	// CacheSavings − CacheLoss (a counter cannot go down, so the net one
	// request may lower is counted apart).
	CacheSavings *prometheus.CounterVec // model
	CacheLoss    *prometheus.CounterVec // model
	Fallbacks    *prometheus.CounterVec // model, reason
	Inflight     prometheus.Gauge
	// Hedges counts hedged first-token races by outcome: won (the hedge
	// served), lost (the first attempt served), none (neither served).
	Hedges *prometheus.CounterVec // model, outcome
	// Continuations counts attempts to continue a stream cut mid-answer by
	// outcome: ok (the next attempt went on), failed (it could not).
	Continuations *prometheus.CounterVec // model, outcome
	// Retries counts attempts on a route already tried for the request,
	// after a backoff.
	Retries *prometheus.CounterVec // model
	// Panics counts requests routed in panic: every route of the model was
	// ejected, and the one most likely to work was tried anyway.
	Panics *prometheus.CounterVec // model
	// Admission counts requests refused by admission control or a rate
	// limit, by scope (gateway, key, rpm, tpm).
	Admission *prometheus.CounterVec // scope

	// cache maps a model to its cache counters, resolved once (Known):
	// read without a lock or an allocation, replaced by a copy under
	// cacheMu when a model is added.
	cache   atomic.Pointer[map[string]*cacheCounters]
	cacheMu sync.Mutex
}

// cacheCounters are one model's children of CacheSavings and CacheLoss.
type cacheCounters struct{ savings, loss prometheus.Counter }

// New creates the collectors and registers them, with
// streamgate_build_info (ReadBuild), the Go runtime collector (GC and
// scheduler metrics, GC pause histograms included) and the process
// collector, on reg. A nil reg registers nothing (tests).
func New(reg prometheus.Registerer) *Metrics {
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	mr := []string{"model", "route"}
	m := &Metrics{
		TTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamgate_time_to_first_token_seconds", Help: "Request arrival to the first content chunk flushed to the client.",
			Buckets: latency,
		}, mr),
		ITL: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamgate_inter_token_latency_seconds", Help: "Gaps between consecutive content chunks as sent to the client.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .02, .035, .05, .075, .1, .15, .25, .4, .5, 1, 2.5, 5},
		}, mr),
		MaxGap: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamgate_stream_max_gap_seconds", Help: "Largest gap between content chunks within one stream.",
			Buckets: []float64{.005, .01, .025, .05, .1, .15, .25, .4, .5, 1, 2.5, 5, 10, 30},
		}, mr),
		TPS: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamgate_output_tokens_per_second", Help: "Output tokens per second of a stream, first to last content chunk.",
			Buckets: []float64{1, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000},
		}, mr),
		Overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamgate_gateway_overhead_seconds", Help: "Time the gateway itself adds: stage=request before the upstream call, stage=chunk from upstream read to client flush (sampled).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2.5, 14), // 1µs .. ~150ms
		}, []string{"model", "route", "stage"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_requests_total", Help: "Chat completion requests by model, serving route, HTTP status (499: client went away) and outcome (ok, error_event, client_gone, timeout, upstream_error, rejected, error, untranslatable).",
		}, []string{"model", "route", "code", "outcome"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_tokens_total", Help: "Tokens by model and kind: input (every prompt token), output, and the parts of input read from (cache_read) and written to (cache_write) the upstreams' prompt caches.",
		}, []string{"model", "kind"}),
		Cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_cost_usd_total", Help: "Cost in USD from the model's configured prices.",
		}, []string{"model"}),
		CacheSavings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_cache_savings_usd_total", Help: "What the prompt caches saved in USD at the model's configured prices, on the requests where they saved: cache reads at the input price less the cached_input price, less cache writes at the cache_write price less the input price. Net savings: this less streamgate_cache_loss_usd_total.",
		}, []string{"model"}),
		CacheLoss: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_cache_loss_usd_total", Help: "What the prompt caches cost more than no cache in USD at the model's configured prices, on the requests whose cache writes cost more than their cache reads saved.",
		}, []string{"model"}),
		Fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_fallbacks_total", Help: "Attempts abandoned for the next route, by reason.",
		}, []string{"model", "reason"}),
		Inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "streamgate_inflight_streams", Help: "Chat completion requests being served.",
		}),
		Hedges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_hedges_total", Help: "Hedged first-token races (a second route started when the first was slow), by outcome: won (the hedge served), lost (the first route served), none (neither).",
		}, []string{"model", "outcome"}),
		Continuations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_continuations_total", Help: "Streams cut mid-answer that the gateway tried to continue on another attempt, by outcome (ok, failed).",
		}, []string{"model", "outcome"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_retries_total", Help: "Attempts on a route already tried for the same request, after a backoff.",
		}, []string{"model"}),
		Panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_panic_routed_total", Help: "Requests routed although every route of their model was ejected (panic routing: the route most likely to work is tried).",
		}, []string{"model"}),
		Admission: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_admission_rejected_total", Help: "Requests refused by admission control or a key's rate limit, by scope: gateway (limits.max_streams), key (a key's concurrent requests), rpm, tpm (a key's requests or tokens per minute), budget (a key's budget spent).",
		}, []string{"scope"}),
	}
	for _, scope := range AdmissionScopes {
		m.Admission.WithLabelValues(scope) // 0 until the first refusal
	}
	if reg != nil {
		reg.MustRegister(m.TTFT, m.ITL, m.MaxGap, m.TPS, m.Overhead, m.Requests, m.Tokens, m.Cost, m.CacheSavings, m.CacheLoss, m.Fallbacks, m.Inflight,
			m.Hedges, m.Continuations, m.Retries, m.Panics, m.Admission,
			newBuildInfo(ReadBuild()),
			collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsGC, collectors.MetricsScheduler)),
			NewGCPauseCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	return m
}

// Stream is one stream's resolved observers. A nil *Stream ignores every
// call, so code paths without metrics need no checks.
type Stream struct {
	ttft, itl, maxGap, tps, chunk, request prometheus.Observer
}

// Stream resolves the label children of one (model, route) pair. Call it
// once per route (it allocates and hashes labels) and share the result: a
// Stream is safe for concurrent use, and observing does not allocate.
func (m *Metrics) Stream(model, route string) *Stream {
	if m == nil {
		return nil
	}
	return &Stream{
		ttft:    m.TTFT.WithLabelValues(model, route),
		itl:     m.ITL.WithLabelValues(model, route),
		maxGap:  m.MaxGap.WithLabelValues(model, route),
		tps:     m.TPS.WithLabelValues(model, route),
		chunk:   m.Overhead.WithLabelValues(model, route, StageChunk),
		request: m.Overhead.WithLabelValues(model, route, StageRequest),
	}
}

// TTFT records the time to the first content chunk.
func (s *Stream) TTFT(d time.Duration) {
	if s != nil {
		s.ttft.Observe(d.Seconds())
	}
}

// ITL records one gap between content chunks.
func (s *Stream) ITL(d time.Duration) {
	if s != nil {
		s.itl.Observe(d.Seconds())
	}
}

// ChunkOverhead records the gateway's time for one chunk.
func (s *Stream) ChunkOverhead(d time.Duration) {
	if s != nil {
		s.chunk.Observe(d.Seconds())
	}
}

// End records the stream's worst gap and its output rate; a rate of 0 or
// less (fewer than two content chunks) is not recorded.
func (s *Stream) End(maxGap time.Duration, tokensPerSecond float64) {
	if s == nil {
		return
	}
	s.maxGap.Observe(maxGap.Seconds())
	if tokensPerSecond > 0 {
		s.tps.Observe(tokensPerSecond)
	}
}

// RequestOverhead records the gateway's time before the upstream call.
func (s *Stream) RequestOverhead(d time.Duration) {
	if s != nil {
		s.request.Observe(d.Seconds())
	}
}

// Known creates, with value 0, the series of the labelled counters a
// configured model has before anything happened, so that rate() and
// increase() read 0 rather than nothing until the first event:
// streamgate_requests_total for each of its routes with the pairs of
// knownRequests and for no route with 400 untranslatable, streamgate_tokens_total of every kind,
// streamgate_cost_usd_total, streamgate_cache_savings_usd_total and
// streamgate_cache_loss_usd_total, streamgate_fallbacks_total of every reason,
// streamgate_retries_total, streamgate_hedges_total of every outcome when
// the model hedges, streamgate_continuations_total of every outcome when
// it continues cut streams. The scopes of
// streamgate_admission_rejected_total, which carry no model, are created
// by New.
func (m *Metrics) Known(model string, routes []string, hedges, continues bool) {
	if m == nil {
		return
	}
	for _, r := range routes {
		for _, k := range knownRequests {
			m.Requests.WithLabelValues(model, r, k[0], k[1])
		}
	}
	m.Requests.WithLabelValues(model, "", "400", OutcomeUntranslatable) // a refusal names no route
	for _, k := range TokenKinds {
		m.Tokens.WithLabelValues(model, k)
	}
	m.Cost.WithLabelValues(model)
	m.cacheCounters(model)
	for _, reason := range FallbackReasons {
		m.Fallbacks.WithLabelValues(model, reason)
	}
	m.Retries.WithLabelValues(model)
	m.Panics.WithLabelValues(model)
	if hedges {
		for _, o := range HedgeOutcomes {
			m.Hedges.WithLabelValues(model, o)
		}
	}
	if continues {
		for _, o := range ContinuationOutcomes {
			m.Continuations.WithLabelValues(model, o)
		}
	}
}

// Request counts one finished request with its status and outcome (one of
// the Outcome constants).
func (m *Metrics) Request(model, route string, status int, outcome string) {
	if m != nil {
		m.Requests.WithLabelValues(model, route, strconv.Itoa(status), outcome).Inc()
	}
}

// Usage adds a request's tokens and cost: input counts every prompt
// token, cacheRead and cacheWrite the parts of it read from and written to
// a prompt cache.
func (m *Metrics) Usage(model string, input, output, cacheRead, cacheWrite int, costUSD float64) {
	if m == nil {
		return
	}
	for _, t := range [...]struct {
		kind string
		n    int
	}{{KindInput, input}, {KindOutput, output}, {KindCacheRead, cacheRead}, {KindCacheWrite, cacheWrite}} {
		if t.n > 0 {
			m.Tokens.WithLabelValues(model, t.kind).Add(float64(t.n))
		}
	}
	if costUSD > 0 {
		m.Cost.WithLabelValues(model).Add(costUSD)
	}
}

// CacheSaved adds what the prompt cache saved one request of model, in USD
// (config.Price.CacheSavings): to streamgate_cache_savings_usd_total when
// above 0, to streamgate_cache_loss_usd_total when below. It does not
// allocate for a model Known created.
func (m *Metrics) CacheSaved(model string, usd float64) {
	if m == nil || usd == 0 || usd != usd {
		return
	}
	c := m.cacheCounters(model)
	if usd > 0 {
		c.savings.Add(usd)
	} else {
		c.loss.Add(-usd)
	}
}

// cacheCounters returns model's cache counters, resolved on first use.
func (m *Metrics) cacheCounters(model string) *cacheCounters {
	if p := m.cache.Load(); p != nil {
		if c, ok := (*p)[model]; ok {
			return c
		}
	}
	m.cacheMu.Lock()
	defer m.cacheMu.Unlock()
	old := map[string]*cacheCounters{}
	if p := m.cache.Load(); p != nil {
		if c, ok := (*p)[model]; ok {
			return c
		}
		old = *p
	}
	next := make(map[string]*cacheCounters, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	c := &cacheCounters{savings: m.CacheSavings.WithLabelValues(model), loss: m.CacheLoss.WithLabelValues(model)}
	next[model] = c
	m.cache.Store(&next)
	return c
}

// Fallback counts one attempt given up for the next route.
func (m *Metrics) Fallback(model, reason string) {
	if m != nil {
		m.Fallbacks.WithLabelValues(model, reason).Inc()
	}
}

// Hedge counts one hedged race (outcome won, lost or none).
func (m *Metrics) Hedge(model, outcome string) {
	if m != nil {
		m.Hedges.WithLabelValues(model, outcome).Inc()
	}
}

// Continuation counts one attempt to continue a cut stream (ok, failed).
func (m *Metrics) Continuation(model, outcome string) {
	if m != nil {
		m.Continuations.WithLabelValues(model, outcome).Inc()
	}
}

// Retry counts one retry of a route after a backoff.
func (m *Metrics) Retry(model string) {
	if m != nil {
		m.Retries.WithLabelValues(model).Inc()
	}
}

// Panic counts one request routed in panic.
func (m *Metrics) Panic(model string) {
	if m != nil {
		m.Panics.WithLabelValues(model).Inc()
	}
}

// Rejected counts one request refused by admission control.
func (m *Metrics) Rejected(scope string) {
	if m != nil {
		m.Admission.WithLabelValues(scope).Inc()
	}
}

// RouteState is one route's live state for streamgate_route_state and
// streamgate_route_inflight.
type RouteState struct {
	Model, Route string
	State        float64 // 0 healthy, 1 probing, 2 ejected
	Inflight     float64 // attempts open on the route now
	Attempts     float64 // attempts begun on the route since start
	Failures     float64 // of them, failed (connect failures included)
}

// DashboardRegistry is a registry of the families the live dashboard
// reads (internal/dashboard: the latency histograms but output rates,
// requests, tokens, fallbacks, continuations, hedges, open streams, GC
// pauses), the collectors of m's registry: the dashboard gathers it each
// second, and gathering everything (output rates, costs, the Go runtime
// and process collectors) allocated twice as much (issue 35). Add the
// route state with RegisterRouteState.
func (m *Metrics) DashboardRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.TTFT, m.ITL, m.MaxGap, m.Overhead, m.Requests, m.Tokens, m.Fallbacks, m.Inflight,
		m.Hedges, m.Continuations, NewGCPauseCollector())
	return reg
}

// RegisterRouteState adds streamgate_route_state{model,route} (0 healthy,
// 1 probing: one probe out after an ejection, 2 ejected) and
// streamgate_route_inflight{model,route} (attempts open on the route), read
// from states at each scrape.
func RegisterRouteState(reg prometheus.Registerer, states func() []RouteState) {
	if reg == nil {
		return
	}
	reg.MustRegister(&routeStateCollector{
		desc:     prometheus.NewDesc("streamgate_route_state", "Circuit state of each route: 0 healthy, 1 probing (one trial request out after an ejection), 2 ejected (consecutive failures).", []string{"model", "route"}, nil),
		inflight: prometheus.NewDesc("streamgate_route_inflight", "Requests in flight on each route (attempts: a hedged request counts on both of its routes).", []string{"model", "route"}, nil),
		attempts: prometheus.NewDesc("streamgate_route_attempts_total", "Attempts begun on each route (a fallback's and a retry's each count).", []string{"model", "route"}, nil),
		failures: prometheus.NewDesc("streamgate_route_failures_total", "Attempts on each route that failed against its health (5xx, 429, connect failures, timeouts, broken streams), whether or not another route then served the request.", []string{"model", "route"}, nil),
		states:   states,
	})
}

type routeStateCollector struct {
	desc, inflight, attempts, failures *prometheus.Desc
	states                             func() []RouteState
}

func (c *routeStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.inflight
	ch <- c.attempts
	ch <- c.failures
}

func (c *routeStateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.states() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, s.State, s.Model, s.Route)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, s.Inflight, s.Model, s.Route)
		ch <- prometheus.MustNewConstMetric(c.attempts, prometheus.CounterValue, s.Attempts, s.Model, s.Route)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, s.Failures, s.Model, s.Route)
	}
}
