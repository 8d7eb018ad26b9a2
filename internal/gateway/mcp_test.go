package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
	"github.com/streamgate/streamgate/internal/usage"
)

// mcpUpstream is a Go SDK MCP server over loopback HTTP with a tool echo.
func mcpUpstream(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "search"}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found " + a.Text}}}, nil, nil
	})
	// slow reports progress three times, a little apart, before it answers.
	s.AddTool(&sdk.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			if tok := req.Params.GetProgressToken(); tok != nil {
				req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
			}
			time.Sleep(20 * time.Millisecond)
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	return srv.URL
}

type bearer struct{ key, header string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.header == "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	} else {
		r.Header.Set(b.header, b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func mcpConnect(t *testing.T, url string, b bearer) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: b}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// TestMCPGateway: /mcp under the gateway's keys: a tool call is a ledger
// row (model the prefixed tool, route mcp/{server}, cost its price) that
// `usage` reports; x-api-key works as Bearer does; a key's mcp_tools and
// rpm apply to tool calls; a wrong key gets the gateway's 401.
func TestMCPGateway(t *testing.T) {
	cfg := baseConfig()
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: mcpUpstream(t), ToolPrices: map[string]float64{"search": 0.002}}}
	cfg.Keys = append(cfg.Keys, config.Key{Name: "limited", Key: "sk-limited", RPM: 2, MCPTools: []string{"docs__search"}})
	e := start(t, cfg)
	cs, err := mcpConnect(t, e.url+"/mcp", bearer{key: devKey})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "docs__search", Arguments: map[string]string{"text": "x"}})
	if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != "found x" {
		t.Fatalf("docs__search: %v %+v", err, res)
	}
	var row usage.Entry
	for _, en := range e.rec.all() {
		if en.Model == "docs__search" {
			row = en
		}
	}
	if row.Route != "mcp/docs" || row.KeyID != "dev" || row.CostUSD != 0.002 || row.Outcome != usage.OutcomeOK || row.Status != 200 || row.RequestID == "" || row.TokenSource != usage.SourceNone {
		t.Fatalf("ledger row: got %+v", row)
	}
	// The ledger reports it, by model and by route.
	store := tempLedger(t)
	if err := store.Insert(context.Background(), []usage.Entry{row}); err != nil {
		t.Fatal(err)
	}
	rows, err := usage.Report(context.Background(), store, usage.ReportQuery{By: "route"})
	if err != nil || len(rows) != 1 || rows[0].Group != "mcp/docs" || rows[0].CostUSD != 0.002 || rows[0].Requests != 1 {
		t.Fatalf("usage by route: %v %+v", err, rows)
	}

	// A key limited to one tool, and to 2 requests a minute, by x-api-key.
	lim, err := mcpConnect(t, e.url+"/mcp", bearer{key: "sk-limited", header: "X-Api-Key"})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := lim.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "docs__search" {
		t.Fatalf("the limited key's tools: %v %+v", err, tools)
	}
	if _, err := lim.CallTool(context.Background(), &sdk.CallToolParams{Name: "docs__echo"}); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("docs__echo for the limited key: got %v, want not allowed", err)
	}
	for i := range 2 {
		if _, err := lim.CallTool(context.Background(), &sdk.CallToolParams{Name: "docs__search", Arguments: map[string]string{"text": "y"}}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err = lim.CallTool(context.Background(), &sdk.CallToolParams{Name: "docs__search", Arguments: map[string]string{"text": "z"}})
	if err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("a third call in a minute: got %v, want the key's rate limit", err)
	}
	refused := 0
	for _, en := range e.rec.all() {
		if en.KeyID == "limited" && en.Outcome == usage.OutcomeRejected && strings.HasPrefix(en.Route, "mcp/") {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("refused tool calls in the ledger: got %d, want 2", refused)
	}

	// A wrong key: the gateway's own 401.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	req.Header.Set("Authorization", "Bearer sk-wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var oe struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != 401 || json.Unmarshal(body, &oe) != nil || !strings.Contains(oe.Error.Message, "invalid API key") {
		t.Fatalf("a wrong key: got %d %s", resp.StatusCode, body)
	}
	if _, err := mcpConnect(t, e.url+"/mcp", bearer{key: "sk-wrong"}); err == nil {
		t.Fatal("the Go SDK client connected with a wrong key")
	}
}

// TestMCPStream: a tool call answered as a stream (progress, then the
// result) lasts past its first event through the gateway's front (its body
// is read as every endpoint's is, so its connection is not closed under it).
func TestMCPStream(t *testing.T) {
	cfg := baseConfig()
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: mcpUpstream(t)}}
	e := start(t, cfg)
	progress := make(chan float64, 3)
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) { progress <- r.Params.Progress }})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: devKey}}, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	p := &sdk.CallToolParams{Name: "docs__slow"}
	p.SetProgressToken("t1")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != "done" {
		t.Fatalf("docs__slow: %v %+v", err, res)
	}
	for range 3 {
		select {
		case <-progress:
		case <-time.After(10 * time.Second):
			t.Fatal("fewer than 3 progress notifications")
		}
	}
}

