// Package provider is the seam between the gateway and an upstream: one small
// interface that opens a stream or runs a non-stream completion, the typed
// *Error every adapter returns, and the sentinels the gateway maps to HTTP
// statuses. Adapters live in sub-packages (openai, anthropic, gemini). A
// client of another dialect than OpenAI chat (Request.Native) reaches an
// adapter that speaks it (Speaker) as it sent its request, and gets the
// upstream's events back untranslated (Passthrough): same dialect, same
// bytes.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/redact"
	"github.com/streamgate/streamgate/internal/sse"
)

// Provider is one upstream. Implementations are safe for concurrent use.
type Provider interface {
	// Open sends a streaming request and returns once the upstream answered
	// with a 2xx status; its events are then read from the Stream. A non-2xx
	// answer is an *Error. Cancelling ctx aborts the request at once, also
	// while the Stream is being read.
	Open(ctx context.Context, req *Request) (Stream, error)
	// Complete sends a non-streaming request and returns the upstream's
	// response body: an OpenAI chat.completion object, or for a request
	// the provider passes through (Passes) the upstream's answer as it is,
	// in the client's dialect.
	Complete(ctx context.Context, req *Request) ([]byte, error)
}

// Embedder is an optional capability of a Provider: it serves OpenAI's
// POST /embeddings. Embed sends req.Body with "model" set to req.Model and
// returns the upstream's answer (an OpenAI embeddings list); a non-2xx
// answer is an *Error, as for Complete.
type Embedder interface {
	Embed(ctx context.Context, req *Request) ([]byte, error)
}

// Checker is an optional capability of a Provider: Check sends its
// upstream one cheap authenticated request (its models list: no tokens
// spent) and returns nil on a 2xx answer, else the *Error or transport
// error. The gateway's active health check calls it while the upstream is
// ejected.
type Checker interface {
	Check(ctx context.Context) error
}

// Stream is an open upstream stream in the OpenAI chunk dialect.
type Stream interface {
	// Next returns the next event, valid until the following call. It returns
	// io.EOF after the "[DONE]" sentinel, an error wrapping ErrTruncated when
	// the upstream ended without it, and the context's cause when the request
	// context was cancelled.
	Next() (*sse.Event, error)
	// Close releases the connection; it is safe to call more than once.
	Close() error
}

// ReadNotifier is an optional capability of a Stream: h.BeforeRead is
// called before each read from the upstream, once Next has returned every
// event the bytes already read hold. The relay writes events without
// flushing them and flushes there, so the events of one upstream read
// reach the client in one write and none waits for a later one (streaming
// rule 1).
type ReadNotifier interface {
	BeforeRead(h sse.ReadHook)
}

// ChunkInfoer is an optional capability of a Stream whose adapter builds
// the chunks it returns (a translating adapter): ChunkInfo returns what
// api.ScanChunk would find in the event Next returned last, so the relay
// need not scan JSON the adapter has just written. It must agree with
// api.ScanChunk on that event.
type ChunkInfoer interface {
	ChunkInfo() api.ChunkInfo
}

// Reporter is an optional capability of a Stream that reads the
// upstream's token counts as they come, before its usage chunk
// (Anthropic's message_start and message_delta, Gemini's cumulative
// usageMetadata on every event): an attempt that ends without its usage
// chunk (a cut, a timeout, the client gone) is billed from them, and only
// what they do not tell is estimated.
type Reporter interface {
	// Reported returns the last counts read, as the usage chunk would
	// carry them (prompt tokens with their cache reads and writes in
	// PromptTokensDetails, completion tokens); prompt reports that the
	// prompt tokens were read, output that the completion tokens were and
	// count every content the stream returned (none came after them).
	// Counts that are not token counts (api.CountLimit) are not reported.
	Reported() (u api.Usage, prompt, output bool)
}

// TextCounter is an optional capability of a ChunkInfoer Stream, whose
// chunks the relay does not scan: once CountText is called, the stream
// gives t the text of each event Next returns, as api.ScanChunkText would
// give it of the event's OpenAI counterpart (content, reasoning, tool-call
// names and arguments), so that an answer without usage is estimated from
// its text.
type TextCounter interface {
	CountText(t api.TextSink)
}

