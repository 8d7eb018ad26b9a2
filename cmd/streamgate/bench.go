package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/bench"
	"github.com/streamgate/streamgate/internal/config"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

// benchFlags are the raw flag values of "streamgate bench".
type benchFlags struct {
	baseURL, apiKey             string
	api                         string
	models                      []string
	requests, warmup            int
	concurrency, rate           string
	burstiness                  float64
	duration, grace, rampUp     time.Duration
	prompts                     string
	maxTokens                   int
	inputTokens, outputTokens   string
	extraBody                   string
	headers                     []string
	jsonOut, csvOut, htmlOut    string
	requestsOut                 string
	seed                        uint64
	label                       string
	idleTimeout, connectTimeout time.Duration
	http2                       bool
	caFile                      string
	goodput                     string
	scrape                      string
	prices                      string
	monthlyTokens               string
	noProgress                  bool
	runs                        int
	cpuProfile                  string
	trace, traceFormat          string
	traceSpeed                  float64
	traceWindow                 string
	sessions, turns             int
	thinkTime                   time.Duration
	sessionID                   string
	transport                   string
	systemTokens                int
	hedgeIdealFrom              string
	hedgeAfter                  time.Duration
	hedgeBudget                 float64
}

func newBenchCmd(e *env) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench --base-url URL --model M [flags]",
		Short: "Benchmark streaming chat completions of any OpenAI-compatible endpoint",
		Long: `bench sends streaming chat completions to an OpenAI-compatible endpoint and
measures every chunk as it arrives: closed loop (--concurrency) or open loop
(--rate, Poisson or gamma arrivals), with sweeps by comma lists. It prints a
table and can save JSON ("streamgate.bench/v1"), CSV, per-request JSONL and a
self-contained HTML report. The API key comes from --api-key, else
STREAMGATE_API_KEY, else OPENAI_API_KEY. Ctrl-C stops, prints and saves the
partial result.

--trace replays a recorded workload open loop: each request at its recorded
arrival (scaled by --trace-speed, sliced by --trace-window), its prompt
synthesised to the recorded length (Mooncake hash_ids: the same block id, the
same 512 tokens of text, so shared prefixes are shared), max_tokens and the
simulator's X-Sim-Tokens its recorded output length. The report adds the
schedule lag and the recorded-vs-achieved token counts.

--sessions N --turns K runs N conversations at once, each a closed loop of K
turns: turn k sends a shared system prompt (--system-tokens), every earlier
user message with the answer as streamed back, then a new user message from
--prompts (the first names the session, so sessions differ after the system
prompt). --think-time D waits D ±25% between a turn's end and the next send.
A failed turn ends its session. Sessions replace --requests (N×K are sent),
--concurrency, --rate, --duration and --warmup (the first turns are reported
apart). Each session has an identity "<run-id>-<n>", sent per --session-id:
header (X-Session-Id), body (prompt_cache_key; messages: metadata.user_id)
or none. --api messages marks the last message with cache_control. The
report adds the cache-read share (cache-read tokens / prompt tokens, from
usage: cached_tokens, Anthropic's cache_read_input_tokens with prompt tokens
= input + cache reads + cache writes), the cost (with --prices; cache reads
at cached_input, writes at cache_write) and the TTFT of first and later turns.

Every result carries a self-check of the client: its GC pause max, scheduling
lag p99, CPU per chunk, and against "streamgate sim --stamp" its measurement
delay (arrival - server stamp), so you know whether the client skewed figures.

` + bench.Definitions,
		Example: `  streamgate bench --base-url http://127.0.0.1:8081/v1 --model sim-fast --requests 200 --concurrency 1,8,64
  streamgate bench --base-url http://127.0.0.1:8080/v1 --model gpt-4.1 --rate 5 --duration 60s --json out.json
  streamgate bench --base-url http://127.0.0.1:8080/v1 --model sim-fast --trace mooncake.jsonl --trace-window 10m --trace-speed 2
  streamgate bench --base-url http://127.0.0.1:8080/v1 --model gpt-4.1 --sessions 50 --turns 20 --think-time 2s --prices config.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, e, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "base-url", "", "API root of the endpoint, e.g. http://127.0.0.1:8080/v1 (required)")
	fl.StringVar(&f.apiKey, "api-key", "", "API key (default from STREAMGATE_API_KEY, then OPENAI_API_KEY)")
	fl.StringVar(&f.api, "api", "chat", "client API the load speaks: chat (POST {base}/chat/completions), messages (Anthropic, {base}/messages) or responses (OpenAI Responses, {base}/responses)")
	fl.StringSliceVar(&f.models, "model", nil, "model name; repeat or comma-separate for one run per model (required)")
	fl.IntVar(&f.requests, "requests", 100, "measured requests per run (with --duration: a cap, 0 = none)")
	fl.StringVar(&f.concurrency, "concurrency", "", "open streams (closed loop), a comma list sweeps; with --rate, a cap (default 1, with --rate none)")
	fl.StringVar(&f.rate, "rate", "", "open loop: mean requests per second; a comma list sweeps")
	fl.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape of the gaps between --rate arrivals: 1 = Poisson, < 1 burstier, > 1 more regular")
	fl.DurationVar(&f.duration, "duration", 0, "send for this long instead of a number of requests")
	fl.DurationVar(&f.grace, "grace", 30*time.Second, "with --duration: how long open streams may finish before they are cancelled (incomplete)")
	fl.DurationVar(&f.rampUp, "ramp-up", 0, "closed loop: start the streams evenly over this time")
	fl.IntVar(&f.warmup, "warmup", 0, "requests sent first and left out of the figures")
	fl.StringVar(&f.prompts, "prompts", "builtin:en", "dataset: builtin:en, builtin:ko, FILE.jsonl ({\"messages\":[...]} or {\"prompt\":...} lines), FILE.json or sharegpt:FILE (ShareGPT)")
	fl.IntVar(&f.maxTokens, "max-tokens", 0, "max_tokens of every request (0: --output-tokens, else the dataset's answer length)")
	fl.StringVar(&f.inputTokens, "input-tokens", "", "synthetic prompts of MEAN[:STDDEV] tokens instead of --prompts")
	fl.StringVar(&f.outputTokens, "output-tokens", "", "synthetic answer lengths MEAN[:STDDEV], sent as max_tokens")
	fl.StringVar(&f.extraBody, "extra-body", "", `JSON object merged into every request body, e.g. '{"ignore_eos":true}'`)
	fl.StringArrayVar(&f.headers, "header", nil, "extra request header K=V (repeatable), e.g. X-Sim-ITL=20ms")
	fl.StringVar(&f.jsonOut, "json", "", "write the result as JSON (streamgate.bench/v1) to FILE")
	fl.StringVar(&f.csvOut, "csv", "", "write one CSV row per run to FILE")
	fl.StringVar(&f.htmlOut, "html", "", "write a self-contained HTML report with plots to FILE")
	fl.StringVar(&f.requestsOut, "requests-out", "", "write every request (send time, TTFT, chunk arrival offsets, tokens, status, error) as JSON lines to FILE")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the request sequence and arrival times (same seed, same sequence)")
	fl.StringVar(&f.label, "label", "", "label of the runs in tables and files")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 60*time.Second, "a stream with no event for this long is interrupted")
	fl.DurationVar(&f.connectTimeout, "connect-timeout", 10*time.Second, "dial and TLS handshake timeout")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM certificate authorities that verify an https:// --base-url, in place of the system's (a private endpoint, sim --tls-ca-out)")
	fl.BoolVar(&f.http2, "http2", false, "let streams share connections over HTTP/2 (h2c on http://); default one HTTP/1.1 connection per stream")
	fl.StringVar(&f.goodput, "goodput", "", "SLOs in ms for goodput, e.g. ttft:500,itl:50,e2e:10000 (keys ttft, itl, tpot, e2e, gap)")
	fl.StringVar(&f.scrape, "scrape", "", "Prometheus URL (the gateway's /metrics) read before and after each run for server GC and overhead")
	fl.StringVar(&f.prices, "prices", "", "prices per model, USD per 1M tokens: YAML/JSON {model: {input: 2, output: 8}} or any gateway config file serve --config accepts (${VAR} expanded; unset key variables are fine)")
	fl.StringVar(&f.monthlyTokens, "monthly-tokens", "10M", "monthly output tokens for the projected cost (with --prices)")
	fl.IntVar(&f.runs, "runs", 1, "repeat every point N times: figures pool the repeats, and each figure's median and range over them is saved for compare")
	fl.BoolVar(&f.noProgress, "no-progress", false, "no progress bar even on a terminal")
	fl.StringVar(&f.trace, "trace", "", "replay a trace FILE: its arrivals open loop, prompts of its lengths, max_tokens its output lengths (instead of --rate, --prompts and lengths)")
	fl.StringVar(&f.traceFormat, "trace-format", "", "format of --trace: mooncake (JSONL timestamp, input_length, output_length, hash_ids), azure (CSV TIMESTAMP, ContextTokens, GeneratedTokens) or jsonl (at_ms, prompt or input_tokens, output_tokens, session); default: from the file's extension or first line")
	fl.Float64Var(&f.traceSpeed, "trace-speed", 1, "scale the trace's time: 2 replays it twice as fast")
	fl.StringVar(&f.traceWindow, "trace-window", "", "replay a slice of the trace from its first row: END (10m), START:END (5m:15m) or START: (to the end)")
	fl.IntVar(&f.sessions, "sessions", 0, "run N multi-turn conversations at once, each a closed loop of --turns turns whose history grows (replaces --requests, --concurrency, --rate, --duration, --warmup)")
	fl.IntVar(&f.turns, "turns", bench.DefaultTurns, "with --sessions: turns per session")
	fl.DurationVar(&f.thinkTime, "think-time", 0, "with --sessions: wait this long (±25%) between a turn's end and the next send")
	fl.StringVar(&f.transport, "transport", bench.TransportHTTP, "with --sessions and --api responses: http (each turn a POST with the whole conversation) or ws (one WebSocket per session, OpenAI's WebSocket mode: a warm-up with the system prompt, then each turn's new message only, chained with previous_response_id and store: false, as Codex's built-in provider sends them)")
	fl.StringVar(&f.sessionID, "session-id", bench.SessionIDHeader, "with --sessions: how a session tells its identity <run-id>-<n>: header (X-Session-Id), body (prompt_cache_key; messages: metadata.user_id) or none")
	fl.IntVar(&f.systemTokens, "system-tokens", 1500, "with --sessions: tokens of the system prompt every session shares (0: none)")
	fl.StringVar(&f.hedgeIdealFrom, "hedge-ideal-from", "", "an unhedged run's --requests-out FILE: report what an ideal hedge (--hedge-after, --hedge-budget) would give, min(X1, after + X2) resampled from its first-token times, and this run's TTFT p99 against it (hedge_ideal)")
	fl.DurationVar(&f.hedgeAfter, "hedge-after", 0, "with --hedge-ideal-from: the hedge's delay (the model's hedge.after)")
	fl.Float64Var(&f.hedgeBudget, "hedge-budget", 1, "with --hedge-ideal-from: backups per request at most (the model's hedge.budget)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the client to FILE")
	_ = fl.MarkHidden("cpuprofile")
	cmd.AddCommand(newBenchCompareCmd(e))
	return cmd
}

// parseList reads a comma list of numbers; empty gives nil.
func parseList[T int | float64](flag, s string, parse func(string) (T, error)) ([]T, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []T
	for p := range strings.SplitSeq(s, ",") {
		v, err := parse(strings.TrimSpace(p))
		if err != nil || v < 0 {
			return nil, usagef("--%s %q: want a non-negative number or a comma list of them", flag, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseCount reads "10M", "1.5k", "2G" or a plain number.
func parseCount(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult = 1e3
	case strings.HasSuffix(s, "M"):
		mult = 1e6
	case strings.HasSuffix(s, "G"), strings.HasSuffix(s, "B"):
		mult = 1e9
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("count %q: want a number with an optional k, M or G", s)
	}
	return v * mult, nil
}

// benchConfigs turns the flags into one Config per model and load point.
func benchConfigs(e *env, f *benchFlags, fs interface{ Changed(string) bool }) ([]bench.Config, *bench.RunOptions, error) {
	if f.baseURL == "" {
		return nil, nil, usagef("bench: --base-url is required")
	}
	if !strings.HasPrefix(f.baseURL, "http://") && !strings.HasPrefix(f.baseURL, "https://") {
		return nil, nil, usagef("bench: --base-url %q: want http:// or https://", f.baseURL)
	}
	var models []string
	for _, m := range f.models {
		if m = strings.TrimSpace(m); m != "" {
			models = append(models, m)
		}
	}
	if len(models) == 0 {
		return nil, nil, usagef("bench: --model is required")
	}
	concs, err := parseList("concurrency", f.concurrency, strconv.Atoi)
	if err != nil {
		return nil, nil, err
	}
	rates, err := parseList("rate", f.rate, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rates {
		if r == 0 {
			return nil, nil, usagef("bench: --rate must be positive")
		}
	}
	if f.trace == "" {
		for _, name := range []string{"trace-format", "trace-speed", "trace-window"} {
			if fs.Changed(name) {
				return nil, nil, usagef("bench: --%s needs --trace", name)
			}
		}
	}
	if f.sessions != 0 || fs.Changed("sessions") {
		if err := checkSessionFlags(f, fs); err != nil {
			return nil, nil, err
		}
		concs, rates = []int{0}, nil
	} else {
		for _, name := range []string{"turns", "think-time", "session-id", "system-tokens"} {
			if fs.Changed(name) {
				return nil, nil, usagef("bench: --%s needs --sessions", name)
			}
		}
	}
	switch {
	case f.sessions > 0: // checkSessionFlags set the load
	case f.trace != "":
		if err := checkTraceFlags(f, fs); err != nil {
			return nil, nil, err
		}
		if concs == nil {
			concs = []int{0}
		}
	case len(rates) == 0:
		if concs == nil {
			concs = []int{1}
		}
		for _, c := range concs {
			if c == 0 {
				return nil, nil, usagef("bench: --concurrency must be at least 1 without --rate")
			}
		}
	case concs == nil:
		concs = []int{0}
	}
	if f.burstiness <= 0 {
		return nil, nil, usagef("bench: --burstiness must be positive")
	}
	if !slices.Contains(bench.APIs, f.api) {
		return nil, nil, usagef("bench: --api %q: want one of %s", f.api, strings.Join(bench.APIs, ", "))
	}
	if f.requests < 0 || f.warmup < 0 || f.maxTokens < 0 || f.duration < 0 {
		return nil, nil, usagef("bench: --requests, --warmup, --max-tokens and --duration must not be negative")
	}
	requests := f.requests
	if (f.duration > 0 || f.trace != "" || f.sessions > 0) && !fs.Changed("requests") {
		requests = 0
	}
	if requests == 0 && f.duration == 0 && f.trace == "" && f.sessions == 0 {
		return nil, nil, usagef("bench: --requests 0 needs --duration")
	}
	base := bench.Config{
		BaseURL: f.baseURL, API: f.api, APIKey: f.apiKey, Label: f.label, Requests: requests, Warmup: f.warmup,
		Duration: f.duration, Grace: f.grace, RampUp: f.rampUp, Burstiness: f.burstiness, Prompts: f.prompts,
		MaxTokens: f.maxTokens, ExtraBody: f.extraBody, Seed: f.seed, IdleTimeout: f.idleTimeout,
		ConnectTimeout: f.connectTimeout, HTTP2: f.http2, Scrape: f.scrape,
		KeepRequests: f.requestsOut != "" || f.htmlOut != "",
	}
	if f.sessions > 0 {
		base.Sessions, base.Turns, base.ThinkTime, base.SessionID, base.SystemTokens = f.sessions, f.turns, f.thinkTime, f.sessionID, f.systemTokens
		base.Transport = f.transport
	}
	if f.caFile != "" {
		pool, err := config.LoadCAs(f.caFile)
		if err != nil {
			return nil, nil, usagef("bench: --ca-file: %v", err)
		}
		base.RootCAs = pool
	}
	if base.APIKey == "" {
		base.APIKey = e.getenv("STREAMGATE_API_KEY")
	}
	if base.APIKey == "" {
		base.APIKey = e.getenv("OPENAI_API_KEY")
	}
	if len(f.headers) > 0 {
		base.Headers = http.Header{}
		for _, h := range f.headers {
			k, v, ok := strings.Cut(h, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, nil, usagef("bench: --header %q: want K=V", h)
			}
			base.Headers.Add(strings.TrimSpace(k), v)
		}
	}
	if f.extraBody != "" && !strings.HasPrefix(strings.TrimSpace(f.extraBody), "{") {
		return nil, nil, usagef("bench: --extra-body: want a JSON object")
	}
	if f.outputTokens != "" {
		if base.OutputTokens, err = bench.ParseLength(f.outputTokens); err != nil {
			return nil, nil, usagef("bench: --output-tokens: %v", err)
		}
	}
	if f.inputTokens != "" {
		in, err := bench.ParseLength(f.inputTokens)
		if err != nil {
			return nil, nil, usagef("bench: --input-tokens: %v", err)
		}
		if fs.Changed("prompts") {
			return nil, nil, usagef("bench: --input-tokens and --prompts exclude each other")
		}
		base.Dataset = bench.SyntheticPrompts(in, 256, f.seed)
		base.Prompts = "synthetic:" + f.inputTokens
	}
	if f.trace != "" {
		window, err := bench.ParseTraceWindow(f.traceWindow)
		if err != nil {
			return nil, nil, usagef("bench: --trace-window: %v", err)
		}
		if base.Trace, err = bench.LoadTrace(f.trace, f.traceFormat, window); err != nil {
			return nil, nil, usageOrRuntime(err)
		}
		base.TraceSpeed = f.traceSpeed
	}
	if base.Goodput, err = bench.ParseSLO(f.goodput); err != nil {
		return nil, nil, usagef("bench: --goodput: %v", err)
	}
	if f.runs < 1 {
		return nil, nil, usagef("bench: --runs must be at least 1")
	}
	opts := &bench.RunOptions{Runs: f.runs}
	var prices map[string]bench.Price
	if f.prices != "" {
		if prices, err = bench.LoadPrices(f.prices, e.getenv); err != nil {
			return nil, nil, usageOrRuntime(err)
		}
		if opts.MonthlyTokens, err = parseCount(f.monthlyTokens); err != nil {
			return nil, nil, usagef("bench: --monthly-tokens: %v", err)
		}
	}
	var cfgs []bench.Config
	for _, m := range models {
		for _, r := range append([]float64{}, ratesOrZero(rates)...) {
			for _, c := range concs {
				cfg := base
				cfg.Model, cfg.Rate, cfg.Concurrency = m, r, c
				cfg.Price = prices[m]
				cfgs = append(cfgs, cfg)
			}
		}
	}
	echo := bench.Echo(cfgs)
	echo.InputTokens, echo.OutputTokens, echo.Goodput = f.inputTokens, f.outputTokens, f.goodput
	echo.MonthlyTokens = opts.MonthlyTokens
	opts.Echo = &echo
	return cfgs, opts, nil
}

// checkTraceFlags refuses the flags a trace replaces (arrivals, prompts,
// lengths) and checks the trace's own.
func checkTraceFlags(f *benchFlags, fs interface{ Changed(string) bool }) error {
	for _, name := range []string{"rate", "burstiness", "prompts", "input-tokens", "output-tokens", "max-tokens", "warmup", "ramp-up"} {
		if fs.Changed(name) {
			return usagef("bench: --%s and --trace exclude each other: the trace sets arrivals, prompts and lengths", name)
		}
	}
	if f.traceFormat != "" && !slices.Contains(bench.TraceFormats, f.traceFormat) {
		return usagef("bench: --trace-format %q: want one of %s", f.traceFormat, strings.Join(bench.TraceFormats, ", "))
	}
	if !(f.traceSpeed > 0) || f.traceSpeed > 1e6 {
		return usagef("bench: --trace-speed %v: want a positive number (2 = twice as fast)", f.traceSpeed)
	}
	return nil
}

// checkSessionFlags refuses the flags sessions replace (the load's size
// and shape) and checks the sessions' own.
func checkSessionFlags(f *benchFlags, fs interface{ Changed(string) bool }) error {
	for _, name := range []string{"requests", "concurrency", "rate", "burstiness", "duration", "grace", "warmup", "trace"} {
		if fs.Changed(name) {
			return usagef("bench: --%s and --sessions exclude each other: sessions set the load (N conversations of --turns turns, N×K requests)", name)
		}
	}
	switch {
	case f.sessions < 1:
		return usagef("bench: --sessions %d: want at least 1", f.sessions)
	case f.turns < 1:
		return usagef("bench: --turns %d: want at least 1", f.turns)
	case f.thinkTime < 0:
		return usagef("bench: --think-time %s: want a non-negative duration", f.thinkTime)
	case f.systemTokens < 0:
		return usagef("bench: --system-tokens %d: want 0 or more", f.systemTokens)
	case !slices.Contains(bench.SessionIDModes, f.sessionID):
		return usagef("bench: --session-id %q: want one of %s", f.sessionID, strings.Join(bench.SessionIDModes, ", "))
	}
	return nil
}

func ratesOrZero(r []float64) []float64 {
	if len(r) == 0 {
		return []float64{0}
	}
	return r
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runBench(cmd *cobra.Command, e *env, f *benchFlags) error {
	cfgs, opts, err := benchConfigs(e, f, cmd.Flags())
	if err != nil {
		return err
	}
	ideal, err := hedgeSamples(f, cmd.Flags())
	if err != nil {
		return err
	}
	// Only when both are terminals: a redirected stdout means a script is reading.
	if !f.noProgress && isTerminal(e.stdout) && isTerminal(e.stderr) {
		opts.Progress = e.stderr
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	res, runErr := bench.RunAll(cmd.Context(), cfgs, *opts)
	if res == nil {
		if runErr != nil && !errors.Is(runErr, bench.ErrInterrupted) {
			return usageOrRuntime(runErr)
		}
		return runErr
	}
	if err := bench.WriteTable(e.stdout, res.Runs...); err != nil {
		return err
	}
	if ideal != nil {
		bench.SetHedgeIdeal(res, f.hedgeIdealFrom, ideal, f.hedgeAfter, f.hedgeBudget, f.seed)
		if err := bench.WriteHedgeIdeal(e.stdout, res.Runs...); err != nil {
			return err
		}
	}
	var errs []error
	save := func(path string, write func(io.Writer) error) {
		if path == "" {
			return
		}
		if err := writeFile(path, write); err != nil {
			errs = append(errs, err)
		}
	}
	save(f.jsonOut, func(w io.Writer) error { return bench.WriteJSON(w, res) })
	save(f.csvOut, func(w io.Writer) error { return bench.WriteCSV(w, res.Runs...) })
	save(f.requestsOut, func(w io.Writer) error { return bench.WriteRequests(w, res.Runs...) })
	save(f.htmlOut, func(w io.Writer) error { return bench.WriteHTML(w, res) })
	if runErr != nil {
		errs = append(errs, fmt.Errorf("bench: interrupted: the partial result was printed and saved"))
	} else if n, first := allFailed(res); n > 0 {
		// A benchmark in which nothing succeeded measured nothing: a
		// runtime failure for scripts, after the result was saved.
		errs = append(errs, fmt.Errorf("bench: all %d requests failed (%s): the result was printed and saved", n, first))
	}
	return errors.Join(errs...)
}

// hedgeSamples checks the hedge ideal's flags and reads the unhedged
// run's first-token times; nil without --hedge-ideal-from.
func hedgeSamples(f *benchFlags, fs interface{ Changed(string) bool }) ([]float64, error) {
	if f.hedgeIdealFrom == "" {
		for _, name := range []string{"hedge-after", "hedge-budget"} {
			if fs.Changed(name) {
				return nil, usagef("bench: --%s needs --hedge-ideal-from", name)
			}
		}
		return nil, nil
	}
	switch {
	case f.hedgeAfter <= 0:
		return nil, usagef("bench: --hedge-ideal-from needs --hedge-after, the hedge's delay (e.g. 400ms)")
	case !(f.hedgeBudget > 0) || f.hedgeBudget > 1:
		return nil, usagef("bench: --hedge-budget %v: want a number in (0, 1]", f.hedgeBudget)
	}
	fh, err := os.Open(f.hedgeIdealFrom)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer fh.Close()
	xs, err := bench.ReadTTFTs(fh)
	if err != nil {
		return nil, usagef("bench: --hedge-ideal-from %s: %v", f.hedgeIdealFrom, err)
	}
	return xs, nil
}

// allFailed returns the number of requests and the most frequent error kind
// when not one request of any run succeeded; 0 otherwise.
func allFailed(res *bench.Result) (int, string) {
	n, kinds := 0, map[string]int{}
	for _, r := range res.Runs {
		if r.Succeeded > 0 {
			return 0, ""
		}
		n += r.Requests
		for k, c := range r.Errors {
			kinds[k] += c
		}
	}
	first, most := "", 0
	for k, c := range kinds {
		if c > most || (c == most && k < first) {
			first, most = k, c
		}
	}
	return n, first
}

// usageOrRuntime turns errors about the inputs (dataset, URL) into bad usage.
func usageOrRuntime(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return err
	}
	return usagef("%v", err)
}

// writeFile writes a file through write, reporting the path on failure.
func writeFile(path string, write func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := write(fh); err != nil {
		fh.Close()
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	return nil
}

func newBenchCompareCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "compare A.json B.json [C.json...]",
		Short: "Print the metrics of saved bench results side by side with their changes",
		Long: `compare reads results saved with "streamgate bench --json" and prints every
metric of each run beside the first file's, with the change in percent and
whether it is larger than the sampling noise. Runs are paired by label, model
and load (concurrency, rate), whatever their order in the files; runs that
could not be paired are listed at the end. A figure a run does not have
(goodput without --goodput, cost without --prices, server figures without
--scrape, an achieved rate of a closed loop) is "-".`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("bench compare: want at least two result files, got %d", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			var results []*bench.Result
			for _, p := range args {
				r, err := bench.ReadJSON(p)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			return bench.WriteCompare(e.stdout, args, results...)
		},
	}
}
