package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// palette colours the series of a plot (colour-blind friendly order).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

// series is one line or set of dots of a plot.
type series struct {
	name   string
	xs, ys []float64
	dots   bool
}

// plot is an SVG chart with linear axes.
type plot struct {
	title, xlabel, ylabel string
	series                []series
}

const plotW, plotH = 640, 300
const padL, padR, padT, padB = 60, 16, 28, 44

// svg renders the plot as an inline SVG element.
func (p *plot) svg() string {
	var b strings.Builder
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	for _, s := range p.series {
		for i := range s.xs {
			xmin, xmax = math.Min(xmin, s.xs[i]), math.Max(xmax, s.xs[i])
			ymin, ymax = math.Min(ymin, s.ys[i]), math.Max(ymax, s.ys[i])
		}
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		plotW, plotH+20*((len(p.series)+2)/3), plotW, plotH+20*((len(p.series)+2)/3), html.EscapeString(p.title))
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`, padL, html.EscapeString(p.title))
	if math.IsInf(xmin, 1) {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#666">no data</text></svg>`, padL, plotH/2)
		return b.String()
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	xmin = math.Min(xmin, 0)
	x0, x1, xstep := niceRange(xmin, xmax)
	y0, y1, ystep := niceRange(ymin, ymax)
	sx := func(v float64) float64 { return padL + (v-x0)/(x1-x0)*(plotW-padL-padR) }
	sy := func(v float64) float64 { return plotH - padB - (v-y0)/(y1-y0)*(plotH-padT-padB) }
	b.WriteString(`<g font-size="11" fill="#333">`)
	for v := x0; v <= x1+xstep/2; v += xstep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			sx(v), padT, sx(v), plotH-padB, sx(v), plotH-padB+14, tick(v))
	}
	for v := y0; v <= y1+ystep/2; v += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padL, sy(v), plotW-padR, sy(v), padL-4, sy(v)+4, tick(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, (padL+plotW-padR)/2, plotH-8, html.EscapeString(p.xlabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`, (padT+plotH-padB)/2, html.EscapeString(p.ylabel))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, plotW-padL-padR, plotH-padT-padB)
	b.WriteString(`</g>`)
	for i, s := range p.series {
		c := palette[i%len(palette)]
		if s.dots {
			fmt.Fprintf(&b, `<g fill="%s" fill-opacity="0.6">`, c)
			for j := range s.xs {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2"/>`, sx(s.xs[j]), sy(s.ys[j]))
			}
			b.WriteString(`</g>`)
		} else if len(s.xs) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="`, c)
			for j := range s.xs {
				fmt.Fprintf(&b, "%.1f,%.1f ", sx(s.xs[j]), sy(s.ys[j]))
			}
			b.WriteString(`"/>`)
		}
		lx, ly := padL+(i%3)*200, plotH+4+20*(i/3)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>`,
			lx, ly, c, lx+16, ly+10, html.EscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceRange widens [lo, hi] to round tick values about 5 steps apart.
func niceRange(lo, hi float64) (float64, float64, float64) {
	span := hi - lo
	raw := span / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return math.Floor(lo/step) * step, math.Ceil(hi/step) * step, step
}

func tick(v float64) string {
	if math.Abs(v) < 1e-9 {
		return "0"
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// cdf returns the empirical CDF of xs (sorted in place), thinned to at
// most 400 points.
func cdf(xs []float64) ([]float64, []float64) {
	slices.Sort(xs)
	n := len(xs)
	step := max(1, n/400)
	var px, py []float64
	for i := 0; i < n; i += step {
		px, py = append(px, xs[i]), append(py, float64(i+1)/float64(n))
	}
	if n > 0 && px[len(px)-1] != xs[n-1] {
		px, py = append(px, xs[n-1]), append(py, 1)
	}
	return px, py
}

// histogram returns a frequency polygon of xs over nb bins in [0, hi]
// (share of samples per bin); samples above hi go to the last bin.
func histogram(xs []float64, hi float64, nb int) ([]float64, []float64) {
	if len(xs) == 0 || hi <= 0 {
		return nil, nil
	}
	counts := make([]float64, nb)
	w := hi / float64(nb)
	for _, x := range xs {
		counts[min(nb-1, max(0, int(x/w)))]++
	}
	px, py := make([]float64, nb), make([]float64, nb)
	for i := range counts {
		px[i], py[i] = (float64(i)+0.5)*w, counts[i]/float64(len(xs))
	}
	return px, py
}

// WriteHTML writes a self-contained HTML report of res: the summary table,
// the metric definitions and inline SVG plots (TTFT CDF, ITL histogram,
// max-gap CDF, TTFT over the run's timeline), one series per run. It loads
// nothing from the network and runs no script. Plots need the per-request
// records (Config.KeepRequests); without them they say "no data".
func WriteHTML(w io.Writer, res *Result) error {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>streamgate bench report</title><style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.plots{display:flex;flex-wrap:wrap;gap:16px}
.warn{color:#a40}pre{background:#f8f8f8;padding:8px;font-size:12px;overflow-x:auto}
</style></head><body>`)
	fmt.Fprintf(&b, "<h1>streamgate bench</h1><p>started %s · schema %s", html.EscapeString(res.StartedAt.Format("2006-01-02 15:04:05 UTC")), Schema)
	if res.Partial {
		b.WriteString(` · <b class="warn">partial result (interrupted)</b>`)
	}
	b.WriteString("</p><h2>Summary</h2><table><tr><th>run</th><th>load</th><th>ok</th><th>failed</th><th>interrupted</th>")
	for _, h := range []string{"TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "max gap p99", "TPOT p50", "E2E p50", "E2E p99"} {
		fmt.Fprintf(&b, "<th>%s ms</th>", h)
	}
	b.WriteString("<th>TPS p50</th><th>tok/s</th><th>goodput</th><th>achieved rate</th><th>sched lag p99 ms</th><th>client CPU µs/chunk</th><th>measurement delay p99 ms</th><th>errors</th></tr>")
	for i := range res.Runs {
		r := &res.Runs[i]
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td>", html.EscapeString(runName(r)), html.EscapeString(loadName(r)), r.Succeeded, r.Failed, r.Interrupted)
		for _, v := range []float64{r.TTFT.P50, r.TTFT.P99, r.ITL.P50, r.ITL.P99, r.MaxGap.P99, r.TPOT.P50, r.E2E.P50, r.E2E.P99} {
			fmt.Fprintf(&b, "<td>%s</td>", fms(v))
		}
		gp, lag, md := "-", "-", "-"
		if r.Goodput != nil {
			gp = fmt.Sprintf("%.1f%%", 100*r.Goodput.Fraction)
		}
		if r.ScheduleLag != nil {
			lag = fms(r.ScheduleLag.P99)
		}
		if r.Client.MeasurementDelay != nil {
			md = fmt.Sprintf("%.3f", r.Client.MeasurementDelay.P99)
		}
		fmt.Fprintf(&b, "<td>%.1f</td><td>%.1f</td><td>%s</td><td>%.2f/s</td><td>%s</td><td>%.2f</td><td>%s</td><td>%s</td></tr>",
			r.TPS.P50, r.Throughput, gp, r.AchievedRate, lag, r.Client.CPUUsPerChunk, md, html.EscapeString(formatErrors(r.Errors)))
	}
	b.WriteString("</table>")
	if len(res.Warnings) > 0 {
		b.WriteString("<h3>Warnings</h3><ul>")
		for _, wn := range res.Warnings {
			fmt.Fprintf(&b, `<li class="warn">%s</li>`, html.EscapeString(wn))
		}
		b.WriteString("</ul>")
	}
	fmt.Fprintf(&b, "<p>Client self-check over the whole invocation: GC pause max %.3f ms, scheduling lag p99 %.3f ms, CPU %.2f µs per chunk",
		res.Client.GCPauseMaxMs, res.Client.SchedLagP99Ms, res.Client.CPUUsPerChunk)
	if d := res.Client.MeasurementDelay; d != nil {
		fmt.Fprintf(&b, ", measurement delay p50 %.3f / p99 %.3f / max %.3f ms", d.P50, d.P99, d.Max)
	}
	b.WriteString(".</p><h2>Plots</h2><div class=\"plots\">")

	ttft := plot{title: "TTFT CDF", xlabel: "time to first token (ms)", ylabel: "fraction of requests"}
	itl := plot{title: "ITL histogram", xlabel: "inter-token gap (ms)", ylabel: "share of gaps"}
	gaps := plot{title: "Max gap per request (CDF)", xlabel: "largest gap in a request (ms)", ylabel: "fraction of requests"}
	timeline := plot{title: "TTFT over the run", xlabel: "send time since start (s)", ylabel: "TTFT (ms)"}
	itlHi := 0.0
	for i := range res.Runs {
		itlHi = max(itlHi, res.Runs[i].ITL.P99*1.2)
	}
	for i := range res.Runs {
		r := &res.Runs[i]
		name := runName(r) + " " + loadName(r)
		var t, g, it, ts, tt []float64
		for _, q := range r.Records {
			if !q.OK() {
				continue
			}
			if d, ok := q.TTFT(); ok {
				t = append(t, ms(d))
				ts, tt = append(ts, q.Sent.Seconds()), append(tt, ms(d))
			}
			if d, ok := q.MaxGap(); ok {
				g = append(g, ms(d))
			}
			for k := 1; k < len(q.Arrivals); k++ {
				it = append(it, ms(q.Arrivals[k]-q.Arrivals[k-1]))
			}
		}
		if len(t) > 0 {
			x, y := cdf(t)
			ttft.series = append(ttft.series, series{name: name, xs: x, ys: y})
			timeline.series = append(timeline.series, series{name: name, xs: thin(ts), ys: thin(tt), dots: true})
		}
		if len(g) > 0 {
			x, y := cdf(g)
			gaps.series = append(gaps.series, series{name: name, xs: x, ys: y})
		}
		if x, y := histogram(it, itlHi, 30); len(x) > 0 {
			itl.series = append(itl.series, series{name: name, xs: x, ys: y})
		}
	}
	for _, p := range []*plot{&ttft, &itl, &gaps, &timeline} {
		b.WriteString("<div>")
		b.WriteString(p.svg())
		b.WriteString("</div>")
	}
	b.WriteString("</div><h2>Metric definitions</h2><pre>")
	b.WriteString(html.EscapeString(Definitions))
	b.WriteString("</pre><h2>Configuration</h2><pre>")
	var cfg strings.Builder
	if err := writeIndentedJSON(&cfg, res.Config); err != nil {
		return err
	}
	b.WriteString(html.EscapeString(cfg.String()))
	b.WriteString("</pre></body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// thin keeps at most 2000 evenly spaced points so the SVG stays small.
func thin(xs []float64) []float64 {
	if len(xs) <= 2000 {
		return xs
	}
	step := float64(len(xs)) / 2000
	out := make([]float64, 0, 2000)
	for i := 0.0; int(i) < len(xs); i += step {
		out = append(out, xs[int(i)])
	}
	return out
}
