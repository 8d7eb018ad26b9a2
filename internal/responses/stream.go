package responses

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// Encoder writes the relayed OpenAI chunks as the Responses event stream,
// in the order OpenAI sends it: response.created and response.in_progress;
// for each output item its response.output_item.added, its content events
// and its response.output_item.done; then exactly one of
// response.completed, response.incomplete (incomplete_details.reason
// max_output_tokens or content_filter) or response.failed, each with the
// whole response (output and usage). sequence_number counts from 0 across
// the stream; the relay resets the Encoder only while nothing reached the
// client, so a fallback, a hedge or a continuation keeps one sequence. No
// "[DONE]" ends it, as none ends OpenAI's.
//
// Items: text → a message with one output_text part (content_part.added,
// output_text.delta …, output_text.done, content_part.done); a refusal → a
// message with a refusal part; reasoning (reasoning_content) → a reasoning
// item, written as a summary (reasoning_summary_part.added,
// reasoning_summary_text.delta …) when the request asked for
// reasoning.summary, else as reasoning_text content; tool calls →
// function_call items (function_call_arguments.delta …, .done), or, for a
// custom tool, custom_tool_call items whose input (the function's "input"
// argument) comes whole at the end of the call. An Anthropic thinking
// block's signature (thinking_blocks) ends its reasoning item; with
// include reasoning.encrypted_content the item's encrypted_content then
// carries the block, signature included, for the client to send back (see
// the package comment); a redacted_thinking block is an item of its own.
// Calls stay open until text or reasoning follows them or the answer
// finishes (parallel calls may interleave); a text or reasoning item
// closes when another item begins.
//
// The usage of the end is the upstream's usage chunk (the relay forces it);
// without one (a cut, an error) it is the gateway's estimate, as the
// ledger counts an attempt cut before its usage: EstimatePrompt's prompt
// tokens and a token per content chunk. A keep-alive is an SSE comment,
// which SSE parsers skip.
type Encoder struct {
	m *Meta
	// EstimatePrompt returns the request's prompt tokens as the gateway
	// estimates them (for a response that ends without its upstream's
	// usage); nil: 0.
	EstimatePrompt func() int
	// OnEnd, when set, is called with the response object of the terminal
	// event (completed, incomplete or failed) as it is written, and where
	// its output items stand in it; both are valid during the call only.
	OnEnd func(resp []byte, output []OutputItem)

	seq      int64
	started  bool
	items    []item
	cur      int // the open message, refusal or reasoning item; -1: none
	run      int // the first item of the open calls' run; -1: none
	finish   string
	usage    usage
	hasUsage bool
	chunks   int // content chunks
	runes    int // characters of message text so far (annotations count in them)
	buf      []byte
	aux      []byte
	chunk    chunk
	pass     *passEncoder // see Pass; nil until asked
	spans    []OutputItem // OnEnd's
	// searching counts the web_search_call items open (search.go).
	searching int
	// last is the writer of the latest event: the relay writes the events
	// of a role chunk to a writer of its own, held until content commits
	// the stream (see Error).
	last *sse.Writer
}

var _ relay.Encoder = (*Encoder)(nil)

// NewEncoder returns an Encoder of the response m describes.
func NewEncoder(m *Meta) *Encoder { return &Encoder{m: m, cur: -1, run: -1} }

// chunk is the part of an OpenAI chunk the encoder reads.
type chunk struct {
	Model   string          `json:"model"` // the upstream's name of the model that answers
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
}

