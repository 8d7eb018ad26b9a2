package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
)

// replica is one gateway replica's ledger on its own client, at a fixed time
// so that no test straddles a window's end by chance.
func replica(tb testing.TB, prefix string, at time.Time, spent SpentFunc) *Redis {
	r := NewRedis(redistest.Client(tb, nil), nil, spent, nil)
	r.prefix = prefix
	r.now = func() time.Time { return at }
	return r
}

func TestRedisSharedBudget(t *testing.T) {
	at := time.Now()
	var calls atomic.Int64
	a := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "budget"), at, fixedSpent(0.40, &calls))
	b := replica(t, a.prefix, at, fixedSpent(0.40, &calls))
	lim := Limit{USD: 1, Period: Month}
	_, end := Window(Month, at)
	var held []*Reservation
	for i := range 6 { // 0.40 + 6·0.10 = 1.00
		res, err := []*Redis{a, b}[i%2].Reserve(t.Context(), "team-a", lim, 0.10)
		if err != nil {
			t.Fatalf("request %d: got %v, want allowed", i+1, err)
		}
		held = append(held, res)
	}
	for name, r := range map[string]*Redis{"a": a, "b": b} {
		_, err := r.Reserve(t.Context(), "team-a", lim, 0.10)
		var ex *Exceeded
		want := Exceeded{Key: "team-a", Limit: lim, Spent: 1, Reset: end}
		if !errors.As(err, &ex) || *ex != want {
			t.Fatalf("7th on %s: got %v, want %+v", name, err, want)
		}
		if deg, reason := r.Degraded(); deg {
			t.Fatalf("%s degraded: %s", name, reason)
		}
	}
	// a's first request cost 0.05 less than its estimate, b's second 0.05:
	// 0.10 free, taken by one request of either replica.
	held[0].Settle(t.Context(), 0.05)
	held[3].Settle(t.Context(), 0.05)
	held[3].Settle(t.Context(), 1) // no-op
	if _, err := b.Reserve(t.Context(), "team-a", lim, 0.10); err != nil {
		t.Fatalf("after settles freed 0.10: got %v, want allowed", err)
	}
	if _, err := a.Reserve(t.Context(), "team-a", lim, 0.10); err == nil {
		t.Fatal("at 1.00 again: got allowed, want refused")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("SpentFunc calls of two replicas: got %d, want 1", n)
	}
	if _, err := b.Reserve(t.Context(), "team-b", lim, 0.10); err != nil {
		t.Fatalf("another key: got %v, want allowed", err)
	}
}

// TestRedisConcurrent: 100 goroutines on two replicas reserve $0.01 against
// $0.50: exactly 50 allowed.
func TestRedisConcurrent(t *testing.T) {
	at := time.Now()
	var calls atomic.Int64
	a := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "budget"), at, fixedSpent(0, &calls))
	b := replica(t, a.prefix, at, fixedSpent(0, &calls))
	// 100 first uses at once on loopback under -race: give Redis time, so
	// that the count is Redis's and not the fallbacks'.
	a.timeout, b.timeout = 5*time.Second, 5*time.Second
	lim := Limit{USD: 0.5, Period: Day}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			r := []*Redis{a, b}[i%2]
			_, err := r.Reserve(context.Background(), "shared", lim, 0.01)
			var ex *Exceeded
			switch {
			case err == nil:
				allowed.Add(1)
			case !errors.As(err, &ex):
				t.Errorf("Reserve: %v", err)
			}
		})
	}
	wg.Wait()
	for name, r := range map[string]*Redis{"a": a, "b": b} {
		if deg, reason := r.Degraded(); deg {
			t.Fatalf("%s degraded: %s", name, reason)
		}
	}
	if got := allowed.Load(); got != 50 {
		t.Fatalf("allowed %d of 100 across two replicas, want 50", got)
	}
	// One load per replica at most (racing replicas may both load; one SET
	// NX wins, so the count above is exact either way).
	if n := calls.Load(); n < 1 || n > 2 {
		t.Fatalf("SpentFunc calls: got %d, want 1 or 2 (one per replica at most)", n)
	}
}

