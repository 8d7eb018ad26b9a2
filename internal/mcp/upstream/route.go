package upstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// replyTo is what Event.ReplyTo carries, so that the answer to a
// server→client request reaches the server from any replica: for an HTTP
// server the session and protocol version (or a legacy server's endpoint)
// and the server's request id; for a stdio server the process instance,
// which no other replica (or later process) has.
type replyTo struct {
	Kind     string          `json:"t"`           // "h" Streamable HTTP, "l" legacy HTTP+SSE, "p" stdio process
	Session  string          `json:"s,omitempty"` // Mcp-Session-Id
	Version  string          `json:"v,omitempty"` // MCP-Protocol-Version
	Endpoint string          `json:"e,omitempty"` // legacy: the POST endpoint, path and query
	Instance string          `json:"n,omitempty"` // stdio: the Server instance and process generation
	Call     int64           `json:"c,omitempty"` // the call the request was about, 0 for none
	ID       json.RawMessage `json:"i"`           // the server's request id
}

func (r *replyTo) encode() string {
	b, _ := json.Marshal(r)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *core) decodeReplyTo(s string) (*replyTo, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var r replyTo
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil || r.ID == nil || r.Kind == "" {
		return nil, c.errorf("reply-to %q is not one this gateway made", clipString(s, 40))
	}
	return &r, nil
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// replyMessage is resp as the server gets it: the server's id, no method.
func replyMessage(r *replyTo, resp *jsonrpc.Message) ([]byte, error) {
	out := jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: r.ID, Result: resp.Result, Error: resp.Error}
	if out.Result == nil && out.Error == nil {
		out.Result = json.RawMessage(`{}`)
	}
	return json.Marshal(&out)
}

// touchCall restarts the idle timer of the call a replied request was
// about, when it is in flight here.
func (c *core) touchCall(r *replyTo) {
	if r.Call != 0 {
		if cl := c.call(r.Call); cl != nil {
			cl.touch()
		}
	}
}

// route passes a message from a stream that is not a call's own (stdio,
// a legacy server's stream, the GET stream) to the call it is about, or to
// the listeners. mint makes the ReplyTo of a server request about call
// (nil for none). shared marks a stream that carries calls' messages too
// (stdio, legacy): a log message or server request there, which names no
// call, is taken to be about the one call in flight, if there is exactly
// one.
func (c *core) route(m *jsonrpc.Message, shared bool, mint func(m *jsonrpc.Message, about *call) string) {
	if m.IsResponse() {
		if id, ok := idOf(m.ID); ok {
			if cl := c.call(id); cl != nil {
				cl.deliver(Event{Msg: m})
				return
			}
		}
		c.log.Debug("mcp upstream: a response to no call in flight", "id", string(m.ID))
		return
	}
	if m.IsRequest() && m.Method == "ping" {
		c.answerPing(m, mint(m, nil))
		return
	}
	switch {
	case m.Method == "notifications/progress":
		if tok, ok := tokenOf(m.Params); ok {
			if cl := c.call(tok); cl != nil {
				cl.deliver(Event{Msg: m})
				return
			}
		}
		return // about a call that has ended
	case m.IsNotification():
		if id, ok := subscriptionOf(m.Params); ok {
			if cl := c.call(id); cl != nil {
				cl.deliver(Event{Msg: m})
				return
			}
		}
	}
	if shared && (m.IsRequest() || m.Method == "notifications/message" || m.Method == "notifications/cancelled") {
		if cl := c.only(); cl != nil {
			ev := Event{Msg: m}
			if m.IsRequest() {
				ev.ReplyTo = mint(m, cl)
			}
			cl.deliver(ev)
			return
		}
	}
	ev := Event{Msg: m}
	if m.IsRequest() {
		ev.ReplyTo = mint(m, nil)
	}
	if c.hasListeners() {
		c.broadcast(ev)
	} else if ev.ReplyTo != "" {
		c.wg.Go(func() { c.refuse(ev, "no client of the gateway is listening for this server's requests") })
	}
}

// answerPing answers a server's ping: the gateway is there.
func (c *core) answerPing(m *jsonrpc.Message, replyTo string) {
	c.wg.Go(func() {
		ctx, cancel := context.WithTimeout(c.base, 10*time.Second)
		defer cancel()
		if err := c.reply(ctx, replyTo, &jsonrpc.Message{Result: json.RawMessage(`{}`)}); err != nil {
			c.log.Debug("mcp upstream: answering ping failed", "err", err)
		}
	})
}

// subscriptionOf reads the subscription id (a 2026-07-28 subscriptions/listen
// request's id, one of the Server's own) a notification carries in _meta.
func subscriptionOf(params json.RawMessage) (int64, bool) {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return 0, false
	}
	raw, ok := p.Meta[metaSubscriptionID]
	if !ok {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	return 0, false
}
