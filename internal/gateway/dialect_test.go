package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

// dialectConfig reaches the in-process simulator in each of its three
// dialects: "m-openai", "m-anthropic", "m-gemini" are one route each;
// "fb-cross" falls from an Anthropic route answering 529 to a Gemini one.
func dialectConfig() (*config.Config, sim.Options) {
	cfg := baseConfig()
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	cfg.MaxBody = 1 << 20
	cfg.Providers = []config.Provider{
		{Name: "sim", Kind: "sim"},
		{Name: "sim-anthropic", Kind: "sim", Dialect: "anthropic"},
		{Name: "sim-gemini", Kind: "sim", Dialect: "gemini"},
	}
	price := config.Price{Input: 1, Output: 2}
	cfg.Models = []config.Model{
		{Name: "m-openai", Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}}, Price: price},
		{Name: "m-anthropic", Routes: []config.Route{{Provider: "sim-anthropic", Model: "sim-fast"}}, Price: price},
		{Name: "m-gemini", Routes: []config.Route{{Provider: "sim-gemini", Model: "sim-fast"}}, Price: price},
		{Name: "fb-cross", Routes: []config.Route{{Provider: "sim-anthropic", Model: "overloaded"}, {Provider: "sim-gemini", Model: "sim-fast"}}, Price: price},
	}
	fast := sim.Profile{Name: "sim-fast", Tokens: 8, TokensPerChunk: 1, Lang: "en"}
	overloaded := fast
	overloaded.Name = "overloaded"
	overloaded.Faults.FailStatus = 529
	return cfg, sim.Options{Profiles: []sim.Profile{fast, overloaded}, Seed: 1}
}

var weatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("The weather of a city"),
	Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
})

// TestOpenAIClientAcrossDialects: openai-go through the gateway to an
// OpenAI-, an Anthropic- and a Gemini-dialect upstream: a stream, a
// non-stream and a tool call round trip each, one usage entry each with the
// upstream's usage.
func TestOpenAIClientAcrossDialects(t *testing.T) {
	cfg, so := dialectConfig()
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		t.Run(model, func(t *testing.T) {
			client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
				option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
			params := openai.ChatCompletionNewParams{
				Model:         openai.ChatModel(model),
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")},
				MaxTokens:     openai.Int(5),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != 5 || acc.Usage.PromptTokens <= 0 {
				t.Errorf("stream: got %+v usage %+v; want content, finish length, 5 completion tokens", acc.Choices, acc.Usage)
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
			comp, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("non-stream: %v", err)
			}
			if len(comp.Choices) != 1 || comp.Choices[0].Message.Content == "" || comp.Usage.CompletionTokens != 5 {
				t.Errorf("non-stream: got %+v usage %+v; want content and 5 completion tokens", comp.Choices, comp.Usage)
			}

			// A tool call round trip: the call, then the answer to its result.
			params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream = client.Chat.Completions.NewStreaming(ctx, params, option.WithHeader(sim.HeaderToolCall, "get_weather"))
			acc = openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("tool call stream: %v", err)
			}
			if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("tool call: got %+v; want one tool call, finish tool_calls", acc.Choices)
			}
			call := acc.Choices[0].Message.ToolCalls[0]
			var args map[string]any
			if call.Function.Name != "get_weather" || call.ID == "" || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil {
				t.Fatalf("tool call: got %+v; want get_weather with an id and JSON arguments", call)
			}
			params.Messages = append(params.Messages, acc.Choices[0].Message.ToParam(), openai.ToolMessage(`{"sky":"clear"}`, call.ID))
			comp, err = client.Chat.Completions.New(ctx, params)
			if err != nil || len(comp.Choices) != 1 || comp.Choices[0].Message.Content == "" {
				t.Fatalf("after the tool result: got %+v, %v; want an answer", comp, err)
			}
			n := 0
			for _, en := range e.waitEntries(t, 4*(i+1)) { // entries are recorded once the answer is out
				if en.Model != model {
					continue
				}
				n++
				if en.Outcome != usage.OutcomeOK || en.TokenSource != "usage" || en.InputTokens <= 0 {
					t.Errorf("entry %+v: want ok with the upstream's usage", en)
				}
			}
			if n != 4 { // stream, non-stream, the tool call, the answer to its result
				t.Errorf("got %d usage entries for %s, want 4", n, model)
			}
		})
	}
}

// TestAnthropicClientAcrossDialects: anthropic-sdk-go against /v1/messages
// routed to each dialect: a stream with a tool call and a non-stream.
func TestAnthropicClientAcrossDialects(t *testing.T) {
	cfg, so := dialectConfig()
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		t.Run(model, func(t *testing.T) {
			client := anthropicClient(e, devKey)
			params := anthropic.MessageNewParams{
				Model: anthropic.Model(model), MaxTokens: 5,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Seoul?"))},
				Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
					Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "get_weather")},
			}
			stream := client.Messages.NewStreaming(ctx, params, aoption.WithHeader(sim.HeaderToolCall, "get_weather"))
			var msg anthropic.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			var tool *anthropic.ContentBlockUnion
			for i := range msg.Content {
				if msg.Content[i].Type == "tool_use" {
					tool = &msg.Content[i]
				}
			}
			var input map[string]any
			if tool == nil || tool.Name != "get_weather" || json.Unmarshal(tool.Input, &input) != nil || msg.StopReason != anthropic.StopReasonToolUse {
				t.Fatalf("stream: got %+v, stop %q; want a get_weather tool_use with JSON input, stop tool_use", msg.Content, msg.StopReason)
			}
			params.Tools = nil
			res, err := client.Messages.New(ctx, params)
			if err != nil || len(res.Content) == 0 || res.Content[0].Text == "" || res.Usage.OutputTokens != 5 || res.StopReason != anthropic.StopReasonMaxTokens {
				t.Errorf("non-stream: got %+v, %v; want text, 5 output tokens, max_tokens", res, err)
			}
		})
	}
}

