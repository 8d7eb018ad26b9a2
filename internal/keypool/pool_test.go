package keypool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/ratelimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

func mustPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	if cfg.Provider == "" {
		cfg.Provider = "anthropic"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func keys(names ...string) []Key {
	ks := make([]Key, len(names))
	for i, n := range names {
		ks[i] = Key{Name: n, Secret: "sk-secret-" + n}
	}
	return ks
}

func acquire(t *testing.T, p *Pool) Lease {
	t.Helper()
	l, err := p.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return l
}

func exhausted(t *testing.T, err error) *ExhaustedError {
	t.Helper()
	var e *ExhaustedError
	if !errors.As(err, &e) || !errors.Is(err, ErrExhausted) {
		t.Fatalf("got error %v, want an *ExhaustedError", err)
	}
	return e
}

// TestLeastLoaded: held leases spread over the keys by weight.
func TestLeastLoaded(t *testing.T) {
	ks := keys("a", "b", "c")
	ks[2].Weight = 2
	p := mustPool(t, Config{Keys: ks})
	held := map[string]int{}
	var ls []Lease
	for range 8 {
		l := acquire(t, p)
		held[l.Name()]++
		ls = append(ls, l)
	}
	if held["a"] != 2 || held["b"] != 2 || held["c"] != 4 {
		t.Fatalf("8 leases held: %v, want a:2 b:2 c:4 (c has weight 2)", held)
	}
	for _, l := range ls {
		l.Release(0)
	}
	// Idle keys of one weight take turns.
	seen := map[string]int{}
	p2 := mustPool(t, Config{Keys: keys("x", "y", "z")})
	for range 30 {
		l := acquire(t, p2)
		seen[l.Name()]++
		l.Release(0)
	}
	if seen["x"] != 10 || seen["y"] != 10 || seen["z"] != 10 {
		t.Fatalf("30 sequential acquires on idle keys: %v, want 10 each", seen)
	}
}

func TestMaxStreams(t *testing.T) {
	ks := keys("a", "b")
	ks[0].MaxStreams, ks[1].MaxStreams = 1, 2
	p := mustPool(t, Config{Keys: ks})
	l1, l2, l3 := acquire(t, p), acquire(t, p), acquire(t, p)
	_, err := p.Acquire(ctx)
	e := exhausted(t, err)
	if e.Busy != 2 || e.RetryAt.IsZero() {
		t.Fatalf("all streams held: %+v, want 2 busy keys and a retry time", e)
	}
	l2.Release(0)
	l4 := acquire(t, p)
	if l4.Name() != l2.Name() {
		t.Fatalf("the freed slot was %s's, got %s", l2.Name(), l4.Name())
	}
	for _, l := range []Lease{l1, l3, l4} {
		l.Release(0)
	}
	var st []KeyState
	for _, s := range p.Snapshot(st) {
		if s.Inflight != 0 {
			t.Errorf("key %s: %d in flight after every release", s.Name, s.Inflight)
		}
	}
}

// TestRPM: each key takes its rpm, then the pool is exhausted until the
// window slides; the error says when.
func TestRPM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ks := keys("a", "b")
		ks[0].RPM, ks[1].RPM = 2, 1
		p := mustPool(t, Config{Keys: ks})
		got := map[string]int{}
		for range 3 {
			l := acquire(t, p)
			got[l.Name()]++
			l.Release(0)
		}
		if got["a"] != 2 || got["b"] != 1 {
			t.Fatalf("3 requests: %v, want a:2 b:1", got)
		}
		_, err := p.Acquire(ctx)
		e := exhausted(t, err)
		if e.Limited != 2 {
			t.Fatalf("%+v: want 2 keys at their rpm", e)
		}
		wait := e.RetryAt.Sub(time.Now())
		// At the start of a minute with a:2 b:1 counted, the estimate falls
		// below the rpm 1 ms into the next minute.
		if wait <= 0 || wait > time.Minute+time.Second {
			t.Fatalf("retry in %v, want within the window (60 s) and a bit", wait)
		}
		if ra := e.RetryAfter(time.Now()); ra < wait || ra%time.Second != 0 {
			t.Fatalf("RetryAfter %v for a wait of %v: want whole seconds, not less", ra, wait)
		}
		if !strings.Contains(err.Error(), `"anthropic"`) || !strings.Contains(err.Error(), "rpm/tpm") {
			t.Errorf("error %q does not name the provider and the limit", err)
		}
		time.Sleep(wait)
		acquire(t, p).Release(0)
		st := p.Snapshot(nil)
		if st[0].RPMUsed+st[1].RPMUsed < 3 || st[0].Refused+st[1].Refused < 2 {
			t.Errorf("snapshot %+v: want the requests and refusals counted", st)
		}
	})
}

