// Package gateway is the HTTP front of streamgate: the routes table, the chat
// completions handler that walks a request through authenticate → validate →
// plan routes → open upstream (fallback) → commit → relay → record usage, the
// one function that maps an error to an HTTP status, and graceful shutdown.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/admit"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/budget"
	_ "github.com/streamgate/streamgate/internal/cloud" // registers kinds bedrock, vertex, azure
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/dashboard"
	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/keyshare"
	"github.com/streamgate/streamgate/internal/mcp"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	_ "github.com/streamgate/streamgate/internal/provider/anthropic" // registers kind anthropic
	_ "github.com/streamgate/streamgate/internal/provider/gemini"    // registers kind gemini
	_ "github.com/streamgate/streamgate/internal/provider/openai"    // registers kind openai
	"github.com/streamgate/streamgate/internal/quota"
	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/respstore"
	"github.com/streamgate/streamgate/internal/route"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/sqldb"
	"github.com/streamgate/streamgate/internal/usage"
)

// Response headers the gateway sets.
const (
	HeaderRequestID = "X-Request-Id"
	HeaderRoute     = "X-Streamgate-Route"    // "provider/model" that served the request
	HeaderAttempts  = "X-Streamgate-Attempts" // upstream attempts made
)

// DefaultIdleTimeout closes client keep-alive connections idle this long,
// so idle clients do not hold connections (and their buffers) forever.
const DefaultIdleTimeout = 120 * time.Second

// DefaultMaxBody is the request body limit when the config sets none.
const DefaultMaxBody = 10 << 20

// Options configure a Gateway. Only Config is required.
type Options struct {
	// Config is the validated configuration; the Gateway does not modify it.
	Config *config.Config
	// Recorder receives one usage.Entry per chat completion request; nil discards them.
	Recorder usage.Recorder
	// Registry receives the gateway's metrics and is served at /metrics; nil
	// means a fresh registry.
	Registry *prometheus.Registry
	// Logger writes one access line per request; nil means slog.Default().
	Logger *slog.Logger
	// Ping reports whether the usage store is reachable, for /readyz; nil means always ready.
	Ping func(context.Context) error
	// Providers overrides or adds providers by name (tests, embedding); a
	// provider named here is not built from the config.
	Providers map[string]provider.Provider
	// KeepAlive is the interval of keep-alive comments while waiting for a
	// first token and in long gaps mid-stream; 0 means the config's keepalive,
	// negative sends none.
	KeepAlive time.Duration
	// IdleTimeout closes client keep-alive connections idle for longer; 0
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Sim configures the in-process upstream of "kind: sim" providers; the
	// zero value is the simulator's defaults.
	Sim sim.Options
	// Spent is what a key spent since a time, from the usage ledger: a
	// key's budget starts each period from it. Nil: from zero.
	Spent budget.SpentFunc
	// SpentTeam is what a team's keys spent since a time (the ledger's
	// team column); SpentModel what a key spent on one model. Nil: from zero.
	SpentTeam  budget.SpentFunc
	SpentModel quota.ModelSpentFunc
	// KeyStore holds the API keys kept in the database (`streamgate keys`,
	// /admin/keys): looked up, through a one-second cache, for a secret that
	// is none of the config's keys. Nil: the config's keys only, and
	// /admin/keys answers 404.
	KeyStore *keys.Store
	// Tracer makes a span per chat, messages and embeddings request and one
	// per upstream attempt (trace.go); nil: no tracing, and no cost.
	Tracer trace.Tracer
	// Report totals the usage ledger (usage.Report on its store), for the
	// dashboard's cost of the day and GET /admin/usage; nil: the dashboard
	// shows no cost and /admin/usage answers 404 usage_ledger_off.
	Report func(context.Context, usage.ReportQuery) ([]usage.ReportRow, error)
	// Search pages the ledger's request log (usage.Search on its store),
	// for GET /admin/requests and the dashboard; nil: both answer 404
	// usage_ledger_off.
	Search dashboard.SearchFunc
	// Series totals the ledger per time bucket (usage.Series on its
	// store): the dashboard's history beyond the hour it keeps; nil: none.
	Series dashboard.SeriesFunc
	// ConnState is called as each client connection changes state, as
	// http.Server.ConnState is (serve counts and closes the open
	// connections with it); nil: not called.
	ConnState func(net.Conn, http.ConnState)
	// RedisCallTimeout bounds one Redis admission call (the config's redis:);
	// 0 means redisguard.CallTimeout (50 ms), past which the replica counts
	// alone. Tests of sharing between replicas on a loaded machine set more.
	RedisCallTimeout time.Duration
	// Throttle counts wrong admin keys per client, for the admin API and
	// the dashboard; nil: a new auth.Throttle.
	Throttle *auth.Throttle
	// Responses keeps the /v1/responses responses asked to be stored and
	// serves previous_response_id, item_reference and GET/DELETE
	// /v1/responses/{id}; nil: nothing is stored (store is echoed false,
	// previous_response_id and item_reference answer 400, a GET 404).
	Responses *respstore.Store
	// Reload reads the config file again, validated (config.Load), for
	// POST /admin/reload and ReloadFile (serve's SIGHUP); File names it in
	// logs and answers. Nil: the config has no file (the embedded
	// default), and a reload is refused with ErrNoConfigFile.
	Reload func() (*config.Config, error)
	File   string
}

