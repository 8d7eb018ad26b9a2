package openai

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// Body returns the upstream body for req: the client's members copied byte
// for byte in their order, "model" set to the route's model (first) and, for
// streams, "stream": true and stream_options.include_usage forced so usage
// is always known; a non-stream request gets "stream": false and no
// stream_options (OpenAI rejects stream_options without stream). The client's
// own "model", "stream" and "stream_options" members are dropped (the last
// stream_options' other members are kept). A nil req.Body counts as {}.
// Nothing is decoded or re-encoded but the member keys and stream_options.
func Body(req *provider.Request, stream bool) ([]byte, error) {
	return appendBody(make([]byte, 0, len(req.Body)+len(req.Model)+64), req, stream)
}

func appendBody(b []byte, req *provider.Request, stream bool) ([]byte, error) {
	b = append(b, `{"model":`...)
	b = api.AppendString(b, req.Model)
	var opts []byte // the client's last stream_options value
	if len(req.Body) > 0 {
		err := eachMember(req.Body, func(key, member, value []byte) error {
			switch string(key) {
			case "model", "stream":
				return nil
			case "stream_options":
				opts = value
				return nil
			}
			b = append(b, ',')
			b = append(b, member...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("openai: body: %w", err)
		}
	}
	if !stream {
		return append(b, `,"stream":false}`...), nil
	}
	b = append(b, `,"stream":true,"stream_options":{"include_usage":true`...)
	if len(opts) > 0 && string(opts) != "null" {
		err := eachMember(opts, func(key, member, _ []byte) error {
			if string(key) != "include_usage" {
				b = append(b, ',')
				b = append(b, member...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("openai: stream_options: %w", err)
		}
	}
	return append(b, "}}"...), nil
}

// EmbeddingsBody returns the upstream body of an embeddings request: the
// client's members copied byte for byte, "model" set to the route's (first).
func EmbeddingsBody(req *provider.Request) ([]byte, error) {
	b := make([]byte, 0, len(req.Body)+len(req.Model)+16)
	b = append(b, `{"model":`...)
	b = api.AppendString(b, req.Model)
	if len(req.Body) > 0 {
		err := eachMember(req.Body, func(key, member, _ []byte) error {
			if string(key) != "model" {
				b = append(b, ',')
				b = append(b, member...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("openai: body: %w", err)
		}
	}
	return append(b, '}'), nil
}

var errNotObject = errors.New("not a JSON object")

// eachMember calls fn for each member of the JSON object obj with the
// decoded key, the member's bytes as written (`"key": value`) and its value's
// bytes. obj is expected to be valid JSON (the gateway validated it); on input
// it cannot walk it returns an error, never panics. Keys written with escapes
// are decoded, so `"mod\u0065l"` is "model".
func eachMember(obj []byte, fn func(key, member, value []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return fmt.Errorf("want a member name at offset %d", i)
		}
		start := i
		end, escaped, err := skipString(obj, i)
		if err != nil {
			return err
		}
		key := obj[start+1 : end-1]
		if escaped {
			var k string
			if err := json.Unmarshal(obj[start:end], &k); err != nil {
				return fmt.Errorf("member name at offset %d: %w", start, err)
			}
			key = []byte(k)
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return fmt.Errorf("want ':' at offset %d", i)
		}
		vstart := skipSpace(obj, i+1)
		vend, err := skipValue(obj, vstart)
		if err != nil {
			return err
		}
		if err := fn(key, obj[start:vend], obj[vstart:vend]); err != nil {
			return err
		}
		i = skipSpace(obj, vend)
		if i >= len(obj) {
			return errors.New("unterminated object")
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return nil
		default:
			return fmt.Errorf("want ',' or '}' at offset %d", i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at b[i] == '"'
// and whether it holds escapes.
func skipString(b []byte, i int) (end int, escaped bool, err error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped, nil
		}
	}
	return 0, false, errors.New("unterminated string")
}

// skipValue returns the offset after the value starting at b[i]: strings
// and nested objects and arrays are walked, literals and numbers end at the
// next delimiter.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("missing value")
	}
	switch b[i] {
	case '"':
		end, _, err := skipString(b, i)
		return end, err
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, _, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated object or array")
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			if i == start {
				return 0, fmt.Errorf("missing value at offset %d", i)
			}
			return i, nil
		}
		i++
	}
	if i == start {
		return 0, errors.New("missing value")
	}
	return i, nil
}
