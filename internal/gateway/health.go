package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/route"
)

// endpoint is one upstream (a provider's kind, base URL and key) and
// everything that reads its health: the routes on it, its active check.
type endpoint struct {
	ep        *route.Endpoint
	providers []string // the providers that reach it, in config order
	routes    []string // "provider/model" of every route on it
	// check is its active health check, nil when off or when the provider
	// has none (provider.Checker).
	check             provider.Checker
	interval, timeout time.Duration
	checking          atomic.Bool // a check goroutine runs
	// prober answers the start-up probe (probe.go), whether or not the
	// active check is on; nil when the provider has none.
	prober provider.Checker
	probe  atomic.Pointer[probeResult] // nil: never probed
}

// health is the gateway's upstream endpoints and their active checks.
type health struct {
	log       *slog.Logger
	endpoints []*endpoint                   // in config order
	byKey     map[string]*endpoint          // endpointKey → it
	byEP      map[*route.Endpoint]*endpoint // for events
	ctx       context.Context               // ends at Close: the checks stop
	stop      context.CancelFunc
	checks    sync.WaitGroup
	// notify receives the breaker events of the endpoints made here (the
	// gateway passes them to the health in force); prev is the health
	// replaced by a reload while this one is built, whose endpoints keep
	// their breakers; nil after.
	notify func(route.Event)
	prev   *health
}

// newHealth returns an empty health; notify receives its endpoints'
// events (nil: its own event), prev is the health it replaces (nil: none).
func newHealth(log *slog.Logger, notify func(route.Event), prev *health) *health {
	ctx, stop := context.WithCancel(context.Background())
	h := &health{log: log, byKey: map[string]*endpoint{}, byEP: map[*route.Endpoint]*endpoint{}, ctx: ctx, stop: stop, notify: notify, prev: prev}
	if h.notify == nil {
		h.notify = h.event
	}
	return h
}

// watchEjected starts the check of every ejected endpoint: after a reload,
// those whose checks the replaced health ran.
func (h *health) watchEjected() {
	for _, e := range h.endpoints {
		if e.ep.State() == route.Ejected {
			h.watch(e)
		}
	}
}

// endpointKey identifies an upstream: kind, base URL and key, so two
// providers configured alike (two names for one account) share its
// health. A provider given as a value (Options.Providers) is its own.
func endpointKey(kind, baseURL, apiKey string) string {
	return kind + "\x00" + strings.TrimRight(baseURL, "/") + "\x00" + apiKey
}

// add returns the endpoint of key, created for provider name with its
// check (hc) when it is new.
func (h *health) add(key, name string, p provider.Provider, hc config.HealthCheck) *endpoint {
	if e := h.byKey[key]; e != nil {
		if !slices.Contains(e.providers, name) {
			e.providers = append(e.providers, name)
		}
		return e
	}
	e := &endpoint{providers: []string{name}}
	if h.prev != nil && h.prev.byKey[key] != nil {
		e.ep = h.prev.byKey[key].ep // the same upstream: its breaker state carries over
	} else {
		e.ep = route.NewEndpoint(name, route.Health{}, h.notify)
	}
	if c, ok := p.(provider.Checker); ok {
		e.prober = c
		if interval, timeout, on := hc.Every(); on {
			e.check, e.interval, e.timeout = c, interval, timeout
		}
	}
	h.byKey[key] = e
	h.byEP[e.ep] = e
	h.endpoints = append(h.endpoints, e)
	return e
}

// event logs one transition of an endpoint's breaker, and starts its
// active check when it is ejected. Ejections and recoveries are WARN, so
// that `--log-level warn` shows an outage's start and end.
func (h *health) event(ev route.Event) {
	e := h.byEP[ev.Endpoint]
	if e == nil {
		return
	}
	attrs := []slog.Attr{slog.String("endpoint", ev.Endpoint.Name), slog.String("routes", strings.Join(e.routes, ","))}
	switch ev.Kind {
	case route.EventEjected:
		attrs = append(attrs, slog.Int64("consecutive_failures", ev.Failures), slog.Duration("probe_in", ev.Window))
		if ev.Probes > 0 {
			attrs = append(attrs, slog.Int("failed_probes", int(ev.Probes)))
		}
		if e.check != nil {
			attrs = append(attrs, slog.Duration("health_check_every", e.interval))
		}
		h.log.LogAttrs(context.Background(), slog.LevelWarn, "upstream endpoint ejected", attrs...)
		h.watch(e)
	case route.EventProbing:
		h.log.LogAttrs(context.Background(), slog.LevelInfo, "upstream endpoint probed: one request tries it", attrs...)
	case route.EventRecovered:
		by := "a request succeeded"
		if ev.Checked {
			by = "health check passed"
		}
		attrs = append(attrs, slog.String("by", by))
		h.log.LogAttrs(context.Background(), slog.LevelWarn, "upstream endpoint recovered", attrs...)
	case route.EventReset:
		h.log.LogAttrs(context.Background(), slog.LevelWarn, "upstream endpoint reset by the admin API", attrs...)
	}
}

