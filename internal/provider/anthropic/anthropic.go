package anthropic

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/sse"
)

// Version is the anthropic-version header every request carries: the API
// version whose shapes this adapter speaks.
const Version = "2023-06-01"

// Options tune a Client. The zero value is usable.
type Options struct {
	// ConnectTimeout bounds dialling (and the TLS handshake); 0 means 5s.
	ConnectTimeout time.Duration
	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// to the upstream; 0 means 1024 (see openai.Options).
	MaxIdleConnsPerHost int
	// MaxConnsPerHost caps connections to the upstream; 0 means no cap.
	MaxConnsPerHost int
	// MaxEvent bounds one SSE line, and one event's data, from the upstream;
	// 0 means openai.DefaultMaxEvent (1 MiB). A longer event ends the stream
	// with an error wrapping provider.ErrMalformed.
	MaxEvent int
	// HTTP2 speaks h2c by prior knowledge to an http:// base URL (see
	// openai.Options.HTTP2); ignored for https://.
	HTTP2 bool
	// RootCAs verify an https:// upstream in place of the system's pool.
	RootCAs *x509.CertPool
	// Transport replaces the default transport (tests); nil builds one with
	// openai.NewTransport from the fields above.
	Transport http.RoundTripper
}

// Client talks to one Messages API base URL. It is safe for concurrent use.
type Client struct {
	url     string          // {base}/v1/messages
	call    provider.Caller // its Header: x-api-key (when a key is set) and anthropic-version
	maxLine int
	readers sync.Pool        // *sse.Reader, reused across streams
	now     func() time.Time // the chunks' "created"; tests fix it
	apiKey  string           // to keep it out of error messages
}

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Speaker  = (*Client)(nil)
)

func init() {
	provider.Register("anthropic", func(c provider.Config) (provider.Provider, error) {
		return New(c.BaseURL, c.APIKey, Options{ConnectTimeout: c.ConnectTimeout, HTTP2: c.HTTP2, RootCAs: c.RootCAs}), nil
	})
}

// New returns a Client for baseURL as Anthropic's docs give it,
// "https://api.anthropic.com", requests going to {base}/v1/messages; a base
// URL that already ends in "/v1" ("https://api.anthropic.com/v1", as
// OpenAI-style configs write it) gets {base}/messages. apiKey is sent as
// x-api-key ("" sends none).
func New(baseURL, apiKey string, opts Options) *Client {
	rt := opts.Transport
	if rt == nil {
		if !strings.HasPrefix(strings.ToLower(baseURL), "http://") {
			opts.HTTP2 = false // https: ALPN decides
		}
		rt = openai.NewTransport(openai.Options{
			ConnectTimeout:      opts.ConnectTimeout,
			MaxIdleConnsPerHost: opts.MaxIdleConnsPerHost,
			MaxConnsPerHost:     opts.MaxConnsPerHost,
			HTTP2:               opts.HTTP2,
			RootCAs:             opts.RootCAs,
		})
	}
	c := &Client{url: messagesURL(baseURL), maxLine: opts.MaxEvent, now: time.Now, apiKey: apiKey}
	c.call = provider.Caller{RT: rt, Header: http.Header{"Anthropic-Version": {Version}}, StatusError: c.statusError, Secret: apiKey}
	if c.maxLine <= 0 {
		c.maxLine = openai.DefaultMaxEvent
	}
	if apiKey != "" {
		c.call.Header["X-Api-Key"] = []string{apiKey}
	}
	return c
}

// messagesURL is the Messages endpoint of a base URL with or without "/v1".
func messagesURL(base string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, "/v1") {
		return base + "/messages"
	}
	return base + "/v1/messages"
}

// CloseIdleConnections closes the client's idle upstream connections.
func (c *Client) CloseIdleConnections() {
	if ci, ok := c.call.RT.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// Speaks implements provider.Speaker: the client's own Messages requests
// (provider.DialectAnthropic) are passed through.
func (c *Client) Speaks(dialect string) bool { return dialect == provider.DialectAnthropic }

// Open implements provider.Provider: a streaming Messages request whose
// events are translated into OpenAI chunks as they are read; or, for a
// Messages client (provider.Passes), the client's body as it sent it and
// the upstream's events as they come (a provider.Passthrough stream).
func (c *Client) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	native := provider.Passes(c, req)
	var body []byte
	var err error
	if native {
		body, err = NativeBody(req)
	} else {
		body, err = Body(req, true)
	}
	if err != nil {
		return nil, err
	}
	resp, err := c.post(ctx, req, body, true, native)
	if err != nil {
		return nil, err
	}
	r, _ := c.readers.Get().(*sse.Reader)
	if r == nil {
		r = sse.NewReader(nil, c.maxLine)
		r.CommentsOnly = true // a proxy's comment heartbeats reach the relay
		r.NoDone = true       // Anthropic has no "[DONE]"; message_stop ends a stream
	}
	if es, ok := resp.Body.(sse.Events); ok {
		r.ResetEvents(es) // a cloud's frames, unwrapped: nothing to parse again
	} else {
		r.Reset(resp.Body)
	}
	if native {
		return &passStream{stream{c: c, body: resp.Body, r: r, ctx: ctx, model: req.Model}}, nil
	}
	st := &stream{c: c, body: resp.Body, r: r, ctx: ctx, model: req.Model, buf: make([]byte, 0, 512)}
	if req.Chat != nil && req.Chat.WebSearch != nil {
		st.search = &searchState{}
	}
	return st, nil
}

