package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
)

// TestOneReadingOfEachField: a body that names a field the gateway enforces
// twice, or under another case (as encoding/json would read it and the
// upstream would not), is refused with a 400 whose message and param name
// the field, before any upstream request; the reported body first
// (max_tokens 100,000 for the upstream, 5 for encoding/json, on a model
// with max_output_tokens), on each endpoint. The same bodies written once
// reach the upstream, max_tokens clamped.
func TestOneReadingOfEachField(t *testing.T) {
	var (
		mu     sync.Mutex
		hits   int
		bodies []string
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits++
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"up-embed","usage":{"prompt_tokens":1,"total_tokens":1}}`)
			return
		}
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	defer upstream.Close()
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Kind: "openai", BaseURL: upstream.URL + "/v1"})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "m", MaxOutputTokens: 1000, Routes: []config.Route{{Provider: "up", Model: "up-model"}}},
		config.Model{Name: "e", Routes: []config.Route{{Provider: "up", Model: "up-embed"}}})
	e := start(t, cfg)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	chat, messages, embeddings := e.url+"/v1/chat/completions", e.url+"/v1/messages", e.url+"/v1/embeddings"

	refused := []struct {
		name, url, body, param string
	}{
		{"the reported body", chat, `{"model":"m",` + msgs + `,"max_tokens":100000,"Max_Tokens":5}`, "max_tokens"},
		{"max_completion_tokens twice", chat, `{"model":"m",` + msgs + `,"max_completion_tokens":100000,"max_completion_tokens":5}`, "max_completion_tokens"},
		{"the Kelvin sign", chat, `{"model":"m",` + msgs + `,"max_tokens":100000,"max_to\u212aens":5}`, "max_tokens"},
		{"model twice", chat, `{"model":"m",` + msgs + `,"model":"m-other"}`, "model"},
		{"stream under the long s", chat, `{"model":"m",` + msgs + `,"\u017ftream":true}`, "stream"},
		{"include_usage in capitals", chat, `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":true,"INCLUDE_USAGE":false}}`, "stream_options.include_usage"},
		{"a role variant", chat, `{"model":"m","messages":[{"role":"user","content":"hi","Role":"system"}]}`, "messages[0].role"},
		{"messages twice", chat, `{"model":"m",` + msgs + `,` + msgs + `}`, "messages"},
		{"tools in capitals", chat, `{"model":"m",` + msgs + `,"Tools":[]}`, "tools"},
		{"anthropic: the reported body", messages, `{"model":"m",` + msgs + `,"max_tokens":100000,"Max_Tokens":5}`, "max_tokens"},
		{"anthropic: system twice", messages, `{"model":"m",` + msgs + `,"max_tokens":5,"system":"a","system":"b"}`, "system"},
		{"anthropic: thinking budget", messages, `{"model":"m",` + msgs + `,"max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":1024,"Budget_Tokens":4000}}`, "thinking.budget_tokens"},
		{"embeddings: model in capitals", embeddings, `{"model":"e","input":"hi","Model":"m"}`, "model"},
		{"embeddings: input twice", embeddings, `{"model":"e","input":"hi","input":""}`, "input"},
	}
	for _, tc := range refused {
		resp := do(t, "POST", tc.url, devKey, tc.body)
		b, _ := io.ReadAll(resp.Body)
		var got struct {
			Type  string `json:"type"`
			Error struct {
				Message, Type, Param string
			}
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: got body %q, want an error object", tc.name, b)
		}
		wantParam := tc.param
		if tc.url == messages {
			wantParam = "" // Anthropic's error object has no param
		}
		if resp.StatusCode != http.StatusBadRequest || got.Error.Type != "invalid_request_error" ||
			got.Error.Param != wantParam || !strings.Contains(got.Error.Message, tc.param) {
			t.Errorf("%s: got %d %s; want 400 invalid_request_error naming %s (param %q)", tc.name, resp.StatusCode, b, tc.param, wantParam)
		}
	}
	mu.Lock()
	if hits != 0 {
		t.Errorf("got %d upstream requests for refused bodies, want 0: %q", hits, bodies)
	}
	mu.Unlock()
	resp := do(t, "POST", messages+"/count_tokens", devKey, `{"model":"m",`+msgs+`,"Model":"m-other"}`)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "model") {
		t.Errorf("count_tokens with a Model: got %d %s, want 400 naming model", resp.StatusCode, b)
	}
	entries := e.waitEntries(t, len(refused)) // count_tokens records none
	for _, en := range entries {
		if en.Status != http.StatusBadRequest {
			t.Errorf("got entry %+v, want status 400", en)
		}
	}

	// Written once, the same requests are served: max_tokens clamped to the
	// model's max_output_tokens; names the gateway does not enforce may
	// repeat (the upstream's to judge).
	for _, tc := range []struct{ url, body string }{
		{chat, `{"model":"m",` + msgs + `,"max_tokens":100000,"metadata":{"a":"1","a":"2"}}`},
		{messages, `{"model":"m",` + msgs + `,"max_tokens":100000}`},
		{embeddings, `{"model":"e","input":"hi"}`},
	} {
		if resp := do(t, "POST", tc.url, devKey, tc.body); resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("%s %s: got %d %s, want 200", tc.url, tc.body, resp.StatusCode, b)
		}
	}
	e.waitEntries(t, len(refused)+3)
	mu.Lock()
	defer mu.Unlock()
	if hits != 3 || !strings.Contains(bodies[0], `"max_tokens":1000,`) || !strings.Contains(bodies[1], `"max_tokens":1000`) {
		t.Errorf("got %d upstream requests %q; want 3, the chat ones with max_tokens 1000", hits, bodies)
	}
}
