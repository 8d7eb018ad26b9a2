package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// Speaks implements provider.Speaker: a client's own Responses requests
// (provider.DialectResponses) are passed through to an upstream that
// serves POST {base}/responses itself (Options.Responses: OpenAI).
func (c *Client) Speaks(dialect string) bool {
	return c.responses != "" && dialect == provider.DialectResponses
}

// ResponsesBody returns the client's own Responses body (req.Native's)
// with "model" set to req.Model, every other member copied byte for byte
// in its order (api.SetMembers): built-in tools, include, previous ids,
// fields to come.
func ResponsesBody(req *provider.Request) ([]byte, error) {
	b, err := api.SetMembers(req.Native.Body, map[string]json.RawMessage{"model": api.AppendString(nil, req.Model)})
	if err != nil {
		return nil, &provider.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "the request body: " + err.Error()}
	}
	return b, nil
}

// openResponses sends a Responses request as its client sent it and
// returns the upstream's events as they come (a respStream).
func (c *Client) openResponses(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	body, err := ResponsesBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.call.PostNative(ctx, req, c.responses, body, true)
	if err != nil {
		return nil, err
	}
	r, _ := c.readers.Get().(*sse.Reader)
	if r == nil {
		r = sse.NewReader(nil, c.maxLine)
		r.CommentsOnly = true
	}
	r.Reset(resp.Body)
	return &respStream{c: c, body: resp.Body, r: r, ctx: ctx}, nil
}

// completeResponses sends a non-streaming Responses request as its client
// sent it and returns the upstream's response object as it came.
func (c *Client) completeResponses(ctx context.Context, req *provider.Request) ([]byte, error) {
	body, err := ResponsesBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.call.PostNative(ctx, req, c.responses, body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := provider.ReadAnswer(ctx, resp.Body, MaxCompleteBody)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: the upstream's response is not JSON", provider.ErrMalformed)
	}
	return b, nil
}

// respStream is a Responses event stream passed through
// (provider.Passthrough): Next returns the upstream's events as they came
// and reads each only for what the relay measures: content (a non-empty
// output_text, refusal, reasoning text or summary, function-call arguments
// or custom tool input delta), the end (response.completed and
// response.incomplete: a finish with the response's usage, after which the
// stream ends), and failures (an "error" event, or response.failed before
// any content, end it with a *provider.Error; response.failed after
// content is passed on with its usage, a finish, and the error follows
// it). Every other event (response.created, output items, parts, done
// events, events to come) carries none of those: the relay holds them
// until the first content. An end before the terminal event is
// provider.ErrTruncated, data that is not a JSON object
// provider.ErrMalformed.
type respStream struct {
	c    *Client
	body io.ReadCloser
	r    *sse.Reader
	ctx  context.Context

	info     api.ChunkInfo // what the event Next returned last carries
	usage    api.Usage     // the terminal event's usage, when it had one
	hasUsage bool
	content  bool  // content was returned
	ended    bool  // the terminal event was returned
	failed   error // response.failed after content: Next's next error
	sink     api.TextSink
	err      error // sticky end
	closed   bool
}

var (
	_ provider.Passthrough  = (*respStream)(nil)
	_ provider.ReadNotifier = (*respStream)(nil)
	_ provider.Reporter     = (*respStream)(nil)
	_ provider.TextCounter  = (*respStream)(nil)
	_ provider.Redactor     = (*respStream)(nil)
)

// Dialect implements provider.Passthrough.
func (s *respStream) Dialect() string { return provider.DialectResponses }

// ChunkInfo implements provider.ChunkInfoer.
func (s *respStream) ChunkInfo() api.ChunkInfo { return s.info }

// Reported implements provider.Reporter: the usage of the terminal event
// (response.completed, .incomplete or .failed), once read; none before.
func (s *respStream) Reported() (api.Usage, bool, bool) {
	if !s.hasUsage {
		return api.Usage{}, false, false
	}
	return s.usage, true, true
}

// CountText implements provider.TextCounter: the deltas of the content
// events returned from now on.
func (s *respStream) CountText(t api.TextSink) { s.sink = t }

// Redact implements provider.Redactor.
func (s *respStream) Redact(m string) string { return s.c.call.Redact(m) }

// BeforeRead implements provider.ReadNotifier.
func (s *respStream) BeforeRead(h sse.ReadHook) { s.r.Hook = h }

// Next implements provider.Stream.
func (s *respStream) Next() (*sse.Event, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.info = api.ChunkInfo{}
	if s.ended {
		if s.failed != nil {
			return nil, s.end(s.failed)
		}
		return nil, s.end(io.EOF)
	}
	ev, err := s.r.Next()
	if err != nil {
		return nil, s.end(s.readErr(err))
	}
	if len(ev.Data) == 0 {
		return ev, nil // a heartbeat
	}
	if err := s.see(ev.Data); err != nil {
		return nil, s.end(err)
	}
	return ev, nil
}

func (s *respStream) end(err error) error {
	s.err = err
	return err
}

