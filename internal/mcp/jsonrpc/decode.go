package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Defaults of Limits' zero fields.
const (
	DefaultMaxBytes = 4 << 20
	DefaultMaxDepth = 64
	// maxDepthCap bounds any configured depth: encoding/json's own limit.
	maxDepthCap = 10000
)

// Limits bound what Decode accepts from another process. A zero field takes
// its default.
type Limits struct {
	// MaxBytes is the longest input, in bytes; 0 means DefaultMaxBytes.
	MaxBytes int
	// MaxDepth is the deepest nesting of arrays and objects, counting the
	// message object itself (and a batch's array) as 1; 0 means
	// DefaultMaxDepth. Values above 10,000 (encoding/json's limit) are
	// taken as 10,000.
	MaxDepth int
}

func (l Limits) bytes() int {
	if l.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return l.MaxBytes
}

func (l Limits) depth() int {
	switch {
	case l.MaxDepth <= 0:
		return DefaultMaxDepth
	case l.MaxDepth > maxDepthCap:
		return maxDepthCap
	}
	return l.MaxDepth
}

// ErrLimit is wrapped by a *DecodeError for an input over Limits (size or
// depth): errors.Is(err, ErrLimit) tells a reader that could not read a
// message apart from one that read a bad one.
var ErrLimit = errors.New("jsonrpc: limit exceeded")

// DecodeError is why Decode refused an input.
type DecodeError struct {
	// Code is the JSON-RPC code to answer with: CodeParseError for input
	// that is not JSON, CodeInvalidRequest for JSON that is not a valid
	// message (also for an input over Limits).
	Code int
	// Offset is the byte offset where the problem was found, -1 when the
	// problem is the whole input (its size).
	Offset int
	// Index is the batch element at fault, -1 outside a batch.
	Index int
	// Problem says what is wrong, naming the member or byte at fault.
	Problem string
	limit   bool
}

func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString("jsonrpc: ")
	if e.Code == CodeParseError {
		b.WriteString("invalid JSON")
	} else {
		b.WriteString("invalid message")
	}
	if e.Index >= 0 {
		fmt.Fprintf(&b, " (batch element %d)", e.Index)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " at byte %d", e.Offset)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Unwrap returns ErrLimit for an input over Limits, else nil.
func (e *DecodeError) Unwrap() error {
	if e.limit {
		return ErrLimit
	}
	return nil
}

// Decode reads one JSON-RPC 2.0 message, or a batch (a JSON array of
// messages, reported by batch), from data, which must hold exactly one JSON
// value (surrounding whitespace allowed).
//
// It is as strict as the JSON-RPC 2.0 specification, and stricter than
// encoding/json where a lenient reading would be ambiguous (STYLE 18):
//   - the input must be valid JSON as encoding/json judges it (bytes of
//     invalid UTF-8 inside strings are kept, as encoding/json keeps them);
//   - "jsonrpc" must be the string "2.0";
//   - a member named twice, or a member whose name differs from a known
//     one ("jsonrpc", "id", "method", "params", "result", "error") only by
//     case (encoding/json would take it), is refused; other members are
//     ignored;
//   - "id" is a string or a number, or null in a response; "method" a
//     string; "params" an object or an array ("params": null is taken as
//     absent); "error" an object with an integer "code" and a string
//     "message";
//   - a message is a request (method and id), a notification (method, no
//     id), or a response (id and exactly one of result and error);
//   - an empty batch is refused.
//
// The raw fields of the messages (ID, Params, Result, Error.Data) alias
// data: the caller must not modify data while it uses them. An error is a
// *DecodeError; one over Limits also wraps ErrLimit. A syntax error
// anywhere in the input takes precedence over an invalid message.
func Decode(data []byte, lim Limits) (msgs []Message, batch bool, err error) {
	if max := lim.bytes(); len(data) > max {
		return nil, false, &DecodeError{Code: CodeInvalidRequest, Offset: -1, Index: -1, limit: true,
			Problem: fmt.Sprintf("%d bytes, over the %d-byte limit", len(data), max)}
	}
	p := parser{data: data, maxDepth: lim.depth(), index: -1}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '[' {
		batch = true
		msgs = p.batch()
	} else {
		var m Message
		if p.message(&m, 1) {
			msgs = []Message{m}
		}
	}
	if p.syntax == nil {
		p.ws()
		if p.pos < len(p.data) {
			p.fail(p.pos, fmt.Sprintf("%s after the top-level value", p.describe()))
		}
	}
	if p.syntax != nil {
		return nil, batch, p.syntax
	}
	if p.invalid != nil {
		return nil, batch, p.invalid
	}
	return msgs, batch, nil
}

