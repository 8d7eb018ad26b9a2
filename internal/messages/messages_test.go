package messages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	anthropicprov "github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/provider/gemini"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// TestToChat: each Anthropic request turns into the OpenAI request a route
// needs.
func TestToChat(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
	}{
		{"text and system with cache_control",
			`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}],"stop_sequences":["END"],"temperature":0.5,"top_k":5,"metadata":{"user_id":"u1"}}`,
			`{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"hi"}],"max_tokens":10,"temperature":0.5,"stop":["END"],"user":"u1"}`},
		{"tool round trip",
			`{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},
			 "messages":[{"role":"user","content":"weather?"},
			  {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Seoul"}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},{"type":"text","text":"and tomorrow?"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":"weather?"},
			  {"role":"assistant","content":"Let me check.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Seoul\"}"}}],"reasoning_content":"hmm","thinking_blocks":[{"type":"thinking","thinking":"hmm","signature":"s"}]},
			  {"role":"tool","content":"sunny","tool_call_id":"toolu_1"},{"role":"user","content":"and tomorrow?"}],
			 "stream":true,"stream_options":{"include_usage":true},"max_tokens":10,
			 "tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
			 "tool_choice":"required","parallel_tool_calls":false}`},
		{"image and thinking budget",
			`{"model":"m","max_tokens":10,"thinking":{"type":"enabled","budget_tokens":4000},"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"text","text":"what?"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}},{"type":"text","text":"what?"}]}],"max_tokens":10,"tool_choice":{"function":{"name":"f"},"type":"function"},"reasoning_effort":"medium"}`},
		{"system messages within the conversation, Claude Code's billing header left out",
			`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.197.3d3; cc_entrypoint=sdk-cli;"},{"type":"text","text":"sys"}],
			 "messages":[{"role":"user","content":"hi"},{"role":"system","content":"agents: a, b"},{"role":"assistant","content":"ok"},
			  {"role":"system","content":[{"type":"text","text":"later","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"go"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"},{"role":"system","content":"agents: a, b"},{"role":"assistant","content":"ok"},
			  {"role":"system","content":[{"type":"text","text":"later","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"go"}],"max_tokens":10}`},
		{"only the billing header as system",
			`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.197.3d3;"}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`},
		{"adaptive thinking with output_config effort and a JSON schema",
			`{"model":"m","max_tokens":10,"thinking":{"type":"adaptive"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
			 "output_config":{"effort":"max","format":{"type":"json_schema","schema":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}},
			 "messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"reasoning_effort":"high",
			 "response_format":{"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}}}`},
		{"output_config effort wins over a thinking budget",
			`{"model":"m","max_tokens":10,"thinking":{"type":"enabled","budget_tokens":1024},"output_config":{"effort":"medium"},"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"reasoning_effort":"medium"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			if err := json.Unmarshal([]byte(tt.in), &r); err != nil {
				t.Fatal(err)
			}
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
			c, err := r.ToChat()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(c)
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Errorf("got  %s\nwant %s", got, compactJSON(t, tt.want))
			}
		})
	}
}

func TestToChatErrors(t *testing.T) {
	for _, tt := range []struct{ in, param string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"m","max_tokens":1,"messages":[]}`, "messages"},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"tool","content":"x"}]}`, "messages[0].role"},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"system","content":[{"type":"image"}]}]}`, "messages[1].content[0].type"},
		{`{"model":"m","max_tokens":1,"output_config":{"effort":"extreme"},"messages":[{"role":"user","content":"x"}]}`, "output_config.effort"},
		{`{"model":"m","max_tokens":1,"output_config":{"format":{"type":"regex"}},"messages":[{"role":"user","content":"x"}]}`, "output_config.format.type"},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"document","source":{}}]}]}`, "messages[0].content[0]"},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"f"}]}]}`, "messages[0].content[0].type"},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"search_result","source":"s"}]}]}]}`, "messages[0].content[0].content[0].type"},
		{`{"model":"m","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "tools[0].type"},
	} {
		var r Request
		if err := json.Unmarshal([]byte(tt.in), &r); err != nil {
			t.Fatal(err)
		}
		err := r.Validate()
		if err == nil {
			_, err = r.ToChat()
		}
		me, ok := err.(*Error)
		if !ok || me.Param != tt.param {
			t.Errorf("%s: got %v, want an error naming %s", tt.in, err, tt.param)
		}
	}
}

