package route

import (
	"strconv"
	"sync/atomic"
	"time"
)

// Endpoint is one upstream (a provider's kind, base URL and key) and its
// circuit breaker, shared by every Target on it: one model's failures
// eject another model's routes to the same upstream too, and one success,
// probe or passing health check readmits them all. Name is read-only after
// NewEndpoint; the state is safe for concurrent use.
type Endpoint struct {
	Name string // the first provider's name that uses it

	h      Health
	epoch  time.Time // the origin of the endpoint's clock (monotonic)
	notify func(Event)

	inflight atomic.Int64  // attempts on every target of the endpoint
	failures atomic.Uint64 // Failure outcomes
	consec   atomic.Int64  // consecutive Failure outcomes
	lastFail atomic.Int64  // UnixNano of the last Failure (for Set.Panic); 0: none
	// brk is the breaker: 0 healthy; u > 0 ejected until clock u (due for a
	// probe from then on); -u probing, its probe claimed after clock u.
	brk         atomic.Int64
	level       atomic.Int32  // failed probes in this ejection: the window's doublings
	probeFailed atomic.Bool   // a Failure ended while probing, held until nothing is in flight
	ejections   atomic.Uint64 // transitions into Ejected
}

// EventKind is a transition of an Endpoint's breaker.
type EventKind uint8

const (
	// EventEjected: consecutive failures opened the circuit, or a probe
	// failed and opened it again for a doubled window (Event.Probes > 0).
	EventEjected EventKind = iota
	// EventProbing: the window ended and one request went as the probe.
	EventProbing
	// EventRecovered: a success (a probe's, a request's in panic routing)
	// or a passing health check (Readmit) closed the circuit.
	EventRecovered
	// EventReset: an operator closed the circuit (Reset).
	EventReset
)