// TestTPMOnSettle: tokens count when the lease is released.
func TestTPMOnSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ks := keys("a")
		ks[0].TPM = 100
		p := mustPool(t, Config{Keys: ks})
		l := acquire(t, p)
		acquire(t, p).Release(0) // tokens not yet settled: still allowed
		l.Release(150)
		_, err := p.Acquire(ctx)
		if e := exhausted(t, err); e.Limited != 1 {
			t.Fatalf("%+v: want the key at its tpm", e)
		}
		if s := p.Snapshot(nil)[0]; s.TPMUsed != 150 {
			t.Errorf("tpm used %d, want 150", s.TPMUsed)
		}
	})
}

// TestBench: a 429 benches its key only, until its Retry-After.
func TestBench(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var benched []string
		p := mustPool(t, Config{Keys: keys("a", "b", "c"), OnBench: func(k string, _ time.Time) { benched = append(benched, k) }})
		if !p.Bench("b", time.Now().Add(10*time.Second)) {
			t.Fatal("Bench did not find key b")
		}
		if p.Bench("nope", time.Now()) {
			t.Fatal("Bench found a key that is not there")
		}
		for range 20 {
			l := acquire(t, p)
			if l.Name() == "b" {
				t.Fatal("the benched key took a request")
			}
			l.Release(0)
		}
		if got := p.Available(); got != 0b101 {
			t.Fatalf("available %03b, want 101", got)
		}
		s := p.Snapshot(nil)[1]
		if s.BenchedUntil == "" || s.Benches != 1 {
			t.Fatalf("snapshot of b %+v: want benched", s)
		}
		// A shorter bench does not cut the longer one.
		p.Bench("b", time.Now().Add(time.Second))
		time.Sleep(5 * time.Second)
		if p.Available()&0b010 != 0 {
			t.Fatal("a shorter bench ended the longer one")
		}
		time.Sleep(5 * time.Second)
		if p.Available() != 0b111 {
			t.Fatalf("after its Retry-After: available %03b, want 111", p.Available())
		}
		// No usable Retry-After: DefaultBench.
		p.Bench("a", time.Time{})
		p.Bench("b", time.Time{})
		p.Bench("c", time.Time{})
		_, err := p.Acquire(ctx)
		e := exhausted(t, err)
		if e.Benched != 3 || e.RetryAt.Sub(time.Now()) != DefaultBench {
			t.Fatalf("%+v: want 3 benched until %v from now", e, DefaultBench)
		}
		if len(benched) != 5 {
			t.Errorf("OnBench calls %v, want 5", benched)
		}
	})
}

// TestDisable: a 401/403 disables its key with one WARN naming it (never
// the secret), the others serve; all disabled is not rate-limited.
func TestDisable(t *testing.T) {
	var logs bytes.Buffer
	var calls atomic.Int32
	p := mustPool(t, Config{
		Keys:      keys("a", "b"),
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		OnDisable: func(k, reason string) { calls.Add(1) },
	})
	p.Disable("a", "401 invalid x-api-key")
	p.Disable("a", "401 again")
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "key=a") {
		t.Fatalf("log %q: want one WARN naming key a", logs.String())
	}
	if strings.Contains(logs.String(), "sk-secret") || calls.Load() != 1 {
		t.Fatalf("log %q, %d callbacks: want no secret and one callback", logs.String(), calls.Load())
	}
	for range 5 {
		l := acquire(t, p)
		if l.Name() != "b" {
			t.Fatalf("got key %s, want b: a is disabled", l.Name())
		}
		l.Release(0)
	}
	if _, err := p.AcquireKey(ctx, 0); err == nil {
		t.Fatal("AcquireKey leased a disabled key")
	}
	p.Disable("b", "403")
	_, err := p.Acquire(ctx)
	e := exhausted(t, err)
	if !e.RetryAt.IsZero() || e.Disabled != 2 || e.RetryAfter(time.Now()) != 0 {
		t.Fatalf("%+v: want every key disabled and no retry time", e)
	}
	if !strings.Contains(err.Error(), "disabled") {
		t.Errorf("error %q does not say disabled", err)
	}
	if s := p.Snapshot(nil)[0]; s.Disabled != "401 invalid x-api-key" {
		t.Errorf("snapshot reason %q, want the first one", s.Disabled)
	}
}

