package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/responses"
	"github.com/streamgate/streamgate/internal/sse"
)

// The stream of a hosted-MCP turn: one Responses stream made of the turn's
// own events (response.created and .in_progress, the mcp_list_tools items,
// the tools' results, the terminal event with the whole output) and of its
// model calls' events, each numbered again (sequence_number) and moved to
// its place in the turn's output (output_index); a model's call of an MCP
// tool streams as an mcp_call item (response.mcp_call.in_progress,
// response.mcp_call_arguments.delta and .done, then, once run,
// response.mcp_call.completed or .failed and its output_item.done), or,
// when it needs approval, as an mcp_approval_request item sent whole.

// errClientGone is a client write that failed.
var errClientGone = errors.New("client went away")

// roundWriter is the http.ResponseWriter of one model call of a turn (a
// /v1/responses request the gateway makes to itself): a stream's events
// go to the turn as they are written and flushed to the client as the
// model call flushes them; a refusal, or a non-stream answer, is kept.
type roundWriter struct {
	t      *turn
	h      http.Header
	status int
	body   []byte          // a refusal's body, or a non-stream answer
	resp   json.RawMessage // a stream's terminal response object
	blocks sseBlocks
	join   []byte
	err    error
	// index maps the model call's output_index to the turn's; calls are
	// its calls of MCP tools, by its output_index.
	index map[int64]int
	calls map[int64]*hostedCall
}

func (w *roundWriter) Header() http.Header { return w.h }

func (w *roundWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 {
		return
	}
	w.status = code
	if code == http.StatusOK && w.t.stream && !w.t.commit(w.h) {
		w.err = errClientGone
	}
}

