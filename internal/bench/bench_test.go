package bench

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// loopReader serves the same bytes forever.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

var _ io.Reader = (*loopReader)(nil)

// BenchmarkReceiveChunk is the per-chunk receive path: parse one SSE event
// with its stamp, take its arrival time, classify it and record it, for
// each client API's content event as the providers write it.
func BenchmarkReceiveChunk(b *testing.B) {
	for _, c := range []struct{ api, ev string }{
		{APIChat, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"sim-fast","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"usage":null}`},
		{APIMessages, "event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" token"}}`},
		{APIResponses, "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_sim1k2j3h4g5f6d7s","output_index":0,"content_index":0,"delta":" token","logprobs":[]}`},
	} {
		b.Run(c.api, func(b *testing.B) {
			ev := []byte(": sent_ns=1764000000000000000\n" + c.ev + "\n\n")
			st := newStream()
			st.setAPI(c.api)
			st.rd.Reset(&loopReader{b: bytes.Repeat(ev, 64)})
			req := &Request{Arrivals: make([]time.Duration, 0, b.N+1), Delays: make([]time.Duration, 0, b.N+1)}
			st.req, st.t0, st.base, st.sent = req, time.Now(), time.Now(), time.Now()
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			b.ResetTimer()
			for range b.N {
				e, err := st.rd.Next()
				now := time.Now()
				if err != nil {
					b.Fatal(err)
				}
				if !st.onEvent(e, now) {
					b.Fatal("stream stopped")
				}
			}
			if len(req.Arrivals) != b.N {
				b.Fatalf("got %d arrivals, want %d", len(req.Arrivals), b.N)
			}
		})
	}
}
