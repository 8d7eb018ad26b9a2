package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
)

// HeaderSimTokens is the simulator's output length header (sim.HeaderTokens):
// a replayed request sends its recorded output length in it, with
// max_tokens the same, so the simulator answers exactly that many tokens.
// Other servers ignore it; vLLM-style servers need {"ignore_eos":true} in
// --extra-body for the same.
const HeaderSimTokens = "X-Sim-Tokens"

// traceLookahead is how many requests are built ahead of their send time,
// so the send loop only waits and sends: a burst of arrivals at one
// instant does not queue behind the building of its bodies.
const traceLookahead = 256

// TraceStats are a trace replay's figures in a RunResult.
type TraceStats struct {
	File   string  `json:"file"`
	Format string  `json:"format"`
	Speed  float64 `json:"speed"`
	Window string  `json:"window,omitempty"`
	// Entries is the trace's requests in the window; the run sent the
	// first Requests of them (all unless --requests caps it).
	Entries int `json:"entries"`
	// SpanS is the replayed schedule's length in seconds (after the speed);
	// PeakRate its most arrivals in any one second.
	SpanS    float64 `json:"span_s"`
	PeakRate float64 `json:"peak_rate"`
	// Recorded and achieved token counts over the succeeded requests:
	// input over those whose prompt length the trace records; a request
	// whose count differs from its record is counted in the mismatches.
	RecordedInputTokens  int `json:"recorded_input_tokens"`
	AchievedInputTokens  int `json:"achieved_input_tokens"`
	InputMismatch        int `json:"input_mismatch"`
	RecordedOutputTokens int `json:"recorded_output_tokens"`
	AchievedOutputTokens int `json:"achieved_output_tokens"`
	OutputMismatch       int `json:"output_mismatch"`
}

func traceSpeed(s float64) float64 {
	if s <= 0 {
		return 1
	}
	return s
}

// checkTrace validates a trace run's config and sets its request count.
func checkTrace(cfg *Config) error {
	switch {
	case len(cfg.Trace.Entries) == 0:
		return errors.New("bench: the trace has no requests")
	case cfg.Rate > 0:
		return errors.New("bench: a trace sets the arrivals: no rate with it")
	case cfg.TraceSpeed < 0 || math.IsInf(cfg.TraceSpeed, 0) || math.IsNaN(cfg.TraceSpeed):
		return fmt.Errorf("bench: trace speed %v: want a positive number", cfg.TraceSpeed)
	}
	n := len(cfg.Trace.Entries)
	if cfg.Requests == 0 || cfg.Requests > n {
		cfg.Requests = n
	}
	return nil
}

