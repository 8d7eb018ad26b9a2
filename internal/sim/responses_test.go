package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func responsesSDK(ts *httptest.Server, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(ts.URL + "/v1/"), option.WithAPIKey("sim"),
		option.WithHTTPClient(ts.Client()), option.WithMaxRetries(0)}, opts...)...)
}

// simStream is what a Responses stream of the sim delivered, read with
// openai-go.
type simStream struct {
	types    []string
	final    responses.Response
	terminal string
	text     string // output_text deltas joined
	args     string // function_call_arguments deltas joined
	itemDone responses.ResponseOutputItemUnion
}

// readSimStream reads a stream with the SDK, checking sequence numbers 0,
// 1, 2, … and that the terminal event, if any, is last; err is the
// stream's.
func readSimStream(t *testing.T, c openai.Client, params responses.ResponseNewParams, opts ...option.RequestOption) (simStream, error) {
	t.Helper()
	stream := c.Responses.NewStreaming(context.Background(), params, opts...)
	defer stream.Close()
	var s simStream
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(s.types)) {
			t.Errorf("event %d (%s): sequence_number %d", len(s.types), ev.Type, ev.SequenceNumber)
		}
		if s.terminal != "" {
			t.Errorf("event %s after the terminal %s", ev.Type, s.terminal)
		}
		s.types = append(s.types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			s.text += ev.Delta
		case "response.function_call_arguments.delta":
			s.args += ev.Delta
		case "response.output_item.done":
			s.itemDone = ev.AsResponseOutputItemDone().Item
		case "response.completed", "response.incomplete", "response.failed":
			s.final, s.terminal = ev.Response, ev.Type
		}
	}
	return s, stream.Err()
}

func simParams(maxOutput int64) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model:        "sim-gpt",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me about streaming latency.")},
	}
	if maxOutput > 0 {
		p.MaxOutputTokens = openai.Int(maxOutput)
	}
	return p
}

// TestResponsesSDK: openai-go's Responses client reads the sim's stream
// and answer: the events in OpenAI's order with sequence numbers from 0,
// the text of the deltas equal to the terminal response's and to the
// non-streamed answer's, the usage, max_output_tokens ending incomplete.
func TestResponsesSDK(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	c := responsesSDK(ts, option.WithHeader(HeaderSeed, "5"))
	for _, tt := range []struct {
		name      string
		maxOutput int64
		terminal  string
		status    responses.ResponseStatus
		tokens    int64
	}{{"completed", 0, "response.completed", "completed", 12}, {"incomplete", 16, "response.incomplete", "incomplete", 12}} {
		t.Run(tt.name, func(t *testing.T) {
			params := simParams(tt.maxOutput)
			tokens := tt.tokens
			var opts []option.RequestOption
			if tt.maxOutput > 0 {
				opts = append(opts, option.WithHeader(HeaderTokens, "40"))
				tokens = tt.maxOutput
			}
			s, err := readSimStream(t, c, params, opts...)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			res := s.final
			wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
			if strings.Join(s.types[:5], " ") != strings.Join(wantTypes, " ") {
				t.Errorf("events: got %v, want them to begin %v", s.types, wantTypes)
			}
			wantEnd := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", tt.terminal}
			if got := s.types[len(s.types)-4:]; strings.Join(got, " ") != strings.Join(wantEnd, " ") {
				t.Errorf("events: got %v, want them to end %v", s.types, wantEnd)
			}
			if s.terminal != tt.terminal || res.Status != tt.status || res.OutputText() != s.text || s.text == "" ||
				res.Usage.OutputTokens != tokens || res.Usage.InputTokens <= 0 || res.Usage.TotalTokens != res.Usage.InputTokens+tokens ||
				!strings.HasPrefix(res.ID, "resp_") || res.Model != "sim-gpt" || res.Object != "response" {
				t.Errorf("stream: got %s %s (deltas %q); want %s with the deltas' text and %d output tokens", s.terminal, res.RawJSON(), s.text, tt.status, tokens)
			}
			if tt.maxOutput > 0 && (res.IncompleteDetails.Reason != "max_output_tokens" || res.MaxOutputTokens != tt.maxOutput) {
				t.Errorf("incomplete: got %s, want reason max_output_tokens", res.RawJSON())
			}
			got, err := c.Responses.New(context.Background(), params, opts...)
			if err != nil {
				t.Fatalf("non-stream: %v", err)
			}
			if got.Status != tt.status || got.OutputText() != s.text || got.Usage.OutputTokens != tokens || len(got.Output) != 1 {
				t.Errorf("non-stream: got %s, want %s with the stream's text %q", got.RawJSON(), tt.status, s.text)
			}
		})
	}
}

