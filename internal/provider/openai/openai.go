// Package openai is the provider adapter for any OpenAI-compatible server
// (OpenAI, DeepSeek, vLLM, Ollama, the simulator): it forwards the client's
// body with only "model" and stream_options.include_usage changed, and hands
// the upstream's SSE events to the relay without re-encoding them. An
// upstream that serves the Responses API itself (Options.Responses) gets a
// Responses client's body and returns its events the same way (see
// respStream).
package openai

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// ConnectTimeout bounds dialling (and the TLS handshake); 0 means 5s.
	ConnectTimeout time.Duration
	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept to
	// the upstream; 0 means 1024, enough for bursts of streams to one host.
	MaxIdleConnsPerHost int
	// MaxConnsPerHost caps connections to the upstream; 0 means no cap, so
	// streams never queue behind each other in the transport.
	MaxConnsPerHost int
	// MaxLine bounds one SSE line (and one event's data) from the upstream;
	// 0 means DefaultMaxEvent.
	MaxLine int
	// HTTP2 speaks HTTP/2 to an http:// base URL with prior knowledge (h2c,
	// no HTTP/1.1 upgrade): many streams share a few connections. The
	// upstream must accept h2c or every request fails. New ignores it for
	// https:// base URLs, which negotiate HTTP/2 by ALPN anyway. false (the
	// zero value) speaks HTTP/1.1 to http:// URLs.
	HTTP2 bool
	// RootCAs verify an https:// upstream in place of the system's pool;
	// nil: the system's.
	RootCAs *x509.CertPool
	// Transport replaces the default transport (tests); nil builds one from the fields above.
	Transport http.RoundTripper
	// Responses: the upstream serves OpenAI's Responses API at
	// {base}/responses (OpenAI does), so a client's own Responses requests
	// are passed through to it (Speaks) instead of translated into chat
	// requests.
	Responses bool
}

// DefaultMaxEvent bounds one streamed event when Options.MaxLine is 0. A
// chunk is a few hundred bytes; 1 MiB leaves room for large tool-call
// arguments and reasoning blocks, and an upstream that sends more is cut with
// a malformed-event error instead of making the gateway buffer it.
const DefaultMaxEvent = 1 << 20

// MaxCompleteBody bounds a non-streaming answer read into memory.
const MaxCompleteBody = 32 << 20

// Client talks to one OpenAI-compatible base URL ("https://api.openai.com/v1").
type Client struct {
	url   string // base URL + "/chat/completions"
	embed string // base URL + "/embeddings"
	// responses is base URL + "/responses" when Options.Responses is set,
	// "" otherwise.
	responses string
	// call sends the requests through the transport directly: an
	// http.Client would copy each request's headers for redirects it never
	// follows. Its Header holds "Authorization: Bearer <key>".
	call    provider.Caller
	maxLine int
	readers sync.Pool // *sse.Reader, reused across streams
}

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Embedder = (*Client)(nil)
	_ provider.Speaker  = (*Client)(nil)
)

func init() {
	provider.Register("openai", func(c provider.Config) (provider.Provider, error) {
		return New(c.BaseURL, c.APIKey, Options{ConnectTimeout: c.ConnectTimeout, HTTP2: c.HTTP2, RootCAs: c.RootCAs, Responses: c.Responses}), nil
	})
}

// New returns a Client for baseURL (ending in "/v1", as the provider's docs
// give it) authenticating with apiKey ("" sends no Authorization header).
func New(baseURL, apiKey string, opts Options) *Client {
	rt := opts.Transport
	if rt == nil {
		if !strings.HasPrefix(strings.ToLower(baseURL), "http://") {
			opts.HTTP2 = false // https: ALPN decides
		}
		rt = NewTransport(opts)
	}
	base := strings.TrimRight(baseURL, "/")
	c := &Client{
		url:     base + "/chat/completions",
		embed:   base + "/embeddings",
		call:    provider.Caller{RT: rt, StatusError: statusError, Secret: apiKey},
		maxLine: opts.MaxLine,
	}
	if c.maxLine <= 0 {
		c.maxLine = DefaultMaxEvent
	}
	if opts.Responses {
		c.responses = base + "/responses"
	}
	if apiKey != "" {
		c.call.Header = http.Header{"Authorization": {"Bearer " + apiKey}}
	}
	return c
}

// NewTransport returns the transport New uses: TCP keep-alive, a dial
// timeout, a large per-host pool, HTTP/2 when the server offers it over TLS,
// and no transparent gzip (compressed SSE would be buffered by the decoder).
// There is no ResponseHeaderTimeout: for streams the relay's first-token
// timeout covers the wait for headers. With opts.HTTP2 the transport speaks
// HTTP/2 only: h2c by prior knowledge on http://, h2 by ALPN on https://.
func NewTransport(opts Options) *http.Transport {
	connect := opts.ConnectTimeout
	if connect <= 0 {
		connect = 5 * time.Second
	}
	idle := opts.MaxIdleConnsPerHost
	if idle <= 0 {
		idle = 1024
	}
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: connect,
		MaxIdleConns:        0, // no global cap; the per-host one applies
		MaxIdleConnsPerHost: idle,
		MaxConnsPerHost:     opts.MaxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// Each open stream holds its connection's write buffer; the
		// request is written once and then only read from, and bodies
		// larger than the buffer are passed straight to the connection, so
		// 1 KiB (default 4 KiB) saves 3 KiB per open stream.
		WriteBufferSize: 1 << 10,
		// The read buffer is held too. Stream chunks are a few hundred
		// bytes and header lines longer than the buffer are still read
		// whole, so 1 KiB (default 4 KiB) saves 3 KiB per open stream.
		ReadBufferSize: 1 << 10,
	}
	if opts.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
	}
	if opts.HTTP2 {
		// Without HTTP/1 in the set the transport sends the HTTP/2 preface
		// on a cleartext connection instead of an HTTP/1.1 request. When a
		// connection holds the server's maximum of concurrent streams, the
		// next request opens another connection (StrictMaxConcurrentRequests
		// is false), so streams never queue in the transport.
		var p http.Protocols
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return tr
}

