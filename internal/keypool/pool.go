// Package keypool holds the API keys of one provider and chooses the key of
// each attempt (issue 26): the least loaded of the keys that their own
// limits allow (requests and tokens per minute, streams in flight), a key
// benched after a 429 until its Retry-After, a key disabled after a 401 or
// 403, while the other keys keep serving. Counts are local to the process;
// a shared ratelimit.Limiter (the Redis one) adds the limits of every
// replica. It starts no goroutine and never shows a key's secret outside
// Lease.Secret.
package keypool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/ratelimit"
)

// DefaultBench is how long Bench rests a key when the 429 gave no usable
// Retry-After (until not after now).
const DefaultBench = 5 * time.Second

// MaxKeys is the most keys a Pool holds (masks of a bit per key).
const MaxKeys = 64

// maxLimit caps limits and the tokens of one release (ratelimit's bound).
const maxLimit = 1 << 32

// busyRetry is the RetryAt hint when keys are only full of streams: a
// stream's end cannot be foreseen.
const busyRetry = time.Second

// Key is one provider API key and its limits, as configured
// (providers[].api_keys).
type Key struct {
	Name       string // in /admin/routes, logs and metric labels; never the secret
	Secret     string // the provider API key itself
	RPM        int    // requests per minute; 0: no limit
	TPM        int    // tokens per minute, counted when a lease is released; 0: no limit
	MaxStreams int    // requests in flight at once; 0: no limit
	Weight     int    // share of the load against the other keys; below 1 counts as 1
}

// String is the key's name: a Key printed by mistake shows no secret.
func (k Key) String() string { return k.Name }

// LogValue is the key's name, for the same reason.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.Name) }

// Config makes a Pool.
type Config struct {
	Provider string // the provider's name, in errors and logs
	Keys     []Key
	// Shared, when set, also counts each key's RPM and TPM for every
	// replica (to be backed by package quota's Redis counts when pools are
	// wired in; a ratelimit.Local shared by pools in one process in tests),
	// under "keypool:<provider>/<key name>". It is consulted only for keys
	// with an RPM or TPM, after the local counts allow; an error from it
	// allows. Nil: this process counts alone.
	Shared ratelimit.Limiter
	// Logger gets the one WARN of a disabled key; nil means slog.Default().
	Logger *slog.Logger
	// OnDisable, when set, is called once when a key is disabled (a metric:
	// disabled keys by name).
	OnDisable func(key, reason string)
	// OnBench, when set, is called on each Bench (a metric: benches by key).
	OnBench func(key string, until time.Time)
}

// Pool is one provider's keys. It is safe for concurrent use.
type Pool struct {
	provider  string
	keys      []key
	shared    ratelimit.Limiter
	log       *slog.Logger
	onDisable func(string, string)
	onBench   func(string, time.Time)
	next      atomic.Uint32 // rotates the start of the least-loaded scan
}

type key struct {
	Key
	weight     int64
	sharedName string
	limits     ratelimit.Limits

	inflight atomic.Int64
	benched  atomic.Int64 // Unix ns the bench ends; 0: never benched
	limited  atomic.Int64 // Unix ns before which its rpm/tpm refuse (a refusal's retry time)
	disabled atomic.Pointer[string]

	mu sync.Mutex
	w  ratelimit.Window // behind mu: Acquire reads and counts without a map lookup

	acquired atomic.Uint64
	refused  atomic.Uint64 // refusals by the key's rpm/tpm (local or shared)
	benches  atomic.Uint64
}

