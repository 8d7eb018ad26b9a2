package sim

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/sse"
)

// draws returns n sorted draws of d.
func draws(d *Dist, n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]float64, n)
	for i := range out {
		out[i] = d.at(rng.Float64())
	}
	slices.Sort(out)
	return out
}

// fractionAtOrBelow returns the share of sorted s at or below v.
func fractionAtOrBelow(s []float64, v float64) float64 {
	i, _ := slices.BinarySearch(s, math.Nextafter(v, math.Inf(1)))
	return float64(i) / float64(len(s))
}

// Draws of a quantile table reproduce the table: the share of 100k draws at
// or below each point's value is its quantile (within 0.006, about four
// standard deviations at p50), and values between points are interpolated
// linearly.
func TestQuantileDistSampling(t *testing.T) {
	ms := float64(time.Millisecond)
	table := map[float64]float64{0: 80 * ms, 0.5: 300 * ms, 0.9: 700 * ms, 0.99: 2000 * ms, 1: 5000 * ms}
	d, err := NewQuantileDist(table)
	if err != nil {
		t.Fatal(err)
	}
	s := draws(d, 100_000, 1)
	for p, v := range table {
		if got := fractionAtOrBelow(s, v); math.Abs(got-p) > 0.006 {
			t.Errorf("share of draws <= %v: got %.4f, want %.2f", time.Duration(v), got, p)
		}
	}
	if s[0] < 80*ms || s[len(s)-1] > 5000*ms {
		t.Errorf("draws range [%v, %v]: want within [80ms, 5s]", time.Duration(s[0]), time.Duration(s[len(s)-1]))
	}
	// Linear between points: p25 is halfway from 80ms to 300ms.
	if got := d.Quantile(0.25); math.Abs(got-190*ms) > 1 {
		t.Errorf("Quantile(0.25): got %v, want 190ms", time.Duration(got))
	}
	if got := quantileOf(s, 0.25); math.Abs(got-190*ms)/(190*ms) > 0.02 {
		t.Errorf("p25 of the draws: got %v, want 190ms within 2%%", time.Duration(got))
	}
}

// A histogram as Prometheus gives it (the gateway's TTFT buckets) of 100k
// lognormal observations: draws reproduce each bucket's cumulative share,
// and, the interpolation being exact for a lognormal, the source's
// p50/p90/p99 within 5 % where a uniform spread inside buckets is off by
// far more.
func TestHistogramDistSampling(t *testing.T) {
	le := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, math.Inf(1)}
	for i := range le {
		le[i] *= 1e9
	}
	const median, sigma = 300e6, 0.8
	rng := rand.New(rand.NewPCG(2, 2))
	cum := make([]float64, len(le))
	for range 100_000 {
		v := median * math.Exp(sigma*rng.NormFloat64())
		for i := range le {
			if v <= le[i] {
				cum[i]++
			}
		}
	}
	d, err := NewHistogramDist(le, cum)
	if err != nil {
		t.Fatal(err)
	}
	s := draws(d, 100_000, 3)
	for i := range le[:len(le)-1] {
		want := cum[i] / cum[len(cum)-1]
		if got := fractionAtOrBelow(s, le[i]); math.Abs(got-want) > 0.006 {
			t.Errorf("share of draws <= %v: got %.4f, want %.4f", time.Duration(le[i]), got, want)
		}
	}
	for _, p := range []float64{0.5, 0.9, 0.99} {
		want := median * math.Exp(sigma*probit(p))
		if got := quantileOf(s, p); math.Abs(got-want)/want > 0.05 {
			t.Errorf("p%g of the draws: got %v, want the lognormal's %v within 5%%", p*100, time.Duration(got), time.Duration(want))
		}
	}
}

func TestDistErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		q    map[float64]float64
		want string
	}{
		{"no p0", map[float64]float64{0.5: 1, 1: 2}, "p0 and p100"},
		{"no p100", map[float64]float64{0: 1, 0.5: 2}, "p0 and p100"},
		{"falling", map[float64]float64{0: 1, 0.5: 3, 1: 2}, "must not fall"},
		{"negative", map[float64]float64{0: -1, 1: 2}, ">= 0"},
		{"outside", map[float64]float64{0: 1, 1.5: 2, 1: 3}, "outside"},
	} {
		if _, err := NewQuantileDist(tt.q); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %q", tt.name, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name    string
		le, cum []float64
		want    string
	}{
		{"not cumulative", []float64{1, 2, 3}, []float64{5, 3, 9}, "cumulative"},
		{"bounds fall", []float64{2, 1}, []float64{1, 2}, "must rise"},
		{"empty", []float64{1, 2}, []float64{0, 0}, "no observations"},
		{"lengths", []float64{1, 2}, []float64{1}, "one count per bound"},
	} {
		if _, err := NewHistogramDist(tt.le, tt.cum); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %q", tt.name, err, tt.want)
		}
	}
	if _, err := NewWeights(map[int]float64{0: 1}); err == nil {
		t.Error("NewWeights with count 0: got no error")
	}
	if _, err := NewWeights(map[int]float64{2: -1}); err == nil {
		t.Error("NewWeights with a negative weight: got no error")
	}
}

