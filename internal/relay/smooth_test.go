package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

const maxDelay = 50 * time.Millisecond

// Answers in the scripts smoothing must keep whole.
var smoothTexts = []struct {
	name   string
	text   string
	spaced bool // words separated by whitespace: none may be split
}{
	{"english", "The gateway relays every token as it arrives. Streams stay fast,\neven when 3.14% of them \"fail\"!\n\nA new paragraph.", true},
	{"korean", "스트림은 빠른 게이트웨이를 통해 도착합니다. 각 토큰이 측정됩니다, 그리고 결과를 보여줍니다.", true},
	{"chinese", "流式网关在每个令牌到达时立即转发。它测量延迟，并且自动回退！", false},
	{"japanese", "ストリームは、トークンが届くとすぐに転送されます。か\u3099ゲートウェイを使う。", false},
	{"emoji", "Family 👨‍👩‍👧‍👦 waves 👋🏽👋🏿 from 🇰🇷🇺🇸 with 🏳️‍🌈 and café́ done.", true},
}

// chunkOf is an upstream content chunk with the members a real one has.
func chunkOf(text string) []byte {
	return append(append([]byte(`{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":`),
		api.AppendString(nil, text)...), `},"logprobs":null,"finish_reason":null}]}`...)
}

const (
	roleData      = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	reasoningData = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","choices":[{"index":0,"delta":{"reasoning_content":"Seoul, so Celsius."},"finish_reason":null}]}`
	toolStart     = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`
	toolArgs1     = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Se"}}]},"finish_reason":null}]}`
	toolArgs2     = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"oul\"}"}}]},"finish_reason":null}]}`
	logprobsData  = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" prob"},"logprobs":{"content":[{"token":" prob","logprob":-0.1}]},"finish_reason":null}]}`
	finishData    = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
	usageData     = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"m-up","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":30,"total_tokens":39}}`
)

// flushLog is a client: it keeps the bytes written and when each was
// flushed (on synctest's clock), the time the client gets them.
type flushLog struct {
	mu      sync.Mutex
	h       http.Header
	buf     []byte
	flushed []time.Time // per byte of buf flushed so far
}

func newFlushLog() *flushLog { return &flushLog{h: http.Header{}} }

func (w *flushLog) Header() http.Header { return w.h }
func (w *flushLog) WriteHeader(int)     {}
func (w *flushLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	return len(b), nil
}
func (w *flushLog) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for len(w.flushed) < len(w.buf) {
		w.flushed = append(w.flushed, now)
	}
}

// sent is one event as the client got it.
type sent struct {
	data string
	at   time.Time
}

// events returns the data events written, each with its flush time; an
// event never flushed fails the test.
func (w *flushLog) events(t *testing.T) []sent {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []sent
	off := 0
	for _, block := range strings.SplitAfter(string(w.buf), "\n\n") {
		off += len(block)
		var data []string
		for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				data = append(data, d)
			}
		}
		if data == nil {
			continue
		}
		if off > len(w.flushed) {
			t.Fatalf("event %q written but never flushed", block)
		}
		out = append(out, sent{strings.Join(data, "\n"), w.flushed[off-1]})
	}
	return out
}

// upstep is one upstream event: data after gap (a scriptedStream step
// written with text).
type upstep struct {
	gap  time.Duration
	data string
}

// scripted returns the scriptedStream of steps ending with end.
func scripted(ctx context.Context, steps []upstep, end error) *scriptedStream {
	s := &scriptedStream{ctx: ctx, end: end, steps: make([]step, len(steps))}
	for i, u := range steps {
		s.steps[i] = step{u.gap, []byte(u.data)}
	}
	return s
}

// relayScript runs one attempt over steps with opts on synctest's clock
// (the caller is inside synctest.Test) and returns the events the client
// got, when each upstream event arrived, the attempt's error and the session.
func relayScript(t *testing.T, opts relay.Options, steps []upstep, end error) ([]sent, []time.Time, error, *relay.Session) {
	t.Helper()
	w := newFlushLog()
	sess := relay.NewSession(w, opts)
	t.Cleanup(sess.Close)
	var arrived []time.Time
	at := time.Now()
	for _, s := range steps {
		at = at.Add(s.gap)
		arrived = append(arrived, at)
	}
	err := sess.Attempt(context.Background(), metrics.New(nil).Stream("m", "p/m"), func(ctx context.Context) (provider.Stream, error) {
		return scripted(ctx, steps, end), nil
	})
	return w.events(t), arrived, err, sess
}

// contentOf returns the content text of a plain content chunk, and false
// for any other event.
func contentOf(t *testing.T, data string) (string, bool) {
	t.Helper()
	var c struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Created int64  `json:"created"`
		FP      string `json:"system_fingerprint"`
		Choices []struct {
			Delta map[string]json.RawMessage `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		if data == "[DONE]" {
			return "", false
		}
		t.Fatalf("event %q is not JSON: %v", data, err)
	}
	if len(c.Choices) != 1 || len(c.Choices[0].Delta) != 1 || c.Choices[0].Delta["content"] == nil {
		return "", false
	}
	var s string
	if err := json.Unmarshal(c.Choices[0].Delta["content"], &s); err != nil {
		t.Fatalf("event %q: content is not a string", data)
	}
	if c.ID != "chatcmpl-9" || c.Model != "m-up" || c.Created != 1764400000 || c.FP != "fp_1" {
		t.Fatalf("event %q: got id %q model %q created %d fingerprint %q, want the upstream chunk's", data, c.ID, c.Model, c.Created, c.FP)
	}
	return s, true
}

