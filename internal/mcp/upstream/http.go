package upstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
	"github.com/streamgate/streamgate/internal/sse"
)

// httpServer is a Server over Streamable HTTP. Its session (era, version,
// Mcp-Session-Id) is made on first use and again when the server forgets
// it (404); a server that turns out to have only the legacy HTTP+SSE
// transport is served by a mux of legacy links instead.
type httpServer struct {
	*core
	url    *url.URL
	tr     *http.Transport
	client *http.Client
	fresh  *http.Client // a new connection for each request: do's second try

	smu        sync.Mutex
	sess       *session
	connecting chan struct{} // closed when the handshake in progress ends
	connErr    error         // the last handshake's failure
	legacy     *mux

	params paramHeaders // 2026-07-28 x-mcp-header bindings, by tool
}

// session is what one handshake found.
type session struct {
	modern  bool   // 2026-07-28: no session, _meta and Mcp-Method on every request
	version string // MCP-Protocol-Version
	id      string // Mcp-Session-Id, "" when the server gave none
	info    Info
}

func newHTTP(c *core) (*httpServer, error) {
	u, err := url.Parse(c.cfg.URL)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Calls run concurrently on one server: keep their connections.
	tr.MaxIdleConnsPerHost = 64
	h := &httpServer{core: c, url: u, tr: tr}
	// A redirect would carry the configured headers (a credential)
	// elsewhere: configure the final URL instead.
	noRedirect := func(req *http.Request, via []*http.Request) error {
		return fmt.Errorf("the server redirects to %s; configure that URL instead", req.URL.Redacted())
	}
	h.client = &http.Client{Transport: tr, CheckRedirect: noRedirect}
	fresh := tr.Clone()
	fresh.DisableKeepAlives = true
	h.fresh = &http.Client{Transport: fresh, CheckRedirect: noRedirect}
	c.reply = h.Reply
	return h, nil
}

var _ Server = (*httpServer)(nil)

// Methods whose request the transport may send again on a fresh connection
// when a pooled one turns out closed: reading them twice does no harm. A
// tools/call is not among them.
var retrySafe = map[string]bool{
	"server/discover": true, "initialize": true, "ping": true, "tools/list": true, "prompts/list": true,
	"prompts/get": true, "resources/list": true, "resources/templates/list": true, "resources/read": true,
	"completion/complete": true, "subscriptions/listen": true,
}

// newRequest builds a request to the MCP endpoint with the configured
// headers and the protocol's own, and no others.
func (h *httpServer) newRequest(ctx context.Context, method string, target *url.URL, s *session, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		panic(err) // the URL was validated, the method is ours
	}
	for k, v := range h.cfg.Headers {
		req.Header.Set(k, v)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	if s != nil {
		if s.id != "" {
			req.Header.Set("Mcp-Session-Id", s.id)
		}
		if s.version != "" {
			req.Header.Set("MCP-Protocol-Version", s.version)
		}
	}
	return req
}

// post sends one message. For a 2026-07-28 session, method and name go in
// Mcp-Method and Mcp-Name, and params in Mcp-Param-* headers.
func (h *httpServer) post(ctx context.Context, s *session, body []byte, method, name string, params http.Header) (*http.Response, error) {
	req := h.newRequest(ctx, http.MethodPost, h.url, s, body)
	if s != nil && s.modern && method != "" {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", headerValue(name))
		}
		for k, v := range params {
			req.Header[k] = v
		}
	}
	if retrySafe[method] {
		// Marks the request replayable for net/http's retry on a pooled
		// connection the server closed; a nil value is not sent.
		req.Header["X-Idempotency-Key"] = nil
	}
	return h.do(req, body)
}

// staleWindow bounds how soon after the request was written a pooled
// connection's end counts as the server having closed it idle (see do).
const staleWindow = 250 * time.Millisecond

