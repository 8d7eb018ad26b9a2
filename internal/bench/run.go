package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/config"
)

// ErrInterrupted is returned with a partial Result when the context was
// cancelled (Ctrl-C) before the benchmark ended.
var ErrInterrupted = errors.New("bench: interrupted, result is partial")

// Run runs one benchmark point. See RunAll.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	return RunAll(ctx, []Config{cfg}, RunOptions{})
}

// RunOptions are settings of a whole invocation rather than of one point.
type RunOptions struct {
	// Progress receives a one-line progress bar ("\r"-rewritten); nil for none.
	Progress io.Writer
	// MonthlyTokens projects each run's monthly cost for this many output tokens.
	MonthlyTokens float64
	// Runs repeats every point this many times (0 or 1: once); the result
	// pools the repeats' requests and records each figure's median and
	// range over them in RunResult.Spread, so compare can tell noise.
	Runs int
	// Echo overrides the config recorded in the result (the CLI passes its flags).
	Echo *ConfigEcho
}

// RunAll runs each config in turn (a sweep, several models) and returns one
// Result with a RunResult per config. When ctx is cancelled it stops, and
// returns the partial Result (Partial set) with ErrInterrupted. A config
// that cannot start (bad dataset, bad URL) is an error before anything is sent.
func RunAll(ctx context.Context, cfgs []Config, opts RunOptions) (*Result, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("bench: nothing to run")
	}
	prepared := make([]*runner, len(cfgs))
	cache := map[string][]Prompt{}
	for i, c := range cfgs {
		r, err := prepare(c, cache)
		if err != nil {
			return nil, err
		}
		prepared[i] = r
	}
	res := &Result{Schema: Schema, StartedAt: time.Now().UTC(), Runs: []RunResult{}}
	if opts.Echo != nil {
		res.Config = *opts.Echo
	} else {
		res.Config = Echo(cfgs)
		res.Config.MonthlyTokens = opts.MonthlyTokens
	}
	// Keep the GC out of the timing path: the working set is small, so the
	// default GOGC would collect every few MB; a higher target (unless the
	// user set GOGC) cuts the cycles, each of which stops the world.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	tr := newTransport(prepared[0].cfg.ConnectTimeout, prepared[0].cfg.HTTP2, prepared[0].cfg.RootCAs, prepared[0].cfg.dial)
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	var delays []float64
	var cpu time.Duration
	var chunks int
	for _, r := range prepared {
		r.client = cl
		r.progress = opts.Progress
		rr := r.repeat(ctx, max(1, opts.Runs))
		rr.MonthlyCost = projectedMonthly(&rr, opts.MonthlyTokens)
		res.Runs = append(res.Runs, rr)
		res.Client.GCPauseMaxMs = max(res.Client.GCPauseMaxMs, rr.Client.GCPauseMaxMs)
		res.Client.GCCycles += rr.Client.GCCycles
		res.Client.SchedLagP99Ms = max(res.Client.SchedLagP99Ms, rr.Client.SchedLagP99Ms)
		cpu += r.cpu
		chunks += rr.Chunks
		delays = append(delays, r.delays...)
		for _, w := range rr.Warnings {
			res.Warnings = append(res.Warnings, rr.Model+": "+w)
		}
		if ctx.Err() != nil {
			break
		}
	}
	res.Client.CPUSeconds = cpu.Seconds()
	if chunks > 0 {
		res.Client.CPUUsPerChunk = float64(cpu.Microseconds()) / float64(chunks)
	}
	if len(delays) > 0 {
		d := Summarize(delays)
		res.Client.MeasurementDelay = &d
	}
	if ctx.Err() != nil {
		res.Partial = true
		return res, ErrInterrupted
	}
	return res, nil
}

