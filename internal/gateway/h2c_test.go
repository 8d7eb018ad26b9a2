package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sse"
)

// h2cProtocols is HTTP/1.1 and HTTP/2 cleartext with prior knowledge.
func h2cProtocols(http1 bool) *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(http1)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// A stream relayed over h2c on both hops (client → gateway, gateway →
// upstream) reaches the client event by event: the upstream writes chunk
// k+1 only after the client has read chunk k, so a buffered event would
// stall the test instead of passing it. The in-process sim (kind sim with
// http2) and an HTTP/1.1 client on the same port work too.
func TestRelayH2C(t *testing.T) {
	const chunks = 5
	ack := make(chan struct{})
	var upMajor atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upMajor.Store(int32(r.ProtoMajor))
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		for k := range chunks {
			sw.Data(fmt.Appendf(nil, `{"id":"c","object":"chat.completion.chunk","model":"x","choices":[{"index":0,"delta":{"content":"c%d"},"finish_reason":null}]}`, k))
			select {
			case <-ack:
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Second):
				t.Errorf("chunk %d: no ack from the client within 5s", k)
				return
			}
		}
		sw.Data([]byte(`{"id":"c","object":"chat.completion.chunk","model":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`))
		sw.Done()
	}))
	up.Config.Protocols = h2cProtocols(true)
	up.Start()
	defer up.Close()

	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "up", Kind: "openai", BaseURL: up.URL + "/v1", HTTP2: true},
		config.Provider{Name: "sim2", Kind: "sim", HTTP2: true})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "step", Routes: []config.Route{{Provider: "up", Model: "x"}}},
		config.Model{Name: "sim-h2", Routes: []config.Route{{Provider: "sim2", Model: "sim-fast"}}})
	e, _ := serve(t, cfg, time.Second)
	url := e.url + "/v1/chat/completions"

	h2 := &http.Transport{Protocols: h2cProtocols(false)}
	defer h2.CloseIdleConnections()
	h1 := &http.Transport{}
	defer h1.CloseIdleConnections()
	post := func(t *testing.T, tr *http.Transport, model string) *http.Response {
		t.Helper()
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(rctx, "POST", url, strings.NewReader(chatBody(model, true, "")))
		req.Header.Set("Authorization", "Bearer "+devKey)
		req.Header.Set("X-Sim-TTFT", "1ms")
		req.Header.Set("X-Sim-ITL", "1ms")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("POST %s: %v", model, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("got %d %s, want 200", resp.StatusCode, b)
		}
		return resp
	}

	t.Run("event by event over h2c both ways", func(t *testing.T) {
		resp := post(t, h2, "step")
		if resp.ProtoMajor != 2 {
			t.Errorf("client got HTTP/%d, want HTTP/2", resp.ProtoMajor)
		}
		rd := sse.NewReader(resp.Body, 0)
		for k := range chunks {
			ev, err := rd.Next()
			if err != nil {
				t.Fatalf("chunk %d: %v (not delivered before the next was written)", k, err)
			}
			if want := fmt.Sprintf(`"content":"c%d"`, k); !strings.Contains(string(ev.Data), want) {
				t.Fatalf("chunk %d: got %s, want %s", k, ev.Data, want)
			}
			ack <- struct{}{}
		}
		var rest []string
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("after %q: got %v, want [DONE]", rest, err)
			}
			rest = append(rest, string(ev.Data))
		}
		if len(rest) != 1 || !strings.Contains(rest[0], `"finish_reason":"stop"`) {
			t.Errorf("got %q after the content, want the finish chunk then [DONE]", rest)
		}
		if got := upMajor.Load(); got != 2 {
			t.Errorf("upstream got HTTP/%d, want HTTP/2 (provider http2: true)", got)
		}
	})

	for _, tc := range []struct {
		name  string
		tr    *http.Transport
		major int
	}{
		{"in-process sim over h2c, h2c client", h2, 2},
		{"in-process sim over h2c, HTTP/1.1 client", h1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, tc.tr, "sim-h2")
			if resp.ProtoMajor != tc.major {
				t.Errorf("client got HTTP/%d, want HTTP/%d", resp.ProtoMajor, tc.major)
			}
			events, done := readStream(t, resp)
			if !done || len(events) < 4 {
				t.Errorf("got %d events, [DONE] %v; want the role, 4 content and finish chunks, then [DONE]", len(events), done)
			}
		})
	}
	e.waitEntries(t, 3)
}
