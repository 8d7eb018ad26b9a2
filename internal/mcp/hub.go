package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// note is one notification for the clients listening: from a server
// ("" from the gateway itself: the config changed).
type note struct {
	server string
	msg    *jsonrpc.Message
}

// sub is one client listening (a 2025-11-25 GET stream, a 2026-07-28
// subscriptions/listen).
type sub struct {
	c  *Caller
	ch chan note
}

// hub fans each server's notifications out to the clients listening on
// this replica (each server is listened to once per replica).
type hub struct {
	mu      sync.Mutex
	subs    map[*sub]struct{}
	closed  chan struct{}
	once    sync.Once
	closing sync.Once
}

func (h *hub) done() chan struct{} {
	h.once.Do(func() { h.closed = make(chan struct{}) })
	return h.closed
}

func (h *hub) add(c *Caller) *sub {
	s := &sub{c: c, ch: make(chan note, 64)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) remove(s *sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// publish gives n to every client whose route shows its server. A client
// that does not keep up loses notes (64 wait): list_changed ones repeat.
func (h *hub) publish(n note) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if n.server != "" && (s.c.bind.Route != "" && s.c.bind.Route != n.server || !s.c.uses(n.server)) {
			continue
		}
		select {
		case s.ch <- n:
		default:
		}
	}
}

func (h *hub) closeAll() { h.closing.Do(func() { close(h.done()) }) }

// listen runs e's listener until e.stop: the server's unsolicited
// notifications go to the hub (a list change also drops the server's name
// table), its requests outside any call are answered (roots/list: none;
// others refused); a listener that fails is restarted with backoff.
func (g *Gateway) listen(e *entry) {
	ctx, cancel := context.WithCancel(g.ctx)
	e.stop, e.done = cancel, make(chan struct{})
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(e.done)
		backoff := time.Second
		for {
			err := e.Server.Listen(ctx, func(ev Event) { g.onNote(e, ev) })
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if h := e.health.Load(); h == nil || h.ok {
					g.log.Warn("mcp server's notifications interrupted; listening again with backoff", slog.String("server", e.Name), slog.String("error", err.Error()))
				}
				e.setHealth(err)
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}()
}

func (g *Gateway) onNote(e *entry, ev Event) {
	m := ev.Msg
	if m == nil {
		return
	}
	if ev.ReplyTo != "" {
		if m.Method == "roots/list" {
			g.reply(e, ev, result(m.ID, map[string]any{"roots": []any{}}))
			return
		}
		g.refuse(e, ev, "no client call is running on the server's behalf")
		return
	}
	switch m.Method {
	case "notifications/tools/list_changed":
		e.tools.Store(nil)
	case "notifications/prompts/list_changed":
		e.prompts.Store(nil)
	}
	g.hub.publish(note{server: e.Name, msg: m})
}

// listChanged are the notifications a stream replays to a client that
// resumes it (Last-Event-ID): what it missed is unknown, each list may
// have changed.
var listChanged = []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"}

// get serves GET: a 2025-11-25 session's stream of server notifications.
// Resuming it (Last-Event-ID) replays a list_changed of each list, so a
// client that resumes on any replica refreshes what it may have missed.
func (g *Gateway) get(w http.ResponseWriter, r *http.Request, c *Caller) {
	o := newOut(w, r)
	if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("MCP-Protocol-Version") == versionModern {
		w.Header().Set("Allow", "POST")
		o.fail(nil, errorf(http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "MCP %s has no GET stream: POST subscriptions/listen", versionModern))
		return
	}
	s, _, err := g.session(r, c)
	if err != nil {
		o.fail(nil, err)
		return
	}
	if !o.canSSE {
		o.fail(nil, errorf(http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "GET opens an event stream: send Accept: text/event-stream"))
		return
	}
	if stream, seq, ok := parseEventID(r.Header.Get("Last-Event-ID")); ok {
		g.resume(r.Context(), o, s, stream, seq)
		return
	}
	var first []*jsonrpc.Message
	if r.Header.Get("Last-Event-ID") != "" {
		for _, m := range listChanged {
			first = append(first, &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: m})
		}
	}
	g.stream(r.Context(), o, c, first, true, func(n note) *jsonrpc.Message {
		if c.bind.Route == "" && n.server != "" {
			return shownNotification(n.server, n.msg)
		}
		return n.msg
	}, nil)
}

// delete serves DELETE: ends a 2025-11-25 session on this replica (its
// id then opens nowhere here until it expires; other replicas know
// nothing of it).
func (g *Gateway) delete(w http.ResponseWriter, r *http.Request, c *Caller) {
	o := newOut(w, r)
	s, _, err := g.session(r, c)
	if err != nil {
		o.fail(nil, err)
		return
	}
	g.ended.add(s.ID, s.Expires)
	w.WriteHeader(http.StatusNoContent)
}

