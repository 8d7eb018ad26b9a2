package responses

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/toolname"
)

// Hosted MCP (the gateway runs the tools of a request's "mcp" tools, see
// the gateway's hostedmcp.go): what the translation knows of it. A model
// sees an MCP server's tool as a function named by MCPFunctionName; the
// conversation's hosted-MCP items (mcp_call, mcp_list_tools,
// mcp_approval_request, mcp_approval_response) reach a route as the
// function calls and outputs they stand for (MCPHistory), so a later turn
// sends the model the same prompt the turn that ran them did.

// MCPFunctionName is the function name a model is offered the tool of
// the MCP server labelled label under: label__tool, or that name
// shortened with a hash where it is not a valid function name everywhere —
// the name /mcp shows the same tool under (package toolname).
func MCPFunctionName(label, tool string) string { return toolname.Join(label, tool) }

// IsMCPItem reports whether typ is the type of a hosted-MCP item.
func IsMCPItem(typ string) bool {
	switch typ {
	case "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response":
		return true
	}
	return false
}

// mcpItem is the members of a hosted-MCP item MCPHistory reads.
type mcpItem struct {
	Type              string          `json:"type"`
	ID                string          `json:"id"`
	ServerLabel       string          `json:"server_label"`
	Name              string          `json:"name"`
	Arguments         string          `json:"arguments"`
	Output            *string         `json:"output"`
	Error             json.RawMessage `json:"error"`
	ApprovalRequestID string          `json:"approval_request_id"`
	Approve           bool            `json:"approve"`
	Reason            *string         `json:"reason"`
}

// mcpExpander turns hosted-MCP items into function calls and outputs; it
// remembers the approval requests it met, for the declines that answer
// them.
type mcpExpander struct {
	requests map[string]mcpItem
}

// expand returns what the hosted-MCP item raw stands for in a
// conversation: an mcp_call is a function_call (its call_id the item's
// id) and its function_call_output (the output, or the error as text); an
// mcp_approval_response that declines is the declined call and an output
// saying so; mcp_list_tools, mcp_approval_request and an approval are
// nothing (the call approved is an mcp_call of a later response). An item
// that does not decode is nothing.
func (x *mcpExpander) expand(raw json.RawMessage) []json.RawMessage {
	var it mcpItem
	if json.Unmarshal(raw, &it) != nil {
		return nil
	}
	switch it.Type {
	case "mcp_call":
		id := it.ID
		if id == "" {
			id = "mcp_call"
		}
		out := ""
		switch {
		case it.Output != nil:
			out = *it.Output
		case isSet(it.Error):
			out = "error: " + MCPErrorText(it.Error)
		}
		return callPair(id, MCPFunctionName(it.ServerLabel, it.Name), it.Arguments, out)
	case "mcp_approval_request":
		if x.requests == nil {
			x.requests = map[string]mcpItem{}
		}
		x.requests[it.ID] = it
	case "mcp_approval_response":
		req, ok := x.requests[it.ApprovalRequestID]
		if it.Approve || !ok {
			return nil
		}
		out := "The user did not approve this call of " + req.Name + " on the MCP server " + req.ServerLabel + ": it was not run."
		if it.Reason != nil && *it.Reason != "" {
			out += " Reason: " + *it.Reason
		}
		return callPair(req.ID, MCPFunctionName(req.ServerLabel, req.Name), req.Arguments, out)
	}
	return nil
}

// callPair is a function_call and its output.
func callPair(callID, name, args, output string) []json.RawMessage {
	if args == "" {
		args = "{}"
	}
	call, _ := json.Marshal(struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}{"function_call", callID, name, args})
	res, _ := json.Marshal(struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}{"function_call_output", callID, output})
	return []json.RawMessage{call, res}
}

// MCPHistory returns items with each hosted-MCP item replaced by what it
// stands for (see mcpExpander.expand): items every route reads. Other
// items are kept as they are.
func MCPHistory(items []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items)+4)
	var x mcpExpander
	for _, it := range items {
		var head itemHead
		if json.Unmarshal(it, &head) == nil && IsMCPItem(head.Type) {
			out = append(out, x.expand(it)...)
			continue
		}
		out = append(out, it)
	}
	return out
}

