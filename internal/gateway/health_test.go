package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
)

// upstream is a simulator on a fixed loopback port that a test can kill
// and bring back on the same address.
type upstream struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	srv  *http.Server
	done chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{t: t, addr: ln.Addr().String()}
	u.serve(ln)
	t.Cleanup(u.kill)
	return u
}

func (u *upstream) serve(ln net.Listener) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.srv = &http.Server{Handler: sim.New(sim.Options{Profile: sim.Profile{Name: "sim", Tokens: 3}, Seed: 1})}
	u.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		srv.Serve(ln)
		close(done)
	}(u.srv, u.done)
}

// kill stops the upstream: connections refused from now on.
func (u *upstream) kill() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.srv == nil {
		return
	}
	u.srv.Close()
	<-u.done
	u.srv = nil
}

// restore serves again on the same address.
func (u *upstream) restore() {
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		u.t.Fatalf("listen again on %s: %v", u.addr, err)
	}
	u.serve(ln)
}

// healthLog is a goroutine-safe log sink.
type healthLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *healthLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *healthLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count is the log lines that contain every one of subs.
func (l *healthLog) count(subs ...string) int {
	n := 0
lines:
	for _, line := range strings.Split(l.String(), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue lines
			}
		}
		n++
	}
	return n
}

// waitLog waits until a log line holds every one of subs (an event, not a
// duration: the deadline only ends a test that would otherwise hang).
func (l *healthLog) waitLog(t *testing.T, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for l.count(subs...) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q; log:\n%s", subs, l.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// healthConfig: two models on one upstream (kind openai at u), an admin
// key, and hc as the provider's health check.
func healthConfig(u *upstream, hc config.HealthCheck) *config.Config {
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Kind: "openai", BaseURL: "http://" + u.addr + "/v1", HealthCheck: hc})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "a", Routes: []config.Route{{Provider: "up", Model: "sim-a"}}},
		config.Model{Name: "b", Routes: []config.Route{{Provider: "up", Model: "sim-b"}}})
	return cfg
}

func startLogged(t *testing.T, cfg *config.Config) (*env, *healthLog) {
	logs := &healthLog{}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return e, logs
}

type routeView struct {
	Name                string  `json:"name"`
	Endpoint            string  `json:"endpoint"`
	State               string  `json:"state"`
	Requests            int     `json:"requests"`
	Failures            int     `json:"failures"`
	ErrorRate           float64 `json:"error_rate"`
	ConsecutiveFailures int     `json:"consecutive_failures"`
	EndpointFailures    int     `json:"endpoint_failures"`
}

