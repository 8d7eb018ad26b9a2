package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// palette colours the first series of a plot (the Okabe-Ito colour-blind
// friendly set); colours extends it with further distinct colours.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

// colours returns n distinct colours: the palette, then hues a golden angle
// apart at three lightnesses, so no two series of a plot share one.
func colours(n int) []string {
	out := make([]string, 0, n)
	seen := map[string]bool{}
	for i := 0; len(out) < n; i++ {
		c := ""
		if i < len(palette) {
			c = palette[i]
		} else {
			k := i - len(palette)
			c = hsl(math.Mod(float64(k)*137.508, 360), 0.7, []float64{0.42, 0.3, 0.55}[k%3])
		}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// hsl returns the "#RRGGBB" of hue h (degrees), saturation s and lightness l.
func hsl(h, s, l float64) string {
	c := (1 - math.Abs(2*l-1)) * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	var r, g, b float64
	switch {
	case h < 60:
		r, g = c, x
	case h < 120:
		r, g = x, c
	case h < 180:
		g, b = c, x
	case h < 240:
		g, b = x, c
	case h < 300:
		r, b = x, c
	default:
		r, b = c, x
	}
	m := l - c/2
	to := func(v float64) int { return int(math.Round((v + m) * 255)) }
	return fmt.Sprintf("#%02X%02X%02X", to(r), to(g), to(b))
}

// series is one line or set of dots of a plot.
type series struct {
	name   string
	colour string
	xs, ys []float64
	dots   bool
}

// plot is an SVG chart with linear axes.
type plot struct {
	title, xlabel, ylabel string
	series                []series
}

// A plot is plotW wide so that two sit side by side in a 1280 px window;
// its legend goes below the axes, in rows of legendRow px.
const plotW, plotH = 600, 300
const padL, padR, padT, padB = 60, 28, 28, 44
const legendRow, legendGap, legendFont = 18, 14, 11

// textWidth estimates, on the generous side, the width in px of s in 11 px
// sans-serif (DejaVu Sans metrics, the widest common default).
func textWidth(s string) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case r >= 0x1100 && (r <= 0x115F || r >= 0x2E80):
			w += 11.5 // wide East Asian
		case r == 'M' || r == 'W' || r == 'm' || r == 'w':
			w += 11
		case unicode.IsUpper(r):
			w += 8.5
		case r == 'i' || r == 'l' || r == 'j' || r == 'I':
			w += 3.5
		case unicode.IsLower(r) || unicode.IsDigit(r):
			w += 7.2
		case strings.ContainsRune("=+<>~", r):
			w += 9.5
		case strings.ContainsRune(" .,:;'|", r):
			w += 3.8
		default:
			w += 7.5
		}
	}
	return w
}

// legendItem is one laid-out legend entry: swatch at x, y; label beside it.
type legendItem struct {
	x, y        float64
	colour      string
	label, full string
}

// legend lays the series' names out in rows under the axes, from the left
// axis to the plot's right edge, so no entry overlaps another or leaves the
// plot; a name too long for a row is cut with "…" (the full name is its
// tooltip). It returns the items and the height they take.
func (p *plot) legend() ([]legendItem, float64) {
	const left, right = padL, plotW - padR
	x, y := float64(left), float64(plotH+4)
	var items []legendItem
	for _, s := range p.series {
		label := s.name
		avail := float64(right-left) - 16
		if textWidth(label) > avail {
			r := []rune(label)
			for len(r) > 0 && textWidth(string(r)+"…") > avail {
				r = r[:len(r)-1]
			}
			label = string(r) + "…"
		}
		w := 16 + textWidth(label)
		if x > left && x+w > right {
			x, y = left, y+legendRow
		}
		items = append(items, legendItem{x: x, y: y, colour: s.colour, label: label, full: s.name})
		x += w + legendGap
	}
	if len(items) == 0 {
		return nil, 0
	}
	return items, y + legendRow - plotH
}

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
	items, lh := p.legend()
	h := plotH + int(math.Ceil(lh))
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		plotW, h, plotW, h, html.EscapeString(p.title))
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
			sx(v), padT, sx(v), plotH-padB, sx(v), plotH-padB+14, tick(v, xstep))
	}
	for v := y0; v <= y1+ystep/2; v += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padL, sy(v), plotW-padR, sy(v), padL-4, sy(v)+4, tick(v, ystep))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, (padL+plotW-padR)/2, plotH-8, html.EscapeString(p.xlabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`, (padT+plotH-padB)/2, html.EscapeString(p.ylabel))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999" class="frame"/>`, padL, padT, plotW-padL-padR, plotH-padT-padB)
	b.WriteString(`</g>`)
	for _, s := range p.series {
		if s.dots {
			fmt.Fprintf(&b, `<g fill="%s" fill-opacity="0.6">`, s.colour)
			for j := range s.xs {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2"/>`, sx(s.xs[j]), sy(s.ys[j]))
			}
			b.WriteString(`</g>`)
		} else if len(s.xs) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="`, s.colour)
			for j := range s.xs {
				fmt.Fprintf(&b, "%.1f,%.1f ", sx(s.xs[j]), sy(s.ys[j]))
			}
			b.WriteString(`"/>`)
		}
	}
	for _, it := range items {
		fmt.Fprintf(&b, `<g class="legend"><rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f" font-size="%d">%s`,
			it.x, it.y, it.colour, it.x+16, it.y+10, legendFont, html.EscapeString(it.label))
		if it.label != it.full {
			fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(it.full))
		}
		b.WriteString(`</text></g>`)
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

