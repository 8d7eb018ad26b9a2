package gateway_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/openai"
)

// cannedTransport answers every request in memory with the same SSE body
// (or JSON body for non-streams), so a benchmark measures the gateway, not
// the network.
type cannedTransport struct{ stream, json []byte }

func (t *cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	body, ct := t.json, "application/json"
	if r.Header.Get("Accept") == "text/event-stream" {
		body, ct = t.stream, "text/event-stream"
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {ct}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    r,
	}, nil
}

// flushRecorder is a ResponseWriter that keeps nothing but the status.
type flushRecorder struct {
	h      http.Header
	status int
	n      int
}

func (w *flushRecorder) Header() http.Header { return w.h }
func (w *flushRecorder) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}
func (w *flushRecorder) WriteHeader(s int) { w.status = s }
func (w *flushRecorder) Flush()            {}

// cannedStream is a role chunk, n content chunks, a finish chunk, a usage
// chunk and [DONE], each preceded by a sim-style stamp.
func cannedStream(n int) []byte {
	var b strings.Builder
	ev := func(data string) {
		b.WriteString(": sent_ns=1764400000000000000\ndata: " + data + "\n\n")
	}
	ev(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	for i := 0; i < n; i++ {
		ev(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}`)
	}
	ev(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	ev(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22}}`)
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// benchGateway is a gateway on an in-memory upstream answering chunks
// content chunks; tracer traces its requests (nil: tracing off).
func benchGateway(b *testing.B, chunks int, tracer trace.Tracer) *gateway.Gateway {
	b.Helper()
	return benchGatewayWith(b, chunks, func(o *gateway.Options) { o.Tracer = tracer })
}

// benchGatewayWith is benchGateway with its Options changed by opt.
func benchGatewayWith(b *testing.B, chunks int, opt func(*gateway.Options)) *gateway.Gateway {
	b.Helper()
	cfg := &config.Config{
		Timeouts:  config.Timeouts{Connect: config.Duration(time.Second), FirstToken: config.Duration(30 * time.Second), Idle: config.Duration(30 * time.Second)},
		Providers: []config.Provider{{Name: "mem", Kind: "openai", BaseURL: "http://upstream.invalid/v1"}},
		Keys:      []config.Key{{Name: "bench", Key: "sg-bench-0123456789abcdef"}},
		Models:    []config.Model{{Name: "m", Routes: []config.Route{{Provider: "mem", Model: "m-up"}}, Price: config.Price{Input: 1, Output: 2}}},
	}
	ct := &cannedTransport{
		stream: cannedStream(chunks),
		json:   []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`),
	}
	o := gateway.Options{
		Config:    cfg,
		KeepAlive: -1,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)), // info: the access line is written
		Providers: map[string]provider.Provider{"mem": openai.New("http://upstream.invalid/v1", "", openai.Options{Transport: ct})},
	}
	opt(&o)
	gw, err := gateway.New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gw.Close() })
	return gw
}

// benchRequest serves one request per iteration through the handler with an
// in-memory upstream: everything the gateway does per request (auth, parse,
// route, upstream body, relay, metrics, usage entry, access line) except
// the sockets.
func benchRequest(b *testing.B, stream bool, chunks int) {
	benchServe(b, benchGateway(b, chunks, nil), stream)
}

// benchServe serves one request (a stream or not) per iteration through gw.
func benchServe(b *testing.B, gw *gateway.Gateway, stream bool) {
	body := []byte(`{"model":"m","stream":false,"max_tokens":64,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about latency and the sea, in English, with a title."}]}`)
	if stream {
		body = bytes.Replace(body, []byte(`"stream":false`), []byte(`"stream":true`), 1)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", nil)
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

// BenchmarkChatRequest is the per-request cost of a stream with one content
// chunk: the request path with as little relaying as possible.
func BenchmarkChatRequest(b *testing.B) { benchRequest(b, true, 1) }

// BenchmarkChatStream100 is a whole 100-chunk stream through the handler:
// request path plus 100 relayed chunks (per chunk: divide the difference
// with BenchmarkChatRequest by 99).
func BenchmarkChatStream100(b *testing.B) { benchRequest(b, true, 100) }

// BenchmarkChatComplete is one non-stream request through the handler.
func BenchmarkChatComplete(b *testing.B) { benchRequest(b, false, 0) }
