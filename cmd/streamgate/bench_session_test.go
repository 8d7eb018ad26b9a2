package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchSessionUsageErrors(t *testing.T) {
	base := []string{"bench", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"requests", []string{"--sessions", "2", "--requests", "10"}, "--requests and --sessions exclude each other"},
		{"concurrency", []string{"--sessions", "2", "--concurrency", "4"}, "--concurrency and --sessions exclude each other"},
		{"rate", []string{"--sessions", "2", "--rate", "5"}, "--rate and --sessions exclude each other"},
		{"duration", []string{"--sessions", "2", "--duration", "10s"}, "--duration and --sessions exclude each other"},
		{"warmup", []string{"--sessions", "2", "--warmup", "3"}, "--warmup and --sessions exclude each other"},
		{"trace", []string{"--sessions", "2", "--trace", "t.jsonl"}, "--trace and --sessions exclude each other"},
		{"zero sessions", []string{"--sessions", "0"}, "--sessions 0: want at least 1"},
		{"zero turns", []string{"--sessions", "2", "--turns", "0"}, "--turns 0: want at least 1"},
		{"negative think", []string{"--sessions", "2", "--think-time", "-1s"}, "--think-time -1s: want a non-negative duration"},
		{"session id", []string{"--sessions", "2", "--session-id", "cookie"}, `--session-id "cookie": want one of header, body, none`},
		{"turns without sessions", []string{"--turns", "3"}, "--turns needs --sessions"},
		{"think without sessions", []string{"--think-time", "1s"}, "--think-time needs --sessions"},
		{"id without sessions", []string{"--session-id", "body"}, "--session-id needs --sessions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, nil, append(base, c.args...)...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("got exit %d, stderr %q; want 2 and one line containing %q", code, stderr, c.want)
			}
		})
	}
}

// TestBenchSessionCLI runs sessions against the simulator and checks the
// table's session and cost lines and the JSON's fields.
func TestBenchSessionCLI(t *testing.T) {
	url := benchSim(t)
	dir := t.TempDir()
	js, html, prices := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html"), filepath.Join(dir, "p.yaml")
	os.WriteFile(prices, []byte("m: {input: 2, output: 8, cached_input: 0.5}\n"), 0o644)
	code, stdout, stderr := runCLI(t, nil, "bench", "--base-url", url, "--model", "m", "--sessions", "3", "--turns", "4",
		"--think-time", "1ms", "--max-tokens", "12", "--prices", prices, "--json", js, "--html", html)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"s=3×4", "3 sessions × 4 turns, think 1ms, session id header; cache-read share", "cache reads, 0 cache writes"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout: got\n%s\nwant %q", stdout, want)
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Config struct {
			Requests  int    `json:"requests"`
			Sessions  int    `json:"sessions"`
			Turns     int    `json:"turns"`
			ThinkTime string `json:"think_time"`
			SessionID string `json:"session_id"`
		} `json:"config"`
		Runs []struct {
			Requests       int      `json:"requests"`
			CostUSD        float64  `json:"cost_usd"`
			CacheReadShare *float64 `json:"cache_read_share"`
			Sessions       *struct {
				Count          int `json:"count"`
				Turns          int `json:"turns"`
				TTFTFirstTurn  struct{ N int }
				TTFTLaterTurns struct{ N int }
			} `json:"sessions"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	c := res.Config
	if c.Requests != 12 || c.Sessions != 3 || c.Turns != 4 || c.ThinkTime != "1ms" || c.SessionID != "header" {
		t.Errorf("config: got %+v, want 12 requests of 3 sessions × 4 turns, think 1ms, id header", c)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("runs: got %d, want 1", len(res.Runs))
	}
	r := res.Runs[0]
	if r.Requests != 12 || r.CostUSD <= 0 || r.CacheReadShare == nil || *r.CacheReadShare <= 0.5 || r.Sessions == nil ||
		r.Sessions.Count != 3 || r.Sessions.Turns != 4 {
		t.Errorf("run: got %+v, want 12 requests, a cost, a cache-read share > 0.5 and the sessions", r)
	}
	if page, _ := os.ReadFile(html); !strings.Contains(string(page), "Multi-turn sessions") {
		t.Errorf("HTML report: no table of the sessions")
	}
	if code, stdout, stderr := runCLI(t, nil, "bench", "compare", js, js); code != 0 || !strings.Contains(stdout, "cache-read share") {
		t.Errorf("compare: got exit %d\n%s%s\nwant the cache-read share compared", code, stdout, stderr)
	}
}

// TestBenchHelpNamesSessionFlags wants every session flag and the
// cache-read share's definition in bench --help.
func TestBenchHelpNamesSessionFlags(t *testing.T) {
	_, stdout, _ := runCLI(t, nil, "bench", "--help")
	for _, want := range []string{"--sessions", "--turns", "--think-time", "--session-id", "--system-tokens",
		"cache-read share (cache-read tokens / prompt tokens", "X-Session-Id", "prompt_cache_key", "metadata.user_id"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bench --help: no %q", want)
		}
	}
}
