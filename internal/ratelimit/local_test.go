package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// synctest's clock starts at 2000-01-01 00:00:00 UTC, the start of a minute:
// an offset from the bubble's start is an offset into a minute.

// allowN calls Allow n times and returns how many were allowed and the last
// refusal.
func allowN(t *testing.T, lim Limiter, key string, l Limits, n int) (allowed int, refused Decision) {
	t.Helper()
	for range n {
		d, err := lim.Allow(t.Context(), key, l)
		if err != nil {
			t.Fatalf("Allow(%q): %v", key, err)
		}
		if d.Allowed {
			allowed++
		} else {
			refused = d
		}
	}
	return allowed, refused
}

func TestLocalRPM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal()
		lim := Limits{RPM: 60}
		if got, _ := allowN(t, l, "k", lim, 60); got != 60 {
			t.Fatalf("allowed %d of the first 60, want 60", got)
		}
		d, _ := l.Allow(t.Context(), "k", lim)
		// The 60 weigh on the next minute until its first ms is over: the
		// estimate 60·(60000−e)/60000 < 60 from e = 1 ms, i.e. 60.001 s.
		want := Decision{Limit: "rpm", RetryAfter: 61 * time.Second}
		if d != want {
			t.Fatalf("61st: got %+v, want %+v", d, want)
		}
		time.Sleep(d.RetryAfter - time.Second)
		if d, _ := l.Allow(t.Context(), "k", lim); d.Allowed {
			t.Fatalf("1s before Retry-After: got allowed, want refused")
		}
		time.Sleep(time.Second)
		if d, _ := l.Allow(t.Context(), "k", lim); !d.Allowed {
			t.Fatalf("at Retry-After: got %+v, want allowed", d)
		}
	})
}

// TestLocalSliding checks the weighted previous minute. The bound asserted:
// exactly RPM − ⌈prev·(60 s − e)/60 s⌉ requests come back, which is about the
// share of the window that the previous minute left.
func TestLocalSliding(t *testing.T) {
	tests := []struct {
		name        string
		burstAt     time.Duration // offset into the first minute of 60 requests
		after       time.Duration // wait after the burst
		wantAllowed int
	}{
		// 30 s after a burst at 0:59 it is 1:29: 31/60 of the previous
		// minute still weighs, so 29 of 60 (about half) are back.
		{"burst at end, 30s later", 59 * time.Second, 30 * time.Second, 29},
		// A burst at 0:00 is still counted whole at 1:00 (the counter
		// assumes requests spread over their minute) ...
		{"burst at start, 60s later", 0, 60 * time.Second, 0},
		// ... and half of it at 1:30.
		{"burst at start, 90s later", 0, 90 * time.Second, 30},
		{"burst at end, 1ms later", 59*time.Second + 999*time.Millisecond, time.Millisecond, 0},
		{"two minutes later all back", 30 * time.Second, 120 * time.Second, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := NewLocal()
				lim := Limits{RPM: 60}
				time.Sleep(tt.burstAt)
				if got, _ := allowN(t, l, "k", lim, 60); got != 60 {
					t.Fatalf("burst: allowed %d, want 60", got)
				}
				time.Sleep(tt.after)
				got, refused := allowN(t, l, "k", lim, 61)
				if got != tt.wantAllowed {
					t.Fatalf("allowed %d, want %d", got, tt.wantAllowed)
				}
				if refused.Allowed || refused.Limit != "rpm" || refused.RetryAfter < time.Second {
					t.Fatalf("refusal: got %+v, want rpm with Retry-After ≥ 1s", refused)
				}
			})
		})
	}
}

// TestLocalRetryAfterExact checks at many offsets that a refused request is
// still refused 1 s before its Retry-After and allowed at it.
func TestLocalRetryAfterExact(t *testing.T) {
	for _, at := range []time.Duration{0, 1 * time.Millisecond, 7 * time.Second, 30 * time.Second, 59*time.Second + 999*time.Millisecond} {
		for _, lim := range []Limits{{RPM: 1}, {RPM: 7}, {RPM: 60}, {TPM: 1000}, {RPM: 5, TPM: 100}} {
			t.Run(fmt.Sprintf("%v/%+v", at, lim), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					l := NewLocal()
					time.Sleep(at)
					var d Decision
					for i := 0; ; i++ {
						if d, _ = l.Allow(t.Context(), "k", lim); !d.Allowed {
							break
						}
						l.Record(t.Context(), "k", 45)
						time.Sleep(time.Duration(i%3) * 100 * time.Millisecond)
					}
					time.Sleep(d.RetryAfter - time.Second)
					if got, _ := l.Allow(t.Context(), "k", lim); got.Allowed {
						t.Fatalf("1s before Retry-After %v: allowed, want refused", d.RetryAfter)
					}
					time.Sleep(time.Second)
					if got, _ := l.Allow(t.Context(), "k", lim); !got.Allowed {
						t.Fatalf("at Retry-After %v: got %+v, want allowed", d.RetryAfter, got)
					}
				})
			})
		}
	}
}

