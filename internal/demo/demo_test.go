package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/bench"
	"github.com/streamgate/streamgate/internal/bench/pagecheck"

	"github.com/streamgate/streamgate/internal/config"
)

// The rendered gateway config must load and validate like a user's file,
// keep every priced model of the embedded default, and route table 3's
// flaky model to a steady second route.
func TestGatewayConfigLoads(t *testing.T) {
	d, _, err := config.Default(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	data := gatewayConfig(d, "http://127.0.0.1:9", t.TempDir())
	cfg, err := config.Parse("gateway.yaml", data, func(k string) string {
		if k == "STREAMGATE_DEMO_KEY" {
			return "sg-demo-0123456789abcdef"
		}
		return ""
	})
	if err != nil {
		t.Fatalf("rendered config does not load: %v\n%s", err, data)
	}
	for _, m := range costModels {
		want, _ := d.Price(m)
		got, ok := cfg.Price(m)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("price of %s: got %+v (%v), want %+v", m, got, ok, want)
		}
	}
	flaky, ok := cfg.Model("sim-flaky")
	if !ok || len(flaky.Routes) != 2 || flaky.Routes[1].Model != steadyProfile {
		t.Fatalf("sim-flaky routes: got %+v, want sim-flaky then %s", flaky, steadyProfile)
	}
	for name, want := range map[string]config.Provider{
		"sim":           {Kind: "openai", BaseURL: "http://127.0.0.1:9/v1"},
		"sim-anthropic": {Kind: "anthropic", BaseURL: "http://127.0.0.1:9"},
		"sim-gemini":    {Kind: "gemini", BaseURL: "http://127.0.0.1:9/v1beta"},
	} {
		if p, _ := cfg.Provider(name); p == nil || p.Kind != want.Kind || p.BaseURL != want.BaseURL {
			t.Errorf("provider %s: got %+v, want kind %s at %s", name, p, want.Kind, want.BaseURL)
		}
	}
	for _, am := range agentModels {
		m, _ := cfg.Model(am.name)
		if m == nil || m.Affinity != am.affinity || len(m.Routes) != agentRoutes || m.Price.CachedInput == nil {
			t.Fatalf("%s: got %+v, want affinity %s over %d routes with a cached-input price", am.name, m, am.affinity, agentRoutes)
		}
		if p, _ := cfg.Provider(m.Routes[0].Provider); p == nil || len(p.APIKeys) != agentKeys {
			t.Errorf("%s: provider %+v, want a pool of %d keys", am.name, p, agentKeys)
		}
	}
	if m, _ := cfg.Model("sim-claude-sonnet-4.5"); m == nil || m.Routes[0].Provider != "sim-anthropic" {
		t.Errorf("sim-claude-sonnet-4.5: got %+v, want its route through sim-anthropic", m)
	}
}

