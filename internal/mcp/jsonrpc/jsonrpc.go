// Package jsonrpc holds the JSON-RPC 2.0 message the MCP gateway reads from
// clients and servers and writes to them. A Message is any of the four
// kinds (request, notification, response, error response); ids, params and
// results stay raw so the gateway passes what it does not rewrite untouched.
package jsonrpc

import "encoding/json"

// Version is the only "jsonrpc" value a message may carry.
const Version = "2.0"

// Error codes of JSON-RPC 2.0 (MCP's own codes are added where they are used).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Message is one JSON-RPC 2.0 message. ID is nil for a notification; a
// request has Method, a response has Result or Error. Raw fields are kept as
// received (nil when absent).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// IsRequest reports a message that expects a response.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports a message that expects none.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports a result or an error response.
func (m *Message) IsResponse() bool { return m.Method == "" && (m.Result != nil || m.Error != nil) }
