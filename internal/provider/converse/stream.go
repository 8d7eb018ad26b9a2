package converse

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/eventstream"
	"github.com/streamgate/streamgate/internal/provider"
)

// event is one Converse stream event's payload, every kind's members in
// one struct (an event carries only its own). Strings the chunks repeat
// (text, ids, names, input fragments) are kept as their raw JSON string
// literals and copied into the chunks as they are: nothing is decoded and
// encoded again.
type event struct {
	ContentBlockIndex *int `json:"contentBlockIndex"`
	Start             struct {
		ToolUse *struct {
			ToolUseID json.RawMessage `json:"toolUseId"`
			Name      json.RawMessage `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta struct {
		Text    json.RawMessage `json:"text"`
		ToolUse *struct {
			Input json.RawMessage `json:"input"`
		} `json:"toolUse"`
		ReasoningContent *struct {
			Text            json.RawMessage `json:"text"`
			Signature       json.RawMessage `json:"signature"`
			RedactedContent json.RawMessage `json:"redactedContent"`
		} `json:"reasoningContent"`
	} `json:"delta"`
	StopReason string      `json:"stopReason"`
	Usage      *tokenUsage `json:"usage"`
	Message    string      `json:"message"` // an exception's
}

// tokenUsage is Converse's TokenUsage, its counts as sent (api.Count
// reads them).
type tokenUsage struct {
	InputTokens           json.RawMessage `json:"inputTokens"`
	OutputTokens          json.RawMessage `json:"outputTokens"`
	CacheReadInputTokens  json.RawMessage `json:"cacheReadInputTokens"`
	CacheWriteInputTokens json.RawMessage `json:"cacheWriteInputTokens"`
}

// usage is a TokenUsage read: Converse's inputTokens excludes the cache
// reads and writes, so OpenAI's prompt_tokens is their sum.
type usage struct {
	input, output, cacheRead, cacheWrite int
	valid                                bool // every count present was a token count
}

func readUsage(u *tokenUsage) usage {
	out := usage{valid: true}
	for _, c := range []struct {
		raw json.RawMessage
		dst *int
	}{{u.InputTokens, &out.input}, {u.OutputTokens, &out.output}, {u.CacheReadInputTokens, &out.cacheRead}, {u.CacheWriteInputTokens, &out.cacheWrite}} {
		if len(c.raw) == 0 || string(c.raw) == "null" {
			continue
		}
		n, ok := api.Count(c.raw)
		if !ok {
			out.valid = false
		}
		*c.dst = n
	}
	_, _, total := out.openAI()
	if total >= api.CountLimit {
		out.valid = false
	}
	return out
}

// openAI is the usage as OpenAI counts it: prompt tokens every input
// token, cache reads and writes included.
func (u usage) openAI() (prompt, completion, total int) {
	prompt = u.input + u.cacheRead + u.cacheWrite
	return prompt, u.output, prompt + u.output
}

func (u usage) api() api.Usage {
	p, c, t := u.openAI()
	return api.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: t,
		PromptTokensDetails: api.PromptTokensDetails{CachedTokens: u.cacheRead, CacheWriteTokens: u.cacheWrite}}
}

func appendUsage(b []byte, u usage) []byte {
	p, c, t := u.openAI()
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(t), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cacheRead), 10)
	if u.cacheWrite > 0 {
		b = append(b, `,"cache_write_tokens":`...)
		b = strconv.AppendInt(b, int64(u.cacheWrite), 10)
	}
	return append(b, "}}"...)
}

// blockState is what the translator keeps of one content block.
type blockState struct {
	tool int  // the tool call's index, -1 when the block is not a toolUse
	args bool // a toolUse block streamed a non-empty input fragment
}

// translator turns the frames of one ConverseStream answer into OpenAI
// chat.completion.chunk events.
type translator struct {
	model   string
	created int64
	seed    [16]byte // hex: the stream's random part of the generated id
	prefix  []byte   // `{"id":…,"model":…,"choices":` of every chunk

	started  bool // the role chunk was queued
	stopped  bool // messageStop was read: the finish chunk was queued
	calls    int  // toolUse blocks started: the next call's index
	blocks   []blockState
	usage    usage
	hasUsage bool
	sent     bool // the usage chunk was queued
	// uncovered: content came after the metadata's usage.
	uncovered bool

	e    event
	out  []byte
	ends []int // the end of each queued chunk in out
	next int
}

func (t *translator) init(model string, created int64, seed [8]byte) {
	t.model, t.created = model, created
	hex.Encode(t.seed[:], seed[:])
}

// pop returns the next queued chunk, nil when none is left.
func (t *translator) pop() []byte {
	if t.next >= len(t.ends) {
		return nil
	}
	start := 0
	if t.next > 0 {
		start = t.ends[t.next-1]
	}
	t.next++
	return t.out[start:t.ends[t.next-1]]
}

func (t *translator) reset() {
	t.out, t.ends, t.next = t.out[:0], t.ends[:0], 0
}

// frame translates one event-stream message, queueing its chunks (none:
// a heartbeat). An exception or error message is a *provider.Error; a
// payload that is not the event's JSON wraps provider.ErrMalformed.
func (t *translator) frame(m *eventstream.Message) error {
	t.reset()
	switch {
	case m.Is(":message-type", "event"):
		return t.event(m.String(":event-type"), m.Payload)
	case m.Is(":message-type", "exception"):
		t.e = event{}
		_ = json.Unmarshal(m.Payload, &t.e)
		return exceptionError(m.String(":exception-type"), t.e.Message)
	case m.Is(":message-type", "error"):
		return exceptionError(m.String(":error-code"), m.String(":error-message"))
	}
	return nil // an unknown message type carries nothing for the client
}

// exceptionError is the *provider.Error of an exception in the stream, with
// the status AWS documents for it: another route may serve the request
// before content, as after that status before the stream.
func exceptionError(name, msg string) error {
	status := exceptionStatus(name)
	if msg == "" {
		msg = "bedrock stream " + name
	}
	return &provider.Error{Status: status, Retryable: provider.RetryableStatus(status), Type: name, Code: name, Message: msg}
}

// exceptionStatus is the HTTP status of an AWS exception name, as the
// Bedrock runtime's API reference lists them (either case, with or
// without the Exception suffix).
func exceptionStatus(name string) int {
	name, _, _ = strings.Cut(name, ":")
	switch strings.TrimSuffix(strings.ToLower(name), "exception") {
	case "validation":
		return http.StatusBadRequest
	case "accessdenied":
		return http.StatusForbidden
	case "unrecognizedclient", "expiredtoken", "invalidsignature", "incompletesignature", "missingauthenticationtoken":
		return http.StatusUnauthorized
	case "resourcenotfound":
		return http.StatusNotFound
	case "modeltimeout":
		return http.StatusRequestTimeout
	case "throttling", "toomanyrequests", "servicequotaexceeded":
		return http.StatusTooManyRequests
	case "modelnotready":
		return http.StatusTooManyRequests
	case "modelstreamerror":
		return http.StatusFailedDependency // 424
	case "serviceunavailable":
		return http.StatusServiceUnavailable
	case "modelerror":
		return http.StatusFailedDependency
	}
	return http.StatusInternalServerError
}

func (t *translator) event(typ string, payload []byte) error {
	t.e = event{}
	if err := json.Unmarshal(payload, &t.e); err != nil {
		return fmt.Errorf("%w: converse %s event: %v", provider.ErrMalformed, typ, err)
	}
	e := &t.e
	switch typ {
	case "messageStart":
		t.start()
	case "contentBlockStart":
		t.start()
		i, err := t.index(typ)
		if err != nil {
			return err
		}
		st := &t.blocks[i]
		if tu := e.Start.ToolUse; tu != nil {
			if st.tool >= 0 {
				return fmt.Errorf("%w: converse: content block %d started twice", provider.ErrMalformed, i)
			}
			if !isString(tu.ToolUseID) || !isString(tu.Name) {
				return fmt.Errorf("%w: converse: a toolUse start without its toolUseId and name", provider.ErrMalformed)
			}
			st.tool = t.calls
			t.calls++
			b := t.open(`{"tool_calls":[{"index":`)
			b = strconv.AppendInt(b, int64(st.tool), 10)
			b = append(b, `,"id":`...)
			b = append(b, tu.ToolUseID...)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = append(b, tu.Name...)
			b = append(b, `,"arguments":""}}]}`...)
			t.close(b, nil)
			t.uncovered = true
		}
	case "contentBlockDelta":
		t.start()
		i, err := t.index(typ)
		if err != nil {
			return err
		}
		d := &e.Delta
		before := len(t.ends)
		switch {
		case d.ToolUse != nil:
			st := &t.blocks[i]
			if st.tool < 0 {
				return fmt.Errorf("%w: converse: a toolUse delta for content block %d, which is not a toolUse", provider.ErrMalformed, i)
			}
			if !isString(d.ToolUse.Input) {
				return fmt.Errorf("%w: converse: a toolUse delta without its input string", provider.ErrMalformed)
			}
			if len(d.ToolUse.Input) > 2 {
				st.args = true
				b := t.open(`{"tool_calls":[{"index":`)
				b = strconv.AppendInt(b, int64(st.tool), 10)
				b = append(b, `,"function":{"arguments":`...)
				b = append(b, d.ToolUse.Input...)
				b = append(b, `}}]}`...)
				t.close(b, nil)
			}
		case d.ReasoningContent != nil:
			rc := d.ReasoningContent
			if isString(rc.Text) && len(rc.Text) > 2 {
				b := t.open(`{"reasoning_content":`)
				b = append(b, rc.Text...)
				t.close(append(b, '}'), nil)
			}
			if isString(rc.Signature) && len(rc.Signature) > 2 {
				b := t.open(`{"thinking_blocks":[{"type":"thinking","signature":`)
				b = append(b, rc.Signature...)
				t.close(append(b, `}]}`...), nil)
			}
			if isString(rc.RedactedContent) && len(rc.RedactedContent) > 2 {
				b := t.open(`{"thinking_blocks":[{"type":"redacted_thinking","data":`)
				b = append(b, rc.RedactedContent...)
				t.close(append(b, `}]}`...), nil)
			}
		case isString(d.Text):
			if len(d.Text) > 2 {
				b := t.open(`{"content":`)
				b = append(b, d.Text...)
				t.close(append(b, '}'), nil)
			}
		}
		if len(t.ends) > before {
			t.uncovered = true
		}
	case "contentBlockStop":
		i, err := t.index(typ)
		if err != nil {
			return err
		}
		if st := &t.blocks[i]; st.tool >= 0 && !st.args {
			// A call that streamed no input has {} for its arguments, as
			// the non-streamed answer's input would be.
			st.args = true
			b := t.open(`{"tool_calls":[{"index":`)
			b = strconv.AppendInt(b, int64(st.tool), 10)
			t.close(append(b, `,"function":{"arguments":"{}"}}]}`...), nil)
		}
	case "messageStop":
		t.start()
		if t.stopped {
			return fmt.Errorf("%w: converse: a second messageStop", provider.ErrMalformed)
		}
		if err := modelFailure(e.StopReason); err != nil {
			return err
		}
		t.stopped = true
		t.close(append(t.open(""), '{', '}'), finishReason(e.StopReason, t.calls > 0))
		if t.hasUsage {
			t.usageChunk() // the metadata came first
		}
	case "metadata":
		if e.Usage != nil {
			t.usage, t.hasUsage, t.uncovered = readUsage(e.Usage), true, false
			if t.stopped {
				t.usageChunk()
			}
		}
	}
	return nil
}

// index is the event's contentBlockIndex, its state made ready.
func (t *translator) index(typ string) (int, error) {
	ip := t.e.ContentBlockIndex
	if ip == nil || *ip < 0 || *ip > maxBlocks {
		return 0, fmt.Errorf("%w: converse %s event without a content block index in 0..%d", provider.ErrMalformed, typ, maxBlocks)
	}
	for len(t.blocks) <= *ip {
		t.blocks = append(t.blocks, blockState{tool: -1})
	}
	return *ip, nil
}

// maxBlocks bounds the content blocks of one answer the translator keeps
// state for.
const maxBlocks = 4096

// isString reports whether raw is a JSON string literal (encoding/json
// validated it).
func isString(raw json.RawMessage) bool { return len(raw) >= 2 && raw[0] == '"' }

// start queues the role chunk and fixes the chunks' prefix, once.
func (t *translator) start() {
	if t.started {
		return
	}
	t.started = true
	b := append(t.prefix[:0], `{"id":"chatcmpl-`...)
	b = append(b, t.seed[:]...)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, t.created, 10)
	b = append(b, `,"model":`...)
	b = api.AppendString(b, t.model)
	t.prefix = append(b, `,"choices":`...)
	t.close(append(t.open(`{"role":"assistant","content":""`), '}'), nil)
}

// open starts a chunk of one choice whose delta begins with delta.
func (t *translator) open(delta string) []byte {
	b := append(t.out, t.prefix...)
	b = append(b, `[{"index":0,"delta":`...)
	return append(b, delta...)
}

// close ends the chunk open left in b, with its finish reason (nil: null).
func (t *translator) close(b []byte, finish []byte) {
	b = append(b, `,"finish_reason":`...)
	if finish == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, finish...)
		b = append(b, '"')
	}
	t.out = append(b, "}]}"...)
	t.ends = append(t.ends, len(t.out))
}

// usageChunk queues the usage chunk (choices []), once, when its counts
// are token counts (else the gateway estimates the attempt).
func (t *translator) usageChunk() {
	if t.sent || !t.usage.valid {
		return
	}
	t.sent = true
	b := append(t.out, t.prefix...)
	b = append(b, `[],"usage":`...)
	b = appendUsage(b, t.usage)
	t.out = append(b, '}')
	t.ends = append(t.ends, len(t.out))
}

// OpenAI's finish reasons, shared and never modified.
var (
	reasonStop      = []byte("stop")
	reasonLength    = []byte("length")
	reasonToolCalls = []byte("tool_calls")
	contentFilter   = []byte("content_filter")
)

// finishReason maps Converse's stopReason to OpenAI's finish_reason (see
// the package comment); calls reports whether the answer holds tool calls.
func finishReason(r string, calls bool) []byte {
	switch r {
	case "max_tokens", "model_context_window_exceeded":
		return reasonLength
	case "guardrail_intervened", "content_filtered":
		return contentFilter
	case "tool_use":
		return reasonToolCalls
	}
	if calls {
		return reasonToolCalls
	}
	return reasonStop
}

// modelFailure is the error of a stopReason that says the model produced
// no usable answer (malformed_model_output, malformed_tool_use): a
// retryable 502, the next route before content and an error event after
// it, rather than a finish an agent reads as the model's last word.
func modelFailure(reason string) error {
	switch reason {
	case "malformed_model_output", "malformed_tool_use":
		return &provider.Error{Status: http.StatusBadGateway, Retryable: true, Type: "upstream_error", Code: reason,
			Message: "converse: stopReason " + reason + ": the model's output could not be read"}
	}
	return nil
}

// errTruncated is the end of a stream before messageStop.
var errTruncated = fmt.Errorf("%w: the converse stream ended before messageStop", provider.ErrTruncated)

// endError is the error of the decoder's end of input, nil for a clean
// end after messageStop.
func (t *translator) endError(err error) error {
	var fe *eventstream.FormatError
	switch {
	case err == io.EOF && t.stopped:
		return nil
	case err == io.EOF:
		return errTruncated
	case errors.As(err, &fe):
		return fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	return err
}
