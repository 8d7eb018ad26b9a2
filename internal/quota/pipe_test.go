package quota

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/redisguard"
)

// pipeHook counts pipelines, the commands in them, and the admissions
// (and lease asks) their admitScript calls carry.
type pipeHook struct{ pipes, cmds, admissions atomic.Int64 }

func (h *pipeHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipes.Add(1)
		h.cmds.Add(int64(len(cmds)))
		for _, c := range cmds {
			// evalsha sha numkeys KEYS… ARGV…: ARGV[4] is the admissions'
			a := c.Args()
			if len(a) > 3 && (c.Name() == "evalsha" || c.Name() == "eval") {
				if nk, ok := a[2].(int); ok && len(a) > 3+nk+3 {
					if n, ok := a[3+nk+3].(int); ok {
						h.admissions.Add(int64(n))
					}
				}
			}
		}
		return next(ctx, cmds)
	}
}

// A burst of admissions shares round trips and script calls (one a hash
// tag a round trip), and each admission gets its own verdict: of 200
// concurrent requests of a key at rpm 120, exactly 120 are allowed; 50
// keys at rpm 1 each get one allowed request.
func TestPipelineBurst(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		c := newClient()
		hook := &pipeHook{}
		c.AddHook(hook)
		q := newQuota(Options{Client: c, Prefix: prefix})
		defer q.Close()
		ctx := context.Background()
		var allowed, perKey atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				<-start
				_, d, err := q.Admit(ctx, "burst", Limits{RPM: 120}, 0)
				if err != nil {
					t.Errorf("admit: %v", err)
				}
				if d.Allowed {
					allowed.Add(1)
				}
			})
		}
		for i := range 50 {
			for range 2 {
				wg.Go(func() {
					<-start
					_, d, err := q.Admit(ctx, fmt.Sprintf("k%d", i), Limits{RPM: 1}, 0)
					if err != nil {
						t.Errorf("admit: %v", err)
					}
					if d.Allowed {
						perKey.Add(1)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		if got := allowed.Load(); got != 120 {
			t.Errorf("allowed at rpm 120: got %d of 200, want 120", got)
		}
		if got := perKey.Load(); got != 50 {
			t.Errorf("allowed of 50 keys at rpm 1, two requests each: got %d, want 50", got)
		}
		if d, _ := q.Degraded(); d {
			t.Errorf("degraded after the burst; want Redis deciding throughout")
		}
		pipes, cmds := hook.pipes.Load(), hook.cmds.Load()
		t.Logf("300 admissions in %d script calls in %d pipelines", cmds, pipes)
		if pipes >= cmds || cmds > 51*pipes || cmds >= 300 {
			t.Errorf("300 admissions of 51 keys in %d script calls in %d pipelines: want them sharing round trips, at most one call a key a round trip", cmds, pipes)
		}
	})
}

// pausedPipeliner is a pipeliner of c whose loop starts when start is
// called, so that a test can queue calls in a known order first.
func pausedPipeliner(c redis.UniversalClient) (p *pipeliner, start func()) {
	p = &pipeliner{client: c, in: make(chan *admission, pipeQueue), stop: make(chan struct{}), done: make(chan struct{})}
	return p, func() { go p.run() }
}

// Admissions leave in the order they were queued, so that a key's are
// counted in arrival order: at rpm 3, the first three queued are allowed.
// A call whose caller gave up before its round trip is not sent (it
// counts nothing), and its caller gets its context's error.
func TestPipelineOrderAndGiveUp(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		c := newClient()
		q := newQuota(Options{Client: c, Prefix: prefix})
		defer q.Close()
		q.pipe.close()
		p, start := pausedPipeliner(c)
		q.pipe = p
		const n = 8
		verdicts := make([]Refusal, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		gone, giveUp := context.WithCancel(context.Background())
		for i := range n {
			ctx := context.Background()
			if i == 1 {
				ctx = gone // queued second, given up on before its round trip
			}
			wg.Go(func() {
				_, verdicts[i], errs[i] = q.AdmitAll(ctx, []Subject{{Scope: ScopeKey, Name: "ordered", Limits: Limits{RPM: 3}}}, 0)
			})
			for len(p.in) != i+1 { // queued before the next one starts
				time.Sleep(time.Millisecond)
			}
		}
		giveUp()
		start()
		wg.Wait()
		if !errors.Is(errs[1], context.Canceled) {
			t.Errorf("given up on: got %v, want context.Canceled", errs[1])
		}
		for i := range n {
			want := i == 0 || i == 2 || i == 3
			if i == 1 {
				continue
			}
			if errs[i] != nil || verdicts[i].Allowed != want {
				t.Errorf("request %d in queue order: allowed %v (%v), want %v", i, verdicts[i].Allowed, errs[i], want)
			}
		}
		if d, _ := q.Degraded(); d {
			t.Errorf("degraded: want a caller's own cancellation not counted against Redis")
		}
	})
}

// An admission that Redis does not answer within CallTimeout takes the
// outage path (decided locally, Redis counted down) after about that
// long, however many admissions wait in the same pipeline; so does one
// against a Redis that is gone.
func TestPipelineTimeoutAndDown(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		c := newClient()
		q := New(Options{Client: c, Prefix: prefix, CallTimeout: 50 * time.Millisecond})
		defer q.Close()
		ctx := context.Background()
		if _, d, err := q.Admit(ctx, "slow", Limits{RPM: 10}, 0); err != nil || !d.Allowed {
			t.Fatalf("warm-up admit: %+v %v", d, err)
		}
		eachMaster(c, func(m *redis.Client) { m.Do(ctx, "CLIENT", "PAUSE", "400", "WRITE") })
		defer eachMaster(c, func(m *redis.Client) { m.Do(ctx, "CLIENT", "UNPAUSE") })
		var wg sync.WaitGroup
		var slowest atomic.Int64
		for range 20 {
			wg.Go(func() {
				t0 := time.Now()
				_, d, err := q.Admit(ctx, "slow", Limits{RPM: 10}, 0)
				slowest.Store(max(slowest.Load(), int64(time.Since(t0))))
				if err != nil || !d.Allowed && d.Limit == "" {
					t.Errorf("admit during the pause: %+v %v; want a local decision", d, err)
				}
			})
		}
		wg.Wait()
		if d, _ := q.Degraded(); !d {
			t.Errorf("not degraded after admissions timed out")
		}
		if s := time.Duration(slowest.Load()); s > 300*time.Millisecond {
			t.Errorf("slowest admission took %v, want about the 50ms CallTimeout", s)
		}
	})
	t.Run("down", func(t *testing.T) {
		c, err := redisguard.NewClient("redis://127.0.0.1:1/0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			c.Close()
			// go-redis's dial prober sleeps a second before it sees the
			// pool closed (goleak would count it).
			time.Sleep(1100 * time.Millisecond)
		}()
		q := New(Options{Client: c, Logger: nil})
		defer q.Close()
		for i := range 3 {
			_, d, err := q.Admit(context.Background(), "k", Limits{RPM: 2}, 0)
			if want := i < 2; err != nil || d.Allowed != want {
				t.Errorf("admit %d with Redis gone: %+v %v; want allowed %v (local rpm 2)", i, d, err, want)
			}
		}
		if d, _ := q.Degraded(); !d {
			t.Errorf("not degraded with Redis gone")
		}
	})
}

