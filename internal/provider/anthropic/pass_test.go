package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// passBody is a Messages request as a client (Claude Code) sends it, with
// what the translation cannot carry: cache_control, a signed thinking
// block, an image in a tool result, a field and a block type the gateway
// does not know, spaces where the client put them.
const passBody = `{"model":"alias","max_tokens":32000,"system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],` +
	`"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"c2ln"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"x": 1}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ok"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}],"cache_control":{"type":"ephemeral"}},{"type":"future_block","x":[1,2]}]}],` +
	`"thinking":{"type":"enabled","budget_tokens":31999},"stream":true,"future_field":{"a":"b"}}`

// passStreamBody is an upstream's stream of every kind of event a
// passthrough reads, as Anthropic writes them.
const passStreamBody = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-up\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":20,\"cache_read_input_tokens\":30,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me see\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"RXVnZW5l\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"f\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"x\\\": 2}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
	"event: future_event\ndata: {\"type\":\"future_event\",\"z\":1}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":42}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// passMessage is a non-streaming answer with a block type to come.
const passMessage = `{"id":"msg_02","type":"message","role":"assistant","model":"claude-up","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"future_block"}],` +
	`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5}}`

// nativeRequest is a provider.Request of a Messages client: passBody,
// its anthropic headers, no chat form.
func nativeRequest(stream bool, h http.Header) *provider.Request {
	return &provider.Request{Model: "claude-up", Stream: stream, RequestID: "req-test-1",
		Native: &provider.Native{Dialect: provider.DialectAnthropic, Body: []byte(passBody), Header: h}}
}

// TestPassthrough: for a Messages client the upstream gets the client's
// body with only "model" changed, the client's anthropic-version (over
// the adapter's) and anthropic-beta with the route's key, and the client
// gets the upstream's events as they came, each told for what it carries
// (the relay's measurements), or the upstream's Message as it came.
func TestPassthrough(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			var gotBody []byte
			var got http.Header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotBody, _ = io.ReadAll(r.Body)
				got = r.Header.Clone()
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, passStreamBody)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, passMessage)
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			req := nativeRequest(stream, http.Header{"Anthropic-Version": {"2023-06-01-client"}, "Anthropic-Beta": {"interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14"}})
			req.Header = http.Header{"X-Sim-Ttft": {"5ms"}}
			if !provider.Passes(c, req) {
				t.Fatal("Passes: got false for a Messages request to an anthropic route, want true")
			}
			var out strings.Builder
			var infos []api.ChunkInfo
			if stream {
				st, err := c.Open(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if p, ok := st.(provider.Passthrough); !ok || p.Dialect() != provider.DialectAnthropic {
					t.Fatalf("got a %T, want a provider.Passthrough stream of dialect anthropic", st)
				}
				w := sse.NewWriter(&out)
				for {
					ev, err := st.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					w.Event(ev.Name, ev.Data)
					infos = append(infos, st.(provider.ChunkInfoer).ChunkInfo())
				}
			} else {
				b, err := c.Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				out.Write(b)
			}
			if want := strings.Replace(passBody, `"model":"alias"`, `"model":"claude-up"`, 1); string(gotBody) != want {
				t.Errorf("upstream body:\ngot  %s\nwant %s", gotBody, want)
			}
			for k, v := range map[string][]string{
				"X-Api-Key":         {testKey},
				"Anthropic-Version": {"2023-06-01-client"},
				"Anthropic-Beta":    {"interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14"},
				"X-Request-Id":      {"req-test-1"},
				"X-Sim-Ttft":        {"5ms"},
			} {
				if fmt.Sprint(got[k]) != fmt.Sprint(v) {
					t.Errorf("header %s: got %q, want %q", k, got[k], v)
				}
			}
			want := passMessage
			if stream {
				want = passStreamBody
			}
			if out.String() != want {
				t.Errorf("client got:\n%s\nwant the upstream's bytes:\n%s", out.String(), want)
			}
			if !stream {
				return
			}
			content, usage := api.ChunkInfo{Content: true}, api.Usage{PromptTokens: 60, CompletionTokens: 42, TotalTokens: 102, PromptTokensDetails: api.PromptTokensDetails{CachedTokens: 30, CacheWriteTokens: 20}}
			wantInfo := []api.ChunkInfo{
				{}, {}, {}, // message_start (held until content), thinking start, ping
				content, {}, {}, // thinking_delta, signature_delta, stop
				{}, content, {}, // text start, text_delta, stop
				content, {}, content, {}, // tool_use start, "" partial_json, partial_json, stop
				{}, // an event to come
				{Finish: true, HasUsage: true, Usage: usage},
				{}, // message_stop
			}
			if len(infos) != len(wantInfo) {
				t.Fatalf("got %d events, want %d", len(infos), len(wantInfo))
			}
			for i := range wantInfo {
				if !sameInfo(infos[i], wantInfo[i]) {
					t.Errorf("event %d: got ChunkInfo %+v, want %+v", i, infos[i], wantInfo[i])
				}
			}
		})
	}
}

