package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// SetMembers returns body (one JSON object) with the members of set
// replaced, in place when present (first occurrence; later duplicates
// dropped), appended at the end when not (in the order of their names, so
// the output does not depend on map order); a nil value in set deletes that
// member, every occurrence of it. Other members are copied byte for byte in
// their order, duplicates included; the whitespace between members is not
// kept. Names are compared after unescaping, as encoding/json does, so
// "max\u005ftokens" is max_tokens; names of set are written as JSON strings
// by AppendString (invalid UTF-8 becomes U+FFFD). The result is a new
// slice; body is not modified.
//
// Error when body is not a JSON object (json.Valid's verdict, so an invalid
// value anywhere in body is an error) or when a non-nil value of set is not
// valid JSON. Values of set are written as given; values of body are never
// decoded.
func SetMembers(body []byte, set map[string]json.RawMessage) ([]byte, error) {
	if !json.Valid(body) {
		return nil, errors.New("api: set members: body is not valid JSON")
	}
	if i := skipSpace(body, 0); body[i] != '{' {
		return nil, errors.New("api: set members: body is not a JSON object")
	}
	extra := 0
	for name, v := range set {
		if v != nil && !json.Valid(v) {
			return nil, fmt.Errorf("api: set members: value of %q is not valid JSON", name)
		}
		extra += len(name) + len(v) + 4
	}
	out := make([]byte, 1, len(body)+extra)
	out[0] = '{'
	first := true
	sep := func() {
		if !first {
			out = append(out, ',')
		}
		first = false
	}
	var done map[string]bool // names of set met in body
	err := EachMember(body, func(key, member, _ []byte) error {
		v, ok := set[string(key)]
		if !ok {
			sep()
			out = append(out, member...)
			return nil
		}
		if done[string(key)] {
			return nil // a later duplicate of a set member
		}
		if done == nil {
			done = make(map[string]bool, len(set))
		}
		done[string(key)] = true
		if v != nil {
			sep()
			out = AppendString(out, key)
			out = append(out, ':')
			out = append(out, v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("api: set members: %w", err) // unreachable on valid JSON
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if v := set[name]; v != nil && !done[name] {
			sep()
			out = AppendString(out, name)
			out = append(out, ':')
			out = append(out, v...)
		}
	}
	return append(out, '}'), nil
}

var errNotObject = errors.New("not a JSON object")

// EachMember calls fn for each member of the JSON object obj, in order, with
// the member's name, its bytes as written (`"name" : value`) and its value's
// bytes. The name is unescaped as encoding/json unescapes it (`"mod\u0065l"`
// is model, invalid UTF-8 becomes U+FFFD); that costs an allocation, which
// only names written with escapes or invalid UTF-8 pay. An error of fn stops
// the walk and is returned.
//
// obj is expected to be valid JSON (the gateway validated it): EachMember
// checks the object's own structure but not the values it skips, which it
// walks without recursion and without decoding. On input it cannot walk it
// returns an error, never panics.
func EachMember(obj []byte, fn func(key, member, value []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return fmt.Errorf("want a member name at offset %d", i)
		}
		start := i
		end, err := skipString(obj, i)
		if err != nil {
			return err
		}
		key := obj[start+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			var k string
			if err := json.Unmarshal(obj[start:end], &k); err != nil {
				return fmt.Errorf("member name at offset %d: %w", start, err)
			}
			key = []byte(k)
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return fmt.Errorf("want ':' at offset %d", i)
		}
		vstart := skipSpace(obj, i+1)
		vend, err := skipValue(obj, vstart)
		if err != nil {
			return err
		}
		if err := fn(key, obj[start:vend], obj[vstart:vend]); err != nil {
			return err
		}
		i = skipSpace(obj, vend)
		if i >= len(obj) {
			return errors.New("unterminated object")
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return nil
		default:
			return fmt.Errorf("want ',' or '}' at offset %d", i)
		}
	}
}

// EachElement calls fn with the bytes of each element of the JSON array
// arr, in order; null counts as an empty array. Like EachMember it expects
// valid JSON, does not decode or check the elements, and returns an error,
// never panics, on input it cannot walk.
func EachElement(arr []byte, fn func(elem []byte) error) error {
	i := skipSpace(arr, 0)
	if len(arr)-i >= 4 && string(arr[i:i+4]) == "null" {
		return nil
	}
	if i >= len(arr) || arr[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		end, err := skipValue(arr, i)
		if err != nil {
			return err
		}
		if err := fn(arr[i:end]); err != nil {
			return err
		}
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return errors.New("unterminated array")
		}
		switch arr[i] {
		case ',':
			i = skipSpace(arr, i+1)
		case ']':
			return nil
		default:
			return fmt.Errorf("want ',' or ']' at offset %d", i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at b[i] == '"'.
// Past its first bytes it looks for quotes with bytes.IndexByte, so the
// text of a long string costs about what memchr does; a quote after an odd
// run of backslashes is escaped and the search goes on. Short strings
// (member names, roles) end within the first bytes, where a plain loop
// beats the call.
func skipString(b []byte, i int) (int, error) {
	start := i + 1
	for i = start; i < len(b) && i < start+16; i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte
		case '"':
			return i + 1, nil
		}
	}
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			break
		}
		q := i + j
		n := 0 // the backslashes before q since i (those before i are paired)
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		i = q + 1
	}
	return 0, errors.New("unterminated string")
}

// skipValue returns the offset after the value starting at b[i]: strings
// and nested objects and arrays are walked by counting brackets (no
// recursion, so no depth limit is needed), literals and numbers end at the
// next delimiter.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("missing value")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated object or array")
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ':', ' ', '\n', '\r', '\t':
			if i == start {
				return 0, fmt.Errorf("missing value at offset %d", i)
			}
			return i, nil
		}
		i++
	}
	return i, nil
}
