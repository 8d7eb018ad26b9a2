// Package cloud carries the gateway's dialects to the clouds that resell
// the vendors' models: a cloud is an endpoint, an auth scheme and a
// framing around a dialect the gateway already speaks. Each cloud is an
// http.RoundTripper under an existing adapter (Claude on Bedrock: the
// anthropic adapter, its requests moved to Bedrock's InvokeModel paths,
// signed with SigV4, its binary event-stream answer unwrapped into the
// Anthropic events the adapter already parses), so no translation is
// written twice. Bedrock's other models speak Converse, a dialect of its
// own: the converse adapter (package provider/converse) under BedrockAuth.
// Signing and tokens live in package cloudauth, the event-stream framing
// in package eventstream.
package cloud

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/eventstream"
	"github.com/streamgate/streamgate/internal/sse"
)

// BedrockAnthropicVersion is the anthropic_version Bedrock requires in the
// body of a Claude request.
const BedrockAnthropicVersion = "bedrock-2023-05-31"

// BedrockEndpoint is Bedrock's runtime endpoint in region.
func BedrockEndpoint(region string) string {
	return "https://bedrock-runtime." + region + ".amazonaws.com"
}

// IsBedrockAnthropic reports whether a Bedrock model id (with or without
// a cross-region profile prefix such as "us." or "global.", or an ARN)
// names a Claude model, served through InvokeModel with the Anthropic body.
func IsBedrockAnthropic(model string) bool { return strings.Contains(model, "anthropic.") }

// Bedrock is the RoundTripper that carries the anthropic adapter's
// Messages requests to Bedrock's InvokeModel and
// InvokeModelWithResponseStream.
type Bedrock struct {
	// Base sends the rewritten request.
	Base http.RoundTripper
	// Endpoint is the runtime endpoint, "https://bedrock-runtime.{region}.amazonaws.com"
	// (a test's fake otherwise), without a trailing slash.
	Endpoint string
	// Signer signs each request with SigV4; nil when APIKey is used.
	Signer *cloudauth.SigV4
	// APIKey is a Bedrock API key, sent as a bearer token instead of a
	// signature.
	APIKey string
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
}

// RoundTrip moves a Messages request (POST …/v1/messages) to the model's
// Invoke path: "model" goes into the path, "stream" is dropped (the path
// says it), anthropic_version becomes Bedrock's and anthropic-beta headers
// become the body's anthropic_beta; the rest of the body is passed byte for
// byte. A streamed answer's event-stream frames are unwrapped into the
// Anthropic SSE events they carry; an error answer is rewritten into
// Anthropic's error shape with AWS's status.
func (b *Bedrock) RoundTrip(r *http.Request) (*http.Response, error) {
	set := map[string]json.RawMessage{
		"model":             nil,
		"stream":            nil,
		"anthropic_version": json.RawMessage(`"` + BedrockAnthropicVersion + `"`),
	}
	if betas := betaList(r.Header.Values("Anthropic-Beta")); betas != nil {
		set["anthropic_beta"] = betas
	}
	out, body, stream, err := moveClaude(r, set, func(model string, stream bool) string {
		if stream {
			return b.Endpoint + "/model/" + cloudauth.PathEscape(model) + "/invoke-with-response-stream"
		}
		return b.Endpoint + "/model/" + cloudauth.PathEscape(model) + "/invoke"
	})
	if err != nil {
		return nil, fmt.Errorf("bedrock: %w", err)
	}
	for _, h := range []string{"Anthropic-Version", "Anthropic-Beta", "X-Api-Key", "Authorization"} {
		out.Header.Del(h)
	}
	out.Header.Set("Content-Type", "application/json")
	if stream {
		out.Header.Set("Accept", "application/vnd.amazon.eventstream")
	} else {
		out.Header.Set("Accept", "application/json")
	}
	if err := authorizeAWS(out, body, b.Signer, b.APIKey, b.Now); err != nil {
		return nil, err
	}
	resp, err := b.Base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return awsError(resp), nil
	}
	if stream {
		resp.Header.Set("Content-Type", "text/event-stream")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Body = newFrameReader(resp.Body)
	}
	return resp, nil
}

