package mcp

import "github.com/streamgate/streamgate/internal/mcp/upstream"

// Server is a client of one configured MCP server (package upstream): the
// handler speaks method-level JSON-RPC to it and never sees the server's
// own ids, connections or protocol era.
type Server = upstream.Server

// Event is one message from a server: a notification, or a server→client
// request with ReplyTo (an opaque reference Reply accepts on any replica).
type Event = upstream.Event

// Info is a server's initialize or server/discover result as it sent it.
type Info = upstream.Info

// Errors a Server returns (matched with errors.Is).
var (
	ErrTimeout  = upstream.ErrTimeout
	ErrTooLarge = upstream.ErrTooLarge
	ErrClosed   = upstream.ErrClosed
)
