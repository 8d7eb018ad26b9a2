package gateway

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/config"
)

// The hedge budget is counted over the last 10 s: a synchronized wave of
// requests that all want a hedge gets them while the window's requests
// allow it (a bucket of 10 gave the first 10 and refused the rest), the
// burst of 10 is on top of budget × requests, a hedge not started is given
// back, and requests older than the window no longer count.
func TestHedgerWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHedger(&config.Hedge{After: "400ms", Budget: 0.5})
		// 40 requests arrive together; each wants a hedge 400 ms later.
		for range 40 {
			h.request(time.Now())
		}
		time.Sleep(400 * time.Millisecond)
		got := 0
		for range 40 {
			if _, ok := h.allow(time.Now()); ok {
				got++
			}
		}
		if want := 30; got != want { // 0.5 × 40 + 10
			t.Errorf("hedges for a wave of 40 at budget 0.5: got %d, want %d", got, want)
		}
		// One given back (a hedge counted in this second that did not
		// start) makes room for one more.
		h.undo(time.Now().Unix())
		if _, ok := h.allow(time.Now()); !ok {
			t.Error("after undo: got no room, want one hedge")
		}
		// 10 s later the wave is out of the window: the burst alone.
		time.Sleep(hedgeWindow)
		got = 0
		for range 20 {
			if _, ok := h.allow(time.Now()); ok {
				got++
			}
		}
		if got != hedgeBurst {
			t.Errorf("hedges with no request in the window: got %d, want the burst %d", got, hedgeBurst)
		}
	})
	// Budget 0 never hedges, whatever the burst.
	h := newHedger(&config.Hedge{After: "400ms", Budget: 0})
	h.request(time.Now())
	if _, ok := h.allow(time.Now()); ok {
		t.Error("budget 0: got a hedge, want none")
	}
}
