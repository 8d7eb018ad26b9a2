package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchTraceUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.jsonl")
	os.WriteFile(tr, []byte("{\"at_ms\":0,\"input_tokens\":10,\"output_tokens\":2}\n{\"at_ms\":5,\"output_tokens\":2}\n"), 0o644)
	unknown := filepath.Join(dir, "u.txt")
	os.WriteFile(unknown, []byte("hello\n"), 0o644)
	base := []string{"bench", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"rate", []string{"--trace", tr, "--rate", "5"}, "--rate and --trace exclude each other"},
		{"prompts", []string{"--trace", tr, "--prompts", "builtin:ko"}, "--prompts and --trace exclude each other"},
		{"max tokens", []string{"--trace", tr, "--max-tokens", "5"}, "--max-tokens and --trace exclude each other"},
		{"warmup", []string{"--trace", tr, "--warmup", "5"}, "--warmup and --trace exclude each other"},
		{"format", []string{"--trace", tr, "--trace-format", "burstgpt"}, `--trace-format "burstgpt": want one of mooncake, azure, jsonl`},
		{"speed", []string{"--trace", tr, "--trace-speed", "0"}, "--trace-speed 0: want a positive number"},
		{"window", []string{"--trace", tr, "--trace-window", "9m:1m"}, `--trace-window: trace window "9m:1m"`},
		{"speed without trace", []string{"--trace-speed", "2"}, "--trace-speed needs --trace"},
		{"bad line", []string{"--trace", tr}, tr + `:2: want "prompt" or "input_tokens"`},
		{"undetected", []string{"--trace", unknown}, "cannot tell its format from the first line: pass --trace-format mooncake|azure|jsonl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, nil, append(base, c.args...)...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("got exit %d, stderr %q; want 2 and one line containing %q", code, stderr, c.want)
			}
		})
	}
	code, _, stderr := runCLI(t, nil, append(base, "--trace", filepath.Join(dir, "missing.csv"))...)
	if code != 1 || !strings.Contains(stderr, "missing.csv") {
		t.Errorf("missing file: got exit %d, stderr %q; want 1 naming the file", code, stderr)
	}
}

// TestBenchTraceCLI replays the Azure sample (format from the extension)
// sped up, and checks the JSON's trace fields and the table's trace line.
func TestBenchTraceCLI(t *testing.T) {
	url := benchSim(t)
	js := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, nil, "bench", "--base-url", url, "--model", "m", "--trace", "../../internal/bench/testdata/trace-azure.csv",
		"--trace-speed", "4", "--trace-window", "1s", "--json", js)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "trace ×4") || !strings.Contains(stdout, "schedule lag") ||
		!strings.Contains(stdout, "input 2854/2854 (0 differ), output 154/155 (1 differ)") {
		t.Errorf("stdout: got\n%s\nwant the trace run, its schedule lag and its token counts", stdout)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Config struct {
			Trace       string  `json:"trace"`
			TraceFormat string  `json:"trace_format"`
			TraceSpeed  float64 `json:"trace_speed"`
			TraceWindow string  `json:"trace_window"`
		} `json:"config"`
		Runs []struct {
			Requests    int                `json:"requests"`
			ScheduleLag map[string]float64 `json:"schedule_lag_ms"`
			CacheShare  *float64           `json:"cache_read_share"`
			Trace       map[string]any     `json:"trace"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	c := res.Config
	if c.TraceFormat != "azure" || c.TraceSpeed != 4 || c.TraceWindow != "0s:1s" || !strings.HasSuffix(c.Trace, "trace-azure.csv") {
		t.Errorf("config: got %+v, want the trace, azure, speed 4, window 0s:1s", c)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("runs: got %d, want 1", len(res.Runs))
	}
	r := res.Runs[0]
	if r.Requests != 4 || r.ScheduleLag == nil || r.CacheShare == nil {
		t.Errorf("run: got %d requests, lag %v, cache share %v; want 4 with both", r.Requests, r.ScheduleLag, r.CacheShare)
	}
	// The row recording 0 generated tokens asked for 1 (max_tokens cannot be 0): it differs.
	for k, want := range map[string]float64{"entries": 4, "recorded_output_tokens": 154, "achieved_output_tokens": 155, "output_mismatch": 1,
		"recorded_input_tokens": 2854, "achieved_input_tokens": 2854, "input_mismatch": 0} {
		if got, _ := r.Trace[k].(float64); got != want {
			t.Errorf("trace.%s: got %v, want %v", k, r.Trace[k], want)
		}
	}
}
