package memo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var errDown = errors.New("store down")

// source answers "v<n>" (n its call count) after a query time, or errDown.
type source struct {
	calls atomic.Int64
	fail  atomic.Bool
	delay time.Duration
}

func (s *source) load(ctx context.Context, name string) (string, error) {
	n := s.calls.Add(1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if s.fail.Load() {
		return "", errDown
	}
	return name + "#" + string(rune('0'+n)), nil
}

func newCache() *Cache[string, string] {
	return New[string, string](time.Second, 100, func(err error) bool { return !errors.Is(err, errDown) })
}

// A burst of Gets of a name with no fresh answer waits for one call, and
// every Get gets its answer.
func TestBurstSharesOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source{delay: 10 * time.Millisecond}
		c := newCache()
		for round := range 3 {
			var wg sync.WaitGroup
			got := make([]string, 100)
			for i := range got {
				wg.Go(func() {
					v, err := c.Get(t.Context(), "k", "k", src.load)
					if err != nil {
						t.Errorf("got %v", err)
					}
					got[i] = v
				})
			}
			wg.Wait()
			for _, v := range got {
				if v != got[0] {
					t.Fatalf("round %d: answers %q and %q in one burst", round, got[0], v)
				}
			}
			if n := src.calls.Load(); n != int64(round+1) {
				t.Fatalf("round %d: %d calls, want %d", round, n, round+1)
			}
			time.Sleep(2 * time.Second) // expired: the next burst asks again
		}
	})
}

// A name in steady use is refreshed in the background in the TTL's second
// half: Gets never wait for the source, and an answer is never older than
// the TTL.
func TestRefreshAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source{delay: 10 * time.Millisecond}
		c := newCache()
		start := time.Now()
		first, _ := c.Get(t.Context(), "k", "k", src.load)
		if time.Since(start) != 10*time.Millisecond {
			t.Fatalf("first Get took %v, want the query's 10ms", time.Since(start))
		}
		seen := map[string]bool{first: true}
		for range 50 { // 5 s of one Get every 100 ms
			time.Sleep(100 * time.Millisecond)
			t0 := time.Now()
			v, err := c.Get(t.Context(), "k", "k", src.load)
			if err != nil || time.Since(t0) != 0 {
				t.Fatalf("Get: %v after %v, want an answer at once", err, time.Since(t0))
			}
			seen[v] = true
		}
		// One call per half TTL at most (about 10 in 5 s), and the answer
		// changed with them.
		if n := src.calls.Load(); n < 5 || n > 12 {
			t.Errorf("%d calls in 5 s, want about one per 500 ms", n)
		}
		if len(seen) < 5 {
			t.Errorf("%d distinct answers, want each refresh's", len(seen))
		}
	})
}

// A failure the cache does not keep is given to every Get that waited for
// it (one call, not one per waiter), and the next Get asks again.
func TestFailureShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source{delay: 10 * time.Millisecond}
		src.fail.Store(true)
		c := newCache()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if _, err := c.Get(t.Context(), "k", "k", src.load); !errors.Is(err, errDown) {
					t.Errorf("got %v, want errDown", err)
				}
			})
		}
		wg.Wait()
		if n := src.calls.Load(); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
		src.fail.Store(false)
		if v, err := c.Get(t.Context(), "k", "k", src.load); err != nil || v == "" {
			t.Errorf("store back: got %q, %v", v, err)
		}
	})
}

// A caller whose context ends stops waiting; the others get the answer, or
// ask again when the call was the cancelled caller's own.
func TestCancelledCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source{delay: 10 * time.Millisecond}
		c := newCache()
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { // the leader, cancelled mid-call
			if _, err := c.Get(ctx, "k", "k", src.load); !errors.Is(err, context.Canceled) {
				t.Errorf("leader: got %v, want context.Canceled", err)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			if v, err := c.Get(t.Context(), "k", "k", src.load); err != nil || v == "" {
				t.Errorf("waiter: got %q, %v; want an answer", v, err)
			}
		})
		synctest.Wait()
		cancel()
		wg.Wait()
		if n := src.calls.Load(); n != 2 {
			t.Errorf("%d calls, want 2 (the cancelled one, then the waiter's)", n)
		}
	})
}

// Purge drops every answer, and a call under way when it came keeps
// nothing: the next Get asks the source.
func TestPurge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source{delay: 10 * time.Millisecond}
		c := newCache()
		c.Get(t.Context(), "k", "k", src.load)
		c.Purge()
		c.Get(t.Context(), "k", "k", src.load)
		if n := src.calls.Load(); n != 2 {
			t.Fatalf("%d calls, want 2", n)
		}
		var wg sync.WaitGroup
		c.Purge()
		wg.Go(func() { c.Get(t.Context(), "k", "k", src.load) })
		synctest.Wait() // the call is under way
		c.Purge()
		wg.Wait()
		c.Get(t.Context(), "k", "k", src.load)
		if n := src.calls.Load(); n != 4 {
			t.Errorf("%d calls, want 4 (a call under way at a Purge keeps nothing)", n)
		}
	})
}
