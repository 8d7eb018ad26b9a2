package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/respstore"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
	"github.com/streamgate/streamgate/internal/usage"
)

// mcpFake is the tests' MCP side of the gateway: servers "docs" and
// "wiki" and their tools; it records every call.
type mcpFake struct {
	mu      sync.Mutex
	calls   []fakeCall
	lists   []string          // the keys that listed
	started chan string       // a tool's name as its call begins (slow tools)
	ended   chan error        // a slow tool's context error as it ends
	hidden  map[string]string // key → the one tool it may use (its mcp_tools)
	release chan struct{}     // ends the "wait" tool's calls
}

type fakeCall struct {
	key, team, requestID, server, tool, args string
}

var docsTools = []gateway.HostedTool{
	{Name: "search", Description: "Search the docs", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
		Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
	{Name: "fetch", Description: "Fetch a page", InputSchema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}}}`)},
	{Name: "fail", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
	{Name: "broken", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
	{Name: "down", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
	{Name: "slow", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
	{Name: "wait", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
}

func newMCPFake() *mcpFake {
	return &mcpFake{started: make(chan string, 8), ended: make(chan error, 8), hidden: map[string]string{"limited": "search"}, release: make(chan struct{})}
}

func (f *mcpFake) Servers() []string { return []string{"docs", "wiki"} }

func (f *mcpFake) Tools(_ context.Context, c *gateway.HostedCaller, server string) ([]gateway.HostedTool, error) {
	f.mu.Lock()
	f.lists = append(f.lists, c.Key)
	f.mu.Unlock()
	if server == "wiki" {
		return nil, errors.New("dial tcp 10.1.2.3:8080: connection refused")
	}
	var out []gateway.HostedTool
	for _, t := range docsTools {
		if only, ok := f.hidden[c.Key]; ok && t.Name != only {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

func (f *mcpFake) CallTool(ctx context.Context, c *gateway.HostedCaller, server, tool string, args json.RawMessage) (*gateway.HostedResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{c.Key, c.Team, c.RequestID, server, tool, string(args)})
	f.mu.Unlock()
	text := func(s string) json.RawMessage {
		b, _ := json.Marshal([]map[string]string{{"type": "text", "text": s}})
		return b
	}
	switch tool {
	case "fail":
		return &gateway.HostedResult{Content: text("boom: no such page"), IsError: true}, nil
	case "broken":
		return nil, &gateway.HostedCallError{Code: -32602, Message: "invalid params: query missing"}
	case "down":
		return nil, errors.New("post http://10.9.9.9:3001/mcp: connection reset by peer")
	case "wait":
		f.started <- tool
		select {
		case <-f.release:
			return &gateway.HostedResult{Content: text("waited")}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "slow":
		f.started <- tool
		<-ctx.Done()
		f.ended <- ctx.Err()
		return nil, ctx.Err()
	}
	return &gateway.HostedResult{Content: text(tool + " found: " + string(args))}, nil
}

func (f *mcpFake) all() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

// scripted is an upstream of every dialect (a sim behind a proxy) whose
// model calls a tool or answers as the request's X-Sim-Script header
// says: a comma-separated list of function names, the one at the index
// of the tool results the conversation holds ("" answers with text). A
// request offering no tool (tool_choice none) answers with text. It keeps
// the bodies it got.
type scripted struct {
	url    string
	mu     sync.Mutex
	bodies []string
}

func startScripted(t *testing.T) *scripted {
	t.Helper()
	s := &scripted{}
	up := sim.New(sim.Options{Profiles: []sim.Profile{{Name: "sim-fast", Tokens: 8, TokensPerChunk: 1, Lang: "en"}}, Seed: 1})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		s.mu.Unlock()
		script := r.Header.Get("X-Sim-Script")
		r.Header.Del("X-Sim-Script")
		r.Header.Del(sim.HeaderToolCall)
		if script != "" && !offersNoTool(body) {
			steps := strings.Split(script, ",")
			if n := toolResults(body); n < len(steps) && steps[n] != "" {
				r.Header.Set(sim.HeaderToolCall, steps[n])
			}
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// toolResults counts the tool results of an upstream body, in each dialect.
func toolResults(body []byte) int {
	return bytes.Count(body, []byte(`"role":"tool"`)) + bytes.Count(body, []byte(`"type":"tool_result"`)) + bytes.Count(body, []byte(`"functionResponse"`))
}

func offersNoTool(body []byte) bool {
	return bytes.Contains(body, []byte(`"tool_choice":"none"`)) || bytes.Contains(body, []byte(`"tool_choice":{"type":"none"}`)) ||
		bytes.Contains(body, []byte(`"mode":"NONE"`))
}

func (s *scripted) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// hostedEnv is a gateway with hosted MCP over the fake, its models on the
// scripted upstream in each dialect.
type hostedEnv struct {
	*env
	fake *mcpFake
	up   *scripted
}

func startHosted(t *testing.T, opts ...func(*gateway.Options)) *hostedEnv {
	t.Helper()
	up := startScripted(t)
	o := gateway.Options{Config: hostedConfig(up), KeepAlive: -1}
	for _, f := range opts {
		f(&o)
	}
	e := startWith(t, o)
	fake := newMCPFake()
	e.gw.SetHostedMCP(fake)
	return &hostedEnv{env: e, fake: fake, up: up}
}

// hostedConfig is the config of a hosted-MCP test: models m-openai,
// m-anthropic and m-gemini on up, keys dev and limited.
func hostedConfig(up *scripted) *config.Config {
	cfg := baseConfig()
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	cfg.MaxBody = 1 << 20
	cfg.Providers = []config.Provider{
		{Name: "up-openai", Kind: "openai", BaseURL: up.url + "/v1", APIKey: "sk-up"},
		{Name: "up-anthropic", Kind: "anthropic", BaseURL: up.url, APIKey: "sk-up"},
		{Name: "up-gemini", Kind: "gemini", BaseURL: up.url, APIKey: "sk-up"},
		{Name: "up-responses", Kind: "openai", BaseURL: up.url + "/v1", APIKey: "sk-up", Responses: true},
	}
	price := config.Price{Input: 1, Output: 2}
	cfg.Models = []config.Model{
		{Name: "m-openai", Routes: []config.Route{{Provider: "up-openai", Model: "sim-fast"}}, Price: price},
		{Name: "m-anthropic", Routes: []config.Route{{Provider: "up-anthropic", Model: "sim-fast"}}, Price: price},
		{Name: "m-gemini", Routes: []config.Route{{Provider: "up-gemini", Model: "sim-fast"}}, Price: price},
		{Name: "m-responses", Routes: []config.Route{{Provider: "up-responses", Model: "sim-fast"}}, Price: price},
	}
	cfg.Keys = append(cfg.Keys, config.Key{Name: "limited", Key: "sk-limited"})
	return cfg
}

// client is the SDK on the gateway; script is each model call's tool.
func (h *hostedEnv) client(script string, opts ...option.RequestOption) openai.Client {
	return responsesClient(h.env, append([]option.RequestOption{option.WithHeader("X-Sim-Script", script)}, opts...)...)
}

// docsTool is the request's mcp tool of server docs.
func docsTool(approval string, allowed ...string) responses.ToolUnionParam {
	t := &responses.ToolMcpParam{ServerLabel: "docs", ServerURL: openai.String("https://docs.example.com/mcp")}
	if approval != "" {
		t.RequireApproval = responses.ToolMcpRequireApprovalUnionParam{OfMcpToolApprovalSetting: openai.String(approval)}
	}
	if allowed != nil {
		t.AllowedTools = responses.ToolMcpAllowedToolsUnionParam{OfMcpAllowedTools: allowed}
	}
	return responses.ToolUnionParam{OfMcp: t}
}

func hostedParams(model string, tools ...responses.ToolUnionParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("what do the docs say?")},
		Tools: tools,
		Store: openai.Bool(false),
	}
}

// mcpStream is what a hosted turn's stream delivered, read with the SDK.
type mcpStream struct {
	types    []string
	final    responses.Response
	terminal string
	args     map[string]string // mcp_call_arguments deltas joined, by item id
	done     map[string]string // mcp_call_arguments.done, by item id
	text     string
}

func readMCPStream(t *testing.T, stream interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) mcpStream {
	t.Helper()
	s := mcpStream{args: map[string]string{}, done: map[string]string{}}
	n := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != n {
			t.Errorf("event %d (%s): sequence_number %d, want %d", n, ev.Type, ev.SequenceNumber, n)
		}
		if s.terminal != "" {
			t.Errorf("event %s after the terminal %s", ev.Type, s.terminal)
		}
		n++
		s.types = append(s.types, ev.Type)
		switch ev.Type {
		case "response.mcp_call_arguments.delta":
			d := ev.AsResponseMcpCallArgumentsDelta()
			s.args[d.ItemID] += d.Delta
		case "response.mcp_call_arguments.done":
			d := ev.AsResponseMcpCallArgumentsDone()
			s.done[d.ItemID] = d.Arguments
		case "response.output_text.delta":
			s.text += ev.Delta
		case "response.completed", "response.incomplete", "response.failed":
			s.final, s.terminal = ev.Response, ev.Type
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if s.terminal == "" {
		t.Fatalf("stream ended without a terminal event: %v", s.types)
	}
	return s
}

// outputTypes are the types of a response's output items.
func outputTypes(r *responses.Response) []string {
	var out []string
	for _, it := range r.Output {
		out = append(out, it.Type)
	}
	return out
}

// hostedEntries waits for n ledger entries and returns them.
func hostedEntries(t *testing.T, e *env, n int) []usage.Entry {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		all := e.rec.all()
		if len(all) >= n || time.Now().After(deadline) {
			if len(all) != n {
				t.Fatalf("got %d ledger entries, want %d: %+v", len(all), n, all)
			}
			return all
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHostedMCPAcrossKinds: openai-go's Responses client through the
// gateway, an mcp tool of a configured server, on an OpenAI-chat, an
// Anthropic and a Gemini upstream: the model calls a tool, the gateway
// runs it under the caller's key and calls the model again, which
// answers; one stream with OpenAI's hosted-MCP events (and the same
// response object without a stream); one ledger row per model call under
// the request's id, the usage summed in the response.
func TestHostedMCPAcrossKinds(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entries := 0
	for _, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		t.Run(model, func(t *testing.T) {
			var hdr http.Header
			c := h.client("docs__search,", option.WithResponseInto(new(*http.Response)), option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				resp, err := next(r)
				if resp != nil {
					hdr = resp.Header
				}
				return resp, err
			}))
			calls0 := len(h.fake.all())
			s := readMCPStream(t, c.Responses.NewStreaming(ctx, hostedParams(model, docsTool("never"))))
			want := []string{"response.created", "response.in_progress",
				"response.output_item.added", "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed", "response.output_item.done",
				"response.output_item.added", "response.mcp_call.in_progress", "response.mcp_call_arguments.delta"}
			if len(s.types) < len(want) || !slices.Equal(s.types[:len(want)], want) {
				t.Fatalf("got events %v, want them to begin %v", s.types, want)
			}
			for _, typ := range []string{"response.mcp_call_arguments.done", "response.mcp_call.completed", "response.output_text.delta"} {
				if !slices.Contains(s.types, typ) {
					t.Errorf("got events %v, want %s among them", s.types, typ)
				}
			}
			i, j := slices.Index(s.types, "response.mcp_call.completed"), slices.Index(s.types, "response.output_text.delta")
			if i < 0 || j < i || s.types[i+1] != "response.output_item.done" {
				t.Errorf("got events %v: want mcp_call.completed and its output_item.done before the answer's text", s.types)
			}
			res := &s.final
			if s.terminal != "response.completed" || res.Status != "completed" || !slices.Equal(outputTypes(res), []string{"mcp_list_tools", "mcp_call", "message"}) {
				t.Fatalf("got %s %s, want completed with mcp_list_tools, mcp_call, message", s.terminal, res.RawJSON())
			}
			lt := res.Output[0].AsMcpListTools()
			if lt.ServerLabel != "docs" || len(lt.Tools) != len(docsTools) || lt.Tools[0].Name != "search" || lt.Tools[0].Description != "Search the docs" {
				t.Errorf("mcp_list_tools: got %s, want docs' %d tools", lt.RawJSON(), len(docsTools))
			}
			call := res.Output[1].AsMcpCall()
			if call.Name != "search" || call.ServerLabel != "docs" || call.Arguments != `{"query":"sim"}` || call.Status != "completed" ||
				call.Output != `search found: {"query":"sim"}` || call.Error.Type != "" || !strings.HasPrefix(call.ID, "mcp_") {
				t.Errorf("mcp_call: got %s, want search's call with its output", call.RawJSON())
			}
			if s.args[call.ID] != call.Arguments || s.done[call.ID] != call.Arguments {
				t.Errorf("argument events: got deltas %q, done %q; want %q", s.args[call.ID], s.done[call.ID], call.Arguments)
			}
			if res.OutputText() == "" || res.OutputText() != s.text {
				t.Errorf("answer: got %q, deltas %q", res.OutputText(), s.text)
			}
			reqID := hdr.Get("X-Request-Id")
			calls := h.fake.all()[calls0:]
			if len(calls) != 1 || calls[0] != (fakeCall{"dev", "", reqID, "docs", "search", `{"query":"sim"}`}) {
				t.Errorf("tool calls: got %+v, want one search by key dev in request %s", calls, reqID)
			}
			entries += 2
			es := hostedEntries(t, h.env, entries)[entries-2:]
			var in, out int
			for _, en := range es {
				if en.RequestID != reqID || en.KeyID != "dev" || en.Model != model || en.Status != 200 || en.Outcome != usage.OutcomeOK ||
					en.TokenSource != usage.SourceUsage || en.CostUSD <= 0 || !en.Stream {
					t.Errorf("ledger: got %+v, want a billed model call of request %s", en, reqID)
				}
				in, out = in+en.InputTokens, out+en.OutputTokens
			}
			if res.Usage.InputTokens != int64(in) || res.Usage.OutputTokens != int64(out) || res.Usage.TotalTokens != int64(in+out) {
				t.Errorf("usage: got %s, want the model calls' sum: %d in, %d out", res.Usage.RawJSON(), in, out)
			}
			if hdr.Get("X-Streamgate-Route") == "" {
				t.Errorf("got no X-Streamgate-Route")
			}

			// The same without a stream: the whole response object.
			got, err := c.Responses.New(ctx, hostedParams(model, docsTool("never")))
			if err != nil {
				t.Fatalf("non-stream: %v", err)
			}
			if got.Status != "completed" || !slices.Equal(outputTypes(got), []string{"mcp_list_tools", "mcp_call", "message"}) ||
				got.Output[1].AsMcpCall().Output != `search found: {"query":"sim"}` || got.OutputText() == "" || got.Usage.OutputTokens == 0 {
				t.Errorf("non-stream: got %s", got.RawJSON())
			}
			entries += 2
			for _, en := range hostedEntries(t, h.env, entries)[entries-2:] {
				if en.Stream || en.Status != 200 || en.Outcome != usage.OutcomeOK {
					t.Errorf("non-stream ledger: got %+v, want a non-stream model call", en)
				}
			}
		})
	}
}

// TestHostedMCPRounds: a model that calls two tools one after the
// other: three model calls, the second and third sent every result so
// far (as function calls and their outputs), two mcp_call items.
func TestHostedMCPRounds(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b0 := len(h.up.all())
	rc := h.client("docs__search,docs__fetch,")
	s := readMCPStream(t, rc.Responses.NewStreaming(ctx, hostedParams("m-anthropic", docsTool("never"))))
	if s.terminal != "response.completed" || !slices.Equal(outputTypes(&s.final), []string{"mcp_list_tools", "mcp_call", "mcp_call", "message"}) {
		t.Fatalf("got %s %s", s.terminal, s.final.RawJSON())
	}
	if a, b := s.final.Output[1].AsMcpCall(), s.final.Output[2].AsMcpCall(); a.Name != "search" || b.Name != "fetch" || b.Arguments != `{"url":"sim"}` || b.Output != `fetch found: {"url":"sim"}` {
		t.Errorf("calls: got %s and %s", a.RawJSON(), b.RawJSON())
	}
	bodies := h.up.all()[b0:]
	if len(bodies) != 3 {
		t.Fatalf("got %d model calls, want 3", len(bodies))
	}
	for i, b := range bodies {
		if n := toolResults([]byte(b)); n != i {
			t.Errorf("model call %d: got %d tool results, want %d", i+1, n, i)
		}
		if !strings.Contains(b, `"name":"docs__search"`) || !strings.Contains(b, `"name":"docs__fetch"`) {
			t.Errorf("model call %d offers no docs__search and docs__fetch: %s", i+1, b)
		}
	}
	if !strings.Contains(bodies[2], `search found: {\"query\":\"sim\"}`) || !strings.Contains(bodies[2], `fetch found: {\"url\":\"sim\"}`) {
		t.Errorf("the last model call lacks the tools' results: %s", bodies[2])
	}
	hostedEntries(t, h.env, 3)
}