// TestPassthroughDefaults: without the client's anthropic-version the
// adapter's goes; a request of another dialect, or none, is translated.
func TestPassthroughDefaults(t *testing.T) {
	var got http.Header
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r.Header.Clone(), nil
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, passMessage)
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL)
	if _, err := c.Complete(context.Background(), nativeRequest(false, nil)); err != nil {
		t.Fatal(err)
	}
	if got.Get("Anthropic-Version") != Version || got.Get("Anthropic-Beta") != "" {
		t.Errorf("no client headers: got version %q beta %q, want %q and none", got.Get("Anthropic-Version"), got.Get("Anthropic-Beta"), Version)
	}
	req := chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), false)
	req.Native = &provider.Native{Dialect: "gemini", Body: []byte(passBody), Header: http.Header{"Anthropic-Version": {"x"}}}
	b, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "future_field") || got.Get("Anthropic-Version") != Version || !strings.Contains(string(b), "chat.completion") {
		t.Errorf("another dialect: got body %s, version %q, answer %s; want the chat form translated both ways", body, got.Get("Anthropic-Version"), b)
	}
}

// TestPassthroughErrors: a passed stream is read by the translation's
// rules: an error event is the *provider.Error of its type (before or
// after content), an end before message_stop a truncation, an event that
// is not JSON or a delta for a block that did not start malformed; a 200
// Message in the error shape is that error.
func TestPassthroughErrors(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n"
	text := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
	for _, tt := range []struct {
		name, body string
		want       error
		status     int
	}{
		{"error event", start + text + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", nil, StatusOverloaded},
		{"cut", start + text, provider.ErrTruncated, 0},
		{"not JSON", start + "event: content_block_delta\ndata: {\"type\":\n\n", provider.ErrMalformed, 0},
		{"delta before its block", start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n", provider.ErrMalformed, 0},
		{"content before message_start", text, provider.ErrMalformed, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(replay([]byte(tt.body)))
			defer srv.Close()
			st, err := newTestClient(t, srv.URL).Open(context.Background(), nativeRequest(true, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for err == nil {
				_, err = st.Next()
			}
			var perr *provider.Error
			switch {
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("got %v, want %v", err, tt.want)
			case tt.status != 0 && (!errors.As(err, &perr) || perr.Status != tt.status || !perr.Retryable):
				t.Errorf("got %v, want a retryable *provider.Error with status %d", err, tt.status)
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}))
	defer srv.Close()
	_, err := newTestClient(t, srv.URL).Complete(context.Background(), nativeRequest(false, nil))
	var perr *provider.Error
	if !errors.As(err, &perr) || perr.Status != StatusOverloaded {
		t.Errorf("an error Message with 200: got %v, want a *provider.Error with status 529", err)
	}
}

// The passed stream allocates nothing per event once running, its
// ChunkInfo included.
func TestPassAllocs(t *testing.T) {
	for name, event := range benchEvents {
		st := openPass(t, newLoopBody(benchHead, event))
		for range 8 {
			st.Next()
		}
		ci := st.(provider.ChunkInfoer)
		if n := testing.AllocsPerRun(1000, func() { st.Next(); ci.ChunkInfo() }); n > 0 {
			t.Errorf("%s: got %v allocations per event, want 0", name, n)
		}
		st.Close()
	}
}

// openPass opens a passed-through stream of body.
func openPass(t testing.TB, body io.Reader) provider.Stream {
	t.Helper()
	c := New("http://upstream.invalid", "", Options{Transport: bodyTransport(body)})
	st, err := c.Open(context.Background(), nativeRequest(true, nil))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
