package auth

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
)

// Throttle slows the guessing of the admin key: after ThrottleFree failed
// attempts in a row from one client, that client is refused for a delay
// that starts at ThrottleBase and doubles with each further failure, up to
// ThrottleMax; a success clears its count. A client is the connection's
// remote address (an IPv6 one by its /64, which one host can rotate
// through), never a forwarding header a client could write itself: behind
// a reverse proxy every client shares the proxy's address, so guessing
// there delays the proxy's other admins too, for ThrottleMax at most.
//
// Memory is bounded: at most ThrottleClients clients are remembered; when
// full, the clients whose delay has run out are forgotten first. A nil
// *Throttle never refuses. Safe for concurrent use.
type Throttle struct {
	mu  sync.Mutex
	m   map[string]*strikes
	now func() time.Time
}

// The throttle's policy.
const (
	ThrottleFree    = 5
	ThrottleBase    = time.Second
	ThrottleMax     = 5 * time.Minute
	ThrottleClients = 10000
)

type strikes struct {
	fails int
	until time.Time // refused before this
}

// ThrottledError is a refusal: the client tried too many wrong keys and
// may try again after RetryAfter.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return "too many wrong admin keys from this address: try again in " + api.RetryAfter(e.RetryAfter) + " s"
}

// NewThrottle returns an empty Throttle.
func NewThrottle() *Throttle { return NewThrottleClock(time.Now) }

// NewThrottleClock returns an empty Throttle that reads the time from now
// (a test's clock, which moves only when the test moves it).
func NewThrottleClock(now func() time.Time) *Throttle {
	return &Throttle{m: make(map[string]*strikes), now: now}
}

// Check returns a *ThrottledError when r's client must wait before it may
// try a key again, else nil. A refused attempt is not counted.
func (t *Throttle) Check(r *http.Request) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[client(r)]
	if s == nil {
		return nil
	}
	if wait := s.until.Sub(t.now()); wait > 0 {
		return &ThrottledError{RetryAfter: wait}
	}
	return nil
}

// Fail counts a wrong key from r's client.
func (t *Throttle) Fail(r *http.Request) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := client(r)
	s := t.m[c]
	if s == nil {
		if len(t.m) >= ThrottleClients {
			t.evict()
		}
		s = &strikes{}
		t.m[c] = s
	}
	s.fails++
	if over := s.fails - ThrottleFree; over >= 0 {
		d := ThrottleMax
		if over < 20 && ThrottleBase<<over < ThrottleMax {
			d = ThrottleBase << over
		}
		s.until = t.now().Add(d)
	}
}

// Succeed clears r's client's failures.
func (t *Throttle) Succeed(r *http.Request) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, client(r))
}

// evict makes room: it forgets the clients not refused now, and when every
// client still is, one of them (the map's first).
func (t *Throttle) evict() {
	now := t.now()
	for c, s := range t.m {
		if !s.until.After(now) {
			delete(t.m, c)
		}
	}
	for c := range t.m {
		if len(t.m) < ThrottleClients {
			break
		}
		delete(t.m, c)
	}
}

// client names r's client: its remote IP, an IPv6 one by its /64.
func client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
