package sim

import (
	"strconv"
	"unicode/utf8"
)

// chunker builds the JSON of one stream's chunks by appending into a reused
// buffer: the envelope is rendered once per stream, so a content chunk costs
// a few appends and no allocation once the buffer has grown.
type chunker struct {
	buf  []byte
	head []byte // {"id":...,"choices":[
	tail []byte // ]} or ],"usage":null}
	// usage is true when the client asked for the usage chunk; chunks then
	// carry "usage":null as OpenAI's do.
	usage bool
}

func newChunker(id, model string, created int64, includeUsage bool) *chunker {
	h := make([]byte, 0, 160+len(model))
	h = append(h, `{"id":`...)
	h = appendJSONString(h, id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = strconv.AppendInt(h, created, 10)
	h = append(h, `,"model":`...)
	h = appendJSONString(h, model)
	h = append(h, `,"system_fingerprint":"fp_sim","choices":[`...)
	tail := "]}"
	if includeUsage {
		tail = `],"usage":null}`
	}
	return &chunker{buf: make([]byte, 0, 512), head: h, tail: []byte(tail), usage: includeUsage}
}

// role returns the first chunk: the assistant role with empty content.
func (c *chunker) role() []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
	b = append(b, c.tail...)
	c.buf = b
	return b
}

// beginContent starts a content chunk; append tokens with token, then call
// endContent. Tokens must be JSON-escaped already.
func (c *chunker) beginContent() {
	c.buf = append(c.buf[:0], c.head...)
	c.buf = append(c.buf, `{"index":0,"delta":{"content":"`...)
}

func (c *chunker) token(tok []byte) { c.buf = append(c.buf, tok...) }

func (c *chunker) endContent() []byte {
	c.buf = append(c.buf, `"},"logprobs":null,"finish_reason":null}`...)
	c.buf = append(c.buf, c.tail...)
	return c.buf
}

// finish returns the chunk with an empty delta and the finish reason.
func (c *chunker) finish(reason string) []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	b = append(b, reason...)
	b = append(b, `"}`...)
	b = append(b, c.tail...)
	c.buf = b
	return b
}

// usageChunk returns the final usage chunk: no choices, usage filled in.
func (c *chunker) usageChunk(prompt, completion int) []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `}}`...)
	c.buf = b
	return b
}

// malformed returns a data line that is not valid JSON: a chunk cut in the
// middle of its content string, as a broken upstream or proxy produces.
func (c *chunker) malformed() []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{"content":"trunc`...)
	c.buf = b
	return b
}

// appendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
