package sim

import (
	"math/rand/v2"
	"strings"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
)

// Simulated output is drawn from a fixed vocabulary, one word piece per
// simulated token. Pieces are whole strings, so a chunk never splits a rune.
// Each is kept twice: JSON-escaped (without quotes), so a chunk is built by
// appending bytes, and as text, so a continuation can match a prefix
// against it.

var enWords = strings.Fields(`the a an of to in for on with by from as at that this these
stream streams token tokens latency gateway upstream model models request requests response answer
server client chunk chunks time first last every each one two three many few more less
fast slow steady quiet simple small large careful clear open useful real simulated measured
is are was were be been has have had can will should may must does do
send sends sent read reads wait waits arrive arrives measure measures relay relays keep keeps
show shows run runs test tests cut stall retry fallback queue budget price cost user users
and or but so because while when before after until then also only still just even
network socket buffer flush deadline timer second millisecond percentile median tail jitter`)

// Korean: nouns take a particle chosen by their last syllable (은/는, 이/가,
// 을/를, 과/와, 으로/로), modifiers precede nouns, a verb ends the sentence.
var (
	koNouns = strings.Fields(`스트림 토큰 지연 게이트웨이 서버 클라이언트 모델 요청 응답 시간
데이터 측정 결과 사용자 비용 가격 대기열 타이머 버퍼 연결 네트워크 시험 장애 재시도 청크 지표`)
	koMods      = strings.Fields(`빠른 느린 작은 큰 정확한 간단한 실제 모의 안정적인 새로운 모든 각 여러`)
	koConj      = strings.Fields(`그리고 하지만 그래서 또한 먼저 다음으로`)
	koVerbs     = strings.Fields(`보냅니다 읽습니다 기다립니다 도착합니다 측정합니다 전달합니다 보여줍니다 실행합니다 유지합니다`)
	koParticles = [2][]string{
		{"는", "가", "를", "와", "로", "에", "의", "도"},  // after a vowel
		{"은", "이", "을", "과", "으로", "에", "의", "도"}, // after a consonant (batchim)
	}
)

// Word classes of a vocabulary entry.
const (
	classWord  = iota // en word, or ko modifier/conjunction (no particle)
	classVowel        // ko noun ending in a vowel
	classFinal        // ko noun ending in a consonant
)

// token is one vocabulary entry: its text and the same JSON-escaped.
type token struct {
	esc  []byte
	text string
}

func newToken(s string) token { return token{esc: jsonEscape(s), text: s} }

// vocab is one language's token table.
type vocab struct {
	start   []token // sentence openers, no leading space (start of text, after a paragraph)
	startSp []token // the same with a leading space
	words   []token // " word"
	class   []int8  // class of start[i]/startSp[i] and of words[i] (same lists)
	mid     int     // words[:mid] may appear mid-sentence (ko conjunctions only open one)
	verbs   []token // ko: sentence-final verbs; nil for en
	parts   [2][]token
	period  token
	comma   token
	para    token // paragraph break "\n\n"
}

var vocabs = map[string]*vocab{"en": newEnVocab(), "ko": newKoVocab()}

func baseVocab() *vocab {
	return &vocab{period: newToken("."), comma: newToken(","), para: newToken("\n\n")}
}

func newEnVocab() *vocab {
	v := baseVocab()
	for _, w := range enWords {
		c := strings.ToUpper(w[:1]) + w[1:]
		v.start = append(v.start, newToken(c))
		v.startSp = append(v.startSp, newToken(" "+c))
		v.words = append(v.words, newToken(" "+w))
		v.class = append(v.class, classWord)
	}
	v.mid = len(v.words)
	return v
}

func newKoVocab() *vocab {
	v := baseVocab()
	add := func(w string, class int8) {
		v.start = append(v.start, newToken(w))
		v.startSp = append(v.startSp, newToken(" "+w))
		v.words = append(v.words, newToken(" "+w))
		v.class = append(v.class, class)
	}
	for _, w := range koNouns {
		add(w, hangulClass(w))
	}
	for _, w := range koMods {
		add(w, classWord)
	}
	v.mid = len(v.words)
	for _, w := range koConj {
		add(w, classWord)
	}
	for _, w := range koVerbs {
		v.verbs = append(v.verbs, newToken(" "+w))
	}
	for i := range koParticles {
		for _, p := range koParticles[i] {
			v.parts[i] = append(v.parts[i], newToken(p))
		}
	}
	return v
}

