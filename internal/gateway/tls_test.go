package gateway_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sim"
)

// A TLS upstream (the simulator with --tls's certificate, trusted through
// the provider's ca_file) serves streams of every kind, over HTTP/2 when
// it offers h2 and HTTP/1.1 when it offers only that, with one handshake
// per upstream connection: connections are reused across requests, and
// three streams open at once share one HTTP/2 connection but need three
// HTTP/1.1 ones.
func TestTLSUpstream(t *testing.T) {
	for _, tt := range []struct {
		alpn     []string
		min, max float64 // connections for a first request, then three streams at once
	}{
		{[]string{"h2", "http/1.1"}, 1, 1},
		// Three open streams need three HTTP/1.1 connections; the first
		// request's is reused, unless the next request came before the
		// gateway put it back in its pool.
		{[]string{"http/1.1"}, 3, 4},
	} {
		t.Run(strings.Join(tt.alpn, ","), func(t *testing.T) {
			cert, pem, err := sim.SelfSigned()
			if err != nil {
				t.Fatal(err)
			}
			ca := filepath.Join(t.TempDir(), "ca.pem")
			if err := os.WriteFile(ca, pem, 0o644); err != nil {
				t.Fatal(err)
			}
			s := sim.New(sim.Options{TLS: &sim.TLS{Certificate: cert, ALPN: tt.alpn}})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx, ln) }()
			t.Cleanup(func() { cancel(); <-done })
			base := "https://" + ln.Addr().String()

			cfg := baseConfig()
			for _, p := range []struct{ kind, path string }{{"openai", "/v1"}, {"anthropic", ""}, {"gemini", "/v1beta"}} {
				cfg.Providers = append(cfg.Providers, config.Provider{Name: "tls-" + p.kind, Kind: p.kind, BaseURL: base + p.path, CAFile: ca})
				cfg.Models = append(cfg.Models, config.Model{Name: "tls-" + p.kind, Routes: []config.Route{{Provider: "tls-" + p.kind, Model: "sim-fast"}}})
			}
			e, _ := serve(t, cfg, time.Second)

			for _, kind := range []string{"anthropic", "gemini"} {
				if got := streamText(t, e.url, "tls-"+kind); got == "" {
					t.Errorf("%s over TLS: no text", kind)
				}
			}
			before := simCounter(t, s, "streamgate_sim_tls_handshakes_total")
			// A first request on its own, then three streams held open at
			// once: each has read its first event before any reads on.
			streamText(t, e.url, "tls-openai")
			var wg sync.WaitGroup
			var first sync.WaitGroup
			first.Add(3)
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					streamTextHeld(t, e.url, "tls-openai", &first)
				}()
			}
			wg.Wait()
			hs := simCounter(t, s, "streamgate_sim_tls_handshakes_total") - before
			if hs < tt.min || hs > tt.max {
				t.Errorf("got %v handshakes for 4 requests, want %v to %v (one per connection, reused)", hs, tt.min, tt.max)
			}
			if c := simCounter(t, s, "streamgate_sim_connections_total"); c != simCounter(t, s, "streamgate_sim_tls_handshakes_total") {
				t.Errorf("got %v connections and %v handshakes, want one handshake each", c, simCounter(t, s, "streamgate_sim_tls_handshakes_total"))
			}
		})
	}
}

// TestCAFileInvalid: a ca_file on an http:// URL, or one that is no
// certificate, is a config error naming the field.
func TestCAFileInvalid(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o644)
	for _, tt := range []struct{ url, file, want string }{
		{"http://127.0.0.1:1/v1", bad, "only for https://"},
		{"https://127.0.0.1:1/v1", bad, "holds no PEM certificate"},
		{"https://127.0.0.1:1/v1", filepath.Join(t.TempDir(), "missing.pem"), "no such file"},
	} {
		cfg := baseConfig()
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "p", Kind: "openai", BaseURL: tt.url, CAFile: tt.file})
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "providers[1].ca_file") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: got %v, want an error on providers[1].ca_file saying %q", tt.url, tt.file, err, tt.want)
		}
	}
}

// streamText streams one answer of model and returns its text.
func streamText(t *testing.T, url, model string) string {
	t.Helper()
	resp := do(t, "POST", url+"/v1/chat/completions", devKey, chatBody(model, true, ""))
	events, done := readStream(t, resp)
	if resp.StatusCode != http.StatusOK || !done {
		t.Fatalf("%s: got %d, done %v: %q", model, resp.StatusCode, done, events)
	}
	return strings.Join(events, "")
}

// streamTextHeld streams one answer, signalling first once its first
// event is read and reading on only when every stream of first has.
func streamTextHeld(t *testing.T, url, model string, first *sync.WaitGroup) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(chatBody(model, true, "")))
	req.Header.Set("Authorization", "Bearer "+devKey)
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "1ms")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		first.Done()
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("got %d", resp.StatusCode)
		first.Done()
		return
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Errorf("read the first event: %v", err)
	}
	first.Done()
	first.Wait()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Errorf("stream ended without [DONE]: %v", err)
			return
		}
		if strings.HasPrefix(line, "data: [DONE]") {
			return
		}
	}
}

// simCounter reads a counter (summed over its labels) from s's /metrics,
// served in process so that reading it opens no connection.
func simCounter(t *testing.T, s *sim.Server, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var sum float64
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}
