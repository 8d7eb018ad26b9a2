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

// With dashboard.open the page and its events need no login.
func TestOpen(t *testing.T) {
	_, srv := serveDash(t, Options{Open: true})
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

// Unless the config opens it, the dashboard asks for a login from every
// request, whatever it looks like: reached over loopback by a loopback name
// with no forwarding header is what a reverse proxy on the same machine
// sends by default (nginx's proxy_pass http://127.0.0.1:8080), so it says
// nothing about who is behind it.
func TestLoginAsked(t *testing.T) {
	_, srv := serveDash(t, Options{AdminKey: adminKey})
	host := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name   string
		header []string
	}{
		{"loopback Host, no forwarding header", []string{"Host", host}},
		{"localhost", []string{"Host", "localhost:8080"}},
		{"foreign Host", []string{"Host", "dash.example.com"}},
		{"forwarded by a proxy", []string{"X-Forwarded-For", "203.0.113.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, srv.URL+"/dashboard", tt.header...)
			if page := body(t, resp); !strings.Contains(page, `name="admin_key"`) || strings.Contains(page, "/dashboard/events") {
				t.Errorf("got %d %.120q, want the login form", resp.StatusCode, page)
			}
			wantError(t, get(t, srv.URL+"/dashboard/events", tt.header...), 401, "login_required")
		})
	}
}

// Without admin_key or a login link the dashboard says what it needs.
func TestNoAdminKey(t *testing.T) {
	_, srv := serveDash(t, Options{})
	resp := get(t, srv.URL+"/dashboard")
	page := body(t, resp)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "admin_key") || !strings.Contains(page, "open: true") || strings.Contains(page, "<form") {
		t.Errorf("got %d %q, want 403 and a page that says the dashboard needs admin_key or dashboard.open", resp.StatusCode, page)
	}
	wantError(t, get(t, srv.URL+"/dashboard/events"), 403, "dashboard_off")
	resp = postForm(t, srv.URL+"/dashboard/login", url.Values{"admin_key": {""}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("login without admin_key: got %d, want 403", resp.StatusCode)
	}
}

// The login form, a wrong key 401, the right one an HttpOnly cookie that
// is not the key, with which the events flow.
func TestLogin(t *testing.T) {
	_, srv := serveDash(t, Options{AdminKey: adminKey})
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
	a, other := newAuthenticator(false, adminKey, nil), newAuthenticator(false, "sk-other", nil)
	noKey := newAuthenticator(false, "", nil) // signs with a secret of its own
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
		{"no admin key", noKey, noKey.token(now.Add(time.Hour)), now, true},
		{"no admin key, another process", newAuthenticator(false, "", nil), noKey.token(now.Add(time.Hour)), now, false},
		{"no admin key, signed with an admin key", noKey, newAuthenticator(false, "x", nil).token(now.Add(time.Hour)), now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.validToken(tt.tok, tt.at); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Without admin_key, a cookie another gateway signed is refused.
	req := httptest.NewRequest("GET", "http://gw.example/dashboard/events", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: noKey.token(time.Now().Add(time.Hour))})
	if newAuthenticator(false, "", nil).check(req) == nil {
		t.Error("a gateway without admin_key let another one's cookie in")
	}
}

// Beyond MaxPages an event stream is refused with 503; a page that goes
// frees its place.
func TestPageBound(t *testing.T) {
	_, srv := serveDash(t, Options{Open: true, MaxPages: 2})
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
	d, srv := serveDash(t, Options{Open: true})
	resp := get(t, srv.URL+"/dashboard/events")
	firstEvent(t, resp)
	d.Shutdown()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Errorf("got %v, want the stream to end cleanly", err)
	}
	wantError(t, get(t, srv.URL+"/dashboard/events"), http.StatusServiceUnavailable, "shutting_down")
}

func TestBadRequests(t *testing.T) {
	_, srv := serveDash(t, Options{Open: true})
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
		c, _ := d.costView()
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
	_, srv := serveDash(t, Options{AdminKey: adminKey, Throttle: th})
	for range auth.ThrottleFree {
		wantError(t, get(t, srv.URL+"/dashboard/events", "Authorization", "Bearer sk-wrong"), 401, "invalid_admin_key")
	}
	resp := get(t, srv.URL+"/dashboard/events", "Authorization", "Bearer "+adminKey)
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("got Retry-After %q, want 1", ra)
	}
	wantError(t, resp, 429, "too_many_wrong_admin_keys")
}