// Request is one upstream call. Adapters must not modify it: the gateway
// reuses it across the routes of a fallback.
type Request struct {
	// Model is the upstream model name (the route's, not the client's alias).
	Model string
	// Stream asks for a streaming answer.
	Stream bool
	// Body is the client's JSON body as received: one valid JSON object
	// (nil means {}). Adapters that pass it through copy its members
	// byte for byte, so fields the gateway does not know still reach the
	// upstream, and rewrite only the members they must (see openai.Body).
	// For a client of another dialect (Native) it is the chat request the
	// gateway translated the client's into, nil when it could not.
	Body []byte
	// Chat is the typed view of Body, for adapters that translate; nil
	// when Body is.
	Chat *api.ChatRequest
	// Native is the client's request in its own dialect when that is not
	// OpenAI chat (POST /v1/messages: Anthropic's), for the adapters that
	// speak it (Speaker); nil for an OpenAI client.
	Native *Native
	// RequestID is sent upstream as X-Request-Id; "" sends none.
	RequestID string
	// Header holds other request headers to forward (X-Sim-* faults). Nil
	// means none.
	Header http.Header
	// CacheKey, when not "", is sent as OpenAI's "prompt_cache_key" by the
	// adapters that pass an OpenAI body on (kind openai) when the body has
	// none: the session identity affinity placed the request by, so the
	// upstream's cache routing agrees with the gateway's.
	CacheKey string
	// Builtins are the types of the Responses built-in tools (web_search,
	// …) of a request that a translating adapter leaves out of Chat (but
	// for those it maps, see ToolRunner), for the gateway to name what an
	// attempt dropped; nil: none. A route that passes the request through
	// (Passes) gets them in Native.Body.
	Builtins []string
	// Built, when not nil, is called by Caller.Post (and PostNative) once the upstream body
	// is built, as it is sent, for each upstream call (it may be called
	// more than once, and from several goroutines for a hedge): the
	// gateway bounds the memory of requests being decoded and translated
	// at once with it (max_decoding_bytes).
	Built func()
}

// Client dialects besides OpenAI chat (Native.Dialect).
const (
	// DialectAnthropic is Anthropic's Messages API (POST /v1/messages).
	DialectAnthropic = "anthropic"
	// DialectResponses is OpenAI's Responses API (POST /v1/responses).
	DialectResponses = "responses"
)

// Native is a client's request in its own dialect, for an adapter whose
// upstream speaks that dialect: same dialect, same bytes. Such an adapter
// sends Body with "model" set to Request.Model and nothing else changed,
// and Header over its own headers, so that fields, block types and beta
// features the gateway does not know reach the upstream as the client
// sent them; it answers in that dialect too (see Speaker).
type Native struct {
	// Dialect names the API (DialectAnthropic, DialectResponses).
	Dialect string
	// Body is the client's JSON body as received, but for what the gateway
	// had to change (a max_tokens its context guard lowered).
	Body []byte
	// Header holds the client's headers of the dialect to forward
	// (anthropic-version, anthropic-beta), never its credentials; they
	// win over the adapter's own (its default anthropic-version). Nil
	// means none.
	Header http.Header
	// Err is why the request cannot be served in its OpenAI form: it has
	// none (Request.Body and Chat are nil), or one without what Err names
	// (a Responses request's built-in tools: Body and Chat are the rest,
	// which the context guard measures). A retryable *Error with Status 400
	// wrapping ErrUntranslatable, whose message names the field, returned
	// for a route that would have to translate (see Passes); nil when the
	// OpenAI form is the whole request.
	Err error
}

// Speaker is an optional capability of a Provider whose upstream speaks a
// client dialect natively (the anthropic adapter: DialectAnthropic; the
// openai adapter with Responses set: DialectResponses). For a
// Request whose Native is in a dialect it speaks, Open sends Native.Body
// (see Native) and returns a Passthrough stream of the upstream's own
// events, and Complete returns the upstream's answer as it is, in that
// dialect; for any other Request it translates, as every adapter does.
type Speaker interface {
	Speaks(dialect string) bool
}

// ToolRunner is an optional capability of a Provider whose adapter maps a
// built-in tool onto its upstream's own when it translates ("web_search":
// api.ChatRequest.WebSearch to Anthropic's web search server tool or
// Gemini's Google Search grounding): RunsTool reports whether it runs the
// tool named (web_search for every variant of it).
type ToolRunner interface {
	RunsTool(name string) bool
}

