package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/streamgate/streamgate/internal/keypool"
	"github.com/streamgate/streamgate/internal/keyshare"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/route"
)

// state is what the config decides that a reload replaces: the models and
// their routes, the providers and their key pools, the keys, the teams.
// It is never changed once built: a reload builds a new one and swaps it
// in (Gateway.st), a request loads it once (admit) and finishes on it, so
// a stream open across a reload ends on the config it began on.
type state struct {
	cfg       *config.Config
	keys      *auth.Keys
	providers map[string]provider.Provider
	// keyed are the key pools of the providers with api_keys, by provider
	// name; keyedOrder their names in config order.
	keyed      map[string]*keyed
	keyedOrder []string
	routes     map[string]*routeSet // model name → its routes under its strategy
	// embedRoutes are the routes of routes whose provider serves
	// embeddings (provider.Embedder).
	embedRoutes map[string]*routeSet
	// health is the upstream endpoints the routes share their health on,
	// and their active checks.
	health  *health
	teams   *teams   // the keys' teams: the config's, then the database's
	tracing *tracing // nil: off
}

// cur is the state in force.
func (g *Gateway) cur() *state { return g.st.Load() }

// modelNames are the configured model names, in config order.
func (s *state) modelNames() []string {
	names := make([]string, 0, len(s.cfg.Models))
	for _, m := range s.cfg.Models {
		names = append(names, m.Name)
	}
	return names
}

// close stops s's health checks and closes the idle connections of its
// providers that next (the state replacing it; nil: none) does not keep.
func (s *state) close(next *state) {
	s.health.close()
	for name, p := range s.providers {
		if next != nil && next.providers[name] == p {
			continue
		}
		if c, ok := p.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
	for name, k := range s.keyed {
		if next != nil && next.keyed[name] == k {
			continue
		}
		for _, p := range k.provs {
			if c, ok := p.(interface{ CloseIdleConnections() }); ok {
				c.CloseIdleConnections()
			}
		}
	}
}

// authed is h behind the key check of the state in force.
func (g *Gateway) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.cur().keys.Middleware(g.writeError)(h).ServeHTTP(w, r)
	})
}

// endpointEvent passes an upstream endpoint's breaker event to the health
// in force, which logs it and starts the endpoint's check (an endpoint
// outlives a reload: see health.add).
func (g *Gateway) endpointEvent(ev route.Event) {
	if st := g.st.Load(); st != nil {
		st.health.event(ev)
	}
}

