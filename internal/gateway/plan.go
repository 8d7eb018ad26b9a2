package gateway

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/keypool"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/route"
)

// DefaultRetryBudget bounds the time a request spends waiting to retry
// (from its arrival), or timeouts.total when that is shorter: a retry whose
// backoff would end later is not made. (Since total has a default of 30m,
// issue 22, it no longer replaces this budget: a 30-minute wait on an
// upstream's Retry-After would hold the client as long.)
const DefaultRetryBudget = 30 * time.Second

// target is one route of a model, resolved to its provider.
type target struct {
	name     string // "provider/model", the route label and X-Streamgate-Route
	model    string // the upstream model
	provider provider.Provider
	obs      *metrics.Stream // the route's latency observers, resolved once
	rt       *route.Target   // live state: in flight, health, latency
	cont     string          // how this provider continues a cut stream (config.Provider.Continuation)
	keys     *keyed          // the provider's key pool; nil: its one api_key (provider sends it)
}

// routeSet is a model's routes for one endpoint under the model's
// strategy. Its targets share their route.Target (health, latency) with the
// model's other endpoints.
type routeSet struct {
	model   *config.Model
	set     *route.Set
	targets []target      // in config order
	hedge   *hedger       // nil: no hedging
	aff     *affinityPlan // nil: affinity off
}

// index returns the index in rs.targets of rt's target, −1 when none.
func (rs *routeSet) index(rt *route.Target) int {
	for i := range rs.targets {
		if rs.targets[i].rt == rt {
			return i
		}
	}
	return -1
}

// target returns the target of rt.
func (rs *routeSet) target(rt *route.Target) *target {
	for i := range rs.targets {
		if rs.targets[i].rt == rt {
			return &rs.targets[i]
		}
	}
	return nil
}

// hedger is a model's hedge policy and budget.
//
// The budget is counted over a sliding window of the last hedgeWindow
// (hedgeSlots slots of a second): a hedge may start while the hedges
// started in the window, itself included, stay within budget × the
// requests that arrived in it, plus hedgeBurst. So in any 10 s at most
// budget × that span's requests + 10 hedges start, a calm spell does not
// save up hedges for a later burst (its few requests allow few), and the
// hedges a burst needs are there as long as the window's average allows
// them: a bucket of 10 hedges refilled by each request (issue 22) ran dry
// when tail requests came together (a synchronized wave of 30 streams
// wanting hedges at once got 10; a stalled upstream's many late first
// tokens, a few refused each time) and those requests were the tail the
// hedge is for (issue 35).
type hedger struct {
	after  time.Duration // fixed delay, or 0 for a percentile
	pct    float64       // percentile of the primary target's TTFT (after == 0)
	budget float64       // hedges per request, 0: never

	mu    sync.Mutex // allow's check and count, and a slot's reuse
	slots [hedgeSlots]hedgeSlot
}

// hedgeSlot is one second of the window: its requests and hedges.
type hedgeSlot struct {
	sec      atomic.Int64 // the Unix second it counts; an older one is reused
	requests atomic.Int64
	hedges   atomic.Int64
}

const (
	// hedgeSlots is the window's length in seconds (hedgeWindow).
	hedgeSlots = 10
	// hedgeBurst is the hedges a window allows beyond budget × its
	// requests: a run's first requests (the window holds only them yet)
	// get the hedges their tail needs, and hedging cannot double the load
	// on a backup for long.
	hedgeBurst = 10
)

// hedgeWindow is the span over which the budget is counted.
const hedgeWindow = hedgeSlots * time.Second

func newHedger(h *config.Hedge) *hedger {
	if h == nil {
		return nil
	}
	d, pct, err := h.Delay()
	if err != nil { // validated at load
		return nil
	}
	return &hedger{after: d, pct: pct, budget: h.Budget}
}

// slot is the window's slot of Unix second sec, cleared when it held an
// older second.
func (h *hedger) slot(sec int64) *hedgeSlot {
	s := &h.slots[uint64(sec)%hedgeSlots]
	if s.sec.Load() != sec {
		h.mu.Lock()
		if s.sec.Load() != sec {
			s.requests.Store(0)
			s.hedges.Store(0)
			s.sec.Store(sec)
		}
		h.mu.Unlock()
	}
	return s
}

