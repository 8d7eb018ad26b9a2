package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
)

// TestGeminiUntranslatableFallsBack: a request the gemini adapter cannot
// express but an OpenAI upstream can (n: 2, an audio part, a system-only
// prompt) never reaches Gemini and is served by the model's next route, an
// OpenAI one, as the anthropic adapter's untranslatable requests are;
// alone, the Gemini route answers 400 unsupported_by_route naming the
// field. Real HTTP: a Gemini upstream that counts what it gets, an OpenAI
// upstream that streams an answer.
func TestGeminiUntranslatableFallsBack(t *testing.T) {
	var geminiCalls atomic.Int32
	gem := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		geminiCalls.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"from gemini\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]}\n\n")
	}))
	t.Cleanup(gem.Close)
	oai := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"role":"assistant","content":"from openai"},"finish_reason":null}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(oai.Close)
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "gem", Kind: "gemini", BaseURL: gem.URL},
		config.Provider{Name: "oai", Kind: "openai", BaseURL: oai.URL + "/v1"})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "gem-first", Routes: []config.Route{{Provider: "gem", Model: "gemini-2.5-flash"}, {Provider: "oai", Model: "gpt"}}},
		config.Model{Name: "gem-only", Routes: []config.Route{{Provider: "gem", Model: "gemini-2.5-flash"}}})
	e := start(t, cfg)

	bodies := map[string]string{
		"n":                      `{"model":"%s","stream":true,"n":2,"messages":[{"role":"user","content":"hi"}]}`,
		"messages[0].content[0]": `{"model":"%s","stream":true,"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`,
		"no user or assistant":   `{"model":"%s","stream":true,"messages":[{"role":"system","content":"say hi"}]}`,
	}
	entries := 0
	for field, body := range bodies {
		t.Run(field, func(t *testing.T) {
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, strings.Replace(body, "%s", "gem-first", 1))
			events, done := readStream(t, resp)
			if resp.StatusCode != 200 || !done || resp.Header.Get(gateway.HeaderRoute) != "oai/gpt" || !strings.Contains(strings.Join(events, ""), "from openai") {
				t.Errorf("gemini first, openai second: got %d via %q, done %v, %q; want the OpenAI route's stream", resp.StatusCode, resp.Header.Get(gateway.HeaderRoute), done, events)
			}
			resp = do(t, "POST", e.url+"/v1/chat/completions", devKey, strings.Replace(body, "%s", "gem-only", 1))
			er := readError(t, resp)
			if resp.StatusCode != 400 || er.Error.Code == nil || *er.Error.Code != "unsupported_by_route" || !strings.Contains(er.Error.Message, field) {
				t.Errorf("gemini alone: got %d %+v; want 400 unsupported_by_route naming %s", resp.StatusCode, er.Error, field)
			}
			entries += 2
		})
	}
	if n := geminiCalls.Load(); n != 0 {
		t.Errorf("the Gemini upstream got %d requests, want none", n)
	}
	if n := sumSeries(scrape(t, e.url), "streamgate_fallbacks_total", `reason="untranslatable"`); n != float64(len(bodies)) {
		t.Errorf("got %v untranslatable fallbacks, want %d", n, len(bodies))
	}
	for _, en := range e.waitEntries(t, entries) {
		if en.Outcome == usage.OutcomeOK && en.Route != "oai/gpt" {
			t.Errorf("entry %+v: want ok entries served by oai/gpt", en)
		}
	}
}

// TestGeminiToolCallFailureFallsBack: a Gemini answer that ends
// MALFORMED_FUNCTION_CALL (the model's call was invalid, no answer) is not
// relayed as a "stop": the model's next route serves the request; alone,
// the client gets a 502 whose code names it.
func TestGeminiToolCallFailureFallsBack(t *testing.T) {
	gem := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"candidates\":[{\"content\":{\"parts\":[],\"role\":\"model\"},\"finishReason\":\"MALFORMED_FUNCTION_CALL\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":4,\"totalTokenCount\":4}}\n\n")
	}))
	t.Cleanup(gem.Close)
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "gem", Kind: "gemini", BaseURL: gem.URL})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "gem-first", Routes: []config.Route{{Provider: "gem", Model: "gemini-2.5-flash"}, {Provider: "sim", Model: "sim-fast"}}},
		config.Model{Name: "gem-only", Routes: []config.Route{{Provider: "gem", Model: "gemini-2.5-flash"}}})
	e := start(t, cfg)
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("gem-first", true, ""))
	_, done := readStream(t, resp)
	if resp.StatusCode != 200 || !done || resp.Header.Get(gateway.HeaderRoute) != "sim/sim-fast" {
		t.Errorf("gemini first: got %d via %q, done %v; want the next route's stream", resp.StatusCode, resp.Header.Get(gateway.HeaderRoute), done)
	}
	resp = do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("gem-only", true, ""))
	er := readError(t, resp)
	if resp.StatusCode != http.StatusBadGateway || er.Error.Code == nil || *er.Error.Code != "malformed_function_call" {
		t.Errorf("gemini alone: got %d %+v; want 502 malformed_function_call", resp.StatusCode, er.Error)
	}
	e.waitEntries(t, 2)
}
