package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/tracing"
)

// TestEgressProxy: HTTP_PROXY and NO_PROXY apply to every provider kind
// (openai, anthropic, gemini) and to OTLP export. The upstreams have names
// that do not resolve (openai.example, ...): only the proxy, which sends
// every request it gets to one simulator (and /v1/traces to a collector
// stub), can reach them, so an answer proves the proxy carried it. A
// provider under NO_PROXY is dialled directly (and fails to resolve).
// net/http reads the proxy variables once per process, so the gateway runs
// in a child process of this test binary with them set.
func TestEgressProxy(t *testing.T) {
	if os.Getenv("SG_EGRESS_CHILD") == "1" {
		egressChild(t)
		return
	}
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	var (
		mu    sync.Mutex
		hosts []string
		spans int
	)
	upURL, _ := url.Parse(up.URL)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.URL.Host)
		mu.Unlock()
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/v1/traces" {
			io.Copy(io.Discard, r.Body)
			mu.Lock()
			spans++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/x-protobuf")
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = upURL.Scheme, upURL.Host
		out.Host = upURL.Host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer proxy.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestEgressProxy$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SG_EGRESS_CHILD=1", "HTTP_PROXY="+proxy.URL, "HTTPS_PROXY="+proxy.URL,
		"NO_PROXY=direct.example", "http_proxy=", "https_proxy=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range []string{"openai.example", "anthropic.example", "gemini.example", "otel.example:4318"} {
		if !slices.Contains(hosts, h) {
			t.Errorf("the proxy never saw %s (saw %q)", h, hosts)
		}
	}
	if slices.Contains(hosts, "direct.example") {
		t.Errorf("a NO_PROXY host went through the proxy (saw %q)", hosts)
	}
	if spans == 0 {
		t.Error("no OTLP export reached the collector through the proxy")
	}
}

func egressChild(t *testing.T) {
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "po", Kind: "openai", BaseURL: "http://openai.example/v1", APIKey: "k"},
		config.Provider{Name: "pa", Kind: "anthropic", BaseURL: "http://anthropic.example", APIKey: "k"},
		config.Provider{Name: "pg", Kind: "gemini", BaseURL: "http://gemini.example/v1beta", APIKey: "k"},
		config.Provider{Name: "pd", Kind: "openai", BaseURL: "http://direct.example/v1", APIKey: "k"})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "via-openai", Routes: []config.Route{{Provider: "po", Model: "sim-fast"}}},
		config.Model{Name: "via-anthropic", Routes: []config.Route{{Provider: "pa", Model: "sim-fast"}}},
		config.Model{Name: "via-gemini", Routes: []config.Route{{Provider: "pg", Model: "sim-fast"}}},
		config.Model{Name: "direct", Routes: []config.Route{{Provider: "pd", Model: "sim-fast"}}})
	ctx := context.Background()
	tp, err := tracing.New(ctx, &config.OTel{Endpoint: "http://otel.example:4318"}, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("tracing.New: %v", err)
	}
	e := startWith(t, gateway.Options{Config: cfg, Tracer: tp.Tracer()})
	for _, m := range []string{"via-openai", "via-anthropic", "via-gemini"} {
		for _, stream := range []bool{false, true} {
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody(m, stream, ""))
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "content") {
				t.Errorf("%s stream %v: got %d %s, want an answer through the proxy", m, stream, resp.StatusCode, b)
			}
		}
	}
	if resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("direct", false, "")); resp.StatusCode == http.StatusOK {
		t.Error("direct: got 200 from a host that does not resolve, want it dialled directly and failing")
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(sctx); err != nil {
		t.Errorf("tracing shutdown (export through the proxy): %v", err)
	}
}
