package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Observed is what a gateway saw of one route ("provider/model"): the
// material of an exported profile (streamgate sim profiles export). The
// metrics part comes from the gateway's /metrics (ParseGatewayMetrics),
// the samples from its usage ledger (Observed.AddEntry).
type Observed struct {
	// Route is the route's name, provider/model; the profile is named
	// after its model (what the gateway sends upstream).
	Route string
	// TTFT and ITL are the gateway's histograms of the route
	// (streamgate_time_to_first_token_seconds,
	// streamgate_inter_token_latency_seconds), bounds in nanoseconds,
	// cumulative counts, summed over the client models the route serves.
	TTFT, ITL histogram
	// Requests counts requests by status code and outcome
	// (streamgate_requests_total).
	Requests map[[2]string]float64

	// From the ledger: TTFTs (ns) of streams, by the UTC hour they
	// arrived; output tokens of requests answered in full, prompt tokens of
	// every request; output tokens of streams with a first token.
	ttfts        [24][]float64
	outputs      []float64
	prompts      []float64
	streamTokens float64
	ledger       int // entries seen
	midError     int // ledger: mid-stream failures that were an upstream error event
	midCut       int // ledger: other mid-stream failures (cut, malformed, idle)
}

type histogram struct {
	le, cum []float64
}

func (h *histogram) add(le, cum []float64) {
	if h.le == nil {
		h.le, h.cum = slices.Clone(le), slices.Clone(cum)
		return
	}
	if !slices.Equal(h.le, le) {
		return // another bucket layout: keep the first
	}
	for i := range cum {
		h.cum[i] += cum[i]
	}
}

// Buckets returns copies of the histogram's upper bounds (ns; the last
// +Inf) and cumulative counts; nil when nothing was observed.
func (h *histogram) Buckets() (le, cumulative []float64) {
	return slices.Clone(h.le), slices.Clone(h.cum)
}

