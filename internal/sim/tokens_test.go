package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// contentEvents returns the text of each content event of a stream in a
// dialect: OpenAI content deltas, Anthropic text_delta events, Gemini text
// parts that are not empty.
func contentEvents(t *testing.T, dialect string, evs []namedEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		var v struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
		}
		if ev.data == "[DONE]" {
			continue
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Fatalf("%s event %q: %v", dialect, ev.data, err)
		}
		switch {
		case dialect == "openai" && len(v.Choices) > 0 && v.Choices[0].Delta.Content != "":
			out = append(out, v.Choices[0].Delta.Content)
		case dialect == "anthropic" && v.Delta.Type == "text_delta":
			out = append(out, v.Delta.Text)
		case dialect == "gemini" && len(v.Candidates) > 0 && v.Candidates[0].Content.Parts[0].Text != "":
			out = append(out, v.Candidates[0].Content.Parts[0].Text)
		}
	}
	return out
}

// TestTokensPerChunkDefaults: a profile that sets no tokens per chunk
// sends what the provider sends per event (OpenAI 1 token, Anthropic 4,
// Gemini 16); one that sets it keeps it in every dialect.
func TestTokensPerChunkDefaults(t *testing.T) {
	unset := Profile{Name: "unset", Tokens: 40, Lang: "en"}
	one := Profile{Name: "one", Tokens: 40, TokensPerChunk: 1, Lang: "en"}
	_, ts := newTestServer(t, Options{Profile: unset, Profiles: []Profile{one}})
	for _, tt := range []struct {
		dialect, path, body string
	}{
		{"openai", "/v1/chat/completions", `{"model":"%s","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic", anthropicPath, `{"model":"%s","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"gemini", "/v1beta/models/%s:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"hi"}]}]}`},
	} {
		texts := map[string]string{}
		for _, model := range []string{"unset", "one"} {
			path, body := tt.path, tt.body
			if strings.Contains(path, "%s") {
				path = strings.Replace(path, "%s", model, 1)
			} else {
				body = strings.Replace(body, "%s", model, 1)
			}
			evs, err := readAll(t, postJSON(t, ts, path, body, nil))
			if err != nil {
				t.Fatal(err)
			}
			per := map[string]int{"openai": 1, "anthropic": DefaultAnthropicTokensPerChunk, "gemini": DefaultGeminiTokensPerChunk}[tt.dialect]
			if model == "one" {
				per = 1
			}
			got := contentEvents(t, tt.dialect, evs)
			if want := (40 + per - 1) / per; len(got) != want {
				t.Errorf("%s %s: got %d content events, want %d of %d tokens", tt.dialect, model, len(got), want, per)
			}
			texts[model] = strings.Join(got, "")
		}
		if texts["unset"] != texts["one"] || texts["one"] == "" {
			t.Errorf("%s: text in chunks of the default %q, in chunks of 1 %q, want the same", tt.dialect, texts["unset"], texts["one"])
		}
	}
}

// TestTokensPerChunkDefaultPace: with the dialect's default, a chunk of n
// tokens comes n gaps after the previous one, so the profile's token rate
// holds; a profile's own setting keeps one gap per chunk.
func TestTokensPerChunkDefaultPace(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		name string
		per  int
		want []time.Duration
	}{
		{"default 4", 0, []time.Duration{100 * ms, 140 * ms, 140 * ms}},
		{"set 4", 4, []time.Duration{100 * ms, 110 * ms, 110 * ms}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := Profile{Name: "p", TTFT: 100 * ms, ITL: 10 * ms, Tokens: 8, TokensPerChunk: tt.per}
				s := New(Options{Profile: p})
				w := &timedWriter{h: http.Header{}, start: time.Now()}
				body := `{"model":"x","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hello there"}]}`
				s.ServeHTTP(w, httptest.NewRequest("POST", anthropicPath, strings.NewReader(body)))
				if len(w.at) != len(tt.want) {
					t.Fatalf("flushes: got %d %q, want %d", len(w.at), w.data, len(tt.want))
				}
				for i := range w.at {
					if w.at[i] != tt.want[i] {
						t.Errorf("flush %d: got %v, want %v", i, w.at[i], tt.want[i])
					}
				}
			})
		})
	}
}
