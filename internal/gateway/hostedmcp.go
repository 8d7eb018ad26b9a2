package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/redact"
	"github.com/streamgate/streamgate/internal/responses"
	"github.com/streamgate/streamgate/internal/sse"
)

// Hosted MCP: a POST /v1/responses whose tools hold {"type": "mcp",
// "server_label": …} entries naming configured MCP servers (mcp.servers)
// is run by the gateway itself, on any route kind, as OpenAI runs its
// remote MCP tool:
//
//  1. The gateway lists each server's tools under the caller's key (its
//     mcp_tools allow-list) and the entry's allowed_tools, and answers
//     with an mcp_list_tools output item per server.
//  2. Each model call of the turn is a /v1/responses request the gateway
//     makes to itself (ServeHTTP: the key's limits and budget, routes,
//     fallback, one ledger row each, under the client's X-Request-Id), the
//     servers' tools offered as function tools named
//     responses.MCPFunctionName (label__tool), the conversation so far as
//     its input, store false.
//  3. A call of such a function is an mcp_call item: the gateway runs the
//     tool (hostedMCP.CallTool: the key's allow-list, admission, the tool
//     call's own ledger row), its output (or error) goes back to the model
//     as the function's output, and the model is called again — up to
//     hostedMaxCalls model calls, the last one with tool_choice "none".
//     A tool whose require_approval asks for approval (OpenAI's default)
//     is not run: an mcp_approval_request item ends the response, and an
//     mcp_approval_response input item of a later request (approve true)
//     runs it before that request's first model call.
//  4. The client gets one response: one stream (response.created, the
//     mcp_list_tools, mcp_call and mcp_approval_request items with
//     OpenAI's events, every model call's items, one terminal event with
//     the whole output and the usage summed), or one response object.
//
// The stream commits (status 200) at the first model call's first event,
// as any stream does: a refusal before it (a budget, an unknown model, a
// failed tool listing: 424) is an HTTP error. A request naming an MCP
// server the config lacks is refused (400): the gateway never connects
// to a server_url, nor sends headers or an authorization a request gives
// (STYLE 25); the configured server gets its configured credentials only.

// hostedMaxCalls bounds the model calls of one hosted-MCP turn; the last
// one is offered no tool (tool_choice "none"), so that the turn ends with
// an answer.
const hostedMaxCalls = 8

// hostedMCP runs the tools of the configured MCP servers for hosted MCP
// (implemented over package mcp's Gateway; tests give a fake).
type hostedMCP interface {
	// Servers names the configured servers (mcp.servers[].name).
	Servers() []string
	// Tools lists the tools of server that c may use (its key's
	// mcp_tools), names unprefixed.
	Tools(ctx context.Context, c *hostedCaller, server string) ([]hostedTool, error)
	// CallTool runs tool of server with args (a JSON object) under c's
	// allow-list, admission and ledger, as POST /mcp would. A JSON-RPC
	// error (the server's, or the gateway's refusal) is a
	// *hostedCallError; a tool that failed is a result with IsError.
	CallTool(ctx context.Context, c *hostedCaller, server, tool string, args json.RawMessage) (*hostedResult, error)
}

// hostedCaller is who calls the tools of a hosted turn: the gateway key,
// its team, and the request the calls belong to (their ledger rows'
// request_id, as the model calls').
type hostedCaller struct {
	Key, Team, RequestID string
	Principal            *auth.Principal
}

// hostedTool is an MCP tool as tools/list gives it.
type hostedTool struct {
	Name, Description string
	InputSchema       json.RawMessage
	Annotations       json.RawMessage
}

// hostedResult is a tools/call result.
type hostedResult struct {
	Content           json.RawMessage // the content blocks
	StructuredContent json.RawMessage
	IsError           bool
}

// hostedCallError is a tools/call answered with a JSON-RPC error.
type hostedCallError struct {
	Code    int
	Message string
}

func (e *hostedCallError) Error() string {
	return fmt.Sprintf("MCP error %d: %s", e.Code, e.Message)
}

// mcpListError is a server whose tools could not be listed: 424
// external_connector_error, as OpenAI answers it (statusOf).
type mcpListError struct {
	label string
	err   error
}

func (e *mcpListError) Error() string {
	return fmt.Sprintf("Error retrieving tool list from MCP server: '%s': %s", e.label, redact.Text(e.err.Error()))
}

func (e *mcpListError) Unwrap() error { return e.err }

// hostedRoundKey marks the context of a model call of a hosted turn.
type hostedRoundKey struct{}

func isHostedRound(ctx context.Context) bool { v, _ := ctx.Value(hostedRoundKey{}).(bool); return v }

// hostedResponses serves r when its body declares mcp tools, and reports
// whether it did; otherwise r's body is left to read again (the
// responses handler's). A request whose key fails is left to the handler
// (it answers 401).
func (g *Gateway) hostedResponses(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || len(g.hosted.Servers()) == 0 {
		return false // without servers, the handler refuses mcp tools (mcpTools)
	}
	st := g.cur()
	p, err := st.keys.Authenticate(r)
	if err != nil {
		return false
	}
	release, err := g.decodeSlot(r)
	if err != nil {
		g.hostedReject(w, r, p, "", err)
		return true
	}
	body, err := g.readBody(w, r)
	if err != nil {
		if release != nil {
			release()
		}
		g.hostedReject(w, r, p, "", err)
		return true
	}
	putBack(r, body)
	if !declaresMCP(body) {
		if release != nil {
			release()
		}
		return false
	}
	t, err := g.newTurn(w, r, p, body)
	if release != nil {
		release()
	}
	if err != nil {
		model := ""
		if t != nil {
			model = t.rq.Model
		}
		g.hostedReject(w, r, p, model, err)
		return true
	}
	t.run()
	return true
}

