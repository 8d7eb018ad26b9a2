package relay_test

import (
	"context"
	"errors"
	"io"
	"net/http"
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

// step is one event of a scriptedStream: after gap, data as the event's
// data; nil data is a comment-only block (a heartbeat).
type step struct {
	gap  time.Duration
	data []byte
}

// scriptedStream yields its steps, then end (nil: io.EOF, the "[DONE]" of a
// complete stream). Like pacedStream, a wait ends early with the context's
// cause.
type scriptedStream struct {
	ctx   context.Context
	steps []step
	end   error
	ev    sse.Event
}

func (s *scriptedStream) Next() (*sse.Event, error) {
	if len(s.steps) == 0 {
		if s.end != nil {
			return nil, s.end
		}
		return nil, io.EOF
	}
	t := time.NewTimer(s.steps[0].gap)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
		return nil, context.Cause(s.ctx)
	}
	s.ev = sse.Event{Data: s.steps[0].data}
	s.steps = s.steps[1:]
	return &s.ev, nil
}

func (s *scriptedStream) Close() error { return nil }

// slowWriter is a client whose first write takes delay (a slow network).
type slowWriter struct {
	*httptest.ResponseRecorder
	delay time.Duration
	wrote bool
}

func (w *slowWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		time.Sleep(w.delay)
	}
	return w.ResponseRecorder.Write(b)
}

func (w *slowWriter) Unwrap() http.ResponseWriter { return w.ResponseRecorder }

const emptyDelta = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":null}]}`

// The timers' edges, on synctest's clock: the first-token deadline passing
// while the first content is being written must not end a stream whose
// content already went out (with or without an idle window), and heartbeats
// (comment-only blocks, empty data events, empty deltas) do not keep the
// idle window open.
func TestTimerEdges(t *testing.T) {
	ms := time.Millisecond
	chunk := []byte(content("x"))
	tests := []struct {
		name        string
		opts        relay.Options
		writeDelay  time.Duration
		steps       []step
		wantErr     error
		wantChunks  int
		wantReturns time.Duration
	}{
		{"first-token deadline passes during the first write",
			relay.Options{FirstToken: 100 * ms, Idle: time.Second}, 150 * ms,
			[]step{{50 * ms, chunk}, {10 * ms, chunk}}, nil, 2, 210 * ms},
		{"same with the idle window off",
			relay.Options{FirstToken: 100 * ms}, 150 * ms,
			[]step{{50 * ms, chunk}, {10 * ms, chunk}}, nil, 2, 210 * ms},
		// Issue 22: pings are not progress, the idle window counts from the
		// last content.
		{"heartbeats do not keep the idle window open",
			relay.Options{FirstToken: 100 * ms, Idle: 100 * ms}, 0,
			[]step{{10 * ms, chunk}, {80 * ms, nil}, {80 * ms, nil}, {80 * ms, nil}, {80 * ms, chunk}}, provider.ErrIdleTimeout, 1, 110 * ms},
		{"empty data events do not either",
			relay.Options{FirstToken: 100 * ms, Idle: 100 * ms}, 0,
			[]step{{10 * ms, chunk}, {80 * ms, []byte{}}, {80 * ms, []byte{}}, {80 * ms, chunk}}, provider.ErrIdleTimeout, 1, 110 * ms},
		{"nor chunks with an empty delta",
			relay.Options{FirstToken: 100 * ms, Idle: 100 * ms}, 0,
			[]step{{10 * ms, chunk}, {80 * ms, []byte(emptyDelta)}, {80 * ms, []byte(emptyDelta)}, {80 * ms, chunk}}, provider.ErrIdleTimeout, 1, 110 * ms},
		{"a finish chunk is progress",
			relay.Options{FirstToken: 100 * ms, Idle: 100 * ms}, 0,
			[]step{{10 * ms, chunk}, {80 * ms, []byte(finish())}, {80 * ms, chunk}}, nil, 2, 170 * ms},
		{"a heartbeat does not extend the first-token deadline",
			relay.Options{FirstToken: 100 * ms, Idle: 100 * ms}, 0,
			[]step{{60 * ms, nil}, {60 * ms, chunk}}, provider.ErrFirstTokenTimeout, 0, 100 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &slowWriter{ResponseRecorder: httptest.NewRecorder(), delay: tt.writeDelay}
				sess := relay.NewSession(w, tt.opts)
				defer sess.Close()
				start := time.Now()
				err := sess.Attempt(context.Background(), nil, func(ctx context.Context) (provider.Stream, error) {
					return &scriptedStream{ctx: ctx, steps: tt.steps}, nil
				})
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got error %v, want %v", err, tt.wantErr)
				}
				if got := sess.Stats().ContentChunks; got != tt.wantChunks {
					t.Errorf("got %d content chunks, want %d", got, tt.wantChunks)
				}
				if got := time.Since(start); got != tt.wantReturns {
					t.Errorf("returned after %v, want %v", got, tt.wantReturns)
				}
			})
		})
	}
}

// ctxStream yields one content event, then "[DONE]"; it notes whether its
// context (the upstream request's) was cancelled when it was closed.
type ctxStream struct {
	ctx            context.Context
	n              int
	ev             sse.Event
	cancelledAtEnd bool
}

func (s *ctxStream) Next() (*sse.Event, error) {
	if s.n++; s.n > 1 {
		return nil, io.EOF
	}
	s.ev = sse.Event{Data: []byte(content("x"))}
	return &s.ev, nil
}

func (s *ctxStream) Close() error {
	s.cancelledAtEnd = s.ctx.Err() != nil
	return nil
}

// Past the terminal event the upstream request no longer ends with the
// client's context (issue 22): the stream's Close drains the rest of the
// body on its own deadline, and a client that hangs up right after [DONE]
// must not cut it. Before the terminal event the client's leaving still
// cancels the upstream (TestClientDisconnectCancelsUpstream).
func TestCompleteStreamOutlivesClient(t *testing.T) {
	client, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	var st *ctxStream
	sess := relay.NewSession(httptest.NewRecorder(), relay.Options{})
	defer sess.Close()
	err := sess.Attempt(client, nil, func(ctx context.Context) (provider.Stream, error) {
		st = &ctxStream{ctx: ctx}
		return st, nil
	})
	if err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	hangUp()
	if st.cancelledAtEnd || st.ctx.Err() != nil {
		t.Errorf("the complete stream's context was cancelled (at Close %v, after the client left %v), want it left to the stream",
			st.cancelledAtEnd, st.ctx.Err())
	}
}
