package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/api"
)

// responsesDialect is OpenAI's Responses API (POST /v1/responses), as its
// API reference ("Create a model response", "Streaming events") and
// openai-go's stream helpers read it: named events, each with a
// sequence_number from 0; response.created and response.in_progress, the
// output item's added, content and done events, then one terminal event
// (response.completed, response.incomplete for max_output_tokens, or
// response.failed for the error-at fault) carrying the whole response and
// its usage. No "[DONE]" ends the stream. A function call (X-Sim-Tool-Call)
// is a function_call item whose arguments stream as
// response.function_call_arguments.delta events. reasoning.effort spends
// hidden reasoning tokens as the chat endpoint's reasoning_effort does
// (output_tokens_details.reasoning_tokens; no reasoning item is sent).
type responsesDialect struct{}

var _ dialect = responsesDialect{}

// responsesBody is the part of a Responses request the simulator reads.
type responsesBody struct {
	Model           string            `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	MaxOutputTokens *int              `json:"max_output_tokens"`
	Stream          bool              `json:"stream"`
	Tools           []json.RawMessage `json:"tools"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
}

// responsesItem is an input item as the simulator reads it: a message
// (type "message" or absent) with string or part content, a function call
// and its output; other items add nothing.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// minOutputTokens is the smallest max_output_tokens OpenAI accepts.
const minOutputTokens = 16

// missingParam is a required field absent, as OpenAI words it.
type missingParam string

func (m missingParam) Error() string { return "Missing required parameter: '" + string(m) + "'." }

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	s.m.requests.Inc()
	d := responsesDialect{}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			"method "+r.Method+" not allowed on /v1/responses")
		return
	}
	var body responsesBody
	if status, err := decodeBody(w, r, &body); err != nil {
		d.requestError(w, status, err)
		return
	}
	req, err := responsesRequest(&body)
	if err != nil {
		d.requestError(w, http.StatusBadRequest, err)
		return
	}
	s.serve(w, r, req, d)
}

// responsesRequest validates a Responses request as OpenAI does and reads
// what the engine needs.
func responsesRequest(body *responsesBody) (*request, error) {
	if body.Model == "" {
		return nil, missingParam("model")
	}
	if len(body.Input) == 0 || string(body.Input) == "null" {
		return nil, missingParam("input")
	}
	if n := body.MaxOutputTokens; n != nil && *n < minOutputTokens {
		return nil, paramError{"max_output_tokens", fmt.Sprintf(
			"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= %d, but got %d instead.", minOutputTokens, *n)}
	}
	req := &request{model: body.Model, stream: body.Stream, includeUsage: true, promptTokens: 3}
	if body.MaxOutputTokens != nil {
		req.limit = *body.MaxOutputTokens
	}
	h := newPromptHash()
	if body.Instructions != nil {
		h.add(*body.Instructions)
		req.promptTokens += 3 + estimateTokens(*body.Instructions)
	}
	var texts []string // the conversation's text, in order
	add := func(s string) {
		texts = append(texts, s)
		req.promptTokens += estimateTokens(s)
	}
	var str string
	if json.Unmarshal(body.Input, &str) == nil {
		add(str)
		req.promptTokens += 3
	} else {
		var items []responsesItem
		if err := json.Unmarshal(body.Input, &items); err != nil {
			return nil, paramError{"input", "Invalid type for 'input': expected one of a string or an array of input items."}
		}
		for i, it := range items {
			req.promptTokens += 3
			switch it.Type {
			case "", "message":
				if it.Role == "" {
					return nil, missingParam(fmt.Sprintf("input[%d].role", i))
				}
				if err := responsesContent(it.Content, i, add); err != nil {
					return nil, err
				}
			case "function_call":
				req.promptTokens += estimateTokens(it.Arguments)
			case "function_call_output":
				req.promptTokens += estimateTokens(string(it.Output))
			}
		}
	}
	for _, t := range texts {
		h.add(t)
	}
	req.prompt = h
	for i, raw := range body.Tools {
		var t struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, paramError{fmt.Sprintf("tools[%d]", i), "Invalid type for 'tools[" + strconv.Itoa(i) + "]': expected an object."}
		}
		if t.Type == "function" && t.Name != "" {
			req.tools = append(req.tools, tool{name: t.Name, schema: t.Parameters})
		}
	}
	req.cache = func(min int) *cacheQuery {
		if req.promptTokens < min {
			return nil
		}
		return responsesCacheQuery(body, min)
	}
	if r := body.Reasoning; r != nil && r.Effort != "" {
		switch q, ok := reasoningQuarters[r.Effort]; {
		case r.Effort == "none":
			req.thinking.mode = thinkOff
		case !ok:
			return nil, paramError{"reasoning.effort", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high' and 'xhigh'.", r.Effort)}
		default:
			req.thinking = thinkingAsk{mode: thinkOn, quarters: q}
		}
	}
	return req, nil
}

