package sim

import (
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
)

// chunker is the OpenAI dialect's encoder: it builds the JSON of one
// stream's chunks by appending into a reused buffer. The envelope is
// rendered once per stream, so a content chunk costs a few appends and no
// allocation once the buffer has grown.
type chunker struct {
	buf  []byte
	head []byte // {"id":...,"choices":[
	tail []byte // ]} or ],"usage":null}
	// usage is true when the client asked for the usage chunk; chunks then
	// carry "usage":null as OpenAI's do.
	usage  bool
	prompt int
	cached int    // prompt tokens read from the prompt cache
	reason int    // reasoning tokens (part of the completion tokens)
	stop   string // finish_reason
	tool   *toolCall
}

var _ encoder = (*chunker)(nil)

func newChunker(pl *plan, created int64) *chunker {
	h := make([]byte, 0, 160+len(pl.model))
	h = append(h, `{"id":`...)
	h = api.AppendString(h, pl.id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = strconv.AppendInt(h, created, 10)
	h = append(h, `,"model":`...)
	h = api.AppendString(h, pl.model)
	h = append(h, `,"system_fingerprint":"fp_sim","choices":[`...)
	tail := "]}"
	if pl.includeUsage {
		tail = `],"usage":null}`
	}
	return &chunker{buf: make([]byte, 0, 512), head: h, tail: []byte(tail), usage: pl.includeUsage,
		prompt: pl.promptTokens, cached: pl.cache.read, reason: pl.thinkTokens, stop: openAIFinish[pl.stop], tool: pl.tool}
}

// start writes the role chunk: the assistant role with empty content, or,
// for a tool call, content null and the call's id, type and name with
// empty arguments, as OpenAI opens a tool call.
func (c *chunker) start(st *streamState, flush bool) error {
	b := append(c.buf[:0], c.head...)
	if c.tool == nil {
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
	} else {
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":`...)
		b = api.AppendString(b, c.tool.id)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = api.AppendString(b, c.tool.name)
		b = append(b, `,"arguments":""}}]},"logprobs":null,"finish_reason":null}`...)
	}
	b = append(b, c.tail...)
	c.buf = b
	return st.emit(nil, b, flush)
}

// thinking is never called: OpenAI's chat completions stream no reasoning
// text; reasoning tokens only show in usage.
func (c *chunker) thinking(*streamState, [][]byte, int) error { return nil }

// text writes a content chunk of the escaped tokens.
func (c *chunker) text(st *streamState, toks [][]byte, _ int) error {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{"content":"`...)
	for _, t := range toks {
		b = append(b, t...)
	}
	b = append(b, `"},"logprobs":null,"finish_reason":null}`...)
	b = append(b, c.tail...)
	c.buf = b
	return st.emit(nil, b, true)
}

// toolArgs writes a tool_calls delta with one fragment of the arguments.
func (c *chunker) toolArgs(st *streamState, i int, _ int) error {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
	b = api.AppendString(b, c.tool.frags[i])
	b = append(b, `}}]},"logprobs":null,"finish_reason":null}`...)
	b = append(b, c.tail...)
	c.buf = b
	return st.emit(nil, b, true)
}

// finish writes the chunk with an empty delta and the finish reason, the
// usage chunk when asked (no choices, usage filled in), and [DONE].
func (c *chunker) finish(st *streamState, sent int) error {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	b = append(b, c.stop...)
	b = append(b, `"}`...)
	b = append(b, c.tail...)
	c.buf = b
	if err := st.emit(nil, b, false); err != nil {
		return err
	}
	if c.usage {
		b = append(c.buf[:0], c.head...)
		b = append(b, `],"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(c.prompt), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(sent), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(c.prompt+sent), 10)
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(c.cached), 10)
		b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(c.reason), 10)
		b = append(b, `}}}`...)
		c.buf = b
		if err := st.emit(nil, b, false); err != nil {
			return err
		}
	}
	return st.done()
}

// fail writes data: {"error":{...}}, as OpenAI sends a mid-stream error.
func (c *chunker) fail(st *streamState, n int) error {
	return st.emit(nil, errorEvent(n), true)
}

// malformed writes a data line that is not valid JSON: a chunk cut in the
// middle of its content string, as a broken upstream or proxy produces.
func (c *chunker) malformed(st *streamState) error {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{"content":"trunc`...)
	c.buf = b
	return st.emit(nil, b, true)
}