func TestLocalTPM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal()
		lim := Limits{TPM: 1000}
		if d, _ := l.Allow(t.Context(), "k", lim); !d.Allowed {
			t.Fatalf("first: got %+v, want allowed", d)
		}
		l.Record(t.Context(), "k", 999)
		if d, _ := l.Allow(t.Context(), "k", lim); !d.Allowed {
			t.Fatalf("at 999 of 1000 tokens: got %+v, want allowed", d)
		}
		l.Record(t.Context(), "k", 1)
		d, _ := l.Allow(t.Context(), "k", lim)
		want := Decision{Limit: "tpm", RetryAfter: 61 * time.Second}
		if d != want {
			t.Fatalf("at 1000 of 1000 tokens: got %+v, want %+v", d, want)
		}
		l.Record(t.Context(), "k", 0)  // ignored
		l.Record(t.Context(), "k", -5) // ignored
		time.Sleep(d.RetryAfter)
		if d, _ := l.Allow(t.Context(), "k", lim); !d.Allowed {
			t.Fatalf("at Retry-After: got %+v, want allowed", d)
		}
	})
}

func TestLocalBothLimitsReportLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal()
		lim := Limits{RPM: 2, TPM: 100}
		allowN(t, l, "k", lim, 2)
		time.Sleep(30 * time.Second)
		// Tokens recorded at 0:30 free at 1:00+; requests of 0:00 too, but
		// 5000 tokens against 100 need 59 s of the next minute.
		l.Record(t.Context(), "k", 5000)
		d, _ := l.Allow(t.Context(), "k", lim)
		if d.Allowed || d.Limit != "tpm" {
			t.Fatalf("got %+v, want refused by tpm (frees later)", d)
		}
	})
}

func TestLocalKeysIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal()
		lim := Limits{RPM: 3, TPM: 10}
		if got, _ := allowN(t, l, "a", lim, 4); got != 3 {
			t.Fatalf("a: allowed %d, want 3", got)
		}
		l.Record(t.Context(), "c", 10)
		if got, _ := allowN(t, l, "b", lim, 3); got != 3 {
			t.Fatalf("b after a is full: allowed %d, want 3", got)
		}
		if d, _ := l.Allow(t.Context(), "c", lim); d.Allowed || d.Limit != "tpm" {
			t.Fatalf("c: got %+v, want refused by tpm", d)
		}
		if d, _ := l.Allow(t.Context(), "d", lim); !d.Allowed {
			t.Fatalf("d: got %+v, want allowed", d)
		}
	})
}

func TestLocalNoLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal()
		for _, lim := range []Limits{{}, {RPM: -1, TPM: -1}} {
			if got, _ := allowN(t, l, "k", lim, 1000); got != 1000 {
				t.Fatalf("%+v: allowed %d of 1000, want all", lim, got)
			}
		}
		// Nothing was counted: a limit set later starts from zero.
		if got, _ := allowN(t, l, "k", Limits{RPM: 5}, 6); got != 5 {
			t.Fatalf("allowed %d, want 5", got)
		}
	})
}

// TestLocalSweep checks that idle keys are dropped, so the map does not grow
// with every key ever seen.
func TestLocalSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal()
		for i := range 1000 {
			l.Allow(t.Context(), fmt.Sprint("k", i), Limits{RPM: 1})
		}
		time.Sleep(3 * time.Minute)
		for i := range 1000 { // touches every shard
			l.Allow(t.Context(), fmt.Sprint("fresh", i), Limits{RPM: 1})
		}
		n := 0
		for i := range l.shards {
			n += len(l.shards[i].keys)
		}
		if n != 1000 {
			t.Fatalf("keys held: got %d, want 1000 (the idle ones dropped)", n)
		}
	})
}

func TestLocalConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLocal()
		lim := Limits{RPM: 500, TPM: 1 << 30}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 1000 {
					d, _ := l.Allow(context.Background(), "shared", lim)
					if d.Allowed {
						allowed.Add(1)
						l.Record(context.Background(), "shared", 1)
					}
					l.Allow(context.Background(), fmt.Sprint("own", g, i%10), lim)
				}
			})
		}
		wg.Wait()
		// The clock stands still in the bubble: all in one minute.
		if got := allowed.Load(); got != 500 {
			t.Fatalf("allowed %d of 8000, want 500", got)
		}
	})
}

// TestLocalBound checks the documented bound on random arrivals over ten
// minutes: at most RPM per fixed minute, fewer than 2·RPM in any 60 s.
func TestLocalBound(t *testing.T) {
	const rpm = 50
	rng := rand.New(rand.NewPCG(1, 2))
	l := NewLocal()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var times []time.Duration
	now := time.Duration(0)
	for now < 10*time.Minute {
		// Bursts and lulls (gaps over three orders of magnitude), about 115
		// a minute: the key is over its limit all along.
		now += time.Duration(rng.ExpFloat64() * float64([]time.Duration{5, 50, 1500}[rng.IntN(3)]*time.Millisecond))
		if l.allowAt("k", Limits{RPM: rpm}, start.Add(now)).Allowed {
			times = append(times, now)
		}
	}
	perMinute := map[time.Duration]int{}
	for _, at := range times {
		perMinute[at.Truncate(time.Minute)]++
	}
	for m, n := range perMinute {
		if n > rpm {
			t.Errorf("minute %v: %d allowed, want ≤ %d", m, n, rpm)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	maxIn := 0
	for i := range times { // window (times[i]−60s, times[i]]
		j := sort.Search(len(times), func(j int) bool { return times[j] > times[i]-time.Minute })
		maxIn = max(maxIn, i-j+1)
	}
	if maxIn >= 2*rpm {
		t.Errorf("max in a 60 s window: %d, want < %d", maxIn, 2*rpm)
	}
	if len(times) < 9*rpm {
		t.Errorf("allowed %d in 10 minutes of a busy key, want ≥ %d", len(times), 9*rpm)
	}
	t.Logf("allowed %d in 10 min at RPM %d; max in any 60 s window: %d", len(times), rpm, maxIn)
}

func TestWait(t *testing.T) {
	// Brute force: wait must name the first ms at which the estimate is
	// below the limit, stepping through the rest of this minute and the next.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		limit := int64(1 + rng.IntN(100))
		prev, cur := int64(rng.IntN(200)), int64(rng.IntN(200))
		e := int64(rng.IntN(windowMS))
		got := wait(prev, cur, limit, e)
		var want int64
		for t := e; ; t++ {
			p, c, te := prev, cur, t
			if t >= windowMS {
				p, c, te = cur, 0, t-windowMS
			}
			if below(p, c, limit, te) {
				want = t - e
				break
			}
		}
		if got != want {
			t.Fatalf("wait(prev %d, cur %d, limit %d, e %d) = %d, want %d", prev, cur, limit, e, got, want)
		}
	}
}

func TestSlot(t *testing.T) {
	for _, tt := range []struct {
		t             time.Time
		minute, since int64
	}{
		{time.UnixMilli(0), 0, 0},
		{time.UnixMilli(59_999), 0, 59_999},
		{time.UnixMilli(60_000), 1, 0},
		{time.UnixMilli(-1), -1, 59_999},
	} {
		if m, e := slot(tt.t); m != tt.minute || e != tt.since {
			t.Errorf("slot(%v) = %d, %d, want %d, %d", tt.t.UnixMilli(), m, e, tt.minute, tt.since)
		}
	}
}

func BenchmarkLocalAllow(b *testing.B) {
	l := NewLocal()
	ctx := context.Background()
	lim := Limits{RPM: 1 << 30, TPM: 1 << 30}
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(ctx, "key", lim)
	}
}

func BenchmarkLocalAllowParallel(b *testing.B) {
	l := NewLocal()
	ctx := context.Background()
	lim := Limits{RPM: 1 << 30, TPM: 1 << 30}
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		keys := make([]string, 16)
		for i := range keys {
			keys[i] = fmt.Sprint("key", n.Add(1))
		}
		i := 0
		for pb.Next() {
			l.Allow(ctx, keys[i%len(keys)], lim)
			i++
		}
	})
}
