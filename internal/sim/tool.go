package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
)

// tool is a function a request offers, whatever the dialect declared it in.
type tool struct {
	name string
	// schema is the JSON Schema of its arguments (OpenAI "parameters",
	// Anthropic "input_schema", Gemini "parameters" or
	// "parametersJsonSchema"); empty when none was given.
	schema json.RawMessage
}

// toolCall is the one call an answer makes when X-Sim-Tool-Call asks for it.
type toolCall struct {
	id   string
	name string
	// args is the arguments object, compact JSON.
	args []byte
	// frags are args cut into the pieces streamed one per content chunk
	// (OpenAI's argument deltas, Anthropic's partial_json); they join to args.
	// A dialect that sends the call whole (Gemini) has one fragment.
	frags [][]byte
	// tokens is the simulated output tokens of the call: args read as
	// pieces of at most 4 bytes (a non-ASCII rune is a piece of its own),
	// the way estimateTokens counts text.
	tokens int
}

// pickTool returns the offered tool that X-Sim-Tool-Call names, nil when
// the header is absent. A name the request does not offer is an error
// naming the header.
func pickTool(h http.Header, tools []tool) (*tool, error) {
	name := h.Get(HeaderToolCall)
	if name == "" {
		return nil, nil
	}
	names := make([]string, 0, len(tools))
	for i := range tools {
		if tools[i].name == name {
			return &tools[i], nil
		}
		names = append(names, strconv.Quote(tools[i].name))
	}
	if len(tools) == 0 {
		return nil, &headerError{HeaderToolCall, fmt.Errorf("tool %q is not offered: the request has no tools", name)}
	}
	return nil, &headerError{HeaderToolCall, fmt.Errorf("tool %q is not offered (the request offers %s)", name, strings.Join(names, ", "))}
}

// newToolCall builds the call of t: arguments from its schema, cut into
// fragments of perChunk pieces each, or one fragment when whole is set.
func newToolCall(t *tool, id string, perChunk int, whole bool) *toolCall {
	c := &toolCall{id: id, name: t.name, args: toolArgs(t.schema)}
	var frag []byte
	n := 0
	for i := 0; i < len(c.args); {
		end := i
		for end < len(c.args) && end-i < 4 {
			if c.args[end] >= utf8.RuneSelf {
				if end == i {
					_, size := utf8.DecodeRune(c.args[end:])
					end += size
				}
				break
			}
			end++
		}
		frag = append(frag, c.args[i:end]...)
		c.tokens++
		n++
		if !whole && n == perChunk {
			c.frags = append(c.frags, frag)
			frag, n = nil, 0
		}
		i = end
	}
	if len(frag) > 0 {
		c.frags = append(c.frags, frag)
	}
	return c
}

// toolArgs returns a small arguments object for a JSON Schema: every
// property of the top-level object, in the schema's order, with a
// placeholder of its type ("sim", 1, 1.5, true, [], {}, null) or its first
// enum value. Types are read case-insensitively, so Gemini's OpenAPI-style
// "STRING" works too. A schema without properties (or none, or one that is
// not valid JSON) gives {}.
func toolArgs(schema json.RawMessage) []byte {
	var s struct {
		Properties json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return []byte("{}")
	}
	keys, vals, err := orderedObject(s.Properties)
	if err != nil || len(keys) == 0 {
		return []byte("{}")
	}
	b := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = api.AppendString(b, k)
		b = append(b, ':')
		b = append(b, placeholder(vals[i])...)
	}
	return append(b, '}')
}

// orderedObject returns the keys and raw values of a JSON object in the
// order they appear.
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("not an object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys = append(keys, t.(string))
		vals = append(vals, v)
	}
	return keys, vals, nil
}

// placeholder returns a JSON value fitting a property's schema.
func placeholder(prop json.RawMessage) []byte {
	var p struct {
		Type json.RawMessage   `json:"type"`
		Enum []json.RawMessage `json:"enum"`
	}
	if json.Unmarshal(prop, &p) != nil {
		return []byte(`"sim"`)
	}
	if len(p.Enum) > 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, p.Enum[0]) == nil {
			return buf.Bytes()
		}
	}
	var typ string
	var types []string
	if json.Unmarshal(p.Type, &typ) != nil && json.Unmarshal(p.Type, &types) == nil {
		for _, t := range types { // ["string","null"]: the first non-null type
			if typ = t; !strings.EqualFold(t, "null") {
				break
			}
		}
	}
	switch strings.ToLower(typ) {
	case "integer":
		return []byte("1")
	case "number":
		return []byte("1.5")
	case "boolean":
		return []byte("true")
	case "array":
		return []byte("[]")
	case "object":
		return []byte("{}")
	case "null":
		return []byte("null")
	}
	return []byte(`"sim"`)
}
