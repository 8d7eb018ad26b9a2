package admit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// keys counts the per-key entries: they exist only while held or waited for.
func keys(l *Limiter) int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

func mustAcquire(t *testing.T, l *Limiter, key string, limit int) func() {
	t.Helper()
	release, err := l.Acquire(t.Context(), key, limit)
	if err != nil {
		t.Fatalf("Acquire(%q): got %v, want a slot", key, err)
	}
	return release
}

func wantFull(t *testing.T, err error, scope string, limit int, retry time.Duration) {
	t.Helper()
	var f *Full
	if !errors.As(err, &f) {
		t.Fatalf("got error %v, want *Full", err)
	}
	if f.Scope != scope || f.Limit != limit || f.RetryAfter != retry {
		t.Fatalf("got Full{%q, %d, %v}, want Full{%q, %d, %v}", f.Scope, f.Limit, f.RetryAfter, scope, limit, retry)
	}
}

func wantIdle(t *testing.T, l *Limiter) {
	t.Helper()
	if n := l.InUse(); n != 0 {
		t.Errorf("InUse: got %d, want 0", n)
	}
	if n := l.Waiting(); n != 0 {
		t.Errorf("Waiting: got %d, want 0", n)
	}
	if n := keys(l); n != 0 {
		t.Errorf("key entries: got %d, want 0", n)
	}
}

// maxGauge tracks a count of holders and the most it ever was.
type maxGauge struct{ cur, max atomic.Int64 }

func (g *maxGauge) inc() {
	n := g.cur.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *maxGauge) dec() { g.cur.Add(-1) }

// TestLimitsHoldUnderConcurrency: many goroutines on a few keys never exceed
// the gateway's limit, the default per-key limit, or a key's own limit.
func TestLimitsHoldUnderConcurrency(t *testing.T) {
	const global, perKey = 6, 2
	l := New(Options{Global: global, PerKey: perKey, Wait: time.Hour})
	keyLimits := map[string]int{"a": 0, "b": 0, "c": 0, "d": 0, "big": 4}
	var all maxGauge
	per := map[string]*maxGauge{}
	for k := range keyLimits {
		per[k] = new(maxGauge)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		key := []string{"a", "b", "c", "d", "big"}[i%5]
		wg.Go(func() {
			for range 25 {
				release, err := l.Acquire(t.Context(), key, keyLimits[key])
				if err != nil {
					t.Errorf("Acquire(%q): %v", key, err)
					return
				}
				all.inc()
				per[key].inc()
				runtime.Gosched()
				per[key].dec()
				all.dec()
				release()
			}
		})
	}
	wg.Wait()
	if m := all.max.Load(); m > global {
		t.Errorf("gateway: got %d concurrent holders, want at most %d", m, global)
	}
	for k, lim := range keyLimits {
		if lim == 0 {
			lim = perKey
		}
		if m := per[k].max.Load(); m > int64(lim) {
			t.Errorf("key %q: got %d concurrent holders, want at most %d", k, m, lim)
		}
	}
	wantIdle(t, l)
}

// TestFIFO: waiters get slots in the order they came, and one release wakes
// exactly one waiter.
func TestFIFO(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		key  func(i int) string
	}{
		{"key", Options{PerKey: 1, Wait: time.Minute}, func(int) string { return "k" }},
		{"gateway", Options{Global: 1, Wait: time.Minute}, func(i int) string { return fmt.Sprint("k", i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(tc.opts)
				release := mustAcquire(t, l, tc.key(-1), 0)
				const n = 5
				var (
					mu    sync.Mutex
					order []int
				)
				next := make(chan struct{}) // lets the current holder go
				for i := range n {
					go func() {
						r, err := l.Acquire(context.Background(), tc.key(i), 0)
						if err != nil {
							t.Errorf("waiter %d: %v", i, err)
							return
						}
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
						<-next
						r()
					}()
					synctest.Wait() // queued before the next one starts
				}
				if got := l.Waiting(); got != n {
					t.Fatalf("Waiting: got %d, want %d", got, n)
				}
				release()
				for i := range n {
					synctest.Wait()
					mu.Lock()
					got := len(order)
					mu.Unlock()
					if got != i+1 {
						t.Fatalf("after %d releases: got %d admitted, want %d (one wake-up per release)", i+1, got, i+1)
					}
					if w := l.Waiting(); w != n-i-1 {
						t.Fatalf("after %d releases: Waiting got %d, want %d", i+1, w, n-i-1)
					}
					next <- struct{}{}
				}
				synctest.Wait()
				for i, got := range order {
					if got != i {
						t.Fatalf("admission order: got %v, want 0..%d", order, n-1)
					}
				}
				wantIdle(t, l)
			})
		})
	}
}

