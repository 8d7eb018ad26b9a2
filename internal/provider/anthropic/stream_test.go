package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// maxNext bounds the Next calls of one test stream: a bug that never ends
// a stream fails instead of hanging.
const maxNext = 10000

// transcript reads st to its end and returns one line per Next result:
// "data: <chunk>", "heartbeat", then "EOF" or "error: …". Every chunk must
// be valid JSON that api.ScanChunk reads, as the relay will, and the
// stream's ChunkInfo must agree with it.
func transcript(t testing.TB, st provider.Stream) []byte {
	t.Helper()
	var out bytes.Buffer
	for range maxNext {
		ev, err := st.Next()
		if err != nil {
			out.WriteString(describe(err))
			out.WriteByte('\n')
			return out.Bytes()
		}
		checkInfo(t, st, ev.Data)
		if len(ev.Data) == 0 {
			out.WriteString("heartbeat\n")
			continue
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("invalid chunk JSON: %s", ev.Data)
		}
		if _, err := api.ScanChunk(ev.Data); err != nil {
			t.Fatalf("api.ScanChunk(%s): %v", ev.Data, err)
		}
		if ev.Name != nil {
			t.Fatalf("got event name %q, want none (OpenAI chunks have none)", ev.Name)
		}
		out.WriteString("data: ")
		out.Write(ev.Data)
		out.WriteByte('\n')
	}
	t.Fatalf("no end after %d events", maxNext)
	return nil
}

// describe is an error as the golden files show it: its kind for the
// gateway (sentinel, status, retryable, type) and its message.
func describe(err error) string {
	if err == io.EOF {
		return "EOF"
	}
	var kinds []string
	for _, s := range []struct {
		err  error
		name string
	}{{provider.ErrTruncated, "ErrTruncated"}, {provider.ErrMalformed, "ErrMalformed"}} {
		if errors.Is(err, s.err) {
			kinds = append(kinds, s.name)
		}
	}
	var perr *provider.Error
	if errors.As(err, &perr) {
		kinds = append(kinds, fmt.Sprintf("status=%d retryable=%v type=%q", perr.Status, perr.Retryable, perr.Type))
	}
	return fmt.Sprintf("error: [%s] %v", strings.Join(kinds, " "), err)
}

// TestStreamGolden replays each testdata/stream/*.sse over loopback HTTP
// and compares the client's chunks with its .golden file.
func TestStreamGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stream fixtures: %v", err)
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".sse")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(replay(body))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			golden(t, strings.TrimSuffix(in, ".sse")+".golden", transcript(t, st))
		})
	}
}

// openStream opens a stream whose upstream body is body, without HTTP.
func openStream(t testing.TB, body io.Reader) provider.Stream {
	t.Helper()
	c := New("http://upstream.invalid", "", Options{Transport: bodyTransport(body)})
	c.now = func() time.Time { return fixedNow }
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// bodyTransport answers every request with 200 and body.
func bodyTransport(body io.Reader) http.RoundTripper { return bodyRT{body} }

type bodyRT struct{ body io.Reader }

func (b bodyRT) RoundTrip(r *http.Request) (*http.Response, error) {
	rc, ok := b.body.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(b.body)
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: rc, Request: r}, nil
}

// The official OpenAI SDK's accumulator, reading the translated stream as a
// client of the gateway does, reassembles the text and the tool calls.
func TestOfficialAccumulator(t *testing.T) {
	tests := []struct {
		fixture   string
		wantText  string
		wantCalls [][3]string // id, name, arguments
		wantUsage int64       // completion tokens
	}{
		{"tools", "Okay, let's check the weather for San Francisco, CA:",
			[][3]string{{"toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", `{"location": "San Francisco, CA", "unit": "fahrenheit"}`}}, 89},
		{"parallel_tools", "",
			[][3]string{{"toolu_01A", "get_weather", `{"location": "Paris"}`}, {"toolu_01B", "get_time", `{"timezone": "Europe/Paris"}`}}, 71},
		{"tool_no_args", "", [][3]string{{"toolu_01Now", "get_time", `{}`}}, 30},
		{"text", "Hello! \"quoted\" <b>&\né😀", nil, 15},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "stream", tt.fixture+".sse"))
			if err != nil {
				t.Fatal(err)
			}
			upstream := httptest.NewServer(replay(body))
			defer upstream.Close()
			c := newTestClient(t, upstream.URL)
			// A minimal gateway: the translated chunks as an OpenAI SSE stream.
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				in, _ := io.ReadAll(r.Body)
				st, err := c.Open(r.Context(), chatRequest(t, in, true))
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				defer st.Close()
				sse.SetHeaders(w.Header())
				sw := sse.NewWriter(w)
				for {
					ev, err := st.Next()
					if err == io.EOF {
						sw.Data([]byte("[DONE]"))
						return
					}
					if err != nil {
						t.Errorf("translated stream: %v", err)
						return
					}
					if len(ev.Data) > 0 {
						sw.Data(ev.Data)
					}
				}
			}))
			defer gw.Close()
			client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
			stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model:    "claude",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("the accumulator refused chunk %s", stream.Current().RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Choices) != 1 {
				t.Fatalf("got %d choices, want 1", len(acc.Choices))
			}
			msg := acc.Choices[0].Message
			if msg.Content != tt.wantText {
				t.Errorf("got content %q, want %q", msg.Content, tt.wantText)
			}
			if len(msg.ToolCalls) != len(tt.wantCalls) {
				t.Fatalf("got %d tool calls %+v, want %d", len(msg.ToolCalls), msg.ToolCalls, len(tt.wantCalls))
			}
			for i, want := range tt.wantCalls {
				got := msg.ToolCalls[i]
				if got.ID != want[0] || got.Function.Name != want[1] || got.Function.Arguments != want[2] {
					t.Errorf("tool call %d: got %s %s %s, want %s %s %s", i, got.ID, got.Function.Name, got.Function.Arguments, want[0], want[1], want[2])
				}
				if !json.Valid([]byte(got.Function.Arguments)) {
					t.Errorf("tool call %d: arguments %q are not JSON", i, got.Function.Arguments)
				}
			}
			wantFinish := "stop"
			if len(tt.wantCalls) > 0 {
				wantFinish = "tool_calls"
			}
			if acc.Choices[0].FinishReason != wantFinish {
				t.Errorf("got finish_reason %q, want %q", acc.Choices[0].FinishReason, wantFinish)
			}
			if acc.Usage.CompletionTokens != tt.wantUsage {
				t.Errorf("got %d completion tokens, want %d", acc.Usage.CompletionTokens, tt.wantUsage)
			}
		})
	}
}

