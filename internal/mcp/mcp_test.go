package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// longTool's name makes "docs__" + it longer than 64 characters.
const longTool = "fetch_every_document_matching_a_rather_long_query_description_v2"

var objectSchema = json.RawMessage(`{"type":"object"}`)

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// docsServer is a Go SDK server with the tools the tests call: echo,
// slow (progress), elicit (asks the client), meta (answers the _meta it
// got), a long-named tool and a dotted one; a prompt and a resource.
func docsServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "docs-server", Version: "1.0.0"}, &sdk.ServerOptions{Instructions: "Search the docs."})
	type echoIn struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes text."}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return textResult(in.Text), nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "slow", InputSchema: objectSchema}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= 3; i++ {
				req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
			}
		}
		return textResult("done"), nil
	})
	s.AddTool(&sdk.Tool{Name: "elicit", InputSchema: objectSchema}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "your name?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)})
		if err != nil {
			return nil, err
		}
		return textResult(res.Action + ":" + res.Content["name"].(string)), nil
	})
	s.AddTool(&sdk.Tool{Name: "meta", InputSchema: objectSchema}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		b, _ := json.Marshal(req.Params.Meta)
		return textResult(string(b)), nil
	})
	s.AddTool(&sdk.Tool{Name: longTool, InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return textResult("long"), nil
	})
	s.AddTool(&sdk.Tool{Name: "fail", InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such document"}}}, nil
	})
	s.AddPrompt(&sdk.Prompt{Name: "greet"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "hello"}}}}, nil
	})
	s.AddResource(&sdk.Resource{Name: "readme", URI: "file:///readme.md", MIMEType: "text/plain"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "read me"}}}, nil
	})
	return s
}

// fsServer is a second server.
func fsServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "fs-server", Version: "1.0.0"}, nil)
	for _, name := range []string{"read_file", "write_file"} {
		s.AddTool(&sdk.Tool{Name: name, InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult(name), nil
		})
	}
	return s
}

// env is a Gateway served over loopback HTTP with two servers, docs and fs,
// and keys: "sk-dev" (everything), "sk-one" (docs__echo only), "sk-ops".
type env struct {
	gw      *Gateway
	gov     *testGovernor
	srv     *httptest.Server
	docs    *recorder
	fs      *recorder
	sdkDocs *sdk.Server
}

func newEnv(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	e := &env{sdkDocs: docsServer()}
	e.docs = newRecorder(t, e.sdkDocs)
	e.fs = newRecorder(t, fsServer())
	allow, servers := CallerAllow([]string{"docs__echo"})
	e.gov = &testGovernor{keys: map[string]*Caller{
		"sk-dev": {Key: "dev", Team: "core"},
		"sk-one": {Key: "one", Allow: allow, Servers: servers},
		"sk-ops": {Key: "ops"},
	}}
	opts := Options{Servers: []ServerSpec{{Name: "docs", Server: e.docs.open(t, "docs", map[string]string{"Authorization": "Bearer docs-token"}),
		ToolPrices: map[string]float64{"echo": 0.002}}, {Name: "fs", Server: e.fs.open(t, "fs", nil)}},
		Governor: e.gov, Sealer: testSealer(t), KeepAlive: time.Second, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&opts)
	}
	gw, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	e.srv = httptest.NewServer(gw)
	t.Cleanup(func() {
		e.srv.Close()
		gw.Close()
	})
	return e
}

// keyed sends a key with every request, as Bearer.
type keyed struct {
	key string
	rt  http.RoundTripper
}

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.rt.RoundTrip(r)
}

