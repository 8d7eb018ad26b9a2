package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/provider"
)

// seedEvents adds every data payload of the stream testdata, and a few
// hostile ones, to f.
func seedEvents(f *testing.F) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, line := range strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				f.Add([]byte(data))
			}
		}
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `"x"`, `{"candidates":5}`, `{"candidates":[1,"x",null,{}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b","thought":true},{"text":"c","thought":1}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"content":{"parts":[{"text":"b"}]}}]}`,
		`{"candidates":[{"index":1,"content":{"parts":[{"text":"x"}]}},{"index":0.0,"finishReason":"STOP"}]}`,
		`{"candidates":[{"index":1e400,"content":{"parts":[{"text":"x"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f\u0022","args":{"a":[1,2,{"b":"\u00e9\ud800"}]}}}]},"finishReason":"ST\u004fP"}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":null}},{"functionCall":{"args":"str"}},{"functionCall":7}]}}]}`,
		`{"promptFeedback":{"blockReason":"SAFETY"},"candidates":[]}`,
		`{"usageMetadata":{"promptTokenCount":1.5,"candidatesTokenCount":-3,"thoughtsTokenCount":1e12,"cachedContentTokenCount":"7"}}`,
		`{"error":{"code":503,"message":"over\nloaded","status":"UNAVAILABLE"}}`, `{"error":"boom"}`, `{"error":null}`,
		`{"cand\u0069dates":[{"content":{"parts":[{"t\u0065xt":"escaped keys"}]}}]}`,
		"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\xff\xfe invalid utf-8 \u2028\"}]}}]}",
		`{"candidates":[{"content":{"parts":[{"text":"a\ud83d"},{"text":"\ude00b"},{"text":"\\ud83d"}]}}]}`,
		"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"caf\xc3\"},{\"text\":\"\xa9\",\"thought\":false},{\"text\":\"\xe2\x82\"},{\"text\":\"\xac\"}]}}]}",
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]} x`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":tru}`,
		strings.Repeat(`{"a":`, 130) + `1` + strings.Repeat(`}`, 130),
		strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200),
	} {
		f.Add([]byte(s))
	}
}

// FuzzTranslate checks one event's translation against encoding/json: the
// scanner's verdict on malformed input, and the text, thoughts, tool calls
// and finish reason of the output, decoded, against the input decoded by
// encoding/json. Every output chunk must be JSON the relay reads, and the
// translator's info on it must be what api.ScanChunk finds.
func FuzzTranslate(f *testing.F) {
	seedEvents(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var tr translator
		tr.init("req-model", 1700000000, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		n, err := tr.translate(data)

		isObject := json.Valid(data) && bytes.TrimLeft(data, " \t\r\n")[0] == '{'
		deep := depth(data) > maxDepth
		malformed := errors.Is(err, provider.ErrMalformed)
		switch {
		case !isObject && !malformed:
			t.Fatalf("got %v for input encoding/json rejects (or not an object), want ErrMalformed: %q", err, data)
		case isObject && malformed && !deep:
			t.Fatalf("got %v for a valid object, want no ErrMalformed: %q", err, data)
		}
		if err != nil {
			var perr *provider.Error
			if !malformed && !errors.As(err, &perr) {
				t.Fatalf("got %T %v, want ErrMalformed or *provider.Error", err, err)
			}
			if perr != nil && !oracle(t, data).errObj && !oracle(t, data).toolFailure {
				t.Fatalf("got a *provider.Error for an event without an error member or a failed tool call: %q", data)
			}
			return
		}
		want := oracle(t, data)
		if want.errObj || want.toolFailure {
			t.Fatalf("got no error for an event with an error member or a failed tool call: %q", data)
		}
		var got result
		take := func(n int) {
			for range n {
				chunk := tr.pop()
				checkFuzzChunk(t, chunk)
				checkInfo(t, tr.info(), chunk)
				var c api.Chunk
				json.Unmarshal(chunk, &c)
				for _, ch := range c.Choices {
					got.text += ch.Delta.Content
					got.reasoning += ch.Delta.ReasoningContent
					for _, tc := range ch.Delta.ToolCalls {
						var args any
						if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
							t.Fatalf("tool call arguments %q are not JSON: %v", tc.Function.Arguments, err)
						}
						if tc.Index == nil || *tc.Index != len(got.calls) || !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" {
							t.Fatalf("tool call %d: bad index, id or type in %s", len(got.calls), chunk)
						}
						got.calls = append(got.calls, call{tc.Function.Name, args})
					}
					if ch.FinishReason != nil {
						got.finish = *ch.FinishReason
					}
				}
			}
		}
		take(n)
		if tr.finished { // the body ends after this event: the finish and usage chunks
			take(tr.close())
		}
		if (len(got.calls) > 0 || len(want.calls) > 0) && !reflect.DeepEqual(got.calls, want.calls) {
			t.Fatalf("calls: got %#v, want %#v\ninput %q", got.calls, want.calls, data)
		}
		got.usage, got.hasUsage = tr.usage, tr.hasUsage
		if got.text != want.text || got.reasoning != want.reasoning || got.finish != want.finish ||
			got.usage != want.usage || got.hasUsage != want.hasUsage {
			t.Fatalf("got %+v, want %+v\ninput %q", got, want, data)
		}
	})
}

