package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"
)

// The official SDKs read the simulator directly, so its dialects cannot
// drift from the real wire formats: each SDK's own decoder and accumulator
// must make sense of every shape.

func anthropicSDK(ts *httptest.Server, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(ts.URL),
		aoption.WithAPIKey("sim"), aoption.WithHTTPClient(ts.Client()), aoption.WithMaxRetries(0)}, opts...)...)
}

func anthropicParams(maxTokens int64, tools ...anthropic.ToolUnionParam) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "sim-claude",
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about streaming latency."))},
		Tools:     tools,
	}
}

var weatherTool = anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: map[string]any{
	"city": map[string]any{"type": "string"},
	"days": map[string]any{"type": "integer"},
}}, "get_weather")

// accumulate reads an Anthropic stream into one Message with the SDK's
// Accumulate; err is the stream's error.
func accumulate(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams, opts ...aoption.RequestOption) (anthropic.Message, int, error) {
	t.Helper()
	stream := c.Messages.NewStreaming(context.Background(), params, opts...)
	defer stream.Close()
	var msg anthropic.Message
	events := 0
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("Accumulate event %d: %v", events, err)
		}
		events++
	}
	return msg, events, stream.Err()
}

func TestAnthropicSDKStream(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	h := map[string]string{HeaderSeed: "5"}
	want := streamText(t, ts, reqOpts{headers: h})
	c := anthropicSDK(ts, aoption.WithHeader(HeaderSeed, "5"))
	for _, tt := range []struct {
		name      string
		maxTokens int64
		stop      anthropic.StopReason
		tokens    int64
	}{{"end_turn", 100, anthropic.StopReasonEndTurn, 12}, {"max_tokens", 4, anthropic.StopReasonMaxTokens, 4}} {
		t.Run(tt.name, func(t *testing.T) {
			msg, _, err := accumulate(t, c, anthropicParams(tt.maxTokens))
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if !strings.HasPrefix(msg.ID, "msg_") || msg.Model != "sim-claude" || msg.StopReason != tt.stop {
				t.Errorf("message: got id %q model %q stop %q, want msg_…, sim-claude, %q", msg.ID, msg.Model, msg.StopReason, tt.stop)
			}
			if msg.Usage.OutputTokens != tt.tokens || msg.Usage.InputTokens <= 0 {
				t.Errorf("usage: got %+v, want %d output tokens and input tokens", msg.Usage, tt.tokens)
			}
			if len(msg.Content) != 1 || msg.Content[0].Type != "text" {
				t.Fatalf("content: got %+v, want one text block", msg.Content)
			}
			if got := msg.Content[0].AsText().Text; tt.tokens == 12 && got != want {
				t.Errorf("text: got %q, want the OpenAI dialect's %q", got, want)
			}
		})
	}
}

func TestAnthropicSDKToolCall(t *testing.T) {
	p := quick
	p.TokensPerChunk = 3
	_, ts := newTestServer(t, Options{Profile: p})
	c := anthropicSDK(ts, aoption.WithHeader(HeaderToolCall, "get_weather"))
	check := func(t *testing.T, msg anthropic.Message) {
		t.Helper()
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" {
			t.Fatalf("message: got stop %q content %+v, want one tool_use block and stop_reason tool_use", msg.StopReason, msg.Content)
		}
		tu := msg.Content[0].AsToolUse()
		var args struct {
			City *string `json:"city"`
			Days *int    `json:"days"`
		}
		if err := json.Unmarshal(tu.Input, &args); err != nil || args.City == nil || args.Days == nil {
			t.Errorf("input: got %s (%v), want city and days", tu.Input, err)
		}
		if tu.Name != "get_weather" || !strings.HasPrefix(tu.ID, "toolu_") {
			t.Errorf("tool_use: got name %q id %q", tu.Name, tu.ID)
		}
	}
	t.Run("stream", func(t *testing.T) {
		msg, events, err := accumulate(t, c, anthropicParams(100, weatherTool))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		check(t, msg)
		if events < 7 { // start, block start, empty delta, >=2 fragments, stop, delta, stop
			t.Errorf("events: got %d, want the arguments in several input_json_delta fragments", events)
		}
	})
	t.Run("non-stream", func(t *testing.T) {
		msg, err := c.Messages.New(context.Background(), anthropicParams(100, weatherTool))
		if err != nil {
			t.Fatal(err)
		}
		check(t, *msg)
	})
	t.Run("tool not offered", func(t *testing.T) {
		_, err := c.Messages.New(context.Background(), anthropicParams(100))
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != anthropic.ErrorTypeInvalidRequestError || !strings.Contains(ae.Message, HeaderToolCall) {
			t.Errorf("got %v, want a 400 invalid_request_error naming %s", err, HeaderToolCall)
		}
	})
}

