package anthropic

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

// Every stream and server a test opens is closed: no goroutine outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testKey is the upstream key the tests' clients send.
const testKey = "sk-ant-test-0123456789abcdef"

// fixedNow makes "created" reproducible in golden files.
var fixedNow = time.Unix(1750000000, 0)

func newTestClient(t testing.TB, base string) *Client {
	t.Helper()
	c := New(base, testKey, Options{})
	c.now = func() time.Time { return fixedNow }
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// golden compares got with the file at path, or rewrites it with -update.
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
		t.Fatalf("%v (run go test ./internal/provider/anthropic -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}

// chatRequest is a provider.Request as the gateway builds it from a client body.
func chatRequest(t testing.TB, body []byte, stream bool) *provider.Request {
	t.Helper()
	chat := &api.ChatRequest{}
	if err := json.Unmarshal(body, chat); err != nil {
		t.Fatalf("decode the test body: %v", err)
	}
	return &provider.Request{Model: "claude-up", Stream: stream, Body: body, Chat: chat, RequestID: "req-test-1"}
}

// replay serves body as an SSE stream for every request.
func replay(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}
}

// minimal is the smallest complete stream.
const minimal = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func TestBaseURL(t *testing.T) {
	tests := []struct{ base, wantPath string }{
		{"", "/v1/messages"},
		{"/", "/v1/messages"},
		{"/v1", "/v1/messages"},
		{"/v1/", "/v1/messages"},
		{"/proxy/anthropic", "/proxy/anthropic/v1/messages"},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			var path atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path.Store(r.URL.Path)
				replay([]byte(minimal))(w, r)
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL+tt.base)
			st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			if got := path.Load(); got != tt.wantPath {
				t.Errorf("got path %v, want %s", got, tt.wantPath)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			var got http.Header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Clone()
				if stream {
					replay([]byte(minimal))(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			req := chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), stream)
			req.Header = http.Header{"X-Sim-Ttft": {"5ms"}, "Authorization": {"Bearer client-key"}}
			if stream {
				st, err := c.Open(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				st.Close()
			} else if _, err := c.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"X-Api-Key":         testKey,
				"Anthropic-Version": "2023-06-01",
				"Content-Type":      "application/json",
				"X-Request-Id":      "req-test-1",
				"X-Sim-Ttft":        "5ms",
				"Accept":            map[bool]string{true: "text/event-stream", false: "application/json"}[stream],
			}
			for k, v := range want {
				if got.Get(k) != v {
					t.Errorf("%s: got %q, want %q", k, got.Get(k), v)
				}
			}
			if got.Get("Authorization") != "Bearer client-key" {
				t.Errorf("forwarded Authorization: got %q, want it as given (the gateway forwards X-Sim-* only)", got.Get("Authorization"))
			}
		})
	}
}

func TestNoKeyNoHeader(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		replay([]byte(minimal))(w, r)
	}))
	defer srv.Close()
	c := New(srv.URL, "", Options{})
	defer c.CloseIdleConnections()
	st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, ok := got["X-Api-Key"]; ok {
		t.Errorf("got x-api-key %q, want none without a key", got.Get("X-Api-Key"))
	}
}

func TestRegistered(t *testing.T) {
	p, err := provider.New(provider.Config{Name: "claude", Kind: "anthropic", BaseURL: "https://api.anthropic.com", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := p.(*Client)
	if !ok || c.url != "https://api.anthropic.com/v1/messages" {
		t.Errorf("got %T %+v, want an anthropic Client for https://api.anthropic.com/v1/messages", p, p)
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		retryAfter string
		want       provider.Error
	}{
		{"overloaded 529", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`, "",
			provider.Error{Status: 529, Retryable: true, Type: "overloaded_error", Message: "Overloaded"}},
		{"rate limit with retry-after", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, "12",
			provider.Error{Status: 429, Retryable: true, Type: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit", RetryAfter: 12 * time.Second}},
		{"api error 500", 500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, "",
			provider.Error{Status: 500, Retryable: true, Type: "api_error", Message: "Internal server error"}},
		{"invalid request 400", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`, "",
			provider.Error{Status: 400, Type: "invalid_request_error", Message: "max_tokens: Field required"}},
		{"authentication 401", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, "",
			provider.Error{Status: 401, Retryable: true, Type: "authentication_error", Message: "invalid x-api-key"}},
		{"billing 402", 402, `{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}`, "",
			provider.Error{Status: 402, Type: "billing_error", Message: "credit balance too low"}},
		{"request too large 413", 413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`, "",
			provider.Error{Status: 413, Type: "request_too_large", Message: "Request exceeds the maximum size"}},
		{"empty 529", 529, ``, "", provider.Error{Status: 529, Retryable: true, Message: "Overloaded"}},
		{"plain text 502", 502, "bad gateway from a proxy", "", provider.Error{Status: 502, Retryable: true, Message: "bad gateway from a proxy"}},
		{"key echoed by a proxy is redacted", 401, "no access for key " + testKey, "", provider.Error{Status: 401, Retryable: true, Message: "no access for key [redacted]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			for _, stream := range []bool{true, false} {
				req := chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), stream)
				var err error
				if stream {
					_, err = c.Open(context.Background(), req)
				} else {
					_, err = c.Complete(context.Background(), req)
				}
				var perr *provider.Error
				if !errors.As(err, &perr) {
					t.Fatalf("stream=%v: got %v, want a *provider.Error", stream, err)
				}
				if *perr != tt.want {
					t.Errorf("stream=%v: got %+v, want %+v", stream, *perr, tt.want)
				}
				if strings.Contains(perr.Error(), testKey) {
					t.Errorf("the error %q holds the API key", perr.Error())
				}
			}
		})
	}
}

func TestConnectRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := New(url, "", Options{ConnectTimeout: time.Second})
	_, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
	var perr *provider.Error
	if !errors.Is(err, provider.ErrConnect) || !errors.As(err, &perr) || !perr.Retryable {
		t.Errorf("got %v, want a retryable *provider.Error wrapping ErrConnect", err)
	}
}

// A stream read to message_stop and closed leaves its connection to the
// next request: every request of a sequence uses one connection.
func TestConnectionReuse(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "stream", "text.sse"))
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(replay(body))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newTestClient(t, srv.URL)
	for range 3 {
		st, err := c.Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := st.Next(); err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
		}
		st.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("got %d connections for 3 sequential streams, want 1", n)
	}
}

// Cancelling the request's context ends a stream blocked on the upstream
// with the context's cause.
func TestContextCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\"}}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c := newTestClient(t, srv.URL)
	cause := errors.New("client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	st, err := c.Open(ctx, chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Next(); err != nil {
		t.Fatalf("role chunk: %v", err)
	}
	var once sync.Once
	st.(*stream).BeforeRead(sse.HookFunc(func() { once.Do(func() { cancel(cause) }) }))
	if _, err := st.Next(); !errors.Is(err, cause) {
		t.Errorf("got %v, want the context's cause", err)
	}
}
