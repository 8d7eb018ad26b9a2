// Package smooth re-chunks streamed text so that each piece released ends
// where a word ends: after a word of a space-separated script (Latin,
// Hangul, Cyrillic…), after each character of Chinese and Japanese, and
// never inside a UTF-8 sequence or a grapheme cluster (rivo/uniseg's
// segmentation). A Buffer holds what may still grow, for at most MaxDelay.
// The relay uses it for stream smoothing; it knows nothing of JSON or SSE.
package smooth

import (
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Cut returns the length of the longest prefix of text that may be released
// now: one that ends where a word certainly ended. The cut points are
//   - before a whitespace that follows a non-whitespace character: a word of
//     a space-separated script (Hangul included) ended there, and the
//     whitespace travels with the next word, the way tokenizers write " word";
//   - before and after each character of Chinese or Japanese (Han, Hiragana,
//     Katakana, Bopomofo, CJK punctuation and fullwidth forms), which write
//     no spaces between words.
//
// Each cut point is a grapheme cluster boundary that text still to come
// cannot move, so the last cluster of text (which a combining mark, a skin
// tone or a zero-width joiner may still extend) is never released, and
// neither is an incomplete UTF-8 sequence at its end. No-break spaces
// (U+00A0, U+2007, U+202F) join words. Cut returns 0 when text has no cut
// point, e.g. a single word or an empty text.
func Cut(text []byte) int {
	cut, _, _ := scan(text, 0, classNone)
	return max(cut, 0)
}

// scan walks the grapheme clusters of text from from (a cluster boundary;
// prev is the class of the cluster before it, classNone at the start) to
// its last complete rune. It returns the last cut point found (-1 for
// none), where the last cluster starts and the class of the cluster before
// that one: the place to resume from when more text comes, since only the
// last cluster may still grow. A scan resumed there finds the same clusters
// (the rules that look back further, regional indicator pairs and emoji ZWJ
// sequences, look back within one cluster only).
func scan(text []byte, from int, prev class) (cut, last int, lastPrev class) {
	b := text[from:complete(text)]
	cut, pos, last, lastPrev := -1, from, from, prev
	state := -1
	for len(b) > 0 {
		var cluster []byte
		if c0 := b[0]; c0 < utf8.RuneSelf && len(b) > 1 && b[1] < utf8.RuneSelf && (c0 != '\r' || b[1] != '\n') {
			// ASCII followed by ASCII (but CR LF) is a cluster of its own:
			// no need to ask uniseg, which is then asked afresh.
			cluster, b, state = b[:1], b[1:], -1
		} else {
			cluster, b, _, state = uniseg.FirstGraphemeCluster(b, state)
		}
		c := classOf(cluster)
		if prev != classNone && prev != classSpace && (c == classSpace || c == classCJK || prev == classCJK) {
			cut = pos
		}
		last, lastPrev = pos, prev
		prev = c
		pos += len(cluster)
	}
	return cut, last, lastPrev
}

type class uint8

const (
	classNone  class = iota // no cluster yet
	classSpace              // whitespace: a word ends before it
	classCJK                // a character of a script written without spaces
	classWord               // anything else: part of a word
)

// classOf classifies a grapheme cluster by its first rune.
func classOf(cluster []byte) class {
	r, _ := utf8.DecodeRune(cluster)
	switch {
	case r == '\u00a0' || r == '\u2007' || r == '\u202f': // no-break spaces
		return classWord
	case unicode.IsSpace(r):
		return classSpace
	case r < 0x2e80 || (r >= 0xac00 && r <= 0xd7ff): // below the CJK blocks, or Hangul: decided at once
		return classWord
	case r >= 0x3000 && r <= 0x30ff, // CJK symbols and punctuation, Hiragana, Katakana
		r >= 0xff00 && r <= 0xffef, // fullwidth and halfwidth forms
		unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Bopomofo):
		return classCJK
	}
	return classWord
}

// complete returns the length of text without an incomplete UTF-8 sequence
// at its end (bytes that begin a rune whose other bytes have not come yet).
// Invalid bytes count as complete: nothing can make them valid.
func complete(text []byte) int {
	for i := len(text) - 1; i >= 0 && i >= len(text)-utf8.UTFMax; i-- {
		if utf8.RuneStart(text[i]) {
			if !utf8.FullRune(text[i:]) {
				return i
			}
			return len(text)
		}
	}
	return len(text)
}