// do sends req, again (at most twice) when it went out on a pooled
// connection that the server closed as idle at the same moment: issue 38's
// lost results. The server closes a keep-alive connection only between
// requests, so a request that met that close was never read: sending it
// again runs nothing twice. It is told from a server that died while
// working on the request by all of: a reused connection that sat idle, no
// byte of an answer, a plain end of the connection (EOF, reset, broken
// pipe), within staleWindow of writing the request. The second and third
// tries go out on new connections, which no idle close can meet. net/http retries such
// requests itself only for idempotent ones; a tools/call is not.
func (h *httpServer) do(req *http.Request, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		var reused bool
		var wrote time.Time
		trace := &httptrace.ClientTrace{
			GotConn:      func(i httptrace.GotConnInfo) { reused = i.Reused },
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote = time.Now() },
		}
		r := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		client := h.client
		if attempt > 0 {
			client = h.fresh
		}
		resp, err := client.Do(r)
		if err == nil || attempt == 2 || req.Context().Err() != nil {
			return resp, err
		}
		// net/http's own word that the server closed the connection before
		// the request went out on it (its message: the error is not
		// exported).
		idle := strings.Contains(err.Error(), "server closed idle connection")
		if !idle && (!reused || wrote.IsZero() || time.Since(wrote) > staleWindow || !closedConn(err)) {
			return resp, err
		}
		h.log.Debug("mcp upstream: a pooled connection was closed under the request; sending it again", "err", err)
	}
}

// closedConn reports the errors of a connection the peer closed.
func closedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// get opens a GET stream: the standalone stream, or a resumption of a
// POST's stream after lastID.
func (h *httpServer) get(ctx context.Context, s *session, lastID string) (*http.Response, error) {
	req := h.newRequest(ctx, http.MethodGet, h.url, s, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return h.client.Do(req)
}

// headerValue is s as a header value: as it is when it is plain visible
// ASCII, else in the spec's Base64 sentinel form.
func headerValue(s string) string {
	safe := s != "" && s[0] != ' ' && s[len(s)-1] != ' ' && s[0] != '\t' && s[len(s)-1] != '\t' &&
		!(strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?="))
	for i := 0; safe && i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			safe = false
		}
	}
	if safe {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// nameOf is what Mcp-Name carries for a request.
func nameOf(method string, params json.RawMessage) string {
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	switch method {
	case "tools/call", "prompts/get":
		_ = json.Unmarshal(params, &p)
		return p.Name
	case "resources/read":
		_ = json.Unmarshal(params, &p)
		return p.URI
	}
	return ""
}

// statusError is a POST or GET the server refused.
type statusError struct {
	status int
	rpc    *jsonrpc.Message // the JSON-RPC error response the body held, if any
	body   string
}

func (e *statusError) Error() string {
	if e.rpc != nil {
		return fmt.Sprintf("HTTP %d: %d %s", e.status, e.rpc.Error.Code, e.rpc.Error.Message)
	}
	if e.body == "" {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.body)
}

// refusal reads a non-2xx response (bounded) and closes it.
func (h *httpServer) refusal(resp *http.Response) *statusError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	e := &statusError{status: resp.StatusCode, body: strings.TrimSpace(clipString(string(b), 300))}
	if msgs, batch, err := jsonrpc.Decode(b, jsonrpc.Limits{}); err == nil && !batch && msgs[0].Error != nil {
		e.rpc = &msgs[0]
	}
	return e
}

func mediaType(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}

// readMessages reads the messages of a 2xx response body, one JSON value or
// SSE events, passing each to fn until fn returns true (stopped). lastID is
// the last SSE event id seen. It returns at the end of the body with a nil
// error, or the read error; a message over the cap is ErrTooLarge.
func (h *httpServer) readMessages(resp *http.Response, fn func(m *jsonrpc.Message) bool) (lastID string, stopped bool, err error) {
	switch mt := mediaType(resp); mt {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.max)+1))
		if err != nil {
			return "", false, err
		}
		if len(b) > h.max {
			return "", false, h.tooLarge("the answer")
		}
		msgs, _, err := jsonrpc.Decode(b, h.limits())
		if err != nil {
			return "", false, h.errorf("the answer is not a JSON-RPC message: %v", err)
		}
		for i := range msgs {
			if fn(&msgs[i]) {
				return "", true, nil
			}
		}
		return "", false, nil
	case "text/event-stream":
		r := sse.NewReader(resp.Body, h.max)
		r.NoDone = true
		for {
			ev, err := r.Next()
			if err != nil {
				var long *sse.LineTooLongError
				switch {
				case err == io.EOF || errors.Is(err, sse.ErrTruncated):
					return lastID, false, nil
				case errors.As(err, &long):
					return lastID, false, h.tooLarge("an event")
				}
				return lastID, false, err
			}
			if ev.ID != nil {
				lastID = string(ev.ID)
			}
			if len(ev.Data) == 0 || (len(ev.Name) > 0 && string(ev.Name) != "message") {
				continue // a priming event, or not a message
			}
			msgs, _, err := jsonrpc.Decode(bytes.Clone(ev.Data), h.limits())
			if err != nil {
				h.log.Warn("mcp upstream: an event that is not a message", "err", err)
				continue
			}
			for i := range msgs {
				if fn(&msgs[i]) {
					return lastID, true, nil
				}
			}
		}
	default:
		return "", false, h.errorf("answered with Content-Type %q, want application/json or text/event-stream", mt)
	}
}

