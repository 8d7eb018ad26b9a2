// Package redisguard is the health of a Redis the gateway can do without:
// while it fails, callers decide locally (rate limits, budgets) instead of
// waiting on it. The first failure of an outage logs one WARN, requests
// stop asking Redis, one request per probe interval tries it again, and
// the first success logs one INFO and ends the outage.
package redisguard

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// CallTimeout bounds one Redis call of a request (a limit check, a
	// budget reservation): Redis hanging must not add more than this.
	CallTimeout = 50 * time.Millisecond
	// ProbeEvery is how often, while Redis is counted down, one request
	// tries it again instead of deciding locally.
	ProbeEvery = time.Second
)

// Tag returns the Redis hash tag ("{16 hex digits}") that names a client
// key's counters: a hash, so neither the name's characters nor its length
// reach Redis, and a tag, so one key's counters share a cluster slot (one
// script may touch them all).
func Tag(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "{" + hex.EncodeToString(sum[:8]) + "}"
}

// Guard is one Redis dependency's state. Set the exported fields before
// use; the zero state is healthy. Safe for concurrent use.
type Guard struct {
	Logger     *slog.Logger  // nil discards the two state-change lines
	Down, Up   string        // the WARN and INFO messages
	ProbeEvery time.Duration // while degraded, how often one request tries Redis

	degraded  atomic.Bool
	nextProbe atomic.Int64 // unix ns; while degraded, the first request after it probes Redis

	mu     sync.Mutex
	reason string    // of the last failure while degraded
	since  time.Time // start of the outage
}

// Degraded reports whether Redis is counted unreachable, and the error that
// made it so ("" when not).
func (g *Guard) Degraded() (bool, string) {
	if !g.degraded.Load() {
		return false, ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return true, g.reason
}

// IsDown reports whether Redis is counted unreachable (no lock: for hot paths).
func (g *Guard) IsDown() bool { return g.degraded.Load() }

// Use reports whether a request at now should ask Redis: always while
// healthy, one request per ProbeEvery while degraded.
func (g *Guard) Use(now time.Time) bool {
	if !g.degraded.Load() {
		return true
	}
	next := g.nextProbe.Load()
	return now.UnixNano() >= next && g.nextProbe.CompareAndSwap(next, now.Add(g.ProbeEvery).UnixNano())
}

// Fail records a Redis failure at now and reports whether it began an
// outage (the caller may then reset its local state); that first failure
// logs the WARN.
func (g *Guard) Fail(err error, now time.Time) (first bool) {
	g.mu.Lock()
	g.reason = err.Error()
	first = g.degraded.CompareAndSwap(false, true)
	if first {
		g.since = now
		g.nextProbe.Store(now.Add(g.ProbeEvery).UnixNano())
	}
	g.mu.Unlock()
	if first && g.Logger != nil {
		g.Logger.Warn(g.Down, "err", err)
	}
	return first
}

// Recovered records a successful call at now; it ends an outage, with the INFO.
func (g *Guard) Recovered(now time.Time) {
	if !g.degraded.Load() {
		return
	}
	g.mu.Lock()
	last := g.degraded.CompareAndSwap(true, false)
	since := g.since
	g.reason = ""
	g.mu.Unlock()
	if last && g.Logger != nil {
		g.Logger.Info(g.Up, "down_for", now.Sub(since).Round(time.Millisecond))
	}
}
