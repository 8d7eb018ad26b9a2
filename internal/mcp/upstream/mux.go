package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// A link is one connection that carries every message both ways: a stdio
// process, or a legacy server's SSE stream with its POST endpoint.
type link interface {
	// send writes one encoded message.
	send(ctx context.Context, msg []byte) error
	// replyTo fills in what a ReplyTo of this link carries besides the id.
	replyTo(r *replyTo)
	// close ends the link and waits until its goroutines are done.
	close()
}

// A dialer opens a link, whose messages it passes to deliver in order; it
// calls gone once, after the last message, when the link ends.
type dialer struct {
	kind  string // in errors and logs: "process", "stream"
	probe bool   // try server/discover (2026-07-28) before initialize
	dial  func(ctx context.Context, gen int64, deliver func(*jsonrpc.Message), gone func(error)) (link, error)
}

// mux is a Server over links that carry everything (stdio, legacy
// HTTP+SSE): one link at a time, reopened with backoff when it ends, with
// the handshake done anew on each.
type mux struct {
	*core
	d        dialer
	instance string // tells this Server's ReplyTos from another replica's
	start    sync.Once

	smu     sync.Mutex
	st      muxState
	changed chan struct{} // closed at each change of st
}

type muxState struct {
	link    link
	gen     int64
	version string
	info    Info
	up      bool
	// restarting: the link ended after it worked; calls wait for the
	// next one. Otherwise err, when set, fails calls at once (the last
	// start failed).
	restarting bool
	err        error
}

func newMux(c *core, d dialer) *mux {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	m := &mux{core: c, d: d, instance: hex.EncodeToString(nonce[:]), changed: make(chan struct{})}
	if c.reply == nil { // a legacy server's keeps its httpServer's Reply
		c.reply = m.Reply
	}
	return m
}

var _ Server = (*mux)(nil)

func (m *mux) set(st muxState) {
	m.smu.Lock()
	m.st = st
	close(m.changed)
	m.changed = make(chan struct{})
	m.smu.Unlock()
}

// ready starts the supervisor on first use and returns the working link,
// waiting for it while one starts.
func (m *mux) ready(ctx context.Context) (muxState, error) {
	m.start.Do(func() { m.wg.Go(m.run) })
	for {
		m.smu.Lock()
		st, ch := m.st, m.changed
		m.smu.Unlock()
		switch {
		case m.isClosed():
			return st, ErrClosed
		case st.up:
			return st, nil
		case st.err != nil && !st.restarting:
			return st, st.err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, ctx.Err()
		case <-m.closed:
		}
	}
}

// current reports whether gen is the working link.
func (m *mux) current(gen int64) bool {
	m.smu.Lock()
	defer m.smu.Unlock()
	return m.st.up && m.st.gen == gen
}

// run supervises the links: open, handshake, serve until the link ends,
// fail its calls, wait (100 ms doubling to 30 s; back to 100 ms after a
// link that lived a minute), open again — until Close.
func (m *mux) run() {
	failures := 0
	for gen := int64(1); ; gen++ {
		started := time.Now()
		gone := make(chan error, 1)
		l, err := m.d.dial(m.base, gen, func(msg *jsonrpc.Message) { m.incoming(gen, msg) }, func(err error) {
			select {
			case gone <- err:
			default:
			}
		})
		var st muxState
		if err == nil {
			st, err = m.handshake(l, gen, gone)
		}
		if m.isClosed() {
			if l != nil {
				l.close()
			}
			return
		}
		if err != nil {
			if l != nil {
				l.close()
			}
			m.set(muxState{err: err})
			wait := backoff(failures)
			failures++
			m.log.Warn("mcp upstream: start failed", "err", err, "retry_in", wait)
			if !m.sleep(m.base, wait) {
				return
			}
			continue
		}
		m.set(st)
		m.log.Info("mcp upstream: ready", "kind", m.d.kind, "protocol", st.version)
		var why error
		select {
		case why = <-gone:
		case <-m.closed:
			l.close()
			return
		}
		if why == nil {
			why = errors.New("ended")
		}
		lost := m.errorf("%s ended: %w: %w", m.d.kind, why, errGone)
		m.set(muxState{restarting: true, err: lost})
		l.close()
		m.failAll(lost, func(cl *call) bool { return cl.gen == gen })
		if time.Since(started) > time.Minute {
			failures = 0
		}
		wait := backoff(failures)
		failures++
		m.log.Warn("mcp upstream: "+m.d.kind+" ended; reopening", "err", why, "retry_in", wait)
		if !m.sleep(m.base, wait) {
			return
		}
	}
}

// probeTimeout bounds the server/discover probe: a legacy stdio server may
// never answer it.
const (
	cancelTimeout    = 5 * time.Second
	probeTimeout     = 5 * time.Second
	handshakeTimeout = 30 * time.Second
)

