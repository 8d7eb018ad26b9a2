package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// relayOver is a minimal OpenAI-dialect front for c: it writes each
// translated event as the relay does, then "[DONE]".
func relayOver(t *testing.T, c *Client) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var chat api.ChatRequest
		if err := json.Unmarshal(body, &chat); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &provider.Request{Model: chat.Model, Stream: true, Body: body, Chat: &chat}
		st, err := c.Open(r.Context(), req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer st.Close()
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			ev, err := st.Next()
			if err == io.EOF {
				io.WriteString(w, "data: [DONE]\n\n")
				return
			}
			if err != nil {
				fmt.Fprintf(w, "data: {\"error\":{\"message\":%q}}\n\n", err.Error())
				return
			}
			if len(ev.Data) > 0 {
				fmt.Fprintf(w, "data: %s\n\n", ev.Data)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOpenAIClientAccumulates: the official OpenAI Go SDK reassembles text
// and parallel tool calls from the translated stream, with usage.
func TestOpenAIClientAccumulates(t *testing.T) {
	body, err := os.ReadFile("testdata/stream/parallel_calls.sse")
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, 200, "text/event-stream", body, nil)
	front := relayOver(t, testClient(t, up.URL))
	client := openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "gemini-2.5-flash",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris and Tokyo, time?")},
	})
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused chunk %s", stream.Current().RawJSON())
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("got %d choices, want 1", len(acc.Choices))
	}
	msg := acc.Choices[0].Message
	if msg.Content != "Let me check both cities." {
		t.Errorf("got content %q, want %q", msg.Content, "Let me check both cities.")
	}
	if acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("got finish reason %q, want tool_calls", acc.Choices[0].FinishReason)
	}
	want := []struct{ name, args string }{
		{"get_weather", `{"location":"Paris"}`},
		{"get_weather", `{"location":"Tokyo","note":"say \"hi\"\n"}`},
		{"get_time", `{}`},
	}
	if len(msg.ToolCalls) != len(want) {
		t.Fatalf("got %d tool calls, want %d: %+v", len(msg.ToolCalls), len(want), msg.ToolCalls)
	}
	ids := map[string]bool{}
	for i, w := range want {
		tc := msg.ToolCalls[i]
		if tc.Function.Name != w.name || compact(t, tc.Function.Arguments) != w.args {
			t.Errorf("tool call %d: got %s(%s), want %s(%s)", i, tc.Function.Name, tc.Function.Arguments, w.name, w.args)
		}
		if tc.ID == "" || ids[tc.ID] {
			t.Errorf("tool call %d: id %q is empty or repeated", i, tc.ID)
		}
		ids[tc.ID] = true
	}
	if len(finished) != len(want) {
		t.Errorf("got %d JustFinishedToolCall events, want %d", len(finished), len(want))
	}
	if acc.Usage.PromptTokens != 60 || acc.Usage.CompletionTokens != 30 || acc.Usage.TotalTokens != 90 {
		t.Errorf("got usage %+v, want 60 + 30 = 90", acc.Usage)
	}
}

// TestOpenAIClientText: text and thoughts; the SDK sees the text, the
// usage counts the thoughts as reasoning tokens.
func TestOpenAIClientText(t *testing.T) {
	body, err := os.ReadFile("testdata/stream/thoughts.sse")
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, 200, "text/event-stream", body, nil)
	front := relayOver(t, testClient(t, up.URL))
	client := openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "gemini-2.5-flash",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("2+2?")},
	})
	var acc openai.ChatCompletionAccumulator
	reasoning := ""
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, ch := range chunk.Choices {
			var d struct {
				ReasoningContent string `json:"reasoning_content"`
			}
			json.Unmarshal([]byte(ch.Delta.RawJSON()), &d)
			reasoning += d.ReasoningContent
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "2 + 2 = 4." {
		t.Errorf("got content %q, want %q", got, "2 + 2 = 4.")
	}
	if want := "**Adding the numbers**\n\nTwo plus two is four.I should answer briefly."; reasoning != want {
		t.Errorf("got reasoning %q, want %q", reasoning, want)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokensDetails.ReasoningTokens != 52 || acc.Usage.CompletionTokens != 58 {
		t.Errorf("got finish %q, usage %+v, want stop and 58 completion tokens of which 52 reasoning", acc.Choices[0].FinishReason, acc.Usage)
	}
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("arguments %q are not JSON: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
