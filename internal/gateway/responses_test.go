package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// responsesClient is the official OpenAI SDK pointed at the gateway, with
// fast sim pacing.
func responsesClient(e *env, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(e.url + "/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms")}, opts...)...)
}

// respStream is what a Responses stream delivered, read with the SDK.
type respStream struct {
	types    []string
	final    responses.Response // the terminal event's response
	terminal string             // its type
	text     string             // the output_text deltas joined
	args     string             // the function_call_arguments deltas joined
	argDelta int                // how many there were
}

// readResponses reads a stream with the SDK, checking what every stream
// must hold: sequence numbers 0, 1, 2, … and exactly one terminal event,
// last.
func readResponses(t *testing.T, stream interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) respStream {
	t.Helper()
	var s respStream
	n := 0
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(n) {
			t.Errorf("event %d (%s): sequence_number %d, want %d", n, ev.Type, ev.SequenceNumber, n)
		}
		if s.terminal != "" {
			t.Errorf("event %s after the terminal %s", ev.Type, s.terminal)
		}
		n++
		s.types = append(s.types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			s.text += ev.Delta
		case "response.function_call_arguments.delta":
			s.args += ev.Delta
			s.argDelta++
		case "response.completed":
			s.final, s.terminal = ev.AsResponseCompleted().Response, ev.Type
		case "response.incomplete":
			s.final, s.terminal = ev.AsResponseIncomplete().Response, ev.Type
		case "response.failed":
			s.final, s.terminal = ev.AsResponseFailed().Response, ev.Type
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if s.terminal == "" {
		t.Fatalf("stream ended without a terminal event: %v", s.types)
	}
	return s
}

// TestResponsesAcrossKinds: openai-go's Responses client through the
// gateway to an OpenAI-, an Anthropic- and a Gemini-dialect upstream:
// streamed text (and the same non-streaming), an answer cut by
// max_output_tokens (incomplete, with its usage), a function call with
// streamed arguments and the tool-result turn (stateless, the whole input
// sent again); one usage entry per request, with the upstream's usage.
func TestResponsesAcrossKinds(t *testing.T) {
	cfg, so := dialectConfig()
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		t.Run(model, func(t *testing.T) {
			client := responsesClient(e)
			params := responses.ResponseNewParams{
				Model:        model,
				Instructions: openai.String("Be brief."),
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
			}
			s := readResponses(t, client.Responses.NewStreaming(ctx, params))
			res := s.final
			if s.terminal != "response.completed" || res.Status != "completed" || res.OutputText() == "" || s.text != res.OutputText() ||
				res.Usage.OutputTokens != 8 || res.Usage.InputTokens <= 0 || res.Usage.TotalTokens != res.Usage.InputTokens+8 ||
				res.Model != "sim-fast" || !strings.HasPrefix(res.ID, "resp_") || res.Object != "response" {
				t.Errorf("stream: got %s %s (deltas %q); want completed, the deltas' text, 8 output tokens", s.terminal, res.RawJSON(), s.text)
			}
			want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
			if len(s.types) < len(want) || strings.Join(s.types[:len(want)], " ") != strings.Join(want, " ") {
				t.Errorf("stream: got events %v, want them to begin %v", s.types, want)
			}

			got, err := client.Responses.New(ctx, params)
			if err != nil {
				t.Fatalf("non-stream: %v", err)
			}
			if got.Status != "completed" || got.OutputText() == "" || got.Usage.OutputTokens != 8 || len(got.Output) != 1 || got.Output[0].Type != "message" {
				t.Errorf("non-stream: got %s; want completed with one message and 8 output tokens", got.RawJSON())
			}

			// max_output_tokens: incomplete, usage kept, stream and not.
			params.MaxOutputTokens = openai.Int(5)
			s = readResponses(t, client.Responses.NewStreaming(ctx, params))
			if s.terminal != "response.incomplete" || s.final.Status != "incomplete" || s.final.IncompleteDetails.Reason != "max_output_tokens" ||
				s.final.Usage.OutputTokens != 5 || s.final.Usage.InputTokens <= 0 || s.final.OutputText() != s.text {
				t.Errorf("max_output_tokens stream: got %s %s; want incomplete (max_output_tokens) with 5 output tokens", s.terminal, s.final.RawJSON())
			}
			got, err = client.Responses.New(ctx, params)
			if err != nil || got.Status != "incomplete" || got.IncompleteDetails.Reason != "max_output_tokens" || got.Usage.OutputTokens != 5 {
				t.Fatalf("max_output_tokens non-stream: got %v; want incomplete with 5 output tokens", err)
			}
			params.MaxOutputTokens = param.Opt[int64]{}

			// A function call, its arguments streamed; then the tool result.
			params.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
				Name: "get_weather", Description: openai.String("The weather of a city"), Strict: openai.Bool(false),
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
			}}}
			s = readResponses(t, client.Responses.NewStreaming(ctx, params, option.WithHeader(sim.HeaderToolCall, "get_weather")))
			if s.terminal != "response.completed" || len(s.final.Output) != 1 || s.final.Output[0].Type != "function_call" {
				t.Fatalf("tool call: got %s %s; want one function_call", s.terminal, s.final.RawJSON())
			}
			call := s.final.Output[0].AsFunctionCall()
			var args map[string]any
			if call.Name != "get_weather" || call.CallID == "" || json.Unmarshal([]byte(call.Arguments), &args) != nil || s.args != call.Arguments || s.argDelta == 0 {
				t.Fatalf("tool call: got %s, deltas %q; want get_weather with a call_id and JSON arguments, streamed", call.RawJSON(), s.args)
			}
			out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"sky":"clear"}`)
			out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("hello", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
				out,
			}}
			got, err = client.Responses.New(ctx, params)
			if err != nil || got.Status != "completed" || got.OutputText() == "" {
				t.Fatalf("after the tool result: got %v; want an answer", err)
			}

			entries := e.waitEntries(t, 6*(i+1))[6*i:]
			for j, en := range entries {
				if en.Model != model || en.Outcome != usage.OutcomeOK || en.InputTokens <= 0 || en.OutputTokens <= 0 || en.TokenSource != usage.SourceUsage || en.Attempts != 1 {
					t.Errorf("entry %d: got %+v; want ok on %s with the upstream's usage", j, en, model)
				}
			}
		})
	}
}

// TestResponsesJSONSchema: text.format json_schema reaches an OpenAI
// upstream as response_format, with the rest of the request translated
// (max_output_tokens as max_completion_tokens, no Responses members).
func TestResponsesJSONSchema(t *testing.T) {
	var (
		mu   sync.Mutex
		got  map[string]json.RawMessage
		path string
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		json.Unmarshal(b, &got)
		path = r.URL.Path
		mu.Unlock()
		sse.SetHeaders(w.Header())
		for _, d := range []string{
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"content":"{\"city\":"},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{"content":"\"Paris\"}"},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":2}}}`,
			"[DONE]",
		} {
			io.WriteString(w, "data: "+d+"\n\n")
		}
	}))
	defer up.Close()
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "oai", Kind: "openai", BaseURL: up.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "gpt", Routes: []config.Route{{Provider: "oai", Model: "gpt-4.1"}}})
	e := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}, "additionalProperties": false}
	client := responsesClient(e)
	s := readResponses(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model:           "gpt",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Where?")},
		MaxOutputTokens: openai.Int(100),
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "place", Schema: schema, Strict: openai.Bool(true)}}},
	}))
	if s.final.OutputText() != `{"city":"Paris"}` || s.final.Usage.InputTokensDetails.CachedTokens != 8 || s.final.Usage.OutputTokensDetails.ReasoningTokens != 2 {
		t.Errorf("got %s; want the JSON text and the upstream's usage details", s.final.RawJSON())
	}
	if f := s.final.Text.Format; f.Type != "json_schema" || f.Name != "place" {
		t.Errorf("echoed text.format: got %s", f.RawJSON())
	}
	mu.Lock()
	defer mu.Unlock()
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	wantSchema, _ := json.Marshal(schema)
	if err := json.Unmarshal(got["response_format"], &rf); err != nil || rf.Type != "json_schema" || rf.JSONSchema.Name != "place" || !rf.JSONSchema.Strict ||
		!bytes.Equal(compactJSON(rf.JSONSchema.Schema), compactJSON(wantSchema)) {
		t.Errorf("upstream response_format: got %s; want json_schema place with the schema", got["response_format"])
	}
	if path != "/v1/chat/completions" || string(got["max_completion_tokens"]) != "100" || got["input"] != nil || got["text"] != nil || got["messages"] == nil {
		t.Errorf("upstream body: got %s %v; want a chat request", path, got)
	}
	en := e.waitEntries(t, 1)[0]
	if en.InputTokens != 20 || en.OutputTokens != 6 || en.CacheReadTokens != 8 || en.Outcome != usage.OutcomeOK {
		t.Errorf("entry: got %+v", en)
	}
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	json.Compact(&out, b)
	return out.Bytes()
}

