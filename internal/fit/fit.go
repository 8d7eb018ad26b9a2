// Package fit is the context guard: before a chat request goes upstream, it
// checks the request against the model's context window and output limit,
// lowers a max_tokens above the model's output limit, and rejects (or, by
// policy, trims the oldest turns of) a request that cannot fit, so the client
// gets a clear error instead of an upstream's 400 after a paid round trip.
// Its prompt estimate (EstimateTokens, on the high side) is the ledger's
// too; Text estimates an answer's tokens from its text, per script.
package fit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
)

// Policies of Limits.Policy.
const (
	PolicyReject = "reject" // a request that does not fit is a *TooLong
	PolicyTrim   = "trim"   // the oldest turns are dropped until it fits
)

// Limits of a model. Zero Window or MaxOutput means unknown (not checked).
type Limits struct {
	Window    int    // context_window: prompt + output tokens the model accepts
	MaxOutput int    // max_output_tokens: the most output tokens per answer
	Policy    string // "reject" (default, also "" and any value but "trim") or "trim"
}

// Result says what Apply did.
type Result struct {
	// PromptTokens is the estimate of the prompt (see Apply) after trimming;
	// 0 when Window is unknown (then it is not computed).
	PromptTokens int
	// MaxTokens is the output limit the request asks for after clamping:
	// max_completion_tokens when set, else max_tokens; 0 when the client set
	// neither.
	MaxTokens int
	// Clamped: max_tokens or max_completion_tokens was above MaxOutput and
	// was lowered to it.
	Clamped bool
	// Dropped is the number of messages trimming removed.
	Dropped int
}

// TooLong is the error when the request does not fit the context window:
// it names the numbers, as OpenAI's context_length_exceeded does.
type TooLong struct {
	Window int // the model's context window
	// Prompt is the prompt estimate; under the trim policy, of what is left
	// once every turn it may drop is dropped.
	Prompt int
	// MaxTokens is the output the request reserves (0: max_tokens not set,
	// nothing reserved).
	MaxTokens int
	// Trimmable reports that dropping the oldest turns would make the
	// request fit: set under the reject policy when the trim policy would
	// have sent it; always false under the trim policy, which has tried.
	Trimmable bool
}

var _ error = (*TooLong)(nil)

func (e *TooLong) Error() string {
	if e.MaxTokens <= 0 {
		return fmt.Sprintf("this model's context window is %d tokens, but the messages need about %d (estimated): shorten the messages",
			e.Window, e.Prompt)
	}
	need := e.Prompt + e.MaxTokens
	if need < e.Prompt {
		need = math.MaxInt // a max_tokens near MaxInt
	}
	return fmt.Sprintf("this model's context window is %d tokens, but the request needs about %d (prompt about %d estimated + max_tokens %d): shorten the messages or lower max_tokens",
		e.Window, need, e.Prompt, e.MaxTokens)
}

