package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// prose is an answer whose token count is known: 86 tokens in OpenAI's
// cl100k_base and o200k_base (js-tiktoken 1.0.21). fit.Text estimates such
// text at 0.7-1.4 times its count: 61 to 120 tokens.
const (
	prose = "Chat UIs die of latency tails: a 400 ms chunk gap looks like a frozen answer. The gateway must never be the cause, " +
		"and it must show where the tail comes from. Engineers compare models, providers and settings with numbers, not marketing " +
		"tables. When a stream is cut in the middle of an answer, the gateway can ask another route to continue it from where it " +
		"stopped, so the user never notices the failure."
	proseTokens = 86
)

// proseOK reports whether n is an estimate of prose within fit.Text's bounds.
func proseOK(n int) bool { return n >= proseTokens*7/10 && n <= proseTokens*14/10 }

// pieces cuts prose into 40-byte deltas: 11 of them, so a count of
// chunks (11) is far from the text's tokens (86).
func pieces() []string {
	var out []string
	for s := prose; s != ""; {
		n := min(40, len(s))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// scriptedUpstream is an upstream of the three dialects whose answers the
// tests script by model name; it records the bodies it got. Each answer
// is written whole, and a "cut" ends the body without the stream's end.
type scriptedUpstream struct {
	url  string
	mu   sync.Mutex
	got  map[string][][]byte             // by model
	cont func(t *testing.T, body []byte) // checks a continuation request (model "go-on")
}

func (u *scriptedUpstream) bodies(model string) [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.got[model]...)
}

func newScriptedUpstream(t *testing.T) *scriptedUpstream {
	u := &scriptedUpstream{got: map[string][][]byte{}}
	chunk := func(delta string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
	}
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model string `json:"model"`
		}
		json.Unmarshal(body, &req)
		model := req.Model
		if m, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/"); ok {
			model, _, _ = strings.Cut(m, ":")
		}
		u.mu.Lock()
		u.got[model] = append(u.got[model], body)
		u.mu.Unlock()
		sse.SetHeaders(w.Header())
		data := func(d string) { io.WriteString(w, "data: "+d+"\n\n") }
		event := func(typ, d string) { io.WriteString(w, "event: "+typ+"\ndata: "+d+"\n\n") }
		switch r.URL.Path + " " + model {
		case "/v1/chat/completions cut": // the prose, cut before its finish and usage
			data(chunk(`{"role":"assistant","content":""}`))
			for _, p := range pieces() {
				data(chunk(`{"content":` + str(p) + `}`))
			}
		case "/v1/chat/completions usage-each": // usage on every chunk (vLLM's continuous_usage_stats), cut
			for i, p := range pieces() {
				c := chunk(`{"content":` + str(p) + `}`)
				data(c[:len(c)-1] + fmt.Sprintf(`,"usage":{"prompt_tokens":700,"completion_tokens":%d,"total_tokens":%d}}`, 9*(i+1), 700+9*(i+1)))
			}
		case "/v1/chat/completions plain": // an answer without reasoning (o-series hide it), cut
			data(chunk(`{"role":"assistant","content":""}`))
			data(chunk(`{"content":"The answer is"}`))
		case "/v1/chat/completions whole": // the rest, with usage and its cache reads
			data(chunk(`{"role":"assistant","content":""}`))
			data(chunk(`{"content":" the end."}`))
			data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
			data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":500,"completion_tokens":20,"total_tokens":520,"prompt_tokens_details":{"cached_tokens":120}}}`)
			data("[DONE]")
		case "/v1/messages cut", "/v1/messages think-cut": // message_start's counts, (thinking,) the prose, cut
			event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":321,"cache_creation_input_tokens":50,"cache_read_input_tokens":100,"output_tokens":1}}}`)
			i := 0
			if model == "think-cut" {
				event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
				event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Latency first."}}`)
				event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2lnbmVk"}}`)
				event("content_block_stop", `{"type":"content_block_stop","index":0}`)
				i = 1
			}
			event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
			for _, p := range pieces() {
				event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, str(p)))
			}
		case "/v1/messages go-on": // a continuation: it thinks again, then goes on
			if u.cont != nil {
				u.cont(t, body)
			}
			event("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":400,"output_tokens":1}}}`)
			event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Where was I?"}}`)
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"YWdhaW4="}}`)
			event("content_block_stop", `{"type":"content_block_stop","index":0}`)
			event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
			event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" the end."}}`)
			event("content_block_stop", `{"type":"content_block_stop","index":1}`)
			event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":30}}`)
			event("message_stop", `{"type":"message_stop"}`)
		case "/v1beta/models/cut:streamGenerateContent cut", "/v1beta/models/whole:streamGenerateContent whole":
			// Cumulative usage on every event; "whole" ends with its finish.
			for i, p := range pieces() {
				finish := ""
				if model == "whole" && i == len(pieces())-1 {
					finish = `,"finishReason":"STOP"`
				}
				data(fmt.Sprintf(`{"candidates":[{"content":{"role":"model","parts":[{"text":%s}]}%s}],"usageMetadata":{"promptTokenCount":1234,"candidatesTokenCount":%d,"cachedContentTokenCount":200,"totalTokenCount":%d},"modelVersion":"up"}`,
					str(p), finish, 9*(i+1), 1234+9*(i+1)))
			}
		default:
			t.Errorf("scripted upstream: unexpected %s %s", r.URL.Path, model)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// receivedConfig: the scripted upstream as an OpenAI, an Anthropic and a
