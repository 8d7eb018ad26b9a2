package gemini

import (
	"encoding/binary"
	"math/bits"
	"strconv"

	"github.com/streamgate/streamgate/internal/api"
)

// maxDepth is the deepest nesting of objects and arrays the scanner
// accepts, the event's own object being level 1: a Gemini chunk nests about
// 8 levels (functionCall args add the depth of the arguments), and the bound
// keeps a hostile "[[[[…" line from taking the goroutine's stack. It is
// api.MaxDepth's value, so what the relay would accept, this accepts.
const maxDepth = 128

// syntaxError is malformed JSON in an upstream event.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return "malformed JSON at offset " + strconv.Itoa(e.off) + ": " + e.msg
}

// scanner walks one JSON value without allocating. It accepts exactly what
// encoding/json accepts (numbers, escapes, literals and control characters
// are checked, also in the members it skips), up to maxDepth levels; like
// json.Valid it does not check that strings are valid UTF-8.
type scanner struct {
	b     []byte
	i     int
	depth int
	key   []byte // scratch for member names written with escapes
}

func (s *scanner) reset(b []byte) { s.b, s.i, s.depth = b, 0, 0 }

func (s *scanner) fail(msg string) error { return &syntaxError{off: s.i, msg: msg} }

func (s *scanner) ws() {
	b, i := s.b, s.i
	for i < len(b) && b[i] <= ' ' && space[b[i]] {
		i++
	}
	s.i = i
}

var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		if c := s.b[s.i]; c > ' ' {
			return c // the common case: no whitespace
		}
	}
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// end checks that only whitespace follows the value.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the value")
	}
	return nil
}

func (s *scanner) open() error {
	if s.depth == maxDepth {
		return s.fail("nesting deeper than " + strconv.Itoa(maxDepth))
	}
	s.depth++
	s.i++
	return nil
}

// object walks the object at s.i, calling member with each decoded name,
// positioned at its value; member must consume the value.
func (s *scanner) object(member func(key []byte) error) error {
	if s.peek() != '{' {
		return s.fail("expected an object")
	}
	return s.obj(member)
}

// obj is object once the next byte is known to be '{'.
func (s *scanner) obj(member func(key []byte) error) error {
	if err := s.open(); err != nil {
		return err
	}
	c := s.peek()
	if c == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if c != '"' {
			return s.fail("expected a member name")
		}
		key, err := s.name()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.fail("expected ':'")
		}
		// One space after the colon is how Gemini writes JSON: skip it here
		// so the member's own peek takes its fast path.
		if s.i++; s.i < len(s.b) && s.b[s.i] == ' ' {
			s.i++
		}
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
			c = s.peek()
		case '}':
			s.i++
			s.depth--
			return nil
		case 0:
			return s.fail("unterminated object")
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// array walks the array at s.i, calling elem positioned at each element.
func (s *scanner) array(elem func() error) error {
	if s.peek() != '[' {
		return s.fail("expected an array")
	}
	return s.arr(elem)
}

