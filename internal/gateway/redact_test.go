package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sse"
)

// routeKey is the api key of the leaky routes: it has no known key shape,
// so only the route's own knowledge of it removes it.
const routeKey = "route-key-secret-42"

// leakyWords is an upstream's error message naming everything a client must
// not read, and a field path it must.
var leakyWords = "backend http://10.20.30.40:8443/v1 via [fe80::1]:99 and gpu-node-3.internal:7000, localhost:9000, " +
	"vllm-svc:8000, fe80::1, 2001:db8::5; key sk-ant-api03-AbCdEfGh0123 AIzaSyA1234567890abcdefghijklmnop Bearer tok_abcdefgh " +
	routeKey + " at messages[0].content"

var leaks = []string{"10.20.30.40", "fe80::1", "gpu-node-3", "localhost:9000", "vllm-svc", "2001:db8::5",
	"sk-ant-api03", "AIzaSy", "tok_abcdefgh", routeKey, "http://"}

// leakyUpstream answers in kind's dialect by the model asked for: "event"
// streams content, then an error event with leakyWords; "status" answers 400
// with leakyWords.
func leakyUpstream(t *testing.T, kind string) string {
	t.Helper()
	words, _ := json.Marshal(leakyWords)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status := strings.Contains(string(body), `"status"`) || strings.Contains(r.URL.Path, "status")
		if status {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			switch kind {
			case "gemini":
				io.WriteString(w, `{"error":{"code":400,"message":`+string(words)+`,"status":"INVALID_ARGUMENT"}}`)
			case "anthropic":
				io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":`+string(words)+`}}`)
			default:
				io.WriteString(w, `{"error":{"message":`+string(words)+`,"type":"invalid_request_error","code":"bad at localhost:9000","param":null}}`)
			}
			return
		}
		sse.SetHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		switch kind {
		case "gemini":
			io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"Partial"}],"role":"model"},"index":0}],"modelVersion":"g","responseId":"r1"}`+"\n\n")
			io.WriteString(w, `data: {"error":{"code":500,"message":`+string(words)+`,"status":"INTERNAL"}}`+"\n\n")
		case "anthropic":
			io.WriteString(w, "event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`+"\n\n")
			io.WriteString(w, "event: content_block_start\ndata: "+`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n")
			io.WriteString(w, "event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial"}}`+"\n\n")
			io.WriteString(w, "event: error\ndata: "+`{"type":"error","error":{"type":"overloaded_error","message":`+string(words)+`}}`+"\n\n")
		default:
			io.WriteString(w, "data: "+chunkHi+"\n\n")
			io.WriteString(w, `data: {"error":{"message":`+string(words)+`,"type":"server_error","code":"overloaded","param":"see http://10.20.30.40:8443/v1"}}`+"\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// No upstream's words reach a client with an address or a secret in them:
// not an error event after content (relayed to OpenAI and Anthropic
// clients), not a 400 returned as the upstream gave it; field paths stay.
func TestUpstreamWordsRedacted(t *testing.T) {
	cfg := baseConfig()
	for _, kind := range []string{"openai", "anthropic", "gemini"} {
		url := leakyUpstream(t, kind)
		if kind == "openai" {
			url += "/v1"
		}
		cfg.Providers = append(cfg.Providers, config.Provider{Name: kind, Kind: kind, BaseURL: url, APIKey: routeKey})
		for _, mode := range []string{"event", "status"} {
			cfg.Models = append(cfg.Models, config.Model{Name: kind + "-" + mode, Routes: []config.Route{{Provider: kind, Model: mode}}})
		}
	}
	e := start(t, cfg)
	n := 0
	for _, kind := range []string{"openai", "anthropic", "gemini"} {
		for _, mode := range []string{"event", "status"} {
			for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
				model := kind + "-" + mode
				t.Run(model+path, func(t *testing.T) {
					body := chatBody(model, true, "")
					if path == "/v1/messages" {
						body = `{"model":"` + model + `","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
					}
					resp := do(t, "POST", e.url+path, devKey, body)
					b, _ := io.ReadAll(resp.Body)
					n++
					got := string(b)
					for _, leak := range leaks {
						if strings.Contains(got, leak) {
							t.Errorf("the client read %q in %s", leak, got)
						}
					}
					// A translated error event of a 5xx is summarised ("the
					// upstream failed (500)"); the rest carries the words.
					if (kind == "openai" || mode == "status") && !strings.Contains(got, "messages[0].content") {
						t.Errorf("got %s, want the upstream's message with its field path", got)
					}
					if model == "openai-event" && path == "/v1/chat/completions" && !strings.Contains(got, `"type":"server_error","code":"overloaded"`) {
						t.Errorf("got %s, want the error event's type and code kept", got)
					}
					wantStatus := http.StatusOK
					if mode == "status" {
						wantStatus = http.StatusBadRequest
					}
					if resp.StatusCode != wantStatus {
						t.Errorf("got status %d, want %d", resp.StatusCode, wantStatus)
					}
				})
			}
		}
	}
	e.waitEntries(t, n)
}
