package converse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/eventstream"
	"github.com/streamgate/streamgate/internal/provider"
)

func request(t *testing.T, body string) *provider.Request {
	t.Helper()
	var chat api.ChatRequest
	if err := json.Unmarshal([]byte(body), &chat); err != nil {
		t.Fatal(err)
	}
	return &provider.Request{Model: "m", Body: []byte(body), Chat: &chat}
}

func jsonEq(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestBody: the OpenAI chat request as a Converse request, field by field.
func TestBody(t *testing.T) {
	tests := []struct {
		name, chat, want string
	}{
		{"text and system",
			`{"model":"x","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":9,"temperature":0.5,"top_p":0.9,"stop":["END",""]}`,
			`{"messages":[{"role":"user","content":[{"text":"hi"}]}],"system":[{"text":"be brief"}],"inferenceConfig":{"maxTokens":9,"temperature":0.5,"topP":0.9,"stopSequences":["END"]}}`},
		{"cache points",
			`{"model":"x","messages":[{"role":"system","content":[{"type":"text","text":"long","cache_control":{"type":"ephemeral","ttl":"1h"}}]},{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"text":"q"},{"cachePoint":{"type":"default"}}]}],"system":[{"text":"long"},{"cachePoint":{"type":"default","ttl":"1h"}}]}`},
		{"tools, calls and results merged into alternating turns",
			`{"model":"x","messages":[{"role":"user","content":"w?"},{"role":"assistant","content":"let me see","tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"c\":\"P\"}"}},{"id":"c2","type":"function","function":{"name":"w","arguments":""}}]},{"role":"tool","tool_call_id":"c1","content":"sun"},{"role":"tool","tool_call_id":"c2","content":""},{"role":"user","content":"and?"}],"tools":[{"type":"function","function":{"name":"w","description":"weather","parameters":{"type":"object"}}},{"type":"function","function":{"name":"v"}}],"tool_choice":{"type":"function","function":{"name":"w"}}}`,
			`{"messages":[{"role":"user","content":[{"text":"w?"}]},{"role":"assistant","content":[{"text":"let me see"},{"toolUse":{"toolUseId":"c1","name":"w","input":{"c":"P"}}},{"toolUse":{"toolUseId":"c2","name":"w","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"c1","content":[{"text":"sun"}]}},{"toolResult":{"toolUseId":"c2","content":[{"text":"(empty)"}]}},{"text":"and?"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"w","description":"weather","inputSchema":{"json":{"type":"object"}}}},{"toolSpec":{"name":"v","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"tool":{"name":"w"}}}}`},
		{"tool_choice required and auto",
			`{"model":"x","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"w"}}],"tool_choice":"required"}`,
			`{"messages":[{"role":"user","content":[{"text":"hi"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"w","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"any":{}}}}`},
		{"tool_choice none without tool history withholds the tools",
			`{"model":"x","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"w"}}],"tool_choice":"none"}`,
			`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`},
		{"images, documents and thinking",
			`{"model":"x","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"file","file":{"filename":"Q3 report (final).pdf","file_data":"data:application/pdf;base64,JVBE"}}]},{"role":"assistant","content":"ok","thinking_blocks":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"redacted_thinking","data":"cmVk"}]},{"role":"user","content":"go"}],"reasoning_effort":"minimal","thinking":{"type":"enabled","budget_tokens":2048},"additionalModelRequestFields":{"top_k":5}}`,
			`{"messages":[{"role":"user","content":[{"text":"look"},{"image":{"format":"png","source":{"bytes":"iVBO"}}},{"document":{"format":"pdf","name":"Q3 report (final) 1","source":{"bytes":"JVBE"}}}]},{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hm","signature":"sig"}}},{"reasoningContent":{"redactedContent":"cmVk"}},{"text":"ok"}]},{"role":"user","content":[{"text":"go"}]}],"additionalModelRequestFields":{"top_k":5,"thinking":{"type":"enabled","budget_tokens":2048}},"outputConfig":{"effort":"low"}}`},
		{"json schema",
			`{"model":"x","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}}`,
			`{"messages":[{"role":"user","content":[{"text":"hi"}]}],"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"schema":"{\"type\":\"object\"}","name":"a"}}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Body(request(t, tt.chat))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEq(got, []byte(tt.want)) {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestBodyRefused: what Converse cannot express is refused before
// anything is sent, naming the field; retryable when another route may
// serve it.
func TestBodyRefused(t *testing.T) {
	tests := []struct {
		name, chat, want string
		retryable        bool
	}{
		{"image by URL", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url", true},
		{"audio", `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0].type", true},
		{"n", `{"n":2,"messages":[{"role":"user","content":"hi"}]}`, "n:", true},
		{"json_object", `{"response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`, "response_format", true},
		{"tool history without tools", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"w","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`, "tools:", true},
		{"arguments not an object", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"w","arguments":"[1]"}}]}],"tools":[{"type":"function","function":{"name":"w"}}]}`, "messages[1].tool_calls[0].function.arguments", false},
		{"unknown role", `{"messages":[{"role":"critic","content":"hi"}]}`, "messages[0].role", false},
		{"effort", `{"reasoning_effort":"huge","messages":[{"role":"user","content":"hi"}]}`, "reasoning_effort", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Body(request(t, tt.chat))
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Status != 400 || pe.Retryable != tt.retryable || !strings.Contains(pe.Message, tt.want) || !errors.Is(err, provider.ErrUntranslatable) {
				t.Errorf("got %v, want a 400 naming %s (retryable %v)", err, tt.want, tt.retryable)
			}
		})
	}
}

// frames encodes events ({"eventType": payload} as the Vercel fixtures
// write them, or {"exception:name": payload}) as ConverseStream frames.
func frames(t testing.TB, events ...string) []byte {
	var out []byte
	for _, e := range events {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e), &m); err != nil || len(m) != 1 {
			t.Fatalf("event %s: %v", e, err)
		}
		for k, v := range m {
			h := []eventstream.Header{eventstream.StringHeader(":event-type", k), eventstream.StringHeader(":content-type", "application/json"),
				eventstream.StringHeader(":message-type", "event")}
			if name, ok := strings.CutPrefix(k, "exception:"); ok {
				h = []eventstream.Header{eventstream.StringHeader(":exception-type", name), eventstream.StringHeader(":content-type", "application/json"),
					eventstream.StringHeader(":message-type", "exception")}
			}
			var err error
			if out, err = eventstream.AppendMessage(out, h, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// oneByte reads one byte per Read.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(1, len(p))]) }

// answer is a stream's chunks gathered.
type answer struct {
	role, text, reasoning, finish string
	signatures                    []string
	calls                         []api.ToolCall
	usage                         *api.Usage
	chunks                        int
}

// run translates body's frames (read whole, and one byte at a time: the
// same chunks) and gathers the chunks.
func run(t *testing.T, body []byte) (answer, error) {
	t.Helper()
	var first answer
	var firstErr error
	for pass, r := range []io.Reader{bytes.NewReader(body), oneByte{bytes.NewReader(body)}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Content-Type", ContentType)
			io.Copy(w, r)
		}))
		c := New(srv.URL, Options{Transport: srv.Client().Transport})
		c.rand = func(b []byte) { copy(b, "12345678") }
		st, err := c.Open(context.Background(), request(t, `{"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		var a answer
		var passErr error
		for {
			ev, err := st.Next()
			if err != nil {
				if err != io.EOF {
					passErr = err
				}
				break
			}
			if len(ev.Data) == 0 {
				continue
			}
			a.chunks++
			info, err := api.ScanChunk(ev.Data)
			var c api.Chunk
			if err != nil || json.Unmarshal(ev.Data, &c) != nil {
				t.Fatalf("chunk %s is not a chunk: %v", ev.Data, err)
			}
			for _, ch := range c.Choices {
				d := ch.Delta
				a.role += d.Role
				a.text += d.Content
				a.reasoning += d.ReasoningContent
				for _, tb := range d.ThinkingBlocks {
					a.signatures = append(a.signatures, tb.Type+":"+tb.Signature+tb.Data)
				}
				if ch.FinishReason != nil {
					a.finish = *ch.FinishReason
				}
				for _, tc := range d.ToolCalls {
					for len(a.calls) <= *tc.Index {
						a.calls = append(a.calls, api.ToolCall{})
					}
					g := &a.calls[*tc.Index]
					g.ID += tc.ID
					g.Function.Name += tc.Function.Name
					g.Function.Arguments += tc.Function.Arguments
				}
			}
			if c.Usage != nil {
				a.usage = c.Usage
				if !info.HasUsage || info.Usage.PromptTokens != c.Usage.PromptTokens || info.Usage.PromptTokensDetails != c.Usage.PromptTokensDetails {
					t.Errorf("usage chunk %s: scanned as %+v", ev.Data, info)
				}
			}
		}
		st.Close()
		c.CloseIdleConnections()
		srv.Close()
		if pass == 0 {
			first, firstErr = a, passErr
		} else if (passErr == nil) != (firstErr == nil) {
			t.Errorf("byte by byte: error %v, whole: %v", passErr, firstErr)
		} else if a.text != first.text || a.finish != first.finish || len(a.calls) != len(first.calls) || a.chunks != first.chunks {
			t.Errorf("byte by byte: got %+v, whole: %+v", a, first)
		}
	}
	return first, firstErr
}

