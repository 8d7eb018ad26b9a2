package api

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// MaxDepth is the deepest nesting of objects and arrays ScanChunk (and
// Usage.UnmarshalJSON) accepts; the chunk's own object is level 1. Real
// chunks nest fewer than 10 levels (tool-call arguments are a string, not a
// tree), so 128 leaves room for any provider's extra members while bounding
// the scanner's recursion: a 9 MB data line of "[[[[…" would otherwise
// overflow the goroutine stack and kill the process. encoding/json caps
// nesting at 10,000, which is far more stack than a per-chunk parse on the
// hot path should be allowed to take.
const MaxDepth = 128

// ChunkInfo is what the hot path needs to know about one stream chunk.
type ChunkInfo struct {
	// Content is true when a choice carries content, reasoning, refusal or
	// tool-call text: the chunk counts as a token for TTFT and ITL.
	// Role-only, finish-only and usage-only chunks leave it false.
	Content bool
	// Finish is true when a choice has a non-null finish_reason.
	Finish bool
	// HasUsage is true when the chunk carries a "usage" object (not null,
	// not some other kind of value).
	HasUsage bool
	// Error is true when the chunk holds a non-null "error" member, the way
	// OpenAI-compatible servers report a failure after the stream started.
	// (Before Usage: the four flags share a word, and ChunkInfo, copied for
	// every chunk, stays 8 words with Usage.Invalid.)
	Error bool
	Usage Usage
}

// SyntaxError reports malformed chunk JSON, or nesting deeper than MaxDepth.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return "api: malformed chunk JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// ScanChunk reads a chat.completion.chunk JSON object and reports its
// content, finish and usage without allocating (except on error). It walks
// the bytes once and skips every member it does not need, so it costs far
// less than a full decode and never re-encodes the chunk.
//
// It accepts exactly the objects encoding/json accepts, up to MaxDepth
// levels of nesting: a value that is not a JSON object, malformed JSON
// (numbers, escapes, literals and control characters are checked, also in
// skipped members) or nesting deeper than MaxDepth returns a *SyntaxError.
// Like json.Valid, it does not check that strings are valid UTF-8. A member
// of an unexpected kind (a "choices" that is not an array, a choice or
// "delta" that is not an object, a string count) is skipped, not an error.
// Member names are matched exactly, after unescaping (\u0063 is "c"); a
// repeated member is read each time (encoding/json keeps the last).
//
// Usage counts, prompt_tokens_details' cached_tokens and
// cache_write_tokens included, are read by the rule of Count: integers,
// integral floats and exponent forms (12.0, 7e0, 1.2e3) as their value; a
// count that is negative, fractional, not below CountLimit or not a number
// (a string "12") reads as 0 and makes the usage Invalid. A null count is
// not reported: it leaves its field as it was.
func ScanChunk(data []byte) (ChunkInfo, error) { return ScanChunkText(data, nil) }

// TextSink receives the text a chunk carries, piece by piece: each piece
// is a JSON string's contents, without its quotes and still escaped
// (fit.Text counts them).
type TextSink interface {
	AddJSON(raw []byte)
}

// ScanChunkText is ScanChunk that also gives t the text of the chunk's
// choices as it walks them: content, reasoning_content, reasoning and
// refusal (of delta or message), legacy text, and the name and arguments
// of each tool call (tool_calls[].function, function_call), in the
// chunk's order. A nil t is ScanChunk.
func ScanChunkText(data []byte, t TextSink) (ChunkInfo, error) {
	s := scanner{b: data, sink: t}
	var info ChunkInfo
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "choices":
			if s.peek() != '[' {
				return s.skip()
			}
			return s.array(func() error { return s.choice(&info) })
		case "usage":
			if s.peek() != '{' {
				return s.skip()
			}
			info.HasUsage = true
			return s.usage(&info.Usage)
		case "error":
			if !s.null() {
				info.Error = true
				return s.skip()
			}
			return nil
		}
		return s.skip()
	})
	if err != nil {
		return info, err
	}
	return info, s.end()
}

