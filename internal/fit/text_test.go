package fit

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// tokenized are texts with their token counts in OpenAI's cl100k_base and
// o200k_base, computed with js-tiktoken 1.0.21 (npm), the reference port
// of tiktoken: prose in five languages, code, JSON tool arguments,
// Markdown, numbers and CJK, as models write them.
var tokenized = []struct {
	name          string
	text          string
	cl100k, o200k int
}{
	{"en", "The quick brown fox jumps over the lazy dog. Streaming gateways relay tokens as soon as they arrive, so users see the answer grow word by word.", 31, 30},
	{"en_prose", "Chat UIs die of latency tails: a 400 ms chunk gap looks like a frozen answer. The gateway must never be the cause, and it must show where the tail comes from. Engineers compare models, providers and settings with numbers, not marketing tables. When a stream is cut in the middle of an answer, the gateway can ask another route to continue it from where it stopped, so the user never notices the failure.", 86, 86},
	{"en_reason", "Okay, the user wants to know why the sky is blue. Let me think about Rayleigh scattering: shorter wavelengths scatter more strongly, roughly as the inverse fourth power of the wavelength. So blue light is scattered much more than red light, which is why the sky looks blue during the day.", 59, 59},
	{"en_short", "Hello! How can I help you today?", 9, 9},
	{"go_code", "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n)\n\nfunc main() {\n\thttp.HandleFunc(\"/\", func(w http.ResponseWriter, r *http.Request) {\n\t\tfmt.Fprintf(w, \"hello, %s\\n\", r.URL.Path[1:])\n\t})\n\tif err := http.ListenAndServe(\":8080\", nil); err != nil {\n\t\tpanic(err)\n\t}\n}\n", 74, 77},
	{"py_code", "import json\n\nclass Cache:\n    def __init__(self, size=128):\n        self.size = size\n        self.items = {}\n\n    def get(self, key, default=None):\n        return self.items.get(key, default)\n\n    def put(self, key, value):\n        if len(self.items) >= self.size:\n            self.items.pop(next(iter(self.items)))\n        self.items[key] = value\n", 83, 83},
	{"js_code", "const sum = (xs) => xs.reduce((a, b) => a + b, 0);\nexport async function fetchAll(urls) {\n  const res = await Promise.all(urls.map((u) => fetch(u).then((r) => r.json())));\n  return res.filter(Boolean);\n}\n", 61, 63},
	{"tool_args", "{\"query\":\"weather in San Francisco\",\"units\":\"metric\",\"days\":5,\"include\":[\"hourly\",\"alerts\"]}", 23, 24},
	{"tool_args2", "{\"path\": \"internal/gateway/bill.go\", \"old_str\": \"b.out += chunks\", \"new_str\": \"b.out += est\"}", 31, 31},
	{"md", "## Results\n\n| model | TTFT p50 | ITL p99 |\n|---|---|---|\n| gpt-4.1 | 250 ms | 40 ms |\n| claude | 310 ms | 35 ms |\n\n- **fast**: yes\n- *cheap*: no\n\n> Note: figures are simulated.\n", 70, 71},
	{"numbers", "Q3 2024: revenue $12,345,678.90 (+17.5%), costs $9,876,543.21, margin 20.0%; 1, 2, 3, 42, 1000, 65536.", 56, 56},
	{"ko", "안녕하세요. 오늘 날씨가 정말 좋네요. 스트리밍 게이트웨이는 토큰을 받는 즉시 전달합니다. 사용자는 답변이 한 글자씩 늘어나는 것을 봅니다.", 82, 44},
	{"zh", "流式网关在收到令牌后立即转发，用户可以逐字看到答案。如果上游在回答中途断开，网关可以请另一条路由继续回答。", 59, 40},
	{"ja", "ストリーミングゲートウェイはトークンを受け取るとすぐに転送します。ユーザーは答えが一文字ずつ増えていくのを見ます。", 59, 45},
	{"mixed", "使用 streamgate 可以把 OpenAI、Anthropic 和 Gemini 的 API 统一到一个 endpoint，延迟 p99 低于 1 ms。", 38, 31},
	{"fr", "Le renard brun rapide saute par-dessus le chien paresseux. Les passerelles relaient les jetons dès qu'ils arrivent, et l'utilisateur voit la réponse grandir mot après mot.", 46, 39},
	{"de", "Der schnelle braune Fuchs springt über den faulen Hund. Die Weiterleitung überträgt jedes Token sofort, sobald es ankommt.", 34, 29},
	{"es", "El rápido zorro marrón salta sobre el perro perezoso. La pasarela reenvía cada token en cuanto llega.", 31, 27},
	{"ru", "Быстрая коричневая лиса прыгает через ленивую собаку. Шлюз передаёт каждый токен сразу, как только он приходит.", 52, 36},
	{"emoji", "Great job! 🎉🎉 Let's ship it 🚀 — thanks 🙏", 21, 16},
	{"url", "See https://docs.anthropic.com/en/api/messages-streaming#event-types and https://platform.openai.com/docs/api-reference/chat/streaming for details.", 32, 33},
	{"indent", "        if x:\n            y = 1\n        else:\n            y = 2\n", 19, 19},
	{"latex", "The energy is $E = mc^2$ and the integral $\\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2}$.", 39, 39},
	{"shell", "$ go test -race -count=1 ./internal/gateway/... && gofmt -l . | wc -l\nok  \tgithub.com/streamgate/streamgate/internal/gateway\t12.345s\n", 44, 45},
	{"html", "<div class=\"card\"><h2>Title</h2><p>Some <b>bold</b> text &amp; a <a href=\"/x\">link</a>.</p></div>", 41, 42},
	{"sql", "SELECT key_id, SUM(cost_usd) AS spend FROM usage WHERE time >= NOW() - INTERVAL '30 days' GROUP BY key_id ORDER BY spend DESC LIMIT 10;", 36, 37},
}