func (w *roundWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.status != http.StatusOK || !w.t.stream {
		w.body = append(w.body, p...)
		return len(p), nil
	}
	if w.err != nil {
		return 0, w.err
	}
	if err := w.blocks.feed(p, w.block); err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

// FlushError flushes what the model call's events made to the client.
func (w *roundWriter) FlushError() error {
	if w.err != nil {
		return w.err
	}
	if w.status != http.StatusOK || !w.t.stream {
		return nil
	}
	if err := w.t.sw.Flush(); err != nil {
		w.err = errClientGone
	}
	return w.err
}

// SetWriteDeadline bounds the client's writes, as the relay asks for its
// own (timeouts.client_write).
func (w *roundWriter) SetWriteDeadline(d time.Time) error {
	if !w.t.stream {
		return nil
	}
	return http.NewResponseController(w.t.w).SetWriteDeadline(d)
}

// block handles one SSE event block: a comment (a keep-alive goes on to
// the client) or an event's data.
func (w *roundWriter) block(b []byte) error {
	data, ok, keepAlive := eventData(b, &w.join)
	if keepAlive {
		if err := w.t.sw.Comment(keepAliveComment); err != nil {
			return errClientGone
		}
	}
	if !ok {
		return nil
	}
	return w.t.event(w, data)
}

var keepAliveComment = []byte("keep-alive")

// outIndex is the turn's output_index of the model call's in, given the
// next one when it has none yet.
func (w *roundWriter) outIndex(in int64) int {
	if i, ok := w.index[in]; ok {
		return i
	}
	i := w.t.newIndex()
	w.index[in] = i
	return i
}

// newIndex is the output_index of a new item of the turn.
func (t *turn) newIndex() int {
	t.output = append(t.output, nil)
	return len(t.output) - 1
}

// streamEvent is the members of a model call's event the turn reads.
type streamEvent struct {
	Type        string          `json:"type"`
	OutputIndex *int64          `json:"output_index"`
	Item        json.RawMessage `json:"item"`
	Response    json.RawMessage `json:"response"`
	Delta       json.RawMessage `json:"delta"`
	Arguments   *string         `json:"arguments"`
}

// event handles one event of the model call of w.
func (t *turn) event(w *roundWriter, data []byte) error {
	var ev streamEvent
	if json.Unmarshal(data, &ev) != nil {
		return nil // the relay checked it is JSON; nothing the client can read
	}
	if !t.preambled {
		var r struct {
			Model string `json:"model"`
		}
		if ev.Type == "response.created" {
			json.Unmarshal(ev.Response, &r)
		}
		if !t.preamble(r.Model) {
			return errClientGone
		}
	}
	switch ev.Type {
	case "response.created", "response.in_progress", "response.queued":
		return nil // the turn's own were sent
	case "response.completed", "response.incomplete", "response.failed":
		w.resp = append(json.RawMessage(nil), ev.Response...)
		return nil
	}
	if ev.OutputIndex == nil {
		return t.forward(ev.Type, data, -1, nil)
	}
	in := *ev.OutputIndex
	if ev.Type == "response.output_item.added" {
		if c := t.mcpCall(ev.Item); c != nil {
			w.calls[in] = c
			if c.fn.approval {
				return nil // sent whole when its arguments are known
			}
			c.index = w.outIndex(in)
			c.added = true
			return t.callBegins(c)
		}
	}
	if c := w.calls[in]; c != nil {
		return t.callEvent(w, in, c, &ev)
	}
	out := w.outIndex(in)
	var item json.RawMessage
	if ev.Type == "response.output_item.done" || ev.Type == "response.output_item.added" {
		item = ev.Item
	}
	return t.forward(ev.Type, data, out, item)
}

// mcpCall is the call of an MCP tool the item added begins; nil when it
// is another item.
func (t *turn) mcpCall(item json.RawMessage) *hostedCall {
	var h struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if json.Unmarshal(item, &h) != nil || h.Type != "function_call" {
		return nil
	}
	fn := t.funcs[h.Name]
	if fn == nil {
		return nil
	}
	return &hostedCall{fn: fn, id: mcpItemID(h.ID, fn.approval), index: -1}
}

// callEvent handles an event of the model's call c of an MCP tool (its
// output_index in): arguments stream as the mcp_call's; a call that
// needs approval is sent whole as its mcp_approval_request when done.
func (t *turn) callEvent(w *roundWriter, in int64, c *hostedCall, ev *streamEvent) error {
	switch ev.Type {
	case "response.function_call_arguments.delta":
		if c.fn.approval {
			return nil
		}
		var d string
		json.Unmarshal(ev.Delta, &d)
		return t.emit("response.mcp_call_arguments.delta", func(b []byte) []byte {
			b = t.ref(b, c)
			b = append(b, `,"delta":`...)
			return api.AppendString(b, d)
		})
	case "response.function_call_arguments.done":
		if ev.Arguments != nil {
			c.args = *ev.Arguments
		}
		if c.fn.approval {
			return nil
		}
		return t.emit("response.mcp_call_arguments.done", func(b []byte) []byte {
			b = t.ref(b, c)
			b = append(b, `,"arguments":`...)
			return api.AppendString(b, c.args)
		})
	case "response.output_item.done":
		var h struct {
			Arguments *string `json:"arguments"`
		}
		if json.Unmarshal(ev.Item, &h) == nil && h.Arguments != nil {
			c.args = *h.Arguments
		}
		if !c.fn.approval || c.added {
			return nil // an mcp_call ends once run
		}
		c.index = w.outIndex(in)
		c.added = true
		return t.emitWhole(c.index, t.approvalItem(c))
	}
	return nil
}

// forward sends a model call's event as the turn's: numbered again, at
// output_index out (-1: it has none), its item as the client gets it.
func (t *turn) forward(typ string, data []byte, out int, item json.RawMessage) error {
	set := map[string]json.RawMessage{"sequence_number": strconv.AppendInt(nil, t.seq, 10)}
	if out >= 0 {
		set["output_index"] = strconv.AppendInt(nil, int64(out), 10)
	}
	if item != nil {
		if ci := t.clientItem(item); len(ci) != len(item) {
			set["item"] = ci
		}
	}
	b, err := api.SetMembers(data, set)
	if err != nil {
		return nil
	}
	t.seq++
	if err := t.sw.Queue([]byte(typ), b); err != nil {
		return errClientGone
	}
	return nil
}

// emit queues an event of type typ of the turn's own: members appends
// its members after its type and sequence_number.
func (t *turn) emit(typ string, members func([]byte) []byte) error {
	b := responses.AppendEventHead(t.buf[:0], typ, t.seq)
	b = append(members(b), '}')
	t.buf = b
	t.seq++
	if err := t.sw.Queue([]byte(typ), b); err != nil {
		return errClientGone
	}
	return nil
}

// ref appends c's item_id and output_index members.
func (t *turn) ref(b []byte, c *hostedCall) []byte {
	b = append(b, `,"item_id":`...)
	b = api.AppendString(b, c.id)
	b = append(b, `,"output_index":`...)
	return strconv.AppendInt(b, int64(c.index), 10)
}

// emitItem queues an output_item.added or .done of item at index i.
func (t *turn) emitItem(typ string, i int, item json.RawMessage) error {
	return t.emit(typ, func(b []byte) []byte {
		b = append(b, `,"output_index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"item":`...)
		return append(b, item...)
	})
}

// emitWhole queues the added and done events of an item sent whole.
func (t *turn) emitWhole(i int, item json.RawMessage) error {
	if err := t.emitItem("response.output_item.added", i, item); err != nil {
		return err
	}
	return t.emitItem("response.output_item.done", i, item)
}

// callBegins queues the start of the mcp_call c: its item, in progress.
func (t *turn) callBegins(c *hostedCall) error {
	if err := t.emitItem("response.output_item.added", c.index, t.callItem(c, "in_progress")); err != nil {
		return err
	}
	return t.emit("response.mcp_call.in_progress", func(b []byte) []byte { return t.ref(b, c) })
}

// callStarted sends the whole start of a call the gateway makes itself
// (an approved one): its item, its arguments. False: the client left.
func (t *turn) callStarted(c *hostedCall) bool {
	if !t.stream {
		return true
	}
	c.added = true
	err := t.callBegins(c)
	if err == nil {
		err = t.emit("response.mcp_call_arguments.delta", func(b []byte) []byte {
			b = t.ref(b, c)
			b = append(b, `,"delta":`...)
			return api.AppendString(b, c.args)
		})
	}
	if err == nil {
		err = t.emit("response.mcp_call_arguments.done", func(b []byte) []byte {
			b = t.ref(b, c)
			b = append(b, `,"arguments":`...)
			return api.AppendString(b, c.args)
		})
	}
	if err == nil {
		err = t.sw.Flush()
	}
	if err != nil {
		t.gone = true
		return false
	}
	return true
}

// emitCallEnd sends the end of the mcp_call c: completed, or failed, and
// its item done; a call not run (its answer cut) is only done.
func (t *turn) emitCallEnd(c *hostedCall) error {
	item := t.callItem(c, "completed")
	var h struct {
		Status string `json:"status"`
	}
	json.Unmarshal(item, &h)
	var err error
	switch h.Status {
	case "completed":
		err = t.emit("response.mcp_call.completed", func(b []byte) []byte { return t.ref(b, c) })
	case "failed":
		err = t.emit("response.mcp_call.failed", func(b []byte) []byte { return t.ref(b, c) })
	}
	if err == nil {
		err = t.emitItem("response.output_item.done", c.index, item)
	}
	if err == nil {
		err = t.sw.Flush()
	}
	if err != nil {
		return errClientGone
	}
	return nil
}

// commit starts the client's stream: status 200 and the SSE headers,
// with the first model call's route (from inner, when it is known).
func (t *turn) commit(inner http.Header) bool {
	if t.committed {
		return true
	}
	if inner != nil && t.route == nil {
		t.route = inner
	}
	t.routeHeaders()
	sse.SetHeaders(t.w.Header())
	t.w.WriteHeader(http.StatusOK)
	t.sw = sse.NewWriter(t.w)
	t.committed = true
	return true
}

// preamble queues the stream's first events, once: response.created and
// response.in_progress (model: the model that answers, when known, as the
// responses handler names it) and the mcp_list_tools items. False: the
// client left.
func (t *turn) preamble(model string) bool {
	if t.preambled {
		return true
	}
	t.preambled = true
	if model != "" {
		t.meta.Model = model
	}
	resp := t.meta.AppendResponse(nil, nil, &responses.Ending{Status: "in_progress"}, nil)
	var err error
	for _, typ := range []string{"response.created", "response.in_progress"} {
		if err == nil {
			err = t.emit(typ, func(b []byte) []byte {
				b = append(b, `,"response":`...)
				return append(b, resp...)
			})
		}
	}
	for i, s := range t.list {
		if err != nil {
			break
		}
		item := t.output[i]
		empty, _ := api.SetMembers(item, map[string]json.RawMessage{"tools": json.RawMessage("[]")})
		ref := func(b []byte) []byte {
			b = append(b, `,"item_id":`...)
			b = api.AppendString(b, s.listID)
			b = append(b, `,"output_index":`...)
			return strconv.AppendInt(b, int64(i), 10)
		}
		for _, step := range []func() error{
			func() error { return t.emitItem("response.output_item.added", i, empty) },
			func() error { return t.emit("response.mcp_list_tools.in_progress", ref) },
			func() error { return t.emit("response.mcp_list_tools.completed", ref) },
			func() error { return t.emitItem("response.output_item.done", i, item) },
		} {
			if err == nil {
				err = step()
			}
		}
	}
	if err != nil {
		t.gone = true
		return false
	}
	return true
}

// emitEnd sends the terminal event, with the whole response, and keeps
// that response for the store.
func (t *turn) emitEnd() {
	e := t.ending
	typ := "response.completed"
	switch e.Status {
	case "incomplete":
		typ = "response.incomplete"
	case "failed":
		typ = "response.failed"
	}
	resp := t.response(e)
	err := t.emit(typ, func(b []byte) []byte {
		b = append(b, `,"response":`...)
		return append(b, resp...)
	})
	if err == nil {
		err = t.sw.Flush()
	}
	if err != nil {
		t.info.status = StatusClientClosed
	}
}
