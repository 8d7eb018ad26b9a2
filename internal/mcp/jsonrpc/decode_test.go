package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Message // nil: an error containing err
		batch    bool
		code     int
		err      string
	}{
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
			want: []Message{{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}}},
		{name: "notification", in: " {\"method\":\"notifications/initialized\",\"jsonrpc\":\"2.0\"}\n",
			want: []Message{{JSONRPC: "2.0", Method: "notifications/initialized"}}},
		{name: "response with string id", in: `{"jsonrpc":"2.0","id":"a","result":{}}`,
			want: []Message{{JSONRPC: "2.0", ID: json.RawMessage(`"a"`), Result: json.RawMessage(`{}`)}}},
		{name: "error response with null id", in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error","data":[1]}}`,
			want: []Message{{JSONRPC: "2.0", ID: json.RawMessage(`null`), Error: &Error{Code: -32700, Message: "parse error", Data: json.RawMessage(`[1]`)}}}},
		{name: "escaped names and values", in: `{"json\u0072pc":"2\u002e0","method":"a\/b","id":2}`,
			want: []Message{{JSONRPC: "2.0", ID: json.RawMessage(`2`), Method: "a/b"}}},
		{name: "unknown members ignored, null params absent", in: `{"jsonrpc":"2.0","method":"m","params":null,"x":{"y":[1,2]}}`,
			want: []Message{{JSONRPC: "2.0", Method: "m"}}},
		{name: "batch", in: `[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":3,"result":null}]`, batch: true,
			want: []Message{{JSONRPC: "2.0", Method: "a"}, {JSONRPC: "2.0", ID: json.RawMessage(`3`), Result: json.RawMessage(`null`)}}},

		{name: "not JSON", in: `{"jsonrpc":"2.0",`, code: CodeParseError, err: "invalid JSON at byte 17: end of input"},
		{name: "trailing bytes", in: `{"jsonrpc":"2.0","method":"m"} x`, code: CodeParseError, err: `unexpected 'x' after the top-level value`},
		{name: "empty input", in: ``, code: CodeParseError, err: "end of input, want a JSON value"},
		{name: "control byte in string", in: "{\"jsonrpc\":\"2.0\",\"method\":\"a\tb\"}", code: CodeParseError, err: "control byte 0x09 inside a string"},
		{name: "bad number", in: `{"jsonrpc":"2.0","id":01,"method":"m"}`, code: CodeParseError, err: `unexpected '1'`},
		{name: "wrong version", in: `{"jsonrpc":"1.0","method":"m"}`, code: CodeInvalidRequest, err: `"jsonrpc" is "1.0", want "2.0"`},
		{name: "version as number", in: `{"jsonrpc":2.0,"method":"m"}`, code: CodeInvalidRequest, err: `"jsonrpc" is 2.0, want "2.0"`},
		{name: "no version", in: `{"method":"m"}`, code: CodeInvalidRequest, err: `member "jsonrpc" is missing`},
		{name: "duplicate member", in: `{"jsonrpc":"2.0","method":"a","method":"b"}`, code: CodeInvalidRequest, err: `member "method" appears twice`},
		{name: "case-folded member", in: `{"jsonrpc":"2.0","method":"a","Params":{}}`, code: CodeInvalidRequest, err: `member "Params" differs from "params" only by case`},
		{name: "kelvin-sign member", in: `{"jsonrpc":"2.0","method":"a","\u212aey":1,"parama\u017f":1}`, want: []Message{{JSONRPC: "2.0", Method: "a"}}},
		{name: "long-s folds to s", in: `{"j\u017fonrpc":"2.0","jsonrpc":"2.0","method":"a"}`, code: CodeInvalidRequest, err: `differs from "jsonrpc" only by case`},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"m"}`, code: CodeInvalidRequest, err: `"id" is {}, want a string or a number`},
		{name: "null request id", in: `{"jsonrpc":"2.0","id":null,"method":"m"}`, code: CodeInvalidRequest, err: `a request's "id" must not be null`},
		{name: "scalar params", in: `{"jsonrpc":"2.0","method":"m","params":"x"}`, code: CodeInvalidRequest, err: `"params" is "x", want an object or an array`},
		{name: "result and error", in: `{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}`, code: CodeInvalidRequest, err: `both "result" and "error"`},
		{name: "method and result", in: `{"jsonrpc":"2.0","id":1,"method":"m","result":1}`, code: CodeInvalidRequest, err: `must not have "result" or "error"`},
		{name: "response without id", in: `{"jsonrpc":"2.0","result":1}`, code: CodeInvalidRequest, err: `a response must have "id"`},
		{name: "nothing", in: `{"jsonrpc":"2.0","id":1}`, code: CodeInvalidRequest, err: `needs "method"`},
		{name: "fractional error code", in: `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`, code: CodeInvalidRequest, err: `integer "code"`},
		{name: "not an object", in: `"hello"`, code: CodeInvalidRequest, err: "a message must be a JSON object"},
		{name: "empty batch", in: ` [ ] `, batch: true, code: CodeInvalidRequest, err: "empty batch"},
		{name: "bad batch element", in: `[{"jsonrpc":"2.0","method":"a"},1]`, batch: true, code: CodeInvalidRequest, err: "(batch element 1) at byte 32: a message must be a JSON object"},
		{name: "syntax error wins over invalid message", in: `[{"jsonrpc":"1.0","method":"a"},{]`, batch: true, code: CodeParseError, err: "batch element 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, batch, err := Decode([]byte(tc.in), Limits{})
			if batch != tc.batch {
				t.Errorf("batch: got %v, want %v", batch, tc.batch)
			}
			if tc.want == nil {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("got %v, %v; want a *DecodeError", msgs, err)
				}
				if de.Code != tc.code || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q (code %d), want one containing %q (code %d)", err, de.Code, tc.err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if g, w := show(msgs), show(tc.want); g != w {
				t.Fatalf("got %s, want %s", g, w)
			}
		})
	}
}

