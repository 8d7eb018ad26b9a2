package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStreamedCallsNoneLost is issue 38's scenario: a streamed tool call
// with progress notifications against the Go SDK's server, many times over
// pooled keep-alive connections (a plain reverse proxy lost about 1 result
// in 15 so). Every run must get its result and all its progress. The
// server also closes idle connections quickly, which puts pooled
// connections that the server is closing in the way of new calls.
// STREAMGATE_MCP_STRESS_RUNS sets the number of runs (default 500).
func TestStreamedCallsNoneLost(t *testing.T) {
	runs := 500
	if v := os.Getenv("STREAMGATE_MCP_STRESS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("STREAMGATE_MCP_STRESS_RUNS=%q: %v", v, err)
		}
		runs = n
	} else if testing.Short() {
		runs = 100
	}
	for _, tc := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
		idle time.Duration
	}{
		{"2025-11-25 SSE", nil, 0},
		{"2025-11-25 SSE, server idle timeout 5ms", nil, 5 * time.Millisecond},
		{"2026-07-28 SSE", &mcp.StreamableHTTPOptions{Stateless: true}, 0},
		{"2026-07-28 SSE, server idle timeout 5ms", &mcp.StreamableHTTPOptions{Stateless: true}, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int64
			ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return stressServer }, tc.opts))
			ts.Config.IdleTimeout = tc.idle
			ts.Config.ConnState = func(c net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			ts.Start()
			t.Cleanup(ts.Close)
			s := open(t, Config{URL: ts.URL})
			const workers = 8
			var lost, wrong atomic.Int64
			var firstErr sync.Once
			var wg sync.WaitGroup
			next := make(chan int)
			for range workers {
				wg.Go(func() {
					for i := range next {
						req := withToken(toolCall("progress", progressIn{Steps: 3}), fmt.Sprint("run-", i))
						steps := 0
						resp, err := s.Call(context.Background(), req, func(ev Event) {
							if ev.Msg.Method == "notifications/progress" {
								var pp progressParams
								if json.Unmarshal(ev.Msg.Params, &pp) == nil && string(pp.Token) == strconv.Quote(fmt.Sprint("run-", i)) {
									steps++
								}
							}
						})
						if err != nil {
							lost.Add(1)
							firstErr.Do(func() { t.Errorf("run %d: %v", i, err) })
							continue
						}
						if string(resp.ID) != string(req.ID) || resp.Error != nil || steps != 3 ||
							!json.Valid(resp.Result) || !containsText(resp.Result, "done 3") {
							wrong.Add(1)
							firstErr.Do(func() { t.Errorf("run %d: got %s with %d progress notifications", i, resp.Result, steps) })
						}
					}
				})
			}
			for i := range runs {
				next <- i
			}
			close(next)
			wg.Wait()
			if lost.Load()+wrong.Load() > 0 {
				t.Fatalf("%d of %d runs lost, %d wrong", lost.Load(), runs, wrong.Load())
			}
			if tc.idle == 0 && conns.Load() > 4*workers {
				t.Errorf("%d connections for %d runs: keep-alive is not reusing them", conns.Load(), runs)
			}
			t.Logf("%d runs, %d connections", runs, conns.Load())
		})
	}
}

var stressServer = newSDKServer(nil)

func containsText(result json.RawMessage, want string) bool {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	return json.Unmarshal(result, &r) == nil && len(r.Content) == 1 && r.Content[0].Text == want
}

// BenchmarkCall is one echo tools/call through a Server against the Go
// SDK's server, per era: the cost of this client on top of the server's.
func BenchmarkCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"2025-11-25", nil},
		{"2026-07-28", &mcp.StreamableHTTPOptions{Stateless: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return stressServer }, tc.opts))
			defer ts.Close()
			benchEcho(b, ts.URL)
		})
	}
}

// benchEcho calls echo on the server at url from parallel goroutines.
func benchEcho(b *testing.B, url string) {
	s, err := Open(Config{Name: "bench", URL: url}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	req := toolCall("echo", echoIn{Text: "hi"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Call(context.Background(), req, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCallClient is the client's own cost: a tools/call against a
// minimal 2025-11-25 server that answers with fixed JSON.
func BenchmarkCallClient(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case m.Method == "server/discover":
			w.WriteHeader(http.StatusBadRequest)
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"b","version":"1"}}}`, m.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"hi"}]}}`, m.ID)
		}
	}))
	defer ts.Close()
	benchEcho(b, ts.URL)
}
