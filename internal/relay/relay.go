// Package relay moves one client's stream from the upstream to the client:
// each upstream event is written the moment it is read and flushed before the
// upstream is read again (the events of one read leave in one write), with the
// first-token, idle and keep-alive timers of one stream, the commit point of
// its headers, and the per-chunk measurements (TTFT, gaps, overhead). It does
// not choose routes: the gateway calls Attempt once per route it tries.
package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// ErrClientGone reports a failed write to the client: it went away.
var ErrClientGone = errors.New("client went away")

// UpstreamError is an error event the upstream sent in its stream. When it
// came after content had been sent it was passed to the client as the
// stream's one error event.
type UpstreamError struct {
	Data string // the event's JSON, as the upstream sent it
}

func (e *UpstreamError) Error() string { return "upstream sent an error event: " + e.Data }

// overheadSample: one chunk in this many has its gateway overhead observed.
const overheadSample = 8

// Options configure a Session.
type Options struct {
	// FirstToken bounds the wait from the start of an attempt to the first
	// content chunk; 0 means no limit. Firing cancels the attempt with
	// provider.ErrFirstTokenTimeout.
	FirstToken time.Duration
	// Idle bounds the wait between upstream events once content flows; 0
	// means no limit. Firing cancels the attempt with provider.ErrIdleTimeout.
	Idle time.Duration
	// KeepAlive is the interval of ": keep-alive" comments sent while waiting
	// for the first content; they commit the headers but not content, so a
	// fallback stays possible. 0 sends none.
	KeepAlive time.Duration
	// IncludeUsage passes the upstream's usage-only chunk to the client. The
	// usage is read either way.
	IncludeUsage bool
	// Start is when the request arrived, the origin of TTFT; zero means NewSession's time.
	Start time.Time
	// LateHeaders are response headers whose final value is known only when
	// the stream ends (the route that served it). When a keep-alive commits
	// the headers before any route produced content, they are declared as
	// trailers instead, and SetHeader keeps setting them: they reach the
	// client after the body. Nil means none.
	LateHeaders []string
	// Encoder writes the client's dialect; nil means OpenAI's (events pass
	// through). An Encoder that needs the usage (to end its stream) needs
	// IncludeUsage too; it decides itself what reaches the client.
	Encoder Encoder
}

// Stats is what a Session measured. Times are zero until the event happened.
type Stats struct {
	Usage         api.Usage     // the current attempt's last reported usage
	HasUsage      bool          // the current attempt reported usage
	ContentChunks int           // content chunks sent to the client
	TTFT          time.Duration // Start → first content chunk flushed
	FirstContent  time.Time
	LastContent   time.Time
	MaxGap        time.Duration // largest gap between content chunks as sent
}

// UsageOrNil returns the current attempt's reported usage, nil when none came.
func (s *Stats) UsageOrNil() *api.Usage {
	if !s.HasUsage {
		return nil
	}
	u := s.Usage
	return &u
}

// Session is one client stream across the attempts of a fallback. Its
// methods are called from the request's goroutine; the keep-alive timer is
// the only other writer and is serialised with a mutex until content flows.
type Session struct {
	w     http.ResponseWriter
	sw    *sse.Writer
	enc   Encoder
	opts  Options
	stats Stats

	pendBuf bytes.Buffer // role-only events held until the commit point
	pendW   *sse.Writer
	batch   batch                // the current attempt's events written but not yet flushed
	info    api.ChunkInfo        // the latest event's scan
	infoer  provider.ChunkInfoer // the attempt's stream, when it tells its chunks' info

	mu          sync.Mutex // guards w and the flags below until contentSent
	committed   bool       // status and headers written
	trailers    bool       // LateHeaders were declared as trailers at the commit
	contentSent bool       // first content written: no more fallback, no keep-alives
	errSent     bool       // the stream's one error event was written
	closed      bool
	ka          *time.Timer
}

// NewSession returns a Session writing to w. Call Close when done.
func NewSession(w http.ResponseWriter, opts Options) *Session {
	if opts.Start.IsZero() {
		opts.Start = time.Now()
	}
	s := &Session{w: w, sw: sse.NewWriter(w), enc: opts.Encoder, opts: opts}
	if s.enc == nil {
		s.enc = OpenAI
	}
	s.pendW = sse.NewWriter(&s.pendBuf)
	if opts.KeepAlive > 0 {
		s.mu.Lock() // the timer may fire before the assignment is done
		s.ka = time.AfterFunc(opts.KeepAlive, s.keepAlive)
		s.mu.Unlock()
	}
	return s
}