type choice struct {
	Index int `json:"index"`
	Delta struct {
		Content          string              `json:"content"`
		ReasoningContent string              `json:"reasoning_content"`
		Reasoning        string              `json:"reasoning"`
		Refusal          string              `json:"refusal"`
		ThinkingBlocks   []api.ThinkingBlock `json:"thinking_blocks"`
		ToolCalls        []api.ToolCall      `json:"tool_calls"`
		WebSearchCalls   []api.WebSearchCall `json:"web_search_calls"`
		Annotations      []api.Annotation    `json:"annotations"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Event names, which are also the events' types.
var (
	evCreated          = []byte("response.created")
	evInProgress       = []byte("response.in_progress")
	evCompleted        = []byte("response.completed")
	evIncomplete       = []byte("response.incomplete")
	evFailed           = []byte("response.failed")
	evItemAdded        = []byte("response.output_item.added")
	evItemDone         = []byte("response.output_item.done")
	evPartAdded        = []byte("response.content_part.added")
	evPartDone         = []byte("response.content_part.done")
	evTextDelta        = []byte("response.output_text.delta")
	evTextDone         = []byte("response.output_text.done")
	evRefusalDelta     = []byte("response.refusal.delta")
	evRefusalDone      = []byte("response.refusal.done")
	evSummaryAdded     = []byte("response.reasoning_summary_part.added")
	evSummaryDone      = []byte("response.reasoning_summary_part.done")
	evSummaryDelta     = []byte("response.reasoning_summary_text.delta")
	evSummaryTextDone  = []byte("response.reasoning_summary_text.done")
	evReasoningDelta   = []byte("response.reasoning_text.delta")
	evReasoningDone    = []byte("response.reasoning_text.done")
	evArgsDelta        = []byte("response.function_call_arguments.delta")
	evArgsDone         = []byte("response.function_call_arguments.done")
	evCustomInputDelta = []byte("response.custom_tool_call_input.delta")
	evCustomInputDone  = []byte("response.custom_tool_call_input.done")
	evSearchInProgress = []byte("response.web_search_call.in_progress")
	evSearchSearching  = []byte("response.web_search_call.searching")
	evSearchCompleted  = []byte("response.web_search_call.completed")
	evAnnotationAdded  = []byte("response.output_text.annotation.added")
)

// Reset implements relay.Encoder.
func (e *Encoder) Reset() {
	*e = Encoder{m: e.m, EstimatePrompt: e.EstimatePrompt, OnEnd: e.OnEnd, cur: -1, run: -1, buf: e.buf[:0], aux: e.aux[:0], items: e.items[:0], pass: e.pass, spans: e.spans[:0]}
}

// Event implements relay.Encoder.
func (e *Encoder) Event(w *sse.Writer, ev *sse.Event, info *api.ChunkInfo) error {
	if e.cur >= 0 && info != nil && info.Content && !info.Finish && !info.HasUsage && !info.Error && e.items[e.cur].kind == kindMessage {
		// The usual chunk, more text for the open message: its content
		// string is copied, still escaped, without a decode.
		if raw, ok := api.PlainContent(ev.Data); ok {
			e.chunks++
			if e.m.search {
				e.runes += api.EscapedRunes(raw[1 : len(raw)-1])
			}
			return e.rawText(w, raw[1:len(raw)-1])
		}
	}
	c := &e.chunk
	// Reset but keep the choices' array: the decoder fills it again.
	c.Model, c.Usage = "", c.Usage[:0]
	for i := range c.Choices {
		c.Choices[i] = choice{}
	}
	c.Choices = c.Choices[:0]
	if err := json.Unmarshal(ev.Data, c); err != nil {
		return nil // the relay scanned it as valid JSON; a shape it does not know carries nothing here
	}
	if !e.started {
		if c.Model != "" {
			e.m.Model = c.Model // the model that answers, as chat and passthrough name it
		}
		if err := e.start(w); err != nil {
			return err
		}
	}
	switch {
	case info != nil && info.HasUsage && !info.Usage.Invalid:
		// info's usage, which a continuation's earlier attempts are added to.
		u, _ := readUsage(c.Usage)
		e.usage, e.hasUsage = usageOf(&info.Usage, u.reasoning), true
	case info == nil:
		if u, ok := readUsage(c.Usage); ok {
			e.usage, e.hasUsage = u, true
		}
	}
	if info != nil && info.Content {
		e.chunks++
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // a response has one answer
		}
		d := &ch.Delta
		if r := d.ReasoningContent + d.Reasoning; r != "" {
			if err := e.text(w, kindReasoning, r); err != nil {
				return err
			}
		}
		for j := range d.ThinkingBlocks {
			if err := e.thinkingBlock(w, &d.ThinkingBlocks[j]); err != nil {
				return err
			}
		}
		if d.Refusal != "" {
			if err := e.text(w, kindRefusal, d.Refusal); err != nil {
				return err
			}
		}
		if d.Content != "" {
			if err := e.text(w, kindMessage, d.Content); err != nil {
				return err
			}
			if e.m.search {
				e.runes += utf8.RuneCountInString(d.Content)
			}
		}
		for j := range d.Annotations {
			if err := e.annotation(w, &d.Annotations[j]); err != nil {
				return err
			}
		}
		for j := range d.WebSearchCalls {
			if err := e.searchCall(w, &d.WebSearchCalls[j]); err != nil {
				return err
			}
		}
		for j := range d.ToolCalls {
			if err := e.tool(w, &d.ToolCalls[j]); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			e.finish = *ch.FinishReason
			if err := e.closeAll(w, itemStatus(e.finish)); err != nil {
				return err
			}
		}
	}
	return nil
}

// begin starts an event of type name in e.buf, up to its sequence number.
func (e *Encoder) begin(name []byte) []byte {
	b := append(e.buf[:0], `{"type":"`...)
	b = append(b, name...)
	b = append(b, `","sequence_number":`...)
	return strconv.AppendInt(b, e.seq, 10)
}

// emit queues the event b of type name.
func (e *Encoder) emit(w *sse.Writer, name, b []byte) error {
	e.buf, e.last = b, w
	e.seq++
	return w.Queue(name, b)
}

// ref appends the item reference of items[i]: its id and output index.
func (e *Encoder) ref(b []byte, i int) []byte {
	it := &e.items[i]
	if it.ref == nil {
		r := append(make([]byte, 0, 64), `,"item_id":`...)
		r = api.AppendString(r, it.id)
		r = append(r, `,"output_index":`...)
		it.ref = strconv.AppendInt(r, int64(i), 10)
	}
	return append(b, it.ref...)
}

func (e *Encoder) start(w *sse.Writer) error {
	e.started = true
	for _, name := range [][]byte{evCreated, evInProgress} {
		b := e.begin(name)
		b = append(b, `,"response":`...)
		b = e.m.appendResponse(b, nil, &final{status: "in_progress"}, nil)
		if err := e.emit(w, name, append(b, '}')); err != nil {
			return err
		}
	}
	return nil
}

// rawText writes text for the open message, raw the inside of a JSON
// string as sent.
func (e *Encoder) rawText(w *sse.Writer, raw []byte) error {
	it := &e.items[e.cur]
	it.text = append(it.text, raw...)
	b := e.begin(evTextDelta)
	b = e.ref(b, e.cur)
	b = append(b, `,"content_index":0,"delta":"`...)
	b = append(b, raw...)
	b = append(b, `","logprobs":[]}`...)
	return e.emit(w, evTextDelta, b)
}

// text writes s for an item of kind (message, refusal, reasoning), opening
// one when the open item is of another kind.
func (e *Encoder) text(w *sse.Writer, kind byte, s string) error {
	if e.cur < 0 || e.items[e.cur].kind != kind {
		if err := e.closeAll(w, "completed"); err != nil {
			return err
		}
		if err := e.open(w, kind); err != nil {
			return err
		}
	}
	it := &e.items[e.cur]
	if !it.part {
		if err := e.addPart(w, e.cur); err != nil {
			return err
		}
	}
	n := len(it.text)
	it.text = escaped(it.text, s)
	var name []byte
	var b []byte
	switch kind {
	case kindMessage:
		name = evTextDelta
		b = e.ref(e.begin(name), e.cur)
		b = append(b, `,"content_index":0,"delta":"`...)
	case kindRefusal:
		name = evRefusalDelta
		b = e.ref(e.begin(name), e.cur)
		b = append(b, `,"content_index":0,"delta":"`...)
	case kindReasoning:
		if e.m.summary {
			name = evSummaryDelta
			b = e.ref(e.begin(name), e.cur)
			b = append(b, `,"summary_index":0,"delta":"`...)
		} else {
			name = evReasoningDelta
			b = e.ref(e.begin(name), e.cur)
			b = append(b, `,"content_index":0,"delta":"`...)
		}
	}
	b = append(b, it.text[n:]...)
	b = append(b, '"')
	if kind == kindMessage {
		b = append(b, `,"logprobs":[]`...)
	}
	return e.emit(w, name, append(b, '}'))
}

// open adds an item of kind and writes its output_item.added.
func (e *Encoder) open(w *sse.Writer, kind byte) error {
	i := len(e.items)
	e.items = append(e.items, item{kind: kind, open: true, id: e.m.itemID(kind, i), base: e.runes})
	if kind == kindCall || kind == kindCustom {
		if e.run < 0 {
			e.run = i
		}
	} else {
		e.cur = i
	}
	return e.added(w, i)
}

// added writes output_item.added of items[i].
func (e *Encoder) added(w *sse.Writer, i int) error {
	b := e.begin(evItemAdded)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"item":`...)
	b = e.m.appendItem(b, &e.items[i], true)
	return e.emit(w, evItemAdded, append(b, '}'))
}

// addPart writes the added event of items[i]'s content or summary part.
func (e *Encoder) addPart(w *sse.Writer, i int) error {
	it := &e.items[i]
	it.part = true
	name, b := e.partEvent(i, true)
	switch it.kind {
	case kindMessage:
		b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":""}`...)
	case kindRefusal:
		b = append(b, `{"type":"refusal","refusal":""}`...)
	case kindReasoning:
		b = e.m.appendReasoningPart(b, &item{})
	}
	return e.emit(w, name, append(b, '}'))
}