// declaresMCP reports whether body's tools hold an mcp tool.
func declaresMCP(body []byte) bool {
	if !bytes.Contains(body, []byte(`"mcp"`)) {
		return false
	}
	var v struct {
		Tools []struct {
			Type string `json:"type"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false // the handler names what is wrong
	}
	for _, t := range v.Tools {
		if t.Type == "mcp" {
			return true
		}
	}
	return false
}

// hostedReject answers a hosted request refused before its first model
// call, with the ledger row of a refusal.
func (g *Gateway) hostedReject(w http.ResponseWriter, r *http.Request, p *auth.Principal, model string, err error) {
	c := newCall(infoFrom(r.Context()))
	c.entry.KeyID, c.entry.Team, c.entry.Model = p.KeyID, p.Team, model
	g.reject(w, r, c, err)
	g.finish(c)
}

// hostedServer is one mcp tool of the request: a configured server, the
// tools the request allows of it, and which need approval.
type hostedServer struct {
	label   string
	allowed toolFilter // allowed_tools; all when none
	// always and never are require_approval's filters: a tool needs
	// approval unless never matches it and always does not.
	always, never toolFilter
	tools         []hostedTool // listed and allowed
	listID        string       // its mcp_list_tools item
}

// toolFilter is an allowed_tools or require_approval filter: a tool
// matches when it is named (or no names are given) and, with readOnly,
// is annotated read-only. all matches every tool, none no tool.
type toolFilter struct {
	all, none bool
	names     []string
	readOnly  bool
}

func (f *toolFilter) match(t *hostedTool) bool {
	switch {
	case f.all:
		return true
	case f.none:
		return false
	case len(f.names) > 0 && !slices.Contains(f.names, t.Name):
		return false
	case f.readOnly:
		var a struct {
			ReadOnly bool `json:"readOnlyHint"`
		}
		json.Unmarshal(t.Annotations, &a)
		return a.ReadOnly
	}
	return true
}

// readFilter reads a filter object ({"tool_names": […], "read_only": …})
// or, when names is set, a list of names; null is nil.
func readFilter(raw json.RawMessage, path string, names bool) (*toolFilter, error) {
	if !isSetRaw(raw) {
		return nil, nil
	}
	if names && bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("[")) {
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, invalid(path, "%s must be a list of tool names or a filter object", path)
		}
		return &toolFilter{names: l, none: len(l) == 0}, nil
	}
	var f struct {
		ToolNames []string `json:"tool_names"`
		ReadOnly  bool     `json:"read_only"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, invalid(path, "%s must be a filter object ({\"tool_names\": [...], \"read_only\": ...})", path)
	}
	return &toolFilter{names: f.ToolNames, readOnly: f.ReadOnly, all: len(f.ToolNames) == 0 && !f.ReadOnly}, nil
}

func isSetRaw(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// needsApproval reports whether a call of t must be approved first.
func (s *hostedServer) needsApproval(t *hostedTool) bool {
	return s.always.match(t) || !s.never.match(t)
}

// mcpToolSpec is an mcp tool entry of a request.
type mcpToolSpec struct {
	Type            string          `json:"type"`
	ServerLabel     string          `json:"server_label"`
	ServerURL       string          `json:"server_url"`
	ConnectorID     string          `json:"connector_id"`
	TunnelID        string          `json:"tunnel_id"`
	AllowedTools    json.RawMessage `json:"allowed_tools"`
	RequireApproval json.RawMessage `json:"require_approval"`
	DeferLoading    bool            `json:"defer_loading"`
}

// readServers reads the mcp tools of tools against the configured
// servers.
func readServers(tools []json.RawMessage, configured []string) (map[int]*hostedServer, []*hostedServer, error) {
	at := map[int]*hostedServer{}
	var list []*hostedServer
	for i, raw := range tools {
		if !bytes.Contains(raw, []byte(`"mcp"`)) {
			continue
		}
		path := fmt.Sprintf("tools[%d]", i)
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &head) != nil || head.Type != "mcp" {
			continue
		}
		var spec mcpToolSpec
		if err := json.Unmarshal(raw, &spec); err != nil {
			return nil, nil, invalid(path, "%s is not a valid mcp tool: %v", path, err)
		}
		switch {
		case spec.ServerLabel == "":
			return nil, nil, invalid(path+".server_label", "missing required field: %s.server_label (the name of one of the gateway's MCP servers)", path)
		case spec.ConnectorID != "", spec.TunnelID != "":
			return nil, nil, invalid(path, "%s: connector_id and tunnel_id are not supported: the gateway runs the tools of the MCP servers its config names (mcp.servers), by their name in server_label", path)
		case spec.DeferLoading:
			return nil, nil, invalid(path+".defer_loading", "%s.defer_loading is not supported: the gateway offers an MCP server's tools to the model at once", path)
		case !slices.Contains(configured, spec.ServerLabel):
			return nil, nil, invalid(path+".server_label", "%s.server_label %q is not an MCP server of this gateway (%s): the gateway runs the tools of the servers its config names (mcp.servers) and never connects to a server_url, or sends headers, a request gives", path, spec.ServerLabel, serverList(configured))
		}
		for _, s := range list {
			if s.label == spec.ServerLabel {
				return nil, nil, invalid(path+".server_label", "%s.server_label %q is declared twice", path, spec.ServerLabel)
			}
		}
		s := &hostedServer{label: spec.ServerLabel, allowed: toolFilter{all: true}, always: toolFilter{all: true}, never: toolFilter{none: true}}
		f, err := readFilter(spec.AllowedTools, path+".allowed_tools", true)
		if err != nil {
			return nil, nil, err
		}
		if f != nil {
			s.allowed = *f
		}
		if err := s.readApproval(spec.RequireApproval, path+".require_approval"); err != nil {
			return nil, nil, err
		}
		at[i] = s
		list = append(list, s)
	}
	return at, list, nil
}

// readApproval reads require_approval: "always" (the default, as
// OpenAI's), "never", or {"always": filter, "never": filter}.
func (s *hostedServer) readApproval(raw json.RawMessage, path string) error {
	if !isSetRaw(raw) {
		return nil
	}
	var set string
	if json.Unmarshal(raw, &set) == nil {
		switch set {
		case "always":
		case "never":
			s.always, s.never = toolFilter{none: true}, toolFilter{all: true}
		default:
			return invalid(path, "%s must be always, never or a filter object, got %q", path, set)
		}
		return nil
	}
	var f struct {
		Always json.RawMessage `json:"always"`
		Never  json.RawMessage `json:"never"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return invalid(path, "%s must be always, never or {\"always\": {...}, \"never\": {...}}", path)
	}
	s.always = toolFilter{none: true}
	if a, err := readFilter(f.Always, path+".always", false); err != nil {
		return err
	} else if a != nil {
		s.always = *a
	}
	if n, err := readFilter(f.Never, path+".never", false); err != nil {
		return err
	} else if n != nil {
		s.never = *n
	}
	return nil
}

func serverList(names []string) string {
	if len(names) == 0 {
		return "it has none: mcp.servers is empty"
	}
	return "its servers: " + strings.Join(names, ", ")
}

// hostedFunc is a function offered to the model: a server's tool.
type hostedFunc struct {
	server   *hostedServer
	tool     *hostedTool
	approval bool
}

// hostedCall is a model's call of a server's tool: its mcp_call (or
// mcp_approval_request) item and, once run, its result.
type hostedCall struct {
	fn       *hostedFunc
	id       string // the item's id
	index    int    // its output_index
	args     string
	approval string // the approval_request_id it runs for; "" none
	added    bool   // its output_item.added was sent
	res      *hostedResult
	err      error
	done     chan struct{}
}

// turn is one hosted-MCP response: its request, its servers and its
// output so far.
type turn struct {
	g      *Gateway
	w      http.ResponseWriter
	r      *http.Request
	info   *reqInfo
	ctx    context.Context
	span   trace.Span // nil: tracing off
	caller *hostedCaller
	rq     responses.Request
	meta   *responses.Meta
	body   []byte
	st     *toStore
	stream bool

	servers map[int]*hostedServer // by their index in tools
	list    []*hostedServer
	funcs   map[string]*hostedFunc // by function name
	tools   []byte                 // the model calls' tools
	history []json.RawMessage      // the conversation before this response (Prior and input)
	approve []*hostedCall          // the calls the input approves, run first

	output []json.RawMessage // the output items, by output_index
	usage  responses.Usage
	calls  int // model calls made
	ran    int // tools run

	// The stream: sw writes w, once committed; seq numbers the events.
	sw        *sse.Writer
	committed bool
	preambled bool // the stream's first events were sent
	seq       int64
	buf       []byte
	route     http.Header // the first model call's headers the client gets
	ending    *responses.Ending
	gone      bool // the client went away
}

// newTurn reads and checks the request (body) of the key p: its mcp
// tools, model, state, and the tools of its servers. Errors are the
// client's answer; t is returned with them once the request decoded.
func (g *Gateway) newTurn(w http.ResponseWriter, r *http.Request, p *auth.Principal, body []byte) (*turn, error) {
	info := infoFrom(r.Context())
	t := &turn{g: g, w: w, r: r, info: info, ctx: r.Context(), body: body,
		caller: &hostedCaller{Key: p.KeyID, Team: p.Team, RequestID: info.id, Principal: p}}
	info.keyID = p.KeyID
	if err := oneReading(body, responsesFields); err != nil {
		return nil, err
	}
	if err := responses.Decode(body, &t.rq); err != nil {
		return nil, decodeError(err)
	}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return nil, invalid("", "invalid JSON body: want an object, got null")
	}
	rq := &t.rq
	t.stream = rq.Stream
	info.model, info.stream = rq.Model, rq.Stream
	var err error
	if t.servers, t.list, err = readServers(rq.Tools, g.hosted.Servers()); err != nil {
		return t, err
	}
	for i := range t.servers {
		// What a request would send its MCP server goes nowhere, and is
		// neither echoed nor stored with the response.
		if b, err := api.SetMembers(rq.Tools[i], map[string]json.RawMessage{"headers": nil, "authorization": nil}); err == nil {
			rq.Tools[i] = b
		}
	}
	if rq.Model == "" {
		return t, invalid("model", "missing required field: model")
	}
	st := g.cur()
	model, ok := st.cfg.Resolve(rq.Model)
	if !ok {
		return t, unknownModel(rq.Model)
	}
	if !p.Allowed(model.Name) {
		return t, fmt.Errorf("%w: key %q may not use model %q", errModelNotAllowed, p.KeyID, model.Name)
	}
	// The conversation so far, as parseResponses reads it: the socket's
	// or the store's previous response, the item references.
	if s := socketOf(r.Context()); s != nil {
		t.st, err = g.socketState(r.Context(), s, p.KeyID, rq)
	} else if g.respStore != nil {
		t.st, err = g.resolveState(r.Context(), p.KeyID, rq)
	}
	if err != nil {
		return t, responsesError(err)
	}
	parsed, err := rq.Parse()
	if err != nil {
		if err = responsesError(err); !errors.As(err, new(*invalidError)) {
			err = invalid("", "%v", err)
		}
		return t, err
	}
	t.meta = parsed.Meta
	input, err := responses.Items(rq.Input, nil)
	if err != nil {
		return t, responsesError(err)
	}
	t.history = append(append(make([]json.RawMessage, 0, len(rq.Prior)+len(input)), rq.Prior...), input...)
	if err := t.listTools(); err != nil {
		return t, err
	}
	if err := t.offer(); err != nil {
		return t, err
	}
	if err := t.approved(input); err != nil {
		return t, err
	}
	return t, nil
}

// listTools lists the tools of every server of the request at once, each
// filtered by its allowed_tools.
func (t *turn) listTools() error {
	errs := make([]error, len(t.list))
	var wg sync.WaitGroup
	for i, s := range t.list {
		wg.Go(func() {
			tools, err := t.g.hosted.Tools(t.ctx, t.caller, s.label)
			if err != nil {
				errs[i] = &mcpListError{label: s.label, err: err}
				return
			}
			for _, tl := range tools {
				if s.allowed.match(&tl) {
					s.tools = append(s.tools, tl)
				}
			}
		})
	}
	wg.Wait()
	if err := t.ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// offer builds the model calls' tools: the request's, each mcp tool
// replaced by its server's tools as functions.
func (t *turn) offer() error {
	t.funcs = map[string]*hostedFunc{}
	own := map[string]bool{}
	for i, raw := range t.rq.Tools {
		if t.servers[i] != nil {
			continue
		}
		var ft struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &ft) == nil && (ft.Type == "function" || ft.Type == "custom") {
			own[ft.Name] = true
		}
	}
	b := []byte{'['}
	for i, raw := range t.rq.Tools {
		s := t.servers[i]
		if s == nil {
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, raw...)
			continue
		}
		for j := range s.tools {
			tl := &s.tools[j]
			name := responses.MCPFunctionName(s.label, tl.Name)
			if own[name] || t.funcs[name] != nil {
				return invalid(fmt.Sprintf("tools[%d]", i), "tool %q of MCP server %q is offered to the model as %q, which names another tool of the request too", tl.Name, s.label, name)
			}
			t.funcs[name] = &hostedFunc{server: s, tool: tl, approval: s.needsApproval(tl)}
			params := tl.InputSchema
			if !isSetRaw(params) {
				params = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			f, err := json.Marshal(struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description string          `json:"description,omitempty"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      bool            `json:"strict"`
			}{"function", name, tl.Description, params, false})
			if err != nil {
				return fmt.Errorf("MCP server %q: tool %q has an input schema that is not JSON: %w", s.label, tl.Name, err)
			}
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, f...)
		}
	}
	t.tools = append(b, ']')
	return nil
}

