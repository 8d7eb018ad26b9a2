// Package upstream is the MCP gateway as a client of one configured MCP
// server: Streamable HTTP in either protocol era (2026-07-28 stateless,
// 2025-11-25 sessions), the legacy HTTP+SSE transport (2024-11-05) where a
// server has only that, and supervised stdio processes. Callers speak
// method-level JSON-RPC; this package owns the era, the session, the ids and
// progress tokens the server sees, the idle timers and the size caps.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// Protocol versions this client speaks, newest first.
const (
	Version2026 = "2026-07-28"
	Version2025 = "2025-11-25"
)

// legacyVersions are the initialize-era versions a server may answer with.
var legacyVersions = []string{Version2025, "2025-06-18", "2025-03-26", "2024-11-05"}

// Defaults of Config's zero fields.
const (
	DefaultTimeout   = 10 * time.Minute
	DefaultMaxResult = 10 << 20
)

// Config is one configured server.
type Config struct {
	// Name names the server in errors and logs.
	Name string
	// URL is a Streamable HTTP endpoint (either era); a server that has
	// only the legacy HTTP+SSE transport is detected on fallback. Exactly
	// one of URL and Command is set.
	URL string
	// Command is a stdio server's argv, run supervised.
	Command []string
	// Env is extra environment for a stdio server; the rest of its
	// environment is PATH and HOME only.
	Env map[string]string
	// Headers are the only headers sent to an HTTP server besides the
	// protocol's own (Content-Type, Accept, Mcp-Session-Id,
	// MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*,
	// Last-Event-ID), which they may not name.
	Headers map[string]string
	// Timeout is the idle timeout of a call, reset by every message about
	// the call (progress); 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxResult caps one message from the server, in bytes, while it is
	// read: a larger result fails its call with ErrTooLarge. 0 means
	// DefaultMaxResult.
	MaxResult int
	// ClientInfo is the Implementation object (name, version) the gateway
	// declares to the server; nil means {"name":"streamgate","version":"1"}.
	ClientInfo json.RawMessage
	// Capabilities are the client capabilities the gateway declares in
	// initialize, and in 2026-07-28 requests that do not carry their own;
	// nil means DefaultCapabilities.
	Capabilities json.RawMessage
}

// DefaultCapabilities are declared to servers when Config.Capabilities is
// nil: the gateway relays elicitation, sampling and roots requests to its
// clients.
var DefaultCapabilities = json.RawMessage(`{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`)

var defaultClientInfo = json.RawMessage(`{"name":"streamgate","version":"1"}`)

// Server is a client of one MCP server, safe for concurrent use. It owns its
// connection(s) or process and the protocol era it negotiated with the
// server; callers speak method-level JSON-RPC and never see the server's
// ids.
type Server interface {
	// Call sends req, a request, and returns the server's final response
	// with req's id restored (the server sees an id of the Server's own,
	// and, when req carries one, a progress token of its own). Every
	// message the server sends about this request before the response —
	// progress and log notifications, server→client requests
	// (elicitation/create, sampling/createMessage, roots/list) — is passed
	// to on, in order, from the calling goroutine; progress notifications
	// carry req's own token, and only reach on when req asked for progress.
	// For server→client requests Event.ReplyTo is set, which Reply accepts
	// on any replica for an HTTP server; with on nil such requests are
	// refused to the server. On a stream that carries every call (stdio,
	// legacy HTTP+SSE, the GET stream of a 2025-11-25 server answering with
	// application/json), a log message or server request names no call: it
	// is taken to be about the one call in flight, and goes to Listen when
	// there are several. With application/json answers the last
	// notifications may also trail the response; they are then dropped.
	//
	// Call returns when the response arrives (an error response is a
	// response, not an error); when ctx ends (it then cancels the request
	// upstream and returns ctx.Err()); when no message about the call came
	// for the idle timeout (an error wrapping ErrTimeout); when a message
	// larger than Config.MaxResult arrives (ErrTooLarge); or when the
	// transport fails (a stdio process that died fails its calls at once).
	Call(ctx context.Context, req *jsonrpc.Message, on func(Event)) (*jsonrpc.Message, error)
	// Notify sends a client notification. notifications/cancelled naming
	// the id of a Call in flight cancels that call (as ending its ctx
	// does); notifications/initialized is the Server's own business and is
	// dropped, and so is a notification the server's era does not have.
	Notify(ctx context.Context, n *jsonrpc.Message) error
	// Reply delivers the client's response (result or error) to a
	// server→client request, named by the Event.ReplyTo it came with.
	Reply(ctx context.Context, replyTo string, resp *jsonrpc.Message) error
	// Listen passes the server's unsolicited messages (list_changed,
	// resources/updated, log messages, requests not tied to a call) to on
	// until ctx ends, then returns nil: a GET stream in 2025-11-25 (resumed
	// with Last-Event-ID), subscriptions/listen in 2026-07-28, the shared
	// stream for stdio and legacy servers. Streams that break are reopened.
	// Several Listens share one stream; a server that offers none leaves
	// Listen waiting for ctx.
	Listen(ctx context.Context, on func(Event)) error
	// Info is what the server said about itself (initialize result or
	// server/discover result). It connects if need be, and blocks until
	// known or ctx ends.
	Info(ctx context.Context) (Info, error)
	// Close ends the session (DELETE for a 2025-11-25 session), kills a
	// stdio server's process group, fails the calls in flight with
	// ErrClosed, and waits for the Server's goroutines. Later calls return
	// ErrClosed.
	Close() error
}