// parser reads one input. The first syntax error stops it; the first
// invalid message is kept while the rest is still checked for syntax.
type parser struct {
	data     []byte
	pos      int
	maxDepth int
	index    int // batch element being read, -1 outside a batch
	syntax   *DecodeError
	invalid  *DecodeError
}

func (p *parser) fail(at int, problem string) {
	if p.syntax == nil {
		p.syntax = &DecodeError{Code: CodeParseError, Offset: at, Index: p.index, Problem: problem}
	}
}

func (p *parser) refuse(at int, problem string) {
	if p.invalid == nil {
		p.invalid = &DecodeError{Code: CodeInvalidRequest, Offset: at, Index: p.index, Problem: problem}
	}
}

func (p *parser) tooDeep() {
	if p.syntax == nil {
		p.syntax = &DecodeError{Code: CodeInvalidRequest, Offset: p.pos, Index: p.index, limit: true,
			Problem: fmt.Sprintf("nested deeper than the limit of %d", p.maxDepth)}
	}
}

// describe names the byte at pos for an error message.
func (p *parser) describe() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	c := p.data[p.pos]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("unexpected %q", c)
	}
	return fmt.Sprintf("unexpected byte 0x%02x", c)
}

func (p *parser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// expect consumes c after optional whitespace, or records a syntax error.
func (p *parser) expect(c byte, what string) bool {
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == c {
		p.pos++
		return true
	}
	p.fail(p.pos, fmt.Sprintf("%s, want %s", p.describe(), what))
	return false
}

func (p *parser) batch() []Message {
	p.pos++ // '[', at depth 1: always within a limit
	var msgs []Message
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.refuse(p.pos-2, "empty batch")
		return nil
	}
	for i := 0; ; i++ {
		p.index = i
		var m Message
		if p.message(&m, 2) {
			msgs = append(msgs, m)
		}
		if p.syntax != nil {
			return nil
		}
		p.index = -1
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if !p.expect(']', `"," or "]" in the batch`) {
			return nil
		}
		return msgs
	}
}

// member names of a message.
const (
	mJSONRPC = iota
	mID
	mMethod
	mParams
	mResult
	mError
	nMembers
)

var memberNames = [nMembers]string{"jsonrpc", "id", "method", "params", "result", "error"}

