package quota

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/budget"
)

// sumKeys adds up the values of the Redis keys under prefix whose name
// contains part (each rpm minute bucket, say).
func sumKeys(t *testing.T, c redis.UniversalClient, prefix, part string) int64 {
	t.Helper()
	var sum int64
	eachMaster(c, func(m *redis.Client) {
		ctx := context.Background()
		keys, err := m.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !strings.Contains(k, part) {
				continue
			}
			v, err := m.Get(ctx, k).Int64()
			if err != nil {
				t.Fatalf("get %s: %v", k, err)
			}
			sum += v
		}
	})
	return sum
}

// leasesSettled waits until no lease of q is being asked for.
func leasesSettled(q *Quota) {
	for {
		busy := false
		q.ls.mu.Lock()
		for _, l := range q.ls.m {
			l.mu.Lock()
			busy = busy || l.asking
			l.mu.Unlock()
		}
		q.ls.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// wave admits n requests of key at once on q and settles each allowed
// one at cost and tokens; it returns how many were allowed.
func wave(t *testing.T, q *Quota, key string, lim Limits, n int, est, cost float64, tokens int) int64 {
	var allowed atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			tk, d, err := q.Admit(context.Background(), key, lim, est)
			if err != nil {
				var ex *budget.Exceeded
				if !errors.As(err, &ex) {
					t.Errorf("admit: %v", err)
				}
				return
			}
			if d.Allowed {
				allowed.Add(1)
				tk.Settle(cost, tokens)
			}
		})
	}
	close(start)
	wg.Wait()
	return allowed.Load()
}

// A busy key is admitted from leases: after the first waves most
// admissions make no round trip, and once the replica closes what Redis
// counts is exactly what was admitted — requests, tokens and spend — the
// leases' unused part given back.
func TestLeaseWaves(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		c := newClient()
		hook := &pipeHook{}
		c.AddHook(hook)
		q := newQuota(Options{Client: c, Prefix: prefix})
		lim := Limits{RPM: 1_000_000, TPM: 1_000_000_000, Budget: budget.Limit{USD: 1000, Period: budget.Month}}
		var admitted, sent int64
		for i := range 10 {
			if i == 2 {
				sent = hook.admissions.Load()
			}
			admitted += wave(t, q, "busy", lim, 200, 0.001, 0.0005, 10)
			leasesSettled(q)
		}
		sent = hook.admissions.Load() - sent
		t.Logf("waves 3-10: 1600 admissions, %d sent to Redis (lease asks included)", sent)
		if sent > 160 {
			t.Errorf("waves 3-10: %d of 1600 admissions of a busy key sent to Redis; want most from leases (under 160)", sent)
		}
		if admitted != 2000 {
			t.Errorf("admitted %d of 2000, far from every limit", admitted)
		}
		q.Close()
		if got := sumKeys(t, c, prefix, ":rpm:"); got != admitted {
			t.Errorf("rpm buckets after Close: %d requests, want the %d admitted (leases given back)", got, admitted)
		}
		if got := sumKeys(t, c, prefix, ":tpm:"); got != admitted*10 {
			t.Errorf("tpm buckets after Close: %d tokens, want %d", got, admitted*10)
		}
		if got := counterOf(t, c, prefix, "busy", budget.Month, window(budget.Month, mustStart(budget.Month))); got != admitted*500 {
			t.Errorf("budget counter after Close: %d µ$, want %d (the settled costs only)", got, admitted*500)
		}
	})
}

// Two replicas leasing one key never admit past its limits: the rpm and
// the budget hold, and what they refused early is at most the leases'
// unused part.
func TestLeaseLimitsTwoReplicas(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		a := newQuota(Options{Client: newClient(), Prefix: prefix})
		b := newQuota(Options{Client: newClient(), Prefix: prefix})
		for _, tc := range []struct {
			key  string
			lim  Limits
			want int64 // what the limit admits
		}{
			{"rpm", Limits{RPM: 2000}, 2000},
			{"budget", Limits{Budget: budget.Limit{USD: 2, Period: budget.Total}}, 2000}, // $0.001 each
		} {
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for _, q := range []*Quota{a, b} {
				wg.Go(func() {
					for range 10 {
						admitted.Add(wave(t, q, tc.key, tc.lim, 150, 0.001, 0.001, 1))
					}
				})
			}
			wg.Wait()
			got := admitted.Load()
			t.Logf("%s: %d of 3000 admitted, the limit admits %d", tc.key, got, tc.want)
			if got > tc.want {
				t.Errorf("%s: %d admitted, past the limit's %d", tc.key, got, tc.want)
			}
			// A replica's lease holds at most what is left of its last
			// grant and the new one, each an eighth of the room: a
			// quarter. What the leases held unused when the waves ended
			// is all that may be refused early.
			if got < tc.want-2*(tc.want/4) {
				t.Errorf("%s: %d admitted; want at most two leases' quarter of %d refused early", tc.key, got, tc.want)
			}
		}
		c := newClient()
		a.Close()
		b.Close()
		if got := sumKeys(t, c, prefix, ":rpm:"); got > 2000 {
			t.Errorf("rpm buckets after Close: %d, past the 2000 limit", got)
		}
		if got := sumKeys(t, c, prefix, ":b:total"); got > 2_000_000 {
			t.Errorf("budget counter after Close: %d µ$, past the $2 budget", got)
		}
	})
}

