package route_test

import (
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/route"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	success = route.Result{Outcome: route.Success}
	failure = route.Result{Outcome: route.Failure}
	neutral = route.Result{Outcome: route.Neutral}
)

// attempt runs one attempt with outcome r; it fails the test when Begin
// refuses.
func attempt(t *testing.T, tg *route.Target, r route.Result) {
	t.Helper()
	if !tg.Begin() {
		t.Fatalf("%s: Begin = false, want true (state %v)", tg.Name, tg.State())
	}
	tg.End(r)
}

// eject fails tg until its breaker opens.
func eject(t *testing.T, tg *route.Target) {
	t.Helper()
	for tg.State() == route.Healthy {
		attempt(t, tg, failure)
	}
}

// until is the end of tg's ejection window, from its Snapshot.
func until(t *testing.T, tg *route.Target) time.Time {
	t.Helper()
	s := tg.Snapshot().EjectedUntil
	u, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("ejected_until %q: %v", s, err)
	}
	return u
}

// TestConsecutiveFailures runs outcome sequences (S success, F failure, N
// neutral) and checks the breaker's state and failure count after them.
func TestConsecutiveFailures(t *testing.T) {
	tests := []struct {
		name     string
		health   route.Health
		seq      string
		want     route.State
		consec   int64
		failures uint64
	}{
		{"four failures stay healthy", route.Health{}, "FFFF", route.Healthy, 4, 4},
		{"five failures eject", route.Health{}, "FFFFF", route.Ejected, 5, 5},
		{"a success resets the count", route.Health{}, "FFFFSFFFF", route.Healthy, 4, 8},
		{"neutral neither counts nor resets", route.Health{}, "FFFFNNNF", route.Ejected, 5, 5},
		{"neutral never ejects", route.Health{}, "NNNNNNNNNNNNNNNNNNNN", route.Healthy, 0, 0},
		{"threshold of two", route.Health{Failures: 2}, "FSFF", route.Ejected, 2, 3},
		{"negative threshold never ejects", route.Health{Failures: -1}, "FFFFFFFFFFFFFFFFFFFF", route.Healthy, 20, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tg := route.NewTarget("p/m", 1, tt.health)
				for _, c := range tt.seq {
					attempt(t, tg, map[rune]route.Result{'S': success, 'F': failure, 'N': neutral}[c])
				}
				s := tg.Snapshot()
				if s.State != tt.want {
					t.Errorf("state: got %v, want %v", s.State, tt.want)
				}
				if s.ConsecutiveFailures != tt.consec {
					t.Errorf("consecutive_failures: got %d, want %d", s.ConsecutiveFailures, tt.consec)
				}
				if s.Failures != tt.failures {
					t.Errorf("failures: got %d, want %d", s.Failures, tt.failures)
				}
				if s.Requests != uint64(len(tt.seq)) {
					t.Errorf("requests: got %d, want %d", s.Requests, len(tt.seq))
				}
				want := uint64(0)
				if tt.want == route.Ejected {
					want = 1
				}
				if s.Ejections != want {
					t.Errorf("ejections: got %d, want %d", s.Ejections, want)
				}
				if s.Inflight != 0 {
					t.Errorf("inflight: got %d, want 0", s.Inflight)
				}
			})
		})
	}
}

// TestEjectionWindow: an ejected target refuses every attempt until its
// window ends, then takes one probe; a successful probe heals it.
func TestEjectionWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := route.NewTarget("p/m", 1, route.Health{})
		eject(t, tg)
		start := time.Now()
		if got, want := until(t, tg), start.Add(route.DefaultWindow); !got.Equal(want) {
			t.Fatalf("ejected_until: got %v, want %v", got, want)
		}
		time.Sleep(route.DefaultWindow - time.Nanosecond)
		if tg.Begin() {
			t.Fatal("Begin 1ns before the window ends: got true, want false")
		}
		time.Sleep(time.Nanosecond)
		if !tg.Begin() {
			t.Fatal("Begin when the window ends: got false, want true (the probe)")
		}
		if got := tg.State(); got != route.Probing {
			t.Fatalf("state with the probe out: got %v, want %v", got, route.Probing)
		}
		if tg.Begin() {
			t.Fatal("second Begin with the probe out: got true, want false")
		}
		tg.End(success)
		s := tg.Snapshot()
		if s.State != route.Healthy || s.ConsecutiveFailures != 0 || s.EjectedUntil != "" {
			t.Fatalf("after a successful probe: got state %v, consecutive_failures %d, ejected_until %q; want healthy, 0, \"\"",
				s.State, s.ConsecutiveFailures, s.EjectedUntil)
		}
		for range 3 {
			attempt(t, tg, success)
		}
	})
}