// Gateway serves the HTTP API. Create it with New, serve it with Serve (or
// as an http.Handler), and Close it to stop in-process upstreams.
type Gateway struct {
	// st is what the config decides that a reload replaces (state); a
	// request loads it once, in admit, and keeps it to its end.
	st   atomic.Pointer[state]
	rec  usage.Recorder
	reg  *prometheus.Registry
	m    *metrics.Metrics
	log  *slog.Logger
	ping func(context.Context) error
	// replica names this replica (config replica, else the host name);
	// replicaHdr is it as a header value, shared by every response.
	replica    string
	replicaHdr []string
	// trusted are the config's trusted_proxies; nil: the peer is the client.
	trusted trustedProxies
	// readyDegraded is streamgate_ready_degraded; ledgerBad whether the
	// last /readyz found the ledger unreachable (a change is logged once).
	readyDegraded prometheus.Gauge
	ledgerBad     atomic.Bool
	// throttle counts wrong admin keys per client, for the admin API and
	// the dashboard's login alike.
	throttle *auth.Throttle
	// given are Options.Providers; tracer Options.Tracer; simOpts
	// Options.Sim and simBase the in-process simulator's address once
	// one runs ("" before): every state builds on them.
	given   map[string]provider.Provider
	tracer  trace.Tracer
	simOpts sim.Options
	simBase string
	// reload and file are Options.Reload and Options.File; reloadMu
	// serializes reloads.
	reload    func() (*config.Config, error)
	file      string
	reloadMu  sync.Mutex
	backoff   route.Backoff
	keyStore  *keys.Store      // nil: none
	keyCache  *auth.Cache      // keyStore's answers; nil when keyStore is
	respStore *respstore.Store // nil: none
	dash      *dashboard.Dashboard
	quota     *quota.Quota   // rate limits and budgets
	teamSlots *admit.Limiter // the teams' concurrent requests (max_streams), per replica
	// droppedLogged holds model+"\x00"+tool for each built-in tool a
	// model's route left out and logged (builtin.go): once each.
	droppedLogged sync.Map
	// rl is the quota's health (Degraded) when shared through Redis; nil
	// when counted by this replica alone.
	rl          interface{ Degraded() (bool, string) }
	redis       redis.UniversalClient          // nil: no redis: configured
	board       atomic.Pointer[keyshare.Board] // the key pools' benches and disables, shared; nil without redis or pools (shareKeys)
	limiter     *admit.Limiter                 // nil: no limits
	keepAlive   time.Duration                  // 0: none
	idle        time.Duration
	maxBody     int64
	bodyTimeout time.Duration // timeouts.request_body; 0: none
	decoding    *decodeBudget // max_decoding_bytes
	mux         *http.ServeMux
	created     int64

	// report totals the ledger for /admin/usage; nil: no ledger
	report    func(context.Context, usage.ReportQuery) ([]usage.ReportRow, error)
	spent     budget.SpentFunc               // nil: no ledger
	spentTeam budget.SpentFunc               // nil: no ledger
	connState func(net.Conn, http.ConnState) // Options.ConnState

	handlers sync.WaitGroup // requests being served
	sims     []func()       // stop in-process simulators

	sockets sockets // the open Responses WebSockets (websocket.go)

	// mcp serves /mcp (mcp.go); mcpOpen are its servers' clients by name,
	// mcpMu serializes their changes.
	mcp        *mcp.Gateway
	mcpOpen    map[string]mcpServer
	mcpRedis   redis.UniversalClient // the MCP journal's own client (redis: configured); nil: none
	mcpMetrics *mcp.Metrics
	mcpMu      sync.Mutex

	// hosted runs the tools of a /v1/responses request's mcp tools
	// (hostedmcp.go): mcpHosted over mcp; tests set a fake.
	hosted hostedMCP

	abortMu sync.Mutex
	abort   context.CancelCauseFunc // ends the requests of the running Serve
}

