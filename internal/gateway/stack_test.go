package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sse"
)

// BenchmarkOpenStreamStack reports the goroutine stack memory each open
// stream holds in the gateway's process (stack-B/stream): the handler's
// goroutine, which lives as long as the stream, and the upstream
// connection's. The handler's frames are kept small (the //go:noinline
// functions of chat.go and relay.go) so that net/http's deepest call below
// the relay loop, the first flush, fits in an 8 KiB stack instead of
// doubling it to 16 KiB for the stream's life; losing that shows here as
// about 8 KiB more per stream. The upstream (in-process, holding each
// stream open after its first content chunk) and the raw TCP clients are
// part of the figure, the same for every version.
func BenchmarkOpenStreamStack(b *testing.B) {
	const streams = 200
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sse.SetHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		sw := sse.NewWriter(w)
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`))
		sw.Data([]byte(chunkHi))
		<-r.Context().Done()
	}))
	defer up.Close()
	cfg := &config.Config{
		Timeouts:  config.Timeouts{Connect: config.Duration(time.Second), FirstToken: config.Duration(time.Minute), Idle: config.Duration(time.Minute)},
		Providers: []config.Provider{{Name: "up", Kind: "openai", BaseURL: up.URL + "/v1"}},
		Keys:      []config.Key{{Name: "bench", Key: "sg-bench-0123456789abcdef"}},
		Models:    []config.Model{{Name: "m", Routes: []config.Route{{Provider: "up", Model: "m"}}}},
	}
	gw, err := gateway.New(gateway.Options{Config: cfg, KeepAlive: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sg-bench-0123456789abcdef\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	var perStream float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		conns := make([]net.Conn, 0, streams)
		for range streams {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
			io.WriteString(c, req)
			// Read up to the first content chunk: the stream is open and relaying.
			rd := bufio.NewReader(c)
			for {
				line, err := rd.ReadBytes('\n')
				if err != nil {
					b.Fatalf("reading the stream: %v", err)
				}
				if bytes.Contains(line, []byte(`"content"`)) {
					break
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perStream = float64(int64(after.StackInuse)-int64(before.StackInuse)) / streams
		for _, c := range conns {
			c.Close()
		}
	}
	b.ReportMetric(perStream, "stack-B/stream")
}
