package gateway

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net/http"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/affinity"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/keypool"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/quota"
	"github.com/streamgate/streamgate/internal/ratelimit"
	"github.com/streamgate/streamgate/internal/route"
)

// Provider key pools (providers[].api_keys) and prompt-cache affinity
// (models[].affinity).
//
// A provider with api_keys has one adapter per key (each sends its own
// key) and a keypool.Pool that leases a key to each attempt: the key the
// affinity placement chose, else the least loaded one its limits allow. A
// 429 benches only that key until its Retry-After, a 401/403 disables only
// that key; neither counts against the route's health, and the attempt is
// made again at once on the route's next key while one is available. When
// no key of a route can take the attempt the route is passed over as
// rate-limited; when that is so of every route, the client gets 429 with
// the earliest Retry-After (503 when every key is disabled).
//
// Affinity places a conversation on a (route, provider key) target by
// rendezvous hashing of its session identity over the targets available
// now, with bounded loads (package affinity): the chosen route is tried
// first with the chosen key, the model's strategy orders the rest.

// keyed is a provider's key pool and an adapter per key, in the pool's
// order.
type keyed struct {
	pool  *keypool.Pool
	provs []provider.Provider
}

// newKeyed builds the adapters of p's api_keys with pc (its APIKey set per
// key) and their pool. Each key's rpm and tpm are shared by every replica
// through q when q shares through Redis.
func newKeyed(p config.Provider, pc provider.Config, q *quota.Quota, g *Gateway) (*keyed, error) {
	ks := make([]keypool.Key, len(p.APIKeys))
	k := &keyed{provs: make([]provider.Provider, len(p.APIKeys))}
	for i, ak := range p.APIKeys {
		ks[i] = keypool.Key{Name: ak.Name, Secret: ak.Key, RPM: ak.RPM, TPM: ak.TPM, MaxStreams: ak.MaxStreams, Weight: ak.Weight}
		c := pc
		c.APIKey = ak.Key
		pv, err := provider.New(c)
		if err != nil {
			return nil, err
		}
		k.provs[i] = pv
	}
	cfg := keypool.Config{Provider: p.Name, Keys: ks, Logger: g.log}
	if q != nil && q.Shared() {
		cfg.Shared = sharedKeyLimits{q}
		// Published to the other replicas (package keyshare; g.board is
		// set once every pool is made, before any request, and again by
		// a reload).
		cfg.OnBench = func(key string, until time.Time) {
			if b := g.board.Load(); b != nil {
				b.Bench(p.Name, key, until)
			}
		}
		cfg.OnDisable = func(key, reason string) {
			if b := g.board.Load(); b != nil {
				b.Disable(p.Name, key, reason)
			}
		}
	}
	pool, err := keypool.New(cfg)
	if err != nil {
		return nil, err
	}
	k.pool = pool
	return k, nil
}

// sharedKeyLimits counts provider keys' rpm and tpm in package quota's
// Redis counters, as the gateway's own keys are counted: one admission
// call per attempt on a limited key, its tokens written back in batches.
type sharedKeyLimits struct{ q *quota.Quota }

func (s sharedKeyLimits) Allow(ctx context.Context, key string, l ratelimit.Limits) (ratelimit.Decision, error) {
	t, d, err := s.q.Admit(ctx, key, quota.Limits{RPM: l.RPM, TPM: l.TPM}, 0)
	t.Settle(0, 0) // the request is counted; its tokens come with Record
	return d, err
}

func (s sharedKeyLimits) Record(_ context.Context, key string, tokens int) {
	s.q.Record(key, tokens)
}

// affinityPlan is a model's affinity placement: its mode and its
// (route, key) targets, route-major: the targets of route r are
// base[r] .. base[r]+keys(r)−1.
type affinityPlan struct {
	mode  affinity.Mode
	set   *affinity.Set
	base  []int     // per route (index in routeSet.targets): its first target
	slots []slotRef // per target
}

type slotRef struct{ route, key int } // key −1: a provider with a single key

