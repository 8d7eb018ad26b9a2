package api

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Field is a member of a request body that the gateway reads and acts on
// (routes on, clamps, counts, reserves budget for), so it must read it the
// way the upstream will. Name is the member's name as the API spells it:
// ASCII, at most 32 bytes (a longer name matches nothing). Fields, when set, are the members of
// its value read the same way: of the value itself (an object), or, with
// Each, of every element of the value (an array of objects). A value of
// another kind is not looked into; the typed decode judges it.
type Field struct {
	Name   string
	Each   bool
	Fields []Field
}

// maxFieldName bounds Field.Name; the longest enforced name,
// max_completion_tokens, has 21 bytes.
const maxFieldName = 32

// FieldError is a body that names an enforced field twice, or names a
// member that encoding/json would take for it but the upstream would not.
type FieldError struct {
	// Path is the enforced field: "max_tokens", "messages[2].role",
	// "stream_options.include_usage".
	Path string
	// Name is the member's name as the body spells it, unescaped. It is the
	// field's own name for an exact duplicate, another spelling ("Max_Tokens",
	// "max_to\u212aens" with the Kelvin sign) for a case variant.
	Name string
	// Duplicate: the field itself came a second time; else Name is a
	// variant of it.
	Duplicate bool
}

func (e *FieldError) Error() string {
	if e.Duplicate {
		return "duplicate field " + e.Path + ": the body names it more than once, and readers differ on which one counts; send it once"
	}
	return "field " + strconv.QuoteToASCII(e.Name) + " differs from " + e.Path +
		" only in case: names are case-sensitive, so the upstream would not read it as " + e.Path +
		" while a case-insensitive reader would; send " + e.Path + " exactly as named, once"
}

// CheckFields reports the first member of body, in the body's order, that
// gives an enforced field of fields two readings: a second occurrence of
// the field's name (encoding/json keeps the last, other readers the first
// or refuse it), or a name that differs from the field's but that
// encoding/json matches to it (it compares names case-insensitively, with
// Unicode simple folding: "Max_Tokens", "max_to\u212aens" with the Kelvin
// sign, "\u017ftream" with the long s). Names are compared after JSON
// unescaping, as every reader compares them: "max\u005ftokens" is
// max_tokens. The report is a *FieldError; nil means every enforced field
// has one reading.
//
// CheckFields walks body once, without decoding values, and allocates only
// for the report (BenchmarkCheckFields: a few µs for a 2 KB chat body, under
// a tenth of its json.Unmarshal). It looks into the values of fields that
// have Fields only, so its recursion is as deep as fields is, whatever the
// body's nesting; other values are skipped by counting brackets. It does
// not validate JSON: on a body that is not an object, or that it cannot
// walk, it returns nil (or the problem it met before) and leaves the
// verdict to the decode that follows. A level of fields holds at most 64
// names; names past the 64th are not checked.
func CheckFields(body []byte, fields []Field) error {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil
	}
	_, fe := checkObject(body, i, fields)
	if fe != nil {
		return fe
	}
	return nil
}

// checkObject checks the object at b[i] == '{' against fields and returns
// the offset after it; end < 0 means b could not be walked there. A
// report's Path is from this object; callers prefix theirs as it returns
// (no path is built on the way down, which would cost an allocation per
// level: escape analysis gives up on pointers kept across recursion).
func checkObject(b []byte, i int, fields []Field) (end int, fe *FieldError) {
	var seen uint64 // bit n: fields[n] met
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1, nil
		}
		kend, err := skipString(b, i)
		if err != nil {
			return -1, nil
		}
		raw := b[i+1 : kend-1]
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return -1, nil
		}
		i = skipSpace(b, i+1)
		n, exact := matchField(raw, fields)
		if n >= 0 {
			f := &fields[n]
			switch {
			case !exact:
				return -1, &FieldError{Path: f.Name, Name: unescapeName(raw)}
			case seen&(1<<n) != 0:
				return -1, &FieldError{Path: f.Name, Name: f.Name, Duplicate: true}
			}
			seen |= 1 << n
		}
		if n >= 0 && fields[n].Fields != nil && i < len(b) {
			f := &fields[n]
			switch {
			case f.Each && b[i] == '[':
				i, fe = checkEach(b, i, f)
			case !f.Each && b[i] == '{':
				if i, fe = checkObject(b, i, f.Fields); fe != nil {
					fe.Path = f.Name + "." + fe.Path
				}
			default:
				i, err = skipValue(b, i)
				if err != nil {
					i = -1
				}
			}
		} else {
			i, err = skipValue(b, i)
			if err != nil {
				i = -1
			}
		}
		if fe != nil || i < 0 {
			return -1, fe
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return -1, nil
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return -1, nil
		}
	}
}

