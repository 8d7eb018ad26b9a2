package relay

import (
	"testing"
)

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
