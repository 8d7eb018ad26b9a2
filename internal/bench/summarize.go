package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/streamgate/streamgate/internal/config"
)

// summarize turns the run's records into a RunResult.
func (r *runner) summarize(elapsed time.Duration, self selfStats) RunResult {
	cfg := &r.cfg
	r.mu.Lock()
	recs := slices.Clone(r.records)
	r.mu.Unlock()
	slices.SortFunc(recs, func(a, b *Request) int { return a.Index - b.Index })

	rr := RunResult{
		Label: cfg.Label, Model: cfg.Model, BaseURL: cfg.BaseURL, API: cmpOrStr(cfg.API, APIChat), Concurrency: cfg.Concurrency,
		RequestedRate: cfg.Rate, DurationS: elapsed.Seconds(), Errors: map[string]int{},
	}
	var ttft, itl, gaps, tpot, e2e, tps, toks, lag, wait, delays, doneEnd []float64
	sources := map[string]int{}
	good := 0
	var firstSent, lastSent, firstIntended, lastIntended time.Duration
	n := 0
	// An open loop: at a rate, or a trace's arrivals.
	open := cfg.Rate > 0 || cfg.Trace != nil
	for _, q := range recs {
		rr.Chunks += q.Events
		for _, d := range q.Delays {
			delays = append(delays, ms(d))
		}
		if q.Incomplete {
			rr.Incomplete++
			continue
		}
		if n == 0 || q.Sent < firstSent {
			firstSent = q.Sent
		}
		lastSent = max(lastSent, q.Sent)
		if n == 0 || q.Intended < firstIntended {
			firstIntended = q.Intended
		}
		lastIntended = max(lastIntended, q.Intended)
		n++
		rr.Requests++
		if open {
			lag = append(lag, ms(q.Sent-q.Intended))
			wait = append(wait, ms(q.SlotWait))
		}
		if !q.OK() {
			rr.Failed++
			rr.Errors[q.Kind]++
			if q.Interrupted {
				rr.Interrupted++
			}
			continue
		}
		rr.Succeeded++
		sources[q.TokenSource]++
		rr.OutTok += q.OutputTokens
		rr.InTok += q.InputTokens
		rr.CacheReadTok += q.CacheReadTokens
		rr.CacheWriteTok += q.CacheWriteTokens
		toks = append(toks, float64(q.OutputTokens))
		if d, ok := q.TTFT(); ok {
			ttft = append(ttft, ms(d))
		}
		if d, ok := q.E2E(); ok {
			e2e = append(e2e, ms(d))
		}
		for i := 1; i < len(q.Arrivals); i++ {
			itl = append(itl, ms(q.Arrivals[i]-q.Arrivals[i-1]))
		}
		if d, ok := q.MaxGap(); ok {
			gaps = append(gaps, ms(d))
		}
		if d, ok := q.TPOT(); ok {
			tpot = append(tpot, ms(d))
		}
		if q.DoneEnded {
			doneEnd = append(doneEnd, ms(q.DoneToEnd))
		}
		if v, ok := q.TPS(); ok {
			tps = append(tps, v)
		}
		if meets(q, cfg.Goodput) {
			good++
		}
	}
	rr.TTFT, rr.ITL, rr.MaxGap = Summarize(ttft), Summarize(itl), Summarize(gaps)
	rr.TPOT, rr.E2E, rr.TPS, rr.Tokens = Summarize(tpot), Summarize(e2e), Summarize(tps), Summarize(toks)
	if len(doneEnd) > 0 {
		d := Summarize(doneEnd)
		rr.DoneToEnd = &d
	}
	switch {
	case len(sources) == 0:
		rr.TokSrc = "none"
	case len(sources) == 1:
		for k := range sources {
			rr.TokSrc = k
		}
	default:
		rr.TokSrc = "mixed"
	}
	if s := elapsed.Seconds(); s > 0 {
		rr.Throughput = float64(rr.OutTok) / s
		rr.RequestsPerS = float64(rr.Succeeded) / s
	}
	if open && n > 1 && lastSent > firstSent {
		rr.AchievedRate = float64(n-1) / (lastSent - firstSent).Seconds()
	}
	if cfg.Sessions > 0 {
		r.sessionStats(&rr, recs)
	}
	rr.CostUSD = cfg.Price.Cost(config.Tokens{Input: int64(rr.InTok), CacheRead: int64(rr.CacheReadTok), CacheWrite: int64(rr.CacheWriteTok), Output: int64(rr.OutTok)})
	if !cfg.Goodput.IsZero() && rr.Requests > 0 {
		rr.Goodput = &Goodput{Fraction: float64(good) / float64(rr.Requests), SLO: cfg.Goodput.String()}
		if s := elapsed.Seconds(); s > 0 {
			rr.Goodput.PerS = float64(good) / s
		}
	}
	if open {
		l, w := Summarize(lag), Summarize(wait)
		rr.ScheduleLag, rr.SlotWait = &l, &w
		// The intended schedule's own rate, so a seeded Poisson draw that
		// happens to run fast or slow is not mistaken for client lag.
		intended := 0.0
		if n > 1 && lastIntended > firstIntended {
			intended = float64(n-1) / (lastIntended - firstIntended).Seconds()
		}
		rate := cfg.Rate
		if cfg.Trace != nil {
			// A trace's requested rate is its schedule's own.
			rate = intended
			rr.RequestedRate = intended
			r.traceStats(&rr, recs)
		}
		tol := 10.0 // ms: 10 ms, or a tenth of the mean gap
		if rate > 0 {
			tol = max(tol, 100/rate)
		}
		if l.P99 > tol {
			rr.Warnings = append(rr.Warnings, fmt.Sprintf("the client could not keep the schedule: schedule lag p99 %.1f ms (latencies measured from the actual send understate what users would see)", l.P99))
		}
		if intended > 0 && rr.AchievedRate < 0.95*intended {
			rr.Warnings = append(rr.Warnings, fmt.Sprintf("achieved rate %.2f/s is below the intended %.2f/s", rr.AchievedRate, intended))
		}
		if w.P99 > 1 && cfg.Concurrency > 0 {
			rr.Warnings = append(rr.Warnings, fmt.Sprintf("concurrency cap %d reached: requests waited for a slot up to %.1f ms (p99 %.1f ms)", cfg.Concurrency, w.Max, w.P99))
		}
	}
	rr.Client = ClientStats{
		GCPauseMaxMs:  ms(self.gcPauseMax),
		GCCycles:      self.gcCycles,
		SchedLagP99Ms: ms(self.schedLagP99),
		CPUSeconds:    self.cpu.Seconds(),
	}
	if rr.Chunks > 0 {
		rr.Client.CPUUsPerChunk = float64(self.cpu.Microseconds()) / float64(rr.Chunks)
	}
	if len(delays) > 0 {
		r.delays = slices.Clone(delays)
		d := Summarize(delays)
		rr.Client.MeasurementDelay = &d
	}
	if rr.Client.GCPauseMaxMs > 1 {
		rr.Warnings = append(rr.Warnings, fmt.Sprintf("client GC pause max %.2f ms: figures may include client pauses", rr.Client.GCPauseMaxMs))
	}
	if rr.Client.SchedLagP99Ms > 1 {
		rr.Warnings = append(rr.Warnings, fmt.Sprintf("client scheduling lag p99 %.2f ms: the client machine is loaded", rr.Client.SchedLagP99Ms))
	}
	if cfg.KeepRequests {
		rr.Records = recs
	}
	return rr
}

// meets reports whether a successful request met every set objective.
func meets(q *Request, s SLO) bool {
	if s.IsZero() {
		return false
	}
	if s.TTFT > 0 {
		if d, ok := q.TTFT(); !ok || d > s.TTFT {
			return false
		}
	}
	if s.E2E > 0 {
		if d, ok := q.E2E(); !ok || d > s.E2E {
			return false
		}
	}
	if s.ITL > 0 && len(q.Arrivals) > 1 && q.decode()/time.Duration(len(q.Arrivals)-1) > s.ITL {
		return false
	}
	if s.TPOT > 0 {
		if d, ok := q.TPOT(); ok && d > s.TPOT {
			return false
		}
	}
	if s.MaxGap > 0 {
		if d, ok := q.MaxGap(); ok && d > s.MaxGap {
			return false
		}
	}
	return true
}
