package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"strings"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/dashboard"
	"github.com/streamgate/streamgate/internal/mcp"
	mcpupstream "github.com/streamgate/streamgate/internal/mcp/upstream"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/quota"
	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/usage"
)

// The MCP gateway (package mcp) is served at /mcp and /mcp/{server}: the
// gateway is its Governor (mcpGov) — the same keys, rate limits, budgets
// and ledger as the model requests — and opens a client (package upstream)
// of each configured server, kept across reloads while its config stays.

// mcpServer is one configured server and its client.
type mcpServer struct {
	cfg config.MCPServer
	srv mcp.Server
}

// newMCP builds the MCP endpoint of cfg; its sessions are sealed with a key
// derived from mcp.session_secret, else admin_key, else a random secret
// (logged: sessions then live and open on this process only).
func (g *Gateway) newMCP(cfg *config.Config) error {
	secret := cfg.MCP.SessionSecret
	switch {
	case secret != "":
	case cfg.AdminKey != "":
		secret = "admin_key\x00" + cfg.AdminKey
	default:
		secret = string(mcp.RandomSecret())
		if len(cfg.MCP.Servers) > 0 {
			g.log.Warn("mcp: neither mcp.session_secret nor admin_key is set: MCP sessions are sealed with a random key of this process, so they end at a restart and open on no other replica (set mcp.session_secret, the same on every replica)")
		}
	}
	sealer, err := mcp.NewSealer([]byte(secret))
	if err != nil {
		return err
	}
	m, err := mcp.NewMetrics(g.reg, g.m.DashboardRegistry())
	if err != nil {
		return fmt.Errorf("mcp metrics: %w", err)
	}
	g.mcpMetrics = m
	specs, opened, err := g.mcpSpecs(cfg)
	if err != nil {
		return err
	}
	// With redis: the journal of resumable streams is shared (a client
	// resumes on any replica), on a client of its own: a resumed stream
	// holds a connection for each XREAD BLOCK, which the 50 ms admission
	// calls must not wait behind. Without: each replica's memory.
	var journal mcp.Journal
	if cfg.Redis != "" {
		c, err := redisguard.NewClient(cfg.Redis)
		if err != nil { // validated at load
			closeOpened(opened, nil)
			return fmt.Errorf("mcp: redis: %w", err)
		}
		g.mcpRedis, journal = c, mcp.NewRedisJournal(c, "")
	}
	gw, err := mcp.New(mcp.Options{Servers: specs, Governor: mcpGov{g}, Sealer: sealer, SessionTTL: cfg.MCP.SessionTTL.D(),
		WriteError: g.writeError, ReadBody: g.mcpBody, Logger: g.log, Tracer: g.tracer, Metrics: m, MaxBody: g.maxBody, Version: metrics.ReadBuild().Version,
		Journal: journal})
	if err != nil {
		closeOpened(opened, nil)
		if g.mcpRedis != nil {
			g.mcpRedis.Close()
			g.mcpRedis = nil
		}
		return err
	}
	g.mcp, g.mcpOpen = gw, opened
	m.Servers(mcpNames(cfg))
	return nil
}

func mcpNames(cfg *config.Config) []string {
	out := make([]string, len(cfg.MCP.Servers))
	for i, s := range cfg.MCP.Servers {
		out[i] = s.Name
	}
	return out
}

// mcpSpecs are cfg's servers: the running client of a server whose config
// did not change, a new one (lazy: it connects at first use) for the others.
func (g *Gateway) mcpSpecs(cfg *config.Config) ([]mcp.ServerSpec, map[string]mcpServer, error) {
	specs := make([]mcp.ServerSpec, 0, len(cfg.MCP.Servers))
	opened := make(map[string]mcpServer, len(cfg.MCP.Servers))
	for _, s := range cfg.MCP.Servers {
		if o, ok := g.mcpOpen[s.Name]; ok && reflect.DeepEqual(o.cfg, s) {
			opened[s.Name] = o
		} else {
			srv, err := mcpupstream.Open(mcpupstream.Config{Name: s.Name, URL: s.URL, Command: s.Command, Env: s.Env, Headers: s.Headers,
				Timeout: s.Timeout.D(), MaxResult: s.MaxResultBytes}, g.log)
			if err != nil {
				closeOpened(opened, g.mcpOpen)
				return nil, nil, fmt.Errorf("mcp.servers %q: %w", s.Name, err)
			}
			opened[s.Name] = mcpServer{cfg: s, srv: srv}
		}
		specs = append(specs, mcp.ServerSpec{Name: s.Name, Server: opened[s.Name].srv, ToolPrices: s.ToolPrices})
	}
	return specs, opened, nil
}

