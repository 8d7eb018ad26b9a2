package gateway_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// Usage with prompt cache reads and writes, in the shapes the providers
// send (recorded): OpenAI's prompt_tokens_details.cached_tokens (a part of
// prompt_tokens), Anthropic's cache_read_input_tokens and
// cache_creation_input_tokens (apart from input_tokens; message_start
// carries them, newer API versions repeat them in message_delta), Gemini's
// cachedContentTokenCount (a part of promptTokenCount).
const (
	openAICachedUsage = `{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,` +
		`"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`
	anthropicCachedUsage = `{"input_tokens":6,"cache_creation_input_tokens":1000,"cache_read_input_tokens":45000,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":0},"output_tokens":500,"service_tier":"standard"}`
	anthropicStartUsage = `{"input_tokens":6,"cache_creation_input_tokens":1000,"cache_read_input_tokens":45000,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}`
	geminiCachedUsage = `{"promptTokenCount":12000,"candidatesTokenCount":200,"totalTokenCount":12250,"cachedContentTokenCount":10000,` +
		`"thoughtsTokenCount":50,"promptTokensDetails":[{"modality":"TEXT","tokenCount":12000}],"cacheTokensDetails":[{"modality":"TEXT","tokenCount":10000}]}`
)

// cacheUpstream answers the three dialects, streamed and not, with the
// cached usage above. Anthropic's model "claude-start" reports the cache
// counts in message_start only, "claude-delta" in message_delta too.
func cacheUpstream(t *testing.T) string {
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
			if !req.Stream {
				answer(`{"id":"chatcmpl-1","object":"chat.completion","created":1764441600,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":` + openAICachedUsage + `,"service_tier":"default","system_fingerprint":"fp_1"}`)
				return
			}
			events(chunkHi, chunkStop, `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":`+openAICachedUsage+`}`, "[DONE]")
		case p == "/v1/messages":
			if !req.Stream {
				answer(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":` + anthropicCachedUsage + `}`)
				return
			}
			final := `{"output_tokens":500}`
			if req.Model == "claude-delta" {
				final = `{"input_tokens":6,"cache_creation_input_tokens":1000,"cache_read_input_tokens":45000,"output_tokens":500}`
			}
			events(`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":`+anthropicStartUsage+`}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":`+final+`}`,
				`{"type":"message_stop"}`)
		case strings.HasPrefix(p, "/v1beta/models/"):
			_, method, _ := strings.Cut(strings.TrimPrefix(p, "/v1beta/models/"), ":")
			last := `{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":` + geminiCachedUsage + `,"modelVersion":"gemini-2.5-flash","responseId":"r1"}`
			if method == "generateContent" {
				answer(`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP","index":0}],"usageMetadata":` + geminiCachedUsage + `,"modelVersion":"gemini-2.5-flash","responseId":"r1"}`)
				return
			}
			// Gemini's usageMetadata is cumulative: the last one counts.
			events(`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"index":0}],"usageMetadata":{"promptTokenCount":12000,"candidatesTokenCount":1,"totalTokenCount":12001,"cachedContentTokenCount":10000},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
				last)
		default:
			t.Errorf("cache upstream: unexpected %s %s", r.Method, p)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCacheTokensBilled: an upstream of each provider kind reporting prompt
// cache reads (and Anthropic's writes), streamed and not, over real HTTP:
// the ledger row has every prompt token as input_tokens and the cache
// reads and writes in their own columns, and costs fresh input at the
// input price, cache reads at cached_input, writes at cache_write, output
// (reasoning included) at the output price, to the micro-dollar; /metrics
// counts the kinds cache_read and cache_write and the same cost, and what
// the cache saved (streamgate_cache_savings_usd_total) or, its writes
// costing more than its reads saved, lost (streamgate_cache_loss_usd_total).
func TestCacheTokensBilled(t *testing.T) {
	url := cacheUpstream(t)
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Timeouts.NonStream = config.Duration(5e9)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "oai", Kind: "openai", BaseURL: url + "/v1"},
		config.Provider{Name: "ant", Kind: "anthropic", BaseURL: url},
		config.Provider{Name: "gem", Kind: "gemini", BaseURL: url + "/v1beta"})
	usd := func(v float64) *float64 { return &v }
	gpt := config.Price{Input: 2, Output: 8, CachedInput: usd(0.5)}
	sonnet := config.Price{Input: 3, Output: 15, CachedInput: usd(0.3), CacheWrite: usd(3.75)}
	flash := config.Price{Input: 0.3, Output: 2.5, CachedInput: usd(0.03)}
	cfg.Models = append(cfg.Models,
		config.Model{Name: "gpt", Routes: []config.Route{{Provider: "oai", Model: "gpt-4.1"}}, Price: gpt},
		config.Model{Name: "claude-start", Routes: []config.Route{{Provider: "ant", Model: "claude-start"}}, Price: sonnet},
		config.Model{Name: "claude-delta", Routes: []config.Route{{Provider: "ant", Model: "claude-delta"}}, Price: sonnet},
		config.Model{Name: "gemini", Routes: []config.Route{{Provider: "gem", Model: "gemini-2.5-flash"}}, Price: flash},
		// No cache prices: cache reads and writes cost the input price.
		config.Model{Name: "claude-unpriced", Routes: []config.Route{{Provider: "ant", Model: "claude-delta"}}, Price: config.Price{Input: 3, Output: 15}},
		// Cache reads at the input price, writes dearer: the cache loses.
		config.Model{Name: "claude-writes", Routes: []config.Route{{Provider: "ant", Model: "claude-delta"}},
			Price: config.Price{Input: 3, Output: 15, CachedInput: usd(3), CacheWrite: usd(3.75)}})
	e := start(t, cfg)

	type tokens struct{ in, read, write, out int }
	tests := []struct {
		model string
		want  tokens
		micro int64 // the cost in millionths of a USD
		saved int64 // what the cache saved, in millionths of a USD
	}{
		// 86 fresh × $2 + 1,920 read × $0.5 + 300 out × $8, per 1M; the
		// reads saved 1,920 × $1.5.
		{"gpt", tokens{2006, 1920, 0, 300}, 172 + 960 + 2400, 2880},
		// 6 fresh × $3 + 45,000 read × $0.3 + 1,000 written × $3.75 + 500 out × $15;
		// saved 45,000 × $2.7 − 1,000 × $0.75.
		{"claude-start", tokens{46006, 45000, 1000, 500}, 18 + 13500 + 3750 + 7500, 121500 - 750},
		{"claude-delta", tokens{46006, 45000, 1000, 500}, 18 + 13500 + 3750 + 7500, 121500 - 750},
		// 2,000 fresh × $0.3 + 10,000 read × $0.03 + (200 + 50 thoughts) out × $2.5;
		// saved 10,000 × $0.27.
		{"gemini", tokens{12000, 10000, 0, 250}, 600 + 300 + 625, 2700},
		// Every prompt token at $3: 46,006 × 3 + 500 × 15; nothing saved.
		{"claude-unpriced", tokens{46006, 45000, 1000, 500}, 138018 + 7500, 0},
		// 6 × 3 + 45,000 × 3 + 1,000 × 3.75 + 500 × 15; lost 1,000 × $0.75.
		{"claude-writes", tokens{46006, 45000, 1000, 500}, 18 + 135000 + 3750 + 7500, -750},
	}
	n := 0
	for _, tt := range tests {
		for _, stream := range []bool{true, false} {
			name := tt.model + map[bool]string{true: "/stream", false: "/json"}[stream]
			t.Run(name, func(t *testing.T) {
				resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody(tt.model, stream, ""))
				b, _ := io.ReadAll(resp.Body)
				n++
				en := e.waitEntries(t, n)[n-1]
				if resp.StatusCode != 200 || !strings.Contains(string(b), "hi") {
					t.Fatalf("got %d %s, want 200 with the answer", resp.StatusCode, b)
				}
				got := tokens{en.InputTokens, en.CacheReadTokens, en.CacheWriteTokens, en.OutputTokens}
				if got != tt.want || en.TokenSource != usage.SourceUsage {
					t.Errorf("got tokens (input, cache read, cache write, output) %+v from %q, want %+v from usage", got, en.TokenSource, tt.want)
				}
				if micro := int64(math.Round(en.CostUSD * 1e6)); micro != tt.micro {
					t.Errorf("got cost $%.9f (%d micro-dollars), want %d micro-dollars", en.CostUSD, micro, tt.micro)
				}
			})
		}
	}

	// An Anthropic client of an Anthropic upstream: the same bill, and
	// the client sees the cache counts apart from input_tokens.
	t.Run("messages client", func(t *testing.T) {
		resp := do(t, "POST", e.url+"/v1/messages", devKey, `{"model":"claude-delta","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		n++
		en := e.waitEntries(t, n)[n-1]
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"cache_read_input_tokens":45000`) {
			t.Errorf("got %d %s, want 200 with the cache reads", resp.StatusCode, b)
		}
		if en.InputTokens != 46006 || en.CacheReadTokens != 45000 || en.CacheWriteTokens != 1000 || int64(math.Round(en.CostUSD*1e6)) != 24768 {
			t.Errorf("got %d in (%d read, %d written), $%.9f; want 46006 (45000, 1000), $0.024768", en.InputTokens, en.CacheReadTokens, en.CacheWriteTokens, en.CostUSD)
		}
	})

	fams := scrapeFamilies(t, e.url)
	for _, tt := range tests {
		runs := 2.0
		if tt.model == "claude-delta" {
			runs = 3 // and the messages client
		}
		for kind, per := range map[string]int{"input": tt.want.in, "cache_read": tt.want.read, "cache_write": tt.want.write, "output": tt.want.out} {
			got, ok := seriesSum(fams, "streamgate_tokens_total", map[string]string{"model": tt.model, "kind": kind})
			if want := runs * float64(per); !ok || got != want {
				t.Errorf("streamgate_tokens_total{model=%q,kind=%q}: got %v (%v), want %v", tt.model, kind, got, ok, want)
			}
		}
		got, _ := seriesSum(fams, "streamgate_cost_usd_total", map[string]string{"model": tt.model})
		if want := runs * float64(tt.micro) / 1e6; math.Abs(got-want) > 1e-9 {
			t.Errorf("streamgate_cost_usd_total{model=%q}: got %v, want %v", tt.model, got, want)
		}
		saved, _ := seriesSum(fams, "streamgate_cache_savings_usd_total", map[string]string{"model": tt.model})
		lost, _ := seriesSum(fams, "streamgate_cache_loss_usd_total", map[string]string{"model": tt.model})
		if want := runs * float64(max(tt.saved, 0)) / 1e6; math.Abs(saved-want) > 1e-9 {
			t.Errorf("streamgate_cache_savings_usd_total{model=%q}: got %v, want %v", tt.model, saved, want)
		}
		if want := runs * float64(max(-tt.saved, 0)) / 1e6; math.Abs(lost-want) > 1e-9 {
			t.Errorf("streamgate_cache_loss_usd_total{model=%q}: got %v, want %v", tt.model, lost, want)
		}
	}
}
