package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBuiltinPrompts(t *testing.T) {
	for _, spec := range []string{"", "builtin:en", "builtin:ko"} {
		t.Run(spec, func(t *testing.T) {
			ps, err := LoadPrompts(spec)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) < 24 {
				t.Errorf("got %d prompts, want a few dozen", len(ps))
			}
			minLen, maxLen := 1<<30, 0
			for _, p := range ps {
				text := p.Messages[0].Text()
				n := utf8.RuneCountInString(text)
				minLen, maxLen = min(minLen, n), max(maxLen, n)
				if p.MaxTokens <= 0 {
					t.Errorf("prompt %q has no answer length", text)
				}
				if spec == "builtin:ko" && !hasHangul(text) {
					t.Errorf("Korean prompt without Hangul: %q", text)
				}
			}
			if maxLen < 5*minLen {
				t.Errorf("prompt lengths %d..%d runes, want varied lengths", minLen, maxLen)
			}
		})
	}
}

func TestReadJSONL(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{"prompt and messages", "{\"prompt\":\"a\"}\n\n{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"u\"}],\"max_tokens\":5}\n", 2, ""},
		{"bad json names line", "{\"prompt\":\"a\"}\n{oops\n", 0, "f.jsonl:2:"},
		{"neither field", "{\"text\":\"a\"}\n", 0, "f.jsonl:1: want"},
		{"both fields", "{\"prompt\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}\n", 0, "both"},
		{"no role", "{\"messages\":[{\"content\":\"b\"}]}\n", 0, "no role"},
		{"empty", "\n\n", 0, "no prompts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := ReadJSONL(strings.NewReader(tt.in), "f.jsonl")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error: got %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(ps) != tt.want {
				t.Fatalf("got %d prompts, %v; want %d", len(ps), err, tt.want)
			}
		})
	}
}

