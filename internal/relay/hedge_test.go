package relay_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// timedStream sends its events at their offsets from when it was opened,
// then ends with end; it ends with its context's cause when cancelled.
type timedStream struct {
	ctx    context.Context
	start  time.Time
	events []timedEvent
	end    error
	i      int
	closed bool
}

type timedEvent struct {
	at   time.Duration
	data string
}

func (s *timedStream) Next() (*sse.Event, error) {
	if s.i >= len(s.events) {
		if s.end == io.EOF {
			return nil, io.EOF
		}
		<-s.ctx.Done() // a stall: only the context ends it
		return nil, context.Cause(s.ctx)
	}
	ev := s.events[s.i]
	t := time.NewTimer(time.Until(s.start.Add(ev.at)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
		return nil, context.Cause(s.ctx)
	}
	s.i++
	return &sse.Event{Data: []byte(ev.data)}, nil
}

func (s *timedStream) Close() error { s.closed = true; return nil }

const (
	roleChunk    = `{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`
	contentChunk = `{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`
)

// opener opens a timedStream whose first content comes at first (after a
// role chunk at once), or fails with openErr; opened records the stream.
func opener(first time.Duration, openErr error, opened **timedStream) relay.Opener {
	return func(ctx context.Context) (provider.Stream, error) {
		if openErr != nil {
			return nil, openErr
		}
		s := &timedStream{ctx: ctx, start: time.Now(), end: io.EOF,
			events: []timedEvent{{0, roleChunk}, {first, contentChunk}, {first + time.Millisecond, contentChunk}}}
		if opened != nil {
			*opened = s
		}
		return s, nil
	}
}

// drain reads st to its end and returns how many events came and the end.
func drain(st provider.Stream) (int, error) {
	n := 0
	for {
		_, err := st.Next()
		if err != nil {
			return n, err
		}
		n++
	}
}

func TestHedgeRace(t *testing.T) {
	errDown := errors.New("upstream down")
	tests := []struct {
		name         string
		primary      time.Duration // first content of the primary
		primaryErr   error         // the primary fails to open
		backup       time.Duration // first content of the backup, from its start
		noHedge      bool          // the backup may not start (budget spent)
		wantHedged   bool
		wantWinner   int
		wantErr      error // the open function's error
		wantPrimary0 error // how the primary ended in the race (r.Err[0])
		wantElapsed  time.Duration
	}{
		{name: "primary before the hedge delay", primary: 10 * time.Millisecond, backup: time.Millisecond, wantElapsed: 10 * time.Millisecond},
		{name: "backup wins", primary: 500 * time.Millisecond, backup: 10 * time.Millisecond,
			wantHedged: true, wantWinner: 1, wantPrimary0: relay.ErrHedgeLost, wantElapsed: 60 * time.Millisecond},
		{name: "primary wins after the hedge started", primary: 70 * time.Millisecond, backup: 500 * time.Millisecond,
			wantHedged: true, wantWinner: 0, wantElapsed: 70 * time.Millisecond},
		{name: "primary fails at once: no hedge", primaryErr: errDown, backup: time.Millisecond, wantErr: errDown},
		{name: "budget spent: the primary alone", primary: 300 * time.Millisecond, noHedge: true, wantElapsed: 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var p, b *timedStream
				backup := opener(tt.backup, nil, &b)
				if tt.noHedge {
					backup = func(context.Context) (provider.Stream, error) { return nil, relay.ErrNoHedge }
				}
				var r relay.Race
				open := relay.Hedge(50*time.Millisecond, opener(tt.primary, tt.primaryErr, &p), backup, &r)
				start := time.Now()
				st, err := open(t.Context())
				elapsed := time.Since(start)
				if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
					t.Fatalf("got error %v, want %v", err, tt.wantErr)
				}
				if r.Hedged != tt.wantHedged || r.Winner != tt.wantWinner {
					t.Errorf("got hedged %v winner %d, want %v %d", r.Hedged, r.Winner, tt.wantHedged, tt.wantWinner)
				}
				if err != nil {
					return
				}
				if elapsed != tt.wantElapsed {
					t.Errorf("decided after %v, want %v (fake clock)", elapsed, tt.wantElapsed)
				}
				if !errors.Is(r.Err[0], tt.wantPrimary0) || (r.Err[0] == nil) != (tt.wantPrimary0 == nil) {
					t.Errorf("primary ended with %v, want %v", r.Err[0], tt.wantPrimary0)
				}
				// The returned stream replays the role chunk and the first
				// content, then reads on: 3 events and its end.
				if n, err := drain(st); n != 3 || err != io.EOF {
					t.Errorf("read %d events then %v, want 3 then EOF", n, err)
				}
				st.Close()
				r.Wait()
				if tt.wantHedged && (!r.Opened[0] || !r.Opened[1]) {
					t.Errorf("after Wait: opened %v, want both attempts opened", r.Opened)
				}
				synctest.Wait()
				if tt.wantHedged {
					loser := p
					if tt.wantWinner == 0 {
						loser = b
					}
					if !loser.closed || !errors.Is(context.Cause(loser.ctx), relay.ErrHedgeLost) {
						t.Errorf("loser: closed %v, cause %v; want closed, cancelled with ErrHedgeLost", loser.closed, context.Cause(loser.ctx))
					}
				} else if b != nil {
					t.Errorf("the backup was opened without a hedge")
				}
			})
		})
	}
}

