package bench

import (
	"math"
	"testing"
)

func approx(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPercentileMatchesNumpy(t *testing.T) {
	// Expected values computed with numpy.percentile(xs, q) (linear interpolation).
	xs := []float64{15, 20, 35, 40, 50}
	tests := []struct {
		name string
		q    float64
		want float64
	}{
		{"p0", 0, 15}, {"p25", 25, 20}, {"p40", 40, 29}, {"p50", 50, 35},
		{"p90", 90, 46}, {"p95", 95, 48}, {"p99", 99, 49.6}, {"p100", 100, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Percentile(append([]float64(nil), xs...), tt.q)
			if !approx(got, tt.want, 1e-9) {
				t.Errorf("Percentile(%v, %v): got %v, want %v", xs, tt.q, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want Dist
	}{
		{"empty", nil, Dist{}},
		{"one", []float64{7}, Dist{Mean: 7, P50: 7, P90: 7, P95: 7, P99: 7, Max: 7, N: 1}},
		// numpy.percentile(range(1, 11), [50, 90, 95, 99]) = 5.5, 9.1, 9.55, 9.91
		{"one to ten unsorted", []float64{10, 3, 1, 9, 2, 8, 4, 7, 5, 6}, Dist{Mean: 5.5, P50: 5.5, P90: 9.1, P95: 9.55, P99: 9.91, Max: 10, N: 10}},
		// numpy on [1, 1, 1, 100]: p50 1, p90 70.3, p95 85.15, p99 97.03, mean 25.75
		{"skewed", []float64{1, 100, 1, 1}, Dist{Mean: 25.75, P50: 1, P90: 70.3, P95: 85.15, P99: 97.03, Max: 100, N: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.xs)
			for _, c := range []struct {
				f         string
				got, want float64
			}{{"mean", got.Mean, tt.want.Mean}, {"p50", got.P50, tt.want.P50}, {"p90", got.P90, tt.want.P90},
				{"p95", got.P95, tt.want.P95}, {"p99", got.P99, tt.want.P99}, {"max", got.Max, tt.want.Max}} {
				if !approx(c.got, c.want, 1e-9) {
					t.Errorf("%s: got %v, want %v", c.f, c.got, c.want)
				}
			}
			if got.N != tt.want.N {
				t.Errorf("n: got %d, want %d", got.N, tt.want.N)
			}
		})
	}
}

func TestArrivals(t *testing.T) {
	tests := []struct {
		name      string
		rate, bur float64
		wantCV    float64
	}{
		{"poisson", 20, 1, 1},
		{"poisson zero burstiness", 5, 0, 1},
		{"bursty shape 0.25", 10, 0.25, 2},
		{"regular shape 4", 10, 4, 0.5},
	}
	const n = 10000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewArrivals(tt.rate, tt.bur, 42)
			gaps := make([]float64, n)
			for i := range gaps {
				gaps[i] = a.Gap()
			}
			mean := Mean(gaps)
			cv := stdDev(gaps) / mean
			// Standard error of the mean rate is CV/sqrt(n) ≈ 2% at CV 2; allow 5%.
			if rate := 1 / mean; math.Abs(rate-tt.rate)/tt.rate > 0.05 {
				t.Errorf("mean rate: got %.3f, want %.3f ±5%%", rate, tt.rate)
			}
			if math.Abs(cv-tt.wantCV)/tt.wantCV > 0.07 {
				t.Errorf("CV: got %.3f, want %.3f ±7%%", cv, tt.wantCV)
			}
		})
	}
}

func TestArrivalsReproducible(t *testing.T) {
	a, b := NewArrivals(10, 1, 7), NewArrivals(10, 1, 7)
	c := NewArrivals(10, 1, 8)
	same := true
	for i := range 100 {
		x, y, z := a.Next(i == 0), b.Next(i == 0), c.Next(i == 0)
		if x != y {
			t.Fatalf("arrival %d: got %v and %v with the same seed, want equal", i, x, y)
		}
		if x != z {
			same = false
		}
	}
	if same {
		t.Error("seeds 7 and 8 gave the same arrivals, want different")
	}
}

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"ttft:500,itl:50,e2e:10000", "ttft:500,itl:50,e2e:10000", false},
		{"gap:250, tpot:20", "tpot:20,gap:250", false},
		{"", "", false},
		{"ttft", "", true},
		{"speed:3", "", true},
		{"ttft:-1", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := ParseSLO(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResultAdd(t *testing.T) {
	a := &Result{Runs: []RunResult{{Label: "a", Chunks: 100}}, Client: ClientStats{GCPauseMaxMs: 1, SchedLagP99Ms: 3, GCCycles: 2, CPUSeconds: 0.001}}
	b := &Result{Runs: []RunResult{{Label: "b", Chunks: 300}}, Warnings: []string{"w"},
		Client: ClientStats{GCPauseMaxMs: 2, SchedLagP99Ms: 1, GCCycles: 1, CPUSeconds: 0.003}}
	a.Add(b)
	if len(a.Runs) != 2 || a.Runs[1].Label != "b" || len(a.Warnings) != 1 {
		t.Fatalf("got runs %+v warnings %q, want a then b and one warning", a.Runs, a.Warnings)
	}
	c := a.Client
	if c.GCPauseMaxMs != 2 || c.SchedLagP99Ms != 3 || c.GCCycles != 3 {
		t.Errorf("got %+v, want GC pause max 2, sched lag 3, 3 cycles", c)
	}
	if math.Abs(c.CPUUsPerChunk-10) > 1e-9 { // 4 ms of CPU over 400 chunks
		t.Errorf("CPU per chunk: got %g µs, want 10", c.CPUUsPerChunk)
	}
}