// partEvent begins the added or done event of items[i]'s part, up to its "part" member's value.
func (e *Encoder) partEvent(i int, add bool) ([]byte, []byte) {
	name := evPartAdded
	if !add {
		name = evPartDone
	}
	summary := e.items[i].kind == kindReasoning && e.m.summary
	if summary {
		name = evSummaryAdded
		if !add {
			name = evSummaryDone
		}
	}
	b := e.ref(e.begin(name), i)
	if summary {
		b = append(b, `,"summary_index":0,"part":`...)
	} else {
		b = append(b, `,"content_index":0,"part":`...)
	}
	return name, b
}

// thinkingBlock handles a block of a delta's thinking_blocks: a signature
// ends the open reasoning item (opened if none is: a block without text),
// keeping the block for its encrypted_content; a redacted block is a
// reasoning item of its own.
func (e *Encoder) thinkingBlock(w *sse.Writer, tb *api.ThinkingBlock) error {
	var block []byte
	switch {
	case tb.Type == "thinking" && tb.Signature != "":
		if e.cur < 0 || e.items[e.cur].kind != kindReasoning {
			if err := e.closeAll(w, "completed"); err != nil {
				return err
			}
			if err := e.open(w, kindReasoning); err != nil {
				return err
			}
		}
		// The block's text is the item's, escaped already.
		it := &e.items[e.cur]
		block = append(e.aux[:0], `{"type":"thinking","thinking":"`...)
		block = append(block, it.text...)
		block = append(block, `","signature":`...)
		block = api.AppendString(block, tb.Signature)
		block = append(block, '}')
	case tb.Type == "redacted_thinking" && tb.Data != "":
		if err := e.closeAll(w, "completed"); err != nil {
			return err
		}
		if err := e.open(w, kindReasoning); err != nil {
			return err
		}
		block = append(e.aux[:0], `{"type":"redacted_thinking","data":`...)
		block = api.AppendString(block, tb.Data)
		block = append(block, '}')
	default:
		return nil
	}
	e.aux = block
	it := &e.items[e.cur]
	if it.blocks != nil {
		it.blocks = append(it.blocks, ',')
	}
	it.blocks = append(it.blocks, block...)
	return e.closeCur(w, "completed") // the next reasoning is another block
}

