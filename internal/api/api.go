// Package api holds the OpenAI Chat Completions wire types, the lingua franca
// of streamgate: the gateway accepts them, provider adapters translate to and
// from them, and the simulator and the benchmark speak them. ScanChunk reads
// the few fields the hot path needs from a stream chunk without decoding it;
// CheckFields refuses a request body whose enforced fields have two readings
// (named twice, or under a case encoding/json folds and upstreams do not).
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// ChatRequest is the body of POST /v1/chat/completions. The fields typed
// here are those the gateway reads and those an adapter needs to translate
// the request into another dialect. A same-dialect route forwards the
// client's body as received, so fields not listed here still reach an
// OpenAI-compatible upstream; a translating adapter drops them.
type ChatRequest struct {
	Model               string         `json:"model"`
	Messages            []Message      `json:"messages"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
	MaxTokens           *int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	// Stop is "stop": a string or an array of strings (see StopSequences).
	Stop json.RawMessage `json:"stop,omitempty"`
	Seed *int64          `json:"seed,omitempty"`
	// Tools are the functions the model may call.
	Tools []Tool `json:"tools,omitempty"`
	// ToolChoice is "none", "auto", "required" or
	// {"type":"function","function":{"name":...}}, kept raw.
	ToolChoice json.RawMessage `json:"tool_choice,omitempty"`
	// ParallelToolCalls false asks for at most one tool call per turn.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// ResponseFormat is {"type":"text"|"json_object"|"json_schema",...}, kept raw.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	// ReasoningEffort is "minimal", "low", "medium" or "high".
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	User            string `json:"user,omitempty"`
	// PromptCacheKey is OpenAI's "prompt_cache_key": the caller's name for
	// a conversation, which OpenAI routes cache hits by (and the gateway's
	// affinity keeps on one route and provider key).
	PromptCacheKey string `json:"prompt_cache_key,omitempty"`
	// Thinking is Anthropic's extended-thinking object, kept raw
	// ({"type":"enabled","budget_tokens":N}, {"type":"adaptive"},
	// {"type":"disabled"}; see ReadThinking). It is not an OpenAI member and
	// is never encoded: OpenAI refuses members it does not know
	// ("Unrecognized request argument supplied"), so the body an OpenAI
	// upstream gets carries ReasoningEffort instead. The /v1/messages front
	// sets it; translating adapters also read a chat client's own
	// "thinking" member from the body. Nil when none was given.
	Thinking json.RawMessage `json:"-"`
	// WebSearch asks a translating adapter for its provider's own web
	// search tool (Anthropic's web search server tool, Gemini's Google
	// Search grounding): the Responses front sets it for a web_search
	// tool. Never encoded (Chat Completions has no such tool for any
	// model); an adapter without one ignores it. Nil: none.
	WebSearch *WebSearch `json:"-"`
}

// WebSearch is a web_search tool's options, as far as a provider's own
// search tool can take them.
type WebSearch struct {
	// AllowedDomains limit the search to these domains (filters.allowed_domains); nil: any.
	AllowedDomains []string
	// UserLocation is the approximate location results are localised
	// for; nil: none.
	UserLocation *UserLocation
}

// UserLocation is an approximate location: any member may be "".
type UserLocation struct {
	City     string `json:"city,omitempty"`
	Region   string `json:"region,omitempty"`
	Country  string `json:"country,omitempty"` // ISO 3166-1 alpha-2
	Timezone string `json:"timezone,omitempty"`
}

// WebSearchCall is a provider's web search as a stream delta or a
// message reports it (a gateway extension of the chat dialect, which has
// none; only a request with WebSearch gets one): the search's id, its
// status (in_progress while the query is written, searching once it is
// known, then completed or failed) and its query when known. A delta
// carries each change of a search's status.
type WebSearchCall struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Query  string `json:"query,omitempty"`
}

// Annotation is a citation of the content, OpenAI's url_citation (as its
// search models annotate a message): StartIndex and EndIndex count
// characters (Unicode code points) of the choice's whole content, from 0,
// end excluded.
type Annotation struct {
	Type        string      `json:"type"` // "url_citation"
	URLCitation URLCitation `json:"url_citation"`
}

// URLCitation is an Annotation's cited page.
type URLCitation struct {
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
	URL        string `json:"url"`
	Title      string `json:"title"`
}

// Thinking is what adapters read of an Anthropic thinking object.
type Thinking struct {
	Type         string `json:"type"`          // "enabled", "adaptive" or "disabled"
	BudgetTokens int    `json:"budget_tokens"` // enabled: the budget in tokens
}

// ReadThinking reads a thinking object: absent or null is the zero
// Thinking (Type ""); an object without a known type, or an enabled one
// without a positive budget_tokens, is an error naming the member within
// the object ("type: …").
func ReadThinking(raw json.RawMessage) (Thinking, error) {
	var t Thinking
	if len(raw) == 0 || string(raw) == "null" {
		return t, nil
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return t, errors.New("must be an object with a type (and, for enabled, an integer budget_tokens)")
	}
	switch t.Type {
	case "enabled":
		if t.BudgetTokens < 1 {
			return t, errors.New("budget_tokens: a positive number of tokens is required with type enabled")
		}
	case "adaptive", "disabled":
	default:
		return t, fmt.Errorf("type: want enabled, adaptive or disabled, got %q", t.Type)
	}
	return t, nil
}

// StopSequences returns "stop" as a list: nil when absent or null, one
// element for a string. A value of another type is an error.
func (r *ChatRequest) StopSequences() ([]string, error) {
	if len(r.Stop) == 0 || string(r.Stop) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(r.Stop, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(r.Stop, &many); err != nil {
		return nil, errors.New("stop must be a string or an array of strings")
	}
	return many, nil
}

// Tool is one entry of "tools": a function the model may call.
type Tool struct {
	Type     string      `json:"type"` // "function"
	Function FunctionDef `json:"function"`
	// CacheControl is an Anthropic tool's cache_control, set by the
	// /v1/messages front for an Anthropic route; never encoded (an OpenAI
	// upstream may refuse members it does not know).
	CacheControl json.RawMessage `json:"-"`
}

// FunctionDef declares a function: its name, description and JSON Schema
// parameters (kept raw).
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is a call the assistant made: in a message's "tool_calls", or,
// with Index set and the fields arriving in pieces, in a stream delta
// (the first delta of a call has ID, Type and Function.Name; the following
// ones append to Function.Arguments).
type ToolCall struct {
	Index    *int         `json:"index,omitempty"` // stream deltas only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
	// CacheControl is an Anthropic tool_use block's cache_control (see
	// Tool.CacheControl); never encoded.
	CacheControl json.RawMessage `json:"-"`
}

// FunctionCall is the function of a tool call; Arguments is a JSON text.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ContentPart is one element of an array "content": text, an image by
// URL (https: or data:), or a file (OpenAI's "file" part: a PDF as a
// data: URL). CacheControl ({"type":"ephemeral"}) is not OpenAI's:
// Anthropic-dialect adapters pass it on as the block's cache_control,
// OpenAI upstreams ignore it.
type ContentPart struct {
	Type         string          `json:"type"` // "text", "image_url", "file", …
	Text         string          `json:"text,omitempty"`
	ImageURL     *ImageURL       `json:"image_url,omitempty"`
	File         *File           `json:"file,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	// Document is an Anthropic document block as the client sent it, for
	// an Anthropic route to send unchanged; the part's other fields are its
	// nearest OpenAI form (a PDF's file part, a text document's text).
	// Never encoded; set by the /v1/messages front.
	Document json.RawMessage `json:"-"`
}