var _ http.Handler = (*Gateway)(nil)

type discard struct{}

func (discard) Record(usage.Entry) {}

// New builds a Gateway: providers from the config ("kind: sim" providers are
// simulators served in-process on 127.0.0.1 and reached over real HTTP
// through the openai adapter), the routes table and the metrics.
func New(opts Options) (*Gateway, error) {
	if opts.Config == nil {
		return nil, errors.New("gateway: no config")
	}
	cfg := opts.Config
	g := &Gateway{
		rec:         opts.Recorder,
		reg:         opts.Registry,
		log:         opts.Logger,
		ping:        opts.Ping,
		given:       opts.Providers,
		tracer:      opts.Tracer,
		simOpts:     opts.Sim,
		reload:      opts.Reload,
		file:        opts.File,
		keepAlive:   opts.KeepAlive,
		idle:        opts.IdleTimeout,
		maxBody:     cfg.MaxBody,
		bodyTimeout: cfg.Timeouts.RequestBody.D(),
		created:     time.Now().Unix(),
	}
	if g.rec == nil {
		g.rec = discard{}
	}
	g.report = opts.Report
	g.respStore = opts.Responses
	g.connState = opts.ConnState
	if opts.KeyStore != nil {
		g.keyStore = opts.KeyStore
		g.keyCache = auth.NewCache(keySource{opts.KeyStore}, auth.DefaultCacheTTL)
	}
	if g.reg == nil {
		g.reg = prometheus.NewRegistry()
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	spent := opts.Spent
	if spent == nil {
		spent = func(context.Context, string, time.Time) (float64, error) { return 0, nil }
	}
	g.spent = opts.Spent
	g.spentTeam = opts.SpentTeam
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := checkTeams(cctx, cfg, opts.KeyStore, g.log)
	ccancel()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.teamSlots = admit.New(admit.Options{Wait: cfg.Limits.QueueWait.D()})
	qo := quota.Options{Spent: spent, SpentTeam: opts.SpentTeam, SpentModel: opts.SpentModel, Logger: g.log, CallTimeout: opts.RedisCallTimeout}
	if cfg.Redis != "" {
		// The 50 ms bound of a call reaches the socket, and a refused
		// connection fails at once (limits are then counted locally).
		c, err := redisguard.NewClient(cfg.Redis)
		if err != nil { // validated at load
			return nil, fmt.Errorf("gateway: redis: %w", err)
		}
		g.redis, qo.Client = c, c
	}
	g.quota = quota.New(qo)
	if g.redis != nil {
		g.rl = g.quota
	}
	switch {
	case g.keepAlive < 0:
		g.keepAlive = 0
	case g.keepAlive == 0:
		g.keepAlive = cfg.KeepAlive.D()
	}
	if g.maxBody <= 0 {
		g.maxBody = DefaultMaxBody
	}
	decoding := cfg.MaxDecodingBytes
	if decoding <= 0 {
		decoding = max(config.DefaultMaxDecodingBytes, g.maxBody)
	}
	g.decoding = newDecodeBudget(max(decoding, g.maxBody))
	if g.idle <= 0 {
		g.idle = DefaultIdleTimeout
	}
	g.m = metrics.New(g.reg)
	g.replica = cfg.Replica
	if g.replica == "" {
		g.replica, _ = os.Hostname()
	}
	g.replicaHdr = []string{g.replica}
	for _, s := range cfg.TrustedProxies {
		p, err := config.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("gateway: trusted_proxies: %w", err)
		}
		g.trusted = append(g.trusted, p)
	}
	g.readyDegraded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "streamgate_ready_degraded",
		Help: "1 while /readyz last found this replica degraded: serving, but its usage store unreachable (records buffered in memory).",
	})
	if err := g.reg.Register(g.readyDegraded); err != nil {
		return nil, fmt.Errorf("gateway: register streamgate_ready_degraded: %w", err)
	}
	if l := cfg.Limits; l.MaxStreams > 0 || l.MaxStreamsPerKey > 0 || hasKeyLimit(cfg.Keys) {
		g.limiter = admit.New(admit.Options{Global: l.MaxStreams, PerKey: l.MaxStreamsPerKey, Wait: l.QueueWait.D()})
	}
	if l, ok := g.rec.(interface{ Stats() usage.Stats }); ok {
		metrics.RegisterLedger(g.reg, l.Stats) // the ledger writer's backlog and losses
	}
	st, err := g.build(cfg, nil)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.st.Store(st)
	g.shareKeys(st)
	if err := g.newMCP(cfg); err != nil {
		g.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.hosted = mcpHosted{g} // the mcp tools of /v1/responses (hostedmcp.go)
	metrics.RegisterRouteState(g.reg, g.routeStates)
	metrics.RegisterProviderKeys(g.reg, g.providerKeyStates)
	g.throttle = opts.Throttle
	if g.throttle == nil {
		g.throttle = auth.NewThrottle()
	}
	dreg := g.m.DashboardRegistry() // what the dashboard reads, gathered each second
	metrics.RegisterRouteState(dreg, g.routeStates)
	g.dash = dashboard.New(dashboard.Options{Gatherer: dreg, Open: cfg.Dashboard.Open, AdminKey: cfg.AdminKey,
		Throttle: g.throttle, Report: opts.Report, Logger: g.log, Models: st.modelNames(), Routes: g.routeHealth,
		Search: opts.Search, Series: opts.Series, Budgets: g.budgets, TeamBudgets: g.teamBudgets, Replica: g.replica, Savings: g.cacheSavings,
		MCP: g.mcpHealth})
	g.mux = g.routesTable()
	return g, nil
}