// TestEncoderOfficialClient: OpenAI chunks with text, a tool call streamed
// in pieces, a finish and a usage chunk with cached tokens, written by the
// Encoder and read by anthropic-sdk-go: one text block, one tool_use block
// with its input parsed, stop_reason tool_use, usage split as Anthropic
// counts it.
func TestEncoderOfficialClient(t *testing.T) {
	chunks := []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Checking \"Seoul\"."},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Seoul\"}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":12,"total_tokens":112,"prompt_tokens_details":{"cached_tokens":60,"cache_write_tokens":10}}}`,
	}
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	enc := NewEncoder("claude-alias")
	for _, c := range chunks {
		if err := enc.Event(w, &sse.Event{Data: []byte(c)}, &api.ChunkInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Done(w); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(rw.Header())
		rw.Write(buf.Bytes())
	}))
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("x"), option.WithMaxRetries(0))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-alias", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v\n%s", err, buf.Bytes())
	}
	if len(msg.Content) != 3 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != "think" ||
		msg.Content[1].Text != `Checking "Seoul".` || msg.Content[2].Type != "tool_use" || msg.Content[2].Name != "get_weather" || msg.Content[2].ID != "call_1" {
		t.Fatalf("got content %+v\n%s", msg.Content, buf.Bytes())
	}
	var input struct{ City string }
	if err := json.Unmarshal(msg.Content[2].Input, &input); err != nil || input.City != "Seoul" {
		t.Errorf("tool input: got %s, %v; want {\"city\":\"Seoul\"}", msg.Content[2].Input, err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.ID != "msg_chatcmpl-1" || msg.Model != "claude-alias" ||
		msg.Usage.InputTokens != 30 || msg.Usage.CacheReadInputTokens != 60 || msg.Usage.CacheCreationInputTokens != 10 || msg.Usage.OutputTokens != 12 {
		t.Errorf("got stop %q id %q model %q usage %+v; want tool_use, msg_chatcmpl-1, claude-alias, 30 input + 60 read + 10 written, 12 output",
			msg.StopReason, msg.ID, msg.Model, msg.Usage)
	}
}

// TestEncoderReset: what an abandoned attempt started is forgotten, so the
// next attempt's stream starts with its own message_start.
func TestEncoderReset(t *testing.T) {
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	enc := NewEncoder("m")
	enc.Event(w, &sse.Event{Data: []byte(`{"id":"a","choices":[{"index":0,"delta":{"content":"x"}}]}`)}, &api.ChunkInfo{})
	enc.Reset()
	buf.Reset()
	enc.Event(w, &sse.Event{Data: []byte(`{"id":"b","choices":[{"index":0,"delta":{"content":"y"}}]}`)}, &api.ChunkInfo{})
	if !bytes.HasPrefix(buf.Bytes(), []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\"")) ||
		!bytes.Contains(buf.Bytes(), []byte(`"index":0,"content_block":{"type":"text"`)) {
		t.Errorf("after Reset: got %s", buf.Bytes())
	}
}

func TestFromCompletion(t *testing.T) {
	body := `{"id":"chatcmpl-9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok","reasoning_content":"r","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":4}}}`
	got, err := FromCompletion([]byte(body), "alias")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"msg_chatcmpl-9","type":"message","role":"assistant","model":"alias","content":[{"type":"thinking","thinking":"r"},{"type":"text","text":"ok"},{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":6,"output_tokens":3,"cache_read_input_tokens":4,"cache_creation_input_tokens":0}}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestErrorBody(t *testing.T) {
	openai := []byte(`{"error":{"message":"boom","type":"server_error","code":"x","param":null}}`)
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
		413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "api_error"} {
		want := `{"type":"error","error":{"type":"` + typ + `","message":"boom"}}`
		if got := ErrorBody(status, openai); !jsonEqual(t, got, []byte(want)) {
			t.Errorf("%d: got %s, want %s", status, got, want)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func compactJSON(t *testing.T, s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// BenchmarkEncoderTextChunk is the cost of writing one relayed OpenAI text
// chunk as Anthropic's content_block_delta (the /v1/messages stream path).
func BenchmarkEncoderTextChunk(b *testing.B) {
	w := sse.NewWriter(io.Discard)
	enc := NewEncoder("m")
	ev := &sse.Event{Data: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}`)}
	info := &api.ChunkInfo{Content: true}
	enc.Event(w, ev, info) // message_start, the block's start
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.Event(w, ev, info); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncoderPassthrough is the same chunk through the OpenAI
// encoder, which writes it as it came: the baseline of a translated chunk.
func BenchmarkEncoderPassthrough(b *testing.B) {
	w := sse.NewWriter(io.Discard)
	ev := &sse.Event{Data: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}`)}
	info := &api.ChunkInfo{Content: true}
	b.ReportAllocs()
	for b.Loop() {
		if err := relay.OpenAI.Event(w, ev, info); err != nil {
			b.Fatal(err)
		}
	}
}

// encode writes chunks through an Encoder and returns the Anthropic events.
func encode(t *testing.T, chunks ...string) []event {
	t.Helper()
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	enc := NewEncoder("m")
	for _, c := range chunks {
		if err := enc.Event(w, &sse.Event{Data: []byte(c)}, &api.ChunkInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Done(w); err != nil {
		t.Fatal(err)
	}
	return readEvents(t, buf.Bytes())
}

// event is one Anthropic event as a client reads it.
type event struct {
	Name string
	Data map[string]any
	Raw  string
}

func readEvents(t *testing.T, stream []byte) []event {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(stream), 4<<20)
	r.NoDone = true
	var out []event
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		e := event{Name: string(ev.Name), Raw: string(ev.Data)}
		if err := json.Unmarshal(ev.Data, &e.Data); err != nil {
			t.Fatalf("event %s: %v: %s", ev.Name, err, ev.Data)
		}
		out = append(out, e)
	}
}

// stopOf returns message_delta's stop_reason and stop_sequence.
func stopOf(t *testing.T, evs []event) (reason string, seq any) {
	t.Helper()
	for _, e := range evs {
		if e.Name == "message_delta" {
			d := e.Data["delta"].(map[string]any)
			reason, _ = d["stop_reason"].(string)
			return reason, d["stop_sequence"]
		}
	}
	t.Fatal("no message_delta")
	return "", nil
}

// TestStopReasonToolUse: a turn that holds tool calls ends tool_use, also
// when the OpenAI-dialect upstream finished it "stop" (or not at all);
// max_tokens and refusal say more and stay. Streamed and not.
func TestStopReasonToolUse(t *testing.T) {
	const call = `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`
	text := `{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}`
	finish := func(r string) string {
		return `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"` + r + `"}]}`
	}
	for _, tt := range []struct {
		name   string
		chunks []string
		finish string // the non-stream answer's finish_reason
		calls  bool
		want   string
	}{
		{"calls, finish stop", []string{text, call, finish("stop")}, "stop", true, "tool_use"},
		{"calls, finish tool_calls", []string{call, finish("tool_calls")}, "tool_calls", true, "tool_use"},
		{"calls, no finish", []string{call}, "", true, "tool_use"},
		{"calls, finish length", []string{call, finish("length")}, "length", true, "max_tokens"},
		{"calls, finish content_filter", []string{call, finish("content_filter")}, "content_filter", true, "refusal"},
		{"text, finish stop", []string{text, finish("stop")}, "stop", false, "end_turn"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := stopOf(t, encode(t, tt.chunks...)); got != tt.want {
				t.Errorf("stream: got stop_reason %q, want %q", got, tt.want)
			}
			msg := `{"role":"assistant","content":"hi"}`
			if tt.calls {
				msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
			}
			body := `{"id":"c","choices":[{"index":0,"message":` + msg + `,"finish_reason":"` + tt.finish + `"}]}`
			out, err := FromCompletion([]byte(body), "m")
			if err != nil {
				t.Fatal(err)
			}
			var r Response
			json.Unmarshal(out, &r)
			if r.StopReason != tt.want {
				t.Errorf("non-stream: got stop_reason %q, want %q", r.StopReason, tt.want)
			}
		})
	}
}

// TestRefusal: an OpenAI refusal (structured outputs: the model's words
// in delta.refusal or message.refusal, content null, finish_reason stop)
// reaches a Messages client as text with stop_reason refusal, streamed
// and not; it was an empty answer ending end_turn (replay corpus,
// openai/documented-refusal).
func TestRefusal(t *testing.T) {
	evs := encode(t, `{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"refusal":"I can't help with that."}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	if got := blocks(t, evs); len(got) != 1 || got[0] != "text:I'm sorry, I can't help with that." {
		t.Errorf("stream: got blocks %q, want one text block with the refusal", got)
	}
	if got, _ := stopOf(t, evs); got != "refusal" {
		t.Errorf("stream: got stop_reason %q, want refusal", got)
	}
	out, err := FromCompletion([]byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	var r Response
	json.Unmarshal(out, &r)
	if len(r.Content) != 1 || r.Content[0].Type != "text" || r.Content[0].Text != "I can't help with that." || r.StopReason != "refusal" {
		t.Errorf("non-stream: got %s, want the refusal as text, stop_reason refusal", out)
	}
}