// File is the file of a "file" part: its data as a data: URL
// ("data:application/pdf;base64,…"), or an uploaded file's id.
type File struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// ImageURL is the image of an "image_url" part.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// OutputLimit returns max_completion_tokens, else max_tokens, else 0 (no limit given).
func (r *ChatRequest) OutputLimit() int {
	switch {
	case r.MaxCompletionTokens != nil:
		return *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		return *r.MaxTokens
	}
	return 0
}

// IncludeUsage reports whether the client asked for the final usage chunk.
func (r *ChatRequest) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// StreamOptions is the "stream_options" object.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one chat message. Content is kept raw because it is a
// string, an array of content parts (see Parts) or null (an assistant
// message with tool calls only).
type Message struct {
	Role       string          `json:"role"` // system, developer, user, assistant, tool
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`   // assistant
	ToolCallID string          `json:"tool_call_id,omitempty"` // tool: the call it answers
	// ReasoningContent is an assistant turn's reasoning, as DeepSeek and
	// other OpenAI-compatible servers send it back.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ThinkingBlocks are the turn's Anthropic thinking blocks with their
	// signatures, which an Anthropic upstream wants back unchanged.
	ThinkingBlocks []ThinkingBlock `json:"thinking_blocks,omitempty"`
	// ToolResult is, on a tool message, the Anthropic tool_result block it
	// was made of, as the client sent it (its content blocks, images and
	// documents included, is_error, cache_control), for an Anthropic route
	// to send unchanged; Content holds its text for other routes. Never
	// encoded; set by the /v1/messages front.
	ToolResult json.RawMessage `json:"-"`
	// ContentParts, when set, are Content's parts as the /v1/messages front
	// built them, with what is never encoded (ContentPart.Document): Parts
	// returns them rather than decoding Content. Never encoded.
	ContentParts []ContentPart `json:"-"`
	// Attached marks a user message that only repeats the images and
	// documents of the tool results before it, for OpenAI-dialect routes,
	// whose tool messages hold text only: an adapter that sends ToolResult
	// drops it. Never encoded.
	Attached bool `json:"-"`
}

// ThinkingBlock is one of Anthropic's thinking blocks in the chat dialect,
// as LiteLLM carries them ("thinking_blocks" on an assistant message and
// on a stream delta): a thinking block's text and signature, or a
// redacted_thinking block's encrypted data. In a stream delta a thinking
// block comes as its signature alone, at the end of the block: its text is
// the reasoning_content streamed since the previous block.
type ThinkingBlock struct {
	Type      string `json:"type"` // "thinking" or "redacted_thinking"
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"` // redacted_thinking
}