// tool routes one tool_calls element to its call: a new call opens its
// item, arguments stream as deltas (a custom call's are kept for its end).
func (e *Encoder) tool(w *sse.Writer, tc *api.ToolCall) error {
	i := e.callOf(tc)
	if i < 0 {
		if err := e.closeCur(w, "completed"); err != nil {
			return err
		}
		i = len(e.items)
		e.items = append(e.items, item{open: true, callID: tc.ID})
		it := &e.items[i]
		e.m.call(it, tc.Function.Name)
		it.id = e.m.itemID(it.kind, i)
		if tc.Index != nil {
			it.index, it.indexed = *tc.Index, true
		}
		if it.callID == "" {
			it.callID = "call_" + e.m.base + strconv.Itoa(i)
		}
		if e.run < 0 {
			e.run = i
		}
		if err := e.added(w, i); err != nil {
			return err
		}
	}
	args := tc.Function.Arguments
	if args == "" {
		return nil
	}
	it := &e.items[i]
	n := len(it.text)
	it.text = escaped(it.text, args)
	if it.kind == kindCustom {
		return nil
	}
	b := e.ref(e.begin(evArgsDelta), i)
	b = append(b, `,"delta":"`...)
	b = append(b, it.text[n:]...)
	return e.emit(w, evArgsDelta, append(b, `"}`...))
}