func TestShareGPT(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sg.json")
	os.WriteFile(p, []byte(`[
	 {"id":"1","conversations":[{"from":"human","value":"hello there"},{"from":"gpt","value":"`+strings.Repeat("x", 400)+`"}]},
	 {"id":"2","conversations":[{"from":"gpt","value":"no human first"}]},
	 {"id":"3","conversations":[{"from":"human","value":"only human"}]}]`), 0o644)
	for _, spec := range []string{p, "sharegpt:" + p} {
		ps, err := LoadPrompts(spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 1 || ps[0].Messages[0].Text() != "hello there" || ps[0].MaxTokens != 100 {
			t.Errorf("%s: got %+v, want one prompt with 100 answer tokens", spec, ps)
		}
	}
	if _, err := ReadShareGPT([]byte(`{}`), "x.json"); err == nil {
		t.Error("a non-array ShareGPT file: got no error")
	}
}

func TestSyntheticLengths(t *testing.T) {
	l, err := ParseLength("100:10")
	if err != nil || l.Mean != 100 || l.StdDev != 10 {
		t.Fatalf("ParseLength: got %+v, %v", l, err)
	}
	for _, bad := range []string{"", "x", "0", "5:-1", "5:y"} {
		if _, err := ParseLength(bad); err == nil {
			t.Errorf("ParseLength(%q): got no error", bad)
		}
	}
	ps := SyntheticPrompts(Length{Mean: 200}, 10, 1)
	again := SyntheticPrompts(Length{Mean: 200}, 10, 1)
	for i, p := range ps {
		words := len(strings.Fields(p.Messages[0].Text()))
		if words != 200 {
			t.Errorf("prompt %d: got %d words, want 200", i, words)
		}
		if p.Messages[0].Text() != again[i].Messages[0].Text() {
			t.Errorf("prompt %d differs with the same seed", i)
		}
	}
	// Output lengths become max_tokens per request, reproducibly.
	url := newUpstream(t, &upstream{})
	var got [2][]int
	for i := range got {
		res, err := Run(context.Background(), Config{BaseURL: url, Model: "m", Requests: 20, OutputTokens: Length{Mean: 6, StdDev: 2}, KeepRequests: true, Seed: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range res.Runs[0].Records {
			if q.OutputTokens != q.MaxTokens {
				t.Errorf("request %d: got %d tokens, want max_tokens %d", q.Index, q.OutputTokens, q.MaxTokens)
			}
			got[i] = append(got[i], q.MaxTokens)
		}
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
		t.Errorf("same seed: got lengths %v and %v", got[0], got[1])
	}
}

func hasHangul(s string) bool {
	for _, r := range s {
		if r >= 0xAC00 && r <= 0xD7A3 {
			return true
		}
	}
	return false
}

func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	flat := filepath.Join(dir, "p.yaml")
	os.WriteFile(flat, []byte("gpt-4.1: {input: 2, output: 8}\nsim-deepseek-v3.2: {input: 0.28, output: 0.42}\n"), 0o644)
	gw := filepath.Join(dir, "gw.yaml")
	os.WriteFile(gw, []byte("providers: [{name: x, kind: sim}]\nmodels:\n  - name: gpt-4.1\n    routes: [{provider: x, model: y}]\n    price: {input: 2.00, output: 8.00}\n"), 0o644)
	js := filepath.Join(dir, "p.json")
	os.WriteFile(js, []byte(`{"m": {"input": 1, "output": 3}}`), 0o644)
	tests := []struct {
		path, model string
		want        Price
	}{{flat, "gpt-4.1", Price{Input: 2, Output: 8}}, {flat, "sim-deepseek-v3.2", Price{Input: 0.28, Output: 0.42}}, {gw, "gpt-4.1", Price{Input: 2, Output: 8}}, {js, "m", Price{Input: 1, Output: 3}}}
	for _, tt := range tests {
		ps, err := LoadPrices(tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ps[tt.model], tt.want) {
			t.Errorf("%s %s: got %+v, want %+v", filepath.Base(tt.path), tt.model, ps[tt.model], tt.want)
		}
	}
	// Cost of a run: tokens × price.
	url := newUpstream(t, &upstream{})
	res, err := RunAll(context.Background(), []Config{{BaseURL: url, Model: "m", Requests: 4, MaxTokens: 10, Price: Price{Input: 1, Output: 2}}},
		RunOptions{MonthlyTokens: 10e6})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	// 4 requests × (11 prompt tokens × $1 + 10 output tokens × $2) per 1M.
	// Projected monthly: 10M output tokens at the run's own mix of 11
	// input tokens per 10 output, $31 (not $20, the output price alone).
	if want := 4 * (11*1.0 + 10*2.0) / 1e6; !approx(r.CostUSD, want, 1e-12) || !approx(r.MonthlyCost, 31, 1e-9) {
		t.Errorf("cost: got %g and monthly %g, want %g and 31", r.CostUSD, r.MonthlyCost, want)
	}

	// Cache reads and writes the endpoint reports are priced apart: of the
	// 11 prompt tokens, 8 read from the cache and 2 written to it.
	cached, cacheWrite := 0.1, 1.25
	res, err = RunAll(context.Background(), []Config{{BaseURL: url, Model: "m", Requests: 4, MaxTokens: 10, Headers: hdr("X-Test-Cached", "8,2"),
		Price: Price{Input: 1, Output: 2, CachedInput: &cached, CacheWrite: &cacheWrite}}}, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = res.Runs[0]
	if want := 4 * (1*1.0 + 8*0.1 + 2*1.25 + 10*2.0) / 1e6; !approx(r.CostUSD, want, 1e-12) || r.InTok != 44 || r.CacheReadTok != 32 || r.CacheWriteTok != 8 {
		t.Errorf("cached run: got cost %g, input %d, cache reads %d, writes %d; want %g, 44, 32, 8", r.CostUSD, r.InTok, r.CacheReadTok, r.CacheWriteTok, want)
	}
}

func TestScrapeServerStats(t *testing.T) {
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		if n == 1 {
			w.Write([]byte(`# HELP go_sched_pauses_total_gc_seconds x
go_sched_pauses_total_gc_seconds_bucket{le="0.0001"} 5
go_sched_pauses_total_gc_seconds_bucket{le="0.001"} 8
go_sched_pauses_total_gc_seconds_bucket{le="0.01"} 9
go_sched_pauses_total_gc_seconds_bucket{le="+Inf"} 9
go_gc_cycles_total_gc_cycles_total 4
streamgate_gateway_overhead_seconds_sum{model="a",route="x",stage="chunk"} 0.5
streamgate_gateway_overhead_seconds_count{model="a",route="x",stage="chunk"} 1000
`))
			return
		}
		w.Write([]byte(`go_sched_pauses_total_gc_seconds_bucket{le="0.0001"} 9
go_sched_pauses_total_gc_seconds_bucket{le="0.001"} 14
go_sched_pauses_total_gc_seconds_bucket{le="0.01"} 15
go_sched_pauses_total_gc_seconds_bucket{le="+Inf"} 15
go_gc_cycles_total_gc_cycles_total 7
streamgate_gateway_overhead_seconds_sum{model="a",route="x",stage="chunk"} 0.502
streamgate_gateway_overhead_seconds_sum{model="b",route="y",stage="chunk"} 0.002
streamgate_gateway_overhead_seconds_count{model="a",route="x",stage="chunk"} 1500
streamgate_gateway_overhead_seconds_count{model="b",route="y",stage="chunk"} 500
`))
	}))
	defer srv.Close()
	url := newUpstream(t, &upstream{})
	res, err := Run(context.Background(), Config{BaseURL: url, Model: "m", Requests: 2, MaxTokens: 2, Scrape: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Runs[0].Server
	if s == nil {
		t.Fatalf("server stats missing (warnings %v)", res.Runs[0].Warnings)
	}
	// 6 new pauses: 4 ≤ 0.1 ms, 2 in (0.1, 1] ms → max bucket 1 ms.
	if s.GCPauseMaxMs == nil || *s.GCPauseMaxMs != 1 || s.GCCycles == nil || *s.GCCycles != 3 || !approx(s.OverheadMs["chunk"], 0.004/1000*1000, 1e-9) {
		t.Errorf("got %s, want pause max 1 ms, 3 cycles, chunk overhead mean 0.004 ms", optText(s.GCPauseMaxMs, "pause %g")+" "+optText(s.GCCycles, "cycles %g")+fmt.Sprint(s.OverheadMs))
	}
}
