package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/api"
)

// openAIDialect is the OpenAI Chat Completions dialect (POST /v1/chat/completions).
type openAIDialect struct{}

var _ dialect = openAIDialect{}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.m.requests.Inc()
	d := openAIDialect{}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			"method "+r.Method+" not allowed on /v1/chat/completions")
		return
	}
	var body api.ChatRequest
	if status, err := decodeBody(w, r, &body); err != nil {
		d.requestError(w, status, err)
		return
	}
	req, err := openAIRequest(&body)
	if err != nil {
		d.requestError(w, http.StatusBadRequest, err)
		return
	}
	s.serve(w, r, req, d)
}

// openAIRequest validates a chat request and reads what the engine needs.
func openAIRequest(body *api.ChatRequest) (*request, error) {
	if body.Model == "" {
		return nil, paramError{"model", "model is required"}
	}
	if len(body.Messages) == 0 {
		return nil, paramError{"messages", "messages is required and must not be empty"}
	}
	limit := body.OutputLimit()
	if limit < 0 {
		return nil, paramError{"max_tokens", fmt.Sprintf("max_tokens %d is negative", limit)}
	}
	req := &request{
		model:        body.Model,
		stream:       body.Stream,
		limit:        limit,
		seed:         body.Seed,
		includeUsage: body.IncludeUsage(),
		promptTokens: 3,
	}
	msgs := body.Messages
	texts := make([]string, len(msgs)) // Text of each message, decoded once
	for i, m := range msgs {
		texts[i] = m.Text()
		req.promptTokens += 3 + estimateTokens(texts[i])
	}
	if last := msgs[len(msgs)-1]; last.Role == "assistant" && len(last.ToolCalls) == 0 {
		var b strings.Builder
		if openAIPieces(last, texts[len(msgs)-1], func(p string) { b.WriteString(p) }) {
			req.prefix = b.String()
			msgs = msgs[:len(msgs)-1]
		}
	}
	req.prompt = openAIPrompt(msgs, texts)
	for _, t := range body.Tools {
		if t.Function.Name != "" {
			req.tools = append(req.tools, tool{name: t.Function.Name, schema: t.Function.Parameters})
		}
	}
	switch e := body.ReasoningEffort; e {
	case "":
	case "none":
		req.thinking.mode = thinkOff
	default:
		q, ok := reasoningQuarters[e]
		if !ok {
			return nil, paramError{"reasoning_effort", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high' and 'xhigh'.", e)}
		}
		req.thinking = thinkingAsk{mode: thinkOn, quarters: q}
	}
	req.cache = func(min int) *cacheQuery {
		if req.promptTokens < min {
			return nil
		}
		return openAICacheQuery(body, texts, min)
	}
	return req, nil
}

// reasoningQuarters scales Profile.ThinkingTokens by reasoning_effort, in
// quarters (medium is the profile's length).
var reasoningQuarters = map[string]int{"minimal": 1, "low": 2, "medium": 4, "high": 8, "xhigh": 16}

// openAICacheQuery reads a chat request as OpenAI's automatic prompt
// caching does: the tools and the response format first, then each
// message (its role and other members, then its text, in which a cached
// prefix may end), with a checkpoint every cacheStep tokens from min.
// Images and other non-text parts count no tokens, as in promptTokens,
// but are part of the prefix. The request's own 3 tokens (the reply's
// priming) come after the messages and are never cached.
func openAICacheQuery(body *api.ChatRequest, texts []string, min int) *cacheQuery {
	ph := newPrefixHasher()
	ph.automatic(min, cacheStep)
	for _, t := range body.Tools {
		b, _ := json.Marshal(t)
		ph.fixed(canonicalJSON(b), 0)
	}
	if len(body.ResponseFormat) > 0 {
		ph.fixed(canonicalJSON(body.ResponseFormat), 0)
	}
	for i, m := range body.Messages {
		rest := m
		rest.Content = nil
		head, _ := json.Marshal(rest)
		ph.fixed(head, 3)
		parts, err := m.Parts()
		if len(m.Content) > 0 && m.Content[0] == '"' || err != nil || parts == nil {
			ph.text(texts[i])
			continue
		}
		// Text joins the parts' texts with "\n" (non-text parts as "").
		for j, p := range parts {
			if j > 0 {
				ph.text("\n")
			}
			if p.Type == "text" {
				ph.text(p.Text)
				continue
			}
			b, _ := json.Marshal(p)
			ph.fixed(canonicalJSON(b, "cache_control"), 0)
		}
	}
	return &cacheQuery{points: ph.points}
}

// openAIPrompt hashes the conversation (texts holds each message's Text):
// system and developer messages first, as the other dialects carry them
// apart, then the text of user and assistant messages in order. Tool and
// function messages are results, not hashed.
func openAIPrompt(msgs []api.Message, texts []string) promptHash {
	h := newPromptHash()
	for _, system := range []bool{true, false} {
		for i, m := range msgs {
			switch m.Role {
			case "tool", "function":
				continue
			case "system", "developer":
				if !system {
					continue
				}
			default:
				if system {
					continue
				}
			}
			openAIPieces(m, texts[i], h.add)
		}
	}
	return h
}

// openAIPieces calls add with each text piece of m's content, a string
// (text, already decoded) or its text parts, and reports whether the
// content is text only (not null, no image part).
func openAIPieces(m api.Message, text string, add func(string)) bool {
	if len(m.Content) > 0 && m.Content[0] == '"' {
		add(text)
		return true
	}
	parts, err := m.Parts()
	if err != nil || parts == nil {
		return false
	}
	only := true
	for _, p := range parts {
		if p.Type != "text" {
			only = false
			continue
		}
		add(p.Text)
	}
	return only
}

func (openAIDialect) name() string        { return "openai" }
func (openAIDialect) tokensPerChunk() int { return 1 }
func (openAIDialect) idPrefix() string    { return "chatcmpl-sim" }
func (openAIDialect) wholeToolCall() bool { return false }
func (openAIDialect) toolCallID(key uint64) string {
	return "call_sim" + strconv.FormatUint(splitmix64(key^0x746f6f6c), 36)
}
func (openAIDialect) encoder(pl *plan) encoder                  { return newChunker(pl, time.Now().Unix()) }
func (openAIDialect) failure(w http.ResponseWriter, status int) { writeFailure(w, status) }

// requestError answers with an OpenAI error object: type
// invalid_request_error, code invalid_json / request_too_large /
// invalid_sim_header / invalid_request, param the field or header at fault.
func (openAIDialect) requestError(w http.ResponseWriter, status int, err error) {
	typ, code, param := "invalid_request_error", "invalid_request", ""
	var he *headerError
	var pe paramError
	switch {
	case status >= 500:
		typ, code = "server_error", ""
	case errors.Is(err, errTooLarge):
		code = "request_too_large"
	case errors.As(err, &he):
		param, code = he.header, "invalid_sim_header"
	case errors.As(err, &pe):
		param = pe.param
	case errors.As(err, new(invalidJSON)):
		code = "invalid_json"
	}
	writeError(w, status, typ, code, param, err.Error())
}

func (openAIDialect) generationFailure(w http.ResponseWriter) {
	writeError(w, http.StatusInternalServerError, "server_error", "sim_error_event", "",
		"simulated upstream error during generation")
}

func (openAIDialect) truncated(w http.ResponseWriter, pl *plan) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(`{"id":"` + pl.id + `","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"trunc`))
}