// SetHeader sets a response header if the headers are not committed yet, or
// a trailer if key is one of Options.LateHeaders declared as a trailer at
// the commit, and reports whether it did.
func (s *Session) SetHeader(key, value string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed && !(s.trailers && s.late(key)) {
		return false
	}
	s.w.Header().Set(key, value)
	return true
}

func (s *Session) late(key string) bool {
	for _, k := range s.opts.LateHeaders {
		if k == key {
			return true
		}
	}
	return false
}

// Committed reports whether status and headers were sent.
func (s *Session) Committed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// ContentSent reports whether content reached the client; after it, no
// other route may take over the stream.
func (s *Session) ContentSent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contentSent
}

// Stats returns the measurements so far.
func (s *Session) Stats() Stats { return s.stats }

// Close stops the keep-alive timer; the Session writes nothing afterwards.
func (s *Session) Close() {
	s.mu.Lock()
	s.closed = true
	if s.ka != nil {
		s.ka.Stop()
	}
	s.mu.Unlock()
}

func (s *Session) keepAlive() {
	s.mu.Lock()
	if s.contentSent || s.closed || s.errSent {
		s.mu.Unlock()
		return
	}
	if !s.committed && len(s.opts.LateHeaders) > 0 {
		// No route has produced content yet, so the one that will is not
		// known: its headers become trailers, set when the stream ends.
		h := s.w.Header()
		for _, k := range s.opts.LateHeaders {
			h.Del(k)
			h.Add("Trailer", k)
		}
		s.trailers = true
	}
	s.commitLocked()
	if s.enc.KeepAlive(s.sw) == nil {
		s.ka.Reset(s.opts.KeepAlive)
	}
	s.mu.Unlock()
}

func (s *Session) commitLocked() {
	if s.committed {
		return
	}
	s.committed = true
	sse.SetHeaders(s.w.Header())
	s.w.WriteHeader(http.StatusOK)
}

// Fail ends the request with an error and returns the status the client
// got; body is an OpenAI error object. Before the commit point it is an HTTP
// status with the JSON error body (in the Encoder's dialect); after it,
// status 200 stands and the error becomes the stream's one error event, and
// the stream ends without its terminal event (no "[DONE]"), so no client
// mistakes it for a complete answer. When the upstream's own error event
// was already relayed, nothing more is written.
func (s *Session) Fail(status int, body []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errSent || s.closed {
		if s.committed {
			return http.StatusOK
		}
		return status
	}
	s.errSent = true
	if !s.committed {
		s.committed = true
		h := s.w.Header()
		h.Set("Content-Type", "application/json")
		h.Del("Content-Length")
		s.w.WriteHeader(status)
		s.w.Write(s.enc.ErrorBody(status, body))
		return status
	}
	s.enc.Error(s.sw, body)
	return http.StatusOK
}

