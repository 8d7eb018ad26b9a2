package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

func TestLognormalQuantile(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name        string
		median, p99 time.Duration
		z           float64
		want        time.Duration
	}{
		{"median at z=0", 300 * ms, 800 * ms, 0, 300 * ms},
		{"p99 at z99", 300 * ms, 800 * ms, z99, 800 * ms},
		{"constant when p99 equals median", 250 * ms, 250 * ms, 2, 250 * ms},
		{"constant when p99 is zero", 250 * ms, 0, -1, 250 * ms},
		{"zero median", 0, 800 * ms, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lognormalQuantile(tt.median, tt.p99, tt.z)
			if d := got - tt.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGapMeanAndJitter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	itl, jitter := 20*time.Millisecond, 0.3
	var sum, sum2 float64
	for range n {
		g := float64(gapAt(itl, jitter, rng.NormFloat64()))
		if g <= 0 {
			t.Fatalf("gap: got %v, want > 0", g)
		}
		sum += g
		sum2 += g * g
	}
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	if rel := mean/float64(itl) - 1; math.Abs(rel) > 0.01 {
		t.Errorf("mean gap: got %v, want %v", time.Duration(mean), itl)
	}
	if rel := sd / mean; math.Abs(rel-jitter) > 0.01 {
		t.Errorf("relative std-dev: got %.3f, want %.3f", rel, jitter)
	}
	if g := gapAt(itl, 0, 3); g != itl {
		t.Errorf("jitter 0: got %v, want %v", g, itl)
	}
}

// timedWriter records the fake-clock time of every flushed event.
type timedWriter struct {
	h     http.Header
	buf   bytes.Buffer
	start time.Time
	mu    sync.Mutex
	at    []time.Duration // offset of each flush
	data  []string
}

func (w *timedWriter) Header() http.Header         { return w.h }
func (w *timedWriter) WriteHeader(int)             {}
func (w *timedWriter) Write(b []byte) (int, error) { return w.buf.Write(b) }
func (w *timedWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() == 0 {
		return
	}
	w.at = append(w.at, time.Since(w.start))
	w.data = append(w.data, w.buf.String())
	w.buf.Reset()
}

// TestPacing runs a stream on the fake clock of synctest and checks that
// every event is sent exactly at its absolute deadline.
func TestPacing(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		profile Profile
		want    []time.Duration // flush offsets: role+content 1, content..., finish+[DONE]
	}{
		{
			name:    "constant ttft and itl",
			profile: Profile{Name: "p", TTFT: 100 * ms, ITL: 10 * ms, Tokens: 4},
			want:    []time.Duration{100 * ms, 110 * ms, 120 * ms, 130 * ms, 130 * ms},
		},
		{
			name:    "prefill per prompt token",
			profile: Profile{Name: "p", TTFT: 100 * ms, ITL: 10 * ms, Tokens: 2, PrefillPerToken: ms},
			// prompt "hello there" = 3 (framing) + 3 (message) + 3 (11 chars / 4) = 9 tokens
			want: []time.Duration{109 * ms, 119 * ms, 119 * ms},
		},
		{
			name:    "stall at chunk 3 shifts later deadlines",
			profile: Profile{Name: "p", TTFT: 50 * ms, ITL: 10 * ms, Tokens: 4, Faults: Faults{StallAt: 3, StallFor: time.Second}},
			want:    []time.Duration{50 * ms, 60 * ms, 1070 * ms, 1080 * ms, 1080 * ms},
		},
		{
			name:    "stall first",
			profile: Profile{Name: "p", TTFT: 50 * ms, ITL: 10 * ms, Tokens: 1, Faults: Faults{StallFirst: 2 * time.Second}},
			want:    []time.Duration{2050 * ms, 2050 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Options{Profile: tt.profile})
				w := &timedWriter{h: http.Header{}, start: time.Now()}
				req := httptest.NewRequest("POST", "/v1/chat/completions",
					strings.NewReader(`{"model":"x","stream":true,"messages":[{"role":"user","content":"hello there"}]}`))
				s.ServeHTTP(w, req)
				if len(w.at) != len(tt.want) {
					t.Fatalf("flushes: got %d %q, want %d", len(w.at), w.data, len(tt.want))
				}
				for i := range w.at {
					if w.at[i] != tt.want[i] {
						t.Errorf("flush %d (%q): got %v, want %v", i, w.data[i], w.at[i], tt.want[i])
					}
				}
				if last := w.data[len(w.data)-1]; !strings.HasSuffix(last, "data: [DONE]\n\n") {
					t.Errorf("last event: got %q, want [DONE]", last)
				}
			})
		})
	}
}