// Passes reports whether p sends req as its client sent it: req has a
// Native form in a dialect p speaks (Speaker).
func Passes(p Provider, req *Request) bool {
	if req.Native == nil {
		return false
	}
	if ms, ok := p.(ModelSpeaker); ok {
		return ms.SpeaksFor(req.Native.Dialect, req.Model)
	}
	sp, ok := p.(Speaker)
	return ok && sp.Speaks(req.Native.Dialect)
}

// ModelSpeaker is Speaker for a Provider whose dialect depends on the
// model (a cloud serving Claude in Anthropic's dialect and Gemini in
// Google's under one endpoint): Passes asks it with the route's model.
type ModelSpeaker interface {
	SpeaksFor(dialect, model string) bool
}

// Passthrough is an optional capability of a Stream whose events are the
// upstream's own in the client's dialect (Dialect, Request.Native's), not
// OpenAI chunks: the relay writes them to the client as they came, through
// the client encoder's passthrough (relay.Passer). Such a stream is a
// ChunkInfoer: ChunkInfo tells what each event carries as api.ScanChunk
// would tell it of the event's OpenAI counterpart (content, a finish, the
// usage so far), which the measurements read; an error event ends the
// stream with an *Error from Next, so the relay answers it in the
// client's dialect, redacted.
type Passthrough interface {
	ChunkInfoer
	Dialect() string
}

// Sentinels wrapped by the errors adapters and the relay return; the gateway
// maps them to statuses with errors.Is.
var (
	// ErrConnect: the upstream could not be reached (refused, DNS, dial timeout).
	ErrConnect = errors.New("upstream connect failed")
	// ErrFirstTokenTimeout: no first token within timeouts.first_token.
	ErrFirstTokenTimeout = errors.New("upstream first token timeout")
	// ErrIdleTimeout: no event within timeouts.idle after the previous one.
	ErrIdleTimeout = errors.New("upstream idle timeout")
	// ErrResponseTimeout: a non-streaming answer took longer than timeouts.non_stream.
	ErrResponseTimeout = errors.New("upstream response timeout")
	// ErrTotalTimeout: the request ran past timeouts.total.
	ErrTotalTimeout = errors.New("request total timeout")
	// ErrTruncated: the upstream stream ended without "[DONE]".
	ErrTruncated = errors.New("upstream stream ended without [DONE]")
	// ErrUntranslatable: the adapter cannot express the request in its
	// provider's API (a field it has no counterpart for, arguments that are
	// not JSON); nothing was sent upstream. Adapters wrap it in an *Error
	// with status 400 whose Message names the field, Retryable when a route
	// of another kind might serve the request.
	ErrUntranslatable = errors.New("request cannot be translated for this provider")
	// ErrNotStream: the upstream answered a stream request with a 2xx whose
	// body is not an event stream (JSON, HTML, a compressed body): its own
	// error, most likely ({"error":{"type":"overloaded_error"}} with 200).
	// Caller.Post returns it in a retryable *Error with the upstream's
	// words, before any content, so another route may serve.
	ErrNotStream = errors.New("upstream answered a stream request with a body that is not an event stream")
	// ErrMalformed: the upstream sent a chunk that is not valid JSON or a
	// line longer than the reader's limit.
	ErrMalformed = errors.New("upstream sent a malformed event")
)

// Error is an upstream failure with what the gateway needs to answer it: an
// HTTP status to map, whether another route may be tried, and the upstream's
// own message. The zero Status means "no HTTP answer" (a transport failure).
type Error struct {
	Status     int           // the upstream's HTTP status, 0 when none was received
	Retryable  bool          // another route may serve the request
	Type       string        // the upstream's error type, when it sent one
	Code       string        // the upstream's error code, when it sent one
	Message    string        // the upstream's message, or a description
	RetryAfter time.Duration // from the upstream's Retry-After header, 0 when absent
	Err        error         // the cause (a sentinel or a transport error), may be nil
}

