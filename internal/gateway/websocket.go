package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/responses"
)

// Responses over WebSocket (OpenAI's WebSocket mode, which Codex's built-in
// provider tries first): GET /v1/responses with an upgrade opens a socket
// on which each {"type":"response.create", …} text frame runs as POST
// /v1/responses with stream: true, through the same handler (ServeHTTP:
// authentication per response, limits and budgets, routes of any kind,
// fallback, the one ledger row), written by a frameWriter that sends each
// SSE event's data as one text frame. A refusal before the stream is one
// in-band error frame ({"type":"error","status":…,"error":{…}}, as OpenAI
// sends it) and the socket stays usable; so is a frame the gateway cannot
// read. One response runs at a time. generate: false warms up: the request
// is checked, its state kept, and response.created and response.completed
// answer it, without a model, a ledger row or a cost.
//
// State: a socket keeps its latest response (input, output and the
// conversation before it), so previous_response_id continues from it even
// with store: false, and from a warm-up's id, which Codex chains its first
// turn from (its warm-up carries its instructions as input items; a
// warm-up's "instructions" stand for the turns that chain from it without
// their own). Older ids are read from the response store, as over HTTP.

// socketKey is the context key of the socket a response.create came on.
type socketKey struct{}

// socketOf is the socket of a request made from a frame, nil for HTTP.
func socketOf(ctx context.Context) *socket {
	s, _ := ctx.Value(socketKey{}).(*socket)
	return s
}

// isUpgrade reports a WebSocket upgrade request.
func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHas(r.Header, "Connection", "upgrade") && headerHas(r.Header, "Upgrade", "websocket")
}

// headerHas reports whether a comma-separated header has token (any case).
func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Close codes and reasons of the gateway's own closes.
const (
	closeIdle     = "idle timeout (responses.websocket.idle)"
	closeLifetime = "websocket connection limit reached (responses.websocket.max_lifetime)"
	closeDrain    = "server shutting down"
)

// responsesSocket serves GET /v1/responses with Upgrade: websocket. The
// gateway key is checked at the upgrade (a wrong one is an HTTP 401, as
// over HTTP) and again for every response. With responses.websocket off
// the upgrade gets 426, which makes Codex fall back to HTTP at once.
func (g *Gateway) responsesSocket(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	st := g.cur()
	wc := st.cfg.Responses.WebSocket
	if !wc.On() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUpgradeRequired)
		w.Write(errorJSON(api.NewError("invalid_request_error", "websocket_disabled", "",
			"WebSocket mode of /v1/responses is off on this gateway (responses.websocket.enabled: false): use POST /v1/responses")))
		return
	}
	p, err := st.keys.Authenticate(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	info.keyID = p.KeyID
	// No permessage-deflate: the CPU per event would grow several times
	// for bytes that loopback and LANs carry for free (Codex offers it; a
	// server may decline, RFC 7692).
	hw := &hijackWriter{ResponseWriter: w}
	c, err := websocket.Accept(hw, r, nil)
	if err != nil {
		return // Accept answered (400, 403 for a foreign Origin)
	}
	c.SetReadLimit(g.maxBody) // a frame is a request body: bounded alike
	s := newSocket(g, c, r, wc)
	s.conn = hw.conn
	g.sockets.add(s)
	defer g.sockets.remove(s)
	s.serve()
}

// socket is one open WebSocket: its frames, its one running response and
// its state.
type socket struct {
	g    *Gateway
	c    *websocket.Conn
	conn *batchConn    // under c: the frames of one relay flush leave in one write
	up   *http.Request // the upgrade: headers and address of every response
	ctx  context.Context
	// cancel ends the socket: its reads and the running response, whose
	// upstream is cancelled as a gone HTTP client's is (client_cancelled).
	cancel context.CancelFunc
	idle   time.Duration
	timers [2]*time.Timer // idle, lifetime

	busy atomic.Bool // a response runs
	// finishing: the running response sent its terminal event (or error
	// frame) and its handler is ending: a client that sends the next
	// response.create at once waits for it rather than being refused.
	finishing atomic.Bool
	running   sync.WaitGroup
	// closing is why the socket closes as soon as no response runs
	// (lifetime, drain); "" while it lives.
	closing atomic.Pointer[closeWhy]

	mu      sync.Mutex
	last    *wsEntry // the latest response a next one may continue; nil: none
	pending *wsEntry // the running response's conversation, until it completes
}

