package bench

import (
	"math"
	"slices"
)

// Dist summarises a sample: mean and the percentiles the SPEC names. Values
// are in the unit of the field that holds it (milliseconds for *_ms fields,
// tokens per second for tps). An empty sample gives the zero Dist.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	// N is the number of samples the figures come from.
	N int `json:"n"`
}

// Summarize returns the Dist of xs. It sorts xs in place.
func Summarize(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	slices.Sort(xs)
	return Dist{
		Mean: Mean(xs),
		P50:  percentileSorted(xs, 50),
		P90:  percentileSorted(xs, 90),
		P95:  percentileSorted(xs, 95),
		P99:  percentileSorted(xs, 99),
		Max:  xs[len(xs)-1],
		N:    len(xs),
	}
}

// Mean returns the arithmetic mean of xs, 0 for an empty slice.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Percentile returns the q-th percentile (0..100) of xs with linear
// interpolation between closest ranks, as numpy.percentile does by default.
// It sorts xs in place; an empty slice gives 0.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return percentileSorted(xs, q)
}

func percentileSorted(xs []float64, q float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	q = math.Max(0, math.Min(100, q))
	pos := q / 100 * float64(n-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return xs[lo]
	}
	return xs[lo] + (xs[hi]-xs[lo])*(pos-float64(lo))
}

// stdDev returns the population standard deviation of xs.
func stdDev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := Mean(xs)
	var s float64
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)))
}
