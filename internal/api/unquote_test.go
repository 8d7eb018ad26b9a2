package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendUnquoted decodes a JSON string as encoding/json does: the same text
// for every valid string (escapes, surrogate pairs, lone surrogates, invalid
// UTF-8), and false for what encoding/json refuses.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\"c\\d\/e\tf\rg\bh\fi"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00 smile"`,
		`"\ud83d alone"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, "\"bad \xff byte\"", `"\x"`, `"\u12"`, `"tab	raw"`, `"a"b"`, `""`, `"`, `x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, quoted []byte) {
		got, ok := AppendUnquoted(nil, quoted)
		var want string
		err := json.Unmarshal(quoted, &want)
		// AppendUnquoted gets the exact bytes of a JSON string value, no space around.
		isString := len(quoted) > 0 && quoted[0] == '"' && len(bytes.TrimSpace(quoted)) == len(quoted)
		if err == nil && isString {
			if !ok || string(got) != want {
				t.Fatalf("AppendUnquoted(%q) = %q, %v; want %q, true", quoted, got, ok, want)
			}
		} else if ok && isString && len(quoted) >= 2 {
			t.Fatalf("AppendUnquoted(%q) = %q, true; encoding/json refuses it: %v", quoted, got, err)
		}
	})
}
