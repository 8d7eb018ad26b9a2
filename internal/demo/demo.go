// Package demo is the orchestration behind "streamgate demo": it starts a
// simulated upstream in-process, the gateway as a child process once per GC
// setting (so GOGC and GOMEMLIMIT apply to the gateway alone), drives the
// benchmark through both, and prints the three tables of SPEC.md and a
// fourth: an agent workload with and without prompt-cache affinity. Upstreams
// are simulated: the figures describe the gateway and this machine.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/streamgate/streamgate/internal/bench"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

// Options configure a demo run. Zero values take the documented defaults.
type Options struct {
	// Exe is the streamgate binary whose "serve" subcommand runs the gateway
	// (the running executable, normally). Required.
	Exe string
	// Quick runs smaller loads: the whole demo takes about a minute (64 s
	// measured on 2 shared cores).
	Quick bool
	// Out receives the tables; Log receives progress lines (nil: discarded).
	Out, Log io.Writer
	// JSONPath and HTMLPath name the result files; "" means
	// streamgate-demo.json / streamgate-demo.html in the working directory,
	// "-" means none.
	JSONPath, HTMLPath string
	// Concurrency and Requests override the GC table's load (0 = by mode).
	Concurrency, Requests int
	// Seed makes request sequences and simulated output reproducible (0 = 1).
	Seed uint64

	sizes *[4]load // tests shrink every table's load
}

// gcSettings are the rows of table 1: environment given to the gateway.
var gcSettings = []struct{ label, gogc, memlimit string }{
	{"GOGC=100", "100", ""},
	{"GOGC=400", "400", ""},
	{"GOGC=off,GOMEMLIMIT=1GiB", "off", "1GiB"},
}

// gcPacing makes table 1's streams 50 chunks/s each (TTFT 50ms, ITL 20ms,
// constant), the load of SPEC.md's performance budget, so that the machine
// is loaded but not saturated and the gateway's share stays visible.
func gcPacing() http.Header {
	h := http.Header{}
	h.Set(sim.HeaderTTFT, "50ms")
	h.Set(sim.HeaderTTFTP99, "50ms")
	h.Set(sim.HeaderITL, "20ms")
	h.Set(sim.HeaderITLJitter, "0")
	return h
}

// costModels are the rows of table 2, all priced in the embedded default config.
var costModels = []string{"sim-gpt-4.1", "sim-claude-sonnet-4.5", "sim-gemini-2.5-flash", "sim-deepseek-v3.2"}

// monthlyTokens is the output volume table 2 prices.
const monthlyTokens = 10_000_000

// resilientModel is table 3's flaky model with continue_on_cut and a
// hedged first token (after the route's p95, at most 10 % more requests).
const resilientModel = "sim-flaky-resilient"

// steadyProfile is sim-flaky without its faults: the flaky model's second
// route in table 3, so fallback changes reliability, not speed.
const steadyProfile = "sim-steady"

// Table 4's agent workload: multi-turn sessions (agentSessions.concurrency
// sessions of agentSessions.requests turns) over agentRoutes routes, each
// a provider of agentKeys API keys, with the models' affinity off and on.
const (
	agentRoutes = 3
	agentKeys   = 2
)

// agentModels are table 4's rows: the same routes, affinity off and session.
var agentModels = []struct{ name, affinity string }{{"agent-affinity-off", "off"}, {"agent-affinity-session", "session"}}

// agentReference is table 4's first row: the same workload on one route of
// one key, the cache-read share affinity is measured against (a
// conversation's turns cannot miss a cache there).
const agentReference = "agent-one-key"

// agentPacing gives table 4's streams a constant TTFT of 150 ms plus
// 0.1 ms per prompt token not read from the simulator's prompt cache, and
// 100 chunks/s: the uncached history is what a missed cache costs.
func agentPacing() http.Header {
	h := http.Header{}
	h.Set(sim.HeaderTTFT, "150ms")
	h.Set(sim.HeaderTTFTP99, "150ms")
	h.Set(sim.HeaderITL, "10ms")
	h.Set(sim.HeaderITLJitter, "0")
	h.Set(sim.HeaderPrefillPerToken, "100us")
	return h
}

