package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"github.com/streamgate/streamgate/internal/keypool"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/route"
	"github.com/streamgate/streamgate/internal/usage"
)

// reqInfo is what the access line says about a request; handlers fill it.
type reqInfo struct {
	id       string
	start    time.Time
	keyID    string
	model    string
	route    string
	attempts int
	hedged   bool
	// continuations of a stream cut mid-answer
	continuations int
	stream        bool
	outcome       string        // the usage entry's outcome
	status        int           // overrides the written status (499)
	ttft          time.Duration // 0: no first token (a non-stream, or a stream that failed before it)
	enc           relay.Encoder // the client's dialect when not OpenAI's (errors are written in it)
	in, out       int
	err           string
	// trace is the request's trace id when tracing is on (the client's,
	// from its traceparent, or a new one), sampled or not: the access line
	// carries it, so a log line leads to its trace and to the upstream's
	// logs, which got the same trace in their traceparent.
	trace trace.TraceID
}

type infoKey struct{}

func infoFrom(ctx context.Context) *reqInfo {
	if i, ok := ctx.Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{id: newRequestID(), start: time.Now()}
}

// ServeHTTP serves the gateway's routes with a request id on every answer
// and one access line per request (never the key: its name only).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.handlers.Add(1)
	defer g.handlers.Done()
	info := &reqInfo{id: requestID(r), start: time.Now()}
	w.Header().Set(HeaderRequestID, info.id)
	w.Header()[HeaderReplica] = g.replicaHdr // read-only, shared
	// An HTTP/1 request's body is unread until readBody reads it (HTTP/2
	// resets a stream whose body is left unread, and a "Connection: close"
	// there would end every stream of the connection).
	sw := &statusWriter{ResponseWriter: w, unread: r.ProtoMajor == 1 && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	if g.trusted != nil {
		// The copy's RemoteAddr becomes the client's address, for the
		// access line, the admin-key throttle and the dashboard's logs.
		if a, ok := g.trusted.client(r); ok {
			r.RemoteAddr = a
		}
	}
	if r.URL.Path == "/v1/chat/completions" {
		// What the mux would choose, without its frames under every stream.
		g.chat(sw, r)
	} else {
		g.mux.ServeHTTP(sw, r)
	}

	g.access(r, info, sw.status)
}