// CloseIdleConnections closes the client's idle upstream connections.
func (c *Client) CloseIdleConnections() {
	if ci, ok := c.call.RT.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// Open implements provider.Provider: the client's chat request with its
// model and stream options set, its events as they come; or, for a
// Responses client of an upstream that speaks it (provider.Passes), its
// own body and the upstream's Responses events (a provider.Passthrough
// stream).
func (c *Client) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	if provider.Passes(c, req) {
		return c.openResponses(ctx, req)
	}
	body, err := Body(req, true)
	if err != nil {
		return nil, err
	}
	resp, err := c.post(ctx, req, c.url, body, true)
	if err != nil {
		return nil, err
	}
	r, _ := c.readers.Get().(*sse.Reader)
	if r == nil {
		r = sse.NewReader(nil, c.maxLine)
		r.CommentsOnly = true // heartbeats reach the relay and keep its idle window open
	}
	r.Reset(resp.Body)
	return &stream{c: c, body: resp.Body, r: r, ctx: ctx}, nil
}

// Complete implements provider.Provider: a chat completion, or, for a
// Responses client passed through (provider.Passes), the upstream's
// response object as it came.
func (c *Client) Complete(ctx context.Context, req *provider.Request) ([]byte, error) {
	if provider.Passes(c, req) {
		return c.completeResponses(ctx, req)
	}
	body, err := Body(req, false)
	if err != nil {
		return nil, err
	}
	return c.answer(ctx, req, c.url, body)
}

// Embed implements provider.Embedder: POST {base}/embeddings with the
// client's body, "model" set to the route's.
func (c *Client) Embed(ctx context.Context, req *provider.Request) ([]byte, error) {
	body, err := EmbeddingsBody(req)
	if err != nil {
		return nil, err
	}
	return c.answer(ctx, req, c.embed, body)
}

// answer posts a non-streaming request and reads its whole (bounded) answer.
func (c *Client) answer(ctx context.Context, req *provider.Request, url string, body []byte) ([]byte, error) {
	resp, err := c.post(ctx, req, url, body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := provider.ReadAnswer(ctx, resp.Body, MaxCompleteBody)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// post sends body to url (see provider.Caller.Post).
func (c *Client) post(ctx context.Context, req *provider.Request, url string, body []byte, stream bool) (*http.Response, error) {
	return c.call.Post(ctx, req, url, body, stream)
}

// stream reads the upstream's SSE body.
type stream struct {
	c      *Client
	body   io.ReadCloser
	r      *sse.Reader
	ctx    context.Context
	done   bool // "[DONE]" was read: the rest of the body is drained on Close
	closed bool
}

var _ provider.Redactor = (*stream)(nil)

// Redact removes addresses, credentials and the route's key from s: the
// relay decodes an error event of this stream and passes its strings here.
func (s *stream) Redact(m string) string { return s.c.call.Redact(m) }

func (s *stream) Next() (*sse.Event, error) {
	ev, err := s.r.Next()
	if err == nil {
		return ev, nil
	}
	return nil, s.fail(err)
}

// fail returns the error for what ended the stream (io.EOF after
// "[DONE]"). A function of its own (too large to be inlined), so that
// Next's frame, which sits between the relay loop and every upstream read,
// stays small.
func (s *stream) fail(err error) error {
	if err == io.EOF {
		s.done = true
		return err
	}
	var tooLong *sse.LineTooLongError
	switch {
	case errors.As(err, &tooLong):
		return fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	case errors.Is(err, sse.ErrTruncated):
		return provider.ErrTruncated
	}
	return provider.ReadError(s.ctx, err)
}

// Close releases the connection: after "[DONE]" it drains the body's short
// rest (provider.DrainRest) so the transport can reuse the connection;
// otherwise (a cut, a
// timeout, the client gone) it closes at once, without reading what may be
// a long remainder.
func (s *stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := provider.ReleaseStream(s.body, s.done, s.r, &s.c.readers)
	s.r = nil
	return err
}

// BeforeRead implements provider.ReadNotifier.
func (s *stream) BeforeRead(h sse.ReadHook) { s.r.Hook = h }

var _ provider.ReadNotifier = (*stream)(nil)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &provider.Error{
		Status:     resp.StatusCode,
		Retryable:  provider.RetryableStatus(resp.StatusCode),
		RetryAfter: provider.RetryAfter(resp.Header.Get("Retry-After")),
	}
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && len(body.Error) > 0 {
		var obj struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(body.Error, &obj) == nil:
			e.Message, e.Type = obj.Message, obj.Type
			var code string
			if json.Unmarshal(obj.Code, &code) == nil {
				e.Code = code
			} else if len(obj.Code) > 0 && string(obj.Code) != "null" {
				e.Code = string(obj.Code)
			}
		case json.Unmarshal(body.Error, &s) == nil:
			e.Message = s
		}
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
	return e
}

var _ provider.Checker = (*Client)(nil)

// Check implements provider.Checker: GET {base}/models, OpenAI's models
// list (no tokens spent; vLLM and the simulator serve it too).
func (c *Client) Check(ctx context.Context) error {
	return c.call.Get(ctx, strings.TrimSuffix(c.url, "/chat/completions")+"/models")
}
