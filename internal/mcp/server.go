package mcp

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// Server is a client of one configured MCP server, as package
// internal/mcp/upstream provides it (the seam of docs/mcp.md's design): the
// handler speaks method-level JSON-RPC to it and never sees the server's
// own ids, connections or protocol era. It is declared here, method for
// method as upstream.Server, so that the handler and its tests depend on
// the seam only.
type Server interface {
	// Call sends req and returns the server's final response; every message
	// about req before it (progress, log messages, server→client requests)
	// goes to on, in order, from one goroutine.
	Call(ctx context.Context, req *jsonrpc.Message, on func(Event)) (*jsonrpc.Message, error)
	// Notify sends a client notification.
	Notify(ctx context.Context, n *jsonrpc.Message) error
	// Reply delivers the client's answer to a server→client request that an
	// Event carried with ReplyTo.
	Reply(ctx context.Context, replyTo string, resp *jsonrpc.Message) error
	// Listen passes the server's unsolicited notifications to on until ctx ends.
	Listen(ctx context.Context, on func(Event)) error
	// Info is what the server said about itself.
	Info(ctx context.Context) (Info, error)
	Close() error
}

// Event is one message from a server: a notification, or a server→client
// request with ReplyTo (an opaque reference Reply accepts on any replica).
type Event struct {
	Msg     *jsonrpc.Message
	ReplyTo string
}

// Info is a server's initialize or server/discover result as it sent it.
type Info struct {
	ProtocolVersion string
	Result          json.RawMessage
}

// Errors a Server returns (upstream.ErrTimeout, ErrTooLarge, ErrClosed
// once that package is in; matched with errors.Is).
var (
	ErrTimeout  = errors.New("mcp server timed out")
	ErrTooLarge = errors.New("mcp server's result is too large")
	ErrClosed   = errors.New("mcp server closed")
)