func TestDecodeLimits(t *testing.T) {
	deep := `{"jsonrpc":"2.0","method":"m","params":` + strings.Repeat("[", 10) + strings.Repeat("]", 10) + "}"
	// The message object is depth 1, params' arrays 2..11.
	if _, _, err := Decode([]byte(deep), Limits{MaxDepth: 11}); err != nil {
		t.Fatalf("depth 11 within a limit of 11: got %v", err)
	}
	_, _, err := Decode([]byte(deep), Limits{MaxDepth: 10})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "nested deeper than the limit of 10") {
		t.Fatalf("depth 11 over a limit of 10: got %v, want ErrLimit naming the limit", err)
	}
	_, _, err = Decode([]byte(deep), Limits{MaxBytes: 20})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "over the 20-byte limit") {
		t.Fatalf("size: got %v, want ErrLimit naming the limit", err)
	}
	// encoding/json's own cap applies to any larger configured depth.
	huge := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	if _, _, err := Decode([]byte(huge), Limits{MaxDepth: 1 << 30}); !errors.Is(err, ErrLimit) {
		t.Fatalf("depth 10001: got %v, want ErrLimit", err)
	}
}

func show(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "{%q id=%s method=%q params=%s result=%s", m.JSONRPC, m.ID, m.Method, m.Params, m.Result)
		if m.Error != nil {
			fmt.Fprintf(&b, " error=%d/%q/%s", m.Error.Code, m.Error.Message, m.Error.Data)
		}
		b.WriteString("}")
	}
	return b.String()
}

// refKind is the reference's verdict on an input.
type refKind int

const (
	refOK refKind = iota
	refParse
	refInvalid
)