// TestReasoningField: the reasoning of an upstream that names it
// "reasoning" (OpenRouter, recent vLLM) is a thinking block, streamed as
// it was and now also not streamed, where it was dropped (replay corpus,
// openai/constructed-openrouter-reasoning).
func TestReasoningField(t *testing.T) {
	evs := encode(t, `{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Two plus three."}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"5"},"finish_reason":"stop"}]}`)
	if got := blocks(t, evs); len(got) != 2 || got[0] != "thinking:Two plus three." || got[1] != "text:5" {
		t.Errorf("stream: got blocks %q, want the thinking, then the text", got)
	}
	out, err := FromCompletion([]byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"5","reasoning":"Two plus three."},"finish_reason":"stop"}]}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	var r Response
	json.Unmarshal(out, &r)
	if len(r.Content) != 2 || r.Content[0].Type != "thinking" || r.Content[0].Thinking != "Two plus three." || r.Content[1].Text != "5" {
		t.Errorf("non-stream: got %s, want a thinking block, then the text", out)
	}
}

// blocks checks that evs open and close content blocks as Anthropic does
// (each block's start, its deltas, its stop, before the next block starts,
// indices from 0) and returns each block as "type name id: text" with the
// deltas' text or partial JSON joined.
func blocks(t *testing.T, evs []event) []string {
	t.Helper()
	var out []string
	open := -1
	for _, e := range evs {
		switch e.Name {
		case "content_block_start":
			ix := int(e.Data["index"].(float64))
			if open >= 0 || ix != len(out) {
				t.Fatalf("content_block_start %d while block %d is open, %d started before:\n%s", ix, open, len(out), raw(evs))
			}
			open = ix
			b := e.Data["content_block"].(map[string]any)
			s := b["type"].(string)
			if b["type"] == "tool_use" {
				s += " " + b["name"].(string) + " " + b["id"].(string)
			}
			out = append(out, s+":")
		case "content_block_delta":
			if ix := int(e.Data["index"].(float64)); ix != open {
				t.Fatalf("delta for block %d while block %d is open:\n%s", ix, open, raw(evs))
			}
			d := e.Data["delta"].(map[string]any)
			for _, k := range []string{"text", "thinking", "partial_json"} {
				if s, ok := d[k].(string); ok {
					out[open] += s
				}
			}
		case "content_block_stop":
			if ix := int(e.Data["index"].(float64)); ix != open {
				t.Fatalf("stop of block %d while block %d is open:\n%s", ix, open, raw(evs))
			}
			open = -1
		}
	}
	if open >= 0 {
		t.Fatalf("block %d never stopped:\n%s", open, raw(evs))
	}
	return out
}

