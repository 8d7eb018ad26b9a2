package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// Arrivals generates the intended send times of an open-loop run: gaps
// between requests drawn from a gamma distribution with mean 1/rate and
// shape burstiness. Shape 1 is the exponential distribution (Poisson
// arrivals, coefficient of variation 1); a smaller shape is burstier
// (CV = 1/sqrt(shape)), a larger one more regular. The same seed gives the
// same sequence. A zero Arrivals is not usable; call NewArrivals.
type Arrivals struct {
	rng   *rand.Rand
	shape float64
	scale float64 // seconds
	at    float64 // seconds since the start
}

// NewArrivals returns a generator of rate requests per second. A
// burstiness of 0 means 1 (Poisson). rate must be positive.
func NewArrivals(rate, burstiness float64, seed uint64) *Arrivals {
	if burstiness <= 0 {
		burstiness = 1
	}
	return &Arrivals{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		shape: burstiness,
		scale: 1 / (rate * burstiness),
	}
}

// Gap returns the next inter-arrival gap in seconds.
func (a *Arrivals) Gap() float64 { return gamma(a.rng, a.shape) * a.scale }

// Next returns the offset from the start of the next intended send time.
// The first request is sent at offset 0.
func (a *Arrivals) Next(first bool) time.Duration {
	if !first {
		a.at += a.Gap()
	}
	return time.Duration(a.at * float64(time.Second))
}

// gamma draws from Gamma(shape, 1) with the Marsaglia–Tsang method; shapes
// below 1 use the boost Gamma(k) = Gamma(k+1)·U^(1/k).
func gamma(rng *rand.Rand, k float64) float64 {
	if k == 1 {
		return rng.ExpFloat64()
	}
	if k < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gamma(rng, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