// reads is an upstream body that returns its pieces one Read each, and
// logs the reads.
type reads struct {
	pieces []string
	log    *[]string
}

func (r *reads) Read(p []byte) (int, error) {
	if len(r.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.pieces[0])
	if n < len(r.pieces[0]) {
		r.pieces[0] = r.pieces[0][n:]
	} else {
		r.pieces = r.pieces[1:]
		*r.log = append(*r.log, "read")
	}
	return n, nil
}

// The relay flushes in BeforeRead: every event of one upstream read must be
// returned before it runs, and it runs before the next read.
func TestBeforeRead(t *testing.T) {
	var log []string
	ev := func(data string) string { return "event: x\ndata: " + data + "\n\n" }
	start := ev(`{"type":"message_start","message":{"id":"m","model":"x"}}`) + ev(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	delta := ev(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`)
	body := &reads{pieces: []string{start + delta, delta + delta, ev(`{"type":"message_stop"}`)}, log: &log}
	st := openStream(t, body)
	defer st.Close()
	st.(provider.ReadNotifier).BeforeRead(sse.HookFunc(func() { log = append(log, "flush") }))
	for {
		e, err := st.Next()
		if err != nil {
			break
		}
		if len(e.Data) == 0 {
			log = append(log, "heartbeat")
		} else {
			log = append(log, "event")
		}
	}
	// Read 1: role, heartbeat (block start), content; read 2: two contents;
	// read 3: message_stop's finish and usage chunks.
	want := "flush read event heartbeat event flush read event event flush read event event"
	if got := strings.Join(log, " "); !strings.HasPrefix(got, want) {
		t.Errorf("got %s, want it to start with %s", got, want)
	}
}

// Every way a stream can end before message_stop is a truncation, never a
// clean end.
func TestTruncated(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\"}}\n\n"
	tests := []struct {
		name string
		body string
	}{
		{"empty body", ""},
		{"clean end between events", start},
		{"cut mid-line", start + "event: content_block_start\ndata: {\"type\":\"content_bl"},
		{"data line without its blank line", start + "data: {\"type\":\"ping\"}\n"},
		{"after message_delta", start + "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStream(t, strings.NewReader(tt.body))
			defer st.Close()
			var err error
			for range maxNext {
				if _, err = st.Next(); err != nil {
					break
				}
			}
			if !errors.Is(err, provider.ErrTruncated) {
				t.Errorf("got %v, want an error wrapping ErrTruncated", err)
			}
			if _, again := st.Next(); again != err {
				t.Errorf("got %v on the next call, want the same error again", again)
			}
		})
	}
}

// A connection cut by the upstream mid-body is a truncation too.
func TestTruncatedConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(200)
		w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\"}}\n\n"))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL)
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range maxNext {
		if _, err = st.Next(); err != nil {
			break
		}
	}
	if !errors.Is(err, provider.ErrTruncated) {
		t.Errorf("got %v, want an error wrapping ErrTruncated", err)
	}
}

// An event larger than MaxEvent ends the stream as malformed instead of
// growing a buffer.
func TestEventTooLarge(t *testing.T) {
	big := "data: {\"type\":\"ping\",\"x\":\"" + strings.Repeat("a", 4096) + "\"}\n\n"
	c := New("http://upstream.invalid", "", Options{MaxEvent: 1024, Transport: bodyTransport(strings.NewReader(
		"data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\"}}\n\n" + big))})
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range maxNext {
		if _, err = st.Next(); err != nil {
			break
		}
	}
	if !errors.Is(err, provider.ErrMalformed) {
		t.Errorf("got %v, want an error wrapping ErrMalformed", err)
	}
}

// Protocol violations the official SDK rejects are malformed streams.
func TestProtocolErrors(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"m","model":"x"}}`
	tests := []struct {
		name   string
		events []string
	}{
		{"delta before message_start", []string{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`}},
		{"delta for a block that did not start", []string{start, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`}},
		{"block started out of order", []string{start, `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`}},
		{"negative index", []string{start, `{"type":"content_block_stop","index":-1}`}},
		{"not an object", []string{start, `["message_stop"]`}},
		{"trailing data", []string{start, `{"type":"ping"} x`}},
		{"deep nesting", []string{start, `{"type":"ping","x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body strings.Builder
			for _, e := range tt.events {
				body.WriteString("data: " + e + "\n\n")
			}
			st := openStream(t, strings.NewReader(body.String()))
			defer st.Close()
			var err error
			for range maxNext {
				if _, err = st.Next(); err != nil {
					break
				}
			}
			if !errors.Is(err, provider.ErrMalformed) {
				t.Errorf("got %v, want an error wrapping ErrMalformed", err)
			}
		})
	}
}
