package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Journal keeps the events of 2025-11-25 sessions' POST streams so that a
// client whose stream broke resumes it (GET with Last-Event-ID): the
// events after the one it names, then the rest live until the response.
// A stream is keyed by its session (a hash of the session's id) and its
// own random id; the journal bounds each stream (events and bytes: past
// the bound a stream is not resumable) and forgets it some time after its
// end. MemoryJournal is the default (one replica); a shared one (Redis)
// lets a GET on any replica resume a stream another runs.
type Journal interface {
	// Append adds the event seq (1, 2, …, in order) of the stream key;
	// final marks its last (the response). An error leaves the stream
	// not resumable; the call goes on.
	Append(ctx context.Context, key string, seq int, data []byte, final bool) error
	// Follow calls send with each event of key after seq, then with each
	// one appended later, until the final one (then it returns nil), ctx
	// ends, or send returns false. ErrNoStream: key is unknown, expired,
	// or over the bound. Following marks the stream resumed (Resumed).
	Follow(ctx context.Context, key string, after int, send func(seq int, data []byte) bool) error
	// Resumed reports whether a client followed key since it began.
	Resumed(ctx context.Context, key string) bool
}

// ErrNoStream: the journal has no resumable stream of that id.
var ErrNoStream = errors.New("no such resumable stream")

// Journal bounds, per stream, and how long a stream is kept after its end.
const (
	JournalMaxEvents = 1000
	JournalMaxBytes  = 4 << 20
	JournalTTL       = 5 * time.Minute
	// DefaultResumeGrace is how long a call whose client's stream broke
	// runs on waiting for the client to resume it.
	DefaultResumeGrace = time.Minute
)

// journalKey is the journal's key of a session's stream: a hash of the
// session's id (which is never shown) and the stream's id.
func journalKey(sess [12]byte, stream string) string {
	h := sha256.Sum256(sess[:])
	return hex.EncodeToString(h[:12]) + ":" + stream
}

// newStreamID returns a random stream id (32 hex digits).
func newStreamID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// parseEventID splits a POST stream's event id, "<stream>.<seq>"; false
// for any other (the GET stream's own ids are plain numbers).
func parseEventID(id string) (stream string, seq int, ok bool) {
	stream, n, ok := strings.Cut(id, ".")
	if !ok || len(stream) != 32 {
		return "", 0, false
	}
	if _, err := hex.DecodeString(stream); err != nil {
		return "", 0, false
	}
	seq, err := strconv.Atoi(n)
	if err != nil || seq < 0 {
		return "", 0, false
	}
	return stream, seq, true
}

// MemoryJournalMaxBytes bounds a MemoryJournal's events in all: past it
// the ended streams are forgotten first, then a running stream that
// grows is no longer resumable.
const MemoryJournalMaxBytes = 256 << 20

// MemoryJournal is a Journal in this process's memory.
type MemoryJournal struct {
	mu        sync.Mutex
	streams   map[string]*memStream
	bytes     int // of every stream's events
	lastSweep time.Time
	now       func() time.Time
}

type memStream struct {
	events  [][]byte // events[i] is seq i+1
	bytes   int
	over    bool // past the bound: not resumable
	done    bool
	resumed bool
	last    time.Time     // of its last event
	expires time.Time     // once done
	changed chan struct{} // closed and replaced at each append
}

// NewMemoryJournal returns an empty MemoryJournal.
func NewMemoryJournal() *MemoryJournal {
	return &MemoryJournal{streams: map[string]*memStream{}, now: time.Now}
}

// Append implements Journal.
func (j *MemoryJournal) Append(_ context.Context, key string, seq int, data []byte, final bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	s := j.streams[key]
	if s == nil {
		if now.Sub(j.lastSweep) > time.Second {
			j.sweep(now, false)
		}
		s = &memStream{changed: make(chan struct{})}
		j.streams[key] = s
	}
	if s.done {
		return nil
	}
	s.last = now
	if !s.over && j.bytes+len(data) > MemoryJournalMaxBytes {
		j.sweep(now, true)
	}
	switch {
	case s.over:
	case seq != len(s.events)+1, len(s.events) >= JournalMaxEvents, s.bytes+len(data) > JournalMaxBytes,
		j.bytes+len(data) > MemoryJournalMaxBytes: // a gap (resuming past it would lose an event), or past a bound
		s.over = true
		j.bytes -= s.bytes
		s.events, s.bytes = nil, 0
	default:
		s.events = append(s.events, append([]byte(nil), data...))
		s.bytes += len(data)
		j.bytes += len(data)
	}
	if final {
		s.done, s.expires = true, j.now().Add(JournalTTL)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// sweep forgets the streams that ended more than JournalTTL ago, and those
// silent for journalRunningTTL (a call runs at most its timeout); full:
// every ended stream too.
func (j *MemoryJournal) sweep(now time.Time, full bool) {
	j.lastSweep = now
	for k, s := range j.streams {
		if s.done && (full || now.After(s.expires)) || !s.done && now.Sub(s.last) > journalRunningTTL {
			j.bytes -= s.bytes
			delete(j.streams, k)
			close(s.changed) // a follower waiting finds it gone
		}
	}
}

// Follow implements Journal.
func (j *MemoryJournal) Follow(ctx context.Context, key string, after int, send func(int, []byte) bool) error {
	next := after + 1
	for {
		j.mu.Lock()
		s := j.streams[key]
		if s == nil || s.over || s.done && j.now().After(s.expires) {
			j.mu.Unlock()
			return ErrNoStream
		}
		s.resumed = true
		var batch [][]byte
		if next <= len(s.events) {
			batch = s.events[next-1:]
		}
		done, changed, n := s.done, s.changed, len(s.events)
		j.mu.Unlock()
		for i, ev := range batch {
			if !send(next+i, ev) {
				return nil
			}
		}
		next = max(next, n+1)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Resumed implements Journal.
func (j *MemoryJournal) Resumed(_ context.Context, key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.streams[key]
	return s != nil && s.resumed
}
