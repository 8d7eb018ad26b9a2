package metrics

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestGCPauseConcurrentScrapes scrapes one collector from many goroutines at
// once while GCs run, as two Prometheus servers scraping /metrics together
// would, and checks every scrape is a valid histogram: a total above zero and
// never decreasing, the bounds of gcPauseBuckets, cumulative counts.
//
// metrics.Read rewrites the sample's histogram in place, so a scrape that
// reads the histogram while another scrape's Read runs is a data race. The
// runtime's writes are invisible to the race detector (package runtime is not
// instrumented), so the second subtest's Read rewrites the counts once more in
// Go code, as the runtime does: under go test -race, a Collect that reads the
// histogram outside its lock is reported.
func TestGCPauseConcurrentScrapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func([]rtmetrics.Sample)
	}{
		{"runtime Read", rtmetrics.Read},
		{"Read with its writes visible to -race", func(s []rtmetrics.Sample) {
			rtmetrics.Read(s)
			h := s[0].Value.Float64Histogram()
			copy(h.Counts, slices.Clone(h.Counts))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewGCPauseCollector().(*gcPauseCollector)
			c.readMetrics = tc.read
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			runtime.GC() // at least one pause to count

			stop := make(chan struct{})
			var gc sync.WaitGroup
			gc.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						runtime.GC()
					}
				}
			})
			defer gc.Wait()
			defer close(stop)

			const scrapers, scrapes = 8, 200
			var wg sync.WaitGroup
			for range scrapers {
				wg.Go(func() {
					var last uint64
					for range scrapes {
						n, ok := checkGCPauseScrape(t, reg)
						if !ok {
							return
						}
						if n < last {
							t.Errorf("pause count: got %d after %d, want non-decreasing", n, last)
							return
						}
						last = n
					}
				})
			}
			wg.Wait()
		})
	}
}

// checkGCPauseScrape gathers reg, reports what is wrong with its one
// streamgate_gc_pause_seconds histogram, and returns its count.
func checkGCPauseScrape(t *testing.T, reg *prometheus.Registry) (count uint64, ok bool) {
	mfs, err := reg.Gather()
	if err != nil {
		t.Errorf("Gather: %v", err)
		return 0, false
	}
	if len(mfs) != 1 || mfs[0].GetName() != "streamgate_gc_pause_seconds" || len(mfs[0].GetMetric()) != 1 {
		t.Errorf("got %v, want one family streamgate_gc_pause_seconds with one histogram", mfs)
		return 0, false
	}
	h := mfs[0].GetMetric()[0].GetHistogram()
	count = h.GetSampleCount()
	if count == 0 {
		t.Errorf("pause count: got 0 after runtime.GC, want > 0")
		return 0, false
	}
	if h.GetSampleSum() <= 0 {
		t.Errorf("pause sum: got %g, want > 0", h.GetSampleSum())
		return 0, false
	}
	bs := h.GetBucket()
	if len(bs) != len(gcPauseBuckets) {
		t.Errorf("buckets: got %d, want %d", len(bs), len(gcPauseBuckets))
		return 0, false
	}
	var prev uint64
	for i, b := range bs {
		c := b.GetCumulativeCount()
		if b.GetUpperBound() != gcPauseBuckets[i] || c < prev || c > count {
			t.Errorf("bucket %d: got le=%g count %d, want le=%g and a count from %d (the bucket below) to %d (the total)",
				i, b.GetUpperBound(), c, gcPauseBuckets[i], prev, count)
			return 0, false
		}
		prev = c
	}
	return count, true
}