// access writes the request's access line. It is a function of its own,
// kept out of line, so that its attributes do not sit in the frame of the
// handler goroutine for the whole life of a stream (a smaller frame keeps a
// stream's goroutine stack at 8 KiB instead of 16 KiB).
//
//go:noinline
func (g *Gateway) access(r *http.Request, info *reqInfo, written int) {
	status := info.status
	if status == 0 {
		status = written
	}
	if status == 0 {
		status = http.StatusOK
	}
	// A failure the operator must see is a WARN: a 5xx, or a stream that
	// committed 200 and then ended with an error event. Client errors (4xx,
	// a client that went away) are the client's and stay INFO.
	level := slog.LevelInfo
	switch {
	case r.URL.Path == "/metrics" || r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
		level = slog.LevelDebug
	case status >= 500, status < 400 && info.err != "":
		level = slog.LevelWarn
	}
	if !g.log.Enabled(r.Context(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, 15)
	client := r.RemoteAddr // the client's address (trusted_proxies), else the peer's host:port
	if h, _, err := net.SplitHostPort(client); err == nil {
		client = h
	}
	attrs = append(attrs,
		slog.String("request_id", info.id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("client", client),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(info.start)),
	)
	if info.keyID != "" {
		attrs = append(attrs, slog.String("key", info.keyID))
	}
	if info.model != "" {
		ttft := slog.Duration("ttft", info.ttft)
		if info.ttft == 0 {
			// Not 0s: a non-stream has no first token, a failed stream had none.
			ttft = slog.String("ttft", "n/a")
		}
		attrs = append(attrs, slog.String("model", info.model), slog.Bool("stream", info.stream),
			slog.String("route", info.route), slog.Int("attempts", info.attempts), ttft,
			slog.Int("tokens_in", info.in), slog.Int("tokens_out", info.out))
	}
	if info.hedged {
		attrs = append(attrs, slog.Bool("hedged", true))
	}
	if info.continuations > 0 {
		attrs = append(attrs, slog.Int("continuations", info.continuations))
	}
	if info.outcome != "" && info.outcome != usage.OutcomeOK {
		attrs = append(attrs, slog.String("outcome", info.outcome))
	}
	if info.err != "" {
		attrs = append(attrs, slog.String("error", info.err))
	}
	if info.trace.IsValid() {
		attrs = append(attrs, slog.String("trace_id", info.trace.String()))
	}
	g.log.LogAttrs(r.Context(), level, "request", attrs...)
}

// requestID echoes a client's X-Request-Id when it is short and printable,
// else makes a new one.
func requestID(r *http.Request) string {
	id := r.Header.Get(HeaderRequestID)
	if id == "" || len(id) > 128 {
		return newRequestID()
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return newRequestID()
		}
	}
	return id
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// statusWriter remembers the status written. It implements Unwrap so that
// http.ResponseController (used by the SSE writer) still reaches Flush. A
// reply written while the request's body is unread (see readBody) is the
// connection's last (closeUnread).
type statusWriter struct {
	http.ResponseWriter
	status int
	unread bool // the request has a body not yet read to its end
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if w.unread {
			closeUnread(w.ResponseWriter)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		if w.unread {
			closeUnread(w.ResponseWriter)
		}
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// models serves GET /v1/models: the models the key may use, in config
// order, by their names (not their aliases: a glob is no model id).
func (g *Gateway) models(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	infoFrom(r.Context()).keyID = p.KeyID
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		g.writeError(w, r, &methodError{allow: "GET"})
		return
	}
	list := api.ModelList{Object: "list", Data: []api.Model{}}
	for _, m := range g.cur().cfg.Models {
		if p.Allowed(m.Name) {
			list.Data = append(list.Data, api.Model{ID: m.Name, Object: "model", Created: g.created, OwnedBy: "streamgate"})
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// model serves GET /v1/models/{id}: one model the key may use (by its
// name or an alias), else 404.
func (g *Gateway) model(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	infoFrom(r.Context()).keyID = p.KeyID
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		g.writeError(w, r, &methodError{allow: "GET"})
		return
	}
	// An alias resolves as a request's model does, and is answered under
	// the id asked (as OpenAI answers an alias such as gpt-4o): a client
	// checking its default model finds it.
	id := r.PathValue("id")
	if m, ok := g.cur().cfg.Resolve(id); ok && p.Allowed(m.Name) {
		writeJSON(w, http.StatusOK, api.Model{ID: id, Object: "model", Created: g.created, OwnedBy: "streamgate"})
		return
	}
	// A model the key may not use is as absent as one not configured.
	g.writeError(w, r, unknownModel(id))
}

func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		g.writeError(w, r, &methodError{allow: "GET"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the config is loaded and the usage store answers its ping.
func (g *Gateway) readyz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		g.writeError(w, r, &methodError{allow: "GET"})
		return
	}
	// The ledger: unreachable is degraded (records wait in memory and the
	// replica serves), unreachable with a full buffer cannot serve.
	ledger, why := g.ledgerState(r.Context())
	g.noteLedger(r.Context(), ledger, why)
	if ledger == "down" {
		g.notReady(w, why)
		return
	}
	// Routes are detail, not readiness: every replica shares the upstreams,
	// so taking this one out of a load balancer would not help. A model
	// whose routes all have their circuit open makes the status "degraded".
	status := "ready"
	reasons := []string{}
	if ledger != "ok" {
		status = "degraded"
		reasons = append(reasons, why)
	}
	routes := map[string]map[string]string{}
	st := g.cur()
	all, upstreams := g.routeStatesNow()
	var unreachable []string // models none of whose routes' upstreams answered
	for _, m := range st.cfg.Models {
		rs := st.routes[m.Name]
		if rs == nil {
			continue
		}
		states := map[string]string{}
		down := len(rs.targets) > 0
		for _, t := range rs.targets {
			states[t.name] = all[t.name]
			down = down && all[t.name] == probeUnreachable
		}
		routes[m.Name] = states
		if !rs.set.Ready() {
			status = "degraded"
		}
		if down {
			status = "degraded"
			unreachable = append(unreachable, m.Name)
		}
	}
	if len(unreachable) > 0 {
		reasons = append(reasons, "no upstream of "+strings.Join(unreachable, ", ")+" answered the start-up probe (see upstreams)")
	}
	// Rate limits: shared through Redis, or counted by this replica alone
	// (no redis: configured, or Redis unreachable: the gateway keeps
	// serving with local limits).
	limits := "local"
	if rl, ok := g.rl.(interface{ Degraded() (bool, string) }); ok {
		limits = "redis"
		if down, why := rl.Degraded(); down {
			limits = "local (redis unreachable: " + why + ")"
		}
	}
	body := map[string]any{"status": status, "replica": g.replica, "ledger": ledger, "routes": routes, "upstreams": upstreams, "rate_limits": limits}
	if len(reasons) > 0 {
		body["reason"] = strings.Join(reasons, "; ")
	}
	writeJSON(w, http.StatusOK, body)
}

// adminRoutes serves GET /admin/routes: each model's strategy and affinity
// and each route's live state (circuit, in flight, failures, first-token
// latency), with its provider's keys when the provider has a pool
// (api_keys: in flight, limits and this replica's use, benched, disabled;
// never a secret).
func (g *Gateway) adminRoutes(w http.ResponseWriter, r *http.Request) {
	type routeState struct {
		route.Snapshot
		Keys []keypool.KeyState `json:"keys,omitempty"`
	}
	type model struct {
		Name     string       `json:"name"`
		Strategy string       `json:"strategy"`
		Affinity string       `json:"affinity"`
		Epsilon  float64      `json:"affinity_epsilon,omitempty"`
		Routes   []routeState `json:"routes"`
	}
	out := struct {
		Models []model `json:"models"`
	}{Models: []model{}}
	st := g.cur()
	for _, m := range st.cfg.Models {
		rs := st.routes[m.Name]
		if rs == nil {
			continue
		}
		mm := model{Name: m.Name, Strategy: rs.set.Strategy(), Affinity: "off"}
		if rs.aff != nil {
			mm.Affinity, mm.Epsilon = rs.aff.mode.String(), rs.aff.set.Epsilon()
		}
		for _, t := range rs.targets {
			st := routeState{Snapshot: t.rt.Snapshot()}
			if t.keys != nil {
				st.Keys = t.keys.pool.Snapshot(nil)
			}
			mm.Routes = append(mm.Routes, st)
		}
		out.Models = append(out.Models, mm)
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, errorJSON(api.NewError("server_error", "", "", "encode response: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
