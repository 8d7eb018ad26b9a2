// Package route owns a model's targets ("provider/model" routes) and the order
// one request tries them in. Each Target keeps its live state in atomics:
// attempts in flight, a peak-EWMA of time to first token and a window of
// recent TTFTs for quantiles; its health is its Endpoint's (the upstream,
// shared by every route on it): consecutive failures and a circuit breaker
// (ejected for a window that doubles while probes fail, then one probe at a
// time, or readmitted by an active health check). A Set orders a model's targets under one strategy (fallback,
// weighted, least-inflight, lowest-latency); Backoff spaces retries. The
// gateway calls Order once per request, then Begin and End around each
// attempt; nothing here opens connections or starts goroutines.
package route

import (
	"strconv"
	"sync/atomic"
	"time"
)

// Passive health defaults, used where Health leaves a field zero.
const (
	DefaultFailures  = 5               // consecutive failures that eject a target
	DefaultWindow    = 5 * time.Second // first ejection
	DefaultMaxWindow = 2 * time.Minute // cap of the doubled windows
)

// Health configures a target's circuit breaker. The zero value means the
// defaults above.
type Health struct {
	// Failures is how many consecutive Failure outcomes eject the target;
	// 0 means DefaultFailures, negative never ejects.
	Failures int
	// Window is how long the first ejection lasts; 0 means DefaultWindow.
	// Each failed probe doubles it, up to MaxWindow.
	Window time.Duration
	// MaxWindow caps the doubled window; 0 means DefaultMaxWindow (and
	// never less than Window).
	MaxWindow time.Duration
}

func (h Health) withDefaults() Health {
	if h.Failures == 0 {
		h.Failures = DefaultFailures
	}
	if h.Window <= 0 {
		h.Window = DefaultWindow
	}
	if h.MaxWindow <= 0 {
		h.MaxWindow = DefaultMaxWindow
	}
	h.MaxWindow = max(h.MaxWindow, h.Window)
	return h
}

// window is the ejection window after level failed probes: Window·2^level,
// capped at MaxWindow.
func (h Health) window(level int32) time.Duration {
	if level >= 62 || h.Window > h.MaxWindow>>level {
		return h.MaxWindow
	}
	return h.Window << level
}

// Outcome is how an attempt ended, as far as the target's health goes.
type Outcome uint8

