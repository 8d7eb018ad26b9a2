package relay

import (
	"errors"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/smooth"
	"github.com/streamgate/streamgate/internal/sse"
)

// smoother is the Encoder of a Session with Options.Smoothing: it wraps the
// client's Encoder, passes the text of plain content chunks through a
// smooth.Buffer and writes what it releases as chunks rebuilt around it;
// every other event it writes as it came, after the text held before it,
// and it writes the text held before the end of the stream or its error
// event. The Session's locks guard it: the relay writes through it under
// wmu, or under mu at the commit point, and its own timer (the text's
// deadline) takes both.
type smoother struct {
	s     *Session
	inner Encoder
	buf   smooth.Buffer
	held  []heldChunk // the chunks whose text is held, oldest first
	spare [][]byte    // data buffers of chunks wholly released, for reuse
	timer *time.Timer // fires by buf's deadline; nil until first needed
	due   time.Time   // what timer is set for; zero when it is not
	obs   *metrics.Stream

	text []byte        // scratch: a chunk's content, unescaped
	out  []byte        // scratch: a rebuilt chunk
	ev   sse.Event     // the rebuilt chunk's event
	info api.ChunkInfo // and its info, kept here so that it does not escape
}

var _ Encoder = (*smoother)(nil)

// heldChunk is a chunk whose content text is (partly) held: the template of
// the chunk rebuilt for a release that begins in its text, so that the
// client sees its id, model, created and other members as they came.
type heldChunk struct {
	data       []byte // the chunk's JSON, copied
	start, end int    // its content's JSON string (quotes included) in data
	left       int    // bytes of its text still held
	stamp      int64  // the upstream's sent_ns stamp; 0 when none
}

func newSmoother(s *Session, inner Encoder, maxDelay time.Duration) *smoother {
	return &smoother{s: s, inner: inner, buf: smooth.Buffer{MaxDelay: maxDelay}}
}

// Reset forgets an abandoned attempt: nothing is held before content.
func (sm *smoother) Reset() {
	sm.drop()
	sm.inner.Reset()
}

// Event holds the text of a plain content chunk and writes what the
// Buffer releases; anything else (tool calls, reasoning, a refusal,
// logprobs, a finish, usage) it writes byte for byte after everything held.
func (sm *smoother) Event(w *sse.Writer, ev *sse.Event, info *api.ChunkInfo) error {
	now := time.Now()
	if info.Content && !info.Finish && !info.HasUsage && !info.Error {
		if start, end, ok := contentSpan(ev.Data); ok {
			text, ok := api.AppendUnquoted(sm.text[:0], ev.Data[start:end])
			sm.text = text
			if ok && len(text) > 0 {
				sm.hold(ev, start, end, len(text))
				if out := sm.buf.Add(text, now); len(out) > 0 {
					if err := sm.release(w, out, now); err != nil {
						return err
					}
				}
				sm.arm(now)
				return nil
			}
		}
	}
	if err := sm.releaseHeld(w, now); err != nil {
		return err
	}
	if ns, ok := sse.ParseStamp(ev.Comment); ok {
		if err := w.Stamp(ns); err != nil {
			return err
		}
	}
	if err := sm.inner.Event(w, ev, info); err != nil {
		return err
	}
	if info.Content {
		sm.sent(now)
		if sm.s.opts.Continuable {
			sm.s.collect(ev.Data)
		}
	}
	return nil
}

// Done writes the text held, then ends the stream.
func (sm *smoother) Done(w *sse.Writer) error {
	if err := sm.releaseHeld(w, time.Now()); err != nil {
		return err
	}
	return sm.inner.Done(w)
}

// Error writes the text held, then the error event.
func (sm *smoother) Error(w *sse.Writer, body []byte) error {
	if err := sm.releaseHeld(w, time.Now()); err != nil {
		return err
	}
	return sm.inner.Error(w, body)
}

// KeepAlive writes a heartbeat; the text held stays held.
func (sm *smoother) KeepAlive(w *sse.Writer) error { return sm.inner.KeepAlive(w) }