// TestProbeOutcomes: what each probe outcome leaves.
func TestProbeOutcomes(t *testing.T) {
	tests := []struct {
		outcome  route.Result
		want     route.State
		window   time.Duration // the next window; 0: due for a probe at once
		ejection uint64
	}{
		{success, route.Healthy, 0, 1},
		{failure, route.Ejected, 2 * route.DefaultWindow, 2},
		{neutral, route.Ejected, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.outcome.Outcome.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tg := route.NewTarget("p/m", 1, route.Health{})
				eject(t, tg)
				time.Sleep(route.DefaultWindow)
				attempt(t, tg, tt.outcome)
				s := tg.Snapshot()
				if s.State != tt.want {
					t.Fatalf("state: got %v, want %v", s.State, tt.want)
				}
				if s.Ejections != tt.ejection {
					t.Errorf("ejections: got %d, want %d", s.Ejections, tt.ejection)
				}
				if tt.want == route.Healthy {
					return
				}
				if got, want := until(t, tg), time.Now().Add(tt.window); tt.window > 0 && !got.Equal(want) {
					t.Errorf("ejected_until: got %v, want %v", got, want)
				}
				if got, want := tg.Begin(), tt.window == 0; got != want {
					t.Errorf("Begin right after the probe: got %v, want %v", got, want)
				}
			})
		})
	}
}

// TestWindowDoublesAndCaps: each failed probe doubles the window up to its
// cap; a success resets the growth.
func TestWindowDoublesAndCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := route.NewTarget("p/m", 1, route.Health{})
		eject(t, tg)
		windows := []time.Duration{5, 10, 20, 40, 80, 120, 120, 120}
		for i, w := range windows {
			w *= time.Second
			time.Sleep(w - time.Millisecond)
			if tg.Begin() {
				t.Fatalf("window %d: Begin %v into a %v window: got true, want false", i, w-time.Millisecond, w)
			}
			time.Sleep(time.Millisecond)
			if i == len(windows)-1 {
				attempt(t, tg, success)
				break
			}
			attempt(t, tg, failure)
			if got, want := until(t, tg).Sub(time.Now()), windows[i+1]*time.Second; got != want {
				t.Fatalf("window after failed probe %d: got %v, want %v", i+1, got, want)
			}
		}
		if got, want := tg.Snapshot().Ejections, uint64(len(windows)); got != want {
			t.Errorf("ejections: got %d, want %d", got, want)
		}
		eject(t, tg)
		if got := until(t, tg).Sub(time.Now()); got != route.DefaultWindow {
			t.Errorf("window of an ejection after healing: got %v, want %v", got, route.DefaultWindow)
		}
	})
}

// TestCustomWindow: Health's window and cap.
func TestCustomWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := route.NewTarget("p/m", 1, route.Health{Failures: 1, Window: time.Second, MaxWindow: 3 * time.Second})
		attempt(t, tg, failure)
		for _, w := range []time.Duration{1, 2, 3, 3} {
			w *= time.Second
			if got := until(t, tg).Sub(time.Now()); got != w {
				t.Fatalf("window: got %v, want %v", got, w)
			}
			time.Sleep(w)
			attempt(t, tg, failure)
		}
	})
}