func TestAcquireKey(t *testing.T) {
	ks := keys("a", "b")
	ks[1].MaxStreams = 1
	p := mustPool(t, Config{Keys: ks})
	l, err := p.AcquireKey(ctx, 1)
	if err != nil || l.Name() != "b" || l.Index() != 1 || l.Secret() != "sk-secret-b" {
		t.Fatalf("AcquireKey(1): %v %v", l.Name(), err)
	}
	_, err = p.AcquireKey(ctx, 1)
	if e := exhausted(t, err); e.Busy != 1 || e.Disabled+e.Benched+e.Limited != 0 {
		t.Fatalf("%+v: want key b alone, busy", e)
	}
	if _, err := p.AcquireKey(ctx, 2); err == nil || errors.Is(err, ErrExhausted) {
		t.Fatalf("AcquireKey(2) of 2 keys: %v, want an out-of-range error", err)
	}
	l.Release(0)
}

// TestSnapshotNoSecret: nothing of the snapshot or a printed Key shows a
// secret.
func TestSnapshotNoSecret(t *testing.T) {
	ks := keys("a", "b")
	ks[0].RPM, ks[0].TPM, ks[0].MaxStreams = 10, 1000, 3
	p := mustPool(t, Config{Keys: ks})
	l := acquire(t, p)
	b, err := json.Marshal(p.Snapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "key", ks[0])
	for _, s := range []string{string(b), logs.String(), ks[0].String()} {
		if strings.Contains(s, "sk-secret") {
			t.Fatalf("%s shows a secret", s)
		}
	}
	if !strings.Contains(string(b), `"name":"a"`) || !strings.Contains(string(b), `"inflight":1`) {
		t.Fatalf("snapshot %s: want key a with one in flight", b)
	}
	l.Release(0)
}

func TestNewRefuses(t *testing.T) {
	_, err := New(Config{Provider: "p", Keys: []Key{{Name: "a"}, {Name: "a", Secret: "s", RPM: -1}, {Secret: "s"}}})
	if err == nil {
		t.Fatal("New accepted bad keys")
	}
	for _, want := range []string{"key is empty", "used twice", "≥ 0", "name is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := New(Config{Provider: "p"}); err == nil {
		t.Error("New accepted no keys")
	}
}

// fakeShared refuses every key named in refuse.
type fakeShared struct {
	mu      sync.Mutex
	refuse  map[string]bool
	allowed map[string]int
	tokens  map[string]int
}

func (f *fakeShared) Allow(_ context.Context, key string, _ ratelimit.Limits) (ratelimit.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse[key] {
		return ratelimit.Decision{Limit: "rpm", RetryAfter: 7 * time.Second}, nil
	}
	f.allowed[key]++
	return ratelimit.Decision{Allowed: true}, nil
}

func (f *fakeShared) Record(_ context.Context, key string, tokens int) {
	f.mu.Lock()
	f.tokens[key] += tokens
	f.mu.Unlock()
}

func TestSharedLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{refuse: map[string]bool{"keypool:anthropic/a": true}, allowed: map[string]int{}, tokens: map[string]int{}}
		ks := keys("a", "b", "c")
		ks[0].RPM, ks[1].TPM = 100, 1000 // c has no limit: the shared limiter is not asked
		p := mustPool(t, Config{Keys: ks, Shared: f})
		got := map[string]int{}
		for range 6 {
			l := acquire(t, p)
			if l.Name() == "a" {
				t.Fatal("the shared limiter refused a, yet it was leased")
			}
			got[l.Name()]++
			l.Release(10)
		}
		if got["b"] == 0 || got["c"] == 0 {
			t.Fatalf("leases %v: want both b and c used", got)
		}
		if f.allowed["keypool:anthropic/b"] != got["b"] || f.allowed["keypool:anthropic/c"] != 0 {
			t.Fatalf("shared allows %v for leases %v: want one per lease of b, none for c (no limit)", f.allowed, got)
		}
		if f.tokens["keypool:anthropic/b"] != 10*got["b"] || len(f.tokens) != 1 {
			t.Fatalf("shared tokens %v: want 10 per lease on b (the only key with a tpm)", f.tokens)
		}
		s := p.Snapshot(nil)[0]
		if s.LimitedUntil == "" || s.Refused != 1 || s.RPMUsed != 0 {
			t.Fatalf("snapshot of a %+v: want one refusal, resting 7s, the count taken back", s)
		}
	})
}

// TestSharedAcrossReplicas: two pools (two replicas) sharing one limiter
// (one ratelimit.Local here, as package quota's counts will be across
// processes) admit the rpm once between them.
func TestSharedAcrossReplicas(t *testing.T) {
	shared := ratelimit.Limiter(ratelimit.NewLocal())
	ks := keys("a")
	ks[0].Name = "a-" + time.Now().Format("150405.000000000")
	ks[0].RPM = 5
	r1 := mustPool(t, Config{Keys: ks, Shared: shared})
	r2 := mustPool(t, Config{Keys: ks, Shared: shared})
	ok := 0
	for i := range 20 {
		p := r1
		if i%2 == 1 {
			p = r2
		}
		if l, err := p.Acquire(ctx); err == nil {
			ok++
			l.Release(0)
		}
	}
	// A minute boundary during the loop could admit a few more; 20 would
	// mean no sharing at all, 10 two separate windows.
	if ok < 5 || ok >= 10 {
		t.Fatalf("two replicas admitted %d requests of a key with rpm 5, want 5", ok)
	}
}

