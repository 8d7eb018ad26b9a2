package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
	"github.com/streamgate/streamgate/internal/usd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// target is a Redis the tests run against: a single server or a cluster.
type target struct {
	name string
	url  func(testing.TB) string
}

var targets = []target{
	{"single", redistest.URL},
	{"cluster", func(tb testing.TB) string {
		u := os.Getenv("STREAMGATE_TEST_REDIS_CLUSTER")
		if u == "" {
			tb.Skip("STREAMGATE_TEST_REDIS_CLUSTER unset: run scripts/redis-cluster.sh and set it to the URL it prints (.ci/run does) to run the Redis Cluster tests")
		}
		return u
	}},
}

// forTargets runs f against each target as a subtest.
func forTargets(t *testing.T, f func(t *testing.T, newClient func() redis.UniversalClient, prefix string)) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			u := tg.url(t)
			var clients []redis.UniversalClient
			newClient := func() redis.UniversalClient {
				c, err := redisguard.NewClient(u)
				if err != nil {
					t.Fatalf("client of %s: %v", u, err)
				}
				clients = append(clients, c)
				return c
			}
			admin := newClient()
			if err := admin.Ping(context.Background()).Err(); err != nil {
				t.Fatalf("ping %s: %v", u, err)
			}
			prefix := fmt.Sprintf("sgtest:quota:%s:%d:", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
			t.Cleanup(func() {
				eachMaster(admin, func(c *redis.Client) {
					ctx := context.Background()
					keys, _ := c.Keys(ctx, prefix+"*").Result()
					for _, k := range keys {
						c.Del(ctx, k)
					}
				})
				for _, c := range clients {
					c.Close()
				}
			})
			f(t, newClient, prefix)
		})
	}
}

// eachMaster calls f with the one server, or with each master of a cluster.
func eachMaster(c redis.UniversalClient, f func(*redis.Client)) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		cc.ForEachMaster(context.Background(), func(_ context.Context, n *redis.Client) error { f(n); return nil })
		return
	}
	f(c.(*redis.Client))
}

// tripHook counts the commands and pipelines sent.
type tripHook struct{ n atomic.Int64 }

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

func counterOf(t *testing.T, c redis.UniversalClient, prefix, key, period, window string) int64 {
	t.Helper()
	k := prefix + "{k:" + redisguard.Tag(key)[1:17] + "}:b:" + period + ":" + window
	v, err := c.Get(context.Background(), k).Int64()
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	return v
}

// Admission is one round trip (the first request of a budget's window adds
// one, the reconciliation with the ledger); Settle sends nothing itself;
// rpm, tpm and the budget are shared by two replicas; what settles reaches
// the shared counters once the flusher wrote it.
func TestAdmitShared(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		ctx := context.Background()
		hook := &tripHook{}
		ca := newClient()
		ca.AddHook(hook)
		a := newQuota(Options{Client: ca, Prefix: prefix, Spent: func(context.Context, string, time.Time) (float64, error) { return 0.25, nil }})
		b := newQuota(Options{Client: newClient(), Prefix: prefix})
		defer a.Close()
		defer b.Close()
		lim := Limits{RPM: 4, Budget: budget.Limit{USD: 1, Period: budget.Month}}

		var tickets []*Ticket
		for i, q := range []*Quota{a, a, b, b} {
			before := hook.n.Load()
			tk, d, err := q.Admit(ctx, "k1", lim, 0.1)
			if err != nil || !d.Allowed || tk == nil {
				t.Fatalf("admit %d: got %+v, %v; want allowed", i, d, err)
			}
			// The first adds the reconciliation with the ledger (and
			// EVAL after EVALSHA when the server has not seen a script).
			if trips := hook.n.Load() - before; q == a && i > 0 && trips != 1 {
				t.Errorf("admit %d: got %d round trips, want 1", i, trips)
			}
			tickets = append(tickets, tk)
		}
		if _, d, err := a.Admit(ctx, "k1", lim, 0.1); err != nil || d.Allowed || d.Limit != "rpm" {
			t.Errorf("5th request at rpm 4: got %+v, %v; want refused by rpm", d, err)
		}
		// The ledger's $0.25 plus four holds of $0.10.
		if got := counterOf(t, ca, prefix, "k1", budget.Month, window(budget.Month, mustStart(budget.Month))); got != 650_000 {
			t.Errorf("counter with four holds: got %d µ$, want 650000", got)
		}
		before := hook.n.Load()
		for _, tk := range tickets {
			tk.Settle(0.05, 3)
		}
		tickets[0].Settle(1, 1) // a second Settle counts nothing
		if trips := hook.n.Load() - before; trips > 1 {
			t.Errorf("settle: got %d round trips from the caller, want none (one flusher pipeline at most)", trips)
		}
		a.Close()
		b.Close()
		if got := counterOf(t, ca, prefix, "k1", budget.Month, window(budget.Month, mustStart(budget.Month))); got != 450_000 {
			t.Errorf("counter after settling: got %d µ$, want 450000 (0.25 + 4 × 0.05)", got)
		}
	})
}

