package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// maxBlocks bounds the content blocks of one streamed message: a message
// with server tools holds a few dozen, and the stream keeps 8 bytes a block.
const maxBlocks = 1 << 14

// Block kinds, from content_block_start's content_block.type.
const (
	kindOther    uint8 = iota // server tools, their results, redacted thinking…: no OpenAI counterpart
	kindText                  // "text"
	kindThinking              // "thinking"
	kindTool                  // "tool_use": a client tool call
	kindSearch                // "server_tool_use" of web_search, when the request asked for it (search.go)
)

// blockState is what the stream keeps of one content block.
type blockState struct {
	kind uint8
	args bool  // tool_use: arguments were sent
	tool int32 // tool_use: its OpenAI tool_calls index
}

// counts are a message's token counts as the events report them: each a
// cumulative total, the latest one wins (message_delta's usage overrides
// message_start's, as the official SDK's Message.Accumulate does).
type counts struct {
	input, output, cacheRead, cacheWrite, thinking int64
	hasThinking                                    bool
	// hasInput and hasOutput: input_tokens and output_tokens were
	// reported (see Reported).
	hasInput, hasOutput bool
	// invalid: some count was not a token count (see api.CountLimit); the
	// message's usage is not reported.
	invalid bool
}

// fields are the members of one event that the translation reads, as
// sub-slices of the event's data; string values are JSON literals, quotes
// included, nil when absent or not a string.
type fields struct {
	kind  eventKind // from typ
	delta deltaKind // from dType
	typ   []byte
	index int64
	hasIx bool

	// delta (content_block_delta, message_delta)
	dType, text, thinking, partial, signature, stop, stopSeq []byte
	citation                                                 []byte // a citations_delta's, raw
	// content_block (content_block_start)
	cbType, cbID, cbName, cbText, cbThinking, cbInput, cbData []byte
	cbToolUseID, cbContent                                    []byte // a server tool result's (cbContent raw)
	// message (message_start)
	msgID, msgModel []byte
	// usage (message.usage of message_start, usage of message_delta)
	usage    counts
	hasUsage [5]bool // input, output, cache read, cache write, thinking
	// error
	errType, errMsg []byte
}

// eventKind is an event's "type".
type eventKind uint8

const (
	evOther eventKind = iota // ping, and types to come
	evBlockDelta
	evBlockStart
	evBlockStop
	evMessageDelta
	evMessageStart
	evMessageStop
	evError
)

func eventKindOf(lit []byte) eventKind {
	switch {
	case is(lit, "content_block_delta"):
		return evBlockDelta
	case is(lit, "content_block_start"):
		return evBlockStart
	case is(lit, "content_block_stop"):
		return evBlockStop
	case is(lit, "message_delta"):
		return evMessageDelta
	case is(lit, "message_start"):
		return evMessageStart
	case is(lit, "message_stop"):
		return evMessageStop
	case is(lit, "error"):
		return evError
	}
	return evOther
}

// deltaKind is a content_block_delta's delta.type.
type deltaKind uint8

const (
	deltaOther deltaKind = iota // citations_delta, types to come
	deltaText
	deltaThinking
	deltaJSON
	deltaSignature
)

func deltaKindOf(lit []byte) deltaKind {
	switch {
	case is(lit, "text_delta"):
		return deltaText
	case is(lit, "thinking_delta"):
		return deltaThinking
	case is(lit, "input_json_delta"):
		return deltaJSON
	case is(lit, "signature_delta"):
		return deltaSignature
	}
	return deltaOther
}

// stream translates the upstream's Messages event stream into OpenAI
// chat.completion.chunk events. Each upstream event gives one event from
// Next (message_stop may give two: the finish and the usage chunk); an
// upstream event without an OpenAI counterpart gives a heartbeat (an event
// with empty, non-nil Data) so the relay still sees the upstream alive.
type stream struct {
	c     *Client
	body  io.ReadCloser
	r     *sse.Reader
	ctx   context.Context
	model string // the route's model, when message_start names none

	ev     sse.Event
	buf    []byte // the chunk Next returns, rewritten from head on each call
	head   int    // buf[:head] is every chunk's start, `{"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":[`
	f      fields
	blocks []blockState
	tools  int32
	usage  counts
	last   chunkKind // what the event Next returned last carries, for ChunkInfo

	started  bool // message_start was read
	finished bool // the finish chunk was returned
	// covered: the output count read last came after every content
	// returned (message_delta's does; message_start's is followed by the
	// answer), so it counts them (see Reported).
	covered  bool
	sink     api.TextSink // see CountText; nil: none
	search   *searchState // the answer's web searches (search.go); nil: the request asked for none
	stopped  bool         // message_stop was read: the usage chunk is next, then io.EOF
	usageOut bool         // the usage chunk was returned
	err      error        // sticky end: io.EOF or the stream's error
	closed   bool
}