// TestPacingNoDrift checks on the fake clock that jittered deadlines are
// absolute: the stream's total time is the TTFT plus the sum of the drawn
// gaps, whatever the per-chunk delays are.
func TestPacingNoDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Profile{Name: "p", TTFT: 100 * time.Millisecond, ITL: 20 * time.Millisecond, ITLJitter: 0.5, Tokens: 50}
		s := New(Options{Profile: p, Seed: 3})
		w := &timedWriter{h: http.Header{}, start: time.Now()}
		req := httptest.NewRequest("POST", "/v1/chat/completions",
			strings.NewReader(`{"model":"x","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		s.ServeHTTP(w, req)
		// Recompute the same draws: the request's timing generator.
		key := splitmix64(splitmix64(3) + 1)
		rng := rand.New(rand.NewPCG(key, 2))
		want := lognormalQuantile(p.TTFT, p.TTFT, rng.NormFloat64())
		for range 49 {
			want += gapAt(p.ITL, p.ITLJitter, rng.NormFloat64())
		}
		if got := w.at[len(w.at)-1]; got != want {
			t.Errorf("end of stream: got %v, want %v", got, want)
		}
	})
}

func TestPacerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := newPacer(ctx)
		done := make(chan error)
		go func() { done <- p.wait(time.Now().Add(time.Hour)) }()
		synctest.Wait()
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("wait: got %v, want context.Canceled", err)
		}
		if err := p.wait(time.Now().Add(-time.Second)); err != context.Canceled {
			t.Errorf("past deadline after cancel: got %v, want context.Canceled", err)
		}
	})
}

func TestFIFOOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFIFO(1)
		ctx := context.Background()
		if err := q.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		cctx, cancel := context.WithCancel(ctx)
		for i := range 4 {
			c := ctx
			if i == 1 {
				c = cctx // waiter 1 gives up while queued
			}
			go func() {
				if q.acquire(c) != nil {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				q.release()
			}()
			synctest.Wait() // queued in this order
		}
		if n := q.waiting(); n != 4 {
			t.Fatalf("waiting: got %d, want 4", n)
		}
		cancel()
		synctest.Wait()
		q.release()
		synctest.Wait()
		if want := []int{0, 2, 3}; !equalInts(order, want) {
			t.Errorf("order: got %v, want %v", order, want)
		}
		if q.free != 1 || q.waiting() != 0 {
			t.Errorf("after all: got %d free and %d waiting, want 1 and 0", q.free, q.waiting())
		}
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTextGen(t *testing.T) {
	for _, lang := range []string{"en", "ko"} {
		t.Run(lang, func(t *testing.T) {
			g := newTextGen(lang, rand.New(rand.NewPCG(1, 1)))
			var b []byte
			b = append(b, '"')
			for range 2000 {
				tok := g.next()
				if len(tok) == 0 || !utf8.Valid(tok) {
					t.Fatalf("token %q: want non-empty UTF-8", tok)
				}
				b = append(b, tok...)
			}
			b = append(b, '"')
			var s string
			if err := jsonUnmarshalString(b, &s); err != nil {
				t.Fatalf("text is not a valid JSON string: %v", err)
			}
			if lang == "ko" && !hasHangulOrPunct(s) {
				t.Errorf("ko text: got %q", s[:60])
			}
		})
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"plain", `q"uote\back`, "new\nline\ttab\r", "\x01ctl", "한국어", "bad\xffutf8"} {
		b := api.AppendString(nil, s)
		var got string
		if err := jsonUnmarshalString(b, &got); err != nil {
			t.Errorf("%q: %s is not JSON: %v", s, b, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); got != want {
			t.Errorf("round trip: got %q, want %q", got, want)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{{"", 0}, {"abcd", 1}, {"abcde", 2}, {"안녕하세요", 5}, {"hi 안녕", 3}}
	for _, tt := range tests {
		if got := estimateTokens(tt.text); got != tt.want {
			t.Errorf("estimateTokens(%q): got %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestProfiles(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range append(Profiles(), DefaultProfile()) {
		if err := p.Validate(); err != nil {
			t.Errorf("profile %s: %v", p.Name, err)
		}
		if !strings.HasPrefix(p.Name, "sim-") || seen[p.Name] {
			t.Errorf("profile name %q: want a unique sim- name", p.Name)
		}
		seen[p.Name] = true
	}
	want := map[string]float64{"sim-gpt-4.1": 8, "sim-claude-sonnet-4.5": 15, "sim-gemini-2.5-flash": 2.5, "sim-deepseek-v3.2": 0.42}
	for name, price := range want {
		p, ok := LookupProfile(name)
		if !ok || p.OutputPrice != price {
			t.Errorf("%s output price: got %v (found %v), want %v", name, p.OutputPrice, ok, price)
		}
	}
	bad := Profile{Name: "bad", TTFT: time.Second, TTFTP99: time.Millisecond, ITLJitter: -1, Lang: "fr", Faults: Faults{FailStatus: 200, CutRate: 2}}
	err := bad.Validate()
	for _, field := range []string{"ttft-p99", "itl-jitter", "lang", "fail-status", "cut-rate"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate: got %v, want it to name %s", err, field)
		}
	}
}

// BenchmarkChunk measures the per-chunk path of a stream in each dialect:
// draw a gap and a token, build the chunk JSON through the dialect's
// encoder, stamp and write it through the SSE writer.
func BenchmarkChunk(b *testing.B) {
	pl := &plan{id: "chatcmpl-sim123", model: "sim-gpt-4.1", includeUsage: true, promptTokens: 12}
	for _, d := range []struct {
		name string
		enc  encoder
	}{{"openai", newChunker(pl, 1700000000)}, {"anthropic", newAnthropicEncoder(pl)}, {"gemini", newGeminiEncoder(pl)}} {
		b.Run(d.name, func(b *testing.B) {
			gen := newTextGen("en", rand.New(rand.NewPCG(1, 1)))
			timing := rand.New(rand.NewPCG(1, 2))
			st := &streamState{sw: sse.NewWriter(discardFlusher{}), stamp: true}
			toks := make([][]byte, 1)
			var d2 time.Duration
			sent := 0
			b.ReportAllocs()
			for b.Loop() {
				d2 += gapAt(20*time.Millisecond, 0.2, timing.NormFloat64())
				toks[0] = gen.next()
				sent++
				if err := d.enc.text(st, toks, sent); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func jsonUnmarshalString(b []byte, s *string) error { return json.Unmarshal(b, s) }

type discardFlusher struct{}

func (discardFlusher) Write(b []byte) (int, error) { return len(b), nil }
func (discardFlusher) Flush() error                { return nil }