// A lease unused past its life is given back by the sweeper: the rpm
// buckets and the budget counter come back to what was admitted and
// spent, without Close.
func TestLeaseExpiresGivenBack(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		c := newClient()
		q := newQuota(Options{Client: c, Prefix: prefix})
		defer q.Close()
		lim := Limits{RPM: 1_000_000, Budget: budget.Limit{USD: 1000, Period: budget.Month}}
		var admitted int64
		for range 3 {
			admitted += wave(t, q, "idle", lim, 100, 0.001, 0.0005, 1)
			leasesSettled(q)
		}
		counter := func() int64 {
			return counterOf(t, c, prefix, "idle", budget.Month, window(budget.Month, mustStart(budget.Month)))
		}
		if got := sumKeys(t, c, prefix, ":rpm:"); got <= admitted {
			t.Fatalf("rpm buckets while leased: %d for %d admitted; want the lease's unused part counted too", got, admitted)
		}
		q.sweepLeases(time.Now().Add(leaseLife+time.Millisecond), false)
		deadline := time.Now().Add(10 * time.Second) // the flusher writes back within flushEvery; a loaded machine is slower
		for sumKeys(t, c, prefix, ":rpm:") != admitted || counter() != admitted*500 {
			if time.Now().After(deadline) {
				t.Fatalf("after the lease expired: rpm buckets %d (want %d admitted), budget counter %d µ$ (want %d)",
					sumKeys(t, c, prefix, ":rpm:"), admitted, counter(), admitted*500)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Unused for long, a lease is forgotten; the key is admitted again.
		q.sweepLeases(time.Now().Add(time.Minute), false)
		q.ls.mu.RLock()
		n := len(q.ls.m)
		q.ls.mu.RUnlock()
		if n != 0 {
			t.Errorf("%d leases kept after a minute unused, want none", n)
		}
		if _, d, err := q.Admit(context.Background(), "idle", lim, 0.001); err != nil || !d.Allowed {
			t.Errorf("admit after the lease was forgotten: %+v %v", d, err)
		}
	})
}

// admitScript's lease rules: as many requests as asked far from the rpm,
// an eighth of the room closer, none under leaseFloor requests of it;
// a budget holds the requests' estimates up to an eighth of what is
// left, none under leaseFloor estimates of it; a lease refused counts
// nothing.
func TestLeaseGrant(t *testing.T) {
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		ctx := context.Background()
		c := newClient()
		for i, tc := range []struct {
			rpm, budget   int64 // budget µ$ (0: none), the counter at 0
			code, granted int64
			held          int64
		}{
			{rpm: 10_000, code: 1, granted: 100},
			{rpm: 400, code: 1, granted: 50},
			{rpm: 63, code: 4},
			{budget: 100_000, code: 1, granted: 100, held: 1000}, // 100 × 10 µ$
			{budget: 4000, code: 1, granted: 100, held: 500},     // an eighth of 4000
			{budget: 630, code: 4},                               // under 64 estimates
			{rpm: 400, budget: 4000, code: 1, granted: 50, held: 500},
		} {
			base := prefix + "{k:g" + itoa(int64(i)) + "}:"
			s := callSub{rpm: tc.rpm, keys: [6]string{base + "rpm:9", base + "rpm:8", base + "tpm:9", base + "tpm:8"}}
			if tc.rpm == 0 {
				s.keys = [6]string{}
			}
			if tc.budget > 0 {
				c.Set(ctx, base+"b", 0, time.Hour)
				s.budget, s.keys[4], s.keys[5] = tc.budget, base+"b", base+"h:1"
			}
			v, err := runAlone(ctx, c, &call{tag: "{k:g" + itoa(int64(i)) + "}", e: 0, est: 10, n: 100, subs: []callSub{s}})
			if err != nil {
				t.Fatal(err)
			}
			if v[0] != tc.code || v[7] != tc.granted || v[8] != tc.held {
				t.Errorf("rpm %d budget %d µ$: code %d, granted %d, held %d; want %d, %d, %d", tc.rpm, tc.budget, v[0], v[7], v[8], tc.code, tc.granted, tc.held)
			}
			if tc.rpm > 0 {
				if n, _ := c.Get(ctx, base+"rpm:9").Int64(); n != tc.granted {
					t.Errorf("rpm %d: the minute counts %d, want the %d granted", tc.rpm, n, tc.granted)
				}
			}
			if tc.budget > 0 {
				if n, _ := c.Get(ctx, base+"b").Int64(); n != tc.held {
					t.Errorf("budget %d µ$: the counter holds %d, want %d", tc.budget, n, tc.held)
				}
			}
		}
	})
}
