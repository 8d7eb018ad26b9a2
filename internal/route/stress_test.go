package route_test

import (
	"encoding/json"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/route"
)

// TestConcurrent hammers Begin, End, Order and the readers from many
// goroutines, on the real clock with breaker windows short enough to cycle
// through ejections and probes; run it with -race. Afterwards nothing is in
// flight, no target is stuck probing, and every claimed attempt was
// counted.
func TestConcurrent(t *testing.T) {
	const (
		workers = 16
		rounds  = 2000
	)
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			h := route.Health{Failures: 2, Window: 50 * time.Microsecond, MaxWindow: time.Millisecond}
			ts := []*route.Target{route.NewTarget("a", 1, h), route.NewTarget("b", 2, h), route.NewTarget("c", 3, h)}
			s, err := route.NewSet(strategy, ts)
			if err != nil {
				t.Fatal(err)
			}
			var (
				begun  [3]atomic.Uint64
				workWG sync.WaitGroup
				readWG sync.WaitGroup
				stop   = make(chan struct{})
				bad    atomic.Value
			)
			readWG.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, tg := range s.Targets() {
						if _, err := json.Marshal(tg.Snapshot()); err != nil {
							bad.Store(err.Error())
						}
						tg.TTFTQuantile(0.95)
						tg.State()
						tg.Inflight()
					}
					s.Ready()
				}
			})
			for w := range workers {
				workWG.Go(func() {
					var dst []*route.Target
					for i := range rounds {
						dst = s.Order(dst[:0])
						if len(dst) != 3 || dst[0] == dst[1] || dst[1] == dst[2] || dst[0] == dst[2] {
							bad.Store("order with a repeat or a missing target")
							return
						}
						for _, tg := range dst {
							if !tg.Begin() {
								continue
							}
							begun[tg.Name[0]-'a'].Add(1)
							// Target a mostly fails, so it keeps being ejected and probed.
							r := route.Result{Outcome: route.Outcome(rand.IntN(3)), TTFT: time.Duration(rand.IntN(1000)) * time.Microsecond}
							if tg.Name == "a" && (w+i)%4 != 0 {
								r.Outcome = route.Failure
							}
							tg.End(r)
							if r.Outcome == route.Success {
								break
							}
						}
					}
				})
			}
			workWG.Wait()
			close(stop)
			readWG.Wait()
			if v := bad.Load(); v != nil {
				t.Fatal(v)
			}
			for i, tg := range ts {
				s := tg.Snapshot()
				if s.Inflight != 0 {
					t.Errorf("%s: got %d in flight, want 0", tg.Name, s.Inflight)
				}
				if s.State == route.Probing {
					t.Errorf("%s: got state %v with nothing in flight, want healthy or ejected", tg.Name, s.State)
				}
				if want := begun[i].Load(); s.Requests != want {
					t.Errorf("%s: got %d requests, want %d", tg.Name, s.Requests, want)
				}
			}
		})
	}
}
