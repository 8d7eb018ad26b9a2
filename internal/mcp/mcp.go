// Package mcp is the gateway's MCP endpoint: POST/GET/DELETE /mcp (every
// server a key may use, names prefixed "server__") and /mcp/{server} (one
// server, names as it gives them), both MCP eras on one URL, told apart per
// request — 2025-11-25 sessions sealed into their ids (seal.go) so that any
// replica serves any session, their tools/call streams resumable with
// Last-Event-ID through a Journal (journal.go), 2026-07-28 stateless with
// its headers checked against the body. Each configured server is reached through a Server
// (package internal/mcp/upstream); the gateway key is the only credential a
// client sends, and nothing the client sent but the JSON-RPC message goes on.
// Every tools/call passes the key's allow-list and admission and ends as one
// ledger row (Governor), one log line, metrics and a span.
package mcp

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// Caller is who a request acts for, as the Governor authenticated it.
type Caller struct {
	// Key is the gateway key's name (never its secret); Team its team ("" none).
	Key, Team string
	// Allow reports whether the caller may use a tool, given its name as
	// /mcp shows it ("server__tool"; also asked with the full unshortened
	// name when that differs); nil allows every tool.
	Allow func(prefixedTool string) bool
	// Servers reports whether the caller may use any tool of a server: /mcp
	// aggregates those only; nil: every server.
	Servers func(server string) bool
	// RequestID is the HTTP request's id (the ledger's request_id).
	RequestID string
	// Data is the Governor's own (its principal), passed back to Admit.
	Data any

	bind Binding // set by the handler: the caller's key and the route
}

// CallerAllow returns a Caller's Allow and Servers for the globs of a key's
// mcp_tools (none: everything). A server is usable when some glob's text
// before its first '*' can begin one of its names.
func CallerAllow(globs []string) (allow, servers func(string) bool) {
	if len(globs) == 0 {
		return nil, nil
	}
	allow = AllowGlobs(globs)
	servers = func(s string) bool {
		p := s + Sep
		for _, g := range globs {
			lit, _, _ := strings.Cut(g, "*")
			if strings.HasPrefix(lit, p) || strings.HasPrefix(p, lit) {
				return true
			}
		}
		return false
	}
	return allow, servers
}

// allows reports whether c may call server's tool.
func (c *Caller) allows(server, tool string) bool {
	if c.Allow == nil {
		return true
	}
	shown := PrefixedName(server, tool)
	if c.Allow(shown) {
		return true
	}
	full := server + Sep + tool
	return full != shown && c.Allow(full)
}

func (c *Caller) uses(server string) bool { return c.Servers == nil || c.Servers(server) }

// Governor is the gateway's side of governance: who the key is, whether a
// call may run now, and the ledger.
type Governor interface {
	// Authenticate returns the caller of r's gateway key; an error is
	// answered by Options.WriteError (a 401).
	Authenticate(r *http.Request) (*Caller, error)
	// Admit counts one call of server's tool against c's rate limits and
	// reserves price against its budgets (across replicas where the
	// gateway shares them); settle is called once with what the call cost.
	// An error refuses the call; its message is shown to the client.
	Admit(ctx context.Context, c *Caller, server, tool string, price float64) (settle func(cost float64), err error)
	// Record books one tools/call: a ledger row.
	Record(ToolCall)
}

// Outcomes of a ToolCall (and of streamgate_mcp_tool_calls_total).
const (
	OutcomeOK         = "ok"          // the tool answered
	OutcomeToolError  = "tool_error"  // the tool answered with isError
	OutcomeError      = "error"       // the server answered a JSON-RPC error, or could not be reached
	OutcomeTimeout    = "timeout"     // the server went quiet past its timeout
	OutcomeTooLarge   = "too_large"   // the result was over the size limit
	OutcomeRejected   = "rejected"    // refused by the gateway: not allowed, rate limit, budget
	OutcomeClientGone = "client_gone" // the client went away first
)

// Outcomes lists every outcome.
var Outcomes = []string{OutcomeOK, OutcomeToolError, OutcomeError, OutcomeTimeout, OutcomeTooLarge, OutcomeRejected, OutcomeClientGone}