// drain reads what follows a response in its body (the stream's end), so
// the connection goes back to the pool, then closes it; at most 64 KiB and
// a second.
func drain(body io.ReadCloser, cancel context.CancelFunc) {
	t := time.AfterFunc(time.Second, cancel)
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	t.Stop()
	body.Close()
}

// mint makes the ReplyTo of a server request on session s.
func (h *httpServer) mint(s *session) func(*jsonrpc.Message, *call) string {
	return func(m *jsonrpc.Message, about *call) string {
		r := &replyTo{Kind: "h", Session: s.id, Version: s.version, ID: m.ID}
		if about != nil {
			r.Call = about.id
		}
		return r.encode()
	}
}

// ensure returns the session, making one if need be (one handshake at a
// time; waiting callers share it), or the legacy mux.
func (h *httpServer) ensure(ctx context.Context) (*session, *mux, error) {
	for {
		if h.isClosed() {
			return nil, nil, ErrClosed
		}
		h.smu.Lock()
		if h.legacy != nil || h.sess != nil {
			s, lg := h.sess, h.legacy
			h.smu.Unlock()
			return s, lg, nil
		}
		ch := h.connecting
		if ch == nil {
			ch = make(chan struct{})
			h.connecting = ch
			h.wg.Go(func() {
				s, lg, err := h.handshake()
				h.smu.Lock()
				h.sess, h.legacy, h.connErr, h.connecting = s, lg, err, nil
				h.smu.Unlock()
				close(ch)
			})
		}
		h.smu.Unlock()
		select {
		case <-ch:
			h.smu.Lock()
			s, lg, err := h.sess, h.legacy, h.connErr
			h.smu.Unlock()
			if s == nil && lg == nil {
				if err == nil {
					err = ErrClosed
				}
				return nil, nil, err
			}
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-h.closed:
			return nil, nil, ErrClosed
		}
	}
}

// expire forgets session s (the server answered 404 for it): the next
// use makes a new one.
func (h *httpServer) expire(s *session) {
	h.smu.Lock()
	if h.sess == s {
		h.sess = nil
		h.log.Info("mcp upstream: session expired; initializing again")
	}
	h.smu.Unlock()
}