// TestWaitZeroRefusesAtOnce: with no wait, a full limit refuses without any
// time passing, naming the full limit.
func TestWaitZeroRefusesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		scope string
		limit int
	}{
		{"key", Options{PerKey: 2}, "key", 2},
		{"gateway", Options{Global: 2}, "gateway", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(tc.opts)
				r1, r2 := mustAcquire(t, l, "k", 0), mustAcquire(t, l, "k", 0)
				start := time.Now()
				_, err := l.Acquire(t.Context(), "k", 0)
				if d := time.Since(start); d != 0 {
					t.Errorf("refused after %v, want at once", d)
				}
				wantFull(t, err, tc.scope, tc.limit, time.Second)
				if l.InUse() != 2 || l.Waiting() != 0 {
					t.Errorf("InUse, Waiting: got %d, %d, want 2, 0", l.InUse(), l.Waiting())
				}
				r1()
				r2()
				wantIdle(t, l)
			})
		})
	}
}

// TestWaitExpiry: a wait that runs out gives *Full with the scope and a
// Retry-After of the wait rounded up to a second, exactly at the wait's end,
// and leaves the queue.
func TestWaitExpiry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		scope string
		retry time.Duration
	}{
		{"key", Options{PerKey: 1, Wait: 1500 * time.Millisecond}, "key", 2 * time.Second},
		{"gateway", Options{Global: 1, Wait: 300 * time.Millisecond}, "gateway", time.Second},
		{"both full: the key's", Options{Global: 1, PerKey: 1, Wait: 2 * time.Second}, "key", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(tc.opts)
				release := mustAcquire(t, l, "k", 0)
				start := time.Now()
				_, err := l.Acquire(t.Context(), "k", 0)
				if d := time.Since(start); d != tc.opts.Wait {
					t.Errorf("refused after %v, want %v", d, tc.opts.Wait)
				}
				wantFull(t, err, tc.scope, 1, tc.retry)
				if w := l.Waiting(); w != 0 {
					t.Errorf("Waiting: got %d, want 0", w)
				}
				release()
				wantIdle(t, l)
			})
		})
	}
}

// TestWaitIsOneBudget: the key's wait and the gateway's wait together last
// at most Options.Wait.
func TestWaitIsOneBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 2 * time.Second
		l := New(Options{Global: 1, PerKey: 1, Wait: wait})
		release := mustAcquire(t, l, "k", 0) // holds k's slot and the gateway's
		done := make(chan error)
		start := time.Now()
		go func() {
			_, err := l.Acquire(t.Context(), "k", 0)
			done <- err
		}()
		time.Sleep(500 * time.Millisecond)
		// Raising k's limit to 3 admits the waiter to k at once (and this
		// caller too); both then wait for the gateway.
		go func() {
			_, err := l.Acquire(t.Context(), "k", 3)
			done <- err
		}()
		synctest.Wait()
		if w := l.Waiting(); w != 2 {
			t.Fatalf("Waiting: got %d, want 2 (both for the gateway)", w)
		}
		err := <-done
		if d := time.Since(start); d != wait {
			t.Errorf("first waiter refused after %v, want %v in all", d, wait)
		}
		wantFull(t, err, "gateway", 1, 2*time.Second)
		wantFull(t, <-done, "gateway", 1, 2*time.Second)
		release()
		wantIdle(t, l)
	})
}

