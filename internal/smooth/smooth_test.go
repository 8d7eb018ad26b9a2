package smooth

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// texts are answers in the scripts smoothing must keep whole: words of
// English and Korean, characters of Chinese and Japanese, grapheme clusters
// of emoji (ZWJ families, skin tones, flags, tag sequences) and combining
// marks.
var texts = []struct {
	name   string
	text   string
	spaced bool // words are separated by whitespace: none may be split
}{
	{"english", "The gateway relays every token as it arrives. Streams stay fast,\neven when 3.14% of them fail!\n\nA new paragraph, don't-split-me words.", true},
	{"korean", "스트림은 빠른 게이트웨이를 통해 도착합니다. 각 토큰이\n측정됩니다, 그리고 결과를 보여줍니다.", true},
	{"korean jamo", "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af 글자", true},
	{"chinese", "流式网关在每个令牌到达时立即转发。它测量延迟，并且自动回退！", false},
	{"japanese", "ストリームは、トークンが届くとすぐに転送されます。か\u3099ゲートウェイを使う「テスト」。", false},
	{"emoji", "Family 👨‍👩‍👧‍👦 waves 👋🏽👋🏿 from 🇰🇷🇺🇸 with 🏳️‍🌈 and 🏴󠁧󠁢󠁳󠁣󠁴󠁿 café́ done", true},
	{"mixed", "Go 언어로 写代码 ✨ and テスト 👍🏿 in 東京, 2024年.", false},
}

// isCJK is the test's own list of scripts written without spaces.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) ||
		(r >= 0x3001 && r <= 0x30ff) || (r >= 0xff00 && r <= 0xffef)
}

// graphemeBounds returns the grapheme cluster boundaries of text.
func graphemeBounds(text string) map[int]bool {
	b := map[int]bool{0: true}
	g := uniseg.NewGraphemes(text)
	for g.Next() {
		_, end := g.Positions()
		b[end] = true
	}
	return b
}

// checkCut reports a release that ends at i of text where a word or a
// grapheme cluster goes on.
func checkCut(t *testing.T, text string, i int, bounds map[int]bool, spaced bool) {
	t.Helper()
	if !bounds[i] {
		t.Fatalf("release ends at byte %d inside a grapheme cluster: %q|%q", i, text[max(0, i-12):i], text[i:min(len(text), i+12)])
	}
	before, _ := utf8.DecodeLastRuneInString(text[:i])
	after, _ := utf8.DecodeRuneInString(text[i:])
	if unicode.IsSpace(after) && after != '\u00a0' {
		return // a word ended
	}
	if isCJK(before) || isCJK(after) {
		if spaced {
			t.Fatalf("release ends at byte %d inside a word: %q|%q", i, text[max(0, i-12):i], text[i:min(len(text), i+12)])
		}
		return
	}
	t.Fatalf("release ends at byte %d inside a word: %q|%q", i, text[max(0, i-12):i], text[i:min(len(text), i+12)])
}

// splits returns ways to cut text into pieces: byte by byte (cutting
// UTF-8 sequences), rune by rune (cutting grapheme clusters), and random
// byte ranges of 1 to 12 bytes.
func splits(text string) map[string][]string {
	out := map[string][]string{}
	for i := range len(text) {
		out["bytes"] = append(out["bytes"], text[i:i+1])
	}
	for _, r := range text {
		out["runes"] = append(out["runes"], string(r))
	}
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var ps []string
		for rest := text; rest != ""; {
			n := min(len(rest), 1+rng.IntN(12))
			ps, rest = append(ps, rest[:n]), rest[n:]
		}
		out[fmt.Sprint("random", seed)] = ps
	}
	return out
}

// With no deadline in play, every release but the final flush ends on a
// cut point, whatever the pieces' bounds: no word of a spaced script, no
// character, no grapheme cluster and no UTF-8 sequence is ever split, and
// the releases add up to the text.
func TestBufferKeepsWordsWhole(t *testing.T) {
	now := time.Unix(0, 0)
	for _, tt := range texts {
		bounds := graphemeBounds(tt.text)
		for how, pieces := range splits(tt.text) {
			t.Run(tt.name+"/"+how, func(t *testing.T) {
				b := Buffer{MaxDelay: time.Hour}
				var got strings.Builder
				releases := 0
				for _, p := range pieces {
					out := b.Add([]byte(p), now)
					if len(out) == 0 {
						continue
					}
					releases++
					if !utf8.Valid(out) {
						t.Fatalf("release %q is not valid UTF-8", out)
					}
					got.Write(out)
					checkCut(t, tt.text, got.Len(), bounds, tt.spaced)
				}
				got.Write(b.Flush())
				if got.String() != tt.text {
					t.Fatalf("got text %q, want %q", got.String(), tt.text)
				}
				if b.Len() != 0 {
					t.Errorf("got %d bytes held after Flush, want 0", b.Len())
				}
				if releases == 0 && len(pieces) > 1 {
					t.Errorf("got no release before the flush from %d pieces", len(pieces))
				}
			})
		}
	}
}

