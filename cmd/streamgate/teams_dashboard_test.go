package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveConfig runs `streamgate serve --config cfg` in this process on a free
// loopback port and returns its URL; the server stops when the test ends.
func serveConfig(t *testing.T, cfg string, env map[string]string) (url string, stop func() int) {
	t.Helper()
	return serveConfigStderr(t, cfg, env, &strings.Builder{})
}

// serveConfigStderr is serveConfig writing serve's stderr (its log, at
// warn) to stderr, which may be read once stop returned.
func serveConfigStderr(t *testing.T, cfg string, env map[string]string, stderr *strings.Builder) (url string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	exited := make(chan struct{}) // closed when serve returned code
	code := 0
	go func() {
		code = run(ctx, []string{"serve", "--config", cfg, "--addr", "127.0.0.1:0", "--log-level", "warn"}, func(k string) string { return env[k] }, pw, &lockedWriter{w: stderr})
		pw.Close()
		close(exited)
	}()
	sc := bufio.NewScanner(pr)
	for url == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "streamgate: listening on "); ok {
			url = u
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		cancel()
		t.Fatalf("serve did not start: %s", stderr.String())
	}
	stop = func() int {
		cancel()
		select {
		case <-exited:
			return code
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop within 30s")
			return -1
		}
	}
	t.Cleanup(func() { cancel(); <-exited })
	return url, stop
}

