// Package api holds the OpenAI Chat Completions wire types, the lingua franca
// of streamgate: the gateway accepts them, provider adapters translate to and
// from them, and the simulator and the benchmark speak them. ScanChunk reads
// the few fields the hot path needs from a stream chunk without decoding it.
package api

import (
	"encoding/json"
	"reflect"
	"strings"
)

// ChatRequest is the body of POST /v1/chat/completions. Only the fields
// streamgate reads are typed; the gateway forwards the client's body, so
// fields not listed here still reach the upstream.
type ChatRequest struct {
	Model               string         `json:"model"`
	Messages            []Message      `json:"messages"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
	MaxTokens           *int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`
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

// Message is one chat message. Content is kept raw because it is either a
// string or an array of content parts.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content,omitempty"`
	Name    string          `json:"name,omitempty"`
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

// Usage is the token accounting of one completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// UnmarshalJSON reads a usage object the way ScanChunk does, so that a
// non-streaming body's usage counts like a stream's: a count may be any
// JSON number (12, 12.0, 1.2e1), rounded to the nearest integer, halves up;
// a negative count or one above 1<<40 reads as 0. Without it, one float
// count (some OpenAI-compatible servers send 12.0) failed the whole decode.
// Member names match exactly; other members (prompt_tokens_details…) and
// counts that are null or not numbers are ignored, leaving their fields as
// they were, as null leaves all of u. A value that is not an object is a
// *json.UnmarshalTypeError; nesting deeper than MaxDepth is a *SyntaxError.
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
	Role             string `json:"role,omitempty"`
	Content          string `json:"content,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
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
	Index        int      `json:"index"`
	Message      RespMsg  `json:"message"`
	FinishReason string   `json:"finish_reason"`
	Logprobs     *float64 `json:"logprobs"`
}

// RespMsg is the assistant message of a non-streaming completion.
type RespMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
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
