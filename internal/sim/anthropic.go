package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
)

// anthropicDialect is the Anthropic Messages dialect (POST /v1/messages). Shapes
// follow Anthropic's API reference ("Messages", "Streaming Messages",
// "Errors") and the recorded streams in anthropic-sdk-go's test data.
type anthropicDialect struct{}

var _ dialect = anthropicDialect{}

// anthropicRequest is the part of a Messages request the simulator reads.
// The x-api-key and anthropic-version headers are accepted and ignored.
type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens *int               `json:"max_tokens"`
	Messages  []anthropicMessage `json:"messages"`
	// System is a string or an array of text blocks.
	System json.RawMessage `json:"system"`
	Stream bool            `json:"stream"`
	Tools  []anthropicTool `json:"tools"`
}

type anthropicMessage struct {
	Role string `json:"role"`
	// Content is a string or an array of content blocks.
	Content json.RawMessage `json:"content"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicContent is a content value (a string, or an array of blocks) as
// the engine reads it.
type anthropicContent struct {
	// all is every text, tool_result blocks' included: the token estimate.
	all string
	// texts are the string or the text blocks: what the prompt hash and a
	// prefill take.
	texts []string
	// textOnly is true for a string or an array of text blocks only.
	textOnly bool
}

// anthropicRead reads a content value.
func anthropicRead(raw json.RawMessage) (anthropicContent, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return anthropicContent{}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return anthropicContent{all: s, texts: []string{s}, textOnly: true}, nil
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return anthropicContent{}, errors.New("must be a string or an array of content blocks")
	}
	c := anthropicContent{textOnly: true}
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
		if bl.Type == "text" {
			c.texts = append(c.texts, bl.Text)
		} else {
			c.textOnly = false
		}
		if t, err := anthropicRead(bl.Content); err == nil {
			b.WriteString(t.all)
		}
	}
	c.all = b.String()
	return c, nil
}

// anthropicParse validates a Messages request as the API does (model,
// max_tokens and messages are required) and reads what the engine needs.
// count is true for count_tokens, which takes no max_tokens.
func anthropicParse(body *anthropicRequest, count bool) (*request, error) {
	switch {
	case body.Model == "":
		return nil, paramError{"model", "model: Field required"}
	case body.MaxTokens == nil && !count:
		return nil, paramError{"max_tokens", "max_tokens: Field required"}
	case body.MaxTokens != nil && *body.MaxTokens < 1 && !count:
		return nil, paramError{"max_tokens", "max_tokens: Input should be greater than or equal to 1"}
	case len(body.Messages) == 0:
		return nil, paramError{"messages", "messages: Field required"}
	}
	req := &request{model: body.Model, stream: body.Stream, promptTokens: 3}
	if body.MaxTokens != nil {
		req.limit = *body.MaxTokens
	}
	sys, err := anthropicRead(body.System)
	if err != nil {
		return nil, paramError{"system", "system: " + err.Error()}
	}
	if sys.all != "" {
		req.promptTokens += 3 + estimateTokens(sys.all)
	}
	h := newPromptHash()
	for _, t := range sys.texts {
		h.add(t)
	}
	last := len(body.Messages) - 1
	for i, m := range body.Messages {
		c, err := anthropicRead(m.Content)
		if err != nil {
			return nil, paramError{"messages", fmt.Sprintf("messages.%d.content: %v", i, err)}
		}
		req.promptTokens += 3 + estimateTokens(c.all)
		if i == last && m.Role == "assistant" {
			text := strings.Join(c.texts, "")
			// The API refuses a prefill ending in white space; a gateway
			// continuing a cut stream must trim it (and the sim then
			// continues from inside the token the space began).
			if endsInSpace(text) && !count {
				return nil, paramError{"messages", "messages: final assistant content cannot end with trailing whitespace"}
			}
			if c.textOnly {
				req.prefix = text
				break
			}
		}
		for _, t := range c.texts {
			h.add(t)
		}
	}
	req.prompt = h
	for _, t := range body.Tools {
		if t.Name != "" {
			req.tools = append(req.tools, tool{name: t.Name, schema: t.InputSchema})
		}
	}
	return req, nil
}

// messages serves POST /v1/messages, and with count POST
// /v1/messages/count_tokens: {"input_tokens":N}, the prompt estimate a
// Message reports as usage.input_tokens.
func (s *Server) messages(count bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.m.requests.Inc()
		d := anthropicDialect{}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			d.writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
			return
		}
		var body anthropicRequest
		if status, err := decodeBody(w, r, &body); err != nil {
			d.requestError(w, status, err)
			return
		}
		req, err := anthropicParse(&body, count)
		if err != nil {
			d.requestError(w, http.StatusBadRequest, err)
			return
		}
		if count {
			writeJSON(w, http.StatusOK, map[string]int{"input_tokens": req.promptTokens})
			return
		}
		s.serve(w, r, req, d)
	}
}

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

// anthropicUsage is the usage object of a Message and of message_delta.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// anthropicBlock is a content block of a Message: text or tool_use.
type anthropicBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// anthropicStop spells the stop reasons as Anthropic's stop_reason.
var anthropicStop = [...]string{stopEnd: "end_turn", stopLength: "max_tokens", stopTool: "tool_use"}

func (anthropicDialect) complete(w http.ResponseWriter, pl *plan, text string) {
	block := anthropicBlock{Type: "text", Text: &text}
	if pl.tool != nil {
		block = anthropicBlock{Type: "tool_use", ID: pl.tool.id, Name: pl.tool.name, Input: pl.tool.args}
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
		Content:    []anthropicBlock{block},
		StopReason: anthropicStop[pl.stop],
		Usage:      anthropicUsage{InputTokens: pl.promptTokens, OutputTokens: pl.tokens},
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
	dataEmptyJSON    = []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`)
	dataBlockStop    = []byte(`{"type":"content_block_stop","index":0}`)
	dataMessageStop  = []byte(`{"type":"message_stop"}`)
	dataOverloaded   = []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	dataTruncatedAnt = []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"trunc`)
)

