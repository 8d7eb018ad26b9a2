package gemini

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// part is one part of candidate 0, as parsed: its slices point into the
// upstream event.
type part struct {
	call    bool   // a functionCall part
	thought bool   // "thought": true
	text    []byte // raw contents of "text", still escaped
	name    []byte // raw contents of functionCall.name
	args    []byte // functionCall.args as sent, nil when absent
}

// usage is Gemini's usageMetadata, the counts the OpenAI usage needs.
type usage struct {
	prompt, candidates, thoughts, cached int
	// bad has bit i set when billed count i (prompt, candidates, thoughts,
	// cached: cache reads are billed at their own price) is not a token
	// count (see api.Count): the usage is not reported. Per
	// count, so a repeated member is read as encoding/json reads it (the
	// last one).
	bad uint8
}

// reportable reports whether u makes a usage chunk: every billed count
// was a token count, and the chunk's sums are too (api.CountLimit), so
// api.ScanChunk reads the chunk as valid usage.
func (u usage) reportable() bool {
	_, _, total := u.openAI()
	return u.bad == 0 && total < api.CountLimit
}

// event is what one GenerateContentResponse event holds, as parsed.
type event struct {
	parts      []part // candidate 0's parts, in order
	finish     []byte // candidate 0's finishReason, decoded; nil when none
	candidates int    // candidates in the event, of any index
	block      []byte // promptFeedback.blockReason, decoded
	id         []byte // responseId, raw
	model      []byte // modelVersion, raw
	usage      usage
	hasUsage   bool
	counts     uint8 // bit i set when usage count i was present (see stream.Reported)
	err        bool  // an "error" member that is not null
	errCode    int
	errMsg     []byte // decoded
	errStatus  []byte // decoded
	grounding  []byte // candidate 0's groundingMetadata, raw; nil when none
}

func (e *event) reset() {
	*e = event{parts: e.parts[:0], errMsg: e.errMsg[:0], errStatus: e.errStatus[:0]}
}

// span is one output event's data within translator.out, and what it carries.
type span struct {
	start, end int
	kind       chunkKind
}

// chunkKind is what api.ScanChunk finds in a chunk the translator wrote.
type chunkKind uint8

const (
	chunkNone    chunkKind = iota // a heartbeat, or the role chunk (its content is "")
	chunkContent                  // non-empty content and/or reasoning_content, or one tool call
	chunkFinish                   // a finish_reason
	chunkUsage                    // the usage chunk (choices [])
)

// translator turns the GenerateContentResponse events of one stream into
// OpenAI chat.completion.chunk events. It keeps no reference to an
// upstream event once translate returns, and allocates nothing per event
// once its buffers have grown to the stream's largest event.
type translator struct {
	model   string // the request's model, used when the upstream names none
	created int64
	seed    [16]byte // hex: the stream's random part of generated ids

	started bool // the role chunk was emitted
	// finished: a candidate carried a finishReason, or the prompt was
	// blocked, so the body's end is a clean end. The finish chunk waits for
	// that end (see close): Gemini versions before 2.0, on Vertex AI, put
	// finishReason STOP on every event, and the answer goes on after it
	// (issue 35: 17 of 225 characters were relayed); the last reason read
	// is the answer's.
	finished bool
	reason   []byte // the last finishReason read, decoded (a copy)
	blocked  bool   // the last finish read was a blocked prompt: content_filter
	calls    int    // tool calls emitted so far: the next call's index
	usage    usage
	hasUsage bool
	counts   uint8 // the event's counts of usage
	// uncovered: content was queued after the last usage that had a
	// candidatesTokenCount (which counts the text of its own event too).
	uncovered bool
	sink      api.TextSink // see stream.CountText; nil: none
	search    *searchState // the answer's grounding (search.go); nil: the request asked for no search
	prefix    []byte       // `{"id":…,"model":…,"choices":` of every chunk

	s    scanner
	e    event
	scr  []byte // decoding scratch for escaped enum strings
	out  []byte // the data of the pending output events
	pend []span
	n    int       // pending events
	next int       // the next pending event to return
	last chunkKind // the kind of the event pop returned last
}

