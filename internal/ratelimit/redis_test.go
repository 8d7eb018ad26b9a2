package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/redisguard/redistest"
)

// replica is one gateway replica's limiter on its own client, at a fixed
// time, so that no test straddles a minute by chance.
func replica(tb testing.TB, prefix string, at time.Time, logger *slog.Logger) *Redis {
	r := NewRedis(redistest.Client(tb, nil), nil, logger)
	r.prefix = prefix
	r.now = func() time.Time { return at }
	return r
}

// fixedTime is 10 s into the current minute.
func fixedTime() time.Time { return time.Now().Truncate(time.Minute).Add(10 * time.Second) }

func TestRedisSharedRPM(t *testing.T) {
	at := fixedTime()
	a := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "rl"), at, nil)
	b := replica(t, a.prefix, at, nil)
	lim := Limits{RPM: 10}
	allowed := 0
	for i := range 10 {
		r := []*Redis{a, b}[i%2]
		d, err := r.Allow(t.Context(), "team-a", lim)
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("allowed %d of 10 across two replicas, want 10", allowed)
	}
	for name, r := range map[string]*Redis{"a": a, "b": b} {
		d, err := r.Allow(t.Context(), "team-a", lim)
		// 50 s left in this minute + 1 ms of the next.
		want := Decision{Limit: "rpm", RetryAfter: 51 * time.Second}
		if err != nil || d != want {
			t.Fatalf("11th on %s: got %+v, %v, want %+v", name, d, err, want)
		}
		if deg, reason := r.Degraded(); deg {
			t.Fatalf("%s degraded: %s", name, reason)
		}
	}
	// Another key is not touched.
	if d, _ := b.Allow(t.Context(), "team-b", lim); !d.Allowed {
		t.Fatalf("other key: got %+v, want allowed", d)
	}
}

// TestRedisSliding checks that Redis weighs the previous minute exactly as
// Local does: the same decisions on the same clock.
func TestRedisSliding(t *testing.T) {
	minute := time.Now().Truncate(time.Minute)
	r := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "rl"), minute.Add(59*time.Second), nil)
	l := NewLocal()
	lim := Limits{RPM: 60}
	for range 60 {
		r.Allow(t.Context(), "k", lim)
		l.allowAt("k", lim, minute.Add(59*time.Second))
	}
	later := minute.Add(89 * time.Second)
	r.now = func() time.Time { return later }
	got, _ := allowN(t, r, "k", lim, 61)
	if got != 29 {
		t.Fatalf("30 s after a burst at 0:59: allowed %d, want 29", got)
	}
	local := 0
	for range 61 {
		if l.allowAt("k", lim, later).Allowed {
			local++
		}
	}
	if local != got {
		t.Fatalf("local allowed %d, redis %d: want the same", local, got)
	}
}

func TestRedisSharedTPM(t *testing.T) {
	at := fixedTime()
	a := replica(t, redistest.Prefix(t, redistest.Client(t, nil), "rl"), at, nil)
	b := replica(t, a.prefix, at, nil)
	lim := Limits{TPM: 1000}
	for _, r := range []*Redis{a, b} {
		if d, err := r.Allow(t.Context(), "k", lim); err != nil || !d.Allowed {
			t.Fatalf("before tokens: got %+v, %v, want allowed", d, err)
		}
	}
	a.Record(t.Context(), "k", 600)
	b.Record(t.Context(), "k", 399)
	if d, _ := a.Allow(t.Context(), "k", lim); !d.Allowed {
		t.Fatalf("at 999 of 1000 tokens: got %+v, want allowed", d)
	}
	b.Record(t.Context(), "k", 1)
	for name, r := range map[string]*Redis{"a": a, "b": b} {
		d, err := r.Allow(t.Context(), "k", lim)
		want := Decision{Limit: "tpm", RetryAfter: 51 * time.Second}
		if err != nil || d != want {
			t.Fatalf("at 1000 of 1000 tokens on %s: got %+v, %v, want %+v", name, d, err, want)
		}
	}
}

