package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strconv"
	"strings"
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
		// OpenAI's usage chunk as sent with a prompt cache hit.
		{"cached usage", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764441600,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
			ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 2006, CompletionTokens: 300, TotalTokens: 2306, PromptTokensDetails: PromptTokensDetails{CachedTokens: 1920}}}},
		// The usage chunk of the gateway's Anthropic adapter: cache writes too.
		{"cache writes", `{"choices":[],"usage":{"prompt_tokens":1500,"completion_tokens":7,"total_tokens":1507,"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":480}}}`,
			ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 1500, CompletionTokens: 7, TotalTokens: 1507, PromptTokensDetails: PromptTokensDetails{CachedTokens: 1000, CacheWriteTokens: 480}}}},
		{"null details", `{"usage":{"prompt_tokens":3,"prompt_tokens_details":null}}`, ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 3}}},
		{"details not an object", `{"usage":{"prompt_tokens":3,"prompt_tokens_details":[1]}}`, ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 3}}},
		{"null cached count", `{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":null}}}`, ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 3}}},
		{"bad cached count", `{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":"2"}}}`, ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 3, Invalid: true}}},
		{"fractional cache writes", `{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cache_write_tokens":1.5}}}`, ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 3, Invalid: true}}},
		{"escaped details names", `{"usage":{"prompt_tokens":3,"prompt\u005ftokens_details":{"cache\u005fwrite_tokens":2,"cached_tokens":1}}}`,
			ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: 3, PromptTokensDetails: PromptTokensDetails{CachedTokens: 1, CacheWriteTokens: 2}}}},
		{"details outside usage", `{"choices":[],"prompt_tokens_details":{"cached_tokens":5}}`, ChunkInfo{}},
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
	for _, in := range []string{``, `{`, `not json`, `{"choices":[{"delta":{"content":"x}}]}`, `{"a":1}x`, `[1]`, `{"choices":[}`} {
		if _, err := ScanChunk([]byte(in)); err == nil {
			t.Errorf("ScanChunk(%q): got nil error, want a syntax error", in)
		}
	}
}