// newAffinityPlan is m's placement over targets; nil when affinity is off.
func newAffinityPlan(m *config.Model, targets []target) (*affinityPlan, error) {
	mode, err := affinity.ParseMode(m.Affinity)
	if err != nil || mode == affinity.Off {
		return nil, err
	}
	a := &affinityPlan{mode: mode, base: make([]int, len(targets))}
	var ts []affinity.Target
	for r := range targets {
		t := &targets[r]
		a.base[r] = len(ts)
		w := float64(max(t.rt.Weight, 1))
		if t.keys == nil {
			ts = append(ts, affinity.Target{ID: affinity.TargetID(t.name, ""), Weight: w})
			a.slots = append(a.slots, slotRef{r, -1})
			continue
		}
		snap := t.keys.pool.Snapshot(nil)
		for i, k := range snap {
			ts = append(ts, affinity.Target{ID: affinity.TargetID(t.name, k.Name), Weight: w * float64(k.Weight)})
			a.slots = append(a.slots, slotRef{r, i})
		}
	}
	set, err := affinity.NewSet(ts, m.AffinityEpsilon)
	if err != nil {
		return nil, fmt.Errorf("affinity: %w (a model has at most %d route × provider key targets)", err, affinity.MaxTargets)
	}
	a.set = set
	return a, nil
}

// slot is the target of route r (index in routeSet.targets) with key i.
func (a *affinityPlan) slot(r, i int) int {
	if i < 0 {
		return a.base[r]
	}
	return a.base[r] + i
}

// place orders p's routes for the session key: the first target of its
// rendezvous order among the available ones goes first, its route moved to
// the front of p.order and its key pinned for that route's first attempt.
// Nothing is placed when no target is available (the strategy's order
// stands, panic routing included).
func (a *affinityPlan) place(p *plan, key uint64) {
	rs := p.rs
	var avail uint64
	for r := range rs.targets {
		t := &rs.targets[r]
		if t.rt.State() == route.Ejected {
			continue
		}
		if t.keys == nil {
			avail |= 1 << a.base[r]
			continue
		}
		avail |= a.keyTargets(r, t)
	}
	var buf [affinity.MaxTargets]int
	order := a.set.Order(key, avail, buf[:0])
	if len(order) == 0 {
		return
	}
	ref := a.slots[order[0]]
	rt := rs.targets[ref.route].rt
	for j, x := range p.order {
		if x == rt {
			copy(p.order[1:j+1], p.order[:j])
			p.order[0] = rt
			break
		}
	}
	p.pinRoute, p.pinKey = rt, ref.key
	p.affinity = true
}

// keyTargets is the set's bits of the targets of route r (t, a provider
// with a key pool) whose keys may take an attempt now.
func (a *affinityPlan) keyTargets(r int, t *target) uint64 {
	var m uint64
	for k := t.keys.pool.Available(); k != 0; k &= k - 1 {
		m |= 1 << (a.base[r] + bits.TrailingZeros64(k))
	}
	return m
}

// repin pins, for the next attempt on route rt, the key that comes first
// for the session among the route's keys available now: after a key of
// the placed route was benched or disabled, the session goes where its
// later turns will go (its next target in rendezvous order), not merely to
// the least loaded key.
func (a *affinityPlan) repin(p *plan, rt *route.Target, key uint64) {
	r := p.rs.index(rt)
	t := &p.rs.targets[r]
	if t.keys == nil {
		return
	}
	var buf [affinity.MaxTargets]int
	if order := a.set.Order(key, a.keyTargets(r, t), buf[:0]); len(order) > 0 {
		p.pinRoute, p.pinKey = rt, a.slots[order[0]].key
	}
}

// lease takes the key of an attempt on t: the pinned key when t is the
// pinned route's first attempt (its next best when that key cannot take
// it), else the least loaded. The attempt's target is t with the key's
// adapter (p.cur), or t itself for a provider with one key.
func (p *plan) lease(ctx context.Context, t *target) (*target, error) {
	p.held = keypool.Lease{}
	if t.keys == nil {
		p.c.entry.ProviderKey = ""
		return t, nil
	}
	l, err := keypool.Lease{}, error(nil)
	pinned := false
	if p.pinRoute == t.rt && p.pinKey >= 0 {
		l, err = t.keys.pool.AcquireKey(ctx, p.pinKey)
		pinned = err == nil
		p.pinKey = -1
		if !pinned && p.affinity {
			// Refused since placed (its rate window, a race): the session's
			// next key on the route, where its later turns will go.
			if p.rs.aff.repin(p, t.rt, p.c.session.Key); p.pinKey >= 0 {
				l, err = t.keys.pool.AcquireKey(ctx, p.pinKey)
				pinned = err == nil
				p.pinKey = -1
			}
		}
	}
	if !pinned {
		if l, err = t.keys.pool.Acquire(ctx); err != nil {
			return nil, err
		}
	}
	p.held = l
	p.cur = *t
	p.cur.provider = t.keys.provs[l.Index()]
	p.c.entry.ProviderKey = l.Name()
	return &p.cur, nil
}

