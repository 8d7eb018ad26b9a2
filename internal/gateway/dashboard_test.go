package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
)

// serveDashboard is serveWith giving the gateway's URL, stop and Gateway.
func serveDashboard(t *testing.T, opts gateway.Options, grace time.Duration) (url string, stop func() error, gw *gateway.Gateway) {
	t.Helper()
	e, stop := serveWith(t, opts, grace)
	return e.url, stop, e.gw
}

// A gateway on loopback, reached by a loopback Host with no forwarding
// header (what nginx's default proxy_pass http://127.0.0.1:PORT sends for
// whoever is behind it), asks for a login: the page is the login form and
// the live figures (spend per key) need the admin key.
func TestDashboardAsksForLoginOnLoopback(t *testing.T) {
	cfg := baseConfig()
	cfg.AdminKey = "sk-admin"
	url, _, _ := serveDashboard(t, gateway.Options{Config: cfg}, time.Second)
	resp := do(t, "GET", url+"/dashboard", "", "")
	page, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(page), `name="admin_key"`) || strings.Contains(string(page), "/dashboard/events") {
		t.Errorf("loopback: got %d %.80q, want the login form", resp.StatusCode, page)
	}
	if resp := do(t, "GET", url+"/dashboard/events", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("loopback events without login: got %d, want 401", resp.StatusCode)
	}
	resp = do(t, "GET", url+"/dashboard/events", "sk-admin", "")
	line, err := firstData(resp)
	if err != nil || !strings.Contains(line, `"model":"m-sim","route":"sim/sim-fast"`) {
		t.Errorf("events with the admin key: got %q (%v), want the configured route m-sim sim/sim-fast", line, err)
	}
}

// The gateway mounts the dashboard and tells it what the config says:
// dashboard.open serves it with no credential asked.
func TestDashboardMounted(t *testing.T) {
	cfg := baseConfig()
	cfg.AdminKey = "sk-admin"
	cfg.Dashboard.Open = true
	url, _, _ := serveDashboard(t, gateway.Options{Config: cfg}, time.Second)
	resp := do(t, "GET", url+"/dashboard", "", "")
	page, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(page), "/dashboard/events") {
		t.Errorf("open: got %d %.80q, want the dashboard", resp.StatusCode, page)
	}
	resp = do(t, "GET", url+"/dashboard/events", "", "")
	line, err := firstData(resp)
	if err != nil || !strings.Contains(line, `"model":"m-sim","route":"sim/sim-fast"`) || !strings.Contains(line, `"auth":"open"`) {
		t.Errorf("open events: got %.300q (%v), want the configured route m-sim sim/sim-fast, auth open", line, err)
	}
}

// A login link from the gateway logs a browser in once, over real HTTP.
func TestDashboardLoginLink(t *testing.T) {
	url, _, gw := serveDashboard(t, gateway.Options{Config: baseConfig()}, time.Second)
	link := url + "/dashboard?token=" + gw.DashboardLoginToken()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" || len(resp.Cookies()) != 1 {
		t.Fatalf("the link: got %d to %q with cookies %v, want 303 to /dashboard and the login cookie", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	c := resp.Cookies()[0]
	line, err := firstData(do(t, "GET", url+"/dashboard/events", "", "", "Cookie", c.Name+"="+c.Value))
	if err != nil || !strings.Contains(line, `"auth":"login"`) {
		t.Errorf("events with the cookie: got %.200q (%v), want them, auth login", line, err)
	}
	if resp, err = noRedirect.Get(link); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("the link again: got %d with cookies %v, want 401 and none", resp.StatusCode, resp.Cookies())
	}
}

// Wrong admin keys are counted per client across the admin API and the
// dashboard: after auth.ThrottleFree of them the client is refused (429,
// Retry-After) wherever it tries, before its key is even compared, so the
// right key does not get in during the wait either.
func TestWrongAdminKeysThrottled(t *testing.T) {
	cfg := baseConfig()
	cfg.AdminKey = "sk-admin"
	frozen := time.Now() // the wait never runs out during the test
	th := auth.NewThrottleClock(func() time.Time { return frozen })
	url, _, _ := serveDashboard(t, gateway.Options{Config: cfg, Throttle: th}, time.Second)
	for i := 1; i <= auth.ThrottleFree; i++ {
		resp := do(t, "GET", url+"/admin/keys", fmt.Sprintf("sk-guess-%d", i), "")
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong key %d: got %d, want 401", i, resp.StatusCode)
		}
	}
	refused := func(what string, resp *http.Response) {
		t.Helper()
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: got %d, Retry-After %q, want 429 with Retry-After; body %.200q", what, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if !strings.Contains(string(body), "too_many_wrong_admin_keys") && !strings.Contains(string(body), "Too many wrong admin keys") {
			t.Errorf("%s: body %.200q does not say why", what, body)
		}
	}
	refused("admin API, the right key", do(t, "GET", url+"/admin/keys", "sk-admin", ""))
	refused("dashboard events, the right key", do(t, "GET", url+"/dashboard/events", "sk-admin", ""))
	refused("dashboard login, the right key", do(t, "POST", url+"/dashboard/login", "", "admin_key=sk-admin",
		"Content-Type", "application/x-www-form-urlencoded"))
}

