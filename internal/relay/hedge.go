package relay

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// ErrHedgeLost is the cause of the attempt a hedged race cancelled because
// the other one produced content first.
var ErrHedgeLost = errors.New("hedged attempt lost the race to the first token")

// ErrNoHedge is returned by a backup Opener that may not start (the hedge
// budget is spent, its target is ejected): the race goes on with the
// primary alone.
var ErrNoHedge = errors.New("no hedged attempt")

// Opener opens one upstream stream with ctx.
type Opener func(ctx context.Context) (provider.Stream, error)

// Race is the outcome of a hedged first token, for the caller's billing,
// route health and metrics.
type Race struct {
	Hedged bool     // the backup was started, and not refused (ErrNoHedge): an attempt was made
	Winner int      // 0 the primary, 1 the backup: the attempt whose stream Hedge returned
	Opened [2]bool  // the upstream accepted the attempt (it bills it)
	Err    [2]error // how each attempt ended in the race: nil for the returned one, ErrHedgeLost for a cancelled loser
	Start  [2]time.Time
	// Lost, when set, is called with the loser's index (or that of the
	// attempt that failed while the other served or failed too) once its
	// goroutine is done and its stream closed, from a goroutine of its own:
	// what the caller holds for it can be released before the winner's
	// stream ends. Set it before the race starts.
	Lost func(i int)

	done   [2]chan struct{} // closed when each started attempt's goroutine is done
	backup *runner          // the backup's runner, once started
}

// Wait returns once both attempts' goroutines are done (the loser ends as
// soon as it sees its cancellation). Call it before reading Hedged, Opened
// and Err[1]: the loser's goroutine decides them. A backup whose opener
// refused (ErrNoHedge) after the race was decided, as a backup goroutine
// scheduled late does, was no attempt: Wait clears Hedged and its Err, so
// the caller neither bills it nor ends its route's in-flight count, which
// a refused opener never began.
func (r *Race) Wait() {
	for _, d := range r.done {
		if d != nil {
			<-d
		}
	}
	if b := r.backup; b != nil && errors.Is(b.final, ErrNoHedge) {
		r.Hedged, r.Err[1], r.backup = false, nil, nil
	}
}

// Hedge returns an open function for Session.Attempt that races two
// upstreams for the first token ("The Tail at Scale"): it opens primary at
// once and, when primary has produced no content after after, backup too.
// The first stream to reach content (or a finish, or its end) wins; the
// other is cancelled at once with ErrHedgeLost. When one fails while the
// other still runs, the other is awaited; when primary fails before the
// backup started, its failure is returned as it is (the caller falls back
// as usual). Events read before the decision are held and replayed by the
// returned stream, which then reads on from the winner. The race ends with
// ctx: the first-token deadline of Attempt bounds both. r is filled in
// before the open function returns.
func Hedge(after time.Duration, primary, backup Opener, r *Race) func(context.Context) (provider.Stream, error) {
	return func(ctx context.Context) (provider.Stream, error) {
		return race(ctx, after, [2]Opener{primary, backup}, r)
	}
}

// runner is one attempt of a race: opened and read until its first
// decisive event.
type runner struct {
	cancel context.CancelCauseFunc
	st     provider.Stream
	held   []heldEvent
	final  error // how the stream ended during the race (io.EOF: complete)
	won    bool  // reached content, a finish or its end: it can serve
	done   chan struct{}
}

type heldEvent struct {
	ev   sse.Event
	info api.ChunkInfo
}

func race(ctx context.Context, after time.Duration, open [2]Opener, r *Race) (provider.Stream, error) {
	var runners [2]*runner
	notify := make(chan int, 2)
	start := func(i int) {
		rctx, cancel := context.WithCancelCause(ctx)
		ru := &runner{cancel: cancel, done: make(chan struct{})}
		runners[i] = ru
		r.done[i] = ru.done
		r.Start[i] = time.Now()
		go func() {
			defer close(ru.done)
			ru.run(rctx, open[i], &r.Opened[i])
			notify <- i
		}()
	}
	start(0)
	var timer <-chan time.Time
	if after > 0 && open[1] != nil {
		t := time.NewTimer(after)
		defer t.Stop()
		timer = t.C
	}
	pending := 1
	for {
		select {
		case <-timer:
			timer = nil
			if runners[0] == nil || pending == 0 {
				continue
			}
			r.Hedged = true
			start(1)
			r.backup = runners[1]
			pending++
		case i := <-notify:
			pending--
			ru := runners[i]
			if i == 1 && errors.Is(ru.final, ErrNoHedge) {
				r.Hedged, runners[1], r.backup = false, nil, nil // not an attempt: the primary goes on alone
				if pending > 0 {
					continue
				}
				// The primary failed while the backup was being refused:
				// its failure is the attempt's.
				i, ru = 0, runners[0]
				r.Err[0] = nil
			} else if !ru.won {
				r.Err[i] = errOf(ru)
				if pending > 0 {
					continue // the other attempt may still serve
				}
				// Nothing can serve: the primary's failure is the attempt's
				// (the backup's, if any, stays in r.Err[1]).
				i, ru = 0, runners[0]
				r.Err[0] = nil
			}
			r.Winner = i
			if o := runners[1-i]; o != nil {
				if r.Err[1-i] == nil {
					r.Err[1-i] = ErrHedgeLost
				}
				o.cancel(ErrHedgeLost)
				go func(l int) { // it ends at once with its context; release its connection
					<-o.done
					if o.st != nil {
						o.st.Close()
					}
					if r.Lost != nil {
						r.Lost(l)
					}
				}(1 - i)
			}
			if ru.st == nil { // it never opened: its error is the attempt's
				ru.cancel(nil)
				return nil, ru.final
			}
			return &replay{runner: ru, infoer: infoerOf(ru.st)}, nil
		}
	}
}