// TestRedisKeyNames checks that the key's name does not reach Redis: only
// its hash, in keys with a TTL.
func TestRedisKeyNames(t *testing.T) {
	c := redistest.Client(t, nil)
	r := NewRedis(c, nil, nil)
	r.prefix = redistest.Prefix(t, c, "rl")
	name := "sk-secret {weird}\n key ✓"
	r.Allow(t.Context(), name, Limits{RPM: 5})
	r.Record(t.Context(), name, 7)
	keys, err := c.Keys(t.Context(), r.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("keys: got %q, want one rpm and one tpm bucket", keys)
	}
	for _, k := range keys {
		if strings.Contains(k, "secret") || strings.Contains(k, "weird") {
			t.Errorf("key %q holds the key's name", k)
		}
		if ttl := c.TTL(t.Context(), k).Val(); ttl <= 0 || ttl > ttlSeconds*time.Second {
			t.Errorf("TTL of %q: got %v, want (0, %ds]", k, ttl, ttlSeconds)
		}
	}
}

func TestRedisOneRoundTrip(t *testing.T) {
	c := redistest.Client(t, nil)
	hook := &redistest.Trips{}
	c.AddHook(hook)
	r := NewRedis(c, nil, nil)
	r.prefix = redistest.Prefix(t, c, "rl")
	lim := Limits{RPM: 5, TPM: 1000}
	r.Allow(t.Context(), "k", lim) // loads the script if Redis lacks it: EVALSHA, EVAL
	hook.Take()
	r.Allow(t.Context(), "k", lim) // the first Allow since (a new connection, or not)
	hook.Take()
	const n = 8
	allowN(t, r, "k", lim, n) // 3 allowed, 5 refused: each one trip
	if got, want := hook.Take(), slices.Repeat([]string{"evalsha"}, n); !slices.Equal(got, want) {
		t.Fatalf("round trips of %d Allow: got %q, want %q", n, got, want)
	}
	r.Record(t.Context(), "k", 10) // may dial a connection of its own: HELLO, CLIENT SETINFO
	hook.Take()
	r.Record(t.Context(), "k", 10)
	if got, want := hook.Take(), []string{"pipeline(incrby,expire)"}; !slices.Equal(got, want) {
		t.Fatalf("round trips of Record: got %q, want %q", got, want)
	}
	if got, _ := allowN(t, r, "k", Limits{}, 10); got != 10 || len(hook.Take()) != 0 {
		t.Fatalf("no limits: allowed %d of 10 (want 10) and must not ask Redis", got)
	}
}

func TestRedisFallbackClosedPort(t *testing.T) {
	c := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true,
	})
	defer c.Close()
	logger, logs := redistest.NewLog()
	r := NewRedis(c, NewLocal(), logger)
	lim := Limits{RPM: 3}
	for i := range 3 {
		d, err := r.Allow(t.Context(), "k", lim)
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: got %+v, %v, want allowed by the fallback", i+1, d, err)
		}
	}
	d, err := r.Allow(t.Context(), "k", lim)
	if err != nil || d.Allowed || d.Limit != "rpm" || d.RetryAfter < time.Second {
		t.Fatalf("4th: got %+v, %v, want refused by the fallback's rpm", d, err)
	}
	r.Record(t.Context(), "k", 5)
	deg, reason := r.Degraded()
	if !deg || !strings.Contains(reason, "127.0.0.1:1") {
		t.Fatalf("Degraded: got %v, %q, want true and the dial error", deg, reason)
	}
	if n := logs.Count("level=WARN"); n != 1 {
		t.Fatalf("WARN lines: got %d, want 1:\n%s", n, logs.String())
	}
}

// flaky is a dialer whose connections all fail while down is set, as when
// Redis stops or the network drops.
type flaky struct {
	down atomic.Bool
}

func (f *flaky) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.down.Load() {
		return nil, errors.New("flaky: redis is down")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &flakyConn{Conn: conn, f: f}, nil
}

type flakyConn struct {
	net.Conn
	f *flaky
}

func (c *flakyConn) Write(p []byte) (int, error) {
	if c.f.down.Load() {
		return 0, errors.New("flaky: connection reset")
	}
	return c.Conn.Write(p)
}