// connect connects a Go SDK client with key to url, in protocol version
// (a legacy one: initialize; "" the SDK's default, 2026-07-28).
func connect(t *testing.T, url, key, version string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, opts)
	tr := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: keyed{key, http.DefaultTransport}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s (version %q): %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func callText(t *testing.T, cs *sdk.ClientSession, name string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var eras = []struct{ name, version string }{{"2025-11-25", "2025-11-25"}, {"2026-07-28", ""}}

// TestAggregate: a Go SDK client of either era sees every server's tools
// through /mcp, prefixed, valid provider names of at most 64 characters,
// sorted; calls them; each call is a ledger row with its price.
func TestAggregate(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cs := connect(t, e.srv.URL+"/mcp", "sk-dev", era.version, nil)
			if got := cs.InitializeResult().ProtocolVersion; era.version != "" && got != era.version || era.version == "" && got != versionModern {
				t.Fatalf("protocol version: got %q", got)
			}
			names := toolNames(t, cs)
			long := PrefixedName("docs", longTool)
			want := []string{"docs__echo", "docs__elicit", "docs__fail", "docs__meta", "docs__slow", long, "fs__read_file", "fs__write_file"}
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Fatalf("tools: got %q, want %q", names, want)
			}
			for _, n := range names {
				if !ValidName(n) {
					t.Fatalf("tool %q is not a valid provider function name", n)
				}
			}
			if again := toolNames(t, cs); !slices.Equal(again, names) {
				t.Fatalf("second list: got %q, want %q", again, names)
			}
			if got := callText(t, cs, "docs__echo", map[string]string{"text": "hi"}); got != "hi" {
				t.Fatalf("echo: got %q", got)
			}
			if got := callText(t, cs, long, nil); got != "long" {
				t.Fatalf("%s: got %q", long, got)
			}
			if got := callText(t, cs, "fs__read_file", nil); got != "read_file" {
				t.Fatalf("read_file: got %q", got)
			}
			rows := e.gov.ledger()
			if len(rows) != 3 {
				t.Fatalf("ledger: got %d rows, want 3: %+v", len(rows), rows)
			}
			r := rows[0]
			if r.Server != "docs" || r.Tool != "echo" || r.Name != "docs__echo" || r.Price != 0.002 || r.Outcome != OutcomeOK || r.Status != 200 || r.Caller.Key != "dev" || r.Caller.Team != "core" {
				t.Fatalf("ledger row: got %+v", r)
			}
			if rows[1].Tool != longTool || rows[1].Price != 0 {
				t.Fatalf("ledger row of the long tool: got %+v", rows[1])
			}
			// A prompt and a resource, namespaced.
			pr, err := cs.ListPrompts(context.Background(), nil)
			if err != nil || len(pr.Prompts) != 1 || pr.Prompts[0].Name != "docs__greet" {
				t.Fatalf("prompts: %v %+v", err, pr)
			}
			gp, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "docs__greet"})
			if err != nil || len(gp.Messages) != 1 {
				t.Fatalf("prompts/get: %v %+v", err, gp)
			}
			rr, err := cs.ListResources(context.Background(), nil)
			if err != nil || len(rr.Resources) != 1 || rr.Resources[0].URI != "mcp://docs/file:///readme.md" || rr.Resources[0].Name != "docs__readme" {
				t.Fatalf("resources: %v %+v", err, rr)
			}
			rd, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: rr.Resources[0].URI})
			if err != nil || len(rd.Contents) != 1 || rd.Contents[0].Text != "read me" || rd.Contents[0].URI != rr.Resources[0].URI {
				t.Fatalf("resources/read: %v %+v", err, rd)
			}
		})
	}
}

// TestOneServer: /mcp/{server} shows one server's tools as it names them.
func TestOneServer(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cs := connect(t, e.srv.URL+"/mcp/docs", "sk-dev", era.version, nil)
			if got := cs.InitializeResult().ServerInfo; got == nil || got.Name != "docs-server" {
				t.Fatalf("serverInfo: got %+v, want the server's", got)
			}
			names := toolNames(t, cs)
			if !slices.Contains(names, "echo") || !slices.Contains(names, longTool) || len(names) != 6 {
				t.Fatalf("tools: got %q", names)
			}
			if got := callText(t, cs, "echo", map[string]string{"text": "yo"}); got != "yo" {
				t.Fatalf("echo: got %q", got)
			}
			if rows := e.gov.ledger(); len(rows) != 1 || rows[0].Name != "docs__echo" {
				t.Fatalf("ledger: got %+v", rows)
			}
		})
	}
}