// MCPErrorText is the text of an mcp_call's error: its message, its
// content's text for a tool's own error (mcp_tool_execution_error), the
// string when it is one (an older shape), else its JSON.
func MCPErrorText(raw json.RawMessage) string {
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var e struct {
		Message string          `json:"message"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &e) == nil {
		if e.Message != "" {
			return e.Message
		}
		if t := ContentText(e.Content); t != "" {
			return t
		}
	}
	return string(compact(raw))
}

// ContentText is the text of MCP content blocks (a tools/call result's
// content): the text blocks' text, one per line; a block of another type
// (image, audio, resource, …) as its JSON. A value that is not an array
// is its JSON.
func ContentText(raw json.RawMessage) string {
	if !isSet(raw) {
		return ""
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return string(compact(raw))
	}
	var b strings.Builder
	for _, bl := range blocks {
		var t struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		json.Unmarshal(bl, &t)
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if t.Type == "text" && t.Text != nil {
			b.WriteString(*t.Text)
			continue
		}
		b.Write(compact(bl))
	}
	return b.String()
}

// Usage is a response's token accounting, as a Responses usage object
// gives it.
type Usage struct {
	Input, Cached, CacheWrite, Output, Reasoning int
}

// Add adds u2's counts to u's.
func (u *Usage) Add(u2 Usage) {
	u.Input += u2.Input
	u.Cached += u2.Cached
	u.CacheWrite += u2.CacheWrite
	u.Output += u2.Output
	u.Reasoning += u2.Reasoning
}

// ReadUsage reads the "usage" of a response object; false when it has
// none.
func ReadUsage(resp []byte) (Usage, bool) {
	var r struct {
		Usage *struct {
			Input   int `json:"input_tokens"`
			Details struct {
				Cached     int `json:"cached_tokens"`
				CacheWrite int `json:"cache_write_tokens"`
			} `json:"input_tokens_details"`
			Output     int `json:"output_tokens"`
			OutDetails struct {
				Reasoning int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(resp, &r) != nil || r.Usage == nil {
		return Usage{}, false
	}
	u := r.Usage
	return Usage{Input: u.Input, Cached: u.Details.Cached, CacheWrite: u.Details.CacheWrite, Output: u.Output, Reasoning: u.OutDetails.Reasoning}, true
}

// Ending is how a response whose output the caller assembled ends (see
// Meta.AppendResponse).
type Ending struct {
	Status     string // in_progress, completed, incomplete or failed
	Incomplete string // incomplete_details.reason; "" none
	Error      []byte // a failed response's error object ({"code","message"}); nil none
	Usage      *Usage // nil: null (in progress)
}

// AppendResponse appends the response object of m whose output is output,
// items written as they are, ending as e says. With out, it appends where
// each output item stands in the response object (as the object starts
// at len(b)), for the response store.
func (m *Meta) AppendResponse(b []byte, output []json.RawMessage, e *Ending, out *[]OutputItem) []byte {
	f := final{status: e.Status, incomplete: e.Incomplete, err: e.Error, raw: output}
	if f.raw == nil {
		f.raw = []json.RawMessage{}
	}
	if e.Status == "completed" {
		f.done = time.Now().Unix()
	}
	if u := e.Usage; u != nil {
		f.usage = &usage{in: u.Input, out: u.Output, cached: u.Cached, cacheWrite: u.CacheWrite, reasoning: u.Reasoning}
	}
	return m.appendResponse(b, nil, &f, out)
}

// Output returns the output items of a response object; nil when it has
// none or is not one.
func Output(resp []byte) []json.RawMessage {
	var r struct {
		Output []json.RawMessage `json:"output"`
	}
	json.Unmarshal(resp, &r)
	return r.Output
}

// Encrypted reports whether the request asked for its reasoning items'
// encrypted_content (include reasoning.encrypted_content).
func (m *Meta) Encrypted() bool { return m.encrypted }

// NewItemID is a new id for an output item: prefix and 32 random hex
// digits.
func NewItemID(prefix string) string { return newItemID(prefix) }

// AppendEventHead begins a stream event of type typ numbered seq, up to
// its sequence_number: `{"type":…,"sequence_number":…` (no closing
// brace), as the Encoder begins its events.
func AppendEventHead(b []byte, typ string, seq int64) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	return strconv.AppendInt(b, seq, 10)
}