// TestHostedMCPToolErrors: a tool's own error (isError), a JSON-RPC error
// and a failed call are mcp_call items with status failed and OpenAI's
// error shapes, response.mcp_call.failed, and the model gets the error
// as the call's output and answers.
func TestHostedMCPToolErrors(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		tool, typ, text string
	}{
		{"fail", "mcp_tool_execution_error", "boom: no such page"},
		{"broken", "mcp_protocol_error", "invalid params: query missing"},
		{"down", "http_error", "the MCP server call failed"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			b0 := len(h.up.all())
			rc := h.client("docs__" + tc.tool + ",")
			s := readMCPStream(t, rc.Responses.NewStreaming(ctx, hostedParams("m-openai", docsTool("never"))))
			if s.terminal != "response.completed" || !slices.Contains(s.types, "response.mcp_call.failed") || slices.Contains(s.types, "response.mcp_call.completed") {
				t.Fatalf("got %s, events %v; want completed with response.mcp_call.failed", s.terminal, s.types)
			}
			call := s.final.Output[1].AsMcpCall()
			raw := call.Error.RawJSON()
			if call.Status != "failed" || call.Error.Type != tc.typ || !strings.Contains(raw, tc.text) || call.Output != "" {
				t.Errorf("got %s, want status failed and a %s error holding %q", call.RawJSON(), tc.typ, tc.text)
			}
			if strings.Contains(raw, "10.9.9.9") {
				t.Errorf("the error names the server's address: %s", raw)
			}
			if tc.typ == "mcp_protocol_error" && call.Error.Code != -32602 {
				t.Errorf("got code %d, want -32602", call.Error.Code)
			}
			bodies := h.up.all()[b0:]
			if len(bodies) != 2 || !strings.Contains(bodies[1], "error: ") || s.final.OutputText() == "" {
				t.Errorf("got %d model calls, want 2, the second told of the error; answer %q", len(bodies), s.final.OutputText())
			}
		})
	}
}

