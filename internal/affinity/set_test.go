package affinity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// targets returns n targets named like a model's (route, key) pairs.
func targets(n int, weight func(i int) float64) []Target {
	ts := make([]Target, n)
	for i := range ts {
		ts[i] = Target{ID: TargetID("p"+strconv.Itoa(i%3)+"/m", "k"+strconv.Itoa(i/3))}
		if weight != nil {
			ts[i].Weight = weight(i)
		}
	}
	return ts
}

func all(n int) uint64 {
	if n == 64 {
		return ^uint64(0)
	}
	return 1<<n - 1
}

// sessions returns n session keys as Identify makes them.
func sessions(n int) []uint64 {
	ks := make([]uint64, n)
	for i := range ks {
		ks[i] = Identify(Session, Fields{SessionID: "session-" + strconv.Itoa(i)}).Key
	}
	return ks
}

func mustSet(t testing.TB, ts []Target, eps float64) *Set {
	t.Helper()
	s, err := NewSet(ts, eps)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// first is the preferred target of key among avail, -1 when none.
func first(s *Set, key, avail uint64) int {
	var buf [MaxTargets]int
	o := s.Order(key, avail, buf[:0])
	if len(o) == 0 {
		return -1
	}
	return o[0]
}

// TestLeaveMovesOnlyItsSessions: a target that leaves (unhealthy, benched)
// moves its own sessions, each to its second choice, and no other.
func TestLeaveMovesOnlyItsSessions(t *testing.T) {
	for _, n := range []int{2, 6, 30} {
		for _, weighted := range []bool{false, true} {
			t.Run(fmt.Sprintf("n=%d/weighted=%v", n, weighted), func(t *testing.T) {
				var w func(int) float64
				if weighted {
					w = func(i int) float64 { return float64(1 + i%4) }
				}
				s := mustSet(t, targets(n, w), 0)
				keys := sessions(10_000)
				gone := n / 2
				moved := 0
				var buf [MaxTargets]int
				for _, k := range keys {
					before := s.Order(k, all(n), buf[:0])
					after := first(s, k, all(n)&^(1<<gone))
					if before[0] != gone {
						if after != before[0] {
							t.Fatalf("session %#x: on %d before, %d after target %d left; want it kept", k, before[0], after, gone)
						}
						continue
					}
					moved++
					if after != before[1] {
						t.Fatalf("session %#x of the leaving target: went to %d, want its second choice %d", k, after, before[1])
					}
				}
				if moved == 0 {
					t.Fatalf("no session was on target %d: the test proves nothing", gone)
				}
			})
		}
	}
}

// TestJoinMovesAShare: a target that joins takes about 1/(n+1) of the
// sessions, and only sessions that move to it move.
func TestJoinMovesAShare(t *testing.T) {
	for _, n := range []int{5, 29} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := mustSet(t, targets(n+1, nil), 0)
			keys := sessions(10_000)
			moved := 0
			for _, k := range keys {
				before := first(s, k, all(n))
				after := first(s, k, all(n+1))
				if after == before {
					continue
				}
				if after != n {
					t.Fatalf("session %#x moved from %d to %d, not to the new target %d", k, before, after, n)
				}
				moved++
			}
			got, want := float64(moved)/float64(len(keys)), 1/float64(n+1)
			// 10,000 draws: the standard deviation is under 0.4 %.
			if math.Abs(got-want) > 0.015 {
				t.Fatalf("a joining target took %.3f of the sessions, want %.3f ± 0.015", got, want)
			}
		})
	}
}

// TestWeightsRespected: preferred targets follow the weights.
func TestWeightsRespected(t *testing.T) {
	ws := []float64{1, 2, 3, 4, 0.5, 9.5}
	s := mustSet(t, targets(len(ws), func(i int) float64 { return ws[i] }), 0)
	var sum float64
	for _, w := range ws {
		sum += w
	}
	counts := make([]int, len(ws))
	keys := sessions(100_000)
	for _, k := range keys {
		counts[first(s, k, all(len(ws)))]++
	}
	for i, c := range counts {
		got, want := float64(c)/float64(len(keys)), ws[i]/sum
		if math.Abs(got-want) > 0.01 {
			t.Errorf("target %d (weight %v): %.4f of the sessions, want %.4f ± 0.01", i, ws[i], got, want)
		}
	}
}

