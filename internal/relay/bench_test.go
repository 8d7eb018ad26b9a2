package relay_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/messages"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// loopReader yields the same SSE event n times, then "[DONE]".
type loopReader struct {
	ev   []byte
	n    int
	off  int
	done bool
}

func (r *loopReader) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if r.n == 0 {
			if r.done {
				if total == 0 {
					return 0, nil
				}
				return total, nil
			}
			r.done = true
			c := copy(p, "data: [DONE]\n\n")
			return total + c, nil
		}
		c := copy(p, r.ev[r.off:])
		p, total, r.off = p[c:], total+c, r.off+c
		if r.off == len(r.ev) {
			r.off, r.n = 0, r.n-1
		}
	}
	return total, nil
}

type readerStream struct{ r *sse.Reader }

func (s readerStream) Next() (*sse.Event, error) { return s.r.Next() }
func (s readerStream) Close() error              { return nil }

// discardWriter is a ResponseWriter that drops bytes but can flush.
type discardWriter struct {
	h       http.Header
	flushes int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      { w.flushes++ }

// SetWriteDeadline makes the writer's deadline settable, as net/http's
// is, so the benchmarks pay for Options.ClientWrite's check.
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// notifyingStream is a readerStream that tells the relay before each read,
// as the openai adapter's streams do: events are then flushed per read.
type notifyingStream struct{ readerStream }

func (s notifyingStream) BeforeRead(h sse.ReadHook) { s.r.Hook = h }

// BenchmarkRelayChunk measures the relay's per-chunk path: SSE parse,
// ScanChunk, write and flush, the idle window moved, TTFT/ITL/overhead
// observed. Each event is flushed on its own (a stream that does not say
// when it reads).
func BenchmarkRelayChunk(b *testing.B) { benchRelay(b, false) }

// BenchmarkRelayChunkBatched is the same with the events of one upstream
// read (here about four: the reader's buffer is 1 KiB) flushed together.
func BenchmarkRelayChunkBatched(b *testing.B) { benchRelay(b, true) }

func benchRelay(b *testing.B, batched bool) {
	ev := []byte("data: " + content("hello") + "\n\n")
	m := metrics.New(nil)
	obs := m.Stream("m", "p/m")
	w := &discardWriter{h: http.Header{}}
	src := &loopReader{ev: ev, n: b.N}
	rd := sse.NewReader(src, 0)
	sess := relay.NewSession(w, relay.Options{FirstToken: time.Minute, Idle: time.Minute, ClientWrite: 30 * time.Second})
	defer sess.Close()
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	b.ResetTimer()
	err := sess.Attempt(context.Background(), obs, func(context.Context) (provider.Stream, error) {
		if batched {
			return notifyingStream{readerStream{rd}}, nil
		}
		return readerStream{rd}, nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if got := sess.Stats().ContentChunks; got != b.N {
		b.Fatalf("got %d content chunks, want %d", got, b.N)
	}
	b.ReportMetric(float64(w.flushes)/float64(b.N), "flushes/chunk")
}

// anthropicBody is an Anthropic upstream's stream: head, then ev n times,
// then tail, then the end.
type anthropicBody struct {
	head, ev, tail []byte
	n, stage       int
	cur            []byte
}

func (r *anthropicBody) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if len(r.cur) == 0 {
			switch {
			case r.stage == 0:
				r.cur, r.stage = r.head, 1
			case r.n > 0:
				r.cur, r.n = r.ev, r.n-1
			case r.stage == 1:
				r.cur, r.stage = r.tail, 2
			default:
				if total == 0 {
					return 0, io.EOF
				}
				return total, nil
			}
		}
		c := copy(p, r.cur)
		p, r.cur, total = p[c:], r.cur[c:], total+c
	}
	return total, nil
}

func (r *anthropicBody) Close() error { return nil }

// bodyRT answers every request with 200 and body.
type bodyRT struct{ body io.ReadCloser }

func (b bodyRT) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: b.body, Request: r}, nil
}

const (
	anthropicHead = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_014p7gG3wDgGV9EUtLvnow3U\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":2}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	anthropicText = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the quick brown fox\"}}\n\n"
	anthropicTail = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

// BenchmarkRelayMessages is an Anthropic client's text_delta from an
// Anthropic upstream through the whole relay (the adapter's Next and
// ChunkInfo, the relay's bookkeeping, the encoder's write and the flush):
// Translated is the way before passthrough (the adapter turns the event
// into an OpenAI chunk, messages.Encoder turns it back into an Anthropic
// event), Passthrough the event as it came (same dialect, same bytes).
func BenchmarkRelayMessages(b *testing.B) {
	for _, pass := range []bool{false, true} {
		name := map[bool]string{false: "Translated", true: "Passthrough"}[pass]
		b.Run(name, func(b *testing.B) {
			body := &anthropicBody{head: []byte(anthropicHead), ev: []byte(anthropicText), tail: []byte(anthropicTail), n: b.N}
			c := anthropic.New("http://upstream.invalid", "", anthropic.Options{Transport: bodyRT{body}})
			const raw = `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
			req := &provider.Request{Model: "claude-sonnet-4-5", Stream: true}
			if pass {
				req.Native = &provider.Native{Dialect: provider.DialectAnthropic, Body: []byte(raw)}
			} else {
				req.Chat = &api.ChatRequest{Messages: []api.Message{api.TextMessage("user", "hi")}, MaxTokens: new(64)}
			}
			w := &discardWriter{h: http.Header{}}
			sess := relay.NewSession(w, relay.Options{FirstToken: time.Minute, Idle: time.Minute, ClientWrite: 30 * time.Second,
				IncludeUsage: true, Encoder: messages.NewEncoder("m")})
			defer sess.Close()
			obs := metrics.New(nil).Stream("m", "p/m")
			b.ReportAllocs()
			b.SetBytes(int64(len(anthropicText)))
			b.ResetTimer()
			err := sess.Attempt(context.Background(), obs, func(ctx context.Context) (provider.Stream, error) { return c.Open(ctx, req) })
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if got := sess.Stats().ContentChunks; got != b.N {
				b.Fatalf("got %d content chunks, want %d", got, b.N)
			}
		})
	}
}