// closeOpened closes the clients of opened that running does not hold.
func closeOpened(opened, running map[string]mcpServer) {
	for name, o := range opened {
		if r, ok := running[name]; !ok || r.srv != o.srv {
			o.srv.Close()
		}
	}
}

// reloadMCP applies a reloaded config's servers: a changed server's client
// is replaced, a removed one closed, clients listening are told the lists
// changed. Keys' mcp_tools apply from the next request.
func (g *Gateway) reloadMCP(cfg *config.Config) error {
	g.mcpMu.Lock()
	defer g.mcpMu.Unlock()
	specs, opened, err := g.mcpSpecs(cfg)
	if err != nil {
		return err
	}
	if err := g.mcp.SetServers(specs); err != nil {
		closeOpened(opened, g.mcpOpen)
		return err
	}
	g.mcpOpen = opened
	g.mcpMetrics.Servers(mcpNames(cfg))
	return nil
}

// mcpBody reads an MCP POST's body as every endpoint does (max_body_bytes,
// timeouts.request_body), marked read so that the connection is not closed
// under the stream that follows.
func (g *Gateway) mcpBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := g.readBody(w, r)
	if err != nil {
		st := statusOf(err).status
		return nil, &mcp.BodyError{Status: st, Err: err}
	}
	return b, nil
}

// mcpHealth is the MCP servers' health for the dashboard.
func (g *Gateway) mcpHealth() []dashboard.MCPHealth {
	if g.mcp == nil {
		return nil
	}
	hs := g.mcp.Health()
	out := make([]dashboard.MCPHealth, len(hs))
	for i, h := range hs {
		out[i] = dashboard.MCPHealth{Server: h.Server, Known: h.Known, OK: h.OK, Error: h.Error}
	}
	return out
}

// errNoMCP: /mcp asked for with no MCP server configured.
var errNoMCP = fmt.Errorf("%w: no MCP server is configured (mcp.servers)", errUnknownPath)

// errRebinding: an MCP request that reached a loopback listener from a
// loopback peer under a Host that is not a loopback name.
var errRebinding = errors.New("host not allowed")

// rebound reports an MCP request that a browser may have been led to by DNS
// rebinding (MCP's transport asks local servers to refuse it, as the Go
// SDK's server does): it reached a loopback address of the gateway from a
// loopback peer — not a trusted proxy's client — under a Host that is not
// a loopback name.
func rebound(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !loopback(local.String()) || loopback(r.Host) {
		return false
	}
	return loopback(r.RemoteAddr)
}

// loopback reports whether hostport names a loopback address or localhost.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// serveMCP serves /mcp and /mcp/{server}.
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	if len(g.cur().cfg.MCP.Servers) == 0 {
		g.writeError(w, r, errNoMCP)
		return
	}
	if rebound(r) {
		g.writeError(w, r, fmt.Errorf("%w: Host %q on a loopback address (DNS rebinding protection of MCP): a reverse proxy on this host must be listed in trusted_proxies and send X-Forwarded-For", errRebinding, r.Host))
		return
	}
	g.mcp.ServeHTTP(w, r)
}

// MCP is the gateway's MCP endpoint: its Tools and CallTool run a
// configured server's tools under a key (MCPCaller), as /mcp does.
func (g *Gateway) MCP() *mcp.Gateway { return g.mcp }

// MCPCaller is the mcp.Caller of a key's principal: its mcp_tools, its
// team, and the principal for admission. requestID names the request in
// the ledger.
func MCPCaller(p *auth.Principal, requestID string) *mcp.Caller {
	allow, servers := mcp.CallerAllow(p.MCPTools)
	return &mcp.Caller{Key: p.KeyID, Team: p.Team, Allow: allow, Servers: servers, RequestID: requestID, Data: p}
}