// pieces cuts text at rune boundaries (a JSON string cannot split a rune,
// but it can split a grapheme cluster or a word): one rune each, or 1 to 6
// runes at random.
func pieces(text string, rng *rand.Rand) []string {
	var out []string
	rs := []rune(text)
	for len(rs) > 0 {
		n := 1
		if rng != nil {
			n = min(len(rs), 1+rng.IntN(6))
		}
		out, rs = append(out, string(rs[:n])), rs[n:]
	}
	return out
}

// isCJK is the test's own list of scripts written without spaces.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) ||
		(r >= 0x3001 && r <= 0x30ff) || (r >= 0xff00 && r <= 0xffef)
}

// checkBoundary fails when an event's text ends at i of text inside a
// grapheme cluster or, for spaced scripts, inside a word.
func checkBoundary(t *testing.T, text string, i int, spaced bool) {
	t.Helper()
	bounds := map[int]bool{}
	g := uniseg.NewGraphemes(text)
	for g.Next() {
		from, _ := g.Positions()
		bounds[from] = true
	}
	where := fmt.Sprintf("%q|%q", text[max(0, i-12):i], text[i:min(len(text), i+12)])
	if !bounds[i] {
		t.Fatalf("an event ends inside a grapheme cluster: %s", where)
	}
	before, _ := utf8.DecodeLastRuneInString(text[:i])
	after, _ := utf8.DecodeRuneInString(text[i:])
	if unicode.IsSpace(after) || (!spaced && (isCJK(before) || isCJK(after))) {
		return
	}
	t.Fatalf("an event ends inside a word: %s", where)
}

