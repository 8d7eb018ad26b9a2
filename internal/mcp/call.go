package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/streamgate/streamgate/internal/mcp/upstream"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// Errors of a tool call the gateway refused (CallTool returns them wrapped).
var (
	ErrUnknownServer  = errors.New("no such MCP server")
	ErrUnknownTool    = errors.New("no such tool")
	ErrToolNotAllowed = errors.New("tool not allowed for this key")
	// ErrRefused wraps the Governor's refusal (a rate limit, a budget).
	ErrRefused = errors.New("tool call refused")
)

// callTool serves tools/call: the tool found by the name the route shows,
// then runTool; the server's answer is passed to the client as it came.
func (ex *exchange) callTool() {
	g, c := ex.g, ex.c
	name := ex.params.str("name")
	if name == "" {
		ex.o.fail(ex.msg.ID, rpcErr(jsonrpc.CodeInvalidParams, "tools/call needs params.name"))
		return
	}
	e, tool, err := g.findTool(ex.r.Context(), c, name)
	if err != nil {
		g.refusedCall(c, e, name, err)
		ex.o.fail(ex.msg.ID, rpcErr(jsonrpc.CodeInvalidParams, "%v", err))
		return
	}
	params := append(object(nil), ex.params...)
	params.setString("name", tool)
	ctx := ex.r.Context()
	if ex.sid != "" { // notifications/cancelled of this session may end it
		resumable := ex.version == versionLegacy && ex.o.canSSE
		if resumable { // its stream resumable: a broken one does not end it at once
			ctx = context.WithoutCancel(ctx)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		key := inflightKey(ex.sess.ID, ex.msg.ID)
		g.inflight.Store(key, cancel)
		defer func() { g.inflight.Delete(key); cancel() }()
		if resumable {
			stream := newStreamID()
			jr := &outJournal{ctx: ctx, j: g.journal, key: journalKey(ex.sess.ID, stream), stream: stream}
			ex.o.mu.Lock()
			ex.o.jr = jr
			ex.o.mu.Unlock()
			var (
				mu       sync.Mutex
				grace    *time.Timer
				finished bool
			)
			stop := context.AfterFunc(ex.r.Context(), func() {
				if g.onDrop != nil {
					defer g.onDrop()
				}
				if !ex.o.journaling() { // no event id was given: nothing to resume
					cancel()
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if finished {
					return
				}
				grace = time.AfterFunc(g.grace, func() {
					ctx, done := context.WithTimeout(g.ctx, 5*time.Second)
					defer done()
					if !g.journal.Resumed(ctx, jr.key) {
						cancel()
					}
				})
			})
			defer func() {
				stop()
				mu.Lock()
				finished = true
				if grace != nil {
					grace.Stop()
				}
				mu.Unlock()
			}()
		}
	}
	resp, err := g.runTool(ctx, c, e, tool, params, ex.msg.ID, ex.withLevel(ex.meta), ex.bridge(e))
	ex.respond(e, tool, resp, err)
}

// respond answers the client with a call's outcome.
func (ex *exchange) respond(e *entry, tool string, resp *jsonrpc.Message, err error) {
	id := ex.msg.ID
	switch {
	case err == nil:
		resp.ID = id
		ex.o.reply(resp)
	case errors.Is(err, ErrToolNotAllowed), errors.Is(err, ErrUnknownTool):
		ex.o.fail(id, rpcErr(jsonrpc.CodeInvalidParams, "%v", err))
	case errors.Is(err, ErrRefused):
		ex.o.fail(id, rpcErr(CodeRefused, "%v", err))
	case errors.Is(err, ErrTooLarge):
		ex.o.reply(result(id, map[string]any{"isError": true, "content": []map[string]string{{"type": "text", "text": tooLargeNotice(e.Name, tool, err)}}}))
	case errors.Is(err, ErrTimeout):
		ex.o.fail(id, rpcErr(CodeRequestTimeout, "MCP server %q timed out: %v", e.Name, err))
	case ex.r.Context().Err() != nil && !ex.o.journaling():
		// The client is gone and cannot resume: nothing to answer.
	case errors.Is(err, context.Canceled):
		ex.o.fail(id, rpcErr(CodeRequestTimeout, "request cancelled"))
	default:
		ex.o.fail(id, rpcErr(jsonrpc.CodeInternalError, "MCP server %q: %v", e.Name, err))
	}
}

func tooLargeNotice(server, tool string, err error) string {
	return fmt.Sprintf("The result of tool %q of MCP server %q was cut by the gateway: %v. Ask for less (a narrower query, a smaller page).", tool, server, err)
}

// findTool returns the server and the server's own tool name of a name
// the caller's route shows: on /mcp/{server} the name itself, on /mcp
// "server__tool" (or its shortened form, looked up in the server's list).
func (g *Gateway) findTool(ctx context.Context, c *Caller, name string) (*entry, string, error) {
	set := g.servers.Load()
	if route := c.bind.Route; route != "" {
		return set.get(route), name, nil
	}
	server, rest, ok := SplitName(name)
	e := set.get(server)
	if !ok || e == nil || !c.uses(server) {
		return nil, "", fmt.Errorf("%w %q: the tools of /mcp are named server%stool (see tools/list)", ErrUnknownTool, name, Sep)
	}
	if tool, ok := g.resolve(ctx, e, &kindTools, name); ok {
		return e, tool, nil
	}
	if PrefixedName(server, rest) == name { // not listed (yet): the server decides
		return e, rest, nil
	}
	return e, "", fmt.Errorf("%w %q on MCP server %q (see tools/list)", ErrUnknownTool, name, server)
}

// refusedCall books a call refused before its tool was known.
func (g *Gateway) refusedCall(c *Caller, e *entry, name string, err error) {
	if len(name) > 128 { // a client's name, unbounded: the ledger keeps its start
		name = name[:128]
	}
	call := ToolCall{Caller: c, Name: name, Start: time.Now(), Outcome: OutcomeRejected, Status: http.StatusNotFound, Err: err.Error()}
	if e != nil {
		call.Server = e.Name
	}
	g.book(&call, nil)
}

// runTool runs one tool call under c's allow-list, admission and ledger:
// refused (ErrToolNotAllowed, ErrRefused) or sent to the server with the
// client's progress token replaced by one of the gateway's and the call's
// trace context in _meta; every message about it goes to on (nil: dropped).
// It returns the server's response (its id as given) or why there is none.
func (g *Gateway) runTool(ctx context.Context, c *Caller, e *entry, tool string, params object, id json.RawMessage, meta object, on func(Event)) (*jsonrpc.Message, error) {
	call := ToolCall{Caller: c, Server: e.Name, Tool: tool, Name: PrefixedName(e.Name, tool), Start: time.Now()}
	if !c.allows(e.Name, tool) {
		err := fmt.Errorf("%w: key %q may not use tool %q (its mcp_tools)", ErrToolNotAllowed, c.Key, call.Name)
		call.Outcome, call.Status, call.Err = OutcomeRejected, http.StatusForbidden, err.Error()
		g.book(&call, nil)
		return nil, err
	}
	price := e.price(tool)
	settle, err := g.gov.Admit(ctx, c, e.Name, tool, price)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		call.Outcome, call.Status, call.Err = OutcomeRejected, http.StatusTooManyRequests, err.Error()
		g.book(&call, nil)
		return nil, err
	}
	var span trace.Span
	if g.tracer != nil {
		mc := metaCarrier(meta)
		parent := propagation.TraceContext{}.Extract(ctx, &mc)
		ctx, span = g.tracer.Start(parent, "tools/call "+call.Name,
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", tool),
				attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("streamgate.mcp.server", e.Name),
				attribute.String("streamgate.key", c.Key)))
	}
	// The _meta the server gets: the client's, with the gateway's progress
	// token (each upstream session carries the calls of many clients) and
	// the call's trace context.
	m := upstreamMeta(meta)
	var tok *progressToken
	if pt := m.get("progressToken"); pt != nil {
		tok = &progressToken{client: pt, ours: g.tokenPrefix + strconv.FormatUint(g.tokens.Add(1), 10)}
		m.setString("progressToken", tok.ours)
	}
	if span != nil {
		carrier := metaCarrier(m)
		propagation.TraceContext{}.Inject(ctx, &carrier)
		m = object(carrier)
	}
	if len(m) > 0 {
		params.set("_meta", m.raw())
	}
	if on == nil { // no client to ask: a server's question is refused at once
		on = func(ev Event) {
			if ev.ReplyTo != "" {
				g.refuse(e, ev, "the call has no client that could answer it")
			}
		}
	}
	req := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: "tools/call", Params: params.raw()}
	resp, err := e.Server.Call(ctx, req, tok.wrap(on))
	call.Price = price
	switch {
	case err == nil && resp.Error != nil:
		call.Outcome, call.Status, call.Err = OutcomeError, http.StatusBadGateway, resp.Error.Message
	case err == nil:
		call.Outcome, call.Status = OutcomeOK, http.StatusOK
		if isToolError(resp.Result) {
			call.Outcome, call.Err = OutcomeToolError, "the tool answered isError"
		}
		e.setHealth(nil)
	case errors.Is(err, ErrTooLarge):
		call.Outcome, call.Status, call.Err = OutcomeTooLarge, http.StatusOK, err.Error()
	case errors.Is(err, ErrTimeout):
		call.Outcome, call.Status, call.Err = OutcomeTimeout, http.StatusGatewayTimeout, err.Error()
	case ctx.Err() != nil:
		call.Outcome, call.Status, call.Err = OutcomeClientGone, 499, "client went away: "+err.Error()
	default:
		call.Outcome, call.Status, call.Err = OutcomeError, http.StatusBadGateway, err.Error()
		e.setHealth(err)
	}
	settle(price)
	if span != nil {
		span.SetAttributes(attribute.String("streamgate.mcp.outcome", call.Outcome))
		if call.Outcome != OutcomeOK {
			span.SetStatus(codes.Error, call.Err)
		}
		span.End()
	}
	g.book(&call, resp)
	return resp, err
}

