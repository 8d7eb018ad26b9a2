package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// listKind is one of the lists /mcp aggregates.
type listKind struct {
	method, field string
	// routed: the item's name routes calls (tools, prompts), shown as
	// PrefixedName; else the name is only shown, as "server__name".
	routed bool
	uri    string // the member holding a URI to prefix ("" none)
}

var (
	kindTools     = listKind{method: "tools/list", field: "tools", routed: true}
	kindPrompts   = listKind{method: "prompts/list", field: "prompts", routed: true}
	kindResources = listKind{method: "resources/list", field: "resources", uri: "uri"}
	kindTemplates = listKind{method: "resources/templates/list", field: "resourceTemplates", uri: "uriTemplate"}
)

// nameTable maps the names /mcp shows of a server's tools (or prompts) to
// the server's own, from its last full list.
type nameTable struct {
	byShown map[string]string
	items   []object // the server's items as it gave them
	at      time.Time
}

func (e *entry) table(k *listKind) *atomic.Pointer[nameTable] {
	if k == &kindPrompts {
		return &e.prompts
	}
	return &e.tools
}

// Bounds of one server's list: pages, items.
const (
	maxPages = 100
	maxItems = 10_000
)

// fetch reads every page of a server's list (bounded), its items as the
// server gave them. A server that has no such list (method not found) has
// an empty one.
func (g *Gateway) fetch(ctx context.Context, e *entry, k *listKind) ([]object, error) {
	var items []object
	cursor := ""
	for page := 0; page < maxPages; page++ {
		var params object
		if cursor != "" {
			params.setString("cursor", cursor)
		}
		req := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: json.RawMessage("1"), Method: k.method}
		if params != nil {
			req.Params = params.raw()
		}
		resp, err := e.Server.Call(ctx, req, nil)
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			if resp.Error.Code == jsonrpc.CodeMethodNotFound {
				return nil, nil
			}
			return nil, fmt.Errorf("%s: %w", k.method, resp.Error)
		}
		res, err := parseObject(resp.Result)
		if err != nil {
			return nil, fmt.Errorf("%s: result: %w", k.method, err)
		}
		var raw []json.RawMessage
		if v := res.get(k.field); v != nil {
			if err := json.Unmarshal(v, &raw); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", k.method, k.field, err)
			}
		}
		for _, r := range raw {
			o, err := parseObject(r)
			if err != nil {
				return nil, fmt.Errorf("%s: an item: %w", k.method, err)
			}
			items = append(items, o)
			if len(items) > maxItems {
				return nil, fmt.Errorf("%s: more than %d items", k.method, maxItems)
			}
		}
		if cursor = res.str("nextCursor"); cursor == "" {
			break
		}
	}
	if k.routed {
		g.learn(e, k, items)
	}
	e.setHealth(nil)
	return items, nil
}

// learn keeps a server's full list as its name table; a name two items
// would show alike keeps the first (logged).
func (g *Gateway) learn(e *entry, k *listKind, items []object) {
	t := &nameTable{byShown: make(map[string]string, len(items)), items: items, at: time.Now()}
	names := make([]string, 0, len(items))
	for _, it := range items {
		name := it.str("name")
		shown := PrefixedName(e.Name, name)
		if prev, dup := t.byShown[shown]; dup {
			g.log.Warn("mcp: two names of a server show alike; the second is left out", slog.String("server", e.Name),
				slog.String("shown", shown), slog.String("kept", prev), slog.String("left_out", name))
			continue
		}
		t.byShown[shown] = name
		names = append(names, name)
	}
	e.table(k).Store(t)
	if k == &kindTools && g.m != nil {
		g.m.known(e.Name, names)
	}
}

