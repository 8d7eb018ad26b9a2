package gateway

import (
	"context"
	"log/slog"
	"strings"

	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/responses"
	"github.com/streamgate/streamgate/internal/route"
)

// HeaderDroppedTools names, comma-separated, the built-in tools of a
// Responses request the route that served it left out: it translates the
// Responses API and has no counterpart of them (a web_search it maps to
// its provider's own search tool is not dropped). Absent when none was.
const HeaderDroppedTools = "X-Streamgate-Dropped-Tools"

// droppedTools returns the built-in tools of req (provider.Request.Builtins)
// an attempt on t leaves out, comma-separated ("" none: t passes the
// request through, or runs them all), and logs at INFO, once per model
// and tool, those left out for the first time: an agent that sends them
// with every request is told in the header, the operator once.
func (g *Gateway) droppedTools(ctx context.Context, c *call, t *target, req *provider.Request) string {
	if len(req.Builtins) == 0 || provider.Passes(t.provider, req) {
		return ""
	}
	runner, _ := t.provider.(provider.ToolRunner)
	var out []string
	fresh := false
	for _, typ := range req.Builtins {
		name := typ
		if responses.IsWebSearch(typ) {
			name = "web_search"
		}
		if runner != nil && runner.RunsTool(name) {
			continue
		}
		out = append(out, typ)
		if _, seen := g.droppedLogged.LoadOrStore(c.model.Name+"\x00"+typ, struct{}{}); !seen {
			fresh = true
		}
	}
	list := strings.Join(out, ",")
	if fresh {
		g.log.LogAttrs(ctx, slog.LevelInfo, "built-in tools dropped: the route cannot run them (logged once per model and tool)",
			slog.String("model", c.model.Name), slog.String("route", t.name), slog.String("tools", list))
	}
	return list
}

// preferFirst puts first, keeping their order, the routes of order whose
// target prefer is true of (see call.prefer).
func preferFirst(order []*route.Target, rs *routeSet, prefer func(*target) bool) {
	k := 0
	for i, rt := range order {
		if t := rs.target(rt); t != nil && prefer(t) {
			copy(order[k+1:i+1], order[k:i])
			order[k] = rt
			k++
		}
	}
}