// reference decodes data with encoding/json alone, by the rules Decode
// documents: the oracle of FuzzDecode.
func reference(data []byte) ([]Message, bool, refKind) {
	if !json.Valid(data) {
		return nil, false, refParse
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if trimmed[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal(data, &elems); err != nil {
			panic(err)
		}
		if len(elems) == 0 {
			return nil, true, refInvalid
		}
		msgs := make([]Message, len(elems))
		for i, e := range elems {
			if !refMessage(e, &msgs[i]) {
				return nil, true, refInvalid
			}
		}
		return msgs, true, refOK
	}
	var m Message
	if !refMessage(bytes.TrimRight(trimmed, " \t\r\n"), &m) {
		return nil, false, refInvalid
	}
	return []Message{m}, false, refOK
}

func refMessage(raw json.RawMessage, m *Message) bool {
	if raw[0] != '{' {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		panic(err)
	}
	members := map[string]json.RawMessage{}
	known := []string{"jsonrpc", "id", "method", "params", "result", "error"}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			panic(err)
		}
		key := tok.(string)
		for _, k := range known {
			if key == k {
				if _, dup := members[k]; dup {
					return false
				}
				members[k] = val
			} else if strings.EqualFold(key, k) {
				return false
			}
		}
	}
	var version string
	if err := json.Unmarshal(members["jsonrpc"], &version); err != nil || version != "2.0" || members["jsonrpc"][0] != '"' {
		return false
	}
	m.JSONRPC = version
	if v, ok := members["method"]; ok {
		if v[0] != '"' {
			return false
		}
		if err := json.Unmarshal(v, &m.Method); err != nil {
			panic(err)
		}
	}
	if v, ok := members["id"]; ok {
		var id any
		if err := json.Unmarshal(v, &id); err != nil {
			panic(err)
		}
		switch id.(type) {
		case string, float64, nil:
		default:
			return false
		}
		m.ID = v
	}
	if v, ok := members["params"]; ok && string(v) != "null" {
		if v[0] != '{' && v[0] != '[' {
			return false
		}
		m.Params = v
	}
	if v, ok := members["result"]; ok {
		m.Result = v
	}
	if v, ok := members["error"]; ok {
		var e map[string]any
		if json.Unmarshal(v, &e) != nil || e == nil {
			return false
		}
		var typed struct {
			Code    *int64          `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if json.Unmarshal(v, &typed) != nil || typed.Code == nil || typed.Message == nil {
			return false
		}
		m.Error = &Error{Code: int(*typed.Code), Message: *typed.Message, Data: typed.Data}
	}
	_, hasMethod := members["method"]
	switch {
	case hasMethod:
		return m.Result == nil && m.Error == nil && (m.ID == nil || string(m.ID) != "null")
	case m.Result != nil && m.Error != nil, m.Result == nil && m.Error == nil:
		return false
	}
	return m.ID != nil
}

// depthOf is the deepest nesting of arrays and objects in data, read as JSON
// as far as it goes.
func depthOf(data []byte) int {
	depth, max, inStr, esc := 0, 0, false, false
	for _, c := range data {
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case c == '[' || c == '{':
			depth++
			if depth > max {
				max = depth
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return max
}

// FuzzDecode checks Decode against encoding/json on the whole input: the
// same verdict (valid message, invalid JSON, invalid message) and the same
// messages, and a limit error exactly when the input is over a limit.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,2.5e3,"x"]}}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"hi \u00e9\n"}]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m","data":null}}`,
		`[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":3,"result":null}]`,
		`{"jsonrpc":"2.0","Method":"a"}`, `{"jsonrpc":"2.0","method":"a","method":"a"}`, `[]`, `[1]`,
		`{"jsonrpc":"2\u002e0","method":"\ud800"}`, "{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
		`{"jsonrpc":"2.0","id":-0.0e+1,"method":"m","params":[[[[[]]]]]}`, `{"a":tru}`, `"`, `-`, ` `,
	} {
		f.Add([]byte(s))
	}
	const depth = 5
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantBatch, kind := reference(data)
		for _, lim := range []Limits{{MaxDepth: maxDepthCap}, {MaxDepth: depth}} {
			got, batch, err := Decode(data, lim)
			if errors.Is(err, ErrLimit) {
				if d := depthOf(data); d <= lim.MaxDepth {
					t.Fatalf("%q: got %v at depth %d, within the limit of %d", data, err, d, lim.MaxDepth)
				}
				continue
			}
			if kind != refParse && depthOf(data) > lim.MaxDepth {
				t.Fatalf("%q: depth %d over the limit of %d: got %v, want ErrLimit", data, depthOf(data), lim.MaxDepth, err)
			}
			var de *DecodeError
			switch kind {
			case refOK:
				if err != nil {
					t.Fatalf("%q: got %v, want %s", data, err, show(want))
				}
				if batch != wantBatch || show(got) != show(want) {
					t.Fatalf("%q: got %s (batch %v), want %s (batch %v)", data, show(got), batch, show(want), wantBatch)
				}
			case refParse:
				if !errors.As(err, &de) || de.Code != CodeParseError {
					t.Fatalf("%q: encoding/json finds it invalid; got %v, %v", data, show(got), err)
				}
			case refInvalid:
				if !errors.As(err, &de) || de.Code != CodeInvalidRequest {
					t.Fatalf("%q: got %v, %v; want an invalid message", data, show(got), err)
				}
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"search","arguments":{"query":"streamgate mcp gateway","limit":10},"_meta":{"progressToken":"p-17"}}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := Decode(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