// Echo returns the ConfigEcho of cfgs: the first config's settings with
// the models, concurrencies and rates of all of them; secrets redacted.
func Echo(cfgs []Config) ConfigEcho {
	c := cfgs[0]
	e := ConfigEcho{
		BaseURL: c.BaseURL, API: cmpOrStr(c.API, APIChat), APIKey: config.Redact(c.APIKey), Requests: c.Requests, Warmup: c.Warmup,
		Burstiness: c.Burstiness, Prompts: c.Prompts, MaxTokens: c.MaxTokens, ExtraBody: c.ExtraBody,
		Seed: c.Seed, Label: c.Label, IdleTimeout: orDur(c.IdleTimeout, 60*time.Second).String(),
		HTTP2: c.HTTP2, Scrape: c.Scrape,
	}
	if e.Prompts == "" {
		e.Prompts = "builtin:en"
	}
	if c.Duration > 0 {
		e.Duration = c.Duration.String()
	}
	if c.OutputTokens.Mean > 0 {
		e.OutputTokens = fmt.Sprintf("%g:%g", c.OutputTokens.Mean, c.OutputTokens.StdDev)
	}
	if c.Sessions > 0 {
		e.Sessions, e.Turns, e.SessionID, e.SystemTokens = c.Sessions, cmpOr(c.Turns, DefaultTurns), cmpOrStr(c.SessionID, SessionIDHeader), c.SystemTokens
		e.Transport = cmpOrStr(c.Transport, TransportHTTP)
		e.Requests, e.Warmup = e.Sessions*e.Turns, 0
		if c.ThinkTime > 0 {
			e.ThinkTime = c.ThinkTime.String()
		}
	}
	if t := c.Trace; t != nil {
		e.Trace, e.TraceFormat, e.TraceSpeed, e.TraceWindow = t.File, t.Format, traceSpeed(c.TraceSpeed), t.Window.String()
		e.Prompts, e.Warmup = "trace", 0
	}
	for k, v := range c.Headers {
		if e.Headers == nil {
			e.Headers = map[string]string{}
		}
		val := strings.Join(v, ",")
		if sensitiveHeader(k) {
			val = config.Redact(val)
		}
		e.Headers[k] = val
	}
	seenM, seenC, seenR := map[string]bool{}, map[int]bool{}, map[float64]bool{}
	for _, c := range cfgs {
		if !seenM[c.Model] {
			seenM[c.Model] = true
			e.Models = append(e.Models, c.Model)
		}
		if conc := cmpOr(c.Concurrency, c.Sessions); !seenC[conc] { // a session is one stream at a time
			seenC[conc] = true
			e.Concurrency = append(e.Concurrency, conc)
		}
		if c.Rate > 0 && !seenR[c.Rate] {
			seenR[c.Rate] = true
			e.Rate = append(e.Rate, c.Rate)
		}
	}
	return e
}

func orDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// runner runs one Config.
type runner struct {
	cfg      Config
	prompts  []Prompt
	bodies   *bodies
	url      string
	header   http.Header
	client   *http.Client
	progress io.Writer
	pool     sync.Pool // *stream

	t0       time.Time // start of the measured run (after warm-up)
	base     time.Time // fixed clock origin of the idle watchdog
	mu       sync.Mutex
	records  []*Request
	inflight map[*Request]context.CancelCauseFunc
	done     atomic.Int64
	failed   atomic.Int64

	// sessions: the shared system prompt, the run's identity prefix and
	// the turns not sent (ended sessions), over the repeats
	system  string
	runID   string
	notSent atomic.Int64

	// results of the run for RunAll's totals
	cpu     time.Duration
	elapsed time.Duration
	self    selfStats
	delays  []float64
}