// Attempt relays one upstream stream, opened by open with a context that
// the attempt's timers cancel and that ends with ctx (the client's request).
// It returns nil after "[DONE]" was relayed; otherwise an error to pass to
// Fail, or to try the next route with when ContentSent is false. The error
// is the context's cause when a timer or the client ended the attempt,
// ErrClientGone when a write to the client failed.
func (s *Session) Attempt(ctx context.Context, obs *metrics.Stream, open func(context.Context) (provider.Stream, error)) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// One timer: the first-token deadline, then the idle one. Once content
	// flows, each event only stores its time in last; when the timer fires
	// it re-arms itself for what is left of the idle window, so the per-chunk
	// path does no timer work. state decides, once, whether the first-token
	// deadline or the first content came first: the loop writes content only
	// after winning waiting → streaming, the timer cancels only after
	// winning waiting → expired.
	var state atomic.Int32
	var last atomic.Int64 // time of the latest event, as time.Since(begin)
	begin := time.Now()
	idle := s.opts.Idle
	var t *time.Timer
	t = time.AfterFunc(time.Hour, func() {
		if state.CompareAndSwap(waiting, expired) {
			cancel(provider.ErrFirstTokenTimeout)
			return
		}
		if idle <= 0 { // the first-token timer fired as content began; no idle window
			return
		}
		if rest := idle - (time.Since(begin) - time.Duration(last.Load())); rest > 0 {
			t.Reset(rest)
			return
		}
		cancel(provider.ErrIdleTimeout)
	})
	defer t.Stop()
	arm(t, s.opts.FirstToken)
	s.pendBuf.Reset()
	if !s.contentSent {
		s.enc.Reset()
	}
	s.stats.Usage, s.stats.HasUsage = api.Usage{}, false

	st, err := open(actx)
	if err != nil {
		return cause(actx, err)
	}
	defer st.Close()
	// A stream that says when it is about to read from the upstream gets its
	// events written without a flush each, and flushed together there: the
	// events of one upstream read leave in one write, and none waits.
	s.batch = batch{sw: s.sw, obs: obs}
	enc := s.enc
	s.infoer, _ = st.(provider.ChunkInfoer) // in the Session: the loop's frame stays small
	queued := false
	if rn, ok := st.(provider.ReadNotifier); ok {
		rn.BeforeRead(s.batch.flush)
		queued = true
	}

	var n uint
	for {
		ev, err := st.Next()
		if s.batch.err != nil {
			return wrap(ErrClientGone, s.batch.err)
		}
		if err != nil {
			if err == io.EOF {
				return s.done()
			}
			return cause(actx, err)
		}
		if len(ev.Data) == 0 {
			// A heartbeat: a comment-only block or an empty "data:" event.
			// It shows the upstream is alive, so the idle window restarts.
			last.Store(int64(time.Since(begin)))
			continue
		}
		// Only the sampled chunks' overhead is observed: take their read time alone.
		var read time.Time
		sampled := (n+1)%overheadSample == 0
		if sampled {
			read = time.Now()
		}
		if err := s.scan(ev); err != nil {
			return err
		}
		info := &s.info
		if info.Error {
			return s.upstreamError(ev.Data)
		}
		if info.HasUsage {
			s.stats.Usage, s.stats.HasUsage = info.Usage, true
			if !info.Content && !info.Finish && !s.opts.IncludeUsage {
				continue // usage-only chunk the client did not ask for
			}
		}
		if !s.contentSent {
			if !info.Content && !info.Finish && !info.HasUsage {
				// A role-only chunk: held, so that a first-token timeout or a
				// failure before content can still be an HTTP status or a
				// fallback. It travels with the first content chunk.
				if s.pendBuf.Cap() == 0 {
					s.pendBuf.Grow(256) // one allocation for the usual role chunk
				}
				if err := enc.Event(s.pendW, ev, info); err != nil {
					return err
				}
				continue
			}
			last.Store(int64(time.Since(begin)))
			if !state.CompareAndSwap(waiting, streaming) {
				// The first-token deadline fired first: nothing is written,
				// so another route may still serve the request.
				return cause(actx, provider.ErrFirstTokenTimeout)
			}
			if err := s.commitContent(ev); err != nil {
				return err
			}
			arm(t, idle)
		} else if err := writeEvent(s.sw, enc, ev, info, !queued); err != nil {
			return wrap(ErrClientGone, err)
		} else if queued {
			s.batch.dirty = true
		}
		now := time.Now()
		last.Store(int64(now.Sub(begin)))
		if info.Content {
			s.content(obs, now)
		}
		if n++; sampled {
			if s.batch.dirty {
				s.batch.read = read // observed when the batch is flushed
			} else {
				obs.ChunkOverhead(now.Sub(read))
			}
		}
	}
}

// scan sets s.info to what ev holds: from the stream when it tells (a
// translating adapter built the chunk), else from api.ScanChunk. The result
// lives in the Session: handed to the Encoder by pointer, a local would
// escape to the heap on every chunk. Out of line, so that the scan's
// temporaries stay out of the relay loop's frame.
//
//go:noinline
func (s *Session) scan(ev *sse.Event) error {
	if s.infoer != nil {
		s.info = s.infoer.ChunkInfo()
		return nil
	}
	var err error
	if s.info, err = api.ScanChunk(ev.Data); err != nil {
		return wrap(provider.ErrMalformed, err)
	}
	return nil
}

// Attempt states (see Attempt's timer).
const (
	waiting   int32 = iota // no content yet: the first-token deadline runs
	streaming              // content flows: the idle window runs
	expired                // the first-token deadline fired
)

