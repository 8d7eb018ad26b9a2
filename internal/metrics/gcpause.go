package metrics

import (
	"math"
	"runtime/metrics"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// gcPauseBuckets are the bounds of streamgate_gc_pause_seconds: fine enough
// around 1 ms to tell whether the gateway meets its "GC pause max < 1 ms"
// budget. The Go collector's own pause histograms are rebucketed by a factor
// of ~11 (82 µs, 0.92 ms, 10.5 ms), too coarse to judge that.
var gcPauseBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 200e-6, 300e-6, 500e-6, 750e-6,
	1e-3, 1.5e-3, 2e-3, 3e-3, 5e-3, 7.5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
}

const gcPauseMetric = "/sched/pauses/total/gc:seconds"

// gcPauseCollector exports the runtime's stop-the-world GC pause histogram
// with gcPauseBuckets. Each runtime bucket is counted under the first bound
// at or above its upper edge, so a pause is never reported shorter than it
// was; the sum is estimated from bucket midpoints.
//
// Concurrent scrapes are safe: Collect reads and folds the histogram under mu
// (see fold).
type gcPauseCollector struct {
	desc        *prometheus.Desc
	readMetrics func([]metrics.Sample) // metrics.Read; tests make its writes visible to -race

	mu     sync.Mutex
	sample []metrics.Sample
}

// NewGCPauseCollector returns the collector of streamgate_gc_pause_seconds.
func NewGCPauseCollector() prometheus.Collector {
	return &gcPauseCollector{
		desc: prometheus.NewDesc("streamgate_gc_pause_seconds",
			"Stop-the-world GC pauses of this process (runtime /sched/pauses/total/gc:seconds), with buckets fine around 1 ms.", nil, nil),
		readMetrics: metrics.Read,
		sample:      []metrics.Sample{{Name: gcPauseMetric}},
	}
}

func (c *gcPauseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *gcPauseCollector) Collect(ch chan<- prometheus.Metric) {
	if count, sum, buckets, ok := c.fold(); ok {
		ch <- prometheus.MustNewConstHistogram(c.desc, count, sum, buckets)
	}
}

// fold reads the runtime histogram and rebuckets it, both under mu. The
// histogram points into c.sample's storage, which the next metrics.Read
// rewrites in place ("Values should not be read or manipulated while a Read
// with that value is outstanding; that is a data race", runtime/metrics), so
// no other scrape may Read until the counts are folded into fresh memory. The
// send on the channel, which may wait for the registry, stays outside.
func (c *gcPauseCollector) fold() (count uint64, sum float64, cumulative map[float64]uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readMetrics(c.sample)
	v := c.sample[0].Value
	if v.Kind() != metrics.KindFloat64Histogram {
		return 0, 0, nil, false
	}
	count, sum, cumulative = rebucket(v.Float64Histogram(), gcPauseBuckets)
	return count, sum, cumulative, true
}

// rebucket folds a runtime histogram into cumulative counts at bounds.
func rebucket(h *metrics.Float64Histogram, bounds []float64) (count uint64, sum float64, cumulative map[float64]uint64) {
	per := make([]uint64, len(bounds))
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		mid := hi
		if math.IsInf(lo, -1) {
			lo = 0
		}
		if !math.IsInf(hi, 1) {
			mid = (lo + hi) / 2
		} else {
			mid = lo
		}
		count += n
		sum += mid * float64(n)
		for j, b := range bounds {
			if hi <= b {
				per[j] += n
				break
			}
		}
	}
	cumulative = make(map[float64]uint64, len(bounds))
	var acc uint64
	for j, b := range bounds {
		acc += per[j]
		cumulative[b] = acc
	}
	return count, sum, cumulative
}