// TestContextEnds: a ctx that ends while waiting gives its cause, not *Full,
// whichever limit is waited for, and its deadline bounds the wait.
func TestContextEnds(t *testing.T) {
	cause := errors.New("client went away")
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"key", Options{PerKey: 1, Wait: time.Minute}},
		{"gateway", Options{Global: 1, Wait: time.Minute}},
	} {
		t.Run(tc.name+"/cancel", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(tc.opts)
				release := mustAcquire(t, l, "k", 0)
				ctx, cancel := context.WithCancelCause(t.Context())
				done := make(chan error)
				go func() {
					_, err := l.Acquire(ctx, "k", 0)
					done <- err
				}()
				time.Sleep(time.Second)
				cancel(cause)
				err := <-done
				var f *Full
				if !errors.Is(err, cause) || errors.As(err, &f) {
					t.Errorf("got %v, want the cause %v", err, cause)
				}
				if w := l.Waiting(); w != 0 {
					t.Errorf("Waiting: got %d, want 0", w)
				}
				release()
				wantIdle(t, l)
			})
		})
		t.Run(tc.name+"/deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(tc.opts)
				release := mustAcquire(t, l, "k", 0)
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				defer cancel()
				start := time.Now()
				_, err := l.Acquire(ctx, "k", 0)
				if d := time.Since(start); d != 3*time.Second {
					t.Errorf("gave up after %v, want 3s (the ctx's deadline)", d)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("got %v, want %v", err, context.DeadlineExceeded)
				}
				release()
				wantIdle(t, l)
			})
		})
	}
}

// TestReleaseIdempotent: a second call of a release function does nothing,
// even after its pooled ticket serves another request.
func TestReleaseIdempotent(t *testing.T) {
	l := New(Options{Global: 1, PerKey: 1})
	first := mustAcquire(t, l, "k", 0)
	first()
	first()
	if n := l.InUse(); n != 0 {
		t.Fatalf("InUse after two releases: got %d, want 0", n)
	}
	second := mustAcquire(t, l, "k", 0)
	first()
	if n := l.InUse(); n != 1 {
		t.Fatalf("InUse after a stale release: got %d, want 1", n)
	}
	if _, err := l.Acquire(t.Context(), "k", 0); err == nil {
		t.Fatal("Acquire after a stale release: got a slot, want *Full (the second holder still holds it)")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(second) // concurrent calls: one gives the slot back
	}
	wg.Wait()
	wantIdle(t, l)
}

// TestKeyMapShrinks: after holders, waiters that were admitted, timed out or
// cancelled are all gone, no key has an entry, and the kept entries for reuse
// stay bounded.
func TestKeyMapShrinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Global: 100, PerKey: 1, Wait: time.Second})
		var wg sync.WaitGroup
		for i := range 300 {
			key := fmt.Sprint("key-", i)
			release := mustAcquire(t, l, key, 0)
			ctx, cancel := context.WithCancel(t.Context())
			for j := range 3 {
				wg.Go(func() {
					c := t.Context()
					if j == 1 {
						c = ctx
					}
					if r, err := l.Acquire(c, key, 0); err == nil {
						r()
					}
				})
			}
			wg.Go(func() {
				time.Sleep(time.Duration(i%3) * 400 * time.Millisecond)
				cancel()
				release()
			})
		}
		synctest.Wait()
		if n := keys(l); n == 0 {
			t.Fatal("key entries while waiting: got 0, want some")
		}
		wg.Wait()
		wantIdle(t, l)
		free := 0
		for i := range l.shards {
			free += len(l.shards[i].free)
		}
		if free > shards*keepFree {
			t.Errorf("entries kept for reuse: got %d, want at most %d", free, shards*keepFree)
		}
	})
}