// TestAllowList: a key limited to one tool sees and calls only that one,
// on /mcp and on /mcp/{server}; another server is not found for it.
func TestAllowList(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cs := connect(t, e.srv.URL+"/mcp", "sk-one", era.version, nil)
			if got := toolNames(t, cs); !slices.Equal(got, []string{"docs__echo"}) {
				t.Fatalf("tools: got %q, want only docs__echo", got)
			}
			if got := callText(t, cs, "docs__echo", map[string]string{"text": "ok"}); got != "ok" {
				t.Fatalf("echo: got %q", got)
			}
			before := e.docs.toolCalls()
			for _, name := range []string{"docs__meta", "fs__read_file"} {
				_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name})
				if err == nil || !strings.Contains(err.Error(), "not allowed") && !strings.Contains(err.Error(), "no such tool") {
					t.Fatalf("call %s: got %v, want a refusal", name, err)
				}
			}
			if e.docs.toolCalls() != before || e.fs.toolCalls() != 0 {
				t.Fatal("a refused call reached a server")
			}
			one := connect(t, e.srv.URL+"/mcp/docs", "sk-one", era.version, nil)
			if got := toolNames(t, one); !slices.Equal(got, []string{"echo"}) {
				t.Fatalf("/mcp/docs tools: got %q, want only echo", got)
			}
			if _, err := one.CallTool(context.Background(), &sdk.CallToolParams{Name: "meta"}); err == nil {
				t.Fatal("/mcp/docs: meta was called by a key limited to docs__echo")
			}
			rows := e.gov.ledger()
			refused := 0
			for _, r := range rows {
				if r.Outcome == OutcomeRejected {
					refused++
				}
			}
			if refused != 3 {
				t.Fatalf("ledger: got %d refused rows, want 3: %+v", refused, rows)
			}
			resp := post(t, e.srv.URL+"/mcp/fs", "sk-one", nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
			if resp.status != http.StatusNotFound {
				t.Fatalf("/mcp/fs for a key without fs tools: got %d, want 404", resp.status)
			}
		})
	}
}

type httpResp struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, url, key string, h map[string]string, body string) httpResp {
	t.Helper()
	return do(t, http.MethodPost, url, key, h, body)
}

func do(t *testing.T, method, url, key string, h map[string]string, body string) httpResp {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpResp{resp.StatusCode, resp.Header, string(b)}
}

// TestWrongKey: no key or a wrong one gets 401 and reaches no server.
func TestWrongKey(t *testing.T) {
	e := newEnv(t, nil)
	for _, key := range []string{"", "sk-wrong"} {
		r := post(t, e.srv.URL+"/mcp", key, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
		if r.status != http.StatusUnauthorized {
			t.Fatalf("key %q: got %d, want 401", key, r.status)
		}
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "x", Version: "1"}, nil)
	_, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: keyed{"sk-wrong", http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Fatal("the Go SDK client connected with a wrong key")
	}
}

// initialize opens a legacy session with raw HTTP and returns its id.
func initialize(t *testing.T, url, key string) string {
	t.Helper()
	r := post(t, url, key, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r.status != 200 || r.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	return r.header.Get("Mcp-Session-Id")
}

// TestReplicas: two gateways with the same secret behind a round-robin
// proxy with no affinity: a legacy client initializes on one and calls on
// the other; its id replayed under another key or on another route opens
// nothing (404), nor does a tampered one.
func TestReplicas(t *testing.T) {
	e1 := newEnv(t, nil)
	e2 := newEnv(t, nil)
	var n atomic.Int64
	var hits [2]atomic.Int64
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1) % 2
		hits[i].Add(1)
		[]*Gateway{e1.gw, e2.gw}[i].ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close) // after the client's Close (cleanups run last first)
	cs := connect(t, lb.URL+"/mcp", "sk-dev", "2025-11-25", &sdk.ClientOptions{})
	for i := range 4 {
		if got := callText(t, cs, "docs__echo", map[string]string{"text": "r"}); got != "r" {
			t.Fatalf("call %d: got %q", i, got)
		}
	}
	if hits[0].Load() == 0 || hits[1].Load() == 0 {
		t.Fatalf("round robin: hits %d and %d", hits[0].Load(), hits[1].Load())
	}
	if len(e1.gov.ledger())+len(e2.gov.ledger()) != 4 {
		t.Fatalf("ledger rows: got %d + %d, want 4", len(e1.gov.ledger()), len(e2.gov.ledger()))
	}
	sid := initialize(t, lb.URL+"/mcp", "sk-dev")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if r := post(t, lb.URL+"/mcp", "sk-dev", map[string]string{"Mcp-Session-Id": sid}, list); r.status != 200 {
		t.Fatalf("same key, same route: got %d %s", r.status, r.body)
	}
	if r := post(t, lb.URL+"/mcp", "sk-ops", map[string]string{"Mcp-Session-Id": sid}, list); r.status != http.StatusNotFound {
		t.Fatalf("replayed under another key: got %d, want 404", r.status)
	}
	if r := post(t, lb.URL+"/mcp/docs", "sk-dev", map[string]string{"Mcp-Session-Id": sid}, list); r.status != http.StatusNotFound {
		t.Fatalf("replayed on another route: got %d, want 404", r.status)
	}
	bad := []byte(sid)
	bad[5] ^= 2
	if r := post(t, lb.URL+"/mcp", "sk-dev", map[string]string{"Mcp-Session-Id": string(bad)}, list); r.status != http.StatusNotFound {
		t.Fatalf("tampered: got %d, want 404", r.status)
	}
	if r := post(t, lb.URL+"/mcp", "sk-dev", nil, list); r.status != http.StatusBadRequest {
		t.Fatalf("no session id: got %d, want 400", r.status)
	}
	// A replica with another secret does not know the session.
	other := newEnv(t, func(o *Options) { o.Sealer, _ = NewSealer([]byte("other")) })
	if r := post(t, other.srv.URL+"/mcp", "sk-dev", map[string]string{"Mcp-Session-Id": sid}, list); r.status != http.StatusNotFound {
		t.Fatalf("another secret: got %d, want 404", r.status)
	}
}