func (t *translator) init(model string, created int64, seed [8]byte) {
	t.model, t.created = model, created
	hex.Encode(t.seed[:], seed[:])
}

// translate parses one upstream event and queues its output events,
// returning how many it queued (0: the event carried nothing to say). A
// malformed event is an error wrapping provider.ErrMalformed; an error
// object is a *provider.Error.
func (t *translator) translate(data []byte) (int, error) {
	t.out, t.n, t.next = t.out[:0], 0, 0
	if err := t.parse(data); err != nil {
		return 0, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	e := &t.e
	if e.err {
		return 0, t.eventError()
	}
	if e.finish != nil {
		if err := toolCallFailure(string(e.finish)); err != nil {
			return 0, err
		}
	}
	if !t.started {
		t.start()
		t.chunk(`{"role":"assistant","content":""}`, nil)
	}
	// Content after a finishReason is content: only the body's end ends
	// the answer, and close queues the one finish chunk then, after all of
	// it (issue 22: content relayed after a finish chunk opened a second
	// block on /v1/messages).
	t.delta()
	if t.search != nil {
		for i := range e.parts {
			if p := &e.parts[i]; !p.call && !p.thought {
				t.search.text, _ = api.AppendUnescaped(t.search.text, p.text)
			}
		}
		if e.grounding != nil {
			t.grounded(e.grounding)
		}
	}
	switch {
	case e.finish != nil:
		t.finished, t.blocked = true, false
		t.reason = append(t.reason[:0], e.finish...)
	case e.candidates == 0 && len(e.block) > 0:
		// The prompt itself was blocked: no candidate will come.
		t.finished, t.blocked = true, true
	}
	if e.hasUsage {
		// Gemini's counts are cumulative: the last event's are the answer's.
		t.usage, t.hasUsage, t.counts = e.usage, true, e.counts
		if e.counts&2 != 0 {
			t.uncovered = false // candidatesTokenCount counts this event's text too
		}
	}
	return t.n, nil
}

// pop returns the next pending event's data.
func (t *translator) pop() []byte {
	sp := t.pend[t.next]
	t.next++
	t.last = sp.kind
	return t.out[sp.start:sp.end]
}

// info returns what api.ScanChunk finds in the event pop returned last,
// known from how the translator wrote it (no chunk holds an "error"
// member: an error event is a *provider.Error). The usage counts are the
// chunk's as api.ScanChunk reads them (a usage chunk is written only with
// reportable counts), the cache reads included; the completion details are
// left nil, as api.ScanChunk leaves them. The usage chunk is the stream's last event, so t.usage is still
// the one it holds.
func (t *translator) info() api.ChunkInfo {
	switch t.last {
	case chunkContent:
		return api.ChunkInfo{Content: true}
	case chunkFinish:
		return api.ChunkInfo{Finish: true}
	case chunkUsage:
		prompt, completion, total := t.usage.openAI()
		return api.ChunkInfo{HasUsage: true, Usage: api.Usage{
			PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total,
			PromptTokensDetails: api.PromptTokensDetails{CachedTokens: t.usage.cached},
		}}
	}
	return api.ChunkInfo{}
}

// start fixes the stream's id and model from its first event.
func (t *translator) start() {
	t.started = true
	e := &t.e
	b := append(t.prefix[:0], `{"id":`...)
	if len(e.id) > 0 {
		b = append(b, '"')
		b = append(b, e.id...)
		b = append(b, '"')
	} else {
		b = append(b, `"chatcmpl-`...)
		b = append(b, t.seed[:]...)
		b = append(b, '"')
	}
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, t.created, 10)
	b = append(b, `,"model":`...)
	if len(e.model) > 0 {
		b = append(b, '"')
		b = append(b, e.model...)
		b = append(b, '"')
	} else {
		b = api.AppendString(b, t.model)
	}
	t.prefix = append(b, `,"choices":`...)
}

