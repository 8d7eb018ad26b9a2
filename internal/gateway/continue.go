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
// whose text so far is prefix, in mode. The prefix goes without its
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
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(req.Body, &raw); err != nil {
		return "", &continueError{err}
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

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
