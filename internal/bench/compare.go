package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// compareMetrics are the figures compare shows, with whether lower is
// better. get returns NaN for a figure the run does not have (printed "-").
// A figure with judge false gets no noise verdict: a maximum or a count
// from the server has no sample size to judge noise by.
var compareMetrics = []struct {
	name   string
	spread string // key in RunResult.Spread, "" when none
	lower  bool
	judge  bool
	get    func(*RunResult) float64
}{
	{"TTFT p50 ms", "ttft_p50", true, true, func(r *RunResult) float64 { return dist(r.TTFT, r.TTFT.P50) }},
	{"TTFT p90 ms", "ttft_p90", true, true, func(r *RunResult) float64 { return dist(r.TTFT, r.TTFT.P90) }},
	{"TTFT p99 ms", "ttft_p99", true, true, func(r *RunResult) float64 { return dist(r.TTFT, r.TTFT.P99) }},
	{"TTFT mean ms", "ttft_mean", true, true, func(r *RunResult) float64 { return dist(r.TTFT, r.TTFT.Mean) }},
	{"ITL p50 ms", "itl_p50", true, true, func(r *RunResult) float64 { return dist(r.ITL, r.ITL.P50) }},
	{"ITL p99 ms", "itl_p99", true, true, func(r *RunResult) float64 { return dist(r.ITL, r.ITL.P99) }},
	{"max gap p99 ms", "max_gap_p99", true, true, func(r *RunResult) float64 { return dist(r.MaxGap, r.MaxGap.P99) }},
	{"TPOT p50 ms", "tpot_p50", true, true, func(r *RunResult) float64 { return dist(r.TPOT, r.TPOT.P50) }},
	{"E2E p50 ms", "e2e_p50", true, true, func(r *RunResult) float64 { return dist(r.E2E, r.E2E.P50) }},
	{"E2E p99 ms", "e2e_p99", true, true, func(r *RunResult) float64 { return dist(r.E2E, r.E2E.P99) }},
	{"TPS p50", "tps_p50", false, true, func(r *RunResult) float64 { return dist(r.TPS, r.TPS.P50) }},
	{"throughput tok/s", "throughput", false, true, func(r *RunResult) float64 { return r.Throughput }},
	{"req/s", "", false, true, func(r *RunResult) float64 { return r.RequestsPerS }},
	{"achieved rate /s", "", false, true, func(r *RunResult) float64 {
		if r.RequestedRate <= 0 {
			return math.NaN() // a closed loop has none
		}
		return r.AchievedRate
	}},
	{"schedule lag p99 ms", "", true, true, func(r *RunResult) float64 {
		if r.ScheduleLag == nil {
			return math.NaN()
		}
		return r.ScheduleLag.P99
	}},
	{"succeeded", "", false, true, func(r *RunResult) float64 { return float64(r.Succeeded) }},
	{"failed", "", true, true, func(r *RunResult) float64 { return float64(r.Failed) }},
	{"interrupted", "", true, true, func(r *RunResult) float64 { return float64(r.Interrupted) }},
	{"goodput", "", false, true, func(r *RunResult) float64 {
		if r.Goodput == nil {
			return math.NaN()
		}
		return r.Goodput.Fraction
	}},
	{"cost USD", "", true, true, func(r *RunResult) float64 {
		if r.CostUSD == 0 {
			return math.NaN() // no price given
		}
		return r.CostUSD
	}},
	{"cache-read share", "", false, false, func(r *RunResult) float64 {
		if r.CacheReadShare == nil {
			return math.NaN() // neither sessions nor a trace
		}
		return *r.CacheReadShare
	}},
	{"server GC pause max ms", "", true, false, func(r *RunResult) float64 {
		if r.Server == nil {
			return math.NaN()
		}
		return opt(r.Server.GCPauseMaxMs)
	}},
	{"server GC cycles", "", true, false, func(r *RunResult) float64 {
		if r.Server == nil {
			return math.NaN()
		}
		return opt(r.Server.GCCycles)
	}},
	{"server overhead/chunk ms", "", true, false, func(r *RunResult) float64 {
		if r.Server == nil {
			return math.NaN()
		}
		if v, ok := r.Server.OverheadMs["chunk"]; ok {
			return v
		}
		return math.NaN()
	}},
}

// dist returns v, a figure of d, or NaN when d has no samples (and v is 0:
// results saved before Dist.N existed still show their figures).
func dist(d Dist, v float64) float64 {
	if d.N == 0 && v == 0 {
		return math.NaN()
	}
	return v
}

