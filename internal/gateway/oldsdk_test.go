package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	anthropic1 "github.com/anthropics/anthropic-sdk-go"
	aoption1 "github.com/anthropics/anthropic-sdk-go/option"
	openai2 "github.com/openai/openai-go/v2"
	option2 "github.com/openai/openai-go/v2/option"
	responses2 "github.com/openai/openai-go/v2/responses"
	shared2 "github.com/openai/openai-go/v2/shared"

	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

// The tests of this file drive the gateway with the previous major of each
// official SDK (openai-go v2, anthropic-sdk-go v1), which deployed clients
// still run: the same wire must satisfy both majors.

// TestOpenAIPreviousMajor: openai-go v2 through the gateway to each dialect:
// a stream read with its accumulator, a non-stream, a tool call, a Responses
// stream, and a refused key read as the SDK's *Error.
func TestOpenAIPreviousMajor(t *testing.T) {
	cfg, so := dialectConfig()
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []option2.RequestOption{option2.WithBaseURL(e.url + "/v1/"), option2.WithMaxRetries(0),
		option2.WithHeader("X-Sim-TTFT", "1ms"), option2.WithHeader("X-Sim-ITL", "1ms")}
	client := openai2.NewClient(append(opts, option2.WithAPIKey(devKey))...)
	for i, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		t.Run(model, func(t *testing.T) {
			params := openai2.ChatCompletionNewParams{
				Model:         model,
				Messages:      []openai2.ChatCompletionMessageParamUnion{openai2.SystemMessage("be brief"), openai2.UserMessage("hello")},
				MaxTokens:     openai2.Int(5),
				StreamOptions: openai2.ChatCompletionStreamOptionsParam{IncludeUsage: openai2.Bool(true)},
			}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			acc := openai2.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != 5 {
				t.Errorf("stream: got %+v usage %+v; want content, finish length, 5 completion tokens", acc.Choices, acc.Usage)
			}
			params.StreamOptions = openai2.ChatCompletionStreamOptionsParam{}
			comp, err := client.Chat.Completions.New(ctx, params)
			if err != nil || len(comp.Choices) != 1 || comp.Choices[0].Message.Content == "" || comp.Usage.CompletionTokens != 5 {
				t.Fatalf("non-stream: got %+v, %v; want content and 5 completion tokens", comp, err)
			}

			params.Tools = []openai2.ChatCompletionToolUnionParam{openai2.ChatCompletionFunctionTool(shared2.FunctionDefinitionParam{
				Name:       "get_weather",
				Parameters: shared2.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
			})}
			comp, err = client.Chat.Completions.New(ctx, params, option2.WithHeader(sim.HeaderToolCall, "get_weather"))
			if err != nil || len(comp.Choices) != 1 || len(comp.Choices[0].Message.ToolCalls) != 1 || comp.Choices[0].Message.ToolCalls[0].Function.Name != "get_weather" {
				t.Fatalf("tool call: got %+v, %v; want one get_weather call", comp, err)
			}

			rs := client.Responses.NewStreaming(ctx, responses2.ResponseNewParams{
				Model: model, Input: responses2.ResponseNewParamsInputUnion{OfString: openai2.String("hello")},
			})
			var final responses2.Response
			deltas := ""
			for rs.Next() {
				switch ev := rs.Current(); ev.Type {
				case "response.output_text.delta":
					deltas += ev.Delta
				case "response.completed":
					final = ev.AsResponseCompleted().Response
				}
			}
			if err := rs.Err(); err != nil {
				t.Fatalf("responses stream: %v", err)
			}
			if final.Status != "completed" || final.OutputText() == "" || final.OutputText() != deltas || final.Usage.OutputTokens != 8 {
				t.Errorf("responses stream: got %s (deltas %q); want completed with the deltas' text and 8 output tokens", final.RawJSON(), deltas)
			}

			n := 0
			for _, en := range e.waitEntries(t, 4*(i+1)) {
				if en.Model == model {
					n++
					if en.Outcome != usage.OutcomeOK || en.TokenSource != "usage" {
						t.Errorf("entry %+v: want ok with the upstream's usage", en)
					}
				}
			}
			if n != 4 {
				t.Errorf("got %d usage entries for %s, want 4", n, model)
			}
		})
	}

	bad := openai2.NewClient(append(opts, option2.WithAPIKey("sk-wrong"))...)
	_, err := bad.Chat.Completions.New(ctx, openai2.ChatCompletionNewParams{Model: "m-openai",
		Messages: []openai2.ChatCompletionMessageParamUnion{openai2.UserMessage("hello")}})
	var apiErr *openai2.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Message == "" {
		t.Fatalf("wrong key: got %v, want a 401 *openai.Error with a message", err)
	}
}