// random are strings a tokenizer splits finely (base64, hex), with their
// cl100k_base and o200k_base counts: the estimate runs under them.
var random = []struct {
	name          string
	text          string
	cl100k, o200k int
}{
	{"hex", "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", 47, 47},
	{"b64", "EqQBCkYIBxgCKkBsaWduYXR1cmU9aGVsbG8gd29ybGQgdGhpcyBpcyBhIHNpZ25hdHVyZQ==", 50, 47},
}

// TestTextBounds: the estimate of each sample is within the bounds Text
// documents: 0.7-1.4 times its cl100k_base count, 0.75-1.55 times its
// o200k_base count; random strings no lower than 0.6 times either.
func TestTextBounds(t *testing.T) {
	for _, s := range tokenized {
		got := EstimateText(s.text)
		if r := float64(got) / float64(s.cl100k); r < 0.7 || r > 1.4 {
			t.Errorf("%s: got %d tokens, cl100k_base %d (%.2fx), want 0.7-1.4x", s.name, got, s.cl100k, r)
		}
		if r := float64(got) / float64(s.o200k); r < 0.75 || r > 1.55 {
			t.Errorf("%s: got %d tokens, o200k_base %d (%.2fx), want 0.75-1.55x", s.name, got, s.o200k, r)
		}
	}
	for _, s := range random {
		got := EstimateText(s.text)
		if r := float64(got) / float64(min(s.cl100k, s.o200k)); r < 0.6 || r > 1.4 {
			t.Errorf("%s: got %d tokens, cl100k_base %d, o200k_base %d (%.2fx the lower), want 0.6-1.4x", s.name, got, s.cl100k, s.o200k, r)
		}
	}
}

// TestTextRules: the rules of Text on small texts, counted by hand.
func TestTextRules(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"the", 1},
		{"hello world", 2},          // a word each, the space free
		{"international", 4},        // 13 letters: 1 + 9/3
		{"ResponseWriter", 3},       // camelCase: Response (1 + 4/3) + Writer (1 + 2/3)
		{"12345", 3},                // 2 digits a token
		{"a, b", 3},                 // ¾ for the comma, rounded up
		{"{}", 1},                   // ¾
		{`{"a":"b"}`, 5},            // {" ¾ + a 1 + ":" ¾ + b 1 + "} ¾: 4¼
		{"a\n\n    b", 3},           // the breaks and their indentation: 1
		{"a  b", 3},                 // two spaces: 1
		{"你好世界", 4},                 // CJK: 1 each
		{"안녕", 2},                   // Hangul: 1 each
		{"привет", 3},               // 6 letters of weight 2: 1 + 8/3
		{"🎉", 2},                    // anything else: 2
		{strings.Repeat("a", 7), 2}, // 1 + 3/3
		{strings.Repeat("é", 2), 1}, // weight 4: 1
		{strings.Repeat("é", 3), 1}, // weight 6: 1 + 2/3
		{strings.Repeat("é", 4), 2}, // weight 8: 1 + 4/3
	} {
		if got := EstimateText(tt.text); got != tt.want {
			t.Errorf("EstimateText(%q): got %d, want %d", tt.text, got, tt.want)
		}
	}
}

