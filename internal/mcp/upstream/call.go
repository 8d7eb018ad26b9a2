package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// The _meta keys of 2026-07-28 requests and notifications.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
)

// errGone is wrapped by the error of a call whose transport failed (a
// process that died, a stream that broke for good): nothing is left to
// cancel upstream.
var errGone = errors.New("connection to the server lost")

// call is one Call in flight.
type call struct {
	core     *core
	id       int64 // the server's id for it
	method   string
	callerID json.RawMessage
	token    json.RawMessage // the caller's progress token; nil: progress is not passed on
	on       func(Event)
	inbox    chan Event // every message about the call, its response last
	parent   context.Context
	ctx      context.Context // ends with parent, the idle timer, a failure or Close
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	gen      int64 // the stdio process or legacy stream it was sent on
	long     bool  // a subscription: no idle timeout
	answered atomic.Bool
}

// newCall registers a call for req. The caller must call done.
func (c *core) newCall(ctx context.Context, req *jsonrpc.Message, on func(Event)) (*call, error) {
	return c.register(ctx, req, on, false)
}

// newSubscription registers a long-lived call (subscriptions/listen) that
// has no idle timeout.
func (c *core) newSubscription(ctx context.Context, on func(Event)) (*call, error) {
	return c.register(ctx, &jsonrpc.Message{ID: json.RawMessage(`0`), Method: "subscriptions/listen"}, on, true)
}

func (c *core) register(ctx context.Context, req *jsonrpc.Message, on func(Event), long bool) (*call, error) {
	if !req.IsRequest() {
		return nil, c.errorf("Call takes a request (method and id), got %s", describe(req))
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	cl := &call{core: c, id: c.nextID.Add(1), method: req.Method, callerID: req.ID, on: on,
		inbox: make(chan Event, 16), parent: ctx, long: long}
	cl.ctx, cl.cancel = context.WithCancelCause(ctx)
	if !long {
		idle := c.errorf("%s: no message about the call for %v: %w", req.Method, c.timeout, ErrTimeout)
		cl.timer = time.AfterFunc(c.timeout, func() { cl.cancel(idle) })
	}
	c.mu.Lock()
	c.calls[cl.id] = cl
	c.mu.Unlock()
	if c.isClosed() { // Close ran between the check and the registration
		cl.cancel(ErrClosed)
	}
	return cl, nil
}

func describe(m *jsonrpc.Message) string {
	switch {
	case m.IsNotification():
		return "a notification (" + m.Method + ")"
	case m.IsResponse():
		return "a response"
	}
	return "a message that is neither"
}

// done unregisters the call and stops its timer.
func (cl *call) done() {
	if cl.timer != nil {
		cl.timer.Stop()
	}
	cl.core.mu.Lock()
	delete(cl.core.calls, cl.id)
	cl.core.mu.Unlock()
	cl.cancel(context.Canceled)
}

// setGen records the link the call is sent on (read by failAll).
func (cl *call) setGen(gen int64) {
	cl.core.mu.Lock()
	cl.gen = gen
	cl.core.mu.Unlock()
}

// touch restarts the idle timer: a message about the call arrived.
func (cl *call) touch() {
	if !cl.long {
		cl.timer.Reset(cl.core.timeout)
	}
}

// deliver queues a message about the call; it blocks while the caller's on
// is busy (a shared stream waits for it), and drops the message once the
// call has ended.
func (cl *call) deliver(ev Event) {
	cl.touch()
	select {
	case cl.inbox <- ev:
	case <-cl.ctx.Done():
	}
}

// wait passes the call's messages to on until its response, and returns
// the response with the caller's id.
func (cl *call) wait() (*jsonrpc.Message, error) {
	for {
		select {
		case ev := <-cl.inbox:
			if resp := cl.handle(ev); resp != nil {
				return resp, nil
			}
		case <-cl.ctx.Done():
			// A response that arrived with the end still counts.
			for {
				select {
				case ev := <-cl.inbox:
					if resp := cl.handle(ev); resp != nil {
						return resp, nil
					}
					continue
				default:
				}
				return nil, cl.err()
			}
		}
	}
}

// err is why the call ended without a response: the caller's ctx.Err(),
// or the cause (idle timeout, size cap, transport failure, Close).
func (cl *call) err() error {
	if err := cl.parent.Err(); err != nil {
		return err
	}
	return context.Cause(cl.ctx)
}

// cancelsUpstream reports whether a call that ended with err should be
// cancelled upstream: the server still works on it.
func cancelsUpstream(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrTimeout) || errors.Is(err, ErrTooLarge)
}

// handle passes one message to on and returns the response when it is one.
func (cl *call) handle(ev Event) *jsonrpc.Message {
	m := ev.Msg
	if m.IsResponse() {
		m.ID = cl.callerID
		return m
	}
	if m.Method == "notifications/progress" {
		if cl.token == nil {
			return nil // a token of the Server's own: it only kept the call awake
		}
		m.Params = setMember(m.Params, "progressToken", cl.token)
	}
	if cl.on != nil {
		cl.on(ev)
	} else if ev.ReplyTo != "" {
		cl.core.refuse(ev, "the gateway's caller takes no requests from the server")
	}
	return nil
}

