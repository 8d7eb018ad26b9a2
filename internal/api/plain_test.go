package api

import (
	"encoding/json"
	"testing"
)

// FuzzPlainContent: when PlainContent takes a valid JSON chunk, its
// top-level "choices" has a first choice whose delta holds only its
// content, no other choice has a delta, and the raw string decodes to that
// content.
func FuzzPlainContent(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a\"b\\\\c\u00e9"}}]}`,
		`{"x":{"delta":{"content":"b"}},"choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}]}`,
		`{"choices":[{"delta":{"content":"x","reasoning_content":"y"}}]}`,
		`{"choices":[{"delta":{"content":"x"}},{"delta":{"content":"y"}}]}`,
		`{"choices":[{"delta":{"content":"x\\"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"x"}}],"choices":[]}`,
		`{"choices":[{"index":0,"delta":{"content":"x"}},{"index":1,"delta":{"content":"y"}}]}`,
		`{"choices":[{"delta":{"content":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, ok := PlainContent(data)
		if !ok || !json.Valid(data) {
			return // the encoder decodes what the relay accepted (valid JSON) the slow way
		}
		var c struct {
			Choices []struct {
				Delta map[string]json.RawMessage `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return // not a chunk's shape: the relay would not have called it content
		}
		// The first choice's delta holds only its content; a further choice
		// (n > 1) may follow only without a delta, so there is nothing the
		// fast path leaves out.
		var want, got string
		if len(c.Choices) == 0 || len(c.Choices[0].Delta) != 1 || json.Unmarshal(c.Choices[0].Delta["content"], &want) != nil {
			t.Fatalf("PlainContent took %s (delta %v)", data, c.Choices)
		}
		for i, ch := range c.Choices[1:] {
			if ch.Delta != nil {
				t.Fatalf("PlainContent took %s, whose choice %d has a delta", data, i+1)
			}
		}
		if err := json.Unmarshal(raw, &got); err != nil || got != want {
			t.Fatalf("PlainContent(%s) = %s: %q, %v; want %q", data, raw, got, err, want)
		}
	})
}