// Parts returns the content as parts (ContentParts when set): a string is
// one text part, null or absent is none. A value of another type is an error.
func (m Message) Parts() ([]ContentPart, error) {
	if m.ContentParts != nil {
		return m.ContentParts, nil
	}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []ContentPart{{Type: "text", Text: s}}, nil
	}
	// Made at its length first: decoding would grow it ~1.25x at a time.
	parts := make([]ContentPart, 0, countElements(m.Content))
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return nil, errors.New("content must be a string, an array of content parts or null")
	}
	return parts, nil
}

// Text returns the message's text: the string content, or the "text" parts
// of an array content joined by newlines. Other parts (images) are skipped.
func (m Message) Text() string {
	if len(m.Content) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// TextMessage returns a message whose content is the string text.
func TextMessage(role, text string) Message {
	c, _ := json.Marshal(text)
	return Message{Role: role, Content: c}
}

// Usage is the token accounting of one completion. PromptTokens counts
// every input token, cached ones included (OpenAI's convention; adapters of
// dialects that count cache reads and writes apart add them in), and
// PromptTokensDetails says how many of them were read from or written to a
// prompt cache: the gateway bills those at the model's cache prices.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is a value, not a pointer, so that ScanChunk can
	// fill it without allocating; it is always encoded, as OpenAI does.
	PromptTokensDetails PromptTokensDetails `json:"prompt_tokens_details"`
	// CompletionTokensDetails is written by adapters; UnmarshalJSON and
	// ScanChunk leave it alone (reasoning tokens are in CompletionTokens).
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
	// Invalid is set when a count was there but is not a token count (see
	// CountLimit): the usage reads as not reported, and the gateway
	// estimates the attempt's tokens. Never encoded.
	Invalid bool `json:"-"`
}