// handshake finds the era the link's server speaks: server/discover
// (2026-07-28) when the dialer probes, else or on failure initialize and
// notifications/initialized.
func (m *mux) handshake(l link, gen int64, gone <-chan error) (muxState, error) {
	ctx, cancel := context.WithTimeout(m.base, handshakeTimeout)
	defer cancel()
	st := muxState{link: l, gen: gen, up: true}
	if m.d.probe {
		pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
		resp, err := m.exchange(pctx, l, gen, "server/discover", struct{}{}, Version2026)
		pcancel()
		if err == nil && resp.Result != nil && modernResult(resp.Result) {
			st.version, st.info = Version2026, Info{ProtocolVersion: Version2026, Result: resp.Result}
			return st, nil
		}
		select {
		case err := <-gone:
			return st, m.errorf("%s ended during the handshake: %v", m.d.kind, err)
		default:
		}
	}
	resp, err := m.exchange(ctx, l, gen, "initialize", m.initParams(), "")
	if err != nil {
		return st, m.errorf("initialize: %w", err)
	}
	version, err := m.initialized(resp)
	if err != nil {
		return st, err
	}
	if err := l.send(ctx, notification("notifications/initialized", struct{}{})); err != nil {
		return st, m.errorf("notifications/initialized: %w", err)
	}
	st.version, st.info = version, Info{ProtocolVersion: version, Result: resp.Result}
	return st, nil
}

// initParams are initialize's params.
func (c *core) initParams() any {
	return map[string]any{"protocolVersion": Version2025, "capabilities": c.caps, "clientInfo": c.client}
}

// initialized checks an initialize response and returns the version.
func (c *core) initialized(resp *jsonrpc.Message) (string, error) {
	if resp.Error != nil {
		return "", c.errorf("initialize: the server answered %d %s", resp.Error.Code, resp.Error.Message)
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		return "", c.errorf("initialize: result: %v", err)
	}
	if !slices.Contains(legacyVersions, r.ProtocolVersion) {
		return "", c.errorf("initialize: the server speaks protocol version %q, which this gateway does not (it speaks %v)", r.ProtocolVersion, append([]string{Version2026}, legacyVersions...))
	}
	return r.ProtocolVersion, nil
}

// modernResult reports a server/discover result that offers 2026-07-28.
func modernResult(result json.RawMessage) bool {
	var r struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	return json.Unmarshal(result, &r) == nil && slices.Contains(r.SupportedVersions, Version2026)
}

// exchange sends a request of the Server's own on l and waits for its
// response.
func (m *mux) exchange(ctx context.Context, l link, gen int64, method string, params any, version string) (*jsonrpc.Message, error) {
	cl, err := m.newCall(ctx, &jsonrpc.Message{ID: json.RawMessage(`0`), Method: method}, nil)
	if err != nil {
		return nil, err
	}
	defer cl.done()
	cl.setGen(gen)
	body, err := m.request(cl.id, method, params, version)
	if err != nil {
		return nil, err
	}
	if err := l.send(cl.ctx, body); err != nil {
		return nil, err
	}
	return cl.wait()
}

// incoming routes a message from link gen.
func (m *mux) incoming(gen int64, msg *jsonrpc.Message) {
	m.route(msg, true, func(req *jsonrpc.Message, about *call) string {
		r := &replyTo{Kind: "p", ID: req.ID, Instance: m.instance + "." + strconv.FormatInt(gen, 10)}
		m.smu.Lock()
		if l := m.st.link; l != nil && m.st.gen == gen {
			l.replyTo(r)
		}
		m.smu.Unlock()
		if about != nil {
			r.Call = about.id
		}
		return r.encode()
	})
}

// Call implements Server.
func (m *mux) Call(ctx context.Context, req *jsonrpc.Message, on func(Event)) (*jsonrpc.Message, error) {
	st, err := m.ready(ctx)
	if err != nil {
		return nil, err
	}
	cl, err := m.newCall(ctx, req, on)
	if err != nil {
		return nil, err
	}
	defer cl.done()
	cl.setGen(st.gen)
	if !m.current(st.gen) {
		// The link ended between ready and the call's registration, whose
		// failure the supervisor may have missed.
		return nil, m.errorf("%s ended: %w", m.d.kind, errGone)
	}
	body, err := cl.encode(req, st.version)
	if err != nil {
		return nil, err
	}
	if err := st.link.send(cl.ctx, body); err != nil {
		if cl.ctx.Err() != nil {
			return nil, cl.err()
		}
		return nil, m.errorf("sending %s: %v: %w", req.Method, err, errGone)
	}
	resp, err := cl.wait()
	if err != nil && cancelsUpstream(err) && m.current(st.gen) {
		m.sendLater(st.link, cl.cancelled(err))
	}
	return resp, err
}

// sendLater sends a message of the Server's own without holding up the
// caller (a cancellation after its ctx ended).
func (m *mux) sendLater(l link, msg []byte) {
	m.wg.Go(func() {
		// Not m.base: a Close right after the call still sends it (Close
		// waits for this).
		ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
		defer cancel()
		if err := l.send(ctx, msg); err != nil {
			m.log.Debug("mcp upstream: sending failed", "err", err)
		}
	})
}

