package sim

import (
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// Simulated output is drawn from a fixed vocabulary, one word piece per
// simulated token. Pieces are whole strings, so a chunk never splits a rune,
// and each is stored JSON-escaped (without quotes) so a chunk is built by
// appending bytes.

var enWords = strings.Fields(`the a an of to in for on with by from as at that this these
stream streams token tokens latency gateway upstream model models request requests response answer
server client chunk chunks time first last every each one two three many few more less
fast slow steady quiet simple small large careful clear open useful real simulated measured
is are was were be been has have had can will should may must does do
send sends sent read reads wait waits arrive arrives measure measures relay relays keep keeps
show shows run runs test tests cut stall retry fallback queue budget price cost user users
and or but so because while when before after until then also only still just even
network socket buffer flush deadline timer second millisecond percentile median tail jitter`)

var koWords = strings.Fields(`스트림 토큰 지연 게이트웨이 서버 클라이언트 모델 요청 응답 시간 처음 마지막
데이터 측정 결과 사용자 비용 가격 대기열 타이머 버퍼 연결 네트워크 시험 장애 재시도
빠른 느린 작은 큰 정확한 간단한 실제 모의 안정적인 새로운 모든 각 여러 몇
보냅니다 읽습니다 기다립니다 도착합니다 측정합니다 전달합니다 보여줍니다 실행합니다 유지합니다
그리고 하지만 그래서 먼저 다음 또한 아직 바로 항상 가끔`)

var koParticles = []string{"은", "는", "이", "가", "을", "를", "에", "에서", "으로", "와", "의", "도"}

// vocab is one language's pre-escaped token table.
type vocab struct {
	words   [][]byte // " word" (leading space)
	capital [][]byte // "Word" (sentence start, en) or "word" (ko)
	suffix  [][]byte // particles attached without space (ko); nil for en
	period  []byte
	comma   []byte
	para    []byte // paragraph break "\n\n", escaped
}

var vocabs = map[string]*vocab{"en": newVocab(enWords, nil), "ko": newVocab(koWords, koParticles)}

func newVocab(words, suffix []string) *vocab {
	v := &vocab{period: jsonEscape("."), comma: jsonEscape(","), para: jsonEscape("\n\n")}
	for _, w := range words {
		v.words = append(v.words, jsonEscape(" "+w))
		c := w
		if r, n := utf8.DecodeRuneInString(w); r < utf8.RuneSelf {
			c = strings.ToUpper(w[:n]) + w[n:]
		}
		v.capital = append(v.capital, jsonEscape(c))
	}
	for _, s := range suffix {
		v.suffix = append(v.suffix, jsonEscape(s))
	}
	return v
}

// jsonEscape returns s as the inside of a JSON string literal.
func jsonEscape(s string) []byte {
	var b []byte // multi-byte runes stay raw UTF-8, as JSON allows
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', "0123456789abcdef"[r>>4], "0123456789abcdef"[r&15])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

// textGen draws the tokens of one answer. Its state is a sentence position,
// so the same random source yields the same text.
type textGen struct {
	v        *vocab
	rng      *rand.Rand
	left     int  // words left in the sentence; 0 = start a new one
	particle bool // ko: the last token was a word that may take a particle
	since    int  // sentences since the last paragraph break
}

func newTextGen(lang string, rng *rand.Rand) textGen {
	v := vocabs[lang]
	if v == nil {
		v = vocabs["en"]
	}
	return textGen{v: v, rng: rng}
}

// next returns the next token, JSON-escaped.
func (g *textGen) next() []byte {
	v := g.v
	switch {
	case g.left == 0:
		if g.since >= 4 && g.rng.IntN(3) == 0 {
			g.since = 0
			g.left = -1 // the next token starts a sentence without a space
			return v.para
		}
		g.left = 6 + g.rng.IntN(10)
		g.since++
		g.particle = true
		return v.capital[g.rng.IntN(len(v.capital))]
	case g.left < 0:
		g.left = 6 + g.rng.IntN(10)
		g.particle = true
		return v.capital[g.rng.IntN(len(v.capital))]
	case g.left == 1:
		g.left = 0
		g.particle = false
		return v.period
	}
	g.left--
	if v.suffix != nil && g.particle && g.rng.IntN(2) == 0 {
		g.particle = false
		return v.suffix[g.rng.IntN(len(v.suffix))]
	}
	if v.suffix == nil && g.left > 3 && g.rng.IntN(12) == 0 {
		return v.comma
	}
	g.particle = true
	return v.words[g.rng.IntN(len(v.words))]
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