// Event is a message from the server about a call, or an unsolicited one.
type Event struct {
	Msg *jsonrpc.Message
	// ReplyTo is set for a server→client request: an opaque string that
	// Reply accepts (it carries the upstream session and the server's
	// request id). Msg.ID is then the server's own id.
	ReplyTo string
}

// Info is what a server said about itself.
type Info struct {
	// ProtocolVersion is the version in use: 2026-07-28 for a stateless
	// server, else the one initialize negotiated.
	ProtocolVersion string
	// Result is the initialize or server/discover result as sent.
	Result json.RawMessage
}

var (
	// ErrTimeout is wrapped by the error of a call idle for its timeout.
	ErrTimeout = errors.New("mcp upstream: call idle timeout")
	// ErrTooLarge is wrapped by the error of a call whose result is larger
	// than Config.MaxResult.
	ErrTooLarge = errors.New("mcp upstream: message larger than the limit")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("mcp upstream: server closed")
)

// Open returns a client of the server cfg describes. It is lazy: nothing is
// dialled or started until the first use. log may be nil (nothing logged).
func Open(cfg Config, log *slog.Logger) (Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := newCore(cfg, log.With("mcp_server", cfg.Name))
	if len(cfg.Command) > 0 {
		return newMux(c, stdioDialer(c)), nil
	}
	return newHTTP(c)
}

// protocolHeaders may not be set through Config.Headers, nor may headers
// about the connection itself.
var reservedHeaders = []string{
	"content-type", "accept", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
	"last-event-id", "host", "content-length", "transfer-encoding", "connection", "upgrade", "te",
	"trailer", "keep-alive", "proxy-connection",
}

func (cfg *Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("mcp server %q: "+format, append([]any{cfg.Name}, a...)...))
	}
	if cfg.Name == "" {
		bad("name is empty")
	}
	switch {
	case cfg.URL != "" && len(cfg.Command) > 0:
		bad("both url and command are set; a server is one or the other")
	case cfg.URL == "" && len(cfg.Command) == 0:
		bad("neither url nor command is set")
	case cfg.URL != "":
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("url %q is not an http(s) URL with a host", cfg.URL)
		}
		if len(cfg.Env) > 0 {
			bad("env is set but the server is not a command: it would not be used")
		}
	default:
		if cfg.Command[0] == "" {
			bad("command's program is empty")
		}
		if len(cfg.Headers) > 0 {
			bad("headers are set but the server is a command, not a URL: they would not be used")
		}
		for k := range cfg.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				bad("env name %q is not a valid variable name", k)
			}
		}
	}
	for k, v := range cfg.Headers {
		lk := strings.ToLower(k)
		if slices.Contains(reservedHeaders, lk) || strings.HasPrefix(lk, "mcp-param-") {
			bad("header %q is the protocol's own and cannot be configured", k)
		} else if !token(k) {
			bad("header name %q is not a valid HTTP field name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			bad("header %q has a value with a line break or NUL", k)
		}
	}
	if cfg.Timeout < 0 {
		bad("timeout %v is negative", cfg.Timeout)
	}
	if cfg.MaxResult < 0 {
		bad("max result %d is negative", cfg.MaxResult)
	}
	for what, raw := range map[string]json.RawMessage{"client info": cfg.ClientInfo, "capabilities": cfg.Capabilities} {
		if raw != nil && (!json.Valid(raw) || raw[0] != '{') {
			bad("%s is not a JSON object", what)
		}
	}
	return errors.Join(errs...)
}