// TestRedisLoadOnce checks the counter's creation: one SpentFunc call and one
// SET NX for a key and window, however many requests and replicas; the value
// is the loaded spend plus reservations; the name is hashed; the TTL runs
// past the window's end.
func TestRedisLoadOnce(t *testing.T) {
	c := redistest.Client(t, nil)
	prefix := redistest.Prefix(t, c, "budget")
	at := time.Now()
	var since []time.Time
	var mu sync.Mutex
	spent := func(_ context.Context, key string, s time.Time) (float64, error) {
		mu.Lock()
		defer mu.Unlock()
		since = append(since, s)
		return 12.345678, nil
	}
	hook := &redistest.Trips{}
	a := replica(t, prefix, at, spent)
	a.client.AddHook(hook)
	b := replica(t, prefix, at, spent)
	name := "sk-secret {weird}\n key ✓"
	lim := Limit{USD: 100, Period: Month}
	for i := range 10 {
		if _, err := []*Redis{a, b}[i%2].Reserve(t.Context(), name, lim, 0.5); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	start, end := Window(Month, at)
	if len(since) != 1 || !since[0].Equal(start) {
		t.Fatalf("SpentFunc since: got %v, want once %v", since, start)
	}
	if got := hook.Count("set"); got != 1 { // SET k v EX ttl NX
		t.Fatalf("SET NX calls: got %d, want 1 (trips %q)", got, hook.Take())
	}
	keys, err := c.Keys(t.Context(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("keys: got %q, want one counter", keys)
	}
	k := keys[0]
	if strings.Contains(k, "secret") || strings.Contains(k, "weird") {
		t.Errorf("key %q holds the key's name", k)
	}
	if want := fmt.Sprintf(":month:%d", start.Unix()); !strings.HasSuffix(k, want) {
		t.Errorf("key %q: want suffix %q", k, want)
	}
	if v, _ := c.Get(t.Context(), k).Int64(); v != 12_345_678+10*500_000 {
		t.Errorf("counter: got %d µ$, want %d", v, 12_345_678+10*500_000)
	}
	ttl := c.TTL(t.Context(), k).Val()
	if lo, hi := time.Until(end)-time.Minute, time.Until(end)+pastEnd+time.Second; ttl < lo || ttl > hi {
		t.Errorf("TTL: got %v, want in [%v, %v] (past the window's end)", ttl, lo, hi)
	}
}

func TestRedisTotal(t *testing.T) {
	c := redistest.Client(t, nil)
	r := replica(t, redistest.Prefix(t, c, "budget"), time.Now(), nil)
	lim := Limit{USD: 0.02, Period: Total}
	for range 2 {
		if _, err := r.Reserve(t.Context(), "k", lim, 0.01); err != nil {
			t.Fatalf("got %v, want allowed", err)
		}
	}
	_, err := r.Reserve(t.Context(), "k", lim, 0.01)
	var ex *Exceeded
	if !errors.As(err, &ex) || !ex.Reset.IsZero() || err.Error() != "budget of $0.02 in total spent ($0.02 used)" {
		t.Fatalf("3rd: got %v, want a Total *Exceeded with no reset", err)
	}
	keys, _ := c.Keys(t.Context(), r.prefix+"*").Result()
	if len(keys) != 1 || !strings.HasSuffix(keys[0], ":total:total") {
		t.Fatalf("keys: got %q, want one ending in :total:total", keys)
	}
	if ttl := c.TTL(t.Context(), keys[0]).Val(); ttl <= totalTTL-time.Minute || ttl > totalTTL {
		t.Fatalf("TTL: got %v, want about %v", ttl, totalTTL)
	}
}

// TestRedisSettleGoneCounter: a settle after the counter is gone (Redis
// restarted, or expired) must not create one holding only its delta.
func TestRedisSettleGoneCounter(t *testing.T) {
	c := redistest.Client(t, nil)
	r := replica(t, redistest.Prefix(t, c, "budget"), time.Now(), nil)
	res, err := r.Reserve(t.Context(), "k", Limit{USD: 1, Period: Month}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := c.Keys(t.Context(), r.prefix+"*").Result()
	c.Del(t.Context(), keys...)
	res.Settle(t.Context(), 0.1)
	if n, _ := c.Exists(t.Context(), keys...).Result(); n != 0 {
		t.Fatalf("counter after a settle on a deleted counter: exists %d, want 0", n)
	}
	if deg, reason := r.Degraded(); deg {
		t.Fatalf("degraded: %s", reason)
	}
}

func TestRedisOneRoundTrip(t *testing.T) {
	c := redistest.Client(t, nil)
	hook := &redistest.Trips{}
	c.AddHook(hook)
	r := NewRedis(c, nil, nil, nil)
	r.prefix = redistest.Prefix(t, c, "budget")
	lim := Limit{USD: 0.05, Period: Month}
	res, _ := r.Reserve(t.Context(), "k", lim, 0.01) // script loads, SET NX, a new connection
	res.Settle(t.Context(), 0.02)
	hook.Take()
	const n = 8 // 3 allowed (0.02 + 3·0.01 = 0.05), 5 refused
	var held []*Reservation
	for range n {
		if res, err := r.Reserve(t.Context(), "k", lim, 0.01); err == nil {
			held = append(held, res)
		}
	}
	if got, want := hook.Take(), slices.Repeat([]string{"evalsha"}, n); len(held) != 3 || !slices.Equal(got, want) {
		t.Fatalf("%d Reserve: %d allowed (want 3), round trips %q, want %q", n, len(held), got, want)
	}
	held[0].Settle(t.Context(), 0.03)
	held[1].Settle(t.Context(), 0.01) // actual = estimate: nothing to send
	if got, want := hook.Take(), []string{"evalsha"}; !slices.Equal(got, want) {
		t.Fatalf("round trips of two Settle: got %q, want %q", got, want)
	}
	if res, err := r.Reserve(t.Context(), "k", Limit{}, 1); res != nil || err != nil || len(hook.Take()) != 0 {
		t.Fatalf("no budget: got %v, %v and must not ask Redis", res, err)
	}
}

// TestRedisFallbackClosedPort needs no Redis: a client of a closed port makes
// the Local fallback decide, with the spend loaded from the SpentFunc, one
// WARN, and Degraded naming the dial error.
func TestRedisFallbackClosedPort(t *testing.T) {
	c := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true,
	})
	defer c.Close()
	buf := &redistest.Log{}
	var calls atomic.Int64
	r := NewRedis(c, nil, fixedSpent(0.20, &calls), slog.New(slog.NewTextHandler(buf, nil)))
	lim := Limit{USD: 0.5, Period: Month}
	for i := range 3 { // 0.20 + 3·0.10 = 0.50
		res, err := r.Reserve(t.Context(), "k", lim, 0.10)
		if err != nil {
			t.Fatalf("request %d: got %v, want allowed by the fallback", i+1, err)
		}
		res.Settle(t.Context(), 0.10)
	}
	_, err := r.Reserve(t.Context(), "k", lim, 0.10)
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Spent != 0.5 {
		t.Fatalf("4th: got %v, want *Exceeded by the fallback at $0.50", err)
	}
	deg, reason := r.Degraded()
	if !deg || !strings.Contains(reason, "127.0.0.1:1") {
		t.Fatalf("Degraded: got %v, %q, want true and the dial error", deg, reason)
	}
	if n := buf.Count("level=WARN"); n != 1 {
		t.Fatalf("WARN lines: got %d, want 1:\n%s", n, buf.String())
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("SpentFunc calls: got %d, want 1 (the fallback's load)", n)
	}
}

// TestRedisOutageAndBack: a Redis ledger whose client points at a closed
// port degrades, then recovers when a probe reaches the real Redis: one WARN,
// one INFO, the fallback emptied at the outage's start (its stale entry loaded
// again) and asked without Redis until the probe is due.
func TestRedisOutageAndBack(t *testing.T) {
	good := redistest.Client(t, nil)
	bad := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	defer bad.Close()
	buf := &redistest.Log{}
	at := time.Now()
	var calls atomic.Int64
	r := NewRedis(bad, nil, fixedSpent(0, &calls), slog.New(slog.NewTextHandler(buf, nil)))
	r.prefix = redistest.Prefix(t, good, "budget")
	r.now = func() time.Time { return at }
	lim := Limit{USD: 0.5, Period: Month}
	r.local.Reserve(t.Context(), "k", lim, 0.3) // a stale entry of an earlier outage
	if _, err := r.Reserve(t.Context(), "k", lim, 0.4); err != nil {
		t.Fatalf("down: got %v, want allowed by the fallback, loaded again", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("SpentFunc calls: got %d, want 2 (the fallback emptied when the outage started)", n)
	}
	if deg, _ := r.Degraded(); !deg {
		t.Fatal("Degraded: got false, want true")
	}
	r.client = good // Redis is back; the next probe finds it
	hook := &redistest.Trips{}
	good.AddHook(hook)
	if _, err := r.Reserve(t.Context(), "k", lim, 0.4); err != nil {
		t.Fatalf("fallback at 0.40: got %v, want allowed", err)
	}
	if _, err := r.Reserve(t.Context(), "k", lim, 0.4); err == nil {
		t.Fatal("fallback at 0.80: got allowed, want refused")
	}
	if trips := hook.Take(); len(trips) != 0 {
		t.Fatalf("before the probe is due: %q, want no Redis call", trips)
	}
	at = at.Add(redisguard.ProbeEvery)
	if _, err := r.Reserve(t.Context(), "k", lim, 0.4); err != nil {
		t.Fatalf("probe: got %v, want allowed by Redis (its counter starts at 0)", err)
	}
	if deg, reason := r.Degraded(); deg {
		t.Fatalf("Degraded after the probe: true, %q", reason)
	}
	if w, i := buf.Count("level=WARN"), buf.Count("level=INFO"); w != 1 || i != 1 {
		t.Fatalf("logs: %d WARN, %d INFO, want 1 each:\n%s", w, i, buf.String())
	}
}

func TestRedisCallerGone(t *testing.T) {
	c := redistest.Client(t, nil)
	r := NewRedis(c, nil, nil, nil)
	r.prefix = redistest.Prefix(t, c, "budget")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Reserve(ctx, "k", Limit{USD: 1, Period: Day}, 0.1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve with a cancelled context: got %v, want context.Canceled", err)
	}
	if deg, _ := r.Degraded(); deg {
		t.Fatal("a cancelled caller made Redis degraded")
	}
}

func TestRedisLoadError(t *testing.T) {
	c := redistest.Client(t, nil)
	r := replica(t, redistest.Prefix(t, c, "budget"), time.Now(), func(context.Context, string, time.Time) (float64, error) {
		return 0, errors.New("db down")
	})
	if _, err := r.Reserve(t.Context(), "k", Limit{USD: 1, Period: Day}, 0.1); err == nil || !strings.Contains(err.Error(), "db down") {
		t.Fatalf("got %v, want the SpentFunc's error", err)
	}
	if deg, _ := r.Degraded(); deg {
		t.Fatal("a failed SpentFunc made Redis degraded")
	}
}

// counterOf returns key's counter in r's current month window, in µ$,
// checking that it still expires (the scripts' SET keeps the TTL).
func counterOf(t *testing.T, r *Redis, key string) int64 {
	t.Helper()
	start, _ := Window(Month, r.now())
	k := r.counter(key, Month, start)
	v, err := r.client.Get(t.Context(), k).Int64()
	if err != nil {
		t.Fatalf("counter of %q: %v", key, err)
	}
	if ttl, err := r.client.TTL(t.Context(), k).Result(); err != nil || ttl <= 0 {
		t.Fatalf("TTL of the counter of %q: got %v, %v, want > 0", key, ttl, err)
	}
	return v
}

// TestRedisExtremes: as TestLocalExtremes, on the shared counter.
func TestRedisExtremes(t *testing.T) {
	r := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "budget"), time.Now(), nil)
	tests := []struct {
		name        string
		est, actual float64
		wantHeld    int64
		wantSettled int64
	}{
		{"+Inf", math.Inf(1), math.Inf(1), 1_000_000, capMicro},
		{"MaxFloat64", math.MaxFloat64, math.MaxFloat64, 1_000_000, capMicro},
		{"NaN", math.NaN(), math.NaN(), 0, 0},
		{"-Inf", math.Inf(-1), math.Inf(-1), 0, 0},
		{"estimate +Inf, actual a cent", math.Inf(1), 0.01, 1_000_000, 10_000},
		{"estimate $0.40, actual $0.40", 0.40, 0.40, 400_000, 400_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Reserve(t.Context(), tt.name, Limit{USD: 1, Period: Month}, tt.est)
			if err != nil {
				t.Fatalf("got %v, want allowed (the estimate alone never refuses)", err)
			}
			if v := counterOf(t, r, tt.name); v != tt.wantHeld {
				t.Fatalf("reserved: got counter %d µ$, want %d", v, tt.wantHeld)
			}
			res.Settle(t.Context(), tt.actual)
			if v := counterOf(t, r, tt.name); v != tt.wantSettled {
				t.Fatalf("settled: got counter %d µ$, want %d", v, tt.wantSettled)
			}
		})
	}
	if deg, reason := r.Degraded(); deg {
		t.Fatalf("degraded: %s", reason)
	}
}

