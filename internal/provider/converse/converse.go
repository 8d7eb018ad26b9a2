// Package converse is the adapter of Amazon Bedrock's Converse API, the
// one request shape Bedrock offers every model it hosts (Nova, Llama,
// Mistral, DeepSeek, … and Claude): it translates the gateway's OpenAI chat
// request into a Converse request, streams the answer from
// POST {endpoint}/model/{modelId}/converse-stream (non-streaming:
// /converse) and turns each event of its binary event stream into OpenAI
// chat.completion.chunk events as it is read, so the relay sees the OpenAI
// dialect. Kind bedrock (package cloud) sends its models without
// "anthropic." in their id here, with the SigV4 signature or Bedrock API
// key of its transport; Converse is a dialect of its own, so this is its
// one translator, and the endpoint, the signature and the event-stream
// framing are the cloud's (packages cloud, cloudauth, eventstream). Shapes
// follow the Bedrock runtime API reference
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html).
//
// # Request: OpenAI → Converse
//
//	system, developer messages    system[]{text}, in order (empty texts dropped)
//	user message                  messages[] role user; consecutive turns of one role
//	                              are merged (Converse wants them alternating)
//	  text parts                  {text}; empty or blank texts dropped (Bedrock refuses them)
//	  image_url data:<mime>       {image:{format, source:{bytes}}}: png, jpeg, gif, webp;
//	                              an http(s) URL is refused, retryable (Bedrock fetches no URLs)
//	  file data:<mime>            {document:{format, name, source:{bytes}}}: pdf, csv, doc,
//	                              docx, xls, xlsx, html, txt, md; the name is the file's,
//	                              reduced to what Converse allows, and numbered (unique)
//	assistant message             role assistant: thinking_blocks (signed thinking as
//	                              reasoningContent.reasoningText {text, signature},
//	                              redacted_thinking as reasoningContent.redactedContent)
//	                              first, then text, then tool_calls as
//	                              {toolUse:{toolUseId, name, input}} (arguments parsed as a
//	                              JSON object, "" is {}; else a 400); reasoning_content
//	                              without a signature is dropped
//	tool message                  {toolResult:{toolUseId, content:[{text}]}} in a user turn,
//	                              status "error" for a /v1/messages client's is_error; an
//	                              empty result is the text "(empty)" (Bedrock refuses empty
//	                              text blocks and wants every toolUse answered)
//	cache_control (a part's,      a {cachePoint:{type:default}} block after the block it
//	  a tool's, a tool call's)    marks (ttl 5m or 1h kept): Converse's prompt caching
//	max_completion_tokens,        inferenceConfig.maxTokens (absent: the model's default)
//	  max_tokens
//	temperature, top_p            inferenceConfig.temperature, topP
//	stop                          inferenceConfig.stopSequences (empty strings dropped)
//	tools (type function)         toolConfig.tools[]{toolSpec:{name, description,
//	                              inputSchema:{json: parameters}}}; no parameters: an empty
//	                              object schema
//	tool_choice auto, required,   toolConfig.toolChoice {auto:{}}, {any:{}}, {tool:{name}};
//	  {function:{name}}           allowed_tools: only those tools, auto or any
//	tool_choice none              the tools are not sent; refused, retryable, when the
//	                              history holds tool calls (Bedrock then wants its tools
//	                              declared and has no choice that forbids calling them)
//	response_format json_schema   outputConfig.textFormat {type:json_schema,
//	                              structure:{jsonSchema:{schema (as text), name, description}}}
//	reasoning_effort              outputConfig.effort: minimal and low → low, medium, high,
//	                              xhigh; none → nothing
//	thinking (Anthropic's, from   additionalModelRequestFields.thinking, as sent (Claude on
//	  /v1/messages or the body)   Converse reads it there)
//	additionalModelRequestFields  passed to the model as sent (a chat body's own member,
//	  (not OpenAI's)              not OpenAI's: the model's own parameters, top_k…)
//
// Refused with a 400 naming the field, retryable (another route may serve
// it): n > 1, content parts other than text, image_url and file, images
// by URL, image and document types Converse does not take, tools and tool
// calls not of type function, response_format json_object, and a history
// with tool calls but no tools (or tool_choice none), which Converse
// refuses. Refused, not retryable: an unknown role, tool_choice or
// response_format type or reasoning_effort value, arguments that are not a
// JSON object, a tool message without tool_call_id. Dropped, with no
// Converse counterpart: seed, penalties, logit_bias, logprobs (refused by
// none: an answer without them is still the answer), user, metadata,
// store, service_tier, parallel_tool_calls, a tool's strict, an image's
// detail, stream_options (usage always comes).
//
// # Stream: Converse events → OpenAI chunks
//
// The answer is application/vnd.amazon.eventstream: each message's
// headers name its event (:event-type) and its payload is the event's JSON.
// Strings are copied into the chunks as the upstream's JSON string
// literals; nothing is decoded and encoded again.
//
//	messageStart                  role chunk {role:assistant, content:""} (also before
//	                              the first other event when it is missing)
//	contentBlockStart toolUse     tool_calls [{index, id: toolUseId, type:function,
//	                              function:{name, arguments:""}}]; index counts the
//	                              answer's toolUse blocks from 0
//	contentBlockDelta text        delta {content}
//	  toolUse.input               tool_calls [{index, function:{arguments: the fragment}}]
//	  reasoningContent.text       delta {reasoning_content}
//	  reasoningContent.signature  delta {thinking_blocks:[{type:thinking, signature}]}: the
//	                              block's text is the reasoning_content before it
//	  reasoningContent.           delta {thinking_blocks:[{type:redacted_thinking, data}]}
//	    redactedContent
//	contentBlockStop              heartbeat; for a toolUse block that streamed no input,
//	                              arguments "{}"
//	messageStop                   finish chunk (delta {}) at its stopReason (below)
//	metadata                      the usage chunk (choices []) after the finish chunk,
//	                              whichever of the two came first
//	exception message             a *provider.Error with the exception's documented status
//	                              (throttlingException 429, serviceUnavailableException 503,
//	                              modelStreamErrorException 424, validationException 400,
//	                              internalServerException 500…), retryable by that status
//	other events                  heartbeat (empty data: it keeps the relay's idle
//	                              window open and is not relayed)
//
// Usage: Converse's inputTokens counts neither the cache reads nor the
// cache writes, so prompt_tokens = inputTokens + cacheReadInputTokens +
// cacheWriteInputTokens, with prompt_tokens_details {cached_tokens: the
// reads, cache_write_tokens: the writes, when any}; completion_tokens =
// outputTokens; total_tokens their sum. A count that is not a token count
// (api.Count) drops the usage chunk: the gateway estimates the attempt.
//
// Finish reasons (stopReason → finish_reason): end_turn and stop_sequence
// → stop ("tool_calls" when the answer holds calls); tool_use →
// tool_calls; max_tokens and model_context_window_exceeded → length;
// guardrail_intervened and content_filtered → content_filter;
// malformed_model_output and malformed_tool_use → no answer: a retryable
// 502 *provider.Error (the next route before content, an error event
// after it); any other → stop.
//
// The stream ends with the body: after messageStop (and the metadata) a
// clean end is io.EOF; an end before messageStop wraps
// provider.ErrTruncated; a frame that fails its CRCs or limits, or a
// payload that is not its event's JSON, wraps provider.ErrMalformed.
//
// # Non-stream: ConverseResponse → chat.completion
//
// output.message.content: text blocks joined into content, reasoningText
// into reasoning_content and, with redactedContent, into thinking_blocks,
// toolUse blocks into tool_calls (arguments: the input as compact JSON);
// stopReason and usage as for streams.
//
// # Errors
//
// A non-2xx answer is a *provider.Error from AWS's error shape
// ({"message": …}, the exception's name in x-amzn-ErrorType): Status the
// HTTP status, Type and Code the name, Retryable by
// provider.RetryableStatus, RetryAfter from Retry-After.
package converse

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/eventstream"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/sse"
)