// readErr maps the reader's end: before the terminal event every end is a
// truncation ("[DONE]" included: OpenAI's Responses stream has none).
func (s *respStream) readErr(err error) error {
	var tooLong *sse.LineTooLongError
	switch {
	case err == io.EOF, errors.Is(err, sse.ErrTruncated):
		return fmt.Errorf("%w: the responses stream ended before its terminal event", provider.ErrTruncated)
	case errors.As(err, &tooLong):
		return fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	return provider.ReadError(s.ctx, err)
}

// fields is what see reads of one event.
type respFields struct {
	typ, delta, response, code, message, errObj []byte
}

// see reads one event's data.
func (s *respStream) see(data []byte) error {
	var f respFields
	err := api.EachMember(data, func(key, _, value []byte) error {
		switch string(key) {
		case "type":
			f.typ = value
		case "delta":
			f.delta = value
		case "response":
			f.response = value
		case "code":
			f.code = value
		case "message":
			f.message = value
		case "error":
			f.errObj = value
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: responses event: %w", provider.ErrMalformed, err)
	}
	switch string(f.typ) { // no conversion: a string kept would escape

	case `"response.output_text.delta"`, `"response.refusal.delta"`, `"response.reasoning_text.delta"`,
		`"response.reasoning_summary_text.delta"`, `"response.function_call_arguments.delta"`, `"response.custom_tool_call_input.delta"`:
		if len(f.delta) > 2 && f.delta[0] == '"' {
			s.info.Content, s.content = true, true
			if s.sink != nil {
				s.sink.AddJSON(f.delta)
			}
		}
	case `"response.completed"`, `"response.incomplete"`, `"response.failed"`:
		s.ended = true
		var r struct {
			Usage *respUsage      `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(f.response, &r); err != nil {
			return fmt.Errorf("%w: %s: %w", provider.ErrMalformed, f.typ, err)
		}
		if r.Usage != nil {
			s.usage, s.hasUsage = r.Usage.chat()
		}
		s.info = api.ChunkInfo{Finish: true, HasUsage: s.hasUsage, Usage: s.usage}
		if string(f.typ) == `"response.failed"` {
			err := s.c.call.RedactError(failedError(r.Error))
			if !s.content {
				return err // before content: another route may serve
			}
			s.failed = err
		}
	case `"error"`:
		return s.c.call.RedactError(eventError(f.code, f.message))
	case "":
		if len(f.errObj) > 0 && string(f.errObj) != "null" { // a chat-style {"error":{…}}
			return s.c.call.RedactError(failedError(f.errObj))
		}
	}
	return nil
}

// respUsage is a response's usage.
type respUsage struct {
	InputTokens        api.TokenCount `json:"input_tokens"`
	OutputTokens       api.TokenCount `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens api.TokenCount `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens api.TokenCount `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// chat returns u as the chat usage the relay and the ledger read: input
// tokens (cached ones included, as OpenAI counts them) as prompt tokens,
// output tokens (reasoning included) as completion tokens; false when a
// count is not a token count.
func (u *respUsage) chat() (api.Usage, bool) {
	var cached, reasoning api.TokenCount
	if d := u.InputTokensDetails; d != nil {
		cached = d.CachedTokens
	}
	if d := u.OutputTokensDetails; d != nil {
		reasoning = d.ReasoningTokens
	}
	if u.InputTokens.Invalid || u.OutputTokens.Invalid || cached.Invalid || reasoning.Invalid ||
		u.InputTokens.N+u.OutputTokens.N >= api.CountLimit {
		return api.Usage{}, false
	}
	out := api.Usage{PromptTokens: u.InputTokens.N, CompletionTokens: u.OutputTokens.N, TotalTokens: u.InputTokens.N + u.OutputTokens.N,
		PromptTokensDetails: api.PromptTokensDetails{CachedTokens: min(cached.N, u.InputTokens.N)}}
	if reasoning.N > 0 {
		out.CompletionTokensDetails = &api.CompletionTokensDetails{ReasoningTokens: reasoning.N}
	}
	return out, true
}

// eventError is the *provider.Error of an "error" event, whose code and
// message are JSON literals (nil when absent).
func eventError(code, message []byte) error {
	var c, m string
	json.Unmarshal(code, &c)
	json.Unmarshal(message, &m)
	return codeError(c, m)
}

// failedError is the *provider.Error of a response's error object
// ({"code","message"}) or of an OpenAI error object's "error" member.
func failedError(raw json.RawMessage) error {
	var e struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	json.Unmarshal(raw, &e)
	var c string
	if json.Unmarshal(e.Code, &c) != nil {
		c = e.Type
	}
	return codeError(c, e.Message)
}

// codeError maps a Responses error code to the status it stands for: a
// rate limit 429, an invalid request 400 (which no other route would
// serve either), anything else 500 (another route may serve).
func codeError(code, msg string) error {
	status := http.StatusInternalServerError
	switch {
	case code == "rate_limit_exceeded":
		status = http.StatusTooManyRequests
	case strings.HasPrefix(code, "invalid_"), code == "context_length_exceeded":
		status = http.StatusBadRequest
	}
	if msg == "" {
		msg = "the upstream's response failed"
	}
	typ := "server_error"
	if status == http.StatusBadRequest {
		typ = "invalid_request_error"
	}
	return &provider.Error{Status: status, Retryable: provider.RetryableStatus(status), Type: typ, Code: code, Message: msg}
}

// Close releases the connection: after the terminal event it drains the
// body's short rest; otherwise it closes at once.
func (s *respStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := provider.ReleaseStream(s.body, s.ended, s.r, &s.c.readers)
	s.r = nil
	return err
}
