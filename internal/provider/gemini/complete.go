package gemini

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// genResponse is a GenerateContentResponse, the members the translation
// reads (https://ai.google.dev/api/generate-content#generatecontentresponse).
type genResponse struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				FunctionCall *struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason      string     `json:"finishReason"`
		Index             int        `json:"index"`
		GroundingMetadata *grounding `json:"groundingMetadata"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        api.TokenCount `json:"promptTokenCount"`
		CandidatesTokenCount    api.TokenCount `json:"candidatesTokenCount"`
		ThoughtsTokenCount      api.TokenCount `json:"thoughtsTokenCount"`
		CachedContentTokenCount api.TokenCount `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string       `json:"modelVersion"`
	ResponseID   string       `json:"responseId"`
	Error        *googleError `json:"error"`
}

// completion translates a non-streaming answer into an OpenAI
// chat.completion object (the mapping of the package comment).
func completion(body []byte, model string, created int64, seed [8]byte) ([]byte, error) {
	var r genResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: the gemini answer is not a GenerateContentResponse: %w", provider.ErrMalformed, err)
	}
	if r.Error != nil {
		status := r.Error.Code
		if status < 100 || status > 599 {
			status = 0
		}
		return nil, &provider.Error{Status: status, Retryable: status == 0 || provider.RetryableStatus(status),
			Type: r.Error.Status, Code: r.Error.Status, Message: r.Error.Message}
	}
	var hexSeed [16]byte
	hex.Encode(hexSeed[:], seed[:])
	c := api.Completion{ID: r.ResponseID, Object: "chat.completion", Created: created, Model: r.ModelVersion}
	if c.ID == "" {
		c.ID = "chatcmpl-" + string(hexSeed[:])
	}
	if c.Model == "" {
		c.Model = model
	}
	msg := api.RespMsg{Role: "assistant"}
	var finish string
	found := false
	var text, thoughts strings.Builder
	for _, cand := range r.Candidates {
		if cand.Index != 0 {
			continue
		}
		found = true
		for _, p := range cand.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				args := "{}"
				if a := p.FunctionCall.Args; len(a) > 0 && string(a) != "null" {
					var compact bytes.Buffer
					json.Compact(&compact, a) // a is valid: it was decoded
					args = compact.String()
				}
				n := len(msg.ToolCalls)
				msg.ToolCalls = append(msg.ToolCalls, api.ToolCall{
					ID:       "call_" + string(hexSeed[:]) + strconv.Itoa(n),
					Type:     "function",
					Function: api.FunctionCall{Name: p.FunctionCall.Name, Arguments: args},
				})
			case p.Text == nil:
			case p.Thought:
				thoughts.WriteString(*p.Text)
			default:
				text.WriteString(*p.Text)
			}
		}
		if cand.FinishReason != "" {
			finish = cand.FinishReason
		}
		if g := cand.GroundingMetadata; g != nil {
			var seen []string
			msg.WebSearchCalls, msg.Annotations = g.searches(&seen, "ws_"+string(hexSeed[:])+"_", []byte(text.String()))
			// One entry per search, as it ended (see api.RespMsg).
			msg.WebSearchCalls = slices.DeleteFunc(msg.WebSearchCalls, func(c api.WebSearchCall) bool { return c.Status != "completed" })
		}
	}
	if err := toolCallFailure(finish); found && err != nil {
		return nil, err
	}
	switch {
	case found:
		finish = finishString(finish, len(msg.ToolCalls) > 0)
	case r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "":
		finish = string(contentFilter)
	default:
		return nil, fmt.Errorf("%w: the gemini answer has no candidate and no prompt feedback", provider.ErrMalformed)
	}
	msg.Content, msg.ReasoningContent = text.String(), thoughts.String()
	c.Choices = []api.Choice{{Message: msg, FinishReason: finish}}
	// Counts read as the stream reads them (api.Count): an answer whose
	// billed counts are not all token counts has no usage, and the gateway
	// estimates it.
	if u := r.UsageMetadata; u != nil && !u.PromptTokenCount.Invalid && !u.CandidatesTokenCount.Invalid && !u.ThoughtsTokenCount.Invalid &&
		!u.CachedContentTokenCount.Invalid && u.PromptTokenCount.N+u.CandidatesTokenCount.N+u.ThoughtsTokenCount.N < api.CountLimit {
		completion := u.CandidatesTokenCount.N + u.ThoughtsTokenCount.N
		c.Usage = &api.Usage{
			PromptTokens:            u.PromptTokenCount.N,
			CompletionTokens:        completion,
			TotalTokens:             u.PromptTokenCount.N + completion,
			PromptTokensDetails:     api.PromptTokensDetails{CachedTokens: u.CachedContentTokenCount.N},
			CompletionTokensDetails: &api.CompletionTokensDetails{ReasoningTokens: u.ThoughtsTokenCount.N},
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("gemini: encode completion: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
