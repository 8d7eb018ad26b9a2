package route_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/route"
)

// targets returns n healthy targets named t0, t1, ... with the weights
// given (1 when weights is short).
func targets(n int, weights ...int) []*route.Target {
	ts := make([]*route.Target, n)
	for i := range ts {
		w := 1
		if i < len(weights) {
			w = weights[i]
		}
		ts[i] = route.NewTarget(fmt.Sprintf("t%d", i), w, route.Health{})
	}
	return ts
}

func newSet(t *testing.T, strategy string, ts []*route.Target) *route.Set {
	t.Helper()
	s, err := route.NewSet(strategy, ts)
	if err != nil {
		t.Fatalf("NewSet(%q): %v", strategy, err)
	}
	route.SetRand(s, rand.New(rand.NewPCG(7, 11)))
	return s
}

func names(ts []*route.Target) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.Name)
	}
	return b.String()
}

func byName(a, b *route.Target) int { return strings.Compare(a.Name, b.Name) }

var strategies = []string{route.Fallback, route.Weighted, route.LeastInflight, route.LowestLatency}

func TestNewSet(t *testing.T) {
	one := targets(1)
	tests := []struct {
		name     string
		strategy string
		targets  []*route.Target
		want     string // the error contains it; "" means no error
		wantName string // Strategy() when no error
	}{
		{"fallback", "fallback", one, "", "fallback"},
		{"weighted", "weighted", one, "", "weighted"},
		{"least-inflight", "least-inflight", one, "", "least-inflight"},
		{"lowest-latency", "lowest-latency", one, "", "lowest-latency"},
		{"empty means fallback", "", one, "", "fallback"},
		{"unknown strategy is named", "round-robin", one, `"round-robin"`, ""},
		{"no targets", "fallback", nil, "no targets", ""},
		{"too many targets", "fallback", targets(route.MaxTargets + 1), "65 targets", ""},
		{"the most targets", "weighted", targets(route.MaxTargets), "", "weighted"},
		{"nil target", "fallback", []*route.Target{one[0], nil}, "target 1 is nil", ""},
		{"repeated target", "fallback", []*route.Target{one[0], one[0]}, `"t0" twice`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := route.NewSet(tt.strategy, tt.targets)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if s.Strategy() != tt.wantName {
					t.Fatalf("Strategy(): got %q, want %q", s.Strategy(), tt.wantName)
				}
				if len(s.Targets()) != len(tt.targets) {
					t.Fatalf("Targets(): got %d, want %d", len(s.Targets()), len(tt.targets))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want one containing %s", err, tt.want)
			}
		})
	}
}

// firstPicks counts, over n Orders, how often each target comes first.
func firstPicks(s *route.Set, n int) map[string]int {
	got := map[string]int{}
	var dst []*route.Target
	for range n {
		dst = s.Order(dst[:0])
		got[dst[0].Name]++
	}
	return got
}

func TestWeightedSplit(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		want    []float64 // shares of first picks
	}{
		{"1,3,6", []int{1, 3, 6}, []float64{0.1, 0.3, 0.6}},
		{"weight 0 counts as 1", []int{0, 1, 2}, []float64{0.25, 0.25, 0.5}},
		{"negative counts as 1", []int{-4, 1}, []float64{0.5, 0.5}},
		{"equal", []int{2, 2, 2, 2}, []float64{0.25, 0.25, 0.25, 0.25}},
	}
	const picks = 10000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := targets(len(tt.weights), tt.weights...)
			s := newSet(t, route.Weighted, ts)
			got := firstPicks(s, picks)
			for i, tg := range ts {
				if share := float64(got[tg.Name]) / picks; math.Abs(share-tt.want[i]) > 0.03 {
					t.Errorf("%s (weight %d): got share %.3f, want %.2f ± 0.03", tg.Name, tt.weights[i], share, tt.want[i])
				}
			}
		})
	}
}

// TestRestInConfiguredOrder: after the pick, the others follow in
// configured order, whatever the strategy.
func TestRestInConfiguredOrder(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			ts := targets(4, 1, 3, 6, 2)
			s := newSet(t, strategy, ts)
			for range 200 {
				got := s.Order(nil)
				want := append([]*route.Target{got[0]}, slices.DeleteFunc(slices.Clone(ts), func(t *route.Target) bool { return t == got[0] })...)
				if !slices.Equal(got, want) {
					t.Fatalf("got %s, want %s", names(got), names(want))
				}
			}
		})
	}
}