func (h *histogram) count() float64 {
	if len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

// MaxMetricsBytes bounds the /metrics text read.
const MaxMetricsBytes = 64 << 20

// ParseGatewayMetrics reads a gateway's /metrics text (Prometheus text
// format) and returns the observations of every route that served
// requests, by route name.
func ParseGatewayMetrics(r io.Reader) (map[string]*Observed, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, MaxMetricsBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the gateway's metrics: %w", err)
	}
	if _, ok := fams["streamgate_requests_total"]; !ok {
		return nil, fmt.Errorf("no streamgate_requests_total in the metrics: is it a streamgate gateway's /metrics?")
	}
	obs := map[string]*Observed{}
	get := func(route string) *Observed {
		o := obs[route]
		if o == nil {
			o = &Observed{Route: route, Requests: map[[2]string]float64{}}
			obs[route] = o
		}
		return o
	}
	for _, m := range fams["streamgate_requests_total"].GetMetric() {
		route := label(m, "route")
		if route == "" || m.GetCounter().GetValue() == 0 {
			continue
		}
		get(route).Requests[[2]string{label(m, "code"), label(m, "outcome")}] += m.GetCounter().GetValue()
	}
	for name, pick := range map[string]func(*Observed) *histogram{
		"streamgate_time_to_first_token_seconds": func(o *Observed) *histogram { return &o.TTFT },
		"streamgate_inter_token_latency_seconds": func(o *Observed) *histogram { return &o.ITL },
	} {
		for _, m := range fams[name].GetMetric() {
			o, ok := obs[label(m, "route")]
			if !ok {
				continue
			}
			h := m.GetHistogram()
			var le, cum []float64
			for _, b := range h.GetBucket() {
				le = append(le, b.GetUpperBound()*1e9)
				cum = append(cum, float64(b.GetCumulativeCount()))
			}
			if len(le) == 0 || !math.IsInf(le[len(le)-1], 1) {
				le = append(le, math.Inf(1))
				cum = append(cum, float64(h.GetSampleCount()))
			}
			pick(o).add(le, cum)
		}
	}
	return obs, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// LedgerEntry is the part of a usage ledger entry an export reads.
type LedgerEntry struct {
	Time         time.Time
	Route        string
	Stream       bool
	Outcome      string // usage.Outcome*
	Status       int
	InputTokens  int
	OutputTokens int
	TTFT         time.Duration
	Error        string
}

// AddEntry adds one ledger entry of the route.
func (o *Observed) AddEntry(e LedgerEntry) {
	o.ledger++
	o.prompts = append(o.prompts, float64(e.InputTokens))
	if e.Stream && e.TTFT > 0 {
		h := e.Time.UTC().Hour()
		o.ttfts[h] = append(o.ttfts[h], float64(e.TTFT))
		o.streamTokens += float64(e.OutputTokens)
	}
	if e.Outcome == "ok" {
		o.outputs = append(o.outputs, float64(e.OutputTokens))
	}
	if e.Status == 200 && e.Outcome != "ok" && e.Outcome != "client_cancelled" {
		if strings.Contains(e.Error, "error event") {
			o.midError++
		} else {
			o.midCut++
		}
	}
}

// minSamples is the fewest ledger samples a table is built from; with
// fewer the histograms (or a constant) are used.
const minSamples = 20

// Profile returns the profile that replays o: TTFT from the ledger's
// samples (exact quantiles) or else the TTFT histogram; gaps from the ITL
// histogram (see NewHistogramDist); output length from the ledger's
// answers; tokens per chunk from output tokens over chunks (a histogram
// observes one TTFT and chunks-1 gaps per stream); the fault rates from
// the requests' outcomes: fail (a status other than 200 from the
// upstream: outcome upstream_error or timeout) at its most frequent
// status, and mid-stream failures (status 200, then error_event) as cuts,
// or as error events in the share the ledger's errors name one, both
// corrected for the breaks that come before the first chunk (see below),
// so a sim of the profile shows the gateway the rates it observed. A
// time-of-day shape is set when the ledger has at least 50 stream TTFTs in
// every UTC hour: the hour's median over the overall one, the TTFT table
// then built from samples divided by their hour's multiplier. notes are
// comment lines saying what the profile was built from.
func (o *Observed) Profile() (p Profile, notes []string, err error) {
	name := o.Route
	if _, m, ok := strings.Cut(o.Route, "/"); ok && m != "" {
		name = m
	}
	p = Profile{Name: name, Lang: "en"}
	var all []float64
	var hourly *[24]float64
	for h := range o.ttfts {
		all = append(all, o.ttfts[h]...)
	}
	if len(all) >= 24*50 {
		hourly = new([24]float64)
		med := quantileOf(slices.Sorted(slices.Values(all)), 0.5)
		for h := range o.ttfts {
			if len(o.ttfts[h]) < 50 || med <= 0 {
				hourly = nil
				break
			}
			hourly[h] = max(0.01, min(100, quantileOf(slices.Sorted(slices.Values(o.ttfts[h])), 0.5)/med))
		}
		if hourly != nil {
			all = all[:0]
			for h := range o.ttfts {
				for _, v := range o.ttfts[h] {
					all = append(all, v/hourly[h])
				}
			}
			p.Hourly = hourly
			notes = append(notes, "hourly: each UTC hour's median TTFT over the overall median (ledger)")
		}
	}
	switch {
	case len(all) >= minSamples:
		p.TTFTDist = NewEmpiricalDist(all)
		notes = append(notes, fmt.Sprintf("ttft: quantiles of %d stream TTFTs in the ledger", len(all)))
	case o.TTFT.count() > 0:
		if p.TTFTDist, err = NewHistogramDist(o.TTFT.le, o.TTFT.cum); err != nil {
			return p, nil, fmt.Errorf("route %s: ttft histogram: %w", o.Route, err)
		}
		notes = append(notes, fmt.Sprintf("ttft: from the gateway's TTFT histogram (%.0f streams)", o.TTFT.count()))
	default:
		return p, nil, fmt.Errorf("route %s: no TTFT observed (no stream reached its first token)", o.Route)
	}
	if o.ITL.count() > 0 {
		if p.ITLDist, err = NewHistogramDist(o.ITL.le, o.ITL.cum); err != nil {
			return p, nil, fmt.Errorf("route %s: itl histogram: %w", o.Route, err)
		}
		notes = append(notes, fmt.Sprintf("itl: from the gateway's inter-token histogram (%.0f gaps)", o.ITL.count()))
	} else {
		p.ITL = 0 // single-chunk answers only
	}
	chunks := o.ITL.count() + o.TTFT.count()
	if o.streamTokens > 0 && chunks > 0 {
		mean := o.streamTokens / chunks
		p.TokensPerChunk = max(1, int(math.Floor(mean)))
		if f := mean - math.Floor(mean); mean >= 1 && f > 0.05 && f < 0.95 {
			// Two sizes around the mean, weighted to it.
			n := int(math.Floor(mean))
			if w, err := NewWeights(map[int]float64{n: 1 - f, n + 1: f}); err == nil {
				p.ChunkDist, p.TokensPerChunk = w, 0
			}
		}
		notes = append(notes, fmt.Sprintf("tokens_per_chunk: %.0f stream output tokens (ledger) over %.0f chunks (histograms): %.2f", o.streamTokens, chunks, mean))
	} else {
		p.TokensPerChunk = 1
	}
	if len(o.outputs) >= minSamples {
		p.TokensDist = NewEmpiricalDist(o.outputs)
		notes = append(notes, fmt.Sprintf("tokens: quantiles of %d answers' output tokens (ledger)", len(o.outputs)))
	} else if len(o.outputs) > 0 {
		p.Tokens = max(1, int(math.Round(meanOf(o.outputs))))
	}
	if len(o.prompts) > 0 {
		s := slices.Sorted(slices.Values(o.prompts))
		notes = append(notes, fmt.Sprintf("prompt tokens seen (not simulated, for the bench's prompts): p50 %.0f, p90 %.0f, p99 %.0f",
			quantileOf(s, .5), quantileOf(s, .9), quantileOf(s, .99)))
	}

	var total, fail, mid float64
	statuses := map[string]float64{}
	for k, n := range o.Requests {
		code, outcome := k[0], k[1]
		if outcome == "rejected" {
			continue
		}
		total += n
		switch {
		case code == "200" && outcome == "error_event":
			mid += n
		case code != "200" && (outcome == "upstream_error" || outcome == "timeout"):
			fail += n
			statuses[code] += n
		}
	}
	if total > 0 {
		f := &p.Faults
		// A cut or an error event hits a random one of a stream's N+1
		// positions (before each content chunk, and after the last): at the
		// first, nothing was committed and the gateway saw a failure before
		// the stream; at the others, a break mid-stream. The sim's rates
		// are what makes the observed ones: fail F and break C give
		// observed fail F + (1-F)·C/(N+1) and break (1-F)·C·N/(N+1), so
		// F = observed fail - observed break / N and C = observed break /
		// (N/(N+1)) / (1-F), with N the mean chunks of a stream.
		failRate, midRate := fail/total, mid/total
		if streams := o.TTFT.count(); streams > 0 && chunks > 0 && midRate > 0 {
			n := chunks / streams
			failRate = max(0, failRate-midRate/n)
			midRate = min(1, midRate/(n/(n+1))/(1-failRate))
		}
		if fail > 0 && failRate > 0 {
			f.FailRate = round4(failRate)
			best, bestN := "", 0.0
			for c, n := range statuses {
				if n > bestN || n == bestN && c < best {
					best, bestN = c, n
				}
			}
			f.FailStatus, _ = strconv.Atoi(best)
			if f.FailStatus < 400 || f.FailStatus > 599 {
				f.FailStatus = DefaultFailStatus
			}
		}
		if mid > 0 {
			rate := midRate
			errShare := 0.0
			if n := o.midError + o.midCut; n > 0 {
				errShare = float64(o.midError) / float64(n)
			}
			f.ErrorRate, f.CutRate = round4(rate*errShare), round4(rate*(1-errShare))
		}
		notes = append(notes, fmt.Sprintf("faults: of %.0f requests, %.0f failed before the stream, %.0f broke mid-stream (streamgate_requests_total)", total, fail, mid))
	}
	p.Source = "exported from a gateway's observations of route " + o.Route
	return p, notes, p.Validate()
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

func meanOf(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// quantileOf returns the p quantile of sorted samples, interpolated
// between ranks (type 7, as R's and numpy's default).
func quantileOf(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	r := p * float64(len(s)-1)
	i := int(r)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (r-float64(i))*(s[i+1]-s[i])
}

// NewEmpiricalDist returns the quantile table of samples (at least one)
// on the grid of histogram tables: the smallest sample at p0, the largest
// at p100, the sample quantiles (type 7) between.
func NewEmpiricalDist(samples []float64) *Dist {
	s := slices.Clone(samples)
	sort.Float64s(s)
	d := &Dist{}
	for _, p := range histogramGrid {
		d.p, d.v = append(d.p, p), append(d.v, quantileOf(s, p))
	}
	return d.index()
}
