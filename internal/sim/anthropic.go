package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
)

// anthropicDialect is the Anthropic Messages dialect (POST /v1/messages). Shapes
// follow Anthropic's API reference ("Messages", "Streaming Messages",
// "Errors") and the recorded streams in anthropic-sdk-go's test data.
type anthropicDialect struct{}

var _ dialect = anthropicDialect{}

func (anthropicDialect) name() string        { return "anthropic" }
func (anthropicDialect) tokensPerChunk() int { return DefaultAnthropicTokensPerChunk }
func (anthropicDialect) idPrefix() string    { return "msg_sim" }
func (anthropicDialect) wholeToolCall() bool { return false }
func (anthropicDialect) toolCallID(key uint64) string {
	return "toolu_sim" + strconv.FormatUint(splitmix64(key^0x746f6f6c), 36)
}
func (anthropicDialect) encoder(pl *plan) encoder { return newAnthropicEncoder(pl) }

// headers sets request-id, the header Anthropic answers every request with.
func (anthropicDialect) headers(h http.Header, pl *plan) {
	h.Set("request-id", "req_sim"+strconv.FormatUint(pl.key, 36))
}

// anthropicErrorType is the error "type" Anthropic gives each status
// (Anthropic's "Errors" reference); other 4xx are invalid_request_error,
// other 5xx api_error.
func anthropicErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id,omitempty"`
}

// writeError answers status with an Anthropic error body of the status's type.
func (anthropicDialect) writeError(w http.ResponseWriter, status int, msg string) {
	var e anthropicError
	e.Type, e.Error.Type, e.Error.Message = "error", anthropicErrorType(status), msg
	e.RequestID = w.Header().Get("request-id")
	writeJSON(w, status, e)
}

func (d anthropicDialect) requestError(w http.ResponseWriter, status int, err error) {
	d.writeError(w, status, err.Error())
}

// failure answers an injected status with Anthropic's wording for it
// (retry-after on 429, as Anthropic's rate-limit reference describes).
func (d anthropicDialect) failure(w http.ResponseWriter, status int) {
	msg := fmt.Sprintf("simulated error status %d", status)
	switch status {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		msg = "Number of request tokens has exceeded your per-minute rate limit (simulated)"
	case 529:
		msg = "Overloaded"
	case http.StatusInternalServerError:
		msg = "Internal server error"
	}
	d.writeError(w, status, msg)
}

// generationFailure answers 529 overloaded_error: the status Anthropic's
// streaming reference gives for the overloaded_error a stream can carry.
func (d anthropicDialect) generationFailure(w http.ResponseWriter) {
	d.writeError(w, 529, "Overloaded")
}

func (anthropicDialect) truncated(w http.ResponseWriter, pl *plan) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(`{"id":"` + pl.id + `","type":"message","role":"assistant","content":[{"type":"text","text":"trunc`))
}

// anthropicUsage is the usage object of a Message.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreation            struct {
		Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails *struct {
		ThinkingTokens int `json:"thinking_tokens"`
	} `json:"output_tokens_details,omitempty"`
	ServerToolUse *struct {
		WebSearchRequests int `json:"web_search_requests"`
	} `json:"server_tool_use,omitempty"`
	ServiceTier string `json:"service_tier"`
}

func newAnthropicUsage(pl *plan, output int) anthropicUsage {
	u := anthropicUsage{
		InputTokens:              pl.promptTokens - pl.cache.read - pl.cache.written(),
		CacheCreationInputTokens: pl.cache.written(),
		CacheReadInputTokens:     pl.cache.read,
		OutputTokens:             output,
		ServiceTier:              "standard",
	}
	u.CacheCreation.Ephemeral5m, u.CacheCreation.Ephemeral1h = pl.cache.write5m, pl.cache.write1h
	if pl.search != nil {
		u.ServerToolUse = &struct {
			WebSearchRequests int `json:"web_search_requests"`
		}{1}
	}
	if pl.thinkTokens > 0 {
		u.OutputTokensDetails = &struct {
			ThinkingTokens int `json:"thinking_tokens"`
		}{pl.thinkTokens}
	}
	return u
}

// anthropicBlock is a content block of a Message: thinking,
// redacted_thinking, text or tool_use.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`   // web_search_tool_result
	Citations json.RawMessage `json:"citations,omitempty"` // text
}

// anthropicStop spells the stop reasons as Anthropic's stop_reason.
var anthropicStop = [...]string{stopEnd: "end_turn", stopLength: "max_tokens", stopTool: "tool_use"}