// adminRoutes is GET /admin/routes as route name → its view.
func adminRoutes(t *testing.T, e *env) map[string]routeView {
	t.Helper()
	resp := do(t, "GET", e.url+"/admin/routes", "admin-secret", "")
	var out struct {
		Models []struct {
			Routes []routeView `json:"routes"`
		} `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/admin/routes: got %d, %v", resp.StatusCode, err)
	}
	m := map[string]routeView{}
	for _, md := range out.Models {
		for _, r := range md.Routes {
			m[r.Name] = r
		}
	}
	return m
}

func status(t *testing.T, e *env, model string, header ...string) int {
	t.Helper()
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody(model, false, ""), header...)
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestEndpointHealth: two models on one upstream. The upstream killed, one
// model's connect failures eject the other model's route too, each counted
// as a failure of the route that had it (the dashboard's and the admin
// API's numbers); restored, it is readmitted by the active health check
// with no request sent (no probe, no doubling window), and serves both.
func TestEndpointHealth(t *testing.T) {
	u := newUpstream(t)
	cfg := healthConfig(u, config.HealthCheck{Interval: config.Duration(20 * time.Millisecond), Timeout: config.Duration(time.Second)})
	e, logs := startLogged(t, cfg)
	if got := status(t, e, "b"); got != 200 {
		t.Fatalf("b before the outage: got %d, want 200", got)
	}
	u.kill()
	for i := range 5 {
		if got := status(t, e, "a"); got != http.StatusBadGateway {
			t.Fatalf("a, request %d to a dead upstream: got %d, want 502", i, got)
		}
	}
	routes := adminRoutes(t, e)
	if r := routes["up/sim-a"]; r.State != "ejected" || r.Failures != 5 || r.ErrorRate != 1 || r.Endpoint != "up" {
		t.Errorf("up/sim-a: got %+v, want ejected, 5 failures, error rate 1 on endpoint up", r)
	}
	if r := routes["up/sim-b"]; r.State != "ejected" || r.Failures != 0 || r.EndpointFailures != 5 || r.ConsecutiveFailures != 5 {
		t.Errorf("up/sim-b, the other model's route: got %+v, want ejected by its endpoint's 5 failures", r)
	}
	if r := routes["sim/sim-fast"]; r.State != "healthy" {
		t.Errorf("sim/sim-fast, another upstream: got %+v, want healthy", r)
	}
	if got := sumSeries(scrape(t, e.url), "streamgate_route_failures_total", `route="up/sim-a"`); got != 5 {
		t.Errorf("streamgate_route_failures_total{route=up/sim-a}: got %v, want 5", got)
	}
	if got := logs.count("upstream endpoint ejected", "endpoint=up", "routes=up/sim-a,up/sim-b"); got != 1 {
		t.Errorf("ejection log lines: got %d, want 1; log:\n%s", got, logs)
	}
	logs.waitLog(t, "health check failed", "endpoint=up") // checked while down, and still ejected
	if r := adminRoutes(t, e)["up/sim-b"]; r.State != "ejected" {
		t.Fatalf("up/sim-b while the upstream is down: got %s, want ejected", r.State)
	}

	u.restore()
	logs.waitLog(t, "upstream endpoint recovered", "endpoint=up", `by="health check passed"`)
	routes = adminRoutes(t, e)
	for _, name := range []string{"up/sim-a", "up/sim-b"} {
		if r := routes[name]; r.State != "healthy" || r.ConsecutiveFailures != 0 {
			t.Errorf("%s after the check passed: got %+v, want healthy", name, r)
		}
	}
	if routes["up/sim-b"].Requests != 1 {
		t.Errorf("up/sim-b: got %d attempts, want 1 (readmitted with no request)", routes["up/sim-b"].Requests)
	}
	for _, m := range []string{"a", "b"} {
		if got := status(t, e, m); got != 200 {
			t.Errorf("%s after recovery: got %d, want 200", m, got)
		}
	}
	if got := logs.count("upstream endpoint probed"); got != 0 {
		t.Errorf("probes: got %d, want 0 (the check readmitted it)", got)
	}
	e.waitEntries(t, 8)
}

// TestPanicRouting: every route of a model ejected (the upstream failed 5
// times with 503) while the upstream is up: a request is still routed, to
// the route most likely to work, is served, and its success closes the
// circuit; no 503 "no healthy route". With the active check off and the
// window 5 s, nothing else could have readmitted it.
func TestPanicRouting(t *testing.T) {
	u := newUpstream(t)
	e, logs := startLogged(t, healthConfig(u, config.HealthCheck{Disabled: true}))
	for i := range 5 {
		if got := status(t, e, "a", "X-Sim-Fail-Status", "503", "X-Sim-Fail-Rate", "1"); got != http.StatusServiceUnavailable && got != http.StatusBadGateway {
			t.Fatalf("request %d with a 503 fault: got %d, want 502 or 503", i, got)
		}
	}
	if r := adminRoutes(t, e)["up/sim-b"]; r.State != "ejected" {
		t.Fatalf("up/sim-b after 5 failures on its upstream: got %s, want ejected", r.State)
	}
	if got := status(t, e, "b"); got != 200 {
		t.Fatalf("b, every route ejected, upstream up: got %d, want 200 (panic routing)", got)
	}
	if got := sumSeries(scrape(t, e.url), "streamgate_panic_routed_total", `model="b"`); got != 1 {
		t.Errorf("streamgate_panic_routed_total{model=b}: got %v, want 1", got)
	}
	routes := adminRoutes(t, e)
	for _, name := range []string{"up/sim-a", "up/sim-b"} {
		if r := routes[name]; r.State != "healthy" {
			t.Errorf("%s after the panic request succeeded: got %s, want healthy", name, r.State)
		}
	}
	if got := logs.count("upstream endpoint recovered", `by="a request succeeded"`); got != 1 {
		t.Errorf("recovery log lines: got %d, want 1; log:\n%s", got, logs)
	}
	e.waitEntries(t, 6)
}

// TestRouteReset: POST /admin/routes/{id}/reset closes an ejected
// endpoint's circuit, by route or provider name, for every route on it;
// an unknown id is a 404 in OpenAI's error shape, another method a 405,
// a wrong key a 401.
func TestRouteReset(t *testing.T) {
	u := newUpstream(t)
	e, logs := startLogged(t, healthConfig(u, config.HealthCheck{Disabled: true}))
	eject := func() {
		for range 5 {
			status(t, e, "a", "X-Sim-Fail-Status", "503", "X-Sim-Fail-Rate", "1")
		}
		if r := adminRoutes(t, e)["up/sim-b"]; r.State != "ejected" {
			t.Fatalf("up/sim-b: got %s, want ejected", r.State)
		}
	}
	for _, id := range []string{"up/sim-a", "up"} {
		eject()
		resp := do(t, "POST", e.url+"/admin/routes/"+id+"/reset", "admin-secret", "")
		var out struct {
			Endpoint string   `json:"endpoint"`
			Routes   []string `json:"routes"`
			Was      string   `json:"was"`
			State    string   `json:"state"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 ||
			out.Endpoint != "up" || out.Was != "ejected" || out.State != "healthy" || strings.Join(out.Routes, ",") != "up/sim-a,up/sim-b" {
			t.Fatalf("reset %s: got %d %+v (%v), want 200, up, ejected → healthy, both routes", id, resp.StatusCode, out, err)
		}
		for _, name := range []string{"up/sim-a", "up/sim-b"} {
			if r := adminRoutes(t, e)[name]; r.State != "healthy" || r.ConsecutiveFailures != 0 {
				t.Errorf("%s after reset %s: got %+v, want healthy", name, id, r)
			}
		}
	}
	if got := logs.count("upstream endpoint reset", "endpoint=up"); got != 2 {
		t.Errorf("reset log lines: got %d, want 2", got)
	}
	resp := do(t, "POST", e.url+"/admin/routes/nope/x/reset", "admin-secret", "")
	if resp.StatusCode != 404 {
		t.Fatalf("unknown id: got %d, want 404", resp.StatusCode)
	}
	if er := readError(t, resp); er.Error.Code == nil || *er.Error.Code != "route_not_found" || !strings.Contains(er.Error.Message, `"nope/x"`) {
		t.Errorf("unknown id: got %+v, want code route_not_found naming the id", er.Error)
	}
	if resp := do(t, "GET", e.url+"/admin/routes/up/reset", "admin-secret", ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET reset: got %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if resp := do(t, "POST", e.url+"/admin/routes/up/reset", "wrong", ""); resp.StatusCode != 401 {
		t.Errorf("reset with a wrong key: got %d, want 401", resp.StatusCode)
	}
}
