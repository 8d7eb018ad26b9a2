package affinity

import (
	"encoding/json"
	"errors"

	"github.com/cespare/xxhash/v2"

	"github.com/streamgate/streamgate/internal/api"
)

// The prefix fingerprint names a conversation that names itself nowhere.
// It hashes the part of the prompt that every turn of one conversation
// repeats unchanged and that differs between conversations: the system
// prompt, the tools, and the messages up to and including the first user
// turn. Later turns are left out because they grow with each turn (the
// fingerprint must not change between turn 1 and turn 20); the first user
// turn is kept because system and tools alone are shared by every session
// of one agent, which would put them all on one target. That prefix is
// also what the provider caches first, so sessions that share it share
// the cache.
//
// Values are hashed token by token: whitespace between tokens is dropped
// and "cache_control" members are skipped at any depth, because Anthropic
// clients move the cache breakpoint to the newest turn each time (Claude
// Code marks the last message), which would change the first turn's bytes
// between turns. Everything else is hashed as sent, escapes included: one
// client serialises its conversation the same way every turn.

// maxPrefixMessages bounds the messages hashed while looking for the first
// user turn (a conversation that opens with many system or developer
// messages still gets a fingerprint that does not grow with it).
const maxPrefixMessages = 8

// maxDepth bounds the walker's recursion; deeper values are hashed as
// their raw bytes.
const maxDepth = 64

// part tags keep the parts apart: tools alone never hash as a system prompt.
const (
	tagSystem byte = 's'
	tagTools  byte = 't'
	tagTurn   byte = 'm'
)

// errStop ends an EachMember or EachElement walk early.
var errStop = errors.New("stop")

// prefix accumulates a fingerprint.
type prefix struct {
	h   hasher
	any bool
}

func (p *prefix) add(tag byte, raw []byte) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	if !p.any {
		p.h.d.Reset()
		p.any = true
	}
	p.h.byte(tag)
	hashValue(&p.h, raw, 0, 0)
}

// sum is the fingerprint, 0 when nothing was added (never 0 otherwise).
func (p *prefix) sum() uint64 {
	if !p.any {
		return 0
	}
	p.h.flush()
	return max(p.h.d.Sum64(), 1)
}

// hasher buffers the walker's many small writes (a token, a bracket) into
// few Digest writes.
type hasher struct {
	d   xxhash.Digest
	n   int
	buf [256]byte
}

func (h *hasher) write(b []byte) {
	if h.n+len(b) > len(h.buf) {
		h.flush()
		if len(b) > len(h.buf) {
			h.d.Write(b)
			return
		}
	}
	h.n += copy(h.buf[h.n:], b)
}

func (h *hasher) byte(c byte) {
	if h.n == len(h.buf) {
		h.flush()
	}
	h.buf[h.n] = c
	h.n++
}

func (h *hasher) flush() {
	h.d.Write(h.buf[:h.n])
	h.n = 0
}

// ChatPrefix fingerprints a /v1/chat/completions body: "tools" and the
// "messages" up to and including the first with role "user" (so the system
// and developer messages before it), at most 8. 0 when the body has none
// of them. body is the request as received (validated JSON); it does not
// allocate.
func ChatPrefix(body []byte) uint64 {
	return fingerprint(body, "", "messages", maxPrefixMessages, nil)
}

// MessagesPrefix fingerprints a /v1/messages body: "system", "tools" and
// the first message (the API requires it to be the user's). It does not
// allocate.
func MessagesPrefix(body []byte) uint64 {
	return fingerprint(body, "system", "messages", 1, nil)
}

// ResponsesPrefix fingerprints a /v1/responses body: "instructions",
// "tools" and the items up to and including the first user message. When
// the request continues a stored response (previous_response_id), its
// input holds only the new turn, so the first items come from prior, the
// stored chain oldest first (responses.Request.Prior), as long as it is
// not empty. An input that is a string is the first user turn itself. It
// does not allocate.
func ResponsesPrefix(body []byte, prior []json.RawMessage) uint64 {
	return fingerprint(body, "instructions", "input", maxPrefixMessages, prior)
}

// fingerprint is the prefix of every dialect, in one walk of body's
// members: the member named system ("" for none: chat's system prompt is
// among its messages), "tools", then the turns: the items of prior when
// there are any, else those of the member named turns, up to and including
// the first user turn and at most limit of them (a string is one turn).
func fingerprint(body []byte, system, turns string, limit int, prior []json.RawMessage) uint64 {
	var sys, tools, items []byte
	api.EachMember(body, func(key, _, value []byte) error {
		switch k := string(key); {
		case k == "tools":
			tools = value
		case k == turns:
			items = value
		case k == system && system != "":
			sys = value
		}
		return nil
	})
	var p prefix
	p.add(tagSystem, sys)
	p.add(tagTools, tools)
	n := 0
	turn := func(it []byte) error {
		p.add(tagTurn, it)
		if n++; n >= limit || isUser(it) {
			return errStop
		}
		return nil
	}
	switch i := skipSpace(items, 0); {
	case len(prior) > 0:
		for _, it := range prior {
			if turn(it) != nil {
				break
			}
		}
	case i < len(items) && items[i] == '"':
		p.add(tagTurn, items)
	default:
		api.EachElement(items, turn)
	}
	return p.sum()
}

// isUser reports whether the object elem has "role": "user".
func isUser(elem []byte) bool {
	user := false
	api.EachMember(elem, func(key, _, value []byte) error {
		if string(key) == "role" {
			user = string(value) == `"user"`
			return errStop
		}
		return nil
	})
	return user
}

// hashValue writes the JSON value at b[i:] to d token by token (see the
// note at the top) and returns the index after it. It never panics on
// input it cannot read: it hashes what it can and returns len(b).
func hashValue(d *hasher, b []byte, i, depth int) int {
	i = skipSpace(b, i)
	if i >= len(b) {
		return len(b)
	}
	switch c := b[i]; {
	case c == '"':
		end := skipString(b, i)
		d.write(b[i:end])
		return end
	case depth >= maxDepth && (c == '{' || c == '['):
		end := skipValue(b, i)
		d.write(b[i:end])
		return end
	case c == '{':
		d.byte('{')
		i = skipSpace(b, i+1)
		for i < len(b) && b[i] != '}' {
			if b[i] != '"' {
				return len(b)
			}
			kend := skipString(b, i)
			key := b[i:kend]
			i = skipSpace(b, kend)
			if i >= len(b) || b[i] != ':' {
				return len(b)
			}
			if string(key) == `"cache_control"` {
				i = skipValue(b, skipSpace(b, i+1))
			} else {
				d.write(key)
				i = hashValue(d, b, i+1, depth+1)
			}
			i = skipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		d.byte('}')
		return min(i+1, len(b))
	case c == '[':
		d.byte('[')
		i = skipSpace(b, i+1)
		for i < len(b) && b[i] != ']' {
			i = skipSpace(b, hashValue(d, b, i, depth+1))
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		d.byte(']')
		return min(i+1, len(b))
	default: // number, true, false, null
		end := i
		for end < len(b) && !delim(b[end]) {
			end++
		}
		if end == i { // a stray delimiter: nothing to hash, do not loop
			return len(b)
		}
		d.write(b[i:end])
		d.byte(',') // [1,2] is not [12]
		return end
	}
}

func delim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
		return true
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"',
// or len(b) when it does not end.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value at b[i:] (not hashed),
// counting brackets outside strings.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the parent's end: the scalar ended before it
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return len(b)
}
