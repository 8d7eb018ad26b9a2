package bench

import (
	"math"
	"runtime/metrics"
	"syscall"
	"time"
)

// selfCheck samples the client's own runtime so a result says whether the
// client skewed its figures: GC pauses, goroutine scheduling latency and CPU.
type selfCheck struct {
	pauseName   string
	pauseBefore []uint64
	schedBefore []uint64
	cycles      uint64
	cpu         time.Duration
}

const (
	metricGCPauses   = "/sched/pauses/total/gc:seconds"
	metricGCPausesV1 = "/gc/pauses:seconds" // older name, same histogram
	metricSchedLat   = "/sched/latencies:seconds"
	metricGCCycles   = "/gc/cycles/total:gc-cycles"
)

func newSelfCheck() *selfCheck {
	s := &selfCheck{pauseName: metricGCPausesV1}
	for _, d := range metrics.All() {
		if d.Name == metricGCPauses {
			s.pauseName = metricGCPauses
		}
	}
	now := s.read()
	s.pauseBefore = clone(hist(now[0].Value))
	s.schedBefore = clone(hist(now[1].Value))
	s.cycles = u64(now[2].Value)
	s.cpu = processCPU()
	return s
}

func (s *selfCheck) read() []metrics.Sample {
	m := []metrics.Sample{{Name: s.pauseName}, {Name: metricSchedLat}, {Name: metricGCCycles}}
	metrics.Read(m)
	return m
}

// selfStats is what changed since the selfCheck was taken.
type selfStats struct {
	gcPauseMax  time.Duration
	gcCycles    uint64
	schedLagP99 time.Duration
	cpu         time.Duration
}

func (s *selfCheck) since() selfStats {
	now := s.read()
	st := selfStats{cpu: processCPU() - s.cpu, gcCycles: u64(now[2].Value) - s.cycles}
	if h := hist(now[0].Value); h != nil {
		st.gcPauseMax = histMax(h, s.pauseBefore)
	}
	if h := hist(now[1].Value); h != nil {
		st.schedLagP99 = histQuantile(h, s.schedBefore, 0.99)
	}
	return st
}

func u64(v metrics.Value) uint64 {
	if v.Kind() != metrics.KindUint64 {
		return 0
	}
	return v.Uint64()
}

func hist(v metrics.Value) *metrics.Float64Histogram {
	if v.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return v.Float64Histogram()
}

func clone(h *metrics.Float64Histogram) []uint64 {
	if h == nil {
		return nil
	}
	return append([]uint64(nil), h.Counts...)
}

// bucketTop is the upper bound of bucket i, or its lower bound when the
// upper one is +Inf: the conservative value of anything counted there.
func bucketTop(h *metrics.Float64Histogram, i int) time.Duration {
	v := h.Buckets[i+1]
	if math.IsInf(v, 1) {
		v = h.Buckets[i]
	}
	return time.Duration(v * float64(time.Second))
}

func histMax(h *metrics.Float64Histogram, before []uint64) time.Duration {
	for i := len(h.Counts) - 1; i >= 0; i-- {
		if h.Counts[i] > at(before, i) {
			return bucketTop(h, i)
		}
	}
	return 0
}

func histQuantile(h *metrics.Float64Histogram, before []uint64, q float64) time.Duration {
	var total uint64
	for i, c := range h.Counts {
		total += c - at(before, i)
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c - at(before, i)
		if seen >= rank {
			return bucketTop(h, i)
		}
	}
	return 0
}

func at(xs []uint64, i int) uint64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

// processCPU returns the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
