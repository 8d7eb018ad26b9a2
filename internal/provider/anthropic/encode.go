package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
)

// appendJSON appends the Messages API body r stands for, as encoding/json
// writes request without HTML escaping (members in the struct's order,
// empty ones omitted, raw members compacted), but the conversation by
// hand: a body's size is nearly all its blocks, and encoding/json makes
// every block a Marshaler (for the raw ones), which costs an encoder, a
// buffer and a compacting copy per block: 49 bytes allocated per body
// byte for a conversation of one-word messages (BenchmarkBodyShapes).
// The few members left (sampling, tools, format, thinking) are encoded
// at once by encoding/json.
func (r *request) appendJSON(b []byte) ([]byte, error) {
	rest := tail{r.Temperature, r.TopP, r.TopK, r.StopSequences, r.Tools, r.ToolChoice, r.Thinking, r.OutputConfig, r.Metadata, r.Stream}
	var tb bytes.Buffer
	enc := json.NewEncoder(&tb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&rest); err != nil {
		return nil, err
	}
	members := tb.Bytes()[1 : tb.Len()-2] // rest's members: past '{', before "}\n"
	b = slices.Grow(b, len(members)+64)
	b = append(b, `{"model":`...)
	b = api.AppendString(b, r.Model)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(r.MaxTokens), 10)
	var err error
	if len(r.System) > 0 {
		b = append(b, `,"system":`...)
		if b, err = appendBlocks(b, r.System); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			t := &r.Messages[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = api.AppendString(b, t.Role)
			b = append(b, `,"content":`...)
			if t.Content == nil {
				b = append(b, "null"...)
			} else if b, err = appendBlocks(b, t.Content); err != nil {
				return nil, err
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(append(b, ','), members...) // "stream" is always one
	return append(b, '}'), nil
}

// tail is request's members after the conversation, in its order.
type tail struct {
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int            `json:"top_k,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
	Thinking      json.RawMessage `json:"thinking,omitempty"`
	OutputConfig  *outputConfig   `json:"output_config,omitempty"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	Stream        bool            `json:"stream"`
}

// appendBlocks appends blocks as a JSON array.
func appendBlocks(b []byte, blocks []block) ([]byte, error) {
	b = append(b, '[')
	var err error
	for i := range blocks {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = blocks[i].appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendJSON appends blk: its raw form when it has one, else its members
// in the order type, text, source, id, name, input, tool_use_id, content,
// thinking, signature, data, cache_control, the empty ones left out.
func (blk *block) appendJSON(b []byte) ([]byte, error) {
	if blk.raw != nil {
		return appendCompact(b, blk.raw)
	}
	b = append(b, `{"type":`...)
	b = api.AppendString(b, blk.Type)
	b = appendText(b, `,"text":`, blk.Text)
	var err error
	if m := blk.more; m != nil {
		if s := m.Source; s != nil {
			b = append(b, `,"source":{"type":`...)
			b = api.AppendString(b, s.Type)
			b = appendText(b, `,"media_type":`, s.MediaType)
			b = appendText(b, `,"data":`, s.Data)
			b = appendText(b, `,"url":`, s.URL)
			b = append(b, '}')
		}
		b = appendText(b, `,"id":`, m.ID)
		b = appendText(b, `,"name":`, m.Name)
		if len(m.Input) > 0 {
			b = append(b, `,"input":`...)
			if b, err = appendCompact(b, m.Input); err != nil {
				return nil, err
			}
		}
		b = appendText(b, `,"tool_use_id":`, m.ToolUseID)
		if len(m.Content) > 0 {
			b = append(b, `,"content":`...)
			if b, err = appendBlocks(b, m.Content); err != nil {
				return nil, err
			}
		}
		b = appendText(b, `,"thinking":`, m.Thinking)
		b = appendText(b, `,"signature":`, m.Signature)
		b = appendText(b, `,"data":`, m.Data)
	}
	if len(blk.CacheControl) > 0 {
		b = append(b, `,"cache_control":`...)
		if b, err = appendCompact(b, blk.CacheControl); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendText appends the member name and s, unless s is empty.
func appendText(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return api.AppendString(append(b, name...), s)
}

// appendCompact appends the JSON value raw without its insignificant
// space, as encoding/json writes a raw member; raw that is not valid JSON
// is an error.
func appendCompact(b []byte, raw []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
