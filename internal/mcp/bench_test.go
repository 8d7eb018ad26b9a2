package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// echoServer is a Go SDK server with one tool, echo, over loopback HTTP;
// every tools/list waits listDelay first.
func echoServer(b *testing.B, listDelay time.Duration) string {
	s := sdk.NewServer(&sdk.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Text}}}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if listDelay > 0 && r.Header.Get("Mcp-Method") == "tools/list" || listDelay > 0 && r.Method == http.MethodPost && peekList(r) {
			time.Sleep(listDelay)
		}
		h.ServeHTTP(w, r)
	}))
	b.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	return srv.URL
}

// peekList reports whether r's body is a tools/list, leaving it readable.
func peekList(r *http.Request) bool {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	return strings.Contains(string(body), `"method":"tools/list"`)
}

// benchGateway serves a Gateway over loopback HTTP with the servers at urls
// (named s0, s1, …).
func benchGateway(b *testing.B, urls ...string) string {
	var specs []ServerSpec
	for i, u := range urls {
		rec := &recorder{srv: &httptest.Server{URL: u}}
		specs = append(specs, ServerSpec{Name: fmt.Sprintf("s%d", i), Server: rec.open(b, fmt.Sprintf("s%d", i), nil)})
	}
	gov := &testGovernor{keys: map[string]*Caller{"sk-dev": {Key: "dev"}}}
	sl, _ := NewSealer([]byte("bench"))
	gw, err := New(Options{Servers: specs, Governor: gov, Sealer: sl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	gov.discard = true
	srv := httptest.NewServer(gw)
	b.Cleanup(func() {
		srv.Close()
		gw.Close()
	})
	return srv.URL
}

// session connects a Go SDK client (2025-11-25) to url with the key.
func session(b *testing.B, url string) *sdk.ClientSession {
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 512}
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: keyed{"sk-dev", tr}}, MaxRetries: -1, DisableStandaloneSSE: true},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cs.Close()
		tr.CloseIdleConnections()
	})
	return cs
}

// latencies runs n echo calls on cs, conc at a time, and returns each one's duration.
func latencies(b *testing.B, cs *sdk.ClientSession, name string, n, conc int) []time.Duration {
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range conc {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: map[string]string{"text": "ping"}})
				out[i] = time.Since(t0)
				if err != nil || res.IsError {
					b.Errorf("call: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	return out
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkEcho: an echo tool called directly and through the gateway by
// the Go SDK client (2025-11-25, one session, the calls concurrent), at
// concurrency 1, 32 and 256, interleaved in rounds of 200 calls:
// added-p50-ms and added-p99-ms are what the gateway adds to the direct
// call's p50 and p99 (issue 38: ≤ 0.3 ms and ≤ 1.5 ms), floor-added-*
// what net/http's reverse proxy in the same place adds. Run with -benchtime=Nx: N calls each way.
func BenchmarkEcho(b *testing.B) {
	for _, conc := range []int{1, 32, 256} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			up := echoServer(b, 0)
			direct := session(b, up)
			through := session(b, benchGateway(b, up)+"/mcp/s0")
			floor := session(b, floorProxy(b, up))
			for _, cs := range []*sdk.ClientSession{direct, through, floor} {
				latencies(b, cs, "echo", 50, min(conc, 8)) // warm every path
			}
			b.ResetTimer()
			// Interleaved in rounds, so the three paths see the same load.
			var d, t, f []time.Duration
			for left := b.N; left > 0; left -= 200 {
				n := min(left, 200)
				d = append(d, latencies(b, direct, "echo", n, conc)...)
				t = append(t, latencies(b, through, "echo", n, conc)...)
				f = append(f, latencies(b, floor, "echo", n, conc)...)
			}
			b.ReportMetric(ms(pct(d, .5)), "direct-p50-ms")
			b.ReportMetric(ms(pct(d, .99)), "direct-p99-ms")
			b.ReportMetric(ms(pct(t, .5)-pct(d, .5)), "added-p50-ms")
			b.ReportMetric(ms(pct(t, .99)-pct(d, .99)), "added-p99-ms")
			b.ReportMetric(ms(pct(f, .5)-pct(d, .5)), "floor-added-p50-ms")
			b.ReportMetric(ms(pct(f, .99)-pct(d, .99)), "floor-added-p99-ms")
		})
	}
}

// floorProxy is the smallest hop that can stand where the gateway stands:
// net/http's reverse proxy in front of the server at url, streams flushed
// at once, no auth, no parsing. What it adds at a concurrency is what any
// extra hop costs on the machine at that load (floor-added-*-ms).
func floorProxy(b *testing.B, url string) string {
	u, err := neturl.Parse(url)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) },
		Transport: &http.Transport{MaxIdleConnsPerHost: 512}, FlushInterval: -1})
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkListFanout: tools/list on /mcp over 4 servers that take 5, 10,
// 15 and 20 ms to list, against tools/list sent to the slowest of them
// directly, the two interleaved: added-p50-ms and added-p99-ms are what
// the aggregated list takes beyond the slowest server's own list (issue
// 38: ≤ 1 ms); over-slowest-p50-ms beyond its 20 ms alone.
func BenchmarkListFanout(b *testing.B) {
	delays := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond, 20 * time.Millisecond}
	var urls []string
	for _, d := range delays {
		urls = append(urls, echoServer(b, d))
	}
	through := session(b, benchGateway(b, urls...)+"/mcp")
	direct := session(b, urls[len(urls)-1])
	list := func(cs *sdk.ClientSession, want int) time.Duration {
		t0 := time.Now()
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(res.Tools) != want {
			b.Fatalf("tools/list: %v %+v", err, res)
		}
		return time.Since(t0)
	}
	list(through, 4)
	list(direct, 1)
	b.ResetTimer()
	fan, one := make([]time.Duration, b.N), make([]time.Duration, b.N)
	for i := range fan {
		one[i] = list(direct, 1)
		fan[i] = list(through, 4)
	}
	b.ReportMetric(ms(pct(fan, .5)-pct(one, .5)), "added-p50-ms")
	b.ReportMetric(ms(pct(fan, .99)-pct(one, .99)), "added-p99-ms")
	b.ReportMetric(ms(pct(fan, .5)-delays[len(delays)-1]), "over-slowest-p50-ms")
}

// BenchmarkHandler: one tools/call through the handler alone (a 2025-11-25
// session, a stub server answering at once), the request built in memory
// and served without a network: the handler's own cost per call.
func BenchmarkHandler(b *testing.B) {
	stub := &stubServer{result: json.RawMessage(`{"content":[{"type":"text","text":"ping"}]}`)}
	gov := &testGovernor{keys: map[string]*Caller{"sk-dev": {Key: "dev"}}, discard: true}
	sl, _ := NewSealer([]byte("bench"))
	gw, err := New(Options{Servers: []ServerSpec{{Name: "s", Server: stub}}, Governor: gov, Sealer: sl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	sess := Session{Version: 3, Expires: time.Now().Add(time.Hour)}
	sid := sl.Seal(&sess, &Binding{Key: HashKey("dev"), Route: "s"})
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ping"}}}`
	stub.got = nil
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/mcp/s", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer sk-dev")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Session-Id", sid)
		w := httptest.NewRecorder()
		gw.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		stub.got = stub.got[:0]
	}
}