func rpcCode(t *testing.T, body string) int {
	t.Helper()
	var m struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.Error == nil {
		t.Fatalf("not a JSON-RPC error: %s", body)
	}
	return m.Error.Code
}

// TestModernHeaders: a 2026-07-28 request's headers must say what its body
// says (400, -32020), its version be supported (-32022) and its _meta
// complete (-32602).
func TestModernHeaders(t *testing.T) {
	e := newEnv(t, nil)
	body := func(method, name string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{"name":"` + name + `","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	}
	ok := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "docs__echo"}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for a, b := range ok {
			h[a] = b
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	if r := post(t, e.srv.URL+"/mcp", "sk-dev", ok, body("tools/call", "docs__echo")); r.status != 200 || !strings.Contains(r.body, `"x"`) {
		t.Fatalf("a valid call: %d %s", r.status, r.body)
	}
	cases := []struct {
		name   string
		h      map[string]string
		body   string
		status int
		code   int
	}{
		{"Mcp-Name mismatch", with("Mcp-Name", "docs__meta"), body("tools/call", "docs__echo"), 400, CodeHeaderMismatch},
		{"Mcp-Method mismatch", with("Mcp-Method", "tools/list"), body("tools/call", "docs__echo"), 400, CodeHeaderMismatch},
		{"no Mcp-Method", with("Mcp-Method", ""), body("tools/call", "docs__echo"), 400, CodeHeaderMismatch},
		{"no Mcp-Name", with("Mcp-Name", ""), body("tools/call", "docs__echo"), 400, CodeHeaderMismatch},
		{"version mismatch", with("MCP-Protocol-Version", "2027-01-01"), body("tools/call", "docs__echo"), 400, CodeHeaderMismatch},
		{"unsupported version", with("MCP-Protocol-Version", "2027-01-01"), strings.ReplaceAll(body("tools/call", "docs__echo"), "2026-07-28", "2027-01-01"), 400, CodeUnsupportedProtocolVersion},
		{"no capabilities", ok, strings.Replace(body("tools/call", "docs__echo"), `,"io.modelcontextprotocol/clientCapabilities":{}`, "", 1), 400, -32602},
		{"unknown method", with("Mcp-Method", "nope/nope"), strings.Replace(body("nope/nope", "x"), `"name":"x",`, "", 1), 404, -32601},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, e.srv.URL+"/mcp", "sk-dev", c.h, c.body)
			if r.status != c.status || rpcCode(t, r.body) != c.code {
				t.Fatalf("got %d %s, want %d with code %d", r.status, r.body, c.status, c.code)
			}
		})
	}
	// The base64 form of Mcp-Name.
	if r := post(t, e.srv.URL+"/mcp", "sk-dev", with("Mcp-Name", "=?base64?ZG9jc19fZWNobw==?="), body("tools/call", "docs__echo")); r.status != 200 {
		t.Fatalf("base64 Mcp-Name: %d %s", r.status, r.body)
	}
	if rows := e.gov.ledger(); len(rows) != 2 {
		t.Fatalf("ledger: got %d rows, want 2 (refused headers are no tool call)", len(rows))
	}
}