// A one-time login link (the embedded default's, which has no admin_key):
// before it, the page says to use it and the events need a login; opening
// it sets the login cookie and redirects to /dashboard without the token;
// the same link again is refused, sets nothing, and counts as a wrong key.
func TestLoginLink(t *testing.T) {
	frozen := time.Now() // the wait never runs out during the test
	th := auth.NewThrottleClock(func() time.Time { return frozen })
	d, srv := serveDash(t, Options{Throttle: th})
	tok := d.NewLoginToken()
	if len(tok) != 48 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Fatalf("got token %q, want 48 hex digits", tok)
	}
	if other := d.NewLoginToken(); other == tok {
		t.Fatal("two tokens alike: want random ones")
	} else if resp := get(t, srv.URL+"/dashboard?token="+tok); resp.StatusCode != http.StatusUnauthorized {
		// A second token replaces the first.
		t.Fatalf("a replaced token: got %d, want 401", resp.StatusCode)
	} else {
		tok = other
	}

	resp := get(t, srv.URL+"/dashboard")
	if page := body(t, resp); resp.StatusCode != 200 || !strings.Contains(page, "one-time link") || strings.Contains(page, "<form") || strings.Contains(page, "/dashboard/events") {
		t.Fatalf("before the link: got %d %.200q, want the page that says to use the link", resp.StatusCode, page)
	}
	wantError(t, get(t, srv.URL+"/dashboard/events"), 401, "login_required")
	// HEAD (a link previewer) does not spend it.
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/dashboard?token="+tok, nil)
	if resp, err := noRedirect.Do(req); err != nil || len(resp.Cookies()) != 0 {
		t.Fatalf("HEAD with the token: %v, cookies %v, want none", err, resp.Cookies())
	}

	resp = get(t, srv.URL+"/dashboard?token="+tok)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("the link: got %d to %q, want 303 to /dashboard (no token)", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the link: got headers %v, want no-referrer and no-store", resp.Header)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != cookieName || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode ||
		cookies[0].Path != "/dashboard" || cookies[0].MaxAge <= 0 || strings.Contains(cookies[0].Value, tok) {
		t.Fatalf("the link: got cookies %+v, want the login cookie (HttpOnly, SameSite=Strict, Path /dashboard), not the token", cookies)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	if page := body(t, get(t, srv.URL+"/dashboard", "Cookie", cookie)); !strings.Contains(page, "/dashboard/events") {
		t.Errorf("with the cookie: got %.120q, want the dashboard", page)
	}
	if v := firstEvent(t, get(t, srv.URL+"/dashboard/events", "Cookie", cookie)); v.Auth != "login" {
		t.Errorf("got auth %q, want login (the page offers logout)", v.Auth)
	}
	// The logged-in browser that opens the link again just goes on.
	if resp := get(t, srv.URL+"/dashboard?token="+tok, "Cookie", cookie); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 0 {
		t.Errorf("the used link with the cookie: got %d, cookies %v, want 303 and none", resp.StatusCode, resp.Cookies())
	}

	// Another browser with the same link: refused, no cookie.
	resp = get(t, srv.URL+"/dashboard?token="+tok)
	if page := body(t, resp); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(page, "used already") {
		t.Fatalf("the link a second time: got %d, cookies %v, %.200q; want 401, none, and why", resp.StatusCode, resp.Cookies(), page)
	}
	wantError(t, get(t, srv.URL+"/dashboard/events"), 401, "login_required")
	// Guessing counts as wrong admin keys do: one wrong link since the
	// login (which cleared the count).
	for range auth.ThrottleFree - 1 {
		if resp := get(t, srv.URL+"/dashboard?token=00"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a wrong token: got %d, want 401", resp.StatusCode)
		}
	}
	tok = d.NewLoginToken()
	if resp := get(t, srv.URL+"/dashboard?token="+tok); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || len(resp.Cookies()) != 0 {
		t.Errorf("after %d wrong links: got %d, Retry-After %q, want 429 before the token is compared", auth.ThrottleFree, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// With an admin key a login link works as well, and the form stays.
func TestLoginLinkWithAdminKey(t *testing.T) {
	d, srv := serveDash(t, Options{AdminKey: adminKey})
	if page := body(t, get(t, srv.URL+"/dashboard")); !strings.Contains(page, `name="admin_key"`) {
		t.Errorf("got %.120q, want the login form", page)
	}
	resp := get(t, srv.URL+"/dashboard?token="+d.NewLoginToken())
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("the link: got %d with cookies %v, want 303 and the login cookie", resp.StatusCode, resp.Cookies())
	}
	c := resp.Cookies()[0]
	firstEvent(t, get(t, srv.URL+"/dashboard/events", "Cookie", c.Name+"="+c.Value))
}