func TestAnthropicSDKNonStream(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	c := anthropicSDK(ts)
	msg, err := c.Messages.New(context.Background(), anthropicParams(7))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 7 || len(msg.Content) != 1 || msg.Content[0].AsText().Text == "" {
		t.Errorf("message: got %+v, want 7 tokens of text and stop_reason max_tokens", msg)
	}
}

func TestAnthropicSDKErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, tt := range []struct {
		status int
		typ    anthropic.ErrorType
	}{{429, anthropic.ErrorTypeRateLimitError}, {529, anthropic.ErrorTypeOverloadedError}, {500, anthropic.ErrorTypeAPIError}} {
		t.Run(itoa(tt.status), func(t *testing.T) {
			c := anthropicSDK(ts, aoption.WithHeader(HeaderFailStatus, itoa(tt.status)))
			_, err := c.Messages.New(context.Background(), anthropicParams(10))
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != tt.status || ae.Type() != tt.typ || !strings.HasPrefix(ae.RequestID, "req_") {
				t.Errorf("non-stream: got %v, want *anthropic.Error %d %s with a request id", err, tt.status, tt.typ)
			}
			_, _, err = accumulate(t, c, anthropicParams(10))
			if !errors.As(err, &ae) || ae.StatusCode != tt.status || ae.Type() != tt.typ {
				t.Errorf("stream: got %v, want *anthropic.Error %d %s", err, tt.status, tt.typ)
			}
		})
	}
	t.Run("error event", func(t *testing.T) {
		_, events, err := accumulate(t, anthropicSDK(ts, aoption.WithHeader(HeaderErrorAt, "3")), anthropicParams(100))
		if err == nil || !strings.Contains(err.Error(), "overloaded_error") {
			t.Errorf("got %v after %d events, want the overloaded_error event as the stream's error", err, events)
		}
	})
	t.Run("cut", func(t *testing.T) {
		msg, _, err := accumulate(t, anthropicSDK(ts, aoption.WithHeader(HeaderCutAt, "3")), anthropicParams(100))
		if err == nil || msg.StopReason != "" {
			t.Errorf("got %v with stop_reason %q, want an error and no stop reason", err, msg.StopReason)
		}
	})
}

func TestOpenAISDKToolCall(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("sim"), option.WithHTTPClient(ts.Client()),
		option.WithMaxRetries(0), option.WithHeader(HeaderToolCall, "get_weather"))
	params := openai.ChatCompletionNewParams{
		Model:    "sim-fast",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
				"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
			}},
		})},
	}
	check := func(t *testing.T, calls []openai.ChatCompletionMessageToolCallUnion, finish string) {
		t.Helper()
		if len(calls) != 1 || finish != "tool_calls" {
			t.Fatalf("got %d tool calls, finish_reason %q, want one and tool_calls", len(calls), finish)
		}
		fn := calls[0].Function
		var args map[string]string
		if err := json.Unmarshal([]byte(fn.Arguments), &args); err != nil || args["city"] != "sim" || args["unit"] != "celsius" {
			t.Errorf("arguments: got %q (%v), want city and the first enum unit", fn.Arguments, err)
		}
		if fn.Name != "get_weather" || !strings.HasPrefix(calls[0].ID, "call_") {
			t.Errorf("call: got name %q id %q", fn.Name, calls[0].ID)
		}
	}
	t.Run("stream", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(context.Background(), params)
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		finished := 0
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("AddChunk refused %+v", stream.Current())
			}
			if _, ok := acc.JustFinishedToolCall(); ok {
				finished++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || finished != 1 {
			t.Fatalf("got %d choices and %d finished tool calls, want 1 and 1", len(acc.Choices), finished)
		}
		check(t, acc.Choices[0].Message.ToolCalls, acc.Choices[0].FinishReason)
	})
	t.Run("non-stream", func(t *testing.T) {
		c, err := client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		check(t, c.Choices[0].Message.ToolCalls, c.Choices[0].FinishReason)
		if c.Choices[0].Message.Content != "" {
			t.Errorf("content: got %q, want none", c.Choices[0].Message.Content)
		}
	})
}

