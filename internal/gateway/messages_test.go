package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamgate/streamgate/internal/usage"
)

// anthropicClient is the official Anthropic SDK pointed at the gateway.
func anthropicClient(e *env, key string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(e.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0),
		aoption.WithHeader("X-Sim-TTFT", "1ms"), aoption.WithHeader("X-Sim-ITL", "1ms")}, opts...)...)
}

// TestMessagesOfficialClient: anthropic-sdk-go against /v1/messages routed
// to an OpenAI-dialect upstream (the sim): a stream the SDK accumulates into
// a Message with text, stop reason and usage; the same non-streaming; one
// usage entry each, like a chat request.
func TestMessagesOfficialClient(t *testing.T) {
	e := start(t, baseConfig())
	client := anthropicClient(e, devKey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := anthropic.MessageNewParams{
		Model:     "m-sim",
		MaxTokens: 6,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	}

	stream := client.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	events := map[string]int{}
	for stream.Next() {
		ev := stream.Current()
		events[string(ev.Type)]++
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text == "" ||
		msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 6 || msg.Usage.InputTokens <= 0 || msg.Model != "sim-fast" {
		t.Errorf("stream: got content %+v, stop %q, usage %+v, model %q; want one text block, max_tokens, 6 output tokens, model sim-fast (the upstream's name)",
			msg.Content, msg.StopReason, msg.Usage, msg.Model)
	}
	for _, typ := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		if events[typ] == 0 {
			t.Errorf("stream: no %s event (got %v)", typ, events)
		}
	}

	// The SDK hides pings; the wire has one after message_start, as Anthropic sends it.
	resp := do(t, "POST", e.url+"/v1/messages", "", `{"model":"m-sim","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"X-Api-Key", devKey, "Anthropic-Version", "2023-06-01")
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), "event: message_start\ndata: ") || !strings.Contains(string(raw), "event: ping\ndata: {\"type\":\"ping\"}\n\n") ||
		!strings.HasSuffix(string(raw), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("wire: got %s %q; want an event stream with a ping, ending with message_stop", resp.Header.Get("Content-Type"), raw)
	}

	res, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatalf("non-stream: %v", err)
	}
	if len(res.Content) != 1 || res.Content[0].Text == "" || res.StopReason != anthropic.StopReasonMaxTokens || res.Usage.OutputTokens != 6 || res.Type != "message" {
		t.Errorf("non-stream: got %+v; want one text block, max_tokens, 6 output tokens", res)
	}
	entries := e.waitEntries(t, 3)
	for _, i := range []int{0, 2} {
		en := entries[i]
		if en.Outcome != usage.OutcomeOK || en.OutputTokens != 6 || en.Model != "m-sim" || en.Stream != (i == 0) || en.CostUSD <= 0 {
			t.Errorf("entry %d: got %+v; want ok, 6 output tokens, m-sim, stream %v, a cost", i, en, i == 0)
		}
	}
}

// TestMessagesErrors: errors in Anthropic's shape, whatever failed: an
// unknown model, a bad key, a missing max_tokens, an upstream cut after
// content (the stream's one error event, no message_stop).
func TestMessagesErrors(t *testing.T) {
	e := start(t, baseConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := anthropic.MessageNewParams{Model: "nope", MaxTokens: 6, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}

	for _, tt := range []struct {
		name, key, model string
		status           int
		typ              string
	}{
		{"unknown model", devKey, "nope", 404, "not_found_error"},
		{"bad key", "sk-wrong", "m-sim", 401, "authentication_error"},
		{"key not allowed", "sk-narrow", "m-other", 403, "permission_error"},
	} {
		params.Model = anthropic.Model(tt.model)
		client := anthropicClient(e, tt.key)
		_, err := client.Messages.New(ctx, params)
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status || string(apiErr.Type()) != tt.typ {
			t.Errorf("%s: got %v, want %d %s", tt.name, err, tt.status, tt.typ)
		}
	}

	resp := do(t, "POST", e.url+"/v1/messages", "", `{"model":"m-sim","messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", devKey)
	b, _ := io.ReadAll(resp.Body)
	if body := string(b); resp.StatusCode != 400 || !strings.Contains(body, `"type":"error"`) ||
		!strings.Contains(body, `"type":"invalid_request_error"`) || !strings.Contains(body, "max_tokens") {
		t.Errorf("missing max_tokens: got %d %s; want 400 invalid_request_error naming max_tokens", resp.StatusCode, b)
	}

	params.Model = "m-sim"
	params.MaxTokens = 20
	cutClient := anthropicClient(e, devKey, aoption.WithHeader("X-Sim-Cut-At", "3"))
	stream := cutClient.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	stops := 0
	for stream.Next() {
		if stream.Current().Type == "message_stop" {
			stops++
		}
		msg.Accumulate(stream.Current())
	}
	if stream.Err() == nil || stops != 0 || len(msg.Content) == 0 {
		t.Errorf("cut after content: got err %v, %d message_stop, content %+v; want an error event after content and no message_stop", stream.Err(), stops, msg.Content)
	}
	en := e.waitEntries(t, 5)[4]
	if en.Outcome == usage.OutcomeOK || en.Status != http.StatusOK {
		t.Errorf("cut entry: got %+v, want status 200 and a failed outcome", en)
	}
}

// TestMessagesCountTokens answers an estimate for a model of the key.
func TestMessagesCountTokens(t *testing.T) {
	e := start(t, baseConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := anthropicClient(e, devKey)
	res, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model: "m-sim", Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("word ", 100)))},
	})
	if err != nil || res.InputTokens < 100 {
		t.Errorf("count_tokens: got %+v, %v; want at least 100 tokens", res, err)
	}
}