func (e *Error) Error() string {
	switch {
	case e.Status != 0 && e.Message != "":
		return fmt.Sprintf("upstream answered %d: %s", e.Status, e.Message)
	case e.Status != 0:
		return fmt.Sprintf("upstream answered %d", e.Status)
	case e.Err != nil && e.Message != "":
		return e.Message + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// RetryableStatus reports whether an upstream HTTP status lets the gateway
// try another route: rate limits, overload and server errors, and the
// failures of one route that another may not share: 401/403 (a revoked or
// wrong provider key) and 404 (the model is missing on that provider). A 400
// or 422 is the request itself, which no other route would accept either.
func RetryableStatus(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// The bounds of DrainClose: a stream's rest is a few bytes.
const (
	drainMax     = 64 << 10
	drainTimeout = 100 * time.Millisecond
)

// DrainClose reads what is left of a response body, at most 64 KiB and for
// at most 100 ms, then closes it. A body closed before its end makes Go's
// HTTP/1.1 transport discard the connection, so the next request pays a new
// TCP (and TLS) handshake; a stream's rest after "[DONE]" is usually only the
// chunked encoding's terminator, which arrives at once or within a few
// milliseconds. Past either bound the body is closed unread and the
// connection is given up. It returns the error of the read, nil at EOF.
func DrainClose(body io.ReadCloser) error { return drain(body, drainMax, drainTimeout) }

// The bounds of DrainRest: a stream's rest after its terminal event, which
// a proxy in front of the provider may send late (issue 22: the chunked
// terminator 50 ms after [DONE]).
const (
	restMax     = 256 << 10
	restTimeout = time.Second
)

// DrainRest drains and closes what is left of a stream's body after its
// terminal event: at most 256 KiB for at most 1 s, so that the transport
// keeps the connection for the next request. The client has its whole
// answer by then; the body's request must not be cancelled meanwhile (the
// relay detaches it from the client at the terminal event, so a client
// that hangs up right after [DONE] does not cut the drain). Past either
// bound the body is closed unread. It drains before returning rather than
// in the background: the handler returns, and the client's next request
// comes, once the connection is back in the transport's pool; a drain in
// the background lost that race to a new dial on every back-to-back
// request. It returns the error of the read, nil at EOF.
func DrainRest(body io.ReadCloser) error { return drain(body, restMax, restTimeout) }

// MaxPooledReader: a stream's sse.Reader whose buffers grew past this on
// a long line is dropped by ReleaseStream instead of pooled.
const MaxPooledReader = 16 << 10

// ReleaseStream is a stream's Close: after its terminal event (ended) it
// drains the body's short rest (DrainRest) so the transport can reuse the
// connection; otherwise (a cut, an error event, a timeout, the client
// gone) it closes the body at once, without reading what may be a long
// remainder. r goes back to pool unless it grew past MaxPooledReader.
func ReleaseStream(body io.ReadCloser, ended bool, r *sse.Reader, pool *sync.Pool) error {
	var err error
	if ended {
		DrainRest(body)
	} else {
		err = body.Close()
	}
	if r.Size() <= MaxPooledReader {
		r.Hook = nil
		r.Reset(nil)
		pool.Put(r)
	}
	return err
}

// drain reads body to its end, at most limit bytes for at most d, then
// closes it.
func drain(body io.ReadCloser, limit int64, d time.Duration) error {
	t := time.AfterFunc(d, func() { body.Close() }) // unblocks the read below
	_, err := io.Copy(io.Discard, io.LimitReader(body, limit))
	t.Stop()
	body.Close()
	return err
}

// ReadAnswer reads a non-streaming answer of at most max bytes: a read
// that fails is ReadError's error, a larger answer ErrMalformed.
func ReadAnswer(ctx context.Context, r io.Reader, max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, ReadError(ctx, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%w: answer larger than %d bytes", ErrMalformed, max)
	}
	return b, nil
}

// ChatOf is req's chat request: req.Chat, else its body decoded (empty:
// an empty request); a body that does not decode is Invalid for adapter.
func ChatOf(adapter string, req *Request) (*api.ChatRequest, error) {
	if req.Chat != nil {
		return req.Chat, nil
	}
	chat := new(api.ChatRequest)
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, chat); err != nil {
			return nil, Invalid(adapter, "body: %v", err)
		}
	}
	return chat, nil
}

// TextOnly returns a message's text for an adapter whose upstream takes
// only text in it: the string content, or its text parts joined by
// newlines. Other parts are refused (Invalid, naming adapter and where).
func TextOnly(adapter string, m api.Message, where string) (string, error) {
	parts, err := m.Parts()
	if err != nil {
		return "", Invalid(adapter, "%s.content: %v", where, err)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", Invalid(adapter, "%s.content[%d]: the %s adapter takes only text parts in %s messages, got %q", where, j, adapter, m.Role, p.Type)
		}
		if j > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// ReadError is the error of a failed read of an upstream's answer: the
// context's cause first (a timeout the relay set, the client going away:
// the transport only says "context canceled"), else the answer cut short,
// wrapping ErrTruncated.
func ReadError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return ErrTruncated
	}
	return fmt.Errorf("%w: read: %w", ErrTruncated, err)
}

