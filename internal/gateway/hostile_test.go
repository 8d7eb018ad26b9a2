package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// The hostile upstream: a server of the test's own (not the simulator) that
// answers by the upstream model named in the request, each model one way an
// upstream has broken a gateway (reproduced on streamgate a1df8fa).
const (
	chunkHi   = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`
	chunkStop = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
)

func hostileHandler(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("hostile upstream got body %q: %v", body, err)
		}
		if r.Header.Get("X-Request-Id") == "" {
			t.Errorf("hostile upstream got no X-Request-Id")
		}
		sseStart := func() {
			sse.SetHeaders(w.Header())
			w.WriteHeader(http.StatusOK)
		}
		flush := func() { http.NewResponseController(w).Flush() }
		switch req.Model {
		case "deep": // nested far past any real chunk, under the line limit
			sseStart()
			io.WriteString(w, "data: {\"x\":"+strings.Repeat("[", 900_000)+"\n\n")
		case "deep-after-content":
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\n")
			flush()
			io.WriteString(w, "data: {\"x\":"+strings.Repeat("[", 900_000)+"\n\n")
		case "huge": // a 1.1 MB line: over the 1 MiB chunk limit, under the old 10 MiB line limit
			sseStart()
			io.WriteString(w, "data: {\"x\":"+strings.Repeat("[", 1_100_000)+"\n\n")
		case "done-without-blank-line": // "[DONE]" is the last line, no blank line after it
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\ndata: "+chunkStop+"\n\ndata: [DONE]\n")
		case "done-trailing-space": // "data: [DONE] ", which the SDKs take as [DONE]
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\ndata: "+chunkStop+"\n\ndata: [DONE] \n\n")
		case "done-then-data": // a data line after "data: [DONE]" in the same block
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\ndata: "+chunkStop+"\n\ndata: [DONE]\ndata: "+chunkHi+"\n\n")
		case "bom": // a UTF-8 BOM before the first line
			sseStart()
			io.WriteString(w, "\xEF\xBB\xBFdata: "+chunkHi+"\n\ndata: [DONE]\n\n")
		case "float-usage": // counts as JSON floats
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\ndata: "+chunkStop+"\n\n")
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5.0,"completion_tokens":7.0,"total_tokens":12.0}}`+"\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		case "float-usage-json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5.0,"completion_tokens":7.0,"total_tokens":12.0}}`)
		case "cut": // content, then the connection ends without [DONE] or usage
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\ndata: "+chunkHi+"\n\ndata: "+chunkHi+"\n\n")
		case "slow-end": // the body ends 5 ms after [DONE]
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\ndata: [DONE]\n\n")
			flush()
			time.Sleep(5 * time.Millisecond)
		case "late-end": // the body ends 50 ms after [DONE], as proxies in front of providers do
			sseStart()
			io.WriteString(w, "data: "+chunkHi+"\n\ndata: [DONE]\n\n")
			flush()
			time.Sleep(50 * time.Millisecond)
		case "pings-forever", "anthropic-pings-forever": // content, then only pings until the gateway gives up
			sseStart()
			if req.Model == "pings-forever" {
				io.WriteString(w, "data: "+chunkHi+"\n\n")
			} else {
				io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n"+
					"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
					"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n")
			}
			flush()
			pings := []string{": keep-alive\n\n", "data:\n\n", "data: {\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n"}
			if req.Model != "pings-forever" {
				pings = []string{"event: ping\ndata: {\"type\": \"ping\"}\n\n", ": keep-alive\n\n"}
			}
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
					io.WriteString(w, pings[i%len(pings)])
					flush()
				}
			}
		case "trickle": // content every 10 ms, for good
			sseStart()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
					io.WriteString(w, "data: "+chunkHi+"\n\n")
					flush()
				}
			}
		case "flood": // content as fast as it can be written, for good
			sseStart()
			line := "data: " + chunkHi + "\n\n"
			for r.Context().Err() == nil {
				if _, err := io.WriteString(w, line); err != nil {
					return
				}
				flush()
			}
		case "unauthorized": // a revoked provider key; OpenAI's message names part of the key and a URL
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: sk-abc123. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		case "missing-model":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`)
		case "leaky-500":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "proxy error: dial tcp 10.0.0.7:9000: connect: connection refused (http://10.0.0.7:9000/internal)")
		case "bad-request":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"Invalid 'temperature': see https://docs.example.com/errors or 10.1.2.3:8443","type":"invalid_request_error","code":"invalid_value"}}`)
		case "stall": // no answer for 2 s
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
			sseStart()
			io.WriteString(w, "data: [DONE]\n\n")
		case "slow-json": // a non-stream answer that takes longer than first_token
			time.Sleep(1800 * time.Millisecond)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		default:
			t.Errorf("hostile upstream: unknown model %q", req.Model)
			w.WriteHeader(http.StatusTeapot)
		}
	}
}

// hostile serves hostileHandler and counts the connections opened to it.
func hostile(t *testing.T) (url string, conns *atomic.Int64) {
	t.Helper()
	conns = &atomic.Int64{}
	srv := httptest.NewUnstartedServer(hostileHandler(t))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", conns
}

// hostileConfig has one model per hostile case ("h-<case>"), each with the
// hostile route alone, and "fb-<case>" with the sim as a second route.
func hostileConfig(url string, cases ...string) *config.Config {
	cfg := baseConfig()
	// first_token is short enough for the table to end soon, long enough
	// for a loaded machine (-race, two cores) to read the huge line.
	cfg.Timeouts.FirstToken = config.Duration(1500 * time.Millisecond)
	cfg.Timeouts.NonStream = config.Duration(5 * time.Second)
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "hostile", Kind: "openai", BaseURL: url})
	for _, c := range cases {
		cfg.Models = append(cfg.Models,
			config.Model{Name: "h-" + c, Routes: []config.Route{{Provider: "hostile", Model: c}}, Price: config.Price{Input: 1, Output: 2}},
			config.Model{Name: "fb-" + c, Routes: []config.Route{{Provider: "hostile", Model: c}, {Provider: "sim", Model: "sim-fast"}}, Price: config.Price{Input: 1, Output: 2}})
	}
	return cfg
}

// clientVisible fails the test when a client-visible error names an
// address, a URL, a provider key or a Go transport error.
func clientVisible(t *testing.T, what, s string) {
	t.Helper()
	for _, leak := range []string{"127.0.0.1", "10.0.0.7", "10.1.2.3", "http://", "https://", "sk-abc123", "dial tcp", "Post \""} {
		if strings.Contains(s, leak) {
			t.Errorf("%s: client saw %q, which contains %q", what, s, leak)
		}
	}
}

// TestHostileUpstream sends each misbehaviour through a running gateway: the
// process survives, a complete answer ends with [DONE] and no error event,
// a broken one with exactly one error event naming the problem, and every
// request leaves exactly one usage entry.
func TestHostileUpstream(t *testing.T) {
	url, _ := hostile(t)
	tests := []struct {
		model     string
		stream    bool
		status    int
		done      bool   // the stream ended with [DONE]
		errCode   string // the error code the client got ("" none)
		contents  int    // content events the client got
		outcome   string
		source    string
		in, out   int // -1: any positive number
		attempts  int
		viaRoute  string
		fallbacks string // a fallbacks_total series that must be counted
	}{
		{model: "h-deep", stream: true, status: 502, errCode: "malformed_upstream_event", outcome: usage.OutcomeUpstreamError, source: "estimated", in: -1, attempts: 1, viaRoute: "hostile/deep"},
		{model: "h-deep-after-content", stream: true, status: 200, errCode: "malformed_upstream_event", contents: 1, outcome: usage.OutcomeUpstreamError, source: "estimated", in: -1, out: 1, attempts: 1, viaRoute: "hostile/deep-after-content"},
		{model: "h-huge", stream: true, status: 502, errCode: "malformed_upstream_event", outcome: usage.OutcomeUpstreamError, source: "estimated", in: -1, attempts: 1, viaRoute: "hostile/huge"},
		{model: "fb-deep", stream: true, status: 200, done: true, contents: -1, outcome: usage.OutcomeOK, source: "partial", in: -1, out: -1, attempts: 2, viaRoute: "sim/sim-fast", fallbacks: `reason="malformed"`},
		{model: "h-done-without-blank-line", stream: true, status: 200, done: true, contents: 1, outcome: usage.OutcomeOK, source: "estimated", in: -1, out: 1, attempts: 1, viaRoute: "hostile/done-without-blank-line"},
		{model: "h-done-trailing-space", stream: true, status: 200, done: true, contents: 1, outcome: usage.OutcomeOK, source: "estimated", in: -1, out: 1, attempts: 1, viaRoute: "hostile/done-trailing-space"},
		{model: "h-done-then-data", stream: true, status: 200, done: true, contents: 1, outcome: usage.OutcomeOK, source: "estimated", in: -1, out: 1, attempts: 1, viaRoute: "hostile/done-then-data"},
		{model: "h-bom", stream: true, status: 200, done: true, contents: 1, outcome: usage.OutcomeOK, source: "estimated", in: -1, out: 1, attempts: 1, viaRoute: "hostile/bom"},
		{model: "h-float-usage", stream: true, status: 200, done: true, contents: 1, outcome: usage.OutcomeOK, source: "usage", in: 5, out: 7, attempts: 1, viaRoute: "hostile/float-usage"},
		{model: "h-float-usage-json", stream: false, status: 200, outcome: usage.OutcomeOK, source: "usage", in: 5, out: 7, attempts: 1, viaRoute: "hostile/float-usage-json"},
		// The output is the estimate of the text sent, "hihihi": one word (fit.Text).
		{model: "h-cut", stream: true, status: 200, errCode: "stream_truncated", contents: 3, outcome: usage.OutcomeUpstreamError, source: "estimated", in: -1, out: 1, attempts: 1, viaRoute: "hostile/cut"},
		{model: "fb-unauthorized", stream: true, status: 200, done: true, contents: -1, outcome: usage.OutcomeOK, source: "usage", in: -1, out: -1, attempts: 2, viaRoute: "sim/sim-fast", fallbacks: `reason="upstream_auth"`},
		{model: "fb-unauthorized", stream: false, status: 200, outcome: usage.OutcomeOK, source: "usage", in: -1, out: -1, attempts: 2, viaRoute: "sim/sim-fast", fallbacks: `reason="upstream_auth"`},
		{model: "fb-missing-model", stream: true, status: 200, done: true, contents: -1, outcome: usage.OutcomeOK, source: "usage", in: -1, out: -1, attempts: 2, viaRoute: "sim/sim-fast", fallbacks: `reason="upstream_not_found"`},
		{model: "h-unauthorized", stream: true, status: 502, errCode: "upstream_auth_failed", outcome: usage.OutcomeUpstreamError, attempts: 1, viaRoute: "hostile/unauthorized"},
		{model: "h-leaky-500", stream: false, status: 502, errCode: "upstream_500", outcome: usage.OutcomeUpstreamError, attempts: 1, viaRoute: "hostile/leaky-500"},
		{model: "fb-bad-request", stream: true, status: 400, errCode: "invalid_value", outcome: usage.OutcomeUpstreamError, attempts: 1, viaRoute: "hostile/bad-request"},
		{model: "h-slow-json", stream: false, status: 200, outcome: usage.OutcomeOK, source: "usage", in: 3, out: 1, attempts: 1, viaRoute: "hostile/slow-json"},
	}
	var cases []string
	seen := map[string]bool{}
	for _, tt := range tests {
		c := strings.TrimPrefix(strings.TrimPrefix(tt.model, "h-"), "fb-")
		if !seen[c] {
			seen[c] = true
			cases = append(cases, c)
		}
	}
	cfg := hostileConfig(url, cases...)
	cfg.AdminKey = "admin-secret"
	e := start(t, cfg)
	for i, tt := range tests {
		name := tt.model
		if !tt.stream {
			name += "/json"
		}
		t.Run(name, func(t *testing.T) {
			// Every case is one upstream model of the same hostile server,
			// whose health they share: each starts with it readmitted.
			if resp := do(t, "POST", e.url+"/admin/routes/hostile/reset", "admin-secret", ""); resp.StatusCode != 200 {
				t.Fatalf("reset the hostile upstream: got %d, want 200", resp.StatusCode)
			}
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody(tt.model, tt.stream, ""))
			if resp.StatusCode != tt.status {
				t.Errorf("got status %d, want %d", resp.StatusCode, tt.status)
			}
			var gotCode string
			contents, done := 0, false
			switch {
			case resp.StatusCode != 200:
				b, _ := io.ReadAll(resp.Body)
				clientVisible(t, "error body", string(b))
				gotCode = errorCode(b)
			case tt.stream:
				var events []string
				events, done = readStream(t, resp)
				for j, ev := range events {
					if strings.Contains(ev, `"error"`) {
						clientVisible(t, "error event", ev)
						if gotCode != "" || j != len(events)-1 {
							t.Errorf("got events %q, want one error event, last", events)
						}
						gotCode = errorCode([]byte(ev))
					} else if strings.Contains(ev, `"content"`) {
						contents++
					}
				}
				if done && gotCode != "" {
					t.Errorf("got [DONE] and an error event %q", gotCode)
				}
			default:
				io.Copy(io.Discard, resp.Body)
			}
			if gotCode != tt.errCode {
				t.Errorf("got error code %q, want %q", gotCode, tt.errCode)
			}
			if done != tt.done {
				t.Errorf("got done=%v, want %v", done, tt.done)
			}
			if tt.contents >= 0 && contents != tt.contents || tt.contents < 0 && contents == 0 {
				t.Errorf("got %d content events, want %d (-1: some)", contents, tt.contents)
			}
			en := e.waitEntries(t, i+1)[i]
			source := tt.source
			if source == "" {
				source = usage.SourceNone // nothing billed
			}
			if en.Outcome != tt.outcome || en.TokenSource != source || en.Attempts != tt.attempts || en.Route != tt.viaRoute {
				t.Errorf("got entry outcome %q source %q attempts %d route %q, want %q %q %d %q",
					en.Outcome, en.TokenSource, en.Attempts, en.Route, tt.outcome, source, tt.attempts, tt.viaRoute)
			}
			checkCount := func(what string, got, want int) {
				if want < 0 && got <= 0 || want >= 0 && got != want {
					t.Errorf("got %s %d, want %d (-1: some)", what, got, want)
				}
			}
			checkCount("input tokens", en.InputTokens, tt.in)
			checkCount("output tokens", en.OutputTokens, tt.out)
			if tt.fallbacks != "" && !strings.Contains(scrape(t, e.url), `streamgate_fallbacks_total{model="`+tt.model+`",`+tt.fallbacks+`}`) {
				t.Errorf("no streamgate_fallbacks_total{model=%q,%s}", tt.model, tt.fallbacks)
			}
		})
	}
	// The process survived all of it, and the ledger and /metrics agree.
	resp := do(t, "GET", e.url+"/healthz", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: got %d, want 200", resp.StatusCode)
	}
	entries := e.waitEntries(t, len(tests))
	metricsText := scrape(t, e.url)
	var in, out float64
	for _, en := range entries {
		in += float64(en.InputTokens)
		out += float64(en.OutputTokens)
	}
	if got := sumSeries(metricsText, "streamgate_tokens_total", `kind="input"`); got != in {
		t.Errorf("metrics count %v input tokens, the ledger %v", got, in)
	}
	if got := sumSeries(metricsText, "streamgate_tokens_total", `kind="output"`); got != out {
		t.Errorf("metrics count %v output tokens, the ledger %v", got, out)
	}
	if got := sumSeries(metricsText, "streamgate_requests_total", ""); got != float64(len(tests)) {
		t.Errorf("metrics count %v requests, want %d", got, len(tests))
	}
	// A stream that got 200 and then an error event is told apart from a
	// complete one by its outcome.
	for _, series := range []string{
		`streamgate_requests_total{code="200",model="h-cut",outcome="error_event",route="hostile/cut"} 1`,
		`streamgate_requests_total{code="200",model="h-bom",outcome="ok",route="hostile/bom"} 1`,
		`streamgate_requests_total{code="502",model="h-deep",outcome="upstream_error",route="hostile/deep"} 1`,
	} {
		if !strings.Contains(metricsText, series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
}

// A refused connection on the only route: the client learns that the
// upstream could not be reached, not where it is.
func TestConnectErrorHidesAddress(t *testing.T) {
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "down", Kind: "openai", BaseURL: "http://" + closedPort(t) + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "down", Routes: []config.Route{{Provider: "down", Model: "x"}}})
	e := start(t, cfg)
	for _, stream := range []bool{true, false} {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("down", stream, ""))
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 502 || !strings.Contains(string(b), "upstream_connect_failed") {
			t.Errorf("stream=%v: got %d %s, want 502 upstream_connect_failed", stream, resp.StatusCode, b)
		}
		clientVisible(t, "connect error", string(b))
	}
	e.waitEntries(t, 2)
}

// Ten sequential streams to an HTTP/1.1 upstream whose body ends 5 ms after
// [DONE] reuse one connection (at most two: the transport may race one).
func TestUpstreamConnectionReused(t *testing.T) {
	url, conns := hostile(t)
	e := start(t, hostileConfig(url, "slow-end"))
	for i := range 10 {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("h-slow-end", true, ""))
		if _, done := readStream(t, resp); !done {
			t.Fatalf("stream %d: no [DONE]", i)
		}
		// The next request starts once this one's handler is over.
		e.waitEntries(t, i+1)
	}
	if n := conns.Load(); n > 2 {
		t.Errorf("10 sequential streams opened %d upstream connections, want at most 2", n)
	}
}

// Ten sequential streams whose upstream body ends 50 ms after [DONE], and
// whose client hangs up as soon as it read [DONE] (as most SDK loops do),
// reuse the upstream connection: the gateway drains the rest detached from
// the client (issue 22: each stream opened a connection of its own). At
// most two: the next request starts while the last one's rest is still
// being drained.
func TestUpstreamConnectionReusedAfterHangUp(t *testing.T) {
	url, conns := hostile(t)
	e := start(t, hostileConfig(url, "late-end"))
	for i := range 10 {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("h-late-end", true, ""))
		_, done := readStream(t, resp)
		resp.Body.Close() // before the end of the response: the client's connection is closed
		if !done {
			t.Fatalf("stream %d: no [DONE]", i)
		}
		if en := e.waitEntries(t, i+1)[i]; en.Outcome != usage.OutcomeOK {
			t.Fatalf("stream %d: got outcome %q, want ok", i, en.Outcome)
		}
	}
	t.Logf("10 streams, %d upstream connections", conns.Load())
	if n := conns.Load(); n > 2 {
		t.Errorf("10 sequential streams opened %d upstream connections, want at most 2", n)
	}
}

// An upstream that sends only pings after content (comments, empty events,
// empty deltas; Anthropic's ping events) is idle: the stream ends with one
// idle_timeout error event and one usage entry (issue 22: the pings reset
// the idle window, and the stream stayed open for good; this test hung).
func TestPingsAreNotProgress(t *testing.T) {
	url, _ := hostile(t)
	cfg := hostileConfig(url, "pings-forever")
	cfg.Timeouts.Idle = config.Duration(200 * time.Millisecond)
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "hostile-anthropic", Kind: "anthropic", BaseURL: strings.TrimSuffix(url, "/v1")})
	cfg.Models = append(cfg.Models, config.Model{Name: "a-pings", Routes: []config.Route{{Provider: "hostile-anthropic", Model: "anthropic-pings-forever"}}})
	e := start(t, cfg)
	for i, model := range []string{"h-pings-forever", "a-pings"} {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody(model, true, ""))
		events, done := readStream(t, resp)
		if done || len(events) == 0 || errorCode([]byte(events[len(events)-1])) != "idle_timeout" {
			t.Errorf("%s: got events %q (done %v), want content, then an idle_timeout error event", model, events, done)
		}
		if en := e.waitEntries(t, i+1)[i]; en.Outcome != usage.OutcomeTimeout {
			t.Errorf("%s: got outcome %q, want %q", model, en.Outcome, usage.OutcomeTimeout)
		}
	}
}

// timeouts.total bounds a stream that never stops sending content (it has
// a default since issue 22, config.DefaultTotal): one total_timeout error
// event, one usage entry.
func TestStreamTotalTimeout(t *testing.T) {
	url, _ := hostile(t)
	cfg := hostileConfig(url, "trickle")
	cfg.Timeouts.Total = config.Duration(300 * time.Millisecond)
	e := start(t, cfg)
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("h-trickle", true, ""))
	events, done := readStream(t, resp)
	if done || len(events) < 2 || errorCode([]byte(events[len(events)-1])) != "total_timeout" {
		t.Errorf("got %d events (done %v), want content, then a total_timeout error event", len(events), done)
	}
	if en := e.waitEntries(t, 1)[0]; en.Outcome != usage.OutcomeTimeout {
		t.Errorf("got outcome %q, want %q", en.Outcome, usage.OutcomeTimeout)
	}
}

// A client that stops reading its stream (issue 22: one reading 1 byte/s
// held its stream and its upstream with no end in sight): once the
// connection's buffers are full, a write waits at most
// timeouts.client_write, then the stream ends as the client's leaving
// does, upstream cancelled, with one usage entry. Before the fix the
// handler stayed in its write until the client read again, and this test
// failed waiting for the entry.
func TestSlowReaderBounded(t *testing.T) {
	url, _ := hostile(t)
	cfg := hostileConfig(url, "flood")
	cfg.Timeouts.Idle = config.Duration(time.Minute) // the write deadline ends it, not the idle window
	cfg.Timeouts.ClientWrite = config.Duration(200 * time.Millisecond)
	e := start(t, cfg)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10) // the buffers fill sooner
	body := chatBody("h-flood", true, "")
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		devKey, len(body), body)
	if _, err := io.ReadFull(c, make([]byte, 64)); err != nil { // the status line: the stream began
		t.Fatal(err)
	}
	// Then the client reads no more.
	if en := e.waitEntries(t, 1)[0]; en.Outcome != usage.OutcomeClientCancelled {
		t.Errorf("got outcome %q, want %q", en.Outcome, usage.OutcomeClientCancelled)
	}
}

// After a keep-alive committed the headers and a fallback served, the route
// that served reaches the client as a trailer.
func TestServingRouteTrailer(t *testing.T) {
	url, _ := hostile(t)
	cfg := hostileConfig(url, "stall")
	cfg.Timeouts.FirstToken = config.Duration(200 * time.Millisecond)
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: 20 * time.Millisecond})
	// The first route stalls: keep-alives commit the headers, the
	// first-token timeout moves the request to the second route.
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("fb-stall", true, ""))
	if got := resp.Header.Get(gateway.HeaderRoute); got != "" {
		t.Errorf("got header %s %q before any route served, want none (a trailer)", gateway.HeaderRoute, got)
	}
	if _, done := readStream(t, resp); !done {
		t.Fatal("no [DONE]")
	}
	io.Copy(io.Discard, resp.Body) // trailers come after the body's end
	if got := resp.Trailer.Get(gateway.HeaderRoute); got != "sim/sim-fast" {
		t.Errorf("got trailer %s %q, want sim/sim-fast", gateway.HeaderRoute, got)
	}
	if got := resp.Trailer.Get(gateway.HeaderAttempts); got != "2" {
		t.Errorf("got trailer %s %q, want 2", gateway.HeaderAttempts, got)
	}
}

// errorCode is the code of an OpenAI error object, "" when b is none.
func errorCode(b []byte) string {
	var er struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(b, &er)
	return er.Error.Code
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp := do(t, "GET", base+"/metrics", "", "")
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// sumSeries adds the values of the series of name whose labels contain match.
func sumSeries(text, name, match string) float64 {
	var sum float64
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name+"{") || !strings.Contains(l, match) {
			continue
		}
		var v float64
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			json.Unmarshal([]byte(l[i+1:]), &v)
		}
		sum += v
	}
	return sum
}

// A client keep-alive connection left idle is closed by the server after
// Options.IdleTimeout, so idle clients cannot hold connections forever.
func TestIdleClientConnectionClosed(t *testing.T) {
	gw, err := gateway.New(gateway.Options{Config: baseConfig(), KeepAlive: -1, IdleTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln, time.Second) }()
	defer func() { cancel(); <-served }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
	rd := bufio.NewReader(c)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The connection stays open for keep-alive, then the server closes it.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := rd.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: got %d bytes, %v; want the server to close it (EOF)", n, err)
	}
}