// Buffer holds streamed text until it can be released on a word boundary
// (Cut), or until MaxDelay after it arrived, whichever comes first. The zero
// Buffer has no MaxDelay: it holds nothing, every Add releases all (but an
// incomplete UTF-8 sequence). A Buffer is not safe for concurrent use.
//
// Times are the caller's: Add and Expire take the current time, and the
// caller calls Expire at Deadline (a timer) so that no text waits longer
// than MaxDelay. Released text is returned in a slice owned by the Buffer,
// valid until its next call.
type Buffer struct {
	// MaxDelay is the longest a piece of text is held. Text released at
	// the deadline may end inside a word; it never ends inside a UTF-8
	// sequence, but it may end inside a grapheme cluster whose rest the
	// stream has not brought by then.
	MaxDelay time.Duration

	text   []byte    // held
	out    []byte    // the last release
	pieces []arrival // the held pieces' arrivals, oldest first

	// The scan of text so far (see scan): the last cut point in it (0 for
	// none), where its last cluster starts and the class of the cluster
	// before that. Each Add scans only what is new, so a long run of text
	// without a cut point costs linear time, not quadratic.
	cut, last int
	prev      class
}

// arrival is where a held piece begins in Buffer.text and when it came.
type arrival struct {
	off int
	at  time.Time
}

// Len returns the number of bytes held.
func (b *Buffer) Len() int { return len(b.text) }

// Add appends a piece of text that arrived at now and returns the text that
// may be released: everything up to the last cut point (Cut), and, when the
// oldest text held reached MaxDelay, at least all that was held before p.
// The result is empty when everything stays held.
func (b *Buffer) Add(p []byte, now time.Time) []byte {
	expired := b.expired(now)
	held := len(b.text)
	if held > 0 && complete(b.text) == 0 {
		// Only the first bytes of a rune are held: it is text from the
		// piece that completes it on, so its wait starts now.
		for i := range b.pieces {
			b.pieces[i].at = now
		}
	}
	if len(p) > 0 {
		b.pieces = append(b.pieces, arrival{off: held, at: now})
		b.text = append(b.text, p...)
	}
	cut, last, prev := scan(b.text, b.last, b.prev)
	if cut > 0 {
		b.cut = cut
	}
	b.last, b.prev = last, prev
	n := b.cut
	switch {
	case b.MaxDelay <= 0:
		n = complete(b.text)
	case expired:
		n = max(n, runeEnd(b.text, held))
	}
	return b.release(n)
}

// Deadline returns when the oldest text held reaches MaxDelay, and false
// when no whole character is held (nothing, or only the first bytes of one).
func (b *Buffer) Deadline() (time.Time, bool) {
	if len(b.pieces) == 0 || complete(b.text) == 0 {
		return time.Time{}, false
	}
	return b.pieces[0].at.Add(b.MaxDelay), true
}

// Expire returns all the text held, but an incomplete UTF-8 sequence at its
// end, when the oldest of it reached MaxDelay at now; else nothing.
func (b *Buffer) Expire(now time.Time) []byte {
	if !b.expired(now) {
		return b.out[:0]
	}
	return b.release(complete(b.text))
}

// Flush returns all the text held, whatever its age: the stream ends.
func (b *Buffer) Flush() []byte { return b.release(len(b.text)) }

// runeEnd returns the end of the rune that contains text[i-1]: i, or later
// when that rune's last bytes came after i, or the rune's start while they
// have not come yet.
func runeEnd(text []byte, i int) int {
	start := complete(text[:i])
	if start == i {
		return i
	}
	if !utf8.FullRune(text[start:]) {
		return start // still incomplete: held
	}
	_, size := utf8.DecodeRune(text[start:])
	return max(i, start+size)
}

func (b *Buffer) expired(now time.Time) bool {
	d, ok := b.Deadline()
	return ok && !now.Before(d)
}

// release moves the first n bytes held to b.out and returns them; the
// arrivals of pieces wholly released are dropped, the first one kept
// begins at the new start.
func (b *Buffer) release(n int) []byte {
	b.out = append(b.out[:0], b.text[:n]...)
	if n == 0 {
		return b.out
	}
	b.text = append(b.text[:0], b.text[n:]...)
	keep := 0 // the first piece with bytes still held
	for i := range b.pieces {
		if b.pieces[i].off <= n {
			keep = i
		}
	}
	if len(b.text) == 0 {
		keep = len(b.pieces)
	}
	b.pieces = append(b.pieces[:0], b.pieces[keep:]...)
	for i := range b.pieces {
		b.pieces[i].off = max(0, b.pieces[i].off-n)
	}
	if n <= b.last {
		b.last -= n
		b.cut = max(0, b.cut-n)
	} else { // into the last cluster: what is left is not text yet
		b.cut, b.last, b.prev = 0, 0, classNone
	}
	return b.out
}