// TestRedisManyMaxEstimates: as TestLocalManyMaxEstimates, from 16
// goroutines (10,000 reservations at once in the budget's sense; the pool is
// not the point).
func TestRedisManyMaxEstimates(t *testing.T) {
	r := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "budget"), time.Now(), nil)
	r.timeout = time.Minute // under -race on a shared machine: the count must be Redis's
	lim := Limit{USD: math.MaxFloat64, Period: Month}
	var allowed []*Reservation
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10_000 / 16 {
				res, err := r.Reserve(context.Background(), "k", lim, math.Inf(1))
				var ex *Exceeded
				switch {
				case err == nil:
					mu.Lock()
					allowed = append(allowed, res)
					mu.Unlock()
				case !errors.As(err, &ex) || ex.Spent != capMicro/1e6:
					t.Errorf("got %v, want allowed or *Exceeded with Spent 1e9", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if deg, reason := r.Degraded(); deg {
		t.Fatalf("degraded: %s", reason)
	}
	if len(allowed) != 1 {
		t.Fatalf("allowed %d of 10000, want 1", len(allowed))
	}
	allowed[0].Settle(context.Background(), 0.25)
	if v := counterOf(t, r, "k"); v != 250_000 {
		t.Fatalf("got counter %d µ$, want 250000", v)
	}
}

// TestRedisManyMaxCosts: as TestLocalManyMaxCosts. 10,000 × $1e9 in µ$ is
// past what INCRBY holds: its overflow error must not be taken for Redis
// being down, and the counter must stay above the budget.
func TestRedisManyMaxCosts(t *testing.T) {
	r := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "budget"), time.Now(), nil)
	r.timeout = time.Minute
	lim := Limit{USD: math.MaxFloat64, Period: Month}
	held := make([]*Reservation, 10_000)
	for i := range held {
		res, err := r.Reserve(context.Background(), "k", lim, 0)
		if err != nil {
			t.Fatalf("request %d: got %v, want allowed", i+1, err)
		}
		held[i] = res
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < len(held); i += 16 {
				held[i].Settle(context.Background(), math.Inf(1))
			}
		})
	}
	wg.Wait()
	if deg, reason := r.Degraded(); deg {
		t.Fatalf("degraded: %s", reason)
	}
	if v := counterOf(t, r, "k"); v < capMicro {
		t.Fatalf("got counter %d µ$, want at least %d", v, int64(capMicro))
	}
	_, err := r.Reserve(context.Background(), "k", lim, 0)
	var ex *Exceeded
	if !errors.As(err, &ex) || !(ex.Spent >= capMicro/1e6) {
		t.Fatalf("after $1e13 of costs: got %v, want *Exceeded with Spent at least 1e9", err)
	}
}