// watch starts e's active check unless it has none or it runs already.
func (h *health) watch(e *endpoint) {
	if e.check == nil || h.ctx.Err() != nil || !e.checking.CompareAndSwap(false, true) {
		return
	}
	h.checks.Add(1)
	go func() {
		defer h.checks.Done()
		h.checkLoop(e)
		e.checking.Store(false)
		if e.ep.State() != route.Healthy {
			h.watch(e) // ejected again as the loop ended
		}
	}()
}

// checkLoop checks e every interval while it is ejected; the first pass
// readmits it. Its first failure is logged (INFO), the rest at DEBUG.
func (h *health) checkLoop(e *endpoint) {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for failed := 0; ; {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		if e.ep.State() == route.Healthy {
			return
		}
		ctx, cancel := context.WithTimeout(h.ctx, e.timeout)
		err := e.check.Check(ctx)
		cancel()
		if err == nil {
			e.ep.Readmit()
			return
		}
		if h.ctx.Err() != nil {
			return
		}
		level := slog.LevelDebug
		if failed++; failed == 1 {
			level = slog.LevelInfo
		}
		h.log.LogAttrs(context.Background(), level, "upstream endpoint health check failed; still ejected",
			slog.String("endpoint", e.ep.Name), slog.String("error", err.Error()), slog.Duration("next_in", e.interval))
	}
}

// close stops the checks and waits for them.
func (h *health) close() {
	h.stop()
	h.checks.Wait()
}

// resolve returns the endpoint of id: a route ("provider/model") or a
// provider's name; nil when none.
func (h *health) resolve(id string) *endpoint {
	for _, e := range h.endpoints {
		if slices.Contains(e.routes, id) || slices.Contains(e.providers, id) {
			return e
		}
	}
	return nil
}

// adminRouteReset is POST /admin/routes/{id}/reset: it closes the circuit
// of the endpoint of id, a route ("openai/gpt-4.1") or a provider
// ("openai"), and so of every route on that upstream. 404 for an unknown
// id.
func (g *Gateway) adminRouteReset(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/admin/routes/"), "/reset")
	if !ok || id == "" {
		g.writeError(w, r, fmt.Errorf("%w: %s %s (want POST /admin/routes/{id}/reset)", errUnknownPath, r.Method, r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		g.writeError(w, r, &methodError{allow: "POST"})
		return
	}
	st := g.cur()
	e := st.health.resolve(id)
	if e == nil {
		g.writeError(w, r, &notFoundError{code: "route_not_found",
			msg: fmt.Sprintf("no route or provider %q (GET /admin/routes lists the routes)", id)})
		return
	}
	was := e.ep.State()
	e.ep.Reset()
	// The provider key pools on it: benches end, disabled keys serve again.
	enabled := []string{}
	for _, name := range e.providers {
		if k := st.keyed[name]; k != nil {
			for _, key := range k.pool.Reset() {
				enabled = append(enabled, name+"/"+key)
			}
			if b := g.board.Load(); b != nil { // every replica's, at its next poll
				if err := b.Reset(r.Context(), name); err != nil {
					g.log.LogAttrs(r.Context(), slog.LevelWarn, "provider keys reset on this replica only: redis failed", slog.String("provider", name), slog.String("error", err.Error()))
				}
			}
		}
	}
	if len(enabled) > 0 {
		g.log.LogAttrs(r.Context(), slog.LevelInfo, "provider keys enabled again", slog.Any("keys", enabled))
	}
	writeJSON(w, http.StatusOK, struct {
		ID          string      `json:"id"`
		Endpoint    string      `json:"endpoint"`
		Routes      []string    `json:"routes"`
		Was         route.State `json:"was"`
		State       route.State `json:"state"`
		KeysEnabled []string    `json:"keys_enabled"`
	}{id, e.ep.Name, e.routes, was, e.ep.State(), enabled})
}
