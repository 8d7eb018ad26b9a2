package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestScanChunk(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ChunkInfo
	}{
		{"role only", `{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, ChunkInfo{}},
		{"content", `{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`, ChunkInfo{Content: true}},
		{"escaped content", `{"choices":[{"delta":{"content":"\"content\":\"x\\"}}]}`, ChunkInfo{Content: true}},
		{"reasoning", `{"choices":[{"delta":{"reasoning_content":"think"}}]}`, ChunkInfo{Content: true}},
		{"tool call", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}`, ChunkInfo{Content: true}},
		{"empty tool calls", `{"choices":[{"delta":{"tool_calls":[]}}]}`, ChunkInfo{}},
		{"finish", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, ChunkInfo{Finish: true}},
		{"usage", `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46,"prompt_tokens_details":{"cached_tokens":0}}}`,
			ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}}},
		{"whitespace", " {\n \"choices\" : [ { \"delta\" : { \"content\" : \"x\" } } ] }\n", ChunkInfo{Content: true}},
		{"error event", `{"error":{"message":"boom","type":"server_error","code":null}}`, ChunkInfo{Error: true}},
		{"null error", `{"error":null,"choices":[]}`, ChunkInfo{}},
		{"legacy text", `{"choices":[{"text":"hi","index":0}]}`, ChunkInfo{Content: true}},
		{"korean", `{"choices":[{"delta":{"content":"안녕"}}]}`, ChunkInfo{Content: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ScanChunk([]byte(tt.in))
			if err != nil {
				t.Fatalf("ScanChunk: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestScanChunkMalformed(t *testing.T) {
	for _, in := range []string{``, `{`, `not json`, `{"choices":[{"delta":{"content":"x}}]}`, `{"a":1}x`, `[1]`, `{"choices":[}`, `{"usage":{"prompt_tokens":"x"}}`} {
		if _, err := ScanChunk([]byte(in)); err == nil {
			t.Errorf("ScanChunk(%q): got nil error, want a syntax error", in)
		}
	}
}

// reference computes ChunkInfo with encoding/json on a generic tree. It
// reports ok=false for inputs the comparison cannot judge: invalid JSON,
// duplicate member names (encoding/json keeps the last, the scanner reads
// all) and integers too large for int64.
func reference(data []byte) (ChunkInfo, bool) {
	if !json.Valid(data) || hasDuplicateKeys(data) {
		return ChunkInfo{}, false
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var root any
	if d.Decode(&root) != nil {
		return ChunkInfo{}, false
	}
	obj, isObj := root.(map[string]any)
	if !isObj {
		return ChunkInfo{}, false
	}
	var info ChunkInfo
	nonEmptyString := func(v any) bool { s, ok := v.(string); return ok && s != "" }
	if choices, ok := obj["choices"].([]any); ok {
		for _, c := range choices {
			cm, ok := c.(map[string]any)
			if !ok {
				return ChunkInfo{}, false
			}
			if nonEmptyString(cm["text"]) {
				info.Content = true
			}
			if v, ok := cm["finish_reason"]; ok && v != nil {
				info.Finish = true
			}
			for _, k := range []string{"delta", "message"} {
				dm, ok := cm[k].(map[string]any)
				if !ok {
					continue
				}
				for _, f := range []string{"content", "reasoning_content", "reasoning", "refusal"} {
					if nonEmptyString(dm[f]) {
						info.Content = true
					}
				}
				for _, f := range []string{"tool_calls", "function_call"} {
					v, ok := dm[f]
					if !ok || v == nil {
						continue
					}
					raw, _ := json.Marshal(v)
					if string(raw) != "[]" && string(raw) != "{}" {
						info.Content = true
					}
				}
			}
		}
	}
	if u, ok := obj["usage"].(map[string]any); ok {
		info.HasUsage = true
		for k, dst := range map[string]*int{"prompt_tokens": &info.Usage.PromptTokens, "completion_tokens": &info.Usage.CompletionTokens, "total_tokens": &info.Usage.TotalTokens} {
			n, ok := u[k].(json.Number)
			if !ok {
				continue
			}
			if len(n) > 18 {
				return ChunkInfo{}, false
			}
			if i, err := n.Int64(); err == nil {
				*dst = int(i)
			}
		}
	}
	if v, ok := obj["error"]; ok && v != nil {
		info.Error = true
	}
	return info, true
}

// hasDuplicateKeys reports whether any object in data repeats a member name.
func hasDuplicateKeys(data []byte) bool {
	d := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj     bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.obj {
				top.wantKey = true
			}
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			if top != nil && top.obj {
				top.wantKey = true
			}
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.obj {
			top.wantKey = true
		}
	}
}

func FuzzScanChunk(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
	f.Add([]byte(`{"choices":[{"delta":{"tool_calls":[{"index":0}]},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"error":{"message":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ScanChunk(data)
		want, ok := reference(data)
		if !ok || err != nil {
			// Shapes the scanner rejects (a string where an object belongs)
			// are errors on its side; not panicking is the property here.
			return
		}
		if got != want {
			t.Fatalf("ScanChunk(%s) = %+v, encoding/json says %+v", data, got, want)
		}
	})
}

var sink ChunkInfo

func BenchmarkScanChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-sim-42","object":"chat.completion.chunk","created":1764441600,"model":"sim-gpt-4.1","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"usage":null}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		info, err := ScanChunk(data)
		if err != nil {
			b.Fatal(err)
		}
		sink = info
	}
}
