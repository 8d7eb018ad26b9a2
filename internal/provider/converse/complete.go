package converse

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// converseResponse is the part of a ConverseResponse the translation reads.
type converseResponse struct {
	Output struct {
		Message *struct {
			Content []struct {
				Text             *string `json:"text"`
				ReasoningContent *struct {
					ReasoningText *struct {
						Text      string `json:"text"`
						Signature string `json:"signature"`
					} `json:"reasoningText"`
					RedactedContent string `json:"redactedContent"`
				} `json:"reasoningContent"`
				ToolUse *struct {
					ToolUseID string          `json:"toolUseId"`
					Name      string          `json:"name"`
					Input     json.RawMessage `json:"input"`
				} `json:"toolUse"`
			} `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string      `json:"stopReason"`
	Usage      *tokenUsage `json:"usage"`
}

// completion translates a ConverseResponse into an OpenAI chat.completion
// (see the package comment).
func completion(b []byte, model string, created int64, seed [8]byte) ([]byte, error) {
	var r converseResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: the converse answer: %v", provider.ErrMalformed, err)
	}
	if r.Output.Message == nil {
		return nil, fmt.Errorf("%w: the converse answer has no output.message", provider.ErrMalformed)
	}
	if err := modelFailure(r.StopReason); err != nil {
		return nil, err
	}
	msg := api.RespMsg{Role: "assistant"}
	var text, reasoning strings.Builder
	for _, c := range r.Output.Message.Content {
		switch {
		case c.Text != nil:
			text.WriteString(*c.Text)
		case c.ReasoningContent != nil && c.ReasoningContent.ReasoningText != nil:
			rt := c.ReasoningContent.ReasoningText
			reasoning.WriteString(rt.Text)
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "thinking", Thinking: rt.Text, Signature: rt.Signature})
		case c.ReasoningContent != nil && c.ReasoningContent.RedactedContent != "":
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "redacted_thinking", Data: c.ReasoningContent.RedactedContent})
		case c.ToolUse != nil:
			args := "{}"
			if in := bytes.TrimSpace(c.ToolUse.Input); len(in) > 0 && string(in) != "null" {
				var buf bytes.Buffer
				if err := json.Compact(&buf, in); err != nil {
					return nil, fmt.Errorf("%w: a toolUse input: %v", provider.ErrMalformed, err)
				}
				args = buf.String()
			}
			msg.ToolCalls = append(msg.ToolCalls, api.ToolCall{ID: c.ToolUse.ToolUseID, Type: "function",
				Function: api.FunctionCall{Name: c.ToolUse.Name, Arguments: args}})
		}
	}
	msg.Content, msg.ReasoningContent = text.String(), reasoning.String()
	var id [16]byte
	hex.Encode(id[:], seed[:])
	out := api.Completion{
		ID: "chatcmpl-" + string(id[:]), Object: "chat.completion", Created: created, Model: model,
		Choices: []api.Choice{{Message: msg, FinishReason: string(finishReason(r.StopReason, len(msg.ToolCalls) > 0))}},
	}
	if r.Usage != nil {
		if u := readUsage(r.Usage); u.valid {
			au := u.api()
			out.Usage = &au
		}
	}
	return json.Marshal(out)
}
