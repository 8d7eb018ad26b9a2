package relay_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
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