func TestLeastInflight(t *testing.T) {
	tests := []struct {
		name  string
		loads []int
		eject int       // index of a target to eject first; -1 none
		want  []float64 // shares of first picks
	}{
		{"the least loaded", []int{3, 1, 2}, -1, []float64{0, 1, 0}},
		{"ties shared", []int{0, 2, 0}, -1, []float64{0.5, 0, 0.5}},
		{"equal loads shared", []int{1, 1, 1}, -1, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"an ejected target is not picked", []int{2, 0, 1}, 1, []float64{0, 0, 1}},
	}
	const picks = 3000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ts := targets(len(tt.loads))
				if tt.eject >= 0 {
					eject(t, ts[tt.eject])
				}
				for i, n := range tt.loads {
					for range n {
						ts[i].Begin()
					}
				}
				s := newSet(t, route.LeastInflight, ts)
				got := firstPicks(s, picks)
				for i, tg := range ts {
					if share := float64(got[tg.Name]) / picks; math.Abs(share-tt.want[i]) > 0.05 {
						t.Errorf("%s (load %d): got share %.3f, want %.2f ± 0.05", tg.Name, tt.loads[i], share, tt.want[i])
					}
				}
				for i, n := range tt.loads {
					for range n {
						ts[i].End(neutral)
					}
				}
			})
		})
	}
}

// TestLeastInflightFollowsLoad: picks that Begin and hold spread evenly.
func TestLeastInflightFollowsLoad(t *testing.T) {
	ts := targets(3)
	s := newSet(t, route.LeastInflight, ts)
	for range 300 {
		if !s.Order(nil)[0].Begin() {
			t.Fatal("Begin = false, want true")
		}
	}
	for _, tg := range ts {
		if got := tg.Inflight(); got != 100 {
			t.Errorf("%s: got %d in flight, want 100", tg.Name, got)
		}
		for range tg.Inflight() {
			tg.End(success)
		}
	}
}

// TestOrderEjectedLast: targets that would refuse an attempt (ejected and
// not due, probing) come last in configured order; one due for a probe is
// a candidate like a healthy one; no target appears twice; dst's contents
// are kept.
func TestOrderEjectedLast(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ts := targets(5)
				s := newSet(t, strategy, ts)
				eject(t, ts[3])
				eject(t, ts[4])
				time.Sleep(route.DefaultWindow) // t3 and t4 due for a probe
				if !ts[4].Begin() {             // t4 probing
					t.Fatal("probe of t4: Begin = false, want true")
				}
				eject(t, ts[1]) // ejected, not due
				sentinel := route.NewTarget("dst", 1, route.Health{})
				dst := []*route.Target{sentinel}
				seen := map[string]int{}
				for range 300 {
					dst = s.Order(dst[:1])
					if len(dst) != 6 || dst[0] != sentinel {
						t.Fatalf("got %s, want dst followed by 5 targets", names(dst))
					}
					got := dst[1:]
					if tail := names(got[3:]); tail != "t1,t4" {
						t.Fatalf("got %s, want it to end with t1,t4", names(got))
					}
					if d := slices.Compact(strings.Split(names(slices.SortedFunc(slices.Values(got), byName)), ",")); len(d) != 5 {
						t.Fatalf("got %s, want no repeats", names(got))
					}
					seen[got[0].Name]++
				}
				if strategy != route.Fallback && seen["t3"] == 0 {
					t.Errorf("first picks %v: got none of t3 (due for a probe), want some", seen)
				}
				ts[4].End(neutral)
			})
		})
	}
}

// TestOrderAllEjected: with nothing available Order still returns every
// target, in configured order.
func TestOrderAllEjected(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ts := targets(3)
				for _, tg := range ts {
					eject(t, tg)
				}
				s := newSet(t, strategy, ts)
				if got := names(s.Order(nil)); got != "t0,t1,t2" {
					t.Fatalf("got %s, want t0,t1,t2", got)
				}
			})
		})
	}
}

// TestOrderClaimsNothing: Orders without Begin leave no attempt in flight
// and no probe out.
func TestOrderClaimsNothing(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ts := targets(3)
				s := newSet(t, strategy, ts)
				eject(t, ts[0])
				time.Sleep(route.DefaultWindow)
				var dst []*route.Target
				for range 1000 {
					dst = s.Order(dst[:0])
				}
				for _, tg := range ts {
					if got := tg.Inflight(); got != 0 {
						t.Errorf("%s: got %d in flight, want 0", tg.Name, got)
					}
				}
				if got := ts[0].State(); got != route.Ejected {
					t.Fatalf("t0: got %v, want %v (due, no probe out)", got, route.Ejected)
				}
				if !ts[0].Begin() {
					t.Fatal("t0: Begin = false, want true (the probe)")
				}
				ts[0].End(success)
			})
		})
	}
}

func TestReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := targets(2)
		s := newSet(t, route.Fallback, ts)
		check := func(step string, want bool) {
			t.Helper()
			if got := s.Ready(); got != want {
				t.Errorf("%s: Ready() got %v, want %v", step, got, want)
			}
		}
		check("healthy", true)
		eject(t, ts[0])
		check("one ejected", true)
		eject(t, ts[1])
		check("both ejected", false)
		time.Sleep(route.DefaultWindow)
		check("both due for a probe", true)
		ts[0].Begin()
		ts[1].Begin()
		check("both probing", false)
		ts[1].End(success)
		check("one healed", true)
		ts[0].End(failure)
	})
}