// TestConcurrent: Acquire and Release from many goroutines keep every
// limit: never more streams in flight than max_streams, every lease
// released, the counts exact.
func TestConcurrent(t *testing.T) {
	ks := keys("a", "b", "c", "d")
	for i := range ks {
		ks[i].MaxStreams = 2 + i
		ks[i].Weight = 1 + i%2
	}
	p := mustPool(t, Config{Keys: ks})
	var peak [4]atomic.Int64
	var cur [4]atomic.Int64
	var leased, refused atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 2000 {
				l, err := p.Acquire(ctx)
				if err != nil {
					if !errors.Is(err, ErrExhausted) {
						t.Error(err)
						return
					}
					refused.Add(1)
					continue
				}
				leased.Add(1)
				n := cur[l.Index()].Add(1)
				for {
					m := peak[l.Index()].Load()
					if n <= m || peak[l.Index()].CompareAndSwap(m, n) {
						break
					}
				}
				runtime.Gosched() // hold it a while: leases overlap
				cur[l.Index()].Add(-1)
				l.Release(1)
			}
		})
	}
	// Meanwhile the admin page reads.
	wg.Go(func() {
		for range 200 {
			p.Snapshot(nil)
			p.Available()
		}
	})
	wg.Wait()
	var acquired uint64
	for i, s := range p.Snapshot(nil) {
		if m := peak[i].Load(); m > int64(ks[i].MaxStreams) {
			t.Errorf("key %s: %d in flight at once, max_streams %d", s.Name, m, ks[i].MaxStreams)
		}
		if s.Inflight != 0 {
			t.Errorf("key %s: %d in flight after all released", s.Name, s.Inflight)
		}
		acquired += s.Acquired
	}
	if acquired != uint64(leased.Load()) || leased.Load() == 0 {
		t.Errorf("keys count %d leases, the goroutines took %d", acquired, leased.Load())
	}
	t.Logf("%d leased, %d exhausted", leased.Load(), refused.Load())
}

func TestNoAllocs(t *testing.T) {
	ks := keys("a", "b", "c", "d")
	for i := range ks {
		ks[i].RPM, ks[i].TPM, ks[i].MaxStreams = 1<<30, 1<<30, 100
	}
	p := mustPool(t, Config{Keys: ks})
	if n := testing.AllocsPerRun(100, func() {
		l, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l.Release(100)
	}); n != 0 {
		t.Errorf("Acquire+Release: %v allocations, want 0", n)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, tc := range []struct {
		name   string
		limits bool
	}{{"no-limits", false}, {"rpm+tpm+streams", true}} {
		b.Run(tc.name, func(b *testing.B) {
			ks := keys("a", "b", "c", "d")
			if tc.limits {
				for i := range ks {
					ks[i].RPM, ks[i].TPM, ks[i].MaxStreams = 1<<30, 1<<40, 1000
				}
			}
			p := mustPool(b, Config{Keys: ks})
			b.ReportAllocs()
			for b.Loop() {
				l, err := p.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				l.Release(100)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		ks := keys("a", "b", "c", "d")
		for i := range ks {
			ks[i].RPM, ks[i].MaxStreams = 1<<30, 1000
		}
		p := mustPool(b, Config{Keys: ks})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, err := p.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				l.Release(100)
			}
		})
	})
}

// TestReset: Reset ends benches and rate refusals and enables disabled
// keys, naming those it enabled; the keys lease again.
func TestReset(t *testing.T) {
	p, err := New(Config{Provider: "p", Keys: []Key{{Name: "a", Secret: "sa"}, {Name: "b", Secret: "sb"}, {Name: "c", Secret: "sc"}},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p.Disable("a", "401")
	p.Bench("b", time.Now().Add(time.Hour))
	if got := p.Available(); got != 0b100 {
		t.Fatalf("Available before Reset: got %b, want 100", got)
	}
	if got := p.Reset(); len(got) != 1 || got[0] != "a" {
		t.Errorf("Reset: got %q enabled, want [a]", got)
	}
	if got := p.Available(); got != 0b111 {
		t.Errorf("Available after Reset: got %b, want 111", got)
	}
	if l, err := p.AcquireKey(context.Background(), 0); err != nil || l.Name() != "a" {
		t.Errorf("AcquireKey(a) after Reset: %v", err)
	} else {
		l.Release(0)
	}
	if got := p.Reset(); len(got) != 0 {
		t.Errorf("a second Reset: got %q enabled, want none", got)
	}
}
