package route

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Latency constants.
const (
	// Tau is the peak-EWMA's time constant: an observation weighs
	// exp(-dt/Tau) against the cost dt after the last one, and a cost not
	// refreshed decays toward 0 the same way.
	Tau = 10 * time.Second
	// SampleWindow is how many recent TTFTs TTFTQuantile reads.
	SampleWindow = 256
	// MinSamples is the fewest observations TTFTQuantile answers with.
	MinSamples = 20
)

// penalty is the lowest-latency score of a target without a cost that has
// attempts in flight (Finagle's PeakEwma: Long.MaxValue>>16 ns): its first
// attempt goes out at score 0, the next wait for its TTFT. It stays far
// below 2^53 so that adding the in-flight count still counts.
const penalty = 1 << 47

// latency is a target's TTFT record: a peak-EWMA (Finagle's PeakEwma) and a
// ring of the last SampleWindow observations.
type latency struct {
	// ewma packs the cost and the time it was computed in one word, so that
	// a CAS updates both: the high 32 bits are the cost in nanoseconds as a
	// float32, the low 32 the target's clock in milliseconds (it wraps after
	// 49.7 days; a target unobserved that long may decay once by the wrong
	// amount, then its next observation resets it). 0: no observation yet.
	ewma atomic.Uint64
	n    atomic.Uint64 // observations
	ring [SampleWindow]atomic.Int64
}

func stampMs(t *Target, now time.Time) uint32 { return uint32((t.clock(now) - 1) / 1e6) }

func unpack(w uint64) (cost float64, stamp uint32) {
	return float64(math.Float32frombits(uint32(w >> 32))), uint32(w)
}

func pack(cost float64, stamp uint32) uint64 {
	return uint64(math.Float32bits(float32(cost)))<<32 | uint64(stamp)
}

// decay is the weight exp(-dt/Tau) of a cost computed at stamp, at now.
func decay(stamp, now uint32) float64 {
	return math.Exp(-float64(now-stamp) / float64(Tau/time.Millisecond))
}

// observe adds one TTFT: above the current cost the cost jumps to it (the
// peak), below it the cost moves toward it with weight 1-exp(-dt/Tau).
func (l *latency) observe(t *Target, ttft time.Duration, now time.Time) {
	l.ring[(l.n.Add(1)-1)%SampleWindow].Store(int64(ttft))
	rtt, ms := float64(ttft), stampMs(t, now)
	for {
		old := l.ewma.Load()
		cost, stamp := unpack(old)
		if old != 0 && rtt < cost {
			w := decay(stamp, ms)
			rtt = cost*w + rtt*(1-w)
		}
		if l.ewma.CompareAndSwap(old, pack(rtt, ms)) {
			return
		}
		rtt = float64(ttft)
	}
}

// cost is the peak-EWMA in nanoseconds at now, decayed toward 0 since its
// last observation, so that a target left alone because it was slow wins
// traffic back and is measured again. 0 before any observation.
func (l *latency) cost(t *Target, now time.Time) float64 {
	w := l.ewma.Load()
	if w == 0 {
		return 0
	}
	cost, stamp := unpack(w)
	return cost * decay(stamp, stampMs(t, now))
}

// score is the lowest-latency strategy's load figure: the decayed cost
// times (in flight + 1). Without a cost it is 0 while nothing is in flight
// (an unmeasured target gets tried), else penalty + in flight.
func (t *Target) score(now time.Time) float64 {
	n := float64(t.inflight.Load())
	c := t.lat.cost(t, now)
	if c == 0 {
		if n == 0 {
			return 0
		}
		return penalty + n
	}
	return c * (n + 1)
}

// TTFTQuantile returns the q-quantile (nearest rank; q in [0, 1], e.g.
// 0.95) of the target's last SampleWindow TTFT observations, and false with
// fewer than MinSamples of them. It sorts a copy on the stack: about 2µs
// at a full window, no allocation; cache it when it is read per request.
func (t *Target) TTFTQuantile(q float64) (time.Duration, bool) {
	var buf [SampleWindow]int64
	n := 0
	for i := range t.lat.ring {
		// A slot claimed by observe and not yet stored reads 0 (or the
		// value it replaces): skip it.
		if v := t.lat.ring[i].Load(); v > 0 {
			buf[n] = v
			n++
		}
	}
	if n < MinSamples {
		return 0, false
	}
	s := buf[:n]
	slices.Sort(s)
	k := int(math.Ceil(q*float64(n))) - 1
	return time.Duration(s[min(max(k, 0), n-1)]), true
}
