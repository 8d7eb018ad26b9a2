package dashboard

import (
	"cmp"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The gateway's metrics the dashboard reads (internal/metrics).
const (
	mTTFT          = "streamgate_time_to_first_token_seconds"
	mITL           = "streamgate_inter_token_latency_seconds"
	mMaxGap        = "streamgate_stream_max_gap_seconds"
	mOverhead      = "streamgate_gateway_overhead_seconds"
	mRequests      = "streamgate_requests_total"
	mTokens        = "streamgate_tokens_total"
	mFallbacks     = "streamgate_fallbacks_total"
	mContinuations = "streamgate_continuations_total"
	mHedges        = "streamgate_hedges_total"
	mInflight      = "streamgate_inflight_streams"
	mGCPause       = "streamgate_gc_pause_seconds"
	mRouteState    = "streamgate_route_state"
	mRouteInflight = "streamgate_route_inflight"
	mMCPCalls      = "streamgate_mcp_tool_calls_total"
	mMCPDuration   = "streamgate_mcp_tool_call_duration_seconds"
)

// mcpErrorOutcomes are the outcomes of streamgate_mcp_tool_calls_total the
// MCP panel counts as errors: the server failed or went quiet. A tool's
// own isError answer, a refusal and a client gone are not.
var mcpErrorOutcomes = map[string]bool{"error": true, "timeout": true}

// mcpSample is one MCP server's cumulative figures at a sampling.
type mcpSample struct {
	calls, errors float64
	dur           hist
}

// unknownModel is the one row of every request whose model is none of the
// configured ones (a client's typo, or a request refused before its model
// was read): the gateway labels them all "" so that a client cannot grow
// the metrics, and the dashboard shows them together.
const unknownModel = "(unknown model)"

// errorOutcomes are the outcomes of streamgate_requests_total that the
// dashboard counts as errors: the gateway or its upstreams failed. A client
// that went away (client_gone) or a request refused by the gateway's own
// checks (rejected) is the client's doing and not counted.
var errorOutcomes = map[string]bool{"error_event": true, "timeout": true, "upstream_error": true, "error": true}

// routeKey names one route of one model.
type routeKey struct{ model, route string }

// routeSample is one route's cumulative figures at a sampling.
type routeSample struct {
	ttft, itl, gap, chunk hist
	requests, errors      float64
	state                 float64 // 0 healthy, 1 probing, 2 ejected; NaN: unknown
	inflight              float64 // attempts open on the route; NaN: unknown
}

// modelSample is one model's cumulative counters at a sampling.
type modelSample struct {
	requests, errors                 float64 // every route of the model, and none ("" route)
	rejected                         float64 // of requests, refused by the gateway's own checks
	inTokens, outTokens              float64
	cacheRead, cacheWrite            float64 // parts of inTokens
	fallbacks, continuations, hedges float64
}

// sample is what one gathering of the registry said.
type sample struct {
	at       time.Time
	routes   map[routeKey]*routeSample
	models   map[string]*modelSample
	inflight float64
	gc       hist
	// outcomes counts requests by outcome (every model), rejected by
	// status code and attempts abandoned by reason: the errors by kind.
	outcomes, rejected, reasons map[string]float64
	// health is each route's health as the router keeps it (Options.Routes).
	health map[routeKey]RouteHealth
	// mcp are the MCP servers' tool calls, mcpHealth their health (Options.MCP).
	mcp       map[string]*mcpSample
	mcpHealth []MCPHealth
}

// parse reads a sample out of gathered metric families; families it does
// not know are skipped, so the registry may hold anything else.
// Bounds equal to those in bounds (by metric name) are shared with it, so
// the ring of samples holds one copy of each metric's bucket bounds.
func parse(at time.Time, mfs []*dto.MetricFamily, bounds map[string][]float64) *sample {
	s := &sample{at: at, routes: map[routeKey]*routeSample{}, models: map[string]*modelSample{}, inflight: math.NaN(), mcp: map[string]*mcpSample{},
		outcomes: map[string]float64{}, rejected: map[string]float64{}, reasons: map[string]float64{}}
	route := func(m *dto.Metric) *routeSample {
		k := routeKey{label(m, "model"), label(m, "route")}
		r := s.routes[k]
		if r == nil {
			r = &routeSample{state: math.NaN(), inflight: math.NaN()}
			s.routes[k] = r
		}
		return r
	}
	server := func(m *dto.Metric) *mcpSample {
		name := label(m, "server")
		ms := s.mcp[name]
		if ms == nil {
			ms = &mcpSample{}
			s.mcp[name] = ms
		}
		return ms
	}
	model := func(m *dto.Metric) *modelSample {
		name := cmp.Or(label(m, "model"), unknownModel)
		ms := s.models[name]
		if ms == nil {
			ms = &modelSample{}
			s.models[name] = ms
		}
		return ms
	}
	for _, mf := range mfs {
		name := mf.GetName()
		readHist := func(m *dto.Metric) hist {
			b, ok := bounds[name]
			h := histOf(m, b)
			if bounds != nil && (!ok || !sameSlice(b, h.upper)) {
				bounds[name] = h.upper
			}
			return h
		}
		for _, m := range mf.GetMetric() {
			switch name {
			case mTTFT:
				route(m).ttft = readHist(m)
			case mITL:
				route(m).itl = readHist(m)
			case mMaxGap:
				route(m).gap = readHist(m)
			case mOverhead:
				if label(m, "stage") == "chunk" {
					route(m).chunk = readHist(m)
				}
			case mRequests:
				v := m.GetCounter().GetValue()
				outcome := label(m, "outcome")
				bad := errorOutcomes[outcome]
				s.outcomes[outcome] += v
				if outcome == "rejected" {
					s.rejected[label(m, "code")] += v
				}
				ms := model(m)
				ms.requests += v
				if outcome == "rejected" {
					ms.rejected += v
				}
				if bad {
					ms.errors += v
				}
				if label(m, "route") == "" {
					continue // refused or failed before a route served it
				}
				r := route(m)
				r.requests += v
				if bad {
					r.errors += v
				}
			case mTokens:
				switch label(m, "kind") {
				case "input":
					model(m).inTokens += m.GetCounter().GetValue()
				case "output":
					model(m).outTokens += m.GetCounter().GetValue()
				case "cache_read":
					model(m).cacheRead += m.GetCounter().GetValue()
				case "cache_write":
					model(m).cacheWrite += m.GetCounter().GetValue()
				}
			case mFallbacks:
				model(m).fallbacks += m.GetCounter().GetValue()
				s.reasons[label(m, "reason")] += m.GetCounter().GetValue()
			case mContinuations:
				model(m).continuations += m.GetCounter().GetValue()
			case mHedges:
				model(m).hedges += m.GetCounter().GetValue()
			case mInflight:
				s.inflight = m.GetGauge().GetValue()
			case mGCPause:
				s.gc = readHist(m)
			case mRouteState:
				route(m).state = m.GetGauge().GetValue()
			case mRouteInflight:
				route(m).inflight = m.GetGauge().GetValue()
			case mMCPCalls:
				ms := server(m)
				ms.calls += m.GetCounter().GetValue()
				if mcpErrorOutcomes[label(m, "outcome")] {
					ms.errors += m.GetCounter().GetValue()
				}
			case mMCPDuration:
				server(m).dur = readHist(m)
			}
		}
	}
	return s
}

// label is the value of m's label name, "" when it has none.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histOf is m's classic histogram with its +Inf bucket made explicit. Its
// bounds are shared, when they are equal to them, instead of copied: one
// allocation a histogram a sampling (the counts) rather than two.
func histOf(m *dto.Metric, shared []float64) hist {
	ph := m.GetHistogram()
	bs := ph.GetBucket()
	if n := len(bs); n > 0 && math.IsInf(bs[n-1].GetUpperBound(), 1) {
		bs = bs[:n-1] // some exposers list +Inf; the sample count says the same
	}
	h := hist{upper: shared, cum: make([]uint64, 0, len(bs)+1)}
	if !boundsOf(shared, bs) {
		h.upper = make([]float64, 0, len(bs)+1)
		for _, b := range bs {
			h.upper = append(h.upper, b.GetUpperBound())
		}
		h.upper = append(h.upper, math.Inf(1))
	}
	for _, b := range bs {
		h.cum = append(h.cum, b.GetCumulativeCount())
	}
	h.cum = append(h.cum, ph.GetSampleCount())
	return h
}

// boundsOf reports whether upper is bs's bounds then +Inf.
func boundsOf(upper []float64, bs []*dto.Bucket) bool {
	if len(upper) != len(bs)+1 || !math.IsInf(upper[len(bs)], 1) {
		return false
	}
	for i, b := range bs {
		if upper[i] != b.GetUpperBound() {
			return false
		}
	}
	return true
}

// sameSlice reports whether a and b are the same memory (not merely equal).
func sameSlice(a, b []float64) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
