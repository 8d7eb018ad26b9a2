package responses

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/api"
)

// Item kinds: an output item of the response.
const (
	kindMessage   byte = 'm' // a message with an output_text part
	kindRefusal   byte = 'x' // a message with a refusal part
	kindReasoning byte = 'r'
	kindCall      byte = 'f' // a function_call
	kindCustom    byte = 'c' // a custom_tool_call
	kindSearch    byte = 'w' // a web_search_call (search.go)
)

// item is one output item: what its events and the final response say
// of it. Texts are kept escaped as in a JSON string, without the quotes,
// so that they are written as they are.
type item struct {
	kind   byte
	open   bool
	part   bool   // its content or summary part was added
	status string // when closed: completed or incomplete
	id     string
	ref    []byte // its events' item_id and output_index members, once written
	text   []byte // the text, refusal, reasoning, or call arguments, escaped
	callID string // a call's
	name   string // a call's, as the client declared it
	space  string // a call's namespace; "" none
	index  int    // a call's tool_calls index, when indexed
	// indexed: the call's deltas gave its index (else it is told apart
	// by a new id or name).
	indexed bool
	input   []byte // a custom call's input, escaped: set when it closes
	// blocks are a reasoning item's Anthropic thinking blocks, as JSON
	// array elements (written into its encrypted_content); nil when none.
	blocks []byte
	// base is the characters of message text before a message item's;
	// annots its url_citation annotations, as JSON array elements.
	base   int
	annots []byte
	nannot int
}

// itemID is the id of the output item at index i: a prefix of its type
// and the response's random part.
func (m *Meta) itemID(kind byte, i int) string {
	p := "msg_"
	switch kind {
	case kindReasoning:
		p = "rs_"
	case kindCall:
		p = "fc_"
	case kindCustom:
		p = "ctc_"
	case kindSearch:
		p = "ws_"
	}
	return p + m.base + strconv.FormatInt(int64(i), 16)
}

// appendItem appends the item as a response's output holds it: whole, or,
// for output_item.added, as it begins (in progress, empty).
func (m *Meta) appendItem(b []byte, it *item, added bool) []byte {
	status := it.status
	if added {
		status = "in_progress"
	}
	b = append(b, `{"id":`...)
	b = api.AppendString(b, it.id)
	switch it.kind {
	case kindMessage, kindRefusal:
		b = append(b, `,"type":"message","status":"`...)
		b = append(b, status...)
		b = append(b, `","content":[`...)
		if !added {
			b = appendPart(b, it)
		}
		b = append(b, `],"role":"assistant"}`...)
	case kindReasoning:
		b = append(b, `,"type":"reasoning","summary":[`...)
		if !added && m.summary && len(it.text) > 0 {
			b = m.appendReasoningPart(b, it)
		}
		b = append(b, ']')
		if !m.summary {
			b = append(b, `,"content":[`...)
			if !added && len(it.text) > 0 {
				b = m.appendReasoningPart(b, it)
			}
			b = append(b, ']')
		}
		if !added && m.encrypted && it.blocks != nil {
			b = append(b, `,"encrypted_content":"`+thinkingPrefix...)
			raw := make([]byte, 0, len(it.blocks)+2)
			raw = append(append(append(raw, '['), it.blocks...), ']')
			b = base64.RawURLEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		}
		b = append(b, '}')
	case kindCall:
		b = append(b, `,"type":"function_call","status":"`...)
		b = append(b, status...)
		b = append(b, `","arguments":"`...)
		if !added {
			b = append(b, it.text...)
		}
		b = append(b, `","call_id":`...)
		b = api.AppendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = api.AppendString(b, it.name)
		b = appendNamespace(b, it)
		b = append(b, '}')
	case kindSearch:
		b = appendSearch(b, it, status)
	case kindCustom:
		b = append(b, `,"type":"custom_tool_call","status":"`...)
		b = append(b, status...)
		b = append(b, `","call_id":`...)
		b = api.AppendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = api.AppendString(b, it.name)
		b = appendNamespace(b, it)
		b = append(b, `,"input":"`...)
		if !added {
			b = append(b, it.input...)
		}
		b = append(b, `"}`...)
	}
	return b
}

func appendNamespace(b []byte, it *item) []byte {
	if it.space == "" {
		return b
	}
	b = append(b, `,"namespace":`...)
	return api.AppendString(b, it.space)
}

// call makes it the call of the chat function name: a function_call or,
// for a custom tool, a custom_tool_call, named as the client declared it.
func (m *Meta) call(it *item, name string) {
	it.kind, it.name = kindCall, name
	if ref, ok := m.tools[name]; ok {
		it.name, it.space = ref.name, ref.namespace
		if ref.custom {
			it.kind = kindCustom
		}
	}
}