// sessionOf is req's session identity under mode (affinity.Identify):
// the explicit ids first (prompt_cache_key, X-Session-Id,
// metadata.user_id, user), the prompt's prefix fingerprint only when none
// is given or mode is prefix. A Responses request continued by
// previous_response_id is fingerprinted on its own input (the stored
// chain is not read for it): such clients name their session with
// prompt_cache_key.
func sessionOf(r *http.Request, req *provider.Request, mode affinity.Mode) affinity.Identity {
	f := affinity.Fields{SessionID: r.Header.Get(affinity.SessionHeaderName)}
	n := req.Native
	if ch := req.Chat; ch != nil {
		f.PromptCacheKey = ch.PromptCacheKey
		if n != nil && n.Dialect == provider.DialectAnthropic {
			f.MetadataUserID = ch.User // messages.ToChat's metadata.user_id
		} else {
			f.User = ch.User
		}
	}
	if id := affinity.Identify(mode, f); id.Key != 0 {
		return id
	}
	switch {
	case n == nil:
		f.Prefix = affinity.ChatPrefix(req.Body)
	case n.Dialect == provider.DialectAnthropic:
		f.Prefix = affinity.MessagesPrefix(n.Body)
	case n.Dialect == provider.DialectResponses:
		f.Prefix = affinity.ResponsesPrefix(n.Body, nil)
	}
	return affinity.Identify(mode, f)
}

// keyOutcome applies an attempt's end to its key: a 429 benches it until
// the upstream's Retry-After (keypool.DefaultBench without one), a 401 or
// 403 disables it. Either is the key's, not the route's: res becomes
// neutral for the route's health, and keyLevel reports that another key
// of the route may serve at once.
func keyOutcome(t *target, l keypool.Lease, err error, res *route.Result) (keyLevel bool) {
	if t.keys == nil || err == nil {
		return false // before perr, which escapes: no allocation on this path
	}
	var perr *provider.Error
	if !errors.As(err, &perr) {
		return false
	}
	switch perr.Status {
	case http.StatusTooManyRequests:
		t.keys.pool.Bench(l.Name(), time.Now().Add(perr.RetryAfter))
	case http.StatusUnauthorized, http.StatusForbidden:
		t.keys.pool.Disable(l.Name(), "the provider answered "+strconv.Itoa(perr.Status)+" "+http.StatusText(perr.Status))
	default:
		return false
	}
	res.Outcome = route.Neutral
	return true
}

// exhaustedError: no key of any route could take the request.
type exhaustedError struct {
	model string
	last  *keypool.ExhaustedError
}

func (e *exhaustedError) Error() string {
	return fmt.Sprintf("no route of model %q can take the request now: %v", e.model, e.last)
}

func (e *exhaustedError) Unwrap() error { return e.last }

// providerKeyStates is the key pools' state for metrics and /admin/routes.
func (g *Gateway) providerKeyStates() []metrics.ProviderKeyState {
	var out []metrics.ProviderKeyState
	var buf []keypool.KeyState
	st := g.cur()
	for _, name := range st.keyedOrder {
		buf = st.keyed[name].pool.Snapshot(buf[:0])
		for _, s := range buf {
			disabled := 0.0
			if s.Disabled != "" {
				disabled = 1
			}
			benched := 0.0
			if s.BenchedUntil != "" {
				benched = 1
			}
			out = append(out, metrics.ProviderKeyState{Provider: name, Key: s.Name,
				Inflight: float64(s.Inflight), Acquired: float64(s.Acquired), Refused: float64(s.Refused),
				Benches: float64(s.Benches), Disabled: disabled, Benched: benched})
		}
	}
	return out
}