// Text streamed a rune or a few at a time, 2 ms apart, reaches the client
// in events that end on word boundaries (Korean and English words whole,
// Chinese and Japanese per character, no grapheme cluster split), each a
// well-formed chunk with the upstream's id, model and created, the text
// unchanged, no byte later than max_delay after it arrived; and the number
// of events against the chunks is logged.
func TestSmoothingWholeWords(t *testing.T) {
	for _, tt := range smoothTexts {
		for _, how := range []string{"runes", "random"} {
			t.Run(tt.name+"/"+how, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var rng *rand.Rand
					if how == "random" {
						rng = rand.New(rand.NewPCG(1, 2))
					}
					ps := pieces(tt.text, rng)
					// 2 ms a piece: the longest word (10 runes) comes within
					// max_delay, so only words decide the events.
					steps := []upstep{{2 * time.Millisecond, roleData}}
					for _, p := range ps {
						steps = append(steps, upstep{2 * time.Millisecond, string(chunkOf(p))})
					}
					steps = append(steps, upstep{2 * time.Millisecond, finishData})
					evs, arrived, err, sess := relayScript(t, relay.Options{Smoothing: maxDelay}, steps, nil)
					if err != nil {
						t.Fatalf("Attempt: %v", err)
					}
					var got strings.Builder
					n := 0
					for i, ev := range evs {
						s, ok := contentOf(t, ev.data)
						if !ok {
							continue
						}
						n++
						got.WriteString(s)
						if i+3 < len(evs) { // not the last text, flushed with the finish
							checkBoundary(t, tt.text, got.Len(), tt.spaced)
						}
					}
					if got.String() != tt.text {
						t.Fatalf("got text %q, want %q", got.String(), tt.text)
					}
					checkDelays(t, evs, arrived[1:len(ps)+1], ps)
					if st := sess.Stats(); st.ContentChunks != len(ps) {
						t.Errorf("got ContentChunks %d, want %d (the chunks read)", st.ContentChunks, len(ps))
					}
					t.Logf("%d upstream chunks, %d events", len(ps), n)
				})
			})
		}
	}
}

// checkDelays fails when a byte of the text reached the client more than
// maxDelay after its chunk arrived (or before it).
func checkDelays(t *testing.T, evs []sent, arrived []time.Time, ps []string) {
	t.Helper()
	var byteArrived []time.Time
	for i, p := range ps {
		for range len(p) {
			byteArrived = append(byteArrived, arrived[i])
		}
	}
	k := 0
	var worst time.Duration
	for _, ev := range evs {
		s, ok := contentOf(t, ev.data)
		if !ok {
			continue
		}
		for range len(s) {
			d := ev.at.Sub(byteArrived[k])
			if d < 0 || d > maxDelay {
				t.Fatalf("byte %d reached the client %v after it arrived, want 0 to %v", k, d, maxDelay)
			}
			worst = max(worst, d)
			k++
		}
	}
	if k != len(byteArrived) {
		t.Fatalf("got %d bytes of text, want %d", k, len(byteArrived))
	}
}

// Whatever the gaps, on synctest's clock no text waits longer than
// max_delay: gaps from 0 to 120 ms around a 50 ms limit, pieces of 1 to 6
// runes, and the limit is reached (the timer releases text mid-gap).
func TestSmoothingDelayBound(t *testing.T) {
	for _, tt := range smoothTexts {
		for seed := range uint64(5) {
			t.Run(fmt.Sprint(tt.name, "/seed", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 3))
					ps := pieces(tt.text, rng)
					var steps []upstep
					for _, p := range ps {
						steps = append(steps, upstep{time.Duration(rng.IntN(120)) * time.Millisecond, string(chunkOf(p))})
					}
					evs, arrived, err, _ := relayScript(t, relay.Options{Smoothing: maxDelay}, steps, nil)
					if err != nil {
						t.Fatalf("Attempt: %v", err)
					}
					checkDelays(t, evs, arrived, ps)
					var got strings.Builder
					for _, ev := range evs {
						s, _ := contentOf(t, ev.data)
						got.WriteString(s)
					}
					if got.String() != tt.text {
						t.Fatalf("got text %q, want %q", got.String(), tt.text)
					}
				})
			})
		}
	}
	// A word whose end comes late goes out at the limit, not at its end.
	synctest.Test(t, func(t *testing.T) {
		steps := []upstep{{0, string(chunkOf("Hello"))}, {10 * time.Millisecond, string(chunkOf(" wor"))}, {200 * time.Millisecond, string(chunkOf("ld"))}}
		evs, arrived, _, _ := relayScript(t, relay.Options{Smoothing: maxDelay}, steps, nil)
		if len(evs) < 2 {
			t.Fatalf("got %d events, want at least 2", len(evs))
		}
		if s, _ := contentOf(t, evs[1].data); s != " wor" || evs[1].at.Sub(arrived[1]) != maxDelay {
			t.Errorf("got %q %v after it arrived, want \" wor\" after exactly %v", s, evs[1].at.Sub(arrived[1]), maxDelay)
		}
	})
}

