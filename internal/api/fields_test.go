package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode"
)

// testFields are the chat request's enforced fields, as the gateway lists
// them, plus an Anthropic-like nested object.
var testFields = []Field{
	{Name: "model"},
	{Name: "stream"},
	{Name: "stream_options", Fields: []Field{{Name: "include_usage"}}},
	{Name: "max_tokens"},
	{Name: "max_completion_tokens"},
	{Name: "messages", Each: true, Fields: []Field{{Name: "role"}, {Name: "content"}}},
	{Name: "tools"},
	{Name: "thinking", Fields: []Field{{Name: "type"}, {Name: "budget_tokens"}}},
}

const msgs = `"messages":[{"role":"user","content":"hi"}]`

func TestCheckFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want *FieldError // nil: no report
	}{
		{"the reported body", `{"model":"m",` + msgs + `,"max_tokens":100000,"Max_Tokens":5}`,
			&FieldError{Path: "max_tokens", Name: "Max_Tokens"}},
		{"the variant first", `{"Max_Tokens":5,"max_tokens":100000}`,
			&FieldError{Path: "max_tokens", Name: "Max_Tokens"}},
		{"a variant alone", `{"model":"m",` + msgs + `,"MAX_COMPLETION_TOKENS":5}`,
			&FieldError{Path: "max_completion_tokens", Name: "MAX_COMPLETION_TOKENS"}},
		{"an exact duplicate", `{"max_completion_tokens":100000,"model":"m","max_completion_tokens":5}`,
			&FieldError{Path: "max_completion_tokens", Name: "max_completion_tokens", Duplicate: true}},
		{"a duplicate model", `{"model":"cheap","model":"dear"}`,
			&FieldError{Path: "model", Name: "model", Duplicate: true}},
		{"an escaped duplicate", `{"max_tokens":1,"max\u005ftokens":2}`,
			&FieldError{Path: "max_tokens", Name: "max_tokens", Duplicate: true}},
		{"escaped once", `{"max\u005ftokens":2,"m\u006fdel":"m"}`, nil},
		{"an escaped variant", `{"max_tokens":1,"MAX\u005fTOKENS":2}`,
			&FieldError{Path: "max_tokens", Name: "MAX_TOKENS"}},
		{"the Kelvin sign", "{\"max_tokens\":1,\"max_to\u212aens\":2}",
			&FieldError{Path: "max_tokens", Name: "max_to\u212aens"}},
		{"the Kelvin sign escaped", `{"max_to\u212Aens":2}`,
			&FieldError{Path: "max_tokens", Name: "max_to\u212aens"}},
		{"the long s", `{"\u017ftream":true}`, &FieldError{Path: "stream", Name: "\u017ftream"}},
		{"the long s in UTF-8", "{\"\u017ftream\":true}", &FieldError{Path: "stream", Name: "\u017ftream"}},
		{"a lone surrogate is not a fold", `{"max_tokens\ud800":1,"max_tokens":2}`, nil},
		{"U+FFFD is not a fold", "{\"max_token\xff\":1,\"max_tokens\":2}", nil},
		{"dotless i folds to nothing", "{\"th\u0131nking\":{}}", nil},
		{"a longer name", `{"max_tokens_x":1,"max_tokens":2,"xmax_tokens":3}`, nil},
		{"a role variant", `{"messages":[{"role":"user","content":"a"},{"Role":"system","content":"b"}]}`,
			&FieldError{Path: "messages[1].role", Name: "Role"}},
		{"a content duplicate", `{"messages":[{"role":"user","content":"a","content":"b"}]}`,
			&FieldError{Path: "messages[0].content", Name: "content", Duplicate: true}},
		{"include_usage variant", `{"stream_options":{"include_usage":true,"Include_Usage":false}}`,
			&FieldError{Path: "stream_options.include_usage", Name: "Include_Usage"}},
		{"stream_options twice", `{"stream_options":{"include_usage":true},"stream_options":{}}`,
			&FieldError{Path: "stream_options", Name: "stream_options", Duplicate: true}},
		{"a nested problem comes first", `{"stream_options":{"include_usage":true,"include_usage":false},"stream_options":{}}`,
			&FieldError{Path: "stream_options.include_usage", Name: "include_usage", Duplicate: true}},
		{"thinking budget", `{"thinking":{"type":"enabled","BUDGET_TOKENS":1,"budget_tokens":9000}}`,
			&FieldError{Path: "thinking.budget_tokens", Name: "BUDGET_TOKENS"}},
		{"every field once", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":5,` +
			`"max_completion_tokens":5,` + msgs + `,"tools":[],"thinking":{"type":"enabled","budget_tokens":1}}`, nil},
		{"other duplicates are not the gateway's", `{"temperature":1,"Temperature":2,"temperature":3,"metadata":{"a":1,"a":2}}`, nil},
		{"content is not looked into", `{"messages":[{"role":"user","content":[{"type":"text","role":1,"Role":2}],"name":"a","name":"b"}]}`, nil},
		{"tools are not looked into", `{"tools":[{"type":"function","function":{"name":"a","Name":"b"}}]}`, nil},
		{"names in strings", `{"user":"\"max_tokens\":5,\"Max_Tokens\":6","max_tokens":1}`, nil},
		{"messages of other kinds", `{"messages":"hi","stream_options":[{"include_usage":1,"include_usage":2}]}`, nil},
		{"elements of other kinds", `{"messages":[null,"x",[{"role":1,"role":2}],{"role":"user"}]}`, nil},
		{"an empty object and array", `{"messages":[{}],"stream_options":{}}`, nil},
		{"whitespace", " {\n\"max_tokens\" : 1 ,\t\"stream\" :true , \"max_tokens\"\r:2 } ",
			&FieldError{Path: "max_tokens", Name: "max_tokens", Duplicate: true}},
		{"not an object", `[{"model":1,"model":2}]`, nil},
		{"null", `null`, nil},
		{"empty", ``, nil},
		{"cut short", `{"model":"m","model"`, nil},
		{"an unterminated name", `{"model":"m","mod`, nil},
		{"deep values are skipped", `{"tools":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `,"model":"a","model":"b"}`,
			&FieldError{Path: "model", Name: "model", Duplicate: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFields([]byte(tc.body), testFields)
			var got *FieldError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("got %v (%T), want a *FieldError or nil", err, err)
			}
			if !sameReport(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFieldErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		fe   FieldError
		want []string
	}{
		{FieldError{Path: "max_tokens", Name: "max_tokens", Duplicate: true}, []string{"duplicate field max_tokens"}},
		{FieldError{Path: "max_tokens", Name: "Max_Tokens"}, []string{`"Max_Tokens"`, "max_tokens", "case"}},
		{FieldError{Path: "max_tokens", Name: "max_to\u212aens"}, []string{`"max_to\u212aens"`}}, // not a look-alike K
	} {
		if got := tc.fe.Error(); !containsAll(got, tc.want) {
			t.Errorf("%+v: got %q, want it to hold %q", tc.fe, got, tc.want)
		}
	}
}

// TestFoldTable: the runes beyond ASCII that matchField folds are exactly
// those whose Unicode simple-fold orbit holds an ASCII letter.
func TestFoldTable(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		ascii := false
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			ascii = ascii || f < 0x80
		}
		n, _ := matchField([]byte(fmt.Sprintf(`m%cx`, r)), []Field{{Name: "msx"}, {Name: "mkx"}})
		if got := n >= 0; got != ascii {
			t.Errorf("%U: got a match %v, want %v", r, got, ascii)
		}
	}
}

func TestCheckFieldsAllocs(t *testing.T) {
	body := []byte(benchBody())
	if n := testing.AllocsPerRun(100, func() { CheckFields(body, testFields) }); n != 0 {
		t.Errorf("got %v allocations per check, want 0", n)
	}
}

// FuzzCheckFields compares CheckFields with a reference built on
// encoding/json.Decoder's tokens and strings.EqualFold, the folding
// encoding/json matches names with, on every valid JSON object; on other
// input it must only return.
func FuzzCheckFields(f *testing.F) {
	for _, s := range []string{
		`{"model":"m",` + msgs + `,"max_tokens":100000,"Max_Tokens":5}`,
		`{"max_tokens":1,"max\u005ftokens":2}`,
		"{\"max_to\u212aens\":2,\"\u017ftream\":true}",
		`{"messages":[{"role":"user","content":"a"},{"Role":"system"}],"stream_options":{"include_usage":true}}`,
		`{"stream_options":{"include_usage":true,"include_usage":false},"stream_options":{}}`,
		`{"thinking":{"type":"enabled","budget_tokens":1},"tools":[{"a":{"b":[1,2]}}],"x":"\"model\""}`,
		`{"max_tokens\ud800":1,"MODEL":"x"}`,
		benchBody(),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckFields(data, testFields)
		var got *FieldError
		if err != nil && !errors.As(err, &got) {
			t.Fatalf("got %v (%T), want a *FieldError or nil", err, err)
		}
		if !json.Valid(data) {
			return
		}
		want, isObject := refCheckFields(t, data, testFields)
		if !isObject {
			if got != nil {
				t.Fatalf("not an object: got %+v, want nil", got)
			}
			return
		}
		if !sameReport(got, want) {
			t.Fatalf("%q: got %+v, want %+v", data, got, want)
		}
	})
}

// refCheckFields is CheckFields by encoding/json's tokens; isObject is
// false when data (valid JSON) is not an object.
func refCheckFields(t *testing.T, data []byte, fields []Field) (fe *FieldError, isObject bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		t.Fatalf("valid JSON: %v", err)
	}
	if tok != json.Delim('{') {
		return nil, false
	}
	fe, err = refObject(dec, fields, "")
	if err != nil {
		t.Fatalf("valid JSON: %v", err)
	}
	return fe, true
}

// refObject checks the members of the object whose '{' dec just returned,
// up to its '}' when there is no report.
func refObject(dec *json.Decoder, fields []Field, path string) (*FieldError, error) {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		var f *Field
		for i := range fields {
			if strings.EqualFold(key, fields[i].Name) {
				f = &fields[i]
				break
			}
		}
		if f == nil {
			if err := refSkip(dec); err != nil {
				return nil, err
			}
			continue
		}
		p := f.Name
		if path != "" {
			p = path + "." + f.Name
		}
		if key != f.Name {
			return &FieldError{Path: p, Name: key}, nil
		}
		if seen[key] {
			return &FieldError{Path: p, Name: key, Duplicate: true}, nil
		}
		seen[key] = true
		tok, err = dec.Token()
		if err != nil {
			return nil, err
		}
		switch {
		case f.Fields != nil && !f.Each && tok == json.Delim('{'):
			if fe, err := refObject(dec, f.Fields, p); fe != nil || err != nil {
				return fe, err
			}
		case f.Fields != nil && f.Each && tok == json.Delim('['):
			for i := 0; dec.More(); i++ {
				tok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				if tok == json.Delim('{') {
					if fe, err := refObject(dec, f.Fields, fmt.Sprintf("%s[%d]", p, i)); fe != nil || err != nil {
						return fe, err
					}
				} else if err := refRest(dec, tok); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
		default:
			if err := refRest(dec, tok); err != nil {
				return nil, err
			}
		}
	}
	_, err := dec.Token() // '}'
	return nil, err
}

// refSkip consumes the next value.
func refSkip(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	return refRest(dec, tok)
}

// refRest consumes the rest of the value that begins with tok.
func refRest(dec *json.Decoder, tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func sameReport(a, b *FieldError) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// benchBody is a chat request of a few turns with a tool, about 2 KB.
func benchBody() string {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4.1","stream":true,"stream_options":{"include_usage":true},"max_tokens":1024,"temperature":0.7,"messages":[`)
	b.WriteString(`{"role":"system","content":"You are a helpful assistant. Answer briefly, cite sources when you can."}`)
	for i := range 6 {
		fmt.Fprintf(&b, `,{"role":"user","content":"Question %d: what is the capital of the country whose flag has a red circle on a white field, and why?"}`, i)
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Answer %d: Tokyo, because the flag described is Japan's \"Hinomaru\"."}]}`, i)
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"search","description":"web search","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}],"user":"u-1"}`)
	return b.String()
}

func BenchmarkCheckFields(b *testing.B) {
	body := []byte(benchBody())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckFields(body, testFields); err != nil {
			b.Fatal(err)
		}
	}
}
