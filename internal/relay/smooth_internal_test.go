package relay

import (
	"bytes"
	"encoding/json"
	"testing"
)

// unquote decodes a JSON string as encoding/json does: the same text for
// every valid string (escapes, surrogate pairs, lone surrogates, invalid
// UTF-8), and false for what encoding/json refuses.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\"c\\d\/e\tf\rg\bh\fi"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00 smile"`,
		`"\ud83d alone"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, "\"bad \xff byte\"", `"\x"`, `"\u12"`, `"tab	raw"`, `"a"b"`, `""`, `"`, `x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, quoted []byte) {
		got, ok := unquote(nil, quoted)
		var want string
		err := json.Unmarshal(quoted, &want)
		// unquote gets the exact bytes of a JSON string value, no space around.
		isString := len(quoted) > 0 && quoted[0] == '"' && len(bytes.TrimSpace(quoted)) == len(quoted)
		if err == nil && isString {
			if !ok || string(got) != want {
				t.Fatalf("unquote(%q) = %q, %v; want %q, true", quoted, got, ok, want)
			}
		} else if ok && isString && len(quoted) >= 2 {
			t.Fatalf("unquote(%q) = %q, true; encoding/json refuses it: %v", quoted, got, err)
		}
	})
}

func TestContentSpan(t *testing.T) {
	tests := []struct {
		name, data string
		want       string // the span's text; "" when not plain
	}{
		{"plain", `{"id":"x","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}],"usage":null}`, `"hi"`},
		{"role too", `{"choices":[{"delta":{"role":"assistant","content":"hi","refusal":null,"reasoning_content":""}}]}`, `"hi"`},
		{"escaped", `{"choices":[{"delta":{"content":"a\"b\n"}}]}`, `"a\"b\n"`},
		{"tool call", `{"choices":[{"delta":{"content":"x","tool_calls":[{"index":0}]}}]}`, ""},
		{"reasoning", `{"choices":[{"delta":{"reasoning_content":"think"}}]}`, ""},
		{"reasoning with content", `{"choices":[{"delta":{"content":"x","reasoning":"think"}}]}`, ""},
		{"finish", `{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}`, ""},
		{"logprobs", `{"choices":[{"delta":{"content":"x"},"logprobs":{"content":[]}}]}`, ""},
		{"usage", `{"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":1}}`, ""},
		{"two choices", `{"choices":[{"delta":{"content":"x"}},{"delta":{"content":"y"}}]}`, ""},
		{"content null", `{"choices":[{"delta":{"content":null}}]}`, ""},
		{"unknown delta member", `{"choices":[{"delta":{"content":"x","audio":{"id":"a"}}}]}`, ""},
		{"not JSON", `{"choices":[`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end, ok := contentSpan([]byte(tt.data))
			got := ""
			if ok {
				got = tt.data[start:end]
			}
			if got != tt.want {
				t.Errorf("got span %q (ok %v), want %q", got, ok, tt.want)
			}
		})
	}
}