// TestKeyWaiterHoldsNoGatewaySlot: a request waiting for its key holds no
// gateway slot, so another key still gets in.
func TestKeyWaiterHoldsNoGatewaySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Global: 2, PerKey: 1, Wait: time.Minute})
		a := mustAcquire(t, l, "noisy", 0)
		done := make(chan error)
		go func() {
			r, err := l.Acquire(t.Context(), "noisy", 0)
			if err == nil {
				r()
			}
			done <- err
		}()
		synctest.Wait()
		b, err := l.Acquire(t.Context(), "quiet", 0) // no wait: Wait would hide a held slot
		if err != nil {
			t.Fatalf("quiet key while noisy waits: got %v, want a slot", err)
		}
		if l.InUse() != 2 || l.Waiting() != 1 {
			t.Errorf("InUse, Waiting: got %d, %d, want 2, 1", l.InUse(), l.Waiting())
		}
		b()
		a()
		if err := <-done; err != nil {
			t.Errorf("noisy waiter: got %v, want a slot", err)
		}
		wantIdle(t, l)
	})
}

// TestGatewayRefusalFreesKeySlot: when the gateway's wait fails, the key's
// slot taken before it is given back.
func TestGatewayRefusalFreesKeySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Global: 1, PerKey: 1, Wait: time.Second})
		other := mustAcquire(t, l, "other", 0)
		_, err := l.Acquire(t.Context(), "k", 0)
		wantFull(t, err, "gateway", 1, time.Second)
		if n := keys(l); n != 1 {
			t.Errorf("key entries: got %d, want 1 (other's)", n)
		}
		other()
		release, err := l.Acquire(t.Context(), "k", 0)
		if err != nil {
			t.Fatalf("k after the refusal: got %v, want a slot (its key slot was freed)", err)
		}
		release()
		wantIdle(t, l)
	})
}

// TestPerKeyOverride: a key's own limit replaces Options.PerKey; 0 uses it.
func TestPerKeyOverride(t *testing.T) {
	for _, tc := range []struct {
		name     string
		perKey   int
		keyLimit int
		want     int // slots before *Full
	}{
		{"default", 2, 0, 2},
		{"raised", 1, 3, 3},
		{"lowered", 5, 1, 1},
		{"no default", 0, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Options{PerKey: tc.perKey})
			var rs []func()
			for range tc.want {
				rs = append(rs, mustAcquire(t, l, "k", tc.keyLimit))
			}
			_, err := l.Acquire(t.Context(), "k", tc.keyLimit)
			wantFull(t, err, "key", tc.want, time.Second)
			for _, r := range rs {
				r()
			}
			wantIdle(t, l)
		})
	}
}

// TestRaisedLimitAdmitsWaiters: a key's queue follows the limit of its
// latest Acquire; raising it admits the oldest waiters at once.
func TestRaisedLimitAdmitsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Wait: time.Minute})
		hold := mustAcquire(t, l, "k", 1)
		var admitted atomic.Int32
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				r, err := l.Acquire(t.Context(), "k", 1)
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(1)
				<-release
				r()
			})
		}
		synctest.Wait()
		r := mustAcquire(t, l, "k", 5) // 1 held + 3 waiters + this one
		synctest.Wait()
		if n := admitted.Load(); n != 3 {
			t.Errorf("admitted after raising the limit: got %d, want 3", n)
		}
		close(release)
		wg.Wait()
		r()
		hold()
		wantIdle(t, l)
	})
}

// TestUnlimited: the zero Options admit everything and keep no key entries,
// while still counting the holders.
func TestUnlimited(t *testing.T) {
	l := New(Options{})
	var rs []func()
	for i := range 1000 {
		rs = append(rs, mustAcquire(t, l, fmt.Sprint(i%3), 0))
	}
	if n := l.InUse(); n != 1000 {
		t.Errorf("InUse: got %d, want 1000", n)
	}
	if n := keys(l); n != 0 {
		t.Errorf("key entries: got %d, want 0", n)
	}
	for _, r := range rs {
		r()
	}
	wantIdle(t, l)
}

