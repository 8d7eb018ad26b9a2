package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/bench/pagecheck"
)

// checkWidth is the narrowest window the reports must fit without a
// horizontal scrollbar.
const checkWidth = 1280

// TestHTMLInChromium renders a bench report in headless Chromium 1280 px
// wide and checks that it has no horizontal scrollbar and that every plot
// and legend entry lies inside the page, apart from each other and from the
// plots' axes. It needs a Chromium binary on PATH (apt-get install
// chromium) and is skipped without one.
//
// STREAMGATE_CHECK_HTML, a list of HTML files (separated like PATH),
// checks those reports too, e.g. a real "streamgate bench --html" or
// "streamgate demo" report; with STREAMGATE_SHOT_DIR set, each gets a
// full-page screenshot there, named after the file (report.html → report.png).
func TestHTMLInChromium(t *testing.T) {
	browser := pagecheck.Browser()
	if browser == "" {
		t.Skip("no chromium on PATH (apt-get install chromium): the reports' layout at 1280 px is not checked")
	}
	pages := filepath.SplitList(os.Getenv("STREAMGATE_CHECK_HTML"))
	generated := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(generated)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, richResult(t)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	pages = append([]string{generated}, pages...)
	for _, page := range pages {
		t.Run(filepath.Base(page), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			l, err := pagecheck.Measure(ctx, browser, page, checkWidth)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s at %d px: scrollWidth %d, clientWidth %d, height %d, %d plots, %d legend entries, %d tables",
				page, checkWidth, l.ScrollWidth, l.ClientWidth, l.ScrollHeight, l.Plots, l.Legends, l.Tables)
			if err := l.Err(checkWidth); err != nil {
				t.Errorf("%s at %d px:\n%v", page, checkWidth, err)
			}
			if l.Plots == 0 || l.Legends == 0 {
				t.Errorf("got %d plots and %d legend entries, want some of each", l.Plots, l.Legends)
			}
			if dir := os.Getenv("STREAMGATE_SHOT_DIR"); dir != "" && page != generated {
				shot := filepath.Join(dir, strings.TrimSuffix(filepath.Base(page), filepath.Ext(page))+".png")
				if err := pagecheck.Screenshot(ctx, browser, page, shot, checkWidth, l.ScrollHeight); err != nil {
					t.Fatal(err)
				}
				t.Logf("screenshot %s", shot)
			}
		})
	}
}

// richResult is a result with what stretches a report: many runs with
// long names, prices, server figures (and one not measured), errors of
// several kinds, closed and open loops.
func richResult(t *testing.T) *Result {
	t.Helper()
	url := newUpstream(t, &upstream{})
	cfgs := []Config{
		{BaseURL: url, Model: "priced", Requests: 6, MaxTokens: 8, Price: Price{Input: 2, Output: 8}, KeepRequests: true,
			Scrape: metricsServer(t, gatewayPage(1), gatewayPage(2)), Headers: hdr("X-Test-ITL", "1ms")},
		{BaseURL: url, Model: "summary-only", Requests: 6, MaxTokens: 8, KeepRequests: true, Headers: hdr("X-Test-Cut-At", "6", "X-Test-ITL", "1ms"),
			Scrape: metricsServer(t, "go_gc_duration_seconds_count 3\n", "go_gc_duration_seconds_count 5\n")},
		{BaseURL: url, Model: "failing", Requests: 4, Rate: 200, Concurrency: 8, MaxTokens: 5, KeepRequests: true, Headers: hdr("X-Test-Status", "503")},
	}
	for i := range 9 {
		cfgs = append(cfgs, Config{BaseURL: url, Model: "sim-claude-sonnet-4.5", Label: "GOGC=off,GOMEMLIMIT=1GiB variant " + string(rune('A'+i)),
			Requests: 4, Concurrency: 100 + i, MaxTokens: 6, KeepRequests: true, Headers: hdr("X-Test-ITL", "1ms")})
	}
	res, err := RunAll(context.Background(), cfgs, RunOptions{MonthlyTokens: 10e6})
	if err != nil {
		t.Fatal(err)
	}
	res.Warnings = append(res.Warnings, "a warning long enough to wrap: "+strings.Repeat("the client could not keep the schedule ", 8))
	return res
}
