package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/streamgate/streamgate/internal/mcp"
	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// mcpHosted is hosted MCP's tool runner over the gateway's MCP endpoint
// (package mcp, mcp.go): the tools a key may use, listed and called as
// /mcp lists and calls them — the key's mcp_tools, its rate limit and
// budget, one ledger row per call (route mcp/{server}, under the hosted
// request's id), a span per call under the turn's.
type mcpHosted struct{ g *Gateway }

var _ hostedMCP = mcpHosted{}

// Servers names the servers of the config in force.
func (m mcpHosted) Servers() []string { return mcpNames(m.g.cur().cfg) }

// Tools lists server's tools that c's key may use; none when it may use
// none of the server's.
func (m mcpHosted) Tools(ctx context.Context, c *hostedCaller, server string) ([]hostedTool, error) {
	ts, err := m.g.mcp.Tools(ctx, MCPCaller(c.Principal, c.RequestID), server)
	if errors.Is(err, mcp.ErrUnknownServer) {
		return nil, nil // configured (newTurn checked), but not the key's
	}
	if err != nil {
		return nil, err
	}
	out := make([]hostedTool, len(ts))
	for i, t := range ts {
		out[i] = hostedTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}
	}
	return out, nil
}

// CallTool runs server's tool: a JSON-RPC error, or a call the gateway
// refuses as /mcp would with one (a tool the key may not use), is a
// *hostedCallError; a refusal of admission (ErrRefused) keeps its cause
// (a rate limit, a budget: 429).
func (m mcpHosted) CallTool(ctx context.Context, c *hostedCaller, server, tool string, args json.RawMessage) (*hostedResult, error) {
	r, err := m.g.mcp.CallTool(ctx, MCPCaller(c.Principal, c.RequestID), server, tool, args)
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		return nil, &hostedCallError{Code: je.Code, Message: je.Message}
	case errors.Is(err, mcp.ErrToolNotAllowed), errors.Is(err, mcp.ErrUnknownServer), errors.Is(err, mcp.ErrUnknownTool):
		return nil, &hostedCallError{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	case err != nil:
		return nil, err
	}
	return &hostedResult{Content: r.Content, StructuredContent: r.StructuredContent, IsError: r.IsError}, nil
}