// burstQuota is benchQuota through its pipeliner ("pipelined") or with a
// round trip per admission ("pool"), and limits that never refuse.
func burstQuota(b *testing.B, mode string) (*Quota, Limits) {
	q := benchQuota(b)
	if mode == "pool" {
		q.pipe.close()
		q.pipe = nil
	}
	return q, Limits{RPM: 1 << 30, TPM: 1 << 30, Budget: budget.Limit{USD: 1e6, Period: budget.Month}}
}

// BenchmarkAdmitBurst is the admission of a key with rpm, tpm and a budget
// from many goroutines at once (a burst of streams starting together),
// through the pipeliner and, for comparison, with a round trip each
// through the connection pool (as before it).
func BenchmarkAdmitBurst(b *testing.B) {
	for _, mode := range []string{"pipelined", "pool"} {
		b.Run(mode, func(b *testing.B) {
			q, lim := burstQuota(b, mode)
			ctx := context.Background()
			b.SetParallelism(50) // 100 goroutines on 2 cores
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, d, err := q.Admit(ctx, "bench", lim, 0.001)
					if err != nil || !d.Allowed {
						b.Errorf("admit: %+v %v", d, err)
						return
					}
					t.Settle(0.0005, 100)
				}
			})
		})
	}
}

// BenchmarkAdmitWave is one wave of n admissions of a key with rpm, tpm
// and a budget released at the same instant (n streams starting
// together): ns/op is the time until the wave's last admission answered,
// what its slowest stream's TTFT carries; through the pipeliner (from
// the second wave on, leases), with a round trip each through the
// connection pool, and for a key without limits ("none": the wave's own
// cost, goroutines released and joined, no admission work).
func BenchmarkAdmitWave(b *testing.B) {
	for _, n := range []int{100, 500} {
		for _, mode := range []string{"pipelined", "pool", "none"} {
			b.Run(fmt.Sprintf("%d/%s", n, mode), func(b *testing.B) {
				q, lim := burstQuota(b, mode)
				if mode == "none" {
					lim = Limits{}
				}
				ctx := context.Background()
				if _, _, err := q.Admit(ctx, "bench", lim, 0.001); err != nil { // the ledger's reconciliation
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					start := make(chan struct{})
					var wg sync.WaitGroup
					for range n {
						wg.Go(func() {
							<-start
							t, d, err := q.Admit(ctx, "bench", lim, 0.001)
							if err != nil || !d.Allowed {
								b.Errorf("admit: %+v %v", d, err)
							}
							t.Settle(0.0005, 100)
						})
					}
					time.Sleep(time.Millisecond) // every goroutine parked on start
					b.StartTimer()
					close(start)
					wg.Wait()
				}
				if d, _ := q.Degraded(); d {
					b.Errorf("degraded: a call exceeded the benchmark's 1 s bound")
				}
			})
		}
	}
}

