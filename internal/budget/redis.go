package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/usd"
)

const (
	// pastEnd keeps a window's counter this long after the window's end, so
	// that requests still in flight at the end settle into it.
	pastEnd = time.Hour
	// totalTTL is the idle life of a Total counter (it has no end): each
	// Reserve renews it; an idle key's counter expires and is loaded again
	// from the ledger, which then holds all of its spend.
	totalTTL = 24 * time.Hour
)

// reserveScript checks and reserves in one round trip: it holds the
// estimate, at most what is left of the budget. The counter is at most
// usd.MaxSum (2^53 − 1) and the arguments at most usd.MaxMicro, so every
// value is an integer exact in Lua's float64; numbers are written to Redis
// only from ARGV, never formatted by Lua.
//
//	KEYS: the window's counter (micro-dollars settled + held)
//	ARGV: budget, estimate (micro-dollars), ttl s to renew (0: none)
//	returns {-1, 0, 0} when the counter is missing (load it, then call
//	again), {0, committed, 0} when refused, {1, committed after reserving,
//	held} when allowed
var reserveScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return {-1, 0, 0} end
v = tonumber(v)
local b = tonumber(ARGV[1])
if v >= b then return {0, v, 0} end
local e = tonumber(ARGV[2])
if e < b - v then
  v = redis.call('INCRBY', KEYS[1], ARGV[2])
else
  e = b - v
  v = b
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
end
if ARGV[3] ~= '0' then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return {1, v, e}
`)

// settleScript adds (actual − held) to the counter, saturating in
// [0, usd.MaxSum] as usd.Add does (a plain INCRBY past 2^63 − 1 is an error,
// which would count as Redis being down), and only to a counter that exists:
// one gone (Redis restarted, or expired) would be made with no TTL holding
// only this delta, which Reserve would then take as the window's whole
// spend. The sum is compared in float64: exact up to 2^53, and past it still
// above usd.MaxSum.
//
//	ARGV: delta (micro-dollars, |delta| ≤ usd.MaxMicro), usd.MaxSum
var settleScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local n = tonumber(v) + tonumber(ARGV[1])
if n > tonumber(ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
elseif n < 0 then
  redis.call('SET', KEYS[1], '0', 'KEEPTTL')
else
  redis.call('INCRBY', KEYS[1], ARGV[1])
end
return 1
`)

// Redis is the Ledger shared by every replica: one counter per key and window
// in micro-dollars (settled + reserved), under sg:budget:{h}:<period>:<start>
// where h is the first 16 hex digits of the key name's SHA-256 and start the
// window's start in Unix seconds ("total" for Total), expiring an hour after
// the window's end (Total: after 24 h without a Reserve). The first Reserve of
// a window finds the counter missing, loads the spend from the SpentFunc and
// creates the counter with SET NX (so when replicas race, one value wins and
// the others' loads are dropped; within a replica concurrent first requests
// share one load), then asks again. Every other Reserve is one
// round trip: EVALSHA of a script that checks committed < budget and
// holds the estimate (at most what is left) with INCRBY. Settle is one round
// trip: a script adding (actual − held) to the counter, if it still exists,
// saturating as the Local ledger does. Needs Redis 6.0 or later (KEEPTTL).
//
// Replicas compute windows from their own clocks: keep them synced.
//
// When a Redis call fails (down, or slower than 50 ms), the request is decided
// by the Local fallback and Redis counts as degraded, as in ratelimit: one
// WARN, Degraded reports it, requests use the fallback without waiting on
// Redis, one request per second probes Redis, and when a probe succeeds one
// INFO is logged and Redis decides again. The fallback is emptied when an
// outage starts, so each key loads its spend again from the ledger (all
// replicas' settled spend, as far as written). While degraded each replica
// spends alone, so N replicas may each overspend by the bound of the package
// comment, and the spend settled meanwhile does not reach the Redis counters:
// after the outage they under-count it until their window ends.
type Redis struct {
	client *redis.Client
	local  *Local
	spent  SpentFunc
	logger *slog.Logger

	// Fixed after NewRedis; tests change them.
	prefix  string
	timeout time.Duration
	now     func() time.Time

	guard redisguard.Guard // Redis's health

	lmu     sync.Mutex
	loading map[string]*flight // by counter: loads in progress
}

