package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
)

// claudeStream is an Anthropic upstream's answer to a Claude Code turn:
// a signed thinking block, text, a tool call, stop_reason tool_use, cache
// usage, a ping and an event type to come, as Anthropic writes them.
const claudeStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-up\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":20,\"cache_read_input_tokens\":30,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"The file first.\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCkYIBxgCKkBsaWduYXR1cmU=\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Reading it.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_02\",\"name\":\"Read\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"main.go\\\"}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
	"event: future_event\ndata: {\"type\":\"future_event\",\"x\":1}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":42}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// claudeMessage is the same answer not streamed, with a block type to come.
const claudeMessage = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-up","content":[` +
	`{"type":"thinking","thinking":"The file first.","signature":"EqQBCkYIBxgCKkBsaWduYXR1cmU="},{"type":"text","text":"Reading it."},` +
	`{"type":"tool_use","id":"toolu_02","name":"Read","input":{"path":"main.go"}},{"type":"future_block","x":1}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":42}}`

// cutMark is where a cut stream ends: after the first text.
const cutMark = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}"

// received is one request an upstream got.
type received struct {
	body   []byte
	header http.Header
}

// anthropicUpstream is an Anthropic upstream that records what it got
// and answers claudeStream or claudeMessage; status answers that status
// instead; X-Sim-Test-Cut makes it end the stream after its first text.
type anthropicUpstream struct {
	url    string
	status int
	mu     sync.Mutex
	got    []received
}

func newAnthropicUpstream(t *testing.T, status int) *anthropicUpstream {
	u := &anthropicUpstream{status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.got = append(u.got, received{b, r.Header.Clone()})
		u.mu.Unlock()
		if u.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(u.status)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		var req struct{ Stream bool }
		json.Unmarshal(b, &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, claudeMessage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		body := claudeStream
		if r.Header.Get("X-Sim-Test-Cut") != "" {
			body = body[:strings.Index(body, cutMark)] // after the text, before its block's end
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

func (u *anthropicUpstream) requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.got...)
}

// passConfig: "claude" is served by an Anthropic upstream (kind anthropic,
// passthrough); "fb-pass" falls from an Anthropic upstream answering 503
// to the sim spoken to in OpenAI's dialect (translation); "fb-rev" has the
// sim first, then the good Anthropic upstream.
func passConfig(good, down *anthropicUpstream) *config.Config {
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "ant", Kind: "anthropic", BaseURL: good.url, APIKey: "sk-ant-route-key"},
		config.Provider{Name: "ant-down", Kind: "anthropic", BaseURL: down.url, APIKey: "sk-ant-route-key"})
	price := config.Price{Input: 1, Output: 2}
	cfg.Models = append(cfg.Models,
		config.Model{Name: "claude", Routes: []config.Route{{Provider: "ant", Model: "claude-up"}}, Price: price},
		config.Model{Name: "fb-pass", Routes: []config.Route{{Provider: "ant-down", Model: "claude-up"}, {Provider: "sim", Model: "sim-fast"}}, Price: price},
		config.Model{Name: "fb-rev", Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}, {Provider: "ant", Model: "claude-up"}}, Price: price})
	return cfg
}

// wire records the bytes the SDK sent and received.
type wire struct {
	mu       sync.Mutex
	sent     []byte
	header   http.Header // sent
	received []byte
}

func (wr *wire) middleware() aoption.RequestOption {
	return aoption.WithMiddleware(func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		resp, err := next(r)
		if err != nil {
			return resp, err
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(got))
		wr.mu.Lock()
		wr.sent, wr.header, wr.received = b, r.Header.Clone(), got
		wr.mu.Unlock()
		return resp, nil
	})
}

const betaHeader = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"

// claudeCodeTurn is a turn as Claude Code sends it: two system blocks,
// two tools, an earlier assistant turn with a signed thinking block and a
// tool call, a tool result of text and an image, cache_control
// breakpoints on the last system block, the last tool and the tool
// result, thinking with a budget, metadata.user_id; the options add a
// top-level field and a block type the gateway does not know.
func claudeCodeTurn(model string) (anthropic.MessageNewParams, []aoption.RequestOption) {
	schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}, Required: []string{"path"}}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 32000,
		System: []anthropic.TextBlockParam{{Text: "You are Claude Code."},
			{Text: "Project instructions.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "Read", InputSchema: schema}},
			{OfTool: &anthropic.ToolParam{Name: "Write", InputSchema: schema, CacheControl: anthropic.NewCacheControlEphemeralParam()}}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("What does main.go do?")),
			anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCkYIBxgCKkBzaWduZWQ=", "Look at the file."),
				anthropic.NewToolUseBlock("toolu_01", map[string]any{"path": "main.go"}, "Read")),
			anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
				ToolUseID: "toolu_01",
				Content: []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: "package main"}},
					{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
						Data: "iVBORw0KGgo=", MediaType: anthropic.Base64ImageSourceMediaTypeImagePNG}}}}},
				CacheControl: anthropic.NewCacheControlEphemeralParam(),
			}}),
		},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(31999),
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("user_4a5b")},
	}
	return params, []aoption.RequestOption{
		aoption.WithJSONSet("future_field", map[string]any{"mode": "x"}),
		aoption.WithJSONSet("messages.2.content.-1", map[string]any{"type": "future_block", "data": "x"}),
	}
}