// appendPart appends the content (or summary) part of a message or
// reasoning item, whole.
func appendPart(b []byte, it *item) []byte {
	switch it.kind {
	case kindMessage:
		b = append(b, `{"type":"output_text","annotations":[`...)
		b = append(b, it.annots...)
		b = append(b, `],"logprobs":[],"text":"`...)
	case kindRefusal:
		b = append(b, `{"type":"refusal","refusal":"`...)
	}
	b = append(b, it.text...)
	return append(b, `"}`...)
}

// appendReasoningPart is a reasoning item's part: summary_text or
// reasoning_text.
func (m *Meta) appendReasoningPart(b []byte, it *item) []byte {
	if m.summary {
		b = append(b, `{"type":"summary_text","text":"`...)
	} else {
		b = append(b, `{"type":"reasoning_text","text":"`...)
	}
	b = append(b, it.text...)
	return append(b, `"}`...)
}

// usage is a response's token accounting.
type usage struct {
	in, out, cached, cacheWrite, reasoning int
}

// usageOf reads an OpenAI usage object (counts as the ledger reads them).
func usageOf(u *api.Usage, reasoning int) usage {
	return usage{in: u.PromptTokens, out: u.CompletionTokens, cached: u.PromptTokensDetails.CachedTokens,
		cacheWrite: u.PromptTokensDetails.CacheWriteTokens, reasoning: reasoning}
}