// handshake finds the era: server/discover (2026-07-28), else initialize
// (2025-11-25 or older), else the legacy HTTP+SSE transport when the POST
// is refused with 400, 404 or 405 and no JSON-RPC error (the spec's
// backwards-compatibility rule).
func (h *httpServer) handshake() (*session, *mux, error) {
	ctx, cancel := context.WithTimeout(h.base, handshakeTimeout)
	defer cancel()
	modern := &session{modern: true, version: Version2026}
	msg, _, probeErr := h.exchange(ctx, modern, "server/discover", struct{}{})
	if probeErr == nil {
		if msg.Result != nil && modernResult(msg.Result) {
			modern.info = Info{ProtocolVersion: Version2026, Result: msg.Result}
			return modern, nil, nil
		}
		probeErr = errors.New("the server does not offer " + Version2026)
	}
	msg, hdr, err := h.exchange(ctx, &session{}, "initialize", h.initParams())
	if err == nil {
		version, err := h.initialized(msg)
		if err != nil {
			return nil, nil, err
		}
		s := &session{version: version, id: hdr.Get("Mcp-Session-Id"), info: Info{ProtocolVersion: version, Result: msg.Result}}
		resp, err := h.post(ctx, s, notification("notifications/initialized", struct{}{}), "notifications/initialized", "", nil)
		if err != nil {
			return nil, nil, h.errorf("notifications/initialized: %w", err)
		}
		if resp.StatusCode/100 != 2 {
			return nil, nil, h.errorf("notifications/initialized: %w", h.refusal(resp))
		}
		drain(resp.Body, func() {})
		// The standalone GET stream carries what the server sends outside
		// a call's own stream: unsolicited messages, and those about calls
		// it answers with application/json (the Go SDK's JSON mode sends
		// their progress and elicitations there). It is opened before the
		// session is used, so that none is sent before it is there.
		opened := make(chan struct{})
		h.wg.Go(func() { h.standalone(s, opened) })
		select {
		case <-opened:
		case <-ctx.Done():
		}
		return s, nil, nil
	}
	var se *statusError
	if errors.As(err, &se) && se.rpc == nil && (se.status == 400 || se.status == 404 || se.status == 405) {
		lg := newMux(h.core, legacyDialer(h))
		if _, lerr := lg.ready(ctx); lerr != nil {
			lg.shutdown()
			return nil, nil, h.errorf("no MCP server answers at the URL: server/discover: %v; initialize: %v; legacy HTTP+SSE: %v", probeErr, err, lerr)
		}
		h.log.Info("mcp upstream: the server has only the legacy HTTP+SSE transport")
		return nil, lg, nil
	}
	return nil, nil, h.errorf("initialize: %w (server/discover: %v)", err, probeErr)
}

// exchange sends a request of the Server's own and reads its response.
func (h *httpServer) exchange(ctx context.Context, s *session, method string, params any) (*jsonrpc.Message, http.Header, error) {
	id := h.nextID.Add(1)
	body, err := h.request(id, method, params, s.version)
	if err != nil {
		return nil, nil, err
	}
	resp, err := h.post(ctx, s, body, method, "", nil)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, resp.Header, h.refusal(resp)
	}
	defer resp.Body.Close()
	var answer *jsonrpc.Message
	_, _, err = h.readMessages(resp, func(m *jsonrpc.Message) bool {
		if got, ok := idOf(m.ID); ok && got == id && m.IsResponse() {
			answer = m
			return true
		}
		return false
	})
	if answer == nil {
		if err == nil {
			err = errors.New("the answer has no response")
		}
		return nil, resp.Header, h.errorf("%s: %w", method, err)
	}
	return answer, resp.Header, nil
}

// Call implements Server.
func (h *httpServer) Call(ctx context.Context, req *jsonrpc.Message, on func(Event)) (*jsonrpc.Message, error) {
	s, lg, err := h.ensure(ctx)
	if err != nil {
		return nil, err
	}
	if lg != nil {
		return lg.Call(ctx, req, on)
	}
	cl, err := h.newCall(ctx, req, on)
	if err != nil {
		return nil, err
	}
	defer cl.done()
	resp, err := h.run(cl, s, req)
	if lg, ok := err.(legacyErr); ok {
		cl.done()
		return lg.m.Call(ctx, req, on)
	}
	if err == nil && s.modern && req.Method == "tools/list" && resp.Result != nil {
		h.params.learn(resp.Result)
	}
	if err != nil && cancelsUpstream(err) && !h.current(s).modern {
		// 2026-07-28 takes the closed stream as the cancellation; earlier
		// eras want notifications/cancelled. The request may have reached
		// the server whatever stage the call ended at.
		s := h.current(s)
		h.wg.Go(func() {
			// Not h.base: a Close right after the call still cancels it
			// upstream (Close waits for this).
			ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
			defer cancel()
			if resp, err := h.post(ctx, s, cl.cancelled(err), "notifications/cancelled", "", nil); err == nil {
				drain(resp.Body, func() {})
			}
		})
	}
	return resp, err
}

// legacyErr reports that the server turned out to be a legacy one.
type legacyErr struct{ m *mux }

func (legacyErr) Error() string { return "legacy server" }