// ErrorBody is the client dialect's.
func (sm *smoother) ErrorBody(status int, body []byte) []byte {
	return sm.inner.ErrorBody(status, body)
}

// hold keeps a copy of the chunk ev as the template of the n bytes of
// text it adds to the Buffer.
func (sm *smoother) hold(ev *sse.Event, start, end, n int) {
	var data []byte
	if k := len(sm.spare); k > 0 {
		data, sm.spare = sm.spare[k-1][:0], sm.spare[:k-1]
	}
	stamp, _ := sse.ParseStamp(ev.Comment)
	sm.held = append(sm.held, heldChunk{data: append(data, ev.Data...), start: start, end: end, left: n, stamp: stamp})
}

// release writes text, the Buffer's release, unflushed, as one chunk: the
// chunk its first byte came in, with text as its content. The chunks whose
// text is all out are dropped.
func (sm *smoother) release(w *sse.Writer, text []byte, now time.Time) error {
	if len(sm.held) == 0 {
		return nil // cannot be: every byte held came with a chunk
	}
	h := &sm.held[0]
	sm.out = append(sm.out[:0], h.data[:h.start]...)
	sm.out = api.AppendString(sm.out, text)
	sm.out = append(sm.out, h.data[h.end:]...)
	stamp := h.stamp
	for n := len(text); n > 0 && len(sm.held) > 0; {
		h := &sm.held[0]
		take := min(n, h.left)
		h.left -= take
		n -= take
		if h.left == 0 {
			sm.spare = append(sm.spare, h.data)
			sm.held = append(sm.held[:0], sm.held[1:]...)
		}
	}
	if stamp != 0 {
		if err := w.Stamp(stamp); err != nil {
			return err
		}
	}
	sm.ev = sse.Event{Data: sm.out}
	sm.info = api.ChunkInfo{Content: true}
	if err := sm.inner.Event(w, &sm.ev, &sm.info); err != nil {
		return err
	}
	sm.s.lastWrite.Store(int64(now.Sub(sm.s.t0)))
	sm.sent(now)
	if sm.s.opts.Continuable {
		sm.s.collect(sm.out)
	}
	return nil
}

// releaseHeld writes all the text held, unflushed.
func (sm *smoother) releaseHeld(w *sse.Writer, now time.Time) error {
	if sm.buf.Len() == 0 {
		return nil
	}
	return sm.release(w, sm.buf.Flush(), now)
}

// arm makes sure the timer fires by the Buffer's deadline. The deadline
// only moves later while text flows (the oldest text held is released), so
// a timer already set for an earlier time is left alone: it fires, finds
// nothing due, and sets itself for the deadline of then. The per-chunk path
// does no timer work, as with the idle window.
func (sm *smoother) arm(now time.Time) {
	d, ok := sm.buf.Deadline()
	if !ok || (!sm.due.IsZero() && !sm.due.After(d)) {
		return
	}
	sm.due = d
	if sm.timer == nil {
		sm.timer = time.AfterFunc(d.Sub(now), sm.fire)
		return
	}
	sm.timer.Reset(d.Sub(now))
}

// fire releases the text whose deadline came, flushed at once: no text
// waits longer than Options.Smoothing, even in a long gap upstream.
func (sm *smoother) fire() {
	s := sm.s
	s.mu.Lock() // the commit point writes under mu alone
	defer s.mu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	sm.due = time.Time{}
	if s.ended.Load() {
		return
	}
	now := time.Now()
	if out := sm.buf.Expire(now); len(out) > 0 {
		s.deadline(int64(now.Sub(s.t0)))
		// A failed write means the client went away: the request's context
		// ends the attempt, and the relay loop's next write fails too.
		if sm.release(&s.sw, out, now) == nil {
			s.sw.Flush()
		}
	}
	sm.arm(now)
}