func prepare(cfg Config, cache map[string][]Prompt) (*runner, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("bench: no base URL")
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("bench: base URL %q: want http:// or https://", cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, errors.New("bench: no model")
	}
	if cfg.Rate < 0 || cfg.Concurrency < 0 || cfg.Requests < 0 || cfg.Warmup < 0 {
		return nil, errors.New("bench: negative rate, concurrency or request count")
	}
	if cfg.Trace != nil {
		if err := checkTrace(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Sessions > 0 {
		if err := checkSessions(&cfg); err != nil {
			return nil, err
		}
	} else if cfg.Turns != 0 || cfg.ThinkTime != 0 || cfg.SessionID != "" || cfg.SystemTokens != 0 || (cfg.Transport != "" && cfg.Transport != TransportHTTP) {
		return nil, errors.New("bench: turns, think time, session id and system tokens need sessions")
	}
	if cfg.Requests == 0 && cfg.Duration == 0 {
		cfg.Requests = 100
	}
	if cfg.Concurrency == 0 && cfg.Rate == 0 && cfg.Trace == nil {
		cfg.Concurrency = 1
	}
	cfg.IdleTimeout = orDur(cfg.IdleTimeout, 60*time.Second)
	cfg.ConnectTimeout = orDur(cfg.ConnectTimeout, 10*time.Second)
	cfg.Grace = orDur(cfg.Grace, 30*time.Second)
	prompts := cfg.Dataset
	if prompts == nil && cfg.Trace == nil {
		p, ok := cache[cfg.Prompts]
		if !ok {
			var err error
			if p, err = LoadPrompts(cfg.Prompts); err != nil {
				return nil, err
			}
			cache[cfg.Prompts] = p
		}
		prompts = p
	}
	if len(prompts) == 0 && cfg.Trace == nil {
		return nil, errors.New("bench: empty dataset")
	}
	if cfg.API == "" {
		cfg.API = APIChat
	}
	path, ok := apiPath[cfg.API]
	if !ok {
		return nil, fmt.Errorf("bench: api %q: want one of %s", cfg.API, strings.Join(APIs, ", "))
	}
	b, err := newBodies(cfg.API, cfg.Model, prompts, cfg.ExtraBody)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
		if cfg.API == APIMessages {
			h.Set("X-Api-Key", cfg.APIKey) // Anthropic's header; the gateway takes either
		}
	}
	if cfg.API == APIMessages {
		h.Set("Anthropic-Version", "2023-06-01")
	}
	for k, v := range cfg.Headers {
		h[http.CanonicalHeaderKey(k)] = v
	}
	r := &runner{
		cfg: cfg, prompts: prompts, bodies: b, header: h,
		url:      strings.TrimRight(cfg.BaseURL, "/") + path,
		inflight: map[*Request]context.CancelCauseFunc{},
	}
	r.pool.New = func() any { return newStream() }
	if cfg.Sessions > 0 {
		r.system = systemPrompt(cfg.SystemTokens)
	}
	return r, nil
}

// sequence yields the reproducible request sequence: prompt and length per index.
type sequence struct {
	r   *runner
	rng *rand.Rand
	i   int
}

func (r *runner) newSequence(seed uint64) *sequence {
	return &sequence{r: r, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// next returns request i with its body.
func (s *sequence) next() (*Request, []byte) {
	cfg := &s.r.cfg
	p := s.rng.IntN(len(s.r.prompts))
	var drawn int
	if cfg.OutputTokens.Mean > 0 {
		drawn = cfg.OutputTokens.draw(s.rng) // drawn every time so the sequence does not depend on MaxTokens
	}
	mt, cache := cfg.MaxTokens, true
	switch {
	case mt > 0:
	case drawn > 0:
		mt, cache = drawn, false
	default:
		mt = s.r.prompts[p].MaxTokens
	}
	capHint := 512
	if mt > 0 {
		capHint = mt + 2
	}
	req := &Request{Index: s.i, Prompt: p, MaxTokens: mt, Arrivals: make([]timeDur, 0, capHint)}
	s.i++
	return req, s.r.bodies.get(p, mt, cache)
}

type timeDur = time.Duration

// send runs one request on a pooled stream and records it.
func (r *runner) send(ctx context.Context, req *Request, body []byte, measured bool) {
	r.sendWith(ctx, req, body, r.header, measured)
}

// sendWith is send with the request's own headers.
func (r *runner) sendWith(ctx context.Context, req *Request, body []byte, hdr http.Header, measured bool) {
	st := r.pool.Get().(*stream)
	st.t0, st.base = r.t0, r.base
	st.setAPI(r.cfg.API)
	st.do(ctx, r.client, r.url, hdr, body, req, func(cancel context.CancelCauseFunc) {
		r.mu.Lock()
		r.inflight[req] = cancel
		r.mu.Unlock()
	})
	st.req = nil
	r.pool.Put(st)
	r.recorded(req, measured)
}

// recorded files a request that ended.
func (r *runner) recorded(req *Request, measured bool) {
	r.mu.Lock()
	delete(r.inflight, req)
	if measured {
		r.records = append(r.records, req)
	}
	r.mu.Unlock()
	if measured && !req.Incomplete {
		r.done.Add(1)
		if !req.OK() {
			r.failed.Add(1)
		}
	}
}

// watchIdle cancels streams without an event for IdleTimeout. One
// goroutine scans all open streams, so the per-chunk cost is one atomic store.
func (r *runner) watchIdle(stop <-chan struct{}) {
	idle := r.cfg.IdleTimeout
	tick := min(max(idle/8, 5*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := int64(time.Since(r.base))
		r.mu.Lock()
		for req, cancel := range r.inflight {
			if now-req.last.Load() > int64(idle) {
				cancel(errIdle)
			}
		}
		r.mu.Unlock()
	}
}

// repeat runs the point n times and pools the repeats into one RunResult
// whose Spread holds each key figure's median and range over the repeats.
func (r *runner) repeat(ctx context.Context, n int) RunResult {
	r.notSent.Store(0)
	if n <= 1 {
		return r.run(ctx)
	}
	var parts []RunResult
	var all []*Request
	var elapsed time.Duration
	var self selfStats
	var servers []*ServerStats
	for range n {
		r.mu.Lock()
		r.records = nil
		r.mu.Unlock()
		r.done.Store(0)
		r.failed.Store(0)
		rr := r.run(ctx)
		parts = append(parts, rr)
		all = append(all, r.records...)
		elapsed += r.elapsed
		self.cpu += r.self.cpu
		self.gcCycles += r.self.gcCycles
		self.gcPauseMax = max(self.gcPauseMax, r.self.gcPauseMax)
		self.schedLagP99 = max(self.schedLagP99, r.self.schedLagP99)
		servers = append(servers, rr.Server)
		if ctx.Err() != nil {
			break
		}
	}
	r.mu.Lock()
	r.records = all
	r.mu.Unlock()
	r.cpu, r.elapsed, r.self = self.cpu, elapsed, self
	pooled := r.summarize(elapsed, self)
	// Each repeat's send offsets start again at zero, so the pooled
	// records' first-to-last send span is one repeat's: the achieved rate
	// is the repeats' sends over the sum of their own spans.
	var sends, span float64
	for i := range parts {
		if p := &parts[i]; p.AchievedRate > 0 && p.Requests > 1 {
			sends += float64(p.Requests - 1)
			span += float64(p.Requests-1) / p.AchievedRate
		}
	}
	pooled.AchievedRate = 0
	if span > 0 {
		pooled.AchievedRate = sends / span
	}
	// The pooled records overlap in time (each repeat starts at zero), so
	// warnings about the schedule are only right per repeat: take those.
	pooled.Warnings = nil
	for i := range parts {
		for _, w := range parts[i].Warnings {
			pooled.Warnings = append(pooled.Warnings, fmt.Sprintf("repeat %d: %s", i+1, w))
		}
	}
	pooled.Server = poolServer(servers)
	pooled.Repeats = len(parts)
	pooled.Spread = map[string]Spread{}
	for _, f := range spreadFigures {
		vals := make([]float64, len(parts))
		for i := range parts {
			vals[i] = f.get(&parts[i])
		}
		sort.Float64s(vals) // before reading the ends: do not rely on Percentile sorting in place
		pooled.Spread[f.name] = Spread{Median: Percentile(vals, 50), Min: vals[0], Max: vals[len(vals)-1]}
	}
	return pooled
}

// poolServer pools the repeats' server figures: the worst GC pause, the
// sum of GC cycles, the first repeat's overhead. A figure any repeat did
// not measure is not measured over the whole; nil when no repeat scraped.
func poolServer(ss []*ServerStats) *ServerStats {
	var out *ServerStats
	pause, cycles := true, true
	var maxPause, sumCycles float64
	for _, s := range ss {
		if s == nil {
			pause, cycles = false, false // that repeat's scrape failed
			continue
		}
		if out == nil {
			out = &ServerStats{OverheadMs: s.OverheadMs}
		}
		if s.GCPauseMaxMs == nil {
			pause = false
		} else {
			maxPause = max(maxPause, *s.GCPauseMaxMs)
		}
		if s.GCCycles == nil {
			cycles = false
		} else {
			sumCycles += *s.GCCycles
		}
	}
	if out == nil {
		return nil
	}
	if pause {
		out.GCPauseMaxMs = &maxPause
	}
	if cycles {
		out.GCCycles = &sumCycles
	}
	return out
}

// spreadFigures are the figures whose spread over repeats is recorded.
var spreadFigures = []struct {
	name string
	get  func(*RunResult) float64
}{
	{"ttft_p50", func(r *RunResult) float64 { return r.TTFT.P50 }},
	{"ttft_p90", func(r *RunResult) float64 { return r.TTFT.P90 }},
	{"ttft_p99", func(r *RunResult) float64 { return r.TTFT.P99 }},
	{"ttft_mean", func(r *RunResult) float64 { return r.TTFT.Mean }},
	{"itl_p50", func(r *RunResult) float64 { return r.ITL.P50 }},
	{"itl_p99", func(r *RunResult) float64 { return r.ITL.P99 }},
	{"max_gap_p99", func(r *RunResult) float64 { return r.MaxGap.P99 }},
	{"tpot_p50", func(r *RunResult) float64 { return r.TPOT.P50 }},
	{"e2e_p50", func(r *RunResult) float64 { return r.E2E.P50 }},
	{"e2e_p99", func(r *RunResult) float64 { return r.E2E.P99 }},
	{"tps_p50", func(r *RunResult) float64 { return r.TPS.P50 }},
	{"throughput", func(r *RunResult) float64 { return r.Throughput }},
}

// run executes warm-up and the measured requests and summarises them.
func (r *runner) run(ctx context.Context) RunResult {
	cfg := &r.cfg
	r.base = time.Now()
	r.t0 = r.base
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() { r.watchIdle(stopWatch); close(watchDone) }()
	defer func() { close(stopWatch); <-watchDone }()

	r.runID = newRunID()
	if cfg.Warmup > 0 && cfg.Trace == nil {
		seq := r.newSequence(cfg.Seed ^ 0x3a3a)
		r.closedLoop(ctx, ctx, seq, max(1, min(max(cfg.Concurrency, 1), cfg.Warmup)), cfg.Warmup, 0, 0, false)
	}
	var before map[string]float64
	var beforeErr error
	if cfg.Scrape != "" {
		before, beforeErr = scrape(ctx, r.client, cfg.Scrape)
	}
	runtime.GC() // start the measured run on a clean heap, far from the next cycle
	sc := newSelfCheck()
	r.t0 = time.Now()
	stopBar := r.startProgress()

	// runCtx ends in-flight requests at the end of a --duration grace period.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	if cfg.Duration > 0 {
		t := time.AfterFunc(cfg.Duration+cfg.Grace, cancelRun)
		defer t.Stop()
	}
	seq := r.newSequence(cfg.Seed)
	if cfg.Trace != nil {
		r.traceLoop(ctx, runCtx)
	} else if cfg.Sessions > 0 {
		r.sessionLoop(ctx, runCtx)
	} else if cfg.Rate > 0 {
		r.openLoop(ctx, runCtx, seq)
	} else {
		r.closedLoop(ctx, runCtx, seq, cfg.Concurrency, cfg.Requests, cfg.Duration, cfg.RampUp, true)
	}
	elapsed := time.Since(r.t0)
	stopBar()
	self := sc.since()
	r.cpu, r.elapsed, r.self = self.cpu, elapsed, self
	rr := r.summarize(elapsed, self)
	if cfg.Scrape != "" {
		after, err := scrape(context.WithoutCancel(ctx), r.client, cfg.Scrape)
		switch {
		case beforeErr != nil:
			rr.Warnings = append(rr.Warnings, "server figures not measured: before the run, "+beforeErr.Error())
		case err != nil:
			rr.Warnings = append(rr.Warnings, "server figures not measured: after the run, "+err.Error())
		default:
			rr.Server = serverStats(before, after)
		}
	}
	return rr
}

// closedLoop keeps c streams busy until n requests were sent (n = 0: no
// limit) or dur passed (0: no limit). stopCtx stops sending; reqCtx is
// given to the requests.
func (r *runner) closedLoop(stopCtx, reqCtx context.Context, seq *sequence, c, n int, dur, ramp time.Duration, measured bool) {
	type job struct {
		req  *Request
		body []byte
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			if ramp > 0 && w > 0 {
				t := time.NewTimer(ramp * time.Duration(w) / time.Duration(c))
				select {
				case <-t.C:
				case <-stopCtx.Done():
					t.Stop()
				}
			}
			for j := range jobs {
				r.send(reqCtx, j.req, j.body, measured)
			}
		})
	}
	var deadline <-chan time.Time
	if dur > 0 {
		t := time.NewTimer(dur - time.Since(r.t0))
		defer t.Stop()
		deadline = t.C
	}
loop:
	for n == 0 || seq.i < n {
		req, body := seq.next()
		select {
		case jobs <- job{req, body}:
		case <-deadline:
			break loop
		case <-stopCtx.Done():
			break loop
		}
	}
	close(jobs)
	wg.Wait()
}

// openLoop sends at the arrival times of the configured rate, each request
// on its own goroutine, waiting for a slot when a concurrency cap is set.
func (r *runner) openLoop(stopCtx, reqCtx context.Context, seq *sequence) {
	cfg := &r.cfg
	arr := NewArrivals(cfg.Rate, cfg.Burstiness, cfg.Seed^0xa11)
	var sem chan struct{}
	if cfg.Concurrency > 0 {
		sem = make(chan struct{}, cfg.Concurrency)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; cfg.Requests == 0 || i < cfg.Requests; i++ {
		off := arr.Next(i == 0)
		if cfg.Duration > 0 && off >= cfg.Duration {
			return
		}
		req, body := seq.next()
		req.Intended = off
		var ok bool
		if req.SlotWait, ok = r.awaitSend(stopCtx, timer, off, sem); !ok {
			return
		}
		wg.Go(func() {
			r.send(reqCtx, req, body, true)
			if sem != nil {
				<-sem
			}
		})
	}
}

// startProgress draws a progress bar until the returned func is called.
func (r *runner) startProgress() func() {
	if r.progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				r.drawProgress()
				fmt.Fprintln(r.progress)
				return
			case <-t.C:
				r.drawProgress()
			}
		}
	}()
	return func() { close(stop); <-done }
}