// firstData is the first "data:" line of an event stream.
func firstData(resp *http.Response) (string, error) {
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("no event: %v", sc.Err())
}

// An open dashboard page does not hold the drain: its event stream ends
// when shutdown begins, not after the grace period.
func TestDashboardDoesNotHoldDrain(t *testing.T) {
	cfg := baseConfig()
	cfg.Dashboard.Open = true
	url, stop, gw := serveDashboard(t, gateway.Options{Config: cfg}, 10*time.Minute)
	// A page that stays: no client timeout before the test's own.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/dashboard/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := firstData(resp); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		gw.Abort() // end the drain now, so the test ends
		t.Fatal("Serve still draining 30s after shutdown began with only a dashboard page open (grace 10m)")
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Errorf("the event stream ended with %v, want a clean end", err)
	}
}

// chromium finds a Chromium to drive, "" when there is none.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// The dashboard in a real browser: with streams running, headless Chromium
// opens /dashboard and finds live figures for the model that streams (time
// to first token, tokens/s, open streams, its cost from the ledger), and
// sees them change. STREAMGATE_UPDATE_SCREENSHOT=1 saves the page as
// docs/dashboard.png for docs/metrics.md.
func TestDashboardBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	browser, pageErrors := openBrowser(t, ctx)

	// The ledger as `serve` has it: SQLite, the batching writer, usage.Report.
	store := tempLedger(t)
	w := runLedger(t, store, 50*time.Millisecond)

	cfg := baseConfig()
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	cfg.Models = append(cfg.Models, config.Model{Name: "m-slow", Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}},
		Price: config.Price{Input: 3, Output: 15}})
	url, stop, gw := serveDashboard(t, gateway.Options{Config: cfg, Recorder: w,
		Report: func(ctx context.Context, q usage.ReportQuery) ([]usage.ReportRow, error) {
			return usage.Report(ctx, store, q)
		}}, time.Second)
	defer stop() // before the writer closes: every entry recorded

	// Streams run until the test ends: four on m-sim, two slower on m-slow.
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopLoad(); wg.Wait() }()
	for i := range 6 {
		model, ttft, itl := "m-sim", "60ms", "15ms"
		if i >= 4 {
			model, ttft, itl = "m-slow", "250ms", "40ms"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for load.Err() == nil {
				req, _ := http.NewRequestWithContext(load, "POST", url+"/v1/chat/completions",
					strings.NewReader(`{"model":"`+model+`","stream":true,"max_tokens":60,"messages":[{"role":"user","content":"hi"}]}`))
				req.Header.Set("Authorization", "Bearer "+devKey)
				req.Header.Set("X-Sim-TTFT", ttft)
				req.Header.Set("X-Sim-ITL", itl)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}

	// Live: the route's time to first token, the model's tokens/s, open
	// streams and the key's cost of the day, all shown.
	type figures struct{ TTFT, TPS, Open, Status, At string }
	const read = `(() => {
		const txt = s => { const e = document.querySelector(s); return e ? e.textContent : "–"; };
		const f = {
			TTFT: txt('#routes tr[data-model="m-sim"][data-route="sim/sim-fast"] td[data-k="ttft_p50_s"]'),
			TPS: txt('#models tr[data-model="m-sim"] td[data-k="output_tokens_per_s"]'),
			Open: txt("#open"), Status: txt("#status"), At: document.body.dataset.at || "",
		};
		return f.TTFT !== "–" && parseFloat(f.TPS) > 0 && parseInt(f.Open) > 0 &&
			document.querySelector('#cost-key tr[data-group="dev"]') !== null && f;
	})()`
	// Logged in by a login link, as `streamgate serve` prints one.
	if err := chromedp.Do(browser, chromedp.Navigate(url+"/dashboard?token="+gw.DashboardLoginToken())); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	if loc, err := chromedp.Run(browser, chromedp.Location()); err != nil || strings.Contains(loc, "token") {
		t.Errorf("got location %q (%v), want /dashboard without the token", loc, err)
	}
	f, err := chromedp.Run(browser, chromedp.Poll[figures](read, chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil {
		page, _ := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("no live figures for m-sim in the dashboard: %v; the page said:\n%s", err, page)
	}
	// Another event: the figures move.
	if _, err := chromedp.Run(browser, chromedp.Poll[bool](`document.body.dataset.at !== "`+f.At+`"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("the page did not update after the event of %s: %v", f.At, err)
	}
	t.Logf("m-sim: TTFT p50 %s, %s output tokens/s; %s open streams; status %q", f.TTFT, f.TPS, f.Open, f.Status)
	if !regexp.MustCompile(`^[0-9.]+ (µs|ms|s)$`).MatchString(f.TTFT) {
		t.Errorf("got TTFT p50 %q, want a duration", f.TTFT)
	}
	if v, err := strconv.ParseFloat(f.TPS, 64); err != nil || v <= 0 {
		t.Errorf("got %q output tokens/s, want a positive rate", f.TPS)
	}
	if f.Status != "live" {
		t.Errorf("got status %q, want live", f.Status)
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the page raised errors: %q", errs)
	}

	if os.Getenv("STREAMGATE_UPDATE_SCREENSHOT") == "1" {
		// Half a minute of history in the sparklines.
		if _, err := chromedp.Run(browser, chromedp.Poll[bool](`/over the last 3[0-9] s/.test(document.getElementById("span").textContent)`,
			chromedp.WithPollingTimeout(60*time.Second))); err != nil {
			t.Fatalf("waiting for 30 s of history: %v", err)
		}
		png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join("..", "..", "docs", "dashboard.png")
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", out, len(png))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the test ran out of time")
	}
}

// openBrowser starts headless Chromium for the test, or skips it when
// there is none. pageErrors returns what the pages raised or the browser
// logged as errors (a script or style the CSP blocked, a failed load).
func openBrowser(t *testing.T, ctx context.Context) (browser context.Context, pageErrors func() []string) {
	t.Helper()
	path := chromium()
	if path == "" {
		t.Skip("chromium not found: the dashboard browser tests need Debian's chromium (apt-get install chromium; .ci/run installs it)")
	}
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-dev-shm-usage", true))...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	var mu sync.Mutex
	var errs []string
	consoleDone := make(chan struct{})
	messages := chromedp.Console(browser)
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelBrowser()
		<-consoleDone
		cancelAlloc()
	})
	return browser, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// In a real browser: the login form, the admin key typed in,
// and the dashboard live behind its cookie; logout brings the form back.
func TestDashboardBrowserLogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	browser, pageErrors := openBrowser(t, ctx)
	cfg := baseConfig()
	cfg.AdminKey = "sk-admin-browser"
	url, _, _ := serveDashboard(t, gateway.Options{Config: cfg}, time.Second)

	if err := chromedp.Do(browser,
		chromedp.Navigate(url+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`#admin_key`)),
		chromedp.SendKeys(chromedp.CSS(`#admin_key`), "sk-wrong"),
		chromedp.Submit(chromedp.CSS(`#admin_key`)),
		chromedp.WaitVisible(chromedp.CSS(`.err`)),
	); err != nil {
		t.Fatalf("a wrong key: %v", err)
	}
	if err := chromedp.Do(browser,
		chromedp.SendKeys(chromedp.CSS(`#admin_key`), cfg.AdminKey),
		chromedp.Submit(chromedp.CSS(`#admin_key`)),
		chromedp.WaitVisible(chromedp.CSS(`#routes`)),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}
	// The routes table fills from the event stream, which needs the cookie.
	f, err := chromedp.Run(browser, chromedp.Poll[string](`(() => {
		const r = document.querySelector('#routes tr[data-model="m-sim"]');
		return r && !document.getElementById("logout").hidden && document.getElementById("status").textContent;
	})()`, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil || f != "live" {
		page, _ := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("after login: got status %q (%v), want the live dashboard with a logout button; the page said:\n%s", f, err, page)
	}
	loc, err := chromedp.Run(browser, chromedp.Location())
	if err != nil || strings.Contains(loc, "sk-admin") || strings.Contains(loc, "?") {
		t.Errorf("got location %q (%v), want /dashboard with no key in it", loc, err)
	}
	cookie, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || cookie != "" {
		t.Errorf("got document.cookie %q (%v), want the login cookie hidden from scripts (HttpOnly)", cookie, err)
	}
	if err := chromedp.Do(browser,
		chromedp.Click(chromedp.CSS(`#logout button`)),
		chromedp.WaitVisible(chromedp.CSS(`#admin_key`)),
	); err != nil {
		t.Errorf("log out: %v", err)
	}
	// The wrong key's 401 is a failed load the browser logs; nothing else.
	for _, e := range pageErrors() {
		if !strings.Contains(e, "401") {
			t.Errorf("the page raised an error: %s", e)
		}
	}
}