// TestHostedMCPRefusals: an mcp tool naming a server the config lacks is
// a 400 naming it, as is a gateway without MCP servers; a server whose
// tools cannot be listed is OpenAI's 424; each is one refused ledger row,
// and no model is called.
func TestHostedMCPRefusals(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b0 := len(h.up.all())
	other := responses.ToolUnionParam{OfMcp: &responses.ToolMcpParam{ServerLabel: "deepwiki", ServerURL: openai.String("https://mcp.deepwiki.com/mcp")}}
	rc := h.client("")
	_, err := rc.Responses.New(ctx, hostedParams("m-openai", docsTool("never"), other))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != "tools[1].server_label" || !strings.Contains(ae.Message, `"deepwiki"`) ||
		!strings.Contains(ae.Message, "never connects to a server_url") || !strings.Contains(ae.Message, "docs, wiki") {
		t.Errorf("unknown server: got %v, want a 400 naming deepwiki", err)
	}
	wiki := responses.ToolUnionParam{OfMcp: &responses.ToolMcpParam{ServerLabel: "wiki"}}
	_, err = rc.Responses.New(ctx, hostedParams("m-openai", wiki))
	if !errors.As(err, &ae) || ae.StatusCode != 424 || !strings.Contains(ae.Message, "Error retrieving tool list from MCP server: 'wiki'") ||
		strings.Contains(ae.Message, "10.1.2.3") {
		t.Errorf("unlistable server: got %v, want a 424 naming wiki, no address", err)
	}
	_, err = rc.Responses.New(ctx, hostedParams("m-nope", docsTool("never")))
	if !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Errorf("unknown model: got %v, want 404", err)
	}
	es := hostedEntries(t, h.env, 3)
	for _, e := range es {
		if e.Outcome != usage.OutcomeRejected && e.Status != 424 || e.KeyID != "dev" || e.Attempts != 0 {
			t.Errorf("got ledger entry %+v, want a refusal", e)
		}
	}
	if n := len(h.up.all()) - b0; n != 0 || len(h.fake.all()) != 0 {
		t.Errorf("got %d model calls and %d tool calls, want none", n, len(h.fake.all()))
	}

	// Without MCP servers, any mcp tool is refused alike.
	cfg, so := dialectConfig()
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	c := responsesClient(e)
	_, err = c.Responses.New(ctx, hostedParams("m-openai", docsTool("never")))
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, `"docs" is not an MCP server of this gateway (it has none`) {
		t.Errorf("no servers: got %v, want a 400", err)
	}
}