// Tool calls, reasoning, chunks with logprobs, the finish and the usage
// chunk reach the client byte for byte, each after all the text that came
// before it upstream; only plain text is re-chunked.
func TestSmoothingPassesOthersThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		steps := []upstep{
			{ms, roleData},
			{ms, string(chunkOf("Let"))}, {ms, string(chunkOf(" me"))}, {ms, string(chunkOf(" check"))}, {ms, string(chunkOf(" Se"))},
			{ms, reasoningData},
			{ms, string(chunkOf("oul"))}, {ms, string(chunkOf("'s wea"))},
			{ms, logprobsData},
			{ms, string(chunkOf("ther"))},
			{ms, toolStart}, {ms, toolArgs1}, {ms, toolArgs2},
			{ms, finishData}, {ms, usageData},
		}
		evs, _, err, _ := relayScript(t, relay.Options{Smoothing: maxDelay, IncludeUsage: true}, steps, nil)
		if err != nil {
			t.Fatalf("Attempt: %v", err)
		}
		// What the client must see: the text between two other events, and
		// the other events as they came.
		var want, got []string
		text := ""
		for _, s := range steps {
			if c, ok := contentOf(t, s.data); ok && s.data != logprobsData {
				text += c
				continue
			}
			if text != "" {
				want = append(want, "text "+text)
				text = ""
			}
			want = append(want, s.data)
		}
		want = append(want, "[DONE]")
		for _, ev := range evs {
			if c, ok := contentOf(t, ev.data); ok && ev.data != logprobsData {
				if n := len(got); n > 0 && strings.HasPrefix(got[n-1], "text ") {
					got[n-1] += c
				} else {
					got = append(got, "text "+c)
				}
				continue
			}
			got = append(got, ev.data)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("got events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// The text held when an attempt ends goes out before what follows: before
// the error event of a stream that cannot go on, and before a continuation,
// with Prefix counting it (the continuation's text follows it).
func TestSmoothingAtAttemptEnd(t *testing.T) {
	ms := time.Millisecond
	text := []upstep{{ms, string(chunkOf("Hello"))}, {ms, string(chunkOf(" wor"))}}
	t.Run("error event", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			steps := append(text, upstep{ms, `{"error":{"message":"overloaded"}}`})
			evs, _, err, _ := relayScript(t, relay.Options{Smoothing: maxDelay}, steps, nil)
			var uerr *relay.UpstreamError
			if !errors.As(err, &uerr) {
				t.Fatalf("got %v, want an *UpstreamError", err)
			}
			got := ""
			for _, ev := range evs {
				if c, ok := contentOf(t, ev.data); ok {
					got += c
				} else {
					got += "|" + ev.data
				}
			}
			if want := `Hello wor|{"error":{"message":"overloaded","type":"","code":null,"param":null}}`; got != want { // re-encoded, redacted
				t.Errorf("got %q, want %q", got, want)
			}
		})
	})
	t.Run("cut and continued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newFlushLog()
			sess := relay.NewSession(w, relay.Options{Smoothing: maxDelay, Continuable: true})
			defer sess.Close()
			attempt := func(steps []upstep, end error) error {
				return sess.Attempt(context.Background(), nil, func(ctx context.Context) (provider.Stream, error) {
					return scripted(ctx, steps, end), nil
				})
			}
			if err := attempt(text, provider.ErrTruncated); !errors.Is(err, provider.ErrTruncated) {
				t.Fatalf("got %v, want ErrTruncated", err)
			}
			prefix, ok := sess.Prefix()
			if prefix != "Hello wor" || !ok {
				t.Fatalf("got Prefix %q %v, want \"Hello wor\" true (the held text counted)", prefix, ok)
			}
			sentBefore := ""
			for _, ev := range w.events(t) {
				c, _ := contentOf(t, ev.data)
				sentBefore += c
			}
			if sentBefore != prefix {
				t.Errorf("got %q sent at the cut, want the prefix %q", sentBefore, prefix)
			}
			if err := attempt([]upstep{{ms, string(chunkOf("ld"))}, {ms, string(chunkOf(" again."))}, {ms, finishData}}, nil); err != nil {
				t.Fatalf("continuation: %v", err)
			}
			got := ""
			for _, ev := range w.events(t) {
				c, _ := contentOf(t, ev.data)
				got += c
			}
			if got != "Hello world again." {
				t.Errorf("got %q, want %q", got, "Hello world again.")
			}
		})
	})
	t.Run("fail after the attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newFlushLog()
			sess := relay.NewSession(w, relay.Options{Smoothing: maxDelay, Idle: 100 * ms})
			defer sess.Close()
			err := sess.Attempt(context.Background(), nil, func(ctx context.Context) (provider.Stream, error) {
				return scripted(ctx, append(text, upstep{time.Second, string(chunkOf("ld"))}), nil), nil
			})
			if !errors.Is(err, provider.ErrIdleTimeout) {
				t.Fatalf("got %v, want ErrIdleTimeout", err)
			}
			sess.Fail(http.StatusGatewayTimeout, []byte(`{"error":{"message":"idle"}}`))
			var got []string
			for _, ev := range w.events(t) {
				got = append(got, ev.data)
			}
			if len(got) != 3 || !strings.Contains(got[0], `"Hello"`) || !strings.Contains(got[1], `" wor"`) || got[2] != `{"error":{"message":"idle"}}` {
				t.Errorf("got events %q, want Hello, \" wor\" (at the limit), then the error", got)
			}
		})
	})
}

