package route_test

import (
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/route"
)

// BenchmarkOrder: one Order over three measured targets, dst reused.
func BenchmarkOrder(b *testing.B) {
	for _, strategy := range strategies {
		b.Run(strategy, func(b *testing.B) {
			ts := targets(3, 1, 3, 6)
			for i, tg := range ts {
				for range 50 {
					tg.Begin()
					tg.End(route.Result{Outcome: route.Success, TTFT: time.Duration(i+1) * 100 * time.Millisecond})
				}
			}
			s, err := route.NewSet(strategy, ts)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]*route.Target, 0, 3)
			b.ReportAllocs()
			for b.Loop() {
				dst = s.Order(dst[:0])
			}
		})
	}
}

// BenchmarkOrderParallel: Order from all Ps on one Set.
func BenchmarkOrderParallel(b *testing.B) {
	for _, strategy := range strategies {
		b.Run(strategy, func(b *testing.B) {
			s, err := route.NewSet(strategy, targets(3, 1, 3, 6))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				dst := make([]*route.Target, 0, 3)
				for pb.Next() {
					dst = s.Order(dst[:0])
				}
			})
		})
	}
}

// BenchmarkBeginEnd: one attempt's bookkeeping on a healthy target, with
// and without a TTFT observation.
func BenchmarkBeginEnd(b *testing.B) {
	for _, r := range []struct {
		name string
		r    route.Result
	}{
		{"success+ttft", route.Result{Outcome: route.Success, TTFT: 250 * time.Millisecond}},
		{"neutral", neutral},
	} {
		b.Run(r.name, func(b *testing.B) {
			tg := route.NewTarget("p/m", 1, route.Health{})
			b.ReportAllocs()
			for b.Loop() {
				if tg.Begin() {
					tg.End(r.r)
				}
			}
		})
	}
}

// BenchmarkBeginEndParallel: all Ps on one target (the contended case).
func BenchmarkBeginEndParallel(b *testing.B) {
	tg := route.NewTarget("p/m", 1, route.Health{})
	r := route.Result{Outcome: route.Success, TTFT: 250 * time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if tg.Begin() {
				tg.End(r)
			}
		}
	})
}

// BenchmarkTTFTQuantile: p95 over a full window.
func BenchmarkTTFTQuantile(b *testing.B) {
	tg := route.NewTarget("p/m", 1, route.Health{})
	for i := range route.SampleWindow {
		tg.Begin()
		tg.End(route.Result{Outcome: route.Success, TTFT: time.Duration(i*7919%1000+1) * time.Millisecond})
	}
	b.ReportAllocs()
	for b.Loop() {
		tg.TTFTQuantile(0.95)
	}
}

// BenchmarkSnapshot: one target's Snapshot.
func BenchmarkSnapshot(b *testing.B) {
	tg := route.NewTarget("p/m", 1, route.Health{})
	b.ReportAllocs()
	for b.Loop() {
		tg.Snapshot()
	}
}
