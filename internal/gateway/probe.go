package gateway

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/redact"
	"github.com/streamgate/streamgate/internal/route"
)

// The start-up probe: each upstream endpoint is asked once, in parallel and
// bounded, for its models list (the active health check's request, no
// tokens spent), so that /readyz and the dashboard know at start whether an
// upstream answers instead of calling every route healthy until traffic
// says otherwise. Until its probe ends an endpoint's routes are "unknown";
// a failed probe makes them "unreachable" until a request succeeds on the
// endpoint (or its circuit opens, which then shows).

// Probe states of an endpoint.
const (
	probeUnknown     = "unknown"     // being probed
	probeReachable   = "reachable"   // answered 2xx
	probeUnreachable = "unreachable" // did not answer 2xx within the bound
	probeNone        = "not_probed"  // its provider has no probe
)

// DefaultProbeTimeout bounds each start-up probe.
const DefaultProbeTimeout = 5 * time.Second

type probeResult struct {
	state string
	err   string // why unreachable
	at    time.Time
}

// StartProbes probes every upstream endpoint once, in parallel, each
// within timeout (0: DefaultProbeTimeout). The endpoints are "unknown"
// when it returns; the returned channel closes when every probe ended.
// Unreachable endpoints are logged at WARN, one line each, then one INFO
// line sums up. Close stops the probes.
func (g *Gateway) StartProbes(timeout time.Duration) <-chan struct{} {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	h := g.cur().health // the start's; a reload's endpoints show their circuits
	for _, e := range h.endpoints {
		if e.prober == nil {
			e.probe.Store(&probeResult{state: probeNone})
			continue
		}
		e.probe.Store(&probeResult{state: probeUnknown})
	}
	done := make(chan struct{})
	h.checks.Add(1)
	go func() {
		defer h.checks.Done()
		defer close(done)
		var wg sync.WaitGroup
		for _, e := range h.endpoints {
			if e.prober == nil {
				continue
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(h.ctx, timeout)
				err := e.prober.Check(ctx)
				cancel()
				r := &probeResult{state: probeReachable, at: time.Now()}
				if err != nil {
					if h.ctx.Err() != nil {
						return // closing: leave it unknown
					}
					r.state, r.err = probeUnreachable, redact.Text(err.Error(), "") // /readyz is open: no upstream address
					h.log.LogAttrs(context.Background(), slog.LevelWarn, "upstream endpoint unreachable at start",
						slog.String("endpoint", e.ep.Name), slog.String("routes", strings.Join(e.routes, ",")), slog.String("error", r.err))
				}
				e.probe.Store(r)
			})
		}
		wg.Wait()
		counts := map[string]int{}
		for _, e := range h.endpoints {
			if p := e.probe.Load(); p != nil {
				counts[p.state]++
			}
		}
		h.log.LogAttrs(context.Background(), slog.LevelInfo, "upstream endpoints probed",
			slog.Int(probeReachable, counts[probeReachable]), slog.Int(probeUnreachable, counts[probeUnreachable]),
			slog.Int(probeNone, counts[probeNone]))
	}()
	return done
}

// upstreamView is an endpoint in /readyz.
type upstreamView struct {
	Probe  string   `json:"probe"` // unknown, reachable, unreachable, not_probed; absent when never probed
	Error  string   `json:"error,omitempty"`
	At     string   `json:"probed_at,omitempty"` // RFC 3339
	State  string   `json:"state"`               // the endpoint's state as its routes show it
	Routes []string `json:"routes"`
}

// routeStatesNow returns the state of every route ("provider/model") as
// /readyz and the dashboard show it: the circuit's (healthy, probing,
// ejected), except that a healthy circuit whose endpoint has served no
// request yet shows the start-up probe's verdict while it is unknown or
// unreachable. It also returns each endpoint's view.
func (g *Gateway) routeStatesNow() (map[string]string, map[string]upstreamView) {
	st := g.cur()
	served := map[*route.Endpoint]bool{} // a request succeeded on it
	for _, rs := range st.routes {
		for _, t := range rs.targets {
			s := t.rt.Snapshot()
			if s.Requests > s.Failures+uint64(s.Inflight) {
				served[t.rt.Endpoint()] = true
			}
		}
	}
	states := map[string]string{}
	ups := map[string]upstreamView{}
	for _, e := range st.health.endpoints {
		state := e.ep.State().String()
		p := e.probe.Load()
		if p != nil && e.ep.State() == route.Healthy && !served[e.ep] && (p.state == probeUnknown || p.state == probeUnreachable) {
			state = p.state
		}
		for _, r := range e.routes {
			states[r] = state
		}
		v := upstreamView{State: state, Routes: append([]string{}, e.routes...)}
		sort.Strings(v.Routes)
		if p != nil {
			v.Probe, v.Error = p.state, p.err
			if !p.at.IsZero() {
				v.At = p.at.UTC().Format(time.RFC3339)
			}
		}
		ups[e.ep.Name] = v
	}
	return states, ups
}