// TransportError is the error of a request that got no answer: the
// context's cause first, else a retryable *Error, wrapping ErrConnect when
// the upstream could not be reached at all (dial, DNS).
func TransportError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &Error{Retryable: true, Message: "dial upstream", Err: fmt.Errorf("%w: %w", ErrConnect, err)}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return &Error{Retryable: true, Message: "resolve upstream", Err: fmt.Errorf("%w: %w", ErrConnect, err)}
	}
	// The connection broke before an answer (reset, EOF): nothing reached
	// the client, so another route may serve it.
	return &Error{Retryable: true, Message: "upstream request failed", Err: err}
}

// RetryAfter reads a Retry-After header: seconds or an HTTP date; 0 when
// absent, unreadable or past.
func RetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// Caller sends the requests of one adapter: its transport, the headers it
// sets on every request (credentials, API version) and how it reads an
// error answer. The adapters share its Post.
type Caller struct {
	RT http.RoundTripper
	// Header is set on every request after the request's own headers; its
	// values are shared, never modified, so a request allocates none.
	Header http.Header
	// StatusError turns a non-2xx answer into the adapter's *Error.
	StatusError func(*http.Response) error
	// Secret is the route's api key, removed from the upstream's words
	// (Redact) besides the shapes package redact knows; "" means none.
	Secret string
	// StreamType is the media type of the upstream's stream answers, asked
	// for in Accept and required of a 2xx answer to a stream request; ""
	// is text/event-stream (an answer with text/plain or no Content-Type
	// is taken too, see Post). Bedrock's ConverseStream answers
	// application/vnd.amazon.eventstream.
	StreamType string
}

// Redactor is a Stream that knows its route's secrets: the relay passes an
// upstream error event's strings through Redact before a client reads them.
type Redactor interface {
	Redact(s string) string
}

// Redact returns s without addresses, credentials and c.Secret (redact.Text).
func (c *Caller) Redact(s string) string { return redact.Text(s, c.Secret) }

// RedactError removes addresses, credentials and c.Secret from the strings
// of err when it is an *Error (the upstream's words), and returns err.
func (c *Caller) RedactError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.Message, e.Type, e.Code = c.Redact(e.Message), c.Redact(e.Type), c.Redact(e.Code)
	}
	return err
}

var (
	jsonType        = []string{"application/json"}
	eventStreamType = []string{"text/event-stream"}
)

// Post sends body to url as one upstream call of req: req's forwarded
// headers (X-Sim-*) and request id, a JSON content type, Accept for a
// stream or an answer, then c.Header. A transport failure is
// TransportError's, a non-2xx answer is drained and returned as
// StatusError's error.
func (c *Caller) Post(ctx context.Context, req *Request, url string, body []byte, stream bool) (*http.Response, error) {
	return c.post(ctx, req, url, body, stream, nil)
}

// Get sends a GET to url with c.Header, for Checker: nil on a 2xx answer
// (its body drained, bounded), TransportError's error when the upstream
// could not be reached, else StatusError's.
func (c *Caller) Get(ctx context.Context, url string) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("provider: build request to %s: %w", url, err)
	}
	hr.Header["Accept"] = jsonType
	for k, v := range c.Header {
		hr.Header[k] = v
	}
	resp, err := c.RT.RoundTrip(hr)
	if err != nil {
		return TransportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		err = c.RedactError(c.StatusError(resp))
	}
	DrainClose(resp.Body)
	return err
}