// approved finds the calls the input's mcp_approval_response items
// approve (their mcp_approval_request in the conversation, not run yet),
// to run before the first model call.
func (t *turn) approved(input []json.RawMessage) error {
	type mcpHead struct {
		Type              string `json:"type"`
		ID                string `json:"id"`
		ServerLabel       string `json:"server_label"`
		Name              string `json:"name"`
		Arguments         string `json:"arguments"`
		ApprovalRequestID string `json:"approval_request_id"`
		Approve           bool   `json:"approve"`
	}
	requests := map[string]mcpHead{}
	ran := map[string]bool{}
	for _, it := range t.history {
		var h mcpHead
		if json.Unmarshal(it, &h) != nil {
			continue
		}
		switch h.Type {
		case "mcp_approval_request":
			requests[h.ID] = h
		case "mcp_call":
			if h.ApprovalRequestID != "" {
				ran[h.ApprovalRequestID] = true
			}
		}
	}
	for i, it := range input {
		var h mcpHead
		if json.Unmarshal(it, &h) != nil || h.Type != "mcp_approval_response" || !h.Approve || ran[h.ApprovalRequestID] {
			continue
		}
		path := fmt.Sprintf("input[%d].approval_request_id", i)
		req, ok := requests[h.ApprovalRequestID]
		if !ok {
			return invalid(path, "%s %q names no mcp_approval_request of the conversation", path, h.ApprovalRequestID)
		}
		fn := t.funcs[responses.MCPFunctionName(req.ServerLabel, req.Name)]
		if fn == nil {
			return invalid(path, "%s: the approved call of %q on MCP server %q is not among this request's tools (its mcp tool and allowed_tools)", path, req.Name, req.ServerLabel)
		}
		ran[h.ApprovalRequestID] = true
		t.approve = append(t.approve, &hostedCall{fn: fn, id: responses.NewItemID("mcp_"), args: req.Arguments, approval: req.ID})
	}
	return nil
}

