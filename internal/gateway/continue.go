package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// Continuation modes of a provider (config.Provider.Continuation).
const (
	contPrefill      = "prefill"                // the text so far as a final assistant message, continued by the model
	contFinalMessage = "continue_final_message" // the same, with vLLM's continue_final_message flag
	contPrompt       = "prompt"                 // an assistant message and a user message asking to continue
)

// continuationMode is the provider's continuation mode: its own, else its
// kind's (prefill where the API continues a final assistant message:
// Anthropic, the simulator).
func continuationMode(set, kind string) string {
	if set != "" {
		return set
	}
	switch kind {
	case "anthropic", "sim":
		return contPrefill
	}
	return contPrompt
}

// continuePrompt is the user message of the prompt mode.
const continuePrompt = "Your previous answer was cut off. Continue it from exactly where it stopped: " +
	"do not repeat any of it and add no preamble; start with the next characters."

// errLimitReached: the text already sent used up the client's max_tokens;
// the answer is complete (finish_reason "length"), nothing is left to continue.
var errLimitReached = errors.New("max_tokens used up by the text already sent")

// continueError: the continuation request could not be built; the stream
// ends as the cut left it.
type continueError struct{ err error }

func (e *continueError) Error() string {
	return "cannot continue the cut stream: " + e.err.Error()
}

func (e *continueError) Unwrap() []error { return []error{provider.ErrTruncated, e.err} }

// continueRequest turns req into the request that continues an answer
// whose text so far is prefix, in mode; a request that asks for thinking
// is continued in the prompt mode whatever mode says (see thinks). The
// prefix goes without its
// trailing whitespace (Anthropic refuses a final assistant message ending
// in whitespace; the answer's next token carries it again, and the relay
// drops it: see relay.Session.Skip). A max_tokens (or
// max_completion_tokens) the client set is lowered by delivered, the
// tokens already sent, so the whole answer keeps the client's limit.
// It returns the whitespace removed. The continuation has no native form
// (provider.Native): the relay edits its chunks, which a passed-through
// stream is not.
func continueRequest(req *provider.Request, prefix, mode string, delivered int) (string, error) {
	if req.Chat == nil {
		return "", &continueError{errors.New("the request has no chat form")}
	}
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
		Thinking json.RawMessage   `json:"thinking"` // a chat client's own
	}
	if err := json.Unmarshal(req.Body, &raw); err != nil {
		return "", &continueError{err}
	}
	if thinks(req.Chat, raw.Thinking) {
		mode = contPrompt
	}
	trimmed := strings.TrimRightFunc(prefix, unicode.IsSpace)
	ws := prefix[len(trimmed):]
	if ws != "" && mode != contPrompt {
		// The whitespace left out comes again as the next token, counted
		// again by the upstream.
		delivered = max(0, delivered-1)
	}
	msg := api.Message{Role: "assistant", Content: jsonString(trimmed)}
	add := []api.Message{msg}
	if mode == contPrompt {
		add = append(add, api.Message{Role: "user", Content: jsonString(continuePrompt)})
		ws = "" // a new turn starts afresh
		msg.Content = jsonString(prefix)
		add[0] = msg
	}
	for _, m := range add {
		b, err := json.Marshal(m)
		if err != nil {
			return "", &continueError{err}
		}
		raw.Messages = append(raw.Messages, b)
	}
	msgs, err := json.Marshal(raw.Messages)
	if err != nil {
		return "", &continueError{err}
	}
	set := map[string]json.RawMessage{"messages": msgs}
	chat := *req.Chat
	chat.Messages = append(append([]api.Message(nil), chat.Messages...), add...)
	lower := func(p *int, key string) (*int, error) {
		if p == nil {
			return nil, nil
		}
		left := *p - delivered
		if left <= 0 {
			return nil, errLimitReached
		}
		set[key] = json.RawMessage(fmt.Sprint(left))
		return &left, nil
	}
	if chat.MaxTokens, err = lower(chat.MaxTokens, "max_tokens"); err != nil {
		return "", err
	}
	if chat.MaxCompletionTokens, err = lower(chat.MaxCompletionTokens, "max_completion_tokens"); err != nil {
		return "", err
	}
	if mode == contFinalMessage {
		set["continue_final_message"] = json.RawMessage("true")
		set["add_generation_prompt"] = json.RawMessage("false")
	}
	body, err := api.SetMembers(req.Body, set)
	if err != nil {
		return "", &continueError{err}
	}
	req.Body, req.Chat = body, &chat
	req.Native = nil // the continuation is a chat request, translated for every route
	return ws, nil
}

// thinks reports whether a request asks for thinking: a thinking object
// that is not disabled (the /v1/messages front's, chat.Thinking, else a
// chat client's own, body), or a reasoning_effort other than none. Such a
// request is never continued by prefill: Anthropic refuses a final
// assistant message with thinking on (400: it must start with a thinking
// block, which the gateway cannot sign), and a reasoning model given a
// prefix may think again before going on (the relay drops the thinking of
// a continuation: see relay.Session.Prefix).
func thinks(chat *api.ChatRequest, body json.RawMessage) bool {
	raw := chat.Thinking
	if len(raw) == 0 {
		raw = body
	}
	if th, err := api.ReadThinking(raw); err == nil && th.Type != "" {
		return th.Type != "disabled"
	}
	return chat.ReasoningEffort != "" && chat.ReasoningEffort != "none"
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
