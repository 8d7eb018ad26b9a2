package route_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/route"
)

// TestPeakEWMA: an observation above the cost is taken as it is, one below
// moves the cost toward it by 1-exp(-dt/Tau), and a read decays the cost
// toward 0 by exp(-dt/Tau).
func TestPeakEWMA(t *testing.T) {
	e := math.Exp(-1) // the weight Tau after the last observation
	tests := []struct {
		name  string
		sleep time.Duration // before the step
		ttft  time.Duration // observed; 0 only reads
		want  float64       // ttft_ewma_ms after the step
	}{
		{"unobserved", 0, 0, 0},
		{"first observation", 0, 100 * time.Millisecond, 100},
		{"peak: jumps up at once", 0, 300 * time.Millisecond, 300},
		{"below, at once: no weight", 0, 50 * time.Millisecond, 300},
		{"read decays toward 0", route.Tau, 0, 300 * e},
		{"below, Tau later", 0, 50 * time.Millisecond, 300*e + 50*(1-e)},
		{"read, 10 Tau later", 10 * route.Tau, 0, (300*e + 50*(1-e)) * math.Exp(-10)},
	}
	synctest.Test(t, func(t *testing.T) {
		tg := route.NewTarget("p/m", 1, route.Health{})
		for _, tt := range tests {
			time.Sleep(tt.sleep)
			if tt.ttft > 0 {
				attempt(t, tg, route.Result{Outcome: route.Success, TTFT: tt.ttft})
			}
			if got := tg.Snapshot().TTFTEWMAms; math.Abs(got-tt.want) > 1e-5*tt.want {
				t.Errorf("%s: got %.6f ms, want %.6f ms", tt.name, got, tt.want)
			}
		}
	})
}

func TestTTFTQuantile(t *testing.T) {
	ms := time.Millisecond
	ramp := func(n int) []time.Duration { // 1ms, 2ms, ... n ms
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = time.Duration(i+1) * ms
		}
		return d
	}
	repeat := func(d time.Duration, n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = d
		}
		return s
	}
	tests := []struct {
		name   string
		obs    []time.Duration
		q      float64
		want   time.Duration
		wantOK bool
	}{
		{"none", nil, 0.95, 0, false},
		{"one short of the minimum", ramp(route.MinSamples - 1), 0.95, 0, false},
		{"the minimum", ramp(route.MinSamples), 0.95, 19 * ms, true},
		{"p95 of 1..100", ramp(100), 0.95, 95 * ms, true},
		{"p50 of 1..100", ramp(100), 0.5, 50 * ms, true},
		{"q 0 is the least", ramp(100), 0, 1 * ms, true},
		{"q 1 is the most", ramp(100), 1, 100 * ms, true},
		{"zero TTFTs are not observed", repeat(0, 100), 0.5, 0, false},
		{"the window keeps the last 256", append(repeat(time.Second, 1000), repeat(10*ms, route.SampleWindow)...), 0.99, 10 * ms, true},
		{"an old value still in the window", append(repeat(time.Second, 1000), repeat(10*ms, route.SampleWindow-1)...), 1, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := route.NewTarget("p/m", 1, route.Health{})
			for _, d := range tt.obs {
				attempt(t, tg, route.Result{Outcome: route.Success, TTFT: d})
			}
			got, ok := tg.TTFTQuantile(tt.q)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("TTFTQuantile(%v): got %v, %v, want %v, %v", tt.q, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestLowestLatencyUnmeasured: a target without observations scores 0 and
// gets tried, but only one attempt at a time until its TTFT comes back.
func TestLowestLatencyUnmeasured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := route.NewTarget("a", 1, route.Health{})
		b := route.NewTarget("b", 1, route.Health{})
		attempt(t, a, route.Result{Outcome: route.Success, TTFT: time.Second})
		s, err := route.NewSet(route.LowestLatency, []*route.Target{a, b})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Order(nil)[0]; got != b {
			t.Fatalf("first pick: got %s, want b (unmeasured)", got.Name)
		}
		b.Begin()
		for i := range 10 {
			if got := s.Order(nil)[0]; got != a {
				t.Fatalf("pick %d with b's first attempt out: got %s, want a", i, got.Name)
			}
			a.Begin()
		}
		b.End(route.Result{Outcome: route.Success, TTFT: 100 * time.Millisecond})
		if got := s.Order(nil)[0]; got != b {
			t.Fatalf("pick once b is measured faster: got %s, want b", got.Name)
		}
	})
}

// TestLowestLatencyFeedback simulates the loop on synctest's clock: 100
// picks a second, each attempt ends after its target's TTFT and reports it.
// Both targets start at 100ms; at 10s a's TTFT triples for 10s, then
// recovers.
func TestLowestLatencyFeedback(t *testing.T) {
	const (
		rate      = 100 // picks a second
		seconds   = 60
		slowFrom  = 10
		slowUntil = 20
	)
	synctest.Test(t, func(t *testing.T) {
		a := route.NewTarget("a", 1, route.Health{})
		b := route.NewTarget("b", 1, route.Health{})
		s, err := route.NewSet(route.LowestLatency, []*route.Target{a, b})
		if err != nil {
			t.Fatal(err)
		}
		route.SetRand(s, rand.New(rand.NewPCG(1, 2)))
		var (
			toA [seconds]int // picks of a, per second
			wg  sync.WaitGroup
			dst []*route.Target
		)
		for i := range rate * seconds {
			sec := i / rate
			dst = s.Order(dst[:0])
			tg := dst[0]
			ttft := 100 * time.Millisecond
			if tg == a {
				toA[sec]++
				if sec >= slowFrom && sec < slowUntil {
					ttft *= 3
				}
			}
			if !tg.Begin() {
				t.Fatalf("Begin on %s: got false, want true", tg.Name)
			}
			wg.Go(func() {
				time.Sleep(ttft)
				tg.End(route.Result{Outcome: route.Success, TTFT: ttft})
			})
			time.Sleep(time.Second / rate)
		}
		wg.Wait()
		t.Logf("picks of a per second: %v", toA)
		share := func(from, to int) float64 {
			n := 0
			for _, c := range toA[from:to] {
				n += c
			}
			return float64(n) / float64(rate*(to-from))
		}
		if got := share(0, slowFrom); got < 0.35 || got > 0.65 {
			t.Errorf("a's share while both take 100ms: got %.2f, want 0.35..0.65", got)
		}
		if got := share(slowFrom+3, slowFrom+4); got > 0.2 {
			t.Errorf("a's share 3s after its TTFT tripled: got %.2f, want at most 0.20", got)
		}
		if got := share(slowFrom+1, slowUntil); got > 0.2 {
			t.Errorf("a's share while slow, from 1s on: got %.2f, want at most 0.20", got)
		}
		if got := share(slowUntil+20, slowUntil+30); got < 0.3 {
			t.Errorf("a's share 20s to 30s after it recovered: got %.2f, want at least 0.30", got)
		}
	})
}