// TestProgress: progress notifications reach the client with its own token
// (the server saw the gateway's).
func TestProgress(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			type progress struct {
				n     float64
				token any
			}
			ch := make(chan progress, 8)
			cs := connect(t, e.srv.URL+"/mcp", "sk-dev", era.version, &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
					ch <- progress{req.Params.Progress, req.Params.ProgressToken}
				}})
			params := &sdk.CallToolParams{Name: "docs__slow"}
			params.SetProgressToken("client-token-1")
			res, err := cs.CallTool(context.Background(), params)
			if err != nil || res.IsError {
				t.Fatalf("slow: %v %+v", err, res)
			}
			// The SDK client runs its handlers apart from the call: wait for them.
			var got []float64
			for len(got) < 3 {
				select {
				case p := <-ch:
					if p.token != "client-token-1" {
						t.Fatalf("progress token: got %v, want the client's", p.token)
					}
					got = append(got, p.n)
				case <-time.After(10 * time.Second):
					t.Fatalf("progress: got %v, want [1 2 3]", got)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, []float64{1, 2, 3}) {
				t.Fatalf("progress: got %v, want [1 2 3]", got)
			}
			params = &sdk.CallToolParams{Name: "docs__meta"}
			params.SetProgressToken("client-token-2")
			meta := callTextParams(t, cs, params)
			if strings.Contains(meta, "client-token-2") || !strings.Contains(meta, `"progressToken"`) {
				t.Fatalf("the server saw _meta %s: want a token of the gateway's, not the client's", meta)
			}
		})
	}
}

func callTextParams(t *testing.T, cs *sdk.ClientSession, p *sdk.CallToolParams) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*sdk.TextContent).Text
}

// TestElicitation: a server's elicitation reaches a 2025-11-25 client that
// can answer it, with an id that is a sealed reference; the answer lands
// (here through a second replica) and the tool completes.
func TestElicitation(t *testing.T) {
	e := newEnv(t, nil)
	cs := connect(t, e.srv.URL+"/mcp", "sk-dev", "2025-11-25", &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		}})
	if got := callText(t, cs, "docs__elicit", nil); got != "accept:ada" {
		t.Fatalf("elicit: got %q", got)
	}
	// A client that cannot answer: the server gets an error at once.
	plain := connect(t, e.srv.URL+"/mcp", "sk-ops", "2025-11-25", nil)
	res, err := plain.CallTool(context.Background(), &sdk.CallToolParams{Name: "docs__elicit"})
	if err == nil && !res.IsError {
		t.Fatalf("elicit without the capability: got %+v, want an error", res)
	}
}

// TestCursors: /mcp's own cursors page through the merged list in order,
// and a cursor that is not one is refused.
func TestCursors(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.PageSize = 3 })
	sid := initialize(t, e.srv.URL+"/mcp", "sk-dev")
	h := map[string]string{"Mcp-Session-Id": sid}
	var names []string
	cursor := ""
	pages := 0
	for {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		r := post(t, e.srv.URL+"/mcp", "sk-dev", h, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":`+params+`}`)
		var res struct {
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
				NextCursor string `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(r.body), &res); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		pages++
		for _, tl := range res.Result.Tools {
			names = append(names, tl.Name)
		}
		if cursor = res.Result.NextCursor; cursor == "" {
			break
		}
	}
	if pages != 3 || len(names) != 8 || !slices.IsSorted(names) {
		t.Fatalf("got %d pages of %q, want 3 pages of 8 sorted names", pages, names)
	}
	r := post(t, e.srv.URL+"/mcp", "sk-dev", h, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"!!"}}`)
	if rpcCode(t, r.body) != -32602 {
		t.Fatalf("a bad cursor: got %s", r.body)
	}
}

// TestListChanged: a server's tools/list_changed reaches the clients of
// either era listening on /mcp.
func TestListChanged(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			changed := make(chan struct{}, 4)
			cs := connect(t, e.srv.URL+"/mcp", "sk-dev", era.version, &sdk.ClientOptions{
				ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
			toolNames(t, cs)
			deadline := time.After(10 * time.Second)
			for {
				// The client's stream may open after the first change:
				// change until one arrives.
				e.sdkDocs.AddTool(&sdk.Tool{Name: "added" + strings.Repeat("x", len(changed)), InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return textResult("added"), nil
				})
				select {
				case <-changed:
					if !slices.Contains(toolNames(t, cs), "docs__added") {
						t.Fatal("the added tool is not listed")
					}
					return
				case <-time.After(50 * time.Millisecond):
				case <-deadline:
					t.Fatal("no list_changed")
				}
			}
		})
	}
}