func (s *scanner) choice(info *ChunkInfo) error {
	if s.peek() != '{' {
		return s.skip()
	}
	return s.object(func(key []byte) error {
		switch string(key) {
		case "delta", "message":
			if s.peek() != '{' {
				return s.skip()
			}
			return s.object(func(k []byte) error {
				switch string(k) {
				case "content", "reasoning_content", "reasoning", "refusal":
					return s.text(&info.Content)
				case "tool_calls", "function_call":
					if s.null() {
						return nil
					}
					if !s.empty() {
						info.Content = true
					}
					if s.sink == nil {
						return s.skip()
					}
					if string(k) == "function_call" {
						return s.function()
					}
					if s.peek() != '[' {
						return s.skip()
					}
					return s.array(func() error {
						if s.peek() != '{' {
							return s.skip()
						}
						return s.object(func(k []byte) error {
							if string(k) == "function" {
								return s.function()
							}
							return s.skip()
						})
					})
				}
				return s.skip()
			})
		case "text": // legacy completions stream
			return s.text(&info.Content)
		case "finish_reason":
			if s.null() {
				return nil
			}
			info.Finish = true
			return s.skip()
		}
		return s.skip()
	})
}

// usage reads the counts of a usage object into u, with the cache reads
// and writes of its prompt_tokens_details (a details value that is not an
// object is skipped, like any other member of unexpected kind).
func (s *scanner) usage(u *Usage) error {
	return s.object(func(k []byte) error {
		switch string(k) {
		case "prompt_tokens":
			return s.count(&u.PromptTokens, u)
		case "completion_tokens":
			return s.count(&u.CompletionTokens, u)
		case "total_tokens":
			return s.count(&u.TotalTokens, u)
		case "prompt_tokens_details":
			if s.peek() != '{' {
				return s.skip()
			}
			d := &u.PromptTokensDetails
			return s.object(func(k []byte) error {
				switch string(k) {
				case "cached_tokens":
					return s.count(&d.CachedTokens, u)
				case "cache_write_tokens":
					return s.count(&d.CacheWriteTokens, u)
				}
				return s.skip()
			})
		}
		return s.skip()
	})
}

// count reads a token count into dst: null leaves dst as it was, a value
// that is not a valid count (see Count) sets it to 0 and u.Invalid.
func (s *scanner) count(dst *int, u *Usage) error {
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		if s.null() {
			return nil
		}
		*dst, u.Invalid = 0, true
		return s.skip()
	}
	start := s.i
	if err := s.number(); err != nil {
		return err
	}
	n, ok := Count(s.b[start:s.i])
	*dst = n
	if !ok {
		u.Invalid = true
	}
	return nil
}

// text skips a value and sets *nonEmpty when it is a non-empty string,
// which goes to the sink. Every escape decodes to at least one byte, so
// the raw length decides.
func (s *scanner) text(nonEmpty *bool) error {
	if s.peek() == '"' {
		v, _, err := s.str()
		if len(v) > 0 && err == nil {
			*nonEmpty = true
			if s.sink != nil {
				s.sink.AddJSON(v)
			}
		}
		return err
	}
	return s.skip()
}

// function gives the sink the name and arguments of a tool call's
// function object (another value is skipped).
func (s *scanner) function() error {
	if s.peek() != '{' {
		return s.skip()
	}
	var some bool
	return s.object(func(k []byte) error {
		switch string(k) {
		case "name", "arguments":
			return s.text(&some)
		}
		return s.skip()
	})
}

// empty reports, without consuming anything, whether the next value is an
// empty array or object ("[]", "{ }"): tool_calls that carry no call.
func (s *scanner) empty() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	var closer byte
	switch s.b[s.i] {
	case '[':
		closer = ']'
	case '{':
		closer = '}'
	default:
		return false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch s.b[j] {
		case ' ', '\t', '\n', '\r':
		default:
			return s.b[j] == closer
		}
	}
	return false
}

type scanner struct {
	b     []byte
	i     int
	depth int      // objects and arrays open around s.i
	sink  TextSink // ScanChunkText's; nil: ScanChunk
}

func (s *scanner) fail(msg string) error { return &SyntaxError{Offset: s.i, Msg: msg} }

func (s *scanner) ws() {
	b, i := s.b, s.i
	// Every whitespace byte is at most ' ': compact JSON leaves at once.
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	s.i = i
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
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
		return s.fail("data after the object")
	}
	return nil
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

// open enters the object or array at s.i, failing beyond MaxDepth.
func (s *scanner) open() error {
	if s.depth == MaxDepth {
		return s.fail("nesting deeper than " + strconv.Itoa(MaxDepth))
	}
	s.depth++
	s.i++
	return nil
}