// authorizeAWS signs out, whose body is body, with signer (SigV4 at now(),
// nil now meaning time.Now), or sets apiKey as its bearer token when
// signer is nil: Bedrock's two ways to authenticate.
func authorizeAWS(out *http.Request, body []byte, signer *cloudauth.SigV4, apiKey string, now func() time.Time) error {
	if signer == nil {
		out.Header.Set("Authorization", "Bearer "+apiKey)
		return nil
	}
	if now == nil {
		now = time.Now
	}
	if err := signer.Sign(out, cloudauth.PayloadHash(body), now()); err != nil {
		return fmt.Errorf("bedrock: %w", err)
	}
	return nil
}

// BedrockAuth is the RoundTripper that authenticates a request to Bedrock
// as it is, without moving it: the converse adapter's requests, which it
// already addresses to Bedrock's paths in Bedrock's dialect.
type BedrockAuth struct {
	// Base sends the authenticated request.
	Base http.RoundTripper
	// Signer signs each request with SigV4; nil when APIKey is used.
	Signer *cloudauth.SigV4
	// APIKey is a Bedrock API key, sent as a bearer token instead of a
	// signature.
	APIKey string
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
}

// RoundTrip implements http.RoundTripper.
func (a *BedrockAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, fmt.Errorf("bedrock: %w", err)
	}
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.Header.Del("Authorization")
	if err := authorizeAWS(out, body, a.Signer, a.APIKey, a.Now); err != nil {
		return nil, err
	}
	return a.Base.RoundTrip(out)
}

// moveClaude is the request a cloud's Claude endpoint gets for the
// anthropic adapter's Messages request r: the body with the members of set
// changed (api.SetMembers; the rest byte for byte), sent to the URL that
// target makes of the body's model and stream flag. It returns the new
// request, its body and the stream flag.
func moveClaude(r *http.Request, set map[string]json.RawMessage, target func(model string, stream bool) string) (*http.Request, []byte, bool, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, nil, false, err
	}
	var head struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.Model == "" {
		return nil, nil, false, fmt.Errorf("the request body has no model: %v", err)
	}
	if body, err = api.SetMembers(body, set); err != nil {
		return nil, nil, false, err
	}
	u, err := url.Parse(target(head.Model, head.Stream))
	if err != nil {
		return nil, nil, false, fmt.Errorf("endpoint: %w", err)
	}
	out := r.Clone(r.Context())
	out.URL, out.Host = u, u.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return out, body, head.Stream, nil
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, errors.New("cloud: request without a body")
	}
	defer r.Body.Close()
	return io.ReadAll(r.Body)
}

// betaList is the anthropic-beta header values as a JSON array of names,
// nil when there are none.
func betaList(values []string) json.RawMessage {
	var names []string
	for _, v := range values {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	b, _ := json.Marshal(names)
	return b
}

// awsErrorType is the Anthropic error type of an AWS error name (the
// x-amzn-ErrorType header, an exception frame's :exception-type), so the
// adapter classifies it as it would Anthropic's own.
func awsErrorType(name string, status int) string {
	name, _, _ = strings.Cut(name, ":")
	switch strings.ToLower(strings.TrimSuffix(strings.ToLower(name), "exception")) {
	case "validation":
		return "invalid_request_error"
	case "accessdenied":
		return "permission_error"
	case "unrecognizedclient", "expiredtoken", "invalidsignature", "incompletesignature", "missingauthenticationtoken":
		return "authentication_error"
	case "resourcenotfound":
		return "not_found_error"
	case "throttling", "servicequotaexceeded", "modelnotready", "toomanyrequests":
		return "rate_limit_error"
	case "serviceunavailable":
		return "overloaded_error"
	case "modeltimeout":
		return "timeout_error"
	}
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status >= 500 || status == 0:
		return "api_error"
	}
	return "invalid_request_error"
}

const maxErrorBody = 64 << 10