// The releases of whitespace-separated text are whole words, each with the
// whitespace before it: what the client sees is one event per word.
func TestBufferReleasesWords(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   []string // releases, the flush last
	}{
		{"english tokens", []string{"Hello", " wor", "ld", ",", " how", " are", " you", "?"},
			[]string{"", "Hello", "", "", " world,", " how", " are", "", " you?"}},
		{"korean tokens", []string{" 스트림", "은", " 빠른", " 게이트", "웨이", "를"},
			[]string{"", "", " 스트림은", " 빠른", "", "", " 게이트웨이를"}},
		{"chinese tokens", []string{"流式", "网关", "。", "它"},
			[]string{"流", "式网", "关", "。", "它"}},
		{"paragraph", []string{"end.", "\n\n", "Next"},
			[]string{"", "end.", "", "\n\nNext"}},
		{"skin tone in the next piece", []string{"hi 👋", "🏽", " all"},
			[]string{"hi", "", " 👋🏽", " all"}},
		{"zwj sequence cut after the joiner", []string{"我👨\u200d", "👩", "好"},
			[]string{"我", "", "👨\u200d👩", "好"}},
		{"flag in halves", []string{"国🇰", "🇷", "国"},
			[]string{"国", "", "🇰🇷", "国"}},
		{"rune in halves", []string{"中\xe6", "\x96\x87", "字"},
			[]string{"", "中", "文", "字"}},
		{"no-break space joins", []string{"10\u00a0km", " done"},
			[]string{"", "10\u00a0km", " done"}},
	}
	now := time.Unix(0, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Buffer{MaxDelay: time.Hour}
			var got []string
			for _, p := range tt.pieces {
				got = append(got, string(b.Add([]byte(p), now)))
			}
			got = append(got, string(b.Flush()))
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("got releases %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		name, text string
		want       int
	}{
		{"empty", "", 0},
		{"one word", "hello", 0},
		{"leading space", " hello", 0},
		{"two words", "hello world", 5},
		{"trailing space", "hello ", 5},
		{"spaces only", "   ", 0},
		{"number with a point", "3.14", 0},
		{"han", "中文", 3},
		{"han then latin", "中a", 3},
		{"latin then han", "a中", 1},
		{"space then han", "a 中", 1},
		{"ideographic space", "한국\u3000어", 6},
		{"incomplete rune", "a b\xe4\xb8", 1},
		{"combining mark last", "cafe\u0301 x", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cut([]byte(tt.text)); got != tt.want {
				t.Errorf("Cut(%q) = %d, want %d", tt.text, got, tt.want)
			}
		})
	}
}

// step is one event of a simulated stream: a piece arriving after gap.
type step struct {
	gap   time.Duration
	piece string
}

// run plays steps into a Buffer on a simulated clock, calling Expire at
// each Deadline as the relay's timer does, and returns each rune's added
// delay (release time − arrival of its last byte: a rune cut by the pieces
// is text only once whole) and the releases.
func run(t *testing.T, maxDelay time.Duration, steps []step) (delays []time.Duration, releases []string) {
	t.Helper()
	b := Buffer{MaxDelay: maxDelay}
	now := time.Unix(0, 0)
	var arrived, left []time.Time // per byte
	var text []byte
	take := func(out []byte) {
		if len(out) == 0 {
			return
		}
		releases = append(releases, string(out))
		for range out {
			left = append(left, now)
		}
	}
	for _, s := range steps {
		at := now.Add(s.gap)
		for {
			d, ok := b.Deadline()
			if !ok || d.After(at) {
				break
			}
			now = d
			take(b.Expire(now))
		}
		now = at
		for range len(s.piece) {
			arrived = append(arrived, now)
		}
		text = append(text, s.piece...)
		take(b.Add([]byte(s.piece), now))
	}
	take(b.Flush())
	if len(left) != len(arrived) {
		t.Fatalf("got %d bytes released, want %d", len(left), len(arrived))
	}
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRune(text[i:])
		delays = append(delays, left[i].Sub(arrived[i+n-1]))
		i += n
	}
	return delays, releases
}

// No text is held longer than MaxDelay, whatever the gaps between pieces:
// random gaps around the limit over every text, cut at random byte ranges.
func TestBufferDelayBound(t *testing.T) {
	const maxDelay = 50 * time.Millisecond
	for _, tt := range texts {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 2))
			var steps []step
			for rest := tt.text; rest != ""; {
				n := min(len(rest), 1+rng.IntN(10))
				gap := time.Duration(rng.IntN(90)) * time.Millisecond
				steps, rest = append(steps, step{gap, rest[:n]}), rest[n:]
			}
			delays, releases := run(t, maxDelay, steps)
			if got := strings.Join(releases, ""); got != tt.text {
				t.Fatalf("%s seed %d: got text %q, want %q", tt.name, seed, got, tt.text)
			}
			for i, d := range delays {
				if d > maxDelay || d < 0 {
					t.Fatalf("%s seed %d: rune %d released after %v, want at most %v", tt.name, seed, i, d, maxDelay)
				}
			}
		}
	}
}