// tick writes an axis value with as many decimals as the step between
// ticks needs (0.0005 steps: 0.001, 0.0015; never two equal labels).
func tick(v, step float64) string {
	if math.Abs(v) < step/1e6 {
		return "0"
	}
	d := 0
	for d < 9 && math.Abs(step*math.Pow10(d)-math.Round(step*math.Pow10(d))) > 1e-6 {
		d++
	}
	return strconv.FormatFloat(v, 'f', d, 64)
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

// Table is a table of an HTML report: a header row and rows of plain-text
// cells (escaped when written). Numbers are right-aligned; the first column
// and the columns listed in Text are left-aligned text that may wrap.
type Table struct {
	Caption string
	Head    []string
	Rows    [][]string
	Text    []int
}

// Section is a part of an HTML report: notes, tables, then the plots of
// its runs (TTFT CDF, ITL histogram, max-gap CDF, TTFT over the run), one
// series per run named by Names (default: label, model and load). Plots
// need the per-request records (Config.KeepRequests); without them they
// say "no data". A section without runs has no plots.
type Section struct {
	Title  string
	Notes  []string
	Tables []Table
	Runs   []RunResult
	Names  []string
}

// Page is a self-contained HTML report: it loads nothing from the network
// and runs no script. Client, when set, adds the client self-check over
// the whole invocation; Config, when set, is echoed as JSON at the end.
type Page struct {
	Title string
	// Headline is the conclusion, shown first and in bold (Headline()).
	Headline string
	Intro    []string
	Warnings []string
	Sections []Section
	Client   *ClientStats
	Config   any
}

// pageStyle lays the page out for windows down to 1280 px wide without a
// horizontal scrollbar: plots two abreast and shrinking with the window,
// tables no wider than the page (text cells wrap), preformatted text wrapped.
const pageStyle = `body{font-family:system-ui,sans-serif;margin:24px;color:#222}
h2{margin-top:32px}h3{margin:20px 0 4px}
table{border-collapse:collapse;font-size:13px;max-width:100%;margin:4px 0 8px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}td{white-space:nowrap}
th{background:#f4f4f4}td:first-child,th:first-child,td.text,th.text{text-align:left;white-space:normal;overflow-wrap:anywhere}
.plots{display:flex;flex-wrap:wrap;gap:16px;margin-top:12px}.plots>div{min-width:0;max-width:100%}
.plots svg{display:block;max-width:100%;height:auto}
.note{color:#444;font-size:14px;max-width:1100px}.warn{color:#a40}
pre{background:#f8f8f8;padding:8px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}`

// WritePage writes p as a self-contained HTML page: its intro, warnings,
// sections, the client self-check, the metric definitions and the config.
func WritePage(w io.Writer, p *Page) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">`+
		"<title>%s</title><style>\n%s\n</style></head><body><h1>%s</h1>", html.EscapeString(p.Title), pageStyle, html.EscapeString(p.Title))
	if p.Headline != "" {
		fmt.Fprintf(&b, `<p class="headline"><strong>%s</strong></p>`, html.EscapeString(p.Headline))
	}
	for _, s := range p.Intro {
		fmt.Fprintf(&b, "<p>%s</p>", html.EscapeString(s))
	}
	if len(p.Warnings) > 0 {
		b.WriteString("<h3>Warnings</h3><ul>")
		for _, wn := range p.Warnings {
			fmt.Fprintf(&b, `<li class="warn">%s</li>`, html.EscapeString(wn))
		}
		b.WriteString("</ul>")
	}
	for i := range p.Sections {
		writeSection(&b, &p.Sections[i])
	}
	if c := p.Client; c != nil {
		fmt.Fprintf(&b, "<h2>Client self-check</h2><p>Over the whole invocation: GC pause max %.3f ms, scheduling lag p99 %.3f ms, CPU %.2f µs per chunk",
			c.GCPauseMaxMs, c.SchedLagP99Ms, c.CPUUsPerChunk)
		if d := c.MeasurementDelay; d != nil {
			fmt.Fprintf(&b, ", measurement delay p50 %.3f / p99 %.3f / max %.3f ms", d.P50, d.P99, d.Max)
		}
		b.WriteString(".</p>")
	}
	b.WriteString("<h2>Metric definitions</h2><pre>")
	b.WriteString(html.EscapeString(Definitions))
	b.WriteString("</pre>")
	if p.Config != nil {
		var cfg strings.Builder
		if err := writeIndentedJSON(&cfg, p.Config); err != nil {
			return err
		}
		b.WriteString("<h2>Configuration</h2><pre>")
		b.WriteString(html.EscapeString(cfg.String()))
		b.WriteString("</pre>")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeSection(b *strings.Builder, s *Section) {
	if s.Title != "" {
		fmt.Fprintf(b, "<h2>%s</h2>", html.EscapeString(s.Title))
	}
	for _, n := range s.Notes {
		fmt.Fprintf(b, `<p class="note">%s</p>`, html.EscapeString(n))
	}
	for _, t := range s.Tables {
		writeTable(b, &t)
	}
	if len(s.Runs) == 0 {
		return
	}
	b.WriteString(`<div class="plots">`)
	for _, p := range plotsOf(s.Runs, s.Names) {
		b.WriteString("<div>")
		b.WriteString(p.svg())
		b.WriteString("</div>")
	}
	b.WriteString("</div>")
}

func writeTable(b *strings.Builder, t *Table) {
	if t.Caption != "" {
		fmt.Fprintf(b, "<h3>%s</h3>", html.EscapeString(t.Caption))
	}
	class := func(i int) string {
		if i > 0 && slices.Contains(t.Text, i) {
			return ` class="text"`
		}
		return ""
	}
	b.WriteString("<table><tr>")
	for i, h := range t.Head {
		fmt.Fprintf(b, "<th%s>%s</th>", class(i), html.EscapeString(h))
	}
	b.WriteString("</tr>")
	for _, row := range t.Rows {
		b.WriteString("<tr>")
		for i, c := range row {
			fmt.Fprintf(b, "<td%s>%s</td>", class(i), html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
}

// plotsOf draws the four plots of runs, run i in colour i of colours.
func plotsOf(runs []RunResult, names []string) []*plot {
	ttft := &plot{title: "TTFT CDF", xlabel: "time to first token (ms)", ylabel: "fraction of requests"}
	itl := &plot{title: "ITL histogram", xlabel: "inter-token gap (ms)", ylabel: "share of gaps"}
	gaps := &plot{title: "Max gap per request (CDF)", xlabel: "largest gap in a request (ms)", ylabel: "fraction of requests"}
	timeline := &plot{title: "TTFT over the run", xlabel: "send time since start (s)", ylabel: "TTFT (ms)"}
	itlHi := 0.0
	for i := range runs {
		itlHi = max(itlHi, runs[i].ITL.P99*1.2)
	}
	cs := colours(len(runs))
	labels := make([]string, len(runs))
	for i := range runs {
		labels[i] = runName(&runs[i]) + " " + loadName(&runs[i])
		if i < len(names) && names[i] != "" {
			labels[i] = names[i]
		}
	}
	labels = distinct(labels)
	for i := range runs {
		r := &runs[i]
		name := labels[i]
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
			ttft.series = append(ttft.series, series{name: name, colour: cs[i], xs: x, ys: y})
			timeline.series = append(timeline.series, series{name: name, colour: cs[i], xs: thin(ts), ys: thin(tt), dots: true})
		}
		if len(g) > 0 {
			x, y := cdf(g)
			gaps.series = append(gaps.series, series{name: name, colour: cs[i], xs: x, ys: y})
		}
		if x, y := histogram(it, itlHi, 30); len(x) > 0 {
			itl.series = append(itl.series, series{name: name, colour: cs[i], xs: x, ys: y})
		}
	}
	return []*plot{ttft, itl, gaps, timeline}
}

// WriteHTML writes a self-contained HTML report of res: tables of latency;
// rate, cost and errors by kind; the server's figures (--scrape); the
// client's self-check; then inline SVG plots (TTFT CDF, ITL histogram,
// max-gap CDF, TTFT over the run's timeline), one series per run, the
// metric definitions and the configuration. It loads nothing from the
// network and runs no script. Plots need the per-request records
// (Config.KeepRequests); without them they say "no data".
func WriteHTML(w io.Writer, res *Result) error {
	intro := fmt.Sprintf("started %s · schema %s", res.StartedAt.Format("2006-01-02 15:04:05 UTC"), Schema)
	if res.Partial {
		intro += " · partial result (interrupted)"
	}
	p := &Page{
		Title: "streamgate bench", Headline: Headline(res.Runs), Intro: []string{intro}, Warnings: SummarizeWarnings(res.Warnings),
		Client: &res.Client, Config: res.Config,
		Sections: []Section{
			{Title: "Summary", Notes: summaryNotes(res), Tables: append(append(summaryTables(res.Runs, res.Config.MonthlyTokens), traceTables(res.Runs)...), sessionTables(res.Runs)...)},
			{Title: "Plots", Runs: res.Runs},
		},
	}
	return WritePage(w, p)
}

func summaryNotes(res *Result) []string {
	for _, r := range res.Runs {
		if r.Server != nil {
			return nil
		}
	}
	return []string{"Server figures: " + NotMeasured + " (pass --scrape with the gateway's /metrics URL to read its GC and overhead over each run)."}
}

// summaryTables returns the bench report's tables of runs: latency; rate,
// cost and errors by kind; the server's figures; the client's self-check.
// monthlyTokens (0: none) is the output volume of the projected monthly cost.
func summaryTables(runs []RunResult, monthlyTokens float64) []Table {
	lat := Table{Caption: "Latency (ms)", Head: []string{"run", "load", "ok", "failed", "interrupted",
		"TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "max gap p99", "TPOT p50", "E2E p50", "E2E p99", "TPS p50", "tok/s", "goodput"}}
	monthly := "projected monthly"
	if monthlyTokens > 0 {
		monthly += " (" + countText(monthlyTokens) + " output tokens at the input:output mix of the run)"
	}
	rate := Table{Caption: "Rate, cost and errors", Head: []string{"run", "load", "rate", "schedule lag p99 ms", "cost", monthly, "errors by kind"},
		Text: []int{2, 6}}
	server := Table{Caption: "Server (the gateway's /metrics over each run)", Head: []string{"run", "load", "GC pause max ms", "GC cycles",
		"overhead per chunk (mean) ms", "overhead per request (mean) ms"}}
	client := Table{Caption: "Client self-check", Head: []string{"run", "load", "GC pause max ms", "scheduling lag p99 ms", "CPU µs per chunk",
		"measurement delay p99 ms"}}
	for i := range runs {
		r := &runs[i]
		name, load := runName(r), loadName(r)
		lat.Rows = append(lat.Rows, []string{name, load, strconv.Itoa(r.Succeeded), strconv.Itoa(r.Failed), strconv.Itoa(r.Interrupted),
			pctText(r.TTFT, r.TTFT.P50), pctText(r.TTFT, r.TTFT.P99), pctText(r.ITL, r.ITL.P50), pctText(r.ITL, r.ITL.P99), pctText(r.MaxGap, r.MaxGap.P99),
			pctText(r.TPOT, r.TPOT.P50), pctText(r.E2E, r.E2E.P50), pctText(r.E2E, r.E2E.P99),
			fmt.Sprintf("%.1f", r.TPS.P50), fmt.Sprintf("%.1f", r.Throughput), goodputText(r.Goodput)})

		lag, cost, month, errs := "-", "-", "-", "none"
		if r.ScheduleLag != nil {
			lag = fms(r.ScheduleLag.P99)
		}
		if r.CostUSD > 0 {
			cost = fmt.Sprintf("%s (%d in, %d out tok)", money(r.CostUSD), r.InTok, r.OutTok)
		}
		if r.MonthlyCost > 0 {
			month = money(r.MonthlyCost)
		}
		if len(r.Errors) > 0 {
			errs = formatErrors(r.Errors)
		}
		rate.Rows = append(rate.Rows, []string{name, load, rateText(r), lag, cost, month, errs})

		pause, cycles, ovChunk, ovReq := NotMeasured, NotMeasured, NotMeasured, NotMeasured
		if s := r.Server; s != nil {
			pause, cycles = optText(s.GCPauseMaxMs, "%.3f"), optText(s.GCCycles, "%.0f")
			if v, ok := s.OverheadMs["chunk"]; ok {
				ovChunk = fmt.Sprintf("%.3f", v)
			}
			if v, ok := s.OverheadMs["request"]; ok {
				ovReq = fmt.Sprintf("%.3f", v)
			}
		}
		server.Rows = append(server.Rows, []string{name, load, pause, cycles, ovChunk, ovReq})

		md := "-"
		if d := r.Client.MeasurementDelay; d != nil {
			md = fmt.Sprintf("%.3f", d.P99)
		}
		client.Rows = append(client.Rows, []string{name, load, fmt.Sprintf("%.3f", r.Client.GCPauseMaxMs), fmt.Sprintf("%.3f", r.Client.SchedLagP99Ms),
			fmt.Sprintf("%.2f", r.Client.CPUUsPerChunk), md})
	}
	return []Table{lat, rate, server, client}
}

// countText writes a count the way --monthly-tokens reads it: 10M, 1.5k.
func countText(v float64) string {
	for _, u := range []struct {
		s string
		f float64
	}{{"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if v >= u.f {
			return strconv.FormatFloat(v/u.f, 'f', -1, 64) + u.s
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
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
