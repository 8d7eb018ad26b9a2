package api

import "strconv"

// ChunkInfo is what the hot path needs to know about one stream chunk.
type ChunkInfo struct {
	// Content is true when a choice carries content, reasoning, refusal or
	// tool-call text: the chunk counts as a token for TTFT and ITL.
	// Role-only, finish-only and usage-only chunks leave it false.
	Content bool
	// Finish is true when a choice has a non-null finish_reason.
	Finish bool
	// HasUsage is true when the chunk carries a non-null "usage" object.
	HasUsage bool
	Usage    Usage
	// Error is true when the chunk holds a non-null "error" member, the way
	// OpenAI-compatible servers report a failure after the stream started.
	Error bool
}

// SyntaxError reports malformed chunk JSON.
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
// less than a full decode and never re-encodes the chunk. A value that is
// not a JSON object, or malformed JSON, returns a *SyntaxError.
func ScanChunk(data []byte) (ChunkInfo, error) {
	s := scanner{b: data}
	var info ChunkInfo
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "choices":
			return s.array(func() error { return s.choice(&info) })
		case "usage":
			if s.null() {
				return nil
			}
			info.HasUsage = true
			return s.object(func(k []byte) error {
				var dst *int
				switch string(k) {
				case "prompt_tokens":
					dst = &info.Usage.PromptTokens
				case "completion_tokens":
					dst = &info.Usage.CompletionTokens
				case "total_tokens":
					dst = &info.Usage.TotalTokens
				default:
					return s.skip()
				}
				if s.null() {
					return nil
				}
				n, err := s.int()
				*dst = n
				return err
			})
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
	s.ws()
	if s.i != len(s.b) {
		return info, s.fail("data after the object")
	}
	return info, nil
}

func (s *scanner) choice(info *ChunkInfo) error {
	return s.object(func(key []byte) error {
		switch string(key) {
		case "delta", "message":
			if s.null() {
				return nil
			}
			return s.object(func(k []byte) error {
				switch string(k) {
				case "content", "reasoning_content", "reasoning", "refusal":
					return s.text(&info.Content)
				case "tool_calls", "function_call":
					if s.null() {
						return nil
					}
					start := s.i
					if err := s.skip(); err != nil {
						return err
					}
					if v := s.b[start:s.i]; string(v) != "[]" && string(v) != "{}" {
						info.Content = true
					}
					return nil
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

// text skips a string-or-null value and sets *nonEmpty when it is a non-empty string.
func (s *scanner) text(nonEmpty *bool) error {
	if s.null() {
		return nil
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '"' {
		v, err := s.str()
		if len(v) > 0 {
			*nonEmpty = true
		}
		return err
	}
	return s.skip()
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(msg string) error { return &SyntaxError{Offset: s.i, Msg: msg} }

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

// null consumes a null literal if one comes next.
func (s *scanner) null() bool {
	s.ws()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// object walks an object, calling member with each key positioned at its value.
func (s *scanner) object(member func(key []byte) error) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return s.fail("expected an object")
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected a member name")
		}
		key, err := s.str()
		if err != nil {
			return err
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
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

func (s *scanner) array(elem func() error) error {
	s.ws()
	if s.null() {
		return nil
	}
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return s.fail("expected an array")
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
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
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

// str consumes a string and returns its raw (still escaped) contents.
func (s *scanner) str() ([]byte, error) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, nil
		case c == '\\':
			s.i += 2
		case c < 0x20:
			return nil, s.fail("control character in string")
		default:
			s.i++
		}
	}
	return nil, s.fail("unterminated string")
}

func (s *scanner) int() (int, error) {
	s.ws()
	start := s.i
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	n := 0
	digits := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
		digits++
	}
	if digits == 0 {
		s.i = start
		return 0, s.fail("expected an integer")
	}
	// Tolerate "12.0" from servers that send floats.
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i = start
		return 0, s.skip()
	}
	if neg {
		n = -n
	}
	return n, nil
}

// skip consumes any JSON value.
func (s *scanner) skip() error {
	s.ws()
	if s.i >= len(s.b) {
		return s.fail("expected a value")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, err := s.str()
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
		s.i++
		for s.i < len(s.b) {
			switch c := s.b[s.i]; {
			case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
				s.i++
			default:
				return nil
			}
		}
		return nil
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
