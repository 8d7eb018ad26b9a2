package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

const exampleProfiles = `
profiles:
  - name: gpt-4o
    source: "a test"
    ttft: {quantiles: {p0: 80ms, p50: 300ms, p90: 700ms, p99: 2s, p100: 5s}}
    itl: {histogram: {le: [5ms, 10ms, 20ms, 50ms, +Inf], counts: [10, 400, 900, 990, 1000]}}
    prefill_per_token: 50us
    tokens: {quantiles: {p0: 10, p50: 180, p100: 900}}
    tokens_per_chunk: {weights: {1: 0.2, 4: 0.5, 8: 0.3}}
    hourly: [1, 1, 1, 1, 1, 1, 1, 1, 1.2, 1.4, 1.5, 1.5, 1.5, 1.5, 1.4, 1.3, 1.2, 1.1, 1, 1, 1, 1, 1, 1]
    faults: {fail_status: 429, fail_rate: 0.02, cut_rate: 0.01, stall_for: 3s, stall_rate: 0.01}
  - name: plain
    ttft: 250ms
    ttft_p99: 800ms
    itl: 20ms
    itl_jitter: 0.2
    tokens: 100
    tokens_per_chunk: 4
default: plain
`

func TestReadProfiles(t *testing.T) {
	f, err := ReadProfiles(strings.NewReader(exampleProfiles))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Profiles) != 2 || f.Default != "plain" {
		t.Fatalf("got %d profiles, default %q; want 2, plain", len(f.Profiles), f.Default)
	}
	p := f.Profiles[0]
	if p.TTFTDist == nil || p.ITLDist == nil || p.TokensDist == nil || p.ChunkDist == nil || p.Hourly == nil {
		t.Fatalf("gpt-4o: got %+v, want every distribution set", p)
	}
	if got := time.Duration(p.TTFTDist.Quantile(0.9)); got != 700*time.Millisecond {
		t.Errorf("ttft p90: got %v, want 700ms", got)
	}
	if got := p.TokensDist.Quantile(0.5); got != 180 {
		t.Errorf("tokens p50: got %v, want 180", got)
	}
	if got := p.Hourly[10]; got != 1.5 {
		t.Errorf("hourly[10]: got %v, want 1.5", got)
	}
	if p.PrefillPerToken != 50*time.Microsecond || p.Faults.FailStatus != 429 || p.Faults.FailRate != 0.02 ||
		p.Faults.StallFor != 3*time.Second || p.Source != "a test" {
		t.Errorf("gpt-4o scalars: got %+v", p)
	}
	q := f.Profiles[1]
	want := Profile{Name: "plain", TTFT: 250 * time.Millisecond, TTFTP99: 800 * time.Millisecond, ITL: 20 * time.Millisecond,
		ITLJitter: 0.2, Tokens: 100, TokensPerChunk: 4, Lang: "en"}
	if q != want {
		t.Errorf("plain: got %+v, want %+v", q, want)
	}

	// Written and read back, the tables keep their points (to the µs).
	var b strings.Builder
	if err := WriteProfiles(&b, []string{"a header"}, f.Profiles, f.Default); err != nil {
		t.Fatal(err)
	}
	g, err := ReadProfiles(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("reading back %s: %v", b.String(), err)
	}
	if !strings.HasPrefix(b.String(), "# a header\n") || g.Default != "plain" || g.Profiles[1] != want {
		t.Errorf("round trip: got %+v from\n%s", g, b.String())
	}
	r := g.Profiles[0]
	for _, pair := range [][2]*Dist{{p.TTFTDist, r.TTFTDist}, {p.ITLDist, r.ITLDist}} {
		for _, q := range []float64{0, 0.25, 0.5, 0.9, 0.99, 1} {
			if a, b := pair[0].Quantile(q), pair[1].Quantile(q); math.Abs(a-b) > float64(time.Microsecond) {
				t.Errorf("round trip at p%g: got %v, want %v", q*100, time.Duration(b), time.Duration(a))
			}
		}
	}
	if r.ChunkDist.Mean() != p.ChunkDist.Mean() || *r.Hourly != *p.Hourly || r.Faults != p.Faults {
		t.Errorf("round trip: got %+v, want %+v", r, p)
	}
}

func TestReadProfilesErrors(t *testing.T) {
	for _, tt := range []struct{ name, file, want string }{
		{"empty", "", "empty"},
		{"unknown key", "profiles:\n  - name: a\n    ttft_p50: 1s\n", "ttft_p50"},
		{"bad duration", "profiles:\n  - name: a\n    itl: soon\n", "itl"},
		{"bad quantile", "profiles:\n  - name: a\n    ttft: {quantiles: {median: 1s, p0: 1ms, p100: 2s}}\n", "median"},
		{"no p100", "profiles:\n  - name: a\n    ttft: {quantiles: {p0: 1ms, p50: 2ms}}\n", "p100"},
		{"hourly", "profiles:\n  - name: a\n    hourly: [1, 2]\n", "hourly"},
		{"zero hour", "profiles:\n  - name: a\n    hourly: [0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]\n", "hourly"},
		{"rate", "profiles:\n  - name: a\n    faults: {cut_rate: 2}\n", "cut-rate"},
		{"p99 with a table", "profiles:\n  - name: a\n    ttft: {quantiles: {p0: 1ms, p100: 2ms}}\n    ttft_p99: 1s\n", "ttft_p99"},
		{"both", "profiles:\n  - name: a\n    itl: {quantiles: {p0: 1ms, p100: 2ms}, histogram: {le: [1ms], counts: [1]}}\n", "exclude"},
		{"repeated", "profiles:\n  - name: a\n  - name: a\n", "repeated"},
		{"default", "profiles:\n  - name: a\ndefault: b\n", "default"},
		{"no name", "profiles:\n  - ttft: 1s\n", "name"},
		{"weights", "profiles:\n  - name: a\n    tokens_per_chunk: {weights: {0: 1}}\n", "tokens_per_chunk"},
	} {
		_, err := ReadProfiles(strings.NewReader(tt.file))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %q", tt.name, err, tt.want)
		}
	}
}
