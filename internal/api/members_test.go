package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSetMembers(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		set  map[string]json.RawMessage
		want string
	}{
		{"replace in place", `{"a":1,"max_tokens":9000,"b":[2]}`,
			map[string]json.RawMessage{"max_tokens": json.RawMessage(`4096`)},
			`{"a":1,"max_tokens":4096,"b":[2]}`},
		{"append at the end", `{"a":1}`,
			map[string]json.RawMessage{"z": json.RawMessage(`true`), "m": json.RawMessage(`"x"`)},
			`{"a":1,"m":"x","z":true}`},
		{"append to empty", ` { } `,
			map[string]json.RawMessage{"a": json.RawMessage(`1`)},
			`{"a":1}`},
		{"delete", `{"a":1,"b":2,"c":3}`,
			map[string]json.RawMessage{"b": nil},
			`{"a":1,"c":3}`},
		{"delete first and last", `{"a":1,"b":2,"c":3}`,
			map[string]json.RawMessage{"a": nil, "c": nil},
			`{"b":2}`},
		{"delete absent", `{"a":1}`,
			map[string]json.RawMessage{"b": nil},
			`{"a":1}`},
		{"delete all", `{"a":1}`,
			map[string]json.RawMessage{"a": nil},
			`{}`},
		{"duplicates of a set member dropped", `{"m":1,"a":2,"m":3,"m":4}`,
			map[string]json.RawMessage{"m": json.RawMessage(`5`)},
			`{"m":5,"a":2}`},
		{"duplicates of a deleted member dropped", `{"m":1,"a":2,"m":3}`,
			map[string]json.RawMessage{"m": nil},
			`{"a":2}`},
		{"duplicates of other members kept", `{"a":1,"a":2,"m":3}`,
			map[string]json.RawMessage{"m": json.RawMessage(`0`)},
			`{"a":1,"a":2,"m":0}`},
		{"whitespace kept inside members", "{\n  \"a\" : [ 1, 2 ] ,\n  \"m\":\t1\n}\n",
			map[string]json.RawMessage{"m": json.RawMessage(`2`)},
			`{"a" : [ 1, 2 ],"m":2}`},
		{"escaped name is the name", `{"max\u005ftokens":9000,"a":1}`,
			map[string]json.RawMessage{"max_tokens": json.RawMessage(`10`)},
			`{"max_tokens":10,"a":1}`},
		{"escaped name then plain duplicate", `{"\u006d":1,"m":2}`,
			map[string]json.RawMessage{"m": json.RawMessage(`3`)},
			`{"m":3}`},
		{"escaped other name copied as written", `{"\u0061\"b":1}`,
			map[string]json.RawMessage{"m": json.RawMessage(`3`)},
			`{"\u0061\"b":1,"m":3}`},
		{"nested members untouched", `{"o":{"m":1,"x":{"m":2}},"a":[{"m":3}]}`,
			map[string]json.RawMessage{"m": json.RawMessage(`9`)},
			`{"o":{"m":1,"x":{"m":2}},"a":[{"m":3}],"m":9}`},
		{"strings with brackets and quotes", `{"s":"}]\"{[","m":1}`,
			map[string]json.RawMessage{"m": json.RawMessage(`2`)},
			`{"s":"}]\"{[","m":2}`},
		{"long strings with escapes", `{"s":"0123456789abcdef\"}\\","t":"0123456789abcdef0123\\\\","m":1}`,
			map[string]json.RawMessage{"m": json.RawMessage(`2`)},
			`{"s":"0123456789abcdef\"}\\","t":"0123456789abcdef0123\\\\","m":2}`},
		{"backslashes across the short scan", `{"s":"0123456789abcde\\\"\\","m":1}`,
			map[string]json.RawMessage{"m": nil},
			`{"s":"0123456789abcde\\\"\\"}`},
		{"non-ASCII name", `{"이름":1}`,
			map[string]json.RawMessage{"이름": json.RawMessage(`2`), "é": json.RawMessage(`3`)},
			`{"이름":2,"é":3}`},
		{"empty set copies", `{"a" :1, "b":2}`, nil, `{"a" :1,"b":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetMembers([]byte(tc.body), tc.set)
			if err != nil {
				t.Fatalf("got error %v, want %s", err, tc.want)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSetMembersErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		set        map[string]json.RawMessage
	}{
		{"empty", ``, nil},
		{"array", `[1]`, nil},
		{"string", `"{}"`, nil},
		{"null", `null`, nil},
		{"unterminated", `{"a":1`, nil},
		{"trailing data", `{"a":1} {}`, nil},
		{"bad value inside", `{"a":[1,}`, nil},
		{"bad escape", `{"a":"\x"}`, nil},
		{"bad set value", `{"a":1}`, map[string]json.RawMessage{"a": json.RawMessage(`{`)}},
		{"empty set value", `{"a":1}`, map[string]json.RawMessage{"a": {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := SetMembers([]byte(tc.body), tc.set); err == nil {
				t.Errorf("got %s, want an error", got)
			}
		})
	}
}

func TestSetMembersKeepsBody(t *testing.T) {
	body := []byte(`{"a":1,"m":2}`)
	orig := string(body)
	if _, err := SetMembers(body[:len(body):len(body)], map[string]json.RawMessage{"m": json.RawMessage(`333333`), "z": json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if string(body) != orig {
		t.Errorf("got body %s after the call, want %s", body, orig)
	}
}

func TestEachElement(t *testing.T) {
	for _, tc := range []struct {
		name, arr string
		want      []string
		err       bool
	}{
		{"empty", `[ ]`, nil, false},
		{"null", ` null`, nil, false},
		{"mixed", `[1, "a,]" ,{"b":[1,2]},[[]],null,-2.5e3]`, []string{`1`, `"a,]"`, `{"b":[1,2]}`, `[[]]`, `null`, `-2.5e3`}, false},
		{"object", `{}`, nil, true},
		{"unterminated", `[1,2`, []string{`1`, `2`}, true},
		{"missing element", `[1,,2]`, []string{`1`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := EachElement([]byte(tc.arr), func(e []byte) error {
				got = append(got, string(e))
				return nil
			})
			if (err != nil) != tc.err {
				t.Fatalf("got error %v, want error %v", err, tc.err)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEachMemberAllocs(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)
	n := testing.AllocsPerRun(100, func() {
		EachMember(body, func(key, _, value []byte) error {
			if string(key) == "messages" {
				return EachElement(value, func([]byte) error { return nil })
			}
			return nil
		})
	})
	if n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

// FuzzSetMembers checks SetMembers against a map decode: it fails exactly
// when encoding/json finds no object in body (or the set value is not
// JSON), its output decodes to the input's map with the set applied, and
// the members not set come out byte for byte in their order.
func FuzzSetMembers(f *testing.F) {
	for _, s := range []struct{ body, name, value, del string }{
		{`{"a":1,"max_tokens":9000}`, "max_tokens", `4096`, ""},
		{`{"a":1}`, "z", `[1, 2]`, "a"},
		{`{"m":1,"a":2,"m":3}`, "m", ``, ""},
		{`{"max\u005ftokens":1,"max_tokens":2}`, "max_tokens", `"x"`, "b"},
		{`{"\u00e9":1,"é":2,"\ud83d\ude00":3}`, "é", `null`, "😀"},
		{"{\"\xff\":1}", "\ufffd", `2`, ""},
		{` {"o":{"m":1}} `, "m", `{}`, "o"},
		{`[1]`, "a", `1`, ""},
		{`{"s":"0123456789abcdef\"}\\","m":"0123456789abcde\\\"\\"}`, "m", `1`, "s"},
		{`{"a":}`, "a", `1`, ""},
	} {
		f.Add([]byte(s.body), s.name, []byte(s.value), s.del)
	}
	f.Add([]byte(`{}`), "\xda", []byte(`null`), "0")
	f.Fuzz(func(t *testing.T, body []byte, name string, value []byte, del string) {
		if !utf8.ValidString(name) || !utf8.ValidString(del) {
			t.Skip("names of set are the caller's: valid UTF-8")
		}
		set := map[string]json.RawMessage{name: nil}
		if len(value) > 0 {
			set[name] = value
		}
		if del != name {
			set[del] = nil
		}
		var ref map[string]json.RawMessage
		wantErr := json.Unmarshal(body, &ref) != nil || ref == nil || (len(value) > 0 && !json.Valid(value))
		got, err := SetMembers(body, set)
		if (err != nil) != wantErr {
			t.Fatalf("SetMembers(%q) error %v, want error %v", body, err, wantErr)
		}
		if err != nil {
			return
		}
		var dec map[string]json.RawMessage
		if err := json.Unmarshal(got, &dec); err != nil {
			t.Fatalf("SetMembers(%q) = %q: %v", body, got, err)
		}
		for k, v := range set {
			if v == nil {
				delete(ref, k)
			} else {
				ref[k] = v
			}
		}
		if len(dec) != len(ref) {
			t.Fatalf("SetMembers(%q) = %q: got %d members, want %d", body, got, len(dec), len(ref))
		}
		for k, want := range ref {
			if !equalJSON(dec[k], want) {
				t.Fatalf("SetMembers(%q) = %q: member %q is %s, want %s", body, got, k, dec[k], want)
			}
		}
		// The members not set, byte for byte and in order.
		others := func(b []byte) (ms []string) {
			if err := EachMember(b, func(key, member, _ []byte) error {
				if _, ok := set[string(key)]; !ok {
					ms = append(ms, string(member))
				}
				return nil
			}); err != nil {
				t.Fatalf("EachMember(%q): %v", b, err)
			}
			return ms
		}
		if g, w := others(got), others(body); strings.Join(g, "\x00") != strings.Join(w, "\x00") {
			t.Fatalf("SetMembers(%q) = %q: other members %q, want %q", body, got, g, w)
		}
	})
}

func equalJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