// TestEqualWeightsUniform: with equal weights (the path that compares
// hashes) every target gets its share.
func TestEqualWeightsUniform(t *testing.T) {
	const n = 6
	s := mustSet(t, targets(n, func(int) float64 { return 3 }), 0)
	if !s.equal {
		t.Fatal("equal weights did not take the hash path")
	}
	counts := make([]int, n)
	keys := sessions(60_000)
	for _, k := range keys {
		counts[first(s, k, all(n))]++
	}
	for i, c := range counts {
		if got := float64(c) / float64(len(keys)); math.Abs(got-1.0/n) > 0.01 {
			t.Errorf("target %d: %.4f of the sessions, want %.4f ± 0.01", i, got, 1.0/n)
		}
	}
}

// capOf is the bound of target i: ⌈(1+ε)·L·w/W⌉ at total load L.
func capOf(s *Set, i int, total int64, avail uint64) int64 {
	var w float64
	for j := range s.slots {
		if avail&(1<<j) != 0 {
			w += s.slots[j].w
		}
	}
	return int64(math.Ceil((1 + s.eps) * float64(total) * s.slots[i].w / w))
}

// TestBoundedLoadHotSession: requests arrive for 300 sessions, one of them
// 20× hotter than the rest (20 of its requests in flight for each one of
// another session), with targets weighted or not and one of them down.
// After every placement no target holds more than ⌈(1+ε)·its share⌉ of
// the requests in flight; then under churn (requests end at random, new
// ones arrive) every placement still goes to a target within its bound,
// and sessions mostly keep their target.
func TestBoundedLoadHotSession(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		eps    float64
		weight func(int) float64
		avail  uint64
	}{
		{"6 targets", 6, 0, nil, all(6)},
		{"6 targets eps 0.1", 6, 0.1, nil, all(6)},
		{"6 weighted", 6, 0.25, func(i int) float64 { return float64(1 + i) }, all(6)},
		{"30 targets one down", 30, 0.25, nil, all(30) &^ (1 << 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, targets(tc.n, tc.weight), tc.eps)
			keys := sessions(300)
			var reqs []uint64 // one entry per request in flight
			for i, k := range keys {
				for range 1 + 19*btoi(i == 0) {
					reqs = append(reqs, k)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			r.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })

			type flight struct {
				key    uint64
				target int
			}
			var inflight []flight
			var total int64
			var buf [MaxTargets]int
			fresh := mustSet(t, targets(tc.n, tc.weight), tc.eps) // no load: the rendezvous preference
			spilled := 0
			place := func(k uint64, checkAll bool) {
				o := s.Order(k, tc.avail, buf[:0])
				i := o[0]
				if tc.avail&(1<<i) == 0 {
					t.Fatalf("placed on target %d, which is not available", i)
				}
				if pref := first(fresh, k, tc.avail); pref != i {
					spilled++
				}
				s.Begin(i)
				total++
				inflight = append(inflight, flight{k, i})
				if got, bound := int64(s.Load(i)), capOf(s, i, total, tc.avail); got > bound {
					t.Fatalf("target %d holds %d of %d requests in flight, bound %d", i, got, total, bound)
				}
				if !checkAll {
					return
				}
				for j := range s.slots {
					if tc.avail&(1<<j) == 0 {
						if s.Load(j) != 0 {
							t.Fatalf("unavailable target %d got requests", j)
						}
						continue
					}
					if got, bound := int64(s.Load(j)), capOf(s, j, total, tc.avail); got > bound {
						t.Fatalf("target %d holds %d of %d requests in flight, bound %d", j, got, total, bound)
					}
				}
			}
			for _, k := range reqs {
				place(k, true)
			}
			hotOn := map[int]bool{}
			for _, f := range inflight {
				if f.key == keys[0] {
					hotOn[f.target] = true
				}
			}
			if len(hotOn) < 2 {
				t.Fatalf("the hot session's 20 requests all stayed on one target (%v): the bound did not act", hotOn)
			}
			// Churn: a random request ends, a random session sends one.
			for range 20_000 {
				j := r.IntN(len(inflight))
				s.End(inflight[j].target)
				total--
				inflight[j] = inflight[len(inflight)-1]
				inflight = inflight[:len(inflight)-1]
				k := keys[0]
				if r.IntN(20+len(keys)-1) >= 20 {
					k = keys[1+r.IntN(len(keys)-1)]
				}
				place(k, false)
			}
			// A spill is a lost cache; with ε = 0.25 most placements keep theirs.
			if frac := float64(spilled) / float64(len(reqs)+20_000); frac > 0.5 {
				t.Errorf("%.2f of placements left their preferred target", frac)
			}
			t.Logf("spilled %.3f of placements", float64(spilled)/float64(len(reqs)+20_000))
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestOrderLists: Order lists every available target once, the full ones
// after the others, and none of the unavailable ones.
func TestOrderLists(t *testing.T) {
	s := mustSet(t, targets(6, nil), 0)
	key := sessions(1)[0]
	var buf [MaxTargets]int
	pref := s.Order(key, all(6), buf[:0])
	// Fill the preferred target: 10 in flight there, none elsewhere.
	for range 10 {
		s.Begin(pref[0])
	}
	o := s.Order(key, all(6)&^(1<<pref[3]), nil)
	if len(o) != 5 {
		t.Fatalf("order %v: got %d targets, want 5", o, len(o))
	}
	seen := map[int]bool{}
	for _, i := range o {
		if seen[i] || i == pref[3] {
			t.Fatalf("order %v lists %d twice or while unavailable", o, i)
		}
		seen[i] = true
	}
	if o[0] != pref[1] || o[len(o)-1] != pref[0] {
		t.Fatalf("order %v with the preferred %d full: want %d first and %d last", o, pref[0], pref[1], pref[0])
	}
	if got := s.Order(key, 0, buf[:0]); len(got) != 0 {
		t.Fatalf("no target available: got %v", got)
	}
}

func TestNewSetRefuses(t *testing.T) {
	ts := targets(3, nil)
	for name, tc := range map[string]struct {
		ts  []Target
		eps float64
	}{
		"empty":      {nil, 0},
		"too many":   {targets(65, nil), 0},
		"repeated":   {append(ts, ts[1]), 0},
		"negative ε": {ts, -0.1},
		"NaN ε":      {ts, math.NaN()},
	} {
		if _, err := NewSet(tc.ts, tc.eps); err == nil {
			t.Errorf("%s: NewSet accepted it", name)
		}
	}
	s := mustSet(t, targets(64, nil), 0)
	if s.Epsilon() != DefaultEpsilon {
		t.Errorf("epsilon 0: got %v, want %v", s.Epsilon(), DefaultEpsilon)
	}
	if o := s.Order(1, ^uint64(0), nil); len(o) != 64 {
		t.Errorf("64 targets: order has %d", len(o))
	}
}

func TestTargetIDDistinct(t *testing.T) {
	if TargetID("a/b", "c") == TargetID("a/bc", "") || TargetID("a", "k1") == TargetID("a", "k2") {
		t.Fatal("distinct (route, key) pairs share an ID")
	}
}

func BenchmarkOrder(b *testing.B) {
	for _, n := range []int{6, 30} {
		for _, weighted := range []bool{false, true} {
			b.Run(fmt.Sprintf("targets=%d/weighted=%v", n, weighted), func(b *testing.B) {
				var w func(int) float64
				if weighted {
					w = func(i int) float64 { return float64(1 + i%3) }
				}
				s := mustSet(b, targets(n, w), 0)
				keys := sessions(1024)
				buf := make([]int, 0, MaxTargets)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					k := keys[i&1023]
					i++
					o := s.Order(k, all(n), buf[:0])
					s.Begin(o[0])
					s.End(o[0])
				}
			})
		}
	}
}