// PromptTokensDetails splits the prompt tokens. CachedTokens were read from
// a prompt cache (OpenAI's field; Anthropic's cache_read_input_tokens,
// Gemini's cachedContentTokenCount); CacheWriteTokens were written to one
// (Anthropic's cache_creation_input_tokens; not an OpenAI field). Both are
// parts of Usage.PromptTokens; zero when the upstream did not say.
type PromptTokensDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// CompletionTokensDetails splits the completion tokens.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// UnmarshalJSON reads a usage object the way ScanChunk does, so that a
// non-streaming body's usage counts like a stream's, by the rule of Count:
// integral numbers (12, 12.0, 1.2e1) are counts; a count that is not (a
// string, a fraction, a negative or out-of-range number) reads as 0 and
// sets Invalid. Without it, one float count (some OpenAI-compatible
// servers send 12.0) failed the whole decode. prompt_tokens_details'
// cached_tokens and cache_write_tokens are counts too. Member names match
// exactly; other members (completion_tokens_details…) and null counts are
// ignored, leaving their fields as they were, as null leaves all of u. A
// value that is not an object is a *json.UnmarshalTypeError; nesting
// deeper than MaxDepth is a *SyntaxError.
func (u *Usage) UnmarshalJSON(data []byte) error {
	s := scanner{b: data}
	switch s.peek() {
	case 'n':
		if err := s.lit("null"); err != nil {
			return err
		}
	case '{':
		if err := s.usage(u); err != nil {
			return err
		}
	default:
		var kind string
		switch c := s.peek(); {
		case c == '"':
			kind = "string"
		case c == '[':
			kind = "array"
		case c == 't' || c == 'f':
			kind = "bool"
		case c == '-' || c >= '0' && c <= '9':
			kind = "number"
		default:
			return s.fail("expected a value")
		}
		return &json.UnmarshalTypeError{Value: kind, Type: reflect.TypeFor[Usage](), Offset: int64(s.i)}
	}
	return s.end()
}

// Chunk is one "chat.completion.chunk" event of a stream.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
}

// ChunkChoice is one choice of a stream chunk.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is the increment a chunk carries.
type Delta struct {
	Role             string          `json:"role,omitempty"`
	Content          string          `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ThinkingBlocks   []ThinkingBlock `json:"thinking_blocks,omitempty"` // see ThinkingBlock
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	WebSearchCalls   []WebSearchCall `json:"web_search_calls,omitempty"` // see WebSearchCall
	Annotations      []Annotation    `json:"annotations,omitempty"`      // see Annotation
}

// Completion is a non-streaming "chat.completion" response.
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice is one choice of a non-streaming completion.
type Choice struct {
	Index        int     `json:"index"`
	Message      RespMsg `json:"message"`
	FinishReason string  `json:"finish_reason"`
	// StopReason is the stop sequence that ended the answer (finish_reason
	// "stop"), as vLLM reports it; not an OpenAI field. "" when none did.
	StopReason string   `json:"stop_reason,omitempty"`
	Logprobs   *float64 `json:"logprobs"`
}

// RespMsg is the assistant message of a non-streaming completion (Content
// "" when the answer is tool calls only).
type RespMsg struct {
	Role             string          `json:"role"`
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ThinkingBlocks   []ThinkingBlock `json:"thinking_blocks,omitempty"` // see ThinkingBlock
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	WebSearchCalls   []WebSearchCall `json:"web_search_calls,omitempty"` // see WebSearchCall: the searches, each as it ended
	Annotations      []Annotation    `json:"annotations,omitempty"`      // see Annotation
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// ErrorResponse is the OpenAI error object: {"error":{...}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of the OpenAI error object. Code and Param are
// null when empty, as OpenAI sends them.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    *string `json:"code"`
	Param   *string `json:"param"`
}

// RetryAfter is d as the value of a Retry-After header: whole seconds,
// rounded up, so that a client that waits as long is not refused again.
func RetryAfter(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// NewError returns an error response; empty code and param encode as null.
func NewError(typ, code, param, message string) ErrorResponse {
	e := ErrorResponse{Error: ErrorBody{Message: message, Type: typ}}
	if code != "" {
		e.Error.Code = &code
	}
	if param != "" {
		e.Error.Param = &param
	}
	return e
}