// build makes the state of cfg. A provider whose config is unchanged from
// prev's (nil at start) keeps its adapters and key pool (connections, the
// keys' benches, limits and disabled keys), and every upstream endpoint
// prev knows keeps its health (an ejected upstream stays ejected). A
// route's own figures (latency, in flight) and affinity placements start
// over.
func (g *Gateway) build(cfg *config.Config, prev *state) (*state, error) {
	s := &state{cfg: cfg, keys: auth.NewKeys(cfg.Keys), providers: map[string]provider.Provider{}, keyed: map[string]*keyed{},
		routes: map[string]*routeSet{}, embedRoutes: map[string]*routeSet{}, teams: newTeams(cfg, g.keyStore), tracing: newTracing(g.tracer, cfg)}
	if g.keyCache != nil {
		s.keys = s.keys.WithSource(g.keyCache)
	}
	var prevHealth *health
	if prev != nil {
		prevHealth = prev.health
	}
	s.health = newHealth(g.log, g.endpointEvent, prevHealth)
	fail := func(err error) (*state, error) {
		s.health.close()
		return nil, err
	}
	endpoints := map[string]*endpoint{} // provider name → its upstream
	for name, p := range g.given {
		s.providers[name] = p
	}
	for _, p := range cfg.Providers {
		if _, ok := s.providers[p.Name]; ok {
			continue
		}
		pc := provider.Config{Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL, APIKey: p.APIKey,
			HTTP2: p.HTTP2, ConnectTimeout: cfg.Timeouts.Connect.D(), Responses: p.Responses,
			Cloud: provider.Cloud{Region: p.Region, Project: p.Project, CredentialsFile: p.CredentialsFile, APIVersion: p.APIVersion}}
		if p.AWS != nil {
			pc.Cloud.AWSAccessKeyID, pc.Cloud.AWSSecretAccessKey, pc.Cloud.AWSSessionToken = p.AWS.AccessKeyID, p.AWS.SecretAccessKey, p.AWS.SessionToken
		}
		if e := p.Entra; e != nil {
			pc.Cloud.EntraTenantID, pc.Cloud.EntraClientID, pc.Cloud.EntraClientSecret, pc.Cloud.EntraAuthority = e.TenantID, e.ClientID, e.ClientSecret, e.AuthorityHost
		}
		if p.CAFile != "" {
			pool, err := config.LoadCAs(p.CAFile)
			if err != nil {
				return fail(fmt.Errorf("provider %s: ca_file: %w", p.Name, err))
			}
			pc.RootCAs = pool
		}
		if p.Kind == "sim" {
			// The in-process simulator on a loopback port, reached over real
			// HTTP through the adapter of the provider's dialect; one for
			// every sim provider, for the gateway's life.
			if g.simBase == "" {
				base, stop, err := startSim(g.simOpts)
				if err != nil {
					return fail(fmt.Errorf("provider %s: %w", p.Name, err))
				}
				g.sims = append(g.sims, stop)
				g.simBase = base
			}
			pc.Kind, pc.APIKey = cmp.Or(p.Dialect, "openai"), ""
			pc.BaseURL = g.simBase + simPaths[pc.Kind]
		}
		var pv provider.Provider
		epKey := pc.APIKey
		if len(p.APIKeys) > 0 {
			epKey = "pool\x00" + p.Name
		}
		switch old, same := prev.sameProvider(p); {
		case same:
			pv = old
			if k := prev.keyed[p.Name]; k != nil {
				s.keyed[p.Name] = k
				s.keyedOrder = append(s.keyedOrder, p.Name)
			}
		case len(p.APIKeys) > 0:
			// A pool: an adapter per key (the sim's too: its prompt cache
			// is per key); the first checks the upstream's health.
			k, err := newKeyed(p, pc, g.quota, g)
			if err != nil {
				return fail(fmt.Errorf("provider %s: %w", p.Name, err))
			}
			s.keyed[p.Name] = k
			s.keyedOrder = append(s.keyedOrder, p.Name)
			pv = k.provs[0]
		default:
			var err error
			if pv, err = provider.New(pc); err != nil {
				return fail(fmt.Errorf("provider %s: %w", p.Name, err))
			}
		}
		s.providers[p.Name] = pv
		endpoints[p.Name] = s.health.add(endpointKey(pc.Kind, pc.BaseURL, epKey), p.Name, pv, p.HealthCheck)
	}
	for i := range cfg.Models {
		m := &cfg.Models[i]
		var all, embed []target
		for _, r := range m.Routes {
			p, ok := s.providers[r.Provider]
			if !ok {
				return fail(fmt.Errorf("model %s: unknown provider %q", m.Name, r.Provider))
			}
			name := r.Provider + "/" + r.Model
			ep := endpoints[r.Provider]
			if ep == nil { // given as a value (Options.Providers): an upstream of its own
				ep = s.health.add("provider\x00"+r.Provider, r.Provider, p, healthCheckOf(cfg, r.Provider))
				endpoints[r.Provider] = ep
			}
			if !slices.Contains(ep.routes, name) {
				ep.routes = append(ep.routes, name)
			}
			t := target{name: name, model: r.Model, provider: p, obs: g.m.Stream(m.Name, name),
				rt: route.OnEndpoint(name, r.Weight, ep.ep), cont: continuationOf(cfg, r.Provider), keys: s.keyed[r.Provider]}
			all = append(all, t)
			if _, ok := p.(provider.Embedder); ok {
				embed = append(embed, t)
			}
		}
		names := make([]string, len(all))
		for i := range all {
			names[i] = all[i].name
		}
		g.m.Known(m.Name, names, m.Hedge != nil, m.ContinueOnCut) // its counters at 0 from the start, a reload's new ones too
		var err error
		if s.routes[m.Name], err = newRouteSet(m, all); err == nil && len(embed) > 0 {
			s.embedRoutes[m.Name], err = newRouteSet(m, embed)
		}
		if err == nil {
			s.routes[m.Name].aff, err = newAffinityPlan(m, all)
		}
		if err != nil {
			return fail(fmt.Errorf("model %s: %w", m.Name, err))
		}
	}
	s.health.prev = nil
	return s, nil
}