// Complete implements provider.Provider: a non-streaming Messages request
// whose answer is translated into an OpenAI chat.completion; or, for a
// Messages client (provider.Passes), the client's body as it sent it and
// the upstream's Message as it came.
func (c *Client) Complete(ctx context.Context, req *provider.Request) ([]byte, error) {
	native := provider.Passes(c, req)
	var body []byte
	var err error
	if native {
		body, err = NativeBody(req)
	} else {
		body, err = Body(req, false)
	}
	if err != nil {
		return nil, err
	}
	resp, err := c.post(ctx, req, body, false, native)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := provider.ReadAnswer(ctx, resp.Body, openai.MaxCompleteBody)
	if err != nil {
		return nil, err
	}
	if native {
		err = answerError(b)
	} else {
		b, err = completion(b, req.Model, c.now())
	}
	return b, c.call.RedactError(err)
}

// post sends body to the Messages endpoint (see provider.Caller.Post), a
// native body with the client's Anthropic headers (Caller.PostNative).
func (c *Client) post(ctx context.Context, req *provider.Request, body []byte, stream, native bool) (*http.Response, error) {
	if native {
		return c.call.PostNative(ctx, req, c.url, body, stream)
	}
	return c.call.Post(ctx, req, c.url, body, stream)
}

// NativeBody returns the client's own Messages body (req.Native's) with
// "model" set to req.Model, every other member copied byte for byte in its
// order (api.SetMembers): cache_control breakpoints, thinking blocks and
// their signatures, fields and block types to come.
func NativeBody(req *provider.Request) ([]byte, error) {
	b, err := api.SetMembers(req.Native.Body, map[string]json.RawMessage{"model": api.AppendString(nil, req.Model)})
	if err != nil {
		return nil, invalid("", "the request body: %v", err)
	}
	return b, nil
}

// answerError reads a passed-through answer as completion does: a 200
// whose body is Anthropic's error shape is that error, a body that is not
// JSON is malformed; a Message is nil.
func answerError(b []byte) error {
	var m struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%w: anthropic: answer: %w", provider.ErrMalformed, err)
	}
	if m.Type == "error" && m.Error != nil {
		return eventError(quote(m.Error.Type), quote(m.Error.Message))
	}
	return nil
}

// StatusOverloaded is Anthropic's "overloaded_error" status: not an IANA
// status, retryable like a 503.
const StatusOverloaded = 529

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// errorBody is Anthropic's error shape, in answers and in "error" events:
// {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_…"}.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// statusError reads an error answer: the status decides (provider.RetryableStatus,
// which counts 529 among the 5xx), the body gives the type and message.
func (c *Client) statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &provider.Error{
		Status:     resp.StatusCode,
		Retryable:  provider.RetryableStatus(resp.StatusCode),
		RetryAfter: provider.RetryAfter(resp.Header.Get("Retry-After")),
	}
	var body errorBody
	if json.Unmarshal(b, &body) == nil {
		e.Type, e.Message = body.Error.Type, body.Error.Message
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
		if len(e.Message) > 512 {
			e.Message = e.Message[:512]
		}
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	if e.Message == "" && resp.StatusCode == StatusOverloaded {
		e.Message = "Overloaded"
	}
	return e // redacted by Caller.Post: Anthropic does not echo keys, but a proxy in front of it might
}

// typeStatus is the HTTP status Anthropic documents for each error type
// (platform.claude.com/docs/en/api/errors); an error event carries the type
// only, and the status is what the gateway classifies by.
func typeStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "conflict_error":
		return http.StatusConflict
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return StatusOverloaded
	}
	return http.StatusInternalServerError // "api_error", and types to come
}

// eventError is the *provider.Error of an "error" event (type and message
// are its string literals, nil when absent): the status its type documents,
// retryable as that status is.
func eventError(typ, msg []byte) error {
	t := unquote(typ)
	status := typeStatus(t)
	m := unquote(msg)
	if m == "" {
		m = "the upstream sent an error event"
	}
	return &provider.Error{Status: status, Retryable: provider.RetryableStatus(status), Type: t, Message: m}
}

// finishReason maps a stop_reason literal to OpenAI's finish_reason.
func finishReason(lit []byte) string {
	switch {
	case is(lit, "end_turn"), is(lit, "stop_sequence"), is(lit, "pause_turn"):
		return finishStop
	case is(lit, "max_tokens"), is(lit, "model_context_window_exceeded"):
		return "length"
	case is(lit, "tool_use"):
		return "tool_calls"
	case is(lit, "refusal"):
		return "content_filter"
	}
	return finishStop
}

const finishStop = "stop"

// stopSequence returns seq, the literal of message_delta's stop_sequence,
// when the stop_reason literal is stop_sequence, else nil.
func stopSequence(reason, seq []byte) []byte {
	if is(reason, "stop_sequence") && seq != nil {
		return seq
	}
	return nil
}

var _ provider.Checker = (*Client)(nil)

// Check implements provider.Checker: GET /v1/models?limit=1, Anthropic's
// models list (no tokens spent), with the key and anthropic-version.
func (c *Client) Check(ctx context.Context) error {
	return c.call.Get(ctx, strings.TrimSuffix(c.url, "/messages")+"/models?limit=1")
}
