package bench

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	usdfmt "github.com/streamgate/streamgate/internal/usd"
)

// Definitions are the metric definitions of SPEC.md, printed in --help and
// written in the HTML report.
const Definitions = `Metrics (per request, then pooled over successful requests):
  first token  the first chunk carrying content, reasoning or tool-call text
               (role-only and usage chunks do not count); --api messages: the
               first content_block_delta with text, thinking or tool JSON;
               --api responses: the first output_text, refusal, reasoning or
               function-call arguments delta
  TTFT         first token time - send time
  ITL          every gap between consecutive content chunks after the first, pooled
  max gap      the largest such gap within one request (stalls)
  TPOT         (last content - first content) / (output tokens - 1)
  TPS          output tokens / (last content - first content)
  E2E          last content chunk - send time
  tokens       from usage (stream_options.include_usage is always sent; messages:
               message_start and message_delta; responses: the terminal
               event's), else counted content chunks; the source is recorded
  interrupted  HTTP 200 but ended without [DONE] (messages: message_stop;
               responses: its terminal event) and without finish_reason, or an
               error event (responses: response.failed) mid-stream, or an idle
               timeout
  schedule lag (open loop, trace) actual send time - intended send time
  achieved     (open loop) rate of sending: (sent - 1) / (last send - first send)
  req/s        (closed loop) successful requests / the run's duration
Percentiles are p50 p90 p95 p99 max plus mean, with linear interpolation (numpy's default).
Server figures (--scrape: the gateway's /metrics read before and after each run):
  GC pause max the upper bound of the highest GC pause histogram bucket that grew
               during the run; "not measured" when no pause histogram covers the
               run (a summary's max quantile covers another window: never used)
  GC cycles    the growth of the GC cycle counter during the run
  overhead     mean time the gateway added per chunk (upstream read to client
               flush) and per request (before the upstream call)`

// WriteJSON writes res as indented "streamgate.bench/v1" JSON.
func WriteJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// ReadJSON reads a saved result and checks its schema.
func ReadJSON(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("result %s: %w", path, err)
	}
	if res.Schema != Schema {
		return nil, fmt.Errorf("result %s: schema %q, want %q", path, res.Schema, Schema)
	}
	return &res, nil
}

// runName names a run in tables: label, model and load point.
func runName(r *RunResult) string {
	var b strings.Builder
	if r.Label != "" {
		b.WriteString(r.Label)
		b.WriteByte(' ')
	}
	b.WriteString(r.Model)
	return b.String()
}

func loadName(r *RunResult) string {
	if s := r.Sessions; s != nil {
		return "s=" + strconv.Itoa(s.Count) + "×" + strconv.Itoa(s.Turns)
	}
	if r.Trace != nil {
		s := "trace ×" + strconv.FormatFloat(r.Trace.Speed, 'g', 4, 64)
		if r.Concurrency > 0 {
			s += " c≤" + strconv.Itoa(r.Concurrency)
		}
		return s
	}
	if r.RequestedRate > 0 {
		s := "r=" + strconv.FormatFloat(r.RequestedRate, 'g', 4, 64)
		if r.Concurrency > 0 {
			s += " c≤" + strconv.Itoa(r.Concurrency)
		}
		return s
	}
	return "c=" + strconv.Itoa(r.Concurrency)
}