// ToolCall is one tools/call as the ledger books it.
type ToolCall struct {
	Caller *Caller
	// Server and Tool as the server names them; Name as /mcp shows it.
	Server, Tool, Name string
	Start              time.Time
	Duration           time.Duration
	Outcome            string
	// Status is the HTTP status the call stands for in the ledger: 200
	// answered, 403/429 refused, 499 client gone, 502 server error, 504 timeout.
	Status int
	// Price is what the call costs: the tool's price once it reached the server, else 0.
	Price float64
	Err   string
}

// ServerSpec is one configured server.
type ServerSpec struct {
	Name   string
	Server Server
	// ToolPrices are USD per call by tool name; "*" prices the rest.
	ToolPrices map[string]float64
}

func (s *ServerSpec) price(tool string) float64 {
	if p, ok := s.ToolPrices[tool]; ok {
		return p
	}
	return s.ToolPrices["*"]
}

// Options configure a Gateway. Governor and Sealer are required.
type Options struct {
	Servers  []ServerSpec // in config order
	Governor Governor
	Sealer   *Sealer
	// SessionTTL is how long a 2025-11-25 session id opens; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// WriteError answers a request refused before JSON-RPC (a wrong key);
	// nil: a plain JSON error with the status 401.
	WriteError func(http.ResponseWriter, *http.Request, error)
	Logger     *slog.Logger // nil: slog.Default()
	Tracer     trace.Tracer // nil: no spans
	Metrics    *Metrics     // nil: none
	// MaxBody bounds a POST body; 0 means 4 MiB.
	MaxBody int64
	// ReadBody reads a POST's body (the gateway's, with its limits and
	// deadline, marking it read so the connection stays open for the
	// stream); an error that is a *BodyError is answered with its status.
	// Nil: the body is read here, up to MaxBody.
	ReadBody func(http.ResponseWriter, *http.Request) ([]byte, error)
	// PageSize is the items per page of /mcp's lists; 0 means 1000.
	PageSize int
	// ListTimeout bounds each server's part of a /mcp list; a server that
	// takes longer is left out of that list (and logged). 0 means 10s.
	ListTimeout time.Duration
	// KeepAlive is the interval of comments on an idle notification
	// stream; 0 means 25s.
	KeepAlive time.Duration
	// Version is the gateway's version in its serverInfo.
	Version string
	// Journal keeps 2025-11-25 sessions' POST streams for resumption
	// (Last-Event-ID); nil: a MemoryJournal (resumed on this replica only).
	Journal Journal
	// ResumeGrace is how long a tools/call whose client's stream broke
	// runs on unless the client resumes it; 0 means DefaultResumeGrace.
	ResumeGrace time.Duration
}

// DefaultSessionTTL is how long a session id opens by default.
const DefaultSessionTTL = 24 * time.Hour

// Gateway serves /mcp and /mcp/{server}. Create it with New; Close it.
type Gateway struct {
	gov      Governor
	sealer   *Sealer
	ttl      time.Duration
	writeErr func(http.ResponseWriter, *http.Request, error)
	log      *slog.Logger
	tracer   trace.Tracer
	m        *Metrics
	maxBody  int64
	readBody func(http.ResponseWriter, *http.Request) ([]byte, error)
	pageSize int
	listTO   time.Duration
	keep     time.Duration
	version  string
	journal  Journal
	grace    time.Duration
	onDrop   func() // tests: called when a resumable call's client is gone

	servers atomic.Pointer[serverSet]
	hub     hub
	// tokenPrefix makes this process's progress tokens unique; tokens
	// counts them.
	tokenPrefix string
	tokens      atomic.Uint64
	// inflight cancels a session's request on this replica when its client
	// sends notifications/cancelled (key: session id + request id).
	inflight sync.Map
	ended    endedSessions
	// levels are the log levels sessions set on this replica (setLevel).
	levels levels

	ctx    context.Context // ends at Close: the servers' listeners
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // SetServers
}

// entry is one server with what the gateway learnt of it.
type entry struct {
	ServerSpec
	tools   atomic.Pointer[nameTable] // its tools by shown name, from its last list
	prompts atomic.Pointer[nameTable]
	instr   atomic.Pointer[string] // its instructions, once known
	stop    context.CancelFunc     // ends its listener
	done    chan struct{}
	health  atomic.Pointer[serverHealth]
}