// When both attempts fail the primary's failure is the attempt's, and the
// backup's is kept in the race.
func TestHedgeBothFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stall := func(ctx context.Context) (provider.Stream, error) {
			return &timedStream{ctx: ctx, start: time.Now(), end: errors.New("stall")}, nil
		}
		var r relay.Race
		ctx, cancel := context.WithTimeoutCause(t.Context(), time.Second, provider.ErrFirstTokenTimeout)
		defer cancel()
		st, err := relay.Hedge(50*time.Millisecond, stall, stall, &r)(ctx)
		if err != nil {
			t.Fatalf("got %v, want the primary's stream to report its end", err)
		}
		if _, err := st.Next(); !errors.Is(err, provider.ErrFirstTokenTimeout) {
			t.Errorf("got %v, want the first-token timeout", err)
		}
		st.Close()
		if !r.Hedged || r.Winner != 0 || !errors.Is(r.Err[1], provider.ErrFirstTokenTimeout) {
			t.Errorf("got %+v, want hedged, the primary returned, the backup's timeout kept", r)
		}
	})
}

// TestHedgeRefusedLate: the backup's opener refuses (relay.ErrNoHedge: the
// hedge budget is spent, its route ejected) only after the primary has
// already won or failed, as a descheduled backup goroutine does. The race
// then was never hedged: after Wait, Hedged is false and the backup has no
// error (nothing to bill, no in-flight count to give back), and a primary
// that failed meanwhile ends the race with its failure instead of leaving
// it waiting forever (synctest reports that as a deadlock).
func TestHedgeRefusedLate(t *testing.T) {
	errDown := errors.New("upstream down")
	failing := func(context.Context) (provider.Stream, error) {
		time.Sleep(60 * time.Millisecond)
		return nil, errDown
	}
	for _, tt := range []struct {
		name    string
		primary relay.Opener
		wantErr error // the open function's, nil: the primary's stream serves
	}{
		{"primary wins first", opener(60*time.Millisecond, nil, nil), nil},
		{"primary fails first", failing, errDown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				refused := make(chan struct{})
				backup := func(context.Context) (provider.Stream, error) {
					time.Sleep(70 * time.Millisecond) // the hedge starts at 50 ms; the refusal comes after the primary's 60 ms
					close(refused)
					return nil, relay.ErrNoHedge
				}
				var r relay.Race
				ctx, cancel := context.WithTimeoutCause(t.Context(), time.Second, provider.ErrFirstTokenTimeout)
				defer cancel()
				st, err := relay.Hedge(50*time.Millisecond, tt.primary, backup, &r)(ctx)
				if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
					t.Fatalf("got %v, want %v", err, tt.wantErr)
				}
				if err == nil {
					if n, err := drain(st); n != 3 || err != io.EOF {
						t.Errorf("read %d events then %v, want 3 then EOF", n, err)
					}
					st.Close()
				}
				r.Wait()
				<-refused
				if r.Hedged || r.Winner != 0 || r.Err[1] != nil || r.Opened[1] {
					t.Errorf("got hedged %v winner %d backup error %v opened %v; want no hedge: the backup was refused, never sent",
						r.Hedged, r.Winner, r.Err[1], r.Opened[1])
				}
			})
		})
	}
}