// ContentType is the media type of a ConverseStream answer.
const ContentType = "application/vnd.amazon.eventstream"

// DefaultMaxEvent bounds one event-stream message when Options.MaxEvent is
// 0, as the other adapters bound one event.
const DefaultMaxEvent = openai.DefaultMaxEvent

// MaxCompleteBody bounds a non-streaming answer read into memory.
const MaxCompleteBody = openai.MaxCompleteBody

// Options tune a Client. The zero value is usable.
type Options struct {
	// Transport sends the requests; kind bedrock's signs them (SigV4 or a
	// Bedrock API key). Nil builds openai.NewTransport's, unsigned.
	Transport http.RoundTripper
	// ConnectTimeout bounds dialling when Transport is nil; 0 means 5s.
	ConnectTimeout time.Duration
	// MaxEvent bounds one event-stream message; 0 means DefaultMaxEvent.
	MaxEvent int
}

// Client talks to one Bedrock runtime endpoint. It is safe for concurrent
// use.
type Client struct {
	endpoint string // https://bedrock-runtime.{region}.amazonaws.com, no trailing slash
	call     provider.Caller
	maxEvent int
	decoders sync.Pool // *eventstream.Decoder

	// Hooks for deterministic tests: the clock of "created" and the
	// source of generated ids.
	now  func() time.Time
	rand func([]byte)
}

