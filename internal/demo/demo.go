// Package demo is the orchestration behind "streamgate demo": it starts a
// simulated upstream in-process, the gateway as a child process once per GC
// setting (so GOGC and GOMEMLIMIT apply to the gateway alone), drives the
// benchmark through both, and prints the three tables of SPEC.md. Upstreams
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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/streamgate/streamgate/internal/bench"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sim"
)

// Options configure a demo run. Zero values take the documented defaults.
type Options struct {
	// Exe is the streamgate binary whose "serve" subcommand runs the gateway
	// (the running executable, normally). Required.
	Exe string
	// Quick runs smaller loads so the whole demo ends in under a minute on 2 cores.
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

	sizes *[3]load // tests shrink every table's load
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

// steadyProfile is sim-flaky without its faults: the flaky model's second
// route in table 3, so fallback changes reliability, not speed.
const steadyProfile = "sim-steady"

// load is one benchmark size.
type load struct{ concurrency, requests, maxTokens int }

func (o *Options) loads() (gc, cost, flaky load) {
	if o.sizes != nil {
		return o.sizes[0], o.sizes[1], o.sizes[2]
	}
	if o.Quick {
		gc, cost, flaky = load{100, 300, 50}, load{20, 20, 64}, load{50, 200, 64}
	} else {
		gc, cost, flaky = load{300, 1500, 200}, load{50, 150, 200}, load{100, 1000, 200}
	}
	if o.Concurrency > 0 {
		gc.concurrency = o.Concurrency
	}
	if o.Requests > 0 {
		gc.requests = o.Requests
	}
	return gc, cost, flaky
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
	gcLoad, costLoad, flakyLoad := o.loads()

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
		fmt.Fprintf(o.Log, "demo: [1/3] %s: starting gateway, %d streams × %d requests of sim-fast\n", s.label, gcLoad.concurrency, gcLoad.requests)
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
	printGCTable(o.Out, gcRows, gcLoad)

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
			Seed: o.Seed, Price: bench.Price{Input: p.Input, Output: p.Output}, KeepRequests: true,
		})
	}
	fmt.Fprintf(o.Log, "demo: [2/3] model × cost: %d models, %d requests each\n", len(cfgs), costLoad.requests)
	res, err := bench.RunAll(ctx, cfgs, bench.RunOptions{MonthlyTokens: monthlyTokens})
	if err != nil {
		return all, fmt.Errorf("demo: model × cost benchmark: %w", err)
	}
	all.Add(res)
	costRows = res.Runs
	printCostTable(o.Out, costRows, cfgs)

	fmt.Fprintf(o.Log, "demo: [3/3] flaky upstream: direct and through the gateway, %d requests each\n", flakyLoad.requests)
	var flakyRows []bench.RunResult
	for _, t := range []struct{ label, url, key string }{
		{"direct to sim-flaky", simURL + "/v1", ""},
		{"through the gateway", gw.url + "/v1", key},
	} {
		res, err := runBench(ctx, bench.Config{
			BaseURL: t.url, APIKey: t.key, Model: "sim-flaky", Label: t.label,
			Concurrency: flakyLoad.concurrency, Requests: flakyLoad.requests, MaxTokens: flakyLoad.maxTokens,
			Seed: o.Seed, KeepRequests: true,
		})
		if err != nil {
			return all, err
		}
		all.Add(res)
		flakyRows = append(flakyRows, res.Runs...)
	}
	printFlakyTable(o.Out, flakyRows)

	if err := o.write(all); err != nil {
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

// write saves the merged result as JSON and as the bench HTML report.
func (o *Options) write(all *bench.Result) error {
	save := func(path, def string, render func(io.Writer, *bench.Result) error) error {
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
		if err := render(f, all); err != nil {
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
	if err := save(o.JSONPath, "streamgate-demo.json", bench.WriteJSON); err != nil {
		return err
	}
	return save(o.HTMLPath, "streamgate-demo.html", bench.WriteHTML)
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
	fmt.Fprintf(&b, "providers:\n  - {name: sim, kind: openai, base_url: %q}\n", simURL+"/v1")
	fmt.Fprintf(&b, "keys:\n  - {name: demo, key: \"${STREAMGATE_DEMO_KEY}\"}\n")
	fmt.Fprintf(&b, "models:\n")
	for _, m := range d.Models {
		fmt.Fprintf(&b, "  - name: %q\n    price: {input: %g, output: %g}\n    routes:\n", m.Name, m.Price.Input, m.Price.Output)
		for _, r := range m.Routes {
			fmt.Fprintf(&b, "      - {provider: sim, model: %q}\n", r.Model)
		}
	}
	fmt.Fprintf(&b, "  - name: sim-flaky\n    routes:\n      - {provider: sim, model: sim-flaky}\n      - {provider: sim, model: %s}\n", steadyProfile)
	return []byte(b.String())
}

func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func printGCTable(w io.Writer, rows []bench.RunResult, l load) {
	fmt.Fprintf(w, "1. Gateway GC setting × latency (through the gateway: %d streams of 50 chunks/s, %d requests, max_tokens %d; ms)\n", l.concurrency, l.requests, l.maxTokens)
	t := table(w)
	fmt.Fprintln(t, "setting\tTTFT p50\tTTFT p99\tITL p50\tchunk gap p99\tgateway GC pause max\tGC cycles\terrors\t")
	for _, r := range rows {
		pause, cycles := "n/a", "n/a"
		if r.Server != nil {
			pause, cycles = fmt.Sprintf("%.3f", r.Server.GCPauseMaxMs), fmt.Sprintf("%.0f", r.Server.GCCycles)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.Label, f1(r.TTFT.P50), f1(r.TTFT.P99), f2(r.ITL.P50), f2(r.ITL.P99), pause, cycles, r.Failed+r.Interrupted)
	}
	t.Flush()
	fmt.Fprintln(w)
}

func printCostTable(w io.Writer, rows []bench.RunResult, cfgs []bench.Config) {
	fmt.Fprintf(w, "2. Model × cost (published output prices; simulated latency profiles)\n")
	t := table(w)
	fmt.Fprintln(t, "model\toutput $/1M tok\t$/month at 10M output tok\tTTFT p50 ms\tITL p99 ms\tTPS p50\t")
	for i, r := range rows {
		price := cfgs[i].Price.Output
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Model, f2(price), f2(r.MonthlyCost), f1(r.TTFT.P50), f2(r.ITL.P99), f1(r.TPS.P50))
	}
	t.Flush()
	fmt.Fprintln(w)
}

func printFlakyTable(w io.Writer, rows []bench.RunResult) {
	fmt.Fprintf(w, "3. Direct vs through the gateway on a flaky upstream (sim-flaky: 10%% 503 before the stream, 10%% cut mid-stream;\n   the gateway falls back to a steady route before content is sent, a cut after content cannot be undone)\n")
	t := table(w)
	fmt.Fprintln(t, "path\tTTFT mean ms\tTTFT p95 ms\tTPS p50\tfailed before the stream\tinterruption rate\t")
	for _, r := range rows {
		pct := func(n int) string {
			if r.Requests == 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.1f%%", float64(n)/float64(r.Requests)*100)
		}
		// Interrupted streams are also counted in Failed; split them out.
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Label, f1(r.TTFT.Mean), f1(r.TTFT.P95), f1(r.TPS.P50), pct(r.Failed-r.Interrupted), pct(r.Interrupted))
	}
	t.Flush()
}