// load is one benchmark size (table 4: sessions, turns, max_tokens).
type load struct{ concurrency, requests, maxTokens int }

func (o *Options) loads() (gc, cost, flaky, agent load) {
	if o.sizes != nil {
		return o.sizes[0], o.sizes[1], o.sizes[2], o.sizes[3]
	}
	if o.Quick {
		gc, cost, flaky, agent = load{100, 300, 50}, load{20, 20, 64}, load{50, 200, 64}, load{20, 8, 48}
	} else {
		gc, cost, flaky, agent = load{300, 1500, 200}, load{50, 150, 200}, load{100, 1000, 200}, load{50, 20, 64}
	}
	if o.Concurrency > 0 {
		gc.concurrency = o.Concurrency
	}
	if o.Requests > 0 {
		gc.requests = o.Requests
	}
	return gc, cost, flaky, agent
}

// Run runs the demo. It returns the merged benchmark result (also written
// to JSONPath) once every table is printed.
func Run(ctx context.Context, o Options) (*bench.Result, error) {
	if o.Exe == "" {
		return nil, errors.New("demo: no streamgate executable to start the gateway with")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	gcLoad, costLoad, flakyLoad, agentLoad := o.loads()

	dir, err := os.MkdirTemp("", "streamgate-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: temp dir: %w", err)
	}
	defer os.RemoveAll(dir)

	simURL, stopSim, err := startSim(ctx, int64(o.Seed))
	if err != nil {
		return nil, err
	}
	defer stopSim()

	defaults, _, err := config.Default(func(string) string { return "" })
	if err != nil {
		return nil, fmt.Errorf("demo: embedded config: %w", err)
	}
	key := config.NewDevKey()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, gatewayConfig(defaults, simURL, dir), 0o600); err != nil {
		return nil, fmt.Errorf("demo: write gateway config: %w", err)
	}
	env := []string{"STREAMGATE_DEMO_KEY=" + key}

	fmt.Fprintf(o.Out, "streamgate demo: upstreams are SIMULATED (streamgate sim profiles on this machine).\n")
	fmt.Fprintf(o.Out, "The figures show the gateway and this machine, not real providers.\n\n")

	all := &bench.Result{Schema: bench.Schema, StartedAt: time.Now().UTC()}
	// Table 1: one gateway process per GC setting.
	var gcRows []bench.RunResult
	for i, s := range gcSettings {
		fmt.Fprintf(o.Log, "demo: [1/4] %s: starting gateway, %d streams × %d requests of sim-fast\n", s.label, gcLoad.concurrency, gcLoad.requests)
		genv := append(env, "GOGC="+s.gogc)
		if s.memlimit != "" {
			genv = append(genv, "GOMEMLIMIT="+s.memlimit)
		}
		gw, err := startGateway(ctx, o.Exe, cfgPath, genv, o.Log)
		if err != nil {
			return all, err
		}
		res, err := runBench(ctx, bench.Config{
			BaseURL: gw.url + "/v1", APIKey: key, Model: "sim-fast", Label: s.label,
			Concurrency: gcLoad.concurrency, Requests: gcLoad.requests, MaxTokens: gcLoad.maxTokens,
			Warmup: min(gcLoad.concurrency, 50), Seed: o.Seed + uint64(i), Scrape: gw.url + "/metrics",
			Headers: gcPacing(), KeepRequests: true,
		})
		gw.stop()
		if err != nil {
			return all, err
		}
		all.Add(res)
		gcRows = append(gcRows, res.Runs...)
	}
	secs := newSections(gcLoad, agentLoad)
	secs[0].add(gcRows, gcTable(gcRows), labels(gcRows))
	printSection(o.Out, &secs[0])

	// Tables 2 and 3 share one gateway with the default GC setting.
	gw, err := startGateway(ctx, o.Exe, cfgPath, env, o.Log)
	if err != nil {
		return all, err
	}
	defer gw.stop()

	var costRows []bench.RunResult
	var cfgs []bench.Config
	for _, m := range costModels {
		p, _ := defaults.Price(m)
		cfgs = append(cfgs, bench.Config{
			BaseURL: gw.url + "/v1", APIKey: key, Model: m, Label: "cost " + m,
			Concurrency: costLoad.concurrency, Requests: costLoad.requests, MaxTokens: costLoad.maxTokens,
			Seed: o.Seed, Price: p, KeepRequests: true,
		})
	}
	fmt.Fprintf(o.Log, "demo: [2/4] model × cost: %d models, %d requests each\n", len(cfgs), costLoad.requests)
	res, err := bench.RunAll(ctx, cfgs, bench.RunOptions{MonthlyTokens: monthlyTokens})
	if err != nil {
		return all, fmt.Errorf("demo: model × cost benchmark: %w", err)
	}
	all.Add(res)
	costRows = res.Runs
	secs[1].add(costRows, costTable(costRows, cfgs), costModels)
	printSection(o.Out, &secs[1])

	fmt.Fprintf(o.Log, "demo: [3/4] flaky upstream: direct and through the gateway, %d requests each\n", flakyLoad.requests)
	var flakyRows []bench.RunResult
	for _, t := range []struct{ label, url, key, model string }{
		{"direct to sim-flaky", simURL + "/v1", "", "sim-flaky"},
		{"gateway: fallback", gw.url + "/v1", key, "sim-flaky"},
		{"gateway: + continuation, hedging", gw.url + "/v1", key, resilientModel},
	} {
		res, err := runBench(ctx, bench.Config{
			BaseURL: t.url, APIKey: t.key, Model: t.model, Label: t.label,
			Concurrency: flakyLoad.concurrency, Requests: flakyLoad.requests, MaxTokens: flakyLoad.maxTokens,
			Seed: o.Seed, KeepRequests: true,
		})
		if err != nil {
			return all, err
		}
		all.Add(res)
		flakyRows = append(flakyRows, res.Runs...)
	}
	secs[2].add(flakyRows, flakyTable(flakyRows), labels(flakyRows))
	printSection(o.Out, &secs[2])

	fmt.Fprintf(o.Log, "demo: [4/4] agent sessions: %d sessions × %d turns over %d routes × %d keys, affinity off and session\n",
		agentLoad.concurrency, agentLoad.requests, agentRoutes, agentKeys)
	var agentRows []bench.RunResult
	price, _ := defaults.Price(agentUpstream)
	turns := bench.SyntheticPrompts(bench.Length{Mean: agentTurnWords, StdDev: agentTurnWords / 4}, 64, o.Seed)
	rowsOf := []struct{ name, label string }{{agentReference, "one key (reference)"}}
	for _, m := range agentModels {
		rowsOf = append(rowsOf, struct{ name, label string }{m.name, "affinity: " + m.affinity})
	}
	for _, m := range rowsOf {
		res, err := runBench(ctx, bench.Config{
			BaseURL: gw.url + "/v1", APIKey: key, Model: m.name, Label: m.label,
			Sessions: agentLoad.concurrency, Turns: agentLoad.requests, MaxTokens: agentLoad.maxTokens,
			SystemTokens: agentSystemTokens, Dataset: turns, Prompts: "synthetic", Seed: o.Seed, Price: price, Headers: agentPacing(), KeepRequests: true,
		})
		if err != nil {
			return all, err
		}
		all.Add(res)
		agentRows = append(agentRows, res.Runs...)
	}
	ledger := ledgerCosts(ctx, filepath.Join(dir, "usage.db"), agentRows)
	secs[3].add(agentRows, agentTable(agentRows, ledger), labels(agentRows))
	printSection(o.Out, &secs[3])

	headline := demoHeadline(gcRows, costRows, flakyRows, agentRows)
	fmt.Fprintf(o.Out, "Conclusion: %s\n", headline)
	if ws := bench.SummarizeWarnings(all.Warnings); len(ws) > 0 {
		fmt.Fprintf(o.Out, "warning: %s", ws[0])
		if len(ws) > 1 {
			fmt.Fprintf(o.Out, " (and %d more warnings in the report)", len(ws)-1)
		}
		fmt.Fprintln(o.Out)
	}
	if err := o.write(all, secs, headline); err != nil {
		return all, err
	}
	return all, nil
}