// responsesCacheQuery reads a Responses request as OpenAI's automatic
// prompt caching does, the way openAICacheQuery reads a chat request: the
// tools, the instructions, then each input item (its other members, then
// its text, in which a cached prefix may end), a checkpoint every
// cacheStep tokens from min.
func responsesCacheQuery(body *responsesBody, min int) *cacheQuery {
	ph := newPrefixHasher()
	ph.automatic(min, cacheStep)
	for _, t := range body.Tools {
		ph.fixed(canonicalJSON(t), 0)
	}
	if body.Instructions != nil {
		ph.fixed([]byte(`"instructions"`), 3)
		ph.text(*body.Instructions)
	}
	var str string
	if json.Unmarshal(body.Input, &str) == nil {
		ph.fixed([]byte(`"input"`), 3)
		ph.text(str)
		return &cacheQuery{points: ph.points}
	}
	var raws []json.RawMessage
	json.Unmarshal(body.Input, &raws) // responsesRequest read it as items
	for i, raw := range raws {
		var it responsesItem
		json.Unmarshal(raw, &it)
		ph.fixed(canonicalJSON(raw, "content", "arguments", "output"), 3)
		switch it.Type {
		case "", "message":
			responsesContent(it.Content, i, ph.text)
		case "function_call":
			ph.text(it.Arguments)
		case "function_call_output":
			ph.text(string(it.Output))
		}
	}
	return &cacheQuery{points: ph.points}
}

// responsesContent calls add with the text of a message's content: a
// string, or its input_text / output_text parts.
func responsesContent(raw json.RawMessage, i int, add func(string)) error {
	if len(raw) == 0 || string(raw) == "null" {
		return missingParam(fmt.Sprintf("input[%d].content", i))
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		add(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return paramError{fmt.Sprintf("input[%d].content", i), fmt.Sprintf("Invalid type for 'input[%d].content': expected one of a string or an array of content parts.", i)}
	}
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "output_text" {
			add(p.Text)
		}
	}
	return nil
}

func (responsesDialect) name() string        { return "responses" }
func (responsesDialect) tokensPerChunk() int { return 1 }
func (responsesDialect) idPrefix() string    { return "resp_sim" }
func (responsesDialect) wholeToolCall() bool { return false }
func (responsesDialect) toolCallID(key uint64) string {
	return "call_sim" + strconv.FormatUint(splitmix64(key^0x746f6f6c), 36)
}
func (responsesDialect) failure(w http.ResponseWriter, status int) { writeFailure(w, status) }
func (responsesDialect) encoder(pl *plan) encoder                  { return newResponder(pl, time.Now().Unix()) }

// requestError answers with an OpenAI error object, a missing field with
// code missing_required_parameter as OpenAI's does.
func (responsesDialect) requestError(w http.ResponseWriter, status int, err error) {
	var mp missingParam
	if errors.As(err, &mp) {
		writeError(w, status, "invalid_request_error", "missing_required_parameter", string(mp), err.Error())
		return
	}
	openAIDialect{}.requestError(w, status, err)
}