// readUsage reads a chat usage object with its reasoning tokens; false
// when there is none, or a count is not a token count.
func readUsage(raw json.RawMessage) (usage, bool) {
	if !isSet(raw) {
		return usage{}, false
	}
	var u api.Usage
	var d struct {
		Details *struct {
			Reasoning api.TokenCount `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if json.Unmarshal(raw, &u) != nil || u.Invalid {
		return usage{}, false
	}
	r := 0
	if json.Unmarshal(raw, &d) == nil && d.Details != nil && !d.Details.Reasoning.Invalid {
		r = d.Details.Reasoning.N
	}
	return usageOf(&u, r), true
}

func appendUsage(b []byte, u *usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.in), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cached), 10)
	b = append(b, `,"cache_write_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cacheWrite), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.out), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.reasoning), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.in+u.out), 10)
	return append(b, '}')
}

// OutputItem is where one output item stands in a response object: its
// bytes are resp[Start:End], its id ID (the item's "id" member).
type OutputItem struct {
	ID         string
	Start, End int
}

// final is how a response ends.
type final struct {
	status     string // in_progress, completed, incomplete, failed
	incomplete string // incomplete_details.reason
	err        []byte // the error object of a failed response
	usage      *usage // nil: null (in progress)
	done       int64  // when it ended: completed_at of a completed response
	// raw, when not nil, is the output as items already written (hosted
	// MCP's, see AppendResponse), in place of the items.
	raw []json.RawMessage
}

// appendResponse appends the response object of m with its output items
// and how it ended.
//
// With out, it appends where each output item stands in the response
// object (from its first byte, as the object starts at len(b)).
func (m *Meta) appendResponse(b []byte, items []item, f *final, out *[]OutputItem) []byte {
	base := len(b)
	b = append(b, `{"id":`...)
	b = api.AppendString(b, m.ID)
	b = append(b, `,"object":"response","created_at":`...)
	b = strconv.AppendInt(b, m.CreatedAt, 10)
	b = append(b, `,"status":"`...)
	b = append(b, f.status...)
	b = append(b, `","completed_at":`...)
	if f.done > 0 && f.status == "completed" { // set for a completed response only
		b = strconv.AppendInt(b, f.done, 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"error":`...)
	if f.err != nil {
		b = append(b, f.err...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if f.incomplete != "" {
		b = append(b, `{"reason":`...)
		b = api.AppendString(b, f.incomplete)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = api.AppendString(b, m.Model)
	b = append(b, `,"output":[`...)
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		start := len(b)
		b = m.appendItem(b, &items[i], false)
		if out != nil {
			*out = append(*out, OutputItem{ID: items[i].id, Start: start - base, End: len(b) - base})
		}
	}
	for i, it := range f.raw {
		if i > 0 {
			b = append(b, ',')
		}
		start := len(b)
		b = append(b, it...)
		if out != nil {
			var h struct {
				ID string `json:"id"`
			}
			json.Unmarshal(it, &h)
			*out = append(*out, OutputItem{ID: h.ID, Start: start - base, End: len(b) - base})
		}
	}
	b = append(b, "],"...)
	b = append(b, m.echo...)
	b = append(b, `,"usage":`...)
	if f.usage != nil {
		b = appendUsage(b, f.usage)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// ending is the status and incomplete reason of a response whose answer
// finished with a chat finish_reason.
func ending(finish string) (status, reason string) {
	switch finish {
	case "length":
		return "incomplete", "max_output_tokens"
	case "content_filter":
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

// itemStatus is the status of an item closed by a finish_reason.
func itemStatus(finish string) string {
	if finish == "length" || finish == "content_filter" {
		return "incomplete"
	}
	return "completed"
}

// FromCompletion turns an OpenAI chat.completion body into the response
// object of m: reasoning (each signed thinking block an item of its own),
// the message, the calls (custom tools' as custom_tool_call items), status
// and usage.
// It also returns where each output item stands in it, to store it
// without reading it again.
func FromCompletion(body []byte, m *Meta) ([]byte, []OutputItem, error) {
	var c struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				api.RespMsg
				Refusal string `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, nil, fmt.Errorf("responses: the upstream's answer is not a chat completion: %w", err)
	}
	if c.Model != "" {
		m.Model = c.Model // the model that answered, as chat and passthrough name it
	}
	var items []item
	add := func(kind byte) *item {
		items = append(items, item{kind: kind, id: m.itemID(kind, len(items)), status: "completed"})
		return &items[len(items)-1]
	}
	finish := ""
	if len(c.Choices) > 0 {
		ch := &c.Choices[0]
		msg := &ch.Message
		finish = ch.FinishReason
		switch {
		case len(msg.ThinkingBlocks) > 0:
			for _, tb := range msg.ThinkingBlocks {
				it := add(kindReasoning)
				it.text = escaped(nil, tb.Thinking)
				it.blocks, _ = json.Marshal(tb)
			}
		case msg.ReasoningContent != "":
			add(kindReasoning).text = escaped(nil, msg.ReasoningContent)
		}
		for _, c := range msg.WebSearchCalls {
			it := add(kindSearch)
			it.callID, it.text = c.ID, escaped(nil, c.Query)
			if it.status = c.Status; it.status != "failed" {
				it.status = "completed"
			}
		}
		if msg.Refusal != "" {
			add(kindRefusal).text = escaped(nil, msg.Refusal)
		}
		if msg.Content != "" {
			it := add(kindMessage)
			it.text = escaped(nil, msg.Content)
			for i := range msg.Annotations {
				it.annotate(&msg.Annotations[i])
			}
		}
		for i, tc := range msg.ToolCalls {
			var it item
			m.call(&it, tc.Function.Name)
			it.id, it.status, it.callID = m.itemID(it.kind, len(items)), "completed", tc.ID
			if it.callID == "" {
				it.callID = "call_" + m.base + strconv.Itoa(i)
			}
			it.text = escaped(nil, tc.Function.Arguments)
			if it.kind == kindCustom {
				it.input = customInput(tc.Function.Arguments)
			}
			items = append(items, it)
		}
	}
	status, reason := ending(finish)
	for i := range items {
		if items[i].kind == kindMessage || items[i].kind == kindRefusal {
			items[i].status = itemStatus(finish)
		}
	}
	f := final{status: status, incomplete: reason, done: time.Now().Unix(), usage: &usage{}}
	if u, ok := readUsage(c.Usage); ok {
		*f.usage = u
	}
	var out []OutputItem
	b := m.appendResponse(make([]byte, 0, 1024), items, &f, &out)
	return b, out, nil
}

// customInput is a custom tool call's input, escaped: the "input" member
// of its arguments, or, when they are not such an object, the arguments
// themselves.
func customInput(args string) []byte {
	var v struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &v) == nil && v.Input != nil {
		return escaped(nil, *v.Input)
	}
	return escaped(nil, args)
}

// escaped appends s as the inside of a JSON string.
func escaped(b []byte, s string) []byte {
	n := len(b)
	b = api.AppendString(b, s)
	copy(b[n:], b[n+1:len(b)-1])
	return b[:len(b)-2]
}

// ErrorObject is a response's "error" of the OpenAI error body body:
// {"code","message"}, the code "server_error" when it has none.
func ErrorObject(body []byte) []byte {
	var e api.ErrorResponse
	json.Unmarshal(body, &e)
	code := "server_error"
	if e.Error.Code != nil && *e.Error.Code != "" {
		code = *e.Error.Code
	}
	msg := e.Error.Message
	if msg == "" {
		msg = "the request failed"
	}
	b := append([]byte(`{"code":`), api.AppendString(nil, code)...)
	b = append(b, `,"message":`...)
	b = api.AppendString(b, msg)
	return append(b, '}')
}