// Apply checks a chat request against l. It returns the body to send
// upstream: body itself when nothing changed (no copy, no allocation), a
// rewritten copy otherwise, in which only the members changed are rewritten
// (api.SetMembers: every other member byte for byte) and chat is updated to
// match. On error it returns a nil body and leaves chat as it was; chat must
// be the decoded view of body.
//
// The output limit is max_completion_tokens when set, else max_tokens. When
// MaxOutput is known, each of the two that is above it is lowered to it.
//
// When Window is known the request must fit: prompt + max_tokens ≤ Window.
// When the client set no max_tokens, nothing is reserved for the output (a
// prompt that fits the window is sent, and the answer may be cut short by
// the window, as upstreams do): reserving MaxOutput would reject requests
// the upstream serves.
//
// The prompt is estimated with EstimateTokens, on the high side: the sum,
// over the messages, of EstimateTokens of each message's JSON as the client
// wrote it (so roles, names, tool calls and image URLs count, and the member
// names stand in for the few tokens of per-message framing upstreams add),
// plus EstimateTokens of the "tools" value and of a top-level "system"
// value (Anthropic's system prompt, see Check) when present. Other members
// (response_format schemas…) are not counted. When a member is repeated,
// the last one counts, as encoding/json decodes it.
//
// A request that does not fit is a *TooLong under the reject policy. Under
// the trim policy the oldest turns are dropped until it fits; a turn is a
// user message and the messages up to the next user message, so an
// assistant's tool calls leave with the tool messages answering them and
// the conversation still starts with a user message (Anthropic and Gemini
// require it). Messages before the first user message form a turn of their
// own. System and developer messages are always kept, in their places, and
// the last turn (from the last user message on) is never dropped: when
// even they do not fit, the result is a *TooLong. max_tokens is not lowered
// to make room.
func Apply(body []byte, chat *api.ChatRequest, l Limits) ([]byte, Result, error) {
	res := Result{MaxTokens: chat.OutputLimit()}
	clampMC := l.MaxOutput > 0 && chat.MaxCompletionTokens != nil && *chat.MaxCompletionTokens > l.MaxOutput
	clampM := l.MaxOutput > 0 && chat.MaxTokens != nil && *chat.MaxTokens > l.MaxOutput
	if l.MaxOutput > 0 && res.MaxTokens > l.MaxOutput {
		res.MaxTokens = l.MaxOutput
	}
	res.Clamped = clampMC || clampM
	reserve := max(res.MaxTokens, 0) // a negative max_tokens is the upstream's to refuse

	var keep []int // the messages kept, when trimming dropped some
	var msgs [][]byte
	if l.Window > 0 {
		m, err := measure(body)
		if err != nil {
			return nil, res, fmt.Errorf("fit: %w", err)
		}
		res.PromptTokens = m.prompt
		if reserve > l.Window-m.prompt { // not prompt+reserve: max_tokens may be near MaxInt
			if msgs, err = elements(m.messages, len(chat.Messages)); err != nil {
				return nil, res, fmt.Errorf("fit: %w", err)
			}
			kept, prompt := trim(chat.Messages, msgs, m.prompt, l.Window-reserve)
			fits := reserve <= l.Window-prompt
			if l.Policy != PolicyTrim || !fits {
				tl := &TooLong{Window: l.Window, Prompt: m.prompt, MaxTokens: reserve, Trimmable: fits}
				if l.Policy == PolicyTrim {
					tl.Prompt = prompt
				}
				return nil, res, tl
			}
			keep = kept
			res.PromptTokens = prompt
			res.Dropped = len(chat.Messages) - len(kept)
		}
	}
	if !res.Clamped && keep == nil {
		return body, res, nil
	}

	set := make(map[string]json.RawMessage, 3)
	if res.Clamped {
		v := strconv.AppendInt(nil, int64(l.MaxOutput), 10)
		if clampMC {
			set["max_completion_tokens"] = v
		}
		if clampM {
			set["max_tokens"] = v
		}
	}
	var kept []api.Message
	if keep != nil {
		size := len(keep) + 1 // brackets and commas
		for _, i := range keep {
			size += len(msgs[i])
		}
		arr := append(make([]byte, 0, size), '[')
		kept = make([]api.Message, 0, len(keep))
		for n, i := range keep {
			if n > 0 {
				arr = append(arr, ',')
			}
			arr = append(arr, msgs[i]...)
			kept = append(kept, chat.Messages[i])
		}
		set["messages"] = append(arr, ']')
	}
	out, err := api.SetMembers(body, set)
	if err != nil {
		return nil, res, fmt.Errorf("fit: %w", err)
	}
	if clampMC {
		chat.MaxCompletionTokens = new(l.MaxOutput)
	}
	if clampM {
		chat.MaxTokens = new(l.MaxOutput)
	}
	if keep != nil {
		chat.Messages = kept
	}
	return out, res, nil
}