// request counts a request that arrived at now.
func (h *hedger) request(now time.Time) {
	if h.budget > 0 {
		h.slot(now.Unix()).requests.Add(1)
	}
}

// delay is how long to wait for t's first token before hedging; false
// while a percentile delay has too few observations to be known.
func (h *hedger) delay(t *route.Target) (time.Duration, bool) {
	if h.after > 0 {
		return h.after, true
	}
	return t.TTFTQuantile(h.pct / 100)
}

// allow counts a hedge at now when the window's budget has room for it
// (see hedger), and returns the second it was counted in for undo; false
// when it has none.
func (h *hedger) allow(now time.Time) (int64, bool) {
	if h.budget <= 0 {
		return 0, false
	}
	sec := now.Unix()
	cur := h.slot(sec)
	h.mu.Lock()
	defer h.mu.Unlock()
	var requests, hedges int64
	for i := range h.slots {
		s := &h.slots[i]
		if v := s.sec.Load(); v > sec-hedgeSlots && v <= sec {
			requests += s.requests.Load()
			hedges += s.hedges.Load()
		}
	}
	if float64(hedges+1) > h.budget*float64(requests)+hedgeBurst {
		return 0, false
	}
	cur.hedges.Add(1)
	return sec, true
}

// undo takes back a hedge allow counted in second sec but that did not
// start; nothing once the window has moved past it.
func (h *hedger) undo(sec int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := &h.slots[uint64(sec)%hedgeSlots]; s.sec.Load() == sec {
		s.hedges.Add(-1)
	}
}

// plan is one request's walk over its routes: the order its strategy
// chose, what was tried.
type plan struct {
	c     *call
	rs    *routeSet
	order []*route.Target
	buf   [8]*route.Target
	pos   int          // position in order of the current attempt
	used  uint64       // first-pass positions a hedge already tried
	res   route.Result // how the current attempt went, for its target's health
	retry bool         // the current attempt is a retry (a later pass over the routes)

	// Affinity and key pools: the route and key the session was placed on
	// (pinKey −1: none, or already used), the current attempt's key lease
	// and its target with the key's adapter.
	pinRoute *route.Target
	pinKey   int
	affinity bool
	held     keypool.Lease
	cur      target
}

// peek returns the next target of the first pass after the current one
// that may take an attempt now (not ejected, not used), and its position;
// nil when there is none. It claims nothing.
func (p *plan) peek() (*target, int) {
	for i := p.pos + 1; i < len(p.order) && i < 64; i++ {
		if p.used&(1<<i) == 0 && p.order[i].State() != route.Ejected {
			return p.rs.target(p.order[i]), i
		}
	}
	return nil, 0
}

// tryFunc makes one attempt on t; it sets p.res.
type tryFunc func(ctx context.Context, p *plan, t *target) error

