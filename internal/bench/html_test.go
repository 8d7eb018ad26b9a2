package bench

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestWriteHTMLSelfContained(t *testing.T) {
	url := newUpstream(t, &upstream{})
	res, err := RunAll(context.Background(), []Config{
		{BaseURL: url, Model: "a", Requests: 6, Concurrency: 2, MaxTokens: 4, KeepRequests: true, Label: "<x>"},
		{BaseURL: url, Model: "b", Requests: 6, Rate: 300, MaxTokens: 4, KeepRequests: true},
	}, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteHTML(&b, res); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	if got := strings.Count(h, "<svg"); got != 4 {
		t.Errorf("plots: got %d svg elements, want 4", got)
	}
	for _, bad := range []string{"<script", "<link", "src=", "<x>"} {
		if strings.Contains(h, bad) {
			t.Errorf("report contains %q, want a self-contained, escaped page", bad)
		}
	}
	for _, want := range []string{"TTFT CDF", "ITL histogram", "Max gap", "TTFT over the run", "interrupted", "&lt;x&gt; a", "<polyline", "<circle"} {
		if !strings.Contains(h, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Count(h, "http://") != strings.Count(h, `xmlns="http://www.w3.org/2000/svg"`)+strings.Count(h, url) {
		t.Error("report refers to a network address other than the svg namespace and the benchmarked URL")
	}
}

// metricsServer serves pages[i] on the i-th scrape (the last one after).
func metricsServer(t *testing.T, pages ...string) string {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		p := pages[min(n, len(pages)-1)]
		n++
		mu.Unlock()
		io.WriteString(w, p)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// gatewayPage is a /metrics page of the gateway: GC pause histogram, GC
// cycles and the per-chunk overhead, scaled by k so two pages differ.
func gatewayPage(k int) string {
	return fmt.Sprintf(`streamgate_gc_pause_seconds_bucket{le="0.0005"} %d
streamgate_gc_pause_seconds_bucket{le="0.002"} %d
streamgate_gc_pause_seconds_bucket{le="+Inf"} %d
go_gc_cycles_total_gc_cycles_total %d
streamgate_gateway_overhead_seconds_sum{model="m",route="r",stage="chunk"} %g
streamgate_gateway_overhead_seconds_count{model="m",route="r",stage="chunk"} %d
`, 4*k, 5*k, 5*k, 5*k, 0.012*float64(k), 1000*k)
}

// The report shows what the result carries: cost and projected monthly
// cost, the server's figures from /metrics (or "not measured"), the errors
// by kind, and the closed loop's requests per second instead of an
// achieved rate.
func TestWriteHTMLCostServerErrors(t *testing.T) {
	url := newUpstream(t, &upstream{})
	price := Price{Input: 2, Output: 8}
	res, err := RunAll(context.Background(), []Config{
		{BaseURL: url, Model: "priced", Requests: 4, MaxTokens: 5, Price: price, KeepRequests: true,
			Scrape: metricsServer(t, gatewayPage(1), gatewayPage(2))},
		{BaseURL: url, Model: "summary-only", Requests: 4, MaxTokens: 5, KeepRequests: true, Headers: hdr("X-Test-Cut-At", "2"),
			Scrape: metricsServer(t, "go_gc_duration_seconds{quantile=\"1\"} 0.5\ngo_gc_duration_seconds_count 3\n",
				"go_gc_duration_seconds{quantile=\"1\"} 0.5\ngo_gc_duration_seconds_count 5\n")},
		{BaseURL: url, Model: "failing", Requests: 3, Rate: 200, MaxTokens: 5, KeepRequests: true, Headers: hdr("X-Test-Status", "503")},
	}, RunOptions{MonthlyTokens: 10e6})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteHTML(&b, res); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	r := res.Runs[0]
	for _, want := range []string{
		money(r.CostUSD), money(projectedMonthly(&r, 10e6)), "10M output tokens at the input:output mix of the run", // cost, projected monthly at the run's mix
		"GC pause max", "2.000", "GC cycles", "overhead per chunk", "0.012", // the gateway's figures of the run window
		"not measured",                // the summary's max quantile covers another window
		"interrupted=4", "http_5xx=3", // errors by kind
		"req/s", fmt.Sprintf("%.2f req/s", r.RequestsPerS), // closed loop: requests per second
		fmt.Sprintf("achieved %.2f/s", res.Runs[2].AchievedRate), // open loop: the achieved rate
	} {
		if !strings.Contains(h, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if r.CostUSD <= 0 {
		t.Errorf("cost: got %g, want > 0", r.CostUSD)
	}
}

// legendRe matches a legend entry: its colour swatch and its label.
var legendRe = regexp.MustCompile(`<rect x="([\d.]+)" y="([\d.]+)" width="12" height="12" fill="(#[0-9A-Fa-f]{6})"/><text x="([\d.]+)" y="([\d.]+)" font-size="11">([^<]*)`)

// manyRuns runs n tiny benchmark points with long labels, as the demo's
// merged result has (nine runs, names up to 40 characters).
func manyRuns(t *testing.T, n int) *Result {
	t.Helper()
	url := newUpstream(t, &upstream{})
	var cfgs []Config
	for i := range n {
		cfgs = append(cfgs, Config{BaseURL: url, Model: fmt.Sprintf("sim-model-%d", i), Label: "GOGC=off,GOMEMLIMIT=1GiB",
			Requests: 3, Concurrency: 100 + i, MaxTokens: 4, KeepRequests: true})
	}
	res, err := RunAll(context.Background(), cfgs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestWriteHTMLColoursDistinctPerPlot(t *testing.T) {
	res := manyRuns(t, 12)
	var b strings.Builder
	if err := WriteHTML(&b, res); err != nil {
		t.Fatal(err)
	}
	svgs := strings.Split(b.String(), "<svg")[1:]
	if len(svgs) == 0 {
		t.Fatal("no plots")
	}
	for i, s := range svgs {
		entries := legendRe.FindAllStringSubmatch(s, -1)
		if len(entries) != len(res.Runs) {
			t.Errorf("plot %d: got %d legend entries, want %d", i, len(entries), len(res.Runs))
		}
		seen := map[string]string{}
		for _, e := range entries {
			c := strings.ToLower(e[3])
			if other, dup := seen[c]; dup {
				t.Errorf("plot %d: colour %s used by %q and %q", i, c, other, e[6])
			}
			seen[c] = e[6]
		}
	}
}

// Legend entries stay inside the plot's width, below its axes, and apart
// from each other, at a generous 6.5 px per character of 11 px text (the
// Chromium check measures the real glyphs).
func TestWriteHTMLLegendsDoNotOverlap(t *testing.T) {
	res := manyRuns(t, 9)
	var b strings.Builder
	if err := WriteHTML(&b, res); err != nil {
		t.Fatal(err)
	}
	widthRe := regexp.MustCompile(`^[^>]*viewBox="0 0 (\d+) (\d+)"`)
	frameRe := regexp.MustCompile(`<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)" fill="none"`)
	for i, s := range strings.Split(b.String(), "<svg")[1:] {
		m := widthRe.FindStringSubmatch(s)
		f := frameRe.FindStringSubmatch(s)
		if m == nil || f == nil {
			t.Fatalf("plot %d: no viewBox or frame", i)
		}
		w, _ := strconv.ParseFloat(m[1], 64)
		fy, _ := strconv.ParseFloat(f[2], 64)
		fh, _ := strconv.ParseFloat(f[4], 64)
		type box struct{ x0, y0, x1, y1 float64 }
		var boxes []box
		for _, e := range legendRe.FindAllStringSubmatch(s, -1) {
			x, _ := strconv.ParseFloat(e[1], 64)
			y, _ := strconv.ParseFloat(e[2], 64)
			tx, _ := strconv.ParseFloat(e[4], 64)
			bx := box{x, y, tx + 6.5*float64(utf8.RuneCountInString(html.UnescapeString(e[6]))), y + 12}
			if bx.x1 > w {
				t.Errorf("plot %d: legend %q ends at %.0f, past the plot's width %.0f", i, e[6], bx.x1, w)
			}
			if bx.y0 < fy+fh+16 {
				t.Errorf("plot %d: legend %q at y %.0f is inside the axes (they end at %.0f plus the axis labels)", i, e[6], bx.y0, fy+fh)
			}
			for _, o := range boxes {
				if bx.x0 < o.x1 && o.x0 < bx.x1 && bx.y0 < o.y1 && o.y0 < bx.y1 {
					t.Errorf("plot %d: legend %q overlaps another entry", i, e[6])
				}
			}
			boxes = append(boxes, bx)
		}
	}
}

func TestTickLabels(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   string
	}{
		{0, 0.002, "0 0.0005 0.0010 0.0015 0.0020"},
		{0, 10, "0 2 4 6 8 10"},
		{0, 1, "0 0.2 0.4 0.6 0.8 1.0"},
		{0, 12, "0 2.5 5.0 7.5 10.0 12.5"},
		{0, 2000, "0 500 1000 1500 2000"},
	}
	for _, tt := range tests {
		lo, hi, step := niceRange(tt.lo, tt.hi)
		var got []string
		for v := lo; v <= hi+step/2; v += step {
			got = append(got, tick(v, step))
		}
		if s := strings.Join(got, " "); s != tt.want {
			t.Errorf("ticks of [%g, %g]: got %q, want %q", tt.lo, tt.hi, s, tt.want)
		}
	}
}

// The report concludes: a headline names the runs compared, the winner,
// by how much and whether that is beyond the noise; goodput names its SLO;
// a percentile of fewer than MinSample values is not shown; repeated
// series names get distinct legend labels; warnings about a loaded client
// are summarised once.
func TestReportConcludes(t *testing.T) {
	rec := func(ttft time.Duration) *Request {
		return &Request{Status: 200, Done: true, Arrivals: []time.Duration{ttft, ttft + time.Millisecond}, OutputTokens: 2}
	}
	run := func(model string, base time.Duration, n int) RunResult {
		r := RunResult{Model: model, Concurrency: 4, Requests: n, Succeeded: n, Goodput: &Goodput{Fraction: 0.9, SLO: "ttft<=500ms"}}
		var xs []float64
		for i := range n {
			q := rec(base + time.Duration(i%10)*time.Millisecond)
			r.Records = append(r.Records, q)
			d, _ := q.TTFT()
			xs = append(xs, ms(d))
		}
		r.TTFT = Summarize(xs)
		r.Warnings = []string{"client scheduling lag p99 3.00 ms: the client machine is loaded"}
		return r
	}
	fast, slow := run("m", 100*time.Millisecond, 200), run("m", 300*time.Millisecond, 200)
	h := Headline([]RunResult{slow, fast})
	for _, want := range []string{"Compared 2 runs", "fastest", "(first)", "(second)", "200.0 ms", "beyond the noise"} {
		if !strings.Contains(h, want) {
			t.Errorf("headline %q lacks %q", h, want)
		}
	}
	near := run("m", 101*time.Millisecond, 200)
	if h := Headline([]RunResult{fast, near}); !strings.Contains(h, "within the noise") {
		t.Errorf("1 ms apart with 10 ms spread: headline %q, want within the noise", h)
	}
	few := run("few", 100*time.Millisecond, 1)
	if h := Headline([]RunResult{few, slow}); !strings.Contains(h, "too few samples") {
		t.Errorf("one request: headline %q, want too few samples", h)
	}

	var b strings.Builder
	res := &Result{Schema: Schema, Runs: []RunResult{fast, slow, few}, Warnings: []string{
		"m: client scheduling lag p99 3.00 ms: the client machine is loaded", "m: client scheduling lag p99 4.00 ms: the client machine is loaded",
		"few: client scheduling lag p99 2.00 ms: the client machine is loaded", "m: achieved rate 1.00/s is below the intended 2.00/s"}}
	if err := WriteHTML(&b, res); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, `<p class="headline"><strong>Compared 3 runs`) {
		t.Error("the HTML report does not open with the headline")
	}
	for _, want := range []string{"90.0% (SLO ttft&lt;=500ms)", "n=1: too few", "m c=4 #1", "m c=4 #2",
		"the client machine is loaded in 3 runs", "achieved rate 1.00/s"} {
		if !strings.Contains(page, want) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
	if n := strings.Count(page, "the client machine is loaded"); n != 1 {
		t.Errorf("the loaded-client warning appears %d times, want once", n)
	}
	b.Reset()
	if err := WriteTable(&b, fast, slow, few); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if !strings.HasPrefix(text, "Compared 3 runs by median TTFT") || !strings.Contains(text, "n=1: too few") ||
		!strings.Contains(text, "(SLO ttft<=500ms)") || strings.Count(text, "the client machine is loaded") != 1 {
		t.Errorf("the text summary:\n%s\nwant the headline first, the SLO, too few samples and one loaded-client warning", text)
	}
}
