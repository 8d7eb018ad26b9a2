package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
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
		Long: `serve runs the OpenAI-compatible gateway: POST /v1/chat/completions (streaming and not),
GET /v1/models, /healthz, /readyz and /metrics.

Without --config it starts on the embedded default: an in-process simulated upstream
serving the demo models (sim-fast, sim-gpt-4.1, sim-claude-sonnet-4.5,
sim-gemini-2.5-flash, sim-deepseek-v3.2, sim-fallback), the ledger in
sqlite://streamgate.db, and a development key printed once (or STREAMGATE_DEV_KEY).

It prints "streamgate: listening on http://HOST:PORT" once it accepts connections.
On SIGINT/SIGTERM it stops accepting, lets open streams finish for --grace, then
ends them with an SSE error event, flushes the ledger and closes the store.

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
			logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
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
	f.DurationVar(&keepAlive, "keepalive", gateway.DefaultKeepAlive, "interval of SSE keep-alive comments while a stream waits for its first token (negative: none)")
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

func serve(ctx context.Context, e *env, o serveOptions) error {
	var cfg *config.Config
	if o.cfgPath != "" {
		c, err := config.Load(o.cfgPath, e.getenv)
		if err != nil {
			return err
		}
		cfg = c
	} else {
		c, devKey, err := config.Default(e.getenv)
		if err != nil {
			return err
		}
		cfg = c
		if devKey != "" {
			fmt.Fprintf(e.stdout, "streamgate: development key (shown once): %s\n", devKey)
		}
	}
	addr := o.addr
	if addr == "" {
		addr = cfg.Listen
	}
	if addr == "" {
		addr = "127.0.0.1:8080"
	}

	led, err := openLedger(ctx, cfg.Database, o.logger)
	if err != nil {
		return err
	}
	defer led.close()
	gw, err := gateway.New(gateway.Options{Config: cfg, Recorder: led.rec, Ping: led.ping, Logger: o.logger, KeepAlive: o.keepAlive})
	if err != nil {
		return err
	}
	defer gw.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	fmt.Fprintf(e.stdout, "streamgate: listening on http://%s\n", ln.Addr())
	if o.pprofAddr != "" {
		stop, err := servePprof(o.pprofAddr, o.logger)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}

	// Shutdown order: stop accepting → drain streams (grace) → flush the
	// ledger → close the store (deferred above).
	g, gctx := errgroup.WithContext(ctx)
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	g.Go(func() error { return led.run(runCtx) })
	g.Go(func() error {
		serr := gw.Serve(gctx, ln, o.grace)
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ferr := led.flush(fctx)
		stopRun()
		if ferr != nil {
			ferr = fmt.Errorf("flush usage ledger: %w", ferr)
		}
		return errors.Join(serr, ferr)
	})
	return g.Wait()
}

// ledger is the seam between serve and the usage store: a Recorder for the
// gateway, a Ping for /readyz, the writer's lifecycle.
type ledger struct {
	rec   usage.Recorder
	ping  func(context.Context) error
	run   func(context.Context) error
	flush func(context.Context) error
	close func() error
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
	return &ledger{rec: w, ping: store.Ping, run: w.Run, flush: w.Close, close: store.Close}, nil
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
func servePprof(addr string, logger *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for --pprof on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go srv.Serve(ln)
	logger.Info("pprof listening", slog.String("addr", "http://"+ln.Addr().String()+"/debug/pprof/"))
	return func() { srv.Close() }, nil
}
