package upstream

// The upstream servers of these tests are the official Go SDK's
// (github.com/modelcontextprotocol/go-sdk, a test-only dependency): over
// Streamable HTTP in its stateful and stateless modes, over the legacy
// HTTP+SSE transport, and over stdio (this test binary re-executed as the
// server, see TestMain).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// serverEnv, when set, makes the test binary a stdio MCP server (the Go
// SDK's) instead of running tests: the stdio tests start it as their
// upstream. Its value is "all" or the protocol versions the server offers,
// separated by commas.
const serverEnv = "STREAMGATE_TEST_MCP_STDIO_SERVER"

func TestMain(m *testing.M) {
	if v := os.Getenv(serverEnv); v != "" {
		var versions []string
		if v != "all" {
			versions = strings.Split(v, ",")
		}
		s := newSDKServer(nil, versions...)
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "stdio server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The Go SDK's test servers end a session's reader after its DELETE
	// on their own schedule (once, under CI load, after goleak's last
	// look): it is the fixture's goroutine, not the client's this
	// package's leak check is for.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"))
}

// probe records what the test server saw.
type probe struct {
	mu        sync.Mutex
	headers   []http.Header
	cancelled chan string // tool names whose context ended early
}

func (p *probe) sawHeader(h http.Header) {
	if p == nil || h == nil {
		return
	}
	p.mu.Lock()
	p.headers = append(p.headers, h.Clone())
	p.mu.Unlock()
}

type echoIn struct {
	Text string `json:"text"`
}

type progressIn struct {
	Steps   int `json:"steps"`
	DelayMS int `json:"delay_ms"`
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

// newSDKServer is the Go SDK server every test talks to, with its tools:
// echo, progress (notifications/progress, then a result), ask (needs an
// elicitation: input-required in 2026-07-28, an elicitation/create request
// before), block (until cancelled), big (a result of the size asked), pid.
func newSDKServer(p *probe, versions ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-test", Version: "1.0.0"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		if req.Extra != nil {
			p.sawHeader(req.Extra.Header)
		}
		return text("echo: " + in.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "reports progress"}, func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= in.Steps; i++ {
			if in.DelayMS > 0 {
				select {
				case <-time.After(time.Duration(in.DelayMS) * time.Millisecond):
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, nil, err
				}
			}
		}
		return text(fmt.Sprintf("done %d", in.Steps)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks the user"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["name"].(*mcp.ElicitResult); ok {
			return text(fmt.Sprintf("hello %v (%s)", r.Content["name"], r.Action)), nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": &mcp.ElicitParams{
			Message:         "your name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		}}, RequestState: "state-1"}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "waits until cancelled (after one progress notification when asked)"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil && in.Text == "tell" {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1})
		}
		<-ctx.Done()
		if p != nil && p.cancelled != nil {
			p.cancelled <- "block"
		}
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "a large result"}, func(ctx context.Context, req *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.Bytes)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "poll", Description: "closes its stream mid-call (SEP-1699); the client resumes"}, func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= in.Steps; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i)}); err != nil {
				return nil, nil, err
			}
			if i == 1 && req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: time.Millisecond})
			}
		}
		return text(fmt.Sprintf("polled %d", in.Steps)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "adds a tool (list_changed follows)"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(s, &mcp.Tool{Name: in.Text}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
		return text("added " + in.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "the server's process id"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprint(os.Getpid())), nil, nil
	})
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// serveSDK serves s over Streamable HTTP and returns its URL.
func serveSDK(t *testing.T, s *mcp.Server, opts *mcp.StreamableHTTPOptions) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func open(t *testing.T, cfg Config) Server {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	s, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var lastID atomic.Int64

// request builds a caller's request with a fresh id.
func request(method string, params any) *jsonrpc.Message {
	id := lastID.Add(1)
	raw, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	return &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: json.RawMessage(fmt.Sprintf(`"caller-%d"`, id)), Method: method, Params: raw}
}

func toolCall(name string, args any) *jsonrpc.Message {
	return request("tools/call", map[string]any{"name": name, "arguments": args})
}

// callTool calls a tool and returns its text, failing on any error.
func callTool(t *testing.T, s Server, name string, args any) string {
	t.Helper()
	req := toolCall(name, args)
	resp, err := s.Call(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return resultText(t, req, resp)
}

// resultText checks a response to req and returns its first text content.
func resultText(t *testing.T, req, resp *jsonrpc.Message) string {
	t.Helper()
	if string(resp.ID) != string(req.ID) {
		t.Fatalf("response id: got %s, want the caller's %s", resp.ID, req.ID)
	}
	if resp.Error != nil {
		t.Fatalf("error response: %d %s", resp.Error.Code, resp.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: want text content (%v)", resp.Result, err)
	}
	if r.IsError {
		t.Fatalf("tool error: %s", r.Content[0].Text)
	}
	return r.Content[0].Text
}

func toolNames(t *testing.T, s Server) []string {
	t.Helper()
	req := request("tools/list", map[string]any{})
	resp, err := s.Call(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if string(resp.ID) != string(req.ID) {
		t.Fatalf("response id: got %s, want %s", resp.ID, req.ID)
	}
	var r struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func TestHTTPEras(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		opts     *mcp.StreamableHTTPOptions
		want     string
	}{
		// The SDK's stateful transport offers initialize-era versions only;
		// its stateless one 2026-07-28.
		{"stateful", nil, nil, Version2025},
		{"stateless", nil, &mcp.StreamableHTTPOptions{Stateless: true}, Version2026},
		{"stateless JSON answers", nil, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, Version2026},
		{"stateful, 2025-11-25 only", []string{Version2025}, nil, Version2025},
		{"stateful JSON answers, 2025-11-25 only", []string{Version2025}, &mcp.StreamableHTTPOptions{JSONResponse: true}, Version2025},
		{"stateful, 2025-06-18 only", []string{"2025-06-18"}, nil, "2025-06-18"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := serveSDK(t, newSDKServer(nil, tc.versions...), tc.opts)
			s := open(t, Config{URL: url})
			info, err := s.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.ProtocolVersion != tc.want {
				t.Fatalf("protocol version: got %s, want %s", info.ProtocolVersion, tc.want)
			}
			if !strings.Contains(string(info.Result), "sdk-test") {
				t.Errorf("info result %s: want the server's name", info.Result)
			}
			if got := strings.Join(toolNames(t, s), ","); got != "ask,big,block,echo,grow,pid,poll,progress" {
				t.Errorf("tools: got %s", got)
			}
			if got := callTool(t, s, "echo", echoIn{Text: "hi"}); got != "echo: hi" {
				t.Errorf("echo: got %q", got)
			}
		})
	}
}