// Notify implements Server.
func (m *mux) Notify(ctx context.Context, n *jsonrpc.Message) error {
	if !n.IsNotification() {
		return m.errorf("Notify takes a notification, got %s", describe(n))
	}
	switch n.Method {
	case "notifications/cancelled":
		return m.cancelByCaller(n)
	case "notifications/initialized":
		return nil
	}
	st, err := m.ready(ctx)
	if err != nil {
		return err
	}
	if st.version >= Version2026 && n.Method == "notifications/roots/list_changed" {
		return nil // removed in 2026-07-28
	}
	b, err := json.Marshal(&jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: n.Method, Params: n.Params})
	if err != nil {
		return err
	}
	return st.link.send(ctx, b)
}

// cancelByCaller cancels the call a client's notifications/cancelled names.
func (c *core) cancelByCaller(n *jsonrpc.Message) error {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	if err := json.Unmarshal(n.Params, &p); err != nil || p.RequestID == nil {
		return c.errorf("notifications/cancelled without a requestId")
	}
	cl, err := c.byCallerID(p.RequestID)
	if cl != nil {
		cl.cancel(fmt.Errorf("cancelled by the client (%s): %w", p.Reason, context.Canceled))
	}
	return err
}

// Reply implements Server.
func (m *mux) Reply(ctx context.Context, to string, resp *jsonrpc.Message) error {
	r, err := m.decodeReplyTo(to)
	if err != nil {
		return err
	}
	st, err := m.ready(ctx)
	if err != nil {
		return err
	}
	if r.Kind != "p" && r.Kind != "l" {
		return m.errorf("reply-to is for another kind of server")
	}
	if r.Kind == "p" && r.Instance != m.instance+"."+strconv.FormatInt(st.gen, 10) {
		return m.errorf("the process that asked has exited, or runs on another replica: nothing waits for this answer")
	}
	b, err := replyMessage(r, resp)
	if err != nil {
		return err
	}
	m.touchCall(r)
	if r.Kind == "l" {
		if ls, ok := st.link.(interface {
			sendTo(ctx context.Context, endpoint string, msg []byte) error
		}); ok {
			return ls.sendTo(ctx, r.Endpoint, b)
		}
	}
	return st.link.send(ctx, b)
}

// Listen implements Server.
func (m *mux) Listen(ctx context.Context, on func(Event)) error {
	return m.listen(ctx, on, m.subscribe)
}

// subscribe keeps a 2026-07-28 subscriptions/listen open on each link
// while there are listeners; earlier eras' unsolicited messages arrive on
// the link anyway.
func (m *mux) subscribe(ctx context.Context) {
	for failures := 0; ctx.Err() == nil; {
		st, err := m.ready(ctx)
		if err != nil {
			if !m.sleep(ctx, backoff(failures)) {
				return
			}
			failures++
			continue
		}
		if st.version < Version2026 {
			<-ctx.Done()
			return
		}
		err = m.listenCall(ctx, st)
		if ctx.Err() != nil {
			return
		}
		m.log.Debug("mcp upstream: subscriptions/listen ended", "err", err)
		if !m.sleep(ctx, backoff(failures)) {
			return
		}
		failures++
	}
}

// listenParams opt in to every change notification a listener may want.
var listenParams = map[string]any{"notifications": map[string]bool{
	"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}}

// listenCall runs one subscriptions/listen on the link of st until it ends.
func (m *mux) listenCall(ctx context.Context, st muxState) error {
	cl, err := m.newSubscription(ctx, m.fromSubscription)
	if err != nil {
		return err
	}
	defer cl.done()
	cl.setGen(st.gen)
	body, err := m.request(cl.id, "subscriptions/listen", listenParams, st.version)
	if err != nil {
		return err
	}
	if err := st.link.send(cl.ctx, body); err != nil {
		return err
	}
	_, err = cl.wait()
	if err != nil && cancelsUpstream(err) && m.current(st.gen) {
		m.sendLater(st.link, cl.cancelled(err))
	}
	return err
}

// fromSubscription passes a subscription's notifications to the listeners
// (its acknowledgment is the Server's business).
func (c *core) fromSubscription(ev Event) {
	if ev.Msg.Method == "notifications/subscriptions/acknowledged" {
		return
	}
	c.broadcast(ev)
}

// Info implements Server.
func (m *mux) Info(ctx context.Context) (Info, error) {
	st, err := m.ready(ctx)
	return st.info, err
}

// Close implements Server.
func (m *mux) Close() error {
	if m.close() {
		m.shutdown()
	}
	return nil
}

// shutdown closes the link and waits for the Server's goroutines (after
// close).
func (m *mux) shutdown() {
	m.smu.Lock()
	l := m.st.link
	m.smu.Unlock()
	if l != nil {
		l.close()
	}
	m.wg.Wait()
}