func hasKeyLimit(keys []config.Key) bool {
	for _, k := range keys {
		if k.MaxStreams > 0 {
			return true
		}
	}
	return false
}

// newRouteSet is the model's targets under its strategy.
func newRouteSet(m *config.Model, targets []target) (*routeSet, error) {
	rts := make([]*route.Target, len(targets))
	for i := range targets {
		rts[i] = targets[i].rt
	}
	set, err := route.NewSet(m.Strategy, rts)
	if err != nil {
		return nil, err
	}
	return &routeSet{model: m, set: set, targets: targets, hedge: newHedger(m.Hedge)}, nil
}

// healthCheckOf is the health check of the provider named name.
func healthCheckOf(cfg *config.Config, name string) config.HealthCheck {
	for _, p := range cfg.Providers {
		if p.Name == name {
			return p.HealthCheck
		}
	}
	return config.HealthCheck{}
}

// continuationOf is the continuation mode of the provider named name.
func continuationOf(cfg *config.Config, name string) string {
	for _, p := range cfg.Providers {
		if p.Name == name {
			return continuationMode(p.Continuation, p.Kind)
		}
	}
	return continuationMode("", "")
}

// routeStates is streamgate_route_state's reading: every model's routes.
func (g *Gateway) routeStates() []metrics.RouteState {
	var out []metrics.RouteState
	st := g.cur()
	for _, m := range st.cfg.Models {
		rs := st.routes[m.Name]
		if rs == nil {
			continue
		}
		for _, t := range rs.targets {
			v := 0.0
			switch t.rt.State() {
			case route.Probing:
				v = 1
			case route.Ejected:
				v = 2
			}
			out = append(out, metrics.RouteState{Model: m.Name, Route: t.name, State: v, Inflight: float64(t.rt.Inflight()),
				Attempts: float64(t.rt.Requests()), Failures: float64(t.rt.Failures())})
		}
	}
	return out
}