// object walks an object, calling member with each key positioned at its
// value. The key is raw (still escaped) unless it unescapes to one of the
// names the scanner looks for, so a match means the decoded name matched.
func (s *scanner) object(member func(key []byte) error) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return s.fail("expected an object")
	}
	if err := s.open(); err != nil {
		return err
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected a member name")
		}
		key, esc, err := s.str()
		if err != nil {
			return err
		}
		if esc {
			key = knownKey(key)
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected ':'")
		}
		s.i++
		if err := member(key); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// array walks an array, calling elem positioned at each element.
func (s *scanner) array(elem func() error) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return s.fail("expected an array")
	}
	if err := s.open(); err != nil {
		return err
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

// strStop marks the bytes str must look at: the closing quote, a backslash
// and the control characters JSON forbids unescaped. Other bytes, invalid
// UTF-8 included, pass as they do in json.Valid.
var strStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str consumes a string and returns its raw (still escaped) contents and
// whether they hold an escape. It looks at eight bytes at a time while none
// of them is one strStop marks: chunk strings (ids, the object's name, the
// model, text) are mostly longer than that.
func (s *scanner) str() (raw []byte, esc bool, err error) {
	b := s.b
	i := s.i + 1 // opening quote
	start := i
	for {
		if i = stopAt(b, i); i >= len(b) {
			s.i = i
			return nil, false, s.fail("unterminated string")
		}
		s.i = i
		switch b[i] {
		case '"':
			s.i = i + 1
			return b[start:i], esc, nil
		case '\\':
			if err := s.escape(); err != nil {
				return nil, false, err
			}
			esc = true
			i = s.i
		default:
			return nil, false, s.fail("control character in string")
		}
	}
}

// stopAt returns the index of the first byte at or after i that strStop
// marks, or len(b) when there is none. It looks at eight bytes at a time.
func stopAt(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := strStop8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && !strStop[b[i]] {
		i++
	}
	return i
}

// strStop8 marks (with the byte's high bit) the bytes of x that strStop
// marks: a quote, a backslash or a byte below 0x20. It is the zero-byte
// test of "Bit Twiddling Hacks", whose borrow can mark bytes above a marked
// one that are not stops, but never one below the first: the lowest mark
// is exact, and only it is used.
func strStop8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs } // a zero byte in v
	below := (x - 0x20*ones) & ^x & highs                            // a byte below 0x20
	return below | zero(x^('"'*ones)) | zero(x^('\\'*ones))
}

// escape consumes the escape sequence at s.i: \" \\ \/ \b \f \n \r \t or \u
// with four hex digits.
func (s *scanner) escape() error {
	s.i++ // backslash
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

// knownKeys are the member names the scanner looks for.
var knownKeys = [][]byte{
	[]byte("choices"), []byte("usage"), []byte("error"),
	[]byte("delta"), []byte("message"), []byte("text"), []byte("finish_reason"),
	[]byte("content"), []byte("reasoning_content"), []byte("reasoning"), []byte("refusal"),
	[]byte("tool_calls"), []byte("function_call"), []byte("function"), []byte("name"), []byte("arguments"),
	[]byte("prompt_tokens"), []byte("completion_tokens"), []byte("total_tokens"),
	[]byte("prompt_tokens_details"), []byte("cached_tokens"), []byte("cache_write_tokens"),
}

// knownKey unescapes raw, a member name str accepted, and returns the known
// name it spells, else raw itself, which holds a backslash and so matches no
// known name. Servers do not escape these names; encoding/json unescapes
// every name, and the scanner must agree with it.
func knownKey(raw []byte) []byte {
	var buf [len("prompt_tokens_details")]byte // the longest known name
	n := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			i++
			switch c = raw[i]; c {
			case 'u':
				r := unhex(raw[i+1])<<12 | unhex(raw[i+2])<<8 | unhex(raw[i+3])<<4 | unhex(raw[i+4])
				if r >= 0x80 {
					return raw // known names are ASCII
				}
				c = byte(r)
				i += 4
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			}
		}
		if n == len(buf) {
			return raw
		}
		buf[n] = c
		n++
	}
	for _, k := range knownKeys {
		if string(k) == string(buf[:n]) {
			return k
		}
	}
	return raw
}

// number consumes a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return s.fail("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.fail("invalid number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.fail("invalid number")
		}
	}
	return nil
}

// digits consumes a run of decimal digits and returns its length.
func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// skip consumes any JSON value.
func (s *scanner) skip() error {
	s.ws()
	if s.i >= len(s.b) {
		return s.fail("expected a value")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '{':
		return s.object(func([]byte) error { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.fail("unexpected character")
}

func (s *scanner) lit(word string) error {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return nil
	}
	return s.fail("invalid literal")
}
