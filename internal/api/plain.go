package api

import "bytes"

// PlainContent returns the content of a chat chunk whose one choice's
// delta holds nothing but its content, written the way OpenAI and the
// adapters write it ("choices":[{"index":0,"delta":{"content":"…"}), as the
// raw JSON string (quotes and escapes as sent), so a client encoder can
// copy it into its own event without decoding the chunk. A raw '"' cannot
// occur inside a JSON string, so the pattern, found where "choices" first
// occurs, is the top-level member; no "choices" or "delta" may follow the
// content string (a later duplicate would win, or another choice follow).
// It reads only the few bytes around the content; anything else is false,
// for the caller to decode the slow way.
func PlainContent(data []byte) ([]byte, bool) {
	i := bytes.Index(data, choicesKey)
	if i < 0 || !bytes.HasPrefix(data[i:], plainKey) {
		return nil, false
	}
	start := i + len(plainKey) - 1 // the opening quote
	for k := start + 1; k < len(data); k++ {
		switch data[k] {
		case '\\':
			k++
		case '"':
			rest := data[k+1:]
			if len(rest) == 0 || rest[0] != '}' || bytes.Contains(rest, choicesKey) || bytes.Contains(rest, deltaKey) {
				return nil, false // the delta holds more, or more follows
			}
			return data[start : k+1], true
		}
	}
	return nil, false
}

var (
	plainKey   = []byte(`"choices":[{"index":0,"delta":{"content":"`)
	choicesKey = []byte(`"choices":`)
	deltaKey   = []byte(`"delta":`)
)