// The dashboard's teams (GET /dashboard/teams): each team's budget (spent,
// remaining, reset) and its cost and cache savings today and over the
// ledger equal `streamgate usage --by team` to the cent (exactly: the same
// query); the request log filters by team.
func TestDashboardTeamsEqualUsageByTeam(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "gw.db")
	cfg := filepath.Join(dir, "gw.yaml")
	yaml := `database: ` + db + `
admin_key: admin-secret-1234567890
providers: [{name: sim, kind: sim}]
teams:
  - {name: search, budget_usd: 1, budget_period: day}
keys:
  - {name: s1, key: sk-search-1, team: search}
  - {name: s2, key: sk-search-2, team: search}
  - {name: solo, key: sk-solo}
models:
  - {name: m1, routes: [{provider: sim, model: sim-fast}], price: {input: 2, output: 8, cached_input: 0.5, cache_write: 2.5}}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, nil, "teams", "create", "--name", "ads", "--budget-usd", "5", "--config", cfg); code != 0 {
		t.Fatalf("teams create: %s", errs)
	}
	code, out, errs := runCLI(t, nil, "keys", "create", "--name", "a1", "--team", "ads", "--config", cfg, "--json")
	var created struct{ Secret string }
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
		t.Fatalf("keys create: %s %s", out, errs)
	}
	url, stop := serveConfig(t, cfg, nil)
	sent := map[string]int{"sk-search-1": 3, "sk-search-2": 2, "sk-solo": 2, created.Secret: 4}
	total := 0
	for key, n := range sent {
		for range n {
			req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(
				`{"model":"m1","stream":true,"max_tokens":5,"messages":[{"role":"system","content":"`+strings.Repeat("long shared prefix ", 800)+`"},{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("X-Sim-TTFT", "1ms")
			req.Header.Set("X-Sim-ITL", "1ms")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("key %s: status %d", key[:6], resp.StatusCode)
			}
			total++
		}
	}
	type budget struct {
		Period, Since, Resets string
		LimitUSD              float64 `json:"limit_usd"`
		SpentUSD              float64 `json:"spent_usd"`
		RemainingUSD          float64 `json:"remaining_usd"`
	}
	type team struct {
		Team       string
		Budget     *budget
		Requests   int64
		CostUSD    float64 `json:"cost_usd"`
		SavingsUSD float64 `json:"savings_usd"`
	}
	var page struct {
		Range string
		Teams []team
	}
	getJSON := func(path string, v any) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer admin-secret-1234567890")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v in %s", path, err, b)
		}
		return resp.StatusCode
	}
	// The ledger's writer batches: wait until every request is in it.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := int64(0)
		if getJSON("/dashboard/teams?range=today", &page) != 200 {
			t.Fatalf("/dashboard/teams: %+v", page)
		}
		for _, tm := range page.Teams {
			n += tm.Requests
		}
		if n == int64(total) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger holds %d requests after 15s, want %d", n, total)
		}
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for _, rg := range []struct{ name, since string }{{"today", today.Format(time.RFC3339)}, {"all", "2000-01-01"}} {
		if getJSON("/dashboard/teams?range="+rg.name, &page) != 200 || page.Range != rg.name {
			t.Fatalf("range %s: %+v", rg.name, page)
		}
		code, out, errs := runCLI(t, nil, "usage", "--config", cfg, "--by", "team", "--json", "--since", rg.since)
		if code != 0 {
			t.Fatalf("usage: %s", errs)
		}
		var rep struct {
			Groups []struct {
				Group          string
				Requests       int64
				CostUSD        float64  `json:"cost_usd"`
				SavingsUSD     float64  `json:"savings_usd"`
				CacheReadShare *float64 `json:"cache_read_share"`
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		got := map[string]team{}
		for _, tm := range page.Teams {
			got[tm.Team] = tm
		}
		if len(rep.Groups) != 3 || len(page.Teams) != 3 {
			t.Errorf("range %s: %d teams on the dashboard, %d groups in usage; want 3 (search, ads, none): %s", rg.name, len(page.Teams), len(rep.Groups), out)
		}
		for _, g := range rep.Groups {
			name := g.Group
			if name == "" {
				name = "(none)"
			}
			d, ok := got[name]
			if !ok || d.Requests != g.Requests || d.CostUSD != g.CostUSD || d.SavingsUSD != g.SavingsUSD {
				t.Errorf("range %s team %q: dashboard %+v, usage --by team %+v; want the same figures", rg.name, name, d, g)
			}
			if g.CostUSD == 0 || g.SavingsUSD == 0 {
				t.Errorf("range %s team %q: cost %v, savings %v; want the prices applied and cache reads saving", rg.name, name, g.CostUSD, g.SavingsUSD)
			}
		}
		search, ads := got["search"], got["ads"]
		if search.Budget == nil || ads.Budget == nil || got["(none)"].Budget != nil {
			t.Fatalf("budgets: search %+v, ads %+v; want both, none for (none)", search.Budget, ads.Budget)
		}
		if search.Budget.SpentUSD != search.CostUSD && rg.name == "today" {
			t.Errorf("search's daily budget spent %v, want today's cost %v", search.Budget.SpentUSD, search.CostUSD)
		}
		if search.Budget.Period != "day" || search.Budget.LimitUSD != 1 || search.Budget.Resets != today.Add(24*time.Hour).Format(time.RFC3339) ||
			search.Budget.RemainingUSD != max(1-search.Budget.SpentUSD, 0) {
			t.Errorf("search's budget: %+v", search.Budget)
		}
		if ads.Budget.Period != "month" || ads.Budget.LimitUSD != 5 || ads.Budget.SpentUSD != ads.CostUSD {
			t.Errorf("ads's budget: %+v, cost %v", ads.Budget, ads.CostUSD)
		}
	}

	var log struct {
		Requests []struct{ Team, Key string }
	}
	if getJSON("/dashboard/requests?team=search&limit=100", &log) != 200 || len(log.Requests) != 5 {
		t.Fatalf("request log of team search: %+v, want 5", log)
	}
	for _, r := range log.Requests {
		if r.Team != "search" || (r.Key != "s1" && r.Key != "s2") {
			t.Errorf("request log of team search: row %+v", r)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// lockedWriter serializes the writes of serve's goroutines (its log lines,
// the probes', its own start and stop lines) to a writer that is not safe
// for concurrent use, as os.Stderr is.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