// TestHostedMCPAllowList: allowed_tools and the key's own allow-list
// (the fake's, by key) both narrow the tools listed and offered to the
// model.
func TestHostedMCPAllowList(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, key string
		allowed   []string
		want      []string
	}{
		{"allowed_tools", devKey, []string{"fetch", "fail"}, []string{"fetch", "fail"}},
		{"key", "sk-limited", nil, []string{"search"}},
		{"both", "sk-limited", []string{"fetch"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b0 := len(h.up.all())
			rc := h.client("", option.WithAPIKey(tc.key))
			got, err := rc.Responses.New(ctx, hostedParams("m-gemini", docsTool("never", tc.allowed...)))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range got.Output[0].AsMcpListTools().Tools {
				names = append(names, tl.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("listed: got %v, want %v", names, tc.want)
			}
			body := h.up.all()[b0]
			for _, d := range docsTools {
				if offered := strings.Contains(body, `"docs__`+d.Name+`"`); offered != slices.Contains(tc.want, d.Name) {
					t.Errorf("tool %s offered %v, want %v: %s", d.Name, offered, !offered, body)
				}
			}
		})
	}
}

// TestHostedMCPClientGone: a client that goes away while a tool runs
// cancels the tool's call (its context) and the turn; the model call
// before it is in the ledger.
func TestHostedMCPClientGone(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, _ := json.Marshal(hostedParams("m-openai", docsTool("never")))
	body, _ = setStream(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/responses", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+devKey)
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "1ms")
	req.Header.Set("X-Sim-Script", "docs__slow,")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case <-h.fake.started:
	case <-ctx.Done():
		t.Fatal("the slow tool was never called")
	}
	// What the client read so far ends with the call's arguments.
	sc := bufio.NewScanner(resp.Body)
	seen := false
	for sc.Scan() && !seen {
		seen = strings.Contains(sc.Text(), "response.mcp_call_arguments.done")
	}
	if !seen {
		t.Errorf("the stream did not show the call before it ran")
	}
	resp.Body.Close() // the client goes away
	select {
	case err := <-h.fake.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the tool's call ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tool's call was not cancelled")
	}
	es := hostedEntries(t, h.env, 1)
	if es[0].Outcome != usage.OutcomeOK {
		t.Errorf("got %+v, want the first model call ok", es[0])
	}
}