// run serves the turn: the approved calls, then model calls until the
// model answers, asks for approval or calls the client's tools.
func (t *turn) run() {
	st := t.g.cur()
	if tr := st.tracing; tr != nil {
		ctx := tr.prop.Extract(t.ctx, propagation.HeaderCarrier(t.r.Header))
		t.ctx, t.span = tr.tracer.Start(ctx, "responses mcp "+t.rq.Model, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithTimestamp(t.info.start), trace.WithAttributes(attrRequestID.String(t.info.id), attrKey.String(t.caller.Key)))
		if sc := t.span.SpanContext(); sc.IsValid() {
			t.info.trace = sc.TraceID()
		}
		defer t.endSpan()
	}
	if st := t.st; st != nil {
		st.id = t.meta.ID
		defer t.g.keep(st, t.g.respStore.Begin(t.meta.ID))
	}
	for _, s := range t.list {
		s.listID = responses.NewItemID("mcpl_")
		t.output = append(t.output, t.listItem(s))
	}
	if len(t.approve) > 0 {
		// The approved calls run before the model is called: a stream
		// commits now, to show them (and keep the client's connection
		// alive) while they run.
		if t.stream && !(t.commit(nil) && t.preamble("")) {
			return
		}
		for _, c := range t.approve {
			c.index = len(t.output)
			t.output = append(t.output, t.callItem(c, "in_progress"))
			if !t.callStarted(c) {
				return
			}
		}
		if !t.runCalls(t.approve) {
			return
		}
	}
	for t.ending == nil && !t.gone {
		t.round()
	}
	t.end()
}