// routesTable is every endpoint of the gateway.
func (g *Gateway) routesTable() *http.ServeMux {
	admin := g.cur().cfg.AdminKey // a restart applies a new one (restartOnly)
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", g.chat)
	mux.HandleFunc("/v1/embeddings", g.embeddings)
	mux.HandleFunc("/v1/messages", g.messagesAPI)
	mux.HandleFunc("/v1/messages/count_tokens", g.countTokens)
	mux.HandleFunc("/v1/responses", g.responsesAPI)
	mux.Handle("/v1/responses/{id}", g.authed(g.responseByID))
	mux.Handle("/v1/responses/{id}/input_items", g.authed(g.inputItems))
	mux.Handle("/v1/models", g.authed(g.models))
	mux.Handle("/v1/models/{id...}", g.authed(g.model))
	mux.HandleFunc("/mcp", g.serveMCP)
	mux.HandleFunc("/mcp/{server}", g.serveMCP)
	mux.HandleFunc("/healthz", g.healthz)
	mux.HandleFunc("/readyz", g.readyz)
	mux.Handle("/admin/routes", auth.Admin(admin, g.throttle, g.writeError)(onlyGet(g, http.HandlerFunc(g.adminRoutes))))
	mux.Handle("/admin/routes/", auth.Admin(admin, g.throttle, g.writeError)(http.HandlerFunc(g.adminRouteReset)))
	mux.Handle("/admin/keys", auth.Admin(admin, g.throttle, g.writeError)(http.HandlerFunc(g.adminKeys)))
	mux.Handle("/admin/keys/", auth.Admin(admin, g.throttle, g.writeError)(http.HandlerFunc(g.adminKeys)))
	mux.Handle("/admin/teams", auth.Admin(admin, g.throttle, g.writeError)(http.HandlerFunc(g.adminTeams)))
	mux.Handle("/admin/teams/", auth.Admin(admin, g.throttle, g.writeError)(http.HandlerFunc(g.adminTeams)))
	mux.Handle("/admin/reload", auth.Admin(admin, g.throttle, g.writeError)(http.HandlerFunc(g.adminReload)))
	mux.Handle("/admin/usage", auth.Admin(admin, g.throttle, g.writeError)(onlyGet(g, http.HandlerFunc(g.adminUsage))))
	mux.Handle("/admin/requests", auth.Admin(admin, g.throttle, g.writeError)(http.HandlerFunc(g.dash.ServeRequests)))
	mux.Handle("/metrics", onlyGet(g, promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{})))
	mux.Handle("/dashboard", g.dash)
	mux.Handle("/dashboard/", g.dash)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, fmt.Errorf("%w: %s %s", errUnknownPath, r.Method, r.URL.Path))
	})
	return mux
}

// simPaths are the base URL paths of each dialect on the simulator, as the
// providers' docs give their base URLs.
var simPaths = map[string]string{"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}

// startSim serves a simulator on a loopback port and returns its address
// ("http://127.0.0.1:PORT") and a function that stops it (waiting for its
// streams to end).
func startSim(opts sim.Options) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen for in-process sim: %w", err)
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = time.Second
	}
	s := sim.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ctx, ln)
	}()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, nil
}

// Close stops the in-process simulators and closes idle upstream
// connections. Call it after Serve returned.
func (g *Gateway) Close() error {
	if st := g.st.Load(); st != nil {
		st.close(nil)
	}
	if g.dash != nil { // nil when New failed early
		g.dash.Close()
	}
	if g.mcp != nil {
		g.mcp.Close() // its servers' clients: stdio processes end
	}
	if g.mcpRedis != nil {
		g.mcpRedis.Close()
		g.mcpRedis = nil
	}
	for _, stop := range g.sims {
		stop()
	}
	g.sims = nil
	if b := g.board.Swap(nil); b != nil {
		b.Close()
	}
	if g.quota != nil {
		g.quota.Close() // writes back the queued settles
	}
	if g.redis != nil {
		g.redis.Close()
		g.redis = nil
	}
	return nil
}