type closeWhy struct {
	code   websocket.StatusCode
	reason string
}

// wsEntry is what a socket keeps of a response: its id, the items of its
// conversation through its output (input items normalised as the store
// keeps them), and the warm-up instructions that stand for the chain.
type wsEntry struct {
	id           string
	items        []json.RawMessage
	instructions *string
	own          *string // the request's own instructions (a warm-up's stand for its chain)
}

func newSocket(g *Gateway, c *websocket.Conn, up *http.Request, wc config.WebSocket) *socket {
	ctx, cancel := context.WithCancel(up.Context())
	s := &socket{g: g, c: c, up: up, ctx: ctx, cancel: cancel, idle: wc.Idle.D()}
	if s.idle <= 0 {
		s.idle = config.DefaultWebSocketIdle
	}
	life := wc.MaxLifetime.D()
	if life <= 0 {
		life = config.DefaultWebSocketLifetime
	}
	s.timers[0] = time.AfterFunc(s.idle, func() { s.closeWhenIdle(websocket.StatusNormalClosure, closeIdle, true) })
	s.timers[1] = time.AfterFunc(life, func() { s.closeWhenIdle(websocket.StatusNormalClosure, closeLifetime, false) })
	return s
}

// closeWhenIdle closes the socket now when no response runs, else when
// the running one ends; idleOnly: only when none runs (the idle timer).
func (s *socket) closeWhenIdle(code websocket.StatusCode, reason string, idleOnly bool) {
	if idleOnly {
		if !s.busy.Load() {
			s.close(code, reason)
		}
		return
	}
	s.closing.CompareAndSwap(nil, &closeWhy{code, reason})
	if !s.busy.Load() {
		s.close(code, reason)
	}
}

// close sends the close frame and ends the socket (its reads return).
func (s *socket) close(code websocket.StatusCode, reason string) {
	go func() {
		// Close waits up to 5 s for the client's answer: off the caller.
		s.c.Close(code, reason)
		s.cancel()
	}()
}

// serve reads frames until the socket ends, then cancels what runs and
// waits for it (its ledger row is written before serve returns).
func (s *socket) serve() {
	defer func() {
		for _, t := range s.timers {
			t.Stop()
		}
		s.cancel()
		s.running.Wait()
		s.c.CloseNow()
	}()
	var done chan struct{} // closed when the latest response's run ended
	for {
		typ, data, err := s.c.Read(s.ctx)
		if err != nil {
			return
		}
		s.timers[0].Reset(s.idle)
		if typ != websocket.MessageText {
			s.sendError(http.StatusBadRequest, "invalid_request_error", "invalid_frame", "", "binary frames are not supported: send JSON text frames")
			continue
		}
		f, err := decodeFrame(data)
		if err != nil {
			var fe *frameError
			errors.As(err, &fe)
			s.sendError(http.StatusBadRequest, "invalid_request_error", "invalid_frame", fe.param, fe.msg)
			continue
		}
		switch f.typ {
		case "response.create":
		case "response.processed":
			continue // Codex's acknowledgement of a response: nothing to do
		default:
			s.sendError(http.StatusBadRequest, "invalid_request_error", "unknown_event_type", "type",
				fmt.Sprintf("unsupported event type %q: the Responses WebSocket takes response.create", f.typ))
			continue
		}
		if why := s.closing.Load(); why != nil && why.reason == closeLifetime {
			s.sendError(http.StatusBadRequest, "invalid_request_error", "websocket_connection_limit_reached", "",
				"Responses websocket connection limit reached: create a new websocket connection to continue.")
			s.close(why.code, why.reason)
			continue
		}
		if s.busy.Load() {
			if !s.finishing.Load() {
				s.sendError(http.StatusBadRequest, "invalid_request_error", "response_already_in_flight", "",
					"a response is in progress on this socket: send the next response.create after its terminal event (one response at a time)")
				continue
			}
			<-done // its terminal event is out: its handler is ending
		}
		s.busy.Store(true)
		s.finishing.Store(false)
		done = make(chan struct{})
		s.running.Add(1)
		go s.run(f, done)
	}
}

