package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/sim"
)

// The adapter against the simulator's Anthropic dialect (an independent
// implementation of the same API reference), faults included: the pair of
// servers the gateway will run.
func TestSimulator(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{}))
	defer srv.Close()
	c := anthropic.New(srv.URL, "sk-ant-sim", anthropic.Options{})
	defer c.CloseIdleConnections()
	const tools = `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	tests := []struct {
		name    string
		extra   string   // members added to the body
		headers []string // X-Sim-* pairs
		check   func(t *testing.T, chunks []api.Chunk, usage *api.Usage, err error)
	}{
		{"text", "", nil, func(t *testing.T, chunks []api.Chunk, usage *api.Usage, err error) {
			if err != io.EOF {
				t.Fatalf("got %v, want io.EOF", err)
			}
			var text strings.Builder
			for _, ch := range chunks {
				for _, c := range ch.Choices {
					text.WriteString(c.Delta.Content)
				}
			}
			if text.Len() == 0 || usage == nil || usage.CompletionTokens != 6 || usage.PromptTokens == 0 {
				t.Errorf("got text %q, usage %+v; want text and 6 completion tokens", text.String(), usage)
			}
			if last := finish(chunks); last != "length" {
				t.Errorf("got finish_reason %q, want length (max_tokens reached)", last)
			}
		}},
		{"tool call", tools, []string{"X-Sim-Tool-Call", "get_weather"}, func(t *testing.T, chunks []api.Chunk, usage *api.Usage, err error) {
			if err != io.EOF {
				t.Fatalf("got %v, want io.EOF", err)
			}
			var id, name, args string
			for _, ch := range chunks {
				for _, c := range ch.Choices {
					for _, tc := range c.Delta.ToolCalls {
						if tc.Index == nil || *tc.Index != 0 {
							t.Errorf("got tool call index %v, want 0", tc.Index)
						}
						id, name, args = id+tc.ID, name+tc.Function.Name, args+tc.Function.Arguments
					}
				}
			}
			if id == "" || name != "get_weather" || !json.Valid([]byte(args)) {
				t.Errorf("got call %q %q %q, want an id, get_weather and JSON arguments", id, name, args)
			}
			if last := finish(chunks); last != "tool_calls" {
				t.Errorf("got finish_reason %q, want tool_calls", last)
			}
		}},
		{"529 before the stream", "", []string{"X-Sim-Fail-Status", "529"}, func(t *testing.T, _ []api.Chunk, _ *api.Usage, err error) {
			var perr *provider.Error
			if !errors.As(err, &perr) || perr.Status != anthropic.StatusOverloaded || !perr.Retryable {
				t.Errorf("got %v, want a retryable 529 *provider.Error", err)
			}
		}},
		{"error event mid-stream", "", []string{"X-Sim-Error-At", "3"}, func(t *testing.T, chunks []api.Chunk, _ *api.Usage, err error) {
			var perr *provider.Error
			if !errors.As(err, &perr) || perr.Type != "overloaded_error" || !perr.Retryable || len(chunks) == 0 {
				t.Errorf("got %v after %d chunks, want chunks then a retryable overloaded_error", err, len(chunks))
			}
		}},
		{"cut mid-stream", "", []string{"X-Sim-Cut-At", "3"}, func(t *testing.T, _ []api.Chunk, _ *api.Usage, err error) {
			if !errors.Is(err, provider.ErrTruncated) {
				t.Errorf("got %v, want ErrTruncated", err)
			}
		}},
		{"malformed event", "", []string{"X-Sim-Malformed-At", "3"}, func(t *testing.T, _ []api.Chunk, _ *api.Usage, err error) {
			if !errors.Is(err, provider.ErrMalformed) {
				t.Errorf("got %v, want ErrMalformed", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"model":"claude","messages":[{"role":"user","content":"hi"}],"max_tokens":6` + tt.extra + `}`)
			chat := &api.ChatRequest{}
			if err := json.Unmarshal(body, chat); err != nil {
				t.Fatal(err)
			}
			h := http.Header{"X-Sim-Ttft": {"1ms"}, "X-Sim-Itl": {"1ms"}}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				h.Set(tt.headers[i], tt.headers[i+1])
			}
			req := &provider.Request{Model: "sim-model", Stream: true, Body: body, Chat: chat, Header: h}
			st, err := c.Open(context.Background(), req)
			if err != nil {
				tt.check(t, nil, nil, err)
				return
			}
			defer st.Close()
			var chunks []api.Chunk
			var usage *api.Usage
			for range 1000 {
				ev, err := st.Next()
				if err != nil {
					tt.check(t, chunks, usage, err)
					return
				}
				if len(ev.Data) > 0 { // the relay reads the stream's ChunkInfo instead of scanning
					got := st.(provider.ChunkInfoer).ChunkInfo()
					got.Usage.CompletionTokensDetails = nil // api.ScanChunk reads the counts and the prompt's details only
					if want, err := api.ScanChunk(ev.Data); err != nil || got != want {
						t.Fatalf("ChunkInfo() = %+v, api.ScanChunk finds %+v (%v) in %s", got, want, err, ev.Data)
					}
				}
				if len(ev.Data) == 0 {
					continue
				}
				var ch api.Chunk
				if err := json.Unmarshal(ev.Data, &ch); err != nil {
					t.Fatalf("chunk %s: %v", ev.Data, err)
				}
				if ch.Usage != nil {
					usage = ch.Usage
				}
				chunks = append(chunks, ch)
			}
			t.Fatal("no end after 1000 events")
		})
	}

	// The non-stream answer, through the same translation.
	body := []byte(`{"model":"claude","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
	chat := &api.ChatRequest{}
	json.Unmarshal(body, chat)
	out, err := c.Complete(context.Background(), &provider.Request{Model: "sim-model", Body: body, Chat: chat})
	if err != nil {
		t.Fatal(err)
	}
	var comp api.Completion
	if err := json.Unmarshal(out, &comp); err != nil || len(comp.Choices) != 1 || comp.Choices[0].Message.Content == "" ||
		comp.Usage == nil || comp.Usage.CompletionTokens != 5 || comp.Choices[0].FinishReason != "length" {
		t.Errorf("got %s (%v), want a chat.completion with content, 5 completion tokens, finish length", out, err)
	}
}

func finish(chunks []api.Chunk) string {
	var last string
	for _, ch := range chunks {
		for _, c := range ch.Choices {
			if c.FinishReason != nil {
				last = *c.FinishReason
			}
		}
	}
	return last
}
