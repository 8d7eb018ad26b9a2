package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRepeatsPoolAndSpread(t *testing.T) {
	url := newUpstream(t, &upstream{})
	res, err := RunAll(context.Background(), []Config{{BaseURL: url, Model: "m", Requests: 5, Concurrency: 2, MaxTokens: 3}}, RunOptions{Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Repeats != 3 || r.Requests != 15 || r.OutTok != 45 {
		t.Errorf("got %d repeats, %d requests, %d tokens; want 3, 15, 45", r.Repeats, r.Requests, r.OutTok)
	}
	s, ok := r.Spread["ttft_p50"]
	if !ok || s.Min > s.Median || s.Median > s.Max {
		t.Errorf("spread ttft_p50: got %+v (present %v), want min <= median <= max", s, ok)
	}
}

func TestWriteCompare(t *testing.T) {
	mk := func(ttft float64, spread *Spread) *Result {
		r := RunResult{Model: "m", Concurrency: 1, Requests: 100, Succeeded: 100, TTFT: Dist{P50: ttft, P99: ttft * 2, N: 100}}
		if spread != nil {
			r.Spread = map[string]Spread{"ttft_p50": *spread}
		}
		return &Result{Schema: Schema, Runs: []RunResult{r}}
	}
	tests := []struct {
		name string
		a, b *Result
		want string // the TTFT p50 line's change and verdict
	}{
		{"noise without repeats", mk(100, nil), mk(101, nil), "+1.0% ~"},
		{"worse without repeats", mk(100, nil), mk(150, nil), "+50.0% -"},
		{"better without repeats", mk(100, nil), mk(50, nil), "-50.0% +"},
		{"overlapping repeats", mk(100, &Spread{100, 80, 120}), mk(115, &Spread{115, 110, 130}), "+15.0% ~"},
		{"separate repeats", mk(100, &Spread{100, 98, 102}), mk(110, &Spread{110, 108, 112}), "+10.0% -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteCompare(&b, []string{"a.json", "b.json"}, tt.a, tt.b); err != nil {
				t.Fatal(err)
			}
			var line string
			for l := range strings.SplitSeq(b.String(), "\n") {
				if f := strings.Fields(l); len(f) > 3 && strings.Join(f[:3], " ") == "TTFT p50 ms" {
					line = strings.Join(f[len(f)-2:], " ")
				}
			}
			if line != tt.want {
				t.Errorf("TTFT p50 line: got %q, want %q", line, tt.want)
			}
		})
	}
	if err := WriteCompare(&strings.Builder{}, []string{"a"}, mk(1, nil)); err == nil {
		t.Error("compare of one result: got no error")
	}
	other := mk(1, nil)
	other.Runs[0].Model = "other"
	var b strings.Builder
	if err := WriteCompare(&b, []string{"a.json", "b.json"}, mk(1, nil), other); err == nil || !strings.Contains(b.String(), "not paired: b.json: other c=1") {
		t.Errorf("compare of results without a common run: got error %v and\n%s\nwant an error after naming the unpaired runs", err, b.String())
	}
}

// TestRepeatsAchievedRate checks that pooling --runs repeats does not add
// the repeats' requests up against one repeat's time span: each repeat's
// send offsets start again at zero, so the pooled achieved rate must come
// from the repeats' own spans. Sends are never early, so the achieved rate
// cannot be much above the intended schedule's (the bug gave ~3x).
func TestRepeatsAchievedRate(t *testing.T) {
	const rate, n, runs = 50.0, 8, 3
	url := newUpstream(t, &upstream{})
	res, err := RunAll(context.Background(), []Config{{BaseURL: url, Model: "m", Requests: n, Rate: rate, MaxTokens: 2, Seed: 7}}, RunOptions{Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	arr := NewArrivals(rate, 1, 7^0xa11)
	var last time.Duration
	for i := range n {
		last = arr.Next(i == 0)
	}
	intended := float64(n-1) / last.Seconds()
	r := res.Runs[0]
	if r.Requests != n*runs {
		t.Fatalf("requests: got %d, want %d", r.Requests, n*runs)
	}
	if r.AchievedRate <= 0 || r.AchievedRate > 1.5*intended {
		t.Errorf("achieved rate over %d repeats: got %.1f/s, want at most the intended %.1f/s (+50%%)", runs, r.AchievedRate, intended)
	}
}