// message reads one value that must be a message object at nesting depth
// depth. It reports whether m holds a valid message; a value that is not an
// object is skipped (checked for syntax) and refused.
func (p *parser) message(m *Message, depth int) bool {
	p.ws()
	start := p.pos
	if p.pos >= len(p.data) || p.data[p.pos] != '{' {
		if p.pos >= len(p.data) {
			p.fail(p.pos, "end of input, want a JSON value")
			return false
		}
		p.value(depth)
		if p.syntax == nil {
			p.refuse(start, "a message must be a JSON object")
		}
		return false
	}
	if depth > p.maxDepth {
		p.tooDeep()
		return false
	}
	p.pos++
	var raw [nMembers]json.RawMessage
	var at [nMembers]int
	ok := true
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
	} else {
		for {
			p.ws()
			keyAt := p.pos
			key, escaped, good := p.str()
			if !good {
				return false
			}
			if !p.expect(':', `":" after the member name`) {
				return false
			}
			p.ws()
			valAt := p.pos
			p.value(depth + 1)
			if p.syntax != nil {
				return false
			}
			name := string(key)
			if escaped {
				name = unquote(p.data[keyAt:valAt])
			}
			for i, known := range memberNames {
				switch {
				case name == known:
					if raw[i] != nil {
						p.refuse(keyAt, fmt.Sprintf("member %q appears twice", known))
						ok = false
					}
					raw[i], at[i] = p.data[valAt:p.pos], valAt
				case strings.EqualFold(name, known):
					p.refuse(keyAt, fmt.Sprintf("member %q differs from %q only by case", name, known))
					ok = false
				}
			}
			p.ws()
			if p.pos < len(p.data) && p.data[p.pos] == ',' {
				p.pos++
				continue
			}
			if !p.expect('}', `"," or "}" in the message object`) {
				return false
			}
			break
		}
	}
	return p.build(m, start, &raw, &at) && ok
}

// unquote returns the string of a JSON string token that holds escapes
// (whitespace and ':' after it allowed). The token is valid JSON already.
func unquote(tok []byte) string {
	end := len(tok)
	for end > 0 && tok[end-1] != '"' {
		end--
	}
	var s string
	_ = json.Unmarshal(tok[:end], &s)
	return s
}

// build checks the members of one message object and fills m.
func (p *parser) build(m *Message, start int, raw *[nMembers]json.RawMessage, at *[nMembers]int) bool {
	v := raw[mJSONRPC]
	if v == nil {
		p.refuse(start, `member "jsonrpc" is missing, want "2.0"`)
		return false
	}
	if s, isStr := stringOf(v); !isStr || s != Version {
		p.refuse(at[mJSONRPC], fmt.Sprintf(`"jsonrpc" is %s, want "2.0"`, clip(v)))
		return false
	}
	m.JSONRPC = Version
	if v := raw[mMethod]; v != nil {
		s, isStr := stringOf(v)
		if !isStr {
			p.refuse(at[mMethod], fmt.Sprintf(`"method" is %s, want a string`, clip(v)))
			return false
		}
		m.Method = s
	}
	if v := raw[mID]; v != nil {
		switch v[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default:
			p.refuse(at[mID], fmt.Sprintf(`"id" is %s, want a string or a number`, clip(v)))
			return false
		}
		m.ID = v
	}
	if v := raw[mParams]; v != nil {
		switch v[0] {
		case '{', '[':
			m.Params = v
		case 'n': // null: absent
		default:
			p.refuse(at[mParams], fmt.Sprintf(`"params" is %s, want an object or an array`, clip(v)))
			return false
		}
	}
	m.Result = raw[mResult]
	if v := raw[mError]; v != nil {
		if v[0] != '{' {
			p.refuse(at[mError], fmt.Sprintf(`"error" is %s, want an object`, clip(v)))
			return false
		}
		var e struct {
			Code    *int64          `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(v, &e); err != nil || e.Code == nil || e.Message == nil || int64(int(*e.Code)) != *e.Code {
			p.refuse(at[mError], `"error" must have an integer "code" and a string "message"`)
			return false
		}
		code := int(*e.Code)
		m.Error = &Error{Code: code, Message: *e.Message, Data: e.Data}
	}
	switch {
	case raw[mMethod] != nil:
		if m.Result != nil || m.Error != nil {
			p.refuse(start, `a message with "method" must not have "result" or "error"`)
			return false
		}
		if m.ID != nil && m.ID[0] == 'n' {
			p.refuse(at[mID], `a request's "id" must not be null`)
			return false
		}
	case m.Result != nil && m.Error != nil:
		p.refuse(start, `a response must not have both "result" and "error"`)
		return false
	case m.Result == nil && m.Error == nil:
		p.refuse(start, `a message needs "method" (request or notification) or "result" or "error" (response)`)
		return false
	case m.ID == nil:
		p.refuse(start, `a response must have "id"`)
		return false
	}
	return true
}

