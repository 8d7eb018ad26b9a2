package api

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnquoted appends the text of the JSON string quoted (quotes
// included, no space around) to dst, decoded as encoding/json decodes it: escapes resolved, a surrogate
// pair joined, a lone surrogate or an invalid UTF-8 byte made U+FFFD.
// ok is false when quoted is not a JSON string.
func AppendUnquoted(dst, quoted []byte) ([]byte, bool) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return dst, false
	}
	return AppendUnescaped(dst, quoted[1:len(quoted)-1])
}

// AppendUnescaped is AppendUnquoted for the text between the quotes.
func AppendUnescaped(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return dst, false
			}
			i += 2
			switch s[i-1] {
			case '"', '\\', '/':
				dst = append(dst, s[i-1])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := Hex4(s[i:])
				if !ok {
					return dst, false
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2, ok := rune(-1), false
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2, ok = Hex4(s[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default:
				return dst, false
			}
		case c < 0x20 || c == '"':
			return dst, false
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
		}
	}
	return dst, true
}

// Hex4 reads the four hex digits of a \u escape (also the token
// estimate's, package fit, which decodes escapes as it counts).
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// EscapedRunes counts the characters (code points) of the text between a
// JSON string's quotes, s, as its decoded form has them, without decoding
// it: an escape is one, a surrogate pair's two \u escapes one, an invalid
// UTF-8 byte one (it decodes to U+FFFD).
func EscapedRunes(s []byte) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+5 < len(s) && s[i+1] == 'u':
			// A low surrogate (\uDC00-\uDFFF) completes the pair before it.
			if r, ok := Hex4(s[i+2 : i+6]); !ok || r < 0xDC00 || r > 0xDFFF {
				n++
			}
			i += 5
		case c == '\\':
			n++
			i++
		case utf8.RuneStart(c):
			n++
		}
	}
	return n
}