// TestStream: Converse events as OpenAI chunks.
func TestStream(t *testing.T) {
	a, err := run(t, frames(t,
		`{"messageStart":{"role":"assistant","p":"abc"}}`,
		`{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"let me think"}}}}`,
		`{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"SIG"}}}}`,
		`{"contentBlockStop":{"contentBlockIndex":0}}`,
		`{"contentBlockDelta":{"contentBlockIndex":1,"delta":{"text":"Hel"}}}`,
		`{"contentBlockDelta":{"contentBlockIndex":1,"delta":{"text":"lo \"w\u00e9\" \ud83d\ude00"}}}`,
		`{"contentBlockStop":{"contentBlockIndex":1}}`,
		`{"contentBlockStart":{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather"}}}}`,
		`{"contentBlockDelta":{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"city\":"}}}}`,
		`{"contentBlockDelta":{"contentBlockIndex":2,"delta":{"toolUse":{"input":"\"Paris\"}"}}}}`,
		`{"contentBlockStop":{"contentBlockIndex":2}}`,
		`{"contentBlockStart":{"contentBlockIndex":3,"start":{"toolUse":{"toolUseId":"tooluse_2","name":"now"}}}}`,
		`{"contentBlockStop":{"contentBlockIndex":3}}`,
		`{"messageStop":{"stopReason":"tool_use"}}`,
		`{"metadata":{"usage":{"inputTokens":10,"outputTokens":20,"totalTokens":130,"cacheReadInputTokens":60,"cacheWriteInputTokens":40},"metrics":{"latencyMs":300}}}`,
	))
	if err != nil {
		t.Fatal(err)
	}
	want := answer{role: "assistant", text: "Hello \"wé\" 😀", reasoning: "let me think", finish: "tool_calls"}
	if a.role != want.role || a.text != want.text || a.reasoning != want.reasoning || a.finish != want.finish || strings.Join(a.signatures, ",") != "thinking:SIG" {
		t.Errorf("got %+v", a)
	}
	if len(a.calls) != 2 || a.calls[0].ID != "tooluse_1" || a.calls[0].Function.Name != "get_weather" || a.calls[0].Function.Arguments != `{"city":"Paris"}` ||
		a.calls[1].ID != "tooluse_2" || a.calls[1].Function.Arguments != "{}" {
		t.Errorf("calls: got %+v", a.calls)
	}
	u := a.usage
	if u == nil || u.PromptTokens != 110 || u.CompletionTokens != 20 || u.TotalTokens != 130 || u.PromptTokensDetails.CachedTokens != 60 || u.PromptTokensDetails.CacheWriteTokens != 40 {
		t.Errorf("usage: got %+v, want prompt 10+60+40, cached 60, writes 40", u)
	}
}

