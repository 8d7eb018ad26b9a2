package messages

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// Encoder writes the relayed OpenAI chunks as Anthropic's Messages event
// stream, in the order Anthropic sends it: message_start, a text, thinking
// or tool_use content block per run of deltas (content_block_start, _delta,
// _stop) with a ping after the first block's start, and at the end
// message_delta (stop_reason and usage) and message_stop. The relay's session needs IncludeUsage: the usage chunk
// ends up in message_delta.
//
// Tool calls are told apart by their tool_calls index (or, without one, by
// a new id or name), each its own tool_use block. Anthropic closes a block
// before it starts the next, and so does the Encoder, since clients read the
// stream that way (the TypeScript SDK's MessageStream reports the last
// block at each content_block_stop): one call streams live at a time; the
// live call's block closes as soon as its arguments form a complete JSON
// object, so calls sent one after the other (OpenAI's way) stream
// without waiting. The arguments of a call that arrive while another is
// live (calls interleaved 0, 1, 0, 1) are held, and written, as one
// input_json_delta, when the live call completes, at the finish, or before
// text that follows the calls. What is held is bounded by MaxHeld: past it
// every call is written as far as it got and closed, and later pieces of a
// closed call are dropped.
type Encoder struct {
	model string // the model the client asked for, until the upstream's first chunk names the one that answers

	started bool   // message_start written
	pinged  bool   // the ping after the first content_block_start written
	open    byte   // kind of the open content block: 0 none, 't' text, 'k' thinking, 'r' redacted_thinking, 'u' tool_use
	index   int    // index of the open block; the next block gets index+1
	stop    string // stop_reason, from the finish chunk
	refused bool   // an OpenAI refusal (delta.refusal) was written as text
	seq     []byte // stop_sequence as a JSON string, when stop is "stop_sequence"
	called  bool   // a tool_use block was written: the turn holds tool calls
	calls   []call // the turn's tool calls, in the order they appeared
	live    int    // calls[live] is the open tool_use block's call, when open is 'u'
	held    int    // bytes of arguments held for calls waiting their turn
	usage   usage  // message_delta's: the usage chunk's, else the prompt's as message_start had it
	prompt  usage  // message_start's (relay.Prompter)
	buf     []byte
	chunk   chunk // the chunk being translated, reused
}

// MaxHeld bounds the arguments an Encoder holds for tool calls that wait
// while another call streams (see Encoder).
const MaxHeld = 1 << 20

// call is one tool call of a turn.
type call struct {
	index   int  // its tool_calls index
	indexed bool // the deltas gave the index (else: told apart by id and name)
	state   uint8
	id      string
	name    string
	args    []byte // arguments held while waiting
	end     jsonEnd
}

// Call states.
const (
	callWaiting uint8 = iota // held: another call's block is open
	callLive                 // its block is open, its arguments stream
	callDone                 // its block was closed; later pieces are dropped
)

// jsonEnd follows a JSON text given in pieces, to tell when its value, an
// object or an array, is complete.
type jsonEnd struct {
	depth          int32
	str, esc, done bool
	other          bool // the value is not an object or array: never complete
}

func (j *jsonEnd) feed(s string) {
	for i := 0; i < len(s) && !j.done && !j.other; i++ {
		c := s[i]
		switch {
		case j.str:
			switch {
			case j.esc:
				j.esc = false
			case c == '\\':
				j.esc = true
			case c == '"':
				j.str = false
			}
		case c == '"' && j.depth > 0:
			j.str = true
		case c == '{' || c == '[':
			j.depth++
		case c == '}' || c == ']':
			j.depth--
			j.done = j.depth <= 0
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case j.depth == 0:
			j.other = true
		}
	}
}

var (
	_ relay.Encoder  = (*Encoder)(nil)
	_ relay.Prompter = (*Encoder)(nil)
)

