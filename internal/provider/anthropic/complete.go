package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// message is the Messages API's non-streaming answer, the members read.
type message struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Model      string         `json:"model"`
	Content    []contentBlock `json:"content"`
	StopReason *string        `json:"stop_reason"`
	StopSeq    *string        `json:"stop_sequence"`
	Usage      *messageUsage  `json:"usage"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"` // redacted_thinking
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"` // a server tool result's
	Content   json.RawMessage `json:"content"`     // a server tool result's
	Citations []struct {
		Type  string `json:"type"`
		URL   string `json:"url"`
		Title string `json:"title"`
	} `json:"citations"` // a text block's
}

// messageUsage is a Message's usage, its counts read by the rule of
// api.Count (as the stream reads them).
type messageUsage struct {
	InputTokens              api.TokenCount `json:"input_tokens"`
	OutputTokens             api.TokenCount `json:"output_tokens"`
	CacheReadInputTokens     api.TokenCount `json:"cache_read_input_tokens"`
	CacheCreationInputTokens api.TokenCount `json:"cache_creation_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens api.TokenCount `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// openAI returns the usage as the stream's usage chunk has it, or nil when
// a count is not a token count or a sum is not below api.CountLimit: the
// answer then has no usage, and the gateway estimates it.
func (u *messageUsage) openAI() *api.Usage {
	if u.InputTokens.Invalid || u.OutputTokens.Invalid || u.CacheReadInputTokens.Invalid || u.CacheCreationInputTokens.Invalid {
		return nil
	}
	prompt := u.InputTokens.N + u.CacheReadInputTokens.N + u.CacheCreationInputTokens.N
	out := u.OutputTokens.N
	if prompt+out >= api.CountLimit {
		return nil
	}
	usage := &api.Usage{
		PromptTokens:        prompt,
		CompletionTokens:    out,
		TotalTokens:         prompt + out,
		PromptTokensDetails: api.PromptTokensDetails{CachedTokens: u.CacheReadInputTokens.N, CacheWriteTokens: u.CacheCreationInputTokens.N},
	}
	if d := u.OutputTokensDetails; d != nil && !d.ThinkingTokens.Invalid {
		usage.CompletionTokensDetails = &api.CompletionTokensDetails{ReasoningTokens: d.ThinkingTokens.N}
	}
	return usage
}

// completion translates a Message into an OpenAI chat.completion: text
// blocks joined into the content, thinking blocks into reasoning_content,
// tool_use blocks into tool_calls (arguments: the input as JSON text), the
// stop_reason into finish_reason, the usage as the stream's usage chunk has
// it. model is the route's model, used when the answer names none.
func completion(body []byte, model string, now time.Time) ([]byte, error) {
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: anthropic: answer: %w", provider.ErrMalformed, err)
	}
	if m.Type == "error" && m.Error != nil {
		// Not documented for a 200, but the error shape is unmistakable.
		return nil, eventError(quote(m.Error.Type), quote(m.Error.Message))
	}
	if m.Type != "message" {
		return nil, fmt.Errorf("%w: anthropic: answer of type %q, want a message", provider.ErrMalformed, m.Type)
	}
	var text, reasoning strings.Builder
	msg := api.RespMsg{Role: "assistant"}
	runes := 0 // characters of text so far: the citations' offsets
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			start := runes
			runes += utf8.RuneCountInString(b.Text)
			for _, c := range b.Citations {
				if c.Type == "web_search_result_location" && c.URL != "" {
					msg.Annotations = append(msg.Annotations, api.Annotation{Type: "url_citation",
						URLCitation: api.URLCitation{StartIndex: start, EndIndex: runes, URL: c.URL, Title: c.Title}})
				}
			}
		case "server_tool_use":
			if b.Name == "web_search" {
				var in struct {
					Query string `json:"query"`
				}
				_ = json.Unmarshal(b.Input, &in)
				msg.WebSearchCalls = append(msg.WebSearchCalls, api.WebSearchCall{ID: b.ID, Status: "searching", Query: in.Query})
			}
		case "web_search_tool_result":
			for i := range msg.WebSearchCalls {
				if c := &msg.WebSearchCalls[i]; c.ID == b.ToolUseID {
					c.Status = "completed"
					var e struct {
						Type string `json:"type"`
					}
					if json.Unmarshal(b.Content, &e) == nil && e.Type == "web_search_tool_result_error" {
						c.Status = "failed"
					}
				}
			}
		case "thinking":
			reasoning.WriteString(b.Thinking)
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "thinking", Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "redacted_thinking", Data: b.Data})
		case "tool_use":
			args := "{}"
			if in := bytes.TrimSpace(b.Input); len(in) > 0 && string(in) != "null" {
				var c bytes.Buffer
				if json.Compact(&c, in) == nil {
					args = c.String()
				}
			}
			msg.ToolCalls = append(msg.ToolCalls, api.ToolCall{ID: b.ID, Type: "function", Function: api.FunctionCall{Name: b.Name, Arguments: args}})
		}
	}
	msg.Content, msg.ReasoningContent = text.String(), reasoning.String()
	if m.Model == "" {
		m.Model = model
	}
	reason, seq := finishStop, ""
	if m.StopReason != nil {
		reason = finishReason(quote(*m.StopReason))
		if *m.StopReason == "stop_sequence" && m.StopSeq != nil {
			seq = *m.StopSeq
		}
	}
	out := api.Completion{
		ID:      m.ID,
		Object:  "chat.completion",
		Created: now.Unix(),
		Model:   m.Model,
		Choices: []api.Choice{{Index: 0, Message: msg, FinishReason: reason, StopReason: seq}},
	}
	if u := m.Usage; u != nil {
		out.Usage = u.openAI()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&out); err != nil {
		return nil, fmt.Errorf("anthropic: encode the completion: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// quote is s as a JSON string literal, for the helpers that take literals.
func quote(s string) []byte { return api.AppendString(nil, s) }