func errOf(ru *runner) error {
	if ru.final == io.EOF {
		return nil
	}
	return ru.final
}

func infoerOf(st provider.Stream) provider.ChunkInfoer {
	i, _ := st.(provider.ChunkInfoer)
	return i
}

// run opens the attempt and reads it up to its first decisive event.
func (ru *runner) run(ctx context.Context, open Opener, opened *bool) {
	st, err := open(ctx)
	if err != nil {
		ru.final = err
		if !errors.Is(err, ErrNoHedge) { // a refusal stays one, even after the race was decided
			ru.final = cause(ctx, err)
		}
		return
	}
	ru.st, *opened = st, true
	infoer := infoerOf(st)
	for {
		ev, err := st.Next()
		if err != nil {
			ru.final = err
			if err != io.EOF {
				ru.final = cause(ctx, err)
			}
			ru.won = err == io.EOF
			return
		}
		if len(ev.Data) == 0 {
			continue // a heartbeat
		}
		var info api.ChunkInfo
		if infoer != nil {
			info = infoer.ChunkInfo()
		} else if info, err = api.ScanChunk(ev.Data); err != nil {
			ru.final = wrap(provider.ErrMalformed, err)
			return
		}
		ru.held = append(ru.held, heldEvent{ev: copyEvent(ev), info: info})
		if info.Error {
			ru.final = newUpstreamError(ev.Data, st)
			return
		}
		if info.Content || info.Finish || info.HasUsage {
			ru.won = true
			return
		}
	}
}

func copyEvent(ev *sse.Event) sse.Event {
	c := sse.Event{Data: append([]byte{}, ev.Data...)}
	if ev.Name != nil {
		c.Name = append([]byte{}, ev.Name...)
	}
	if ev.Comment != nil {
		c.Comment = append([]byte{}, ev.Comment...)
	}
	return c
}

// replay is the race's result: the events held during the race, then the
// winner's stream (or how it ended during the race). It tells its chunks'
// info, so the relay does not scan them again.
type replay struct {
	*runner
	infoer provider.ChunkInfoer
	i      int
	info   api.ChunkInfo
	before sse.ReadHook // the read hook when the stream has no ReadNotifier
	whole  bool         // the winner's terminal event was read
}

var (
	_ provider.ChunkInfoer  = (*replay)(nil)
	_ provider.ReadNotifier = (*replay)(nil)
)

func (r *replay) Next() (*sse.Event, error) {
	if r.i < len(r.held) {
		h := &r.held[r.i]
		r.i++
		r.info = h.info
		return &h.ev, nil
	}
	if r.final != nil { // the stream ended during the race (io.EOF: complete)
		r.whole = r.final == io.EOF
		return nil, r.final
	}
	if r.before != nil {
		r.before.BeforeRead()
	}
	ev, err := r.st.Next()
	if err != nil || len(ev.Data) == 0 {
		r.whole = err == io.EOF
		return ev, err
	}
	if r.infoer != nil {
		r.info = r.infoer.ChunkInfo()
	} else if r.info, err = api.ScanChunk(ev.Data); err != nil {
		return nil, wrap(provider.ErrMalformed, err)
	}
	return ev, nil
}

func (r *replay) ChunkInfo() api.ChunkInfo { return r.info }

func (r *replay) BeforeRead(h sse.ReadHook) {
	if rn, ok := r.st.(provider.ReadNotifier); ok {
		rn.BeforeRead(h)
		return
	}
	r.before = h
}

// Close closes the winner's stream and cancels its request, unless the
// stream was complete: its Close drains the rest on its own deadline then
// (see Session.Attempt), which the cancellation would cut.
func (r *replay) Close() error {
	err := r.st.Close()
	if !r.whole {
		r.cancel(nil)
	}
	return err
}
