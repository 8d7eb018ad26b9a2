// Package gemini is the provider adapter for Google's Gemini API (kind
// "gemini"): it translates the gateway's OpenAI chat request into a
// GenerateContentRequest, streams the answer from
// models/{model}:streamGenerateContent?alt=sse (non-streaming:
// :generateContent), and turns each GenerateContentResponse event into
// OpenAI chat.completion.chunk events the moment it is read, so the relay
// sees the OpenAI dialect. Shapes follow https://ai.google.dev/api.
//
// # Base URL and headers
//
// base_url is "https://generativelanguage.googleapis.com" (as the SPEC
// lists it) or with the API version, ".../v1beta" (as Google's reference
// writes it); a base URL without a path gets "/v1beta". Requests go to
// {base}/models/{model}:streamGenerateContent?alt=sse and
// {base}/models/{model}:generateContent with the model path-escaped (a
// leading "models/" is dropped). The key travels in the x-goog-api-key
// header only, never in the URL, so no error message or log of a URL holds
// it. X-Request-Id carries the request id, and the request's other headers
// (X-Sim-*) pass through.
//
// # Request: OpenAI → Gemini
//
//	system, developer messages    systemInstruction.parts[].text, in order, wherever
//	                              they stand (Gemini has one system instruction)
//	user message                  contents[] role "user"
//	assistant message             contents[] role "model"; consecutive turns of one
//	                              role are merged (Gemini wants them to alternate)
//	  text / text parts           {text}
//	  tool_calls[]                {functionCall:{name, args}}: arguments parsed as a
//	                              JSON object ("" is {}), else a 400; the first call of
//	                              a turn carries thoughtSignature
//	                              "skip_thought_signature_validator" (see below)
//	tool message                  {functionResponse:{name, response}} in a user turn;
//	                              name from the earlier tool call with that
//	                              tool_call_id; response is the content when it is a
//	                              JSON object, else {"content": text}
//	function message (legacy)     as tool, name from the message's name
//	image_url data:<mime>;base64  {inlineData:{mimeType, data}}
//	image_url https://…           {fileData:{mimeType, fileUri}}: Gemini fetches public
//	                              and signed HTTPS URLs itself; mimeType from the
//	                              extension (png jpg jpeg webp heic heif gif pdf),
//	                              omitted when unknown. Other schemes: a 400.
//	max_completion_tokens,        generationConfig.maxOutputTokens
//	  max_tokens
//	temperature, top_p, seed      generationConfig.temperature, topP, seed
//	stop (string or list)         generationConfig.stopSequences
//	presence_penalty,             generationConfig.presencePenalty, frequencyPenalty
//	  frequency_penalty           (read from the body: api.ChatRequest does not type them)
//	response_format json_object   generationConfig.responseMimeType "application/json"
//	response_format json_schema   responseMimeType "application/json" and
//	                              responseJsonSchema = json_schema.schema (JSON Schema,
//	                              not the OpenAPI subset responseSchema takes)
//	tools[] (type function)       tools[0].functionDeclarations[]{name, description,
//	                              parametersJsonSchema}: OpenAI sends JSON Schema, which
//	                              "parameters" (OpenAPI subset) would refuse
//	                              (additionalProperties, $ref, anyOf…)
//	WebSearch (the Responses      a tools[] entry {"google_search":{}}; groundingMetadata
//	front's web_search)           back as web search calls and annotations (search.go)
//	tool_choice auto/none/        toolConfig.functionCallingConfig.mode AUTO/NONE/ANY
//	  required
//	tool_choice {function:{name}} mode ANY, allowedFunctionNames [name]
//	tool_choice allowed_tools     required: ANY with the names; auto: AUTO, and only
//	                              the allowed declarations are sent
//	reasoning_effort              generationConfig.thinkingConfig: thinkingBudget none 0,
//	                              low 1024, medium 8192, high 24576 (Google's own
//	                              mapping for its OpenAI endpoint), minimal as low;
//	                              includeThoughts true unless none. A budget, not a
//	                              thinkingLevel: Gemini 2.5 reads only budgets, and
//	                              the two together are a 400
//	thinking (Anthropic's; from   wins over reasoning_effort: enabled → thinkingBudget
//	  /v1/messages or the body)   budget_tokens exactly, adaptive → -1 (dynamic),
//	                              disabled → 0
//
// Dropped, with no Gemini equivalent: user, parallel_tool_calls (Gemini
// decides), a tool's strict, an image's detail, a message's name, an
// assistant message's reasoning_content (Gemini does not take thoughts
// back), logprobs and top_logprobs, logit_bias, metadata, store,
// service_tier, stream_options (usage always comes), and any other member.
// Refused with a 400 naming the field: n other than 1, content parts other
// than text and image_url (audio, files), image parts in system or tool
// messages, tools and tool calls not of type function, an unknown role,
// tool_choice or response_format type or reasoning_effort value, and a
// tool message whose tool_call_id answers no earlier call. A translation
// error is a *provider.Error with status 400 wrapping
// provider.ErrUntranslatable, never sent upstream: Code "unsupported_parameter"
// and Retryable when Gemini lacks what the request asks for (n other than 1,
// audio and file parts, http: images, tools not of type function, a
// request of system messages only), so the gateway tries the model's next
// route, as for the anthropic adapter, and answers 400
// unsupported_by_route when none is left; Code "invalid_request" and not
// Retryable when the request itself is wrong (no other route would take
// it either).
//
// Thought signatures: Gemini 3 rejects a history whose function call turn
// lacks the thoughtSignature it issued, and an OpenAI client has nowhere to
// keep it. The adapter sends the value Google documents for histories
// without one, which skips the check (the model loses its earlier
// reasoning, not the conversation).
//
// # Response: Gemini → OpenAI
//
//	first event                    a role chunk {"role":"assistant","content":""}
//	responseId / modelVersion      the chunks' id / model, fixed by the first event
//	                               (generated "chatcmpl-…" / the request's model when absent)
//	parts[].text                   delta.content
//	parts[] thought: true          delta.reasoning_content
//	parts[].functionCall           one chunk per call, as OpenAI streams them:
//	                               delta.tool_calls[0] with index (0, 1, … over the
//	                               stream), id "call_…" generated (unique), type
//	                               function, name and the whole arguments JSON
//	                               (Gemini sends calls whole)
//	finishReason STOP              finish_reason "stop", "tool_calls" after calls; the
//	                               finish chunk comes when the body ends, with the last
//	                               finishReason read (see below)
//	finishReason MAX_TOKENS        "length"
//	SAFETY RECITATION BLOCKLIST    "content_filter"
//	  PROHIBITED_CONTENT SPII
//	  IMAGE_SAFETY IMAGE_PROHIBITED_CONTENT IMAGE_RECITATION
//	MALFORMED_FUNCTION_CALL        no answer: the model's tool call failed ("the function
//	  UNEXPECTED_TOOL_CALL         call generated by the model is invalid", "a tool call
//	                               but no tools were enabled"): a retryable *provider.Error
//	                               (502, code malformed_function_call / unexpected_tool_call):
//	                               the next route before content, an error event after it
//	any other finishReason         "stop" ("tool_calls" after calls): LANGUAGE, OTHER, …
//	  (LANGUAGE, OTHER, …)         end the answer without a better OpenAI word
//	promptFeedback.blockReason     a "content_filter" finish when the event has no
//	  and no candidates            candidates (the prompt was blocked)
//	usageMetadata (cumulative)     the last one seen, sent once after the stream ended:
//	                               prompt_tokens promptTokenCount; completion_tokens
//	                               candidatesTokenCount + thoughtsTokenCount;
//	                               total_tokens their sum;
//	                               prompt_tokens_details.cached_tokens
//	                               cachedContentTokenCount;
//	                               completion_tokens_details.reasoning_tokens
//	                               thoughtsTokenCount
//
// Only candidate 0 is translated (n > 1 is refused). Parts of other kinds
// (inlineData, executableCode, codeExecutionResult) are skipped. An event
// with nothing to translate is returned as a heartbeat (empty data), which
// keeps the relay's idle window open without reaching the client. The
// stream tells the relay what each chunk it wrote carries
// (provider.ChunkInfoer), so the relay does not scan the chunk again.
//
// Gemini streams have no "[DONE]": the answer ends with the body, not at a
// finishReason. Gemini versions before 2.0, on Vertex AI, put finishReason
// STOP on every event, and text follows it (issue 35); so content after a
// finishReason is relayed, and after a clean end, once a candidate carried
// a finishReason (or the prompt was blocked), the stream returns one finish
// chunk with the last finishReason read (a blocked prompt's
// "content_filter"), then one usage chunk (choices []) when usage was
// reported, then io.EOF. An end
// before any finishReason wraps provider.ErrTruncated, never a clean end;
// data that is not a JSON object, or nests deeper than 128 levels, wraps
// provider.ErrMalformed; an {"error":{code, message, status}} event is a
// *provider.Error whose Status is the error's code, retryable as that
// status would be.
//
// # Errors
//
// A non-2xx answer is a *provider.Error from Google's
// {"error":{"code","message","status","details"}}: Status the HTTP status,
// Type the error's status (RESOURCE_EXHAUSTED…), Code the ErrorInfo reason
// when one is given, else the status; Retryable by provider.RetryableStatus
// (429 and 5xx, 401/403/404; 400 INVALID_ARGUMENT and FAILED_PRECONDITION
// not); RetryAfter from the Retry-After header, else from a RetryInfo
// detail's retryDelay. One exception: Gemini answers a bad API key with 400
// INVALID_ARGUMENT reason API_KEY_INVALID, which the adapter reports as 401,
// the route's credentials failing, so the gateway moves to another route
// and never tells the client its own request was wrong.
package gemini

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/sse"
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// ConnectTimeout bounds dialling and the TLS handshake; 0 means 5s.
	ConnectTimeout time.Duration
	// HTTP2 speaks h2c to an http:// base URL (see openai.Options.HTTP2).
	HTTP2 bool
	// RootCAs verify an https:// upstream in place of the system's pool.
	RootCAs *x509.CertPool
	// MaxLine bounds one SSE line and one event's data; 0 means DefaultMaxEvent.
	MaxLine int
	// Transport replaces the default transport (tests); nil builds
	// openai.NewTransport's.
	Transport http.RoundTripper
}