// chunk queues a chunk of one choice with the given delta object, which
// carries no content, and finish reason (nil: null).
func (t *translator) chunk(delta string, finish []byte) {
	start := len(t.out)
	b := append(t.out, t.prefix...)
	b = append(b, `[{"index":0,"delta":`...)
	b = append(b, delta...)
	b = append(b, `,"finish_reason":`...)
	kind := chunkNone
	if finish == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, finish...)
		b = append(b, '"')
		kind = chunkFinish
	}
	t.out = append(b, "}]}"...)
	t.queue(start, kind)
}

func (t *translator) queue(start int, kind chunkKind) {
	t.pend = append(t.pend[:t.n], span{start, len(t.out), kind})
	t.n++
}

// delta queues the chunks of the event's text, thoughts and function
// calls: one delta with reasoning_content and content, if any, then one
// chunk per call, as OpenAI streams them (SDK accumulators finish a call
// when the next index begins, so two calls in one chunk lose one event).
func (t *translator) delta() {
	start := len(t.out)
	b := append(t.out, t.prefix...)
	b = append(b, `[{"index":0,"delta":{`...)
	body := len(b)
	b = t.texts(b, true, `"reasoning_content":"`)
	b = t.texts(b, false, `"content":"`)
	if len(b) == body {
		b = b[:start] // no text to say
	} else {
		b = append(b, `},"finish_reason":null}]}`...)
		t.out = b
		t.queue(start, chunkContent) // texts writes non-empty text only
	}
	for i := range t.e.parts {
		p := &t.e.parts[i]
		if !p.call {
			continue
		}
		start := len(b)
		b = append(b, t.prefix...)
		b = append(b, `[{"index":0,"delta":{"tool_calls":[{"index":`...)
		b = strconv.AppendInt(b, int64(t.calls), 10)
		t.text(p.name)
		t.text(p.args)
		b = append(b, `,"id":"call_`...)
		b = append(b, t.seed[:16]...)
		b = strconv.AppendInt(b, int64(t.calls), 10)
		b = append(b, `","type":"function","function":{"name":"`...)
		b = append(b, p.name...)
		b = append(b, `","arguments":`...)
		b = appendArgs(b, p.args)
		b = append(b, `}}]},"finish_reason":null}]}`...)
		t.out = b
		t.queue(start, chunkContent)
		t.calls++
	}
	t.out = b
}

// texts appends the member key and the concatenated non-empty text parts
// that are thoughts (or are not), closing the string; nothing when none.
// Raw JSON string contents concatenate into a valid JSON string: every
// escape is whole within its part.
func (t *translator) texts(b []byte, thought bool, key string) []byte {
	n := len(b)
	from := 0
	for i := range t.e.parts {
		p := &t.e.parts[i]
		if p.call || p.thought != thought || len(p.text) == 0 {
			continue
		}
		if len(b) == n {
			if b[n-1] != '{' {
				b = append(b, ',')
			}
			b = append(b, key...)
			from = len(b)
		} else {
			b = sealTail(b, from)
		}
		b = append(b, p.text...)
		t.text(p.text)
	}
	if len(b) > n {
		b = append(b, '"')
	}
	return b
}

// text notes content queued, raw JSON string contents (or a call's
// arguments, a JSON value): the sink gets it, and the usage read so far
// no longer counts every content.
func (t *translator) text(raw []byte) {
	t.uncovered = true
	if t.sink != nil {
		t.sink.AddJSON(raw)
	}
}

