package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
)

// A 200 whose body is not an event stream is the upstream's error: read
// (redacted) and fallen back from like a 5xx, not taken for a truncated
// stream. Each provider kind, and bodies of JSON, HTML and gzip.
func TestNotStream200(t *testing.T) {
	bodies := map[string]struct{ ctype, enc, body string }{
		"openai":    {"application/json", "", `{"error":{"message":"Overloaded at vllm-svc:8000","type":"overloaded_error"}}`},
		"anthropic": {"application/json", "", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded at vllm-svc:8000"}}`},
		"gemini":    {"application/json; charset=UTF-8", "", `{"error":{"code":503,"message":"Overloaded at vllm-svc:8000","status":"UNAVAILABLE"}}`},
		"html":      {"text/html", "", `<html><body>Overloaded at vllm-svc:8000</body></html>`},
		"gzip":      {"text/event-stream", "gzip", "\x1f\x8b\x08\x00\x00\x00\x00\x00"},
	}
	cfg := baseConfig()
	for name, b := range bodies {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", b.ctype)
			if b.enc != "" {
				w.Header().Set("Content-Encoding", b.enc)
			}
			io.WriteString(w, b.body) // status 200
		}))
		t.Cleanup(srv.Close)
		kind, url := name, srv.URL
		switch name {
		case "openai", "html", "gzip":
			kind, url = "openai", url+"/v1"
		}
		cfg.Providers = append(cfg.Providers, config.Provider{Name: name, Kind: kind, BaseURL: url})
		cfg.Models = append(cfg.Models,
			config.Model{Name: "one-" + name, Routes: []config.Route{{Provider: name, Model: "x"}}},
			config.Model{Name: "two-" + name, Routes: []config.Route{{Provider: name, Model: "x"}, {Provider: "sim", Model: "sim-fast"}}})
	}
	e := start(t, cfg)
	for name, b := range bodies {
		t.Run(name, func(t *testing.T) {
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("two-"+name, true, ""))
			events, done := readStream(t, resp)
			if resp.StatusCode != 200 || !done || len(events) == 0 || resp.Header.Get(gateway.HeaderRoute) != "sim/sim-fast" || resp.Header.Get(gateway.HeaderAttempts) != "2" {
				t.Errorf("two routes: got %d route %q attempts %q done %v, want the second route's whole stream",
					resp.StatusCode, resp.Header.Get(gateway.HeaderRoute), resp.Header.Get(gateway.HeaderAttempts), done)
			}
			en := e.waitEntries(t, 1)[0]
			e.rec.mu.Lock()
			e.rec.entries = nil
			e.rec.mu.Unlock()
			if en.Outcome != usage.OutcomeOK || en.Attempts != 2 {
				t.Errorf("two routes: got entry %+v, want ok after 2 attempts", en)
			}

			resp = do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("one-"+name, true, ""))
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("one route: got status %d, want 502", resp.StatusCode)
			}
			msg := readError(t, resp).Error
			want := "Overloaded at [address]"
			if b.enc != "" {
				want = "a gzip-encoded body"
			}
			code := ""
			if msg.Code != nil {
				code = *msg.Code
			}
			if !strings.Contains(msg.Message, want) || strings.Contains(msg.Message, "vllm-svc") || code != "upstream_not_stream" {
				t.Errorf("one route: got %q (code %q), want upstream_not_stream with %q", msg.Message, code, want)
			}
			if en := e.waitEntries(t, 1)[0]; en.Outcome != usage.OutcomeUpstreamError {
				t.Errorf("one route: got outcome %q, want %q", en.Outcome, usage.OutcomeUpstreamError)
			}
			e.rec.mu.Lock()
			e.rec.entries = nil
			e.rec.mu.Unlock()
		})
	}
}
