package api

import (
	"encoding/json"
	"slices"
	"testing"
)

type typedBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ReadTyped refuses what is not an object, then a type not known (named
// by its type, whatever its other members), then a value that does not
// decode; each refusal stands at its parameter.
func TestReadTyped(t *testing.T) {
	for _, tt := range []struct {
		raw, param, msg string
	}{
		{`{"type":"text","text":"hi"}`, "", ""},
		{`"text"`, "c[1]", `c[1] must be a content block object`},
		{`{"type":"video","text":7}`, "c[1].type", `content block type "video" is not supported by the gateway here (supported: text, image)`},
		{`{"text":"hi"}`, "c[1].type", `content block type "" is not supported by the gateway here (supported: text, image)`},
		{`{"type":"text","text":7}`, "c[1]", `c[1] is not a valid text block: json: cannot unmarshal number into Go struct field typedBlock.text of type string`},
	} {
		b, err := ReadTyped[typedBlock](json.RawMessage(tt.raw), "c[1]", "content block", "text", "image")
		if tt.msg == "" {
			if err != nil || b.Text != "hi" {
				t.Errorf("%s: got %+v, %v; want the block", tt.raw, b, err)
			}
			continue
		}
		pe, ok := err.(*ParamError)
		if !ok || pe.Param != tt.param || pe.Msg != tt.msg {
			t.Errorf("%s: got %#v; want %s: %s", tt.raw, err, tt.param, tt.msg)
		}
	}
}

// FuzzReadTyped checks ReadTyped against encoding/json's verdict: it
// accepts exactly the objects json.Unmarshal decodes whose type is known,
// into the same value.
func FuzzReadTyped(f *testing.F) {
	for _, s := range []string{`{"type":"text","text":"hi"}`, `{"type":"image"}`, `{"type":"x"}`, `[]`, `{"type":"text","text":1}`, `{"TYPE":"text"}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := ReadTyped[typedBlock](raw, "p", "content block", "text", "image")
		var want typedBlock
		werr := json.Unmarshal(raw, &want)
		ok := werr == nil && slices.Contains([]string{"text", "image"}, want.Type)
		if (err == nil) != ok {
			t.Fatalf("%q: ReadTyped %v, encoding/json %v (type %q)", raw, err, werr, want.Type)
		}
		if ok && got != want {
			t.Fatalf("%q: got %+v, want %+v", raw, got, want)
		}
	})
}
