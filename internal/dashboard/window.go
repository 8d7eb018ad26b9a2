package dashboard

import (
	"math"
	"sort"
)

// hist is one cumulative histogram as Prometheus exposes it: cum[i]
// observations at or below upper[i], the last bound +Inf (so the last
// count is the total). The zero hist has no observation.
type hist struct {
	upper []float64
	cum   []uint64
}

// total is the number of observations.
func (h hist) total() uint64 {
	if len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

// sub is h minus old: the observations made between the two. A counter
// reset (a count that went down) or other bounds mean old is from another
// life of the series, and h is taken whole, as Prometheus's rate does.
func (h hist) sub(old hist) hist {
	if len(old.cum) != len(h.cum) {
		return h
	}
	d := hist{upper: h.upper, cum: make([]uint64, len(h.cum))}
	for i := range h.cum {
		if h.cum[i] < old.cum[i] || h.upper[i] != old.upper[i] {
			return h
		}
		d.cum[i] = h.cum[i] - old.cum[i]
	}
	return d
}

// add is h plus o (the same bounds; a hist without observations is the
// identity), used to merge a model's routes or every route's chunk overhead.
func (h hist) add(o hist) hist {
	switch {
	case len(o.cum) == 0:
		return h
	case len(h.cum) == 0:
		return hist{upper: o.upper, cum: append([]uint64(nil), o.cum...)}
	case len(h.cum) != len(o.cum):
		return h // other bounds cannot be merged; never so for one metric
	}
	s := hist{upper: h.upper, cum: make([]uint64, len(h.cum))}
	for i := range h.cum {
		s.cum[i] = h.cum[i] + o.cum[i]
	}
	return s
}

// quantile is the q-quantile of h computed as PromQL's histogram_quantile:
// the bucket holding rank q·total is found and the value interpolated
// linearly inside it, the lowest bucket starting at 0; a rank in the +Inf
// bucket gives the highest finite bound. NaN when h has no observation or
// fewer than two buckets.
func (h hist) quantile(q float64) float64 {
	n := len(h.cum)
	if n < 2 || h.total() == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	switch {
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(1)
	}
	rank := q * float64(h.total())
	b := sort.Search(n-1, func(i int) bool { return float64(h.cum[i]) >= rank })
	if b == n-1 {
		return h.upper[n-2]
	}
	if b == 0 && h.upper[0] <= 0 {
		return h.upper[0]
	}
	start, end, count := 0.0, h.upper[b], float64(h.cum[b])
	if b > 0 {
		start = h.upper[b-1]
		count -= float64(h.cum[b-1])
		rank -= float64(h.cum[b-1])
	}
	if count == 0 { // q = 0 on an empty lowest bucket
		return start
	}
	return start + (end-start)*(rank/count)
}

// maxBound is the upper bound of the highest bucket that holds an
// observation: the largest observation is at most that. +Inf when one lies
// above every finite bound, NaN without observations.
func (h hist) maxBound() float64 {
	prev := uint64(0)
	top := math.NaN()
	for i, c := range h.cum {
		if c > prev {
			top = h.upper[i]
		}
		prev = c
	}
	return top
}

// rate is the per-second increase of a counter from old to now over
// seconds; a decrease is a reset, after which now is the increase. NaN
// over no time.
func rate(now, old, seconds float64) float64 {
	if seconds <= 0 {
		return math.NaN()
	}
	return increase(now, old) / seconds
}

// increase is how much a counter grew from old to now, counting a decrease
// as a reset (the counter restarted from zero).
func increase(now, old float64) float64 {
	if now < old {
		return now
	}
	return now - old
}

// ratio is part/whole, NaN when whole is 0 (no request: no rate to show).
func ratio(part, whole float64) float64 {
	if whole == 0 {
		return math.NaN()
	}
	return part / whole
}

// hourSlots is the memory of the dashboard: a second each for the last
// hour, whether or not a page was open.
const hourSlots = 3600

// slot is one second of the hour ring: what happened since the sampling
// before it. float32 keeps the ring at 32 bytes a second (~113 KiB an hour,
// TestHourRingSize) with more digits than a chart shows.
type slot struct {
	at                                    int64   // Unix seconds of the sampling; 0: no sampling
	requests, errors, rejected, outTokens float32 // increases since the previous sampling
	open                                  float32 // open streams at the sampling
	ttftP99                               float32 // seconds, over the last ttftWindow; NaN: no first token then
}

// cacheStep is the width of a cacheRing slot: the hour history's step.
const cacheStep = 10 // seconds

// cacheSlot is what the prompt caches did in one cacheStep of the hour.
type cacheSlot struct {
	at              int64   // Unix seconds of the step's start; 0: none
	in, read, saved float32 // prompt and cache-read tokens, USD saved (Options.Savings)
}

// cacheRing is the last hour of cacheSlots, each slot the step of its
// time modulo the hour (a slot of an older hour is overwritten): 360 slots
// of 24 bytes instead of 12 more bytes in each of the hour ring's slots.
type cacheRing struct {
	slots [3600 / cacheStep]cacheSlot
}

// add counts tokens and savings at Unix second at.
func (r *cacheRing) add(at int64, in, read, saved float64) {
	start := at - at%cacheStep
	s := &r.slots[(start/cacheStep)%int64(len(r.slots))]
	if s.at != start {
		*s = cacheSlot{at: start}
	}
	s.in += float32(in)
	s.read += float32(read)
	s.saved += float32(saved)
}

// ring is the last hourSlots samplings, the newest at head-1.
type ring struct {
	slots [hourSlots]slot
	head  int // where the next slot goes
	n     int // slots filled
}

func (r *ring) push(s slot) {
	r.slots[r.head] = s
	r.head = (r.head + 1) % hourSlots
	r.n = min(r.n+1, hourSlots)
}

// each calls f with every slot, oldest first.
func (r *ring) each(f func(slot)) {
	start := (r.head - r.n + hourSlots) % hourSlots
	for i := range r.n {
		f(r.slots[(start+i)%hourSlots])
	}
}