func (responsesDialect) generationFailure(w http.ResponseWriter) {
	openAIDialect{}.generationFailure(w)
}

func (responsesDialect) truncated(w http.ResponseWriter, pl *plan) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(`{"id":"` + pl.id + `","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"trunc`))
}

func (responsesDialect) complete(w http.ResponseWriter, pl *plan, text string) {
	rs := newResponder(pl, time.Now().Unix())
	if pl.tool == nil {
		rs.said = api.AppendString(nil, text)
		rs.said = rs.said[1 : len(rs.said)-1]
	} else {
		rs.args = pl.tool.args
	}
	b := rs.response(nil, rs.final(), pl.thinkTokens+pl.tokens)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// responder is the Responses dialect's encoder: each event is appended
// into a reused buffer; the answer's text is kept (escaped) for the done
// events and the terminal response.
type responder struct {
	buf     []byte
	said    []byte // the text so far, JSON-escaped
	args    []byte // a tool call's arguments so far
	seq     int64
	id      string // the response's
	item    string // the output item's id
	model   string
	created int64
	limit   int // max_output_tokens; 0: none
	prompt  int
	tokens  int // the answer's output tokens
	chunk   int // tokens per chunk
	reason  int // reasoning tokens (hidden, counted in the output)
	cached  int // prompt tokens read from the prompt cache
	stop    stopReason
	tool    *toolCall
}

var _ encoder = (*responder)(nil)

func newResponder(pl *plan, created int64) *responder {
	rs := &responder{buf: make([]byte, 0, 512), id: pl.id, model: pl.model, created: created,
		prompt: pl.promptTokens, tokens: pl.tokens, chunk: pl.profile.TokensPerChunk,
		reason: pl.thinkTokens, cached: pl.cache.read, stop: pl.stop, tool: pl.tool}
	if pl.stop == stopLength {
		rs.limit = pl.tokens
	}
	key := strconv.FormatUint(splitmix64(pl.key^0x6974656d), 36)
	rs.item = "msg_sim" + key
	if pl.tool != nil {
		rs.item = "fc_sim" + key
	}
	return rs
}

// Event names, which are also the events' types.
const (
	rsCreated    = "response.created"
	rsInProgress = "response.in_progress"
	rsCompleted  = "response.completed"
	rsIncomplete = "response.incomplete"
	rsFailed     = "response.failed"
	rsItemAdded  = "response.output_item.added"
	rsItemDone   = "response.output_item.done"
	rsPartAdded  = "response.content_part.added"
	rsPartDone   = "response.content_part.done"
	rsTextDelta  = "response.output_text.delta"
	rsTextDone   = "response.output_text.done"
	rsArgsDelta  = "response.function_call_arguments.delta"
	rsArgsDone   = "response.function_call_arguments.done"
)

// begin starts event typ's data: {"type":…,"sequence_number":N.
func (rs *responder) begin(typ string) []byte {
	b := append(rs.buf[:0], `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, rs.seq, 10)
	rs.seq++
	return b
}

// emit writes event typ whose data is b.
func (rs *responder) emit(st *streamState, typ string, b []byte, flush bool) error {
	rs.buf = b
	return st.emit([]byte(typ), b, flush)
}

// itemRef appends the delta events' item reference.
func (rs *responder) itemRef(b []byte) []byte {
	b = append(b, `,"item_id":`...)
	b = api.AppendString(b, rs.item)
	return append(b, `,"output_index":0`...)
}

// ending is how the response ends: its status and incomplete reason.
type ending struct {
	status, reason string
	failed         string // the error message of a failed response
}

func (rs *responder) final() ending {
	if rs.stop == stopLength {
		return ending{status: "incomplete", reason: "max_output_tokens"}
	}
	return ending{status: "completed"}
}

// appendItem appends the output item, with status.
func (rs *responder) appendItem(b []byte, status string, whole bool) []byte {
	if rs.tool != nil {
		b = append(b, `{"id":`...)
		b = api.AppendString(b, rs.item)
		b = append(b, `,"type":"function_call","status":"`...)
		b = append(b, status...)
		b = append(b, `","arguments":`...)
		if whole {
			b = api.AppendString(b, string(rs.args))
		} else {
			b = append(b, `""`...)
		}
		b = append(b, `,"call_id":`...)
		b = api.AppendString(b, rs.tool.id)
		b = append(b, `,"name":`...)
		b = api.AppendString(b, rs.tool.name)
		return append(b, '}')
	}
	b = append(b, `{"id":`...)
	b = api.AppendString(b, rs.item)
	b = append(b, `,"type":"message","status":"`...)
	b = append(b, status...)
	b = append(b, `","content":[`...)
	if whole {
		b = rs.appendPart(b)
	}
	return append(b, `],"role":"assistant"}`...)
}

// appendPart appends the output_text part with the text so far.
func (rs *responder) appendPart(b []byte) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
	b = append(b, rs.said...)
	return append(b, `"}`...)
}

// response appends the whole response object: in progress (e.status ""),
// or ended with its output and usage (output tokens out).
func (rs *responder) response(b []byte, e ending, out int) []byte {
	status := e.status
	if status == "" {
		status = "in_progress"
	}
	b = append(b, `{"id":`...)
	b = api.AppendString(b, rs.id)
	b = append(b, `,"object":"response","created_at":`...)
	b = strconv.AppendInt(b, rs.created, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","background":false,"completed_at":`...)
	if status == "completed" {
		b = strconv.AppendInt(b, time.Now().Unix(), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"error":`...)
	if e.failed != "" {
		b = append(b, `{"code":"server_error","message":`...)
		b = api.AppendString(b, e.failed)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if e.reason != "" {
		b = append(b, `{"reason":"`...)
		b = append(b, e.reason...)
		b = append(b, `"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":null,"max_output_tokens":`...)
	if rs.limit > 0 {
		b = strconv.AppendInt(b, int64(rs.limit), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = api.AppendString(b, rs.model)
	b = append(b, `,"output":[`...)
	if e.status != "" {
		itemStatus := "completed"
		if e.status != "completed" {
			itemStatus = "incomplete"
		}
		b = rs.appendItem(b, itemStatus, true)
	}
	b = append(b, `],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},`+
		`"store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],`+
		`"top_p":1.0,"truncation":"disabled","usage":`...)
	if e.status == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(rs.prompt), 10)
		b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(rs.cached), 10)
		b = append(b, `},"output_tokens":`...)
		b = strconv.AppendInt(b, int64(out), 10)
		b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(rs.reason), 10)
		b = append(b, `},"total_tokens":`...)
		b = strconv.AppendInt(b, int64(rs.prompt+out), 10)
		b = append(b, '}')
	}
	return append(b, `,"user":null,"metadata":{}}`...)
}

// start writes response.created, response.in_progress, the item's
// output_item.added and, for a message, its content_part.added.
func (rs *responder) start(st *streamState, flush bool) error {
	for _, typ := range []string{rsCreated, rsInProgress} {
		b := rs.begin(typ)
		b = append(b, `,"response":`...)
		b = append(rs.response(b, ending{}, 0), '}')
		if err := rs.emit(st, typ, b, false); err != nil {
			return err
		}
	}
	b := rs.begin(rsItemAdded)
	b = append(b, `,"output_index":0,"item":`...)
	b = append(rs.appendItem(b, "in_progress", false), '}')
	if rs.tool != nil {
		return rs.emit(st, rsItemAdded, b, flush)
	}
	if err := rs.emit(st, rsItemAdded, b, false); err != nil {
		return err
	}
	b = rs.begin(rsPartAdded)
	b = append(rs.itemRef(b), `,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`...)
	return rs.emit(st, rsPartAdded, b, flush)
}

// thinking is never called: the request asks for no visible reasoning
// (reasoning.effort counts hidden reasoning tokens only).
func (rs *responder) thinking(*streamState, [][]byte, int) error { return nil }

// text writes one response.output_text.delta of the escaped tokens.
func (rs *responder) text(st *streamState, toks [][]byte, _ int) error {
	b := rs.begin(rsTextDelta)
	b = append(rs.itemRef(b), `,"content_index":0,"delta":"`...)
	for _, t := range toks {
		b = append(b, t...)
		rs.said = append(rs.said, t...)
	}
	b = append(b, `","logprobs":[]}`...)
	return rs.emit(st, rsTextDelta, b, true)
}

// toolArgs writes one response.function_call_arguments.delta.
func (rs *responder) toolArgs(st *streamState, i int, _ int) error {
	b := rs.begin(rsArgsDelta)
	b = append(rs.itemRef(b), `,"delta":`...)
	b = api.AppendString(b, string(rs.tool.frags[i]))
	rs.args = append(rs.args, rs.tool.frags[i]...)
	return rs.emit(st, rsArgsDelta, append(b, '}'), true)
}

// finish writes the item's done events and the terminal event.
func (rs *responder) finish(st *streamState, sent int) error {
	e := rs.final()
	itemStatus := "completed"
	if e.status != "completed" {
		itemStatus = "incomplete"
	}
	if rs.tool != nil {
		b := rs.begin(rsArgsDone)
		b = append(rs.itemRef(b), `,"arguments":`...)
		b = api.AppendString(b, string(rs.tool.args))
		if err := rs.emit(st, rsArgsDone, append(b, '}'), false); err != nil {
			return err
		}
	} else {
		b := rs.begin(rsTextDone)
		b = append(rs.itemRef(b), `,"content_index":0,"text":"`...)
		b = append(b, rs.said...)
		if err := rs.emit(st, rsTextDone, append(b, `","logprobs":[]}`...), false); err != nil {
			return err
		}
		b = rs.begin(rsPartDone)
		b = append(rs.itemRef(b), `,"content_index":0,"part":`...)
		b = append(rs.appendPart(b), '}')
		if err := rs.emit(st, rsPartDone, b, false); err != nil {
			return err
		}
	}
	b := rs.begin(rsItemDone)
	b = append(b, `,"output_index":0,"item":`...)
	b = append(rs.appendItem(b, itemStatus, true), '}')
	if err := rs.emit(st, rsItemDone, b, false); err != nil {
		return err
	}
	typ := rsCompleted
	if e.status == "incomplete" {
		typ = rsIncomplete
	}
	return rs.end(st, typ, e, sent)
}

// end writes the terminal event typ with the whole response.
func (rs *responder) end(st *streamState, typ string, e ending, out int) error {
	b := rs.begin(typ)
	b = append(b, `,"response":`...)
	b = append(rs.response(b, e, out), '}')
	return rs.emit(st, typ, b, true)
}

// fail writes response.failed, as OpenAI ends a response that failed while
// generating: the output so far (its item incomplete) and the usage.
func (rs *responder) fail(st *streamState, n int) error {
	out := rs.reason + min((n-1)*rs.chunk, rs.tokens) // the tokens of the n-1 chunks sent
	return rs.end(st, rsFailed, ending{status: "failed", failed: fmt.Sprintf("simulated upstream error at chunk %d", n)}, out)
}

// malformed writes an output_text.delta cut in its delta string.
func (rs *responder) malformed(st *streamState) error {
	b := rs.begin(rsTextDelta)
	b = append(rs.itemRef(b), `,"content_index":0,"delta":"trunc`...)
	return rs.emit(st, rsTextDelta, b, true)
}
