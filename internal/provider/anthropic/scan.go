package anthropic

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
)

// maxDepth bounds the nesting of an upstream event, as api.MaxDepth bounds a
// chunk's: the scanner recurses once per level, and an event is a few levels
// deep (a server tool result, the deepest, about 6).
const maxDepth = 128

// syntaxError is an upstream event that is not valid JSON, or nests deeper
// than maxDepth.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return "invalid JSON at offset " + strconv.Itoa(e.off) + ": " + e.msg
}

// scanner walks one JSON value in b and validates it as encoding/json does
// (grammar, escapes, numbers, literals, control characters; like json.Valid
// it does not check UTF-8), without allocating: values the caller keeps are
// sub-slices of b. Member names with escapes are decoded before they are
// compared, so "\u0074ype" is "type", as encoding/json reads it.
type scanner struct {
	b     []byte
	i     int
	depth int
}

func (s *scanner) fail(msg string) error { return &syntaxError{off: s.i, msg: msg} }

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// end checks that nothing but space follows the value.
func (s *scanner) end() error {
	if s.ws(); s.i != len(s.b) {
		return s.fail("data after the value")
	}
	return nil
}

// open consumes the '{' of an object.
func (s *scanner) open() error {
	if s.peek() != '{' {
		return s.fail("want an object")
	}
	s.i++
	if s.depth++; s.depth > maxDepth {
		return s.fail("nested too deep")
	}
	return nil
}

// next reads the next member name of the object being walked, and its
// colon: the caller then reads or skips the value. n counts the members
// read so far (the caller's variable, 0 at the start); ok is false once the
// closing brace was consumed.
func (s *scanner) next(n *int) (key []byte, ok bool, err error) {
	c := s.peek()
	if *n > 0 {
		switch c {
		case '}':
			s.i++
			s.depth--
			return nil, false, nil
		case ',':
			s.i++
			c = s.peek()
		default:
			return nil, false, s.fail("want ',' or '}' after an object member")
		}
	} else if c == '}' {
		s.i++
		s.depth--
		return nil, false, nil
	}
	if c != '"' {
		return nil, false, s.fail("want a member name")
	}
	raw, escaped, err := s.str()
	if err != nil {
		return nil, false, err
	}
	key = raw[1 : len(raw)-1]
	if escaped {
		key = []byte(unquote(raw)) // rare: no real upstream escapes its member names
	}
	if s.peek() != ':' {
		return nil, false, s.fail("want ':' after a member name")
	}
	s.i++
	*n++
	return key, true, nil
}

// strSafe marks the bytes a string holds as they are: all but '"', '\\'
// and the control characters.
var strSafe = func() (t [256]bool) {
	for i := range t {
		t[i] = i >= 0x20 && i != '"' && i != '\\'
	}
	return t
}()

// str reads a string at s.i (a '"') and returns it as written, quotes
// included: a valid JSON string literal, which a chunk can carry as it is.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	start, i := s.i, s.i+1
	for {
		if i+8 <= len(s.b) {
			// Eight bytes at a time while none needs a look (SWAR: the
			// lowest flagged byte of each mask is a true match, so the
			// lowest flagged byte overall is the first one to look at).
			x := binary.LittleEndian.Uint64(s.b[i:])
			m := hasZero(x^(ones*'"')) | hasZero(x^(ones*'\\')) | (x-ones*0x20)&^x&highs
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		} else {
			for i < len(s.b) && strSafe[s.b[i]] {
				i++
			}
		}
		if i >= len(s.b) {
			s.i = i
			return nil, false, s.fail("unterminated string")
		}
		switch s.b[i] {
		case '"':
			s.i = i + 1
			return s.b[start:s.i], escaped, nil
		case '\\':
			escaped = true
			if i+1 >= len(s.b) {
				s.i = i
				return nil, false, s.fail("unterminated escape")
			}
			switch s.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s.b) || !isHex(s.b[i+2]) || !isHex(s.b[i+3]) || !isHex(s.b[i+4]) || !isHex(s.b[i+5]) {
					s.i = i
					return nil, false, s.fail(`invalid \u escape`)
				}
				i += 6
			default:
				s.i = i
				return nil, false, s.fail("invalid escape")
			}
		default:
			s.i = i
			return nil, false, s.fail("control character in string")
		}
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasZero flags the zero bytes of x (and, above a zero byte, maybe others).
func hasZero(x uint64) uint64 { return (x - ones) & ^x & highs }