// book ends a call: its ledger row, metrics and log line.
func (g *Gateway) book(call *ToolCall, _ *jsonrpc.Message) {
	call.Duration = time.Since(call.Start)
	g.gov.Record(*call)
	if g.m != nil && call.Server != "" {
		g.m.call(call.Server, g.toolLabel(call.Server, call.Tool), call.Outcome, call.Duration)
	}
	level := slog.LevelInfo
	if call.Outcome == OutcomeError || call.Outcome == OutcomeTimeout {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("request_id", call.Caller.RequestID), slog.String("key", call.Caller.Key), slog.String("server", call.Server),
		slog.String("tool", call.Name), slog.String("outcome", call.Outcome), slog.Int("status", call.Status),
		slog.Duration("duration", call.Duration), slog.Float64("price_usd", call.Price)}
	if call.Caller.Team != "" {
		attrs = append(attrs, slog.String("team", call.Caller.Team))
	}
	if call.Err != "" {
		attrs = append(attrs, slog.String("error", call.Err))
	}
	g.log.LogAttrs(context.Background(), level, "mcp tool call", attrs...)
}

// toolLabel is tool as a metric label: a tool the server listed, else "other".
func (g *Gateway) toolLabel(server, tool string) string {
	if e := g.servers.Load().get(server); e != nil {
		if t := e.tools.Load(); t != nil {
			if _, ok := t.byShown[PrefixedName(server, tool)]; ok {
				return tool
			}
		}
	}
	return "other"
}