// DefaultMaxEvent bounds one streamed event when Options.MaxLine is 0, as
// for the OpenAI adapter: an upstream that sends more is cut with a
// malformed-event error instead of being buffered.
const DefaultMaxEvent = openai.DefaultMaxEvent

// MaxCompleteBody bounds a non-streaming answer read into memory.
const MaxCompleteBody = openai.MaxCompleteBody

// DefaultVersion is the API version appended to a base URL without a path.
const DefaultVersion = "v1beta"

// Client talks to one Gemini API base URL. It is safe for concurrent use.
type Client struct {
	models  string          // base URL + "/models/"
	call    provider.Caller // its Header: x-goog-api-key, when a key is set
	maxLine int
	readers sync.Pool // *sse.Reader

	// Hooks for deterministic tests: the clock of "created" and the source
	// of generated ids.
	now  func() time.Time
	rand func([]byte)
}

var _ provider.Provider = (*Client)(nil)

func init() {
	provider.Register("gemini", func(c provider.Config) (provider.Provider, error) {
		if _, err := url.Parse(c.BaseURL); err != nil {
			return nil, fmt.Errorf("gemini: base_url: %w", err)
		}
		return New(c.BaseURL, c.APIKey, Options{ConnectTimeout: c.ConnectTimeout, HTTP2: c.HTTP2, RootCAs: c.RootCAs}), nil
	})
}