// TestFallbackAcrossDialects: an Anthropic route answering 529 falls back
// to a Gemini route, for a stream and a non-stream, counted by reason.
func TestFallbackAcrossDialects(t *testing.T) {
	cfg, so := dialectConfig()
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	for _, stream := range []bool{true, false} {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("fb-cross", stream, ""))
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRoute) != "sim-gemini/sim-fast" || resp.Header.Get(gateway.HeaderAttempts) != "2" {
			t.Errorf("stream=%v: got %d via %q after %q attempts: %s; want 200 via sim-gemini/sim-fast after 2", stream, resp.StatusCode,
				resp.Header.Get(gateway.HeaderRoute), resp.Header.Get(gateway.HeaderAttempts), b)
		}
		if stream && !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Errorf("stream: got %q, want it to end with [DONE]", b)
		}
	}
	// The same through /v1/messages: the fallback is the chat path's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := anthropicClient(e, devKey)
	params := anthropic.MessageNewParams{Model: "fb-cross", MaxTokens: 4, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	stream := client.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	if err := stream.Err(); err != nil || len(msg.Content) == 0 || msg.Usage.OutputTokens != 4 {
		t.Errorf("/v1/messages stream: got %+v, %v; want the Gemini route's answer", msg, err)
	}
	if res, err := client.Messages.New(ctx, params); err != nil || len(res.Content) == 0 {
		t.Errorf("/v1/messages: got %+v, %v; want the Gemini route's answer", res, err)
	}
	if n := sumSeries(scrape(t, e.url), "streamgate_fallbacks_total", `reason="status_5xx"`); n != 4 {
		t.Errorf("got %v fallbacks by status_5xx, want 4", n)
	}
	for _, en := range e.waitEntries(t, 4) {
		if en.Outcome != usage.OutcomeOK || en.Attempts != 2 {
			t.Errorf("entry %+v: want ok after 2 attempts", en)
		}
	}
}

// TestFaultsAcrossDialects: the core's faults through each dialect's
// adapter: a status before the stream, a cut, an error event and a
// malformed line after content end with one error event and no [DONE]; a
// stall past the idle timeout the same; every request leaves one entry.
func TestFaultsAcrossDialects(t *testing.T) {
	cfg, so := dialectConfig()
	cfg.Timeouts.Idle = config.Duration(300 * time.Millisecond)
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	n := 0
	for _, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		for _, f := range []struct {
			name, header, value string
			status              int
		}{
			{"fail status", "X-Sim-Fail-Status", "503", 503},
			{"cut", "X-Sim-Cut-At", "3", 200},
			{"error event", "X-Sim-Error-At", "3", 200},
			{"malformed", "X-Sim-Malformed-At", "3", 200},
			{"stall", "X-Sim-Stall-At", "3", 200},
		} {
			hdr := []string{f.header, f.value}
			if f.name == "stall" {
				hdr = append(hdr, "X-Sim-Stall-For", "5s") // past the 300 ms idle timeout
			}
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, strings.Replace(chatBody(model, true, ""), `"max_tokens":4`, `"max_tokens":6`, 1), hdr...)
			b, _ := io.ReadAll(resp.Body)
			n++
			body := string(b)
			switch {
			case resp.StatusCode != f.status:
				t.Errorf("%s %s: got %d, want %d: %s", model, f.name, resp.StatusCode, f.status, body)
			case f.status == 200 && (strings.Contains(body, "[DONE]") || strings.Count(body, `data: {"error"`) != 1 || !strings.Contains(body, `"content"`)):
				t.Errorf("%s %s: got %q; want content, then one error event and no [DONE]", model, f.name, body)
			}
		}
	}
	for _, en := range e.waitEntries(t, n) {
		if en.Outcome == usage.OutcomeOK {
			t.Errorf("entry %+v: want a failed outcome", en)
		}
	}
}

// TestUntranslatableRequest: a request an adapter cannot express (n: 2 to
// Anthropic) never reaches the upstream: alone it is a 400 that names the
// field and does not blame the upstream; with a route of another kind next,
// that route serves it, counted as an untranslatable fallback.
func TestUntranslatableRequest(t *testing.T) {
	cfg, so := dialectConfig()
	cfg.Models = append(cfg.Models, config.Model{Name: "fb-n", Routes: []config.Route{{Provider: "sim-anthropic", Model: "sim-fast"}, {Provider: "sim", Model: "sim-fast"}}})
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-anthropic", true, `,"n":2`))
	er := readError(t, resp)
	if resp.StatusCode != 400 || er.Error.Code == nil || *er.Error.Code != "unsupported_by_route" ||
		!strings.Contains(er.Error.Message, "n") || strings.Contains(er.Error.Message, "upstream rejected") {
		t.Errorf("alone: got %d %+v; want 400 unsupported_by_route naming n", resp.StatusCode, er.Error)
	}
	resp = do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("fb-n", false, `,"n":2`))
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRoute) != "sim/sim-fast" {
		t.Errorf("with an OpenAI route next: got %d via %q; want 200 via sim/sim-fast", resp.StatusCode, resp.Header.Get(gateway.HeaderRoute))
	}
	if n := sumSeries(scrape(t, e.url), "streamgate_fallbacks_total", `reason="untranslatable"`); n != 1 {
		t.Errorf("got %v untranslatable fallbacks, want 1", n)
	}
	en := e.waitEntries(t, 2)
	if en[0].TokenSource != usage.SourceNone || en[0].CostUSD != 0 {
		t.Errorf("the untranslated request was billed: %+v", en[0])
	}
}