// listenStream serves subscriptions/listen (2026-07-28): acknowledged with
// the notifications it will get, then the servers' notifications it asked
// for, each tagged with the subscription's id, until the client closes it
// (or the gateway stops: then the listen request's own response ends it).
func (g *Gateway) listenStream(ex *exchange) {
	var p struct {
		Notifications struct {
			Tools     bool `json:"toolsListChanged"`
			Prompts   bool `json:"promptsListChanged"`
			Resources bool `json:"resourcesListChanged"`
		} `json:"notifications"`
	}
	json.Unmarshal(ex.msg.Params, &p)
	want := map[string]bool{"notifications/tools/list_changed": p.Notifications.Tools,
		"notifications/prompts/list_changed": p.Notifications.Prompts, "notifications/resources/list_changed": p.Notifications.Resources}
	id := ex.msg.ID
	tag := func(m *jsonrpc.Message) *jsonrpc.Message {
		params, _ := parseObject(m.Params)
		meta, _ := parseObject(params.get("_meta"))
		meta.set(metaSubscription, id)
		params.set("_meta", meta.raw())
		c := *m
		c.Params = params.raw()
		return &c
	}
	// Acknowledged: the list changes asked for. Resource subscriptions are
	// not taken (left out of the acknowledgment, as the spec says).
	agreed := map[string]bool{}
	if p.Notifications.Tools {
		agreed["toolsListChanged"] = true
	}
	if p.Notifications.Prompts {
		agreed["promptsListChanged"] = true
	}
	if p.Notifications.Resources {
		agreed["resourcesListChanged"] = true
	}
	ack, _ := json.Marshal(map[string]any{"notifications": agreed})
	first := []*jsonrpc.Message{tag(&jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "notifications/subscriptions/acknowledged", Params: ack})}
	end := func() *jsonrpc.Message {
		meta, _ := json.Marshal(map[string]json.RawMessage{metaSubscription: id})
		return result(id, map[string]any{"resultType": "complete", "_meta": json.RawMessage(meta)})
	}
	g.stream(ex.r.Context(), ex.o, ex.c, first, false, func(n note) *jsonrpc.Message {
		if !want[n.msg.Method] {
			return nil
		}
		return tag(n.msg)
	}, end)
}

// stream serves a notification stream: first, then each note shown (nil:
// left out), keep-alive comments while idle, until ctx ends or the
// gateway closes (then end's message, when given, closes it). ids numbers
// the events (the 2025-11-25 stream, resumable).
func (g *Gateway) stream(ctx context.Context, o *out, c *Caller, first []*jsonrpc.Message, ids bool, show func(note) *jsonrpc.Message, end func() *jsonrpc.Message) {
	s := g.hub.add(c)
	defer g.hub.remove(s)
	o.mu.Lock()
	o.sse = true
	o.commit("text/event-stream", http.StatusOK)
	o.rc.Flush()
	o.mu.Unlock()
	n := 0
	send := func(m *jsonrpc.Message) bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		if ids {
			n++
			if _, err := o.w.Write([]byte("id: " + strconv.Itoa(n) + "\n")); err != nil {
				return false
			}
		}
		return o.writeEvent(m, false) == nil
	}
	for _, m := range first {
		if !send(m) {
			return
		}
	}
	keep := time.NewTicker(g.keep)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.hub.done():
			if end != nil {
				o.reply(end())
			}
			return
		case nt := <-s.ch:
			if m := show(nt); m != nil && !send(m) {
				return
			}
		case <-keep.C:
			if o.keepAlive() != nil {
				return
			}
		}
	}
}

// resume serves a GET resuming a POST stream of the session (Last-Event-ID
// "<stream>.<seq>"): the stream's events after seq, then the rest live
// until its response; the stream ends then. A stream the journal does not
// have for this session (another session's, expired, over the journal's
// bound) is an empty stream that ends at once: a 404 would tell the client
// that its session is gone, and no event of another stream is replayed.
func (g *Gateway) resume(ctx context.Context, o *out, s Session, stream string, after int) {
	o.mu.Lock()
	o.sse = true
	o.commit("text/event-stream", http.StatusOK)
	o.rc.Flush()
	o.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { // keep-alive comments while the call is quiet
		keep := time.NewTicker(g.keep)
		defer keep.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-keep.C:
				if o.keepAlive() != nil {
					cancel()
					return
				}
			}
		}
	})
	err := g.journal.Follow(ctx, journalKey(s.ID, stream), after, func(seq int, data []byte) bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		b := make([]byte, 0, len(data)+72)
		b = append(b, "id: "+stream+"."+strconv.Itoa(seq)+"\nevent: message\ndata: "...)
		b = append(b, data...)
		b = append(b, "\n\n"...)
		if _, err := o.w.Write(b); err != nil {
			return false
		}
		return o.rc.Flush() == nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		g.log.Debug("mcp stream not resumed", slog.String("stream", stream), slog.String("error", err.Error()))
	}
}
