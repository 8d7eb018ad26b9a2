package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// Tool is one tool of a server as the hosted MCP of /v1/responses sees it:
// its name as the server gives it.
type Tool struct {
	Name, Description string
	InputSchema       json.RawMessage
	Annotations       json.RawMessage // nil when the server gave none
}

// ToolResult is what a tool answered.
type ToolResult struct {
	Content           json.RawMessage // the content blocks, as the server sent them
	StructuredContent json.RawMessage // nil when none
	IsError           bool
}

// Tools lists the tools of server visible to c (its allow-list applied),
// names unprefixed, in the server's order. ErrUnknownServer for a server
// not configured or that c may not use.
func (g *Gateway) Tools(ctx context.Context, c *Caller, server string) ([]Tool, error) {
	e := g.servers.Load().get(server)
	if e == nil || !c.uses(server) {
		return nil, fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	ctx, cancel := context.WithTimeout(ctx, g.listTO)
	defer cancel()
	items, err := g.fetch(ctx, e, &kindTools)
	if err != nil {
		return nil, fmt.Errorf("MCP server %q: tools/list: %w", server, err)
	}
	out := make([]Tool, 0, len(items))
	for _, it := range items {
		t := Tool{Name: it.str("name"), Description: it.str("description"), InputSchema: it.get("inputSchema"), Annotations: it.get("annotations")}
		if c.allows(server, t.Name) {
			out = append(out, t)
		}
	}
	return slices.Clip(out), nil
}

// CallTool runs tool of server with args under c's allow-list, admission
// and ledger, as POST /mcp would: ErrUnknownServer, ErrToolNotAllowed or
// ErrRefused (wrapping the Governor's error) when the gateway refuses it;
// a JSON-RPC error of the server as a *jsonrpc.Error; a tool's own failure
// as a result with IsError. A result too large is a result with IsError
// and a notice saying so.
func (g *Gateway) CallTool(ctx context.Context, c *Caller, server, tool string, args json.RawMessage) (*ToolResult, error) {
	e := g.servers.Load().get(server)
	if e == nil || !c.uses(server) {
		return nil, fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	var params object
	params.setString("name", tool)
	if len(args) > 0 {
		params.set("arguments", args)
	}
	resp, err := g.runTool(ctx, c, e, tool, params, json.RawMessage("1"), nil, nil)
	switch {
	case errors.Is(err, ErrTooLarge):
		text, _ := json.Marshal([]map[string]string{{"type": "text", "text": tooLargeNotice(server, tool, err)}})
		return &ToolResult{Content: text, IsError: true}, nil
	case err != nil:
		return nil, err
	case resp.Error != nil:
		return nil, resp.Error
	}
	res, err := parseObject(resp.Result)
	if err != nil {
		return nil, fmt.Errorf("MCP server %q: tools/call result: %w", server, err)
	}
	if res.str("resultType") == "input_required" {
		return nil, fmt.Errorf("MCP server %q: tool %q asked for input (input_required), which a hosted call cannot give", server, tool)
	}
	out := &ToolResult{Content: res.get("content"), StructuredContent: res.get("structuredContent"), IsError: isToolError(resp.Result)}
	if out.Content == nil {
		out.Content = json.RawMessage("[]")
	}
	return out, nil
}

var _ error = (*jsonrpc.Error)(nil)