// sameProvider returns the adapter of s's provider configured exactly as
// p (same name, kind, URL, keys and every other field); false when s is
// nil or has none such.
func (s *state) sameProvider(p config.Provider) (provider.Provider, bool) {
	if s == nil {
		return nil, false
	}
	old, ok := s.cfg.Provider(p.Name)
	if !ok || !reflect.DeepEqual(*old, p) {
		return nil, false
	}
	pv, ok := s.providers[p.Name]
	return pv, ok
}

// ErrNoConfigFile: a reload was asked of a gateway whose config has no
// file (serve on its embedded default).
var ErrNoConfigFile = errors.New("no config file to reload: the gateway runs on the embedded default (start it with --config FILE to reload one)")

// Change is what a reload changed in one list of the config (models,
// providers, keys, teams), by name; never a secret.
type Change struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
	Count   int      `json:"count"` // entries in the new config
}

// ReloadResult says what a reload changed.
type ReloadResult struct {
	File      string `json:"file,omitempty"`
	Models    Change `json:"models"`
	Providers Change `json:"providers"`
	Keys      Change `json:"keys"`
	Teams     Change `json:"teams"`
	// RestartRequired names the changed fields a reload does not apply
	// (restartOnly): their running values stay until a restart.
	RestartRequired []string `json:"restart_required"`
}

// ReloadFile reads the config file again (Options.Reload) and applies it
// (Reload). An unreadable or invalid file is refused, every problem
// logged in one WARN line, and the running config stays; the error is
// the config's (an errors.Join of its problems). ErrNoConfigFile without
// a file.
func (g *Gateway) ReloadFile(ctx context.Context) (*ReloadResult, error) {
	if g.reload == nil {
		return nil, ErrNoConfigFile
	}
	cfg, err := g.reload()
	if err != nil {
		g.log.LogAttrs(ctx, slog.LevelWarn, "config reload refused: the running config stays",
			slog.String("file", g.file), problemsAttr(err))
		return nil, &reloadError{err: err}
	}
	return g.Reload(ctx, cfg)
}

// Reload replaces the running config with cfg, a validated config
// (config.Load): requests admitted from now on see it, requests in flight
// (streams included) finish on the one they began on. What it cannot
// apply without a restart (restartOnly) keeps its running value, copied
// into cfg, and is named in the result and a WARN line. A key's team
// unknown to the config and the database refuses the reload. Success logs
// one INFO line. Safe for concurrent use; reloads are serialized.
func (g *Gateway) Reload(ctx context.Context, cfg *config.Config) (*ReloadResult, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	old := g.cur()
	kept := g.keepRunning(old.cfg, cfg)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := checkTeams(cctx, cfg, g.keyStore, g.log)
	cancel()
	if err == nil {
		var next *state
		if next, err = g.build(cfg, old); err == nil {
			if err = g.reloadMCP(cfg); err != nil {
				next.close(old)
			}
		}
		if err == nil {
			g.st.Store(next)
			g.shareKeys(next)
			g.dash.SetModels(next.modelNames()) // new models get rows of their own
			old.close(next)
			next.health.watchEjected()
		}
	}
	if err != nil {
		g.log.LogAttrs(ctx, slog.LevelWarn, "config reload refused: the running config stays",
			slog.String("file", g.file), problemsAttr(err))
		return nil, &reloadError{err: err}
	}
	res := &ReloadResult{File: g.file, RestartRequired: kept,
		Models:    diff(old.cfg.Models, cfg.Models, func(m *config.Model) string { return m.Name }),
		Providers: diff(old.cfg.Providers, cfg.Providers, func(p *config.Provider) string { return p.Name }),
		Keys:      diff(old.cfg.Keys, cfg.Keys, func(k *config.Key) string { return k.Name }),
		Teams:     diff(old.cfg.Teams, cfg.Teams, func(t *config.Team) string { return t.Name }),
	}
	if len(kept) > 0 {
		g.log.LogAttrs(ctx, slog.LevelWarn, "config reload: changed fields need a restart; their running values stay",
			slog.String("file", g.file), slog.Any("fields", kept))
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "config reloaded", slog.String("file", g.file),
		slog.String("models", res.Models.String()), slog.String("providers", res.Providers.String()),
		slog.String("keys", res.Keys.String()), slog.String("teams", res.Teams.String()))
	return res, nil
}

