package bench

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// compareMetrics are the figures compare shows, with whether lower is better.
var compareMetrics = []struct {
	name   string
	spread string // key in RunResult.Spread, "" when none
	lower  bool
	get    func(*RunResult) float64
}{
	{"TTFT p50 ms", "ttft_p50", true, func(r *RunResult) float64 { return r.TTFT.P50 }},
	{"TTFT p90 ms", "ttft_p90", true, func(r *RunResult) float64 { return r.TTFT.P90 }},
	{"TTFT p99 ms", "ttft_p99", true, func(r *RunResult) float64 { return r.TTFT.P99 }},
	{"TTFT mean ms", "ttft_mean", true, func(r *RunResult) float64 { return r.TTFT.Mean }},
	{"ITL p50 ms", "itl_p50", true, func(r *RunResult) float64 { return r.ITL.P50 }},
	{"ITL p99 ms", "itl_p99", true, func(r *RunResult) float64 { return r.ITL.P99 }},
	{"max gap p99 ms", "max_gap_p99", true, func(r *RunResult) float64 { return r.MaxGap.P99 }},
	{"TPOT p50 ms", "tpot_p50", true, func(r *RunResult) float64 { return r.TPOT.P50 }},
	{"E2E p50 ms", "e2e_p50", true, func(r *RunResult) float64 { return r.E2E.P50 }},
	{"E2E p99 ms", "e2e_p99", true, func(r *RunResult) float64 { return r.E2E.P99 }},
	{"TPS p50", "tps_p50", false, func(r *RunResult) float64 { return r.TPS.P50 }},
	{"throughput tok/s", "throughput", false, func(r *RunResult) float64 { return r.Throughput }},
	{"succeeded", "", false, func(r *RunResult) float64 { return float64(r.Succeeded) }},
	{"failed", "", true, func(r *RunResult) float64 { return float64(r.Failed) }},
	{"interrupted", "", true, func(r *RunResult) float64 { return float64(r.Interrupted) }},
	{"goodput", "", false, func(r *RunResult) float64 {
		if r.Goodput == nil {
			return math.NaN()
		}
		return r.Goodput.Fraction
	}},
	{"cost USD", "", true, func(r *RunResult) float64 { return r.CostUSD }},
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

// WriteCompare prints every metric of the runs of results side by side,
// each later result with its change against the first in percent, marked
// "~" when the change is within the sampling noise of the figures and "+" or
// "-" when it is better or worse beyond it. Runs are matched by position.
func WriteCompare(w io.Writer, names []string, results ...*Result) error {
	if len(results) < 2 {
		return fmt.Errorf("compare: need at least two results")
	}
	n := len(results[0].Runs)
	for _, r := range results[1:] {
		n = min(n, len(r.Runs))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i := range n {
		fmt.Fprintf(tw, "run %d: %s %s\t", i+1, runName(&results[0].Runs[i]), loadName(&results[0].Runs[i]))
		for j := range results {
			fmt.Fprintf(tw, "%s\t", names[j])
			if j > 0 {
				fmt.Fprint(tw, "Δ%\t\t")
			}
		}
		fmt.Fprintln(tw)
		base := &results[0].Runs[i]
		for _, m := range compareMetrics {
			a := m.get(base)
			fmt.Fprintf(tw, "%s\t%s\t", m.name, num(a))
			for _, res := range results[1:] {
				r := &res.Runs[i]
				b := m.get(r)
				fmt.Fprintf(tw, "%s\t%s\t%s\t", num(b), pct(a, b), verdict(m.name, m.spread, m.lower, a, b, base, r))
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "+ better, - worse beyond the noise, ~ within it (noise: the ranges over --runs repeats overlap; without repeats, a change under 2/sqrt(n) of the smaller sample)")
	return nil
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3g", v)
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