// TestOneProbeAtATime: of many concurrent Begins on a target due for a
// probe, exactly one wins; a Neutral probe lets exactly one more go; a
// successful one opens the target to all.
func TestOneProbeAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := route.NewTarget("p/m", 1, route.Health{})
		eject(t, tg)
		time.Sleep(route.DefaultWindow)
		race := func() int {
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				won   int
				start = make(chan struct{})
			)
			for range 100 {
				wg.Go(func() {
					<-start
					if tg.Begin() {
						mu.Lock()
						won++
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			return won
		}
		if got := race(); got != 1 {
			t.Fatalf("probes out of 100 concurrent Begins: got %d, want 1", got)
		}
		if got := tg.Inflight(); got != 1 {
			t.Fatalf("inflight after the race: got %d, want 1", got)
		}
		tg.End(neutral)
		if got := race(); got != 1 {
			t.Fatalf("probes after a neutral probe: got %d, want 1", got)
		}
		tg.End(success)
		if got := race(); got != 100 {
			t.Fatalf("Begins on a healed target: got %d, want 100", got)
		}
		for range 100 {
			tg.End(success)
		}
		if got := tg.Inflight(); got != 0 {
			t.Fatalf("inflight at the end: got %d, want 0", got)
		}
	})
}

// TestStragglers: attempts begun before the ejection may end while the
// probe is out. End cannot tell them from the probe: a Failure or Neutral is
// held until nothing is in flight, a Success heals at once.
func TestStragglers(t *testing.T) {
	t.Run("failure held until the last attempt ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tg := route.NewTarget("p/m", 1, route.Health{})
			attempt(t, tg, success)
			tg.Begin() // stragglers: begun while healthy
			tg.Begin()
			eject(t, tg)
			time.Sleep(route.DefaultWindow)
			attempt(t, tg, neutral) // the probe ends, but the stragglers run on
			if got := tg.State(); got != route.Probing {
				t.Fatalf("state after a neutral end with stragglers: got %v, want %v", got, route.Probing)
			}
			tg.End(failure) // a straggler fails
			if got := tg.State(); got != route.Probing {
				t.Fatalf("state after a straggler failed: got %v, want %v", got, route.Probing)
			}
			if tg.Begin() {
				t.Fatal("Begin while probing: got true, want false")
			}
			tg.End(neutral) // the last one out settles: a failure was seen
			if got := tg.State(); got != route.Ejected {
				t.Fatalf("state when the last attempt ended: got %v, want %v", got, route.Ejected)
			}
			if got, want := until(t, tg).Sub(time.Now()), 2*route.DefaultWindow; got != want {
				t.Fatalf("window: got %v, want %v", got, want)
			}
		})
	})
	t.Run("a straggler's success heals", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tg := route.NewTarget("p/m", 1, route.Health{})
			tg.Begin()
			eject(t, tg)
			time.Sleep(route.DefaultWindow)
			if !tg.Begin() {
				t.Fatal("probe: Begin = false, want true")
			}
			tg.End(success)
			if got := tg.State(); got != route.Healthy {
				t.Fatalf("state: got %v, want %v", got, route.Healthy)
			}
			tg.End(failure) // the probe, late
			if got := tg.State(); got != route.Healthy {
				t.Fatalf("state after the late probe failed: got %v, want %v", got, route.Healthy)
			}
		})
	})
	t.Run("a failure while ejected does not change the state", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tg := route.NewTarget("p/m", 1, route.Health{})
			tg.Begin()
			eject(t, tg)
			tg.End(failure)
			if got := tg.State(); got != route.Ejected {
				t.Fatalf("state: got %v, want %v", got, route.Ejected)
			}
			if got := tg.Inflight(); got != 0 {
				t.Fatalf("inflight: got %d, want 0", got)
			}
		})
	})
	t.Run("a success while ejected heals", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tg := route.NewTarget("p/m", 1, route.Health{})
			tg.Begin()
			eject(t, tg)
			tg.End(success) // the endpoint served a request: it is up
			if got := tg.State(); got != route.Healthy {
				t.Fatalf("state: got %v, want %v", got, route.Healthy)
			}
		})
	})
}

func TestSnapshotJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := route.NewTarget("p/m", 0, route.Health{})
		eject(t, tg)
		b, err := json.Marshal(tg.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		want := `{"name":"p/m","endpoint":"p/m","state":"ejected","weight":1,"inflight":0,"requests":5,"failures":5,"error_rate":1,` +
			`"consecutive_failures":5,"endpoint_failures":5,` +
			`"ejected_until":"2000-01-01T00:00:05Z","ejections":1,"ttft_ewma_ms":0,"ttft_p95_ms":0}`
		if string(b) != want {
			t.Fatalf("snapshot JSON:\ngot  %s\nwant %s", b, want)
		}
	})
}