// awsError rewrites an AWS error answer ({"message": …} or {"Message": …},
// the error's name in x-amzn-ErrorType) into Anthropic's error shape.
func awsError(resp *http.Response) *http.Response {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	var m struct {
		Message  string `json:"message"`
		Message2 string `json:"Message"`
	}
	_ = json.Unmarshal(b, &m)
	msg := m.Message
	if msg == "" {
		msg = m.Message2
	}
	if msg == "" {
		msg = strings.TrimSpace(string(b))
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	out := anthropicError(awsErrorType(resp.Header.Get("X-Amzn-Errortype"), resp.StatusCode), msg)
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	resp.Header.Set("Content-Type", "application/json")
	return resp
}

func anthropicError(typ, msg string) []byte {
	b := append([]byte(`{"type":"error","error":{"type":`), api.AppendString(nil, typ)...)
	b = append(b, `,"message":`...)
	b = append(b, api.AppendString(nil, msg)...)
	return append(b, "}}"...)
}

// frameReader turns a Bedrock InvokeModelWithResponseStream body into the
// Anthropic events its frames carry: a chunk frame's base64 "bytes" is one
// Anthropic event; an exception or error frame becomes Anthropic's error
// event, so a mid-stream failure reaches the client as an error, never a
// silent end. It is an sse.Events, which the anthropic adapter reads event
// by event (the decoded bytes handed on, no SSE written and parsed again);
// read as bytes, it writes each event as "event: {type}\ndata: {json}\n\n",
// the events of one upstream read in one write.
type frameReader struct {
	body io.ReadCloser
	hr   hookReader // the decoder's source: body, with the reader's hook
	dec  *eventstream.Decoder
	ev   sse.Event
	out  []byte // Read: the SSE not yet read
	off  int
	err  error

	scratch []byte // a chunk's decoded bytes, reused
	errBuf  []byte // an error event's data, reused
}

var _ sse.Events = (*frameReader)(nil)

// hookReader calls a reader's hook before each read of the body.
type hookReader struct {
	r    io.Reader
	hook sse.ReadHook
}

func (h *hookReader) Read(p []byte) (int, error) {
	if h.hook != nil {
		h.hook.BeforeRead()
	}
	return h.r.Read(p)
}

// frameReaders are reused across streams, with their buffers; a reader
// whose buffers grew past maxPooledFrames is dropped instead.
var frameReaders sync.Pool

const maxPooledFrames = 64 << 10

func newFrameReader(body io.ReadCloser) *frameReader {
	if f, ok := frameReaders.Get().(*frameReader); ok {
		f.body, f.off, f.err = body, 0, nil
		f.hr = hookReader{r: body}
		f.out = f.out[:0]
		f.dec.Reset(&f.hr)
		return f
	}
	f := &frameReader{body: body, out: make([]byte, 0, 1024)}
	f.hr.r = body
	f.dec = eventstream.NewDecoder(&f.hr, 0)
	return f
}

// next decodes the frames up to the next one that carries an event for
// the client (other event types carry nothing): its name and data, valid
// until the next call. The end of input is io.EOF, a cut ErrTruncated.
func (f *frameReader) next() (name, data []byte, err error) {
	for {
		if f.err != nil {
			return nil, nil, f.err
		}
		m, err := f.dec.Next()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				f.err = io.EOF
			case errors.Is(err, eventstream.ErrTruncated):
				f.err = sse.ErrTruncated
			default:
				f.err = err
			}
			return nil, nil, f.err
		}
		if name, data, ok := f.event(&m); ok {
			return name, data, nil
		}
	}
}

// NextEvent implements sse.Events.
func (f *frameReader) NextEvent(h sse.ReadHook) (*sse.Event, error) {
	f.hr.hook = h
	name, data, err := f.next()
	if err != nil {
		return nil, err
	}
	f.ev = sse.Event{Name: name, Data: data}
	return &f.ev, nil
}