type call struct {
	name string
	args any
}

type result struct {
	text, reasoning, finish string
	calls                   []call
	usage                   usage
	hasUsage                bool
	errObj                  bool
	toolFailure             bool // the finish says the model's tool call failed: an error
}

// oracle decodes an event with encoding/json (numbers kept as written) and
// derives what the translation must say, by the rules the package comment
// gives: candidate 0 only, a repeated member's last value, members of an
// unexpected kind ignored.
func oracle(t *testing.T, data []byte) (r result) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	if v, ok := root["error"]; ok && v != nil {
		r.errObj = true
		return r
	}
	var calls []call
	cands, _ := root["candidates"].([]any)
	objects := 0
	var finish string
	for _, c := range cands {
		cand, ok := c.(map[string]any)
		if !ok {
			continue
		}
		objects++
		if idx, ok := cand["index"].(json.Number); ok {
			if f, err := strconv.ParseFloat(string(idx), 64); err != nil || f != 0 {
				continue
			}
		}
		content, _ := cand["content"].(map[string]any)
		parts, _ := content["parts"].([]any)
		for _, p := range parts {
			part, ok := p.(map[string]any)
			if !ok {
				continue
			}
			if fc, ok := part["functionCall"].(map[string]any); ok {
				name, _ := fc["name"].(string)
				var args any = map[string]any{}
				if a, ok := fc["args"]; ok && a != nil {
					args = normalize(a)
				}
				calls = append(calls, call{name, args})
				continue
			}
			text, _ := part["text"].(string)
			if part["thought"] == true {
				r.reasoning += text
			} else {
				r.text += text
			}
		}
		if fr, ok := cand["finishReason"].(string); ok && fr != "" {
			finish = fr
		}
	}
	r.calls = calls
	r.toolFailure = toolCallFailure(finish) != nil
	switch {
	case finish != "":
		r.finish = string(finishReason([]byte(finish), len(calls) > 0))
	case objects == 0:
		if pf, ok := root["promptFeedback"].(map[string]any); ok {
			if br, _ := pf["blockReason"].(string); br != "" {
				r.finish = "content_filter"
			}
		}
	}
	if um, ok := root["usageMetadata"].(map[string]any); ok {
		r.hasUsage = true
		var bad [4]bool
		r.usage = usage{
			prompt: oracleCount(um, "promptTokenCount", &bad[0]), candidates: oracleCount(um, "candidatesTokenCount", &bad[1]),
			thoughts: oracleCount(um, "thoughtsTokenCount", &bad[2]), cached: oracleCount(um, "cachedContentTokenCount", &bad[3]),
		}
		for i, b := range bad {
			if b {
				r.usage.bad |= 1 << i
			}
		}
	}
	return r
}