// openAIToolMessage is the assistant message of a tool call: content null
// and tool_calls, as OpenAI answers.
type openAIToolMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []api.ToolCall `json:"tool_calls"`
}

func (openAIDialect) complete(w http.ResponseWriter, pl *plan, text string) {
	finish := openAIFinish[pl.stop]
	out := pl.thinkTokens + pl.tokens
	usage := &api.Usage{PromptTokens: pl.promptTokens, CompletionTokens: out, TotalTokens: pl.promptTokens + out,
		PromptTokensDetails:     api.PromptTokensDetails{CachedTokens: pl.cache.read},
		CompletionTokensDetails: &api.CompletionTokensDetails{ReasoningTokens: pl.thinkTokens}}
	if pl.tool == nil {
		writeJSON(w, http.StatusOK, api.Completion{
			ID:      pl.id,
			Object:  "chat.completion",
			Created: time.Now().Unix(),
			Model:   pl.model,
			Choices: []api.Choice{{Index: 0, Message: api.RespMsg{Role: "assistant", Content: text}, FinishReason: finish}},
			Usage:   usage,
		})
		return
	}
	type choice struct {
		Index        int               `json:"index"`
		Message      openAIToolMessage `json:"message"`
		Logprobs     *float64          `json:"logprobs"`
		FinishReason string            `json:"finish_reason"`
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string     `json:"id"`
		Object  string     `json:"object"`
		Created int64      `json:"created"`
		Model   string     `json:"model"`
		Choices []choice   `json:"choices"`
		Usage   *api.Usage `json:"usage"`
	}{
		ID: pl.id, Object: "chat.completion", Created: time.Now().Unix(), Model: pl.model,
		Choices: []choice{{Message: openAIToolMessage{Role: "assistant", ToolCalls: []api.ToolCall{{
			ID: pl.tool.id, Type: "function", Function: api.FunctionCall{Name: pl.tool.name, Arguments: string(pl.tool.args)},
		}}}, FinishReason: finish}},
		Usage: usage,
	})
}

// openAIFinish spells the stop reasons as OpenAI's finish_reason.
var openAIFinish = [...]string{stopEnd: "stop", stopLength: "length", stopTool: "tool_calls"}

// writeFailure answers an injected error status with the body OpenAI sends
// for it (and Retry-After on 429).
func writeFailure(w http.ResponseWriter, status int) {
	typ, code, msg := "server_error", "", "simulated upstream error"
	switch status {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		typ, code, msg = "requests", "rate_limit_exceeded", "Rate limit reached for requests (simulated). Please try again in 1s."
	case http.StatusInternalServerError:
		msg = "The server had an error while processing your request (simulated)."
	case http.StatusBadGateway:
		code, msg = "bad_gateway", "Bad gateway (simulated)."
	case http.StatusServiceUnavailable:
		code, msg = "overloaded", "The engine is currently overloaded, please try again later (simulated)."
	default:
		if status < 500 {
			typ = "invalid_request_error"
		}
		msg = fmt.Sprintf("simulated error status %d", status)
	}
	writeError(w, status, typ, code, "", msg)
}

// errorEvent is the data of a mid-stream error event, as OpenAI sends one.
func errorEvent(chunk int) []byte {
	b, _ := json.Marshal(api.NewError("server_error", "sim_error_event", "",
		fmt.Sprintf("simulated upstream error at chunk %d", chunk)))
	return b
}