// stringOf returns the value of a JSON string token.
func stringOf(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	// Escapes, and invalid UTF-8 (which encoding/json replaces with U+FFFD
	// byte by byte), take the slow path.
	if bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner) {
		return unquote(v), true
	}
	return string(inner), true
}

// clip shows a raw value in an error message, cut to a readable length.
func clip(v json.RawMessage) string {
	const max = 40
	if len(v) <= max {
		return string(v)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return string(v[:cut]) + "…"
}

// value checks one JSON value at nesting depth depth (the depth it would
// have if it is an array or an object).
func (p *parser) value(depth int) {
	p.ws()
	if p.pos >= len(p.data) {
		p.fail(p.pos, "end of input, want a JSON value")
		return
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		if depth > p.maxDepth {
			p.tooDeep()
			return
		}
		p.pos++
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			return
		}
		for {
			p.ws()
			if _, _, ok := p.str(); !ok {
				return
			}
			if !p.expect(':', `":" after the member name`) {
				return
			}
			p.value(depth + 1)
			if p.syntax != nil {
				return
			}
			p.ws()
			if p.pos < len(p.data) && p.data[p.pos] == ',' {
				p.pos++
				continue
			}
			p.expect('}', `"," or "}" in the object`)
			return
		}
	case c == '[':
		if depth > p.maxDepth {
			p.tooDeep()
			return
		}
		p.pos++
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return
		}
		for {
			p.value(depth + 1)
			if p.syntax != nil {
				return
			}
			p.ws()
			if p.pos < len(p.data) && p.data[p.pos] == ',' {
				p.pos++
				continue
			}
			p.expect(']', `"," or "]" in the array`)
			return
		}
	case c == '"':
		p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		p.number()
	case c == 't':
		p.literal("true")
	case c == 'f':
		p.literal("false")
	case c == 'n':
		p.literal("null")
	default:
		p.fail(p.pos, fmt.Sprintf("%s, want a JSON value", p.describe()))
	}
}

func (p *parser) literal(word string) {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return
	}
	p.fail(p.pos, fmt.Sprintf("invalid literal, want %s", word))
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

func (p *parser) number() {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.digits() == 0:
		p.fail(start, "invalid number: no digits")
		return
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			p.fail(start, "invalid number: no digits after the decimal point")
			return
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			p.fail(start, "invalid number: no digits in the exponent")
			return
		}
	}
}

// str reads a string token at pos and returns its contents without the
// quotes (escapes not resolved) and whether it held an escape.
func (p *parser) str() (inner []byte, escaped, ok bool) {
	if p.pos >= len(p.data) || p.data[p.pos] != '"' {
		p.fail(p.pos, fmt.Sprintf("%s, want a string", p.describe()))
		return nil, false, false
	}
	start := p.pos
	p.pos++
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return p.data[start+1 : p.pos-1], escaped, true
		case c == '\\':
			escaped = true
			if p.pos+1 >= len(p.data) {
				p.pos++
				p.fail(p.pos, "end of input inside a string")
				return nil, false, false
			}
			switch p.data[p.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.pos += 2
			case 'u':
				if len(p.data)-p.pos < 6 || !hex4(p.data[p.pos+2:p.pos+6]) {
					p.fail(p.pos, `invalid \u escape in a string`)
					return nil, false, false
				}
				p.pos += 6
			default:
				p.fail(p.pos, fmt.Sprintf(`invalid escape \%c in a string`, p.data[p.pos+1]))
				return nil, false, false
			}
		case c < 0x20:
			p.fail(p.pos, fmt.Sprintf("control byte 0x%02x inside a string", c))
			return nil, false, false
		default:
			p.pos++
		}
	}
	p.fail(p.pos, "end of input inside a string")
	return nil, false, false
}

func hex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