// wrap returns "sentinel: err". Out of line: the relay loop's frame stays
// small (see gateway.chat on stack size).
//
//go:noinline
func wrap(sentinel, err error) error { return fmt.Errorf("%w: %w", sentinel, err) }

// writeEvent relays ev through w in enc's dialect: the upstream's "sent_ns"
// stamp (from a stamping simulator) first, so a client can still measure
// its own delay end to end, then the event itself, flushed when flush is set.
func writeEvent(w *sse.Writer, enc Encoder, ev *sse.Event, info *api.ChunkInfo, flush bool) error {
	if ns, ok := sse.ParseStamp(ev.Comment); ok {
		w.Stamp(ns)
	}
	if err := enc.Event(w, ev, info); err != nil || !flush {
		return err
	}
	return w.Flush()
}

// batch holds what an attempt wrote to the client without flushing: the
// stream's reader calls flush before it reads from the upstream again.
type batch struct {
	sw    *sse.Writer
	obs   *metrics.Stream
	dirty bool      // events written since the last flush
	read  time.Time // upstream read time of a sampled event in the batch
	err   error     // the first failed flush: the client went away
}

func (b *batch) flush() {
	if !b.dirty {
		return
	}
	b.dirty = false
	if err := b.sw.Flush(); err != nil && b.err == nil {
		b.err = err
	}
	if !b.read.IsZero() {
		b.obs.ChunkOverhead(time.Since(b.read))
		b.read = time.Time{}
	}
}

// arm sets t to fire after d, or stops it when d is 0.
func arm(t *time.Timer, d time.Duration) {
	if d > 0 {
		t.Reset(d)
	} else {
		t.Stop()
	}
}

// cause prefers the attempt context's cause (a timeout, the client leaving)
// over the error the read reported.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return err
}

func (s *Session) content(obs *metrics.Stream, now time.Time) {
	st := &s.stats
	if st.ContentChunks == 0 {
		st.FirstContent = now
		st.TTFT = now.Sub(s.opts.Start)
		obs.TTFT(st.TTFT)
	} else {
		gap := now.Sub(st.LastContent)
		obs.ITL(gap)
		if gap > st.MaxGap {
			st.MaxGap = gap
		}
	}
	st.LastContent = now
	st.ContentChunks++
}

// commitContent writes the headers (unless a keep-alive did), the held
// role-only events and ev, in one flush, and marks content as sent.
func (s *Session) commitContent(ev *sse.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClientGone
	}
	s.commitLocked()
	s.contentSent = true
	if s.ka != nil {
		s.ka.Stop()
	}
	// The held events and ev go out in one write and one flush: both are
	// written unflushed into net/http's buffer, then flushed from this
	// frame, not from inside the SSE writer: the first flush writes the
	// response headers, net/http's deepest call, and every frame saved above
	// it keeps the handler goroutine's stack at 8 KiB (see gateway.chat and
	// BenchmarkOpenStreamStack).
	var err error
	if s.pendBuf.Len() > 0 {
		_, err = s.w.Write(s.pendBuf.Bytes())
		s.pendBuf.Reset()
	}
	if err == nil {
		err = writeEvent(s.sw, s.enc, ev, &s.info, false)
	}
	if err == nil {
		err = s.sw.Flush()
	}
	if err != nil {
		return wrap(ErrClientGone, err)
	}
	return nil
}

// done relays "[DONE]"; a stream without any content is committed here.
func (s *Session) done() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClientGone
	}
	s.commitLocked()
	if !s.contentSent {
		s.contentSent = true
		if s.ka != nil {
			s.ka.Stop()
		}
		if s.pendBuf.Len() > 0 {
			s.w.Write(s.pendBuf.Bytes())
			s.pendBuf.Reset()
		}
	}
	if err := s.enc.Done(s.sw); err != nil {
		return fmt.Errorf("%w: %w", ErrClientGone, err)
	}
	return nil
}

// upstreamError handles an error event of the upstream: before content it is
// an attempt failure (another route may serve); after, it is relayed as the
// stream's one error event.
func (s *Session) upstreamError(data []byte) error {
	e := &UpstreamError{Data: string(data)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.contentSent || s.closed {
		return e
	}
	s.errSent = true
	if err := s.enc.Error(s.sw, data); err != nil {
		return fmt.Errorf("%w: %w", ErrClientGone, err)
	}
	return e
}