func isToolError(res json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(res, &r) == nil && r.IsError
}

// metaCarrier reads and writes W3C trace context members of a _meta.
type metaCarrier object

func (m metaCarrier) Get(k string) string { return object(m).str(k) }
func (m *metaCarrier) Set(k, v string)    { (*object)(m).setString(k, v) }
func (m metaCarrier) Keys() []string {
	out := make([]string, len(m))
	for i, x := range m {
		out[i] = x.Key
	}
	return out
}

// progressToken is a call's progress token: the client's, and the
// gateway's that replaced it upstream.
type progressToken struct {
	client json.RawMessage
	ours   string
}

// wrap restores the client's token in the progress notifications on gets.
func (t *progressToken) wrap(on func(Event)) func(Event) {
	if t == nil {
		return on
	}
	return func(ev Event) {
		if m := ev.Msg; m != nil && m.Method == "notifications/progress" {
			if p, err := parseObject(m.Params); err == nil && p.str("progressToken") == t.ours {
				p.set("progressToken", t.client)
				c := *m
				c.Params = p.raw()
				ev.Msg = &c
			}
		}
		on(ev)
	}
}

// bridge passes the messages a server sends about the exchange's request
// to its client: notifications (resource URIs prefixed on /mcp), and
// server→client requests with their ids sealed references (serverRequest).
func (ex *exchange) bridge(e *entry) func(Event) {
	return func(ev Event) {
		m := ev.Msg
		if m == nil {
			return
		}
		if ev.ReplyTo != "" || m.ID != nil {
			ex.serverRequest(e, ev)
			return
		}
		if ex.c.bind.Route == "" {
			m = shownNotification(e.Name, m)
		}
		ex.o.event(m)
	}
}

