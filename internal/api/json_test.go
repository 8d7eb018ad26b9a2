package api

import (
	"encoding/json"
	"testing"
)

// FuzzAppendString checks AppendString against encoding/json: valid JSON
// that decodes to the string encoding/json's encoding decodes to, for any
// bytes, as a string and as a []byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\n\r\t\b\f\x00\x1f\x7f", "é😀", "\u2028\u2029", "\xff\xfe\xc3", "<&>", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, _ := json.Marshal(s)
		var want string
		json.Unmarshal(ref, &want)
		for _, out := range [][]byte{AppendString(nil, s), AppendString(nil, []byte(s))} {
			var got string
			if err := json.Unmarshal(out, &got); err != nil || got != want {
				t.Fatalf("AppendString(%q) = %s: decodes to %q, %v; encoding/json's to %q", s, out, got, err, want)
			}
		}
	})
}

func TestAppendStringAllocs(t *testing.T) {
	b := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { b = AppendString(b[:0], "a \"quoted\"\n é \xff") }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}