// Gemini provider (two of each kind, so that a continuation has a next
// route), and a model per case.
func receivedConfig(u *scriptedUpstream) *config.Config {
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "oai", Kind: "openai", BaseURL: u.url + "/v1"},
		config.Provider{Name: "ant", Kind: "anthropic", BaseURL: u.url},
		config.Provider{Name: "ant2", Kind: "anthropic", BaseURL: u.url},
		config.Provider{Name: "gem", Kind: "gemini", BaseURL: u.url + "/v1beta"})
	price := config.Price{Input: 1, Output: 2, CachedInput: new(0.1), CacheWrite: new(1.25)}
	model := func(name string, cont bool, routes ...config.Route) config.Model {
		return config.Model{Name: name, ContinueOnCut: cont, Routes: routes, Price: price}
	}
	cfg.Models = append(cfg.Models,
		model("oai-cut", false, config.Route{Provider: "oai", Model: "cut"}),
		model("oai-usage-each", false, config.Route{Provider: "oai", Model: "usage-each"}),
		model("oai-whole", false, config.Route{Provider: "oai", Model: "whole"}),
		model("ant-cut", false, config.Route{Provider: "ant", Model: "cut"}),
		model("gem-cut", false, config.Route{Provider: "gem", Model: "cut"}),
		model("gem-whole", false, config.Route{Provider: "gem", Model: "whole"}),
		model("ant-then-oai", true, config.Route{Provider: "ant", Model: "cut"}, config.Route{Provider: "oai", Model: "whole"}),
		model("gem-then-oai", true, config.Route{Provider: "gem", Model: "cut"}, config.Route{Provider: "oai", Model: "whole"}),
		model("think", true, config.Route{Provider: "ant", Model: "think-cut"}, config.Route{Provider: "ant2", Model: "go-on"}),
		model("plain-then-think", true, config.Route{Provider: "oai", Model: "plain"}, config.Route{Provider: "ant2", Model: "go-on"}))
	return cfg
}