// sealTail makes the end of the string contents b[from:] self-contained
// before another part's text is appended: a trailing high-surrogate escape
// or an incomplete UTF-8 sequence would pair with the next part's start,
// where decoding each part alone, as a client of the upstream would, gives
// U+FFFD. They are replaced by what that decoding gives. Valid text ends
// in neither, so this only reads a few bytes.
func sealTail(b []byte, from int) []byte {
	s := b[from:]
	n := len(s)
	if n >= 6 && s[n-6] == '\\' && s[n-5] == 'u' && (s[n-4]|0x20) == 'd' && strings.IndexByte("89abAB", s[n-3]) >= 0 {
		// The backslash starts an escape if an even run of backslashes precedes it.
		run := 0
		for i := n - 7; i >= 0 && s[i] == '\\'; i-- {
			run++
		}
		if run%2 == 0 {
			return append(b[:len(b)-6], `\ufffd`...)
		}
	}
	for k := n - 1; k >= 0 && k >= n-3; k-- {
		if c := s[k]; c >= utf8.RuneSelf {
			if c >= 0xC0 { // a lead byte
				if !utf8.FullRune(s[k:]) {
					b = b[:from+k]
					for range n - k {
						b = append(b, `\ufffd`...)
					}
				}
				break
			}
			continue // a continuation byte: look further back
		}
		break
	}
	return b
}

// appendArgs appends a function call's arguments as the JSON string
// OpenAI's "arguments" is; absent or null arguments are "{}".
func appendArgs(b, args []byte) []byte {
	if len(args) == 0 || string(args) == "null" {
		return append(b, `"{}"`...)
	}
	return api.AppendString(b, args)
}

// finishReason maps Gemini's finishReason to OpenAI's (see the package
// comment); calls reports whether the stream emitted function calls.
func finishReason(r []byte, calls bool) []byte {
	switch string(r) {
	case "MAX_TOKENS":
		return reasonLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return contentFilter
	}
	if calls {
		return reasonToolCalls
	}
	return reasonStop
}

// toolCallFailure is the error of a finishReason that says the model's
// tool call failed, nil for any other: MALFORMED_FUNCTION_CALL ("the
// function call generated by the model is invalid") and UNEXPECTED_TOOL_CALL
// ("model generated a tool call but no tools were enabled in the
// request"), as Google's API reference describes them
// (https://ai.google.dev/api/generate-content#FinishReason). The answer
// holds no call, so it is no answer: a retryable upstream failure (502),
// which the gateway retries on the next route before content and ends the
// stream with an error event after it, instead of a "stop" that reads as
// the model's last word to an agent loop.
func toolCallFailure(reason string) error {
	var code, what string
	switch reason {
	case "MALFORMED_FUNCTION_CALL":
		code, what = "malformed_function_call", "the function call generated by the model is invalid"
	case "UNEXPECTED_TOOL_CALL":
		code, what = "unexpected_tool_call", "the model generated a tool call but no tools were enabled in the request"
	default:
		return nil
	}
	return &provider.Error{
		Status:    http.StatusBadGateway,
		Retryable: true,
		Type:      "upstream_error",
		Code:      code,
		Message:   "gemini: finishReason " + reason + ": " + what,
	}
}

// OpenAI's finish reasons, shared and never modified.
var (
	reasonStop      = []byte("stop")
	reasonLength    = []byte("length")
	reasonToolCalls = []byte("tool_calls")
	contentFilter   = []byte("content_filter")
)

// finishString is finishReason for the non-streaming answer.
func finishString(r string, calls bool) string { return string(finishReason([]byte(r), calls)) }

// close queues the stream's last events, once its body ended after a
// finish (t.finished): the finish chunk, with the last finishReason read
// ("tool_calls" when it maps to "stop" and calls were emitted; a blocked
// prompt's "content_filter"), then the one usage chunk (choices empty) when
// usage was reported with counts that are counts (else the gateway
// estimates). It returns how many it queued.
func (t *translator) close() int {
	t.out, t.n, t.next = t.out[:0], 0, 0
	if t.blocked {
		t.chunk(`{}`, contentFilter)
	} else {
		t.chunk(`{}`, finishReason(t.reason, t.calls > 0))
	}
	if t.hasUsage && t.usage.reportable() {
		start := len(t.out)
		b := append(t.out, t.prefix...)
		b = append(b, `[],"usage":`...)
		t.out = appendUsage(b, t.usage)
		t.out = append(t.out, '}')
		t.queue(start, chunkUsage)
	}
	return t.n
}