// setStream sets "stream": true in a request body.
func setStream(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	m["stream"] = json.RawMessage("true")
	return json.Marshal(m)
}

// TestHostedMCPApproval: a tool that needs approval (OpenAI's default) is
// not run: the response ends with its mcp_approval_request; a next
// request approving it (stateless: the request item sent back with an
// mcp_approval_response) runs it first and the model answers; one
// declining it runs nothing and tells the model.
func TestHostedMCPApproval(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := h.client("docs__fetch,")
	s := readMCPStream(t, c.Responses.NewStreaming(ctx, hostedParams("m-anthropic", docsTool(""))))
	if s.terminal != "response.completed" || !slices.Equal(outputTypes(&s.final), []string{"mcp_list_tools", "mcp_approval_request"}) {
		t.Fatalf("got %s %s; want it to end with the approval request", s.terminal, s.final.RawJSON())
	}
	ar := s.final.Output[1].AsMcpApprovalRequest()
	if ar.Name != "fetch" || ar.ServerLabel != "docs" || ar.Arguments != `{"url":"sim"}` || !strings.HasPrefix(ar.ID, "mcpr_") || len(h.fake.all()) != 0 {
		t.Fatalf("got %s and %d tool calls; want fetch's request, nothing run", ar.RawJSON(), len(h.fake.all()))
	}
	next := func(approve bool, stream bool) *responses.Response {
		p := hostedParams("m-anthropic", docsTool(""))
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("what do the docs say?", responses.EasyInputMessageRoleUser),
			{OfMcpApprovalRequest: &responses.ResponseInputItemMcpApprovalRequestParam{ID: ar.ID, Arguments: ar.Arguments, Name: ar.Name, ServerLabel: ar.ServerLabel}},
			responses.ResponseInputItemParamOfMcpApprovalResponse(ar.ID, approve),
		}}
		if !stream {
			got, err := c.Responses.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		s := readMCPStream(t, c.Responses.NewStreaming(ctx, p))
		return &s.final
	}
	got := next(true, true)
	if got.Status != "completed" || !slices.Equal(outputTypes(got), []string{"mcp_list_tools", "mcp_call", "message"}) {
		t.Fatalf("approved: got %s", got.RawJSON())
	}
	if call := got.Output[1].AsMcpCall(); call.ApprovalRequestID != ar.ID || call.Output != `fetch found: {"url":"sim"}` {
		t.Errorf("approved call: got %s, want fetch run for %s", call.RawJSON(), ar.ID)
	}
	if calls := h.fake.all(); len(calls) != 1 || calls[0].tool != "fetch" {
		t.Errorf("got tool calls %+v, want fetch once", calls)
	}
	b0 := len(h.up.all())
	got = next(false, false)
	if got.Status != "completed" || !slices.Equal(outputTypes(got), []string{"mcp_list_tools", "message"}) || len(h.fake.all()) != 1 {
		t.Errorf("declined: got %s and %d tool calls, want an answer and nothing run", got.RawJSON(), len(h.fake.all()))
	}
	if b := h.up.all()[b0]; !strings.Contains(b, "did not approve") {
		t.Errorf("the model was not told of the refusal: %s", b)
	}
}

// TestHostedMCPMaxCalls: a model that would call tools for ever is
// called at most HostedMaxCalls times, the last offered no tool, and
// answers.
func TestHostedMCPMaxCalls(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	script := strings.Repeat("docs__search,", 20)
	rc := h.client(script)
	got, err := rc.Responses.New(ctx, hostedParams("m-openai", docsTool("never")))
	if err != nil {
		t.Fatal(err)
	}
	n := gateway.HostedMaxCalls
	if got.Status != "completed" || len(got.Output) != 1+(n-1)+1 || got.OutputText() == "" {
		t.Errorf("got %s, want %d calls and an answer", got.RawJSON(), n-1)
	}
	bodies := h.up.all()
	if len(bodies) != n || !offersNoTool([]byte(bodies[n-1])) || offersNoTool([]byte(bodies[n-2])) {
		t.Errorf("got %d model calls, want %d, the last one with tool_choice none", len(bodies), n)
	}
	hostedEntries(t, h.env, n)
	if len(h.fake.all()) != n-1 {
		t.Errorf("got %d tool calls, want %d", len(h.fake.all()), n-1)
	}
}