// TestResponsesSDKFunctionCall: X-Sim-Tool-Call makes the answer a
// function_call item whose streamed arguments join to the done item's
// JSON arguments; the tool-result turn is accepted.
func TestResponsesSDKFunctionCall(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	c := responsesSDK(ts, option.WithHeader(HeaderToolCall, "get_weather"))
	params := simParams(0)
	params.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}
	s, err := readSimStream(t, c, params)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(s.final.Output) != 1 {
		t.Fatalf("output: got %s, want one function_call", s.final.RawJSON())
	}
	call := s.final.Output[0].AsFunctionCall()
	var args map[string]any
	if s.final.Status != "completed" || call.Type != "function_call" || call.Name != "get_weather" || !strings.HasPrefix(call.CallID, "call_") ||
		call.Arguments != s.args || json.Unmarshal([]byte(s.args), &args) != nil || args["city"] == nil || s.itemDone.Arguments.OfString != s.args {
		t.Errorf("function call: got %s (deltas %q), want get_weather with the deltas' JSON arguments", s.final.RawJSON(), s.args)
	}
	got, err := c.Responses.New(context.Background(), params)
	if err != nil || len(got.Output) != 1 || got.Output[0].AsFunctionCall().Arguments != call.Arguments {
		t.Fatalf("non-stream: got %v, want the same call", err)
	}
	// The tool-result turn: the call and its output as input items.
	next := simParams(0)
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp":21}`)
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
		out,
	}}
	plain := responsesSDK(ts)
	res, err := plain.Responses.New(context.Background(), next)
	if err != nil || res.OutputText() == "" {
		t.Fatalf("tool-result turn: %v", err)
	}
}

// TestResponsesFaults: the fault headers on the Responses endpoint: a
// failure status before the stream, response.failed (with the usage so
// far) for error-at, a cut and a malformed event the SDK reports.
func TestResponsesFaults(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	c := responsesSDK(ts)
	params := simParams(0)

	_, err := readSimStream(t, c, params, option.WithHeader(HeaderFailStatus, "429"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("fail-status: got %v, want a 429", err)
	}

	s, err := readSimStream(t, c, params, option.WithHeader(HeaderErrorAt, "4"))
	if err != nil || s.terminal != "response.failed" || s.final.Status != "failed" || s.final.Error.Code != "server_error" ||
		s.final.Usage.OutputTokens != 3 || s.final.Usage.InputTokens <= 0 || s.final.OutputText() != s.text {
		t.Errorf("error-at: got %v %s %s, want response.failed with 3 output tokens", err, s.terminal, s.final.RawJSON())
	}

	s, err = readSimStream(t, c, params, option.WithHeader(HeaderCutAt, "3"))
	if err == nil || s.terminal != "" {
		t.Errorf("cut-at: got %v after %v, want an error and no terminal event", err, s.types)
	}

	s, err = readSimStream(t, c, params, option.WithHeader(HeaderMalformedAt, "3"))
	if err == nil || s.terminal != "" {
		t.Errorf("malformed-at: got %v after %v, want an error and no terminal event", err, s.types)
	}
}

// TestResponsesValidation: what OpenAI refuses, the sim refuses with its
// error object: a missing model or input, max_output_tokens below 16.
func TestResponsesValidation(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, tt := range []struct{ name, body, param string }{
		{"no model", `{"input":"hi"}`, "model"},
		{"no input", `{"model":"m"}`, "input"},
		{"small max_output_tokens", `{"model":"m","input":"hi","max_output_tokens":5}`, "max_output_tokens"},
		{"input not text", `{"model":"m","input":5}`, "input"},
		{"message without content", `{"model":"m","input":[{"role":"user"}]}`, "input[0].content"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct {
					Type, Message string
					Param         *string
				}
			}
			json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != tt.param {
				t.Errorf("got %d %+v, want 400 naming %s", resp.StatusCode, e.Error, tt.param)
			}
		})
	}
}