// current is the session in use, s when there is none now.
func (h *httpServer) current(s *session) *session {
	h.smu.Lock()
	defer h.smu.Unlock()
	if h.sess != nil {
		return h.sess
	}
	return s
}

// run sends the call and waits for its response. The request is sent by a
// goroutine of its own, so that the call's messages reach on while the POST
// waits for its answer: a server that answers with application/json sends
// them on the GET stream meanwhile, and may wait for a reply to one.
func (h *httpServer) run(cl *call, s *session, req *jsonrpc.Message) (*jsonrpc.Message, error) {
	h.wg.Go(func() { h.send(cl, s, req) })
	resp, err := cl.wait()
	var lg legacyErr
	if errors.As(err, &lg) {
		return nil, lg
	}
	return resp, err
}

// send POSTs the call's request (again on a new session when the server
// forgot the old one, or after 2026-07-28 header bindings were refreshed)
// and passes its answer to the call: the messages of a 2xx answer, a
// JSON-RPC error the server refused it with, or the failure.
func (h *httpServer) send(cl *call, s *session, req *jsonrpc.Message) {
	for attempt := 0; ; attempt++ {
		retry := h.post1(cl, s, req, attempt)
		if !retry || attempt >= 2 {
			return
		}
		var lg *mux
		var err error
		if s, lg, err = h.ensure(cl.ctx); err != nil {
			cl.cancel(err)
			return
		}
		if lg != nil {
			cl.cancel(legacyErr{lg})
			return
		}
	}
}

// post1 is one attempt of send; it reports whether to try again.
func (h *httpServer) post1(cl *call, s *session, req *jsonrpc.Message, attempt int) (retry bool) {
	body, err := cl.encode(req, s.version)
	if err != nil {
		cl.cancel(err)
		return false
	}
	var params http.Header
	if s.modern && req.Method == "tools/call" {
		params = h.params.headers(req.Params)
	}
	// The request lives until its answer is read to the end, not only
	// until the call has its response: cancelling it then would close a
	// connection the pool could keep.
	rctx, rcancel := context.WithCancel(context.WithoutCancel(cl.ctx))
	defer rcancel()
	stop := context.AfterFunc(cl.ctx, func() {
		if !cl.answered.Load() {
			rcancel()
		}
	})
	defer stop()
	hr, err := h.post(rctx, s, body, req.Method, nameOf(req.Method, req.Params), params)
	if err != nil {
		cl.cancel(h.errorf("%s: %w", req.Method, err))
		return false
	}
	if hr.StatusCode/100 != 2 {
		se := h.refusal(hr)
		switch {
		case se.status == http.StatusNotFound && s.id != "":
			h.expire(s)
			return true
		case se.rpc != nil && s.modern && se.rpc.Error.Code == codeUnsupportedVersion:
			h.expire(s)
			return true
		case se.rpc != nil && s.modern && se.rpc.Error.Code == codeHeaderMismatch && req.Method == "tools/call" && attempt == 0:
			if h.refreshParams(cl.ctx, s) {
				return true
			}
		}
		if se.rpc != nil {
			cl.answered.Store(true)
			cl.deliver(Event{Msg: se.rpc})
			return false
		}
		cl.cancel(h.errorf("%s: %w", req.Method, se))
		return false
	}
	h.follow(cl, s, hr, rctx, rcancel)
	return false
}

// MCP error codes this client acts on.
const (
	codeHeaderMismatch     = -32020
	codeUnsupportedVersion = -32022
)