// TestHostedMCPStored: with a response store, a hosted response is kept
// as returned; previous_response_id continues it (the approval of its
// request, then a plain request without mcp tools, whose route gets the
// calls as function calls and outputs); input_items lists the input.
func TestHostedMCPStored(t *testing.T) {
	store, err := respstore.Open(sqldbtest.Context(t), sqldbtest.SQLiteDSN(t), respstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := startHosted(t, func(o *gateway.Options) { o.Responses = store })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := h.client("docs__fetch,")
	p := hostedParams("m-openai", docsTool(""))
	p.Store = openai.Bool(true)
	s := readMCPStream(t, c.Responses.NewStreaming(ctx, p))
	first := s.final
	if !slices.Equal(outputTypes(&first), []string{"mcp_list_tools", "mcp_approval_request"}) || !strings.Contains(first.RawJSON(), `"store":true`) {
		t.Fatalf("first: got %s", first.RawJSON())
	}
	req := first.Output[1].AsMcpApprovalRequest()

	p = hostedParams("m-openai", docsTool(""))
	p.Store, p.PreviousResponseID = openai.Bool(true), openai.String(first.ID)
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMcpApprovalResponse(req.ID, true)}}
	b0 := len(h.up.all())
	second, err := c.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outputTypes(second), []string{"mcp_list_tools", "mcp_call", "message"}) || second.Output[1].AsMcpCall().ApprovalRequestID != req.ID {
		t.Fatalf("second: got %s", second.RawJSON())
	}
	if b := h.up.all()[b0]; !strings.Contains(b, "what do the docs say?") || !strings.Contains(b, `fetch found:`) {
		t.Errorf("the model call lacks the first turn or the call's output: %s", b)
	}
	got, err := c.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
	if err != nil || got.RawJSON() != second.RawJSON() {
		t.Errorf("GET: got %v %s\nwant %s", err, got.RawJSON(), second.RawJSON())
	}
	items, err := c.Responses.InputItems.List(ctx, second.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Type != "mcp_approval_response" {
		t.Errorf("input_items: got %v %+v", err, items)
	}

	// A plain request continuing it: the calls reach the route as what
	// they stand for.
	b0 = len(h.up.all())
	third, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "m-anthropic", PreviousResponseID: openai.String(second.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")}})
	if err != nil || third.Status != "completed" {
		t.Fatalf("third: got %v", err)
	}
	if b := h.up.all()[b0]; !strings.Contains(b, `"tool_use"`) || !strings.Contains(b, `"name":"docs__fetch"`) || !strings.Contains(b, `fetch found:`) {
		t.Errorf("the plain request's route lacks the call: %s", b)
	}
}

// TestHostedMCPWebSocket: a response.create with an mcp tool on the
// Responses WebSocket is a hosted turn (its events as frames), and the
// next one continues it on the socket with store false: the model gets
// the call as a function call and its output.
func TestHostedMCPWebSocket(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := wsDial(t, ctx, h.url, "X-Sim-Script", "docs__search,")
	tool := map[string]any{"type": "mcp", "server_label": "docs", "require_approval": "never"}
	wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": "m-gemini", "store": false,
		"input": []any{userItem("what do the docs say?")}, "tools": []any{tool}})
	r := wsRead(t, ctx, c)
	if r.terminal != "response.completed" || !slices.Contains(r.types, "response.mcp_call.completed") || outputText(r.final) == "" {
		t.Fatalf("got %s %v", r.terminal, r.types)
	}
	out, _ := r.final["output"].([]any)
	if len(out) != 3 || out[1].(map[string]any)["type"] != "mcp_call" {
		t.Fatalf("got output %v", out)
	}
	b0 := len(h.up.all())
	wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": "m-gemini", "store": false, "previous_response_id": r.final["id"],
		"input": []any{userItem("thanks")}, "tools": []any{tool}})
	r = wsRead(t, ctx, c)
	if r.terminal != "response.completed" {
		t.Fatalf("second: got %s %v", r.terminal, r.err)
	}
	if b := h.up.all()[b0]; !strings.Contains(b, "what do the docs say?") || !strings.Contains(b, "search found:") || !strings.Contains(b, "thanks") {
		t.Errorf("the second turn's model call lacks the first: %s", b)
	}
}

// TestHostedMCPKeepAlive: while a tool runs, the stream gets keep-alive
// comments (the client's connection and its proxies stay open), and the
// turn goes on when the tool answers.
func TestHostedMCPKeepAlive(t *testing.T) {
	h := startHosted(t, func(o *gateway.Options) { o.KeepAlive = 10 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, _ := json.Marshal(hostedParams("m-openai", docsTool("never")))
	body, _ = setStream(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/responses", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+devKey)
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "1ms")
	req.Header.Set("X-Sim-Script", "docs__wait,")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	step := 0 // 0: before the call's arguments are done, 1: waiting for a keep-alive, 2: released
	var last string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case step == 0 && strings.Contains(line, "response.mcp_call_arguments.done"):
			step = 1
		case step == 1 && line == ": keep-alive":
			close(h.fake.release)
			step = 2
		case strings.HasPrefix(line, "event: "):
			last = line
		}
	}
	if step != 2 || last != "event: response.completed" {
		t.Errorf("got step %d, last event %q; want a keep-alive while the tool ran, then the answer", step, last)
	}
}