func TestChildEnvDropsGCSettings(t *testing.T) {
	got := childEnv([]string{"PATH=/bin", "GOGC=50", "GOMEMLIMIT=2GiB"}, []string{"GOGC=off"})
	want := []string{"PATH=/bin", "GOGC=off"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestDemoEndToEnd builds the real binary and runs the whole demo on tiny
// loads: child gateways per GC setting, the simulator, the benchmark, the
// tables and the result files.
func TestDemoEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the demo; skipped with -short")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "streamgate")
	build := exec.Command("go", "build", "-o", exe, "../../cmd/streamgate")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out, log bytes.Buffer
	o := Options{
		Exe: exe, Out: &out, Log: &log,
		JSONPath: filepath.Join(dir, "demo.json"), HTMLPath: filepath.Join(dir, "demo.html"),
		sizes: &[4]load{{4, 8, 16}, {2, 2, 8}, {4, 20, 8}, {3, 3, 8}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("demo: %v\nlog:\n%s", err, log.String())
	}
	text := out.String()
	for _, want := range []string{"SIMULATED", "GOGC=100", "GOGC=400", "GOGC=off,GOMEMLIMIT=1GiB", "sim-claude-sonnet-4.5", "150.00", "gateway: fallback", "continuation"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if got, want := len(res.Runs), len(gcSettings)+len(costModels)+3+len(agentModels)+1; got != want {
		t.Fatalf("runs: got %d, want %d", got, want)
	}
	for i, r := range res.Runs[:len(gcSettings)] {
		if r.Server == nil {
			t.Errorf("run %s: no server figures scraped from the gateway", r.Label)
		}
		if r.Requests != 8 || r.Succeeded != 8 {
			t.Errorf("run %d %s: got %d requests, %d succeeded, want 8 and 8", i, r.Label, r.Requests, r.Succeeded)
		}
	}
	agent := res.Runs[len(res.Runs)-len(agentModels)-1:]
	flaky := res.Runs[:len(res.Runs)-len(agentModels)-1]
	for _, r := range agent {
		if r.Sessions == nil || r.Requests != 9 || r.Succeeded != 9 || r.CacheReadShare == nil || r.CostUSD <= 0 {
			t.Errorf("agent run %s: got %d of %d succeeded, sessions %+v, cache-read share %v, cost %g; want 3 sessions × 3 turns served, a share and a cost",
				r.Label, r.Succeeded, r.Requests, r.Sessions, r.CacheReadShare, r.CostUSD)
		}
	}
	// Table 4 sets what the gateway's ledger billed beside what the
	// benchmark priced from the usage it received: the same to the cent.
	for _, r := range agent {
		line := ""
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), strings.TrimPrefix(r.Label, "affinity: ")) {
				line = l
			}
		}
		if c := money(r.CostUSD); strings.Count(line, c) < 2 {
			t.Errorf("table 4 row of %s: %q, want its cost %s twice (benchmark and ledger)", r.Label, line, c)
		}
	}
	// With affinity a session stays on one key: its later turns read the
	// history the turn before wrote.
	if on := agent[2]; on.Sessions != nil && (on.Sessions.CacheReadShareLater == nil || *on.Sessions.CacheReadShareLater < 0.5) {
		t.Errorf("affinity: session: later turns' cache-read share %v, want at least 0.5", on.Sessions.CacheReadShareLater)
	}
	for _, gw := range flaky[len(flaky)-2:] {
		if !strings.HasPrefix(gw.Label, "gateway: ") || gw.Requests != 20 {
			t.Fatalf("gateway run: got %q with %d requests, want a gateway run with 20", gw.Label, gw.Requests)
		}
		// sim-flaky's 503s come before the stream: the gateway falls back to
		// the steady route, so none of them reach the client.
		if n := gw.Failed - gw.Interrupted; n != 0 {
			t.Errorf("%s: %d requests failed before the stream, want 0 (errors %v)", gw.Label, n, gw.Errors)
		}
	}
	// With continuation a cut answer is continued on the steady route:
	// nothing is interrupted.
	if r := flaky[len(flaky)-1]; r.Interrupted != 0 || r.Succeeded != r.Requests {
		t.Errorf("%s: %d of %d interrupted, %d succeeded; want every request served in full (errors %v)", r.Label, r.Interrupted, r.Requests, r.Succeeded, r.Errors)
	}
	saved, err := bench.ReadJSON(o.JSONPath)
	if err != nil {
		t.Fatalf("read saved result: %v", err)
	}
	if saved.Schema != bench.Schema || len(saved.Runs) != len(res.Runs) {
		t.Errorf("saved result: got schema %q with %d runs, want %q with %d", saved.Schema, len(saved.Runs), bench.Schema, len(res.Runs))
	}
	html, err := os.ReadFile(o.HTMLPath)
	if err != nil || !bytes.Contains(html, []byte("<svg")) || bytes.Contains(html, []byte("no data")) {
		t.Errorf("HTML report: err %v, has svg %v, has an empty plot %v", err, bytes.Contains(html, []byte("<svg")), bytes.Contains(html, []byte("no data")))
	}
	// The report is the demo's three tables, in order, each with its four plots.
	page := string(html)
	titles := []string{"1. Gateway GC setting × latency", "2. Model × cost", "3. Direct vs through the gateway on a flaky upstream", "4. Agent sessions × prompt-cache affinity", "Client self-check"}
	wants := [][]string{{"gateway GC pause max", "GOGC=off,GOMEMLIMIT=1GiB"}, {"$/month at 10M output tok", "150.00"}, {"interruption rate", "gateway: fallback"}, {"cache-read share", "session"}}
	if !strings.Contains(page, "SIMULATED") {
		t.Error("HTML report does not say the upstreams are simulated")
	}
	for i, want := range wants {
		from, to := strings.Index(page, titles[i]), strings.Index(page, titles[i+1])
		if from < 0 || to < from {
			t.Errorf("HTML report: section %q missing or out of order", titles[i])
			continue
		}
		sec := page[from:to]
		for _, w := range want {
			if !strings.Contains(sec, w) {
				t.Errorf("HTML report, section %q lacks %q", titles[i], w)
			}
		}
		if n := strings.Count(sec, "<svg"); n != 4 {
			t.Errorf("HTML report, section %q: got %d plots, want 4", titles[i], n)
		}
	}
	for _, r := range res.Runs[:len(gcSettings)] {
		if r.Server != nil && r.Server.GCPauseMaxMs == nil {
			t.Errorf("run %s: gateway GC pause not measured; the gateway's pause histogram covers the run", r.Label)
		}
	}
	if res.Client.CPUUsPerChunk <= 0 {
		t.Errorf("merged client CPU per chunk: got %g, want > 0", res.Client.CPUUsPerChunk)
	}

	// The report in a 1280 px window: no horizontal scrollbar, every plot
	// and legend inside the page and apart (bench's TestHTMLInChromium
	// checks the bench report, and any report named in STREAMGATE_CHECK_HTML).
	t.Run("chromium", func(t *testing.T) {
		browser := pagecheck.Browser()
		if browser == "" {
			t.Skip("no chromium on PATH (apt-get install chromium): the report's layout at 1280 px is not checked")
		}
		l, err := pagecheck.Measure(ctx, browser, o.HTMLPath, 1280)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("demo report at 1280 px: scrollWidth %d, clientWidth %d, %d plots, %d legend entries, %d tables", l.ScrollWidth, l.ClientWidth, l.Plots, l.Legends, l.Tables)
		if err := l.Err(1280); err != nil {
			t.Errorf("demo report at 1280 px:\n%v", err)
		}
		if l.Plots != 16 || l.Tables != 4 {
			t.Errorf("got %d plots and %d tables, want 16 and 4", l.Plots, l.Tables)
		}
	})
}