// TestScanChunkStrict: what json.Valid rejects, ScanChunk rejects, also in
// members it skips.
func TestScanChunkStrict(t *testing.T) {
	for _, in := range []string{
		`{"a":01}`, `{"a":-01}`, `{"a":00}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":-a}`, `{"a":+1}`,
		`{"a":1e}`, `{"a":1e+}`, `{"a":1.e3}`, `{"a":1.5.5}`, `{"a":0x10}`, `{"a":1-2}`, `{"a":1e2e3}`,
		`{"usage":{"prompt_tokens":1.}}`, `{"usage":{"prompt_tokens":-}}`, `{"usage":{"prompt_tokens":01}}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\U0041"}`, `{"a":"\`, `{"a":"\u00`,
		`{"choices":[{"delta":{"content":"\a"}}]}`, `{"k\q":1}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":nulls}`, `{"a":falsey}`,
		"{\"a\":\"\x01\"}", "{\"a\":\"\t\"}", "{\"a\":\"\n\"}", "{\"a\x00\":1}",
		"\ufeff{}", "{\"a\":1}\x00", "{\"a\":1,}", "{,}", `{"a" 1}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":}`,
	} {
		if json.Valid([]byte(in)) {
			t.Fatalf("json.Valid(%q) = true; the case is wrong", in)
		}
		if got, err := ScanChunk([]byte(in)); err == nil {
			t.Errorf("ScanChunk(%q) = %+v, nil; want a syntax error, as json.Valid rejects it", in, got)
		}
	}
	// json.Valid does not check UTF-8 inside strings; neither does ScanChunk.
	for _, in := range []string{"{\"a\":\"\xff\"}", "{\"\xed\xa0\x80\":1}", `{"a":"\ud800"}`, "{\"a\":\"\x7f\"}"} {
		if !json.Valid([]byte(in)) {
			t.Fatalf("json.Valid(%q) = false; the case is wrong", in)
		}
		if _, err := ScanChunk([]byte(in)); err != nil {
			t.Errorf("ScanChunk(%q): %v; want no error, as json.Valid accepts it", in, err)
		}
	}
}

// TestScanChunkValidShapes: valid JSON objects whose members have kinds the
// hot path does not expect are read the way encoding/json reads them
// (see reference), not rejected.
func TestScanChunkValidShapes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ChunkInfo
	}{
		{"string count", `{"usage":{"prompt_tokens":"x","completion_tokens":2}}`, ChunkInfo{HasUsage: true, Usage: Usage{CompletionTokens: 2, Invalid: true}}},
		{"null count", `{"usage":{"prompt_tokens":null,"completion_tokens":2}}`, ChunkInfo{HasUsage: true, Usage: Usage{CompletionTokens: 2}}},
		{"array and object counts", `{"usage":{"prompt_tokens":null,"completion_tokens":[1],"total_tokens":{"a":1}}}`, ChunkInfo{HasUsage: true, Usage: Usage{Invalid: true}}},
		{"usage not an object", `{"usage":"x"}`, ChunkInfo{}},
		{"usage array", `{"usage":[1,2]}`, ChunkInfo{}},
		{"choices not an array", `{"choices":{"delta":{"content":"x"}}}`, ChunkInfo{}},
		{"choices string", `{"choices":"x"}`, ChunkInfo{}},
		{"choice not an object", `{"choices":[1,"x",null,{"delta":{"content":"y"}}]}`, ChunkInfo{Content: true}},
		{"delta not an object", `{"choices":[{"delta":"x","finish_reason":"stop"}]}`, ChunkInfo{Finish: true}},
		{"delta null", `{"choices":[{"delta":null}]}`, ChunkInfo{}},
		{"content not a string", `{"choices":[{"delta":{"content":["x"],"refusal":1}}]}`, ChunkInfo{}},
		{"empty tool calls with space", `{"choices":[{"delta":{"tool_calls":[ ],"function_call":{ }}}]}`, ChunkInfo{}},
		{"tool calls string", `{"choices":[{"delta":{"tool_calls":""}}]}`, ChunkInfo{Content: true}},
		{"escaped keys", `{"choi\u0063es":[{"d\u0065lta":{"cont\u0065nt":"x"},"finish\u005freason":"stop"}],"\u0075sage":{"prompt\u005Ftokens":3}}`,
			ChunkInfo{Content: true, Finish: true, HasUsage: true, Usage: Usage{PromptTokens: 3}}},
		{"escaped non-key", `{"choi\"ces":[{"delta":{"content":"x"}}],"\u00e9rror":1,"\/":2}`, ChunkInfo{}},
		{"escaped content", `{"choices":[{"delta":{"content":"\u0000"}}]}`, ChunkInfo{Content: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if want, ok := reference([]byte(tt.in)); !ok || want != tt.want {
				t.Fatalf("reference(%s) = %+v, %v; the case is wrong", tt.in, want, ok)
			}
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

// nested returns a chunk whose "x" member nests depth levels in all, the
// chunk's own object included.
func nested(depth int, closed bool) []byte {
	b := []byte(`{"x":`)
	b = append(b, bytes.Repeat([]byte("["), depth-1)...)
	if closed {
		b = append(b, bytes.Repeat([]byte("]"), depth-1)...)
		b = append(b, '}')
	}
	return b
}

func TestScanChunkDepth(t *testing.T) {
	// A 9 MB data line nested millions of levels deep: before MaxDepth the
	// recursion overflowed the goroutine stack, a fatal error.
	for _, closed := range []bool{false, true} {
		in := nested(9<<20, closed)
		_, err := ScanChunk(in)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "nesting deeper than 128") {
			t.Errorf("ScanChunk(9 MB nested, closed %v): got %v, want a *SyntaxError about nesting", closed, err)
		}
	}
	at := func(depth int) []string {
		inner := strings.Repeat("[", depth-4) + strings.Repeat("]", depth-4)
		return []string{
			string(nested(depth, true)),
			// through the members ScanChunk reads: chunk, choices, choice, delta
			`{"choices":[{"delta":{"content":"x","x":` + inner + `}}]}`,
			`{"usage":{"a":[` + strings.Repeat("{\"a\":", depth-3) + "1" + strings.Repeat("}", depth-3) + `],"prompt_tokens":1}}`,
			`{"error":[[` + strings.Repeat("[", depth-3) + strings.Repeat("]", depth-3) + `]]}`,
		}
	}
	for _, in := range at(MaxDepth) {
		if _, err := ScanChunk([]byte(in)); err != nil {
			t.Errorf("ScanChunk(depth %d: %.40s…): %v; want no error at MaxDepth", MaxDepth, in, err)
		}
		if d := depth([]byte(in)); d != MaxDepth {
			t.Fatalf("depth(%.40s…) = %d, want %d; the case is wrong", in, d, MaxDepth)
		}
	}
	for _, in := range at(MaxDepth + 1) {
		if _, err := ScanChunk([]byte(in)); err == nil {
			t.Errorf("ScanChunk(depth %d: %.40s…): got nil error, want nesting deeper than %d", MaxDepth+1, in, MaxDepth)
		}
	}
}

func TestScanChunkUsageNumbers(t *testing.T) {
	tests := []struct {
		num  string
		want int
		ok   bool // a valid count; else it reads as 0 and the usage is Invalid
	}{
		{"12", 12, true}, {"0", 0, true}, {"-0", 0, true}, {"-0.0e5", 0, true},
		{"12.0", 12, true}, {"7e0", 7, true}, {"7E+0", 7, true}, {"1.2e3", 1200, true}, {"1.2E3", 1200, true}, {"120e-1", 12, true}, {"0.07e2", 7, true},
		{"0e999999999999", 0, true}, {"0.000e99999999999999999999", 0, true}, {"20000000000000000e-10", 2000000, true},
		{"99999999", 99999999, true}, {"9.9999999e7", 99999999, true}, {"99999999000e-3", 99999999, true},
		// Fractions are not counts.
		{"1.5", 0, false}, {"7.5", 0, false}, {"7.49", 0, false}, {"0.5", 0, false}, {"0.4", 0, false}, {"123456789e-3", 0, false},
		{"7.4999999999999999999999", 0, false}, {"1e-999999999999", 0, false}, {"99999999999999999999999e-20", 0, false},
		// Negatives are not counts.
		{"-1", 0, false}, {"-3", 0, false}, {"-3.5", 0, false}, {"-0.4", 0, false}, {"-1e3", 0, false},
		// Neither is anything from CountLimit (10^8) up.
		{"100000000", 0, false}, {"1e8", 0, false}, {"1099511627776", 0, false}, {"1.099511627776e12", 0, false},
		{"1e30", 0, false}, {"99999999999999999999999", 0, false}, {"1e400", 0, false}, {"1e999999999999", 0, false},
		{"100000000.0", 0, false}, {"1000000000e-1", 0, false},
	}
	for _, tt := range tests {
		in := `{"usage":{"prompt_tokens":` + tt.num + `,"completion_tokens":` + tt.num + `,"total_tokens":` + tt.num + `}}`
		got, err := ScanChunk([]byte(in))
		if err != nil {
			t.Errorf("ScanChunk(%s): %v", in, err)
			continue
		}
		want := ChunkInfo{HasUsage: true, Usage: Usage{PromptTokens: tt.want, CompletionTokens: tt.want, TotalTokens: tt.want, Invalid: !tt.ok}}
		if got != want {
			t.Errorf("count %s: got %+v, want %+v", tt.num, got.Usage, want.Usage)
		}
		if ref, ok := reference([]byte(in)); ok && ref != want {
			t.Errorf("reference(count %s) = %+v, want %+v", tt.num, ref.Usage, want.Usage)
		}
		var u Usage
		if err := json.Unmarshal([]byte(in[len(`{"usage":`):len(in)-1]), &u); err != nil || u != want.Usage {
			t.Errorf("json.Unmarshal(count %s) = %+v, %v; want %+v", tt.num, u, err, want.Usage)
		}
		var c TokenCount
		if err := json.Unmarshal([]byte(tt.num), &c); err != nil || c != (TokenCount{N: tt.want, Invalid: !tt.ok}) {
			t.Errorf("json.Unmarshal(%s, &TokenCount) = %+v, %v; want {%d %v}", tt.num, c, err, tt.want, !tt.ok)
		}
	}
	floats := []byte(`{"choices":[],"usage":{"prompt_tokens":12.0,"completion_tokens":7e0,"total_tokens":19}}`)
	allocs := testing.AllocsPerRun(100, func() { sink, _ = ScanChunk(floats) })
	if allocs != 0 {
		t.Errorf("ScanChunk with float counts: got %v allocs, want 0", allocs)
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
				continue // the scanner skips a choice that is not an object
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
		counts := map[string]*int{"prompt_tokens": &info.Usage.PromptTokens, "completion_tokens": &info.Usage.CompletionTokens, "total_tokens": &info.Usage.TotalTokens}
		details := map[string]*int{"cached_tokens": &info.Usage.PromptTokensDetails.CachedTokens, "cache_write_tokens": &info.Usage.PromptTokensDetails.CacheWriteTokens}
		d, _ := u["prompt_tokens_details"].(map[string]any)
		for k, dst := range details {
			if v, there := d[k]; there {
				u["details."+k] = v
				counts["details."+k] = dst
			}
		}
		for k, dst := range counts {
			v, there := u[k]
			if !there || v == nil {
				continue // absent or null: not reported
			}
			n, ok := v.(json.Number)
			if !ok {
				*dst, info.Usage.Invalid = 0, true // a string, a bool, an array, an object
				continue
			}
			c, valid, ok := refCount(n)
			if !ok {
				return ChunkInfo{}, false
			}
			*dst = c
			if !valid {
				info.Usage.Invalid = true
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

// refCount is the token count of n by exact rational arithmetic: valid
// when n is an integer in [0, CountLimit), else 0. ok is false for
// exponents big.Rat would take too long to expand.
func refCount(n json.Number) (count int, valid, ok bool) {
	if e := strings.IndexAny(string(n), "eE"); e >= 0 {
		if exp, err := strconv.Atoi(strings.TrimPrefix(string(n[e+1:]), "+")); err != nil || exp > 1000 || exp < -1000 {
			return 0, false, false
		}
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return 0, false, false
	}
	if r.Sign() < 0 || !r.IsInt() || r.Num().Cmp(big.NewInt(CountLimit)) >= 0 {
		return 0, false, true
	}
	return int(r.Num().Int64()), true, true
}

// depth returns how deeply valid JSON data nests objects and arrays.
func depth(data []byte) int {
	d, deepest, inString := 0, 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

func FuzzScanChunk(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":12.0,"completion_tokens":7e0,"total_tokens":1.95e1,"prompt_tokens_details":{"cached_tokens":0.0}}}`))
	f.Add([]byte(`{"choices":[{"delta":{"tool_calls":[{"index":0}]},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"choi\u0063es":[{"delta":{"tool_calls":[ ],"content":"\"\\\/\b\f\n\r\t\u00e9"}}]}`))
	f.Add([]byte(`{"error":{"message":"x"}}`))
	f.Add([]byte(`{"choices":[null,"x",{"delta":"x","message":{"content":"y"}}],"usage":[1]}`))
	f.Add([]byte(`{"a":-0.5e-7,"b":[true,false,null,"x"]}`))
	f.Add(nested(MaxDepth, true))
	f.Add(nested(200, true)) // deeper than MaxDepth: an error, not a stack overflow
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ScanChunk(data)
		switch {
		case !json.Valid(data):
			if err == nil {
				t.Fatalf("ScanChunk(%q) = %+v, nil; encoding/json rejects it, want an error", data, got)
			}
			return
		case bytes.TrimLeft(data, " \t\r\n")[0] != '{':
			if err == nil {
				t.Fatalf("ScanChunk(%q) = %+v, nil; not an object, want an error", data, got)
			}
			return
		case depth(data) > MaxDepth:
			if err == nil {
				t.Fatalf("ScanChunk(%q) = %+v, nil; deeper than %d, want an error", data, got, MaxDepth)
			}
			return
		case err != nil:
			t.Fatalf("ScanChunk(%q): %v; encoding/json accepts it", data, err)
		}
		if want, ok := reference(data); ok && got != want {
			t.Fatalf("ScanChunk(%s) = %+v, encoding/json says %+v", data, got, want)
		}
		// With a sink: the same verdict, and each piece is a JSON
		// string's contents.
		var sink pieces
		withText, err := ScanChunkText(data, &sink)
		if err != nil || withText != got {
			t.Fatalf("ScanChunkText(%s) = %+v, %v; ScanChunk says %+v", data, withText, err, got)
		}
		for _, p := range sink {
			var s string
			if json.Unmarshal([]byte(`"`+p+`"`), &s) != nil {
				t.Fatalf("ScanChunkText(%s): piece %q is not a JSON string's contents", data, p)
			}
		}
	})
}

// pieces is a TextSink that keeps what it gets.
type pieces []string

func (p *pieces) AddJSON(raw []byte) { *p = append(*p, string(raw)) }

// TestScanChunkText: the text of a chunk's choices reaches the sink, piece
// by piece and still escaped, in the chunk's order; other strings do not.
func TestScanChunkText(t *testing.T) {
	for _, tt := range []struct {
		name, data string
		want       []string
	}{
		{"content", `{"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"Hel\nlo"},"finish_reason":null}]}`, []string{`Hel\nlo`}},
		{"reasoning", `{"choices":[{"delta":{"reasoning_content":"hm","reasoning":"ok","refusal":"no"}}]}`, []string{"hm", "ok", "no"}},
		{"tool call", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\":1}"}}]}}]}`,
			[]string{"get", `{\"a\":1}`}},
		{"two calls", `{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"x"}},{"function":{"name":"f","arguments":""}}]}}]}`, []string{"x", "f"}},
		{"function_call", `{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{}"}}}]}`, []string{"f", "{}"}},
		{"message", `{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`, []string{"hi"}},
		{"legacy text", `{"choices":[{"text":"hi","index":0}]}`, []string{"hi"}},
		{"escaped names", `{"choices":[{"delta":{"tool_calls":[{"\u0066unction":{"n\u0061me":"f"}}]}}]}`, []string{"f"}},
		{"empty and others", `{"choices":[{"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":1}}`, nil},
		{"odd shapes", `{"choices":[{"delta":{"tool_calls":{"function":{"name":"f"}},"function_call":"x","content":1}}]}`, nil},
	} {
		var got pieces
		if _, err := ScanChunkText([]byte(tt.data), &got); err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual([]string(got), tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestUsageUnmarshalJSON(t *testing.T) {
	// A non-streaming chat.completion as vLLM-style servers send it: float
	// counts and details objects the gateway does not read.
	body := []byte(`{
	  "id": "chatcmpl-1", "object": "chat.completion", "created": 1764441600, "model": "m",
	  "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop", "logprobs": null}],
	  "usage": {
	    "prompt_tokens": 12.0, "completion_tokens": 7e0, "total_tokens": 1.9e1,
	    "prompt_tokens_details": {"cached_tokens": 0.0, "audio_tokens": null},
	    "completion_tokens_details": {"reasoning_tokens": 2, "accepted_prediction_tokens": 0, "nested": [{"a": [1.5]}]},
	    "cost": 0.00012
	  }
	}`)
	want := Usage{PromptTokens: 12, CompletionTokens: 7, TotalTokens: 19}
	// The gateway's non-streaming path decodes just this.
	var u struct {
		Usage *Usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &u); err != nil || u.Usage == nil || *u.Usage != want {
		t.Errorf("json.Unmarshal(body, &struct{Usage *Usage}) = %+v, %v; want %+v", u.Usage, err, want)
	}
	var c Completion
	if err := json.Unmarshal(body, &c); err != nil || c.Usage == nil || *c.Usage != want || c.Choices[0].Message.Content != "hi" {
		t.Errorf("json.Unmarshal(body, &Completion) = %+v, %v; want usage %+v", c, err, want)
	}
	// A chunk decodes the same way, and agrees with ScanChunk: a fraction
	// is not a count.
	chunk := []byte(`{"choices":[],"usage":{"prompt_tokens":12.0,"completion_tokens":7.4,"total_tokens":19.5,"prompt_tokens_details":{"cached_tokens":0}}}`)
	var ch Chunk
	info, err := ScanChunk(chunk)
	if jerr := json.Unmarshal(chunk, &ch); jerr != nil || err != nil || ch.Usage == nil || *ch.Usage != info.Usage || info.Usage != (Usage{PromptTokens: 12, Invalid: true}) {
		t.Errorf("json.Unmarshal(chunk) = %+v, %v; ScanChunk = %+v, %v; want both {12 0 0 Invalid}", ch.Usage, jerr, info.Usage, err)
	}

	tests := []struct {
		name    string
		in      string
		start   Usage
		want    Usage
		wantErr bool
	}{
		{"null leaves it", `null`, Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, false},
		{"absent and null counts leave them", `{"prompt_tokens":5,"completion_tokens":null}`, Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 3}, false},
		{"a string count is invalid", `{"prompt_tokens":5,"total_tokens":"12"}`, Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, Usage{PromptTokens: 5, CompletionTokens: 2, Invalid: true}, false},
		{"a negative count is invalid", `{"prompt_tokens":-1,"completion_tokens":2}`, Usage{}, Usage{CompletionTokens: 2, Invalid: true}, false},
		{"2^40 is invalid", `{"prompt_tokens":1099511627776,"completion_tokens":2}`, Usage{}, Usage{CompletionTokens: 2, Invalid: true}, false},
		{"names match exactly", `{"Prompt_Tokens":5}`, Usage{}, Usage{}, false},
		{"escaped name", `{"prompt\u005ftokens":5}`, Usage{}, Usage{PromptTokens: 5}, false},
		{"number", `5`, Usage{}, Usage{}, true},
		{"array", `[1]`, Usage{}, Usage{}, true},
		{"deeper than MaxDepth", `{"d":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, Usage{}, Usage{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.start
			err := json.Unmarshal([]byte(tt.in), &u)
			if (err != nil) != tt.wantErr || u != tt.want {
				t.Errorf("got %+v, %v; want %+v, error %v", u, err, tt.want, tt.wantErr)
			}
		})
	}
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal([]byte(`{"usage":"x"}`), &u); !errors.As(err, &te) || te.Value != "string" {
		t.Errorf(`json.Unmarshal({"usage":"x"}): got %v, want a *json.UnmarshalTypeError for a string`, err)
	}
}

var sink ChunkInfo

// BenchmarkScanChunkUsage scans OpenAI's usage chunk with its details: the
// cache reads are read without allocating.
func BenchmarkScanChunkUsage(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764441600,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		info, err := ScanChunk(data)
		if err != nil || info.Usage.PromptTokensDetails.CachedTokens != 1920 {
			b.Fatal(info, err)
		}
		sink = info
	}
}

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

// BenchmarkScanChunkText is BenchmarkScanChunk with a sink for the text.
func BenchmarkScanChunkText(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-sim-42","object":"chat.completion.chunk","created":1764441600,"model":"sim-gpt-4.1","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"usage":null}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var n byteCount
	for b.Loop() {
		info, err := ScanChunkText(data, &n)
		if err != nil {
			b.Fatal(err)
		}
		sink = info
	}
}

// byteCount is a TextSink that counts bytes.
type byteCount int

func (c *byteCount) AddJSON(raw []byte) { *c += byteCount(len(raw)) }
