package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// MCP's error codes (the 2026-07-28 revision's, -32020 up; -32001 for a
// request timeout as the SDKs use it).
const (
	CodeRequestTimeout             = -32001
	CodeHeaderMismatch             = -32020
	CodeMissingClientCapability    = -32021
	CodeUnsupportedProtocolVersion = -32022
	// CodeRefused: the gateway refused the call for its key (not allowed,
	// over a rate limit or budget); the message says which.
	CodeRefused = -32010
)

// rpcError is a JSON-RPC error answered with an HTTP status.
type rpcError struct {
	status int
	err    jsonrpc.Error
}

func (e *rpcError) Error() string { return e.err.Message }

func errorf(status, code int, format string, args ...any) *rpcError {
	return &rpcError{status: status, err: jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// BodyError is a request body that could not be read, answered with Status
// (413 too large, 408 too slow, 400).
type BodyError struct {
	Status int
	Err    error
}

func (e *BodyError) Error() string { return e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// bodyError is err (from Options.ReadBody) as the handler answers it.
func bodyError(err error) error {
	var re *rpcError
	if errors.As(err, &re) {
		return err
	}
	status := http.StatusBadRequest
	var be *BodyError
	if errors.As(err, &be) {
		status = be.Status
	}
	return errorf(status, jsonrpc.CodeInvalidRequest, "request body: %v", err)
}

// readBody reads a POST body of at most limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, "request body of %d bytes is over the limit of %d bytes", r.ContentLength, limit)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, jsonrpc.CodeParseError, "reading the request body: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, "request body is over the limit of %d bytes", limit)
	}
	return b, nil
}

// decodeMessage reads one JSON-RPC message with the shared bounded reader
// (jsonrpc.Decode: size and depth bounds, duplicate and case-folded member
// names refused). A batch is refused: MCP removed batches in 2025-06-18,
// and no supported client sends one.
func decodeMessage(b []byte, limit int64) (*jsonrpc.Message, error) {
	msgs, batch, err := jsonrpc.Decode(b, jsonrpc.Limits{MaxBytes: int(limit)})
	var de *jsonrpc.DecodeError
	switch {
	case errors.As(err, &de):
		return nil, errorf(http.StatusBadRequest, de.Code, "%v", err)
	case err != nil:
		return nil, errorf(http.StatusBadRequest, jsonrpc.CodeParseError, "%v", err)
	case batch || len(msgs) != 1:
		return nil, errorf(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message per POST")
	}
	return &msgs[0], nil
}

// out answers one POST: a JSON body, or, once a message about the request
// is to be sent before its response, an SSE stream (the commit point:
// nothing is written until the first of them).
type out struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	canSSE bool // the client accepts text/event-stream
	sse    bool // committed as a stream
	done   bool
	header http.Header // headers to send with the answer (Mcp-Session-Id)
	// jr journals the stream's events (a resumable 2025-11-25 POST stream:
	// each event gets an id); nil: none.
	jr   *outJournal
	gone bool // a write failed: the client is gone
}

// keepAlive writes an SSE comment and flushes it, under o.mu: what a
// quiet stream sends so that proxies and clients do not time it out.
func (o *out) keepAlive() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.w.Write([]byte(": keep-alive\n\n")); err != nil {
		return err
	}
	return o.rc.Flush()
}

// outJournal is where a resumable stream's events go, and its ids.
type outJournal struct {
	ctx    context.Context
	j      Journal
	key    string
	stream string
	seq    int
	broken bool // an append failed: the rest is not journaled
}

// journaling reports whether o is a journaled stream (resumable).
func (o *out) journaling() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sse && o.jr != nil && !o.jr.broken
}

var errGone = errors.New("the client is gone")

func newOut(w http.ResponseWriter, r *http.Request) *out {
	accept := r.Header.Get("Accept")
	return &out{w: w, rc: http.NewResponseController(w), canSSE: accept == "" || strings.Contains(accept, "text/event-stream") || strings.Contains(accept, "*/*")}
}

func (o *out) commit(contentType string, status int) {
	h := o.w.Header()
	for k, v := range o.header {
		h[k] = v
	}
	h.Set("Content-Type", contentType)
	if contentType == "text/event-stream" {
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	}
	o.w.WriteHeader(status)
}

// event sends m before the response, on the stream (committed at the
// first); false when the client takes no stream or is gone.
func (o *out) event(m *jsonrpc.Message) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done || !o.canSSE {
		return false
	}
	if !o.sse {
		o.sse = true
		o.commit("text/event-stream", http.StatusOK)
	}
	return o.writeEvent(m, false) == nil
}

// writeEvent writes m as an event (journaled first when o.jr is set:
// then nil even when the client is gone, which may resume it; final marks
// the stream's last event).
func (o *out) writeEvent(m *jsonrpc.Message, final bool) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + 72)
	journaled := false
	if jr := o.jr; jr != nil && !jr.broken {
		jr.seq++
		if err := jr.j.Append(jr.ctx, jr.key, jr.seq, b, final); err != nil {
			jr.broken = true
		} else {
			journaled = true
			buf.WriteString("id: " + jr.stream + "." + strconv.Itoa(jr.seq) + "\n")
		}
	}
	if o.gone {
		if journaled {
			return nil
		}
		return errGone
	}
	buf.WriteString("event: message\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	_, err = o.w.Write(buf.Bytes())
	if err == nil {
		err = o.rc.Flush()
	}
	if err != nil {
		o.gone = true
		if journaled {
			return nil
		}
	}
	return err
}

// reply sends the response m: as the stream's last event, else as JSON.
func (o *out) reply(m *jsonrpc.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return
	}
	o.done = true
	if o.sse {
		o.writeEvent(m, true)
		return
	}
	b, _ := json.Marshal(m)
	o.commit("application/json", http.StatusOK)
	o.w.Write(b)
}

// fail answers err (an *rpcError, else 500) as a JSON-RPC error with id.
func (o *out) fail(id json.RawMessage, err error) {
	var re *rpcError
	if !errors.As(err, &re) {
		re = errorf(http.StatusInternalServerError, jsonrpc.CodeInternalError, "%v", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return
	}
	o.done = true
	m := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Error: &re.err}
	if id == nil {
		m.ID = json.RawMessage("null")
	}
	if o.sse { // committed: the error is the stream's last event
		o.writeEvent(m, true)
		return
	}
	b, _ := json.Marshal(m)
	o.commit("application/json", re.status)
	o.w.Write(b)
}

// accepted answers a notification or a response: 202, no body.
func (o *out) accepted() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.done {
		o.done = true
		o.w.WriteHeader(http.StatusAccepted)
	}
}

// result builds the response to req carrying result.
func result(id json.RawMessage, v any) *jsonrpc.Message {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("{}")
	}
	return &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Result: b}
}