// capFor is the client capability a server→client request needs (0: unknown method).
func capFor(m *jsonrpc.Message) Caps {
	switch m.Method {
	case "sampling/createMessage":
		return CapSampling
	case "roots/list":
		return CapRoots
	case "elicitation/create":
		var p struct {
			Mode string `json:"mode"`
		}
		json.Unmarshal(m.Params, &p)
		if p.Mode == "url" {
			return CapElicitationURL
		}
		return CapElicitationForm
	}
	return 0
}

// serverRequest passes a server's request (elicitation, sampling, roots)
// to a 2025-11-25 client that declared it can answer it, its id a sealed
// reference that any replica turns back into the server's (answer); any
// other client's answer is an error the gateway gives the server at once.
func (ex *exchange) serverRequest(e *entry, ev Event) {
	m, g := ev.Msg, ex.g
	need := capFor(m)
	why := ""
	switch {
	case ev.ReplyTo == "":
		return // nothing to answer
	case ex.modern:
		why = "the client speaks MCP " + versionModern + ", where a server asks through an input_required result"
	case need == 0 || !ex.sess.Caps.Has(need):
		why = "the client did not declare it can answer " + m.Method
	case !ex.o.canSSE:
		why = "the client takes no event stream"
	}
	if why == "" {
		ref, err := g.sealer.SealReference(&Reference{Server: e.Name, ReplyTo: ev.ReplyTo, Expires: time.Now().Add(g.ttl)}, &ex.c.bind)
		if err == nil {
			fwd := *m
			fwd.ID, _ = json.Marshal(ref)
			if ex.o.event(&fwd) {
				return
			}
			why = "the client's stream closed"
		} else {
			why = err.Error()
		}
	}
	g.refuse(e, ev, why)
}

// refuse answers a server's request with an error, off the server's goroutine.
func (g *Gateway) refuse(e *entry, ev Event, why string) {
	resp := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: ev.Msg.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: ev.Msg.Method + " cannot be answered: " + why}}
	g.reply(e, ev, resp)
}

func (g *Gateway) reply(e *entry, ev Event, resp *jsonrpc.Message) {
	g.wg.Go(func() {
		ctx, cancel := context.WithTimeout(g.ctx, 30*time.Second)
		defer cancel()
		if err := e.Server.Reply(ctx, ev.ReplyTo, resp); err != nil && g.ctx.Err() == nil {
			g.log.Warn("mcp reply to server failed", slog.String("server", e.Name), slog.String("method", ev.Msg.Method), slog.String("error", err.Error()))
		}
	})
}

// shownNotification is a server's notification as /mcp shows it: a
// resource's URI prefixed with the server's name.
func shownNotification(server string, m *jsonrpc.Message) *jsonrpc.Message {
	if m.Method != "notifications/resources/updated" {
		return m
	}
	p, err := parseObject(m.Params)
	if err != nil {
		return m
	}
	p.setString("uri", PrefixedURI(server, p.str("uri")))
	c := *m
	c.Params = p.raw()
	return &c
}