// New returns the pool of cfg's keys. It fails, naming every problem, on
// no keys, more than MaxKeys, a key without a name or secret, a repeated
// name, or a negative limit.
func New(cfg Config) (*Pool, error) {
	var errs []error
	switch n := len(cfg.Keys); {
	case n == 0:
		errs = append(errs, fmt.Errorf("provider %q: api_keys is empty", cfg.Provider))
	case n > MaxKeys:
		errs = append(errs, fmt.Errorf("provider %q: %d api_keys, more than %d", cfg.Provider, n, MaxKeys))
	}
	p := &Pool{
		provider: cfg.Provider, shared: cfg.Shared, log: cfg.Logger,
		onDisable: cfg.OnDisable, onBench: cfg.OnBench,
		keys: make([]key, len(cfg.Keys)),
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	for i, k := range cfg.Keys {
		at := fmt.Sprintf("provider %q: api_keys[%d]", cfg.Provider, i)
		if k.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is empty", at))
		}
		if k.Secret == "" {
			errs = append(errs, fmt.Errorf("%s (%s): key is empty", at, k.Name))
		}
		if k.RPM < 0 || k.TPM < 0 || k.MaxStreams < 0 {
			errs = append(errs, fmt.Errorf("%s (%s): rpm, tpm and max_streams must be ≥ 0", at, k.Name))
		}
		for _, u := range cfg.Keys[:i] {
			if k.Name != "" && u.Name == k.Name {
				errs = append(errs, fmt.Errorf("%s: name %q is used twice", at, k.Name))
			}
		}
		// As in ratelimit: a limit above maxLimit is as good as none, and
		// counts times the window's ms stay inside int64.
		k.RPM, k.TPM = min(k.RPM, maxLimit), min(k.TPM, maxLimit)
		p.keys[i] = key{
			Key: k, weight: int64(max(k.Weight, 1)),
			sharedName: "keypool:" + cfg.Provider + "/" + k.Name,
			limits:     ratelimit.Limits{RPM: k.RPM, TPM: k.TPM},
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Provider is the pool's provider name.
func (p *Pool) Provider() string { return p.provider }

// Len is the number of keys.
func (p *Pool) Len() int { return len(p.keys) }

// Index returns the index of the key named name, -1 when there is none.
func (p *Pool) Index(name string) int {
	for i := range p.keys {
		if p.keys[i].Name == name {
			return i
		}
	}
	return -1
}

// Name is the name of key i.
func (p *Pool) Name(i int) string { return p.keys[i].Name }

// Lease is one attempt's hold on a key, from Acquire. Its zero value holds
// nothing. Release it exactly once.
type Lease struct {
	p *Pool
	k *key
	i int
}

// Secret is the provider API key to send.
func (l Lease) Secret() string { return l.k.Secret }

// Name is the key's name, for Bench, Disable, logs and the ledger.
func (l Lease) Name() string { return l.k.Name }

// Index is the key's index in the pool's configured order.
func (l Lease) Index() int { return l.i }

// Release ends the attempt: the key's stream slot is freed and tokens (the
// request's input and output, as the provider counted them) go to its TPM
// window, local and shared. Tokens ≤ 0 count nothing. A shared limiter's
// Record runs in the caller with a background context.
func (l Lease) Release(tokens int) {
	k := l.k
	if k == nil {
		return
	}
	k.inflight.Add(-1)
	if tokens <= 0 {
		return
	}
	k.mu.Lock()
	k.w.Roll(time.Now())
	k.w.Record(tokens)
	k.mu.Unlock()
	if l.p.shared != nil && k.TPM > 0 {
		l.p.shared.Record(context.Background(), k.sharedName, tokens)
	}
}

// ErrExhausted is what an ExhaustedError is (errors.Is).
var ErrExhausted = errors.New("no provider key can take the request")

// ExhaustedError says that no key of the pool can take an attempt now: each
// is disabled, benched, at its rpm/tpm or full of streams. The route should
// answer as rate-limited, with RetryAt, unless every key is disabled.
type ExhaustedError struct {
	Provider string
	// RetryAt is the earliest time a key may take an attempt again: the end
	// of a bench or of a rate window, or a second from now when keys are
	// only full of streams. Zero when every key is disabled.
	RetryAt time.Time
	// Keys by reason: Disabled + Benched + Limited + Busy = the pool's size.
	Disabled, Benched, Limited, Busy int
}

func (e *ExhaustedError) Error() string {
	if e.RetryAt.IsZero() {
		return fmt.Sprintf("every api key of provider %q is disabled (the provider refused it with 401/403)", e.Provider)
	}
	return fmt.Sprintf("every api key of provider %q is busy or rate-limited (%d benched after a 429, %d at rpm/tpm, %d at max_streams, %d disabled); retry at %s",
		e.Provider, e.Benched, e.Limited, e.Busy, e.Disabled, e.RetryAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrExhausted) true.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// RetryAfter is the wait until RetryAt from now, rounded up to whole seconds
// and at least one, for a Retry-After header; 0 when every key is disabled.
func (e *ExhaustedError) RetryAfter(now time.Time) time.Duration {
	if e.RetryAt.IsZero() {
		return 0
	}
	d := e.RetryAt.Sub(now)
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// Acquire leases the least-loaded key that can take an attempt now: the
// fewest in flight per weight, ties taken in turn; a key its own rpm or tpm
// (local, then shared) refuses is passed over for the next. A key that is
// disabled, benched, full of streams or inside a rate refusal's retry time
// is not considered. When no key can take it, the error is an
// *ExhaustedError. Without a shared limiter it does not allocate.
func (p *Pool) Acquire(ctx context.Context) (Lease, error) {
	now := time.Now()
	ns := now.UnixNano()
	var tried uint64
	start := int(p.next.Add(1))
	for {
		best := -1
		var bestLoad, bestW int64
		for j := range p.keys {
			i := (start + j) % len(p.keys)
			k := &p.keys[i]
			if tried&(1<<i) != 0 || !k.ready(ns) {
				continue
			}
			load := k.inflight.Load() + 1
			// load/weight < bestLoad/bestW without division.
			if best < 0 || load*bestW < bestLoad*k.weight {
				best, bestLoad, bestW = i, load, k.weight
			}
		}
		if best < 0 {
			return Lease{}, p.exhausted(ns)
		}
		if l, ok := p.try(ctx, best, now); ok {
			return l, nil
		}
		tried |= 1 << best
	}
}

// AcquireKey leases key i when it can take an attempt now (for affinity,
// which chose the key); else the error is an *ExhaustedError about that
// key alone (Provider names the pool, the counts are of key i).
func (p *Pool) AcquireKey(ctx context.Context, i int) (Lease, error) {
	now := time.Now()
	if i < 0 || i >= len(p.keys) {
		return Lease{}, fmt.Errorf("provider %q has no api key %d", p.provider, i)
	}
	if p.keys[i].ready(now.UnixNano()) {
		if l, ok := p.try(ctx, i, now); ok {
			return l, nil
		}
	}
	return Lease{}, p.exhaustedOf(now.UnixNano(), 1<<i)
}

// Available returns a bit per key that would be considered now (not
// disabled, benched, full of streams or inside a rate refusal): the keys an
// affinity placement may use. A key it lists can still be refused by its
// rate window or the shared limiter.
func (p *Pool) Available() uint64 {
	ns := time.Now().UnixNano()
	var m uint64
	for i := range p.keys {
		if p.keys[i].ready(ns) {
			m |= 1 << i
		}
	}
	return m
}

// ready reports whether k may be tried at ns.
func (k *key) ready(ns int64) bool {
	if k.disabled.Load() != nil || k.benched.Load() > ns || k.limited.Load() > ns {
		return false
	}
	return k.MaxStreams == 0 || k.inflight.Load() < int64(k.MaxStreams)
}

// try claims a stream slot of key i and counts a request in its windows;
// false, with nothing claimed, when a limit refuses.
func (p *Pool) try(ctx context.Context, i int, now time.Time) (Lease, bool) {
	k := &p.keys[i]
	if m := int64(k.MaxStreams); m > 0 {
		for {
			n := k.inflight.Load()
			if n >= m {
				return Lease{}, false
			}
			if k.inflight.CompareAndSwap(n, n+1) {
				break
			}
		}
	} else {
		k.inflight.Add(1)
	}
	// Local window: every request is counted (rpm used in the snapshot);
	// refused only against a limit.
	k.mu.Lock()
	ms := k.w.Wait(k.limits, k.w.Roll(now))
	if ms == 0 {
		k.w.Count(1)
	}
	minute := k.w.Minute()
	k.mu.Unlock()
	if ms > 0 {
		refuse(k, now.Add(time.Duration(ms)*time.Millisecond))
		return Lease{}, false
	}
	if p.shared != nil && (k.RPM > 0 || k.TPM > 0) {
		d, err := p.shared.Allow(ctx, k.sharedName, k.limits)
		if err == nil && !d.Allowed {
			k.mu.Lock()
			if k.w.Minute() == minute { // not rolled meanwhile: take the count back
				k.w.Count(-1)
			}
			k.mu.Unlock()
			refuse(k, now.Add(d.RetryAfter))
			return Lease{}, false
		}
	}
	k.acquired.Add(1)
	return Lease{p: p, k: k, i: i}, true
}

// refuse frees the slot try claimed and rests k until until: its rate
// window cannot allow before then, whatever happens meanwhile (counts only
// grow).
func refuse(k *key, until time.Time) {
	k.inflight.Add(-1)
	k.refused.Add(1)
	raise(&k.limited, until.UnixNano())
}

// raise stores v in a when it is later than a's value.
func raise(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

func (p *Pool) exhausted(ns int64) error { return p.exhaustedOf(ns, 1<<len(p.keys)-1) }

// exhaustedOf is the ExhaustedError over the keys of mask.
func (p *Pool) exhaustedOf(ns int64, mask uint64) error {
	e := &ExhaustedError{Provider: p.provider}
	var at int64
	earliest := func(t int64) {
		if at == 0 || t < at {
			at = t
		}
	}
	for i := range p.keys {
		if mask&(1<<i) == 0 {
			continue
		}
		k := &p.keys[i]
		switch b, l := k.benched.Load(), k.limited.Load(); {
		case k.disabled.Load() != nil:
			e.Disabled++
		case b > ns && b >= l:
			e.Benched++
			earliest(b)
		case l > ns:
			e.Limited++
			earliest(l)
		default:
			// Full of streams, or freed since the caller looked: either way
			// try again soon.
			e.Busy++
			earliest(ns + int64(busyRetry))
		}
	}
	if at != 0 {
		e.RetryAt = time.Unix(0, at)
	}
	return e
}

// Bench rests the key named name until until (a 429's Retry-After), or for
// DefaultBench when until is not after now; a longer bench already in place
// stays. Other keys are untouched. It reports whether the pool has the key.
func (p *Pool) Bench(name string, until time.Time) bool {
	i := p.Index(name)
	if i < 0 {
		return false
	}
	if now := time.Now(); !until.After(now) {
		until = now.Add(DefaultBench)
	}
	k := &p.keys[i]
	raise(&k.benched, until.UnixNano())
	k.benches.Add(1)
	if p.onBench != nil {
		p.onBench(name, until)
	}
	return true
}

// Rest benches the key named name until until, as Bench does, for a 429
// another replica got (package keyshare): it is not counted as this
// replica's bench and calls no OnBench. It reports whether the pool has
// the key.
func (p *Pool) Rest(name string, until time.Time) bool {
	i := p.Index(name)
	if i < 0 {
		return false
	}
	raise(&p.keys[i].benched, until.UnixNano())
	return true
}

// Off disables the key named name, as Disable does, for a 401/403 another
// replica got (package keyshare): one WARN the first time, saying so, and
// no OnDisable. It reports whether the pool has the key.
func (p *Pool) Off(name, reason string) bool {
	i := p.Index(name)
	if i < 0 {
		return false
	}
	if p.keys[i].disabled.CompareAndSwap(nil, &reason) {
		p.log.Warn("provider key disabled", "provider", p.provider, "key", name, "reason", reason, "by", "another replica")
	}
	return true
}

// Disable takes the key named name out of the pool for good (the provider
// answered 401 or 403: revoked or not allowed), logging one WARN with the
// provider, the key's name and reason the first time, and calling
// OnDisable then. It reports whether the pool has the key.
func (p *Pool) Disable(name, reason string) bool {
	i := p.Index(name)
	if i < 0 {
		return false
	}
	if reason == "" {
		reason = "disabled"
	}
	if p.keys[i].disabled.CompareAndSwap(nil, &reason) {
		p.log.Warn("provider key disabled", "provider", p.provider, "key", name, "reason", reason)
		if p.onDisable != nil {
			p.onDisable(name, reason)
		}
	}
	return true
}

// Reset puts every key back in service: benches and rate refusals end,
// disabled keys are enabled again (an operator replaced or restored a
// revoked key). It returns the names of the keys it enabled, in order.
func (p *Pool) Reset() (enabled []string) {
	for i := range p.keys {
		k := &p.keys[i]
		k.benched.Store(0)
		k.limited.Store(0)
		if k.disabled.Swap(nil) != nil {
			enabled = append(enabled, k.Name)
		}
	}
	return enabled
}

// KeyState is a key's state for GET /admin/routes and metrics; never its
// secret. Fields are read one by one, not as one consistent cut. The
// counters only grow: export them as Prometheus counters labelled by Name.
type KeyState struct {
	Name         string `json:"name"`
	Weight       int    `json:"weight"`
	Inflight     int    `json:"inflight"`
	MaxStreams   int    `json:"max_streams,omitempty"`
	RPM          int    `json:"rpm,omitempty"`
	RPMUsed      int    `json:"rpm_used"` // this replica's requests of the last 60 s (sliding estimate)
	TPM          int    `json:"tpm,omitempty"`
	TPMUsed      int    `json:"tpm_used"`                // this replica's tokens of the last 60 s
	BenchedUntil string `json:"benched_until,omitempty"` // RFC 3339 (ms), while benched
	LimitedUntil string `json:"limited_until,omitempty"` // RFC 3339 (ms), while its rpm/tpm refuse
	Disabled     string `json:"disabled,omitempty"`      // the reason, once disabled
	Acquired     uint64 `json:"acquired"`                // leases taken
	Refused      uint64 `json:"refused"`                 // passed over by its rpm/tpm
	Benches      uint64 `json:"benches"`                 // Bench calls (429s)
}

// Snapshot appends the state of each key, in configured order, to dst.
func (p *Pool) Snapshot(dst []KeyState) []KeyState {
	now := time.Now()
	ns := now.UnixNano()
	for i := range p.keys {
		k := &p.keys[i]
		k.mu.Lock()
		req, tok := k.w.Estimate(k.w.Roll(now))
		k.mu.Unlock()
		s := KeyState{
			Name: k.Name, Weight: int(k.weight), Inflight: int(k.inflight.Load()), MaxStreams: k.MaxStreams,
			RPM: k.RPM, RPMUsed: int(req), TPM: k.TPM, TPMUsed: int(tok),
			Acquired: k.acquired.Load(), Refused: k.refused.Load(), Benches: k.benches.Load(),
		}
		if b := k.benched.Load(); b > ns {
			s.BenchedUntil = stamp(b)
		}
		if l := k.limited.Load(); l > ns {
			s.LimitedUntil = stamp(l)
		}
		if r := k.disabled.Load(); r != nil {
			s.Disabled = *r
		}
		dst = append(dst, s)
	}
	return dst
}

func stamp(ns int64) string {
	return time.Unix(0, ns).UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
}