// Prompt implements relay.Prompter: message_start's usage says these
// input tokens (prompt tokens less the cache reads and writes, which it
// says apart, as Anthropic does), and so does message_delta's when no
// usage chunk comes.
func (e *Encoder) Prompt(u api.Usage) {
	d := u.PromptTokensDetails
	e.prompt = usage{input: max(0, u.PromptTokens-d.CachedTokens-d.CacheWriteTokens), cacheRead: d.CachedTokens, cacheWrite: d.CacheWriteTokens}
	e.usage = e.prompt
}

// NewEncoder returns an Encoder for a request for model.
func NewEncoder(model string) *Encoder { return &Encoder{model: model, index: -1, live: -1} }

// usage is what message_delta reports.
type usage struct {
	input, output, cacheRead, cacheWrite int
}

// chunk is the part of an OpenAI chunk the encoder reads.
type chunk struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"` // the upstream's name of the model that answers
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
}

type choice struct {
	Delta struct {
		Content          string              `json:"content"`
		Refusal          string              `json:"refusal"` // OpenAI's: the model declined, in its words
		ReasoningContent string              `json:"reasoning_content"`
		Reasoning        string              `json:"reasoning"`
		ThinkingBlocks   []api.ThinkingBlock `json:"thinking_blocks"`
		ToolCalls        []api.ToolCall      `json:"tool_calls"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
	// StopReason is the stop string that ended the answer (vLLM's field,
	// which the anthropic adapter writes too), or a token id.
	StopReason json.RawMessage `json:"stop_reason"`
}

// Reset implements relay.Encoder.
func (e *Encoder) Reset() {
	*e = Encoder{model: e.model, index: -1, live: -1, buf: e.buf[:0], calls: e.calls[:0], seq: e.seq[:0]}
}

// Event implements relay.Encoder.
func (e *Encoder) Event(w *sse.Writer, ev *sse.Event, info *api.ChunkInfo) error {
	if e.started && e.open == 't' && info != nil && info.Content && !info.Finish && !info.HasUsage && !info.Error {
		// The usual chunk, more text for the open text block: its content
		// string is copied as the delta's, still escaped, without a decode.
		if raw, ok := api.PlainContent(ev.Data); ok {
			return e.rawDelta(w, raw)
		}
	}
	c := &e.chunk
	// Reset but keep the choices' array: the decoder fills it again.
	c.ID, c.Model, c.Usage = "", "", c.Usage[:0]
	for i := range c.Choices {
		c.Choices[i] = choice{}
	}
	c.Choices = c.Choices[:0]
	if err := json.Unmarshal(ev.Data, c); err != nil {
		return nil // the relay scanned it as valid JSON; a shape it does not know carries nothing here
	}
	if !e.started {
		if c.Model != "" {
			e.model = c.Model // the model that answers, as chat and passthrough name it
		}
		if err := e.start(w, c.ID); err != nil {
			return err
		}
	}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		e.usage = readUsage(c.Usage)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		d := &ch.Delta
		if r := d.ReasoningContent + d.Reasoning; r != "" {
			if err := e.delta(w, 'k', "thinking_delta", "thinking", r); err != nil {
				return err
			}
		}
		for j := range d.ThinkingBlocks {
			if err := e.thinkingBlock(w, &d.ThinkingBlocks[j]); err != nil {
				return err
			}
		}
		if d.Content != "" {
			if err := e.delta(w, 't', "text_delta", "text", d.Content); err != nil {
				return err
			}
		}
		if d.Refusal != "" {
			e.refused = true
			if err := e.delta(w, 't', "text_delta", "text", d.Refusal); err != nil {
				return err
			}
		}
		for j := range d.ToolCalls {
			if err := e.tool(w, &d.ToolCalls[j]); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			e.stop = StopReason(*ch.FinishReason)
			if seq, ok := stopSequence(*ch.FinishReason, ch.StopReason); ok {
				e.stop, e.seq = "stop_sequence", api.AppendString(e.seq[:0], seq)
			}
			if err := e.endCalls(w); err != nil {
				return err
			}
		}
	}
	return nil
}

// turnStop is the stop_reason of a turn whose finish chunk mapped to stop
// ("" when none came): a turn that holds tool calls ends "tool_use" unless
// it was cut short (max_tokens) or refused, whatever the upstream's
// finish_reason said. OpenAI-dialect servers often end such a turn with
// "stop" (vLLM, Ollama, some proxies), and agent loops (Claude Code, the
// SDKs' tool runners) run the tools only on "tool_use".
func turnStop(stop string, called bool) string {
	if stop == "" {
		stop = "end_turn"
	}
	if called && stop == "end_turn" {
		return "tool_use"
	}
	return stop
}

// refusalStop is the stop_reason of a turn that holds an OpenAI refusal
// (message.refusal, delta.refusal: structured outputs' "the model declined",
// which ends with finish_reason stop): refusal where it would be end_turn.
// The Messages API has no refusal field; the words reach the client as text.
func refusalStop(stop string, refused bool) string {
	if refused && stop == "end_turn" {
		return "refusal"
	}
	return stop
}

// stopSequence returns the stop sequence that ended an answer: a choice's
// stop_reason when it is a string and finish_reason is "stop" (vLLM sends
// the matched stop string there, a number for a stop token, null else).
func stopSequence(finish string, raw json.RawMessage) (string, bool) {
	var seq string
	if finish != "stop" || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &seq) != nil {
		return "", false
	}
	return seq, true
}

// StopReason maps an OpenAI finish_reason to Anthropic's stop_reason.
func StopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

func (e *Encoder) start(w *sse.Writer, id string) error {
	e.started = true
	b := append(e.buf[:0], `{"type":"message_start","message":{"id":`...)
	b = api.AppendString(b, messageID(id))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = api.AppendString(b, e.model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(e.prompt.input), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(e.prompt.cacheWrite), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(e.prompt.cacheRead), 10)
	b = append(b, `,"output_tokens":0}}}`...)
	e.buf = b
	return w.Queue([]byte("message_start"), b)
}

// ping writes the stream's first ping, once.
func (e *Encoder) ping(w *sse.Writer) error {
	if e.pinged {
		return nil
	}
	e.pinged = true
	return w.Queue([]byte("ping"), pingData)
}

var pingData = []byte(`{"type":"ping"}`)

// messageID gives an OpenAI completion id Anthropic's "msg_" prefix.
func messageID(id string) string {
	if id == "" {
		return "msg_streamgate"
	}
	if strings.HasPrefix(id, "msg_") {
		return id
	}
	return "msg_" + id
}

// delta writes a delta of a block of kind, opening the block first.
func (e *Encoder) delta(w *sse.Writer, kind byte, typ, field, text string) error {
	if e.open != kind {
		if err := e.endCalls(w); err != nil { // text after the calls: none can wait longer
			return err
		}
		if err := e.startBlock(w, kind, "", ""); err != nil {
			return err
		}
	}
	b := append(e.buf[:0], `{"type":"content_block_delta","index":`...)
	b = strconv.AppendInt(b, int64(e.index), 10)
	b = append(b, `,"delta":{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = api.AppendString(b, text)
	b = append(b, "}}"...)
	e.buf = b
	return w.Queue([]byte("content_block_delta"), b)
}

// rawDelta writes a text_delta whose text is raw, a JSON string as sent.
func (e *Encoder) rawDelta(w *sse.Writer, raw []byte) error {
	b := append(e.buf[:0], `{"type":"content_block_delta","index":`...)
	b = strconv.AppendInt(b, int64(e.index), 10)
	b = append(b, `,"delta":{"type":"text_delta","text":`...)
	b = append(b, raw...)
	b = append(b, "}}"...)
	e.buf = b
	return w.Queue(contentBlockDelta, b)
}

var contentBlockDelta = []byte("content_block_delta")

// thinkingBlock writes a thinking block of a delta's thinking_blocks
// (LiteLLM's field, which the anthropic adapter writes): a thinking
// block's signature ends the open thinking block (its text came as
// reasoning_content) with a signature_delta; a redacted_thinking block is
// a block of its own. Their text, if any, is not read: reasoning_content
// carries it.
func (e *Encoder) thinkingBlock(w *sse.Writer, tb *api.ThinkingBlock) error {
	switch {
	case tb.Type == "thinking" && tb.Signature != "":
		if e.open != 'k' {
			if err := e.endCalls(w); err != nil {
				return err
			}
			if err := e.startBlock(w, 'k', "", ""); err != nil {
				return err
			}
		}
		if err := e.delta(w, 'k', "signature_delta", "signature", tb.Signature); err != nil {
			return err
		}
		return e.closeBlock(w) // signed: the next reasoning is another block
	case tb.Type == "redacted_thinking" && tb.Data != "":
		if err := e.endCalls(w); err != nil {
			return err
		}
		if err := e.startBlock(w, 'r', "", tb.Data); err != nil {
			return err
		}
		return e.closeBlock(w)
	}
	return nil
}

// tool routes one tool_calls element to its call's block: streamed when
// the call is live or can become so, held while another call is live.
func (e *Encoder) tool(w *sse.Writer, tc *api.ToolCall) error {
	i := e.callOf(tc)
	c := &e.calls[i]
	args := tc.Function.Arguments
	switch c.state {
	case callDone:
		return nil // a closed block takes nothing more
	case callWaiting:
		if e.open != 'u' { // no call is live: this one streams
			return e.promote(w, i, args)
		}
		if e.held+len(args) > MaxHeld {
			c.args = append(c.args, args...)
			return e.endCalls(w)
		}
		e.held += len(args)
		c.args = append(c.args, args...)
		return nil
	}
	return e.liveArgs(w, i, args)
}

// callOf returns the position in e.calls of tc's call, added when new: by
// index, or, for deltas without one, a new id or name starts a call and
// anything else continues the last one. A known index with another id is a
// new call (servers that number every call 0).
func (e *Encoder) callOf(tc *api.ToolCall) int {
	if tc.Index != nil {
		for i := len(e.calls) - 1; i >= 0; i-- {
			c := &e.calls[i]
			if c.indexed && c.index == *tc.Index {
				if tc.ID == "" || c.id == "" || tc.ID == c.id {
					if c.id == "" {
						c.id = tc.ID
					}
					if c.name == "" {
						c.name = tc.Function.Name
					}
					return i
				}
				break
			}
		}
	} else if tc.ID == "" && tc.Function.Name == "" && len(e.calls) > 0 {
		return len(e.calls) - 1
	}
	c := call{id: tc.ID, name: tc.Function.Name, state: callWaiting}
	if tc.Index != nil {
		c.index, c.indexed = *tc.Index, true
	}
	e.calls = append(e.calls, c)
	e.called = true
	return len(e.calls) - 1
}

// promote opens the block of the waiting call i and writes what it held
// and args; it closes at once when that completes its arguments.
func (e *Encoder) promote(w *sse.Writer, i int, args string) error {
	if err := e.closeBlock(w); err != nil {
		return err
	}
	c := &e.calls[i]
	id := c.id
	if id == "" {
		id = "toolu_" + strconv.Itoa(e.index+1)
	}
	if err := e.startBlock(w, 'u', id, c.name); err != nil {
		return err
	}
	c.state, e.live = callLive, i
	if len(c.args) > 0 {
		held := string(c.args)
		e.held -= len(c.args)
		c.args = c.args[:0]
		args = held + args
	}
	return e.liveArgs(w, i, args)
}

// liveArgs writes arguments of the live call i; when they complete its
// JSON the block closes and the first waiting call takes its place.
func (e *Encoder) liveArgs(w *sse.Writer, i int, args string) error {
	c := &e.calls[i]
	if args == "" {
		return nil
	}
	if err := e.delta(w, 'u', "input_json_delta", "partial_json", args); err != nil {
		return err
	}
	if c.end.feed(args); !c.end.done {
		return nil
	}
	if err := e.closeBlock(w); err != nil {
		return err
	}
	for j := range e.calls {
		if e.calls[j].state == callWaiting {
			return e.promote(w, j, "")
		}
	}
	return nil
}

// endCalls closes the open block and writes every waiting call whole (its
// block's start, what it held, its stop): the turn's calls are over.
func (e *Encoder) endCalls(w *sse.Writer) error {
	if err := e.closeBlock(w); err != nil {
		return err
	}
	for i := range e.calls {
		if e.calls[i].state != callWaiting {
			continue
		}
		c := &e.calls[i]
		c.end.other = true // written whole: closed below whatever it holds
		if err := e.promote(w, i, ""); err != nil {
			return err
		}
		if err := e.closeBlock(w); err != nil {
			return err
		}
	}
	return nil
}

func (e *Encoder) startBlock(w *sse.Writer, kind byte, id, name string) error {
	e.open = kind
	e.index++
	b := append(e.buf[:0], `{"type":"content_block_start","index":`...)
	b = strconv.AppendInt(b, int64(e.index), 10)
	switch kind {
	case 't':
		b = append(b, `,"content_block":{"type":"text","text":""}}`...)
	case 'k':
		b = append(b, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
	case 'r': // name is the data
		b = append(b, `,"content_block":{"type":"redacted_thinking","data":`...)
		b = api.AppendString(b, name)
		b = append(b, "}}"...)
	case 'u':
		b = append(b, `,"content_block":{"type":"tool_use","id":`...)
		b = api.AppendString(b, id)
		b = append(b, `,"name":`...)
		b = api.AppendString(b, name)
		b = append(b, `,"input":{}}}`...)
	}
	e.buf = b
	if err := w.Queue([]byte("content_block_start"), b); err != nil {
		return err
	}
	return e.ping(w)
}

func (e *Encoder) closeBlock(w *sse.Writer) error {
	if e.open == 0 {
		return nil
	}
	if e.open == 'u' {
		e.calls[e.live].state, e.live = callDone, -1
	}
	e.open = 0
	b := append(e.buf[:0], `{"type":"content_block_stop","index":`...)
	b = strconv.AppendInt(b, int64(e.index), 10)
	b = append(b, '}')
	e.buf = b
	return w.Queue([]byte("content_block_stop"), b)
}

// Done implements relay.Encoder: the open block's stop, message_delta with
// the stop reason and usage, message_stop.
func (e *Encoder) Done(w *sse.Writer) error {
	if !e.started {
		if err := e.start(w, ""); err != nil {
			return err
		}
	}
	if err := e.endCalls(w); err != nil {
		return err
	}
	if err := e.ping(w); err != nil {
		return err
	}
	stop := refusalStop(turnStop(e.stop, e.called), e.refused)
	b := append(e.buf[:0], `{"type":"message_delta","delta":{"stop_reason":`...)
	b = api.AppendString(b, stop)
	b = append(b, `,"stop_sequence":`...)
	if e.stop == "stop_sequence" {
		b = append(b, e.seq...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `},"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(e.usage.input), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(e.usage.output), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(e.usage.cacheRead), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(e.usage.cacheWrite), 10)
	b = append(b, "}}"...)
	e.buf = b
	if err := w.Queue([]byte("message_delta"), b); err != nil {
		return err
	}
	return w.Event([]byte("message_stop"), []byte(`{"type":"message_stop"}`))
}

// Error implements relay.Encoder: one "error" event in Anthropic's shape.
func (e *Encoder) Error(w *sse.Writer, body []byte) error {
	return w.Event([]byte("error"), ErrorBody(0, body))
}

// KeepAlive implements relay.Encoder: Anthropic's ping event.
func (e *Encoder) KeepAlive(w *sse.Writer) error {
	return w.Event([]byte("ping"), pingData)
}

// ErrorBody implements relay.Encoder.
func (e *Encoder) ErrorBody(status int, body []byte) []byte { return ErrorBody(status, body) }
