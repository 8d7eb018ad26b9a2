package bench

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
)

// bodies builds request bodies: the JSON of each prompt is encoded once
// (without max_tokens); a request appends its max_tokens and the brace.
type bodies struct {
	prefix [][]byte // per prompt, the object without its closing brace
	full   map[[2]int][]byte
}

// newBodies encodes every prompt for model with stream, include_usage and
// the extra fields (which override the benchmark's own).
func newBodies(model string, prompts []Prompt, extra string) (*bodies, error) {
	var extraFields map[string]json.RawMessage
	if extra != "" {
		if err := json.Unmarshal([]byte(extra), &extraFields); err != nil {
			return nil, fmt.Errorf("extra body: want a JSON object: %w", err)
		}
		delete(extraFields, "max_tokens") // max_tokens is per request
	}
	b := &bodies{prefix: make([][]byte, len(prompts)), full: make(map[[2]int][]byte)}
	for i, p := range prompts {
		m := map[string]any{
			"model":          model,
			"messages":       p.Messages,
			"stream":         true,
			"stream_options": api.StreamOptions{IncludeUsage: true},
		}
		for k, v := range extraFields {
			m[k] = v
		}
		enc, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
		b.prefix[i] = enc[:len(enc)-1]
	}
	return b, nil
}

// get returns the body of prompt i with maxTokens (0 = none). Bodies of
// dataset-fixed lengths are cached, so each is built once.
func (b *bodies) get(i, maxTokens int, cache bool) []byte {
	key := [2]int{i, maxTokens}
	if cache {
		if v, ok := b.full[key]; ok {
			return v
		}
	}
	p := b.prefix[i]
	out := make([]byte, 0, len(p)+24)
	out = append(out, p...)
	if maxTokens > 0 {
		out = append(out, `,"max_tokens":`...)
		out = strconv.AppendInt(out, int64(maxTokens), 10)
	}
	out = append(out, '}')
	if cache {
		b.full[key] = out
	}
	return out
}