// New returns a Client for baseURL ("https://generativelanguage.googleapis.com",
// with or without "/v1beta") authenticating with apiKey ("" sends no key).
func New(baseURL, apiKey string, opts Options) *Client {
	rt := opts.Transport
	if rt == nil {
		if !strings.HasPrefix(strings.ToLower(baseURL), "http://") {
			opts.HTTP2 = false // https: ALPN decides
		}
		rt = openai.NewTransport(openai.Options{ConnectTimeout: opts.ConnectTimeout, HTTP2: opts.HTTP2, RootCAs: opts.RootCAs})
	}
	c := &Client{
		models:  apiBase(baseURL) + "/models/",
		call:    provider.Caller{RT: rt, StatusError: statusError, Secret: apiKey},
		maxLine: opts.MaxLine,
		now:     time.Now,
		rand:    func(b []byte) { rand.Read(b) },
	}
	if c.maxLine <= 0 {
		c.maxLine = DefaultMaxEvent
	}
	if apiKey != "" {
		c.call.Header = http.Header{"X-Goog-Api-Key": {apiKey}}
	}
	return c
}

// apiBase returns the base URL with the API version: one without a path
// gets DefaultVersion.
func apiBase(baseURL string) string {
	base := strings.TrimRight(baseURL, "/")
	if u, err := url.Parse(base); err == nil && u.Path == "" {
		base += "/" + DefaultVersion
	}
	return base
}