func isHex(c byte) bool { return c-'0' < 10 || (c|0x20)-'a' < 6 }

// strOrSkip reads a string value, or skips a value of another kind and
// returns nil: a member that is not the string the protocol promises is
// taken as absent.
func (s *scanner) strOrSkip() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.skip()
	}
	raw, _, err := s.str()
	return raw, err
}

// number reads a number at s.i and returns it as written.
func (s *scanner) number() ([]byte, error) {
	start, i := s.i, s.i
	if i < len(s.b) && s.b[i] == '-' {
		i++
	}
	switch {
	case i < len(s.b) && s.b[i] == '0':
		i++
	case i < len(s.b) && s.b[i]-'1' < 9:
		for i < len(s.b) && s.b[i]-'0' < 10 {
			i++
		}
	default:
		s.i = i
		return nil, s.fail("invalid number")
	}
	if i < len(s.b) && s.b[i] == '.' {
		i++
		if i >= len(s.b) || s.b[i]-'0' >= 10 {
			s.i = i
			return nil, s.fail("invalid number")
		}
		for i < len(s.b) && s.b[i]-'0' < 10 {
			i++
		}
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if i >= len(s.b) || s.b[i]-'0' >= 10 {
			s.i = i
			return nil, s.fail("invalid number")
		}
		for i < len(s.b) && s.b[i]-'0' < 10 {
			i++
		}
	}
	s.i = i
	return s.b[start:i], nil
}

// count reads a token count or an index by the rule of api.Count (the one
// every dialect's usage is read by): present is false for null (absent, as
// the official SDK reads it); valid is false for a value that is there but
// not a count (a string, a fraction, a negative or out-of-range number),
// n then 0.
func (s *scanner) count() (n int64, present, valid bool, err error) {
	switch c := s.peek(); {
	case c == 'n':
		return 0, false, false, s.lit("null")
	case c != '-' && c-'0' >= 10:
		return 0, true, false, s.skip()
	}
	raw, err := s.number()
	if err != nil {
		return 0, false, false, err
	}
	v, ok := api.Count(raw)
	return int64(v), true, ok, nil
}

// skip reads and validates one value of any kind.
func (s *scanner) skip() error {
	switch c := s.peek(); {
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '{':
		if err := s.open(); err != nil {
			return err
		}
		n := 0
		for {
			_, ok, err := s.next(&n)
			if err != nil || !ok {
				return err
			}
			if err := s.skip(); err != nil {
				return err
			}
		}
	case c == '[':
		s.i++
		if s.depth++; s.depth > maxDepth {
			return s.fail("nested too deep")
		}
		if s.peek() == ']' {
			s.i++
			s.depth--
			return nil
		}
		for {
			if err := s.skip(); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				s.depth--
				return nil
			default:
				return s.fail("want ',' or ']' after an array element")
			}
		}
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c-'0' < 10:
		_, err := s.number()
		return err
	case s.i >= len(s.b):
		return s.fail("missing value")
	}
	return s.fail("invalid character")
}

func (s *scanner) lit(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.fail("invalid literal")
	}
	s.i += len(word)
	return nil
}

// raw skips a value and returns it as written.
func (s *scanner) raw() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skip(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// unquote decodes a valid JSON string literal as encoding/json does
// (invalid surrogates become U+FFFD). Values compared or shown only: the
// hot path copies literals without decoding them.
func unquote(raw []byte) string {
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v
}

// is reports whether the string literal raw decodes to want.
func is(raw []byte, want string) bool {
	if len(raw) == len(want)+2 && string(raw[1:len(raw)-1]) == want {
		return true
	}
	// An escaped spelling of want is longer than want; decode it (rare).
	return len(raw) > len(want)+2 && hasEscape(raw) && unquote(raw) == want
}

func hasEscape(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' {
			return true
		}
	}
	return false
}