// Metrics returns the gateway's collectors.
func (g *Gateway) Metrics() *metrics.Metrics { return g.m }

// DashboardLoginToken returns a fresh one-time login token of /dashboard:
// GET /dashboard?token=<it> logs a browser in once (dashboard.NewLoginToken).
func (g *Gateway) DashboardLoginToken() string { return g.dash.NewLoginToken() }

// errShutdown is the cause of requests cancelled after the grace period.
var errShutdown = errors.New("server shutting down")

// Serve serves on ln until ctx ends, then shuts down in order: stop
// accepting, let requests in flight finish for up to grace, cancel the rest
// (a stream gets an SSE error event) and wait for their handlers, so that
// every usage entry has been handed to the Recorder when Serve returns. The
// caller then flushes the ledger. It returns nil after a shutdown caused by
// ctx, or the error that stopped serving. It speaks HTTP/1.1 and, on the same
// port, HTTP/2 cleartext with prior knowledge (h2c: a client that opens with
// the HTTP/2 preface, as bench --http2 does); every event is flushed either way.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	base, cancelBase := context.WithCancelCause(context.Background())
	defer cancelBase(nil)
	g.abortMu.Lock()
	g.abort = cancelBase
	g.abortMu.Unlock()
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           g,
		Protocols:         &protos,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       g.idle,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		ConnState:         g.connState,
	}
	// Dashboard pages hold their event streams open forever: they end
	// when the drain begins instead of holding it for the grace period.
	srv.RegisterOnShutdown(g.dash.Shutdown)
	// Responses WebSockets are hijacked connections, which Shutdown does
	// not track: they close once their response ends.
	srv.RegisterOnShutdown(g.sockets.drain)
	// MCP notification streams are as long-lived.
	srv.RegisterOnShutdown(g.mcp.Drain)
	// The dashboard keeps the last hour from now on, page open or not.
	g.dash.Start()
	watched := g.watchKeys(base)
	defer func() {
		cancelBase(nil)
		<-watched
	}()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		g.handlers.Wait()
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	err := srv.Shutdown(sctx)
	cancel()
	if err != nil {
		// The grace period is over: end the streams still open. Their
		// handlers write an error event and record usage before returning.
		cancelBase(errShutdown)
		fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if srv.Shutdown(fctx) != nil {
			srv.Close()
		}
		cancel()
	}
	g.handlers.Wait()
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("gateway: serve: %w", err)
	}
	return nil
}

// watchKeys purges the key cache whenever another process (or this one)
// revokes or rotates a database key, so the change applies here within
// milliseconds instead of the cache's TTL; on SQLite the TTL alone applies.
// The returned channel is closed when it stopped, after ctx ended.
func (g *Gateway) watchKeys(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if g.keyStore == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		err := g.keyStore.Watch(ctx, func() { g.keyCache.Purge(); g.cur().teams.purge() }, func(err error) {
			g.log.LogAttrs(ctx, slog.LevelWarn, "key change notifications interrupted; reconnecting (changes apply within the key cache's 1 s meanwhile)",
				slog.String("error", err.Error()))
		})
		if err != nil && !errors.Is(err, sqldb.ErrNoNotify) {
			g.log.LogAttrs(ctx, slog.LevelWarn, "key change notifications off", slog.String("error", err.Error()))
		}
	}()
	return done
}

// Abort ends every request of the running Serve at once, as the end of the
// grace period does: a stream gets its SSE error event (shutting_down) and
// every request records its usage entry. Serve then returns as soon as
// their handlers have. Without a running Serve it does nothing.
func (g *Gateway) Abort() {
	g.abortMu.Lock()
	abort := g.abort
	g.abortMu.Unlock()
	if abort != nil {
		abort(errShutdown)
	}
}

func onlyGet(g *Gateway, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			g.writeError(w, r, &methodError{allow: "GET"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