// At the deadline the text held goes out even inside a word: a word whose
// end is late is cut rather than held past MaxDelay.
func TestBufferDeadline(t *testing.T) {
	ms := time.Millisecond
	delays, releases := run(t, 50*ms, []step{{0, "Hello"}, {30 * ms, " wor"}, {60 * ms, "ld"}, {5 * ms, " again"}})
	want := []string{"Hello", " wor", "ld", " again"}
	if fmt.Sprintf("%q", releases) != fmt.Sprintf("%q", want) {
		t.Errorf("got releases %q, want %q", releases, want)
	}
	// "Hello" waits 30 ms for its end, " wor" the full 50 ms (its end
	// comes 60 ms later), "ld" 5 ms for " again", " again" 0 (the flush).
	var got []time.Duration
	for _, n := range []int{0, 5, 9, 11} { // all ASCII: runes are bytes
		got = append(got, delays[n])
	}
	if fmt.Sprint(got) != fmt.Sprint([]time.Duration{30 * ms, 50 * ms, 5 * ms, 0}) {
		t.Errorf("got delays %v, want [30ms 50ms 5ms 0s]", got)
	}
	var zero Buffer
	if out := zero.Add([]byte("no delay"), time.Unix(0, 0)); string(out) != "no delay" {
		t.Errorf("zero Buffer: got %q, want everything released", out)
	}
	if _, ok := zero.Deadline(); ok {
		t.Error("zero Buffer: got a deadline with nothing held")
	}
}

// Events per answer: the sim's English and Korean answers (a token per
// chunk, " word" or a Korean particle) as a client receives them without
// and with smoothing.
func TestEventsPerAnswer(t *testing.T) {
	tests := []struct {
		name   string
		tokens []string
	}{
		{"english", strings.SplitAfter(strings.Repeat("The| gate|way| relays| every| tok|en| as| it| arr|ives|.| ", 20), "|")},
		{"korean", strings.SplitAfter(strings.Repeat("스트림|은| 빠른| 게이트|웨이|를| 통해| 도착|합니다|.| ", 20), "|")},
		{"chinese", strings.SplitAfter(strings.Repeat("流式|网关|在|每个|令牌|到达|时|立即|转发|。|", 20), "|")},
	}
	for _, tt := range tests {
		b := Buffer{MaxDelay: time.Hour}
		events := 0
		for _, tok := range tt.tokens {
			if len(b.Add([]byte(strings.TrimSuffix(tok, "|")), time.Unix(0, 0))) > 0 {
				events++
			}
		}
		if b.Len() > 0 {
			events++
		}
		t.Logf("%s: %d chunks upstream, %d events smoothed", tt.name, len(tt.tokens), events)
		if events >= len(tt.tokens) && tt.name != "chinese" {
			t.Errorf("%s: got %d events from %d chunks, want fewer", tt.name, events, len(tt.tokens))
		}
	}
}

func BenchmarkBufferAdd(b *testing.B) {
	for _, tt := range texts {
		b.Run(tt.name, func(b *testing.B) {
			pieces := splits(tt.text)["random0"]
			buf := Buffer{MaxDelay: time.Hour}
			now := time.Unix(0, 0)
			b.ReportAllocs()
			b.SetBytes(int64(len(tt.text)))
			for b.Loop() {
				for _, p := range pieces {
					buf.Add([]byte(p), now)
				}
				buf.Flush()
			}
		})
	}
}

// BenchmarkBufferNoSpace is a long run of text without a cut point (a
// base64 blob, a URL, Thai) held until its deadline: each Add scans only
// the new piece, so the cost per piece stays flat however much is held.
func BenchmarkBufferNoSpace(b *testing.B) {
	for _, held := range []int{100, 10000} {
		b.Run(fmt.Sprint("pieces=", held), func(b *testing.B) {
			buf := Buffer{MaxDelay: time.Hour}
			now := time.Unix(0, 0)
			piece := []byte("aGVsbG8")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i++; i%held == 0 {
					buf.Flush()
				}
				buf.Add(piece, now)
			}
		})
	}
}

// Whatever the text and wherever the pieces are cut, the releases add up
// to the text, and for valid UTF-8 each release before the flush is valid
// UTF-8 ending at a grapheme cluster boundary.
func FuzzBuffer(f *testing.F) {
	for _, tt := range texts {
		f.Add(tt.text, uint64(1))
	}
	f.Add("a\xffb c\xe4\xb8", uint64(2))
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 4))
		b := Buffer{MaxDelay: time.Hour}
		now := time.Unix(0, 0)
		bounds := graphemeBounds(text)
		var got []byte
		for rest := text; rest != ""; {
			n := min(len(rest), 1+rng.IntN(8))
			out := b.Add([]byte(rest[:n]), now)
			rest = rest[n:]
			got = append(got, out...)
			if len(out) > 0 && utf8.ValidString(text) && (!utf8.Valid(out) || !bounds[len(got)]) {
				t.Fatalf("release %q ends at byte %d of %q: not a grapheme boundary", out, len(got), text)
			}
		}
		got = append(got, b.Flush()...)
		if string(got) != text {
			t.Fatalf("got %q, want %q", got, text)
		}
	})
}
