package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// kind is one way to reach a Go SDK server.
type kind struct {
	name string
	// inProcess: the test sees the server's side (probe, tools added).
	inProcess bool
	serve     func(t *testing.T, s *mcp.Server) Config
}

func streamable(opts *mcp.StreamableHTTPOptions) func(t *testing.T, s *mcp.Server) Config {
	return func(t *testing.T, s *mcp.Server) Config { return Config{URL: serveSDK(t, s, opts)} }
}

var kinds = []kind{
	{"http 2025-11-25 SSE", true, streamable(nil)},
	{"http 2025-11-25 JSON", true, streamable(&mcp.StreamableHTTPOptions{JSONResponse: true})},
	{"http 2026-07-28", true, streamable(&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})},
	{"legacy HTTP+SSE", true, func(t *testing.T, s *mcp.Server) Config {
		ts := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
		t.Cleanup(ts.Close)
		return Config{URL: ts.URL}
	}},
	{"stdio", false, func(t *testing.T, _ *mcp.Server) Config { return stdioConfig("all") }},
	{"stdio 2025-11-25", false, func(t *testing.T, _ *mcp.Server) Config { return stdioConfig(Version2025) }},
}

// stdioConfig runs this test binary as a stdio server offering versions.
func stdioConfig(versions string) Config {
	return Config{Command: []string{os.Args[0]}, Env: map[string]string{serverEnv: versions}}
}

// forKinds runs f against every kind of upstream.
func forKinds(t *testing.T, f func(t *testing.T, k kind, p *probe, cfg Config)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			p := &probe{cancelled: make(chan string, 4)}
			f(t, k, p, k.serve(t, newSDKServer(p)))
		})
	}
}

func withToken(m *jsonrpc.Message, token string) *jsonrpc.Message {
	m.Params = setMember(m.Params, "_meta", json.RawMessage(`{"progressToken":`+strconv.Quote(token)+`}`))
	return m
}

type progressParams struct {
	Token    json.RawMessage `json:"progressToken"`
	Progress float64         `json:"progress"`
	Total    float64         `json:"total"`
}

func TestProgress(t *testing.T) {
	forKinds(t, func(t *testing.T, k kind, p *probe, cfg Config) {
		s := open(t, cfg)
		req := withToken(toolCall("progress", progressIn{Steps: 5}), "mine")
		var got []float64
		resp, err := s.Call(context.Background(), req, func(ev Event) {
			if ev.Msg.Method != "notifications/progress" {
				return
			}
			var pp progressParams
			if err := json.Unmarshal(ev.Msg.Params, &pp); err != nil {
				t.Error(err)
			}
			if string(pp.Token) != `"mine"` {
				t.Errorf("progress token: got %s, want the caller's \"mine\"", pp.Token)
			}
			got = append(got, pp.Progress)
		})
		if err != nil {
			t.Fatal(err)
		}
		if txt := resultText(t, req, resp); txt != "done 5" {
			t.Errorf("result: got %q, want done 5", txt)
		}
		want := []float64{1, 2, 3, 4, 5}
		if strings.Contains(k.name, "JSON") && len(got) < len(want) {
			// A JSON answer comes on its own connection, the progress on
			// the GET stream: the last notifications may trail the answer.
			want = want[:len(got)]
		}
		if !slices.Equal(got, want) {
			t.Errorf("progress: got %v, want 1..5 in order", got)
		}

		// A caller that asked for no progress gets none, though the server
		// sent some (the Server asks for it on every tools/call).
		req = toolCall("progress", progressIn{Steps: 3})
		resp, err = s.Call(context.Background(), req, func(ev Event) {
			t.Errorf("got %s, want no event", ev.Msg.Method)
		})
		if err != nil {
			t.Fatal(err)
		}
		resultText(t, req, resp)
	})
}

// elicitAnswer is the client's answer to the ask tool's elicitation.
var elicitAnswer = json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)