// metaLogLevel is the 2026-07-28 _meta member of a request's log level.
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// withLevel adds to meta the log level the exchange's 2025-11-25 session
// set (logging/setLevel) on this replica, for a 2026-07-28 server, which
// logs only for requests that carry one.
func (ex *exchange) withLevel(meta object) object {
	if ex.sid == "" || meta.get(metaLogLevel) != nil {
		return meta
	}
	if level, ok := ex.g.levels.get(ex.sess.ID); ok {
		meta = append(object(nil), meta...)
		meta.setString(metaLogLevel, level)
	}
	return meta
}

// upstreamMeta is the _meta of a client's request as its server gets it:
// without the client's protocol version, which describes the client's hop
// (the server's client, package upstream, declares its own era), with the
// rest as the client sent it (its capabilities, which a 2026-07-28 server
// reads to ask for input, its trace context, its progress token).
func upstreamMeta(meta object) object {
	m := append(object(nil), meta...)
	m.del(metaVersion)
	return m
}

// upstreamParams is a client's params with upstreamMeta.
func upstreamParams(params object) object {
	p := append(object(nil), params...)
	if raw := p.get("_meta"); raw != nil {
		if meta, err := parseObject(raw); err == nil {
			if meta = upstreamMeta(meta); len(meta) > 0 {
				p.set("_meta", meta.raw())
			} else {
				p.del("_meta")
			}
		}
	}
	return p
}

// forward passes the request to one server with params (rewritten by the
// caller), its messages bridged, and answers with the server's response,
// its result rewritten by fix (nil: as it came).
func (ex *exchange) forward(e *entry, params object, fix func(object) object) {
	req := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: ex.msg.ID, Method: ex.msg.Method}
	if ex.sid != "" {
		if meta := ex.withLevel(ex.meta); len(meta) > len(ex.meta) {
			params = append(object(nil), params...)
			params.set("_meta", meta.raw())
		}
	}
	if params = upstreamParams(params); params != nil {
		req.Params = params.raw()
	}
	resp, err := e.Server.Call(ex.r.Context(), req, ex.bridge(e))
	if err == nil && resp.Error == nil && fix != nil {
		if res, perr := parseObject(resp.Result); perr == nil {
			c := *resp
			c.Result = fix(res).raw()
			resp = &c
		}
	}
	if err != nil && !errors.Is(err, ErrTooLarge) {
		e.setHealth(err)
	}
	ex.respond(e, "", resp, err)
}

// serverOf returns the usable server of a name or URI a /mcp client gave.
func (ex *exchange) serverOf(server string) *entry {
	if !ex.c.uses(server) {
		return nil
	}
	return ex.g.servers.Load().get(server)
}

// forwardNamed serves prompts/get.
func (ex *exchange) forwardNamed() {
	if route := ex.c.bind.Route; route != "" {
		ex.forward(ex.g.servers.Load().get(route), ex.params, nil)
		return
	}
	name := ex.params.str("name")
	server, _, _ := SplitName(name)
	e := ex.serverOf(server)
	var raw string
	ok := false
	if e != nil {
		raw, ok = ex.g.resolve(ex.r.Context(), e, &kindPrompts, name)
	}
	if !ok {
		ex.o.fail(ex.msg.ID, rpcErr(jsonrpc.CodeInvalidParams, "no prompt %q: the prompts of /mcp are named server%sprompt (see prompts/list)", name, Sep))
		return
	}
	params := append(object(nil), ex.params...)
	params.setString("name", raw)
	ex.forward(e, params, nil)
}