// String is c for a log line: "5 (+a -b ~c)".
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", c.Count)
	var parts []string
	for _, x := range []struct {
		sign  string
		names []string
	}{{"+", c.Added}, {"-", c.Removed}, {"~", c.Changed}} {
		for _, n := range x.names {
			parts = append(parts, x.sign+n)
		}
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, " ") + ")")
	}
	return b.String()
}

// diff compares two lists of named entries.
func diff[T any](old, cur []T, name func(*T) string) Change {
	c := Change{Added: []string{}, Removed: []string{}, Changed: []string{}, Count: len(cur)}
	was := map[string]*T{}
	for i := range old {
		was[name(&old[i])] = &old[i]
	}
	is := map[string]bool{}
	for i := range cur {
		n := name(&cur[i])
		is[n] = true
		switch o, ok := was[n]; {
		case !ok:
			c.Added = append(c.Added, n)
		case !reflect.DeepEqual(*o, cur[i]):
			c.Changed = append(c.Changed, n)
		}
	}
	for i := range old {
		if n := name(&old[i]); !is[n] {
			c.Removed = append(c.Removed, n)
		}
	}
	return c
}

// keepRunning copies into cfg the running values (old's) of the fields a
// reload does not apply and returns their names: what the process opened
// or built once at start (the listener, the database, redis, tracing, the
// admin API and dashboard, request body limits, the admission limits) and
// what unchanged providers were built with (timeouts.connect).
func (g *Gateway) keepRunning(old, cfg *config.Config) []string {
	kept := []string{}
	keep := func(name string, differ bool, restore func()) {
		if differ {
			kept = append(kept, name)
			restore()
		}
	}
	keep("listen", old.Listen != cfg.Listen, func() { cfg.Listen = old.Listen })
	keep("database", old.Database != cfg.Database, func() { cfg.Database = old.Database })
	keep("redis", old.Redis != cfg.Redis, func() { cfg.Redis = old.Redis })
	keep("otel", !reflect.DeepEqual(old.OTel, cfg.OTel), func() { cfg.OTel = old.OTel })
	keep("admin_key", old.AdminKey != cfg.AdminKey, func() { cfg.AdminKey = old.AdminKey })
	keep("dashboard", old.Dashboard != cfg.Dashboard, func() { cfg.Dashboard = old.Dashboard })
	if cfg.Replica == "" {
		cfg.Replica = old.Replica // the name serve gave at start (STREAMGATE_REPLICA, or host:port), not a change
	}
	keep("replica", old.Replica != cfg.Replica, func() { cfg.Replica = old.Replica })
	keep("trusted_proxies", !slices.Equal(old.TrustedProxies, cfg.TrustedProxies), func() { cfg.TrustedProxies = old.TrustedProxies })
	keep("max_body_bytes", old.MaxBody != cfg.MaxBody, func() { cfg.MaxBody = old.MaxBody })
	keep("max_decoding_bytes", old.MaxDecodingBytes != cfg.MaxDecodingBytes, func() { cfg.MaxDecodingBytes = old.MaxDecodingBytes })
	keep("keepalive", old.KeepAlive != cfg.KeepAlive, func() { cfg.KeepAlive = old.KeepAlive })
	keep("timeouts.connect", old.Timeouts.Connect != cfg.Timeouts.Connect, func() { cfg.Timeouts.Connect = old.Timeouts.Connect })
	keep("timeouts.request_body", old.Timeouts.RequestBody != cfg.Timeouts.RequestBody, func() { cfg.Timeouts.RequestBody = old.Timeouts.RequestBody })
	keep("responses.store_retention", old.Responses != cfg.Responses, func() { cfg.Responses = old.Responses })
	keep("limits", old.Limits != cfg.Limits, func() { cfg.Limits = old.Limits })
	keep("mcp.session_secret", old.MCP.SessionSecret != cfg.MCP.SessionSecret, func() { cfg.MCP.SessionSecret = old.MCP.SessionSecret })
	keep("mcp.session_ttl", old.MCP.SessionTTL != cfg.MCP.SessionTTL, func() { cfg.MCP.SessionTTL = old.MCP.SessionTTL })
	if g.limiter == nil && hasKeyLimit(cfg.Keys) {
		// No limiter was built at start: keys' max_streams wait for a restart.
		kept = append(kept, "keys[].max_streams")
	}
	return kept
}