// Off, the relay writes the upstream's events unchanged: the same bytes
// as the upstream sent, one event per chunk.
func TestSmoothingOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []upstep{{time.Millisecond, string(chunkOf("Hel"))}, {time.Millisecond, string(chunkOf("lo"))}, {time.Millisecond, finishData}}
		evs, _, err, _ := relayScript(t, relay.Options{}, steps, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 4 || evs[0].data != steps[0].data || evs[1].data != steps[1].data || evs[2].data != finishData {
			t.Errorf("got %d events %v, want the upstream's 3 and [DONE]", len(evs), evs)
		}
	})
}

// BenchmarkRelayChunkSmoothed is BenchmarkRelayChunk with smoothing on:
// each chunk is a word (" hello"), so each releases the one before it as a
// rebuilt chunk.
func BenchmarkRelayChunkSmoothed(b *testing.B) {
	ev := []byte("data: " + content(" hello") + "\n\n")
	w := &discardWriter{h: http.Header{}}
	rd := sse.NewReader(&repeatReader{ev: ev, n: b.N}, 0)
	sess := relay.NewSession(w, relay.Options{FirstToken: time.Minute, Idle: time.Minute, Smoothing: maxDelay})
	defer sess.Close()
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	b.ResetTimer()
	err := sess.Attempt(context.Background(), metrics.New(nil).Stream("m", "p/m"), func(context.Context) (provider.Stream, error) {
		return readerStream{rd}, nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(w.flushes)/float64(b.N), "flushes/chunk")
}

// repeatReader yields ev n times, then "[DONE]", in reads of any size.
type repeatReader struct {
	ev   []byte
	n    int
	rest []byte // what is left of the current event
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		switch {
		case r.n > 0:
			r.rest, r.n = r.ev, r.n-1
		case r.n == 0:
			r.rest, r.n = []byte("data: [DONE]\n\n"), -1
		default:
			return 0, io.EOF
		}
	}
	c := copy(p, r.rest)
	r.rest = r.rest[c:]
	return c, nil
}