// PostNative is Post for a body in the client's own dialect (req.Native's,
// passed through): the client's headers of that dialect (Native.Header)
// are set last, over c.Header, so the client's anthropic-version wins over
// the adapter's default.
func (c *Caller) PostNative(ctx context.Context, req *Request, url string, body []byte, stream bool) (*http.Response, error) {
	var h http.Header
	if req.Native != nil {
		h = req.Native.Header
	}
	return c.post(ctx, req, url, body, stream, h)
}

func (c *Caller) post(ctx context.Context, req *Request, url string, body []byte, stream bool, native http.Header) (*http.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("provider: build request to %s: %w", url, err)
	}
	for k, v := range req.Header {
		hr.Header[k] = v
	}
	if req.RequestID != "" {
		hr.Header["X-Request-Id"] = []string{req.RequestID}
	}
	hr.Header["Content-Type"] = jsonType
	switch {
	case stream && c.StreamType != "":
		hr.Header["Accept"] = []string{c.StreamType}
	case stream:
		hr.Header["Accept"] = eventStreamType
	default:
		hr.Header["Accept"] = jsonType
	}
	for k, v := range c.Header {
		hr.Header[k] = v
	}
	for k, v := range native {
		hr.Header[k] = v
	}
	if req.Built != nil {
		req.Built()
	}
	resp, err := c.RT.RoundTrip(hr)
	if err != nil {
		return nil, TransportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		err := c.RedactError(c.StatusError(resp))
		DrainClose(resp.Body)
		return nil, err
	}
	if stream && !c.streamAnswer(resp.Header) {
		err := c.RedactError(c.notStream(resp))
		DrainClose(resp.Body)
		return nil, err
	}
	return resp, nil
}

// streamAnswer reports whether an answer's headers allow a stream of
// c.StreamType (eventStream's when it is "").
func (c *Caller) streamAnswer(h http.Header) bool {
	if c.StreamType == "" {
		return eventStream(h)
	}
	if enc := h.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return false
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == c.StreamType
}

// eventStream reports whether an answer's headers allow an event stream:
// Content-Type text/event-stream, or text/plain or none (servers that set
// none, which Go's server sniffs as text/plain), and no Content-Encoding
// (the transports ask for none, so a compressed body cannot be read).
func eventStream(h http.Header) bool {
	if enc := h.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return false
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "text/event-stream" || mt == "text/plain")
}

// notStream is the *Error of a 2xx answer to a stream request whose body is
// not an event stream: the adapter's StatusError reads it (bounded) for the
// upstream's type, code and message, and the request may go to another
// route, as after a 5xx.
func (c *Caller) notStream(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode, Retryable: true, RetryAfter: RetryAfter(resp.Header.Get("Retry-After")), Err: ErrNotStream}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		e.Message = "a " + enc + "-encoded body"
		return e
	}
	var read *Error
	if errors.As(c.StatusError(resp), &read) {
		e.Type, e.Code, e.Message = read.Type, read.Code, read.Message
	}
	if e.Message == "" || e.Message == http.StatusText(resp.StatusCode) {
		e.Message = "an empty " + resp.Header.Get("Content-Type") + " body"
	}
	return e
}

// Invalid is a request adapter (named in the message: "gemini") cannot
// translate because it is wrong whatever the route: a 400 that no other
// route would accept either (not Retryable).
func Invalid(adapter, format string, a ...any) error {
	return &Error{
		Status:  http.StatusBadRequest,
		Type:    "invalid_request_error",
		Code:    "invalid_request",
		Message: adapter + ": " + fmt.Sprintf(format, a...),
		Err:     ErrUntranslatable,
	}
}

// Unsupported is a request adapter's API cannot express but a route of
// another kind may serve: a Retryable 400, so the gateway tries the
// model's next route and answers 400 unsupported_by_route when none is
// left.
func Unsupported(adapter, format string, a ...any) error {
	return &Error{
		Status:    http.StatusBadRequest,
		Retryable: true,
		Type:      "invalid_request_error",
		Code:      "unsupported_parameter",
		Message:   adapter + ": " + fmt.Sprintf(format, a...),
		Err:       ErrUntranslatable,
	}
}
