package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Dist is a distribution given by its quantile function: points (p, v) with
// p rising from 0 to 1 and v never falling. A draw is an inverse-CDF
// sample: a uniform u in [0, 1) is mapped to the value at quantile u,
// interpolated linearly between the two points around it (so a table
// p0 80ms, p50 300ms gives a draw of 0.25 the value 190ms). Values are in
// the quantity's unit: nanoseconds for durations, tokens for lengths.
//
// A Dist is immutable once built (NewQuantileDist, NewHistogramDist), so a
// *Dist is shared by every copy of a Profile, and drawing from it is safe
// for concurrent use and does not allocate.
type Dist struct {
	p, v []float64
	// idx[k] is the first point above quantile k/distIndex (see first), so
	// a draw searches only the points between idx[k] and idx[k+1]: one or
	// two for a table on an even grid, whatever its length.
	idx [distIndex + 1]uint16
}

// distIndex is the number of slots of a Dist's index.
const distIndex = 256

// first returns the index of the first point above u, from 1 (a point
// before it is at or below u) to len-1, searching [lo, hi].
func (d *Dist) first(u float64, lo, hi int) int {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.p[m] <= u {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// index builds idx once the points are set.
func (d *Dist) index() *Dist {
	for k := range d.idx {
		d.idx[k] = uint16(d.first(float64(k)/distIndex, 1, len(d.p)-1))
	}
	return d
}

// MaxDistPoints bounds the points of one Dist (a quantile table, or the
// buckets of a histogram).
const MaxDistPoints = 1024

// NewQuantileDist returns the distribution of a quantile table: q maps a
// quantile in [0, 1] to its value. It must give 0 (the smallest value) and
// 1 (the largest), and values must not fall as quantiles rise.
func NewQuantileDist(q map[float64]float64) (*Dist, error) {
	if len(q) > MaxDistPoints {
		return nil, fmt.Errorf("%d quantiles: at most %d", len(q), MaxDistPoints)
	}
	d := &Dist{}
	for p := range q {
		if !(p >= 0 && p <= 1) {
			return nil, fmt.Errorf("quantile %g is outside [0, 1]", p)
		}
		d.p = append(d.p, p)
	}
	slices.Sort(d.p)
	if len(d.p) < 2 || d.p[0] != 0 || d.p[len(d.p)-1] != 1 {
		return nil, errors.New("a quantile table needs p0 and p100 (the smallest and the largest value)")
	}
	for i, p := range d.p {
		v := q[p]
		if !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("p%s: value %g is not a finite number >= 0", pctName(p), v)
		}
		if i > 0 && v < d.v[i-1] {
			return nil, fmt.Errorf("p%s: value %g is below p%s's %g (values must not fall)", pctName(p), v, pctName(d.p[i-1]), d.v[i-1])
		}
		d.v = append(d.v, v)
	}
	return d.index(), nil
}

// pctName spells a quantile as a percentile: 0.5 → "50", 0.999 → "99.9".
func pctName(p float64) string { return fmt.Sprintf("%g", math.Round(p*1e6)/1e4) }

// at returns the value at quantile u in [0, 1]: linear between the points
// around u. It does not allocate.
func (d *Dist) at(u float64) float64 {
	p := d.p
	// The first point above u, between the index's bounds of u's slot.
	k := min(distIndex-1, max(0, int(u*distIndex)))
	i := d.first(u, int(d.idx[k]), int(d.idx[k+1]))
	p0, p1 := p[i-1], p[i]
	v0, v1 := d.v[i-1], d.v[i]
	if p1 <= p0 {
		return v1
	}
	f := (u - p0) / (p1 - p0)
	if f < 0 {
		f = 0
	} else if f > 1 {
		f = 1
	}
	return v0 + f*(v1-v0)
}

// Quantile returns the value at quantile p in [0, 1] (clamped).
func (d *Dist) Quantile(p float64) float64 {
	return d.at(min(1, max(0, p)))
}

// Points returns a copy of the table: quantiles and their values.
func (d *Dist) Points() (p, v []float64) { return slices.Clone(d.p), slices.Clone(d.v) }

// duration draws a duration (values in nanoseconds) at u, times scale.
func (d *Dist) duration(u, scale float64) int64 { return int64(d.at(u) * scale) }

// NewHistogramDist returns the distribution of a histogram as Prometheus
// exposes it: upper bounds (le, rising; the last may be +Inf) and the
// cumulative count of observations at or below each (the last count is
// the total). Draws lie between the bound below the first observation and
// the first bound at or above all of them.
//
// Between bucket bounds the CDF is interpolated linearly in (log value,
// normal quantile of the cumulative fraction): exact for a lognormal,
// which latencies roughly follow, so the quantiles of the draws match a
// lognormal source much closer than a uniform spread inside each bucket
// (histogram_quantile's) does, in tails above all. Below the first bound
// holding observations and above the last, the neighbouring segment is
// extended, clamped to the bucket's bounds (0 below; the +Inf bucket is
// extended to the 99.99th percentile). The result is a quantile table of
// about 220 points (see histogramGrid), drawn as any quantile table.
func NewHistogramDist(le []float64, cumulative []float64) (*Dist, error) {
	if len(le) != len(cumulative) {
		return nil, fmt.Errorf("%d bounds and %d counts: want one count per bound", len(le), len(cumulative))
	}
	if len(le) == 0 || len(le) > MaxDistPoints {
		return nil, fmt.Errorf("%d buckets: want 1 to %d", len(le), MaxDistPoints)
	}
	for i := range le {
		if !(le[i] >= 0) || (math.IsInf(le[i], 1) && i != len(le)-1) {
			return nil, fmt.Errorf("bound %g: want a number >= 0 (+Inf only last)", le[i])
		}
		if i > 0 && le[i] <= le[i-1] {
			return nil, fmt.Errorf("bound %g is not above %g (bounds must rise)", le[i], le[i-1])
		}
		if !(cumulative[i] >= 0) || math.IsInf(cumulative[i], 0) {
			return nil, fmt.Errorf("count %g at le %g: want a finite number >= 0", cumulative[i], le[i])
		}
		if i > 0 && cumulative[i] < cumulative[i-1] {
			return nil, fmt.Errorf("count %g at le %g is below %g at le %g (counts are cumulative, as Prometheus gives them)",
				cumulative[i], le[i], cumulative[i-1], le[i-1])
		}
	}
	total := cumulative[len(cumulative)-1]
	if total <= 0 {
		return nil, errors.New("the histogram holds no observations")
	}
	c := histCDF{hi: math.Inf(1)}
	hiSet := false
	for i, b := range le {
		switch f := cumulative[i] / total; {
		case f <= 0:
			c.lo = b
		case f >= 1:
			if !hiSet {
				c.hi, hiSet = b, true
			}
		default:
			c.knots = append(c.knots, knot{lb: math.Log(max(b, 1e-300)), z: probit(f), b: b})
		}
	}
	d := &Dist{}
	for _, p := range histogramGrid {
		v := c.quantile(p)
		if n := len(d.v); n > 0 && v < d.v[n-1] {
			v = d.v[n-1]
		}
		d.p, d.v = append(d.p, p), append(d.v, v)
	}
	return d.index(), nil
}

// histogramGrid are the quantiles of a histogram's table: every half
// percent, finer in the tail (p99.1 to p99.9, p99.95, p99.99), and the ends.
var histogramGrid = func() []float64 {
	g := []float64{0}
	for i := 1; i < 200; i++ {
		g = append(g, float64(i)/200)
	}
	for i := 1; i <= 9; i++ {
		g = append(g, 0.99+float64(i)/1000)
	}
	g = append(g, 0.9995, 0.9999, 1)
	sort.Float64s(g)
	return slices.Compact(g)
}()

// knot is one bucket bound with observations on both sides: its log, the
// normal quantile of its cumulative fraction, the bound.
type knot struct{ lb, z, b float64 }

// histCDF is a histogram's CDF in (log value, normal quantile) space.
type histCDF struct {
	knots  []knot
	lo, hi float64 // the support: the bound below any observation, the first bound above all (+Inf)
}

// tailZ is the normal quantile where the open ends stop: p0.01, p99.99.
var tailZ = probit(0.9999)

// quantile returns the value at quantile p.
func (c *histCDF) quantile(p float64) float64 {
	k := c.knots
	hi := c.hi
	if math.IsInf(hi, 1) {
		hi = math.MaxFloat64
	}
	switch len(k) {
	case 0:
		// One bucket holds everything: spread it evenly.
		if math.IsInf(c.hi, 1) {
			return c.lo
		}
		return c.lo + p*(c.hi-c.lo)
	case 1:
		// One inner bound: even spread on each side of it.
		b, f := k[0].b, phi(k[0].z)
		if p <= f {
			return c.lo + (p/f)*(b-c.lo)
		}
		if math.IsInf(c.hi, 1) {
			return b * (1 + (p-f)/(1-f))
		}
		return b + (p-f)/(1-f)*(c.hi-b)
	}
	z := probitClamped(p)
	// The segment around z; outside the knots, the nearest segment extended.
	i := sort.Search(len(k), func(i int) bool { return k[i].z > z })
	switch {
	case i == 0:
		i = 1
	case i == len(k):
		i = len(k) - 1
	}
	a, b := k[i-1], k[i]
	lb := a.lb + (z-a.z)*(b.lb-a.lb)/(b.z-a.z)
	return min(hi, max(c.lo, math.Exp(lb)))
}

// probit is the standard normal quantile of p in (0, 1).
func probit(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// probitClamped is probit with the ends held at p0.01 and p99.99.
func probitClamped(p float64) float64 {
	return min(tailZ, max(-tailZ, probit(min(1-1e-12, max(1e-12, p)))))
}

// phi is the standard normal CDF.
func phi(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// Weights is a distribution over small counts (tokens per event): count n
// with probability weight(n) / sum of weights. Immutable once built, safe
// for concurrent draws, drawing does not allocate.
type Weights struct {
	n   []int
	cum []float64 // cumulative fractions, the last 1
}

// NewWeights returns the distribution of w: count → weight (> 0).
func NewWeights(w map[int]float64) (*Weights, error) {
	if len(w) == 0 || len(w) > 256 {
		return nil, fmt.Errorf("%d counts: want 1 to 256", len(w))
	}
	var ws Weights
	for n := range w {
		if n < 1 || n > 1<<16 {
			return nil, fmt.Errorf("count %d: want 1 to %d", n, 1<<16)
		}
		ws.n = append(ws.n, n)
	}
	slices.Sort(ws.n)
	var sum float64
	for _, n := range ws.n {
		if v := w[n]; !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("count %d: weight %g is not a positive number", n, v)
		}
		sum += w[n]
	}
	acc := 0.0
	for _, n := range ws.n {
		acc += w[n]
		ws.cum = append(ws.cum, acc/sum)
	}
	ws.cum[len(ws.cum)-1] = 1
	return &ws, nil
}

// draw returns the count at the uniform u in [0, 1).
func (w *Weights) draw(u float64) int {
	for i, c := range w.cum {
		if u < c {
			return w.n[i]
		}
	}
	return w.n[len(w.n)-1]
}

// Mean returns the mean count.
func (w *Weights) Mean() float64 {
	m, prev := 0.0, 0.0
	for i, c := range w.cum {
		m += float64(w.n[i]) * (c - prev)
		prev = c
	}
	return m
}

// Max returns the largest count.
func (w *Weights) Max() int { return w.n[len(w.n)-1] }

// Table returns a copy of the counts and their fractions.
func (w *Weights) Table() map[int]float64 {
	t := make(map[int]float64, len(w.n))
	prev := 0.0
	for i, c := range w.cum {
		t[w.n[i]] = c - prev
		prev = c
	}
	return t
}