// TestCutStreamBilledFromReceived: a stream cut before its usage is billed
// from the last counts its upstream reported, and only the rest is
// estimated, the output from the text the client received (11 chunks of
// an 86-token text): Anthropic's message_start input and cache counts
// (partial), Gemini's cumulative usageMetadata (usage), usage on every
// chunk (usage), none at all (estimated); through /v1/chat/completions and,
// passed through, /v1/messages.
func TestCutStreamBilledFromReceived(t *testing.T) {
	u := newScriptedUpstream(t)
	e := start(t, receivedConfig(u))
	for i, tt := range []struct {
		name, path, model string
		source            string
		in, cacheRead     int // -1: the prompt's estimate (a few tokens)
		cacheWrite        int
		out               int // -1: the prose's estimate
	}{
		{"openai, no usage", "/v1/chat/completions", "oai-cut", usage.SourceEstimated, -1, 0, 0, -1},
		{"openai, usage on every chunk", "/v1/chat/completions", "oai-usage-each", usage.SourceUsage, 700, 0, 0, 99},
		{"anthropic", "/v1/chat/completions", "ant-cut", usage.SourcePartial, 471, 100, 50, -1},
		{"anthropic passed through", "/v1/messages", "ant-cut", usage.SourcePartial, 471, 100, 50, -1},
		{"gemini", "/v1/chat/completions", "gem-cut", usage.SourceUsage, 1234, 200, 0, 99},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := chatBody(tt.model, true, "")
			header := []string{}
			key := devKey
			if tt.path == "/v1/messages" {
				body = `{"model":"` + tt.model + `","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
				header, key = []string{"X-Api-Key", devKey}, ""
			}
			resp := do(t, "POST", e.url+tt.path, key, body, header...)
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(got), "error") {
				t.Fatalf("got %d %s, want 200 and the stream's error event", resp.StatusCode, got)
			}
			en := e.waitEntries(t, i+1)[i]
			if en.TokenSource != tt.source {
				t.Errorf("got token_source %q, want %q", en.TokenSource, tt.source)
			}
			if tt.in >= 0 && en.InputTokens != tt.in || tt.in < 0 && (en.InputTokens <= 0 || en.InputTokens > 100) {
				t.Errorf("got %d input tokens, want %d (-1: the prompt's estimate)", en.InputTokens, tt.in)
			}
			if en.CacheReadTokens != tt.cacheRead || en.CacheWriteTokens != tt.cacheWrite {
				t.Errorf("got cache reads %d, writes %d; want %d, %d", en.CacheReadTokens, en.CacheWriteTokens, tt.cacheRead, tt.cacheWrite)
			}
			if tt.out >= 0 && en.OutputTokens != tt.out || tt.out < 0 && !proseOK(en.OutputTokens) {
				t.Errorf("got %d output tokens, want %d (-1: the text's estimate, 0.7-1.4 x %d)", en.OutputTokens, tt.out, proseTokens)
			}
		})
	}
}

// TestContinuedStreamBill: a stream cut on an Anthropic route and continued
// on an OpenAI one is billed with each attempt's input as its upstream
// reported it (message_start's, with its cache counts; the usage chunk's)
// and the output the client received: the cut attempt's text estimated,
// the continuation's as reported. The client's usage is their sum.
func TestContinuedStreamBill(t *testing.T) {
	u := newScriptedUpstream(t)
	e := start(t, receivedConfig(u))
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, promptBody("ant-then-oai", true, "go"))
	s := readChat(t, resp)
	if !s.done || s.text != prose+" the end." {
		t.Fatalf("got done=%v text %q, want the prose and the continuation", s.done, s.text)
	}
	en := e.waitEntries(t, 1)[0]
	if en.Continuations != 1 || en.TokenSource != usage.SourcePartial || en.InputTokens != 471+500 ||
		en.CacheReadTokens != 100+120 || en.CacheWriteTokens != 50 || !proseOK(en.OutputTokens-20) {
		t.Errorf("got %d continuations, %q, %d input tokens (%d read, %d written), %d output; want 1, partial, 971 (220, 50), the prose's estimate + 20",
			en.Continuations, en.TokenSource, en.InputTokens, en.CacheReadTokens, en.CacheWriteTokens, en.OutputTokens)
	}
	if s.usage == nil || s.usage.Prompt != en.InputTokens || s.usage.Completion != en.OutputTokens {
		t.Errorf("got the client's usage %+v, want the record's: %d, %d", s.usage, en.InputTokens, en.OutputTokens)
	}

	// A stream cut on a Gemini route and continued on an OpenAI one, for an
	// Anthropic client: every count was reported (usage), and message_delta
	// says the record's, the cache reads of both attempts apart from the
	// fresh input.
	resp = do(t, "POST", e.url+"/v1/messages", "", `{"model":"gem-then-oai","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"go"}]}`, "X-Api-Key", devKey)
	b, _ := io.ReadAll(resp.Body)
	var final struct {
		Usage struct {
			Input      int `json:"input_tokens"`
			Output     int `json:"output_tokens"`
			CacheRead  int `json:"cache_read_input_tokens"`
			CacheWrite int `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	for _, line := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"message_delta"`) {
			json.Unmarshal([]byte(d), &final)
		}
	}
	en = e.waitEntries(t, 2)[1]
	if en.Continuations != 1 || en.TokenSource != usage.SourceUsage || en.InputTokens != 1234+500 || en.CacheReadTokens != 200+120 || en.OutputTokens != 99+20 {
		t.Errorf("got %d continuations, %q, %d input tokens (%d read), %d output; want 1, usage, 1734 (320), 119",
			en.Continuations, en.TokenSource, en.InputTokens, en.CacheReadTokens, en.OutputTokens)
	}
	if u := final.Usage; u.Input != 1734-320 || u.CacheRead != 320 || u.CacheWrite != 0 || u.Output != 119 {
		t.Errorf("got message_delta usage %+v; want input 1414, 320 read, 0 written, output 119: %s", u, b)
	}
}

// TestThinkingContinuedByPrompt: a cut stream of a request that asks for
// thinking is continued in the prompt mode, never by prefill (Anthropic
// answers 400 to a final assistant message with thinking on), although the
// Anthropic provider's mode is prefill: the continuing route gets the
// text so far as an assistant message and a user message asking to go on.
// The continuation's own thinking does not reach the client: a chat client
// gets the first attempt's reasoning once; an Anthropic client (the SDK)
// whose first route showed none gets none, and one text block.
func TestThinkingContinuedByPrompt(t *testing.T) {
	u := newScriptedUpstream(t)
	var prefix string
	u.cont = func(t *testing.T, body []byte) {
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Thinking json.RawMessage `json:"thinking"`
		}
		json.Unmarshal(body, &req)
		n := len(req.Messages)
		if n < 3 || req.Messages[n-1].Role != "user" || req.Messages[n-2].Role != "assistant" ||
			!strings.Contains(string(req.Messages[n-1].Content), "cut off") || !strings.Contains(string(req.Messages[n-2].Content), prefix) ||
			!strings.Contains(string(req.Thinking), `"enabled"`) {
			t.Errorf("continuation: got %s; want thinking on, the text so far as an assistant message, then a user message asking to continue", body)
		}
	}
	e := start(t, receivedConfig(u))

	// A chat client with Anthropic's thinking object: two Anthropic routes.
	prefix = "When a stream is cut"
	body := `{"model":"think","stream":true,"max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"go"}]}`
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, body)
	b, _ := io.ReadAll(resp.Body)
	if n := len(u.bodies("go-on")); n != 1 {
		t.Fatalf("got %d continuation requests, want 1: %s", n, b)
	}
	var reasoning, text strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					Reasoning string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) == 1 {
			reasoning.WriteString(c.Choices[0].Delta.Reasoning)
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if reasoning.String() != "Latency first." || strings.Count(string(b), "thinking_blocks") != 1 || text.String() != prose+" the end." ||
		!strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("got reasoning %q, text %q; want the first attempt's reasoning and thinking block alone, the prose and the rest, [DONE]: %s", reasoning.String(), text.String(), b)
	}

	// An Anthropic client asking for thinking, its first route an OpenAI
	// one that shows no reasoning, its next an Anthropic one.
	prefix = "The answer is"
	client := anthropicClient(e, devKey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "plain-then-think", MaxTokens: 4000, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("go"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("Accumulate: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if n := len(u.bodies("go-on")); n != 2 {
		t.Fatalf("got %d continuation requests, want 2", n)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "The answer is the end." || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("got content %+v, stop %q; want one text block \"The answer is the end.\", end_turn", msg.Content, msg.StopReason)
	}
}

// TestMessageStartInputTokens: a /v1/messages client on a translated route
// reads the prompt's tokens in message_start (the upstream's when it
// reported them before its first content: Gemini; else the gateway's
// estimate: OpenAI), and message_delta carries the upstream's real input,
// cache read and cache write tokens, as Anthropic's do.
func TestMessageStartInputTokens(t *testing.T) {
	u := newScriptedUpstream(t)
	e := start(t, receivedConfig(u))
	client := anthropicClient(e, devKey)
	for _, tt := range []struct {
		model              string
		startIn, startRead int64 // startIn -1: the estimate (a few tokens)
		finalIn, finalRead int64
		finalOut           int64
	}{
		{"oai-whole", -1, 0, 380, 120, 20},
		{"gem-whole", 1034, 200, 1034, 200, 99},
	} {
		t.Run(tt.model, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
				Model: tt.model, MaxTokens: 1000,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What makes a gateway fast?"))},
			})
			var start anthropic.Usage
			var final anthropic.MessageDeltaUsage
			for stream.Next() {
				switch ev := stream.Current(); ev.Type {
				case "message_start":
					start = ev.Message.Usage
				case "message_delta":
					final = ev.Usage
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if tt.startIn >= 0 && start.InputTokens != tt.startIn || tt.startIn < 0 && (start.InputTokens <= 0 || start.InputTokens > 100) ||
				start.CacheReadInputTokens != tt.startRead {
				t.Errorf("message_start usage: got input %d, cache read %d; want %d (-1: the estimate), %d", start.InputTokens, start.CacheReadInputTokens, tt.startIn, tt.startRead)
			}
			if final.InputTokens != tt.finalIn || final.CacheReadInputTokens != tt.finalRead || final.CacheCreationInputTokens != 0 || final.OutputTokens != tt.finalOut {
				t.Errorf("message_delta usage: got %+v; want input %d, cache read %d, output %d", final, tt.finalIn, tt.finalRead, tt.finalOut)
			}
		})
	}
}