// token reports an RFC 9110 field name (1*tchar).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// core is what every transport shares: the configuration, the id counter,
// the calls in flight, the listeners and the goroutines to wait for.
type core struct {
	cfg     Config
	log     *slog.Logger
	timeout time.Duration
	max     int
	caps    json.RawMessage
	client  json.RawMessage
	nextID  atomic.Int64
	wg      sync.WaitGroup

	closeOnce sync.Once
	closed    chan struct{}
	// base is the context of the Server's own work (handshakes, streams,
	// cancellations sent upstream); it ends at Close.
	base context.Context
	stop context.CancelFunc

	mu        sync.Mutex
	calls     map[int64]*call
	listeners map[*listener]struct{}
	listenEnd context.CancelFunc // stops the transport's stream when the last listener leaves

	// reply is the transport's Reply, for answers of the Server's own
	// (ping, refusals).
	reply func(ctx context.Context, replyTo string, resp *jsonrpc.Message) error
}

func newCore(cfg Config, log *slog.Logger) *core {
	c := &core{cfg: cfg, log: log, timeout: cfg.Timeout, max: cfg.MaxResult, caps: cfg.Capabilities,
		client: cfg.ClientInfo, closed: make(chan struct{}), calls: map[int64]*call{}, listeners: map[*listener]struct{}{}}
	c.base, c.stop = context.WithCancel(context.Background())
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.max == 0 {
		c.max = DefaultMaxResult
	}
	if c.caps == nil {
		c.caps = DefaultCapabilities
	}
	if c.client == nil {
		c.client = defaultClientInfo
	}
	return c
}

func (c *core) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// limits bound one message from the server.
func (c *core) limits() jsonrpc.Limits {
	return jsonrpc.Limits{MaxBytes: c.max, MaxDepth: 512}
}

// errorf names the server in an error.
func (c *core) errorf(format string, a ...any) error {
	return fmt.Errorf("mcp server %q: "+format, append([]any{c.cfg.Name}, a...)...)
}

// call returns the call in flight with server-side id id, or nil.
func (c *core) call(id int64) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// only returns the one call in flight, or nil when there are none or
// several: the call a message of a shared stream that names none is about.
func (c *core) only() *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var one *call
	for _, cl := range c.calls {
		if cl.long {
			continue // a subscription is not a call a request can be about
		}
		if one != nil {
			return nil
		}
		one = cl
	}
	return one
}

// failAll ends every call in flight that matches with err.
func (c *core) failAll(err error, match func(*call) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.calls {
		if match == nil || match(cl) {
			cl.cancel(err)
		}
	}
}

// byCallerID finds the call in flight whose caller's id is id, for
// notifications/cancelled.
func (c *core) byCallerID(id json.RawMessage) (*call, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found *call
	for _, cl := range c.calls {
		if string(cl.callerID) == string(id) {
			if found != nil {
				return nil, c.errorf("notifications/cancelled names request id %s, which more than one call in flight has; end the call's context instead", id)
			}
			found = cl
		}
	}
	return found, nil
}

// listener is one Listen.
type listener struct{ on func(Event) }

// broadcast passes an unsolicited message to every listener.
func (c *core) broadcast(ev Event) {
	c.mu.Lock()
	ls := make([]*listener, 0, len(c.listeners))
	for l := range c.listeners {
		ls = append(ls, l)
	}
	c.mu.Unlock()
	for _, l := range ls {
		l.on(ev)
	}
}

func (c *core) hasListeners() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.listeners) > 0
}

// listen registers on until ctx ends; the first listener starts stream (run
// until its context ends), the last one to leave stops it.
func (c *core) listen(ctx context.Context, on func(Event), stream func(context.Context)) error {
	if c.isClosed() {
		return ErrClosed
	}
	l := &listener{on: on}
	c.mu.Lock()
	c.listeners[l] = struct{}{}
	if len(c.listeners) == 1 {
		sctx, cancel := context.WithCancel(c.base)
		c.listenEnd = cancel
		c.wg.Go(func() {
			defer cancel()
			stream(sctx)
		})
	}
	c.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-c.closed:
	}
	c.mu.Lock()
	delete(c.listeners, l)
	if len(c.listeners) == 0 && c.listenEnd != nil {
		c.listenEnd()
		c.listenEnd = nil
	}
	c.mu.Unlock()
	if ctx.Err() == nil {
		return ErrClosed
	}
	return nil
}

// close marks the core closed and fails every call in flight.
func (c *core) close() bool {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.stop()
		c.failAll(ErrClosed, nil)
	})
	return first
}

// sleep waits d, or until ctx ends or the core closes; it reports whether
// the wait was whole.
func (c *core) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-c.closed:
	}
	return false
}

// backoff is the wait before the n-th retry (from 0): 100 ms doubling to 30 s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for ; n > 0 && d < 30*time.Second; n-- {
		d *= 2
	}
	return min(d, 30*time.Second)
}