func TestElicitation(t *testing.T) {
	forKinds(t, func(t *testing.T, k kind, p *probe, cfg Config) {
		s := open(t, cfg)
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		req := toolCall("ask", echoIn{})
		if info.ProtocolVersion >= Version2026 {
			// Input-required results pass through untouched; the caller
			// retries with the answers.
			resp, err := s.Call(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				ResultType    string                     `json:"resultType"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
				RequestState  string                     `json:"requestState"`
			}
			if err := json.Unmarshal(resp.Result, &r); err != nil {
				t.Fatal(err)
			}
			if r.ResultType != "input_required" || r.InputRequests["name"] == nil || r.RequestState != "state-1" {
				t.Fatalf("got %s, want an input_required result with its request and state", resp.Result)
			}
			retry := toolCall("ask", echoIn{})
			retry.Params = setMember(retry.Params, "inputResponses", json.RawMessage(`{"name":`+string(elicitAnswer)+`}`))
			retry.Params = setMember(retry.Params, "requestState", json.RawMessage(`"state-1"`))
			resp, err = s.Call(context.Background(), retry, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, retry, resp); got != "hello Ada (accept)" {
				t.Fatalf("got %q", got)
			}
			return
		}
		// Earlier eras: the server asks with elicitation/create on the
		// call's stream; the answer goes back through Reply.
		var asked int
		resp, err := s.Call(context.Background(), req, func(ev Event) {
			if ev.Msg.Method != "elicitation/create" {
				return
			}
			asked++
			if ev.ReplyTo == "" {
				t.Fatal("elicitation/create without ReplyTo")
			}
			if err := s.Reply(context.Background(), ev.ReplyTo, &jsonrpc.Message{Result: elicitAnswer}); err != nil {
				t.Errorf("Reply: %v", err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, req, resp); got != "hello Ada (accept)" || asked != 1 {
			t.Fatalf("got %q after %d elicitations, want hello Ada (accept) after 1", got, asked)
		}
	})
}

// TestReplyOnAnotherReplica answers a server's request through another
// Server of the same configuration: what a second gateway replica does.
func TestReplyOnAnotherReplica(t *testing.T) {
	url := serveSDK(t, newSDKServer(nil), nil)
	a, b := open(t, Config{URL: url}), open(t, Config{URL: url})
	req := toolCall("ask", echoIn{})
	resp, err := a.Call(context.Background(), req, func(ev Event) {
		if ev.ReplyTo != "" {
			if err := b.Reply(context.Background(), ev.ReplyTo, &jsonrpc.Message{Result: elicitAnswer}); err != nil {
				t.Errorf("Reply on the other replica: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, req, resp); got != "hello Ada (accept)" {
		t.Fatalf("got %q", got)
	}
	if err := b.Reply(context.Background(), "bm90IG91cnM", &jsonrpc.Message{Result: elicitAnswer}); err == nil || !strings.Contains(err.Error(), "not one this gateway made") {
		t.Errorf("a forged reply-to: got %v, want it refused", err)
	}
}

func TestCancel(t *testing.T) {
	forKinds(t, func(t *testing.T, k kind, p *probe, cfg Config) {
		s := open(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		req := withToken(toolCall("progress", progressIn{Steps: 1000, DelayMS: 50}), "t")
		done := make(chan error, 1)
		go func() {
			_, err := s.Call(ctx, req, func(ev Event) {
				if ev.Msg.Method == "notifications/progress" {
					cancel() // the call has reached the server
				}
			})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Call did not return after its context ended")
		}
		// The server can still serve.
		if got := callTool(t, s, "echo", echoIn{Text: "after"}); got != "echo: after" {
			t.Fatalf("got %q", got)
		}
		if !k.inProcess || k.name == "http 2025-11-25 JSON" {
			return
		}
		// The server saw the cancellation (notifications/cancelled, or the
		// 2026-07-28 stream closed).
		ctx2, cancel2 := context.WithCancel(context.Background())
		go func() {
			_, err := s.Call(ctx2, withToken(toolCall("block", echoIn{Text: "tell"}), "b"), func(ev Event) {
				if ev.Msg.Method == "notifications/progress" {
					cancel2() // the tool runs
				}
			})
			done <- err
		}()
		<-done
		select {
		case <-p.cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the server's tool was not cancelled")
		}
	})
}

func TestIdleTimeout(t *testing.T) {
	forKinds(t, func(t *testing.T, k kind, p *probe, cfg Config) {
		cfg.Timeout = 400 * time.Millisecond
		s := open(t, cfg)
		// Ten gaps of 100 ms: each progress notification restarts the timer,
		// so the call lives past its timeout.
		req := toolCall("progress", progressIn{Steps: 10, DelayMS: 100})
		resp, err := s.Call(context.Background(), req, nil)
		if err != nil {
			t.Fatalf("a call with progress: %v", err)
		}
		resultText(t, req, resp)
		_, err = s.Call(context.Background(), toolCall("block", echoIn{}), nil)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("a silent call: got %v, want ErrTimeout", err)
		}
	})
}

func TestTooLarge(t *testing.T) {
	forKinds(t, func(t *testing.T, k kind, p *probe, cfg Config) {
		cfg.MaxResult = 4000
		s := open(t, cfg)
		_, err := s.Call(context.Background(), toolCall("big", bigIn{Bytes: 20000}), nil)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("got %v, want ErrTooLarge", err)
		}
		if got := callTool(t, s, "big", bigIn{Bytes: 100}); len(got) != 100 {
			t.Fatalf("a result under the cap after one over it: got %d bytes", len(got))
		}
	})
}

func TestListen(t *testing.T) {
	forKinds(t, func(t *testing.T, k kind, p *probe, cfg Config) {
		s := open(t, cfg)
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 16)
		ctx, cancel := context.WithCancel(context.Background())
		listening := make(chan error, 1)
		go func() {
			listening <- s.Listen(ctx, func(ev Event) { got <- ev.Msg.Method })
		}()
		// The stream opens in the background: add tools until a change is
		// seen.
		deadline := time.After(10 * time.Second)
		for i := 0; ; i++ {
			callTool(t, s, "grow", echoIn{Text: fmt.Sprint("added", i)})
			select {
			case m := <-got:
				if m != "notifications/tools/list_changed" {
					t.Fatalf("got %s, want notifications/tools/list_changed", m)
				}
				cancel()
				if err := <-listening; err != nil {
					t.Fatalf("Listen: got %v, want nil after its context ended", err)
				}
				t.Logf("protocol %s", info.ProtocolVersion)
				return
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatal("no list_changed notification")
			}
		}
	})
}

// TestSessionExpired has the server forget the session: the next call
// initializes again and goes through.
func TestSessionExpired(t *testing.T) {
	url := serveSDK(t, newSDKServer(nil), nil)
	s := open(t, Config{URL: url})
	callTool(t, s, "echo", echoIn{Text: "one"})
	h := s.(*httpServer)
	old := h.sess.id
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", old)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := callTool(t, s, "echo", echoIn{Text: "two"}); got != "echo: two" {
		t.Fatalf("got %q", got)
	}
	if h.sess.id == old || h.sess.id == "" {
		t.Fatalf("session: got %q, want a new one (old %q)", h.sess.id, old)
	}
}

// TestResume: a 2025-11-25 server closes a call's stream after its first
// event (SEP-1699 polling); the call resumes it with GET and Last-Event-ID
// and gets every notification and the result.
func TestResume(t *testing.T) {
	srv := newSDKServer(nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	var resumes atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			resumes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s := open(t, Config{URL: ts.URL})
	req := withToken(toolCall("poll", progressIn{Steps: 4}), "p")
	var got []float64
	resp, err := s.Call(context.Background(), req, func(ev Event) {
		var pp progressParams
		if ev.Msg.Method == "notifications/progress" && json.Unmarshal(ev.Msg.Params, &pp) == nil {
			got = append(got, pp.Progress)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if txt := resultText(t, req, resp); txt != "polled 4" || !slices.Equal(got, []float64{1, 2, 3, 4}) {
		t.Fatalf("got %q after progress %v, want polled 4 after 1..4", txt, got)
	}
	if resumes.Load() == 0 {
		t.Fatal("no GET with Last-Event-ID: the stream was not resumed")
	}
}

// TestStdioKilled kills a stdio server mid-call: the call fails at once,
// and the restarted server serves the next one.
func TestStdioKilled(t *testing.T) {
	s := open(t, stdioConfig("all"))
	pid, err := strconv.Atoi(callTool(t, s, "pid", echoIn{}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	running := make(chan struct{}, 1)
	go func() {
		_, err := s.Call(context.Background(), withToken(toolCall("block", echoIn{Text: "tell"}), "b"), func(ev Event) {
			running <- struct{}{}
		})
		done <- err
	}()
	<-running // the tool runs
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "process ended") {
			t.Fatalf("got %v, want the process's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call hangs after its server died")
	}
	next, err := strconv.Atoi(callTool(t, s, "pid", echoIn{}))
	if err != nil {
		t.Fatal(err)
	}
	if next == pid {
		t.Fatalf("pid: got %d again, want a new process", next)
	}
}

// TestStdioEnvironment: the process gets PATH, HOME and the configured
// variables, nothing else of the gateway's environment.
func TestStdioEnvironment(t *testing.T) {
	t.Setenv("STREAMGATE_SECRET_FOR_TEST", "leak")
	env := environ(map[string]string{"B": "2", "A": "1"})
	want := []string{"PATH=" + os.Getenv("PATH")}
	if home := os.Getenv("HOME"); home != "" {
		want = append(want, "HOME="+home)
	}
	want = append(want, "A=1", "B=2")
	if !slices.Equal(env, want) {
		t.Fatalf("got %q, want %q", env, want)
	}
}

// TestOnlyConfiguredHeaders: the server sees the configured headers and the
// protocol's own, nothing else.
func TestOnlyConfiguredHeaders(t *testing.T) {
	for _, opts := range []*mcp.StreamableHTTPOptions{nil, {Stateless: true}} {
		p := &probe{}
		url := serveSDK(t, newSDKServer(p), opts)
		s := open(t, Config{URL: url, Headers: map[string]string{"Authorization": "Bearer upstream-token", "X-Team": "a"}})
		callTool(t, s, "echo", echoIn{Text: "x"})
		allowed := []string{"Accept", "Accept-Encoding", "Content-Type", "Content-Length", "User-Agent",
			"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Authorization", "X-Team"}
		p.mu.Lock()
		h := p.headers[len(p.headers)-1]
		p.mu.Unlock()
		for name := range h {
			if !slices.Contains(allowed, name) {
				t.Errorf("the server got header %s", name)
			}
		}
		if h.Get("Authorization") != "Bearer upstream-token" || h.Get("X-Team") != "a" {
			t.Errorf("configured headers: got %v", h)
		}
		if opts != nil && (h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") != "echo") {
			t.Errorf("2026-07-28 headers: got Mcp-Method %q, Mcp-Name %q", h.Get("Mcp-Method"), h.Get("Mcp-Name"))
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Name: "a"}, "neither url nor command"},
		{Config{Name: "a", URL: "http://x", Command: []string{"y"}}, "both url and command"},
		{Config{Name: "a", URL: "ftp://x"}, "not an http(s) URL"},
		{Config{Name: "a", URL: "http://x", Headers: map[string]string{"Mcp-Session-Id": "s"}}, `header "Mcp-Session-Id" is the protocol's own`},
		{Config{Name: "a", URL: "http://x", Headers: map[string]string{"Mcp-Param-Region": "s"}}, "protocol's own"},
		{Config{Name: "a", URL: "http://x", Headers: map[string]string{"Bad Name": "s"}}, "not a valid HTTP field name"},
		{Config{Name: "a", URL: "http://x", Headers: map[string]string{"X": "a\nb"}}, "line break"},
		{Config{Name: "a", URL: "http://x", Env: map[string]string{"A": "1"}}, "env is set but the server is not a command"},
		{Config{Name: "a", Command: []string{"x"}, Headers: map[string]string{"A": "1"}}, "headers are set but the server is a command"},
		{Config{Name: "a", Command: []string{"x"}, Env: map[string]string{"A=B": "1"}}, "not a valid variable name"},
		{Config{Name: "a", URL: "http://x", Timeout: -1}, "negative"},
		{Config{URL: "http://x"}, "name is empty"},
	} {
		_, err := Open(tc.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func TestStdioStartFails(t *testing.T) {
	s := open(t, Config{Command: []string{"/nonexistent/mcp-server"}})
	_, err := s.Call(context.Background(), toolCall("echo", echoIn{}), nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Fatalf("got %v, want the start's failure naming the program", err)
	}
}

// TestConcurrentCalls: many calls in flight on one Server, each gets its
// own answer under its own id.
func TestConcurrentCalls(t *testing.T) {
	forKinds(t, func(t *testing.T, k kind, p *probe, cfg Config) {
		s := open(t, cfg)
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				// The same caller id on every call: ids are the callers'
				// business, not the server's.
				req := toolCall("echo", echoIn{Text: fmt.Sprint(i)})
				req.ID = json.RawMessage(`1`)
				resp, err := s.Call(context.Background(), req, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if got := resultText(t, req, resp); got != fmt.Sprint("echo: ", i) {
					t.Errorf("got %q, want echo: %d", got, i)
				}
			})
		}
		wg.Wait()
	})
}

// TestParamHeaders: a 2026-07-28 tool that mirrors an argument into a
// header (x-mcp-header). A replica that never listed the tools is refused
// by the server, lists them, and calls again with the header; a value
// that is not plain ASCII goes in the spec's Base64 form.
func TestParamHeaders(t *testing.T) {
	p := &probe{}
	srv := newSDKServer(p)
	srv.AddTool(&mcp.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"q":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p.sawHeader(req.Extra.Header)
			return text("ok"), nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var lists atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/list" {
			lists.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s := open(t, Config{URL: ts.URL})
	for _, tc := range []struct{ region, header string }{
		{"eu-west 1", "eu-west 1"},
		{"zürich", "=?base64?esO8cmljaA==?="},
	} {
		callTool(t, s, "region", map[string]string{"region": tc.region, "q": "x"})
		p.mu.Lock()
		got := p.headers[len(p.headers)-1].Get("Mcp-Param-Region")
		p.mu.Unlock()
		if got != tc.header {
			t.Fatalf("Mcp-Param-Region: got %q, want %q", got, tc.header)
		}
	}
	if lists.Load() != 1 {
		t.Fatalf("tools/list: got %d, want 1 (after the first refusal)", lists.Load())
	}
}

// logRecorder is a slog handler that keeps the records' messages and
// attributes as text.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// TestStdioProcessGroup: the server's stderr lines reach the log, and
// Close kills what the server started (its process group), not only the
// server.
func TestStdioProcessGroup(t *testing.T) {
	pidFile := t.TempDir() + "/child.pid"
	logs := &logRecorder{}
	cfg := stdioConfig("all")
	cfg.Name = "group"
	// The shell starts a child that would outlive the server, then becomes
	// the server.
	cfg.Command = []string{"/bin/sh", "-c", `echo "hello from stderr" >&2; sleep 1000 & echo $! > "$1"; exec "$0"`, os.Args[0], pidFile}
	s, err := Open(cfg, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	callTool(t, s, "echo", echoIn{Text: "x"})
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !logs.has("hello from stderr") {
		t.Errorf("logs %q: want the server's stderr line", logs.lines)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(child); {
		if time.Now().After(deadline) {
			t.Fatalf("the server's child %d outlived Close", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Call(context.Background(), toolCall("echo", echoIn{}), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("a call after Close: got %v, want ErrClosed", err)
	}
}

// alive reports a process that exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
