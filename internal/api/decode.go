package api

import (
	"encoding/json"
	"errors"
	"fmt"
)

// MaxMessages is the most messages a request may hold: Anthropic's
// documented limit for one request. Each decoded message costs the gateway
// a fixed 192 bytes (unsafe.Sizeof(Message{})) whatever its size, so the cap bounds what a body of
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

// Presize makes r's slices of the large arrays of data, a chat request
// body (messages, each message's tool_calls, tools), at their lengths,
// empty, for json.Unmarshal(data, r) to decode into: encoding/json grows a
// slice by about 1.25x at a time, so a body of many small messages
// allocated about five times its slice's final size (issue 22: 21 bytes
// per body byte), and it reuses a slice's capacity and decodes into an
// element in place, which is what makes the sizes set here stick. Call it
// on a zero ChatRequest. More than MaxMessages messages is a
// *TooManyError; data that is not an object is left to the decode.
func (r *ChatRequest) Presize(data []byte) error {
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
	}); err != nil {
		var many *TooManyError
		if errors.As(err, &many) {
			return err
		}
	}
	return nil
}

// DecodeChat decodes a chat request body as encoding/json does, into a
// ChatRequest made by Presize first.
func DecodeChat(data []byte, r *ChatRequest) error {
	if err := r.Presize(data); err != nil {
		return err
	}
	return json.Unmarshal(data, r)
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
