package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// golden compares got with the golden file path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/provider/gemini -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}

const testKey = "AIzaSy-test-key-0123456789"

// testClient returns a Client on url with a fixed clock and id source, so
// golden files are stable.
func testClient(t *testing.T, url string) *Client {
	c := New(url, testKey, Options{})
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	c.rand = func(b []byte) {
		for i := range b {
			b[i] = byte(i+1) * 0x11
		}
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// captured is one request the fake upstream received.
type captured struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// upstream is a loopback Gemini API replaying a canned answer.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []captured
}

func newUpstream(t *testing.T, status int, contentType string, body []byte, header http.Header) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, captured{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), b})
		u.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []captured {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]captured(nil), u.reqs...)
}

const okStream = `data: {"candidates": [{"content": {"parts": [{"text": "ok"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 1,"candidatesTokenCount": 1,"totalTokenCount": 2}}` + "\n\n"

func chatRequest(t *testing.T, body []byte) *provider.Request {
	t.Helper()
	var chat api.ChatRequest
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatalf("testdata body: %v", err)
	}
	return &provider.Request{
		Model: "gemini-2.5-flash", Stream: true, Body: body, Chat: &chat,
		RequestID: "req-123", Header: http.Header{"X-Sim-Ttft": {"5ms"}},
	}
}

// drain reads a stream to its end and returns the events' data and the
// end error. The stream's ChunkInfo must agree with api.ScanChunk on every
// event, as the relay reads it instead.
func drain(t *testing.T, st provider.Stream) (events []*sse.Event, end error) {
	t.Helper()
	for range 10000 {
		ev, err := st.Next()
		if err != nil {
			return events, err
		}
		checkInfo(t, streamInfo(t, st), ev.Data)
		cp := &sse.Event{Comment: ev.Comment}
		if ev.Data != nil {
			cp.Data = append([]byte{}, ev.Data...)
		}
		events = append(events, cp)
	}
	t.Fatal("stream did not end")
	return nil, nil
}

