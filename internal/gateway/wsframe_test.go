package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeFrame(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		typ      string
		generate bool
		err      string // a substring of the error; "" none
	}{
		{name: "create", in: `{"type":"response.create","model":"m","input":"hi"}`, typ: "response.create", generate: true},
		{name: "warm-up", in: `{"type":"response.create","generate":false,"model":"m"}`, typ: "response.create"},
		{name: "escaped name", in: `{"ty\u0070e":"response.create","model":"m"}`, typ: "response.create", generate: true},
		{name: "other type", in: `{"type":"response.processed","response_id":"r"}`, typ: "response.processed", generate: true},
		{name: "not JSON", in: `{"type":`, err: "not valid JSON"},
		{name: "array", in: `[1]`, err: "want a JSON object"},
		{name: "null", in: `null`, err: "want a JSON object"},
		{name: "no type", in: `{"model":"m"}`, err: "missing required field: type"},
		{name: "type not a string", in: `{"type":1}`, err: "type must be a string"},
		{name: "type twice", in: `{"type":"response.create","type":"x"}`, err: "type given twice"},
		{name: "type folded", in: `{"type":"response.create","Type":"x"}`, err: "ambiguous"},
		{name: "generate folded", in: `{"type":"response.create","GENERATE":false}`, err: "ambiguous"},
		{name: "generate not bool", in: `{"type":"response.create","generate":"no"}`, err: "generate must be true or false"},
		{name: "generate twice", in: `{"type":"response.create","generate":true,"generate":false}`, err: "generate given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := decodeFrame([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if f.typ != tc.typ || f.generate != tc.generate {
				t.Errorf("got type %q generate %v, want %q %v", f.typ, f.generate, tc.typ, tc.generate)
			}
			if f.typ == "response.create" {
				checkBody(t, f.body)
			}
		})
	}
}

// checkBody checks a response.create's body: an object without type and
// generate, with "stream": true.
func checkBody(t *testing.T, body []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if _, ok := m["type"]; ok {
		t.Errorf("body %s: type kept", body)
	}
	if _, ok := m["generate"]; ok {
		t.Errorf("body %s: generate kept", body)
	}
	if string(m["stream"]) != "true" {
		t.Errorf("body %s: stream %s, want true", body, m["stream"])
	}
}

// FuzzDecodeFrame holds decodeFrame to encoding/json's verdict: what
// encoding/json cannot read is refused; what it accepts agrees with
// encoding/json's reading of type and generate; an object whose type is a
// string, read one way, with generate absent or a boolean, is accepted.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.create","model":"m","input":[{"type":"message","role":"user","content":"hi"}]}`,
		`{"type":"response.create","generate":false,"instructions":"x","tools":[]}`,
		`{"type":"response.create","stream":false,"stream":true}`,
		`{"ty\u0070e":"response.create"}`, `{"Type":"x"}`, `{"type":null}`, `[]`, `"x"`, `{"type":"a\"b"}`,
		`{"type":"response.create","x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := decodeFrame(data)
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("accepted %q, which encoding/json refuses", data)
			}
			return
		}
		var members map[string]json.RawMessage
		isObject := json.Unmarshal(data, &members) == nil && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{"))
		if err != nil {
			if isObject && oneReadingOK(data) {
				var typ string
				gen, hasGen := members["generate"]
				if json.Unmarshal(members["type"], &typ) == nil && len(bytes.TrimSpace(members["type"])) > 0 && members["type"][0] == '"' &&
					(!hasGen || string(gen) == "true" || string(gen) == "false") {
					t.Fatalf("refused %q (%v), which encoding/json reads as type %q", data, err, typ)
				}
			}
			return
		}
		if !isObject {
			t.Fatalf("accepted %q, which is no JSON object", data)
		}
		var v struct {
			Type     string
			Generate *bool
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		want := v.Generate == nil || *v.Generate
		if v.Type != fr.typ || fr.generate != want {
			t.Fatalf("%q: got type %q generate %v; encoding/json reads %q %v", data, fr.typ, fr.generate, v.Type, want)
		}
		if fr.typ == "response.create" {
			checkBody(t, fr.body)
		}
	})
}

// oneReadingOK reports whether data's type and generate members are each
// written once and only under their exact names (the frame's rule).
func oneReadingOK(data []byte) bool {
	n := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		k := tok.(string)
		if strings.EqualFold(k, "type") || strings.EqualFold(k, "generate") {
			if k != "type" && k != "generate" {
				return false
			}
			n[k]++
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return n["type"] == 1 && n["generate"] <= 1
}