// TestFullError: the message names the limit and the retry hint, never the
// key; the hint is the wait rounded up to a second, at least 1s.
func TestFullError(t *testing.T) {
	for _, tc := range []struct {
		wait  time.Duration
		retry time.Duration
	}{
		{0, time.Second},
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{10 * time.Second, 10 * time.Second},
	} {
		l := New(Options{Wait: tc.wait})
		err := l.full("key", 4)
		wantFull(t, err, "key", 4, tc.retry)
	}
	for _, tc := range []struct {
		err  *Full
		want string
	}{
		{&Full{"key", 4, time.Second}, "too many concurrent requests for this key (limit 4): retry after 1s"},
		{&Full{"gateway", 1000, 2 * time.Second}, "the gateway is at its limit of 1000 concurrent requests: retry after 2s"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	l := New(Options{PerKey: 1})
	r := mustAcquire(t, l, "sk-secret-key", 0)
	defer r()
	if _, err := l.Acquire(t.Context(), "sk-secret-key", 0); err == nil || strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("got %v, want a *Full that does not name the key", err)
	}
}

// TestStress mixes real short waits, cancellations and limit changes; run
// with -race. It checks only invariants: limits held, everything given back.
func TestStress(t *testing.T) {
	const global = 8
	l := New(Options{Global: global, PerKey: 2, Wait: 200 * time.Microsecond})
	var all maxGauge
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range 200 {
				key := fmt.Sprint("k", rng.IntN(6))
				ctx, cancel := context.WithCancel(t.Context())
				if rng.IntN(4) == 0 {
					go cancel()
				}
				r, err := l.Acquire(ctx, key, rng.IntN(3))
				if err == nil {
					all.inc()
					runtime.Gosched()
					all.dec()
					r()
					if rng.IntN(8) == 0 {
						r() // a stray second call
					}
				} else if !errors.Is(err, context.Canceled) {
					var f *Full
					if !errors.As(err, &f) {
						t.Errorf("got %v, want *Full or context.Canceled", err)
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if m := all.max.Load(); m > global {
		t.Errorf("gateway: got %d concurrent holders, want at most %d", m, global)
	}
	wantIdle(t, l)
}

func BenchmarkAcquire(b *testing.B) {
	limited := Options{Global: 1 << 20, PerKey: 1 << 20, Wait: time.Second}
	for _, bc := range []struct {
		name string
		opts Options
		held bool // another request holds the key: its entry stays
	}{
		{"unlimited", Options{}, false},
		{"limited", limited, false},
		{"limited/key-held", limited, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := New(bc.opts)
			ctx := context.Background()
			if bc.held {
				r, _ := l.Acquire(ctx, "key", 0)
				defer r()
			}
			b.ReportAllocs()
			for b.Loop() {
				r, err := l.Acquire(ctx, "key", 0)
				if err != nil {
					b.Fatal(err)
				}
				r()
			}
		})
	}
}

func BenchmarkAcquireParallel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		opts   Options
		oneKey bool
	}{
		{"unlimited", Options{}, false},
		{"limited/own-keys", Options{Global: 1 << 20, PerKey: 1 << 20, Wait: time.Second}, false},
		{"limited/one-key", Options{Global: 1 << 20, PerKey: 1 << 20, Wait: time.Second}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := New(bc.opts)
			ctx := context.Background()
			var id atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := "key"
				if !bc.oneKey {
					key = fmt.Sprint("key-", id.Add(1))
				}
				for pb.Next() {
					r, err := l.Acquire(ctx, key, 0)
					if err != nil {
						b.Error(err)
						return
					}
					r()
				}
			})
		})
	}
}