// TestRequestGolden: each testdata/request/*.json (a client's OpenAI body)
// goes through Client.Open over loopback HTTP; the upstream request's
// method, path and body must match the .golden file, and the headers the
// adapter's contract.
func TestRequestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/request/*.json")
	if len(files) == 0 {
		t.Fatal("no testdata/request/*.json")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			orig := append([]byte{}, body...)
			up := newUpstream(t, 200, "text/event-stream", []byte(okStream), nil)
			c := testClient(t, up.URL)
			req := chatRequest(t, body)
			st, err := c.Open(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if _, end := drain(t, st); end != io.EOF {
				t.Errorf("got end %v, want io.EOF", end)
			}
			st.Close()
			if !bytes.Equal(req.Body, orig) {
				t.Error("the request's body was modified")
			}
			reqs := up.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d upstream requests, want 1", len(reqs))
			}
			r := reqs[0]
			checkHeaders(t, r)
			var indented bytes.Buffer
			if err := json.Indent(&indented, r.body, "", "  "); err != nil {
				t.Fatalf("upstream body is not JSON: %v\n%s", err, r.body)
			}
			got := fmt.Sprintf("%s %s?%s\n\n%s\n", r.method, r.path, r.query, indented.Bytes())
			golden(t, strings.TrimSuffix(file, ".json")+".golden", []byte(got))

			// Complete sends the same body to :generateContent.
			up2 := newUpstream(t, 200, "application/json", []byte(`{"candidates":[{"content":{"parts":[{"text":"ok"}]},"finishReason":"STOP"}]}`), nil)
			if _, err := testClient(t, up2.URL).Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			r2 := up2.requests()[0]
			if want := "/v1beta/models/gemini-2.5-flash:generateContent"; r2.path != want || r2.query != "" {
				t.Errorf("Complete: got %s?%s, want %s", r2.path, r2.query, want)
			}
			if !bytes.Equal(r2.body, r.body) {
				t.Errorf("Complete: got body\n%s\nwant the stream's\n%s", r2.body, r.body)
			}
			checkHeaders(t, r2)
		})
	}
}

func checkHeaders(t *testing.T, r captured) {
	t.Helper()
	for k, want := range map[string]string{
		"X-Goog-Api-Key": testKey,
		"Content-Type":   "application/json",
		"X-Request-Id":   "req-123",
		"X-Sim-Ttft":     "5ms",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("header %s: got %q, want %q", k, got, want)
		}
	}
	if r.header.Get("Authorization") != "" {
		t.Error("an Authorization header was sent")
	}
	if strings.Contains(r.query, "key=") || strings.Contains(r.path, testKey) {
		t.Errorf("the key is in the URL: %s?%s", r.path, r.query)
	}
}

func TestBaseURLAndModelPath(t *testing.T) {
	tests := []struct {
		base, model, want string
	}{
		{"BASE", "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"},
		{"BASE/", "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"},
		{"BASE/v1beta", "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"},
		{"BASE/v1", "gemini-2.5-pro", "/v1/models/gemini-2.5-pro:streamGenerateContent"},
		{"BASE/proxy/v1beta/", "models/gemini-2.5-flash", "/proxy/v1beta/models/gemini-2.5-flash:streamGenerateContent"},
		{"BASE", "a/b c:d?e#f", "/v1beta/models/a%2Fb%20c%3Ad%3Fe%23f:streamGenerateContent"},
	}
	for _, tt := range tests {
		up := newUpstream(t, 200, "text/event-stream", []byte(okStream), nil)
		c := testClient(t, strings.Replace(tt.base, "BASE", up.URL, 1))
		req := chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Model = tt.model
		st, err := c.Open(context.Background(), req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.base, tt.model, err)
		}
		drain(t, st)
		st.Close()
		r := up.requests()[0]
		if r.path != tt.want || r.query != "alt=sse" {
			t.Errorf("base %s, model %q: got %s?%s, want %s?alt=sse", tt.base, tt.model, r.path, r.query, tt.want)
		}
	}
}

func TestNoKeyNoHeader(t *testing.T) {
	up := newUpstream(t, 200, "text/event-stream", []byte(okStream), nil)
	c := New(up.URL, "", Options{})
	defer c.CloseIdleConnections()
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	drain(t, st)
	st.Close()
	if h := up.requests()[0].header; h.Get("X-Goog-Api-Key") != "" {
		t.Errorf("got x-goog-api-key %q with no key configured, want none", h.Get("X-Goog-Api-Key"))
	}
}

// TestRequestErrors: requests the translation cannot express are refused
// before any upstream call, with a 400 that names the field: retryable
// (another route's kind may serve it) when Gemini lacks the feature, not
// when the request itself is wrong.
func TestRequestErrors(t *testing.T) {
	unsupported := map[string]bool{"system only": true, "audio part": true, "http image": true, "custom tool": true, "n above 1": true, "pdf file part": true}
	tests := []struct {
		name, body, want string
	}{
		{"no messages", `{"messages":[]}`, "messages: at least one message"},
		{"system only", `{"messages":[{"role":"system","content":"be nice"}]}`, "no user or assistant content"},
		{"bad arguments", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{not json"}}]}]}`,
			"messages[1].tool_calls[0].function.arguments: not a JSON object"},
		{"array arguments", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`,
			"messages[1].tool_calls[0].function.arguments: not a JSON object"},
		{"unknown tool_call_id", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"1"}]}`,
			`messages[1].tool_call_id: "nope" answers no tool call`},
		{"unknown role", `{"messages":[{"role":"robot","content":"x"}]}`, `messages[0].role: "robot"`},
		{"audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`,
			`messages[0].content[0].type: content parts of type "input_audio"`},
		{"image in system", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"user","content":"x"}]}`,
			`messages[0].content[0]: the gemini adapter takes only text parts in system messages, got "image_url"`},
		{"http image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://example.com/a.png"}}]}]}`,
			"messages[0].content[0].image_url.url: the gemini adapter takes data: and https: URLs"},
		{"data url not base64", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain,hello"}}]}]}`,
			"must be data:<mime type>;base64,<data>"},
		{"custom tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, `tools[0].type: "custom" tools`},
		{"tool parameters not object", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`,
			"tools[0].function.parameters: not a JSON Schema object"},
		{"tool_choice unknown", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}`, `tool_choice: "sometimes"`},
		{"tool_choice function without name", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name: required"},
		{"response_format unknown", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}`, `response_format.type: "xml"`},
		{"json_schema without schema", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`,
			"response_format.json_schema.schema: a JSON Schema object is required"},
		{"reasoning_effort unknown", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"}`, `reasoning_effort: "extreme"`},
		{"n above 1", `{"messages":[{"role":"user","content":"x"}],"n":2}`, "n: the gemini adapter serves one choice"},
		{"stop of numbers", `{"messages":[{"role":"user","content":"x"}],"stop":[1,2]}`, "stop: stop must be a string or an array of strings"},
		{"pdf file part", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0x"}}]}]}`,
			`messages[0].content[0].type: content parts of type "file"`},
		{"bad thinking", `{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"sometimes"}}`, `thinking: type: want enabled`},
	}
	up := newUpstream(t, 200, "text/event-stream", []byte(okStream), nil)
	c := testClient(t, up.URL)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := chatRequest(t, []byte(tt.body))
			for _, call := range []func() error{
				func() error { _, err := c.Open(context.Background(), req); return err },
				func() error { _, err := c.Complete(context.Background(), req); return err },
			} {
				err := call()
				var perr *provider.Error
				if !errors.As(err, &perr) {
					t.Fatalf("got %v, want a *provider.Error", err)
				}
				if perr.Status != 400 || perr.Retryable != unsupported[tt.name] || !errors.Is(err, provider.ErrUntranslatable) {
					t.Errorf("got status %d retryable %v, want 400, retryable %v, untranslatable", perr.Status, perr.Retryable, unsupported[tt.name])
				}
				if !strings.Contains(perr.Message, tt.want) {
					t.Errorf("got message %q, want it to contain %q", perr.Message, tt.want)
				}
			}
		})
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("got %d upstream requests for refused requests, want 0", n)
	}
}

// TestStreamGolden: each testdata/stream/*.sse is served over loopback HTTP
// and read through Client.Open; the client events and the end must match
// the .golden file, and every chunk must be valid JSON the relay reads.
func TestStreamGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	if len(files) == 0 {
		t.Fatal("no testdata/stream/*.sse")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".sse")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			up := newUpstream(t, 200, "text/event-stream", body, nil)
			c := testClient(t, up.URL)
			st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
			if err != nil {
				t.Fatal(err)
			}
			events, end := drain(t, st)
			st.Close()
			golden(t, strings.TrimSuffix(file, ".sse")+".golden", []byte(describe(t, events, end)))
		})
	}
}

// describe renders a stream's events and end for a golden file, checking
// each chunk on the way.
func describe(t *testing.T, events []*sse.Event, end error) string {
	t.Helper()
	var b strings.Builder
	var id string
	for _, ev := range events {
		if len(ev.Data) == 0 {
			b.WriteString("heartbeat\n")
			continue
		}
		checkChunk(t, ev.Data)
		var c struct{ ID string }
		json.Unmarshal(ev.Data, &c)
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			t.Errorf("chunk id %q differs from the stream's %q", c.ID, id)
		}
		fmt.Fprintf(&b, "data: %s\n", ev.Data)
	}
	fmt.Fprintf(&b, "end: %s\n", describeErr(end))
	return b.String()
}

// checkChunk checks that data is a chat.completion.chunk that
// encoding/json and the relay's scanner both read.
func checkChunk(t *testing.T, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("invalid JSON chunk: %s", data)
	}
	var c api.Chunk
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("chunk does not decode as api.Chunk: %v\n%s", err, data)
	}
	if c.Object != "chat.completion.chunk" || c.ID == "" || c.Model == "" {
		t.Errorf("chunk lacks object, id or model: %s", data)
	}
	if _, err := api.ScanChunk(data); err != nil {
		t.Errorf("api.ScanChunk: %v\n%s", err, data)
	}
}

func describeErr(err error) string {
	var perr *provider.Error
	switch {
	case err == io.EOF:
		return "EOF"
	case errors.As(err, &perr):
		return fmt.Sprintf("*provider.Error status=%d retryable=%v type=%q code=%q message=%q",
			perr.Status, perr.Retryable, perr.Type, perr.Code, perr.Message)
	case errors.Is(err, provider.ErrTruncated):
		return "ErrTruncated: " + err.Error()
	case errors.Is(err, provider.ErrMalformed):
		return "ErrMalformed: " + err.Error()
	}
	return fmt.Sprintf("unexpected %T: %v", err, err)
}

// TestCompleteGolden: each testdata/complete/*.json (a GenerateContentResponse)
// through Client.Complete gives the .golden chat.completion.
func TestCompleteGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/complete/*.json")
	if len(files) == 0 {
		t.Fatal("no testdata/complete/*.json")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			up := newUpstream(t, 200, "application/json", body, nil)
			c := testClient(t, up.URL)
			req := chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
			req.Stream = false
			out, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var comp api.Completion
			if err := json.Unmarshal(out, &comp); err != nil {
				t.Fatalf("not a chat.completion: %v\n%s", err, out)
			}
			if comp.Object != "chat.completion" || len(comp.Choices) != 1 || comp.Choices[0].Message.Role != "assistant" {
				t.Errorf("got %s, want one assistant choice of a chat.completion", out)
			}
			var indented bytes.Buffer
			json.Indent(&indented, out, "", "  ")
			indented.WriteByte('\n')
			golden(t, strings.TrimSuffix(file, ".json")+".golden", indented.Bytes())
		})
	}
}

func TestCompleteMalformed(t *testing.T) {
	for _, body := range []string{`not json`, `{}`, `{"candidates":[{"index":1}]}`, `{"candidates": 5}`} {
		up := newUpstream(t, 200, "application/json", []byte(body), nil)
		c := testClient(t, up.URL)
		_, err := c.Complete(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
		if !errors.Is(err, provider.ErrMalformed) {
			t.Errorf("body %s: got %v, want ErrMalformed", body, err)
		}
	}
}

// TestStatusErrors: each testdata/errors/<status>_*.json error body, served
// with that status, is the .golden *provider.Error from Open and Complete
// alike; retryability follows the brief, and no message holds the key.
func TestStatusErrors(t *testing.T) {
	retryable := map[string]bool{
		"400_invalid_argument": false, "400_failed_precondition": false,
		"400_api_key_invalid":   true, // reported as 401: the route's key
		"403_permission_denied": true, "404_not_found": true,
		"429_resource_exhausted": true, "429_retry_after_header": true,
		"500_internal": true, "500_array": true, "502_html": true,
		"503_unavailable": true, "504_deadline_exceeded": true,
	}
	files, _ := filepath.Glob("testdata/errors/*.json")
	if len(files) != len(retryable) {
		t.Fatalf("got %d error bodies, want %d", len(files), len(retryable))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var status int
			fmt.Sscanf(name, "%d_", &status)
			var header http.Header
			if strings.Contains(name, "retry_after_header") {
				header = http.Header{"Retry-After": {"7"}}
			}
			up := newUpstream(t, status, "application/json; charset=UTF-8", body, header)
			c := testClient(t, up.URL)
			req := chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
			_, errOpen := c.Open(context.Background(), req)
			_, errComplete := c.Complete(context.Background(), req)
			var perr, perr2 *provider.Error
			if !errors.As(errOpen, &perr) || !errors.As(errComplete, &perr2) {
				t.Fatalf("got %v and %v, want *provider.Error", errOpen, errComplete)
			}
			if *perr != *perr2 {
				t.Errorf("Open and Complete differ: %+v, %+v", perr, perr2)
			}
			if perr.Retryable != retryable[name] {
				t.Errorf("got retryable %v, want %v", perr.Retryable, retryable[name])
			}
			if strings.Contains(perr.Error(), testKey) {
				t.Errorf("the error holds the key: %v", perr)
			}
			out, _ := json.MarshalIndent(map[string]any{
				"status": perr.Status, "retryable": perr.Retryable, "type": perr.Type, "code": perr.Code,
				"message": perr.Message, "retry_after": perr.RetryAfter.String(),
			}, "", "  ")
			golden(t, strings.TrimSuffix(file, ".json")+".golden", append(out, '\n'))
		})
	}
}

func TestConnectError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the dial is refused
	c := testClient(t, "http://"+addr)
	_, err = c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
	var perr *provider.Error
	if !errors.Is(err, provider.ErrConnect) || !errors.As(err, &perr) || !perr.Retryable {
		t.Errorf("got %v, want a retryable *provider.Error wrapping ErrConnect", err)
	}
}

// TestStreamIncremental: each upstream event is translated as it arrives;
// the adapter never waits for a later one.
func TestStreamIncremental(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"first"}]}}]}`+"\n\n")
		rc.Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"second"}]},"finishReason":"STOP"}]}`+"\n\n")
	}))
	defer srv.Close()
	c := testClient(t, srv.URL)
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := make(chan string, 1)
	go func() {
		for {
			ev, err := st.Next()
			if err != nil {
				got <- err.Error()
				return
			}
			if bytes.Contains(ev.Data, []byte(`"content":"first"`)) {
				got <- "first"
				return
			}
		}
	}()
	select {
	case g := <-got:
		if g != "first" {
			t.Fatalf("got %q before the first content, want it", g)
		}
	case <-time.After(10 * time.Second):
		close(next)
		t.Fatal("the first event was held back until a later one arrived")
	}
	close(next)
	// The second content and the finish; no usage was reported.
	if events, end := drain(t, st); end != io.EOF || len(events) != 2 {
		t.Errorf("got %d more events and %v, want 2 and EOF", len(events), end)
	}
}

// TestBeforeRead: the events one upstream event produced are all returned
// before the reader notifies a read, so the relay flushes them together.
func TestBeforeRead(t *testing.T) {
	up := newUpstream(t, 200, "text/event-stream", []byte(`data: {"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`+"\n\n"), nil)
	c := testClient(t, up.URL)
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reads := 0
	st.(provider.ReadNotifier).BeforeRead(sse.HookFunc(func() { reads++ }))
	var at []int
	for {
		_, err := st.Next()
		if err != nil {
			break
		}
		at = append(at, reads)
	}
	// role and content from the one event; the finish and usage chunks
	// from the body's end.
	if len(at) != 4 || at[0] != at[1] || at[2] != at[3] {
		t.Errorf("got read counts %v at each event, want the first two equal and the last two equal", at)
	}
}

// TestConnectionReuse: a stream read to its end and closed leaves its
// connection for the next request.
func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, okStream)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := testClient(t, srv.URL)
	for range 3 {
		st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
		if err != nil {
			t.Fatal(err)
		}
		if _, end := drain(t, st); end != io.EOF {
			t.Fatalf("got %v, want EOF", end)
		}
		st.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("got %d connections for 3 sequential streams, want 1", n)
	}
}

// TestCancel: cancelling the request's context ends a stream waiting for
// the upstream with the context's cause.
func TestCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}`+"\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c := testClient(t, srv.URL)
	cause := errors.New("client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	st, err := c.Open(ctx, chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Next() // role
	st.Next() // content
	cancel(cause)
	if _, err := st.Next(); !errors.Is(err, cause) {
		t.Errorf("got %v, want the context's cause", err)
	}
}

// TestMaxEvent: an event above Options.MaxLine is a malformed event, not an
// unbounded buffer.
func TestMaxEvent(t *testing.T) {
	big := `data: {"candidates":[{"content":{"parts":[{"text":"` + strings.Repeat("x", 4096) + `"}]}}]}` + "\n\n"
	up := newUpstream(t, 200, "text/event-stream", []byte(big), nil)
	c := New(up.URL, testKey, Options{MaxLine: 1024})
	defer c.CloseIdleConnections()
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, end := drain(t, st); !errors.Is(end, provider.ErrMalformed) {
		t.Errorf("got %v, want ErrMalformed", end)
	}
}

func TestMaxCompleteBody(t *testing.T) {
	big := bytes.Repeat([]byte(" "), MaxCompleteBody+1)
	up := newUpstream(t, 200, "application/json", big, nil)
	c := testClient(t, up.URL)
	if _, err := c.Complete(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))); !errors.Is(err, provider.ErrMalformed) {
		t.Errorf("got %v, want ErrMalformed for an answer above MaxCompleteBody", err)
	}
}

func TestRegistered(t *testing.T) {
	p, err := provider.New(provider.Config{Name: "g", Kind: "gemini", BaseURL: "https://generativelanguage.googleapis.com", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := p.(*Client)
	if !ok {
		t.Fatalf("got %T, want *gemini.Client", p)
	}
	if want := "https://generativelanguage.googleapis.com/v1beta/models/"; c.models != want {
		t.Errorf("got models URL %q, want %q", c.models, want)
	}
	c.CloseIdleConnections()
}

// TestToolCallFailureComplete: a non-stream answer that ends
// MALFORMED_FUNCTION_CALL or UNEXPECTED_TOOL_CALL is no answer: a
// retryable upstream failure (502) naming the reason, as the stream's (see
// the finish_* goldens), never a "stop".
func TestToolCallFailureComplete(t *testing.T) {
	for reason, code := range map[string]string{"MALFORMED_FUNCTION_CALL": "malformed_function_call", "UNEXPECTED_TOOL_CALL": "unexpected_tool_call"} {
		t.Run(reason, func(t *testing.T) {
			body := `{"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"` + reason + `","index":0}],"usageMetadata":{"promptTokenCount":4,"totalTokenCount":4}}`
			up := newUpstream(t, 200, "application/json", []byte(body), nil)
			out, err := testClient(t, up.URL).Complete(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
			var perr *provider.Error
			if !errors.As(err, &perr) || !perr.Retryable || perr.Status != 502 || perr.Code != code || !strings.Contains(perr.Message, reason) {
				t.Errorf("got %s, %v; want a retryable 502 with code %s naming %s", out, err, code, reason)
			}
		})
	}
}