// TestAnthropicPreviousMajor: anthropic-sdk-go v1 against /v1/messages with
// extended thinking to an Anthropic-dialect upstream: the accumulated
// message has a signed thinking block then text; the next turn sends that
// block back and is answered; and a non-stream to each dialect.
func TestAnthropicPreviousMajor(t *testing.T) {
	cfg, so := dialectConfig()
	for i := range so.Profiles {
		so.Profiles[i].ThinkingTokens = 6
	}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := anthropic1.NewClient(aoption1.WithBaseURL(e.url), aoption1.WithAPIKey(devKey), aoption1.WithMaxRetries(0),
		aoption1.WithHeader("X-Sim-TTFT", "1ms"), aoption1.WithHeader("X-Sim-ITL", "1ms"))

	params := anthropic1.MessageNewParams{
		Model: "m-anthropic", MaxTokens: 4000,
		Messages: []anthropic1.MessageParam{anthropic1.NewUserMessage(anthropic1.NewTextBlock("Weather in Paris?"))},
		Thinking: anthropic1.ThinkingConfigParamOfEnabled(2048),
	}
	var msg anthropic1.Message
	stream := client.Messages.NewStreaming(ctx, params)
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("Accumulate: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking == "" || msg.Content[0].Signature == "" ||
		msg.Content[1].Type != "text" || msg.Content[1].Text == "" {
		t.Fatalf("stream: got %+v; want a signed thinking block, then text", msg.Content)
	}

	params.Messages = append(params.Messages, msg.ToParam(), anthropic1.NewUserMessage(anthropic1.NewTextBlock("And tomorrow?")))
	res, err := client.Messages.New(ctx, params)
	if err != nil || len(res.Content) != 2 || res.Content[0].Signature == "" || res.Content[1].Text == "" {
		t.Fatalf("the next turn, with the signed block sent back: got %+v, %v; want thinking and text", res, err)
	}

	for _, model := range []string{"m-openai", "m-gemini"} {
		res, err := client.Messages.New(ctx, anthropic1.MessageNewParams{Model: anthropic1.Model(model), MaxTokens: 5,
			Messages: []anthropic1.MessageParam{anthropic1.NewUserMessage(anthropic1.NewTextBlock("hello"))}})
		if err != nil || len(res.Content) == 0 || res.Content[0].Text == "" || res.Usage.OutputTokens != 5 || res.StopReason != anthropic1.StopReasonMaxTokens {
			t.Errorf("%s non-stream: got %+v, %v; want text, 5 output tokens, max_tokens", model, res, err)
		}
	}

	_, err = client.Messages.New(ctx, anthropic1.MessageNewParams{Model: "m-nope", MaxTokens: 5,
		Messages: []anthropic1.MessageParam{anthropic1.NewUserMessage(anthropic1.NewTextBlock("hello"))}})
	var apiErr *anthropic1.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: got %v, want a 404 *anthropic.Error", err)
	}
	if got := len(e.waitEntries(t, 5)); got < 5 {
		t.Errorf("got %d usage entries, want one per request", got)
	}
}