// newQuota is New with a call timeout that a loaded test machine does not
// reach: an admission that times out on the client and runs in Redis
// later leaves its hold in the counter (see the package comment), which
// these tests, unlike production, must not see.
func newQuota(o Options) *Quota {
	q := New(o)
	q.timeout = 5 * time.Second
	return q
}

func mustStart(period string) time.Time {
	s, _ := budget.Window(period, time.Now())
	return s
}

// Tokens are counted for tpm when the request settles; the budget refuses
// with budget.Exceeded once spent.
func TestTPMAndBudgetRefusals(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		ctx := context.Background()
		q := newQuota(Options{Client: newClient(), Prefix: prefix})
		defer q.Close()
		tk, d, err := q.Admit(ctx, "k2", Limits{TPM: 10}, 0)
		if err != nil || !d.Allowed {
			t.Fatalf("first: got %+v, %v", d, err)
		}
		tk.Settle(0, 12)
		q.Close() // flushed
		q2 := newQuota(Options{Client: newClient(), Prefix: prefix})
		defer q2.Close()
		if _, d, err := q2.Admit(ctx, "k2", Limits{TPM: 10}, 0); err != nil || d.Allowed || d.Limit != "tpm" || d.RetryAfter < time.Second {
			t.Errorf("after 12 tokens at tpm 10: got %+v, %v; want refused by tpm with a Retry-After", d, err)
		}

		lim := Limits{Budget: budget.Limit{USD: 0.5, Period: budget.Day}}
		tk, _, err = q2.Admit(ctx, "k3", lim, 0.4)
		if err != nil {
			t.Fatal(err)
		}
		tk.Settle(0.6, 0)
		q2.Close()
		q3 := newQuota(Options{Client: newClient(), Prefix: prefix})
		defer q3.Close()
		var ex *budget.Exceeded
		if _, _, err := q3.Admit(ctx, "k3", lim, 0.01); !errors.As(err, &ex) || ex.Spent != 0.6 {
			t.Errorf("after $0.60 of $0.50: got %v, want budget.Exceeded with $0.60 spent", err)
		}
	})
}

// A write-back batch resent (its first copy applied, the answer lost) is
// not counted twice: rate buckets as well as budget counters.
func TestWriteBackIdempotent(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		ctx := context.Background()
		c := newClient()
		q := newQuota(Options{Client: c, Prefix: prefix, Replica: "r1"})
		defer q.Close()
		base := prefix + "{k:" + redisguard.Tag("k4")[1:17] + "}:"
		counter := base + "b:total:total"
		if err := c.Set(ctx, counter, 1000, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		pending := map[string]*agg{}
		add(pending, delta{key: base + "rpm:1", tag: tagOf(base), kind: kindBucket, n: 2})
		add(pending, delta{key: base + "tpm:1", tag: tagOf(base), kind: kindBucket, n: 30})
		add(pending, delta{key: counter, tag: tagOf(base), kind: kindBudget, n: 500})
		add(pending, delta{key: counter, tag: tagOf(base), kind: kindBudget, n: -200})
		var seq uint64 = 41
		out := q.build(pending, &seq)
		if len(out) != 1 {
			t.Fatalf("got %d batches for one key, want 1", len(out))
		}
		for range 2 {
			if left, err := q.send(out); err != nil || len(left) != 0 {
				t.Fatalf("send: %d left, %v", len(left), err)
			}
		}
		for k, want := range map[string]int64{base + "rpm:1": 2, base + "tpm:1": 30, counter: 1300} {
			if got, err := c.Get(ctx, k).Int64(); err != nil || got != want {
				t.Errorf("%s after a batch sent twice: got %d (%v), want %d", k, got, err, want)
			}
		}
		// A budget delta to a counter that is gone is not applied: the
		// ledger has the cost for the next reconciliation.
		add(pending, delta{key: base + "b:day:0", tag: tagOf(base), kind: kindBudget, n: 7})
		if left, err := q.send(q.build(pending, &seq)); err != nil || len(left) != 0 {
			t.Fatalf("send: %d left, %v", len(left), err)
		}
		if n, _ := c.Exists(ctx, base+"b:day:0").Result(); n != 0 {
			t.Errorf("a missing budget counter was created by a write-back")
		}
	})
}