// TestHostedMCPTrace: with tracing on, the turn is one trace: its span
// and each model call's request span under it (a tool call's span is the
// MCP endpoint's: TestHostedMCPRealServer).
func TestHostedMCPTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	h := startHosted(t, func(o *gateway.Options) { o.Tracer = tp.Tracer("test") })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := h.client("docs__search,")
	if _, err := rc.Responses.New(ctx, hostedParams("m-openai", docsTool("never"))); err != nil {
		t.Fatal(err)
	}
	turn, spans := turnSpan(t, exp)
	if n := turnChildren(t, spans, turn, "chat "); n != 2 {
		t.Errorf("got %d model call spans under the turn, want 2", n)
	}
}

// turnChildren checks that every span is in turn's trace and counts
// those under it named with prefix.
func turnChildren(t *testing.T, spans tracetest.SpanStubs, turn tracetest.SpanStub, prefix string) int {
	t.Helper()
	n := 0
	for _, s := range spans {
		if s.SpanContext.TraceID() != turn.SpanContext.TraceID() {
			t.Errorf("span %q in another trace", s.Name)
		}
		if strings.HasPrefix(s.Name, prefix) && s.Parent.SpanID() == turn.SpanContext.SpanID() {
			n++
		}
	}
	return n
}

// turnSpan waits for the turn's span among exp's and returns it with
// them all.
func turnSpan(t *testing.T, exp *tracetest.InMemoryExporter) (tracetest.SpanStub, tracetest.SpanStubs) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		spans := exp.GetSpans()
		for _, s := range spans {
			if strings.HasPrefix(s.Name, "responses mcp") {
				return s, spans
			}
		}
	}
	t.Fatal("no turn span")
	return tracetest.SpanStub{}, nil
}

// TestHostedMCPClientSecrets: the headers and authorization an mcp tool
// carries for its server reach no one (the model's upstream, the MCP
// side) and are not echoed in the response; a tool_choice naming an MCP
// tool forces it on the first model call only.
func TestHostedMCPClientSecrets(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tool := docsTool("never")
	tool.OfMcp.Headers = map[string]string{"Authorization": "Bearer client-secret-1"}
	tool.OfMcp.Authorization = openai.String("client-secret-2")
	p := hostedParams("m-openai", tool)
	p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfMcpTool: &responses.ToolChoiceMcpParam{ServerLabel: "docs", Name: openai.String("fetch")}}
	rc := h.client("docs__fetch,")
	b0 := len(h.up.all())
	got, err := rc.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.RawJSON(), "client-secret") {
		t.Errorf("the response echoes the tool's secrets: %s", got.RawJSON())
	}
	bodies := h.up.all()[b0:]
	if len(bodies) != 2 {
		t.Fatalf("got %d model calls, want 2", len(bodies))
	}
	for _, b := range bodies {
		if strings.Contains(b, "client-secret") || strings.Contains(b, "docs.example.com") {
			t.Errorf("a model call got the tool's secrets or URL: %s", b)
		}
	}
	choice := func(b string) string {
		var v struct {
			ToolChoice json.RawMessage `json:"tool_choice"`
		}
		json.Unmarshal([]byte(b), &v)
		return string(v.ToolChoice)
	}
	if choice(bodies[0]) != `{"function":{"name":"docs__fetch"},"type":"function"}` || choice(bodies[1]) != `"auto"` {
		t.Errorf("tool_choice: got %s\nthen %s", bodies[0], bodies[1])
	}
}