type serverHealth struct {
	ok    bool
	err   string
	since time.Time
}

type serverSet struct {
	list  []*entry
	names map[string]*entry
}

func (s *serverSet) get(name string) *entry { return s.names[name] }

// New returns a Gateway over opts.Servers and starts listening to each for
// its notifications.
func New(opts Options) (*Gateway, error) {
	if opts.Governor == nil || opts.Sealer == nil {
		return nil, errors.New("mcp: a Governor and a Sealer are required")
	}
	g := &Gateway{gov: opts.Governor, sealer: opts.Sealer, writeErr: opts.WriteError, log: opts.Logger, tracer: opts.Tracer, m: opts.Metrics,
		ttl: cmp.Or(opts.SessionTTL, DefaultSessionTTL), maxBody: cmp.Or(opts.MaxBody, 4<<20), pageSize: cmp.Or(opts.PageSize, 1000),
		listTO: cmp.Or(opts.ListTimeout, 10*time.Second), keep: cmp.Or(opts.KeepAlive, 25*time.Second), version: cmp.Or(opts.Version, "dev"),
		journal: opts.Journal, grace: cmp.Or(opts.ResumeGrace, DefaultResumeGrace)}
	if g.journal == nil {
		g.journal = NewMemoryJournal()
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.writeErr == nil {
		g.writeErr = plainError
	}
	g.readBody = opts.ReadBody
	if g.readBody == nil {
		g.readBody = func(_ http.ResponseWriter, r *http.Request) ([]byte, error) { return readBody(r, g.maxBody) }
	}
	var p [4]byte
	rand.Read(p[:])
	g.tokenPrefix = "sg-" + hex.EncodeToString(p[:]) + "-"
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.hub.subs = map[*sub]struct{}{}
	if err := g.SetServers(opts.Servers); err != nil {
		g.cancel()
		return nil, err
	}
	return g, nil
}

// SetServers replaces the servers (a config reload): servers that stay
// (same name, same Server) keep their state, the others are started or
// closed; every client listening is told that the lists changed.
func (g *Gateway) SetServers(specs []ServerSpec) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.servers.Load()
	set := &serverSet{names: map[string]*entry{}}
	for _, s := range specs {
		if s.Name == "" || s.Server == nil || strings.Contains(s.Name, Sep) {
			return fmt.Errorf("mcp: server %q: a name without %q and a Server are required", s.Name, Sep)
		}
		if set.names[s.Name] != nil {
			return fmt.Errorf("mcp: server %q twice", s.Name)
		}
		var e *entry
		if old != nil {
			if o := old.get(s.Name); o != nil && o.Server == s.Server {
				e = o
				e.ToolPrices = s.ToolPrices
			}
		}
		if e == nil {
			e = &entry{ServerSpec: s}
			g.listen(e)
		}
		set.list = append(set.list, e)
		set.names[s.Name] = e
	}
	g.servers.Store(set)
	if old == nil {
		return nil
	}
	for _, o := range old.list {
		if set.names[o.Name] != o {
			g.stopEntry(o)
		}
	}
	for _, method := range []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"} {
		g.hub.publish(note{msg: &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: method}})
	}
	return nil
}

func (g *Gateway) stopEntry(e *entry) {
	e.stop()
	<-e.done
	if err := e.Server.Close(); err != nil {
		g.log.Warn("mcp server close", slog.String("server", e.Name), slog.String("error", err.Error()))
	}
}

// Close stops listening to the servers and closes them.
func (g *Gateway) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cancel()
	if set := g.servers.Swap(&serverSet{names: map[string]*entry{}}); set != nil {
		for _, e := range set.list {
			g.stopEntry(e)
		}
	}
	g.hub.closeAll()
	g.wg.Wait()
	return nil
}

// Drain ends the notification streams open (a 2026-07-28 listen with its
// closing response), as the server's shutdown begins: they would otherwise
// hold its drain for the whole grace period. Later streams end at once.
func (g *Gateway) Drain() { g.hub.closeAll() }

