package sim

import (
	"unicode"
	"unicode/utf8"
)

// promptHash is the FNV-1a 64 hash of a conversation's text, built the same
// way in every dialect so that one conversation gives one answer whichever
// dialect carries it: the system text first (OpenAI system and developer
// messages, Anthropic system, Gemini systemInstruction), then the messages'
// text in order, one piece per string content, text part or text block,
// each non-empty piece preceded by a separator byte. Roles are not hashed,
// nor are tool calls, tool results (Gemini carries them as functionResponse
// objects, not text), images or thoughts; a trailing assistant prefix is
// left out by the dialects (see request.prefix).
//
// Pieces rather than whole messages are hashed because translating gateways
// merge consecutive turns of one role into one turn of several blocks
// (Anthropic and Gemini want user and assistant turns to alternate), which
// keeps the pieces and their order.
type promptHash uint64

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
	pieceSep    = 0x1e // ASCII record separator
)

func newPromptHash() promptHash { return fnvOffset64 }

// add hashes one piece of text; an empty piece changes nothing.
func (h *promptHash) add(s string) {
	if s == "" {
		return
	}
	x := (uint64(*h) ^ pieceSep) * fnvPrime64
	for i := 0; i < len(s); i++ {
		x = (x ^ uint64(s[i])) * fnvPrime64
	}
	*h = promptHash(x)
}

// endsInSpace reports whether s ends with a white-space rune, which
// Anthropic refuses at the end of a final assistant message.
func endsInSpace(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && unicode.IsSpace(r)
}