func TestWeights(t *testing.T) {
	w, err := NewWeights(map[int]float64{1: 2, 4: 5, 8: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Mean(); math.Abs(got-(0.2+2+2.4)) > 1e-9 {
		t.Errorf("Mean: got %v, want 4.6", got)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	counts := map[int]int{}
	const n = 100_000
	for range n {
		counts[w.draw(rng.Float64())]++
	}
	for k, want := range map[int]float64{1: 0.2, 4: 0.5, 8: 0.3} {
		if got := float64(counts[k]) / n; math.Abs(got-want) > 0.006 {
			t.Errorf("share of %d: got %.4f, want %.1f", k, got, want)
		}
	}
}

// The profile's distributions reach the plan: the time-of-day multiplier
// scales the drawn TTFT and gaps exactly, the output length comes from its
// table, and the chunk sizes drawn add up to the answer in the number of
// chunks planned.
func TestPlanDistributions(t *testing.T) {
	ms := float64(time.Millisecond)
	ttft, _ := NewQuantileDist(map[float64]float64{0: 100 * ms, 1: 900 * ms})
	itl, _ := NewQuantileDist(map[float64]float64{0: 10 * ms, 0.5: 20 * ms, 1: 100 * ms})
	tokens, _ := NewQuantileDist(map[float64]float64{0: 30, 1: 60})
	sizes, _ := NewWeights(map[int]float64{1: 1, 3: 1, 7: 1})
	base := Profile{Name: "d", TTFTDist: ttft, ITLDist: itl, TokensDist: tokens, ChunkDist: sizes}
	var triple [24]float64
	for h := range triple {
		triple[h] = 3
	}
	shaped := base
	shaped.Name, shaped.Hourly = "h", &triple
	s := New(Options{Profiles: []Profile{base, shaped}})
	for i := range 20 {
		seed := int64(100 + i)
		plan := func(model string) *plan {
			r := httptestRequest(HeaderSeed, seed)
			pl, err := s.plan(r, &request{model: model}, openAIDialect{})
			if err != nil {
				t.Fatal(err)
			}
			return pl
		}
		a, b := plan("d"), plan("h")
		if a.firstAfter < 100*time.Millisecond || a.firstAfter > 900*time.Millisecond {
			t.Errorf("seed %d: ttft %v outside the table's [100ms, 900ms]", seed, a.firstAfter)
		}
		if d := b.firstAfter - 3*a.firstAfter; d < -2 || d > 2 {
			t.Errorf("seed %d: ttft with hourly 3: got %v, want 3 × %v", seed, b.firstAfter, a.firstAfter)
		}
		ga, gb := a.gap(), b.gap()
		if d := gb - 3*ga; d < -2 || d > 2 || ga < 10*time.Millisecond || ga > 100*time.Millisecond {
			t.Errorf("seed %d: gaps %v and %v with hourly 3: want 3 × the first, within [10ms, 100ms]", seed, ga, gb)
		}
		if a.tokens < 30 || a.tokens > 60 {
			t.Errorf("seed %d: tokens %d outside the table's [30, 60]", seed, a.tokens)
		}
		sum, n := 0, 0
		for sum < a.tokens {
			k := a.chunkSize()
			if k != 1 && k != 3 && k != 7 {
				t.Fatalf("seed %d: chunk of %d tokens, want 1, 3 or 7", seed, k)
			}
			sum += k
			n++
		}
		if n != a.chunks {
			t.Errorf("seed %d: %d chunks carry %d tokens, the plan counted %d", seed, n, a.tokens, a.chunks)
		}
	}
}

// BenchmarkChunkProfile is the per-chunk CPU of a stream (draw the gap and
// the chunk's size, build the chunk, write it) with today's fixed profile
// (lognormal gaps, fixed tokens per chunk) and with a quantile table of
// about 220 points (an exported one) plus tokens-per-chunk weights.
func BenchmarkChunkProfile(b *testing.B) {
	le := []float64{.0005, .001, .0025, .005, .01, .02, .035, .05, .075, .1, .15, .25, .4, .5, 1, 2.5, 5, math.Inf(1)}
	cum := []float64{0, 0, 10, 200, 3000, 9000, 9600, 9800, 9900, 9950, 9980, 9990, 9995, 9997, 9999, 10000, 10000, 10000}
	for i := range le {
		le[i] *= 1e9
	}
	table, err := NewHistogramDist(le, cum)
	if err != nil {
		b.Fatal(err)
	}
	weights, _ := NewWeights(map[int]float64{1: 0.7, 2: 0.3})
	fixed := Profile{Name: "fixed", ITL: 20 * time.Millisecond, ITLJitter: 0.2, TokensPerChunk: 1}
	quantile := Profile{Name: "quantile", ITLDist: table, TokensPerChunk: 1}
	both := quantile
	both.ChunkDist = weights
	for _, p := range []Profile{fixed, quantile, both} {
		b.Run(p.Name+map[bool]string{true: "+weights"}[p.ChunkDist != nil], func(b *testing.B) {
			pl := &plan{id: "chatcmpl-sim123", model: "m", includeUsage: true, promptTokens: 12, profile: p.normalize(),
				timing: rand.New(rand.NewPCG(1, 2)), itlScale: 1}
			pl.sizes.Seed(1, 6)
			enc := newChunker(pl, 1700000000)
			gen := newTextGen("en", rand.New(rand.NewPCG(1, 1)))
			st := &streamState{sw: sse.NewWriter(discardFlusher{}), stamp: true}
			toks := make([][]byte, 0, 8)
			var d time.Duration
			sent := 0
			b.ReportAllocs()
			for b.Loop() {
				d += pl.gap()
				toks = toks[:0]
				for k, size := 0, pl.chunkSize(); k < size; k++ {
					toks = append(toks, gen.next())
					sent++
				}
				if err := enc.text(st, toks, sent); err != nil {
					b.Fatal(err)
				}
			}
			if d <= 0 {
				b.Fatal("no gaps drawn")
			}
		})
	}
}

// httptestRequest is a chat request with one header of an int64 value.
func httptestRequest(name string, v int64) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set(name, strconv.FormatInt(v, 10))
	return r
}

// BenchmarkGap is the draw of one gap alone: today's lognormal (ITL and
// jitter) against an exported 220-point quantile table.
func BenchmarkGap(b *testing.B) {
	ms := float64(time.Millisecond)
	table := NewEmpiricalDist(draws(mustQuantiles(b, map[float64]float64{0: 2 * ms, 0.5: 8 * ms, 0.99: 35 * ms, 1: 90 * ms}), 10_000, 9))
	for _, p := range []Profile{
		{Name: "fixed", ITL: 20 * time.Millisecond, ITLJitter: 0.2},
		{Name: "quantile", ITLDist: table},
	} {
		b.Run(p.Name, func(b *testing.B) {
			pl := &plan{profile: p.normalize(), timing: rand.New(rand.NewPCG(1, 2)), itlScale: 1}
			var d time.Duration
			b.ReportAllocs()
			for b.Loop() {
				d += pl.gap()
			}
			if d <= 0 {
				b.Fatal("no gaps drawn")
			}
		})
	}
}

func mustQuantiles(tb testing.TB, q map[float64]float64) *Dist {
	d, err := NewQuantileDist(q)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// The index of a table finds the same points as a search of the whole
// table, for tables on an even grid and clustered ones alike.
func TestDistIndex(t *testing.T) {
	clustered := map[float64]float64{0: 1, 0.001: 2, 0.0011: 3, 0.5: 4, 0.9999: 5, 0.99991: 6, 1: 7}
	even := map[float64]float64{}
	for i := 0; i <= 1000; i++ {
		even[float64(i)/1000] = float64(i * i)
	}
	for name, q := range map[string]map[float64]float64{"clustered": clustered, "even": even} {
		d := mustQuantiles(t, q)
		ref := func(u float64) float64 {
			i := d.first(u, 1, len(d.p)-1)
			f := min(1, max(0, (u-d.p[i-1])/(d.p[i]-d.p[i-1])))
			return d.v[i-1] + f*(d.v[i]-d.v[i-1])
		}
		rng := rand.New(rand.NewPCG(5, 5))
		for j := range 100_000 {
			u := rng.Float64()
			if j < len(d.p) {
				u = d.p[j] // the points themselves
			}
			if got, want := d.at(u), ref(u); got != want {
				t.Fatalf("%s: at(%v) = %v, want %v", name, u, got, want)
			}
		}
	}
}