// refuse answers a server→client request nobody can take with an error.
func (c *core) refuse(ev Event, why string) {
	if c.reply == nil || ev.ReplyTo == "" {
		return
	}
	resp := &jsonrpc.Message{JSONRPC: jsonrpc.Version, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: why}}
	ctx, cancel := context.WithTimeout(c.base, 10*time.Second)
	defer cancel()
	if err := c.reply(ctx, ev.ReplyTo, resp); err != nil {
		c.log.Warn("mcp upstream: refusing a server request failed", "method", ev.Msg.Method, "err", err)
	}
}

// setMember returns the object obj with member key set to val (obj
// unchanged when it is not an object).
func setMember(obj json.RawMessage, key string, val json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if len(obj) > 0 && json.Unmarshal(obj, &m) != nil {
		return obj
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m[key] = val
	out, err := json.Marshal(m)
	if err != nil {
		return obj
	}
	return out
}

// encode returns the request as the server gets it: the Server's own id,
// the progress token replaced by the call's id (added for tools/call, so
// that progress keeps a long tool awake), and in the 2026-07-28 era the
// _meta every request carries (the protocol version always the Server's;
// client info and capabilities the caller's when it sent them).
func (cl *call) encode(req *jsonrpc.Message, version string) ([]byte, error) {
	params, err := cl.params(req.Params, req.Method == "tools/call", version)
	if err != nil {
		return nil, err
	}
	return json.Marshal(&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: strconv.AppendInt(nil, cl.id, 10), Method: req.Method, Params: params})
}

func (cl *call) params(params json.RawMessage, wantToken bool, version string) (json.RawMessage, error) {
	modern := version >= Version2026
	if len(params) > 0 && params[0] != '{' {
		return params, nil // by position: nowhere to put _meta
	}
	var obj, meta map[string]json.RawMessage
	if len(params) > 0 {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, cl.core.errorf("%s: params: %v", cl.method, err)
		}
	}
	if raw, ok := obj["_meta"]; ok && len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, cl.core.errorf("%s: params._meta: %v", cl.method, err)
		}
	}
	if tok, ok := meta["progressToken"]; ok && string(tok) != "null" {
		cl.token = tok
		wantToken = true
	}
	if !wantToken && !modern {
		return params, nil
	}
	if obj == nil {
		obj = map[string]json.RawMessage{}
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	if wantToken {
		meta["progressToken"] = strconv.AppendInt(nil, cl.id, 10)
	}
	if modern {
		cl.core.modernMeta(meta, version)
	}
	var err error
	if obj["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// modernMeta sets the _meta members a 2026-07-28 request carries.
func (c *core) modernMeta(meta map[string]json.RawMessage, version string) {
	meta[metaProtocolVersion] = strconv.AppendQuote(nil, version)
	if _, ok := meta[metaClientInfo]; !ok {
		meta[metaClientInfo] = c.client
	}
	if _, ok := meta[metaClientCaps]; !ok {
		meta[metaClientCaps] = c.caps
	}
}

// request encodes a request of the Server's own (handshakes, listens).
func (c *core) request(id int64, method string, params any, version string) ([]byte, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	if version >= Version2026 {
		var obj, meta map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			obj = map[string]json.RawMessage{}
		}
		if m, ok := obj["_meta"]; ok {
			_ = json.Unmarshal(m, &meta)
		}
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		c.modernMeta(meta, version)
		obj["_meta"], _ = json.Marshal(meta)
		if raw, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	}
	return json.Marshal(&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: strconv.AppendInt(nil, id, 10), Method: method, Params: raw})
}

// notification encodes a notification of the Server's own.
func notification(method string, params any) []byte {
	raw, _ := json.Marshal(params)
	b, _ := json.Marshal(&jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: method, Params: raw})
	return b
}

// cancelled is the notifications/cancelled for the call.
func (cl *call) cancelled(err error) []byte {
	reason := "cancelled by the client"
	switch {
	case errors.Is(err, ErrTimeout):
		reason = "idle timeout"
	case errors.Is(err, ErrTooLarge):
		reason = "result too large"
	}
	return notification("notifications/cancelled", map[string]any{"requestId": cl.id, "reason": reason})
}

// idOf reads a message id that the Server minted (a number).
func idOf(raw json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// tokenOf reads the progress token of a notifications/progress.
func tokenOf(params json.RawMessage) (int64, bool) {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return 0, false
	}
	return idOf(p.Token)
}

// tooLarge is the error of a message over the cap.
func (c *core) tooLarge(what string) error {
	return fmt.Errorf("mcp server %q: %s over the %d-byte limit: %w", c.cfg.Name, what, c.max, ErrTooLarge)
}