func opt(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

// sampleN is the sample size behind metric name in r: the pooled samples of
// its distribution, else the request count.
func sampleN(name string, r *RunResult) int {
	switch name[:3] {
	case "TTF":
		return r.TTFT.N
	case "ITL":
		return r.ITL.N
	case "max":
		return r.MaxGap.N
	case "TPO":
		return r.TPOT.N
	case "E2E":
		return r.E2E.N
	case "TPS":
		return r.TPS.N
	}
	return r.Requests
}

// runKey identifies a run across results: label, model and load.
type runKey struct {
	label, model string
	concurrency  int
	rate         float64
}

func keyOf(r *RunResult) runKey { return runKey{r.Label, r.Model, r.Concurrency, r.RequestedRate} }

// WriteCompare prints every metric of the runs of results side by side,
// each later result with its change against the first in percent, marked
// "~" when the change is within the sampling noise of the figures and "+" or
// "-" when it is better or worse beyond it. Runs are paired by label, model
// and load (concurrency and rate), whatever their order; the n-th run of a
// key pairs with the n-th run of that key. A figure a run does not have is
// "-"; runs that could not be paired are named at the end, and it is an
// error when not one run could be.
func WriteCompare(w io.Writer, names []string, results ...*Result) error {
	if len(results) < 2 {
		return fmt.Errorf("compare: need at least two results")
	}
	// index[j][key] lists the positions of result j's runs with that key, in order.
	index := make([]map[runKey][]int, len(results))
	for j, res := range results {
		index[j] = map[runKey][]int{}
		for i := range res.Runs {
			k := keyOf(&res.Runs[i])
			index[j][k] = append(index[j][k], i)
		}
	}
	used := make([]map[int]bool, len(results))
	for j := range used {
		used[j] = map[int]bool{}
	}
	var notPaired []string
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	seen := map[runKey]int{}
	paired := 0
	for i := range results[0].Runs {
		base := &results[0].Runs[i]
		k := keyOf(base)
		nth := seen[k]
		seen[k]++
		others := make([]*RunResult, len(results))
		var missing []string
		for j := 1; j < len(results); j++ {
			if pos := index[j][k]; nth < len(pos) {
				others[j] = &results[j].Runs[pos[nth]]
				used[j][pos[nth]] = true
			} else {
				missing = append(missing, names[j])
			}
		}
		if len(missing) > 0 {
			notPaired = append(notPaired, fmt.Sprintf("not paired: %s: %s %s (no run with the same label, model and load in %s)",
				names[0], runName(base), loadName(base), strings.Join(missing, ", ")))
		}
		if len(missing) == len(results)-1 {
			continue
		}
		paired++
		fmt.Fprintf(tw, "%s %s\t", runName(base), loadName(base))
		for j := range results {
			fmt.Fprintf(tw, "%s\t", names[j])
			if j > 0 {
				fmt.Fprint(tw, "Δ%\t\t")
			}
		}
		fmt.Fprintln(tw)
		for _, m := range compareMetrics {
			a := m.get(base)
			fmt.Fprintf(tw, "%s\t%s\t", m.name, num(a))
			for _, r := range others[1:] {
				if r == nil {
					fmt.Fprint(tw, "-\t-\t\t")
					continue
				}
				b := m.get(r)
				v := ""
				if m.judge {
					v = verdict(m.name, m.spread, m.lower, a, b, base, r)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t", num(b), pct(a, b), v)
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for j := 1; j < len(results); j++ {
		for i := range results[j].Runs {
			if !used[j][i] {
				r := &results[j].Runs[i]
				notPaired = append(notPaired, fmt.Sprintf("not paired: %s: %s %s (no run with the same label, model and load in %s)",
					names[j], runName(r), loadName(r), names[0]))
			}
		}
	}
	for _, l := range notPaired {
		fmt.Fprintln(w, l)
	}
	if paired == 0 {
		return fmt.Errorf("compare: no run of %s has a run with the same label, model and load in %s", names[0], strings.Join(names[1:], ", "))
	}
	fmt.Fprintln(w, "+ better, - worse beyond the noise, ~ within it (noise: the ranges over --runs repeats overlap; without repeats, a change under 2/sqrt(n) of the smaller sample); a value of - is a figure the run does not have")
	return nil
}

// num writes v with three significant digits in plain notation (1150,
// 20.5, 0.000248), never in exponent form; NaN (an absent figure) is "-".
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if v == 0 {
		return "0"
	}
	d := min(max(2-int(math.Floor(math.Log10(math.Abs(v)))), 0), 9)
	s := strconv.FormatFloat(v, 'f', d, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func pct(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || a == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b-a)/a)
}

// verdict calls a change noise ("~") when, with repeats on both sides
// (--runs), the ranges of the figure over the repeats overlap; without
// repeats, when it is within 2/√n of the base value, n the smaller sample:
// about two standard errors of a mean or a median for a spread comparable
// to the value (a rough bound, without the raw samples).
func verdict(name, spread string, lower bool, a, b float64, ra, rb *RunResult) string {
	if math.IsNaN(a) || math.IsNaN(b) || a == 0 {
		return ""
	}
	rel := (b - a) / a
	sa, okA := ra.Spread[spread]
	sb, okB := rb.Spread[spread]
	if spread != "" && okA && okB {
		if sa.Min <= sb.Max && sb.Min <= sa.Max {
			return "~"
		}
	} else {
		n := min(sampleN(name, ra), sampleN(name, rb))
		if n <= 0 {
			return ""
		}
		if math.Abs(rel) <= 2/math.Sqrt(float64(n)) {
			return "~"
		}
	}
	if (rel < 0) == lower {
		return "+"
	}
	return "-"
}
