package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/streamgate/streamgate/internal/api"
)

// wsFrame is a client frame of the Responses WebSocket: its "type" and
// generate flag, and for a response.create the Responses create body it
// carries (see decodeFrame).
type wsFrame struct {
	typ      string
	generate bool   // "generate", true when absent: false is a warm-up
	body     []byte // the frame without type and generate, "stream": true
}

// frameError is a frame the gateway cannot read: answered in-band with a
// 400 naming param, the socket stays open.
type frameError struct {
	param, msg string
}

func (e *frameError) Error() string { return e.msg }

// decodeFrame reads a client's text frame, at most the socket's read limit
// long: a JSON object (encoding/json's verdict, whose scanner caps nesting
// at 10,000) whose "type" is a string and whose "generate", when present,
// is true or false. It walks only the object's top level, without
// recursion, and decodes only those two members; the rest is the
// Responses handler's to judge, as for POST /v1/responses. Each of the two
// must have one reading (STYLE 18): a duplicate, or a name encoding/json
// would also match ("Type", "GENERATE"), is refused rather than guessed.
// For a response.create the body is the frame with type and generate
// removed and "stream": true (WebSocket mode always streams: OpenAI's
// docs say stream is not used over the socket; Codex sends it true).
func decodeFrame(data []byte) (wsFrame, error) {
	f := wsFrame{generate: true}
	if !json.Valid(data) {
		return f, &frameError{msg: "invalid frame: not valid JSON"}
	}
	if i := skipJSONSpace(data); i >= len(data) || data[i] != '{' {
		return f, &frameError{msg: "invalid frame: want a JSON object"}
	}
	var sawType, sawGenerate bool
	err := api.EachMember(data, func(key, _, value []byte) error {
		switch {
		case string(key) == "type":
			if sawType {
				return &frameError{param: "type", msg: "invalid frame: type given twice"}
			}
			sawType = true
			if len(value) == 0 || value[0] != '"' || json.Unmarshal(value, &f.typ) != nil {
				return &frameError{param: "type", msg: "invalid frame: type must be a string"}
			}
		case string(key) == "generate":
			if sawGenerate {
				return &frameError{param: "generate", msg: "invalid frame: generate given twice"}
			}
			sawGenerate = true
			switch string(value) {
			case "true":
				f.generate = true
			case "false":
				f.generate = false
			default:
				return &frameError{param: "generate", msg: fmt.Sprintf("invalid frame: generate must be true or false, got %.40s", value)}
			}
		case bytes.EqualFold(key, []byte("type")), bytes.EqualFold(key, []byte("generate")):
			// encoding/json would read it as its namesake: two readings.
			return &frameError{param: string(key), msg: fmt.Sprintf("invalid frame: member %q is ambiguous: write it %q", key, bytes.ToLower(key))}
		}
		return nil
	})
	if err != nil {
		var fe *frameError
		if errors.As(err, &fe) {
			return f, fe
		}
		return f, &frameError{msg: "invalid frame: " + err.Error()} // unreachable on valid JSON
	}
	if !sawType {
		return f, &frameError{param: "type", msg: "invalid frame: missing required field: type (send {\"type\":\"response.create\", …})"}
	}
	if f.typ != "response.create" {
		return f, nil
	}
	f.body, err = api.SetMembers(data, map[string]json.RawMessage{"type": nil, "generate": nil, "stream": json.RawMessage("true")})
	if err != nil {
		return f, &frameError{msg: "invalid frame: " + err.Error()} // unreachable: data is a valid object
	}
	return f, nil
}

func skipJSONSpace(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
