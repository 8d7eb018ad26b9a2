package bench

import (
	"strings"
	"testing"
	"time"
)

// The ideal hedge's first token: 2 % of the unhedged requests are late
// (1 s), the rest 10 ms. Hedged at 100 ms, a late one gets 100 + 10 ms
// unless its backup is late too (0.04 % of requests): p99 110 ms. A budget
// of 0.5 % lets only a quarter of the late ones hedge: 1.5 % stay late, p99
// 1 s. The same seed gives the same figures.
func TestIdealHedge(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = 10
	}
	xs[3], xs[70] = 1000, 1000
	for _, tc := range []struct {
		name     string
		budget   float64
		p50, p99 float64
	}{{"budget enough", 0.1, 10, 110}, {"budget binds", 0.005, 10, 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			p50, p99, late := IdealHedge(xs, 100*time.Millisecond, tc.budget, 1)
			if p50 != tc.p50 || p99 != tc.p99 || late != 0.02 {
				t.Errorf("got p50 %v p99 %v late %v, want %v %v 0.02", p50, p99, late, tc.p50, tc.p99)
			}
			if _, again, _ := IdealHedge(xs, 100*time.Millisecond, tc.budget, 1); again != p99 {
				t.Errorf("same seed: got p99 %v, then %v", p99, again)
			}
		})
	}
}

// ReadTTFTs takes the first tokens of successful requests of a
// --requests-out file and refuses one with none.
func TestReadTTFTs(t *testing.T) {
	in := `{"ok":true,"ttft_ms":12.5}
{"ok":false,"ttft_ms":null,"error":"503"}

{"ok":true,"ttft_ms":40}
{"ok":false,"ttft_ms":7,"interrupted":true}
`
	xs, err := ReadTTFTs(strings.NewReader(in))
	if err != nil || len(xs) != 2 || xs[0] != 12.5 || xs[1] != 40 {
		t.Errorf("got %v, %v; want [12.5 40]", xs, err)
	}
	if _, err := ReadTTFTs(strings.NewReader(`{"ok":false,"ttft_ms":null}`)); err == nil {
		t.Error("no successful request: got no error")
	}
}