// WriteTable writes the terminal table of runs: one row per run.
func WriteTable(w io.Writer, runs ...RunResult) error {
	fmt.Fprintln(w, Headline(runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tload\tok\tfail\tintr\tTTFT p50\tTTFT p99\tITL p50\tITL p99\tgap p99\tTPOT p50\tE2E p50\tTPS p50\ttok/s\tgoodput\t")
	for i := range runs {
		r := &runs[i]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t\n",
			runName(r), loadName(r), r.Succeeded, r.Failed, r.Interrupted,
			pctText(r.TTFT, r.TTFT.P50), pctText(r.TTFT, r.TTFT.P99), pctText(r.ITL, r.ITL.P50), pctText(r.ITL, r.ITL.P99), pctText(r.MaxGap, r.MaxGap.P99),
			pctText(r.TPOT, r.TPOT.P50), pctText(r.E2E, r.E2E.P50), r.TPS.P50, r.Throughput, goodputText(r.Goodput))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(times in ms; TPS per request, tok/s over the run; percentiles of fewer than %d values are not shown)\n", MinSample)
	var warnings []string
	for i := range runs {
		r := &runs[i]
		if len(r.Errors) > 0 {
			fmt.Fprintf(w, "%s %s errors: %s\n", runName(r), loadName(r), formatErrors(r.Errors))
		}
		if r.ScheduleLag != nil {
			fmt.Fprintf(w, "%s %s: requested %.2f/s, achieved %.2f/s, schedule lag p50 %s p99 %s max %s ms\n",
				runName(r), loadName(r), r.RequestedRate, r.AchievedRate, fms(r.ScheduleLag.P50), fms(r.ScheduleLag.P99), fms(r.ScheduleLag.Max))
		} else {
			fmt.Fprintf(w, "%s %s: %s over the run\n", runName(r), loadName(r), rateText(r))
		}
		if r.Trace != nil {
			writeTraceLine(w, r)
		}
		if r.Sessions != nil {
			writeSessionLine(w, r)
		}
		if r.CostUSD > 0 || r.MonthlyCost > 0 || r.Sessions != nil {
			cost := money(r.CostUSD)
			if r.CostUSD == 0 && r.Sessions != nil {
				cost = "not priced (--prices)"
			}
			fmt.Fprintf(w, "%s %s: cost %s (%d input", runName(r), loadName(r), cost, r.InTok)
			if r.CacheReadTok > 0 || r.CacheWriteTok > 0 {
				fmt.Fprintf(w, " of which %d cache reads, %d cache writes", r.CacheReadTok, r.CacheWriteTok)
			}
			fmt.Fprintf(w, ", %d output tokens)", r.OutTok)
			if r.MonthlyCost > 0 {
				fmt.Fprintf(w, ", projected monthly %s at this mix", money(r.MonthlyCost))
			}
			fmt.Fprintln(w)
		}
		if s := r.Server; s != nil {
			fmt.Fprintf(w, "%s %s server: GC pause max %s, GC cycles %s", runName(r), loadName(r), optText(s.GCPauseMaxMs, "%.3f ms"), optText(s.GCCycles, "%.0f"))
			for _, k := range sortedKeys(s.OverheadMs) {
				fmt.Fprintf(w, ", overhead %s mean %.3f ms", k, s.OverheadMs[k])
			}
			fmt.Fprintln(w)
		}
		c := r.Client
		fmt.Fprintf(w, "%s %s client: GC pause max %.3f ms, sched lag p99 %.3f ms, CPU %.2f µs/chunk",
			runName(r), loadName(r), c.GCPauseMaxMs, c.SchedLagP99Ms, c.CPUUsPerChunk)
		if d := c.MeasurementDelay; d != nil {
			fmt.Fprintf(w, ", measurement delay p50 %.3f p99 %.3f max %.3f ms", d.P50, d.P99, d.Max)
		}
		fmt.Fprintln(w)
		for _, wn := range r.Warnings {
			warnings = append(warnings, runName(r)+" "+loadName(r)+": "+wn)
		}
	}
	for _, wn := range SummarizeWarnings(warnings) {
		fmt.Fprintf(w, "warning: %s\n", wn)
	}
	return nil
}

// NotMeasured stands for a figure the run could not measure.
const NotMeasured = "not measured"

// optText formats a figure that may not have been measured.
func optText(v *float64, format string) string {
	if v == nil {
		return NotMeasured
	}
	return fmt.Sprintf(format, *v)
}

// rateText is the run's request rate: the achieved rate of an open loop
// (the rate asked for), else requests per second over the run.
func rateText(r *RunResult) string {
	if r.RequestedRate > 0 {
		return fmt.Sprintf("achieved %.2f/s of %s/s", r.AchievedRate, strconv.FormatFloat(r.RequestedRate, 'f', -1, 64))
	}
	return fmt.Sprintf("%.2f req/s", r.RequestsPerS)
}

func fms(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func formatErrors(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// CSV columns: one row per run.
var csvDists = []struct {
	name string
	get  func(*RunResult) Dist
}{
	{"ttft_ms", func(r *RunResult) Dist { return r.TTFT }},
	{"itl_ms", func(r *RunResult) Dist { return r.ITL }},
	{"max_gap_ms", func(r *RunResult) Dist { return r.MaxGap }},
	{"tpot_ms", func(r *RunResult) Dist { return r.TPOT }},
	{"e2e_ms", func(r *RunResult) Dist { return r.E2E }},
	{"tps", func(r *RunResult) Dist { return r.TPS }},
}

// WriteCSV writes one row per run with every summary figure.
func WriteCSV(w io.Writer, runs ...RunResult) error {
	cw := csv.NewWriter(w)
	head := []string{"label", "model", "base_url", "concurrency", "requested_rate", "achieved_rate", "duration_s",
		"requests", "succeeded", "failed", "interrupted", "incomplete"}
	for _, d := range csvDists {
		for _, s := range []string{"mean", "p50", "p90", "p95", "p99", "max"} {
			head = append(head, d.name+"_"+s)
		}
	}
	head = append(head, "output_tokens", "input_tokens", "token_source", "throughput_tokens_per_s", "requests_per_s",
		"cost_usd", "goodput_fraction", "goodput_per_s", "schedule_lag_p50_ms", "schedule_lag_p99_ms",
		"client_gc_pause_max_ms", "client_sched_lag_p99_ms", "client_cpu_us_per_chunk", "measurement_delay_p99_ms", "errors",
		"monthly_cost_usd", "server_gc_pause_max_ms", "server_gc_cycles", "server_overhead_request_ms", "server_overhead_chunk_ms",
		"schedule_lag_max_ms", "cache_read_share", "trace_recorded_input_tokens", "trace_input_mismatch",
		"trace_recorded_output_tokens", "trace_output_mismatch")
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	opt := func(v *float64) string { // "" when not measured
		if v == nil {
			return ""
		}
		return f(*v)
	}
	for i := range runs {
		r := &runs[i]
		achieved := "" // a closed loop has none
		if r.RequestedRate > 0 {
			achieved = f(r.AchievedRate)
		}
		row := []string{r.Label, r.Model, r.BaseURL, strconv.Itoa(r.Concurrency), f(r.RequestedRate), achieved, f(r.DurationS),
			strconv.Itoa(r.Requests), strconv.Itoa(r.Succeeded), strconv.Itoa(r.Failed), strconv.Itoa(r.Interrupted), strconv.Itoa(r.Incomplete)}
		for _, d := range csvDists {
			v := d.get(r)
			row = append(row, f(v.Mean), f(v.P50), f(v.P90), f(v.P95), f(v.P99), f(v.Max))
		}
		var gf, gp, l50, l99, md float64
		if r.Goodput != nil {
			gf, gp = r.Goodput.Fraction, r.Goodput.PerS
		}
		if r.ScheduleLag != nil {
			l50, l99 = r.ScheduleLag.P50, r.ScheduleLag.P99
		}
		if r.Client.MeasurementDelay != nil {
			md = r.Client.MeasurementDelay.P99
		}
		row = append(row, strconv.Itoa(r.OutTok), strconv.Itoa(r.InTok), r.TokSrc, f(r.Throughput), f(r.RequestsPerS),
			f(r.CostUSD), f(gf), f(gp), f(l50), f(l99),
			f(r.Client.GCPauseMaxMs), f(r.Client.SchedLagP99Ms), f(r.Client.CPUUsPerChunk), f(md), formatErrors(r.Errors),
			f(r.MonthlyCost))
		var pause, cycles, ovReq, ovChunk *float64
		if s := r.Server; s != nil {
			pause, cycles = s.GCPauseMaxMs, s.GCCycles
			if v, ok := s.OverheadMs["request"]; ok {
				ovReq = &v
			}
			if v, ok := s.OverheadMs["chunk"]; ok {
				ovChunk = &v
			}
		}
		row = append(row, opt(pause), opt(cycles), opt(ovReq), opt(ovChunk))
		var lagMax *float64
		if r.ScheduleLag != nil {
			lagMax = &r.ScheduleLag.Max
		}
		row = append(row, opt(lagMax), opt(r.CacheReadShare))
		if t := r.Trace; t != nil {
			row = append(row, strconv.Itoa(t.RecordedInputTokens), strconv.Itoa(t.InputMismatch),
				strconv.Itoa(t.RecordedOutputTokens), strconv.Itoa(t.OutputMismatch))
		} else {
			row = append(row, "", "", "", "")
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// requestLine is one line of --requests-out.
type requestLine struct {
	Run         int      `json:"run"`
	Label       string   `json:"label,omitempty"`
	Model       string   `json:"model"`
	Index       int      `json:"index"`
	Prompt      int      `json:"prompt"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Session     int      `json:"session,omitempty"` // a session run's session and turn, from 1
	Turn        int      `json:"turn,omitempty"`
	IntendedMs  *float64 `json:"intended_ms,omitempty"`
	SentMs      float64  `json:"sent_ms"`
	SlotWaitMs  *float64 `json:"slot_wait_ms,omitempty"`
	Status      int      `json:"status"`
	OK          bool     `json:"ok"`
	ErrorKind   string   `json:"error_kind,omitempty"`
	Error       string   `json:"error,omitempty"`
	Interrupted bool     `json:"interrupted,omitempty"`
	Incomplete  bool     `json:"incomplete,omitempty"`
	TTFTMs      *float64 `json:"ttft_ms"`
	E2EMs       *float64 `json:"e2e_ms"`
	EndMs       float64  `json:"end_ms"`
	Output      int      `json:"output_tokens"`
	Input       int      `json:"input_tokens"`
	CacheRead   int      `json:"cache_read_tokens,omitempty"`
	CacheWrite  int      `json:"cache_write_tokens,omitempty"`
	// A replayed request's entry: its line in the trace file and its
	// recorded token counts (input 0: not recorded).
	TraceLine      int       `json:"trace_line,omitempty"`
	RecordedInput  *int      `json:"recorded_input_tokens,omitempty"`
	RecordedOutput *int      `json:"recorded_output_tokens,omitempty"`
	TokenSource    string    `json:"token_source,omitempty"`
	Events         int       `json:"events"`
	Done           bool      `json:"done"`
	ChunksMs       []float64 `json:"chunk_ms"`
}

// WriteRequests writes one JSON line per request of runs (those kept with
// Config.KeepRequests): send time and chunk arrival offsets in ms, with µs precision.
func WriteRequests(w io.Writer, runs ...RunResult) error {
	enc := json.NewEncoder(w)
	round := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for ri := range runs {
		r := &runs[ri]
		for _, q := range r.Records {
			l := requestLine{Run: ri, Label: r.Label, Model: r.Model, Index: q.Index, Prompt: q.Prompt, MaxTokens: q.MaxTokens,
				Session: q.Session, Turn: q.Turn, SentMs: round(q.Sent), Status: q.Status, OK: q.OK(), ErrorKind: q.Kind, Error: q.Err, Interrupted: q.Interrupted,
				Incomplete: q.Incomplete, EndMs: round(q.End), Output: q.OutputTokens, Input: q.InputTokens,
				CacheRead: q.CacheReadTokens, CacheWrite: q.CacheWriteTokens, TokenSource: q.TokenSource, Events: q.Events, Done: q.Done, ChunksMs: make([]float64, len(q.Arrivals))}
			if r.RequestedRate > 0 || r.Trace != nil {
				iv, sw := round(q.Intended), round(q.SlotWait)
				l.IntendedMs, l.SlotWaitMs = &iv, &sw
			}
			if e := q.Entry; e != nil {
				l.TraceLine, l.RecordedOutput = e.Line, &e.OutputTokens
				if e.InputTokens > 0 {
					l.RecordedInput = &e.InputTokens
				}
			}
			for i, a := range q.Arrivals {
				l.ChunksMs[i] = round(a)
			}
			if len(q.Arrivals) > 0 {
				l.TTFTMs, l.E2EMs = &l.ChunksMs[0], &l.ChunksMs[len(l.ChunksMs)-1]
			}
			if err := enc.Encode(&l); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Add appends o's runs and warnings to r and folds in its client
// self-check: GC pause and scheduling lag take the worse of the two, GC
// cycles and CPU add up, CPU per chunk is recomputed over all runs. A
// measurement delay, whose samples are gone, is kept only if r has none.
// The demo uses it to merge results taken against different gateways.
func (r *Result) Add(o *Result) {
	r.Runs = append(r.Runs, o.Runs...)
	r.Warnings = append(r.Warnings, o.Warnings...)
	c := &r.Client
	c.GCPauseMaxMs = max(c.GCPauseMaxMs, o.Client.GCPauseMaxMs)
	c.SchedLagP99Ms = max(c.SchedLagP99Ms, o.Client.SchedLagP99Ms)
	c.GCCycles += o.Client.GCCycles
	c.CPUSeconds += o.Client.CPUSeconds
	if c.MeasurementDelay == nil {
		c.MeasurementDelay = o.Client.MeasurementDelay
	}
	chunks := 0
	for _, run := range r.Runs {
		chunks += run.Chunks
	}
	if chunks > 0 {
		c.CPUUsPerChunk = c.CPUSeconds * 1e6 / float64(chunks)
	}
}

// MinSample is the fewest values a percentile is shown from: below it a
// p99 is one request's figure, and the report says "too few samples".
const MinSample = 20

// pctText is a percentile of d for a table: fms, or the count and "too
// few" below MinSample values.
func pctText(d Dist, v float64) string {
	if d.N > 0 && d.N < MinSample {
		return fmt.Sprintf("n=%d: too few", d.N)
	}
	return fms(v)
}

// money is the reports' money: usd.Format, the one format of every amount
// the product prints (cents from a dollar up, enough digits below a cent).
func money(x float64) string { return usdfmt.Format(x) }

// goodputText is the goodput with the objective it was counted against.
func goodputText(g *Goodput) string {
	if g == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (SLO %s)", 100*g.Fraction, g.SLO)
}

// medianCI is a distribution-free 95 % confidence interval of the median
// of n sorted values: the order statistics n/2 ∓ 1.96·√n/2. ok is false
// below MinSample values.
func medianCI(sorted []float64) (lo, hi float64, ok bool) {
	n := len(sorted)
	if n < MinSample {
		return 0, 0, false
	}
	half := 1.96 * math.Sqrt(float64(n)) / 2
	l, h := int(math.Floor(float64(n)/2-half)), int(math.Ceil(float64(n)/2+half))
	return sorted[max(l, 0)], sorted[min(h, n-1)], true
}

// ttftSamples are the TTFTs (ms) of a run's successful requests, sorted;
// nil when the run kept no records.
func ttftSamples(r *RunResult) []float64 {
	var xs []float64
	for _, q := range r.Records {
		if !q.OK() {
			continue
		}
		if d, ok := q.TTFT(); ok {
			xs = append(xs, ms(d))
		}
	}
	slices.Sort(xs)
	return xs
}

// Headline is what the runs conclude, first thing in the report: with one
// run its median TTFT, throughput and failures; with several, which had
// the lowest median TTFT, by how much over the next best, and whether that
// is beyond the noise (the medians' 95 % confidence intervals, from each
// run's own requests, do not overlap) or within it.
func Headline(runs []RunResult) string {
	var ok []*RunResult
	for i := range runs {
		if runs[i].Succeeded > 0 && runs[i].TTFT.N > 0 {
			ok = append(ok, &runs[i])
		}
	}
	switch {
	case len(runs) == 0:
		return "No run."
	case len(ok) == 0:
		return fmt.Sprintf("No request succeeded in %d run(s): nothing to compare.", len(runs))
	case len(runs) == 1:
		r := ok[0]
		return fmt.Sprintf("%s %s: median TTFT %s ms over %d successful requests (%d failed), %.1f output tok/s%s.",
			runName(r), loadName(r), pctText(r.TTFT, r.TTFT.P50), r.Succeeded, r.Failed, r.Throughput, goodputClause(r))
	}
	slices.SortStableFunc(ok, func(a, b *RunResult) int { return cmp.Compare(a.TTFT.P50, b.TTFT.P50) })
	best, next := ok[0], ok[len(ok)-1]
	if len(ok) > 1 {
		next = ok[1]
	}
	names := make([]string, len(runs))
	for i := range runs {
		names[i] = runName(&runs[i]) + " " + loadName(&runs[i])
	}
	bn, nn := runName(best)+" "+loadName(best), runName(next)+" "+loadName(next)
	if bn == nn {
		bn, nn = bn+" (first)", nn+" (second)"
	}
	if best == next {
		return fmt.Sprintf("Compared %d runs; only %s had successful requests (median TTFT %s ms).", len(runs), bn, fms(best.TTFT.P50))
	}
	diff := next.TTFT.P50 - best.TTFT.P50
	rel := 0.0
	if next.TTFT.P50 > 0 {
		rel = 100 * diff / next.TTFT.P50
	}
	h := fmt.Sprintf("Compared %d runs by median TTFT: %s is fastest, %s ms vs %s ms for %s (%.1f ms, %.0f%% lower)",
		len(runs), bn, fms(best.TTFT.P50), fms(next.TTFT.P50), nn, diff, rel)
	bl, bh, okb := medianCI(ttftSamples(best))
	nl, nh, okn := medianCI(ttftSamples(next))
	switch {
	case best.TTFT.N < MinSample || next.TTFT.N < MinSample:
		h += fmt.Sprintf("; too few samples to tell (n=%d and n=%d, fewer than %d)", best.TTFT.N, next.TTFT.N, MinSample)
	case !okb || !okn:
		h += "; noise not measured (no per-request records kept)"
	case bh < nl:
		h += fmt.Sprintf("; beyond the noise: the medians' 95%% intervals [%s, %s] and [%s, %s] ms do not overlap", fms(bl), fms(bh), fms(nl), fms(nh))
	default:
		h += fmt.Sprintf("; within the noise: the medians' 95%% intervals [%s, %s] and [%s, %s] ms overlap", fms(bl), fms(bh), fms(nl), fms(nh))
	}
	return h + "."
}

func goodputClause(r *RunResult) string {
	if r.Goodput == nil {
		return ""
	}
	return ", goodput " + goodputText(r.Goodput)
}

// distinct makes every name unique by numbering the repeats ("x #2"), so
// that no two series of a plot share a legend label.
func distinct(names []string) []string {
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	out := make([]string, len(names))
	count := map[string]int{}
	for i, n := range names {
		out[i] = n
		if seen[n] > 1 {
			count[n]++
			out[i] = fmt.Sprintf("%s #%d", n, count[n])
		}
	}
	return out
}

// projectedMonthly is the cost of monthlyTokens output tokens at the run's
// own mix: its cost per output token, input and cache included. 0 when the
// run produced no output or had no price.
func projectedMonthly(r *RunResult, monthlyTokens float64) float64 {
	if r.OutTok <= 0 || r.CostUSD <= 0 || monthlyTokens <= 0 {
		return 0
	}
	return r.CostUSD / float64(r.OutTok) * monthlyTokens
}

// loadWarning is the substring of every per-run warning about a loaded
// client machine; summarizeWarnings folds them into one line.
const loadWarning = "the client machine is loaded"

// SummarizeWarnings returns ws with the warnings about a loaded client
// (one per run) folded into one line that counts them and gives the worst.
func SummarizeWarnings(ws []string) []string {
	var out []string
	n := 0
	worst := ""
	for _, w := range ws {
		if strings.Contains(w, loadWarning) {
			n++
			if worst == "" {
				worst = w
			}
			continue
		}
		out = append(out, w)
	}
	switch n {
	case 0:
		return out
	case 1:
		return append([]string{worst}, out...)
	}
	example := strings.TrimSuffix(strings.TrimSuffix(worst, loadWarning), ": ") // without the phrase the line already says
	return append([]string{fmt.Sprintf("%s in %d runs (scheduling lag above 1 ms; e.g. %s): latencies include the client's own delays", loadWarning, n, example)}, out...)
}

// writeTraceLine writes a trace replay's line of the table's notes: the
// schedule, the recorded-vs-achieved tokens, the cache reads.
func writeTraceLine(w io.Writer, r *RunResult) {
	t := r.Trace
	fmt.Fprintf(w, "%s %s: trace %s (%s) %d entries", runName(r), loadName(r), t.File, t.Format, t.Entries)
	if t.Window != "" {
		fmt.Fprintf(w, " in %s", t.Window)
	}
	fmt.Fprintf(w, ", %.1f s at ×%g, peak %.0f/s; tokens recorded/achieved: input %d/%d (%d differ), output %d/%d (%d differ)",
		t.SpanS, t.Speed, t.PeakRate, t.RecordedInputTokens, t.AchievedInputTokens, t.InputMismatch,
		t.RecordedOutputTokens, t.AchievedOutputTokens, t.OutputMismatch)
	if r.CacheReadShare != nil {
		fmt.Fprintf(w, "; cache reads %.1f%% of input", 100**r.CacheReadShare)
	}
	fmt.Fprintln(w)
}

// writeSessionLine writes a session run's line: its shape, the cache-read
// share and the TTFT of first and later turns.
func writeSessionLine(w io.Writer, r *RunResult) {
	s := r.Sessions
	fmt.Fprintf(w, "%s %s: %d sessions × %d turns, think %s, session id %s", runName(r), loadName(r), s.Count, s.Turns,
		time.Duration(s.ThinkTimeMs*1e6), s.SessionID)
	if s.TurnsNotSent > 0 {
		fmt.Fprintf(w, ", %d turns not sent", s.TurnsNotSent)
	}
	share := "-"
	if r.CacheReadShare != nil {
		share = fmt.Sprintf("%.1f%%", 100**r.CacheReadShare)
	}
	fmt.Fprintf(w, "; cache-read share %s of %d prompt tokens", share, r.InTok)
	if s.CacheReadShareLater != nil {
		fmt.Fprintf(w, " (turns 2+: %.1f%%)", 100**s.CacheReadShareLater)
	}
	fmt.Fprintf(w, "; TTFT p50/p99 first turn %s/%s, later turns %s/%s ms\n",
		pctText(s.TTFTFirstTurn, s.TTFTFirstTurn.P50), pctText(s.TTFTFirstTurn, s.TTFTFirstTurn.P99),
		pctText(s.TTFTLaterTurns, s.TTFTLaterTurns.P50), pctText(s.TTFTLaterTurns, s.TTFTLaterTurns.P99))
}