// endSpan ends the turn's span.
func (t *turn) endSpan() {
	a := []attribute.KeyValue{semconv.GenAIRequestModel(t.rq.Model), attribute.Int("streamgate.mcp.model_calls", t.calls),
		attribute.Int("streamgate.mcp.tool_calls", t.ran)}
	if e := t.ending; e != nil {
		a = append(a, attribute.String("streamgate.mcp.status", e.Status))
		if e.Status == "failed" {
			t.span.SetStatus(codes.Error, string(e.Error))
		}
	}
	t.span.SetAttributes(a...)
	t.span.End()
}

// listItem is server s's mcp_list_tools item.
func (t *turn) listItem(s *hostedServer) json.RawMessage {
	type tool struct {
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
		Annotations json.RawMessage `json:"annotations"`
	}
	tools := make([]tool, 0, len(s.tools))
	for _, tl := range s.tools {
		d := &tl.Description
		if tl.Description == "" {
			d = nil
		}
		schema, ann := tl.InputSchema, tl.Annotations
		if !isSetRaw(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if !isSetRaw(ann) {
			ann = json.RawMessage("null")
		}
		tools = append(tools, tool{tl.Name, d, schema, ann})
	}
	b, _ := json.Marshal(struct {
		ID          string  `json:"id"`
		Type        string  `json:"type"`
		ServerLabel string  `json:"server_label"`
		Tools       []tool  `json:"tools"`
		Error       *string `json:"error"`
	}{s.listID, "mcp_list_tools", s.label, tools, nil})
	return b
}

// callItem is c's mcp_call item with status: in progress (no output yet),
// or as its result makes it.
func (t *turn) callItem(c *hostedCall, status string) json.RawMessage {
	item := struct {
		ID                string          `json:"id"`
		Type              string          `json:"type"`
		ApprovalRequestID *string         `json:"approval_request_id"`
		Arguments         string          `json:"arguments"`
		Error             json.RawMessage `json:"error"`
		Name              string          `json:"name"`
		Output            *string         `json:"output"`
		ServerLabel       string          `json:"server_label"`
		Status            string          `json:"status"`
	}{ID: c.id, Type: "mcp_call", Arguments: c.args, Error: json.RawMessage("null"), Name: c.fn.tool.Name, ServerLabel: c.fn.server.label, Status: status}
	if c.approval != "" {
		item.ApprovalRequestID = &c.approval
	}
	if status == "in_progress" {
		item.Arguments = ""
	}
	if status != "in_progress" {
		out, e := c.outcome()
		switch {
		case errors.Is(c.err, errCut):
			item.Status = "incomplete"
		case e != nil:
			item.Error, item.Status = e, "failed"
		default:
			item.Output = &out
		}
	}
	b, _ := json.Marshal(item)
	return b
}

// approvalItem is the mcp_approval_request item of the call c.
func (t *turn) approvalItem(c *hostedCall) json.RawMessage {
	b, _ := json.Marshal(struct {
		ID          string `json:"id"`
		Type        string `json:"type"`
		Arguments   string `json:"arguments"`
		Name        string `json:"name"`
		ServerLabel string `json:"server_label"`
	}{c.id, "mcp_approval_request", c.args, c.fn.tool.Name, c.fn.server.label})
	return b
}

// outcome is c's output, or its error object: the tool's own error
// (mcp_tool_execution_error), a JSON-RPC error (mcp_protocol_error), or
// another failure (http_error, with the status the gateway would answer).
func (c *hostedCall) outcome() (string, json.RawMessage) {
	type errObj struct {
		Type    string          `json:"type"`
		Code    *int            `json:"code,omitempty"`
		Message string          `json:"message,omitempty"`
		Content json.RawMessage `json:"content,omitempty"`
	}
	mk := func(e errObj) json.RawMessage { b, _ := json.Marshal(e); return b }
	var pe *hostedCallError
	switch {
	case errors.Is(c.err, errTurnLimit):
		status := http.StatusTooManyRequests
		return "", mk(errObj{Type: "http_error", Code: &status, Message: c.err.Error()})
	case c.err != nil && errors.As(c.err, &pe):
		return "", mk(errObj{Type: "mcp_protocol_error", Code: &pe.Code, Message: redact.Text(pe.Message)})
	case c.err != nil:
		h := statusOf(c.err)
		status, msg := h.status, h.body.Error.Message
		if status == http.StatusInternalServerError {
			status, msg = http.StatusBadGateway, "the MCP server call failed: "+redact.Text(c.err.Error())
		}
		return "", mk(errObj{Type: "http_error", Code: &status, Message: msg})
	case c.res == nil:
		return "", mk(errObj{Type: "http_error", Message: "the tool was not run"})
	case c.res.IsError:
		content := c.res.Content
		if !isSetRaw(content) {
			content = json.RawMessage("[]")
		}
		return "", mk(errObj{Type: "mcp_tool_execution_error", Content: content})
	}
	out := responses.ContentText(c.res.Content)
	if out == "" && isSetRaw(c.res.StructuredContent) {
		out = string(c.res.StructuredContent)
	}
	return out, nil
}

// round makes one model call and runs the tools it calls; it sets
// t.ending when the turn ends.
func (t *turn) round() {
	t.calls++
	rw := &roundWriter{t: t, h: http.Header{}, calls: map[int64]*hostedCall{}, index: map[int64]int{}}
	body, err := t.roundBody()
	if err != nil {
		t.failWith(err)
		return
	}
	t.g.ServeHTTP(rw, t.roundRequest(body))
	if rw.err != nil || t.ctx.Err() != nil {
		t.gone = true
		return
	}
	if t.route == nil {
		t.route = rw.h
	}
	if rw.status != http.StatusOK {
		t.refused(rw)
		return
	}
	resp := rw.resp
	if !t.stream {
		resp = rw.body
	}
	var head struct {
		Status            string          `json:"status"`
		Model             string          `json:"model"`
		Error             json.RawMessage `json:"error"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	if len(resp) == 0 || json.Unmarshal(resp, &head) != nil {
		t.failWith(errors.New("the model call ended without its response"))
		return
	}
	if head.Model != "" {
		t.meta.Model = head.Model
	}
	if u, ok := responses.ReadUsage(resp); ok {
		t.usage.Add(u)
	}
	var run []*hostedCall
	approval, client := false, false
	last := t.calls >= hostedMaxCalls
	for i, it := range responses.Output(resp) {
		var h struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Status    string `json:"status"`
		}
		json.Unmarshal(it, &h)
		fn := t.funcs[h.Name]
		if h.Type != "function_call" || fn == nil {
			if h.Type == "function_call" || h.Type == "custom_tool_call" {
				client = true
			}
			t.set(rw.outIndex(int64(i)), it)
			continue
		}
		c := rw.calls[int64(i)]
		if c == nil {
			c = &hostedCall{fn: fn, id: mcpItemID(h.ID, fn.approval), index: -1}
			rw.calls[int64(i)] = c
		}
		if c.index < 0 {
			c.index = rw.outIndex(int64(i))
		}
		c.args = h.Arguments
		switch {
		case fn.approval:
			approval = true
			t.set(c.index, t.approvalItem(c))
			if t.stream && !c.added { // sent whole at its output_item.done, unless none came
				c.added = true
				if t.emitWhole(c.index, t.approvalItem(c)) != nil {
					t.gone = true
					return
				}
			}
		case head.Status != "completed" || last:
			// Not run: the answer was cut, failed, or is the turn's last.
			c.err = errNotRun(last && head.Status == "completed")
			t.set(c.index, t.callItem(c, "completed"))
			if t.stream && c.added && t.emitCallEnd(c) != nil {
				t.gone = true
				return
			}
		default:
			t.set(c.index, t.callItem(c, "in_progress"))
			run = append(run, c)
		}
	}
	switch head.Status {
	case "failed":
		t.ending = &responses.Ending{Status: "failed", Error: head.Error}
		return
	case "incomplete":
		reason := ""
		if head.IncompleteDetails != nil {
			reason = head.IncompleteDetails.Reason
		}
		t.ending = &responses.Ending{Status: "incomplete", Incomplete: reason}
		return
	}
	if len(run) > 0 && !t.runCalls(run) {
		return
	}
	switch {
	case last && len(run) == 0 && hasNotRun(rw.calls):
		t.ending = &responses.Ending{Status: "incomplete", Incomplete: "max_tool_calls"}
	case len(run) == 0 || approval || client:
		t.ending = &responses.Ending{Status: "completed"}
	}
}

// hasNotRun reports whether a call of the round was left unrun.
func hasNotRun(calls map[int64]*hostedCall) bool {
	for _, c := range calls {
		if c.err != nil && errors.Is(c.err, errTurnLimit) {
			return true
		}
	}
	return false
}

// errTurnLimit is a call the model made in the turn's last model call.
var errTurnLimit = errors.New("not run: the turn reached the gateway's limit of " + strconv.Itoa(hostedMaxCalls) + " model calls")

// errCut is a call in an answer that did not complete (cut, failed):
// not run, its item incomplete.
var errCut = errors.New("not run: the model's answer did not complete")

func errNotRun(limit bool) error {
	if limit {
		return errTurnLimit
	}
	return errCut
}

// mcpItemID is the id of the mcp_call (or, for approval,
// mcp_approval_request) item of the function_call item id.
func mcpItemID(id string, approval bool) string {
	p := "mcp_"
	if approval {
		p = "mcpr_"
	}
	if _, rest, ok := strings.Cut(id, "_"); ok && rest != "" {
		return p + rest
	}
	if id == "" {
		return responses.NewItemID(p)
	}
	return p + id
}

// set puts item at output_index i.
func (t *turn) set(i int, item json.RawMessage) {
	for len(t.output) <= i {
		t.output = append(t.output, nil)
	}
	t.output[i] = item
}

// roundBody is the next model call's body: the request's, with the
// functions for its mcp tools, the conversation so far as input, no
// stored state, and the tool choice of this call.
func (t *turn) roundBody() ([]byte, error) {
	input := make([]json.RawMessage, 0, len(t.history)+len(t.output)+2)
	input = append(input, t.history...)
	for _, it := range t.output {
		if it != nil {
			input = append(input, it)
		}
	}
	in, err := json.Marshal(responses.MCPHistory(input))
	if err != nil {
		return nil, err
	}
	include := append([]string(nil), t.rq.Include...)
	if !slices.Contains(include, "reasoning.encrypted_content") {
		// A model's signed thinking goes back to it with its tool calls
		// (Anthropic refuses a tool loop without it).
		include = append(include, "reasoning.encrypted_content")
	}
	inc, _ := json.Marshal(include)
	set := map[string]json.RawMessage{
		"tools":                t.tools,
		"input":                in,
		"previous_response_id": nil,
		"store":                json.RawMessage("false"),
		"stream":               json.RawMessage(strconv.FormatBool(t.stream)),
		"include":              inc,
		"tool_choice":          t.toolChoice(),
	}
	if set["tool_choice"] == nil {
		delete(set, "tool_choice") // as sent
	}
	return api.SetMembers(t.body, set)
}

// toolChoice is the tool_choice of the next model call: the request's
// for the first (an mcp choice as its function, or "required" for a
// whole server), "auto" after it when it forced a tool (or the model
// would call it again and again), "none" for the last; nil: as sent.
func (t *turn) toolChoice() json.RawMessage {
	if t.calls >= hostedMaxCalls {
		return json.RawMessage(`"none"`)
	}
	raw := t.rq.ToolChoice
	if !isSetRaw(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "required" && t.calls > 1 {
			return json.RawMessage(`"auto"`)
		}
		return nil
	}
	if t.calls > 1 {
		return json.RawMessage(`"auto"`)
	}
	var c struct {
		Type        string `json:"type"`
		ServerLabel string `json:"server_label"`
		Name        string `json:"name"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type != "mcp" {
		return nil
	}
	if c.Name == "" {
		return json.RawMessage(`"required"`)
	}
	b, _ := json.Marshal(map[string]string{"type": "function", "name": responses.MCPFunctionName(c.ServerLabel, c.Name)})
	return b
}

// roundRequest is the model call of body: a POST /v1/responses with the
// client's headers (its key, its X-Sim-* controls) and the turn's
// request id, under the turn's span, outside the client's WebSocket
// state.
func (t *turn) roundRequest(body []byte) *http.Request {
	ctx := context.WithValue(t.ctx, hostedRoundKey{}, true)
	ctx = context.WithValue(ctx, socketKey{}, (*socket)(nil))
	r := t.r.Clone(ctx)
	r.Method = http.MethodPost
	r.Header.Del("Content-Length")
	r.Header.Set(HeaderRequestID, t.info.id)
	if t.span != nil {
		if tr := t.g.cur().tracing; tr != nil {
			tr.prop.Inject(t.ctx, propagation.HeaderCarrier(r.Header))
		}
	}
	r.Body, r.GetBody, r.ContentLength = io.NopCloser(bytes.NewReader(body)), nil, int64(len(body))
	return r
}

// refused ends the turn with a model call refused before its answer
// began: the client gets the refusal as it is when nothing was sent yet,
// else the stream fails with it.
func (t *turn) refused(rw *roundWriter) {
	if !t.committed {
		h := t.w.Header()
		for _, k := range []string{"Content-Type", "Retry-After", headerShouldRetry, "Allow"} {
			if v := rw.h.Get(k); v != "" {
				h.Set(k, v)
			}
		}
		t.w.WriteHeader(rw.status)
		t.w.Write(rw.body)
		t.ending = &responses.Ending{Status: "failed", Error: responses.ErrorObject(rw.body)}
		t.info.status = rw.status
		t.gone = true // answered
		return
	}
	t.ending = &responses.Ending{Status: "failed", Error: responses.ErrorObject(rw.body)}
}

// failWith ends the turn failed with err: an HTTP error while nothing
// was sent, else the stream's response.failed.
func (t *turn) failWith(err error) {
	h := statusOf(err)
	t.ending = &responses.Ending{Status: "failed", Error: responses.ErrorObject(errorJSON(h.body))}
	if !t.committed {
		t.g.writeError(t.w, t.r, err)
		t.info.status, t.info.err = h.status, err.Error()
		t.gone = true
	}
}

// runCalls runs calls at once and writes their results in order, each as
// soon as it and those before it ended; false when the client went away.
func (t *turn) runCalls(calls []*hostedCall) bool {
	// A client that stops reading (a failed write) ends the calls too,
	// as one that leaves does.
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	for _, c := range calls {
		c.done = make(chan struct{})
		go t.callTool(ctx, c)
	}
	var tick <-chan time.Time
	if t.stream && t.g.keepAlive > 0 {
		tk := time.NewTicker(t.g.keepAlive)
		defer tk.Stop()
		tick = tk.C
	}
	ok := true
	for _, c := range calls {
	wait:
		for {
			select {
			case <-c.done:
				break wait
			case <-tick:
				if ok && t.committed && t.sw.Comment(keepAliveComment) != nil {
					ok = false
				}
			}
		}
		t.ran++
		if !ok || t.ctx.Err() != nil {
			ok = false
			cancel() // the others end too
			continue
		}
		t.set(c.index, t.callItem(c, "completed"))
		if t.stream {
			if err := t.emitCallEnd(c); err != nil {
				ok = false
				cancel()
			}
		}
	}
	if !ok {
		t.gone = true
	}
	return ok
}

// callTool runs c's tool. Its span is the MCP endpoint's (a child of the
// turn's, through ctx).
func (t *turn) callTool(ctx context.Context, c *hostedCall) {
	defer close(c.done)
	args := json.RawMessage(c.args)
	if strings.TrimSpace(c.args) == "" {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		c.err = &hostedCallError{Code: -32602, Message: "the model's arguments are not valid JSON"}
		return
	}
	c.res, c.err = t.g.hosted.CallTool(ctx, t.caller, c.fn.server.label, c.fn.tool.Name, args)
}

// end ends the response: its terminal event, or its response object.
func (t *turn) end() {
	if t.gone {
		if t.ctx.Err() != nil || t.ending == nil {
			t.info.status = StatusClientClosed
		}
		return
	}
	e := t.ending
	e.Usage = &t.usage
	t.info.in, t.info.out = t.usage.Input, t.usage.Output
	if t.route != nil {
		t.info.route = t.route.Get(HeaderRoute)
	}
	if t.stream {
		if !t.commit(nil) || !t.preamble("") {
			return
		}
		t.emitEnd()
		return
	}
	resp := t.response(e)
	h := t.w.Header()
	t.routeHeaders()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(resp)))
	t.w.WriteHeader(http.StatusOK)
	t.w.Write(resp)
}