func (k EventKind) String() string {
	switch k {
	case EventEjected:
		return "ejected"
	case EventProbing:
		return "probing"
	case EventRecovered:
		return "recovered"
	case EventReset:
		return "reset"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is one transition of an endpoint's breaker, for a log line.
type Event struct {
	Endpoint *Endpoint
	Kind     EventKind
	// Failures is the consecutive failures counted when it happened.
	Failures int64
	// Window is how long an EventEjected lasts before a probe may go.
	Window time.Duration
	// Probes is the failed probes of this ejection so far (EventEjected).
	Probes int32
	// Checked: an EventRecovered of a passing health check (Readmit), not
	// of a request's success.
	Checked bool
}

// NewEndpoint returns a healthy endpoint. h's zero value means the default
// breaker; notify, when not nil, is called on each transition (Event) from
// the goroutine that caused it, so it must be quick and must not call back
// into the endpoint's transitions. In tests on synctest's clock, create
// endpoints inside the bubble.
func NewEndpoint(name string, h Health, notify func(Event)) *Endpoint {
	return &Endpoint{Name: name, h: h.withDefaults(), epoch: time.Now(), notify: notify}
}

func (e *Endpoint) event(ev Event) {
	if e.notify != nil {
		ev.Endpoint = e
		e.notify(ev)
	}
}

// clock is the endpoint's monotonic time: nanoseconds since NewEndpoint,
// plus 1 so that it is never 0 (0 is brk's "healthy").
func (e *Endpoint) clock(now time.Time) int64 {
	return max(int64(now.Sub(e.epoch))+1, 1)
}

// at is the wall time of clock value c.
func (e *Endpoint) at(c int64) time.Time { return e.epoch.Add(time.Duration(c - 1)) }

// begin claims the endpoint for one attempt (see Target.Begin).
func (e *Endpoint) begin() bool {
	if b := e.brk.Load(); b != 0 {
		if b < 0 || e.clock(time.Now()) < b {
			return false
		}
		// Counted in flight before the claim: while the probe is out,
		// in-flight never drops to 0, which is how done knows it ended.
		e.inflight.Add(1)
		if !e.brk.CompareAndSwap(b, -b) {
			e.done()
			return false
		}
		e.probeFailed.Store(false)
		e.event(Event{Kind: EventProbing, Failures: e.consec.Load()})
		return true
	}
	e.inflight.Add(1)
	return true
}

// end updates the breaker with an attempt's outcome (see Target.End).
func (e *Endpoint) end(o Outcome, now time.Time) {
	switch o {
	case Success:
		if e.consec.Load() != 0 {
			e.consec.Store(0)
		}
		if b := e.brk.Load(); b != 0 && e.brk.CompareAndSwap(b, 0) {
			e.event(Event{Kind: EventRecovered})
		}
	case Failure:
		if now.IsZero() {
			now = time.Now()
		}
		c := e.clock(now)
		e.failures.Add(1)
		e.lastFail.Store(now.UnixNano())
		n := e.consec.Add(1)
		switch b := e.brk.Load(); {
		case b == 0 && e.h.Failures > 0 && n >= int64(e.h.Failures):
			if e.brk.CompareAndSwap(0, c+int64(e.h.Window)) {
				e.level.Store(0)
				e.ejections.Add(1)
				e.event(Event{Kind: EventEjected, Failures: n, Window: e.h.Window})
			}
		case b < 0:
			e.probeFailed.Store(true) // before done: whoever settles sees it
		}
	}
	e.done()
}

// done takes one attempt out of flight; the last one out of a probing
// endpoint settles it (see Target.End).
func (e *Endpoint) done() {
	if e.inflight.Add(-1) != 0 {
		return
	}
	b := e.brk.Load()
	if b >= 0 {
		return
	}
	if !e.probeFailed.Swap(false) {
		e.brk.CompareAndSwap(b, -b) // due again: -b is in the past
		return
	}
	lv := e.level.Load()
	if e.h.window(lv) < e.h.MaxWindow {
		lv = e.level.Add(1)
	}
	w := e.h.window(lv)
	if e.brk.CompareAndSwap(b, e.clock(time.Now())+int64(w)) {
		e.ejections.Add(1)
		e.event(Event{Kind: EventEjected, Failures: e.consec.Load(), Window: w, Probes: lv})
	}
}

// close heals the endpoint from any state: consecutive failures and the
// window's doublings back to 0. It reports whether it was not healthy.
func (e *Endpoint) close() bool {
	e.consec.Store(0)
	e.level.Store(0)
	for {
		b := e.brk.Load()
		if b == 0 {
			return false
		}
		if e.brk.CompareAndSwap(b, 0) {
			return true
		}
	}
}

// Readmit closes the circuit of an ejected or probing endpoint because an
// active health check passed; it reports whether it did (false: healthy
// already). Attempts in flight run on and end as usual.
func (e *Endpoint) Readmit() bool {
	if !e.close() {
		return false
	}
	e.event(Event{Kind: EventRecovered, Checked: true})
	return true
}

// Reset closes the circuit whatever its state and clears the consecutive
// failures, for an operator who knows the upstream is back; it reports
// whether the endpoint was not healthy. The counters (failures, ejections)
// are kept.
func (e *Endpoint) Reset() bool {
	if !e.close() {
		return false
	}
	e.event(Event{Kind: EventReset})
	return true
}

// State is the breaker's state. An Ejected endpoint whose window has ended
// (due for a probe) is still Ejected until a Begin claims the probe.
func (e *Endpoint) State() State {
	switch b := e.brk.Load(); {
	case b == 0:
		return Healthy
	case b < 0:
		return Probing
	}
	return Ejected
}

// EjectedUntil returns when the endpoint's ejection window ends (a probe
// may go then); false when it is healthy.
func (e *Endpoint) EjectedUntil() (time.Time, bool) {
	b := e.brk.Load()
	if b < 0 {
		b = -b
	}
	if b == 0 {
		return time.Time{}, false
	}
	return e.at(b), true
}

// ConsecutiveFailures is the Failure outcomes since the last Success,
// Readmit or Reset.
func (e *Endpoint) ConsecutiveFailures() int64 { return e.consec.Load() }

// Failures is every Failure outcome counted on the endpoint.
func (e *Endpoint) Failures() uint64 { return e.failures.Load() }

// Ejections is the transitions into Ejected.
func (e *Endpoint) Ejections() uint64 { return e.ejections.Load() }

// Inflight is the attempts in flight on every target of the endpoint.
func (e *Endpoint) Inflight() int { return int(e.inflight.Load()) }
