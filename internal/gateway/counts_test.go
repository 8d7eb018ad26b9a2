package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// badCounts are usage counts that are not token counts (api.Count), by the
// upstream model that reports them: c0 is a good count, the control.
var badCounts = []string{`7`, `-1`, `"12"`, `1e30`, `1099511627776`, `1.5`}

// countsUpstream is one upstream of the three dialects whose usage reports
// the count of the model asked for (c0…c5) as every billed count: OpenAI's
// chat completions and embeddings, Anthropic's messages, Gemini's
// generateContent, each streamed and not. Every answer has the text "hi".
func countsUpstream(t *testing.T) string {
	count := func(model string) string {
		i, err := strconv.Atoi(strings.TrimPrefix(model, "c"))
		if err != nil || i < 0 || i >= len(badCounts) {
			t.Errorf("counts upstream: model %q", model)
			return "0"
		}
		return badCounts[i]
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		events := func(data ...string) {
			sse.SetHeaders(w.Header())
			for _, d := range data {
				io.WriteString(w, "data: "+d+"\n\n")
			}
		}
		answer := func(s string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, s)
		}
		switch p := r.URL.Path; {
		case p == "/v1/chat/completions":
			n := count(req.Model)
			u := fmt.Sprintf(`{"prompt_tokens":%s,"completion_tokens":%s,"total_tokens":%s}`, n, n, n)
			if !req.Stream {
				answer(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + u + `}`)
				return
			}
			events(chunkHi, chunkStop, `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":`+u+`}`, "[DONE]")
		case p == "/v1/embeddings":
			n := count(req.Model)
			answer(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,0]}],"model":"m","usage":{"prompt_tokens":` + n + `,"total_tokens":` + n + `}}`)
		case p == "/v1/messages":
			n := count(req.Model)
			u := `{"input_tokens":` + n + `,"output_tokens":` + n + `}`
			if !req.Stream {
				answer(`{"type":"message","id":"msg_1","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + u + `}`)
				return
			}
			events(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":`+u+`}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":`+n+`}}`,
				`{"type":"message_stop"}`)
		case strings.HasPrefix(p, "/v1beta/models/"):
			model, method, _ := strings.Cut(strings.TrimPrefix(p, "/v1beta/models/"), ":")
			n := count(model)
			ev := `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":` + n + `,"candidatesTokenCount":` + n + `}}`
			if method == "generateContent" {
				answer(ev)
				return
			}
			events(ev)
		default:
			t.Errorf("counts upstream: unexpected %s %s", r.Method, p)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBadUsageCounts: an upstream of each dialect that reports a count
// that is not a token count (negative, a string, 1e30, 2^40, a fraction),
// streamed and not, and for embeddings: the request is billed as one
// without usage (token_source estimated: the prompt estimated, the text
// counted), never as 0 tokens from "usage" nor as 2^40 tokens; a good
// count is billed as reported.
func TestBadUsageCounts(t *testing.T) {
	url := countsUpstream(t)
	cfg := baseConfig()
	cfg.Timeouts.NonStream = config.Duration(5e9)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "oai", Kind: "openai", BaseURL: url + "/v1"},
		config.Provider{Name: "ant", Kind: "anthropic", BaseURL: url},
		config.Provider{Name: "gem", Kind: "gemini", BaseURL: url + "/v1beta"})
	price := config.Price{Input: 1, Output: 2}
	for _, p := range []string{"oai", "ant", "gem"} {
		for i := range badCounts {
			cfg.Models = append(cfg.Models, config.Model{Name: fmt.Sprintf("%s-c%d", p, i), Routes: []config.Route{{Provider: p, Model: fmt.Sprintf("c%d", i)}}, Price: price})
		}
	}
	e := start(t, cfg)
	n := 0
	for _, p := range []string{"oai", "ant", "gem"} {
		for i, count := range badCounts {
			for _, kind := range []string{"stream", "json", "embeddings"} {
				if kind == "embeddings" && p != "oai" {
					continue
				}
				model := fmt.Sprintf("%s-c%d", p, i)
				t.Run(model+"/"+kind+"/"+count, func(t *testing.T) {
					path, body := "/v1/chat/completions", chatBody(model, kind == "stream", "")
					if kind == "embeddings" {
						path, body = "/v1/embeddings", `{"model":"`+model+`","input":"a sentence to embed"}`
					}
					resp := do(t, "POST", e.url+path, devKey, body)
					b, _ := io.ReadAll(resp.Body)
					n++
					en := e.waitEntries(t, n)[n-1]
					if resp.StatusCode != 200 || kind != "embeddings" && !strings.Contains(string(b), "hi") {
						t.Fatalf("got %d %s, want 200 with the answer", resp.StatusCode, b)
					}
					if en.Outcome != usage.OutcomeOK {
						t.Errorf("got outcome %q, want ok", en.Outcome)
					}
					if i == 0 {
						want := 7 // the good count, as reported
						if kind == "embeddings" {
							if en.InputTokens != want || en.OutputTokens != 0 || en.TokenSource != usage.SourceUsage {
								t.Errorf("got %d in, %d out from %q, want %d, 0 from usage", en.InputTokens, en.OutputTokens, en.TokenSource, want)
							}
							return
						}
						if en.InputTokens != want || en.OutputTokens != want || en.TokenSource != usage.SourceUsage || en.CostUSD <= 0 {
							t.Errorf("got %d in, %d out from %q, $%v; want %d each from usage", en.InputTokens, en.OutputTokens, en.TokenSource, en.CostUSD, want)
						}
						return
					}
					// Estimated: the prompt from the request (a few tokens),
					// the answer's one chunk ("hi").
					wantOut := 1
					if kind == "embeddings" {
						wantOut = 0
					}
					if en.TokenSource != usage.SourceEstimated || en.InputTokens <= 0 || en.InputTokens > 100 || en.OutputTokens != wantOut || en.CostUSD <= 0 || en.CostUSD > 1e-3 {
						t.Errorf("count %s: got %d in, %d out from %q, $%v; want the estimate (a few in, %d out, estimated, a small cost > 0)",
							count, en.InputTokens, en.OutputTokens, en.TokenSource, en.CostUSD, wantOut)
					}
				})
			}
		}
	}
}

// TestTokenSourceNone: every record has a documented token_source; one
// with nothing billed (refused before any upstream call, or by its only
// upstream with an error status) says none, with no tokens and no cost.
func TestTokenSourceNone(t *testing.T) {
	e := start(t, baseConfig())
	for _, r := range []struct {
		name, key, body string
		header          []string
		status          int
	}{
		{"wrong key", "sk-wrong", chatBody("m-sim", true, ""), nil, 401},
		{"unknown model", devKey, chatBody("nope", true, ""), nil, 404},
		{"not JSON", devKey, "{", nil, 400},
		{"upstream 503", devKey, chatBody("m-sim", true, ""), []string{"X-Sim-Fail-Status", "503"}, 503},
	} {
		resp := do(t, "POST", e.url+"/v1/chat/completions", r.key, r.body, r.header...)
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != r.status {
			t.Errorf("%s: got %d, want %d", r.name, resp.StatusCode, r.status)
		}
	}
	for _, en := range e.waitEntries(t, 4) {
		if en.TokenSource != usage.SourceNone || en.InputTokens != 0 || en.OutputTokens != 0 || en.CostUSD != 0 {
			t.Errorf("entry %+v: want token_source none, no tokens, no cost", en)
		}
	}
}