// Check is Apply for a body whose turns the guard cannot read as a chat
// request's: a client's request in its own dialect, passed through as it
// is (Anthropic's Messages API, whose system prompt is the top-level
// "system"). The prompt is estimated as Apply does; the output limit is
// the body's "max_tokens" (its last occurrence, as encoding/json reads it;
// 0 when absent or not an integer), lowered to MaxOutput when above it
// (only that member is rewritten, api.SetMembers); nothing is trimmed, so
// a request that does not fit is a *TooLong whatever the policy (Trimmable
// false). The body itself is returned when nothing changed.
func Check(body []byte, l Limits) ([]byte, Result, error) {
	m, err := measure(body)
	if err != nil {
		return nil, Result{}, fmt.Errorf("fit: %w", err)
	}
	var res Result
	json.Unmarshal(m.maxTokens, &res.MaxTokens) // absent, null or not an integer: 0
	if l.MaxOutput > 0 && res.MaxTokens > l.MaxOutput {
		res.MaxTokens, res.Clamped = l.MaxOutput, true
	}
	if l.Window > 0 {
		res.PromptTokens = m.prompt
		if reserve := max(res.MaxTokens, 0); reserve > l.Window-m.prompt {
			return nil, res, &TooLong{Window: l.Window, Prompt: m.prompt, MaxTokens: reserve}
		}
	}
	if !res.Clamped {
		return body, res, nil
	}
	out, err := api.SetMembers(body, map[string]json.RawMessage{"max_tokens": strconv.AppendInt(nil, int64(l.MaxOutput), 10)})
	if err != nil {
		return nil, res, fmt.Errorf("fit: %w", err)
	}
	return out, res, nil
}

// measured is what measure finds in a body.
type measured struct {
	messages  []byte // the value of the last "messages" member (nil: none)
	maxTokens []byte // the value of the last "max_tokens" member (nil: none)
	prompt    int    // the prompt estimate (see Apply)
}

// measure estimates the prompt of body without allocating. An empty body
// counts as {} (provider.Request's nil Body).
func measure(body []byte) (measured, error) {
	var m measured
	if len(body) == 0 {
		return m, nil
	}
	var tools, system []byte
	err := api.EachMember(body, func(key, _, value []byte) error {
		switch string(key) {
		case "messages":
			m.messages = value
		case "tools":
			tools = value
		case "system":
			system = value
		case "max_tokens":
			m.maxTokens = value
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	m.prompt = EstimateTokens(tools) + EstimateTokens(system)
	err = api.EachElement(m.messages, func(msg []byte) error {
		m.prompt += EstimateTokens(msg)
		return nil
	})
	return m, err
}

// elements returns the messages of arr, which must number n (those of the
// decoded request).
func elements(arr []byte, n int) ([][]byte, error) {
	msgs := make([][]byte, 0, n)
	if err := api.EachElement(arr, func(msg []byte) error {
		msgs = append(msgs, msg)
		return nil
	}); err != nil {
		return nil, err
	}
	if len(msgs) != n {
		return nil, errors.New("the body's messages are not the decoded request's")
	}
	return msgs, nil
}

// trim drops the oldest turns of messages (raw: their JSON) from a prompt
// of the given estimate until it is at most budget or only the system and
// developer messages and the last turn are left. It returns the indexes of
// the messages kept and the prompt's estimate after the drop.
func trim(messages []api.Message, raw [][]byte, prompt, budget int) ([]int, int) {
	last := 0 // the last turn's first message
	for i, m := range messages {
		if m.Role == "user" {
			last = i
		}
	}
	drop := make([]bool, len(messages))
	for i := 0; i < last && prompt > budget; {
		end := i + 1 // the turn starting at i runs to the next user message
		for end < last && messages[end].Role != "user" {
			end++
		}
		for ; i < end; i++ {
			if !system(messages[i].Role) {
				drop[i] = true
				prompt -= EstimateTokens(raw[i])
			}
		}
	}
	keep := make([]int, 0, len(messages))
	for i, d := range drop {
		if !d {
			keep = append(keep, i)
		}
	}
	return keep, prompt
}

// system reports whether a message of role is an instruction, always kept.
func system(role string) bool {
	return role == "system" || role == "developer"
}

// EstimateTokens errs on the high side, so that a ledger never under-counts
// what was not reported and the guard never sends what cannot fit: a token
// per four ASCII bytes (English text and JSON run at 3.5-4.5 bytes per
// token) and one per other character (Korean, Chinese and Japanese run at
// 0.7-1.5 characters per token). The ledger takes it over the whole request
// body, so tools and system prompts count too; the guard over the messages
// and tools (see Apply).
func EstimateTokens[T string | []byte](s T) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < utf8.RuneSelf:
			ascii++
		case c >= 0xC0: // the first byte of a multi-byte character
			other++
		}
	}
	return (ascii+3)/4 + other
}
