package upstream

import (
	"bytes"
	"fmt"
	"testing"
	"testing/iotest"
)

// FuzzReadLines checks the stdio line reader against splitting the whole
// input on newlines, with the input read whole and a byte at a time: the
// same lines (CR before the newline dropped, blank lines skipped), and a
// line longer than the limit reported by its first bytes, never kept.
func FuzzReadLines(f *testing.F) {
	for _, s := range []string{"{\"a\":1}\n{\"b\":2}\r\n", "\n\n x \n", "no newline at the end", "0123456789abcdef\nshort\n", "\r\n\r"} {
		f.Add([]byte(s), uint8(8))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint8) {
		max := int(limit%32) + 1
		var want []string
		parts := bytes.Split(in, []byte("\n"))
		for i, p := range parts {
			last := i == len(parts)-1
			if last && len(p) == 0 {
				break
			}
			// A line is kept when it fits the limit with its line end, if
			// it has one; 2 bytes are allowed for CRLF.
			size := len(p)
			if !last {
				size++
			}
			if size > max+2 {
				if !last {
					want = append(want, fmt.Sprintf("too long: %q", p[:min(len(p), 1024)]))
				}
				continue
			}
			l := bytes.TrimRight(p, "\r\n")
			if len(bytes.TrimSpace(l)) > 0 {
				want = append(want, fmt.Sprintf("%q", l))
			}
		}
		for _, whole := range []bool{true, false} {
			var got []string
			r := bytes.NewReader(in)
			src := iotest.OneByteReader(r)
			if whole {
				src = r
			}
			readLines(src, max, func(l []byte) { got = append(got, fmt.Sprintf("%q", l)) },
				func(prefix []byte) { got = append(got, fmt.Sprintf("too long: %q", prefix)) })
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%q (limit %d, whole %v): got %v, want %v", in, max, whole, got, want)
			}
		}
	})
}