// NewRedis returns a Ledger whose counters client shares with every replica
// using the same Redis. fallback decides while Redis is unreachable; nil
// makes NewLocal(spent). spent loads a window's spend (nil: nothing spent
// before). logger nil discards the two state-change logs. Build client with
// ContextTimeoutEnabled, MaxRetries -1 and DialerRetries 1, as for ratelimit.
func NewRedis(client *redis.Client, fallback *Local, spent SpentFunc, logger *slog.Logger) *Redis {
	if fallback == nil {
		fallback = NewLocal(spent)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Redis{
		client:  client,
		local:   fallback,
		spent:   spent,
		logger:  logger,
		prefix:  "sg:budget:",
		timeout: redisguard.CallTimeout,
		now:     time.Now,
		guard: redisguard.Guard{Logger: logger, ProbeEvery: redisguard.ProbeEvery,
			Down: "budget: redis unreachable, each replica enforces budgets alone until it is back",
			Up:   "budget: redis reachable again, budgets shared again"},
	}
}

// Degraded reports whether Redis is unreachable and the local fallback
// decides, and the error that made it so ("" when not degraded).
func (r *Redis) Degraded() (bool, string) { return r.guard.Degraded() }

// errLoad marks a failed SpentFunc: the ledger's fault, not Redis's.
type errLoad struct{ err error }

func (e errLoad) Error() string { return e.err.Error() }
func (e errLoad) Unwrap() error { return e.err }

// Reserve implements Ledger. A Redis failure is answered by the fallback;
// errors are an unknown period, a failed SpentFunc or ctx ended.
func (r *Redis) Reserve(ctx context.Context, key string, lim Limit, est float64) (*Reservation, error) {
	if lim.none() {
		return nil, nil
	}
	if !validPeriod(lim.Period) {
		return nil, fmt.Errorf("budget: key %q: unknown period %q (want %q, %q or %q)", key, lim.Period, Month, Day, Total)
	}
	e, now := usd.Micro(est), r.now()
	if !r.guard.Use(now) {
		return r.local.reserveAt(ctx, key, lim, e, now)
	}
	res, err := r.reserve(ctx, key, lim, e, now)
	var ex *Exceeded
	var le errLoad
	switch {
	case err == nil, errors.As(err, &ex):
		r.guard.Recovered(now)
		return res, err
	case errors.As(err, &le):
		return nil, le.err
	case ctx.Err() != nil:
		// The caller left (client disconnect): not Redis's fault.
		return nil, fmt.Errorf("budget: reserve for key %q: %w", key, context.Cause(ctx))
	}
	if r.guard.Fail(err, now) {
		r.local.reset() // the fallback reloads current spend from the ledger
	}
	return r.local.reserveAt(ctx, key, lim, e, now)
}

func (r *Redis) reserve(ctx context.Context, key string, lim Limit, est int64, now time.Time) (*Reservation, error) {
	start, end := Window(lim.Period, now)
	k := r.counter(key, lim.Period, start)
	renew := 0
	if lim.Period == Total {
		renew = int(totalTTL / time.Second)
	}
	for range 3 {
		v, err := r.run(ctx, k, usd.Micro(lim.USD), est, renew)
		if err != nil {
			return nil, err
		}
		switch v[0] {
		case 1:
			return &Reservation{held: v[2], r: r, counter: k}, nil
		case 0:
			return nil, &Exceeded{Key: key, Limit: lim, Spent: usd.FromMicro(v[1]), Reset: end}
		}
		if err := r.loadOnce(ctx, k, key, start, end, now); err != nil {
			return nil, err
		}
	}
	// Gone again right after each load (expired at once, or deleted): not
	// expected.
	return nil, fmt.Errorf("budget: counter of key %q missing right after its load", key)
}

// flight is one load of a counter by this process: in progress, or done at
// end (a successful load, kept recentLoad for the requests whose script call
// saw the counter missing just before it was made).
type flight struct {
	done chan struct{}
	end  time.Time // zero while in progress
}

// recentLoad is how long a finished load answers later first requests.
const recentLoad = time.Second

// loadOnce loads k unless this process is loading it or just did, in which
// case it waits for that load: concurrent first requests of a key in a
// replica call the SpentFunc once. A waiter returns nil whatever the load's
// outcome; its next script call sees whether the counter exists.
func (r *Redis) loadOnce(ctx context.Context, k, key string, start, end, now time.Time) error {
	r.lmu.Lock()
	if f := r.loading[k]; f != nil && (f.end.IsZero() || time.Since(f.end) < recentLoad) {
		r.lmu.Unlock()
		select {
		case <-f.done:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if r.loading == nil {
		r.loading = make(map[string]*flight)
	}
	if len(r.loading) >= 256 { // amortised sweep of finished loads
		for c, f := range r.loading {
			if !f.end.IsZero() && time.Since(f.end) >= recentLoad {
				delete(r.loading, c)
			}
		}
	}
	f := &flight{done: make(chan struct{})}
	r.loading[k] = f
	r.lmu.Unlock()
	err := r.load(ctx, k, key, start, end, now)
	r.lmu.Lock()
	if err != nil {
		delete(r.loading, k) // the next request tries again
	} else {
		f.end = time.Now()
	}
	r.lmu.Unlock()
	close(f.done)
	return err
}

func (r *Redis) run(ctx context.Context, k string, budget, est int64, renew int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	v, err := reserveScript.Run(ctx, r.client, []string{k}, budget, est, renew).Int64Slice()
	if err == nil && len(v) != 3 {
		err = fmt.Errorf("budget: script answered %d values, want 3", len(v))
	}
	return v, err
}

// load creates the window's counter from the SpentFunc, unless another
// replica did first (SET NX).
func (r *Redis) load(ctx context.Context, k, key string, start, end, now time.Time) error {
	var spent float64
	if r.spent != nil {
		var err error
		if spent, err = r.spent(ctx, key, start); err != nil {
			return errLoad{fmt.Errorf("budget: load spend of key %q since %s: %w", key, start.Format(time.RFC3339), err)}
		}
	}
	ttl := totalTTL
	if !end.IsZero() {
		ttl = end.Add(pastEnd).Sub(now)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.SetNX(ctx, k, usd.Micro(spent), ttl).Err()
}

// settle is Reservation.Settle of a Redis reservation: bounded by 50 ms and
// detached from ctx's cancellation, since it runs as the request ends. A
// failure is logged through fail and the delta lost (the ledger still has the
// cost, for the next window's load).
func (r *Redis) settle(ctx context.Context, res *Reservation, actual int64) {
	delta := actual - res.held
	if delta == 0 || r.guard.IsDown() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	if err := settleScript.Run(ctx, r.client, []string{res.counter}, delta, int64(usd.MaxSum)).Err(); err != nil {
		if r.guard.Fail(err, r.now()) {
			r.local.reset()
		}
	}
}

// counter is the Redis key of key's counter in the window starting at
// start, named by its redisguard.Tag.
func (r *Redis) counter(key, period string, start time.Time) string {
	w := "total"
	if period != Total {
		w = strconv.FormatInt(start.Unix(), 10)
	}
	return r.prefix + redisguard.Tag(key) + ":" + period + ":" + w
}
