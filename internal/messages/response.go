package messages

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/streamgate/streamgate/internal/api"
)

// Response is a non-streaming Messages answer.
type Response struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"` // "message"
	Role         string  `json:"role"` // "assistant"
	Model        string  `json:"model"`
	Content      []Block `json:"content"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
}

// Usage is a Message's token accounting: input_tokens excludes the cached
// tokens, counted apart.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

// FromCompletion turns an OpenAI chat.completion body into a Message for a
// request for model (the name it is given when the answer names none).
func FromCompletion(body []byte, model string) ([]byte, error) {
	var c struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				api.RespMsg
				Refusal string `json:"refusal"` // see refusalStop
				// Reasoning is reasoning_content under the name OpenRouter
				// and recent vLLM give it (the Encoder reads both too).
				Reasoning string `json:"reasoning"`
			} `json:"message"`
			FinishReason string          `json:"finish_reason"`
			StopReason   json.RawMessage `json:"stop_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("messages: the upstream's answer is not a chat completion: %w", err)
	}
	if c.Model != "" {
		model = c.Model // the model that answered, as chat and passthrough name it
	}
	r := Response{ID: messageID(c.ID), Type: "message", Role: "assistant", Model: model, Content: []Block{}, StopReason: "end_turn"}
	if len(c.Choices) > 0 {
		ch := c.Choices[0]
		m := ch.Message
		switch {
		case len(m.ThinkingBlocks) > 0: // Anthropic's blocks, signatures and redacted ones included
			for _, tb := range m.ThinkingBlocks {
				switch tb.Type {
				case "thinking":
					r.Content = append(r.Content, Block{Type: "thinking", Thinking: tb.Thinking, Signature: tb.Signature})
				case "redacted_thinking":
					r.Content = append(r.Content, Block{Type: "redacted_thinking", Data: tb.Data})
				}
			}
		case m.ReasoningContent != "":
			r.Content = append(r.Content, Block{Type: "thinking", Thinking: m.ReasoningContent})
		case m.Reasoning != "":
			r.Content = append(r.Content, Block{Type: "thinking", Thinking: m.Reasoning})
		}
		if text := m.Content + m.Refusal; text != "" {
			r.Content = append(r.Content, Block{Type: "text", Text: text})
		}
		for i, tc := range m.ToolCalls {
			input := json.RawMessage(tc.Function.Arguments)
			if !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("toolu_%d", i)
			}
			r.Content = append(r.Content, Block{Type: "tool_use", ID: id, Name: tc.Function.Name, Input: input})
		}
		r.StopReason = refusalStop(turnStop(StopReason(ch.FinishReason), len(m.ToolCalls) > 0), m.Refusal != "")
		if seq, ok := stopSequence(ch.FinishReason, ch.StopReason); ok {
			r.StopReason, r.StopSequence = "stop_sequence", &seq
		}
	}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		u := readUsage(c.Usage)
		r.Usage = Usage{InputTokens: u.input, OutputTokens: u.output, CacheReadInputTokens: u.cacheRead, CacheCreationInputTokens: u.cacheWrite}
	}
	return json.Marshal(r)
}

// readUsage reads an OpenAI usage object the Anthropic way: input_tokens
// without the cached tokens, which are counted apart. The counts, the
// details' too, are read like the relay reads them (floats too).
func readUsage(raw json.RawMessage) usage {
	var u api.Usage
	json.Unmarshal(raw, &u)
	d := u.PromptTokensDetails
	return usage{
		input:     max(0, u.PromptTokens-d.CachedTokens-d.CacheWriteTokens),
		output:    u.CompletionTokens,
		cacheRead: d.CachedTokens, cacheWrite: d.CacheWriteTokens,
	}
}

// ErrorBody turns an OpenAI error object into Anthropic's
// {"type":"error","error":{"type","message"}}; the type follows status when
// it is known (0: from the OpenAI type).
func ErrorBody(status int, body []byte) []byte {
	var e api.ErrorResponse
	json.Unmarshal(body, &e)
	msg := e.Error.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	typ := errorType(status, e.Error.Type)
	out, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	return out
}

// errorType is Anthropic's error type of an HTTP status (or, without one,
// of an OpenAI error type).
func errorType(status int, openaiType string) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case 0:
		switch openaiType {
		case "rate_limit_error":
			return "rate_limit_error"
		case "invalid_request_error":
			return "invalid_request_error"
		}
	}
	return "api_error"
}