// traceLoop replays the trace open loop: each entry is sent at its
// arrival offset / speed from the run's start, on its own goroutine,
// waiting for a slot when a concurrency cap is set. A builder goroutine
// makes the requests up to traceLookahead ahead of their time.
func (r *runner) traceLoop(stopCtx, reqCtx context.Context) {
	cfg := &r.cfg
	entries := cfg.Trace.Entries[:cfg.Requests]
	speed := traceSpeed(cfg.TraceSpeed)
	type job struct {
		req  *Request
		body []byte
		hdr  http.Header
	}
	jobs := make(chan job, traceLookahead)
	quit := make(chan struct{})
	var wg, builder sync.WaitGroup
	defer wg.Wait()
	builder.Go(func() {
		defer close(jobs)
		// The body of a synthesised prompt around its text: the text (ASCII
		// words, nothing to escape) is written in place of the marker.
		tmpl, _ := dialectBody(cfg.API, cfg.Model, Prompt{Messages: []api.Message{api.TextMessage("user", "\x00\x01\x02")}}, r.bodies.extra)
		head, tail, _ := bytes.Cut(tmpl, []byte(`\u0000\u0001\u0002`))
		for i := range entries {
			req, body, hdr := r.traceRequest(&entries[i], i, head, tail)
			req.Intended = time.Duration(float64(entries[i].At) / speed)
			select {
			case jobs <- job{req, body, hdr}:
			case <-quit:
				return
			}
		}
	})
	defer func() { close(quit); builder.Wait() }()

	var sem chan struct{}
	if cfg.Concurrency > 0 {
		sem = make(chan struct{}, cfg.Concurrency)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for j := range jobs {
		req := j.req
		if cfg.Duration > 0 && req.Intended >= cfg.Duration {
			return
		}
		var ok bool
		if req.SlotWait, ok = r.awaitSend(stopCtx, timer, req.Intended, sem); !ok {
			return
		}
		wg.Go(func() {
			r.sendWith(reqCtx, req, j.body, j.hdr, true)
			if sem != nil {
				<-sem
			}
		})
	}
}

// minResponsesOutput is the smallest max_output_tokens OpenAI's Responses
// API accepts.
const minResponsesOutput = 16

// traceRequest builds the request of entry e (index i): its prompt (the
// recorded one, else synthesised between head and tail), max_tokens its
// recorded output length (at least 1; Responses: at least 16, the API's
// minimum) and, unless the run's headers set it, X-Sim-Tokens the
// recorded length, which the simulator then answers exactly.
func (r *runner) traceRequest(e *TraceEntry, i int, head, tail []byte) (*Request, []byte, http.Header) {
	out := max(1, e.OutputTokens)
	req := &Request{Index: i, Prompt: i, MaxTokens: out, Entry: e, Arrivals: make([]time.Duration, 0, min(out+2, 4096))}
	var body []byte
	if e.Prompt == "" {
		tokens := traceTextTokens(e)
		body = make([]byte, 0, len(head)+4*tokens+len(tail)+32)
		body = append(body, head...)
		body = appendTraceText(body, e, i, tokens)
		body = append(body, tail...)
	} else {
		enc, err := dialectBody(r.cfg.API, r.cfg.Model, Prompt{Messages: []api.Message{api.TextMessage("user", e.Prompt)}}, r.bodies.extra)
		if err != nil { // not for a valid API: prepare checked it
			enc = []byte("{")
		}
		body = make([]byte, 0, len(enc)+32)
		body = append(body, enc...)
	}
	body = append(body, r.bodies.limit...)
	limit := out
	if r.cfg.API == APIResponses {
		limit = max(limit, minResponsesOutput)
	}
	body = strconv.AppendInt(body, int64(limit), 10)
	body = append(body, '}')
	hdr := r.header
	if r.header.Get(HeaderSimTokens) == "" {
		hdr = r.header.Clone()
		hdr.Set(HeaderSimTokens, strconv.Itoa(out))
	}
	return req, body, hdr
}

// traceStats summarises a replay's records (sorted by index, which is
// time order) into rr.Trace and rr.CacheReadShare.
func (r *runner) traceStats(rr *RunResult, recs []*Request) {
	t := r.cfg.Trace
	st := &TraceStats{File: t.File, Format: t.Format, Speed: traceSpeed(r.cfg.TraceSpeed), Window: t.Window.String(), Entries: len(t.Entries)}
	var sched []time.Duration
	for _, q := range recs {
		if q.Entry == nil {
			continue
		}
		sched = append(sched, q.Intended)
		if !q.OK() {
			continue
		}
		e := q.Entry
		if e.InputTokens > 0 {
			st.RecordedInputTokens += e.InputTokens
			st.AchievedInputTokens += q.InputTokens
			if q.InputTokens != e.InputTokens {
				st.InputMismatch++
			}
		}
		st.RecordedOutputTokens += e.OutputTokens
		st.AchievedOutputTokens += q.OutputTokens
		if q.OutputTokens != e.OutputTokens {
			st.OutputMismatch++
		}
	}
	if len(sched) > 0 {
		st.SpanS = (sched[len(sched)-1] - sched[0]).Seconds()
		st.PeakRate = float64(peakPerSecond(sched))
	}
	rr.Trace = st
	if rr.InTok > 0 {
		share := float64(rr.CacheReadTok) / float64(rr.InTok)
		rr.CacheReadShare = &share
	}
}

// peakPerSecond is the most of the sorted times in any window of one second.
func peakPerSecond(ts []time.Duration) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi]-ts[lo] >= time.Second {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// traceTables is the HTML report's table of trace replays (none without).
func traceTables(runs []RunResult) []Table {
	t := Table{Caption: "Trace replay", Head: []string{"run", "load", "trace", "entries", "span s", "peak /s",
		"schedule lag p50 ms", "p99 ms", "max ms", "input recorded", "input achieved", "input differ",
		"output recorded", "output achieved", "output differ", "cache reads"}, Text: []int{2}}
	for i := range runs {
		r := &runs[i]
		tr := r.Trace
		if tr == nil {
			continue
		}
		lag := Dist{}
		if r.ScheduleLag != nil {
			lag = *r.ScheduleLag
		}
		cache := "-"
		if r.CacheReadShare != nil {
			cache = fmt.Sprintf("%.1f%%", 100**r.CacheReadShare)
		}
		name := tr.File + " (" + tr.Format + ")"
		if tr.Window != "" {
			name += " " + tr.Window
		}
		t.Rows = append(t.Rows, []string{runName(r), loadName(r), name, strconv.Itoa(tr.Entries), fmt.Sprintf("%.1f", tr.SpanS),
			fmt.Sprintf("%.0f", tr.PeakRate), fms(lag.P50), fms(lag.P99), fms(lag.Max),
			strconv.Itoa(tr.RecordedInputTokens), strconv.Itoa(tr.AchievedInputTokens), strconv.Itoa(tr.InputMismatch),
			strconv.Itoa(tr.RecordedOutputTokens), strconv.Itoa(tr.AchievedOutputTokens), strconv.Itoa(tr.OutputMismatch), cache})
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return []Table{t}
}
