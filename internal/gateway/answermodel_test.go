package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
)

// TestAnswerModelIsTheUpstreams: the model field of every answer, on every
// endpoint, stream and not, is the name the upstream gave the model that
// answered ("gpt-x-2026-01-01", a dated snapshot as OpenAI answers for an
// alias), never the gateway's alias the client asked for ("alias").
func TestAnswerModelIsTheUpstreams(t *testing.T) {
	const served = "gpt-x-2026-01-01"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"`+served+`","usage":{"prompt_tokens":1,"total_tokens":1}}`)
			return
		}
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, d := range []string{
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"` + served + `","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"` + served + `","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"` + served + `","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
				`[DONE]`,
			} {
				io.WriteString(w, "data: "+d+"\n\n")
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"`+served+`","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	defer upstream.Close()
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Kind: "openai", BaseURL: upstream.URL + "/v1"})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "alias", Routes: []config.Route{{Provider: "up", Model: "gpt-x"}}},
		config.Model{Name: "embed-alias", Routes: []config.Route{{Provider: "up", Model: "emb-x"}}})
	e := start(t, cfg)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, path, body string
		stream           bool
	}{
		{"chat", "/v1/chat/completions", `{"model":"alias",` + msgs + `}`, false},
		{"chat stream", "/v1/chat/completions", `{"model":"alias","stream":true,` + msgs + `}`, true},
		{"messages", "/v1/messages", `{"model":"alias","max_tokens":10,` + msgs + `}`, false},
		{"messages stream", "/v1/messages", `{"model":"alias","max_tokens":10,"stream":true,` + msgs + `}`, true},
		{"responses", "/v1/responses", `{"model":"alias","input":"hi","store":false}`, false},
		{"responses stream", "/v1/responses", `{"model":"alias","input":"hi","store":false,"stream":true}`, true},
		{"embeddings", "/v1/embeddings", `{"model":"embed-alias","input":"hi"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, "POST", e.url+tc.path, devKey, tc.body)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %s, want 200", resp.StatusCode, b)
			}
			var docs []string
			if tc.stream {
				for line := range strings.Lines(string(b)) {
					if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && strings.HasPrefix(d, "{") {
						docs = append(docs, d)
					}
				}
			} else {
				docs = []string{string(b)}
			}
			seen := 0
			for _, d := range docs {
				for _, m := range models(t, d) {
					seen++
					if m != served {
						t.Errorf("got model %q in %s, want %q", m, d, served)
					}
				}
			}
			if seen == 0 {
				t.Errorf("no model field in %s", b)
			}
		})
	}
}

// models returns every "model" member of the JSON document d, at any depth.
func models(t *testing.T, d string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(d), &v); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && k == "model" {
					out = append(out, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}