// TestResponsesFaults: a route answering 503 before its stream falls back
// to the next (completed, two attempts); a stream cut after content ends
// with exactly one terminal event, response.failed, with the output so far
// and a usage; a failure before any content with no route left is an HTTP
// error in OpenAI's shape. One usage entry each.
func TestResponsesFaults(t *testing.T) {
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
	}))
	defer unavailable.Close()
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "bad", Kind: "openai", BaseURL: unavailable.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "fb", Routes: []config.Route{{Provider: "bad", Model: "x"}, {Provider: "sim", Model: "sim-fast"}},
		Price: config.Price{Input: 1, Output: 2}})
	e := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := responses.ResponseNewParams{Model: "fb", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	client := responsesClient(e, option.WithHeader("X-Sim-Tokens", "6"))

	s := readResponses(t, client.Responses.NewStreaming(ctx, params))
	if s.terminal != "response.completed" || s.final.OutputText() == "" {
		t.Errorf("fallback stream: got %s %s; want completed", s.terminal, s.final.RawJSON())
	}
	res, err := client.Responses.New(ctx, params)
	if err != nil || res.Status != "completed" {
		t.Fatalf("fallback non-stream: got %v", err)
	}
	for _, en := range e.waitEntries(t, 2) {
		if en.Outcome != usage.OutcomeOK || en.Attempts != 2 || en.Route != "sim/sim-fast" {
			t.Errorf("fallback entry: got %+v; want ok after 2 attempts", en)
		}
	}

	params.Model = "m-sim"
	s = readResponses(t, client.Responses.NewStreaming(ctx, params, option.WithHeader("X-Sim-Cut-At", "3")))
	if s.terminal != "response.failed" || s.final.Status != "failed" || s.final.Error.Code != "stream_truncated" || s.final.OutputText() == "" ||
		s.final.OutputText() != s.text || s.final.Usage.InputTokens <= 0 || s.final.Usage.OutputTokens <= 0 {
		t.Errorf("cut: got %s %s; want response.failed (stream_truncated) with the text so far and a usage", s.terminal, s.final.RawJSON())
	}
	en := e.waitEntries(t, 3)[2]
	if en.Outcome != usage.OutcomeUpstreamError || en.Status != http.StatusOK || en.TokenSource != usage.SourceEstimated ||
		int64(en.InputTokens) != s.final.Usage.InputTokens || int64(en.OutputTokens) != s.final.Usage.OutputTokens {
		t.Errorf("cut entry: got %+v; want a failed stream billed as the response said (%s)", en, s.final.Usage.RawJSON())
	}

	_, err = client.Responses.New(ctx, params, option.WithHeader("X-Sim-Fail-Status", "503"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Message == "" {
		t.Errorf("503 without fallback: got %v; want a 503 OpenAI error", err)
	}
	e.waitEntries(t, 4)
}

// TestResponsesBadInput: a request the gateway cannot serve is a 400
// naming the field, in OpenAI's error shape, before any upstream call.
func TestResponsesBadInput(t *testing.T) {
	e := start(t, baseConfig())
	for _, tt := range []struct{ body, param, says string }{
		{`{"model":"m-sim","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", "previous_response_id is not supported"},
		{`{"model":"m-sim","input":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "input[0].content[0].type", "input_audio"},
		{`{"model":"m-sim","input":"hi","max_output_tokens":5,"max_output_tokens":500}`, "max_output_tokens", "duplicate field"},
		{`{"model":"m-sim","input":"hi","stream":"yes"}`, "stream", "must be true or false"},
		{`null`, "", "want an object"},
	} {
		resp := do(t, "POST", e.url+"/v1/responses", devKey, tt.body)
		er := readError(t, resp)
		param := ""
		if er.Error.Param != nil {
			param = *er.Error.Param
		}
		if resp.StatusCode != http.StatusBadRequest || param != tt.param || !strings.Contains(er.Error.Message, tt.says) {
			t.Errorf("%s: got %d %+v (param %q); want 400 on %q saying %q", tt.body, resp.StatusCode, er.Error, param, tt.param, tt.says)
		}
	}
	e.waitEntries(t, 5)
}

// TestResponsesThinkingRoundTrip: Claude's signed thinking reaches a Codex
// style client (include reasoning.encrypted_content, store false) as a
// reasoning item whose encrypted_content carries it; sent back with the
// call's output, the Anthropic upstream gets the assistant turn beginning
// with the thinking block, signature and all, as the API requires with
// thinking on in a tool loop.
func TestResponsesThinkingRoundTrip(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		turn := len(bodies)
		mu.Unlock()
		sse.SetHeaders(w.Header())
		ev := func(name, data string) { io.WriteString(w, "event: "+name+"\ndata: "+data+"\n\n") }
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":1}}}`)
		if turn == 1 {
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants the weather."}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIBxgCKkB=="}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`)
		} else {
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Sunny."}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
		}
		ev("message_stop", `{"type":"message_stop"}`)
	}))
	defer up.Close()
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "ant", Kind: "anthropic", BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{Name: "claude", Routes: []config.Route{{Provider: "ant", Model: "claude-sonnet-4-5"}}})
	e := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := responses.ResponseNewParams{
		Model:     "claude",
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")},
		Store:     openai.Bool(false),
		Include:   []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		Reasoning: openai.ReasoningParam{Effort: openai.ReasoningEffortMedium, Summary: openai.ReasoningSummaryAuto},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: openai.Bool(false),
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}},
	}
	client := responsesClient(e)
	s := readResponses(t, client.Responses.NewStreaming(ctx, params))
	if len(s.final.Output) != 2 || s.final.Output[0].Type != "reasoning" || s.final.Output[1].Type != "function_call" {
		t.Fatalf("first turn: got %s; want a reasoning item and a function call", s.final.RawJSON())
	}
	rs := s.final.Output[0].AsReasoning()
	if len(rs.Summary) != 1 || rs.Summary[0].Text != "The user wants the weather." || rs.EncryptedContent == "" {
		t.Errorf("reasoning: got %s; want the thinking as its summary, and encrypted_content", rs.RawJSON())
	}
	if !strings.Contains(s.final.RawJSON(), `"store":false`) {
		t.Errorf("got %s; want store false: the gateway stores nothing", s.final.RawJSON())
	}
	call := s.final.Output[1].AsFunctionCall()
	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	rp := rs.ToParam()
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
		{OfReasoning: &rp},
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
		out,
	}}
	if s = readResponses(t, client.Responses.NewStreaming(ctx, params)); s.final.OutputText() != "Sunny." {
		t.Fatalf("second turn: got %s", s.final.RawJSON())
	}
	mu.Lock()
	defer mu.Unlock()
	var second struct {
		Thinking json.RawMessage `json:"thinking"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				Thinking  string `json:"thinking"`
				Signature string `json:"signature"`
				ID        string `json:"id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(bodies[1], &second); err != nil || len(second.Messages) != 3 {
		t.Fatalf("second upstream body: %s", bodies[1])
	}
	a := second.Messages[1]
	if a.Role != "assistant" || len(a.Content) != 2 || a.Content[0].Type != "thinking" || a.Content[0].Signature != "EqQBCkYIBxgCKkB==" ||
		a.Content[0].Thinking != "The user wants the weather." || a.Content[1].Type != "tool_use" || a.Content[1].ID != "toolu_01" || len(second.Thinking) == 0 {
		t.Errorf("second upstream body: got %s; want the assistant turn to begin with the signed thinking block, and thinking on", bodies[1])
	}
}

// TestResponsesContinuation: a stream cut mid-answer and continued on the
// next route (continue_on_cut, across dialects) reaches a Responses client
// as one response: one sequence without a gap, the uninterrupted text, the
// usage of both attempts, one usage entry counting the continuation.
func TestResponsesContinuation(t *testing.T) {
	cfg, so := resilienceConfig("fallback", sim.Faults{CutAt: 6})
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "claude", Kind: "sim", Dialect: "anthropic"})
	cfg.Models[0].Routes[1].Provider = "claude"
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	want := reference(t, e, "continue me")
	client := responsesClient(e)
	s := readResponses(t, client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("continue me")}}))
	if s.terminal != "response.completed" || s.text != want || s.final.OutputText() != want || s.final.Usage.OutputTokens != 12 {
		t.Errorf("got %s %q (final %s); want completed with %q and 12 output tokens", s.terminal, s.text, s.final.RawJSON(), want)
	}
	if en := e.waitEntries(t, 2)[1]; en.Outcome != usage.OutcomeOK || en.Continuations != 1 || en.OutputTokens != 12 {
		t.Errorf("entry: got %+v; want ok, one continuation, 12 output tokens", en)
	}
}

// TestResponsesKeepAlive: keep-alive comments during a slow first token
// (they commit the headers) do not disturb the SDK's reading: the stream
// still begins with response.created, sequence 0; and when no first token
// comes at all, the committed stream ends with response.failed, its
// sequence from 0 too.
func TestResponsesKeepAlive(t *testing.T) {
	// An upstream that sends its role chunk, then nothing.
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sse.SetHeaders(w.Header())
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer stall.Close()
	cfg := baseConfig()
	cfg.Timeouts.FirstToken = config.Duration(time.Second)
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "stall", Kind: "openai", BaseURL: stall.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "stall", Routes: []config.Route{{Provider: "stall", Model: "x"}}})
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: 10 * time.Millisecond})
	resp := do(t, "POST", e.url+"/v1/responses", devKey, `{"model":"m-sim","input":"hi","stream":true,"max_output_tokens":3}`, "X-Sim-TTFT", "150ms")
	raw, _ := io.ReadAll(resp.Body)
	if !bytes.HasPrefix(raw, []byte(": keep-alive\n\n")) || !bytes.Contains(raw, []byte("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,")) {
		t.Fatalf("got %q; want keep-alive comments, then response.created", raw)
	}
	client := responsesClient(e, option.WithHeader("X-Sim-TTFT", "150ms"))
	s := readResponses(t, client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "m-sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, MaxOutputTokens: openai.Int(3)}))
	if s.terminal != "response.incomplete" || s.final.Usage.OutputTokens != 3 {
		t.Errorf("got %s %s", s.terminal, s.final.RawJSON())
	}
	s = readResponses(t, client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "m-sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, option.WithHeader("X-Sim-Stall-First", "3s")))
	if s.terminal != "response.failed" || s.final.Error.Code != "first_token_timeout" || s.types[0] != "response.created" {
		t.Errorf("no first token: got %v %s", s.types, s.final.RawJSON())
	}
	// The role chunk's events were held, then dropped with the attempt.
	s = readResponses(t, client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "stall", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}))
	if s.terminal != "response.failed" || s.final.Error.Code != "first_token_timeout" || s.types[0] != "response.created" {
		t.Errorf("role chunk, then no first token: got %v %s", s.types, s.final.RawJSON())
	}
	e.waitEntries(t, 4)
}

// BenchmarkResponsesStream100 is BenchmarkChatStream100 through
// /v1/responses: the same 100-chunk stream of the same in-memory route,
// written as Responses events (per relayed chunk: the difference with
// BenchmarkResponsesRequest divided by 99, to compare with chat's).
func BenchmarkResponsesStream100(b *testing.B) { benchResponses(b, 100) }

// BenchmarkResponsesRequest is one Responses stream of one content chunk.
func BenchmarkResponsesRequest(b *testing.B) { benchResponses(b, 1) }

func benchResponses(b *testing.B, chunks int) {
	gw := benchGateway(b, chunks, nil)
	body := []byte(`{"model":"m","stream":true,"max_output_tokens":64,"temperature":0.7,"instructions":"You are a helpful assistant.","input":[{"role":"user","content":"Write a haiku about latency and the sea, in English, with a title."}]}`)
	req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/responses", nil)
	req.Header.Set("Authorization", "Bearer sg-bench-0123456789abcdef")
	req.Header.Set("Content-Type", "application/json")
	rd := bytes.NewReader(body)
	w := &flushRecorder{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.status = 0
		gw.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("got status %d, want 200", w.status)
		}
	}
}

// TestResponsesAdditionalTools: a request as Codex sends it with its
// default model (trimmed from a capture): the tools in an
// additional_tools item, grouped in namespaces, "tools" empty, and a
// configuration_update item. A chat route serves it; a call of a
// namespaced tool comes back with its name and namespace.
func TestResponsesAdditionalTools(t *testing.T) {
	e := start(t, baseConfig())
	raw, err := os.ReadFile("../responses/testdata/codex_additional_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	body["model"], body["stream"] = "m-sim", false
	plain, _ := json.Marshal(body)
	resp := do(t, "POST", e.url+"/v1/responses", devKey, string(plain), "X-Sim-TTFT", "1ms", "X-Sim-ITL", "1ms")
	b, _ := io.ReadAll(resp.Body)
	var res responses.Response
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &res) != nil || res.OutputText() == "" || res.Reasoning.Effort != "low" {
		t.Fatalf("got %d %s; want 200 with the sim's answer, reasoning effort low", resp.StatusCode, b)
	}

	body["stream"] = true
	streamed, _ := json.Marshal(body)
	resp = do(t, "POST", e.url+"/v1/responses", devKey, string(streamed), "X-Sim-TTFT", "1ms", "X-Sim-ITL", "1ms", "X-Sim-Tool-Call", "clock__sleep")
	b, _ = io.ReadAll(resp.Body)
	var done struct {
		Response responses.Response `json:"response"`
	}
	for line := range strings.Lines(string(b)) {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"type":"response.completed"`) {
			json.Unmarshal([]byte(data), &done)
		}
	}
	out := done.Response.Output
	if resp.StatusCode != http.StatusOK || len(out) == 0 {
		t.Fatalf("got %d %s; want 200 and a completed response", resp.StatusCode, b)
	}
	call := out[len(out)-1].AsFunctionCall()
	if call.Type != "function_call" || call.Name != "sleep" || call.Namespace != "clock" {
		t.Errorf("got the call %s; want sleep in namespace clock", out[len(out)-1].RawJSON())
	}
	if !strings.Contains(string(b), `"name":"sleep","namespace":"clock"`) {
		t.Errorf("no output_item.added names sleep in clock: %s", b)
	}
	e.waitEntries(t, 2)
}