// follow reads a call's answer until its response. In 2025-11-25 a stream
// that ends before the response, after an event with an id, is resumed with
// GET and Last-Event-ID (the server may close connections to poll).
func (h *httpServer) follow(cl *call, s *session, hr *http.Response, rctx context.Context, rcancel context.CancelFunc) {
	lastID := ""
	for resumes := 0; ; {
		var readErr error
		if hr != nil {
			id, stopped, err := h.readMessages(hr, func(m *jsonrpc.Message) bool { return h.about(cl, s, m) })
			if stopped {
				drain(hr.Body, rcancel)
				return
			}
			hr.Body.Close()
			hr, readErr = nil, err
			if id != "" && id != lastID {
				lastID, resumes = id, 0
			}
		}
		switch {
		case cl.ctx.Err() != nil:
			return
		case errors.Is(readErr, ErrTooLarge):
			cl.cancel(fmt.Errorf("%s: %w", cl.method, readErr))
			return
		case s.modern || lastID == "" || resumes >= 5:
			why := "the stream ended before the response"
			if readErr != nil {
				why += ": " + readErr.Error()
			}
			cl.cancel(h.errorf("%s: %s: %w", cl.method, why, errGone))
			return
		}
		if !h.sleep(cl.ctx, backoff(resumes)) {
			return
		}
		resumes++
		resp, err := h.get(rctx, s, lastID)
		if err != nil {
			continue
		}
		if resp.StatusCode/100 != 2 {
			se := h.refusal(resp)
			if se.status == http.StatusNotFound || se.status == http.StatusMethodNotAllowed {
				if se.status == http.StatusNotFound && s.id != "" {
					h.expire(s)
				}
				cl.cancel(h.errorf("%s: the stream ended before the response, and resuming it failed: %v: %w", cl.method, se, errGone))
				return
			}
			continue
		}
		hr = resp
	}
}

// about passes a message from a call's own stream to the call; it reports
// the call's response.
func (h *httpServer) about(cl *call, s *session, m *jsonrpc.Message) bool {
	switch {
	case m.IsResponse():
		if id, ok := idOf(m.ID); ok && id == cl.id {
			cl.answered.Store(true)
			cl.deliver(Event{Msg: m})
			return true
		}
	case m.IsRequest() && m.Method != "ping":
		cl.deliver(Event{Msg: m, ReplyTo: h.mint(s)(m, cl)})
		return false
	case m.Method == "notifications/progress":
		if tok, ok := tokenOf(m.Params); !ok || tok == cl.id {
			cl.deliver(Event{Msg: m})
			return false
		}
	case m.IsNotification():
		cl.deliver(Event{Msg: m})
		return false
	}
	h.route(m, false, h.mint(s))
	return false
}

// Notify implements Server.
func (h *httpServer) Notify(ctx context.Context, n *jsonrpc.Message) error {
	if !n.IsNotification() {
		return h.errorf("Notify takes a notification, got %s", describe(n))
	}
	switch n.Method {
	case "notifications/cancelled":
		return h.cancelByCaller(n)
	case "notifications/initialized":
		return nil
	}
	s, lg, err := h.ensure(ctx)
	if err != nil {
		return err
	}
	if lg != nil {
		return lg.Notify(ctx, n)
	}
	if s.modern && n.Method == "notifications/roots/list_changed" {
		return nil // removed in 2026-07-28
	}
	body, err := json.Marshal(&jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: n.Method, Params: n.Params})
	if err != nil {
		return err
	}
	resp, err := h.post(ctx, s, body, n.Method, "", nil)
	if err != nil {
		return h.errorf("%s: %w", n.Method, err)
	}
	if resp.StatusCode/100 != 2 {
		se := h.refusal(resp)
		if se.status == http.StatusNotFound && s.id != "" {
			h.expire(s)
		}
		return h.errorf("%s: %w", n.Method, se)
	}
	drain(resp.Body, func() {})
	return nil
}

// Reply implements Server. The answer goes to the session named in
// replyTo, whichever session this replica has.
func (h *httpServer) Reply(ctx context.Context, to string, resp *jsonrpc.Message) error {
	r, err := h.decodeReplyTo(to)
	if err != nil {
		return err
	}
	switch r.Kind {
	case "l":
		_, lg, err := h.ensure(ctx)
		if err != nil {
			return err
		}
		if lg == nil {
			return h.errorf("reply-to is for a legacy HTTP+SSE server, which this one is not (any more)")
		}
		return lg.Reply(ctx, to, resp)
	case "h":
	default:
		return h.errorf("reply-to is for another kind of server")
	}
	body, err := replyMessage(r, resp)
	if err != nil {
		return err
	}
	h.touchCall(r)
	hr, err := h.post(ctx, &session{id: r.Session, version: r.Version}, body, "", "", nil)
	if err != nil {
		return h.errorf("reply: %w", err)
	}
	if hr.StatusCode/100 != 2 {
		se := h.refusal(hr)
		if se.status == http.StatusNotFound {
			return h.errorf("reply: the session that asked has ended: %w", se)
		}
		return h.errorf("reply: %w", se)
	}
	drain(hr.Body, func() {})
	return nil
}