// arr is array once the next byte is known to be '['.
func (s *scanner) arr(elem func() error) error {
	if err := s.open(); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		case 0:
			return s.fail("unterminated array")
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

// name reads a member name, decoded: names are plain, so the first stop
// byte is usually the closing quote; str handles the rest.
func (s *scanner) name() ([]byte, error) {
	b := s.b
	i := s.i + 1
	if j := stop(b, i); j < len(b) && b[j] == '"' {
		key := b[i:j]
		s.i = j + 1
		return key, nil
	}
	key, esc, err := s.str()
	if err != nil {
		return nil, err
	}
	if esc {
		s.key = unescape(s.key[:0], key)
		key = s.key
	}
	return key, nil
}

// stop returns the index of the first quote, backslash or control
// character in b[i:], len(b) when none; eight bytes at a time.
func stop(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q, bs := w^(ones*'"'), w^(ones*'\\')
		if m := ((w-ones*0x20)&^w | (q-ones)&^q | (bs-ones)&^bs) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && !strStop[b[i]] {
		i++
	}
	return i
}

// strStop marks the bytes a string scan stops at: the closing quote, a
// backslash and the control characters JSON forbids unescaped.
var strStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str consumes the string at s.i (its opening quote) and returns its raw
// contents, still escaped, and whether they hold an escape. The raw
// contents between two quotes are a valid JSON string again, which is how
// text is copied to the output without decoding it. Eight bytes at a time
// are tested for a quote, a backslash or a control character.
func (s *scanner) str() (raw []byte, esc bool, err error) {
	b := s.b
	start := s.i + 1
	for i := start; ; {
		i = stop(b, i)
		if i >= len(b) {
			s.i = len(b)
			return nil, false, s.fail("unterminated string")
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return b[start:i], esc, nil
		case '\\':
			s.i = i
			if err := s.escape(); err != nil {
				return nil, false, err
			}
			i = s.i
			esc = true
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

// escape consumes the escape at s.i (the backslash).
func (s *scanner) escape() error {
	s.i++
	if s.i >= len(s.b) {
		return s.fail("unterminated string")
	}
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return nil
	case 'u':
		s.i++
		for range 4 {
			if s.i >= len(s.b) || unhex(s.b[s.i]) < 0 {
				return s.fail(`invalid \u escape`)
			}
			s.i++
		}
		return nil
	}
	return s.fail("invalid escape")
}

// text reads a string value: its raw contents and whether it was a string
// at all (another kind of value is consumed and reported as not a string).
func (s *scanner) text() (raw []byte, esc, ok bool, err error) {
	if s.peek() != '"' {
		return nil, false, false, s.skip()
	}
	raw, esc, err = s.str()
	return raw, esc, err == nil, err
}

// boolean reads a true or false value; another kind of value is consumed
// and reads as false.
func (s *scanner) boolean() (bool, error) {
	switch s.peek() {
	case 't':
		return true, s.lit("true")
	case 'f':
		return false, s.lit("false")
	}
	return false, s.skip()
}

// count reads a token count by the rule of api.Count (the one every
// dialect's usage is read by): present is false for null (absent, as for
// a count Gemini omits); valid is false for a value that is there but not a
// count (a string, a fraction, a negative or out-of-range number), n then 0.
func (s *scanner) count() (n int, present, valid bool, err error) {
	switch c := s.peek(); {
	case c == 'n':
		return 0, false, false, s.lit("null")
	case c != '-' && (c < '0' || c > '9'):
		return 0, true, false, s.skip()
	}
	start := s.i
	if err := s.number(); err != nil {
		return 0, false, false, err
	}
	n, valid = api.Count(s.b[start:s.i])
	return n, true, valid, nil
}

// null consumes a null literal if one comes next.
func (s *scanner) null() bool {
	s.ws()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// value consumes any value and returns its bytes.
func (s *scanner) value() ([]byte, error) {
	s.ws()
	start := s.i
	err := s.skip()
	return s.b[start:s.i], err
}

// skip consumes any value, validating it.
func (s *scanner) skip() error {
	switch c := s.peek(); {
	case c == '{':
		return s.obj(func([]byte) error { return s.skip() })
	case c == '[':
		return s.arr(s.skip)
	case c == '"':
		_, _, err := s.str()
		return err
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 0 && s.i >= len(s.b):
		return s.fail("unexpected end of JSON")
	}
	return s.fail("invalid character")
}

func (s *scanner) lit(want string) error {
	if len(s.b)-s.i < len(want) || string(s.b[s.i:s.i+len(want)]) != want {
		return s.fail("invalid literal")
	}
	s.i += len(want)
	return nil
}

// number consumes a number in JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		s.i = i
		return s.fail("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.i = i
			return s.fail("invalid number")
		}
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.i = i
			return s.fail("invalid number")
		}
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	s.i = i
	return nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// unescape appends the decoded form of raw, the contents of a JSON string
// the scanner validated, to dst, as encoding/json decodes it.
func unescape(dst, raw []byte) []byte {
	out, _ := api.AppendUnescaped(dst, raw)
	return out
}
