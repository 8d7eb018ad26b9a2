package bench

import (
	"encoding/json"
	"fmt"
	"strconv"
)

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// bodies builds request bodies: the JSON of each prompt is encoded once
// (without its output limit); a request appends its limit and the brace.
type bodies struct {
	prefix [][]byte // per prompt, the object without its closing brace
	limit  string   // the output limit's member: `,"max_tokens":`
	full   map[[2]int][]byte
	// fixed is the limit a request without one gets (Messages requires
	// max_tokens); 0 leaves it out.
	fixed int
	// extra are the --extra-body fields, for bodies built per request (a
	// trace's synthesised prompts).
	extra map[string]json.RawMessage
}

// newBodies encodes every prompt for model in apiName's request shape
// (APIChat when ""), streamed (chat: with include_usage), with the extra
// fields (which override the benchmark's own).
func newBodies(apiName, model string, prompts []Prompt, extra string) (*bodies, error) {
	var extraFields map[string]json.RawMessage
	if extra != "" {
		if err := json.Unmarshal([]byte(extra), &extraFields); err != nil {
			return nil, fmt.Errorf("extra body: want a JSON object: %w", err)
		}
		delete(extraFields, "max_tokens") // the limit is per request
		delete(extraFields, "max_output_tokens")
	}
	if apiName == "" {
		apiName = APIChat
	}
	b := &bodies{prefix: make([][]byte, len(prompts)), limit: limitField(apiName), full: make(map[[2]int][]byte), extra: extraFields}
	if apiName == APIMessages {
		b.fixed = defaultMessagesMaxTokens
	}
	for i, p := range prompts {
		enc, err := dialectBody(apiName, model, p, extraFields)
		if err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
		b.prefix[i] = enc
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
	out := make([]byte, 0, len(p)+32)
	out = append(out, p...)
	if n := cmpOr(maxTokens, b.fixed); n > 0 {
		out = append(out, b.limit...)
		out = strconv.AppendInt(out, int64(n), 10)
	}
	out = append(out, '}')
	if cache {
		b.full[key] = out
	}
	return out
}