func raw(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Name + " " + e.Raw + "\n")
	}
	return b.String()
}

// toolDelta is a tool_calls chunk of one element; index < 0 leaves it out.
func toolDelta(index int, id, name, args string) string {
	tc := map[string]any{"function": map[string]string{"arguments": args}}
	if index >= 0 {
		tc["index"] = index
	}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
		tc["function"].(map[string]string)["name"] = name
	}
	b, _ := json.Marshal(map[string]any{"id": "c", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}}}})
	return string(b)
}

// TestToolCallsByIndex: each tool call is its own tool_use block, routed by
// its tool_calls index, and the blocks open and close one after the other
// as Anthropic's do, whatever order the calls' pieces came in.
func TestToolCallsByIndex(t *testing.T) {
	finish := `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
	big := `{"q":"` + strings.Repeat("x", MaxHeld) + `"}`
	for _, tt := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"interleaved 0 1 0 1", []string{
			toolDelta(0, "call_a", "f", ""), toolDelta(1, "call_b", "g", ""),
			toolDelta(0, "", "", `{"a":`), toolDelta(1, "", "", `{"b":`),
			toolDelta(0, "", "", `"x}"}`), toolDelta(1, "", "", `[1,{"c":2}]}`), finish},
			[]string{`tool_use f call_a:{"a":"x}"}`, `tool_use g call_b:{"b":[1,{"c":2}]}`}},
		{"one after the other", []string{
			toolDelta(0, "call_a", "f", ""), toolDelta(0, "", "", `{"a":1`), toolDelta(0, "", "", `}`),
			toolDelta(1, "call_b", "g", `{"b":"\"}"}`), finish},
			[]string{`tool_use f call_a:{"a":1}`, `tool_use g call_b:{"b":"\"}"}`}},
		{"three interleaved, the second completes first", []string{
			toolDelta(0, "call_a", "f", `{"a":`), toolDelta(1, "call_b", "g", `{"b":2}`), toolDelta(2, "call_c", "h", `{"c":`),
			toolDelta(2, "", "", `3}`), toolDelta(0, "", "", `1}`), finish},
			[]string{`tool_use f call_a:{"a":1}`, `tool_use g call_b:{"b":2}`, `tool_use h call_c:{"c":3}`}},
		{"no index: a new id starts a call", []string{
			toolDelta(-1, "call_a", "f", `{"a"`), toolDelta(-1, "", "", `:1}`), toolDelta(-1, "call_b", "g", `{}`), finish},
			[]string{`tool_use f call_a:{"a":1}`, `tool_use g call_b:{}`}},
		{"index 0 for every call, ids differ", []string{
			toolDelta(0, "call_a", "f", `{"a":1}`), toolDelta(0, "call_b", "g", `{"b":2}`), finish},
			[]string{`tool_use f call_a:{"a":1}`, `tool_use g call_b:{"b":2}`}},
		{"text, then calls, no finish", []string{
			`{"id":"c","choices":[{"index":0,"delta":{"content":"Let me see."}}]}`,
			toolDelta(0, "call_a", "f", `{"a":`), toolDelta(1, "call_b", "g", `{"b":2}`)},
			[]string{`text:Let me see.`, `tool_use f call_a:{"a":`, `tool_use g call_b:{"b":2}`}},
		{"held past MaxHeld: every call written as far as it got", []string{
			toolDelta(0, "call_a", "f", `{"a":`), toolDelta(1, "call_b", "g", big), toolDelta(0, "", "", `1}`), finish},
			[]string{`tool_use f call_a:{"a":`, `tool_use g call_b:` + big}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := blocks(t, encode(t, tt.chunks...))
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got blocks\n%s\nwant\n%s", short(got), short(tt.want))
			}
		})
	}
}

func short(bs []string) string {
	var b strings.Builder
	for _, s := range bs {
		if len(s) > 200 {
			s = s[:100] + "…" + s[len(s)-50:]
		}
		b.WriteString(s + "\n")
	}
	return b.String()
}

// TestToolCallsStreamLive: calls sent one after the other stream as they
// come (the second call's block opens at its first chunk, not at the
// finish); only what must wait for another call is held.
func TestToolCallsStreamLive(t *testing.T) {
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	enc := NewEncoder("m")
	for i, c := range []string{toolDelta(0, "call_a", "f", `{"a":1}`), toolDelta(1, "call_b", "g", `{"b":`), toolDelta(2, "call_c", "h", `{"c":3}`)} {
		if err := enc.Event(w, &sse.Event{Data: []byte(c)}, &api.ChunkInfo{}); err != nil {
			t.Fatal(err)
		}
		var want string
		switch i {
		case 0:
			want = `{"type":"content_block_stop","index":0}`
		case 1:
			want = `"partial_json":"{\"b\":"`
		}
		if want != "" && !strings.Contains(buf.String(), want) {
			t.Fatalf("after chunk %d: got\n%s\nwant it to hold %s", i, buf.String(), want)
		}
		if i == 2 && strings.Contains(buf.String(), "call_c") {
			t.Fatalf("call_c written while call_b streams:\n%s", buf.String())
		}
	}
}

// TestInterleavedToolCallsOfficialClient: interleaved parallel calls read
// by anthropic-sdk-go: two tool_use blocks whose inputs parse.
func TestInterleavedToolCallsOfficialClient(t *testing.T) {
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	enc := NewEncoder("m")
	for _, c := range []string{
		toolDelta(0, "call_a", "get_weather", ""), toolDelta(1, "call_b", "get_time", ""),
		toolDelta(0, "", "", `{"city":`), toolDelta(1, "", "", `{"tz":`), toolDelta(0, "", "", `"Seoul"}`), toolDelta(1, "", "", `"KST"}`),
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	} {
		if err := enc.Event(w, &sse.Event{Data: []byte(c)}, &api.ChunkInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Done(w); err != nil {
		t.Fatal(err)
	}
	msg := sdkMessage(t, buf.Bytes())
	if len(msg.Content) != 2 {
		t.Fatalf("got %d blocks, want 2:\n%s", len(msg.Content), buf.Bytes())
	}
	for i, want := range []string{`{"city":"Seoul"}`, `{"tz":"KST"}`} {
		if got := string(msg.Content[i].Input); got != want {
			t.Errorf("block %d input: got %s, want %s", i, got, want)
		}
	}
}

// sdkMessage reads an event stream with anthropic-sdk-go's accumulator.
func sdkMessage(t *testing.T, stream []byte) anthropic.Message {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(rw.Header())
		rw.Write(stream)
	}))
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("x"), option.WithMaxRetries(0))
	st := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "m", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatalf("accumulate: %v\n%s", err, stream)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v\n%s", err, stream)
	}
	return msg
}

// TestStopSequence: the stop string that ended an answer, reported in the
// choice's stop_reason (vLLM's field, which the anthropic adapter writes),
// reaches the Messages client as stop_reason stop_sequence with its
// stop_sequence; a stop token id or none leaves end_turn.
func TestStopSequence(t *testing.T) {
	text := `{"id":"c","choices":[{"index":0,"delta":{"content":"1, 2, 3"}}]}`
	for _, tt := range []struct {
		name, stopReason string
		want             string
		wantSeq          any
	}{
		{"stop string", `"\n\nHuman:"`, "stop_sequence", "\n\nHuman:"},
		{"stop token id", `151643`, "end_turn", nil},
		{"null", `null`, "end_turn", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			finish := `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":` + tt.stopReason + `}]}`
			got, seq := stopOf(t, encode(t, text, finish))
			if got != tt.want || seq != tt.wantSeq {
				t.Errorf("stream: got %q %q, want %q %q", got, seq, tt.want, tt.wantSeq)
			}
			body := `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"1, 2, 3"},"finish_reason":"stop","stop_reason":` + tt.stopReason + `}]}`
			out, err := FromCompletion([]byte(body), "m")
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				StopReason   string `json:"stop_reason"`
				StopSequence any    `json:"stop_sequence"`
			}
			json.Unmarshal(out, &r)
			if r.StopReason != tt.want || r.StopSequence != tt.wantSeq {
				t.Errorf("non-stream: got %q %q, want %q %q", r.StopReason, r.StopSequence, tt.want, tt.wantSeq)
			}
		})
	}
}