// shownThinking is the text of pl's thinking block: empty with display
// omitted.
func shownThinking(pl *plan) string {
	if pl.omitted {
		return ""
	}
	return pl.thinkText
}

func (anthropicDialect) complete(w http.ResponseWriter, pl *plan, text string) {
	var blocks []anthropicBlock
	switch {
	case pl.redacted != "":
		blocks = append(blocks, anthropicBlock{Type: "redacted_thinking", Data: pl.redacted})
	case pl.thinkTokens > 0:
		t := shownThinking(pl)
		blocks = append(blocks, anthropicBlock{Type: "thinking", Thinking: &t, Signature: pl.signature})
	}
	switch {
	case pl.tool != nil:
		blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: pl.tool.id, Name: pl.tool.name, Input: pl.tool.args})
	case pl.tokens > 0 || len(blocks) == 0:
		tb := anthropicBlock{Type: "text", Text: &text}
		if ws := pl.search; ws != nil {
			in, _ := json.Marshal(map[string]string{"query": ws.query})
			blocks = append(blocks, anthropicBlock{Type: "server_tool_use", ID: ws.id, Name: "web_search", Input: in},
				anthropicBlock{Type: "web_search_tool_result", ToolUseID: ws.id, Content: ws.anthropicResults()})
			tb.Citations = append(append([]byte{'['}, ws.anthropicCitation()...), ']')
		}
		blocks = append(blocks, tb)
	}
	writeJSON(w, http.StatusOK, struct {
		ID           string           `json:"id"`
		Type         string           `json:"type"`
		Role         string           `json:"role"`
		Model        string           `json:"model"`
		Content      []anthropicBlock `json:"content"`
		StopReason   string           `json:"stop_reason"`
		StopSequence *string          `json:"stop_sequence"`
		Usage        anthropicUsage   `json:"usage"`
	}{
		ID: pl.id, Type: "message", Role: "assistant", Model: pl.model,
		Content:    blocks,
		StopReason: anthropicStop[pl.stop],
		Usage:      newAnthropicUsage(pl, pl.thinkTokens+pl.tokens),
	})
}

// Event names of an Anthropic stream.
var (
	evMessageStart      = []byte("message_start")
	evContentBlockStart = []byte("content_block_start")
	evPing              = []byte("ping")
	evContentBlockDelta = []byte("content_block_delta")
	evContentBlockStop  = []byte("content_block_stop")
	evMessageDelta      = []byte("message_delta")
	evMessageStop       = []byte("message_stop")
	evError             = []byte("error")

	dataPing         = []byte(`{"type":"ping"}`)
	dataMessageStop  = []byte(`{"type":"message_stop"}`)
	dataOverloaded   = []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	dataTruncatedAnt = []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"trunc`)
)

// anthropicEncoder writes an Anthropic stream: message_start; with
// thinking a thinking block (content_block_start with empty thinking and
// signature, thinking_delta events, one signature_delta,
// content_block_stop) or a redacted_thinking block (content_block_start
// with its data, content_block_stop); then the answer's block
// (content_block_start, text_delta or input_json_delta events,
// content_block_stop); message_delta (stop_reason, cumulative usage),
// message_stop. A ping follows the first content_block_start. Every event
// has its event: line and a data: object whose "type" repeats it. Blocks
// are indexed from 0 in order.
type anthropicEncoder struct {
	buf     []byte
	pl      *plan
	counts  []byte // "input_tokens":N,"cache_creation_input_tokens":W,"cache_read_input_tokens":R
	block   int    // index of the block open (or next)
	inThink bool   // the thinking block is open
	answer  bool   // the answer's block is open
}

var _ encoder = (*anthropicEncoder)(nil)

func newAnthropicEncoder(pl *plan) *anthropicEncoder {
	e := &anthropicEncoder{buf: make([]byte, 0, 512), pl: pl}
	u := newAnthropicUsage(pl, 0)
	b := strconv.AppendInt([]byte(`"input_tokens":`), int64(u.InputTokens), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheCreationInputTokens), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	e.counts = strconv.AppendInt(b, int64(u.CacheReadInputTokens), 10)
	return e
}

