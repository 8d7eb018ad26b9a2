package route

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"
)

// Strategies, as configured.
const (
	Fallback      = "fallback"       // configured order
	Weighted      = "weighted"       // first pick random by weight
	LeastInflight = "least-inflight" // first pick the one with fewest attempts in flight
	LowestLatency = "lowest-latency" // first pick by power of two choices over peak-EWMA TTFT × (in flight + 1)
)

// MaxTargets is the most targets a Set holds (Order keeps a bit per target).
const MaxTargets = 64

type strategy uint8

const (
	fallback strategy = iota
	weighted
	leastInflight
	lowestLatency
)

// Set is a model's targets under one strategy. It is safe for concurrent use.
type Set struct {
	targets  []*Target
	strategy strategy
	name     string
	// intn draws uniformly from [0, n); nil means math/rand/v2's IntN
	// (the runtime's per-thread generator: no lock, no allocation).
	intn func(n int) int
}

// NewSet returns the targets under strategy: Fallback, Weighted,
// LeastInflight or LowestLatency ("" means Fallback). It fails on an
// unknown strategy, no targets, more than MaxTargets, or a nil or repeated
// target. A Target may belong to several Sets (its state is shared).
func NewSet(strategy string, targets []*Target) (*Set, error) {
	s := &Set{targets: targets, name: strategy}
	switch strategy {
	case Fallback, "":
		s.strategy, s.name = fallback, Fallback
	case Weighted:
		s.strategy = weighted
	case LeastInflight:
		s.strategy = leastInflight
	case LowestLatency:
		s.strategy = lowestLatency
	default:
		return nil, fmt.Errorf("unknown routing strategy %q (want %s, %s, %s or %s)", strategy, Fallback, Weighted, LeastInflight, LowestLatency)
	}
	switch {
	case len(targets) == 0:
		return nil, errors.New("route set has no targets")
	case len(targets) > MaxTargets:
		return nil, fmt.Errorf("route set has %d targets, more than %d", len(targets), MaxTargets)
	}
	for i, t := range targets {
		if t == nil {
			return nil, fmt.Errorf("route set target %d is nil", i)
		}
		for _, u := range targets[:i] {
			if u == t {
				return nil, fmt.Errorf("route set lists target %q twice", t.Name)
			}
		}
	}
	return s, nil
}

// Targets returns the targets in configured order. The slice is the Set's
// own: do not modify it.
func (s *Set) Targets() []*Target { return s.targets }

// Strategy returns the strategy's name.
func (s *Set) Strategy() string { return s.name }

// Ready reports whether some target would take an attempt now: healthy, or
// ejected and due for a probe.
func (s *Set) Ready() bool {
	_, avail := s.available()
	return avail != 0
}

// available returns a bit per target that would take an attempt now, read
// once each, and the time it read (zero when no target needed it).
func (s *Set) available() (now time.Time, avail uint64) {
	for i, t := range s.targets {
		b := t.ep.brk.Load()
		if b > 0 && now.IsZero() {
			now = time.Now()
		}
		if b == 0 || b > 0 && t.ep.clock(now) >= b {
			avail |= 1 << i
		}
	}
	return now, avail
}

// Order appends to dst the targets in the order one request should try
// them, and returns it: the strategy's pick first, then the rest in
// configured order, then the targets that would refuse an attempt now
// (ejected and not due for a probe, or probing) in configured order. Each
// target appears once. Order claims nothing: a request skips a target whose
// Begin returns false, and a target it never Begins costs nothing. With dst
// reused, Order does not allocate.
func (s *Set) Order(dst []*Target) []*Target {
	now, avail := s.available()
	pick := -1
	if avail != 0 {
		pick = s.pick(avail, now)
		dst = append(dst, s.targets[pick])
	}
	for i, t := range s.targets {
		if avail&(1<<i) != 0 && i != pick {
			dst = append(dst, t)
		}
	}
	for i, t := range s.targets {
		if avail&(1<<i) == 0 {
			dst = append(dst, t)
		}
	}
	return dst
}

// Panic returns the target most likely to work when every target refuses
// an attempt (Envoy's panic threshold at 100 %: rather than refuse every
// request while a whole model is ejected, route anyway): the one whose
// endpoint has the fewest consecutive failures, of those the one whose
// last failure is oldest, of those the first in configured order. The
// caller claims it with Force. Refusing everyone until a window ends is
// what turned an upstream's return into a burst of 503s (issue 25); in
// panic a request that finds the upstream back closes its circuit.
func (s *Set) Panic() *Target {
	best := s.targets[0]
	bc, bl := best.ep.consec.Load(), best.ep.lastFail.Load()
	for _, t := range s.targets[1:] {
		c, l := t.ep.consec.Load(), t.ep.lastFail.Load()
		if c < bc || c == bc && l < bl {
			best, bc, bl = t, c, l
		}
	}
	return best
}

// pick returns the strategy's first choice among avail (not 0).
func (s *Set) pick(avail uint64, now time.Time) int {
	if avail&(avail-1) == 0 { // one candidate
		return bits.TrailingZeros64(avail)
	}
	switch s.strategy {
	case weighted:
		return s.pickWeighted(avail)
	case leastInflight:
		return s.pickLeastInflight(avail)
	case lowestLatency:
		if now.IsZero() {
			now = time.Now()
		}
		return s.pickLowestLatency(avail, now)
	}
	return bits.TrailingZeros64(avail)
}

func (s *Set) rand(n int) int {
	if s.intn != nil {
		return s.intn(n)
	}
	return rand.IntN(n)
}

// pickWeighted draws a candidate with probability weight/sum.
func (s *Set) pickWeighted(avail uint64) int {
	sum := 0
	for m := avail; m != 0; m &= m - 1 {
		sum += s.targets[bits.TrailingZeros64(m)].weight()
	}
	r := s.rand(sum)
	for m := avail; ; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if r -= s.targets[i].weight(); r < 0 {
			return i
		}
	}
}

// pickLeastInflight returns the candidate with the fewest attempts in
// flight, a random one of those tied for fewest.
func (s *Set) pickLeastInflight(avail uint64) int {
	var ties uint64
	least := int64(-1)
	for m := avail; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		switch n := s.targets[i].inflight.Load(); {
		case least < 0 || n < least:
			least, ties = n, 1<<i
		case n == least:
			ties |= 1 << i
		}
	}
	if ties&(ties-1) == 0 {
		return bits.TrailingZeros64(ties)
	}
	return nthBit(ties, s.rand(bits.OnesCount64(ties)))
}

// pickLowestLatency is the power of two choices: two distinct candidates
// at random (both when there are two), the lower score wins, a tie is
// drawn.
func (s *Set) pickLowestLatency(avail uint64, now time.Time) int {
	a, b := 0, 1
	if n := bits.OnesCount64(avail); n > 2 {
		a, b = s.rand(n), s.rand(n-1)
		if b >= a {
			b++
		}
	}
	i, j := nthBit(avail, a), nthBit(avail, b)
	si, sj := s.targets[i].score(now), s.targets[j].score(now)
	switch {
	case si < sj:
		return i
	case sj < si:
		return j
	case s.rand(2) == 0:
		return i
	}
	return j
}

// nthBit returns the index of m's set bit number n (from 0, lowest first).
func nthBit(m uint64, n int) int {
	for ; n > 0; n-- {
		m &= m - 1
	}
	return bits.TrailingZeros64(m)
}