// smoothStart begins an attempt's smoothing: its measurements go to obs.
// Out of line, like closeStream: the relay loop's frame stays as it is.
//
//go:noinline
func (s *Session) smoothStart(obs *metrics.Stream) {
	s.wmu.Lock()
	s.enc.(*smoother).obs = obs
	s.wmu.Unlock()
}

// closeStream ends an attempt: the smoothing's end (see end), then the
// upstream stream's Close.
//
//go:noinline
func (s *Session) closeStream(st provider.Stream) {
	if sm, ok := s.enc.(*smoother); ok {
		sm.end()
	}
	st.Close()
}

// end ends an attempt: the text still held is written and flushed (before
// the error event or the continuation that may follow, so that Prefix
// counts it), and the timer stopped.
func (sm *smoother) end() {
	s := sm.s
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.ended.Load() && sm.buf.Len() > 0 {
		s.deadlineNow()
		if sm.releaseHeld(&s.sw, time.Now()) == nil {
			s.sw.Flush()
		}
	}
	sm.stop()
}

// stop drops what is held and stops the timer. Called with wmu held.
func (sm *smoother) stop() {
	sm.drop()
	if sm.timer != nil {
		sm.timer.Stop()
	}
	sm.due = time.Time{}
}

// drop forgets the text held.
func (sm *smoother) drop() {
	sm.buf.Flush()
	for _, h := range sm.held {
		sm.spare = append(sm.spare, h.data)
	}
	sm.held = sm.held[:0]
}

// sent measures a content chunk written at now: TTFT for the first, else
// the gap since the last (ITL, MaxGap), as the client sees them. Content
// chunks are counted where they are read (Session.content): each is about
// one token, whatever the chunks they leave in.
func (sm *smoother) sent(now time.Time) {
	st := &sm.s.stats
	if st.FirstContent.IsZero() {
		st.FirstContent = now
		st.TTFT = now.Sub(sm.s.opts.Start)
		sm.obs.TTFT(st.TTFT)
	} else {
		gap := now.Sub(st.LastContent)
		sm.obs.ITL(gap)
		if gap > st.MaxGap {
			st.MaxGap = gap
		}
	}
	st.LastContent = now
}

var errNotPlain = errors.New("not a plain content chunk")

// contentSpan returns where the content string of a plain content chunk
// is in data: one choice whose delta holds a "content" string and nothing
// else but a role (tool calls, reasoning, refusal and any other member null
// or ""), no finish_reason, no logprobs (they belong to the chunk's tokens),
// no usage and no error. ok is false for any other chunk.
func contentSpan(data []byte) (start, end int, ok bool) {
	var p plainScan
	p.data = data
	if api.EachMember(data, p.top) != nil || p.start == 0 {
		return 0, 0, false
	}
	return p.start, p.end, true
}

// plainScan is contentSpan's walk; its methods are the callbacks.
type plainScan struct {
	data       []byte
	start, end int
	choices    int
}

func (p *plainScan) top(key, _, value []byte) error {
	switch string(key) {
	case "choices":
		return api.EachElement(value, p.choice)
	case "usage", "error":
		if !isNull(value) {
			return errNotPlain
		}
	}
	return nil
}

func (p *plainScan) choice(elem []byte) error {
	if p.choices++; p.choices > 1 {
		return errNotPlain
	}
	return api.EachMember(elem, p.choiceMember)
}

func (p *plainScan) choiceMember(key, _, value []byte) error {
	switch string(key) {
	case "delta":
		return api.EachMember(value, p.delta)
	case "finish_reason", "logprobs":
		if !isNull(value) {
			return errNotPlain
		}
	}
	return nil
}

func (p *plainScan) delta(key, _, value []byte) error {
	switch string(key) {
	case "content":
		if p.start != 0 || len(value) < 2 || value[0] != '"' {
			return errNotPlain
		}
		// value is a sub-slice of data: its offset is the difference of
		// their capacities.
		p.start = cap(p.data) - cap(value)
		p.end = p.start + len(value)
		return nil
	case "role":
		return nil
	}
	if isNull(value) || string(value) == `""` {
		return nil
	}
	return errNotPlain
}