// usage appends message_start's usage (start true: with the cache_creation
// split and service_tier) or message_delta's (with output_tokens_details
// when the answer thought).
func (e *anthropicEncoder) usage(b []byte, output int, start bool) []byte {
	b = append(b, `"usage":{`...)
	b = append(b, e.counts...)
	if start {
		b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
		b = strconv.AppendInt(b, int64(e.pl.cache.write5m), 10)
		b = append(b, `,"ephemeral_1h_input_tokens":`...)
		b = strconv.AppendInt(b, int64(e.pl.cache.write1h), 10)
		b = append(b, '}')
	}
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	switch {
	case start:
		b = append(b, `,"service_tier":"standard"`...)
	case e.pl.thinkTokens > 0:
		b = append(b, `,"output_tokens_details":{"thinking_tokens":`...)
		b = strconv.AppendInt(b, int64(e.pl.thinkTokens), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// event starts the data of an event about the block open.
func (e *anthropicEncoder) event(typ string) []byte {
	b := append(e.buf[:0], `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","index":`...)
	return strconv.AppendInt(b, int64(e.block), 10)
}

func (e *anthropicEncoder) emit(st *streamState, name, b []byte, flush bool) error {
	e.buf = b
	return st.emit(name, b, flush)
}

// start writes message_start (the Message with empty content, stop_reason
// null, usage with output_tokens 1 as Anthropic reports it), the first
// block's content_block_start and a ping, in the order of Anthropic's
// streaming reference; a tool_use block also gets the empty
// input_json_delta Anthropic sends first.
func (e *anthropicEncoder) start(st *streamState, flush bool) error {
	pl := e.pl
	b := append(e.buf[:0], `{"type":"message_start","message":{"id":`...)
	b = api.AppendString(b, pl.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = api.AppendString(b, pl.model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,`...)
	b = e.usage(b, 1, true)
	b = append(b, `}}`...)
	if err := e.emit(st, evMessageStart, b, false); err != nil {
		return err
	}
	switch {
	case pl.redacted != "":
		b = append(e.event("content_block_start"), `,"content_block":{"type":"redacted_thinking","data":`...)
		b = api.AppendString(b, pl.redacted)
		b = append(b, `}}`...)
		if err := e.emit(st, evContentBlockStart, b, false); err != nil {
			return err
		}
		if err := st.emit(evPing, dataPing, false); err != nil {
			return err
		}
		if err := e.stop(st); err != nil {
			return err
		}
		return e.open(st, flush)
	case pl.thinkTokens > 0:
		b = append(e.event("content_block_start"), `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
		if err := e.emit(st, evContentBlockStart, b, false); err != nil {
			return err
		}
		e.inThink = true
		return st.emit(evPing, dataPing, flush)
	}
	return e.open(st, flush)
}

// open starts the answer's block: text, or tool_use and its empty
// input_json_delta; the first block is followed by a ping.
func (e *anthropicEncoder) open(st *streamState, flush bool) error {
	pl := e.pl
	e.answer = true
	if pl.search != nil {
		if err := e.searchBlocks(st); err != nil {
			return err
		}
	}
	b := append(e.event("content_block_start"), `,"content_block":`...)
	if pl.tool == nil {
		b = append(b, `{"type":"text","text":""}}`...)
	} else {
		b = append(b, `{"type":"tool_use","id":`...)
		b = api.AppendString(b, pl.tool.id)
		b = append(b, `,"name":`...)
		b = api.AppendString(b, pl.tool.name)
		b = append(b, `,"input":{}}}`...)
	}
	if err := e.emit(st, evContentBlockStart, b, false); err != nil {
		return err
	}
	if e.block == 0 {
		if err := st.emit(evPing, dataPing, flush && pl.tool == nil); err != nil {
			return err
		}
	}
	if pl.tool == nil {
		if pl.search != nil {
			// The answer cites the search: its citation comes first.
			b = append(e.event("content_block_delta"), `,"delta":{"type":"citations_delta","citation":`...)
			b = append(b, pl.search.anthropicCitation()...)
			if err := e.emit(st, evContentBlockDelta, append(b, `}}`...), false); err != nil {
				return err
			}
		}
		if e.block > 0 && flush {
			return st.sw.Flush()
		}
		return nil
	}
	b = append(e.event("content_block_delta"), `,"delta":{"type":"input_json_delta","partial_json":""}}`...)
	return e.emit(st, evContentBlockDelta, b, flush)
}

// searchBlocks writes the search before the answer: its server_tool_use
// block (the query as input_json_delta fragments) and its
// web_search_tool_result block; a ping follows the first block's start.
func (e *anthropicEncoder) searchBlocks(st *streamState) error {
	ws := e.pl.search
	b := append(e.event("content_block_start"), `,"content_block":{"type":"server_tool_use","id":`...)
	b = api.AppendString(b, ws.id)
	b = append(b, `,"name":"web_search","input":{}}}`...)
	if err := e.emit(st, evContentBlockStart, b, false); err != nil {
		return err
	}
	if e.block == 0 {
		if err := st.emit(evPing, dataPing, false); err != nil {
			return err
		}
	}
	in, _ := json.Marshal(map[string]string{"query": ws.query})
	half := len(in) / 2
	for _, frag := range []string{"", string(in[:half]), string(in[half:])} {
		b = append(e.event("content_block_delta"), `,"delta":{"type":"input_json_delta","partial_json":`...)
		b = api.AppendString(b, frag)
		if err := e.emit(st, evContentBlockDelta, append(b, `}}`...), false); err != nil {
			return err
		}
	}
	if err := e.stop(st); err != nil {
		return err
	}
	b = append(e.event("content_block_start"), `,"content_block":{"type":"web_search_tool_result","tool_use_id":`...)
	b = api.AppendString(b, ws.id)
	b = append(b, `,"content":`...)
	b = append(b, ws.anthropicResults()...)
	if err := e.emit(st, evContentBlockStart, append(b, `}}`...), false); err != nil {
		return err
	}
	return e.stop(st)
}

// stop ends the block open.
func (e *anthropicEncoder) stop(st *streamState) error {
	b := append(e.event("content_block_stop"), '}')
	e.block++
	return e.emit(st, evContentBlockStop, b, false)
}

// toAnswer closes the thinking block (its signature_delta, then
// content_block_stop) and opens the answer's, once.
func (e *anthropicEncoder) toAnswer(st *streamState) error {
	if e.answer {
		return nil
	}
	if err := e.closeThinking(st); err != nil {
		return err
	}
	return e.open(st, false)
}

func (e *anthropicEncoder) closeThinking(st *streamState) error {
	if !e.inThink {
		return nil
	}
	e.inThink = false
	b := append(e.event("content_block_delta"), `,"delta":{"type":"signature_delta","signature":`...)
	b = api.AppendString(b, e.pl.signature)
	b = append(b, `}}`...)
	if err := e.emit(st, evContentBlockDelta, b, false); err != nil {
		return err
	}
	return e.stop(st)
}

func (e *anthropicEncoder) thinkingDelta(st *streamState, toks [][]byte) error {
	b := append(e.event("content_block_delta"), `,"delta":{"type":"thinking_delta","thinking":"`...)
	for _, t := range toks {
		b = append(b, t...)
	}
	b = append(b, `"}}`...)
	return e.emit(st, evContentBlockDelta, b, true)
}

func (e *anthropicEncoder) thinking(st *streamState, toks [][]byte, _ int) error {
	return e.thinkingDelta(st, toks)
}

func (e *anthropicEncoder) text(st *streamState, toks [][]byte, _ int) error {
	if err := e.toAnswer(st); err != nil {
		return err
	}
	b := append(e.event("content_block_delta"), `,"delta":{"type":"text_delta","text":"`...)
	for _, t := range toks {
		b = append(b, t...)
	}
	b = append(b, `"}}`...)
	return e.emit(st, evContentBlockDelta, b, true)
}

func (e *anthropicEncoder) toolArgs(st *streamState, i int, _ int) error {
	if err := e.toAnswer(st); err != nil {
		return err
	}
	b := append(e.event("content_block_delta"), `,"delta":{"type":"input_json_delta","partial_json":`...)
	b = api.AppendString(b, e.pl.tool.frags[i])
	b = append(b, `}}`...)
	return e.emit(st, evContentBlockDelta, b, true)
}

func (e *anthropicEncoder) finish(st *streamState, sent int) error {
	if err := e.closeThinking(st); err != nil {
		return err
	}
	if e.answer {
		if err := e.stop(st); err != nil {
			return err
		}
	}
	b := append(e.buf[:0], `{"type":"message_delta","delta":{"stop_reason":"`...)
	b = append(b, anthropicStop[e.pl.stop]...)
	b = append(b, `","stop_sequence":null},`...)
	b = e.usage(b, sent, false)
	if e.pl.search != nil {
		b = append(b[:len(b)-1], `,"server_tool_use":{"web_search_requests":1}}`...)
	}
	b = append(b, '}')
	if err := e.emit(st, evMessageDelta, b, false); err != nil {
		return err
	}
	return st.emit(evMessageStop, dataMessageStop, true)
}

// fail sends event: error with overloaded_error, the example of Anthropic's
// streaming reference ("Error events").
func (e *anthropicEncoder) fail(st *streamState, _ int) error {
	return st.emit(evError, dataOverloaded, true)
}

func (e *anthropicEncoder) malformed(st *streamState) error {
	return st.emit(evContentBlockDelta, dataTruncatedAnt, true)
}