// TestMethodsAndBodies: what is not a JSON-RPC message, or not for /mcp,
// is refused with a clear error.
func TestMethodsAndBodies(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxBody = 1024 })
	cases := []struct {
		name, method, body string
		status             int
	}{
		{"PUT", http.MethodPut, `{}`, 405},
		{"not JSON", http.MethodPost, `{"jsonrpc":`, 400},
		{"a batch", http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 400},
		{"too large", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`, 413},
		{"duplicate name", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"docs__echo","Name":"docs__meta"}}`, 400},
		{"GET without a session", http.MethodGet, ``, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, c.method, e.srv.URL+"/mcp", "sk-dev", nil, c.body)
			if r.status != c.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, c.status)
			}
		})
	}
	if r := post(t, e.srv.URL+"/mcp/nope", "sk-dev", nil, `{}`); r.status != 404 {
		t.Fatalf("unknown server: got %d", r.status)
	}
	_ = bytes.MinRead
}

// TestDeleteEndsSession: DELETE ends a session on the replica.
func TestDeleteEndsSession(t *testing.T) {
	e := newEnv(t, nil)
	sid := initialize(t, e.srv.URL+"/mcp", "sk-dev")
	h := map[string]string{"Mcp-Session-Id": sid}
	if r := do(t, http.MethodDelete, e.srv.URL+"/mcp", "sk-dev", h, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: got %d %s", r.status, r.body)
	}
	if r := post(t, e.srv.URL+"/mcp", "sk-dev", h, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Fatalf("after DELETE: got %d, want 404", r.status)
	}
}

// headered sends the client's own credentials beside the gateway key.
type headered struct{ rt http.RoundTripper }

func (h headered) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer sk-dev")
	r.Header.Set("Cookie", "session=client-cookie")
	r.Header.Set("X-Api-Key", "client-x-api-key")
	r.Header.Set("X-Custom", "client-custom")
	return h.rt.RoundTrip(r)
}

// TestNoHeaderReachesServer: what a client sends besides its JSON-RPC
// message — its Authorization (the gateway key), Cookie, x-api-key, any
// header — reaches no server; a server gets only its configured headers.
func TestNoHeaderReachesServer(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			for _, path := range []string{"/mcp", "/mcp/docs"} {
				c := sdk.NewClient(&sdk.Implementation{Name: "x", Version: "1"}, nil)
				cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.srv.URL + path,
					HTTPClient: &http.Client{Transport: headered{http.DefaultTransport}}, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: era.version})
				if err != nil {
					t.Fatal(err)
				}
				name := "docs__echo"
				if path != "/mcp" {
					name = "echo"
				}
				callText(t, cs, name, map[string]string{"text": "x"})
				cs.Close()
			}
			for _, rec := range []*recorder{e.docs, e.fs} {
				seen := rec.seen()
				if len(seen) == 0 {
					t.Fatal("the server saw no request")
				}
				for _, h := range seen {
					for _, bad := range []string{"Cookie", "X-Api-Key", "X-Custom"} {
						if v := h.Get(bad); v != "" {
							t.Fatalf("a server got the client's %s: %q", bad, v)
						}
					}
					if a := h.Get("Authorization"); a != "" && (rec != e.docs || a != "Bearer docs-token") {
						t.Fatalf("a server got Authorization %q", a)
					}
					if rec == e.docs && h.Get("Authorization") != "Bearer docs-token" {
						t.Fatalf("docs did not get its configured Authorization: %v", h)
					}
				}
			}
		})
	}
}

// TestTraceparent: a tool call is a span whose context the server gets in
// params._meta.traceparent, a child of the client's own.
func TestTraceparent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	e := newEnv(t, func(o *Options) { o.Tracer = tp.Tracer("test") })
	cs := connect(t, e.srv.URL+"/mcp", "sk-dev", "2025-11-25", nil)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
	meta := callTextParams(t, cs, &sdk.CallToolParams{Name: "docs__meta", Meta: sdk.Meta{"traceparent": parent}})
	var m struct {
		Traceparent string `json:"traceparent"`
	}
	json.Unmarshal([]byte(meta), &m)
	if !strings.HasPrefix(m.Traceparent, "00-0af7651916cd43dd8448eb211c80319c-") || m.Traceparent == parent {
		t.Fatalf("the server's traceparent: got %q, want a child of the client's trace", m.Traceparent)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "tools/call docs__meta" || spans[0].Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("spans: got %+v", spans)
	}
	if !strings.Contains(m.Traceparent, spans[0].SpanContext.SpanID().String()) {
		t.Fatalf("traceparent %q does not name the call's span %s", m.Traceparent, spans[0].SpanContext.SpanID())
	}
}