// hangulClass tells whether a noun's last syllable ends in a consonant.
func hangulClass(w string) int8 {
	r, _ := utf8.DecodeLastRuneInString(w)
	if r >= 0xAC00 && r <= 0xD7A3 && (r-0xAC00)%28 != 0 {
		return classFinal
	}
	return classVowel
}

// jsonEscape returns s as the inside of a JSON string literal.
func jsonEscape(s string) []byte {
	b := api.AppendString(nil, s)
	return b[1 : len(b)-1]
}

// textGen draws the tokens of one answer. Its state is a position in a
// sentence, so the same random source yields the same text. After
// continueFrom it may hold the rest of a token the prefix ended in, which
// next returns before drawing again.
type textGen struct {
	v     *vocab
	rng   *rand.Rand
	held  *token // returned by the next call before any draw; nil = none
	rest  token  // the partial token held points to
	left  int    // tokens left in the sentence; 0 = start a new one
	fresh bool   // the next sentence starts the text or a paragraph
	last  int8   // class of the last word (for ko particles)
	since int    // sentences since the last paragraph break
}

func newTextGen(lang string, rng *rand.Rand) textGen {
	v := vocabs[lang]
	if v == nil {
		v = vocabs["en"]
	}
	return textGen{v: v, rng: rng, fresh: true}
}

// next returns the next token, JSON-escaped.
func (g *textGen) next() []byte { return g.token().esc }

// token returns the next token: the held one, else a new draw. The result
// is only valid until the next call.
func (g *textGen) token() *token {
	if t := g.held; t != nil {
		g.held = nil
		return t
	}
	return g.draw()
}

// continueFrom moves g past prefix, when prefix is a beginning of the text
// g would write: it draws the k whole tokens prefix covers (the largest
// such k) and, when prefix ends inside token k, holds that token's rest
// for next, so that prefix followed by g's tokens is the uninterrupted
// text. It reports k and true, or false when prefix is not a beginning of
// g's text (g is then spent: the caller starts a new one). The cost is
// one draw per covered token, at most len(prefix) draws since no token is
// empty.
func (g *textGen) continueFrom(prefix string) (int, bool) {
	k := 0
	for prefix != "" {
		t := g.draw()
		if rest, ok := strings.CutPrefix(prefix, t.text); ok {
			prefix = rest
			k++
			continue
		}
		rest, ok := strings.CutPrefix(t.text, prefix)
		if !ok {
			return k, false
		}
		// prefix is valid UTF-8 (it was decoded from JSON) and a proper
		// beginning of the token, so it ends on a rune boundary and the
		// rest is whole runes.
		g.rest = newToken(rest)
		g.held = &g.rest
		return k, true
	}
	return k, true
}

// draw draws a new token from the generator's random source.
func (g *textGen) draw() *token {
	v := g.v
	switch {
	case g.left == 0:
		if !g.fresh && g.since >= 4 && g.rng.IntN(3) == 0 {
			g.since, g.fresh = 0, true
			return &v.para
		}
		g.left = 6 + g.rng.IntN(10)
		g.since++
		list := v.startSp
		if g.fresh {
			list, g.fresh = v.start, false
		}
		i := g.rng.IntN(len(list))
		g.last = v.class[i]
		return &list[i]
	case g.left == 1:
		g.left = 0
		return &v.period
	case g.left == 2 && v.verbs != nil:
		g.left--
		g.last = classWord
		return &v.verbs[g.rng.IntN(len(v.verbs))]
	}
	g.left--
	if g.last != classWord && g.rng.IntN(4) != 0 {
		parts := v.parts[g.last-classVowel]
		g.last = classWord
		return &parts[g.rng.IntN(len(parts))]
	}
	if v.verbs == nil && g.left > 3 && g.rng.IntN(12) == 0 {
		return &v.comma
	}
	i := g.rng.IntN(v.mid)
	g.last = v.class[i]
	return &v.words[i]
}

// estimateTokens approximates the tokens of text: about 4 ASCII characters a
// token (English), and one token a non-ASCII rune (Hangul, CJK), which is
// close to what BPE tokenizers give for Korean.
func estimateTokens(text string) int {
	ascii, other := 0, 0
	for _, r := range text {
		if r < utf8.RuneSelf {
			ascii++
		} else {
			other++
		}
	}
	return (ascii+3)/4 + other
}
