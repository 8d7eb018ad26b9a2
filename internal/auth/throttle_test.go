package auth

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// fakeClock is a Throttle's clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestThrottle() (*Throttle, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	return NewThrottleClock(c.now), c
}

// wait is how long th makes the client at remote wait; 0 when it may try.
func wait(t *testing.T, th *Throttle, remote string) time.Duration {
	t.Helper()
	r := httptest.NewRequest("GET", "/admin/keys", nil)
	r.RemoteAddr = remote
	var thr *ThrottledError
	if err := th.Check(r); errors.As(err, &thr) {
		return thr.RetryAfter
	} else if err != nil {
		t.Fatalf("Check: %v, want nil or a *ThrottledError", err)
	}
	return 0
}

func fail(th *Throttle, remote string) {
	r := httptest.NewRequest("GET", "/admin/keys", nil)
	r.RemoteAddr = remote
	th.Fail(r)
}

func TestThrottle(t *testing.T) {
	th, clock := newTestThrottle()
	const a, b = "192.0.2.1:5000", "192.0.2.2:5000"
	for i := 1; i < ThrottleFree; i++ {
		fail(th, a)
		if w := wait(t, th, a); w != 0 {
			t.Fatalf("after %d wrong keys: wait %v, want none (%d are free)", i, w, ThrottleFree)
		}
	}
	// Each wrong key past the free ones doubles the wait.
	for i, want := range []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		fail(th, a)
		if w := wait(t, th, a); w != want {
			t.Fatalf("wrong key %d: wait %v, want %v", ThrottleFree+i, w, want)
		}
	}
	if w := wait(t, th, "192.0.2.1:6000"); w == 0 {
		t.Error("another port of the same address was not refused")
	}
	if w := wait(t, th, b); w != 0 {
		t.Errorf("another client: wait %v, want none", w)
	}
	clock.t = clock.t.Add(8 * time.Second)
	if w := wait(t, th, a); w != 0 {
		t.Errorf("after the wait ran out: wait %v, want none", w)
	}
	// The count is kept: the next wrong key waits 16 s.
	fail(th, a)
	if w := wait(t, th, a); w != 16*time.Second {
		t.Errorf("the next wrong key: wait %v, want 16s", w)
	}
	// The wait is capped.
	for range 40 {
		fail(th, a)
	}
	if w := wait(t, th, a); w != ThrottleMax {
		t.Errorf("after many wrong keys: wait %v, want the cap %v", w, ThrottleMax)
	}
	// A right key clears the count: the free ones are free again.
	r := httptest.NewRequest("GET", "/admin/keys", nil)
	r.RemoteAddr = a
	th.Succeed(r)
	fail(th, a)
	if w := wait(t, th, a); w != 0 {
		t.Errorf("a wrong key after a success: wait %v, want none", w)
	}
}

// An IPv6 client is its /64: one host can take any address in it.
func TestThrottleIPv6Prefix(t *testing.T) {
	th, _ := newTestThrottle()
	for i := range ThrottleFree {
		fail(th, fmt.Sprintf("[2001:db8:1:2::%x]:443", i+1))
	}
	if w := wait(t, th, "[2001:db8:1:2:ffff::9]:443"); w == 0 {
		t.Error("another address of the same /64 was not refused")
	}
	if w := wait(t, th, "[2001:db8:1:3::1]:443"); w != 0 {
		t.Errorf("another /64: wait %v, want none", w)
	}
}

// Memory is bounded: many clients never hold more than ThrottleClients
// entries, and a refused client is forgotten last.
func TestThrottleBounded(t *testing.T) {
	th, _ := newTestThrottle()
	const refusedOne = "198.51.100.7:1"
	for range ThrottleFree {
		fail(th, refusedOne)
	}
	for i := range ThrottleClients + 500 {
		fail(th, fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
	}
	if n := len(th.m); n > ThrottleClients {
		t.Errorf("holds %d clients, want at most %d", n, ThrottleClients)
	}
	if w := wait(t, th, refusedOne); w == 0 {
		t.Error("the refused client was forgotten before the ones that were not refused")
	}
}

// A nil Throttle never refuses.
func TestThrottleNil(t *testing.T) {
	var th *Throttle
	for range 2 * ThrottleFree {
		fail(th, "192.0.2.1:1")
	}
	if w := wait(t, th, "192.0.2.1:1"); w != 0 {
		t.Errorf("nil throttle: wait %v, want none", w)
	}
}
