package quota

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
)

// BenchmarkAdmitRedis is the admission path against real Redis: one script
// call checking and counting rpm, tpm and a budget reservation, then a
// Settle (queued; the flusher writes it back in batches). Compare with
// BenchmarkPingRedis, the round trip's floor.
func BenchmarkAdmitRedis(b *testing.B) {
	q := benchQuota(b)
	lim := Limits{RPM: 1 << 30, TPM: 1 << 30, Budget: budget.Limit{USD: 1e6, Period: budget.Month}}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t, d, err := q.Admit(ctx, "bench", lim, 0.001)
		if err != nil || !d.Allowed {
			b.Fatalf("admit: %+v %v", d, err)
		}
		t.Settle(0.0005, 100)
	}
}

// BenchmarkAdmitRedisTeam is BenchmarkAdmitRedis with the three subjects
// of a key in a team with a budget for the model: still one script call.
func BenchmarkAdmitRedisTeam(b *testing.B) {
	q := benchQuota(b)
	lim := Limits{RPM: 1 << 30, TPM: 1 << 30, Budget: budget.Limit{USD: 1e6, Period: budget.Month}}
	subs := []Subject{
		{Scope: ScopeKey, Name: "bench", Limits: lim},
		{Scope: ScopeTeam, Name: "team", Limits: lim},
		{Scope: ScopeModel, Name: "bench", Model: "m", Limits: Limits{Budget: lim.Budget}},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		t, r, err := q.AdmitAll(ctx, subs, 0.001)
		if err != nil || !r.Allowed {
			b.Fatalf("admit: %+v %v", r, err)
		}
		t.Settle(0.0005, 100)
	}
}

// benchQuota is a Quota on STREAMGATE_TEST_REDIS under a prefix of its
// own, closed (with its client) when the benchmark ends.
func benchQuota(b *testing.B) *Quota {
	c, err := redisguard.NewClient(redistest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	q := New(Options{Client: c, Prefix: fmt.Sprintf("sgbench:quota:%d:", time.Now().UnixNano())})
	q.timeout = time.Second
	b.Cleanup(func() { q.Close(); c.Close() })
	return q
}

// BenchmarkPingRedis is one PING: the floor of any round trip.
func BenchmarkPingRedis(b *testing.B) {
	c, err := redisguard.NewClient(redistest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmitScript is one admitScript call admitting n admissions of
// a key with rpm, tpm and a budget (a wave's batch), without the
// pipeliner: what Redis spends a batch. ns/admission is the round trip's
// time by admission.
func BenchmarkAdmitScript(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c, err := redisguard.NewClient(redistest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			base := fmt.Sprintf("sgbench:quota:%d:{k:script}:", time.Now().UnixNano())
			defer func() {
				keys, _ := c.Keys(ctx, base+"*").Result()
				for _, k := range keys {
					c.Del(ctx, k)
				}
			}()
			c.Set(ctx, base+"b", 0, time.Hour)
			calls := make([]*call, n)
			hold := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range calls {
					hold++
					calls[i] = &call{tag: "{k:script}", e: 1000, est: 1, subs: []callSub{{rpm: 1 << 32, tpm: 1 << 32, budget: 1 << 50,
						keys: [6]string{base + "rpm:9", base + "rpm:8", base + "tpm:9", base + "tpm:8", base + "b", base + "h:" + itoa(int64(hold))}}}}
				}
				keys, args := scriptArgs(calls)
				v, err := admitScript.Run(ctx, c, keys, args...).Int64Slice()
				if err != nil || len(v) != 9*n || v[0] != 1 {
					b.Fatalf("script: %v (%d values)", err, len(v))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/admission")
		})
	}
}