// TestRedisOutage takes Redis away and back: one WARN, the fallback decides
// with this replica's own earlier count, no Redis call per request while
// down, one INFO when a probe finds Redis back.
func TestRedisOutage(t *testing.T) {
	f := &flaky{}
	c := redistest.Client(t, func(o *redis.Options) { o.Dialer = f.dial; o.MaxRetries = -1 })
	hook := &redistest.Trips{}
	c.AddHook(hook)
	logger, logs := redistest.NewLog()
	r := NewRedis(c, NewLocal(), logger)
	r.prefix = redistest.Prefix(t, redistest.Client(t, nil), "rl")
	at := fixedTime()
	r.now = func() time.Time { return at }
	r.guard.ProbeEvery = time.Second
	lim := Limits{RPM: 10}

	if got, _ := allowN(t, r, "k", lim, 4); got != 4 {
		t.Fatalf("healthy: allowed %d of 4", got)
	}
	f.down.Store(true)
	hook.Take()
	// The fallback counted this replica's 4: 6 more, not 10.
	if got, _ := allowN(t, r, "k", lim, 10); got != 6 {
		t.Fatalf("down: allowed %d of 10, want 6", got)
	}
	if trips := hook.Take(); len(trips) != 1 {
		t.Fatalf("down: %d Redis calls for 10 requests (%q), want 1 (the one that found it down)", len(trips), trips)
	}
	if deg, reason := r.Degraded(); !deg || !strings.Contains(reason, "flaky") {
		t.Fatalf("Degraded: got %v, %q, want true, flaky's error", deg, reason)
	}
	at = at.Add(500 * time.Millisecond) // before the probe is due
	f.down.Store(false)
	allowN(t, r, "other", lim, 3)
	if trips := hook.Take(); len(trips) != 0 {
		t.Fatalf("before the probe is due: %q, want no Redis call", trips)
	}
	if deg, _ := r.Degraded(); !deg {
		t.Fatal("Degraded: got false before a probe, want true")
	}
	at = at.Add(600 * time.Millisecond)
	// The probe asks Redis, which holds only the 4 of before the outage.
	if got, _ := allowN(t, r, "k", lim, 10); got != 6 {
		t.Fatalf("back: allowed %d of 10, want 6 (Redis counted 4)", got)
	}
	if deg, reason := r.Degraded(); deg {
		t.Fatalf("Degraded after Redis came back: true, %q", reason)
	}
	if w, i := logs.Count("level=WARN"), logs.Count("level=INFO"); w != 1 || i != 1 {
		t.Fatalf("logs: %d WARN, %d INFO, want 1 each:\n%s", w, i, logs.String())
	}
}

func TestRedisCallerGone(t *testing.T) {
	c := redistest.Client(t, nil)
	r := NewRedis(c, nil, nil)
	r.prefix = redistest.Prefix(t, c, "rl")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Allow(ctx, "k", Limits{RPM: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Allow with a cancelled context: got %v, want context.Canceled", err)
	}
	if deg, _ := r.Degraded(); deg {
		t.Fatal("a cancelled caller made Redis degraded")
	}
}

// BenchmarkRedisAllow reports the latency that the limit check adds to a
// request with Redis on loopback: p50 and p99 of Allow (one EVALSHA),
// against BenchmarkRedisPing, the round trip's floor.
func BenchmarkRedisAllow(b *testing.B) {
	c := redistest.Client(b, nil)
	r := NewRedis(c, nil, nil)
	r.prefix = redistest.Prefix(b, c, "rl")
	ctx := context.Background()
	lim := Limits{RPM: 1 << 30, TPM: 1 << 30}
	r.Allow(ctx, "k", lim)
	benchLatency(b, func() error {
		_, err := r.Allow(ctx, "k", lim)
		return err
	})
	if deg, reason := r.Degraded(); deg {
		b.Fatalf("degraded during the benchmark: %s", reason)
	}
}

func BenchmarkRedisPing(b *testing.B) {
	c := redistest.Client(b, nil)
	ctx := context.Background()
	benchLatency(b, func() error { return c.Ping(ctx).Err() })
}

func benchLatency(b *testing.B, f func() error) {
	lat := make([]time.Duration, 0, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