// callOf returns the open call tc continues, -1 for a new call: by index,
// or, for deltas without one, a new id or name starts a call and anything
// else continues the last one. A known index with another id is a new call
// (servers that number every call 0).
func (e *Encoder) callOf(tc *api.ToolCall) int {
	if e.run < 0 {
		return -1
	}
	if tc.Index == nil {
		if tc.ID == "" && tc.Function.Name == "" {
			return len(e.items) - 1
		}
		return -1
	}
	for i := len(e.items) - 1; i >= e.run; i-- {
		it := &e.items[i]
		if it.indexed && it.index == *tc.Index {
			if tc.ID != "" && tc.ID != it.callID {
				return -1
			}
			if it.name == "" && tc.Function.Name != "" {
				// A name after the call's start: its kind stays the one
				// its output_item.added said.
				kind := it.kind
				e.m.call(it, tc.Function.Name)
				it.kind = kind
			}
			return i
		}
	}
	return -1
}

// closeAll closes the open item and the open calls, with status.
func (e *Encoder) closeAll(w *sse.Writer, status string) error {
	if err := e.closeCur(w, status); err != nil {
		return err
	}
	if e.searching > 0 {
		for i := range e.items {
			if it := &e.items[i]; it.kind == kindSearch && it.open {
				if err := e.closeItem(w, i, status); err != nil {
					return err
				}
			}
		}
		e.searching = 0
	}
	if e.run < 0 {
		return nil
	}
	for i := e.run; i < len(e.items); i++ {
		if err := e.closeItem(w, i, status); err != nil {
			return err
		}
	}
	e.run = -1
	return nil
}

// closeCur closes the open message, refusal or reasoning item.
func (e *Encoder) closeCur(w *sse.Writer, status string) error {
	if e.cur < 0 {
		return nil
	}
	i := e.cur
	e.cur = -1
	return e.closeItem(w, i, status)
}