// oracleCount reads the count name of um by the rule of api.Count, with
// big.Rat: absent and null are 0 and valid; anything else that is not an
// integer in [0, api.CountLimit) is 0 and sets *bad.
func oracleCount(um map[string]any, name string, bad *bool) int {
	v, ok := um[name]
	if !ok || v == nil {
		return 0
	}
	n, ok := v.(json.Number)
	if !ok {
		*bad = true
		return 0
	}
	if e := strings.IndexAny(string(n), "eE"); e >= 0 {
		if exp, err := strconv.Atoi(strings.TrimPrefix(string(n[e+1:]), "+")); err != nil || exp > 1000 || exp < -1000 {
			// Beyond big.Rat's patience: 0 when the mantissa is, else out
			// of range or a fraction.
			if m, ok := new(big.Rat).SetString(string(n[:e])); !ok || m.Sign() != 0 {
				*bad = true
			}
			return 0
		}
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || r.Sign() < 0 || !r.IsInt() || r.Num().Cmp(big.NewInt(api.CountLimit)) >= 0 {
		*bad = true
		return 0
	}
	return int(r.Num().Int64())
}

// normalize turns json.Numbers into float64, as decoding the output's
// arguments without UseNumber gives them.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return string(x) // out of range: both sides fail alike below
		}
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

// depth is the deepest nesting of objects and arrays in valid JSON.
func depth(data []byte) int {
	d, max, in := 0, 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			if d++; d > max {
				max = d
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return max
}

func checkFuzzChunk(t *testing.T, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("invalid JSON chunk: %q", data)
	}
	if _, err := api.ScanChunk(data); err != nil {
		t.Fatalf("api.ScanChunk: %v: %q", err, data)
	}
}

// FuzzStream runs whole SSE bodies through the stream, read at once and
// byte by byte: no panic, every chunk valid JSON with the ChunkInfo
// api.ScanChunk finds in it, the same events and the same kind of end
// either way, and nothing after the end.
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Add([]byte("data: {}\n\n"))
	f.Add([]byte("\xEF\xBB\xBFdata: {\"candidates\":[{\"finishReason\":\"STOP\"}]}\r\r"))
	f.Fuzz(func(t *testing.T, body []byte) {
		whole, endWhole := runStream(t, bytes.NewReader(body))
		bytewise, endBytes := runStream(t, iotest.OneByteReader(bytes.NewReader(body)))
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("events differ read whole and byte by byte:\n%q\n%q", whole, bytewise)
		}
		if kind(endWhole) != kind(endBytes) {
			t.Fatalf("ends differ: %v and %v", endWhole, endBytes)
		}
	})
}

func runStream(t *testing.T, body io.Reader) ([]string, error) {
	s := newTestStream(body)
	var counted fit.Text // exercised: what it counts is checked by TestCountText
	s.CountText(&counted)
	defer s.Reported()
	var out []string
	for range 100000 {
		ev, err := s.Next()
		if err != nil {
			if _, again := s.Next(); again != err && !(errors.Is(again, provider.ErrTruncated) && errors.Is(err, provider.ErrTruncated)) {
				t.Fatalf("got %v after the end %v, want the same end", again, err)
			}
			if k := kind(err); k == "" {
				t.Fatalf("unexpected end %T: %v", err, err)
			}
			return out, err
		}
		if len(ev.Data) > 0 {
			checkFuzzChunk(t, ev.Data)
		}
		checkInfo(t, s.ChunkInfo(), ev.Data)
		out = append(out, string(ev.Data))
	}
	t.Fatal("the stream did not end")
	return nil, nil
}

func kind(err error) string {
	var perr *provider.Error
	switch {
	case err == io.EOF:
		return "eof"
	case errors.As(err, &perr):
		return "provider.Error"
	case errors.Is(err, provider.ErrMalformed):
		return "malformed"
	case errors.Is(err, provider.ErrTruncated):
		return "truncated"
	}
	return ""
}

// FuzzUnescape checks the decoding of escaped member names and enums
// against encoding/json's.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{`abc`, `a\"b\\c\/d`, `\u00e9\ud83d\ude00`, `\ud800`, `\ud800\u0041`, `\udc00\ud800`, `\b\f\n\r\t`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		quoted := `"` + raw + `"`
		var s scanner
		s.reset([]byte(quoted))
		r, _, err := s.str()
		if (err == nil && s.i == len(quoted)) != json.Valid([]byte(quoted)) {
			t.Fatalf("scanner and encoding/json disagree on %q: %v", quoted, err)
		}
		if err != nil || s.i != len(quoted) {
			return
		}
		if !utf8.ValidString(raw) {
			return // unescape keeps raw bytes as they are; encoding/json replaces invalid ones
		}
		var want string
		json.Unmarshal([]byte(quoted), &want)
		if got := string(unescape(nil, r)); got != want {
			t.Fatalf("unescape(%q) = %q, encoding/json gives %q", raw, got, want)
		}
	})
}
