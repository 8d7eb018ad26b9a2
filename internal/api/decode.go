package api

import (
	"encoding/json"
	"fmt"
)

// MaxMessages is the most messages a request may hold: Anthropic's
// documented limit for one request. Each decoded message costs the gateway
// a fixed 112 bytes whatever its size, so the cap bounds what a body of
// tiny messages ({"role":"user"}, 16 bytes each) costs beyond its own bytes.
const MaxMessages = 100_000

// TooManyError is a request array longer than its limit.
type TooManyError struct {
	Field string // "messages"
	Limit int
	Got   int
}

func (e *TooManyError) Error() string {
	return fmt.Sprintf("too many %s: %d, the limit is %d", e.Field, e.Got, e.Limit)
}

// UnmarshalJSON decodes a chat request as encoding/json does, with the
// slices of its large arrays (messages, each message's tool_calls, tools)
// made at their final length before decoding: encoding/json grows a slice
// by about 1.25x at a time, so a body of many small messages allocated
// about five times its slice's final size (issue 22: 21 bytes per body
// byte). Decoding reuses a slice's capacity and decodes into an element in
// place, which is what makes the sizes set here stick. More than
// MaxMessages messages is a *TooManyError.
func (r *ChatRequest) UnmarshalJSON(data []byte) error {
	type plain ChatRequest // the same fields, without this method
	if err := EachMember(data, func(key, _, value []byte) error {
		switch string(key) {
		case "messages":
			return r.sizeMessages(value)
		case "tools":
			if n := countElements(value); n > 0 {
				r.Tools = make([]Tool, 0, n)
			}
		}
		return nil
	}); err != nil && err != errNotObject {
		return err
	}
	return json.Unmarshal(data, (*plain)(r))
}

// sizeMessages makes r.Messages, and the tool_calls of each message that
// has some, at their lengths in value (a messages array).
func (r *ChatRequest) sizeMessages(value []byte) error {
	n := countElements(value)
	if n > MaxMessages {
		return &TooManyError{Field: "messages", Limit: MaxMessages, Got: n}
	}
	if n == 0 {
		return nil
	}
	msgs := make([]Message, n)
	i := 0
	EachElement(value, func(elem []byte) error {
		EachMember(elem, func(key, _, value []byte) error {
			if string(key) == "tool_calls" {
				if k := countElements(value); k > 0 {
					msgs[i].ToolCalls = make([]ToolCall, 0, k)
				}
			}
			return nil
		})
		i++
		return nil
	})
	r.Messages = msgs[:0]
	return nil
}

// countElements is the length of the JSON array arr; 0 for anything else.
func countElements(arr []byte) int {
	n := 0
	if EachElement(arr, func([]byte) error { n++; return nil }) != nil {
		return 0
	}
	return n
}