// response is the response object as it ends with e, kept for the
// store (store true) as it is returned.
func (t *turn) response(e *responses.Ending) []byte {
	out := make([]json.RawMessage, 0, len(t.output))
	for _, it := range t.output {
		if it != nil {
			out = append(out, t.clientItem(it))
		}
	}
	if t.st == nil {
		return t.meta.AppendResponse(make([]byte, 0, 2048), out, e, nil)
	}
	t.st.body = t.meta.AppendResponse(make([]byte, 0, 2048), out, e, &t.st.output)
	return t.st.body
}

// clientItem is item as the client gets it: a reasoning item's
// encrypted_content only when the request asked for it (the model calls
// always ask for it, to send Anthropic's signed thinking back).
func (t *turn) clientItem(item json.RawMessage) json.RawMessage {
	if t.meta.Encrypted() || !bytes.Contains(item, []byte(`"encrypted_content"`)) {
		return item
	}
	var h struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(item, &h) != nil || h.Type != "reasoning" {
		return item
	}
	b, err := api.SetMembers(item, map[string]json.RawMessage{"encrypted_content": nil})
	if err != nil {
		return item
	}
	return b
}

// routeHeaders sets the client's X-Streamgate-Route and -Attempts: the
// first model call's.
func (t *turn) routeHeaders() {
	if t.route == nil {
		return
	}
	for _, k := range []string{HeaderRoute, HeaderAttempts, HeaderDroppedTools} {
		if v := t.route.Get(k); v != "" {
			t.w.Header().Set(k, v)
		}
	}
}

// mcpTools refuses the mcp tools of a request the responses handler
// reads: those of a configured server were served by hostedResponses,
// but for a warm-up (which calls nothing); any other names a server the
// gateway does not have.
func (g *Gateway) mcpTools(rq *responses.Request) error {
	var configured []string
	if g.hosted != nil {
		configured = g.hosted.Servers()
	}
	_, servers, err := readServers(rq.Tools, configured)
	if err != nil {
		return err
	}
	if len(servers) > 0 && !rq.Warmup {
		return invalid("tools", "mcp tools are run by the gateway for POST /v1/responses only")
	}
	return nil
}