// TestTextPieces: a text counts the same whole, piece by piece (a stream's
// deltas, cut anywhere between characters), and as JSON string contents
// escaped as encoders write them (\u escapes of every non-ASCII
// character, surrogate pairs included, as Python's json.dumps does).
func TestTextPieces(t *testing.T) {
	for _, s := range append(tokenized, random...) {
		want := EstimateText(s.text)
		for _, size := range []int{1, 2, 3, 7} {
			var pieces, escaped Text
			runes := []rune(s.text)
			for i := 0; i < len(runes); i += size {
				piece := string(runes[i:min(i+size, len(runes))])
				pieces.Add(piece)
				escaped.AddJSON(asciiJSON(piece))
			}
			if got := pieces.Tokens(); got != want {
				t.Errorf("%s in pieces of %d: got %d, want %d", s.name, size, got, want)
			}
			if got := escaped.Tokens(); got != want {
				t.Errorf("%s escaped in pieces of %d: got %d, want %d", s.name, size, got, want)
			}
		}
		var raw Text
		b, _ := json.Marshal(s.text)
		raw.AddJSON(b[1 : len(b)-1])
		if got := raw.Tokens(); got != want {
			t.Errorf("%s as JSON: got %d, want %d", s.name, got, want)
		}
	}
}

// asciiJSON returns s as JSON string contents with every character beyond
// ASCII escaped (\uXXXX, surrogate pairs beyond the BMP).
func asciiJSON(s string) []byte {
	b, _ := json.Marshal(s)
	var out []byte
	for _, r := range string(b[1 : len(b)-1]) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xFFFF:
			r -= 0x10000
			out = appendU(appendU(out, 0xD800+(r>>10)), 0xDC00+(r&0x3FF))
		default:
			out = appendU(out, r)
		}
	}
	return out
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
}

// FuzzTextJSON: any bytes are counted without failing; valid JSON string
// contents count as their decoded text, whole or split between characters.
func FuzzTextJSON(f *testing.F) {
	for _, s := range tokenized {
		b, _ := json.Marshal(s.text)
		f.Add(b[1:len(b)-1], 3)
	}
	f.Add([]byte(`\ud83c\udf89 \ud83c x \udf89 \u00 \`), 1)
	f.Fuzz(func(t *testing.T, raw []byte, cut int) {
		var whole Text
		whole.AddJSON(raw)
		if whole.Tokens() < 0 || whole.Tokens() > 2*len(raw)+1 {
			t.Fatalf("AddJSON(%q): %d tokens", raw, whole.Tokens())
		}
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil || !utf8.ValidString(s) {
			return
		}
		if got, want := whole.Tokens(), EstimateText(s); got != want {
			t.Fatalf("AddJSON(%q): got %d, want %d as decoded", raw, got, want)
		}
		if cut < 0 || cut > len(s) || cut < len(s) && !utf8.RuneStart(s[cut]) {
			return
		}
		var split Text
		split.Add(s[:cut])
		split.Add(s[cut:])
		if got, want := split.Tokens(), EstimateText(s); got != want {
			t.Fatalf("%q split at %d: got %d, want %d", s, cut, got, want)
		}
	})
}

var sinkTokens int

// BenchmarkTextChunk counts the text of one streamed chunk, " token", as the
// relay does for every content chunk.
func BenchmarkTextChunk(b *testing.B) {
	raw := []byte(" token")
	b.ReportAllocs()
	var t Text
	for b.Loop() {
		t.AddJSON(raw)
	}
	sinkTokens = t.Tokens()
}