// One admitScript call over a batch of admissions answers each as the
// same admissions one call each do, in order, and leaves Redis in the same
// state: rates counted per admission, a refusal (by rate, by budget, a
// missing counter, a voided hold) counting nothing, a budget's last hold
// cut to what is left, a counter's TTL renewed.
func TestScriptBatchEqualsOneByOne(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		ctx := context.Background()
		c := newClient()
		run := func(root string, batched bool) ([][]int64, map[string]string) {
			k := func(s string) string { return root + s }
			rate := func(base string, rpm, tpm int64) callSub {
				return callSub{rpm: rpm, tpm: tpm, keys: [6]string{k(base + "rpm:9"), k(base + "rpm:8"), k(base + "tpm:9"), k(base + "tpm:8")}}
			}
			withBudget := func(s callSub, base string, usd, renew int64, hold string) callSub {
				s.budget, s.renew = usd, renew
				s.keys[4], s.keys[5] = k(base+"b"), k(base+"h:"+hold)
				return s
			}
			key := func(hold string) callSub { return withBudget(rate("k1:", 3, 0), "k1:", 1_000_000, 0, hold) }
			team := rate("team:", 0, 100)
			model := func(hold string) callSub { return withBudget(callSub{}, "k3:", 1_000_000, 86400, hold) }
			calls := []*call{
				{e: 0, est: 300_000, subs: []callSub{key("1")}},                            // allowed
				{e: 0, est: 300_000, subs: []callSub{key("2"), team}},                      // team's tpm: 100 the minute before
				{e: 30_000, est: 300_000, subs: []callSub{key("3"), team}},                 // half of it now: allowed
				{e: 0, est: 300_000, subs: []callSub{key("4")}},                            // voided
				{e: 0, est: 300_000, subs: []callSub{key("5")}},                            // allowed: rpm 3 reached
				{e: 0, est: 1, subs: []callSub{key("6")}},                                  // rpm
				{e: 0, est: 1, subs: []callSub{withBudget(callSub{}, "k2:", 5, 0, "7")}},   // counter missing
				{e: 0, est: 300_000, subs: []callSub{model("8")}},                          // 900k spent: holds 100k
				{e: 0, est: 1, subs: []callSub{model("9")}},                                // spent
				{e: 59_999, est: 0, subs: []callSub{rate("k4:", 1, 0), rate("k4:", 1, 0)}}, // one rpm bucket twice: checked, then counted twice
			}
			for _, cl := range calls {
				cl.tag = "{t:eq}"
			}
			for key, v := range map[string]string{"k1:b": "0", "k3:b": "900000", "team:tpm:8": "100", "k1:h:4": "void"} {
				if err := c.Set(ctx, k(key), v, time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var got [][]int64
			if batched {
				keys, args := scriptArgs(calls)
				v, err := admitScript.Run(ctx, c, keys, args...).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				if got, err = answers(v, calls); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, cl := range calls {
					v, err := runAlone(ctx, c, cl)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, v)
				}
			}
			state := make(map[string]string)
			for _, cl := range calls {
				for _, s := range cl.subs {
					for _, key := range s.keys {
						if key == "" {
							continue
						}
						v, err := c.Get(ctx, key).Result()
						if errors.Is(err, redis.Nil) {
							state[strings.TrimPrefix(key, root)] = "(none)"
							continue
						} else if err != nil {
							t.Fatal(err)
						}
						ttl, _ := c.TTL(ctx, key).Result()
						state[strings.TrimPrefix(key, root)] = fmt.Sprintf("%s ttl %ds", v, int((ttl+time.Second/2)/time.Second))
					}
				}
			}
			return got, state
		}
		batch, batchState := run(prefix+"{t:eq}:b:", true)
		alone, aloneState := run(prefix+"{t:eq}:a:", false)
		want := [][]int64{
			{1, 0, 0, 0, 0, 0, 0, 1, 300_000},
			{0, 2, 0, 0, 100, 0, 0, 0, 0, 0},
			{1, 0, 0, 0, 0, 0, 0, 1, 300_000, 0},
			{3, 1, 0, 0, 0, 0, 0, 0, 0},
			{1, 0, 0, 0, 0, 0, 0, 1, 300_000},
			{0, 1, 0, 3, 0, 0, 0, 0, 0},
			{-1, 1, 0, 0, 0, 0, 0, 0, 0},
			{1, 0, 0, 0, 0, 0, 0, 1, 100_000},
			{2, 1, 0, 0, 0, 0, 1_000_000, 0, 0},
			{1, 0, 0, 0, 0, 0, 0, 1, 0, 0},
		}
		if fmt.Sprint(batch) != fmt.Sprint(want) {
			t.Errorf("batched answers:\ngot  %v\nwant %v", batch, want)
		}
		if fmt.Sprint(alone) != fmt.Sprint(want) {
			t.Errorf("answers one call each:\ngot  %v\nwant %v", alone, want)
		}
		if fmt.Sprint(batchState) != fmt.Sprint(aloneState) {
			t.Errorf("Redis after the batched call:\n%v\none call each:\n%v", batchState, aloneState)
		}
		for key, want := range map[string]string{"k1:b": "900000 ttl 3600s", "k1:rpm:9": "3 ttl 120s", "k3:b": "1000000 ttl 86400s", "k1:h:1": "300000 ttl 60s", "k1:h:4": "void ttl 3600s", "k2:b": "(none)", "k4:rpm:9": "2 ttl 120s"} {
			if got := batchState[key]; got != want {
				t.Errorf("%s after the batch: got %q, want %q", key, got, want)
			}
		}
	})
}