// Health reports each server's state as its listener last saw it, for
// the dashboard: ok, or the last error and since when.
func (g *Gateway) Health() []ServerHealth {
	set := g.servers.Load()
	out := make([]ServerHealth, 0, len(set.list))
	for _, e := range set.list {
		h := ServerHealth{Server: e.Name}
		if s := e.health.Load(); s != nil {
			h.Known, h.OK, h.Error, h.Since = true, s.ok, s.err, s.since
		}
		out = append(out, h)
	}
	return out
}

// ServerHealth is one server's state (Health).
type ServerHealth struct {
	Server string
	Known  bool // false until its listener connected or failed once
	OK     bool
	Error  string
	Since  time.Time
}

func (e *entry) setHealth(err error) {
	ok := err == nil
	if h := e.health.Load(); h != nil && h.ok == ok {
		return
	}
	s := &serverHealth{ok: ok, since: time.Now()}
	if err != nil {
		s.err = err.Error()
	}
	e.health.Store(s)
}

func plainError(w http.ResponseWriter, _ *http.Request, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": err.Error(), "type": "authentication_error"}})
	w.Write(b)
}

// ServeHTTP serves /mcp and /mcp/{server}.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, ok := strings.CutPrefix(r.URL.Path, "/mcp")
	if !ok || (route != "" && route[0] != '/') {
		http.NotFound(w, r)
		return
	}
	route = strings.TrimPrefix(route, "/")
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "POST, GET, DELETE")
		o := newOut(w, r)
		o.fail(nil, errorf(http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "method %s is not allowed on %s: POST a JSON-RPC message", r.Method, r.URL.Path))
		return
	}
	c, err := g.gov.Authenticate(r)
	if err != nil {
		g.writeErr(w, r, err)
		return
	}
	c.bind = Binding{Key: HashKey(c.Key), Route: route}
	if route != "" {
		if g.servers.Load().get(route) == nil || !c.uses(route) {
			o := newOut(w, r)
			o.fail(nil, errorf(http.StatusNotFound, jsonrpc.CodeInvalidRequest, "no MCP server %q for this key", route))
			return
		}
	}
	switch r.Method {
	case http.MethodGet:
		g.get(w, r, c)
	case http.MethodDelete:
		g.delete(w, r, c)
	default:
		g.post(w, r, c)
	}
}

// servers returns the entries c may use on its route, in config order.
func (g *Gateway) usable(c *Caller) []*entry {
	set := g.servers.Load()
	if c.bind.Route != "" {
		if e := set.get(c.bind.Route); e != nil {
			return []*entry{e}
		}
		return nil
	}
	out := make([]*entry, 0, len(set.list))
	for _, e := range set.list {
		if c.uses(e.Name) {
			out = append(out, e)
		}
	}
	return out
}

// levels are the log levels 2025-11-25 sessions set on this replica, until
// their ids expire (bounded as endedSessions is).
type levels struct {
	mu sync.Mutex
	m  map[[12]byte]level
}

type level struct {
	name string
	exp  time.Time
}

func (l *levels) set(id [12]byte, name string, exp time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[[12]byte]level{}
	}
	if len(l.m) >= maxEnded {
		now := time.Now()
		for k, v := range l.m {
			if !now.Before(v.exp) || len(l.m) >= maxEnded {
				delete(l.m, k)
			}
		}
	}
	l.m[id] = level{name, exp}
}

func (l *levels) get(id [12]byte) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[id]
	return v.name, ok
}

// endedSessions are the sessions DELETEd on this replica, until their ids
// expire (bounded: past the bound the oldest are forgotten).
type endedSessions struct {
	mu sync.Mutex
	m  map[[12]byte]time.Time
}

const maxEnded = 100_000

func (e *endedSessions) add(id [12]byte, exp time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[[12]byte]time.Time{}
	}
	if len(e.m) >= maxEnded {
		now := time.Now()
		for k, t := range e.m {
			if !now.Before(t) || len(e.m) >= maxEnded {
				delete(e.m, k)
			}
		}
	}
	e.m[id] = exp
}

func (e *endedSessions) has(id [12]byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.m[id]
	return ok
}