// heartbeat is the Data of an event without OpenAI counterpart.
var heartbeat = []byte{}

// Next implements provider.Stream.
func (s *stream) Next() (*sse.Event, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.last = chunkNone // until a chunk is written: a heartbeat
	if s.stopped {
		s.ev = sse.Event{}
		return s.afterStop()
	}
	in, err := s.r.Next()
	if err != nil {
		return nil, s.fail(s.readErr(err))
	}
	s.ev = sse.Event{Comment: in.Comment} // a "sent_ns" stamp travels on
	if len(in.Data) == 0 {
		s.ev.Data = in.Data // a comment-only block (nil) or an empty "data:" line: a heartbeat either way
		return &s.ev, nil
	}
	s.ev.Data = heartbeat
	if kind, index, lit, ok := scanFastDelta(in.Data); ok {
		// Nearly every event: no fields to fill, no dispatch.
		if err := s.blockDelta(index, true, kind, lit); err != nil {
			return nil, s.fail(err)
		}
		return &s.ev, nil
	}
	if isPing(in.Data) {
		return &s.ev, nil
	}
	if err := s.parse(in.Data); err != nil {
		return nil, s.fail(fmt.Errorf("%w: anthropic: %w", provider.ErrMalformed, err))
	}
	if err := s.translate(); err != nil {
		return nil, s.fail(err)
	}
	return &s.ev, nil
}

// isPing reports whether data is a ping event as the API writes it (the
// streaming reference prints it with a space, the API sends it without).
func isPing(data []byte) bool {
	return string(data) == `{"type":"ping"}` || string(data) == `{"type": "ping"}`
}

func (s *stream) fail(err error) error {
	s.err = err
	return err
}

// readErr maps the reader's end: an end before message_stop is a
// truncation, whatever the reader saw (Anthropic has no "[DONE]": the
// reader's NoDone makes a clean EOF io.EOF, which is still a cut here).
func (s *stream) readErr(err error) error {
	var tooLong *sse.LineTooLongError
	switch {
	case err == io.EOF, errors.Is(err, sse.ErrTruncated):
		return fmt.Errorf("%w: the anthropic stream ended before message_stop", provider.ErrTruncated)
	case errors.As(err, &tooLong):
		return fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	return provider.ReadError(s.ctx, err)
}

// afterStop returns what follows message_stop: the finish chunk when no
// message_delta gave one, the usage chunk (none when the counts are not
// reportable: the relay then estimates the attempt, as for a stream cut
// before its usage), then io.EOF.
func (s *stream) afterStop() (*sse.Event, error) {
	switch {
	case !s.finished:
		s.finish(finishStop, nil)
	case !s.usageOut && s.usage.reportable():
		s.usageChunk()
	default:
		return nil, s.fail(io.EOF)
	}
	return &s.ev, nil
}

// The compact spellings of the three events that carry nearly all of a
// stream's bytes, as the API writes them: scanFastDelta matches them.
const (
	fastStart    = `{"type":"content_block_delta","index":`
	fastDelta    = `,"delta":{"type":"`
	fastText     = `text_delta","text":`
	fastThinking = `thinking_delta","thinking":`
	fastJSON     = `input_json_delta","partial_json":`
)

// scanFastDelta reads a content_block_delta written exactly as the API
// writes it, {"type":"content_block_delta","index":N,"delta":{"type":
// "text_delta","text":"…"}} (or thinking_delta, input_json_delta), in fewer
// steps than parse: the fixed parts are compared whole, the index and the
// string are scanned and validated as parse does. It returns the delta's
// kind, the index and the string literal, or ok false for any other event,
// which parse then reads; both read the same (FuzzParseFast checks it).
func scanFastDelta(data []byte) (kind deltaKind, index int64, lit []byte, ok bool) {
	if len(data) < len(fastStart) || string(data[:len(fastStart)]) != fastStart {
		return 0, 0, nil, false
	}
	i := len(fastStart)
	j := i
	for j < len(data) && data[j]-'0' < 10 {
		index = index*10 + int64(data[j]-'0')
		j++
	}
	if j == i || j-i > 9 || (data[i] == '0' && j > i+1) {
		return 0, 0, nil, false // no digit, a huge index or a leading zero: parse decides
	}
	rest := data[j:]
	switch {
	case len(rest) > len(fastDelta+fastText) && string(rest[:len(fastDelta+fastText)]) == fastDelta+fastText:
		kind, rest = deltaText, rest[len(fastDelta+fastText):]
	case len(rest) > len(fastDelta+fastThinking) && string(rest[:len(fastDelta+fastThinking)]) == fastDelta+fastThinking:
		kind, rest = deltaThinking, rest[len(fastDelta+fastThinking):]
	case len(rest) > len(fastDelta+fastJSON) && string(rest[:len(fastDelta+fastJSON)]) == fastDelta+fastJSON:
		kind, rest = deltaJSON, rest[len(fastDelta+fastJSON):]
	default:
		return 0, 0, nil, false
	}
	if rest[0] != '"' {
		return 0, 0, nil, false
	}
	sc := scanner{b: data, i: len(data) - len(rest)}
	lit, _, err := sc.str()
	if err != nil || len(data)-sc.i != 2 || data[sc.i] != '}' || data[sc.i+1] != '}' {
		return 0, 0, nil, false
	}
	return kind, index, lit, true
}

// reset clears the fields of the previous event.
func (f *fields) reset() { *f = fields{} }

// parse reads any event into s.f: the members are found by name, in any
// order, and every value is validated.
func (s *stream) parse(data []byte) error {
	s.f.reset()
	f := &s.f
	sc := scanner{b: data}
	if err := sc.open(); err != nil {
		return err
	}
	var err error
	for n := 0; ; {
		key, ok, kerr := sc.next(&n)
		if kerr != nil {
			return kerr
		}
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			f.typ, err = sc.strOrSkip()
		case "index":
			var present, valid bool
			f.index, present, valid, err = sc.count()
			f.hasIx = present && valid
		case "delta":
			err = s.parseDelta(&sc)
		case "content_block":
			err = s.parseBlock(&sc)
		case "message":
			err = s.parseMessage(&sc)
		case "usage":
			err = s.parseUsage(&sc)
		case "error":
			err = s.parseError(&sc)
		default:
			err = sc.skip()
		}
		if err != nil {
			return err
		}
	}
	if err := sc.end(); err != nil {
		return err
	}
	f.kind, f.delta = eventKindOf(f.typ), deltaKindOf(f.dType)
	return nil
}