// openAI returns the OpenAI prompt, completion and total tokens: completion
// tokens count the thoughts, as OpenAI's count reasoning tokens.
func (u usage) openAI() (prompt, completion, total int) {
	completion = u.candidates + u.thoughts
	return u.prompt, completion, u.prompt + completion
}

// appendUsage appends u as an OpenAI usage object (see usage.openAI).
func appendUsage(b []byte, u usage) []byte {
	prompt, completion, total := u.openAI()
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cached), 10)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.thoughts), 10)
	return append(b, "}}"...)
}

// eventError is the *provider.Error of an error object in the stream. Its
// code is the HTTP status the failure would have had before the stream
// began, and decides like one whether another route may serve the request.
func (t *translator) eventError() error {
	e := &t.e
	status := e.errCode
	if status < 100 || status > 599 {
		status = 0
	}
	msg := string(e.errMsg)
	if msg == "" {
		msg = "the upstream sent an error event"
	}
	return &provider.Error{
		Status:    status,
		Retryable: status == 0 || provider.RetryableStatus(status),
		Type:      string(e.errStatus),
		Code:      string(e.errStatus),
		Message:   msg,
	}
}

// parse reads one event into t.e. Member names are matched exactly, after
// unescaping; a repeated member replaces what the earlier one said, as in
// encoding/json; a member of an unexpected kind is skipped.
func (t *translator) parse(data []byte) error {
	e := &t.e
	e.reset()
	t.scr = t.scr[:0]
	s := &t.s
	s.reset(data)
	if s.peek() != '{' {
		return s.fail("the event is not a JSON object")
	}
	err := s.obj(func(key []byte) error {
		switch string(key) {
		case "candidates":
			e.parts, e.finish, e.candidates = e.parts[:0], nil, 0
			if s.peek() != '[' {
				return s.skip()
			}
			return s.arr(t.candidate)
		case "promptFeedback":
			e.block = nil
			if s.peek() != '{' {
				return s.skip()
			}
			return s.obj(func(k []byte) error {
				if string(k) != "blockReason" {
					return s.skip()
				}
				raw, esc, ok, err := s.text()
				e.block = nil
				if ok {
					e.block = t.decode(raw, esc)
				}
				return err
			})
		case "usageMetadata":
			e.usage, e.hasUsage, e.counts = usage{}, false, 0
			if s.peek() != '{' {
				return s.skip()
			}
			e.hasUsage = true
			return s.obj(t.usageMember)
		case "responseId":
			raw, _, ok, err := s.text()
			e.id = nil
			if ok {
				e.id = raw
			}
			return err
		case "modelVersion":
			raw, _, ok, err := s.text()
			e.model = nil
			if ok {
				e.model = raw
			}
			return err
		case "error":
			e.err, e.errCode, e.errMsg, e.errStatus = false, 0, e.errMsg[:0], e.errStatus[:0]
			if s.null() {
				return nil
			}
			e.err = true
			if s.peek() != '{' {
				return s.skip()
			}
			return s.obj(t.errorMember)
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	return s.end()
}

// decode returns the decoded contents of an enum string (finishReason,
// blockReason); only escaped ones are copied, into t.scr.
func (t *translator) decode(raw []byte, esc bool) []byte {
	if !esc {
		return raw
	}
	start := len(t.scr)
	t.scr = unescape(t.scr, raw)
	return t.scr[start:len(t.scr):len(t.scr)]
}

func (t *translator) candidate() error {
	s, e := &t.s, &t.e
	if s.peek() != '{' {
		return s.skip()
	}
	e.candidates++
	mark := len(e.parts)
	var finish, grounding []byte
	var finEsc, hasFinish, other bool
	err := s.obj(func(key []byte) error {
		switch string(key) {
		case "content":
			e.parts = e.parts[:mark]
			if s.peek() != '{' {
				return s.skip()
			}
			return s.obj(func(k []byte) error {
				if string(k) != "parts" {
					return s.skip()
				}
				e.parts = e.parts[:mark]
				if s.peek() != '[' {
					return s.skip()
				}
				return s.arr(t.part)
			})
		case "finishReason":
			raw, esc, ok, err := s.text()
			finish, finEsc, hasFinish = raw, esc, ok
			return err
		case "groundingMetadata":
			v, err := s.value()
			grounding = v
			return err
		case "index":
			// Only candidate 0 is translated: the adapter never asks for
			// more (n > 1 is refused).
			v, err := s.value()
			other = nonZero(v)
			return err
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	if other {
		e.parts = e.parts[:mark]
		return nil
	}
	if hasFinish && len(finish) > 0 {
		e.finish = t.decode(finish, finEsc)
	}
	if t.search != nil && len(grounding) > 0 && grounding[0] == '{' {
		e.grounding = grounding
	}
	return nil
}

// nonZero reports whether v is a JSON number other than zero.
func nonZero(v []byte) bool {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return false
	}
	if len(v) == 1 && v[0] == '0' {
		return false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return err != nil || f != 0
}

func (t *translator) part() error {
	s, e := &t.s, &t.e
	if s.peek() != '{' {
		return s.skip()
	}
	var p part
	err := s.obj(func(key []byte) error {
		switch string(key) {
		case "text":
			raw, _, ok, err := s.text()
			p.text = nil
			if ok {
				p.text = raw
			}
			return err
		case "thought":
			v, err := s.boolean()
			p.thought = v
			return err
		case "functionCall":
			p.call, p.name, p.args = false, nil, nil
			if s.peek() != '{' {
				return s.skip()
			}
			p.call = true
			return s.obj(func(k []byte) error {
				switch string(k) {
				case "name":
					raw, _, ok, err := s.text()
					p.name = nil
					if ok {
						p.name = raw
					}
					return err
				case "args":
					v, err := s.value()
					p.args = v
					return err
				}
				return s.skip()
			})
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	e.parts = append(e.parts, p)
	return nil
}

func (t *translator) usageMember(key []byte) error {
	s, u := &t.s, &t.e.usage
	var dst *int
	var bit uint8
	switch string(key) {
	case "promptTokenCount":
		dst, bit = &u.prompt, 1
	case "candidatesTokenCount":
		dst, bit = &u.candidates, 2
	case "thoughtsTokenCount":
		dst, bit = &u.thoughts, 4
	case "cachedContentTokenCount":
		dst, bit = &u.cached, 8 // a part of the prompt's count
	default:
		return s.skip()
	}
	n, present, valid, err := s.count()
	*dst = n
	if present {
		t.e.counts |= bit
	}
	if present && !valid {
		u.bad |= bit
	} else {
		u.bad &^= bit
	}
	return err
}

func (t *translator) errorMember(key []byte) error {
	s, e := &t.s, &t.e
	switch string(key) {
	case "code":
		n, _, _, err := s.count()
		e.errCode = n
		return err
	case "message":
		raw, esc, ok, err := s.text()
		if ok {
			e.errMsg = e.errMsg[:0]
			if esc {
				e.errMsg = unescape(e.errMsg, raw)
			} else {
				e.errMsg = append(e.errMsg, raw...)
			}
		}
		return err
	case "status":
		raw, esc, ok, err := s.text()
		if ok {
			e.errStatus = e.errStatus[:0]
			if esc {
				e.errStatus = unescape(e.errStatus, raw)
			} else {
				e.errStatus = append(e.errStatus, raw...)
			}
		}
		return err
	}
	return s.skip()
}

// heartbeat is what Next returns for an upstream event with nothing to
// translate (a usage-only event, an empty text): an event with empty,
// non-nil data, which restarts the relay's idle window and is not relayed.
var heartbeat = []byte{}