// modelPath is the model as one escaped path segment; ":" is escaped too,
// since it separates the model from the method.
func modelPath(model string) string {
	model = strings.TrimPrefix(model, "models/")
	return strings.ReplaceAll(url.PathEscape(model), ":", "%3A")
}

// CloseIdleConnections closes the client's idle upstream connections.
func (c *Client) CloseIdleConnections() {
	if ci, ok := c.call.RT.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// Open implements provider.Provider.
func (c *Client) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	body, err := Body(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.post(ctx, req, c.models+modelPath(req.Model)+":streamGenerateContent?alt=sse", body, true)
	if err != nil {
		return nil, err
	}
	r, _ := c.readers.Get().(*sse.Reader)
	if r == nil {
		r = sse.NewReader(nil, c.maxLine)
		r.CommentsOnly = true // heartbeats reach the relay and keep its idle window open
		r.NoDone = true       // completeness is decided by finishReason, below
	}
	r.Reset(resp.Body)
	s := &stream{c: c, body: resp.Body, r: r, ctx: ctx}
	s.t.init(req.Model, c.now().Unix(), c.seed())
	if req.Chat != nil && req.Chat.WebSearch != nil {
		s.t.search = &searchState{}
	}
	s.hb.Data = heartbeat
	return s, nil
}

func (c *Client) seed() (b [8]byte) {
	c.rand(b[:])
	return b
}

// Complete implements provider.Provider: the GenerateContentResponse
// translated into an OpenAI chat.completion object.
func (c *Client) Complete(ctx context.Context, req *provider.Request) ([]byte, error) {
	body, err := Body(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.post(ctx, req, c.models+modelPath(req.Model)+":generateContent", body, false)
	if err != nil {
		return nil, err
	}
	defer provider.DrainClose(resp.Body)
	b, err := provider.ReadAnswer(ctx, resp.Body, MaxCompleteBody)
	if err != nil {
		return nil, err
	}
	b, err = completion(b, req.Model, c.now().Unix(), c.seed())
	return b, c.call.RedactError(err) // an error object in a 200: the upstream's words
}

// post sends body to url (see provider.Caller.Post).
func (c *Client) post(ctx context.Context, req *provider.Request, url string, body []byte, stream bool) (*http.Response, error) {
	return c.call.Post(ctx, req, url, body, stream)
}

// stream reads the upstream's SSE body and translates it event by event.
type stream struct {
	c      *Client
	body   io.ReadCloser
	r      *sse.Reader
	ctx    context.Context
	t      translator
	ev     sse.Event // the translated event Next returns
	hb     sse.Event // the heartbeat Next returns
	err    error     // sticky end: io.EOF or the failure
	done   bool      // the body was read to its end: drained on Close
	closed bool
}

var (
	_ provider.Stream       = (*stream)(nil)
	_ provider.ReadNotifier = (*stream)(nil)
	_ provider.ChunkInfoer  = (*stream)(nil)
	_ provider.Reporter     = (*stream)(nil)
	_ provider.TextCounter  = (*stream)(nil)
)

// Next implements provider.Stream. The events of one upstream event (a
// role chunk, a delta, a finish chunk) are returned one per call before
// the upstream is read again.
func (s *stream) Next() (*sse.Event, error) {
	s.t.last = chunkNone // until an event is popped: a heartbeat or the end
	if s.t.next < s.t.n {
		s.ev.Data, s.ev.Comment = s.t.pop(), nil
		return &s.ev, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	ev, err := s.r.Next()
	if err != nil {
		return s.end(err)
	}
	if len(ev.Data) == 0 {
		return ev, nil // a comment-only block or an empty data line: a heartbeat
	}
	n, err := s.t.translate(ev.Data)
	if err != nil {
		s.err = s.c.call.RedactError(err) // an error object in the stream: the upstream's words
		return nil, s.err
	}
	if n == 0 {
		s.hb.Comment = ev.Comment
		return &s.hb, nil
	}
	// The upstream's comment (a simulator's sent_ns stamp) travels with the
	// first event it produced.
	s.ev.Data, s.ev.Comment = s.t.pop(), ev.Comment
	return &s.ev, nil
}

// ChunkInfo implements provider.ChunkInfoer: what api.ScanChunk finds in
// the event Next returned last, known from how the translator wrote it;
// zero for a heartbeat.
func (s *stream) ChunkInfo() api.ChunkInfo { return s.t.info() }

// Reported implements provider.Reporter: the last usageMetadata read
// (Gemini's counts are cumulative), as the usage chunk would carry it;
// the prompt tokens when promptTokenCount was there, the completion tokens
// unless content came after the last candidatesTokenCount (or came with
// none: a blocked prompt's usage has no candidates count and no content
// to count). Counts that are not token counts are none.
func (s *stream) Reported() (u api.Usage, prompt, output bool) {
	t := &s.t
	if !t.hasUsage || !t.usage.reportable() {
		return api.Usage{}, false, false
	}
	p, completion, total := t.usage.openAI()
	u = api.Usage{PromptTokens: p, CompletionTokens: completion, TotalTokens: total,
		PromptTokensDetails: api.PromptTokensDetails{CachedTokens: t.usage.cached}}
	return u, t.counts&1 != 0, !t.uncovered
}

// CountText implements provider.TextCounter: the text, thoughts and
// function calls (name and arguments) of the events returned from now on.
// Each event's text is given when the event is read, as its chunks are
// queued.
func (s *stream) CountText(t api.TextSink) { s.t.sink = t }

// end handles the reader's end of input.
func (s *stream) end(err error) (*sse.Event, error) {
	var tooLong *sse.LineTooLongError
	switch {
	case err == io.EOF && s.t.finished:
		// The answer is over: its finish chunk and usage chunk (see close).
		s.done, s.err = true, io.EOF
		s.t.close()
		s.ev.Data, s.ev.Comment = s.t.pop(), nil
		return &s.ev, nil
	case err == io.EOF:
		s.done = true
		err = fmt.Errorf("%w: the gemini stream ended before a candidate carried a finishReason", provider.ErrTruncated)
	case errors.As(err, &tooLong):
		err = fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	case errors.Is(err, sse.ErrTruncated):
		err = provider.ReadError(s.ctx, io.ErrUnexpectedEOF)
	default:
		err = provider.ReadError(s.ctx, err)
	}
	s.err = err
	return nil, err
}

// Close releases the connection: after a clean end it drains the body's
// rest so the transport can reuse the connection; otherwise (a cut, a
// timeout, the client gone) it closes at once.
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

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// googleError is Google's error object (google.rpc.Status in JSON).
type googleError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`     // google.rpc.ErrorInfo
		RetryDelay string `json:"retryDelay"` // google.rpc.RetryInfo, a Duration: "37s"
	} `json:"details"`
}

func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &provider.Error{
		Status:     resp.StatusCode,
		RetryAfter: provider.RetryAfter(resp.Header.Get("Retry-After")),
	}
	var ge googleError
	if parseGoogleError(b, &ge) {
		e.Message, e.Type, e.Code = ge.Message, ge.Status, ge.Status
		for _, d := range ge.Details {
			if d.Reason != "" {
				e.Code = d.Reason
			}
			if d.RetryDelay != "" && e.RetryAfter == 0 {
				if delay, err := time.ParseDuration(d.RetryDelay); err == nil && delay > 0 {
					e.RetryAfter = delay
				}
			}
		}
		if e.Status == http.StatusBadRequest && e.Code == "API_KEY_INVALID" {
			// The route's key is bad, not the client's request.
			e.Status = http.StatusUnauthorized
		}
	}
	e.Retryable = provider.RetryableStatus(e.Status)
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

// parseGoogleError reads {"error":{...}}, also wrapped in an array as
// Google's JSON-array streams send it.
func parseGoogleError(b []byte, ge *googleError) bool {
	var body struct {
		Error *googleError `json:"error"`
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) != nil || len(arr) == 0 {
			return false
		}
		b = arr[0]
	}
	if json.Unmarshal(b, &body) != nil || body.Error == nil {
		return false
	}
	*ge = *body.Error
	return true
}

var _ provider.Checker = (*Client)(nil)

// Check implements provider.Checker: GET {base}/models?pageSize=1, the
// Gemini API's models list (no tokens spent).
func (c *Client) Check(ctx context.Context) error {
	return c.call.Get(ctx, strings.TrimSuffix(c.models, "/")+"?pageSize=1")
}