const (
	// Success: the target served the attempt. It resets the consecutive
	// failures and heals a probing target.
	Success Outcome = iota
	// Failure counts against the target's health: an error of the upstream
	// (5xx, 429, connection refused, timeouts, a broken stream).
	Failure
	// Neutral says nothing about the target: the client went away, the
	// request's own 4xx, an attempt cancelled as a hedge's loser. It is not
	// held against the target and does not reset its failures either.
	Neutral
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Neutral:
		return "neutral"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is what End learns from one attempt.
type Result struct {
	Outcome Outcome
	// TTFT is the time from the start of the attempt to its first content;
	// 0 when no content came (not observed). It is observed whatever the
	// outcome.
	TTFT time.Duration
}

// State is a target's breaker state.
type State uint8

const (
	Healthy State = iota // takes attempts
	Ejected              // circuit open: takes none until its window ends, then one probe
	Probing              // half-open: its one probe is out, takes no other attempt
)

func (s State) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Ejected:
		return "ejected"
	case Probing:
		return "probing"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText makes a State a JSON string.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Target is one route of a model and its live state. Name and Weight are
// read-only after NewTarget; the state is safe for concurrent use. Its
// health is its Endpoint's, shared with every other Target on it.
type Target struct {
	Name   string // "provider/model"
	Weight int    // weighted strategy; below 1 counts as 1

	ep    *Endpoint
	epoch time.Time // the origin of the target's clock (monotonic)

	inflight atomic.Int64
	requests atomic.Uint64 // attempts begun
	failures atomic.Uint64 // Failure outcomes of this route's attempts

	lat latency
}

// NewTarget returns a healthy target with no observations, on an endpoint
// of its own named name. h's zero value means the default breaker. In
// tests on synctest's clock, create targets inside the bubble: the
// target's clock starts at NewTarget.
func NewTarget(name string, weight int, h Health) *Target {
	return OnEndpoint(name, weight, NewEndpoint(name, h, nil))
}

// OnEndpoint returns a target with no observations on ep, whose health it
// shares with every other target on ep. ep must not be nil.
func OnEndpoint(name string, weight int, ep *Endpoint) *Target {
	return &Target{Name: name, Weight: weight, ep: ep, epoch: time.Now()}
}

// Endpoint returns the endpoint whose health the target shares.
func (t *Target) Endpoint() *Endpoint { return t.ep }

// weight is Weight with its floor of 1.
func (t *Target) weight() int { return max(t.Weight, 1) }

// clock is the target's monotonic time: nanoseconds since NewTarget, plus 1
// so that it is never 0.
func (t *Target) clock(now time.Time) int64 {
	return max(int64(now.Sub(t.epoch))+1, 1)
}

// Begin claims the target for one attempt. It returns false when its
// endpoint is ejected and its window has not ended, or the window ended but
// another attempt holds its one probe; a true return on an ejected
// endpoint claims the probe (State turns Probing). Each true return must be
// paired with exactly one End; a false one needs none.
func (t *Target) Begin() bool {
	if !t.ep.begin() {
		return false
	}
	t.inflight.Add(1)
	t.requests.Add(1)
	return true
}

// Force claims the target for one attempt whatever its endpoint's state,
// claiming no probe: panic routing (see Set.Panic), when every route of a
// model refuses. It must be paired with exactly one End.
func (t *Target) Force() {
	t.ep.inflight.Add(1)
	t.inflight.Add(1)
	t.requests.Add(1)
}

// End ends an attempt begun with Begin or Force: it takes the attempt out
// of flight, observes its TTFT and updates the endpoint's breaker.
//
// A Success, whoever's, closes the circuit at once: the endpoint served a
// request (a probe, a request routed in panic, an attempt begun before the
// ejection). While Probing, a Failure or Neutral is held until no attempt
// is in flight on the endpoint (End cannot tell the probe from an attempt
// begun before it), then any Failure ejects it again for a doubled window,
// otherwise the endpoint is due for another probe. A second probe thus
// never goes out while the first may still run. While Ejected, a Failure
// is counted but does not change the state: the window runs out and a
// probe (or an active health check, Endpoint.Readmit) decides.
func (t *Target) End(r Result) {
	var now time.Time
	if r.TTFT > 0 {
		now = time.Now()
		t.lat.observe(t, r.TTFT, now)
	}
	if r.Outcome == Failure {
		t.failures.Add(1)
	}
	t.inflight.Add(-1)
	t.ep.end(r.Outcome, now)
}

// Inflight is the number of attempts begun on this target and not yet
// ended.
func (t *Target) Inflight() int { return int(t.inflight.Load()) }

// Requests is the attempts begun on this target.
func (t *Target) Requests() uint64 { return t.requests.Load() }

// Failures is the attempts on this target that ended with a Failure.
func (t *Target) Failures() uint64 { return t.failures.Load() }

// State is the breaker's state, its endpoint's. An Ejected target whose
// window has ended (due for a probe) is still Ejected until a Begin claims
// the probe.
func (t *Target) State() State { return t.ep.State() }

// Snapshot is a target's state for /status pages and logs. Its fields are
// read one by one, not as one consistent cut. The breaker's fields
// (state, consecutive failures, window, ejections) are its endpoint's;
// requests and failures are this route's own attempts.
type Snapshot struct {
	Name                string  `json:"name"`
	Endpoint            string  `json:"endpoint"` // the upstream whose health the route shares
	State               State   `json:"state"`
	Weight              int     `json:"weight"`
	Inflight            int     `json:"inflight"`
	Requests            uint64  `json:"requests"`             // attempts begun
	Failures            uint64  `json:"failures"`             // attempts that failed, connect failures included
	ErrorRate           float64 `json:"error_rate"`           // failures / requests; 0 before any
	ConsecutiveFailures int64   `json:"consecutive_failures"` // the endpoint's
	EndpointFailures    uint64  `json:"endpoint_failures"`    // every route's on the endpoint
	EjectedUntil        string  `json:"ejected_until"`        // RFC 3339 (ms); "" when healthy; past: due for a probe
	Ejections           uint64  `json:"ejections"`            // the endpoint's
	TTFTEWMAms          float64 `json:"ttft_ewma_ms"`         // the decayed peak-EWMA; 0 before any observation
	TTFTP95ms           float64 `json:"ttft_p95_ms"`          // 0 with too few observations
}

// Snapshot returns the target's state now.
func (t *Target) Snapshot() Snapshot {
	now := time.Now()
	e := t.ep
	s := Snapshot{
		Name:                t.Name,
		Endpoint:            e.Name,
		Weight:              t.weight(),
		Inflight:            t.Inflight(),
		Requests:            t.requests.Load(),
		Failures:            t.failures.Load(),
		ConsecutiveFailures: e.consec.Load(),
		EndpointFailures:    e.failures.Load(),
		Ejections:           e.ejections.Load(),
		TTFTEWMAms:          t.lat.cost(t, now) / 1e6,
	}
	if s.Requests > 0 {
		s.ErrorRate = float64(s.Failures) / float64(s.Requests)
	}
	b := e.brk.Load()
	switch {
	case b == 0:
		s.State = Healthy
	case b < 0:
		s.State, b = Probing, -b
	default:
		s.State = Ejected
	}
	if b > 0 {
		s.EjectedUntil = e.at(b).UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
	}
	if p, ok := t.TTFTQuantile(0.95); ok {
		s.TTFTP95ms = float64(p) / 1e6
	}
	return s
}

// EjectedUntil returns when the target's endpoint's ejection window ends (a
// probe may go then); false when it is healthy.
func (t *Target) EjectedUntil() (time.Time, bool) { return t.ep.EjectedUntil() }