func (s *stream) parseDelta(sc *scanner) error {
	if sc.peek() != '{' {
		return sc.skip()
	}
	if err := sc.open(); err != nil {
		return err
	}
	f := &s.f
	for n := 0; ; {
		key, ok, err := sc.next(&n)
		if err != nil || !ok {
			return err
		}
		switch string(key) {
		case "type":
			f.dType, err = sc.strOrSkip()
		case "text":
			f.text, err = sc.strOrSkip()
		case "thinking":
			f.thinking, err = sc.strOrSkip()
		case "partial_json":
			f.partial, err = sc.strOrSkip()
		case "signature":
			f.signature, err = sc.strOrSkip()
		case "stop_reason":
			f.stop, err = sc.strOrSkip()
		case "stop_sequence":
			f.stopSeq, err = sc.strOrSkip()
		case "citation":
			f.citation, err = sc.raw()
		default:
			err = sc.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (s *stream) parseBlock(sc *scanner) error {
	if sc.peek() != '{' {
		return sc.skip()
	}
	if err := sc.open(); err != nil {
		return err
	}
	f := &s.f
	for n := 0; ; {
		key, ok, err := sc.next(&n)
		if err != nil || !ok {
			return err
		}
		switch string(key) {
		case "type":
			f.cbType, err = sc.strOrSkip()
		case "id":
			f.cbID, err = sc.strOrSkip()
		case "name":
			f.cbName, err = sc.strOrSkip()
		case "text":
			f.cbText, err = sc.strOrSkip()
		case "thinking":
			f.cbThinking, err = sc.strOrSkip()
		case "input":
			f.cbInput, err = sc.raw()
		case "data":
			f.cbData, err = sc.strOrSkip()
		case "tool_use_id":
			f.cbToolUseID, err = sc.strOrSkip()
		case "content":
			f.cbContent, err = sc.raw()
		default:
			err = sc.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (s *stream) parseMessage(sc *scanner) error {
	if sc.peek() != '{' {
		return sc.skip()
	}
	if err := sc.open(); err != nil {
		return err
	}
	f := &s.f
	for n := 0; ; {
		key, ok, err := sc.next(&n)
		if err != nil || !ok {
			return err
		}
		switch string(key) {
		case "id":
			f.msgID, err = sc.strOrSkip()
		case "model":
			f.msgModel, err = sc.strOrSkip()
		case "usage":
			err = s.parseUsage(sc)
		default:
			err = sc.skip()
		}
		if err != nil {
			return err
		}
	}
}

// parseUsage reads a usage object: counts that are null are absent, as the
// official SDK treats them; a count that is there but not a token count
// (see api.Count) makes the usage invalid.
func (s *stream) parseUsage(sc *scanner) error {
	if sc.peek() != '{' {
		return sc.skip()
	}
	if err := sc.open(); err != nil {
		return err
	}
	f := &s.f
	for n := 0; ; {
		key, ok, err := sc.next(&n)
		if err != nil || !ok {
			return err
		}
		switch string(key) {
		case "input_tokens":
			err = f.usageCount(sc, &f.usage.input, 0)
		case "output_tokens":
			err = f.usageCount(sc, &f.usage.output, 1)
		case "cache_read_input_tokens":
			err = f.usageCount(sc, &f.usage.cacheRead, 2)
		case "cache_creation_input_tokens":
			err = f.usageCount(sc, &f.usage.cacheWrite, 3)
		case "output_tokens_details":
			err = s.parseOutputDetails(sc)
		default:
			err = sc.skip()
		}
		if err != nil {
			return err
		}
	}
}

// usageCount reads the billed count i of f.hasUsage into dst.
func (f *fields) usageCount(sc *scanner, dst *int64, i int) error {
	n, present, valid, err := sc.count()
	*dst, f.hasUsage[i] = n, present
	if present && !valid {
		f.usage.invalid = true
	}
	return err
}

func (s *stream) parseOutputDetails(sc *scanner) error {
	if sc.peek() != '{' {
		return sc.skip()
	}
	if err := sc.open(); err != nil {
		return err
	}
	f := &s.f
	for n := 0; ; {
		key, ok, err := sc.next(&n)
		if err != nil || !ok {
			return err
		}
		if string(key) == "thinking_tokens" {
			var present, valid bool
			f.usage.thinking, present, valid, err = sc.count()
			f.hasUsage[4] = present && valid // a detail, not billed: a bad one is left out
		} else {
			err = sc.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (s *stream) parseError(sc *scanner) error {
	if sc.peek() != '{' {
		return sc.skip()
	}
	if err := sc.open(); err != nil {
		return err
	}
	f := &s.f
	for n := 0; ; {
		key, ok, err := sc.next(&n)
		if err != nil || !ok {
			return err
		}
		switch string(key) {
		case "type":
			f.errType, err = sc.strOrSkip()
		case "message":
			f.errMsg, err = sc.strOrSkip()
		default:
			err = sc.skip()
		}
		if err != nil {
			return err
		}
	}
}

// errBeforeStart: an event that needs the message's id and model came first.
var errBeforeStart = errors.New("anthropic: content before message_start")

// translate turns the parsed event into s.ev.
func (s *stream) translate() error {
	f := &s.f
	if f.kind != evMessageStart && f.kind != evError && f.kind != evOther && !s.started {
		return malformed(errBeforeStart)
	}
	switch f.kind {
	case evBlockDelta:
		var lit []byte
		switch f.delta {
		case deltaText:
			lit = f.text
		case deltaThinking:
			lit = f.thinking
		case deltaJSON:
			lit = f.partial
		case deltaSignature:
			lit = f.signature
		case deltaOther:
			if s.search != nil && is(f.dType, "citations_delta") && f.citation != nil {
				if _, err := s.block(f.index, f.hasIx); err != nil {
					return err
				}
				s.cite(f.citation)
				return nil
			}
		}
		return s.blockDelta(f.index, f.hasIx, f.delta, lit)
	case evBlockStart:
		return s.blockStart()
	case evBlockStop:
		b, err := s.block(f.index, f.hasIx)
		if err != nil {
			return err
		}
		if b.kind == kindTool && !b.args {
			// A call without arguments streams no input_json_delta (or only
			// ""), while its input is {}: OpenAI clients parse "arguments".
			b.args = true
			s.toolArgs(b.tool, []byte(`"{}"`))
		}
		switch {
		case b.kind == kindSearch:
			s.searchEnd()
		case b.kind == kindText && s.search != nil:
			s.textEnd()
		}
	case evMessageDelta:
		s.addUsage()
		if f.stop != nil && !s.finished {
			s.finish(finishReason(f.stop), stopSequence(f.stop, f.stopSeq))
		}
	case evMessageStart:
		if !s.started { // a repeated message_start changes nothing a client already has
			s.start()
		}
	case evMessageStop:
		s.stopped = true
		_, err := s.afterStop()
		return err
	case evError:
		return s.c.call.RedactError(eventError(f.errType, f.errMsg))
	}
	// ping and unknown event types ("handle unknown event types
	// gracefully", Anthropic's versioning policy): a heartbeat.
	return nil
}

func malformed(err error) error { return fmt.Errorf("%w: %w", provider.ErrMalformed, err) }

// block returns the state of the block an event's index names.
func (s *stream) block(i int64, hasIx bool) (*blockState, error) {
	if !hasIx || i < 0 || i >= int64(len(s.blocks)) {
		return nil, malformed(fmt.Errorf("anthropic: an event for content block %d, which did not start", i))
	}
	return &s.blocks[i], nil
}

// blockDelta translates a content_block_delta of kind whose text, thinking
// or partial JSON is the string literal lit.
func (s *stream) blockDelta(index int64, hasIx bool, kind deltaKind, lit []byte) error {
	if !s.started {
		return malformed(errBeforeStart)
	}
	b, err := s.block(index, hasIx)
	if err != nil {
		return err
	}
	switch kind {
	case deltaText:
		if s.search != nil {
			s.search.runes += escapedRunes(lit)
		}
		s.content(keyContent, lit)
	case deltaThinking:
		s.content(keyReasoning, lit)
	case deltaJSON:
		if b.kind == kindTool && len(lit) > 2 { // "" adds nothing; a server tool's input is not a call
			b.args = true
			s.toolArgs(b.tool, lit)
		}
		if b.kind == kindSearch && len(lit) > 2 {
			s.search.args = append(s.search.args, lit[1:len(lit)-1]...)
		}
	case deltaSignature:
		if b.kind == kindThinking && len(lit) > 2 {
			s.thinkingBlock(`"thinking_blocks":[{"type":"thinking","signature":`, lit)
		}
	}
	// citations_delta and deltas to come: a heartbeat.
	return nil
}

// start reads message_start: the chunk prefix, the first counts and the
// role chunk.
func (s *stream) start() {
	f := &s.f
	s.started = true
	b := append(s.buf[:0], `{"id":`...)
	if f.msgID != nil {
		b = append(b, f.msgID...)
	} else {
		b = append(b, `""`...)
	}
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, s.c.now().Unix(), 10)
	b = append(b, `,"model":`...)
	if f.msgModel != nil {
		b = append(b, f.msgModel...)
	} else {
		b = api.AppendString(b, s.model)
	}
	b = append(b, `,"choices":[`...)
	s.buf, s.head = b, len(b)
	s.addUsage()
	s.delta(`"role":"assistant","content":""`, nil, "")
}

// blockStart reads content_block_start.
func (s *stream) blockStart() error {
	b, err := s.newBlock()
	if err != nil {
		return err
	}
	f := &s.f
	switch b.kind {
	case kindText:
		if s.search != nil {
			s.search.textStart = s.search.runes
			s.search.runes += escapedRunes(f.cbText)
		}
		s.content(keyContent, f.cbText)
	case kindThinking:
		s.content(keyReasoning, f.cbThinking)
	case kindTool:
		// The input is {} and arrives in input_json_delta events; an input
		// given whole here is sent as the first arguments.
		args := []byte(`""`)
		if b.args {
			args = api.AppendString(nil, string(f.cbInput))
		}
		s.toolStart(b.tool, f.cbID, f.cbName, args)
	case kindSearch:
		s.searchStart(f.cbID)
	default:
		if s.search != nil && is(f.cbType, "web_search_tool_result") {
			s.searchResult(f.cbToolUseID, f.cbContent)
			return nil
		}
		if is(f.cbType, "redacted_thinking") && len(f.cbData) > 2 {
			s.thinkingBlock(`"thinking_blocks":[{"type":"redacted_thinking","data":`, f.cbData)
		}
	}
	return nil
}

// newBlock adds the block content_block_start starts. Blocks start in
// index order without gaps (the official SDK rejects anything else, and so
// does this). A tool_use block gets the next tool_calls index, and args
// when its input is given whole (not {} or null).
func (s *stream) newBlock() (*blockState, error) {
	f := &s.f
	if !f.hasIx || f.index != int64(len(s.blocks)) {
		return nil, malformed(fmt.Errorf("anthropic: content block %d started, want %d", f.index, len(s.blocks)))
	}
	if len(s.blocks) == maxBlocks {
		return nil, malformed(fmt.Errorf("anthropic: more than %d content blocks", maxBlocks))
	}
	b := blockState{}
	switch {
	case is(f.cbType, "text"):
		b.kind = kindText
	case is(f.cbType, "thinking"):
		b.kind = kindThinking
	case is(f.cbType, "tool_use"):
		b.kind, b.tool = kindTool, s.tools
		s.tools++
		in := f.cbInput
		b.args = len(in) > 0 && !emptyObject(in) && string(in) != "null"
	case s.search != nil && is(f.cbType, "server_tool_use") && is(f.cbName, "web_search"):
		b.kind = kindSearch
	}
	s.blocks = append(s.blocks, b)
	return &s.blocks[len(s.blocks)-1], nil
}

// emptyObject reports whether the valid JSON value v is {} (spaces aside).
func emptyObject(v []byte) bool {
	sc := scanner{b: v}
	if sc.peek() != '{' {
		return false
	}
	sc.i++
	return sc.peek() == '}'
}

func (s *stream) addUsage() {
	f := &s.f
	u := &s.usage
	if f.hasUsage[0] {
		u.input, u.hasInput = f.usage.input, true
	}
	if f.hasUsage[1] {
		u.output, u.hasOutput = f.usage.output, true
		s.covered = true
	}
	if f.hasUsage[2] {
		u.cacheRead = f.usage.cacheRead
	}
	if f.hasUsage[3] {
		u.cacheWrite = f.usage.cacheWrite
	}
	if f.hasUsage[4] {
		u.thinking, u.hasThinking = f.usage.thinking, true
	}
	if f.usage.invalid {
		u.invalid = true // a later event's good count does not vouch for the rest
	}
}

const (
	keyContent   = `"content":`
	keyReasoning = `"reasoning_content":`
)

// content writes a text or reasoning delta whose value is the string
// literal lit, copied as the upstream escaped it; an empty or absent
// literal leaves the heartbeat.
func (s *stream) content(key string, lit []byte) {
	if len(lit) > 2 {
		s.text(lit)
		s.delta(key, lit, "")
		s.last = chunkContent
	}
}

// text notes the string literal lit of content returned: the sink gets its
// contents, and the output count read so far no longer covers the answer.
func (s *stream) text(lit []byte) {
	s.covered = false
	if s.sink != nil && len(lit) > 2 {
		s.sink.AddJSON(lit[1 : len(lit)-1])
	}
}

// delta writes a chunk of one choice whose delta holds head, lit and tail.
func (s *stream) delta(head string, lit []byte, tail string) {
	b := append(s.buf[:s.head], `{"index":0,"delta":{`...)
	b = append(b, head...)
	b = append(b, lit...)
	b = append(b, tail...)
	b = append(b, `},"finish_reason":null}]}`...)
	s.buf = b
	s.ev.Data = b
}

// thinkingBlock writes a chunk whose delta holds one thinking block
// (LiteLLM's "thinking_blocks"): head, the string literal lit, "}]". Not
// content: the relay holds it before the first content and relays it after.
func (s *stream) thinkingBlock(head string, lit []byte) {
	s.delta(head, lit, "}]")
}

func (s *stream) toolStart(index int32, id, name, args []byte) {
	s.text(name)
	s.text(args)
	b := append(s.buf[:s.head], `{"index":0,"delta":{"tool_calls":[{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"id":`...)
	b = appendLit(b, id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = appendLit(b, name)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	b = append(b, `}}]},"finish_reason":null}]}`...)
	s.buf = b
	s.ev.Data = b
	s.last = chunkContent // a tool_calls array of one call
}

func (s *stream) toolArgs(index int32, lit []byte) {
	s.text(lit)
	b := append(s.buf[:s.head], `{"index":0,"delta":{"tool_calls":[{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"function":{"arguments":`...)
	b = append(b, lit...)
	b = append(b, `}}]},"finish_reason":null}]}`...)
	s.buf = b
	s.ev.Data = b
	s.last = chunkContent
}

// appendLit appends a string literal, or "" when it is absent.
func appendLit(b, lit []byte) []byte {
	if lit == nil {
		return append(b, `""`...)
	}
	return append(b, lit...)
}

// finish writes the finish chunk; seq, the literal of the stop sequence
// that ended the answer (nil for none), becomes the choice's stop_reason,
// as vLLM reports the stop string that matched.
func (s *stream) finish(reason string, seq []byte) {
	s.finished = true
	b := append(s.buf[:s.head], `{"index":0,"delta":{},"finish_reason":"`...)
	b = append(b, reason...)
	b = append(b, '"')
	if seq != nil {
		b = append(b, `,"stop_reason":`...)
		b = append(b, seq...)
	}
	b = append(b, `}]}`...)
	s.buf = b
	s.ev.Data = b
	s.last = chunkFinish
}

// usageChunk writes the usage-only chunk: prompt tokens count the cache
// reads and writes too, OpenAI's convention (see api.Usage).
func (s *stream) usageChunk() {
	s.usageOut = true
	u := &s.usage
	prompt, completion, total := u.openAI()
	b := append(s.buf[:s.head], `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, prompt, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, completion, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.cacheRead, 10)
	if u.cacheWrite > 0 {
		b = append(b, `,"cache_write_tokens":`...)
		b = strconv.AppendInt(b, u.cacheWrite, 10)
	}
	b = append(b, '}')
	if u.hasThinking {
		b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, u.thinking, 10)
		b = append(b, '}')
	}
	b = append(b, "}}"...)
	s.buf = b
	s.ev.Data = b
	s.last = chunkUsage
}

// reportable reports whether the counts make a usage chunk: every count
// was a token count, and the chunk's sums are too (api.CountLimit), so
// api.ScanChunk reads the chunk as valid usage.
func (u *counts) reportable() bool {
	prompt, _, total := u.openAI()
	return !u.invalid && prompt < api.CountLimit && total < api.CountLimit
}

// openAI returns the usage chunk's prompt, completion and total tokens:
// prompt tokens count the cache reads and writes too.
func (u *counts) openAI() (prompt, completion, total int64) {
	prompt = u.input + u.cacheRead + u.cacheWrite
	return prompt, u.output, prompt + u.output
}

// chunkKind is what api.ScanChunk finds in a chunk the stream wrote, or
// in the OpenAI counterpart of an event a passStream passes.
type chunkKind uint8

const (
	chunkNone        chunkKind = iota // a heartbeat, or the role chunk (its content is "")
	chunkContent                      // non-empty content or reasoning_content, or one tool call
	chunkFinish                       // a finish_reason
	chunkUsage                        // the usage chunk (choices [])
	chunkFinishUsage                  // a finish_reason and the usage (a passed message_delta)
)

// ChunkInfo implements provider.ChunkInfoer: what api.ScanChunk finds in
// the event Next returned last, known from how the stream wrote it (no
// chunk holds an "error" member: an error event ends the stream with a
// *provider.Error). The usage counts are the chunk's as api.ScanChunk reads
// them (a usage chunk is written only with reportable counts), the cache
// reads and writes included; the completion details are left nil, as
// api.ScanChunk leaves them.
func (s *stream) ChunkInfo() api.ChunkInfo {
	switch s.last {
	case chunkContent:
		return api.ChunkInfo{Content: true}
	case chunkFinish:
		return api.ChunkInfo{Finish: true}
	case chunkUsage, chunkFinishUsage:
		prompt, completion, total := s.usage.openAI()
		return api.ChunkInfo{Finish: s.last == chunkFinishUsage, HasUsage: true, Usage: api.Usage{
			PromptTokens: int(prompt), CompletionTokens: int(completion), TotalTokens: int(total),
			PromptTokensDetails: api.PromptTokensDetails{CachedTokens: int(s.usage.cacheRead), CacheWriteTokens: int(s.usage.cacheWrite)},
		}}
	}
	return api.ChunkInfo{}
}

// Reported implements provider.Reporter: the counts of message_start and
// message_delta read so far, as the usage chunk would carry them; the
// prompt tokens once input_tokens came, the completion tokens once an
// output_tokens came after the last content returned (message_delta's;
// message_start's output_tokens, 1, counts none of the answer that
// follows). Counts that are not token counts are none.
func (s *stream) Reported() (u api.Usage, prompt, output bool) {
	c := &s.usage
	if !c.reportable() || !c.hasInput && !c.hasOutput {
		return api.Usage{}, false, false
	}
	p, completion, total := c.openAI()
	u = api.Usage{PromptTokens: int(p), CompletionTokens: int(completion), TotalTokens: int(total),
		PromptTokensDetails: api.PromptTokensDetails{CachedTokens: int(c.cacheRead), CacheWriteTokens: int(c.cacheWrite)}}
	return u, c.hasInput, c.hasOutput && s.covered
}

// CountText implements provider.TextCounter: the text, thinking and
// tool-call names and arguments of the events returned from now on.
func (s *stream) CountText(t api.TextSink) { s.sink = t }

// Close releases the connection: after message_stop it drains the body's
// short rest so the transport can reuse the connection; otherwise (a cut, an
// error event, a timeout, the client gone) it closes at once.
func (s *stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := provider.ReleaseStream(s.body, s.stopped, s.r, &s.c.readers)
	s.r = nil
	return err
}

// BeforeRead implements provider.ReadNotifier: the upstream events of one
// read are translated and returned before h runs and the next read starts.
func (s *stream) BeforeRead(h sse.ReadHook) { s.r.Hook = h }

var (
	_ provider.Stream       = (*stream)(nil)
	_ provider.ReadNotifier = (*stream)(nil)
	_ provider.ChunkInfoer  = (*stream)(nil)
	_ provider.Reporter     = (*stream)(nil)
	_ provider.TextCounter  = (*stream)(nil)
)

// passStream is a stream passed through (provider.Passthrough): Next
// returns the upstream's events as they came, for a Messages client, and
// reads each only for what the relay measures and checks: the same scan
// and the same order rules as the translation (an event that is not JSON,
// content before message_start or a delta for a block that did not start
// ends it with provider.ErrMalformed, an end before message_stop with
// provider.ErrTruncated, an "error" event with its *provider.Error), but
// nothing is written. ChunkInfo tells what the OpenAI counterpart of the
// event would carry: content for a non-empty text, thinking or partial
// JSON delta of a tool_use block and for a tool_use block's start; a
// finish for message_delta's stop_reason; the usage so far (input and
// cache counts of message_start, output of message_delta, as the
// translated usage chunk has them) with message_delta. message_start,
// pings, empty block starts, block stops, signature and citation deltas
// and unknown events carry none of those: the relay holds them until the
// first content, and they do not restart its idle window.
type passStream struct{ stream }

var (
	_ provider.Passthrough  = (*passStream)(nil)
	_ provider.ReadNotifier = (*passStream)(nil)
)

// Dialect implements provider.Passthrough.
func (p *passStream) Dialect() string { return provider.DialectAnthropic }

// Next implements provider.Stream: the upstream's next event as it came.
func (p *passStream) Next() (*sse.Event, error) {
	s := &p.stream
	if s.err != nil {
		return nil, s.err
	}
	s.last = chunkNone
	if s.stopped {
		return nil, s.fail(io.EOF)
	}
	in, err := s.r.Next()
	if err != nil {
		return nil, s.fail(s.readErr(err))
	}
	if len(in.Data) == 0 || isPing(in.Data) {
		return in, nil
	}
	if kind, index, lit, ok := scanFastDelta(in.Data); ok {
		if err := s.seeDelta(index, true, kind, lit); err != nil {
			return nil, s.fail(err)
		}
		return in, nil
	}
	if err := s.parse(in.Data); err != nil {
		return nil, s.fail(fmt.Errorf("%w: anthropic: %w", provider.ErrMalformed, err))
	}
	if err := s.see(); err != nil {
		return nil, s.fail(err)
	}
	return in, nil
}

// see reads the parsed event as translate does, without writing a chunk.
func (s *stream) see() error {
	f := &s.f
	if f.kind != evMessageStart && f.kind != evError && f.kind != evOther && !s.started {
		return malformed(errBeforeStart)
	}
	switch f.kind {
	case evBlockDelta:
		var lit []byte
		switch f.delta {
		case deltaText:
			lit = f.text
		case deltaThinking:
			lit = f.thinking
		case deltaJSON:
			lit = f.partial
		}
		return s.seeDelta(f.index, f.hasIx, f.delta, lit)
	case evBlockStart:
		b, err := s.newBlock()
		if err != nil {
			return err
		}
		switch {
		case b.kind == kindTool:
			s.text(f.cbName)
			if b.args {
				s.text(api.AppendString(nil, string(f.cbInput))) // given whole: rare
			}
			s.last = chunkContent
		case b.kind == kindText && len(f.cbText) > 2:
			s.text(f.cbText)
			s.last = chunkContent
		case b.kind == kindThinking && len(f.cbThinking) > 2:
			s.text(f.cbThinking)
			s.last = chunkContent
		}
	case evBlockStop:
		b, err := s.block(f.index, f.hasIx)
		if err == nil && b.kind == kindTool && !b.args {
			b.args = true
			s.text([]byte(`"{}"`)) // counted as the translation's arguments {}
		}
		return err
	case evMessageDelta:
		s.addUsage()
		finish := f.stop != nil && !s.finished
		if finish {
			s.finished = true
			s.last = chunkFinish
		}
		if s.usage.reportable() {
			s.last = chunkUsage
			if finish {
				s.last = chunkFinishUsage
			}
		}
	case evMessageStart:
		if !s.started { // a repeated message_start changes nothing
			s.started = true
			s.addUsage()
		}
	case evMessageStop:
		s.stopped = true
	case evError:
		return s.c.call.RedactError(eventError(f.errType, f.errMsg))
	}
	return nil
}

// seeDelta reads a content_block_delta as blockDelta does, without
// writing a chunk.
func (s *stream) seeDelta(index int64, hasIx bool, kind deltaKind, lit []byte) error {
	if !s.started {
		return malformed(errBeforeStart)
	}
	b, err := s.block(index, hasIx)
	if err != nil {
		return err
	}
	switch kind {
	case deltaText, deltaThinking:
		if len(lit) > 2 {
			s.text(lit)
			s.last = chunkContent
		}
	case deltaJSON:
		if b.kind == kindTool && len(lit) > 2 {
			b.args = true
			s.text(lit)
			s.last = chunkContent
		}
	}
	return nil
}