// TestHostedMCPRealServer: hosted MCP over the gateway's MCP endpoint
// (package mcp) to a Go SDK MCP server over loopback HTTP: the tool runs
// on the server; the ledger has the model calls and the tool call (route
// mcp/docs, its price) under the request's id; the tool call's span is
// under the turn's; a key's mcp_tools narrow what is listed; a client
// that goes away ends the call (client_cancelled in its ledger row).
func TestHostedMCPRealServer(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	gotCancel := make(chan struct{}, 1)
	s := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "search", Description: "Search the docs"}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found " + a.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "slow"}, func(ctx context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			gotCancel <- struct{}{}
		case <-release:
		}
		return nil, nil, ctx.Err()
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	up := startScripted(t)
	cfg := hostedConfig(up)
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: srv.URL, ToolPrices: map[string]float64{"search": 0.002}}}
	cfg.Keys[len(cfg.Keys)-1].MCPTools = []string{"docs__slow"} // limited
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Tracer: tp.Tracer("test")})
	t.Cleanup(sync.OnceFunc(func() { close(release) })) // before the gateway closes: a call still running ends
	h := &hostedEnv{env: e, up: up}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var hdr *http.Response
	rc := h.client("docs__search,", option.WithResponseInto(&hdr))
	s1 := readMCPStream(t, rc.Responses.NewStreaming(ctx, hostedParams("m-anthropic", docsTool("never"))))
	res := &s1.final
	if s1.terminal != "response.completed" || !slices.Equal(outputTypes(res), []string{"mcp_list_tools", "mcp_call", "message"}) {
		t.Fatalf("got %s %s", s1.terminal, res.RawJSON())
	}
	if lt := res.Output[0].AsMcpListTools(); len(lt.Tools) != 2 || lt.Tools[0].Name != "search" || lt.Tools[0].Description != "Search the docs" {
		t.Errorf("listed: got %s", lt.RawJSON())
	}
	if call := res.Output[1].AsMcpCall(); call.Output != "found sim" || call.Arguments != `{"text":"sim"}` {
		t.Errorf("call: got %s, want the server's answer", call.RawJSON())
	}
	reqID := hdr.Header.Get("X-Request-Id")
	es := hostedEntries(t, e, 3)
	var models, tools int
	for _, en := range es {
		switch {
		case en.RequestID != reqID:
			t.Errorf("ledger row %+v not under request %s", en, reqID)
		case en.Model == "docs__search" && en.Route == "mcp/docs" && en.CostUSD == 0.002 && en.Outcome == usage.OutcomeOK && en.KeyID == "dev":
			tools++
		case en.Model == "m-anthropic" && en.Outcome == usage.OutcomeOK && en.CostUSD > 0:
			models++
		}
	}
	if models != 2 || tools != 1 {
		t.Errorf("ledger: got %+v, want 2 model calls and the tool call", es)
	}
	turn, spans := turnSpan(t, exp)
	if n := turnChildren(t, spans, turn, "tools/call docs__search"); n != 1 {
		t.Errorf("got %d tool call spans under the turn, want 1", n)
	}

	// The limited key lists only its tool; leaving while it runs cancels
	// it on the server.
	body, _ := json.Marshal(hostedParams("m-openai", docsTool("never")))
	body, _ = setStream(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/responses", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-limited")
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "1ms")
	req.Header.Set("X-Sim-Script", "docs__slow,")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"mcp_list_tools"`) && strings.Contains(line, "output_item.done") {
			if strings.Contains(line, `"search"`) || !strings.Contains(line, `"slow"`) {
				t.Errorf("the limited key's tools: %s", line)
			}
			break
		}
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the slow tool never ran")
	}
	resp.Body.Close()
	// The server's handler is cancelled (its request's context ends) ...
	select {
	case <-gotCancel:
	case <-ctx.Done():
		t.Fatal("the client left, but the server's tool handler was never cancelled")
	}
	// ... and the call ends as the client left: its ledger row says so.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		i := slices.IndexFunc(e.rec.all(), func(en usage.Entry) bool { return en.Model == "docs__slow" })
		if i >= 0 {
			if en := e.rec.all()[i]; en.Outcome != usage.OutcomeClientCancelled || en.Status != StatusClientClosed || en.KeyID != "limited" {
				t.Errorf("the slow call's ledger row: got %+v, want client_cancelled", en)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow call has no ledger row")
		}
	}
}

// StatusClientClosed is the ledger's status of a client that went away.
const StatusClientClosed = gateway.StatusClientClosed

// TestHostedMCPThinking: Claude with extended thinking in a hosted turn:
// its signed thinking goes back to it with its tool call (Anthropic
// refuses a tool loop without it, and so does the sim), though the client
// did not ask for encrypted_content, which it does not get.
func TestHostedMCPThinking(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := hostedParams("m-anthropic", docsTool("never"))
	p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortLow}
	rc := h.client("docs__search,")
	s := readMCPStream(t, rc.Responses.NewStreaming(ctx, p))
	if s.terminal != "response.completed" {
		t.Fatalf("got %s %s", s.terminal, s.final.RawJSON())
	}
	types := outputTypes(&s.final)
	if !slices.Contains(types, "reasoning") || !slices.Contains(types, "mcp_call") || types[len(types)-1] != "message" {
		t.Errorf("got output %v, want reasoning, the call and the answer", types)
	}
	if strings.Contains(s.final.RawJSON(), "encrypted_content") {
		t.Errorf("the client got encrypted_content it did not ask for: %s", s.final.RawJSON())
	}
	bodies := h.up.all()
	if last := bodies[len(bodies)-1]; !strings.Contains(last, `"type":"thinking"`) || !strings.Contains(last, `"signature"`) {
		t.Errorf("the second model call lacks the signed thinking: %s", last)
	}
}

// TestHostedMCPPassthrough: a model call of a turn on a route that passes
// the Responses API through (the upstream's own events, renumbered into
// the turn's stream): the model gets the functions, and its answer comes
// after the mcp_list_tools item.
func TestHostedMCPPassthrough(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b0 := len(h.up.all())
	rc := h.client("")
	s := readMCPStream(t, rc.Responses.NewStreaming(ctx, hostedParams("m-responses", docsTool("never"))))
	if s.terminal != "response.completed" || !slices.Equal(outputTypes(&s.final), []string{"mcp_list_tools", "message"}) || s.final.OutputText() != s.text {
		t.Fatalf("got %s %s", s.terminal, s.final.RawJSON())
	}
	b := h.up.all()[b0]
	if !strings.Contains(b, `"input"`) || !strings.Contains(b, `"name":"docs__search"`) || strings.Contains(b, `"type":"mcp"`) {
		t.Errorf("the passed-through model call: %s", b)
	}
}

// TestHostedMCPPlainRequest: with MCP servers configured, a /v1/responses
// request with no mcp tool (read once to look for them, then served by
// the usual path from the same bytes) streams and answers as ever, on a
// translated and a passed-through route, with one ledger row and no tool
// listed.
func TestHostedMCPPlainRequest(t *testing.T) {
	h := startHosted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, model := range []string{"m-openai", "m-responses"} {
		rows := len(h.env.rec.all())
		params := hostedParams(model)
		params.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String(strings.Repeat("a long prompt ", 5000))}
		rc := h.client("")
		s := readMCPStream(t, rc.Responses.NewStreaming(ctx, params))
		if s.terminal != "response.completed" || !slices.Equal(outputTypes(&s.final), []string{"message"}) || s.text == "" {
			t.Fatalf("%s: got %s %s", model, s.terminal, s.final.RawJSON())
		}
		if got := h.env.rec.all()[rows:]; len(got) != 1 || got[0].Outcome != usage.OutcomeOK || got[0].InputTokens < 5000 {
			t.Errorf("%s: ledger rows %+v, want one ok row with the whole prompt", model, got)
		}
	}
}