// forwardURI serves resources/read, subscribe and unsubscribe: on /mcp the
// URI names its server (mcp://server/…).
func (ex *exchange) forwardURI() {
	if route := ex.c.bind.Route; route != "" {
		e := ex.g.servers.Load().get(route)
		if ex.subscribedHere(e) {
			return
		}
		ex.forward(e, ex.params, nil)
		return
	}
	uri := ex.params.str("uri")
	server, orig, ok := SplitURI(uri)
	var e *entry
	if ok {
		e = ex.serverOf(server)
	}
	if e == nil {
		ex.o.fail(ex.msg.ID, rpcErr(jsonrpc.CodeInvalidParams, "no resource %q: the resources of /mcp are named %sserver/… (see resources/list)", uri, uriScheme))
		return
	}
	if ex.subscribedHere(e) {
		return
	}
	params := append(object(nil), ex.params...)
	params.setString("uri", orig)
	ex.forward(e, params, func(res object) object {
		if ex.msg.Method != "resources/read" {
			return res
		}
		var contents []json.RawMessage
		if json.Unmarshal(res.get("contents"), &contents) != nil {
			return res
		}
		for i, c := range contents {
			if o, err := parseObject(c); err == nil && o.get("uri") != nil {
				o.setString("uri", PrefixedURI(server, o.str("uri")))
				contents[i] = o.raw()
			}
		}
		b, _ := json.Marshal(contents)
		res.set("contents", b)
		return res
	})
}

// subscribedHere answers a legacy client's resources/subscribe or
// unsubscribe itself when e speaks MCP 2026-07-28, which has no such
// methods (a client subscribes with subscriptions/listen there): the
// request is acknowledged, as a stateless 2025-11-25 server does, and the
// server's notifications/resources/updated still reach the session's
// stream through the gateway's own listener of e. It reports whether it
// answered.
func (ex *exchange) subscribedHere(e *entry) bool {
	if e == nil || (ex.msg.Method != "resources/subscribe" && ex.msg.Method != "resources/unsubscribe") {
		return false
	}
	ctx, cancel := context.WithTimeout(ex.r.Context(), ex.g.listTO)
	info, err := e.Server.Info(ctx)
	cancel()
	if err != nil || info.ProtocolVersion < upstream.Version2026 {
		return false // forwarded: the server answers (or its error is the client's)
	}
	ex.o.reply(result(ex.msg.ID, struct{}{}))
	return true
}

// complete serves completion/complete: its ref names a prompt or a resource.
func (ex *exchange) complete() {
	if route := ex.c.bind.Route; route != "" {
		ex.forward(ex.g.servers.Load().get(route), ex.params, nil)
		return
	}
	ref, err := parseObject(ex.params.get("ref"))
	var e *entry
	if err == nil {
		switch ref.str("type") {
		case "ref/prompt":
			name := ref.str("name")
			server, _, _ := SplitName(name)
			if e = ex.serverOf(server); e != nil {
				raw, ok := ex.g.resolve(ex.r.Context(), e, &kindPrompts, name)
				if !ok {
					e = nil
				}
				ref.setString("name", raw)
			}
		case "ref/resource":
			server, orig, ok := SplitURI(ref.str("uri"))
			if ok {
				if e = ex.serverOf(server); e != nil {
					ref.setString("uri", orig)
				}
			}
		}
	}
	if e == nil {
		ex.o.fail(ex.msg.ID, rpcErr(jsonrpc.CodeInvalidParams, "completion/complete: params.ref names no prompt or resource of /mcp"))
		return
	}
	params := append(object(nil), ex.params...)
	params.set("ref", ref.raw())
	ex.forward(e, params, nil)
}

// setLevel serves logging/setLevel: passed to the route's servers (their
// sessions are this replica's, shared by its clients: the last level set wins).
func (ex *exchange) setLevel() {
	if ex.sid != "" {
		// A 2026-07-28 server takes the level per request (_meta): kept for
		// the session's later requests on this replica (logLevel).
		var p struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(ex.msg.Params, &p) == nil && p.Level != "" {
			ex.g.levels.set(ex.sess.ID, p.Level, ex.sess.Expires)
		}
	}
	es := ex.g.usable(ex.c)
	for _, e := range es {
		req := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: json.RawMessage("1"), Method: ex.msg.Method, Params: ex.msg.Params}
		ctx, cancel := context.WithTimeout(ex.r.Context(), ex.g.listTO)
		if _, err := e.Server.Call(ctx, req, nil); err != nil {
			ex.g.log.Debug("mcp logging/setLevel not taken", slog.String("server", e.Name), slog.String("error", err.Error()))
		}
		cancel()
	}
	ex.o.reply(result(ex.msg.ID, struct{}{}))
}
