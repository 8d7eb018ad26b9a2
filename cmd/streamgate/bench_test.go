package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/bench"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usd"
)

func benchSim(t *testing.T) string {
	t.Helper()
	p := sim.DefaultProfile()
	p.TTFT, p.TTFTP99, p.ITL, p.ITLJitter = 2*time.Millisecond, 2*time.Millisecond, time.Millisecond, 0
	srv := httptest.NewServer(sim.New(sim.Options{Profile: p, Profiles: []sim.Profile{}, Stamp: true}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBenchUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no base url", []string{"bench", "--model", "m"}, "--base-url is required"},
		{"no model", []string{"bench", "--base-url", "http://x/v1"}, "--model is required"},
		{"bad url", []string{"bench", "--base-url", "x/v1", "--model", "m"}, "want http:// or https://"},
		{"bad concurrency", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--concurrency", "1,a"}, "--concurrency"},
		{"zero concurrency", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--concurrency", "0"}, "at least 1"},
		{"bad rate", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--rate", "0"}, "--rate must be positive"},
		{"bad header", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--header", "nokv"}, "want K=V"},
		{"bad goodput", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--goodput", "speed:1"}, "unknown objective"},
		{"bad output tokens", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--output-tokens", "x"}, "--output-tokens"},
		{"unknown flag", []string{"bench", "--nope"}, "unknown flag"},
		{"unknown builtin", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--prompts", "builtin:fr"}, "unknown builtin"},
		{"compare one file", []string{"bench", "compare", "a.json"}, "at least two"},
		{"hedge after alone", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--hedge-after", "400ms"}, "needs --hedge-ideal-from"},
		{"hedge ideal without after", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--hedge-ideal-from", "p.jsonl"}, "needs --hedge-after"},
		{"hedge budget 0", []string{"bench", "--base-url", "http://x/v1", "--model", "m", "--hedge-ideal-from", "p.jsonl", "--hedge-after", "1s", "--hedge-budget", "0"}, "--hedge-budget 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, nil, tt.args...)
			if code != 2 {
				t.Errorf("exit: got %d, want 2 (stderr %q)", code, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr: got %q, want one line containing %q", stderr, tt.want)
			}
		})
	}
}

func TestBenchBadPromptsFileNamesLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.jsonl")
	os.WriteFile(p, []byte("{\"prompt\":\"hi\"}\n\n{\"nope\":1}\n"), 0o644)
	code, _, stderr := runCLI(t, nil, "bench", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--prompts", p)
	if code != 2 || !strings.Contains(stderr, p+":3:") {
		t.Errorf("got exit %d stderr %q, want 2 naming %s:3", code, stderr, p)
	}
}

func TestBenchRunsAndSaves(t *testing.T) {
	url := benchSim(t)
	dir := t.TempDir()
	js, csv, reqs := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.jsonl")
	code, stdout, stderr := runCLI(t, map[string]string{"OPENAI_API_KEY": "sk-secret-value-1234"},
		"bench", "--base-url", url, "--model", "a,b", "--requests", "6", "--concurrency", "1,3", "--max-tokens", "5",
		"--prompts", "builtin:ko", "--json", js, "--csv", csv, "--requests-out", reqs, "--label", "t",
		"--header", "X-Sim-Tokens=5", "--goodput", "ttft:60000")
	if code != 0 {
		t.Fatalf("exit: got %d, want 0; stderr %s", code, stderr)
	}
	if !strings.Contains(stdout, "TTFT p50") || strings.Count(stdout, "t a") < 2 {
		t.Errorf("stdout: got\n%s\nwant the table with two rows per model", stdout)
	}
	if strings.Contains(stdout+stderr, "secret") {
		t.Error("the API key was printed")
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "secret-value") {
		t.Error("the API key is in the JSON result")
	}
	var res struct {
		Schema    string         `json:"schema"`
		StartedAt time.Time      `json:"started_at"`
		Config    map[string]any `json:"config"`
		Runs      []struct {
			Label, Model string
			Concurrency  int
			Requests     int
			Succeeded    int
			OutputTokens int                `json:"output_tokens"`
			TokenSource  string             `json:"token_source"`
			TTFT         map[string]float64 `json:"ttft_ms"`
			Goodput      map[string]any     `json:"goodput"`
		} `json:"runs"`
		Client map[string]any `json:"client"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Schema != "streamgate.bench/v1" || res.StartedAt.IsZero() || len(res.Runs) != 4 {
		t.Fatalf("got schema %q started %v runs %d, want streamgate.bench/v1, a time, 4 runs", res.Schema, res.StartedAt, len(res.Runs))
	}
	for i, r := range res.Runs {
		if r.Requests != 6 || r.Succeeded != 6 || r.OutputTokens != 30 || r.TokenSource != "usage" || r.Label != "t" || r.Goodput == nil {
			t.Errorf("run %d: got %+v, want 6 ok, 30 tokens from usage, label t, goodput", i, r)
		}
		if _, ok := r.TTFT["p99"]; !ok {
			t.Errorf("run %d: ttft_ms.p99 missing", i)
		}
	}
	if res.Runs[1].Model != "a" || res.Runs[1].Concurrency != 3 || res.Runs[2].Model != "b" {
		t.Errorf("run order: got %s/c%d then %s, want a/c3 then b", res.Runs[1].Model, res.Runs[1].Concurrency, res.Runs[2].Model)
	}
	if k, _ := res.Config["api_key"].(string); k == "" || strings.Contains(k, "secret") {
		t.Errorf("config.api_key: got %q, want a redacted key", k)
	}
	for _, k := range []string{"gc_pause_max_ms", "sched_lag_p99_ms", "cpu_us_per_chunk", "measurement_delay_ms"} {
		if _, ok := res.Client[k]; !ok {
			t.Errorf("client.%s missing", k)
		}
	}
	if c, _ := os.ReadFile(csv); strings.Count(string(c), "\n") != 5 {
		t.Errorf("csv: got %d lines, want 5", strings.Count(string(c), "\n"))
	}
	if r, _ := os.ReadFile(reqs); strings.Count(string(r), "\n") != 24 {
		t.Errorf("requests-out: got %d lines, want 24", strings.Count(string(r), "\n"))
	}

	// compare the saved result with itself: every change is ~.
	code, stdout, stderr = runCLI(t, nil, "bench", "compare", js, js)
	if code != 0 || !strings.Contains(stdout, "TTFT p99 ms") || !strings.Contains(stdout, "+0.0%") {
		t.Errorf("compare: got exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestBenchOpenLoopCLI(t *testing.T) {
	url := benchSim(t)
	code, stdout, stderr := runCLI(t, nil, "bench", "--base-url", url, "--model", "m", "--rate", "200", "--requests", "20",
		"--max-tokens", "3", "--seed", "9", "--burstiness", "0.5")
	if code != 0 || !strings.Contains(stdout, "r=200") || !strings.Contains(stdout, "schedule lag") {
		t.Errorf("got exit %d\n%s%s\nwant a run at r=200 with its schedule lag", code, stdout, stderr)
	}
}

// A benchmark in which every request failed exits 1 with one line, after
// printing and saving the result.
func TestBenchAllFailedExitsOne(t *testing.T) {
	url := benchSim(t)
	js := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, nil, "bench", "--base-url", url, "--model", "m", "--requests", "3",
		"--max-tokens", "5", "--header", "X-Sim-Fail-Status=503", "--json", js)
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "all 3 requests failed") {
		t.Fatalf("got exit %d stderr %q, want 1 and one line naming the 3 failures", code, stderr)
	}
	if !strings.Contains(stdout, "TTFT p50") {
		t.Errorf("stdout: got %q, want the table", stdout)
	}
	if _, err := os.Stat(js); err != nil {
		t.Errorf("result not saved: %v", err)
	}
}

// readmeConfig is the example config of docs/configuration.md, kept equal to
// the page by bench's TestReadmeConfigIsTheReadmes.
var readmeConfig = filepath.Join("..", "..", "internal", "bench", "testdata", "readme-config.yaml")

// bench --prices reads any file "streamgate serve --config" accepts, with
// ${VAR} expanded as the gateway does; the key variables, which prices do
// not need, may be unset.
func TestBenchPricesAcceptsServeConfig(t *testing.T) {
	url := benchSim(t)
	set := map[string]string{"OPENAI_API_KEY": "sk-test-0123456789", "ANTHROPIC_KEY_1": "sk-ant-test-1", "ANTHROPIC_KEY_2": "sk-ant-test-2", "GEMINI_API_KEY": "gm-test", "STREAMGATE_DEV_KEY": "sg-dev-0123456789abcdef", "APP_KEY": "sg-app-0123456789abcdef"}
	if _, err := config.Load(readmeConfig, func(k string) string { return set[k] }); err != nil {
		t.Fatalf("serve --config would reject docs/configuration.md's example: %v", err)
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
	}{{"key variables set", set}, {"key variables unset", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			js := filepath.Join(t.TempDir(), "r.json")
			code, stdout, stderr := runCLI(t, tt.env, "bench", "--base-url", url, "--model", "gpt-4.1", "--requests", "2",
				"--max-tokens", "5", "--prices", readmeConfig, "--json", js)
			if code != 0 {
				t.Fatalf("exit: got %d, want 0; stderr %s", code, stderr)
			}
			b, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Runs []struct {
					CostUSD float64 `json:"cost_usd"`
					OutTok  int     `json:"output_tokens"`
					InTok   int     `json:"input_tokens"`
				} `json:"runs"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			r := res.Runs[0]
			if want := (float64(r.InTok)*2 + float64(r.OutTok)*8) / 1e6; r.OutTok == 0 || r.CostUSD != want {
				t.Errorf("cost_usd: got %g for %d in / %d out tokens, want %g ($2/$8 per 1M)", r.CostUSD, r.InTok, r.OutTok, want)
			}
			// 10M output tokens at the run's own input:output mix.
			if want := "projected monthly " + usd.Format(r.CostUSD/float64(r.OutTok)*10e6) + " at this mix"; !strings.Contains(stdout, want) {
				t.Errorf("stdout: got\n%s\nwant %q", stdout, want)
			}
		})
	}
}

func TestBenchPricesBadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gw.yaml")
	os.WriteFile(p, []byte("listen: 127.0.0.1:8080\nproviders: [{name: s, kind: sim}]\nmodels:\n  - {name: m, routes: [{provider: s, model: x}], prcie: {input: 1, output: 2}}\n"), 0o644)
	code, _, stderr := runCLI(t, nil, "bench", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--prices", p)
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, p+":4:") || !strings.Contains(stderr, "prcie") {
		t.Errorf("got exit %d stderr %q, want 2 and one line naming %s:4 and the field prcie", code, stderr, p)
	}
}

// compare pairs runs by label, model and load, not by position, names the
// runs it could not pair and prints plain numbers.
func TestBenchCompareDifferentOrders(t *testing.T) {
	run := func(label, model string, c int, rate, ttft float64) bench.RunResult {
		return bench.RunResult{Label: label, Model: model, Concurrency: c, RequestedRate: rate, Requests: 100, Succeeded: 100,
			TTFT: bench.Dist{P50: ttft, P99: 2 * ttft, N: 100}, Errors: map[string]int{}}
	}
	dir := t.TempDir()
	save := func(name string, runs ...bench.RunResult) string {
		p := filepath.Join(dir, name)
		var b bytes.Buffer
		if err := bench.WriteJSON(&b, &bench.Result{Schema: bench.Schema, Runs: runs}); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p, b.Bytes(), 0o644)
		return p
	}
	a := save("a.json", run("t", "m1", 1, 0, 1150.3), run("t", "m2", 4, 0, 20), run("t", "m1", 0, 5, 40), run("t", "gone", 1, 0, 9))
	b := save("b.json", run("t", "m1", 0, 5, 44), run("t", "m2", 4, 0, 22), run("t", "new", 1, 0, 9), run("t", "m1", 1, 0, 1200.7))
	code, stdout, stderr := runCLI(t, nil, "bench", "compare", a, b)
	if code != 0 {
		t.Fatalf("exit: got %d, want 0; stderr %s", code, stderr)
	}
	// The TTFT p50 line of each run's block: base value, other value.
	got := map[string]string{}
	block := ""
	for l := range strings.SplitSeq(stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "t" {
			block = strings.Join(f[:3], " ")
		}
		if f := strings.Fields(l); len(f) > 4 && strings.Join(f[:3], " ") == "TTFT p50 ms" {
			got[block] = f[3] + " " + f[4]
		}
	}
	want := map[string]string{"t m1 c=1": "1150 1201", "t m2 c=4": "20 22", "t m1 r=5": "40 44"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: TTFT p50 got %q, want %q\n%s", k, got[k], w, stdout)
		}
	}
	if len(got) != len(want) {
		t.Errorf("paired blocks: got %v, want %v", got, want)
	}
	for _, w := range []string{"not paired: " + a + ": t gone c=1", "not paired: " + b + ": t new c=1"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	if strings.Contains(stdout, "e+") {
		t.Errorf("stdout has a number in exponent form:\n%s", stdout)
	}
	for l := range strings.SplitSeq(stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "goodput" && (len(f) < 3 || f[1] != "-" || f[2] != "-") {
			t.Errorf("goodput line: got %q, want - for the absent figure", l)
		}
	}
}

// --hedge-ideal-from: the ideal hedge from an earlier run's requests is in
// the table's last line and in each JSON run (hedge_ideal), with the run's
// ratio to it.
func TestBenchHedgeIdeal(t *testing.T) {
	url := benchSim(t)
	dir := t.TempDir()
	plain, js := filepath.Join(dir, "plain.jsonl"), filepath.Join(dir, "h.json")
	args := []string{"bench", "--base-url", url, "--model", "m", "--requests", "20", "--concurrency", "2", "--max-tokens", "2"}
	if code, _, stderr := runCLI(t, nil, append(args, "--requests-out", plain)...); code != 0 {
		t.Fatalf("unhedged run: exit %d, stderr %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, nil, append(args, "--json", js, "--hedge-ideal-from", plain, "--hedge-after", "1ms", "--hedge-budget", "0.1")...)
	if code != 0 || !strings.Contains(stdout, "hedge ideal (after 1 ms, budget 0.1, from 20 unhedged first tokens") {
		t.Fatalf("got exit %d\n%s%s\nwant the hedge ideal's line", code, stdout, stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Runs []struct {
			TTFT  map[string]float64 `json:"ttft_ms"`
			Ideal *bench.HedgeIdeal  `json:"hedge_ideal"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	h := res.Runs[0].Ideal
	if h == nil || h.Samples != 20 || h.AfterMs != 1 || h.Budget != 0.1 || !(h.TTFTP99Ms > 0) || h.Ratio != res.Runs[0].TTFT["p99"]/h.TTFTP99Ms {
		t.Errorf("hedge_ideal: got %+v, want 20 samples, after 1 ms, budget 0.1, a p99 and the run's ratio to it", h)
	}
}