var _ provider.Provider = (*Client)(nil)

// New returns a Client for the runtime endpoint.
func New(endpoint string, opts Options) *Client {
	rt := opts.Transport
	if rt == nil {
		rt = openai.NewTransport(openai.Options{ConnectTimeout: opts.ConnectTimeout})
	}
	c := &Client{
		endpoint: strings.TrimRight(endpoint, "/"),
		call:     provider.Caller{RT: rt, StatusError: statusError, StreamType: ContentType},
		maxEvent: opts.MaxEvent,
		now:      time.Now,
		rand:     func(b []byte) { rand.Read(b) },
	}
	if c.maxEvent <= 0 {
		c.maxEvent = DefaultMaxEvent
	}
	return c
}

// URL is the Converse URL of a model: the id, inference profile or ARN
// escaped as one path segment; stream picks converse-stream.
func URL(endpoint, model string, stream bool) string {
	op := "/converse"
	if stream {
		op = "/converse-stream"
	}
	return endpoint + "/model/" + cloudauth.PathEscape(model) + op
}

// CloseIdleConnections closes the client's idle upstream connections.
func (c *Client) CloseIdleConnections() {
	if ci, ok := c.call.RT.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func (c *Client) seed() (b [8]byte) {
	c.rand(b[:])
	return b
}

// Open implements provider.Provider.
func (c *Client) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	body, err := Body(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.call.Post(ctx, req, URL(c.endpoint, req.Model, true), body, true)
	if err != nil {
		return nil, err
	}
	s := &stream{c: c, body: resp.Body, ctx: ctx}
	s.hr.r = resp.Body
	s.dec, _ = c.decoders.Get().(*eventstream.Decoder)
	if s.dec == nil {
		s.dec = eventstream.NewDecoder(&s.hr, c.maxEvent)
	} else {
		s.dec.Reset(&s.hr)
	}
	s.t.init(req.Model, c.now().Unix(), c.seed())
	return s, nil
}

// Complete implements provider.Provider: the ConverseResponse translated
// into an OpenAI chat.completion object.
func (c *Client) Complete(ctx context.Context, req *provider.Request) ([]byte, error) {
	body, err := Body(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.call.Post(ctx, req, URL(c.endpoint, req.Model, false), body, false)
	if err != nil {
		return nil, err
	}
	defer provider.DrainClose(resp.Body)
	b, err := provider.ReadAnswer(ctx, resp.Body, MaxCompleteBody)
	if err != nil {
		return nil, err
	}
	return completion(b, req.Model, c.now().Unix(), c.seed())
}

// hookReader calls the relay's read hook before each read of the body.
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

// stream reads a ConverseStream body and translates it frame by frame.
type stream struct {
	c      *Client
	body   io.ReadCloser
	hr     hookReader
	dec    *eventstream.Decoder
	ctx    context.Context
	t      translator
	ev     sse.Event
	err    error // sticky end: io.EOF or the failure
	done   bool  // the body was read to its end: drained on Close
	closed bool
}

var (
	_ provider.Stream       = (*stream)(nil)
	_ provider.ReadNotifier = (*stream)(nil)
	_ provider.Reporter     = (*stream)(nil)
	_ provider.Redactor     = (*stream)(nil)
)

// heartbeat is what Next returns for a frame with nothing to translate:
// empty, non-nil data, which restarts the relay's idle window and is not
// relayed.
var heartbeat = []byte{}

// Next implements provider.Stream. The chunks of one frame are returned
// one per call before the body is read again.
func (s *stream) Next() (*sse.Event, error) {
	if data := s.t.pop(); data != nil {
		s.ev.Data = data
		return &s.ev, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	m, err := s.dec.Next()
	if err != nil {
		if err == io.EOF || err == eventstream.ErrTruncated {
			s.done = err == io.EOF
		}
		if err == eventstream.ErrTruncated {
			err = provider.ReadError(s.ctx, io.ErrUnexpectedEOF)
		} else if err != io.EOF {
			if _, ok := err.(*eventstream.FormatError); !ok {
				err = provider.ReadError(s.ctx, err)
			}
		}
		if err = s.t.endError(err); err == nil {
			err = io.EOF
		}
		s.err = err
		s.t.reset()
		return nil, err
	}
	if err := s.t.frame(&m); err != nil {
		s.err = s.c.call.RedactError(err) // an exception in the stream: the upstream's words
		return nil, s.err
	}
	if data := s.t.pop(); data != nil {
		s.ev.Data = data
		return &s.ev, nil
	}
	s.ev.Data = heartbeat
	return &s.ev, nil
}

// Reported implements provider.Reporter: the metadata's usage once it
// came (Converse reports it once, at the end).
func (s *stream) Reported() (u api.Usage, prompt, output bool) {
	t := &s.t
	if !t.hasUsage || !t.usage.valid {
		return api.Usage{}, false, false
	}
	return t.usage.api(), true, !t.uncovered
}

// Redact implements provider.Redactor.
func (s *stream) Redact(str string) string { return s.c.call.Redact(str) }

// BeforeRead implements provider.ReadNotifier.
func (s *stream) BeforeRead(h sse.ReadHook) { s.hr.hook = h }

// maxPooledDecoder: a decoder whose buffer grew past it on a long message
// is dropped instead of pooled.
const maxPooledDecoder = 64 << 10

// Close releases the connection: after a clean end it drains the body's
// rest so the transport can reuse the connection; otherwise it closes at
// once.
func (s *stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.done {
		provider.DrainRest(s.body)
	} else {
		err = s.body.Close()
	}
	s.hr = hookReader{}
	s.dec.Reset(nil)
	if s.dec.Size() <= maxPooledDecoder {
		s.c.decoders.Put(s.dec)
	}
	s.dec = nil
	return err
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// statusError reads AWS's error answer: {"message": …} (or "Message"),
// the exception's name in x-amzn-ErrorType (or the body's "__type").
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var m struct {
		Message  string `json:"message"`
		Message2 string `json:"Message"`
		Type     string `json:"__type"`
	}
	_ = json.Unmarshal(b, &m)
	name := resp.Header.Get("X-Amzn-Errortype")
	if name == "" {
		name = m.Type
	}
	name, _, _ = strings.Cut(name, ":")
	if i := strings.LastIndexByte(name, '#'); i >= 0 {
		name = name[i+1:]
	}
	msg := m.Message
	if msg == "" {
		msg = m.Message2
	}
	if msg == "" {
		msg = strings.TrimSpace(string(b))
		if len(msg) > 512 {
			msg = msg[:512]
		}
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &provider.Error{
		Status:     resp.StatusCode,
		Retryable:  provider.RetryableStatus(resp.StatusCode),
		Type:       name,
		Code:       name,
		Message:    msg,
		RetryAfter: provider.RetryAfter(resp.Header.Get("Retry-After")),
	}
}