// TestStreamEnds: the finish reasons, the metadata before messageStop
// (usage still last), and the ends that are not an answer.
func TestStreamEnds(t *testing.T) {
	text := `{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"text":"x"}}}`
	for reason, want := range map[string]string{"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "model_context_window_exceeded": "length",
		"guardrail_intervened": "content_filter", "content_filtered": "content_filter", "tool_use": "tool_calls", "something_new": "stop"} {
		a, err := run(t, frames(t, `{"messageStart":{"role":"assistant"}}`, text, `{"messageStop":{"stopReason":"`+reason+`"}}`))
		if err != nil || a.finish != want || a.usage != nil {
			t.Errorf("%s: got %+v, %v; want %s and no usage", reason, a, err, want)
		}
	}
	// Metadata first (as some servers send it): the usage chunk still
	// follows the finish chunk; no messageStart: the role chunk comes first.
	a, err := run(t, frames(t, text, `{"metadata":{"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}}`, `{"messageStop":{"stopReason":"end_turn"}}`))
	if err != nil || a.role != "assistant" || a.finish != "stop" || a.usage == nil || a.usage.PromptTokens != 3 {
		t.Errorf("metadata first: got %+v (usage %+v), %v", a, a.usage, err)
	}
	// A count that is not a token count: no usage chunk (the gateway estimates).
	a, err = run(t, frames(t, text, `{"messageStop":{"stopReason":"end_turn"}}`, `{"metadata":{"usage":{"inputTokens":1.5,"outputTokens":1}}}`))
	if err != nil || a.usage != nil {
		t.Errorf("fractional count: got usage %+v, %v", a.usage, err)
	}
	var pe *provider.Error
	for name, tc := range map[string]struct {
		body []byte
		is   error
	}{
		"cut before messageStop": {frames(t, `{"messageStart":{"role":"assistant"}}`, text), provider.ErrTruncated},
		"cut inside a frame":     {frames(t, `{"messageStart":{"role":"assistant"}}`, text)[:40], provider.ErrTruncated},
		"not JSON":               {frames(t, `{"messageStart":{"role":"assistant"}}`)[:0:0], nil},
		"delta of no tool":       {frames(t, text, `{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{}"}}}}`), provider.ErrMalformed},
		"no block index":         {frames(t, `{"contentBlockDelta":{"delta":{"text":"x"}}}`), provider.ErrMalformed},
	} {
		if tc.is == nil {
			continue
		}
		_, err := run(t, tc.body)
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: got %v, want %v", name, err, tc.is)
		}
	}
	bad := frames(t, text)
	bad[len(bad)-1] ^= 1 // the message CRC
	if _, err := run(t, bad); !errors.Is(err, provider.ErrMalformed) {
		t.Errorf("wrong CRC: got %v, want malformed", err)
	}
	// An exception mid-stream: the upstream's error, with AWS's status.
	_, err = run(t, frames(t, text, `{"exception:throttlingException":{"message":"Too many tokens, please wait."}}`))
	if !errors.As(err, &pe) || pe.Status != 429 || !pe.Retryable || pe.Message != "Too many tokens, please wait." {
		t.Errorf("throttling exception: got %v", err)
	}
	_, err = run(t, frames(t, text, `{"exception:modelStreamErrorException":{"message":"boom","originalStatusCode":500}}`))
	if !errors.As(err, &pe) || pe.Status != 424 || pe.Type != "modelStreamErrorException" {
		t.Errorf("model stream error: got %v", err)
	}
	_, err = run(t, frames(t, text, `{"messageStop":{"stopReason":"malformed_tool_use"}}`))
	if !errors.As(err, &pe) || pe.Status != 502 || !pe.Retryable {
		t.Errorf("malformed_tool_use: got %v, want a retryable 502", err)
	}
}