// Listen implements Server.
func (h *httpServer) Listen(ctx context.Context, on func(Event)) error {
	return h.listen(ctx, on, h.stream)
}

// stream keeps subscriptions/listen open while there are listeners in
// 2026-07-28; in earlier eras the standalone GET stream, open for the
// whole session, carries the unsolicited messages already.
func (h *httpServer) stream(ctx context.Context) {
	for failures := 0; ctx.Err() == nil; {
		s, lg, err := h.ensure(ctx)
		if lg != nil {
			lg.subscribe(ctx)
			return
		}
		if err == nil && !s.modern {
			<-ctx.Done()
			return
		}
		if err == nil {
			err = h.subscribe(ctx, s)
		}
		if err == nil {
			failures = 0
		} else {
			h.log.Debug("mcp upstream: subscriptions/listen", "err", err)
		}
		if !h.sleep(ctx, backoff(failures)) {
			return
		}
		failures++
	}
}

// standalone reads the GET stream of session s until the session ends or
// the Server closes, reopening it with Last-Event-ID when it ends; a server
// that offers none (405) leaves it closed. opened is closed once the first
// GET has been answered.
func (h *httpServer) standalone(s *session, opened chan struct{}) {
	once := sync.OnceFunc(func() { close(opened) })
	defer once()
	lastID := ""
	for failures := 0; !h.isClosed(); {
		resp, err := h.get(h.base, s, lastID)
		once()
		switch {
		case err != nil:
		case resp.StatusCode/100 != 2:
			se := h.refusal(resp)
			switch {
			case se.status == http.StatusMethodNotAllowed:
				h.log.Debug("mcp upstream: the server offers no GET stream")
				return
			case se.status == http.StatusNotFound:
				h.expire(s)
				return
			}
			err = se
		default:
			failures = 0
			var id string
			id, _, err = h.readMessages(resp, func(m *jsonrpc.Message) bool {
				h.route(m, true, h.mint(s))
				return false
			})
			resp.Body.Close()
			if id != "" {
				lastID = id
			}
		}
		if h.current(nil) != s {
			return // the session ended
		}
		if err != nil {
			h.log.Debug("mcp upstream: GET stream", "err", err)
		}
		if !h.sleep(h.base, backoff(failures)) {
			return
		}
		failures++
	}
}

// subscribe runs one 2026-07-28 subscriptions/listen until it ends.
func (h *httpServer) subscribe(ctx context.Context, s *session) error {
	id := h.nextID.Add(1)
	body, err := h.request(id, "subscriptions/listen", listenParams, s.version)
	if err != nil {
		return err
	}
	resp, err := h.post(ctx, s, body, "subscriptions/listen", "", nil)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return h.refusal(resp)
	}
	defer resp.Body.Close()
	_, _, err = h.readMessages(resp, func(m *jsonrpc.Message) bool {
		if m.IsResponse() {
			return true // the server ended the subscription
		}
		if m.IsNotification() {
			h.fromSubscription(Event{Msg: m})
		}
		return false
	})
	return err
}

// Info implements Server.
func (h *httpServer) Info(ctx context.Context) (Info, error) {
	s, lg, err := h.ensure(ctx)
	if err != nil {
		return Info{}, err
	}
	if lg != nil {
		return lg.Info(ctx)
	}
	return s.info, nil
}

// Close implements Server.
func (h *httpServer) Close() error {
	if !h.close() {
		return nil
	}
	h.smu.Lock()
	s, lg := h.sess, h.legacy
	h.smu.Unlock()
	if lg != nil {
		lg.shutdown()
	}
	h.wg.Wait()
	if s != nil && s.id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req := h.newRequest(ctx, http.MethodDelete, h.url, s, nil)
		req.Header.Del("Accept")
		if resp, err := h.client.Do(req); err == nil {
			drain(resp.Body, func() {})
		}
		cancel()
	}
	h.tr.CloseIdleConnections()
	return nil
}