// At each window's first admission a replica sets the counter to
// max(counter, ledger): raised when it under-counts, kept when above.
func TestReconcileWithLedger(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		ctx := context.Background()
		c := newClient()
		base := prefix + "{k:" + redisguard.Tag("k5")[1:17] + "}:"
		counter := base + "b:total:total"
		ledger := 2.0
		spent := func(context.Context, string, time.Time) (float64, error) { return ledger, nil }
		lim := Limits{Budget: budget.Limit{USD: 10, Period: budget.Total}}
		c.Set(ctx, counter, 1_000_000, time.Hour) // $1: spend lost
		q := newQuota(Options{Client: c, Prefix: prefix, Spent: spent})
		tk, _, err := q.Admit(ctx, "k5", lim, 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.Settle(0, 0)
		q.Close()
		if got := counterOf(t, c, prefix, "k5", budget.Total, "total"); got != 2_000_000 {
			t.Errorf("counter $1 below a ledger of $2: got %d µ$, want 2000000", got)
		}
		c.Set(ctx, counter, 3_000_000, time.Hour) // settles not yet in the ledger
		q = newQuota(Options{Client: c, Prefix: prefix, Spent: spent})
		tk, _, _ = q.Admit(ctx, "k5", lim, 0)
		tk.Settle(0, 0)
		q.Close()
		if got := counterOf(t, c, prefix, "k5", budget.Total, "total"); got != 3_000_000 {
			t.Errorf("counter $3 above a ledger of $2: got %d µ$, want it kept", got)
		}
	})
}

// Three replicas spend one budget while Redis is paused for 3 s mid-run:
// each counts alone and writes its deltas back. Final spend stays within
// the bound of the package comment; the shared counter ends equal to the
// ledger within one request per replica.
func TestOutageThreeReplicas(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		const (
			replicas = 3
			cost     = 0.01
			budgetUS = 1.0
		)
		var ledger atomic.Int64 // µ$, what the usage ledger holds
		spent := func(context.Context, string, time.Time) (float64, error) {
			return usd.FromMicro(ledger.Load()), nil
		}
		log, logged := redistest.NewLog()
		qs := make([]*Quota, replicas)
		for i := range qs {
			qs[i] = New(Options{Client: newClient(), Prefix: prefix, Spent: spent, Logger: log, Replica: fmt.Sprint("r", i)})
			// Above the 50 ms of production so that a busy test machine
			// does not make outages of its own; far below the pause.
			qs[i].timeout = 500 * time.Millisecond
		}
		lim := Limits{RPM: 1 << 20, TPM: 1 << 30, Budget: budget.Limit{USD: budgetUS, Period: budget.Total}}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var admitted atomic.Int64
		for _, q := range qs {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					tk, d, err := q.Admit(context.Background(), "k6", lim, cost)
					var ex *budget.Exceeded
					switch {
					case errors.As(err, &ex) || (err == nil && !d.Allowed):
						time.Sleep(5 * time.Millisecond)
						continue
					case err != nil:
						t.Errorf("admit: %v", err)
						return
					}
					admitted.Add(1)
					time.Sleep(10 * time.Millisecond) // the stream
					tk.Settle(cost, 10)
					ledger.Add(usd.Micro(cost))
				}
			})
		}
		admin := newClient()
		for ledger.Load() < usd.Micro(0.3) {
			time.Sleep(time.Millisecond)
		}
		l0 := usd.FromMicro(ledger.Load())
		eachMaster(admin, func(c *redis.Client) {
			if err := c.Do(context.Background(), "CLIENT", "PAUSE", 3000, "WRITE").Err(); err != nil {
				t.Errorf("client pause: %v", err)
			}
		})
		time.Sleep(4500 * time.Millisecond) // the pause, then the write-back and refusals
		close(stop)
		wg.Wait()
		for _, q := range qs {
			q.Close()
		}
		final := usd.FromMicro(ledger.Load())
		counter := usd.FromMicro(counterOf(t, admin, prefix, "k6", budget.Total, "total"))
		bound := budgetUS + (replicas-1)*(budgetUS-l0) + 2*replicas*cost
		t.Logf("ledger $%.2f at the pause, final spend $%.2f (%d requests), counter $%.2f, bound $%.2f", l0, final, admitted.Load(), counter, bound)
		if logged.Count("redis unreachable") == 0 || logged.Count("reachable again") == 0 {
			t.Errorf("no outage seen: the pause did not reach the replicas")
		}
		if final <= budgetUS {
			t.Errorf("final spend $%.2f within the budget: the replicas did not decide alone", final)
		}
		if final > bound+1e-9 {
			t.Errorf("final spend $%.2f, want at most budget + (R−1)·(budget − L0) + 2R·c = $%.2f", final, bound)
		}
		if math.Abs(counter-final) > replicas*cost+1e-9 {
			t.Errorf("shared counter $%.4f vs ledger $%.4f: want equal within one request per replica ($%.2f)", counter, final, replicas*cost)
		}
	})
}