// run is the route loop of every endpoint, stream or not: the targets in
// the order the model's strategy gives (ejected ones last, skipped while
// their circuit is open; when every one is, the one most likely to work
// is tried anyway: panic routing, route.Set.Panic), then up to model.retries more attempts cycling
// over them again, each after a backoff with jitter (at least the
// upstream's Retry-After) unless it would end past the request's retry
// budget. It stops at the first success, when goOn says no more attempt
// may follow (the client left; content reached it and cannot be
// continued), or at an error no other attempt can fix (fallbackReason).
// When every attempt failed, the last failure is returned.
//
// A route that would have to translate a request with no chat form
// (provider.Native.Err: a Messages block type, a server tool) refuses it
// before anything happens: the gateway's refusal, not an attempt, so it
// begins nothing on the route (no health, no latency, no request counted),
// is not in X-Streamgate-Attempts, and is skipped on later passes without a
// backoff. When no route served, such a refusal is what the client gets, a
// 400 naming the field with x-should-retry: false, even after another
// route's retryable failure (issue 36: a dead Anthropic route's 502 hid
// the OpenAI route's refusal, and Claude Code retried it for two minutes):
// no retry makes the refusing routes take the request, and the field it
// names is what the client can change. The entry then names no route (none
// served, none failed it). An adapter's own refusal, found as it
// translates in Open (provider.ErrUntranslatable), counts as neutral for
// the route's health and decides the same way.
func (g *Gateway) run(ctx context.Context, c *call, rs *routeSet, try tryFunc, goOn func(error) bool, req *provider.Request) error {
	p := &plan{c: c, rs: rs, pinKey: -1}
	p.order = rs.set.Order(p.buf[:0])
	if c.prefer != nil {
		preferFirst(p.order, rs, c.prefer)
	}
	if rs.aff != nil && c.session.Key != 0 {
		rs.aff.place(p, c.session.Key)
	}
	if rs.hedge != nil {
		rs.hedge.request(c.info.start)
	}
	n := len(p.order)
	limit := n + c.model.Retries // attempts, a hedge counting as one
	deadline := c.info.start.Add(DefaultRetryBudget)
	if total := c.st.cfg.Timeouts.Total.D(); total > 0 && total < DefaultRetryBudget {
		deadline = c.info.start.Add(total)
	}
	var err error
	var noKey *keypool.ExhaustedError // the last route passed over for want of a key
	refused, refusal := refusals(rs, p.order, req)
	limit -= bits.OnesCount64(refused) // a refusal is no attempt, on the first pass or a retry
	last := n - 1                      // the first pass's last route that does not refuse
	for last > 0 && last < 64 && refused&(1<<last) != 0 {
		last--
	}
	made, retry := 0, 0
	again := false // the attempt is made again on the same route with another key
	for pos := 0; made < limit && pos < n+limit; pos++ {
		i := pos % n
		if pos < n && p.used&(1<<i) != 0 && !again {
			continue // a hedge tried it already
		}
		if i < 64 && refused&(1<<i) != 0 {
			if pos < last {
				g.fallback(ctx, c, rs.target(p.order[i]).name, metrics.ReasonUntranslatable, refusal)
			}
			continue // refused: nothing begun, and no backoff on later passes
		}
		rt := p.order[i]
		if pos >= n && made == 0 {
			break // no route had a key for it: waiting to retry would only delay the 429
		}
		if pos >= n && !again { // a retry: back off first
			retry++
			if werr := g.backoff.Wait(ctx, retry, retryAfterOf(err), deadline); werr != nil {
				if errors.Is(werr, route.ErrBudget) {
					break
				}
				err = werr
				break
			}
			g.m.Retry(c.model.Name)
		}
		again = false
		if !rt.Begin() {
			if pos != last || made != 0 {
				continue // circuit open, or its one probe is out
			}
			// Panic routing: every route of the first pass refused (all
			// ejected, or their probes out). Rather than refuse the request
			// with a 503, it goes to the route most likely to work; if the
			// upstream is back, its success closes the circuit at once.
			rt = rs.set.Panic()
			rt.Force()
			i = slices.Index(p.order, rt)
			g.m.Panic(c.model.Name)
		}
		t := rs.target(rt)
		at, kerr := p.lease(ctx, t)
		if kerr != nil {
			rt.End(route.Result{Outcome: route.Neutral})
			var ex *keypool.ExhaustedError
			if !errors.As(kerr, &ex) {
				err = kerr
			} else if noKey == nil || noKey.RetryAt.IsZero() || !ex.RetryAt.IsZero() && ex.RetryAt.Before(noKey.RetryAt) {
				noKey = ex // the earliest a key of any route is back
			}
			continue // no key of its provider can take it now: as rate-limited
		}
		slot := -1
		if rs.aff != nil {
			key := -1
			if t.keys != nil {
				key = p.held.Index()
			}
			slot = rs.aff.slot(rs.index(rt), key)
			rs.aff.set.Begin(slot)
		}
		made++
		p.pos, p.res, p.retry = i, route.Result{}, pos >= n
		tokens := c.bill.in + c.bill.out
		aerr := try(ctx, p, at)
		if slot >= 0 {
			rs.aff.set.End(slot)
		}
		lease := p.held
		lease.Release(c.bill.in + c.bill.out - tokens)
		keyLevel := keyOutcome(t, lease, aerr, &p.res)
		rt.End(p.res)
		if aerr == nil || !goOn(aerr) {
			return aerr
		}
		reason := fallbackReason(aerr)
		if reason == "" {
			return aerr
		}
		if errors.Is(aerr, provider.ErrUntranslatable) {
			refusal = aerr // the adapter's: decides as the gateway's does
		}
		err = aerr
		if made < limit {
			g.fallback(ctx, c, at.name, reason, aerr)
		}
		if keyLevel && t.keys.pool.Available() != 0 {
			// The key was refused, not the route: its next key, at once,
			// an attempt more (each such refusal benches or disables a
			// key: at most one per key).
			again = true
			pos--
			limit++
			if p.affinity {
				rs.aff.repin(p, rt, c.session.Key)
			}
		}
	}
	if refusal != nil && (err == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, relay.ErrClientGone)) {
		c.entry.Route = "" // no route served or failed it: the gateway refused
		return refusal
	}
	if made == 0 {
		if noKey != nil {
			return &exhaustedError{model: c.model.Name, last: noKey}
		}
		if err != nil {
			return err
		}
		return unavailable(c.model.Name, rs)
	}
	return err
}

