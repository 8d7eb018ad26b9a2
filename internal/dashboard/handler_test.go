package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

const adminKey = "sk-admin-test-0123456789"

// serveDash serves a Dashboard over loopback HTTP, on a registry with the
// gateway's collectors and one route that has served a stream.
func serveDash(t *testing.T, opts Options) (*Dashboard, *httptest.Server) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	st := m.Stream("m1", "p/a")
	st.TTFT(40 * time.Millisecond)
	st.ITL(10 * time.Millisecond)
	m.Request("m1", "p/a", 200, metrics.OutcomeOK)
	opts.Gatherer = reg
	if opts.Interval == 0 {
		opts.Interval = 20 * time.Millisecond // quick tests; no figure depends on it
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d := New(opts)
	srv := httptest.NewServer(d)
	t.Cleanup(func() {
		d.Shutdown() // event streams end: srv.Close waits for them
		srv.Close()
		d.Close()
	})
	return d, srv
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, rawURL string, header ...string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func postForm(t *testing.T, rawURL string, form url.Values) *http.Response {
	t.Helper()
	resp, err := noRedirect.PostForm(rawURL, form)
	if err != nil {
		t.Fatalf("POST %s: %v", rawURL, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// firstEvent reads the first event of an event stream and decodes it.
func firstEvent(t *testing.T, resp *http.Response) view {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("got %d %q: %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	ev, err := sse.NewReader(resp.Body, 0).Next()
	if err != nil {
		t.Fatalf("reading the first event: %v", err)
	}
	var v view
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("event %s: %v", ev.Data, err)
	}
	return v
}

// wantError checks an OpenAI-format error answer.
func wantError(t *testing.T, resp *http.Response, status int, code string) api.ErrorResponse {
	t.Helper()
	var e api.ErrorResponse
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("got body %q, want an OpenAI error object", b)
	}
	if resp.StatusCode != status || e.Error.Code == nil || *e.Error.Code != code {
		t.Fatalf("got %d %s, want %d with code %s", resp.StatusCode, b, status, code)
	}
	return e
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unmarshal of num: the tests read the events back.
func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = num(-1) // "no value" in tests
		return nil
	}
	var f float64
	err := json.Unmarshal(b, &f)
	*n = num(f)
	return err
}

// On a loopback gateway the page and its events need no login.
func TestLoopbackOpen(t *testing.T) {
	_, srv := serveDash(t, Options{ListenAddr: "127.0.0.1:8080"})
	resp := get(t, srv.URL+"/dashboard")
	page := body(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(page, "/dashboard/events") {
		t.Fatalf("got %d %.80q, want 200 and the dashboard page", resp.StatusCode, page)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'sha256-") || strings.Contains(csp, "http") {
		t.Errorf("got CSP %q, want default-src 'none' and the inline script by hash, no other origin", csp)
	}
	// The SVG namespace is a name, not a place anything is loaded from.
	if p := strings.ReplaceAll(page, "http://www.w3.org/2000/svg", ""); strings.Contains(p, "http://") || strings.Contains(p, "https://") || strings.Contains(p, "//cdn") {
		t.Errorf("the page names another origin: nothing may load from elsewhere")
	}
	v := firstEvent(t, get(t, srv.URL+"/dashboard/events"))
	if v.Auth != "open" || len(v.Routes) != 1 || v.Routes[0].Model != "m1" || v.Routes[0].Route != "p/a" {
		t.Errorf("got auth %q routes %+v, want open and m1's route p/a", v.Auth, v.Routes)
	}
}

// A loopback gateway reached by another name (a DNS name rebound to
// 127.0.0.1, a proxy on the same machine) is not open.
func TestLoopbackByOtherName(t *testing.T) {
	_, srv := serveDash(t, Options{ListenAddr: "127.0.0.1:8080", AdminKey: adminKey})
	tests := []struct {
		name   string
		header []string
	}{
		{"foreign Host", []string{"Host", "dash.example.com"}},
		{"forwarded by a proxy", []string{"X-Forwarded-For", "203.0.113.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, srv.URL+"/dashboard", tt.header...)
			if page := body(t, resp); !strings.Contains(page, `name="admin_key"`) {
				t.Errorf("got %d %.120q, want the login form", resp.StatusCode, page)
			}
			wantError(t, get(t, srv.URL+"/dashboard/events", tt.header...), 401, "login_required")
		})
	}
}

// Off loopback without admin_key the dashboard says what it needs.
func TestNoAdminKey(t *testing.T) {
	_, srv := serveDash(t, Options{ListenAddr: "0.0.0.0:8080"})
	resp := get(t, srv.URL+"/dashboard")
	page := body(t, resp)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "admin_key") || strings.Contains(page, "<form") {
		t.Errorf("got %d %q, want 403 and a page that says the dashboard needs admin_key", resp.StatusCode, page)
	}
	wantError(t, get(t, srv.URL+"/dashboard/events"), 403, "dashboard_off")
	resp = postForm(t, srv.URL+"/dashboard/login", url.Values{"admin_key": {""}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("login without admin_key: got %d, want 403", resp.StatusCode)
	}
}

// Off loopback: the login form, a wrong key 401, the right one an HttpOnly
// cookie that is not the key, with which the events flow.
func TestLogin(t *testing.T) {
	_, srv := serveDash(t, Options{ListenAddr: "10.0.0.1:8080", AdminKey: adminKey})
	resp := get(t, srv.URL+"/dashboard")
	if page := body(t, resp); resp.StatusCode != 200 || !strings.Contains(page, `method="post"`) || strings.Contains(page, "/dashboard/events") {
		t.Fatalf("got %d %.120q, want the login form and not the dashboard", resp.StatusCode, page)
	}
	wantError(t, get(t, srv.URL+"/dashboard/events"), 401, "login_required")

	resp = postForm(t, srv.URL+"/dashboard/login", url.Values{"admin_key": {"sk-wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("wrong key: got %d with cookies %v, want 401 and none", resp.StatusCode, resp.Cookies())
	}
	resp = postForm(t, srv.URL+"/dashboard/login?admin_key="+adminKey, url.Values{"admin_key": {adminKey}})
	if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
		t.Errorf("key in the URL: got %d with cookies %v, want 400 and none", resp.StatusCode, resp.Cookies())
	}

	resp = postForm(t, srv.URL+"/dashboard/login", url.Values{"admin_key": {adminKey}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("right key: got %d to %q, want 303 to /dashboard", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("got cookies %v, want one", cookies)
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/dashboard" || c.MaxAge <= 0 || c.Secure {
		t.Errorf("got cookie %+v, want HttpOnly, SameSite=Strict, Path /dashboard, a MaxAge, not Secure over plain HTTP", c)
	}
	if strings.Contains(c.Value, adminKey) || c.Value == "" {
		t.Errorf("got cookie value %q, want a token derived from the key, not the key", c.Value)
	}
	cookie := c.Name + "=" + c.Value

	if page := body(t, get(t, srv.URL+"/dashboard", "Cookie", cookie)); !strings.Contains(page, "/dashboard/events") {
		t.Errorf("with the cookie: got %.120q, want the dashboard", page)
	}
	if v := firstEvent(t, get(t, srv.URL+"/dashboard/events", "Cookie", cookie)); v.Auth != "login" {
		t.Errorf("got auth %q, want login (the page offers logout)", v.Auth)
	}
	firstEvent(t, get(t, srv.URL+"/dashboard/events", "Authorization", "Bearer "+adminKey))

	flip := "0"
	if strings.HasSuffix(c.Value, "0") {
		flip = "1"
	}
	for name, value := range map[string]string{
		"tampered": c.Value[:len(c.Value)-1] + flip,
		"bare key": adminKey,
		"empty":    "",
	} {
		if resp := get(t, srv.URL+"/dashboard/events", "Cookie", c.Name+"="+value); resp.StatusCode != 401 {
			t.Errorf("%s cookie: got %d, want 401", name, resp.StatusCode)
		}
	}

	resp = postForm(t, srv.URL+"/dashboard/logout", nil)
	if len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("logout: got cookies %v, want the login cookie deleted", resp.Cookies())
	}
}

// The token expires, and one from another admin key is worthless.
func TestToken(t *testing.T) {
	a, other := newAuthenticator("", adminKey, nil), newAuthenticator("", "sk-other", nil)
	now := time.Unix(1_800_000_000, 0)
	tok := a.token(now.Add(time.Hour))
	tests := []struct {
		name string
		a    authenticator
		tok  string
		at   time.Time
		want bool
	}{
		{"valid", a, tok, now, true},
		{"expired", a, tok, now.Add(time.Hour), false},
		{"other key", other, tok, now, false},
		{"later expiry, same mac", a, "1900000000." + strings.SplitN(tok, ".", 2)[1], now, false},
		{"no admin key", newAuthenticator("", "", nil), newAuthenticator("", "", nil).token(now.Add(time.Hour)), now, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.validToken(tt.tok, tt.at); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Without admin_key no token is accepted, whatever validToken says:
	// allowed checks the key first.
	req := httptest.NewRequest("GET", "http://gw.example/dashboard/events", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: newAuthenticator("", "", nil).token(time.Now().Add(time.Hour))})
	if newAuthenticator("0.0.0.0:1", "", nil).check(req) == nil {
		t.Error("a gateway without admin_key off loopback let a cookie in")
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.1.2.3:80", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"127.0.0.1", true},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
		{"10.0.0.1:8080", false},
		{"gw.example.com:443", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := IsLoopback(tt.addr); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// Beyond MaxPages an event stream is refused with 503; a page that goes
// frees its place.
func TestPageBound(t *testing.T) {
	_, srv := serveDash(t, Options{ListenAddr: "127.0.0.1:8080", MaxPages: 2})
	open := func() (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return resp, cancel
	}
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for range 2 {
		resp, cancel := open()
		cancels = append(cancels, cancel)
		firstEvent(t, resp)
	}
	resp, cancel := open()
	e := wantError(t, resp, http.StatusServiceUnavailable, "dashboard_busy")
	cancel()
	if !strings.Contains(e.Error.Message, "at most 2") {
		t.Errorf("got message %q, want it to name the bound", e.Error.Message)
	}
	// The first page goes; its handler notices and frees the place.
	cancels[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, cancel := open()
		cancels = append(cancels, cancel)
		if resp.StatusCode == http.StatusOK {
			firstEvent(t, resp)
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("still %d 10s after a page closed, want a free place", resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Shutdown ends open event streams at once and refuses new ones.
func TestShutdownEndsStreams(t *testing.T) {
	d, srv := serveDash(t, Options{ListenAddr: "127.0.0.1:8080"})
	resp := get(t, srv.URL+"/dashboard/events")
	firstEvent(t, resp)
	d.Shutdown()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Errorf("got %v, want the stream to end cleanly", err)
	}
	wantError(t, get(t, srv.URL+"/dashboard/events"), http.StatusServiceUnavailable, "shutting_down")
}

func TestBadRequests(t *testing.T) {
	_, srv := serveDash(t, Options{ListenAddr: "127.0.0.1:8080"})
	wantError(t, get(t, srv.URL+"/dashboard/events?window=3h"), 400, "invalid_request")
	wantError(t, get(t, srv.URL+"/dashboard/nope"), 404, "unknown_url")
	wantError(t, get(t, srv.URL+"/dashboard/logout"), 405, "method_not_allowed")
	resp, err := http.Post(srv.URL+"/dashboard/events", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	wantError(t, resp, 405, "method_not_allowed")
}

// countingGatherer counts gatherings.
type countingGatherer struct {
	mu sync.Mutex
	n  int
}

func (g *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	return nil, nil
}

func (g *countingGatherer) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// The registry is sampled once a second while a page is open, never when
// none is, and the ledger at most every 5 s whatever the number of pages.
func TestSamplingOnlyWhileOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &countingGatherer{}
		var mu sync.Mutex
		var queries []usage.ReportQuery
		report := func(_ context.Context, q usage.ReportQuery) ([]usage.ReportRow, error) {
			mu.Lock()
			defer mu.Unlock()
			queries = append(queries, q)
			return []usage.ReportRow{{Group: "g", Requests: 2, CostUSD: 0.25}}, nil
		}
		d := New(Options{Gatherer: g, Report: report, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		defer d.Close()
		time.Sleep(time.Minute)
		if n := g.count(); n != 0 {
			t.Fatalf("got %d gatherings with no page open, want 0", n)
		}
		var pages []*page
		for range 3 {
			p, err := d.open(time.Minute, "open")
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, p)
		}
		time.Sleep(10*time.Second + time.Millisecond) // ticks at 0 s, 1 s … 10 s
		synctest.Wait()
		if n := g.count(); n != 11 {
			t.Errorf("got %d gatherings in 10 s with 3 pages open, want 11", n)
		}
		mu.Lock()
		if len(queries) != 6 { // at 0 s, 5 s and 10 s, by key and by model
			t.Errorf("got %d ledger queries in 10 s, want 6", len(queries))
		}
		if len(queries) > 1 {
			midnight := time.Now().UTC().Truncate(24 * time.Hour)
			if q := queries[0]; q.By != "key" || !q.Since.Equal(midnight) || queries[1].By != "model" {
				t.Errorf("got queries %+v, want by key then by model since %v", queries[:2], midnight)
			}
		}
		mu.Unlock()
		var v view
		if err := json.Unmarshal(<-pages[0].ch, &v); err != nil {
			t.Fatal(err)
		}
		if v.Cost == nil || len(v.Cost.ByKey) != 1 || v.Cost.ByKey[0].CostUSD != 0.25 {
			t.Errorf("got cost %+v, want the ledger's row", v.Cost)
		}
		for _, p := range pages {
			d.close(p)
		}
		synctest.Wait()
		before := g.count()
		time.Sleep(time.Minute)
		if n := g.count(); n != before {
			t.Errorf("got %d gatherings in the minute after the last page closed, want 0", n-before)
		}
	})
}

// A ledger that fails leaves the last rows and says why.
func TestCostError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := false
		var mu sync.Mutex
		report := func(context.Context, usage.ReportQuery) ([]usage.ReportRow, error) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return nil, errors.New("database is locked")
			}
			return []usage.ReportRow{{Group: "k", CostUSD: 1}}, nil
		}
		d := New(Options{Gatherer: &countingGatherer{}, Report: report, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		defer d.Close()
		p, _ := d.open(time.Minute, "open")
		defer d.close(p)
		synctest.Wait()
		mu.Lock()
		fail = true
		mu.Unlock()
		time.Sleep(5*time.Second + time.Millisecond)
		synctest.Wait()
		c := d.costView()
		if !strings.Contains(c.Error, "database is locked") || len(c.ByKey) != 1 {
			t.Errorf("got %+v, want the error and the last rows", c)
		}
	})
}

// A wrong key in the Authorization header is named as such (not "log in
// first"), and counts against the client: the one after the free ones is
// refused with 429 and Retry-After, the right key included.
func TestWrongBearer(t *testing.T) {
	frozen := time.Now() // the wait never runs out during the test
	th := auth.NewThrottleClock(func() time.Time { return frozen })
	_, srv := serveDash(t, Options{ListenAddr: "0.0.0.0:8080", AdminKey: adminKey, Throttle: th})
	for range auth.ThrottleFree {
		wantError(t, get(t, srv.URL+"/dashboard/events", "Authorization", "Bearer sk-wrong"), 401, "invalid_admin_key")
	}
	resp := get(t, srv.URL+"/dashboard/events", "Authorization", "Bearer "+adminKey)
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("got Retry-After %q, want 1", ra)
	}
	wantError(t, resp, 429, "too_many_wrong_admin_keys")
}