// checkEach checks each object element of the array at b[i] == '[' against
// f.Fields; other elements are skipped.
func checkEach(b []byte, i int, f *Field) (end int, fe *FieldError) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for n := 0; ; n++ {
		var err error
		if i < len(b) && b[i] == '{' {
			if i, fe = checkObject(b, i, f.Fields); fe != nil {
				fe.Path = f.Name + "[" + strconv.Itoa(n) + "]." + fe.Path
			}
		} else if i, err = skipValue(b, i); err != nil {
			i = -1
		}
		if fe != nil || i < 0 {
			return -1, fe
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return -1, nil
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return -1, nil
		}
	}
}

// matchField returns the index of the field of fields whose name raw (a
// member name as written, between its quotes) spells under encoding/json's
// folding, and whether it spells it exactly; -1 when it spells none. It
// unescapes raw as encoding/json does: escapes decoded, invalid UTF-8 and
// lone surrogates read as U+FFFD. encoding/json folds a name rune by rune
// to the smallest rune of its Unicode simple-fold orbit (ASCII letters to
// upper case); the only runes beyond ASCII whose orbit holds an ASCII
// letter are U+017F (long s, with S and s) and U+212A (Kelvin sign, with K
// and k), so a name that holds any other is no field's.
func matchField(raw []byte, fields []Field) (n int, exact bool) {
	if len(fields) > 64 {
		fields = fields[:64]
	}
	// Most names are plain ASCII: compared as they are.
	plainASCII := true
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			plainASCII = false
			break
		}
	}
	if plainASCII {
		for n := range fields {
			name := fields[n].Name
			switch {
			case len(name) != len(raw):
			case string(raw) == name:
				return n, true
			case equalFoldASCII(raw, name):
				return n, false
			}
		}
		return -1, false
	}

	var plain, folded [maxFieldName]byte // the name unescaped, and folded
	size := 0
	exact = true
	for i := 0; i < len(raw); {
		var c byte // the rune, when ASCII
		var r rune
		switch c = raw[i]; {
		case c == '\\':
			if i+1 >= len(raw) {
				return -1, false
			}
			switch raw[i+1] {
			case 'u':
				if i+6 > len(raw) {
					return -1, false
				}
				r = 0
				for _, h := range raw[i+2 : i+6] {
					v := unhex(h)
					if v < 0 {
						return -1, false
					}
					r = r<<4 | rune(v)
				}
				i += 6
			case 'b':
				r, i = '\b', i+2
			case 'f':
				r, i = '\f', i+2
			case 'n':
				r, i = '\n', i+2
			case 'r':
				r, i = '\r', i+2
			case 't':
				r, i = '\t', i+2
			case '"', '\\', '/':
				r, i = rune(raw[i+1]), i+2
			default:
				return -1, false // not JSON; the decode refuses it
			}
		case c < utf8.RuneSelf:
			r = rune(c)
			i++
		default:
			var w int
			r, w = utf8.DecodeRune(raw[i:])
			i += w
		}
		if size == len(folded) {
			return -1, false
		}
		switch {
		case r < utf8.RuneSelf:
			c = byte(r)
			plain[size] = c
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
		case r == 0x17F: // ſ, long s
			c, exact = 'S', false
		case r == 0x212A: // K, Kelvin sign
			c, exact = 'K', false
		default:
			return -1, false
		}
		folded[size] = c
		size++
	}
	for n := range fields {
		if name := fields[n].Name; len(name) == size && equalFoldASCII(folded[:size], name) {
			return n, exact && string(plain[:size]) == name
		}
	}
	return -1, false
}

// equalFoldASCII reports whether a and name (of the same length) are equal
// with ASCII letters folded.
func equalFoldASCII(a []byte, name string) bool {
	for j := range len(a) {
		c, d := a[j], name[j]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if 'a' <= d && d <= 'z' {
			d -= 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// unescapeName returns raw, a member name as written, unescaped as
// encoding/json unescapes it.
func unescapeName(raw []byte) string {
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return string(raw) // not reached: the caller met a valid name
	}
	return s
}

var _ error = (*FieldError)(nil)
