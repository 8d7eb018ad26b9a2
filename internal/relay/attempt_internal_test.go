package relay

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// TestLateTimerDoesNothing: an attempt's timer callback that runs after the
// attempt returned (it was already running when end stopped the timer)
// neither re-arms the timer nor cancels anything, although the Session's
// event time it reads, kept current by the next attempt, says the idle
// window is still open. The callback is called directly: the same
// interleaving the runtime produces only now and then.
func TestLateTimerDoesNothing(t *testing.T) {
	s := NewSession(httptest.NewRecorder(), Options{Idle: time.Hour})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	a := &attempt{s: s, ctx: ctx, cancel: cancel}
	a.state.Store(streaming)
	a.t = time.AfterFunc(time.Hour, a.fire)
	s.last.Store(int64(time.Since(s.t0))) // the next attempt's event, just now

	a.end()
	a.fire() // late: ran as the attempt returned

	if a.t.Stop() {
		t.Error("the late callback re-armed the ended attempt's timer")
	}
	if err := context.Cause(ctx); err != nil {
		t.Errorf("the late callback cancelled the attempt: %v", err)
	}
}