// refusals are the routes among the first 64 of order (bits of their
// positions) that would have to translate a request with no chat form,
// and the refusal (provider.Native.Err); 0 and nil when every route may
// take it. A later route that refuses does so in its attempt (the open).
func refusals(rs *routeSet, order []*route.Target, req *provider.Request) (uint64, error) {
	if req == nil || req.Native == nil || req.Native.Err == nil {
		return 0, nil
	}
	var refused uint64
	for i, rt := range order {
		if i < 64 && untranslated(rs.target(rt).provider, req) != nil {
			refused |= 1 << i
		}
	}
	if refused == 0 {
		return 0, nil
	}
	return refused, req.Native.Err
}

// retryAfterOf is the upstream's Retry-After in err, 0 when none.
func retryAfterOf(err error) time.Duration {
	var perr *provider.Error
	if errors.As(err, &perr) {
		return perr.RetryAfter
	}
	return 0
}

// outcomeFor is how an attempt that ended with err counts for its
// target's health: the client leaving, a hedge cancelled, the request's own
// fault or the request's time running out say nothing about the target.
func outcomeFor(err error) route.Outcome {
	if err == nil {
		return route.Success // before perr, which escapes: no allocation on this path
	}
	var perr *provider.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, relay.ErrClientGone), errors.Is(err, relay.ErrHedgeLost),
		errors.Is(err, errShutdown), errors.Is(err, provider.ErrTotalTimeout), errors.Is(err, provider.ErrUntranslatable):
		return route.Neutral
	case errors.As(err, &perr) && !perr.Retryable && perr.Status >= 400 && perr.Status < 500 &&
		perr.Status != http.StatusUnauthorized && perr.Status != http.StatusForbidden && perr.Status != http.StatusNotFound:
		return route.Neutral // 400, 413, 422: the request, not the route
	}
	var cerr *continueError
	if errors.As(err, &cerr) {
		return route.Neutral
	}
	return route.Failure
}

// unavailableError: every route of the model has its circuit open.
type unavailableError struct {
	model      string
	retryAfter time.Duration
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("%v: every route of model %q failed repeatedly and is paused; retry after %s", errNoRoute, e.model, e.retryAfter)
}

func (e *unavailableError) Unwrap() error { return errNoRoute }

func unavailable(model string, rs *routeSet) error {
	wait := time.Duration(0)
	now := time.Now()
	for _, t := range rs.set.Targets() {
		until, ok := t.EjectedUntil()
		if !ok {
			continue
		}
		if d := until.Sub(now); wait == 0 || d < wait {
			wait = d
		}
	}
	wait = max(time.Second, wait.Round(time.Second))
	return &unavailableError{model: model, retryAfter: wait}
}