// mcpGov is the gateway as the MCP endpoint's Governor.
type mcpGov struct{ g *Gateway }

var _ mcp.Governor = mcpGov{}

// Authenticate finds the key as every endpoint does (Bearer or x-api-key).
func (m mcpGov) Authenticate(r *http.Request) (*mcp.Caller, error) {
	p, err := m.g.cur().keys.Authenticate(r)
	if err != nil {
		return nil, err
	}
	info := infoFrom(r.Context())
	info.keyID = p.KeyID // the access line names the key
	return MCPCaller(p, info.id), nil
}

// Admit counts a tool call as one request against the key's and its
// team's rpm and reserves its price against their budgets (shared by every
// replica through Redis when configured), as a model request is counted;
// settle books the price. A quota that fails lets the call through
// (logged), as it does a model request.
func (m mcpGov) Admit(ctx context.Context, c *mcp.Caller, server, tool string, price float64) (func(float64), error) {
	g := m.g
	p, _ := c.Data.(*auth.Principal)
	if p == nil || !needsQuota(p) {
		return func(float64) {}, nil
	}
	subs := []quota.Subject{{Scope: quota.ScopeKey, Name: p.KeyID,
		Limits: quota.Limits{RPM: p.RPM, Budget: budget.Limit{USD: p.BudgetUSD, Period: p.BudgetPeriod}}}}
	if p.Team != "" {
		team, err := g.cur().teams.get(ctx, p.Team)
		if err != nil {
			return nil, err
		}
		subs = append(subs, quota.Subject{Scope: quota.ScopeTeam, Name: team.Name,
			Limits: quota.Limits{RPM: team.RPM, Budget: budget.Limit{USD: team.BudgetUSD, Period: team.BudgetPeriod}}})
	}
	t, d, err := g.quota.AdmitAll(ctx, subs, price)
	var ex *budget.Exceeded
	switch {
	case errors.As(err, &ex):
		if ex.Scope == quota.ScopeTeam {
			g.m.Rejected(metrics.ScopeTeamBudget)
		} else {
			g.m.Rejected(metrics.ScopeBudget)
		}
		return nil, err
	case err != nil:
		g.log.LogAttrs(ctx, slog.LevelWarn, "quota check failed; tool call let through", slog.String("key", p.KeyID),
			slog.String("server", server), slog.String("error", err.Error()))
		return func(float64) {}, nil
	case !d.Allowed:
		s := subs[d.Subject]
		rle := &rateLimitError{limit: d.Limit, value: s.RPM, retryAfter: max(d.RetryAfter, 1e9)}
		if s.Scope == quota.ScopeTeam {
			rle.team = s.Name
			g.m.Rejected("team_" + d.Limit)
		} else {
			g.m.Rejected(d.Limit)
		}
		return nil, rle
	}
	return func(cost float64) { t.Settle(cost, 0) }, nil
}

// Record books a tool call as a ledger row: model the tool's name as /mcp
// shows it ("docs__search"), route "mcp/{server}", cost its price.
func (m mcpGov) Record(tc mcp.ToolCall) {
	e := usage.Entry{RequestID: tc.Caller.RequestID, Time: tc.Start, KeyID: tc.Caller.Key, Team: tc.Caller.Team, Model: tc.Name,
		Status: tc.Status, Outcome: ledgerOutcome(tc.Outcome), TokenSource: usage.SourceNone, CostUSD: tc.Price, Duration: tc.Duration, Error: tc.Err}
	if tc.Server != "" {
		e.Route = "mcp/" + tc.Server
	}
	if tc.Outcome != mcp.OutcomeRejected {
		e.Attempts = 1
	}
	m.g.rec.Record(e)
}

func ledgerOutcome(o string) string {
	switch o {
	case mcp.OutcomeOK, mcp.OutcomeToolError, mcp.OutcomeTooLarge:
		return usage.OutcomeOK // the tool answered (its own error, or cut: named in the row's error)
	case mcp.OutcomeTimeout:
		return usage.OutcomeTimeout
	case mcp.OutcomeRejected:
		return usage.OutcomeRejected
	case mcp.OutcomeClientGone:
		return usage.OutcomeClientCancelled
	}
	return usage.OutcomeUpstreamError
}