// Without Redis the limits and the budget count in process, at once.
func TestLocal(t *testing.T) {
	ctx := context.Background()
	q := newQuota(Options{})
	defer q.Close()
	lim := Limits{RPM: 2, TPM: 10, Budget: budget.Limit{USD: 1, Period: budget.Month}}
	tk, d, err := q.Admit(ctx, "k", lim, 0.5)
	if err != nil || !d.Allowed {
		t.Fatalf("got %+v, %v", d, err)
	}
	tk.Settle(0.2, 11)
	if _, d, err := q.Admit(ctx, "k", lim, 0.5); err != nil || d.Allowed || d.Limit != "tpm" {
		t.Errorf("after 11 tokens at tpm 10: got %+v, %v; want refused by tpm", d, err)
	}
	if tk, d, err := q.Admit(ctx, "k", Limits{}, 0); tk != nil || !d.Allowed || err != nil {
		t.Errorf("no limits: got %v %+v %v, want allowed without a ticket", tk, d, err)
	}
	if _, _, err := q.Admit(ctx, "k", Limits{Budget: budget.Limit{USD: 1, Period: "week"}}, 0); err == nil || !strings.Contains(err.Error(), `"week"`) {
		t.Errorf("unknown period: got %v", err)
	}
}

// An admission given up on (timed out) is voided: its hold is released
// if the call ran, and a call that runs later counts nothing.
func TestVoid(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		ctx := context.Background()
		c := newClient()
		q := newQuota(Options{Client: c, Prefix: prefix, Replica: "r"})
		lim := Limits{Budget: budget.Limit{USD: 1, Period: budget.Total}}
		tk, _, err := q.Admit(ctx, "k7", lim, 0.3)
		if err != nil || tk.subs[0].hold == "" {
			t.Fatalf("admit: %v, ticket %+v", err, tk)
		}
		h := tk.subs[0]
		// The call ran but the replica gave up on it: voided, released.
		q.enqueue(delta{key: h.hold, aux: h.counter, tag: tk.tag, kind: kindVoid})
		q.Close()
		if got := counterOf(t, c, prefix, "k7", budget.Total, "total"); got != 0 {
			t.Errorf("counter after voiding a hold of $0.30: got %d µ$, want 0", got)
		}
		// Voided first, the call runs later: nothing counted.
		q = newQuota(Options{Client: c, Prefix: prefix, Replica: "r2"})
		defer q.Close()
		hold := h.base + "h:r2:1"
		q.enqueue(delta{key: hold, aux: h.counter, tag: tk.tag, kind: kindVoid})
		q.Close()
		t2 := &Ticket{q: q, tag: tk.tag, subs: []held{{id: "k7", name: "k7", base: h.base, counter: h.counter, hold: hold}}}
		if _, err := q.admitRedis(ctx, t2, []Subject{{Scope: ScopeKey, Name: "k7", Limits: lim}}, 0.3, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := counterOf(t, c, prefix, "k7", budget.Total, "total"); got != 0 {
			t.Errorf("counter after a voided call ran: got %d µ$, want 0", got)
		}
	})
}

// A settle that finds the queue full is summed per Redis key, not dropped.
func TestQueueFullSums(t *testing.T) {
	q := &Quota{ch: make(chan delta, 1), kick: make(chan struct{}, 1)}
	for range 3 {
		q.enqueue(delta{key: "a", tag: "{a}", kind: kindBucket, n: 5})
	}
	q.enqueue(delta{key: "b", tag: "{a}", kind: kindBudget, n: -2})
	if len(q.ch) != 1 || q.over["a"].n != 10 || q.over["b"].n != -2 {
		t.Errorf("got %d queued, overflow a=%d b=%d; want 1 queued and a=10, b=-2", len(q.ch), q.over["a"].n, q.over["b"].n)
	}
}