// run answers one response.create.
func (s *socket) run(f wsFrame, done chan struct{}) {
	defer func() {
		s.mu.Lock()
		s.pending = nil
		s.mu.Unlock()
		s.busy.Store(false)
		if s.ctx.Err() == nil {
			s.timers[0].Reset(s.idle)
		}
		if why := s.closing.Load(); why != nil {
			s.close(why.code, why.reason)
		}
		close(done)
		s.running.Done()
	}()
	fw := newFrameWriter(s)
	defer fw.end()
	r := s.request(f.body)
	if !f.generate {
		s.g.warmup(fw, r.WithContext(context.WithValue(r.Context(), warmupKey{}, true)))
		return
	}
	s.g.ServeHTTP(fw, r)
}

// request is the POST /v1/responses a frame's body makes: the upgrade's
// headers (its key among them) and address, without the upgrade's own.
func (s *socket) request(body []byte) *http.Request {
	r := s.up.Clone(context.WithValue(s.ctx, socketKey{}, s))
	r.Method = http.MethodPost
	for _, k := range []string{"Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version",
		"Sec-Websocket-Extensions", "Sec-Websocket-Protocol", HeaderRequestID} {
		r.Header.Del(k)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Body, r.GetBody, r.ContentLength = io.NopCloser(bytes.NewReader(body)), nil, int64(len(body))
	return r
}

// sendError writes an in-band error frame, as OpenAI's WebSocket mode
// does: {"type":"error","status":…,"error":{type, code, message, param}}.
func (s *socket) sendError(status int, typ, code, param, msg string) {
	e := api.NewError(typ, code, param, msg)
	s.write(s.ctx, errorFrame(status, errorJSON(e), nil))
}

func (s *socket) write(ctx context.Context, b []byte) error {
	return s.c.Write(ctx, websocket.MessageText, b)
}

// errorFrame is the in-band error of an HTTP error answer: its status,
// the "error" of its OpenAI error body, and the headers a client acts on
// (Retry-After, x-should-retry; Codex reads "headers").
func errorFrame(status int, body []byte, h http.Header) []byte {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 || e.Error[0] != '{' {
		e.Error = errorJSON(api.NewError("server_error", "", "", http.StatusText(status)))
		json.Unmarshal(e.Error, &e)
	}
	b := append(make([]byte, 0, len(e.Error)+96), `{"type":"error","status":`...)
	b = fmt.Appendf(b, "%d", status)
	b = append(b, `,"error":`...)
	b = append(b, e.Error...)
	first := true
	for _, k := range []string{"Retry-After", headerShouldRetry, HeaderRequestID} {
		v := h.Get(k)
		if v == "" {
			continue
		}
		if first {
			b = append(b, `,"headers":{`...)
			first = false
		} else {
			b = append(b, ',')
		}
		b = api.AppendString(b, strings.ToLower(k))
		b = append(b, ':')
		b = api.AppendString(b, v)
	}
	if !first {
		b = append(b, '}')
	}
	return append(b, '}')
}

// warmup answers a response.create with generate: false: the key, the
// body and the model are checked as for a response (a refusal is the
// same in-band error), the request's state is kept for the next response
// to continue, and response.created and response.completed (no output,
// zero usage) answer it. No model is called: no ledger row, no cost, no
// limit taken. It logs an access line of its own.
func (g *Gateway) warmup(w *frameWriter, r *http.Request) {
	info := &reqInfo{id: newRequestID(), start: time.Now()}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	fail := func(err error) {
		g.writeError(w, r, err)
		info.status, info.err = statusOf(err).status, err.Error()
		g.access(r, info, info.status)
	}
	st := g.cur()
	p, err := st.keys.Authenticate(r)
	if err != nil {
		fail(err)
		return
	}
	info.keyID = p.KeyID
	_, meta, _, err := g.parseResponses(w, r, p.KeyID)
	if err != nil {
		fail(err)
		return
	}
	info.model = meta.Model
	model, ok := st.cfg.Resolve(meta.Model) // a name, or one of its aliases
	if !ok {
		fail(unknownModel(meta.Model))
		return
	}
	if !p.Allowed(model.Name) {
		fail(fmt.Errorf("%w: key %q may not use model %q", errModelNotAllowed, p.KeyID, model.Name))
		return
	}
	s := socketOf(r.Context())
	s.mu.Lock()
	if e := s.pending; e != nil {
		e.id = meta.ID
		if e.own != nil {
			e.instructions = e.own
		}
		s.last = e
	}
	s.mu.Unlock()
	events := responses.Warmup(meta)
	for i, ev := range events {
		if i == len(events)-1 {
			s.finishing.Store(true)
		}
		if err := s.write(r.Context(), ev); err != nil {
			break
		}
	}
	g.access(r, info, http.StatusOK)
}

// socketState is parseResponses' state on a socket: previous_response_id
// continues the socket's latest response (its items, and the warm-up
// instructions standing for its chain when rq has none), else a stored
// one as over HTTP; item references are read from the store. It keeps the
// conversation so far as the socket's pending entry, and returns what to
// store of the response (store true and a response store), else nil.
func (g *Gateway) socketState(ctx context.Context, s *socket, keyID string, rq *responses.Request) (*toStore, error) {
	items, err := g.referencedItems(ctx, keyID, rq)
	if err != nil {
		return nil, err
	}
	entry := &wsEntry{own: rq.Instructions}
	stored := "" // the stored response continued, if any
	if id := deref(rq.PreviousResponseID); id != "" {
		s.mu.Lock()
		last := s.last
		s.mu.Unlock()
		switch {
		case last != nil && last.id == id:
			rq.Prior = last.items
			if rq.Prior == nil {
				rq.Prior = []json.RawMessage{} // resolved, if empty
			}
			if rq.Instructions == nil {
				rq.Instructions = last.instructions
				entry.instructions = last.instructions
			}
		case g.respStore != nil:
			if stored, err = g.chain(ctx, keyID, rq); err != nil {
				return nil, err
			}
		default:
			return nil, &notFoundError{param: "previous_response_id", code: "previous_response_not_found",
				msg: fmt.Sprintf("Previous response with id '%s' not found.", id)}
		}
	}
	entry.items = append(append(make([]json.RawMessage, 0, len(rq.Prior)+len(items)+4), rq.Prior...), items...)
	s.mu.Lock()
	s.pending = entry
	s.mu.Unlock()
	if g.respStore == nil || (rq.Store != nil && !*rq.Store) {
		return nil, nil
	}
	rq.Keep = true
	if stored != "" {
		return &toStore{keyID: keyID, previous: stored, input: items}, nil
	}
	// Continued from the socket (or from nothing): the stored response's
	// input is the whole conversation, which a later request continuing it
	// over HTTP then finds without the socket.
	return &toStore{keyID: keyID, input: entry.items[:len(entry.items):len(entry.items)]}, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// ended keeps a response that completed (or is incomplete) as the
// socket's latest, from its terminal event's response object: the
// pending conversation and its output. A failed response leaves the
// latest as it was, so the client may retry from it.
func (s *socket) ended(resp []byte) {
	var r struct {
		ID     string            `json:"id"`
		Output []json.RawMessage `json:"output"`
	}
	if json.Unmarshal(resp, &r) != nil || r.ID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.pending
	if e == nil {
		// Passed through without the gateway's state (no
		// previous_response_id): the conversation is its input.
		e = &wsEntry{}
	}
	s.last = &wsEntry{id: r.ID, items: append(e.items[:len(e.items):len(e.items)], r.Output...), instructions: e.instructions}
}

// frameWriter is the http.ResponseWriter of a response run from a frame:
// the SSE events the handler writes leave as text frames, one per event
// (its data, as OpenAI's WebSocket mode sends the same events); comments
// (keep-alives) and "[DONE]" are dropped. An HTTP error answer (a status
// other than 200) is kept and sent at the end as one in-band error frame.
type frameWriter struct {
	s      *socket
	h      http.Header
	status int
	body   []byte // an error answer's body
	blocks sseBlocks
	join   []byte // a multi-line data's lines, joined
	// deadline closes the socket when a write outlives the write deadline
	// (see SetWriteDeadline); nil: none.
	deadline *time.Timer
	err      error
}

func newFrameWriter(s *socket) *frameWriter {
	return &frameWriter{s: s, h: http.Header{}}
}

func (w *frameWriter) Header() http.Header { return w.h }

func (w *frameWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
}

// FlushError implements the flush sse.Writer calls: every event was
// written when it arrived.
func (w *frameWriter) FlushError() error { return w.err }

// SetWriteDeadline bounds the writes of frames (timeouts.client_write,
// through http.ResponseController, which the relay renews every half of
// it): a client that has not read for that long has its socket closed, as
// a stalled HTTP client's connection is, and the write fails. One timer
// per deadline, not a context per write: a write with a cancellable
// context costs coder/websocket a context.AfterFunc every frame.
func (w *frameWriter) SetWriteDeadline(t time.Time) error {
	if w.deadline != nil {
		w.deadline.Stop()
		w.deadline = nil
	}
	if !t.IsZero() {
		w.deadline = time.AfterFunc(time.Until(t), func() { w.s.c.CloseNow() })
	}
	return nil
}

func (w *frameWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status != http.StatusOK {
		w.body = append(w.body, p...)
		return len(p), nil
	}
	if w.err != nil {
		return 0, w.err
	}
	// The events of one relay flush leave in one write, as the SSE
	// path's do (coder/websocket flushes every message).
	w.s.conn.hold()
	defer func() {
		if err := w.s.conn.release(); err != nil && w.err == nil {
			w.err = err
		}
	}()
	if err := w.blocks.feed(p, w.event); err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

var (
	blockEnd   = []byte("\n\n")
	dataPrefix = []byte("data:")
	doneData   = []byte("[DONE]")
	// The terminal events whose response the socket keeps (see ended);
	// both the gateway's encoder and OpenAI write "type" first.
	terminalPrefix   = []byte(`{"type":"response.`)
	completedPrefix  = []byte(`{"type":"response.completed"`)
	incompletePrefix = []byte(`{"type":"response.incomplete"`)
	failedPrefix     = []byte(`{"type":"response.failed"`)
)

// sseBlocks cuts the SSE bytes of successive writes into event blocks.
type sseBlocks struct {
	carry []byte // the start of a block the next write ends
}

// feed passes each block that p completes, with what earlier writes left,
// to each, in order, and keeps the rest for the next write; it stops at
// each's first error.
func (b *sseBlocks) feed(p []byte, each func([]byte) error) error {
	data := p
	if len(b.carry) > 0 {
		b.carry = append(b.carry, p...)
		data = b.carry
	}
	for {
		i := bytes.Index(data, blockEnd)
		if i < 0 {
			break
		}
		if err := each(data[:i]); err != nil {
			return err
		}
		data = data[i+2:]
	}
	n := copy(b.carry[:cap(b.carry)], data) // data may lie in carry: copy moves
	if n < len(data) {
		b.carry = append(b.carry[:0], data...)
	} else {
		b.carry = b.carry[:n]
	}
	return nil
}

// eventData is the data of one SSE event block: its data: lines joined
// by '\n' (in *join when there are several), false when it has none or is
// "[DONE]"; keepAlive reports a ": keep-alive" comment among its lines.
// The Responses WebSocket's frames and hosted MCP's rounds read the
// gateway's own streams with it.
func eventData(block []byte, join *[]byte) (data []byte, ok, keepAlive bool) {
	lines := 0
	for len(block) > 0 {
		line, rest, _ := bytes.Cut(block, []byte{'\n'})
		block = rest
		if bytes.HasPrefix(line, []byte(":")) {
			keepAlive = keepAlive || bytes.Contains(line, keepAliveComment)
			continue
		}
		v, found := bytes.CutPrefix(line, dataPrefix)
		if !found {
			continue // event:, id:
		}
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		switch lines {
		case 0:
			data = v
		case 1:
			*join = append(append(append((*join)[:0], data...), '\n'), v...)
			data = *join
		default:
			*join = append(append(*join, '\n'), v...)
			data = *join
		}
		lines++
	}
	return data, lines > 0 && !bytes.Equal(data, doneData), keepAlive
}

// event sends one SSE event's data as a text frame.
func (w *frameWriter) event(block []byte) error {
	data, ok, _ := eventData(block, &w.join)
	if !ok {
		return nil
	}
	if bytes.HasPrefix(data, terminalPrefix) {
		switch {
		case bytes.HasPrefix(data, completedPrefix), bytes.HasPrefix(data, incompletePrefix):
			w.keep(data)
			w.s.finishing.Store(true)
		case bytes.HasPrefix(data, failedPrefix):
			w.s.finishing.Store(true)
		}
	}
	return w.s.c.Write(context.Background(), websocket.MessageText, data) // bounded by SetWriteDeadline
}

// keep reads the response of a terminal event into the socket's state.
func (w *frameWriter) keep(data []byte) {
	var ev struct {
		Response json.RawMessage `json:"response"`
	}
	if json.Unmarshal(data, &ev) == nil && len(ev.Response) > 0 {
		w.s.ended(ev.Response)
	}
}

// end sends an HTTP error answer as its in-band error frame.
func (w *frameWriter) end() {
	if w.deadline != nil {
		w.deadline.Stop()
	}
	if w.status != 0 && w.status != http.StatusOK {
		w.s.finishing.Store(true)
		if err := w.s.write(w.s.ctx, errorFrame(w.status, w.body, w.h)); err != nil {
			w.s.g.log.LogAttrs(w.s.ctx, slog.LevelDebug, "responses websocket: error frame not sent", slog.String("error", err.Error()))
		}
	}
}

// sockets are the open sockets, closed in order at shutdown: those idle
// at once, the others when their response ends (a hijacked connection is
// outside http.Server.Shutdown's reach).
type sockets struct {
	mu       sync.Mutex
	open     map[*socket]struct{}
	draining bool
}

func (ss *sockets) add(s *socket) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.open == nil {
		ss.open = map[*socket]struct{}{}
	}
	ss.open[s] = struct{}{}
	if ss.draining {
		s.closeWhenIdle(websocket.StatusGoingAway, closeDrain, false)
	}
}

func (ss *sockets) remove(s *socket) {
	ss.mu.Lock()
	delete(ss.open, s)
	ss.mu.Unlock()
}

// drain closes every socket as soon as no response runs on it.
func (ss *sockets) drain() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.draining = true
	for s := range ss.open {
		s.closeWhenIdle(websocket.StatusGoingAway, closeDrain, false)
	}
}

// hijackWriter hands coder/websocket the hijacked connection wrapped in a
// batchConn.
type hijackWriter struct {
	http.ResponseWriter
	conn *batchConn
}

func (h *hijackWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil { // the 101 answer, if still buffered
		c.Close()
		return nil, nil, err
	}
	h.conn = &batchConn{Conn: c}
	brw.Writer.Reset(h.conn)
	return h.conn, brw, nil
}

// batchConn is a socket's connection: between hold and release, what is
// written collects and leaves in one write (the frames of one relay
// flush); otherwise writes go through. Other writers meanwhile (an error
// frame, a pong) join the batch.
type batchConn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	buf     []byte
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holding {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	return b.Conn.Write(p)
}

func (b *batchConn) hold() {
	b.mu.Lock()
	b.holding = true
	b.mu.Unlock()
}

// release writes what collected since hold.
func (b *batchConn) release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holding = false
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	if cap(b.buf) > 64<<10 {
		b.buf = nil // a huge batch is not kept
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// warmupKey marks the context of a warm-up's request (generate: false).
type warmupKey struct{}

// isWarmup reports whether ctx is a warm-up's: its request may have no
// input, since no model is called.
func isWarmup(ctx context.Context) bool { w, _ := ctx.Value(warmupKey{}).(bool); return w }