// closeItem writes the done events of items[i].
func (e *Encoder) closeItem(w *sse.Writer, i int, status string) error {
	it := &e.items[i]
	if !it.open {
		return nil
	}
	it.open, it.status = false, status
	switch it.kind {
	case kindMessage, kindRefusal, kindReasoning:
		if it.part {
			if err := e.textDone(w, i); err != nil {
				return err
			}
			name, b := e.partEvent(i, false)
			if it.kind == kindReasoning {
				b = e.m.appendReasoningPart(b, it)
			} else {
				b = appendPart(b, it)
			}
			if err := e.emit(w, name, append(b, '}')); err != nil {
				return err
			}
		}
	case kindCall:
		b := e.ref(e.begin(evArgsDone), i)
		b = append(b, `,"arguments":"`...)
		b = append(b, it.text...)
		if err := e.emit(w, evArgsDone, append(b, `"}`...)); err != nil {
			return err
		}
	case kindCustom:
		it.input = customInput(unescaped(it.text))
		if len(it.input) > 0 {
			b := e.ref(e.begin(evCustomInputDelta), i)
			b = append(b, `,"delta":"`...)
			b = append(b, it.input...)
			if err := e.emit(w, evCustomInputDelta, append(b, `"}`...)); err != nil {
				return err
			}
		}
		b := e.ref(e.begin(evCustomInputDone), i)
		b = append(b, `,"input":"`...)
		b = append(b, it.input...)
		if err := e.emit(w, evCustomInputDone, append(b, `"}`...)); err != nil {
			return err
		}
	}
	b := e.begin(evItemDone)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"item":`...)
	b = e.m.appendItem(b, it, false)
	return e.emit(w, evItemDone, append(b, '}'))
}

// textDone writes the text's done event of a message, refusal or
// reasoning item.
func (e *Encoder) textDone(w *sse.Writer, i int) error {
	it := &e.items[i]
	var name, b []byte
	switch {
	case it.kind == kindMessage:
		name = evTextDone
		b = e.ref(e.begin(name), i)
		b = append(b, `,"content_index":0,"text":"`...)
		b = append(b, it.text...)
		b = append(b, `","logprobs":[]}`...)
	case it.kind == kindRefusal:
		name = evRefusalDone
		b = e.ref(e.begin(name), i)
		b = append(b, `,"content_index":0,"refusal":"`...)
		b = append(b, it.text...)
		b = append(b, `"}`...)
	case e.m.summary:
		name = evSummaryTextDone
		b = e.ref(e.begin(name), i)
		b = append(b, `,"summary_index":0,"text":"`...)
		b = append(b, it.text...)
		b = append(b, `"}`...)
	default:
		name = evReasoningDone
		b = e.ref(e.begin(name), i)
		b = append(b, `,"content_index":0,"text":"`...)
		b = append(b, it.text...)
		b = append(b, `"}`...)
	}
	return e.emit(w, name, b)
}

// unescaped is the string whose JSON-escaped form is s.
func unescaped(s []byte) string {
	b, ok := api.AppendUnescaped(nil, s)
	if !ok {
		return string(s)
	}
	return string(b)
}

// end writes the response's terminal event: name with the whole response.
func (e *Encoder) end(w *sse.Writer, name []byte, f *final) error {
	if !e.hasUsage {
		e.usage = usage{out: e.chunks}
		if e.EstimatePrompt != nil {
			e.usage.in = e.EstimatePrompt()
		}
	}
	f.usage = &e.usage
	b := e.begin(name)
	b = append(b, `,"response":`...)
	start := len(b)
	if e.OnEnd != nil {
		e.spans = e.spans[:0]
		b = e.m.appendResponse(b, e.items, f, &e.spans)
		e.OnEnd(b[start:], e.spans)
	} else {
		b = e.m.appendResponse(b, e.items, f, nil)
	}
	if err := e.emit(w, name, append(b, '}')); err != nil {
		return err
	}
	return w.Flush()
}

// Done implements relay.Encoder: the open items' done events, then
// response.completed, or response.incomplete when the answer was cut short
// (finish_reason length or content_filter).
func (e *Encoder) Done(w *sse.Writer) error {
	if !e.started {
		if err := e.start(w); err != nil {
			return err
		}
	}
	if err := e.closeAll(w, itemStatus(e.finish)); err != nil {
		return err
	}
	status, reason := ending(e.finish)
	name := evCompleted
	if status == "incomplete" {
		name = evIncomplete
	}
	return e.end(w, name, &final{status: status, incomplete: reason, done: time.Now().Unix()})
}

// Error implements relay.Encoder: the open items end incomplete, and
// response.failed carries the error (its code and message) with the output
// so far and the usage.
func (e *Encoder) Error(w *sse.Writer, body []byte) error {
	if e.last != nil && e.last != w {
		// What was written went to the relay's held events, which a
		// failure before content drops: the client has seen none of it.
		e.Reset()
	}
	if !e.started {
		if err := e.start(w); err != nil {
			return err
		}
	}
	if err := e.closeAll(w, "incomplete"); err != nil {
		return err
	}
	return e.end(w, evFailed, &final{status: "failed", err: ErrorObject(body)})
}

// KeepAlive implements relay.Encoder: an SSE comment.
func (e *Encoder) KeepAlive(w *sse.Writer) error { return w.Comment(keepAliveText) }

var keepAliveText = []byte("keep-alive")

// ErrorBody implements relay.Encoder: the OpenAI error object, as OpenAI's
// Responses API answers errors.
func (e *Encoder) ErrorBody(_ int, body []byte) []byte { return body }