// A wave of 500 admissions of one key costs one script call a round trip,
// and each admission its own verdict in arrival order: exactly the rpm's
// 300 allowed, each holding its estimate once.
func TestPipelineWaveOneKey(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		c := newClient()
		hook := &pipeHook{}
		c.AddHook(hook)
		q := newQuota(Options{Client: c, Prefix: prefix})
		defer q.Close()
		ctx := context.Background()
		lim := Limits{RPM: 300, Budget: budget.Limit{USD: 100, Period: budget.Month}}
		if _, _, err := q.Admit(ctx, "wave", Limits{Budget: lim.Budget}, 0); err != nil { // the ledger's reconciliation
			t.Fatal(err)
		}
		pipes0, cmds0 := hook.pipes.Load(), hook.cmds.Load()
		var allowed atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 500 {
			wg.Go(func() {
				<-start
				_, d, err := q.Admit(ctx, "wave", lim, 0.01)
				if err != nil {
					t.Errorf("admit: %v", err)
				}
				if d.Allowed {
					allowed.Add(1)
				} else if d.Limit != "rpm" || d.RetryAfter <= 0 {
					t.Errorf("refusal: got %+v, want rpm with a retry-after", d)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := allowed.Load(); got != 300 {
			t.Errorf("allowed at rpm 300: got %d of 500, want 300", got)
		}
		if got := counterOf(t, c, prefix, "wave", budget.Month, window(budget.Month, mustStart(budget.Month))); got != 300*10_000 {
			t.Errorf("budget counter: got %d µ$, want 300 holds of 10000", got)
		}
		if d, _ := q.Degraded(); d {
			t.Errorf("degraded after the wave; want Redis deciding throughout")
		}
		pipes, cmds := hook.pipes.Load()-pipes0, hook.cmds.Load()-cmds0
		t.Logf("500 admissions in %d script calls in %d pipelines", cmds, pipes)
		if cmds != pipes || cmds > 50 {
			t.Errorf("500 admissions of one key in %d script calls in %d pipelines: want one call a round trip, a handful", cmds, pipes)
		}
	})
}

// The call timeout bounds a round trip from when it is sent: admissions
// that waited in the queue longer than it (behind a slow round trip) are
// still decided by Redis, not sent down the outage path.
func TestPipelineQueueWaitNotCounted(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		c := newClient()
		q := New(Options{Client: c, Prefix: prefix, CallTimeout: time.Second})
		defer q.Close()
		ctx := context.Background()
		if _, _, err := q.Admit(ctx, "queued", Limits{RPM: 10}, 0); err != nil {
			t.Fatal(err)
		}
		q.pipe.close()
		p, start := pausedPipeliner(c)
		q.pipe = p
		q.timeout = 20 * time.Millisecond
		var wg sync.WaitGroup
		var allowed atomic.Int64
		for range 5 {
			wg.Go(func() {
				_, d, err := q.Admit(ctx, "queued", Limits{RPM: 10}, 0)
				if err != nil {
					t.Errorf("admit: %v", err)
				}
				if d.Allowed {
					allowed.Add(1)
				}
			})
		}
		for len(p.in) != 5 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * q.timeout) // queued five times the bound
		start()
		wg.Wait()
		if d, why := q.Degraded(); d {
			t.Errorf("degraded after admissions waited in the queue: %s; want the bound counted from the round trip", why)
		}
		if got := allowed.Load(); got != 5 {
			t.Errorf("allowed: got %d of 5, want 5", got)
		}
	})
}
