package affinity

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// DefaultEpsilon is the load slack of bounded loads when none is
// configured: no target takes a request that would lift it above
// ⌈1.25 × its share of the load⌉.
const DefaultEpsilon = 0.25

// MaxTargets is the most targets a Set holds (Order takes a bit mask of the
// available ones), as route.MaxTargets.
const MaxTargets = 64

// Target is one place a session can go: a route with one of its provider's
// keys.
type Target struct {
	// ID names the target stably across restarts and replicas: TargetID of
	// its route and key name. A session's order depends only on its key and
	// the IDs, so adding or removing another target moves no session
	// between the ones that stay.
	ID uint64
	// Weight is the target's relative share of sessions; 0 or less (or
	// NaN, Inf) counts as 1.
	Weight float64
}

// TargetID is the ID of the target of route ("provider/model") and
// provider key name ("" for a provider with a single key).
func TargetID(route, key string) uint64 {
	var d xxhash.Digest
	d.Reset()
	d.WriteString(route)
	d.Write([]byte{0})
	d.WriteString(key)
	return d.Sum64()
}

// Set is a model's targets for affinity placement, with the requests in
// flight on each (its load). It is safe for concurrent use.
type Set struct {
	slots []slot
	eps   float64
	equal bool // every weight is the same: scores are the hashes themselves
}

type slot struct {
	id   uint64
	w    float64
	load atomic.Int64
	_    [40]byte // one slot per cache line: Begin and End of neighbours do not contend
}

// NewSet returns the targets with load slack epsilon (0 means
// DefaultEpsilon). It fails on no targets, more than MaxTargets, a repeated
// ID or a negative or non-finite epsilon.
func NewSet(targets []Target, epsilon float64) (*Set, error) {
	switch {
	case len(targets) == 0:
		return nil, errors.New("affinity set has no targets")
	case len(targets) > MaxTargets:
		return nil, fmt.Errorf("affinity set has %d targets, more than %d", len(targets), MaxTargets)
	case epsilon < 0 || math.IsNaN(epsilon) || math.IsInf(epsilon, 0):
		return nil, fmt.Errorf("affinity epsilon %v: want a finite number ≥ 0", epsilon)
	}
	if epsilon == 0 {
		epsilon = DefaultEpsilon
	}
	s := &Set{slots: make([]slot, len(targets)), eps: epsilon, equal: true}
	for i, t := range targets {
		for _, u := range targets[:i] {
			if u.ID == t.ID {
				return nil, fmt.Errorf("affinity set lists target %#x twice", t.ID)
			}
		}
		w := t.Weight
		if !(w > 0) || math.IsInf(w, 0) {
			w = 1
		}
		s.slots[i].id, s.slots[i].w = t.ID, w
		if w != s.slots[0].w {
			s.equal = false
		}
	}
	return s, nil
}

// Len is the number of targets.
func (s *Set) Len() int { return len(s.slots) }

// Epsilon is the load slack in use.
func (s *Set) Epsilon() float64 { return s.eps }

// Begin counts one request in flight on target i; pair it with one End.
func (s *Set) Begin(i int) { s.slots[i].load.Add(1) }

// End takes one request of target i out of flight.
func (s *Set) End(i int) { s.slots[i].load.Add(-1) }

// Load is the requests in flight on target i.
func (s *Set) Load(i int) int { return int(s.slots[i].load.Load()) }

// Order appends to dst the indexes of the targets available in avail (bit
// i: target i may take an attempt now: healthy, not benched, its key not at
// its limits) in the order the session key should try them, and returns
// it. The order is weighted rendezvous hashing (highest random weight,
// score −w / ln u with u uniform in (0, 1) from the key and the target's
// ID) with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018): a target
// whose load already reaches its capacity ⌈(1+ε)·(L+1)·w/W⌉, where L is
// the load of the available targets and W their weight, is full; the
// targets not full come first in rendezvous order, then the full ones in
// rendezvous order. So a session keeps its target while that target is
// available and not full; when it leaves, only its own sessions move (each
// to its next target in rendezvous order), and a target that joins takes
// about w/W of the sessions, from every other target alike.
//
// The bound holds at each placement as far as loads are counted: Order
// claims nothing, so the caller calls Begin on the target it uses and End
// when the request ends, and placements racing between Order and Begin may
// each pass the same capacity check (the excess is at most the number of
// such races). Requests that end do not move others: a target may stay
// above the bound of a load that fell, until its own requests end.
//
// Targets not in avail are left out. With dst of capacity MaxTargets it
// does not allocate.
func (s *Set) Order(key uint64, avail uint64, dst []int) []int {
	if len(s.slots) < 64 {
		avail &= 1<<len(s.slots) - 1
	}
	var (
		idx   [MaxTargets]uint8
		score [MaxTargets]float64
		loads [MaxTargets]int64 // by target index: one read each
		n     int
		load  int64
		wsum  float64
	)
	for m := avail; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		sl := &s.slots[i]
		h := mix(key ^ sl.id)
		var sc float64
		if s.equal {
			sc = float64(h >> 11) // monotone in u: −1/ln u grows with u
		} else {
			u := (float64(h>>11) + 0.5) / (1 << 53) // (0, 1)
			sc = -sl.w / math.Log(u)
		}
		// Insertion sort, highest score first; ties (2^-53) by ID.
		j := n
		for ; j > 0; j-- {
			p := &s.slots[idx[j-1]]
			if score[j-1] > sc || score[j-1] == sc && p.id < sl.id {
				break
			}
			idx[j], score[j] = idx[j-1], score[j-1]
		}
		idx[j], score[j] = uint8(i), sc
		n++
		loads[i] = sl.load.Load()
		load += loads[i]
		wsum += sl.w
	}
	if n == 0 {
		return dst
	}
	// Capacities count this request: (L+1) after it is placed.
	total := (1 + s.eps) * float64(load+1)
	var full uint64
	for k := range n {
		i := idx[k]
		if float64(loads[i]) >= math.Ceil(total*s.slots[i].w/wsum) {
			full |= 1 << k
		}
	}
	for k := range n {
		if full&(1<<k) == 0 {
			dst = append(dst, int(idx[k]))
		}
	}
	for k := range n {
		if full&(1<<k) != 0 {
			dst = append(dst, int(idx[k]))
		}
	}
	return dst
}