func (r *runner) drawProgress() {
	cfg := &r.cfg
	done, failed := r.done.Load(), r.failed.Load()
	el := time.Since(r.t0)
	frac := 0.0
	switch {
	case cfg.Requests > 0:
		frac = float64(done) / float64(cfg.Requests)
	case cfg.Duration > 0:
		frac = float64(el) / float64(cfg.Duration)
	}
	frac = min(max(frac, 0), 1)
	const width = 30
	fill := int(frac * width)
	bar := strings.Repeat("#", fill) + strings.Repeat(".", width-fill)
	fmt.Fprintf(r.progress, "\r%-20.20s [%s] %6d done %5d failed %6.1fs", cfg.Model, bar, done, failed, el.Seconds())
}

// awaitSend waits for an open-loop request's send time (intended, from
// r.t0) and then for a slot of sem (nil: no concurrency cap). It returns how
// long the slot took, and false when stopCtx ended first.
func (r *runner) awaitSend(stopCtx context.Context, timer *time.Timer, intended time.Duration, sem chan struct{}) (time.Duration, bool) {
	if wait := intended - time.Since(r.t0); wait > 0 {
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-stopCtx.Done():
			timer.Stop()
			return 0, false
		}
	}
	if stopCtx.Err() != nil {
		return 0, false
	}
	if sem == nil {
		return 0, true
	}
	reached := time.Now()
	select {
	case sem <- struct{}{}:
		return time.Since(reached), true
	case <-stopCtx.Done():
		return 0, false
	}
}
