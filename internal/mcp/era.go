package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// Protocol versions. The legacy ones are those of the initialize handshake;
// a session remembers its version as an index into legacyVersions.
const (
	versionModern = "2026-07-28"
	versionLegacy = "2025-11-25" // the latest legacy version: offered to clients asking for another
)

var (
	legacyVersions    = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	modernVersions    = []string{versionModern}
	supportedVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
)

// Reserved _meta keys of the 2026-07-28 revision.
const (
	metaVersion      = "io.modelcontextprotocol/protocolVersion"
	metaCaps         = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo   = "io.modelcontextprotocol/serverInfo"
	metaSubscription = "io.modelcontextprotocol/subscriptionId"
)

// exchange is one POST on its way: its message, its era, its session.
type exchange struct {
	g      *Gateway
	r      *http.Request
	c      *Caller
	o      *out
	msg    *jsonrpc.Message
	params object
	meta   object
	modern bool
	// version is the request's protocol version: the session's (legacy) or
	// the request's own (modern).
	version string
	sess    Session
	sid     string
}

// rpcErr is a JSON-RPC error answered as a response (HTTP 200).
func rpcErr(code int, format string, args ...any) *rpcError {
	return errorf(http.StatusOK, code, format, args...)
}

func (g *Gateway) post(w http.ResponseWriter, r *http.Request, c *Caller) {
	o := newOut(w, r)
	body, err := g.readBody(w, r)
	if err != nil {
		o.fail(nil, bodyError(err))
		return
	}
	msg, err := decodeMessage(body, g.maxBody)
	if err != nil {
		o.fail(nil, err)
		return
	}
	ex := &exchange{g: g, r: r, c: c, o: o, msg: msg}
	if err := ex.classify(); err != nil {
		o.fail(msg.ID, err)
		return
	}
	ex.serve()
}

