package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/provider/openai"
)

// bodyShapes are request bodies of about n bytes shaped to cost the
// gateway the most memory per body byte: many tiny messages, parts, tools
// and tool calls, escaped strings. Each is valid for both client dialects'
// chat form; messagesShapes are the same for /v1/messages.
func bodyShapes(n int) map[string][]byte {
	rep := func(head, elem, sep, tail string) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for i := 0; b.Len() < n; i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(elem)
		}
		b.WriteString(tail)
		return b.Bytes()
	}
	return map[string][]byte{
		"one-word-messages": rep(`{"model":"m","max_tokens":8,"messages":[`, `{"role":"user","content":"hi"}`, ",", `]}`),
		"alternating-turns": rep(`{"model":"m","max_tokens":8,"messages":[`, `{"role":"user","content":"a"},{"role":"assistant","content":"b"}`, ",", `,{"role":"user","content":"c"}]}`),
		"text-parts":        rep(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[`, `{"type":"text","text":"a"}`, ",", `]}]}`),
		"tools":             rep(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[`, `{"type":"function","function":{"name":"f"}}`, ",", `]}`),
		"tool-calls":        rep(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[`, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`, ",", `]}]}`),
		"escaped-text":      rep(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"`, `\u00e9\n`, "", `"}]}`),
	}
}

// shapeTransport answers every request in memory: an OpenAI or an
// Anthropic non-stream answer by the path asked.
type shapeTransport struct{}

func (shapeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`
	if strings.HasSuffix(r.URL.Path, "/messages") {
		body = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":1}}`
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// BenchmarkBodyShapes is the memory one request of each worst shape costs
// the gateway, per body byte (B/body-byte), through each provider kind: the
// bound that keeps a gateway's memory linear in the bytes it is decoding
// (docs/operations.md, "Request bodies").
func BenchmarkBodyShapes(b *testing.B) {
	const size = 1 << 20
	for _, kind := range []string{"openai", "anthropic"} {
		var p provider.Provider = openai.New("http://up.invalid/v1", "", openai.Options{Transport: shapeTransport{}})
		if kind == "anthropic" {
			p = anthropic.New("http://up.invalid", "", anthropic.Options{Transport: shapeTransport{}})
		}
		gw, err := gateway.New(gateway.Options{
			Config: &config.Config{
				Timeouts:  config.Timeouts{Connect: config.Duration(time.Second), FirstToken: config.Duration(30 * time.Second), Idle: config.Duration(30 * time.Second)},
				Providers: []config.Provider{{Name: "mem", Kind: kind, BaseURL: "http://up.invalid"}},
				Keys:      []config.Key{{Name: "bench", Key: "sg-bench-0123456789abcdef"}},
				Models:    []config.Model{{Name: "m", Routes: []config.Route{{Provider: "mem", Model: "m-up"}}}},
			},
			KeepAlive: -1,
			Logger:    slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError})),
			Providers: map[string]provider.Provider{"mem": p},
		})
		if err != nil {
			b.Fatal(err)
		}
		shapes := bodyShapes(size)
		for _, name := range []string{"one-word-messages", "alternating-turns", "text-parts", "tools", "tool-calls", "escaped-text"} {
			body := shapes[name]
			b.Run(fmt.Sprintf("%s/%s", kind, name), func(b *testing.B) {
				req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", nil)
				req.Header.Set("Authorization", "Bearer sg-bench-0123456789abcdef")
				rd := bytes.NewReader(body)
				w := &flushRecorder{h: http.Header{}}
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				var ms0, ms1 runtimeMem
				ms0.read()
				for b.Loop() {
					rd.Reset(body)
					req.Body = io.NopCloser(rd)
					req.ContentLength = int64(len(body))
					clear(w.h)
					w.status = 0
					gw.ServeHTTP(w, req)
					if w.status != http.StatusOK {
						b.Fatalf("got status %d, want 200", w.status)
					}
				}
				ms1.read()
				b.ReportMetric(float64(ms1.bytes-ms0.bytes)/float64(b.N)/float64(len(body)), "B/body-byte")
			})
		}
		gw.Close()
	}
}

// runtimeMem reads the bytes allocated so far.
type runtimeMem struct{ bytes uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.bytes = s.TotalAlloc
}