// anthropicEncoder writes an Anthropic stream: message_start,
// content_block_start, ping, content_block_delta (text_delta or
// input_json_delta) for each content chunk, content_block_stop,
// message_delta (stop_reason, cumulative usage), message_stop. Every event
// has its event: line and a data: object whose "type" repeats it. The one
// content block has index 0.
type anthropicEncoder struct {
	buf    []byte
	pl     *plan
	prompt []byte // "input_tokens":N
}

var _ encoder = (*anthropicEncoder)(nil)

func newAnthropicEncoder(pl *plan) *anthropicEncoder {
	e := &anthropicEncoder{buf: make([]byte, 0, 512), pl: pl}
	e.prompt = strconv.AppendInt([]byte(`"input_tokens":`), int64(pl.promptTokens), 10)
	return e
}

func (e *anthropicEncoder) usage(b []byte, output int) []byte {
	b = append(b, `"usage":{`...)
	b = append(b, e.prompt...)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	return append(b, '}')
}

// start writes message_start (the Message with empty content, stop_reason
// null, usage with output_tokens 1 as Anthropic reports it), the block's
// content_block_start and a ping, in the order of Anthropic's streaming
// reference; a tool_use block also gets the empty input_json_delta
// Anthropic sends first.
func (e *anthropicEncoder) start(st *streamState, flush bool) error {
	pl := e.pl
	b := append(e.buf[:0], `{"type":"message_start","message":{"id":`...)
	b = api.AppendString(b, pl.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = api.AppendString(b, pl.model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,`...)
	b = e.usage(b, 1)
	b = append(b, `}}`...)
	e.buf = b
	if err := st.emit(evMessageStart, b, false); err != nil {
		return err
	}
	b = append(e.buf[:0], `{"type":"content_block_start","index":0,"content_block":`...)
	if pl.tool == nil {
		b = append(b, `{"type":"text","text":""}}`...)
	} else {
		b = append(b, `{"type":"tool_use","id":`...)
		b = api.AppendString(b, pl.tool.id)
		b = append(b, `,"name":`...)
		b = api.AppendString(b, pl.tool.name)
		b = append(b, `,"input":{}}}`...)
	}
	e.buf = b
	if err := st.emit(evContentBlockStart, b, false); err != nil {
		return err
	}
	if pl.tool == nil {
		return st.emit(evPing, dataPing, flush)
	}
	if err := st.emit(evPing, dataPing, false); err != nil {
		return err
	}
	return st.emit(evContentBlockDelta, dataEmptyJSON, flush)
}

func (e *anthropicEncoder) text(st *streamState, toks [][]byte, _ int) error {
	b := append(e.buf[:0], `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`...)
	for _, t := range toks {
		b = append(b, t...)
	}
	b = append(b, `"}}`...)
	e.buf = b
	return st.emit(evContentBlockDelta, b, true)
}

func (e *anthropicEncoder) toolArgs(st *streamState, i int, _ int) error {
	b := append(e.buf[:0], `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`...)
	b = api.AppendString(b, e.pl.tool.frags[i])
	b = append(b, `}}`...)
	e.buf = b
	return st.emit(evContentBlockDelta, b, true)
}

func (e *anthropicEncoder) finish(st *streamState, sent int) error {
	if err := st.emit(evContentBlockStop, dataBlockStop, false); err != nil {
		return err
	}
	b := append(e.buf[:0], `{"type":"message_delta","delta":{"stop_reason":"`...)
	b = append(b, anthropicStop[e.pl.stop]...)
	b = append(b, `","stop_sequence":null},`...)
	b = e.usage(b, sent)
	b = append(b, '}')
	e.buf = b
	if err := st.emit(evMessageDelta, b, false); err != nil {
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