// reloadError is a refused reload: the config's problems.
type reloadError struct{ err error }

func (e *reloadError) Error() string { return "config reload refused: " + e.err.Error() }
func (e *reloadError) Unwrap() error { return e.err }

// problemsAttr is a config error's problems for a log line: their count,
// and the problems joined with "; ".
func problemsAttr(err error) slog.Attr {
	ps := problems(err)
	return slog.Group("", slog.Int("count", len(ps)), slog.String("problems", strings.Join(ps, "; ")))
}

// problems are the lines of a config error (one problem each).
func problems(err error) []string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// adminReload is POST /admin/reload: ReloadFile. 200 with what changed
// (ReloadResult); 409 no_config_file on the embedded default; 400
// config_invalid with every problem ("problems") when the file is
// refused, the running config kept.
func (g *Gateway) adminReload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		g.writeError(w, r, &methodError{allow: "POST"})
		return
	}
	res, err := g.ReloadFile(r.Context())
	type errBody struct {
		Message  string   `json:"message"`
		Type     string   `json:"type"`
		Param    *string  `json:"param"`
		Code     string   `json:"code"`
		Problems []string `json:"problems,omitempty"`
	}
	switch {
	case errors.Is(err, ErrNoConfigFile):
		writeJSON(w, http.StatusConflict, map[string]errBody{"error": {Message: err.Error(), Type: "invalid_request_error", Code: "no_config_file"}})
	case err != nil:
		var re *reloadError
		ps := problems(err)
		if errors.As(err, &re) {
			ps = problems(re.err)
		}
		writeJSON(w, http.StatusBadRequest, map[string]errBody{"error": {
			Message: fmt.Sprintf("config reload refused (%d problems); the running config stays", len(ps)),
			Type:    "invalid_request_error", Code: "config_invalid", Problems: ps}})
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// shareKeys (re)builds, with redis set, the board that shares the
// benches and disables of st's provider key pools with the other replicas
// (package keyshare), closing the one it replaces: after a reload it
// knows the pools the new state holds. Their state is in Redis, so the
// new board reads what the old one had published.
func (g *Gateway) shareKeys(st *state) {
	if g.redis == nil {
		return
	}
	var b *keyshare.Board
	if len(st.keyed) > 0 {
		pools := make(map[string]*keypool.Pool, len(st.keyed))
		for name, k := range st.keyed {
			pools[name] = k.pool
		}
		b = keyshare.New(keyshare.Options{Client: g.redis, Pools: pools, Logger: g.log})
	}
	if old := g.board.Swap(b); old != nil {
		old.Close()
	}
}
