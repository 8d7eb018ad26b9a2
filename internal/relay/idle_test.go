package relay_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// pacedStream yields content events at the given gaps (the first gap is the
// wait for the first event), then "[DONE]". A wait ends early when ctx is
// cancelled, with the cause, as a provider stream does.
type pacedStream struct {
	ctx  context.Context
	gaps []time.Duration
	ev   sse.Event
}

func (s *pacedStream) Next() (*sse.Event, error) {
	if len(s.gaps) == 0 {
		return nil, io.EOF
	}
	t := time.NewTimer(s.gaps[0])
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
		return nil, context.Cause(s.ctx)
	}
	s.gaps = s.gaps[1:]
	s.ev = sse.Event{Data: []byte(content("x"))}
	return &s.ev, nil
}

func (s *pacedStream) Close() error { return nil }

// The idle timeout bounds each gap between events, not the stream: a stream
// far longer than the idle window whose gaps stay under it runs to the end,
// and a gap over it ends the stream exactly one window after the last event.
// On synctest's clock, so the times are exact.
func TestIdleWindowPerGap(t *testing.T) {
	const idle = 100 * time.Millisecond
	ms := time.Millisecond
	steady := []time.Duration{30 * ms}
	for range 30 {
		steady = append(steady, 90*ms) // 2.7 s in all, every gap under 100 ms
	}
	tests := []struct {
		name    string
		gaps    []time.Duration
		wantErr error
		wantAt  time.Duration // when Attempt returned, from its start
		chunks  int
	}{
		{"gaps under the window", steady, nil, 30*ms + 30*90*ms, 31},
		{"stall after content", []time.Duration{30 * ms, 90 * ms, 90 * ms, 500 * ms}, provider.ErrIdleTimeout, 30*ms + 2*90*ms + idle, 3},
		{"no first token", []time.Duration{500 * ms}, provider.ErrFirstTokenTimeout, 200 * ms, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sess := relay.NewSession(httptest.NewRecorder(), relay.Options{FirstToken: 200 * ms, Idle: idle})
				defer sess.Close()
				start := time.Now()
				err := sess.Attempt(context.Background(), metrics.New(nil).Stream("m", "p/m"),
					func(ctx context.Context) (provider.Stream, error) {
						return &pacedStream{ctx: ctx, gaps: tt.gaps}, nil
					})
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got error %v, want %v", err, tt.wantErr)
				}
				if got := time.Since(start); got != tt.wantAt {
					t.Errorf("returned after %v, want %v", got, tt.wantAt)
				}
				if got := sess.Stats().ContentChunks; got != tt.chunks {
					t.Errorf("got %d content chunks, want %d", got, tt.chunks)
				}
			})
		})
	}
}