// TestMCPRebinding: a request to the loopback gateway under another Host
// (a browser led by DNS rebinding) is refused with 403 before its key is read.
func TestMCPRebinding(t *testing.T) {
	cfg := baseConfig()
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: mcpUpstream(t)}}
	e := start(t, cfg)
	for host, want := range map[string]int{"evil.example.com": 403, "localhost:1234": 200, "127.0.0.1": 200} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`))
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Authorization", "Bearer "+devKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: got %d %s, want %d", host, resp.StatusCode, body, want)
		}
	}
}

// TestMCPOff: with no MCP server configured /mcp is not found, and says why.
func TestMCPOff(t *testing.T) {
	e := start(t, baseConfig())
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+devKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), "no MCP server is configured") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

// TestMCPReload: a reload that adds a server serves it at once, and the
// clients listening hear that the tools changed.
func TestMCPReload(t *testing.T) {
	url := mcpUpstream(t)
	cfg := baseConfig()
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: url}}
	e := start(t, cfg)
	changed := make(chan struct{}, 4)
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: devKey}}, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	next := baseConfig()
	next.MCP.Servers = []config.MCPServer{{Name: "docs", URL: url}, {Name: "more", URL: url}}
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		// The client's GET stream may open after a first reload: reload until heard.
		if _, err := e.gw.Reload(context.Background(), next.Clone()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
			done = true
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no tools/list_changed after the reload")
		}
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 6 { // echo, search and slow of each server
		t.Fatalf("tools after the reload: %v %+v", err, tools)
	}
	_ = gateway.MCPCaller
}

// TestMCPDatabaseKey: a database key's mcp_tools, given to POST
// /admin/keys, narrow /mcp as a static key's do: it lists and calls only
// docs__echo; a database key without mcp_tools has every tool; a bad glob
// is a 400 naming it.
func TestMCPDatabaseKey(t *testing.T) {
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: mcpUpstream(t)}}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, KeyStore: tempKeyStore(t)})

	create := func(body string) (secret string, tools []string) {
		t.Helper()
		status, b := adminDo(t, e, "POST", "/admin/keys", body)
		var k struct {
			Secret   string   `json:"secret"`
			MCPTools []string `json:"mcp_tools"`
		}
		if err := json.Unmarshal(b, &k); status != 201 || err != nil || k.Secret == "" {
			t.Fatalf("create %s: got %d %s", body, status, b)
		}
		return k.Secret, k.MCPTools
	}
	limited, tools := create(`{"name":"agent","mcp_tools":["docs__echo"]}`)
	if len(tools) != 1 || tools[0] != "docs__echo" {
		t.Errorf("the created key's mcp_tools: got %q, want [docs__echo]", tools)
	}
	open, tools := create(`{"name":"open"}`)
	if tools != nil {
		t.Errorf("a key without mcp_tools: got %q, want none (every tool)", tools)
	}
	if status, b := adminDo(t, e, "GET", "/admin/keys/agent", ""); status != 200 || !strings.Contains(string(b), `"mcp_tools":["docs__echo"]`) {
		t.Errorf("get: got %d %s, want its mcp_tools", status, b)
	}
	if status, b := adminDo(t, e, "POST", "/admin/keys", `{"name":"bad","mcp_tools":["docs__read file"]}`); status != 400 || !strings.Contains(string(b), `mcp_tools[0]: \"docs__read file\" has ' '`) {
		t.Errorf("a bad glob: got %d %s, want 400 naming mcp_tools[0]", status, b)
	}

	cs, err := mcpConnect(t, e.url+"/mcp", bearer{key: limited})
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "docs__echo" {
		t.Fatalf("the database key's tools: %v %+v, want docs__echo only", err, list)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "docs__echo", Arguments: map[string]string{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != "hi" {
		t.Fatalf("docs__echo: %v %+v", err, res)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "docs__search", Arguments: map[string]string{"text": "x"}}); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("docs__search for the database key: got %v, want not allowed", err)
	}

	all, err := mcpConnect(t, e.url+"/mcp", bearer{key: open})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := all.ListTools(context.Background(), nil); err != nil || len(list.Tools) != 3 {
		t.Fatalf("a database key without mcp_tools: %v %+v, want the 3 tools", err, list)
	}
}

// TestMCPResumeAcrossReplicas: with redis: configured, a 2025-11-25
// tools/call stream one replica runs, broken after its first event, is
// resumed on another with Last-Event-ID: the later events, then the result.
func TestMCPResumeAcrossReplicas(t *testing.T) {
	cfg := baseConfig()
	cfg.Redis = redistest.URL(t)
	cfg.MCP.SessionSecret = "resume-across-replicas"
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: mcpUpstream(t)}}
	a, b := start(t, cfg), start(t, cfg)
	send := func(method, url, sid, lastID, body string) *http.Response {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+devKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := send("POST", a.url+"/mcp", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	next := func(br *bufio.Reader) (id, data string) {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return "", "EOF"
			}
			switch line = strings.TrimSuffix(line, "\n"); {
			case line == "" && data != "":
				return id, data
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			}
		}
	}
	resp = send("POST", a.url+"/mcp", sid, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"docs__slow","arguments":{},"_meta":{"progressToken":"t1"}}}`)
	id, data := next(bufio.NewReader(resp.Body))
	resp.Body.Close() // the connection breaks after the first event
	if !strings.Contains(data, `"progress":1`) || id == "" {
		t.Fatalf("first event: id %q data %s", id, data)
	}
	resp = send("GET", b.url+"/mcp", sid, id, "")
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for _, want := range []string{`"progress":2`, `"progress":3`, `"text":"done"`} {
		if _, data := next(br); !strings.Contains(data, want) {
			t.Fatalf("resumed on the other replica: got %s, want %s", data, want)
		}
	}
	if _, data := next(br); data != "EOF" {
		t.Fatalf("after the result: got %s, want the end", data)
	}
}
