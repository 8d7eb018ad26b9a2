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