// TestComplete: a ConverseResponse as a chat.completion.
func TestComplete(t *testing.T) {
	b, err := completion([]byte(`{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hm","signature":"S"}}},{"text":"Hi "},{"text":"there"},{"toolUse":{"toolUseId":"t1","name":"w","input":{"c": "P"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":5,"outputTokens":7,"totalTokens":22,"cacheReadInputTokens":4,"cacheWriteInputTokens":6}}`), "m", 1, [8]byte{})
	if err != nil {
		t.Fatal(err)
	}
	var c api.Completion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if m.Content != "Hi there" || m.ReasoningContent != "hm" || len(m.ThinkingBlocks) != 1 || m.ThinkingBlocks[0].Signature != "S" ||
		len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"c":"P"}` || c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("got %s", b)
	}
	if u := c.Usage; u.PromptTokens != 15 || u.CompletionTokens != 7 || u.PromptTokensDetails.CachedTokens != 4 || u.PromptTokensDetails.CacheWriteTokens != 6 {
		t.Errorf("usage: got %+v", u)
	}
}

// TestErrorAnswer: AWS's error shape, with its name and status.
func TestErrorAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-Errortype", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(429)
		w.Write([]byte(`{"message":"Too many requests, please wait before trying again."}`))
	}))
	defer srv.Close()
	c := New(srv.URL, Options{Transport: srv.Client().Transport})
	defer c.CloseIdleConnections()
	_, err := c.Open(context.Background(), request(t, `{"messages":[{"role":"user","content":"hi"}]}`))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 429 || pe.Type != "ThrottlingException" || !pe.Retryable || pe.RetryAfter.Seconds() != 3 || !strings.HasPrefix(pe.Message, "Too many") {
		t.Errorf("got %#v", err)
	}
}

// FuzzStreamText checks the translation of text deltas against
// encoding/json's reading: any fragments (valid UTF-8 or not, escapes,
// control characters) give the client exactly what encoding/json decodes
// from the events, and no input crashes the translator.
func FuzzStreamText(f *testing.F) {
	f.Add("Hello\x00 wor\x00ld", uint8(0))
	f.Add("\"quoted\"\x00\\back\x00\u2028", uint8(3))
	f.Add("\xff\xfe\x00ok", uint8(1))
	f.Fuzz(func(t *testing.T, s string, stop uint8) {
		var want strings.Builder
		events := []string{`{"messageStart":{"role":"assistant"}}`}
		for _, frag := range strings.Split(s, "\x00") {
			p, _ := json.Marshal(map[string]any{"contentBlockIndex": 0, "delta": map[string]string{"text": frag}})
			events = append(events, `{"contentBlockDelta":`+string(p)+`}`)
			var back struct{ Delta struct{ Text string } }
			json.Unmarshal(p, &back)
			want.WriteString(back.Delta.Text)
		}
		reasons := []string{"end_turn", "max_tokens", "tool_use", "stop_sequence"}
		events = append(events, `{"messageStop":{"stopReason":"`+reasons[int(stop)%len(reasons)]+`"}}`)
		var tr translator
		tr.init("m", 1, [8]byte{})
		dec := eventstream.NewDecoder(bytes.NewReader(frames(t, events...)), 0)
		var got strings.Builder
		for {
			m, err := dec.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.frame(&m); err != nil {
				t.Fatal(err)
			}
			for d := tr.pop(); d != nil; d = tr.pop() {
				var c api.Chunk
				if err := json.Unmarshal(d, &c); err != nil {
					t.Fatalf("chunk %s: %v", d, err)
				}
				for _, ch := range c.Choices {
					got.WriteString(ch.Delta.Content)
				}
			}
		}
		if got.String() != want.String() {
			t.Errorf("got %q, want %q", got.String(), want.String())
		}
	})
}

// FuzzStreamBytes: any body is translated without a panic, ending in a
// clean end or an error, every chunk valid JSON.
func FuzzStreamBytes(f *testing.F) {
	f.Add(frames(f, `{"messageStart":{"role":"assistant"}}`, `{"contentBlockStart":{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"a","name":"b"}}}}`,
		`{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{}"}}}}`, `{"messageStop":{"stopReason":"tool_use"}}`,
		`{"metadata":{"usage":{"inputTokens":1,"outputTokens":2}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var tr translator
		tr.init("m", 1, [8]byte{})
		dec := eventstream.NewDecoder(bytes.NewReader(body), 1<<16)
		for range 1000 {
			m, err := dec.Next()
			if err != nil {
				tr.endError(err)
				return
			}
			if tr.frame(&m) != nil {
				return
			}
			for d := tr.pop(); d != nil; d = tr.pop() {
				if !json.Valid(d) {
					t.Fatalf("chunk %q is not JSON", d)
				}
			}
		}
	})
}