// genaiClient is go-genai on the Gemini API backend with the sim as its
// base URL. Note: go-genai's stream decoder rejects SSE comment lines, so
// it cannot read a sim started with --stamp.
func genaiClient(t *testing.T, ts *httptest.Server, h http.Header) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "sim", Backend: genai.BackendGeminiAPI, HTTPClient: ts.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL, APIVersion: "v1beta", Headers: h},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenaiSDK(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	ctx := context.Background()
	want := streamText(t, ts, reqOpts{headers: map[string]string{HeaderSeed: "5"}})
	c := genaiClient(t, ts, http.Header{HeaderSeed: {"5"}})
	t.Run("stream", func(t *testing.T) {
		var text strings.Builder
		var last *genai.GenerateContentResponse
		for resp, err := range c.Models.GenerateContentStream(ctx, "sim-gem", genai.Text("Tell me about streaming latency."), nil) {
			if err != nil {
				t.Fatal(err)
			}
			text.WriteString(resp.Text())
			last = resp
		}
		if text.String() != want {
			t.Errorf("text: got %q, want the OpenAI dialect's %q", text.String(), want)
		}
		if last == nil || last.Candidates[0].FinishReason != genai.FinishReasonStop || last.UsageMetadata.CandidatesTokenCount != 12 ||
			last.ModelVersion != "sim-gem" || last.ResponseID == "" {
			t.Errorf("last chunk: got %+v, want finishReason STOP, 12 candidate tokens, modelVersion and responseId", last)
		}
	})
	t.Run("non-stream", func(t *testing.T) {
		resp, err := c.Models.GenerateContent(ctx, "sim-gem", genai.Text("hi"), &genai.GenerateContentConfig{MaxOutputTokens: 5})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text() == "" || resp.Candidates[0].FinishReason != genai.FinishReasonMaxTokens || resp.UsageMetadata.CandidatesTokenCount != 5 {
			t.Errorf("response: got %+v, want 5 tokens of text and MAX_TOKENS", resp)
		}
	})
	tools := &genai.GenerateContentConfig{
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name: "get_weather",
			Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{
				"city": {Type: genai.TypeString}, "days": {Type: genai.TypeInteger},
			}},
		}}}},
		HTTPOptions: &genai.HTTPOptions{Headers: http.Header{HeaderToolCall: {"get_weather"}}},
	}
	checkCall := func(t *testing.T, calls []*genai.FunctionCall) {
		t.Helper()
		if len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Args["city"] != "sim" || calls[0].Args["days"] != float64(1) {
			t.Errorf("function calls: got %+v, want get_weather with city and days", calls)
		}
	}
	t.Run("function call stream", func(t *testing.T) {
		var calls []*genai.FunctionCall
		var finish genai.FinishReason
		for resp, err := range c.Models.GenerateContentStream(ctx, "sim-gem", genai.Text("weather?"), tools) {
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, resp.FunctionCalls()...)
			finish = resp.Candidates[0].FinishReason
		}
		checkCall(t, calls)
		if finish != genai.FinishReasonStop {
			t.Errorf("finishReason: got %q, want STOP", finish)
		}
	})
	t.Run("function call", func(t *testing.T) {
		resp, err := c.Models.GenerateContent(ctx, "sim-gem", genai.Text("weather?"), tools)
		if err != nil {
			t.Fatal(err)
		}
		checkCall(t, resp.FunctionCalls())
	})
	t.Run("errors", func(t *testing.T) {
		cfg := &genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Headers: http.Header{HeaderFailStatus: {"429"}}}}
		_, err := c.Models.GenerateContent(ctx, "sim-gem", genai.Text("hi"), cfg)
		var ae genai.APIError
		if !errors.As(err, &ae) || ae.Code != 429 || ae.Status != "RESOURCE_EXHAUSTED" {
			t.Errorf("fail status: got %v, want APIError 429 RESOURCE_EXHAUSTED", err)
		}
		cfg.HTTPOptions.Headers = http.Header{HeaderErrorAt: {"2"}}
		var got error
		for _, err := range c.Models.GenerateContentStream(ctx, "sim-gem", genai.Text("hi"), cfg) {
			if err != nil {
				got = err
				break
			}
		}
		if !errors.As(got, &ae) || ae.Code != 503 || ae.Status != "UNAVAILABLE" {
			t.Errorf("error event: got %v, want APIError 503 UNAVAILABLE", got)
		}
	})
}