func runBench(ctx context.Context, c bench.Config) (*bench.Result, error) {
	res, err := bench.Run(ctx, c)
	if err != nil {
		return res, fmt.Errorf("demo: benchmark %q: %w", c.Label, err)
	}
	return res, nil
}

// write saves the merged result as JSON and the demo's HTML report: the
// three tables, each with the plots of its runs.
func (o *Options) write(all *bench.Result, sections []section, headline string) error {
	save := func(path, def string, render func(io.Writer) error) error {
		if path == "" {
			path = def
		}
		if path == "-" {
			return nil
		}
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if err := render(f); err != nil {
			f.Close()
			return fmt.Errorf("demo: write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("demo: write %s: %w", path, err)
		}
		fmt.Fprintf(o.Out, "wrote %s\n", path)
		return nil
	}
	fmt.Fprintln(o.Out)
	if err := save(o.JSONPath, "streamgate-demo.json", func(w io.Writer) error { return bench.WriteJSON(w, all) }); err != nil {
		return err
	}
	return save(o.HTMLPath, "streamgate-demo.html", func(w io.Writer) error { return writeHTML(w, all, sections, headline) })
}

// writeHTML writes the demo's report: the three tables as the terminal
// shows them, each followed by the plots of its runs.
func writeHTML(w io.Writer, all *bench.Result, sections []section, headline string) error {
	p := &bench.Page{
		Title: "streamgate demo",
		Intro: []string{
			"Upstreams are SIMULATED (streamgate sim profiles on this machine): the figures show the gateway and this machine, not real providers.",
			fmt.Sprintf("started %s · %d benchmark runs · schema %s", all.StartedAt.Format("2006-01-02 15:04:05 UTC"), len(all.Runs), bench.Schema),
		},
		Headline: headline,
		Warnings: bench.SummarizeWarnings(all.Warnings),
		Client:   &all.Client,
	}
	for _, s := range sections {
		p.Sections = append(p.Sections, s.Section)
	}
	return bench.WritePage(w, p)
}

// startSim serves the simulator on a loopback port, with the built-in
// profiles plus sim-steady.
func startSim(ctx context.Context, seed int64) (url string, stop func(), err error) {
	profiles := sim.Profiles()
	flaky, _ := sim.LookupProfile("sim-flaky")
	steady := flaky
	steady.Name, steady.Faults = steadyProfile, sim.Faults{}
	profiles = append(profiles, steady)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("demo: simulator listen: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	srv := sim.New(sim.Options{Profiles: profiles, Seed: seed, ShutdownGrace: time.Second})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(sctx, ln)
	}()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, nil
}

// gatewayConfig renders the gateway's config: the embedded default's models
// and prices, served by the external simulator over real HTTP, plus the
// flaky model of table 3 with a steady second route.
func gatewayConfig(d *config.Config, simURL, dir string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\n")
	fmt.Fprintf(&b, "database: sqlite://%s\n", filepath.Join(dir, "usage.db"))
	fmt.Fprintf(&b, "timeouts: {connect: 5s, first_token: 30s, idle: 30s, total: 0s}\n")
	// The default's simulated providers, each in its dialect, at the
	// external simulator (which speaks all three).
	fmt.Fprintf(&b, "providers:\n")
	for _, p := range d.Providers {
		kind, path := "openai", "/v1"
		switch p.Dialect {
		case "anthropic":
			kind, path = "anthropic", ""
		case "gemini":
			kind, path = "gemini", "/v1beta"
		}
		fmt.Fprintf(&b, "  - {name: %q, kind: %s, base_url: %q}\n", p.Name, kind, simURL+path)
	}
	// Table 4's providers: each a pool of API keys at the simulator, whose
	// prompt cache is per key.
	for i := range agentRoutes {
		fmt.Fprintf(&b, "  - name: %s\n    kind: openai\n    base_url: %q\n    api_keys:\n", agentProvider(i), simURL+"/v1")
		for k := range agentKeys {
			fmt.Fprintf(&b, "      - {name: k%d, key: %s-key-%d}\n", k+1, agentProvider(i), k+1)
		}
	}
	fmt.Fprintf(&b, "  - {name: agent-one, kind: openai, base_url: %q, api_key: agent-one-key-1}\n", simURL+"/v1")
	fmt.Fprintf(&b, "keys:\n  - {name: demo, key: \"${STREAMGATE_DEMO_KEY}\"}\n")
	fmt.Fprintf(&b, "models:\n")
	for _, m := range d.Models {
		fmt.Fprintf(&b, "  - name: %q\n    price: {input: %g, output: %g", m.Name, m.Price.Input, m.Price.Output)
		if p := m.Price.CachedInput; p != nil {
			fmt.Fprintf(&b, ", cached_input: %g", *p)
		}
		if p := m.Price.CacheWrite; p != nil {
			fmt.Fprintf(&b, ", cache_write: %g", *p)
		}
		fmt.Fprintf(&b, "}\n    routes:\n")
		for _, r := range m.Routes {
			fmt.Fprintf(&b, "      - {provider: %q, model: %q}\n", r.Provider, r.Model)
		}
	}
	p, _ := d.Price(agentUpstream)
	fmt.Fprintf(&b, "  - name: sim-flaky\n    routes:\n      - {provider: sim, model: sim-flaky}\n      - {provider: sim, model: %s}\n", steadyProfile)
	fmt.Fprintf(&b, "  - name: %s\n    continue_on_cut: true\n    hedge: {after: p95, budget: 0.1}\n    routes:\n      - {provider: sim, model: sim-flaky}\n      - {provider: sim, model: %s}\n", resilientModel, steadyProfile)
	// Table 4's reference: one route of one key.
	fmt.Fprintf(&b, "  - name: %s\n    price: {input: %g, output: %g", agentReference, p.Input, p.Output)
	if p.CachedInput != nil {
		fmt.Fprintf(&b, ", cached_input: %g", *p.CachedInput)
	}
	fmt.Fprintf(&b, "}\n    routes:\n      - {provider: agent-one, model: %s}\n", agentUpstream)
	// Table 4's models: the same routes and prices, affinity off or on;
	// least-inflight places what affinity does not.
	for _, m := range agentModels {
		fmt.Fprintf(&b, "  - name: %s\n    strategy: least-inflight\n    affinity: %s\n    price: {input: %g, output: %g", m.name, m.affinity, p.Input, p.Output)
		if p.CachedInput != nil {
			fmt.Fprintf(&b, ", cached_input: %g", *p.CachedInput)
		}
		fmt.Fprintf(&b, "}\n    routes:\n")
		for i := range agentRoutes {
			fmt.Fprintf(&b, "      - {provider: %s, model: %s}\n", agentProvider(i), agentUpstream)
		}
	}
	return []byte(b.String())
}

// agentUpstream is the simulated model behind table 4's routes (its
// price is the rows'); agentSystemTokens the system prompt its sessions
// share; agentTurnWords the mean words of a turn's user message (about
// 1.25 simulator tokens a word), an agent's tool output.
const (
	agentUpstream     = "sim-gpt-4.1"
	agentSystemTokens = 1500
	agentTurnWords    = 200
)

func agentProvider(i int) string { return "agent-" + string(rune('a'+i)) }

// section is one of the demo's tables with the runs behind it, printed to
// the terminal and written in the HTML report.
type section struct {
	bench.Section
	heading string // the terminal's title line(s)
}

// newSections returns the four sections, titled, before their runs.
func newSections(gc, agent load) []section {
	agentNote := fmt.Sprintf("An agent workload through the gateway: %d conversations at once, %d turns each, every turn resending a %d-token system prompt and the whole history, "+
		"to which it adds a user message of about %d tokens (an agent's tool output) and an answer of up to %d, over %d routes × %d provider keys of %s; the simulator's prompt cache is per key, and its TTFT is 150 ms + 0.1 ms per prompt token not read from it. "+
		"affinity: off places each request on the least busy route and key, so a conversation's turns scatter over %d caches; affinity: session keeps it on one. "+
		"Cost at %s's prices, cache reads at its cached-input price.",
		agent.concurrency, agent.requests, agentSystemTokens, agentTurnWords*5/4, agent.maxTokens, agentRoutes, agentKeys, agentUpstream, agentRoutes*agentKeys, agentUpstream)
	return []section{
		{Section: bench.Section{Title: "1. Gateway GC setting × latency", Notes: []string{fmt.Sprintf(
			"Through the gateway, one gateway process per setting: %d streams of 50 chunks/s, %d requests, max_tokens %d; times in ms. "+
				"The GC figures are the gateway's own, read from its /metrics over each run. "+
				"An ITL p50 far below the 20 ms pacing means chunks reached the client in bursts, several in one read: the client was behind (a loaded machine), not the gateway faster.", gc.concurrency, gc.requests, gc.maxTokens)}},
			heading: fmt.Sprintf("1. Gateway GC setting × latency (through the gateway: %d streams of 50 chunks/s, %d requests, max_tokens %d; ms)", gc.concurrency, gc.requests, gc.maxTokens)},
		{Section: bench.Section{Title: "2. Model × cost", Notes: []string{
			"Published output prices of the models the simulated profiles are named after; the latency is the simulator's."}},
			heading: "2. Model × cost (published output prices; simulated latency profiles)"},
		{Section: bench.Section{Title: "3. Direct vs through the gateway on a flaky upstream", Notes: []string{
			"sim-flaky: 10% 503 before the stream, 10% cut mid-stream, a heavy first-token tail. With fallback alone the gateway moves a request to a steady route before content is sent, and a cut after content reaches the client; with continue_on_cut the steady route continues a cut answer from where it stopped, and a hedge starts it when the first token is later than the route's p95 (at most 10% more upstream requests). In both gateway rows passive health also ejects sim-flaky for a while after 5 consecutive failures, so it serves fewer of their requests than it would alone."}},
			heading: "3. Direct vs through the gateway on a flaky upstream (sim-flaky: 10% 503 before the stream, 10% cut mid-stream;\n   fallback moves a request to a steady route before content is sent; continuation repairs a cut after content,\n   hedging starts the steady route when the first token is later than the route's p95; passive health\n   ejects sim-flaky for a while after 5 consecutive failures)"},
		{Section: bench.Section{Title: "4. Agent sessions × prompt-cache affinity", Notes: []string{agentNote}},
			heading: fmt.Sprintf("4. Agent sessions × prompt-cache affinity (%d sessions × %d turns, growing history, over %d routes × %d keys;\n   the simulator's cache is per key, TTFT 150 ms + 0.1 ms per uncached prompt token)",
				agent.concurrency, agent.requests, agentRoutes, agentKeys)},
	}
}

// add sets the section's runs, table and plot series names.
func (s *section) add(runs []bench.RunResult, t bench.Table, names []string) {
	s.Runs, s.Tables, s.Names = runs, []bench.Table{t}, names
}

// printSection prints the section's heading and table to the terminal.
func printSection(w io.Writer, s *section) {
	fmt.Fprintln(w, s.heading)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, t := range s.Tables {
		fmt.Fprintln(tw, strings.Join(t.Head, "\t")+"\t")
		for _, row := range t.Rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// fms is a time in ms with two decimals, or three significant digits below
// 0.1 ms: chunks read in one burst are microseconds apart, and "0.00"
// would read as no gap measured.
func fms(v float64) string {
	if v > 0 && v < 0.1 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return f2(v)
}

// defaultGC is the row of table 1 that serve uses unless GOGC or
// GOMEMLIMIT is set (serve's --gc-percent).
const defaultGC = "GOGC=400"

// demoHeadline is the demo's conclusion: the GC setting with the lowest
// median TTFT and by how much (bench.Headline, with the noise), the cost
// spread of the models, and what the gateway did to the flaky upstream.
func demoHeadline(gc, cost, flaky, agent []bench.RunResult) string {
	var parts []string
	if len(gc) > 0 {
		parts = append(parts, "GC: "+bench.Headline(gc)+" serve's default is "+defaultGC+".")
	}
	if len(cost) > 1 {
		lo, hi := cost[0], cost[0]
		for _, r := range cost[1:] {
			if r.MonthlyCost < lo.MonthlyCost {
				lo = r
			}
			if r.MonthlyCost > hi.MonthlyCost {
				hi = r
			}
		}
		if lo.MonthlyCost > 0 {
			parts = append(parts, fmt.Sprintf("Cost: %s costs %.0f× %s for the same output (%s vs %s a month at 10M output tokens and this run's input mix).",
				hi.Model, hi.MonthlyCost/lo.MonthlyCost, lo.Model, money(hi.MonthlyCost), money(lo.MonthlyCost)))
		}
	}
	if len(flaky) == 3 && flaky[0].Requests > 0 && flaky[2].Requests > 0 {
		bad := func(r bench.RunResult) float64 { return 100 * float64(r.Failed) / float64(r.Requests) }
		parts = append(parts, fmt.Sprintf("Flaky upstream: %.1f%% of requests failed or were cut direct, %.1f%% through the gateway with fallback, %.1f%% with continuation and hedging (%d requests each).",
			bad(flaky[0]), bad(flaky[1]), bad(flaky[2]), flaky[0].Requests))
	}
	if len(agent) == 3 && agent[0].CacheReadShare != nil && agent[1].CacheReadShare != nil && agent[2].CacheReadShare != nil {
		one, off, on := agent[0], agent[1], agent[2]
		parts = append(parts, fmt.Sprintf("Agent sessions: affinity read %.0f%% of prompt tokens from the providers' caches (one key: %.0f%%) against %.0f%% without, for %s instead of %s, TTFT p50 %.0f ms instead of %.0f ms.",
			100**on.CacheReadShare, 100**one.CacheReadShare, 100**off.CacheReadShare, money(on.CostUSD), money(off.CostUSD), on.TTFT.P50, off.TTFT.P50))
	}
	return strings.Join(parts, " ")
}

// money is the demo's money format (as the bench report's).
func money(x float64) string {
	if x >= 1 {
		return "$" + strconv.FormatFloat(x, 'f', 2, 64)
	}
	return "$" + strconv.FormatFloat(x, 'g', 3, 64)
}
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

// labels names each run's plot series by its label.
func labels(rows []bench.RunResult) []string {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Label
	}
	return names
}

func gcTable(rows []bench.RunResult) bench.Table {
	t := bench.Table{Head: []string{"setting", "TTFT p50", "TTFT p99", "ITL p50", "chunk gap p99", "gateway GC pause max", "GC cycles", "errors"}}
	for _, r := range rows {
		pause, cycles := bench.NotMeasured, bench.NotMeasured
		if s := r.Server; s != nil {
			if s.GCPauseMaxMs != nil {
				pause = fmt.Sprintf("%.3f", *s.GCPauseMaxMs)
			}
			if s.GCCycles != nil {
				cycles = fmt.Sprintf("%.0f", *s.GCCycles)
			}
		}
		t.Rows = append(t.Rows, []string{r.Label, f1(r.TTFT.P50), f1(r.TTFT.P99), fms(r.ITL.P50), fms(r.ITL.P99), pause, cycles, fmt.Sprint(r.Failed + r.Interrupted)})
	}
	return t
}

func costTable(rows []bench.RunResult, cfgs []bench.Config) bench.Table {
	t := bench.Table{Head: []string{"model", "output $/1M tok", "$/month at 10M output tok (this run's input mix)", "TTFT p50 ms", "ITL p99 ms", "TPS p50"}}
	for i, r := range rows {
		t.Rows = append(t.Rows, []string{r.Model, f2(cfgs[i].Price.Output), f2(r.MonthlyCost), f1(r.TTFT.P50), f2(r.ITL.P99), f1(r.TPS.P50)})
	}
	return t
}

func flakyTable(rows []bench.RunResult) bench.Table {
	t := bench.Table{Head: []string{"path", "TTFT mean ms", "TTFT p95 ms", "TPS p50", "failed before the stream", "interruption rate"}}
	for _, r := range rows {
		pct := func(n int) string {
			if r.Requests == 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.1f%%", float64(n)/float64(r.Requests)*100)
		}
		// Interrupted streams are also counted in Failed; split them out.
		t.Rows = append(t.Rows, []string{r.Label, f1(r.TTFT.Mean), f1(r.TTFT.P95), f1(r.TPS.P50), pct(r.Failed - r.Interrupted), pct(r.Interrupted)})
	}
	return t
}

func agentTable(rows []bench.RunResult, ledger map[string]float64) bench.Table {
	t := bench.Table{Head: []string{"placement", "cost", "ledger cost", "cache-read share", "of one key's", "TTFT p50 ms", "TTFT p99 ms", "later turns TTFT p50 ms", "errors"}}
	var ref *float64
	for _, r := range rows {
		share, of, later := "-", "-", "-"
		if r.CacheReadShare != nil {
			share = fmt.Sprintf("%.1f%%", 100**r.CacheReadShare)
			if ref == nil {
				ref = r.CacheReadShare
			}
			if *ref > 0 {
				of = fmt.Sprintf("%.0f%%", 100**r.CacheReadShare / *ref)
			}
		}
		if s := r.Sessions; s != nil {
			later = f1(s.TTFTLaterTurns.P50)
		}
		lc := "-"
		if c, ok := ledger[r.Model]; ok {
			lc = money(c)
		}
		t.Rows = append(t.Rows, []string{strings.TrimPrefix(r.Label, "affinity: "), money(r.CostUSD), lc, share, of, f1(r.TTFT.P50), f1(r.TTFT.P99), later, fmt.Sprint(r.Failed + r.Interrupted)})
	}
	return t
}

// ledgerCosts reads the gateway's ledger (its SQLite file) for the cost of
// each model of rows, once it holds every request of theirs (the ledger
// is written in batches after the responses): what the gateway billed, to
// set beside what the benchmark priced from the usage it received. A model
// whose entries do not all arrive within 10 s is left out.
func ledgerCosts(ctx context.Context, path string, rows []bench.RunResult) map[string]float64 {
	out := map[string]float64{}
	st, err := usage.Open(ctx, "sqlite://"+path)
	if err != nil {
		return out
	}
	defer st.Close()
	want := map[string]int64{}
	for _, r := range rows {
		want[r.Model] += int64(r.Requests)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := usage.Report(ctx, st, usage.ReportQuery{By: "model"})
		n := 0
		for _, g := range got {
			if w, ok := want[g.Group]; ok && g.Requests == w {
				out[g.Group] = g.CostUSD
				n++
			}
		}
		if err != nil || n == len(want) || time.Now().After(deadline) || ctx.Err() != nil {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}
