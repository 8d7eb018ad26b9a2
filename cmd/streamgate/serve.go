package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/collapse"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/respstore"
	"github.com/streamgate/streamgate/internal/tracing"
	"github.com/streamgate/streamgate/internal/usage"
)

func init() { subcommands = append(subcommands, newServeCmd) }

func newServeCmd(e *env) *cobra.Command {
	var (
		cfgPath, addr, logLevel, pprofAddr string
		grace, keepAlive                   time.Duration
		gcPercent                          int
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway",
		Long: `serve runs the gateway. Endpoints (a key as Authorization: Bearer or x-api-key):
  POST /v1/chat/completions        OpenAI Chat Completions, streaming and not
  POST /v1/responses               OpenAI Responses API, streaming and not; stored ones:
                                   GET and DELETE /v1/responses/{id},
                                   GET /v1/responses/{id}/input_items
  GET  /v1/responses + Upgrade     the Responses API over a WebSocket (OpenAI's WebSocket
                                   mode: response.create frames; Codex's built-in provider)
  POST /v1/messages                Anthropic Messages API, streaming and not;
                                   POST /v1/messages/count_tokens
  POST /v1/embeddings              OpenAI embeddings
  GET  /v1/models, /v1/models/{id} the models the key may use
  POST /mcp, /mcp/{server}         the MCP servers of mcp.servers (both MCP eras): every
                                   one the key may use (tools server__tool), or one;
                                   GET and DELETE for 2025-11-25 sessions
  GET  /healthz                    liveness: the process answers
  GET  /readyz                     readiness: 503 when this replica cannot serve, 200
                                   otherwise ("degraded" when the ledger is unreachable)
  GET  /metrics                    Prometheus metrics
  /admin/keys, /admin/teams, /admin/usage, /admin/routes, POST /admin/routes/{id}/reset,
  POST /admin/reload,
  GET /admin/requests              the admin API (Authorization: Bearer admin_key);
                                   /admin/requests is the request log (?q=, paged)
  /dashboard                       the live dashboard, after a login with admin_key
                                   (the config's dashboard: {open: true} asks for none)

Without --config it starts on the embedded default: an in-process simulated upstream
serving the demo models (sim-fast, sim-gpt-4.1, sim-claude-sonnet-4.5,
sim-gemini-2.5-flash, sim-deepseek-v3.2, sim-fallback), the ledger in
sqlite://streamgate.db, a development key (STREAMGATE_DEV_KEY, else one made at the
first start and kept in the database, the same at every start: printed at each), and
a one-time login link of the dashboard, "streamgate: dashboard (login link, works
once): http://HOST:PORT/dashboard?token=..." (it has no admin_key: the link is the
only way in; each start prints a new one).

Start-up checks everything before it does anything: every problem of the config is
listed at once, one per line as FILE:LINE: FIELD: PROBLEM, and the address is taken
before the development key is printed or a database file created. Then it names its
database on stderr ("streamgate: database: PATH (sqlite)", a PostgreSQL URL without
its password) and prints "streamgate: listening on http://HOST:PORT".

On SIGINT or SIGTERM it logs the signal, the drain deadline and the open streams
(at WARN, so --log-level warn shows it), stops accepting, lets open streams finish
for --grace, then ends them with an SSE error event, flushes the ledger, closes the
store and logs "stopped". A second SIGINT or SIGTERM during the drain stops at once:
open streams end with an SSE error event (shutting_down) and their usage is
recorded, connections still open half a second later are closed, and the ledger is
flushed for at most 2s.

On SIGHUP (or POST /admin/reload) it reads the --config file again: new requests see
it, open streams finish on the old one; an invalid file is refused, every problem
logged, and the running config stays. Fields such as listen and database need a
restart (logged at WARN). On the embedded default there is no file to reload.

Environment:
  STREAMGATE_LISTEN      listen address; overrides the config's listen (--addr overrides both)
  STREAMGATE_DATABASE    ledger database URL; overrides the config's database
  STREAMGATE_REPLICA     this replica's name in /readyz, /healthz, the dashboard and logs;
                         overrides the config's replica (default: host name:listen port)
  STREAMGATE_DEV_KEY     the development key of the embedded default (without --config);
                         unset: a random one made at the first start and kept in its
                         database (table streamgate_dev_key), printed at every start
  ${VAR} in the config   any variable the config file names is read when it loads;
                         ${VAR:-default} when unset or empty; a provider api_key or a
                         key written as ${VAR} must have VAR set (${VAR:-} if optional)
  GOGC, GOMEMLIMIT       the Go GC settings; when either is set, --gc-percent is not applied
  HTTPS_PROXY, HTTP_PROXY, NO_PROXY
                         proxy for connections to upstream providers (every kind) and to
                         the OTLP endpoint; NO_PROXY names hosts reached directly
                         (loopback addresses always are)

Exit status: 0 after a clean shutdown; 1 on a runtime failure (such as an address
in use); 2 on bad usage or an invalid config; 130 (SIGINT) or 143 (SIGTERM) when a
second signal stopped it during the drain, as a shell reports a process killed by it.

--pprof HOST:PORT (off by default) serves Go's /debug/pprof/ profiles on a
separate listener for profiling the gateway; keep it on loopback.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := parseLevel(logLevel)
			if err != nil {
				return usagef("--log-level: %v", err)
			}
			if grace < 0 {
				return usagef("--grace: must not be negative, got %v", grace)
			}
			// Repeated WARN lines (a dead upstream under load) are collapsed:
			// the first logged, then one line with the count per 10 s.
			collapsed := collapse.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}), collapse.Options{})
			defer collapsed.Flush()
			logger := slog.New(collapsed)
			for flag, v := range map[string]string{"--addr": addr, "--pprof": pprofAddr} {
				if v == "" {
					continue
				}
				if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
					return usagef("%s %q: want HOST:PORT", flag, v)
				}
			}
			if e.getenv("GOGC") == "" && e.getenv("GOMEMLIMIT") == "" {
				// Fewer GC cycles, fewer stop-the-world pauses in the relay
				// path: `streamgate demo` table 1 measures the effect.
				debug.SetGCPercent(gcPercent)
			}
			return serve(cmd.Context(), e, serveOptions{cfgPath: cfgPath, addr: addr, grace: grace, keepAlive: keepAlive, logger: logger, pprofAddr: pprofAddr})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "YAML config file (default: the embedded default with simulated upstreams)")
	f.StringVar(&addr, "addr", "", "listen address HOST:PORT, port 0 picks a free one (default: the config's listen, 127.0.0.1:8080)")
	f.DurationVar(&grace, "grace", 30*time.Second, "on shutdown, how long open streams may finish before they are cancelled")
	f.DurationVar(&keepAlive, "keepalive", 0, "interval of SSE keep-alive comments while a stream waits for its first token or in a long gap (overrides the config's keepalive, default 15s; negative: none)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info (one line per request), warn or error")
	f.IntVar(&gcPercent, "gc-percent", 400, "GC target percentage (as GOGC) used when neither GOGC nor GOMEMLIMIT is set; fewer GC cycles mean fewer pauses in streams")
	f.StringVar(&pprofAddr, "pprof", "", "debug: serve /debug/pprof/ on this HOST:PORT, a separate listener (default: off)")
	return cmd
}

type serveOptions struct {
	cfgPath, addr, pprofAddr string
	grace, keepAlive         time.Duration
	logger                   *slog.Logger
}

// forceWait bounds how long a forced stop waits for the requests whose
// connections it closed; flushAfterForce bounds its ledger flush.
const (
	forceWait       = 5 * time.Second
	abortWait       = 500 * time.Millisecond // for the aborted requests to write their end
	flushAfterForce = 2 * time.Second
)

// serve runs the gateway until ctx ends, then shuts down in order: stop
// accepting → drain streams (grace) → flush the ledger → close the store.
// Start-up takes the address first, so that a busy port fails before any
// side effect (a printed development key, a database file). When ctx ended
// on a signal (a *signalCause), a second signal during the drain stops at
// once: open client connections are closed, the ledger is flushed briefly
// and serve returns exit status 128+signal.
func serve(ctx context.Context, e *env, o serveOptions) error {
	cfg, devKey, err := loadConfig(o.cfgPath, e.getenv)
	if err != nil {
		return configError{err}
	}
	addr := o.addr
	if addr == "" {
		addr = cfg.Listen
	}
	if addr == "" {
		addr = config.DefaultListen
	}

	inner, err := listen(addr, "")
	if err != nil {
		return err
	}
	ln := newConnListener(inner)
	defer ln.Close() // after a failed start; Serve closes it otherwise
	var pprofLn net.Listener
	if o.pprofAddr != "" {
		if pprofLn, err = listen(o.pprofAddr, "--pprof"); err != nil {
			return err
		}
		defer pprofLn.Close()
	}

	led, err := openLedger(ctx, cfg.Database, o.logger)
	if err != nil {
		return err
	}
	defer led.close()
	var keyStore *keys.Store // the database's keys, beside the config's
	if cfg.Database != "" {
		octx, cancel := context.WithTimeout(ctx, 15*time.Second)
		keyStore, err = keys.Open(octx, cfg.Database)
		cancel()
		if err != nil {
			return err
		}
		defer keyStore.Close()
	}
	var respStore *respstore.Store // stored /v1/responses responses
	if cfg.Database != "" {
		octx, cancel := context.WithTimeout(ctx, 15*time.Second)
		respStore, err = respstore.Open(octx, cfg.Database, respstore.Options{Retention: cfg.Responses.StoreRetention.D()})
		cancel()
		if err != nil {
			return err
		}
		defer respStore.Close() // after the gateway's drain: it waits for the writes under way
		pctx, stopPurge := context.WithCancel(context.Background())
		purged := make(chan struct{})
		go func() {
			defer close(purged)
			respStore.Run(pctx, func(err error) { o.logger.Warn("purge expired responses", slog.String("error", err.Error())) })
		}()
		defer func() { stopPurge(); <-purged }()
	}
	devNote := ""
	if devKey != "" && cfg.Database != "" {
		// The embedded default keeps its development key in its database:
		// the same at every start unless STREAMGATE_DEV_KEY says otherwise.
		kept, fresh, err := keepDevKey(ctx, cfg.Database, devKey)
		if err != nil {
			return err
		}
		for i := range cfg.Keys {
			if cfg.Keys[i].Key == devKey {
				cfg.Keys[i].Key = kept
			}
		}
		name, _, _ := describeDSN(cfg.Database)
		devNote = "kept in " + name + ", the same at every start; STREAMGATE_DEV_KEY overrides it"
		if fresh {
			devNote = "new, " + devNote
		}
		devKey = kept
	}
	// Spans end with their requests: the flush (deferred) comes after Serve returned.
	tracer, stopTracing, err := tracing.Start(ctx, cfg.OTel, releaseVersion(), o.logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg.Replica = replicaName(e.getenv(EnvReplica), cfg.Replica, ln.Addr())
	var reload func() (*config.Config, error) // nil on the embedded default: nothing to reload
	if o.cfgPath != "" {
		reload = func() (*config.Config, error) { return config.Load(o.cfgPath, e.getenv) }
	}
	gw, err := gateway.New(gateway.Options{Config: cfg, Reload: reload, File: o.cfgPath, Recorder: led.rec, Ping: led.ping, Logger: o.logger, KeepAlive: o.keepAlive, KeyStore: keyStore, Spent: led.spent, SpentTeam: led.spentTeam, SpentModel: led.spentModel,
		Report: led.report, Search: led.search, Series: led.series, Tracer: tracer, ConnState: ln.state, Responses: respStore})
	if err != nil {
		return err
	}
	defer gw.Close()
	// SIGHUP reloads the config file (POST /admin/reload does the same):
	// the gateway logs the outcome. Stopped before gw.Close.
	defer onHangup(o.logger, gw)()
	warnCachePrices(o.logger, cfg)
	warnEmptyAdminKey(o.logger, o.cfgPath, cfg.AdminKey)
	if devKey != "" {
		fmt.Fprintf(e.stdout, "streamgate: development key (%s): %s\n", cmp.Or(devNote, "shown once"), devKey)
	}
	if o.cfgPath == "" && !cfg.Dashboard.Open {
		// The embedded default has no admin_key: this link is its login.
		fmt.Fprintf(e.stdout, "streamgate: dashboard (login link, works once): http://%s/dashboard?token=%s\n",
			browsable(ln.Addr()), gw.DashboardLoginToken())
	}
	if cfg.Database != "" { // named as keys and usage name theirs (the password left out)
		name, kind, _ := describeDSN(cfg.Database)
		fmt.Fprintf(e.stderr, "streamgate: database: %s (%s)\n", name, kind)
	}
	fmt.Fprintf(e.stdout, "streamgate: listening on http://%s\n", ln.Addr())
	// After the start lines, which the probes' log lines would race
	// with on a shared writer. Each upstream asked once, in parallel: /readyz and the dashboard say
	// "unknown" until it answered, "unreachable" when it did not.
	gw.StartProbes(0)
	if pprofLn != nil {
		defer servePprof(pprofLn, o.logger)()
	}

	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	ledgerDone := make(chan error, 1)
	go func() { ledgerDone <- led.run(runCtx) }()
	drainCtx, drain := context.WithCancel(context.Background())
	defer drain()
	served := make(chan error, 1)
	go func() { served <- gw.Serve(drainCtx, ln, o.grace) }()
	sd := &shutdown{logger: o.logger, grace: o.grace, conns: ln, abort: gw.Abort, streams: func() int { return gaugeValue(gw.Metrics().Inflight) }}
	serr := sd.wait(ctx, served, drain)
	forced := sd.forced

	flushFor := 10 * time.Second
	if forced != nil {
		flushFor = flushAfterForce
	}
	fctx, cancel := context.WithTimeout(context.Background(), flushFor)
	ferr := led.flush(fctx)
	cancel()
	stopRun()
	if rerr := <-ledgerDone; rerr != nil {
		ferr = errors.Join(ferr, rerr)
	}
	if ferr != nil {
		ferr = fmt.Errorf("flush usage ledger: %w", ferr)
	}
	err = errors.Join(serr, ferr)
	if sd.begun.IsZero() {
		return err // serving failed on its own: no shutdown to report
	}
	status := 0
	switch {
	case forced != nil:
		status = signalExitStatus(forced)
		err = exitError{code: status, err: err}
	case err != nil:
		status = 1
	}
	// The same level as the line that announced the shutdown, so that one
	// is never seen without the other.
	o.logger.Warn("stopped", slog.Duration("after", time.Since(sd.begun).Round(time.Millisecond)),
		slog.Bool("forced", forced != nil), slog.Int("exit_status", status))
	return err
}

// onHangup reloads gw's config file on each SIGHUP until the returned
// function is called (it waits for a reload under way). On the embedded
// default a SIGHUP is logged as ignored.
func onHangup(logger *slog.Logger, gw *gateway.Gateway) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				// Success and refusal are logged by the gateway.
				if _, err := gw.ReloadFile(ctx); errors.Is(err, gateway.ErrNoConfigFile) {
					logger.Warn("SIGHUP ignored: "+err.Error(), slog.String("signal", "SIGHUP"))
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// shutdown follows serve from the end of its context to the end of the
// drain, and logs what it does.
type shutdown struct {
	logger  *slog.Logger
	grace   time.Duration
	conns   *connListener
	streams func() int // streams open now
	abort   func()     // ends every request at once (gateway.Abort)

	begun  time.Time // when the context ended; zero if it did not
	forced os.Signal // the signal that cut the drain short, if one did
}

// wait returns the error of gw.Serve (served) once it returned: on its own,
// or after ctx ended and startDrain began the drain. A second signal during
// the drain (ctx ended with a *signalCause) closes every client connection,
// ending their requests at once, and waits at most forceWait for them.
func (s *shutdown) wait(ctx context.Context, served <-chan error, startDrain func()) error {
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.begun = time.Now()
	var again <-chan os.Signal // nil when ctx did not end on a signal: none can follow
	attrs := make([]any, 0, 5)
	if c, ok := context.Cause(ctx).(*signalCause); ok {
		again = c.again
		attrs = append(attrs, slog.String("signal", signalName(c.sig)))
	} else {
		attrs = append(attrs, slog.String("cause", context.Cause(ctx).Error()))
	}
	attrs = append(attrs, slog.Duration("drain", s.grace), slog.Time("deadline", s.begun.Add(s.grace).Round(0)),
		slog.Int("open_streams", s.streams()), slog.Int("open_connections", s.conns.open()))
	// WARN, not INFO: --log-level warn is how a busy gateway turns off its
	// access lines, and this is the line that says why the process has not
	// exited yet and how to make it.
	s.logger.Warn("shutting down: draining open streams; send SIGINT or SIGTERM again to stop at once", attrs...)
	startDrain()
	deadline := time.AfterFunc(s.grace, func() {
		if n := s.streams(); n > 0 {
			s.logger.Warn("drain deadline passed: ending open streams with an error event", slog.Int("open_streams", n))
		}
	})
	defer deadline.Stop()
	select {
	case err := <-served:
		return err
	case s.forced = <-again:
	}
	s.logger.Warn("stopping at once: ending open streams with an error event", slog.String("signal", signalName(s.forced)),
		slog.Int("open_streams", s.streams()), slog.Int("open_connections", s.conns.open()))
	// Each request ends with its error event and usage entry; connections
	// that still hang on (a client not reading) are closed after a moment.
	s.abort()
	select {
	case err := <-served:
		return err
	case <-time.After(abortWait):
	}
	s.conns.closeAll()
	select {
	case err := <-served:
		return err
	case <-time.After(forceWait):
		return fmt.Errorf("requests still running %v after the forced stop; exiting without them", forceWait)
	}
}

// loadConfig returns the config of --config, or the embedded default with
// the development key it generated ("" when STREAMGATE_DEV_KEY set it). It
// has no side effects: printing the key is left to the caller.
func loadConfig(path string, getenv func(string) string) (cfg *config.Config, devKey string, err error) {
	if path != "" {
		cfg, err = config.Load(path, getenv)
		return cfg, "", err
	}
	return config.Default(getenv)
}

// browsable is addr as a browser on this machine reaches it: a wildcard
// address (0.0.0.0, ::) as the loopback address of its family.
func browsable(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	ip := net.IPv6loopback
	if tcp.IP.To4() != nil {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}

// listen listens on addr; flag names the flag it came from in messages
// ("" for the gateway's own address).
func listen(addr, flag string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	what := "listen on " + addr
	if flag != "" {
		what = fmt.Sprintf("listen for %s on %s", flag, addr)
	}
	var oe *net.OpError
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		hint := "--addr or the config's listen"
		if flag != "" {
			hint = flag
		}
		return nil, fmt.Errorf("%s: address already in use (another process listens there; choose another with %s)", what, hint)
	case errors.As(err, &oe):
		return nil, fmt.Errorf("%s: %w", what, oe.Err)
	}
	return nil, fmt.Errorf("%s: %w", what, err)
}

// gaugeValue reads a gauge (the gateway's open streams).
func gaugeValue(g interface{ Write(*dto.Metric) error }) int {
	var m dto.Metric
	if g.Write(&m) != nil {
		return 0
	}
	return int(m.GetGauge().GetValue())
}

// connListener tracks the client connections it accepted while they are
// open: their number goes in the shutdown line, and a forced stop closes
// them all. The server reports each connection's end through state (its
// ConnState hook), so the connections it serves are the net.Conns Accept
// returned, with no wrapper between the server and every read and write.
// (Closing a connection ends its requests through their contexts, and each
// still records its usage.)
type connListener struct {
	net.Listener
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
}

func newConnListener(ln net.Listener) *connListener {
	return &connListener{Listener: ln, conns: map[net.Conn]struct{}{}}
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	closing := l.closing
	if !closing {
		l.conns[c] = struct{}{}
	}
	l.mu.Unlock()
	if closing {
		c.Close()
	}
	return c, nil
}

// state is the server's ConnState hook: a connection that closed, or that
// a handler took over, leaves the set.
func (l *connListener) state(c net.Conn, s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
	}
}

// open returns the number of connections open now.
func (l *connListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// closeAll closes every open connection, and any accepted later.
func (l *connListener) closeAll() {
	l.mu.Lock()
	l.closing = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// ledger is the seam between serve and the usage store: a Recorder for the
// gateway, a Ping for /readyz, the writer's lifecycle.
type ledger struct {
	rec   usage.Recorder
	ping  func(context.Context) error
	run   func(context.Context) error
	flush func(context.Context) error
	close func() error
	// spent is what a key spent since a time, from the stored records;
	// nil without a ledger.
	spent func(ctx context.Context, key string, since time.Time) (float64, error)
	// spentTeam and spentModel are what a team, and a key on one model,
	// spent since a time; nil without a ledger.
	spentTeam  func(ctx context.Context, team string, since time.Time) (float64, error)
	spentModel func(ctx context.Context, key, model string, since time.Time) (float64, error)
	// report totals the stored records (the dashboard's cost of the day);
	// nil without a ledger.
	report func(context.Context, usage.ReportQuery) ([]usage.ReportRow, error)
	// search and series read the request log and the totals per time
	// bucket (the dashboard); nil without a ledger.
	search func(context.Context, usage.SearchQuery) ([]usage.Entry, bool, error)
	series func(context.Context, usage.SeriesQuery) ([]usage.Bucket, error)
}

// openLedger opens the store named by dsn with its batching writer; an
// empty dsn keeps no ledger.
func openLedger(ctx context.Context, dsn string, logger *slog.Logger) (*ledger, error) {
	if dsn == "" {
		return &ledger{
			rec:   nopRecorder{},
			run:   func(ctx context.Context) error { <-ctx.Done(); return nil },
			flush: func(context.Context) error { return nil },
			close: func() error { return nil },
		}, nil
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	store, err := usage.Open(octx, dsn)
	if err != nil {
		return nil, err
	}
	w := usage.NewWriter(store, usage.WriterOptions{Logger: logger})
	spent := func(ctx context.Context, key string, since time.Time) (float64, error) {
		rows, err := store.Summarize(ctx, usage.Filter{KeyID: key, Since: since})
		sum := 0.0
		for _, r := range rows {
			sum += r.CostUSD
		}
		return sum, err
	}
	report := func(ctx context.Context, q usage.ReportQuery) ([]usage.ReportRow, error) {
		return usage.Report(ctx, store, q)
	}
	search := func(ctx context.Context, q usage.SearchQuery) ([]usage.Entry, bool, error) {
		return usage.Search(ctx, store, q)
	}
	series := func(ctx context.Context, q usage.SeriesQuery) ([]usage.Bucket, error) {
		return usage.Series(ctx, store, q)
	}
	spentTeam := func(ctx context.Context, team string, since time.Time) (float64, error) {
		return usage.SpentTeam(ctx, store, team, since)
	}
	spentModel := func(ctx context.Context, key, model string, since time.Time) (float64, error) {
		return usage.SpentKeyModel(ctx, store, key, model, since)
	}
	return &ledger{rec: w, ping: store.Ping, run: w.Run, flush: w.Close, close: store.Close, spent: spent, report: report,
		spentTeam: spentTeam, spentModel: spentModel,
		search: search, series: series}, nil
}

// warnCachePrices logs one warning per model whose prompt cache reads and
// writes are billed at the input price for want of cache prices
// (config.Price.CacheUnpriced): every provider kind reports cache reads,
// which then cost up to ten times what the provider charges.
func warnCachePrices(logger *slog.Logger, cfg *config.Config) {
	for _, m := range cfg.Models {
		if m.Price.CacheUnpriced() {
			logger.Warn("model has no cache prices: its prompt cache reads and writes are billed at the input price (set price.cached_input and price.cache_write)",
				slog.String("model", m.Name), slog.Float64("input", m.Price.Input))
		}
	}
}

type nopRecorder struct{}

func (nopRecorder) Record(usage.Entry) {}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("unknown level %q (want debug, info, warn or error)", s)
	}
	return l, nil
}

// servePprof serves the runtime profiles on their own listener, so they are
// never reachable through the gateway's port. It returns a stop function.
func servePprof(ln net.Listener, logger *slog.Logger) func() {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go srv.Serve(ln)
	logger.Info("pprof listening", slog.String("addr", "http://"+ln.Addr().String()+"/debug/pprof/"))
	return func() { srv.Close() }
}