// anthropicStream serves events (Anthropic's SSE) as an upstream, opens it
// through the anthropic adapter for the chat request of the Messages
// request in (as the gateway builds it), and writes the translated chunks
// with an Encoder: what a /v1/messages client of an Anthropic route whose
// request was translated reads.
func anthropicStream(t *testing.T, in, events string) []byte {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(w.Header())
		io.WriteString(w, events)
	}))
	defer up.Close()
	st, err := anthropicprov.New(up.URL, "", anthropicprov.Options{}).Open(context.Background(), providerRequest(t, in))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	enc := NewEncoder("claude-alias")
	for {
		ev, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("translated stream: %v", err)
		}
		if len(ev.Data) == 0 {
			continue
		}
		info, err := api.ScanChunk(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Event(w, ev, &info); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Done(w); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// anthropicComplete answers the Messages request in, translated, with the
// Anthropic Message answer through the anthropic adapter, and returns the
// Message the /v1/messages client gets back.
func anthropicComplete(t *testing.T, in, answer string) []byte {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer up.Close()
	req := providerRequest(t, in)
	req.Stream = false
	body, err := anthropicprov.New(up.URL, "", anthropicprov.Options{}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := FromCompletion(body, "claude-alias")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// providerRequest is the upstream request the gateway makes of the
// Messages request in: ToChat, its JSON as the body, the chat as its typed
// view.
func providerRequest(t *testing.T, in string) *provider.Request {
	t.Helper()
	var r Request
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	chat, err := r.ToChat()
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(chat)
	if err != nil {
		t.Fatal(err)
	}
	return &provider.Request{Model: "claude-up", Stream: chat.Stream, Body: body, Chat: chat}
}

// TestStopSequenceThroughAnthropic: an Anthropic upstream's stop_sequence
// reaches the /v1/messages client of a translated request, streamed and
// not, and the client's stop_sequences reach the upstream.
func TestStopSequenceThroughAnthropic(t *testing.T) {
	in := `{"model":"m","max_tokens":50,"stream":true,"stop_sequences":[", 4","END"],"messages":[{"role":"user","content":"count"}]}`
	var sent []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			StopSequences []string `json:"stop_sequences"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		sent = body.StopSequences
		http.Error(w, "no", http.StatusTeapot)
	}))
	anthropicprov.New(up.URL, "", anthropicprov.Options{}).Open(context.Background(), providerRequest(t, in))
	up.Close()
	if strings.Join(sent, "|") != ", 4|END" {
		t.Errorf("upstream got stop_sequences %q, want [\", 4\" \"END\"]", sent)
	}

	events := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"1, 2, 3\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\", 4\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	msg := sdkMessage(t, anthropicStream(t, in, events))
	if msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != ", 4" {
		t.Errorf("stream: got stop_reason %q, stop_sequence %q; want stop_sequence \", 4\"", msg.StopReason, msg.StopSequence)
	}
	out := anthropicComplete(t, in, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"1, 2, 3"}],"stop_reason":"stop_sequence","stop_sequence":", 4","usage":{"input_tokens":12,"output_tokens":9}}`)
	var r anthropic.Message
	if err := json.Unmarshal(out, &r); err != nil || r.StopReason != anthropic.StopReasonStopSequence || r.StopSequence != ", 4" {
		t.Errorf("non-stream: got %s, want stop_reason stop_sequence, stop_sequence \", 4\"", out)
	}
}

// TestThinkingThroughTranslation: a Messages request's thinking keeps its
// exact form to an Anthropic route (budget, adaptive, disabled; also in a
// tool loop), its exact budget to a Gemini route, and becomes the nearest
// reasoning_effort for an OpenAI-dialect route, whose body never holds
// "thinking" (OpenAI refuses members it does not know); metadata.user_id
// reaches both as user and metadata.user_id.
func TestThinkingThroughTranslation(t *testing.T) {
	const loop = `[{"role":"user","content":"Weather?"},
	 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}]`
	for _, tt := range []struct {
		name, thinking, msgs string
		effort               string // reasoning_effort in the OpenAI body
		anthropic            string // "thinking" in the Anthropic body
		gemini               string // generationConfig.thinkingConfig.thinkingBudget
	}{
		{"enabled", `{"type":"enabled","budget_tokens":5000}`, `[{"role":"user","content":"hi"}]`, "medium", `{"type":"enabled","budget_tokens":5000}`, "5000"},
		{"enabled, small", `{"type":"enabled","budget_tokens":1500}`, `[{"role":"user","content":"hi"}]`, "low", `{"type":"enabled","budget_tokens":1500}`, "1500"},
		{"adaptive", `{"type":"adaptive"}`, `[{"role":"user","content":"hi"}]`, "", `{"type":"adaptive"}`, "-1"},
		{"disabled", `{"type":"disabled"}`, `[{"role":"user","content":"hi"}]`, "", `{"type":"disabled"}`, "0"},
		{"enabled, in a tool loop", `{"type":"enabled","budget_tokens":3000}`, loop, "medium", `{"type":"enabled","budget_tokens":3000}`, "3000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := `{"model":"m","max_tokens":20000,"metadata":{"user_id":"u-42"},"thinking":` + tt.thinking + `,
			  "tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":` + tt.msgs + `}`
			req := providerRequest(t, in)
			var openai map[string]json.RawMessage
			json.Unmarshal(req.Body, &openai)
			if _, ok := openai["thinking"]; ok {
				t.Errorf("the OpenAI body holds thinking: %s", req.Body)
			}
			var effort string
			json.Unmarshal(openai["reasoning_effort"], &effort)
			if effort != tt.effort || string(openai["user"]) != `"u-42"` {
				t.Errorf("OpenAI body: got reasoning_effort %q, user %s; want %q, \"u-42\"", effort, openai["user"], tt.effort)
			}
			body, err := anthropicprov.Body(req, true)
			if err != nil {
				t.Fatal(err)
			}
			var a struct {
				Thinking json.RawMessage `json:"thinking"`
				Metadata json.RawMessage `json:"metadata"`
			}
			json.Unmarshal(body, &a)
			if string(a.Thinking) != tt.anthropic || string(a.Metadata) != `{"user_id":"u-42"}` {
				t.Errorf("Anthropic body: got thinking %s, metadata %s; want %s, {\"user_id\":\"u-42\"}", a.Thinking, a.Metadata, tt.anthropic)
			}
			gbody, err := gemini.Body(req)
			if err != nil {
				t.Fatal(err)
			}
			var g struct {
				GenerationConfig struct {
					ThinkingConfig struct {
						ThinkingBudget json.RawMessage `json:"thinkingBudget"`
					} `json:"thinkingConfig"`
				} `json:"generationConfig"`
			}
			json.Unmarshal(gbody, &g)
			if got := string(g.GenerationConfig.ThinkingConfig.ThinkingBudget); got != tt.gemini {
				t.Errorf("Gemini body: got thinkingBudget %s, want %s", got, tt.gemini)
			}
		})
	}
}

// redactedStream is an Anthropic stream of a redacted_thinking block, a
// signed thinking block and a tool call, as the API sends them.
const redactedStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":30,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va3pzix\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"The user wants \"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"the weather.\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIMsig1\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Paris, then.\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"Sig2\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01W\",\"name\":\"get_weather\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":3}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":60}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestThinkingBlocksRoundTrip: signed thinking and redacted_thinking blocks
// cross the chat dialect both ways without losing a signature: from a
// /v1/messages client to an Anthropic upstream (first in their turn, the
// turn's thinking kept on), and from an Anthropic upstream back to the
// /v1/messages client, streamed (thinking blocks with their
// signature_delta, read with anthropic-sdk-go) and not.
func TestThinkingBlocksRoundTrip(t *testing.T) {
	in := `{"model":"m","max_tokens":8000,"stream":true,"thinking":{"type":"enabled","budget_tokens":2000},
	  "tools":[{"name":"get_weather","input_schema":{"type":"object"}}],
	  "messages":[{"role":"user","content":"Weather?"},
	   {"role":"assistant","content":[{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},{"type":"thinking","thinking":"The user wants the weather.","signature":"EqQBCgIYAhIMsig1"},
	    {"type":"tool_use","id":"toolu_01W","name":"get_weather","input":{"city":"Paris"}}]},
	   {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01W","content":"sunny"}]}]}`
	body, err := anthropicprov.Body(providerRequest(t, in), true)
	if err != nil {
		t.Fatal(err)
	}
	var up struct {
		Thinking json.RawMessage
		Messages []struct {
			Role    string
			Content json.RawMessage
		}
	}
	json.Unmarshal(body, &up)
	want := `[{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},{"type":"thinking","thinking":"The user wants the weather.","signature":"EqQBCgIYAhIMsig1"},{"type":"tool_use","id":"toolu_01W","name":"get_weather","input":{"city":"Paris"}}]`
	if len(up.Messages) != 3 || string(up.Messages[1].Content) != want || up.Thinking == nil {
		t.Errorf("upstream body: got %s\nwant the assistant turn %s and thinking on", body, want)
	}

	check := func(how string, content []anthropic.ContentBlockUnion) {
		t.Helper()
		var got []string
		for _, b := range content {
			switch b.Type {
			case "redacted_thinking":
				got = append(got, "redacted "+b.Data)
			case "thinking":
				got = append(got, "thinking "+b.Thinking+" / "+b.Signature)
			case "tool_use":
				got = append(got, "tool_use "+b.Name+" "+compactJSON(t, string(b.Input)))
			default:
				got = append(got, b.Type)
			}
		}
		want := []string{"redacted EmwKAhgBEgy3va3pzix", "thinking The user wants the weather. / EqQBCgIYAhIMsig1", "thinking Paris, then. / Sig2", `tool_use get_weather {"city":"Paris"}`}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: got blocks\n%s\nwant\n%s", how, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	stream := anthropicStream(t, in, redactedStream)
	blocks(t, readEvents(t, stream)) // in Anthropic's order
	msg := sdkMessage(t, stream)
	check("stream", msg.Content)
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("stream: got stop_reason %q, want tool_use", msg.StopReason)
	}

	out := anthropicComplete(t, in, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[
	  {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},{"type":"thinking","thinking":"The user wants the weather.","signature":"EqQBCgIYAhIMsig1"},
	  {"type":"thinking","thinking":"Paris, then.","signature":"Sig2"},{"type":"tool_use","id":"toolu_01W","name":"get_weather","input":{"city":"Paris"}}],
	  "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":60}}`)
	var m anthropic.Message
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	check("non-stream", m.Content)
}

// TestToolResultAttachmentsAndCacheControl: images and documents inside a
// tool result, and cache_control on every block kind Anthropic takes, reach
// an Anthropic route as the client sent them (through the chat form); an
// OpenAI route gets the tool result's text in the tool message and its
// images and PDF in a user message right after, without Anthropic-only
// members.
func TestToolResultAttachmentsAndCacheControl(t *testing.T) {
	const (
		cc       = `{"type":"ephemeral"}`
		result   = `{"type":"tool_result","tool_use_id":"toolu_1","cache_control":{"type":"ephemeral","ttl":"1h"},"content":[{"type":"text","text":"the chart and the report"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"document","title":"report.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}}]}`
		errorRes = `{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"not found"}`
		textDoc  = `{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain notes"},"title":"notes","context":"mine","citations":{"enabled":true},"cache_control":{"type":"ephemeral"}}`
		urlDoc   = `{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}`
		image    = `{"type":"image","source":{"type":"url","url":"https://example.com/a.png"},"cache_control":{"type":"ephemeral"}}`
	)
	in := `{"model":"m","max_tokens":100,
	  "system":[{"type":"text","text":"sys","cache_control":` + cc + `}],
	  "tools":[{"name":"chart","description":"d","input_schema":{"type":"object"},"cache_control":` + cc + `}],
	  "messages":[{"role":"user","content":"chart it"},
	   {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"chart","input":{},"cache_control":` + cc + `},{"type":"tool_use","id":"toolu_2","name":"chart","input":{}}]},
	   {"role":"user","content":[` + result + `,` + errorRes + `,{"type":"text","text":"and these","cache_control":` + cc + `},` + image + `,` + textDoc + `,` + urlDoc + `]}]}`
	req := providerRequest(t, in)

	body, err := anthropicprov.Body(req, false)
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		System []json.RawMessage `json:"system"`
		Tools  []struct {
			CacheControl json.RawMessage `json:"cache_control"`
		} `json:"tools"`
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Messages) != 3 || len(a.Tools) != 1 {
		t.Fatalf("Anthropic body: got %s", body)
	}
	wantUser := []string{result, errorRes, `{"type":"text","text":"and these","cache_control":` + cc + `}`, image, textDoc, urlDoc}
	for _, c := range []struct {
		what      string
		got, want string
	}{
		{"system", string(a.System[0]), `{"type":"text","text":"sys","cache_control":` + cc + `}`},
		{"tool", string(a.Tools[0].CacheControl), cc},
		{"tool_use", string(a.Messages[1].Content[0]), `{"type":"tool_use","id":"toolu_1","name":"chart","input":{},"cache_control":` + cc + `}`},
		{"user turn", fmt.Sprint(len(a.Messages[2].Content)), fmt.Sprint(len(wantUser))},
	} {
		if !jsonEqual(t, []byte(c.got), []byte(c.want)) {
			t.Errorf("Anthropic body %s: got %s, want %s", c.what, c.got, c.want)
		}
	}
	for i, want := range wantUser {
		if i < len(a.Messages[2].Content) && !jsonEqual(t, a.Messages[2].Content[i], []byte(want)) {
			t.Errorf("Anthropic body user block %d: got %s, want %s", i, a.Messages[2].Content[i], want)
		}
	}

	var o struct {
		Tools    []map[string]json.RawMessage `json:"tools"`
		Messages []api.Message                `json:"messages"`
	}
	if err := json.Unmarshal(req.Body, &o); err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Tools[0]["cache_control"]; ok || bytes.Contains(req.Body, []byte(`"tool_result"`)) {
		t.Errorf("OpenAI body holds Anthropic-only members: %s", req.Body)
	}
	var roles []string
	for _, m := range o.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, " "); got != "system user assistant tool tool user user" {
		t.Fatalf("OpenAI body: got roles %s, want system user assistant tool tool user user\n%s", got, req.Body)
	}
	if got := o.Messages[3].Text(); got != "the chart and the report" {
		t.Errorf("OpenAI tool message: got %q", got)
	}
	if got := o.Messages[4].Text(); got != "Error: not found" {
		t.Errorf("OpenAI tool message: got %q", got)
	}
	attached, _ := o.Messages[5].Parts()
	if len(attached) != 2 || attached[0].ImageURL == nil || attached[0].ImageURL.URL != "data:image/png;base64,iVBORw0KGgo=" ||
		attached[1].Type != "file" || attached[1].File == nil || attached[1].File.FileData != "data:application/pdf;base64,JVBERi0x" || attached[1].File.Filename != "report.pdf" {
		t.Errorf("OpenAI attachments message: got %s", o.Messages[5].Content)
	}
	rest, _ := o.Messages[6].Parts()
	if len(rest) != 4 || rest[1].Type != "image_url" || rest[2].Type != "text" || rest[2].Text != "plain notes" || rest[3].Type != "document" {
		t.Errorf("OpenAI user message: got %s", o.Messages[6].Content)
	}
}

// TestLongUserID: a metadata.user_id longer than OpenAI's 64-byte user
// (Claude Code's is a ~150-byte JSON string) becomes a stable digest that
// fits; a short one passes as it is.
func TestLongUserID(t *testing.T) {
	long := `{"device_id":"` + strings.Repeat("d", 64) + `","account_uuid":"","session_id":"6f3c1c57-6a1d-4f0e-9d5b-2f0b7d1c9a11"}`
	a, b := userID(long), userID(long)
	if a != b || len(a) > maxUser || !strings.HasPrefix(a, "u-") {
		t.Errorf("long id: got %q and %q, want one stable digest of at most %d bytes", a, b, maxUser)
	}
	if userID(long+"x") == a {
		t.Errorf("two ids gave one digest")
	}
	if got := userID("u1"); got != "u1" {
		t.Errorf("short id: got %q, want u1", got)
	}
}