// TestMessagesPassthrough: a Claude Code turn through /v1/messages to a
// kind: anthropic route with the official SDK, streamed and not: the
// upstream gets the SDK's body byte for byte but for "model", with the
// client's anthropic-beta and anthropic-version and the route's key; the
// SDK gets the upstream's events (or Message) byte for byte and reads
// them whole (signed thinking, text, tool_use, stop_reason tool_use, cache
// usage); the ledger has the upstream's usage.
func TestMessagesPassthrough(t *testing.T) {
	good := newAnthropicUpstream(t, 0)
	e := start(t, passConfig(good, newAnthropicUpstream(t, 503)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wr wire
	client := anthropicClient(e, devKey, wr.middleware(), aoption.WithHeader("anthropic-beta", betaHeader),
		aoption.WithRequestTimeout(10*time.Second)) // else the SDK refuses a non-stream max_tokens of 32000
	params, opts := claudeCodeTurn("claude")

	for i, stream := range []bool{true, false} {
		var msg anthropic.Message
		if stream {
			s := client.Messages.NewStreaming(ctx, params, opts...)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatalf("Accumulate: %v", err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
		} else {
			res, err := client.Messages.New(ctx, params, opts...)
			if err != nil {
				t.Fatalf("non-stream: %v", err)
			}
			msg = *res
		}
		for _, part := range []string{`"cache_control"`, `"signature":"EqQBCkYIBxgCKkBzaWduZWQ="`, `"future_block"`, `"future_field"`, `"budget_tokens":31999`, `"user_id":"user_4a5b"`, `"image"`} {
			if !strings.Contains(string(wr.sent), part) {
				t.Fatalf("the SDK's body lacks %s: %s", part, wr.sent)
			}
		}
		reqs := good.requests()
		if len(reqs) != i+1 {
			t.Fatalf("the upstream got %d requests, want %d", len(reqs), i+1)
		}
		up := reqs[i]
		if want := bytes.Replace(wr.sent, []byte(`"model":"claude"`), []byte(`"model":"claude-up"`), 1); !bytes.Equal(up.body, want) {
			t.Errorf("stream=%v: the upstream got\n%s\nwant the client's body with the route's model\n%s", stream, up.body, want)
		}
		if v := wr.header.Get("Anthropic-Version"); up.header.Get("Anthropic-Beta") != betaHeader || v == "" || up.header.Get("Anthropic-Version") != v ||
			up.header.Get("X-Api-Key") != "sk-ant-route-key" {
			t.Errorf("stream=%v: upstream headers beta %q, version %q, key %q; want the client's beta and version (%q), the route's key",
				stream, up.header.Get("Anthropic-Beta"), up.header.Get("Anthropic-Version"), up.header.Get("X-Api-Key"), v)
		}
		want := claudeMessage
		if stream {
			want = claudeStream
		}
		if string(wr.received) != want {
			t.Errorf("stream=%v: the client got\n%s\nwant the upstream's bytes\n%s", stream, wr.received, want)
		}
		if len(msg.Content) < 3 || msg.Content[0].Type != "thinking" || msg.Content[0].Signature != "EqQBCkYIBxgCKkBsaWduYXR1cmU=" ||
			msg.Content[1].Text != "Reading it." || msg.Content[2].Type != "tool_use" || msg.Content[2].Name != "Read" ||
			!strings.Contains(string(msg.Content[2].Input), "main.go") || msg.StopReason != anthropic.StopReasonToolUse ||
			msg.Usage.CacheReadInputTokens != 30 || msg.Usage.CacheCreationInputTokens != 20 || msg.Usage.InputTokens != 10 || msg.Usage.OutputTokens != 42 {
			t.Errorf("stream=%v: the SDK read %+v; want signed thinking, text, a Read tool_use, stop tool_use, the cache usage", stream, msg)
		}
	}
	for i, en := range e.waitEntries(t, 2) {
		if en.Outcome != usage.OutcomeOK || en.Route != "ant/claude-up" || en.InputTokens != 60 || en.OutputTokens != 42 ||
			en.TokenSource != usage.SourceUsage || en.CostUSD <= 0 || en.Stream != (i == 0) || (en.Stream && en.TTFT <= 0) {
			t.Errorf("entry %d: got %+v; want ok via ant/claude-up, 60 input (10 + 20 cache write + 30 cache read) and 42 output tokens from the usage, a cost, a TTFT", i, en)
		}
	}
}

// TestMessagesPassthroughWire: over raw HTTP, the client's own
// anthropic-version wins over the adapter's, and a stream cut after
// content ends with the upstream's events so far and one Anthropic error
// event (no message_stop), recorded as failed.
func TestMessagesPassthroughWire(t *testing.T) {
	good := newAnthropicUpstream(t, 0)
	e := start(t, passConfig(good, newAnthropicUpstream(t, 503)))
	body := `{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp := do(t, "POST", e.url+"/v1/messages", "", body, "X-Api-Key", devKey, "Anthropic-Version", "2023-01-01")
	b, _ := io.ReadAll(resp.Body)
	if up := good.requests()[0]; resp.StatusCode != 200 || string(b) != claudeStream || up.header.Get("Anthropic-Version") != "2023-01-01" || up.header.Get("Anthropic-Beta") != "" {
		t.Errorf("got %d, upstream version %q beta %q; want 200 with the upstream's stream, the client's version 2023-01-01, no beta: %s",
			resp.StatusCode, up.header.Get("Anthropic-Version"), up.header.Get("Anthropic-Beta"), b)
	}

	resp = do(t, "POST", e.url+"/v1/messages", "", body, "X-Api-Key", devKey, "X-Sim-Test-Cut", "1")
	b, _ = io.ReadAll(resp.Body)
	rest, ok := strings.CutPrefix(string(b), claudeStream[:strings.Index(claudeStream, cutMark)])
	if resp.StatusCode != 200 || !ok || !strings.HasPrefix(rest, "event: error\ndata: ") || !strings.Contains(rest, `"type":"error"`) ||
		strings.Count(rest, "event: ") != 1 || strings.Contains(rest, "message_stop") {
		t.Errorf("cut: got %d %q; want the upstream's events up to the cut, then one Anthropic error event", resp.StatusCode, b)
	}
	en := e.waitEntries(t, 2)[1]
	if en.Outcome == usage.OutcomeOK || en.Status != 200 {
		t.Errorf("cut entry: got %+v; want status 200 and a failed outcome", en)
	}
}

// TestMessagesPassthroughFallback: an Anthropic route answering 503 gets
// the client's body as sent, then the next route, of kind openai (the
// sim), serves the same request translated, streamed and not. A request
// the translation cannot express (a block type it does not know) skips a
// route that would translate it for one that passes it through; with no
// such route left the client gets the translation's refusal, which no
// retry can fix (issue 36), even after that route's 503.
func TestMessagesPassthroughFallback(t *testing.T) {
	good, down := newAnthropicUpstream(t, 0), newAnthropicUpstream(t, 503)
	e := start(t, passConfig(good, down))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wr wire
	var hdr http.Header
	client := anthropicClient(e, devKey, wr.middleware(), aoption.WithRequestTimeout(10*time.Second), aoption.WithMiddleware(
		func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if err == nil {
				hdr = resp.Header
			}
			return resp, err
		}))
	params := anthropic.MessageNewParams{Model: "fb-pass", MaxTokens: 5, System: []anthropic.TextBlockParam{{Text: "be brief", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}

	stream := client.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	if err := stream.Err(); err != nil || len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.Usage.OutputTokens != 5 ||
		hdr.Get(gateway.HeaderRoute) != "sim/sim-fast" || hdr.Get(gateway.HeaderAttempts) != "2" {
		t.Errorf("stream: got %+v, %v via %q after %q attempts; want the sim's answer, translated, after 2", msg, err, hdr.Get(gateway.HeaderRoute), hdr.Get(gateway.HeaderAttempts))
	}
	if reqs := down.requests(); len(reqs) != 1 || !bytes.Equal(reqs[0].body, bytes.Replace(wr.sent, []byte(`"model":"fb-pass"`), []byte(`"model":"claude-up"`), 1)) {
		t.Errorf("the Anthropic route got %d requests, want 1 with the client's body as sent", len(reqs))
	}
	if res, err := client.Messages.New(ctx, params); err != nil || len(res.Content) == 0 || res.Content[0].Text == "" || res.Usage.OutputTokens != 5 ||
		hdr.Get(gateway.HeaderRoute) != "sim/sim-fast" {
		t.Errorf("non-stream: got %+v, %v via %q; want the sim's answer, translated", res, err, hdr.Get(gateway.HeaderRoute))
	}

	// No chat form: the sim cannot take it, the Anthropic route after it does.
	turn, opts := claudeCodeTurn("fb-rev")
	res, err := client.Messages.New(ctx, turn, opts...)
	if err != nil || string(wr.received) != claudeMessage || hdr.Get(gateway.HeaderRoute) != "ant/claude-up" || hdr.Get(gateway.HeaderAttempts) != "1" {
		t.Errorf("untranslatable, sim first: got %+v, %v via %q after %q attempts; want the Anthropic route's Message after 1 (the sim's refusal is no attempt)", res, err, hdr.Get(gateway.HeaderRoute), hdr.Get(gateway.HeaderAttempts))
	}
	// The Anthropic route answers 503 and the sim cannot take it: the
	// sim's refusal decides (issue 36), a 400 no retry can fix, not the
	// 503 a client would retry in vain while the sim keeps refusing.
	turn.Model = "fb-pass"
	_, err = client.Messages.New(ctx, turn, opts...)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Response.Header.Get("X-Should-Retry") != "false" ||
		!strings.Contains(err.Error(), "future_block") {
		t.Errorf("untranslatable, Anthropic route down: got %v; want the translation's 400 (x-should-retry: false) naming future_block", err)
	}
	// A model of OpenAI-dialect routes only: a 400 naming what the
	// translation cannot carry (the unknown block type; images in tool
	// results cross since the translation carries them).
	turn.Model = "m-sim"
	_, err = client.Messages.New(ctx, turn, opts...)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || string(apiErr.Type()) != "invalid_request_error" ||
		!strings.Contains(err.Error(), "messages[2].content[1].type") || !strings.Contains(err.Error(), "future_block") {
		t.Errorf("untranslatable, no Anthropic route: got %v; want 400 invalid_request_error naming messages[2].content[1].type (future_block)", err)
	}
	if n := sumSeries(scrape(t, e.url), "streamgate_fallbacks_total", `reason="untranslatable"`); n != 1 {
		t.Errorf("got %v untranslatable fallbacks, want 1 (fb-rev's sim)", n)
	}
	for _, en := range e.waitEntries(t, 5) {
		if en.Model == "m-sim" && (en.TokenSource != usage.SourceNone || en.CostUSD != 0) {
			t.Errorf("the request no route could send was billed: %+v", en)
		}
	}
}

// TestMessagesPassthroughGuard: the context guard's one change to a
// passed body is max_tokens, lowered to the model's max_output_tokens
// (the rest byte for byte), whether the request has a chat form or not; a
// request without one that does not fit the context window (its
// top-level system prompt counted) is refused before any upstream call.
func TestMessagesPassthroughGuard(t *testing.T) {
	good := newAnthropicUpstream(t, 0)
	cfg := passConfig(good, newAnthropicUpstream(t, 503))
	cfg.Models = append(cfg.Models,
		config.Model{Name: "capped", Routes: []config.Route{{Provider: "ant", Model: "claude-up"}}, MaxOutputTokens: 1000},
		config.Model{Name: "small", Routes: []config.Route{{Provider: "ant", Model: "claude-up"}}, ContextWindow: 2000})
	e := start(t, cfg)
	const plain = `{"model":"capped","max_tokens":32000,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	const opaque = `{"model":"capped","max_tokens":32000,"stream":true,"messages":[{"role":"user","content":[{"type":"future_block","x":1}]}],"future_field":1}`
	for i, body := range []string{plain, opaque} {
		resp := do(t, "POST", e.url+"/v1/messages", "", body, "X-Api-Key", devKey)
		io.ReadAll(resp.Body)
		want := strings.Replace(strings.Replace(body, `"model":"capped"`, `"model":"claude-up"`, 1), `"max_tokens":32000`, `"max_tokens":1000`, 1)
		reqs := good.requests()
		if len(reqs) != i+1 {
			t.Fatalf("body %d: the upstream got %d requests, want %d", i, len(reqs), i+1)
		}
		if got := reqs[i].body; resp.StatusCode != 200 || string(got) != want {
			t.Errorf("body %d: got %d, the upstream got\n%s\nwant\n%s", i, resp.StatusCode, got, want)
		}
	}
	big := `{"model":"small","max_tokens":100,"system":"` + strings.Repeat("word ", 2000) + `","messages":[{"role":"user","content":[{"type":"future_block"}]}]}`
	resp := do(t, "POST", e.url+"/v1/messages", "", big, "X-Api-Key", devKey)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "context window") || len(good.requests()) != 2 {
		t.Errorf("too long: got %d %s after %d upstream requests; want 400 naming the context window, no upstream request", resp.StatusCode, b, len(good.requests()))
	}
}