// classify tells the request's era (STYLE 24: per request, on one URL) and
// checks what that era asks of it: an initialize or a session id for
// 2025-11-25; the version, the _meta and the Mcp-Method/Mcp-Name headers
// matching the body for 2026-07-28.
func (ex *exchange) classify() error {
	r, msg := ex.r, ex.msg
	params, err := parseObject(msg.Params)
	if err != nil {
		return errorf(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params: %v", err)
	}
	ex.params = params
	if m := params.get("_meta"); m != nil {
		if ex.meta, err = parseObject(m); err != nil {
			return errorf(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params._meta: %v", err)
		}
	}
	hv := r.Header.Get("MCP-Protocol-Version")
	mv := ex.meta.str(metaVersion)
	switch {
	case msg.Method == "initialize":
		return nil
	case mv != "" || hv != "" && !slices.Contains(legacyVersions, hv) && r.Header.Get("Mcp-Session-Id") == "":
		ex.modern = true
		return ex.checkModern(hv, mv)
	}
	return ex.openSession(hv)
}

func (ex *exchange) checkModern(hv, mv string) error {
	msg, r := ex.msg, ex.r
	if msg.IsResponse() {
		return errorf(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "a client sends no JSON-RPC responses in MCP %s (server requests come as input_required results)", versionModern)
	}
	if msg.IsNotification() {
		return nil
	}
	switch {
	case hv == "":
		return errorf(http.StatusBadRequest, CodeHeaderMismatch, "Header mismatch: the MCP-Protocol-Version header is required")
	case mv == "":
		return errorf(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params._meta[%q] is required", metaVersion)
	case hv != mv:
		return errorf(http.StatusBadRequest, CodeHeaderMismatch, "Header mismatch: MCP-Protocol-Version header value %q does not match body value %q", hv, mv)
	case !slices.Contains(modernVersions, mv):
		e := errorf(http.StatusBadRequest, CodeUnsupportedProtocolVersion, "Unsupported protocol version %q", mv)
		e.err.Data, _ = json.Marshal(map[string]any{"supported": supportedVersions, "requested": mv})
		return e
	case ex.meta.get(metaCaps) == nil:
		return errorf(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params._meta[%q] is required", metaCaps)
	}
	ex.version = mv
	if err := matchHeader(r, "Mcp-Method", msg.Method, false); err != nil {
		return err
	}
	switch msg.Method {
	case "tools/call", "prompts/get":
		return matchHeader(r, "Mcp-Name", ex.params.str("name"), true)
	case "resources/read":
		return matchHeader(r, "Mcp-Name", ex.params.str("uri"), true)
	}
	return nil
}

// matchHeader checks that the header name is there once and says body
// (decoding the "=?base64?…?=" form where encoded allows it).
func matchHeader(r *http.Request, name, body string, encoded bool) error {
	vs := r.Header.Values(name)
	if len(vs) == 0 {
		return errorf(http.StatusBadRequest, CodeHeaderMismatch, "Header mismatch: the %s header is required", name)
	}
	if len(vs) > 1 {
		return errorf(http.StatusBadRequest, CodeHeaderMismatch, "Header mismatch: the %s header is sent %d times", name, len(vs))
	}
	v := vs[0]
	if encoded && strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") && len(v) >= len("=?base64??=") {
		b, err := base64.StdEncoding.DecodeString(v[len("=?base64?") : len(v)-2])
		if err != nil {
			return errorf(http.StatusBadRequest, CodeHeaderMismatch, "Header mismatch: the %s header's base64 value is malformed", name)
		}
		v = string(b)
	}
	if v != body {
		return errorf(http.StatusBadRequest, CodeHeaderMismatch, "Header mismatch: %s header value %q does not match body value %q", name, v, body)
	}
	return nil
}

// openSession opens the request's Mcp-Session-Id for its key and route.
func (ex *exchange) openSession(hv string) error {
	s, sid, err := ex.g.session(ex.r, ex.c)
	if err != nil {
		return err
	}
	// A version the gateway does not speak is refused (2025-11-25: "invalid
	// or unsupported"); another supported one is taken, as the SDKs' servers
	// take it (the conformance suite sends 2025-03-26 in a 2025-11-25
	// session): the session's own version stays the one in force.
	if hv != "" && !slices.Contains(legacyVersions, hv) {
		return errorf(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "MCP-Protocol-Version %q is not supported in a session (supported: %s)", hv, strings.Join(legacyVersions, ", "))
	}
	ex.sess, ex.sid, ex.version = s, sid, legacyVersions[s.Version]
	return nil
}

// session opens r's session: 400 without an id, 404 for one that does not
// open here for this key and route, has expired or was ended.
func (g *Gateway) session(r *http.Request, c *Caller) (Session, string, error) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return Session{}, "", errorf(http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"no Mcp-Session-Id: initialize a session first (MCP %s), or send the MCP-Protocol-Version header and params._meta of MCP %s", versionLegacy, versionModern)
	}
	s, err := g.sealer.Open(sid, &c.bind, time.Now())
	switch {
	case errors.Is(err, ErrSessionExpired):
		return Session{}, "", errorf(http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session expired: initialize a new one")
	case err != nil || int(s.Version) >= len(legacyVersions):
		return Session{}, "", errorf(http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found (a session is valid only with the key and on the URL it was initialized with)")
	case g.ended.has(s.ID):
		return Session{}, "", errorf(http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session ended: initialize a new one")
	}
	return s, sid, nil
}

func (ex *exchange) serve() {
	m := ex.msg
	switch {
	case m.IsResponse():
		ex.answer()
		return
	case m.IsNotification():
		ex.notification()
		return
	}
	switch m.Method {
	case "initialize":
		ex.initialize()
	case "ping":
		ex.o.reply(result(m.ID, struct{}{}))
	case "server/discover":
		if !ex.modern {
			ex.methodNotFound()
			return
		}
		ex.discover()
	case "tools/list":
		ex.list(&kindTools)
	case "prompts/list":
		ex.list(&kindPrompts)
	case "resources/list":
		ex.list(&kindResources)
	case "resources/templates/list":
		ex.list(&kindTemplates)
	case "tools/call":
		ex.callTool()
	case "prompts/get":
		ex.forwardNamed()
	case "resources/read":
		ex.forwardURI()
	case "resources/subscribe", "resources/unsubscribe":
		if ex.modern {
			ex.methodNotFound()
			return
		}
		ex.forwardURI()
	case "completion/complete":
		ex.complete()
	case "logging/setLevel":
		ex.setLevel()
	case "subscriptions/listen":
		if !ex.modern {
			ex.methodNotFound()
			return
		}
		ex.g.listenStream(ex)
	default:
		if ex.c.bind.Route != "" { // one server: whatever it serves (extensions' methods too)
			ex.forward(ex.g.servers.Load().get(ex.c.bind.Route), ex.params, nil)
			return
		}
		ex.methodNotFound()
	}
}

func (ex *exchange) methodNotFound() {
	status := http.StatusOK
	if ex.modern {
		status = http.StatusNotFound // 2026-07-28: 404 tells an unknown method from a legacy server
	}
	ex.o.fail(ex.msg.ID, errorf(status, jsonrpc.CodeMethodNotFound, "method %q not found", ex.msg.Method))
}

// notification: a client's notification is taken (202); notifications/
// cancelled ends the request it names if it runs on this replica (closing
// the request's stream ends it on any: at once, or, for a resumable
// stream, when nobody resumed it within the grace period).
func (ex *exchange) notification() {
	if ex.msg.Method == "notifications/cancelled" && ex.sid != "" {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(ex.msg.Params, &p) == nil && p.RequestID != nil {
			if cancel, ok := ex.g.inflight.Load(inflightKey(ex.sess.ID, p.RequestID)); ok {
				cancel.(context.CancelFunc)()
			}
		}
	}
	ex.o.accepted()
}

func inflightKey(sid [12]byte, id json.RawMessage) string { return string(sid[:]) + string(id) }

// answer: a client's response to a server→client request, its id the
// sealed reference the gateway gave it; delivered to the server that asked.
func (ex *exchange) answer() {
	var id string
	if json.Unmarshal(ex.msg.ID, &id) != nil {
		ex.o.fail(nil, errorf(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "a response must answer a request of this gateway: its id is not one"))
		return
	}
	ref, err := ex.g.sealer.OpenReference(id, &ex.c.bind, time.Now())
	if err != nil {
		ex.o.fail(nil, errorf(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "a response must answer a request of this gateway: %v", err))
		return
	}
	e := ex.g.servers.Load().get(ref.Server)
	if e == nil {
		ex.o.fail(nil, errorf(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "the server %q that asked is no longer configured", ref.Server))
		return
	}
	if err := e.Server.Reply(ex.r.Context(), ref.ReplyTo, ex.msg); err != nil {
		ex.g.log.Warn("mcp reply to server failed", slog.String("server", ref.Server), slog.String("error", err.Error()))
		ex.o.fail(nil, errorf(http.StatusBadGateway, jsonrpc.CodeInternalError, "server %q did not take the response: %v", ref.Server, err))
		return
	}
	ex.o.accepted()
}

// capsOf reads a client's capabilities.
func capsOf(raw json.RawMessage) Caps {
	var c struct {
		Roots *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"roots"`
		Sampling *struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"sampling"`
		Elicitation *struct {
			Form json.RawMessage `json:"form"`
			URL  json.RawMessage `json:"url"`
		} `json:"elicitation"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return 0
	}
	var out Caps
	if c.Roots != nil {
		out |= CapRoots
		if c.Roots.ListChanged {
			out |= CapRootsListChanged
		}
	}
	if c.Sampling != nil {
		out |= CapSampling
		if c.Sampling.Tools != nil {
			out |= CapSamplingTools
		}
	}
	if e := c.Elicitation; e != nil {
		if e.Form != nil || e.URL == nil { // {} means form (2025-06-18)
			out |= CapElicitationForm
		}
		if e.URL != nil {
			out |= CapElicitationURL
		}
	}
	return out
}

// gatewayCaps are /mcp's capabilities: whatever its servers serve, it can.
var gatewayCaps = json.RawMessage(`{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{}}`)

func (ex *exchange) initialize() {
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	json.Unmarshal(ex.msg.Params, &p)
	vi := slices.Index(legacyVersions, p.ProtocolVersion)
	if vi < 0 {
		vi = slices.Index(legacyVersions, versionLegacy)
	}
	version := legacyVersions[vi]
	res, err := ex.selfInfo(version, false)
	if err != nil {
		ex.o.fail(ex.msg.ID, err)
		return
	}
	s := Session{Version: uint8(vi), Caps: capsOf(p.Capabilities), Expires: time.Now().Add(ex.g.ttl)}
	ex.o.header = http.Header{"Mcp-Session-Id": {ex.g.sealer.Seal(&s, &ex.c.bind)}}
	ex.o.reply(result(ex.msg.ID, res))
}

func (ex *exchange) discover() { // 2026-07-28
	res, err := ex.selfInfo("", true)
	if err != nil {
		ex.o.fail(ex.msg.ID, err)
		return
	}
	ex.o.reply(result(ex.msg.ID, res))
}

// selfInfo is the initialize result (version set) or the server/discover
// result (modern) of the request's route: the gateway's own for /mcp (its
// servers' instructions under their names), the server's for /mcp/{server}.
func (ex *exchange) selfInfo(version string, modern bool) (object, error) {
	g := ex.g
	var caps, serverInfo json.RawMessage
	var instr string
	if route := ex.c.bind.Route; route != "" {
		e := g.servers.Load().get(route)
		ctx, cancel := context.WithTimeout(ex.r.Context(), g.listTO)
		info, err := e.Server.Info(ctx)
		cancel()
		if err != nil {
			e.setHealth(err)
			return nil, rpcErr(jsonrpc.CodeInternalError, "MCP server %q is unavailable: %v", route, err)
		}
		o, _ := parseObject(info.Result)
		caps, instr = o.get("capabilities"), o.str("instructions")
		if serverInfo = o.get("serverInfo"); serverInfo == nil {
			if m, _ := parseObject(o.get("_meta")); m != nil {
				serverInfo = m.get(metaServerInfo)
			}
		}
		if caps == nil {
			caps = json.RawMessage("{}")
		}
	} else {
		caps = gatewayCaps
		serverInfo, _ = json.Marshal(map[string]string{"name": "streamgate", "title": "streamgate MCP gateway", "version": g.version})
		instr = g.instructions(ex.r.Context(), g.usable(ex.c))
	}
	if serverInfo == nil {
		serverInfo, _ = json.Marshal(map[string]string{"name": ex.c.bind.Route, "version": ""})
	}
	var res object
	if modern {
		res.setString("resultType", "complete")
		sv, _ := json.Marshal(supportedVersions)
		res.set("supportedVersions", sv)
		res.set("capabilities", caps)
		meta := object{{metaServerInfo, serverInfo}}
		res.set("_meta", meta.raw())
	} else {
		res.setString("protocolVersion", version)
		res.set("capabilities", caps)
		res.set("serverInfo", serverInfo)
	}
	if instr != "" {
		res.setString("instructions", instr)
	}
	if modern {
		res.set("ttlMs", json.RawMessage("0"))
		res.setString("cacheScope", "private")
	}
	return res, nil
}

// instructions are the servers' instructions, each under its name, as far
// as they are known within a second or two (each server's once learnt).
func (g *Gateway) instructions(ctx context.Context, es []*entry) string {
	ctx, cancel := context.WithTimeout(ctx, min(g.listTO, 2*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for _, e := range es {
		if e.instr.Load() != nil {
			continue
		}
		wg.Go(func() {
			info, err := e.Server.Info(ctx)
			if err != nil {
				return
			}
			o, _ := parseObject(info.Result)
			s := o.str("instructions")
			e.instr.Store(&s)
		})
	}
	wg.Wait()
	var b strings.Builder
	for _, e := range es {
		if s := e.instr.Load(); s != nil && *s != "" {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString("## MCP server " + e.Name + " (its tools are named " + e.Name + Sep + "…)\n")
			b.WriteString(*s)
		}
	}
	return b.String()
}