// resolve returns the server's own name of the tool (or prompt) /mcp shows
// as shown, listing the server again when its table misses it (at most
// once a second).
func (g *Gateway) resolve(ctx context.Context, e *entry, k *listKind, shown string) (string, bool) {
	t := e.table(k).Load()
	if t != nil {
		if name, ok := t.byShown[shown]; ok {
			return name, true
		}
		if time.Since(t.at) < time.Second {
			return "", false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.listTO)
	defer cancel()
	if _, err := g.fetch(ctx, e, k); err != nil {
		return "", false
	}
	if t = e.table(k).Load(); t != nil {
		name, ok := t.byShown[shown]
		return name, ok
	}
	return "", false
}

// shownItem is an item as /mcp shows it, with what it is sorted by.
type shownItem struct {
	key    string
	server int
	o      object
}

// list answers a list request: /mcp/{server} passes it to the server (tools
// filtered by the key's allow-list); /mcp lists every usable server at once
// and shows the items prefixed, sorted by name (URI for resources) — the
// same order on every call and replica — in pages of its own cursors.
func (ex *exchange) list(k *listKind) {
	g, c := ex.g, ex.c
	if route := c.bind.Route; route != "" {
		ex.forward(g.servers.Load().get(route), ex.params, func(res object) object {
			if k == &kindTools {
				return filterTools(res, c, route)
			}
			return res
		})
		return
	}
	after := ""
	if cur := ex.params.str("cursor"); cur != "" {
		var ok bool
		if after, ok = decodeCursor(cur); !ok {
			ex.o.fail(ex.msg.ID, rpcErr(jsonrpc.CodeInvalidParams, "invalid cursor"))
			return
		}
	}
	es := g.usable(c)
	parts := make([][]object, len(es))
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ex.r.Context(), g.listTO)
			defer cancel()
			items, err := g.fetch(ctx, e, k)
			if err != nil {
				if ex.r.Context().Err() == nil {
					e.setHealth(err)
					g.log.Warn("mcp server left out of a list", slog.String("server", e.Name), slog.String("method", k.method), slog.String("error", err.Error()))
				}
				return
			}
			parts[i] = items
		})
	}
	wg.Wait()
	var all []shownItem
	for i, items := range parts {
		server := es[i].Name
		for _, it := range items {
			name := it.str("name")
			if k == &kindTools && !c.allows(server, name) {
				continue
			}
			o := slices.Clone(it)
			var key string
			if k.routed {
				key = PrefixedName(server, name)
				o.setString("name", key)
			} else {
				o.setString("name", server+Sep+name)
				key = PrefixedURI(server, it.str(k.uri))
				o.setString(k.uri, key)
			}
			all = append(all, shownItem{key: key, server: i, o: o})
		}
	}
	slices.SortStableFunc(all, func(a, b shownItem) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.server, b.server))
	})
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(all, after, func(it shownItem, s string) int { return cmp.Compare(it.key, s) })
		for start < len(all) && all[start].key == after {
			start++
		}
	}
	end := min(start+g.pageSize, len(all))
	page := make([]json.RawMessage, 0, end-start)
	for _, it := range all[start:end] {
		page = append(page, it.o.raw())
	}
	var res object
	b, _ := json.Marshal(page)
	res.set(k.field, b)
	if end < len(all) {
		res.setString("nextCursor", encodeCursor(all[end-1].key))
	}
	if ex.modern {
		res.setString("resultType", "complete")
		res.set("ttlMs", json.RawMessage("0"))
		res.setString("cacheScope", "private")
	}
	ex.o.reply(&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: ex.msg.ID, Result: res.raw()})
}

// filterTools leaves out of a tools/list result the tools c may not use.
func filterTools(res object, c *Caller, server string) object {
	if c.Allow == nil {
		return res
	}
	var raw []json.RawMessage
	if json.Unmarshal(res.get("tools"), &raw) != nil {
		return res
	}
	kept := make([]json.RawMessage, 0, len(raw))
	for _, r := range raw {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r, &t) == nil && c.allows(server, t.Name) {
			kept = append(kept, r)
		}
	}
	b, _ := json.Marshal(kept)
	res.set("tools", b)
	return res
}