// Read writes the events as SSE: those of the frames already read
// together, so the events of one upstream read leave in one write.
func (f *frameReader) Read(p []byte) (int, error) {
	for f.off == len(f.out) {
		if f.err != nil {
			if f.err == sse.ErrTruncated {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, f.err
		}
		f.out, f.off = f.out[:0], 0
		for {
			name, data, err := f.next()
			if err != nil {
				break
			}
			f.out = appendSSE(f.out, name, data)
			if !f.dec.Buffered() {
				break
			}
		}
	}
	n := copy(p, f.out[f.off:])
	f.off += n
	return n, nil
}

// Close closes the body and pools the reader; it must not be used after.
func (f *frameReader) Close() error {
	if f.body == nil {
		return nil
	}
	err := f.body.Close()
	f.body = nil
	f.hr = hookReader{}
	f.ev = sse.Event{}
	f.dec.Reset(nil)
	if cap(f.out) <= maxPooledFrames && cap(f.scratch) <= maxPooledFrames && f.dec.Size() <= maxPooledFrames {
		frameReaders.Put(f)
	}
	return err
}

// event reads one frame: a chunk's event (its type and decoded bytes), an
// exception or error as Anthropic's error event; ok is false for a frame
// that carries nothing for the client.
func (f *frameReader) event(m *eventstream.Message) (name, data []byte, ok bool) {
	mt, _, _ := m.Header(":message-type")
	switch string(mt) {
	case "event":
		if !m.Is(":event-type", "chunk") {
			return nil, nil, false // other event types carry nothing for the client
		}
		raw, ok := chunkBytes(m.Payload)
		if !ok {
			return f.errorEvent("api_error", "bedrock: a chunk frame without its bytes")
		}
		need := base64.StdEncoding.DecodedLen(len(raw))
		if cap(f.scratch) < need {
			f.scratch = make([]byte, need)
		}
		n, err := base64.StdEncoding.Decode(f.scratch[:need], raw)
		if err != nil {
			return f.errorEvent("api_error", "bedrock: a chunk frame whose bytes are not base64")
		}
		data = f.scratch[:n]
		return eventType(data), data, true
	case "exception":
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(m.Payload, &e)
		name := m.String(":exception-type")
		if e.Message == "" {
			e.Message = name
		}
		return f.errorEvent(awsErrorType(name, 0), e.Message)
	default: // :message-type error: the code and message are headers
		msg := m.String(":error-message")
		if msg == "" {
			msg = "bedrock stream error " + m.String(":error-code")
		}
		return f.errorEvent(awsErrorType(m.String(":error-code"), 0), msg)
	}
}

var errorName = []byte("error")

func (f *frameReader) errorEvent(typ, msg string) ([]byte, []byte, bool) {
	f.errBuf = append(f.errBuf[:0], anthropicError(typ, msg)...)
	return errorName, f.errBuf, true
}

func appendSSE[S string | []byte](dst []byte, name S, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// chunkBytes finds the base64 value of a chunk payload's "bytes" member,
// {"bytes":"…","p":"…"}, without decoding the JSON; ok is false when the
// payload has none or escapes it (base64 needs no escapes).
func chunkBytes(p []byte) ([]byte, bool) {
	const key = `"bytes":`
	var v []byte
	if len(p) > len(key)+1 && p[0] == '{' && string(p[1:1+len(key)]) == key {
		v = p[1+len(key):] // as Bedrock writes it: {"bytes":"…","p":"…"}
	} else {
		i := bytes.Index(p, []byte(key))
		if i < 0 {
			return nil, false
		}
		v = bytes.TrimLeft(p[i+len(key):], " \t\r\n")
	}
	if len(v) == 0 || v[0] != '"' {
		return nil, false
	}
	end := bytes.IndexByte(v[1:], '"')
	if end < 0 || bytes.IndexByte(v[1:1+end], '\\') >= 0 {
		return nil, false
	}
	return v[1 : 1+end], true
}

// eventType is the "type" member of an Anthropic event, found without
// decoding: every Anthropic event starts {"type":"…".
func eventType(data []byte) []byte {
	const key = `"type":"`
	i := 1 // as Anthropic writes it: {"type":"…"
	if len(data) <= len(key) || data[0] != '{' || string(data[1:1+len(key)]) != key {
		if i = bytes.Index(data, []byte(key)); i < 0 || i > 8 {
			return nil
		}
	}
	v := data[i+len(key):]
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return nil
	}
	return v[:end]
}
