// Package relay moves one client's stream from the upstream to the client:
// each upstream event is written the moment it is read and flushed before the
// upstream is read again (the events of one read leave in one write), with the
// first-token, idle and keep-alive timers of one stream, the commit point of
// its headers, and the per-chunk measurements (TTFT, gaps, overhead, the
// usage each attempt reported and an estimate of its output from its text).
// It does not choose routes: the gateway calls Attempt once per route it
// tries.
package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/redact"
	"github.com/streamgate/streamgate/internal/sse"
)

// ErrClientGone reports a failed write to the client: it went away.
var ErrClientGone = errors.New("client went away")

// UpstreamError is an error event the upstream sent in its stream. When it
// came after content had been sent it was passed to the client as the
// stream's one error event.
type UpstreamError struct {
	Data string // the event's JSON, as the upstream sent it (for the log)
	// Body is the error object the client gets: Data's type and code kept,
	// its message and every other string redacted (package redact).
	Body []byte
}

// newUpstreamError is the *UpstreamError of the error event data read
// from st, whose Redact (provider.Redactor) also knows the route's key.
func newUpstreamError(data []byte, st provider.Stream) *UpstreamError {
	red := func(s string) string { return redact.Text(s) }
	if r, ok := st.(provider.Redactor); ok {
		red = r.Redact
	}
	return &UpstreamError{Data: string(data), Body: clientError(data, red)}
}

// clientError re-encodes an upstream's error event ({"error":{...}} or
// {"error":"text"}) as the OpenAI error object a client may read: message,
// type, code and param with addresses and secrets redacted, a numeric code
// kept as a number, any other member dropped (it could carry anything).
// Only error events are decoded: the relay's chunks pass untouched.
func clientError(data []byte, red func(string) string) []byte {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	var body struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Param   json.RawMessage `json:"param"`
	}
	var text string
	if json.Unmarshal(data, &ev) == nil {
		if json.Unmarshal(ev.Error, &body) != nil && json.Unmarshal(ev.Error, &text) == nil {
			body.Message = text
		}
	}
	if body.Message == "" {
		body.Message = "the upstream sent an error event"
	}
	body.Message, body.Type = red(body.Message), red(body.Type)
	body.Code, body.Param = redactRaw(body.Code, red), redactRaw(body.Param, red)
	b, err := json.Marshal(struct {
		Error any `json:"error"`
	}{body})
	if err != nil { // cannot happen: strings and valid raw values only
		return []byte(`{"error":{"message":"the upstream sent an error event","type":"upstream_error","code":null,"param":null}}`)
	}
	return b
}

// redactRaw is a raw JSON member as a client may read it: a string
// redacted, a number as it is, anything else null.
func redactRaw(raw json.RawMessage, red func(string) string) json.RawMessage {
	var s string
	var n json.Number
	switch {
	case json.Unmarshal(raw, &s) == nil && len(raw) > 0 && raw[0] == '"':
		b, _ := json.Marshal(red(s))
		return b
	case json.Unmarshal(raw, &n) == nil:
		return raw
	}
	return json.RawMessage("null")
}

func (e *UpstreamError) Error() string { return "upstream sent an error event: " + e.Data }

// overheadSample: one chunk in this many has its gateway overhead observed.
const overheadSample = 8

// Options configure a Session.
type Options struct {
	// IncludeUsage passes the upstream's usage-only chunk to the client. The
	// usage is read either way.
	IncludeUsage bool
	// Continuable makes a cut stream continuable by a later Attempt: the
	// text of the content sent is kept (Prefix), and an upstream error event
	// after content is returned as an *UpstreamError without being written,
	// so that the caller either continues the stream or passes the error on
	// with Fail. Off, the text is not kept (no cost per chunk) and such an
	// error event is relayed at once.
	Continuable bool
	// Smoothing re-chunks the content text on word boundaries (package
	// smooth: CJK-aware, never inside a grapheme cluster), holding no text
	// longer than this; 0 is off and costs the relay nothing. Chunks that
	// carry anything but plain text (tool calls, reasoning, a finish, usage)
	// pass through byte for byte, after the text held before them; what is
	// held is written before "[DONE]", an error event, and at the end of
	// each attempt. TTFT and the gaps are measured as the client gets the
	// text; Stats.ContentChunks still counts the chunks read.
	Smoothing time.Duration
	// FirstToken bounds the wait from the start of an attempt to the first
	// content chunk; 0 means no limit. Firing cancels the attempt with
	// provider.ErrFirstTokenTimeout.
	FirstToken time.Duration
	// Idle bounds the wait between upstream events that make progress
	// (content, a finish, usage) once content flows; heartbeats (comments,
	// empty events, pings, chunks with an empty delta) do not restart it. 0
	// means no limit. Firing cancels the attempt with provider.ErrIdleTimeout.
	Idle time.Duration
	// ClientWrite bounds each write to the client (nginx's send_timeout):
	// a write or flush that has not completed after it fails, as a client
	// that went away does (ErrClientGone), and the upstream request is
	// cancelled. It is the client connection's write deadline
	// (http.ResponseController.SetWriteDeadline), renewed when half of it
	// has passed rather than on every write, so a stalled write ends
	// between ClientWrite/2 and ClientWrite after it started. 0 means no
	// limit; so does a writer without write deadlines (a test recorder).
	ClientWrite time.Duration
	// KeepAlive is the interval of ": keep-alive" comments sent while waiting
	// for the first content; they commit the headers but not content, so a
	// fallback stays possible. 0 sends none.
	KeepAlive time.Duration
	// Start is when the request arrived, the origin of TTFT; zero means NewSession's time.
	Start time.Time
	// BeforeEnd runs once the answer is whole, just before its terminal
	// event ("[DONE]", message_stop, response.completed) is written: what
	// the request holds only while it streams (its concurrency slots) is
	// given back before the client can read the end and send its next
	// request. Nil means nothing.
	BeforeEnd func()
	// LateHeaders are response headers whose final value is known only when
	// the stream ends (the route that served it). When a keep-alive commits
	// the headers before any route produced content, they are declared as
	// trailers instead, and SetHeader keeps setting them: they reach the
	// client after the body. Nil means none.
	LateHeaders []string
	// Body is where the stream's bytes go once its status and headers are
	// written, when w only watches what passes through it (the gateway's
	// status recorder): the relay's writes and flushes skip the wrapper.
	// Nil means w.
	Body http.ResponseWriter
	// Prompt returns the estimate of the prompt's tokens, for an Encoder
	// that tells them before the answer (Prompter) when the upstream has
	// not reported them by its first event; nil means 0.
	Prompt func() int
	// Encoder writes the client's dialect; nil means OpenAI's (events pass
	// through). An Encoder that needs the usage (to end its stream) needs
	// IncludeUsage too; it decides itself what reaches the client. An
	// attempt whose stream is in the client's dialect already
	// (provider.Passthrough) is written by the Encoder's passthrough
	// (Passer), every event as it came, none dropped; it is measured as
	// any other, is not re-chunked by Smoothing and is never continued.
	Encoder Encoder
}

// Stats is what a Session measured. Times are zero until the event happened.
type Stats struct {
	ContentChunks int           // content chunks relayed (with Smoothing, as read: the client may get them merged)
	MaxGap        time.Duration // largest gap between content chunks as sent
	LastContent   time.Time
	TTFT          time.Duration // Start → first content chunk flushed
	FirstContent  time.Time
	// Usage is the current attempt's last reported usage: its usage
	// chunk's, or, when it ended without one, the counts its stream had
	// read (provider.Reporter); HasUsage reports that there is one.
	Usage    api.Usage
	HasUsage bool
	// PromptReported and OutputReported tell which of Usage's counts stand
	// for the whole attempt, once it ended: a Reporter stream's, as it
	// says; else a valid usage chunk's prompt tokens, and its completion
	// tokens unless content came after it without usage of its own.
	PromptReported, OutputReported bool
	// Output is the estimate of the current attempt's output tokens from
	// the text its chunks carried (package fit's Text: content,
	// reasoning, tool-call names and arguments), for what the upstream
	// did not report; set once the attempt ended.
	Output int
}

// Session is one client stream across the attempts of a fallback. Its
// methods are called from the request's goroutine; the keep-alive timer is
// the only other writer and is serialised with a mutex until content flows.
type Session struct {
	// The fields every relayed chunk reads or writes come first, on the
	// Session's first five cache lines (it is 64-byte aligned; the SSE
	// writer is one of them, not an object of its own): with
	// thousands of streams open, each line a chunk touches is likely a cache
	// miss, and misses, not instructions, are most of what a chunk costs
	// then. (A content chunk also reads opts.Continuable: copies of it and
	// of Smoothing here measured no gain, so they are read where they are.)
	batch       batch // the current attempt's events written but not yet flushed
	contentSent bool  // first content written: no more fallback (set under mu)
	finished    bool  // a finish chunk went out (see Continuation below)
	ended       atomic.Bool
	sw          sse.Writer // to Options.Body
	// lastWrite is the time of the latest write to the client, as
	// time.Since(t0) (see wmu); last is the time of the current attempt's
	// latest upstream event, for its idle timer (see attempt).
	lastWrite atomic.Int64
	last      atomic.Int64
	// renew is when the client connection's write deadline is renewed, as
	// time.Since(t0); MaxInt64 when there is none (see Options.ClientWrite).
	renew  atomic.Int64
	enc    Encoder              // what writes: the attempt's encoder (see use), or the smoother around it
	native bool                 // the attempt's stream is passed through (see passthrough)
	infoer provider.ChunkInfoer // the attempt's stream, when it tells its chunks' info
	st     provider.Stream      // the attempt's stream
	info   api.ChunkInfo        // the latest event's scan
	n      uint32               // the attempt's events relayed, for the overhead sample
	queued bool                 // the attempt's stream flushes the batch before each read
	cont   bool                 // the attempt continues a cut answer (see Attempt)
	asked  bool                 // the attempt's Prompter was told the prompt (see prompt)
	// Once content flows the relay loop writes without s.mu; wmu serialises
	// its writes with the keep-alive timer's, which writes a comment only
	// when nothing was written for Options.KeepAlive (a long gap, a
	// thinking model); ended is set when the stream was ended or closed.
	wmu   sync.Mutex
	stats Stats // its per-chunk fields first

	t0      time.Time
	opts    Options
	client  Encoder // Options.Encoder, or OpenAI
	w       http.ResponseWriter
	rc      http.ResponseController // of Options.Body, for the write deadline
	pendBuf bytes.Buffer            // role-only events held until the commit point
	pendW   *sse.Writer

	// Continuation (Options.Continuable): the content text sent so far,
	// whether all of it was plain text or reasoning (no tool call or
	// refusal), and whether a finish chunk went out (finished, above).
	text  []byte
	plain bool
	skip  string          // see Skip
	obs   *metrics.Stream // see Observe
	// ident is the first attempt's "id", "model" and "created": a
	// continuing attempt's chunks carry them too, so that a client
	// (the OpenAI SDKs' accumulators) sees one completion.
	ident map[string]json.RawMessage
	// usageBase is added to the usage the client sees after a
	// continuation: what the earlier attempts of the answer used.
	usageBase api.Usage
	// counted is the current attempt's text (Stats.Output), counted as the
	// chunks are scanned or by the stream (provider.TextCounter); covers
	// is set when its last usage chunk came after its last content.
	counted fit.Text
	covers  bool

	mu        sync.Mutex // guards w, contentSent and the flags below until contentSent
	committed bool       // status and headers written
	trailers  bool       // LateHeaders were declared as trailers at the commit
	errSent   bool       // the stream's one error event was written
	closed    bool
	ka        *time.Timer
}

// NewSession returns a Session writing to w. Call Close when done.
func NewSession(w http.ResponseWriter, opts Options) *Session {
	if opts.Start.IsZero() {
		opts.Start = time.Now()
	}
	s := &Session{w: w, enc: opts.Encoder, opts: opts, t0: time.Now(), plain: true}
	if opts.Body != nil {
		s.sw.Init(opts.Body)
		s.rc = *http.NewResponseController(opts.Body)
	} else {
		s.sw.Init(w)
		s.rc = *http.NewResponseController(w)
	}
	if opts.ClientWrite <= 0 {
		s.renew.Store(math.MaxInt64)
	}
	if s.enc == nil {
		s.enc = OpenAI
	}
	s.client = s.enc
	if opts.Smoothing > 0 {
		s.enc = newSmoother(s, s.enc, opts.Smoothing)
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

// Close stops the keep-alive timer; the Session writes nothing afterwards
// (a keep-alive being written when Close is called is finished first).
func (s *Session) Close() {
	s.mu.Lock()
	s.closed = true
	if s.ka != nil {
		s.ka.Stop()
	}
	s.mu.Unlock()
	s.wmu.Lock()
	s.ended.Store(true)
	if sm, ok := s.enc.(*smoother); ok {
		sm.stop()
	}
	s.wmu.Unlock()
}

// Prefix returns the content text sent to the client so far, and whether a
// later Attempt may continue the stream from it: Options.Continuable is
// set, content was sent, all of it plain text or reasoning (a tool call's
// arguments and a refusal are never continued), some of it text, no
// finish chunk and no error event went out. The reasoning is not part of
// the prefix, and a continuing attempt's reasoning never reaches the
// client (its thinking before it goes on: the client has had the
// answer's); its thinking blocks neither.
func (s *Session) Prefix() (string, bool) {
	ok := s.opts.Continuable && s.contentSent && s.plain && !s.finished && !s.errSent && len(s.text) > 0
	return string(s.text), ok
}

// Observe makes the current attempt's measurements go to obs instead of
// the observer Attempt was given. Called from Attempt's open function,
// once it knows which upstream serves (a hedged race's winner).
func (s *Session) Observe(obs *metrics.Stream) { s.obs = obs }

// SetUsageBase sets the usage of the answer's earlier attempts, added to
// the usage a continuing attempt reports before the client sees it: the
// client's usage is the sum of the attempts.
func (s *Session) SetUsageBase(u api.Usage) { s.usageBase = u }

func (s *Session) keepAlive() {
	s.mu.Lock()
	if s.closed || s.errSent {
		s.mu.Unlock()
		return
	}
	if s.contentSent {
		s.mu.Unlock()
		s.keepAliveStreaming()
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
	s.deadlineNow()
	s.commitLocked()
	if s.enc.KeepAlive(&s.sw) == nil {
		s.ka.Reset(s.opts.KeepAlive)
	}
	s.mu.Unlock()
}

// keepAliveStreaming writes a keep-alive comment mid-stream when nothing
// was written for Options.KeepAlive, and re-arms the timer for what is left
// of the interval otherwise.
func (s *Session) keepAliveStreaming() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.ended.Load() {
		return
	}
	since := time.Since(s.t0) - time.Duration(s.lastWrite.Load())
	if rest := s.opts.KeepAlive - since; rest > 0 {
		s.ka.Reset(rest)
		return
	}
	s.deadlineNow()
	if s.enc.KeepAlive(&s.sw) == nil {
		s.lastWrite.Store(int64(time.Since(s.t0)))
		s.ka.Reset(s.opts.KeepAlive)
	}
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
	s.deadlineNow()
	if !s.committed {
		s.committed = true
		h := s.w.Header()
		h.Set("Content-Type", "application/json")
		h.Del("Content-Length")
		s.w.WriteHeader(status)
		s.w.Write(s.enc.ErrorBody(status, body))
		return status
	}
	s.wmu.Lock()
	s.enc.Error(&s.sw, body)
	s.ended.Store(true)
	s.wmu.Unlock()
	return http.StatusOK
}

// Attempt relays one upstream stream, opened by open with a context that
// the attempt's timers cancel and that ends with ctx (the client's request)
// until the stream's terminal event: from there on the stream is complete,
// and its Close may drain the rest of the upstream's body (the chunked
// terminator a proxy sends late) on its own deadline, so the connection is
// reused whether or not the client stays for the end of its response
// (issue 22). It returns nil after "[DONE]" was relayed; otherwise an error
// to pass to Fail, or to try the next route with when ContentSent is false.
// The error is the context's cause when a timer or the client ended the
// attempt, ErrClientGone when a write to the client failed.
func (s *Session) Attempt(ctx context.Context, obs *metrics.Stream, open func(context.Context) (provider.Stream, error)) error {
	actx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	a := &attempt{s: s, ctx: actx, cancel: cancel}
	// The client's cancellation reaches the upstream through unlink, which
	// the terminal event stops (see attempt.complete).
	a.unlink = context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer a.release()
	s.last.Store(int64(time.Since(s.t0)))
	s.n, s.queued = 0, false
	a.t = time.AfterFunc(time.Hour, a.fire)
	defer a.end()
	// A continuation: content of this answer already reached the client, so
	// the attempt is judged as a stream is (the idle window), not by the
	// first-token deadline, and its own role chunk is dropped.
	s.cont = s.contentSent
	if s.native { // the last attempt's stream was passed through: the client's encoder again
		s.use(s.client, false)
	}
	if s.cont {
		a.state.Store(streaming)
		arm(a.t, s.opts.Idle)
	} else {
		arm(a.t, s.opts.FirstToken)
		s.enc.Reset()
	}
	s.pendBuf.Reset()
	s.resetUsage()

	st, err := open(actx)
	if s.obs != nil { // the stream open chose (a hedge's winner)
		obs, s.obs = s.obs, nil
	}
	if err != nil {
		return cause(actx, err)
	}
	defer s.closeStream(st)
	if err := s.passthrough(st); err != nil {
		return err
	}
	if s.opts.Smoothing > 0 {
		s.smoothStart(obs)
	}
	// A stream that says when it is about to read from the upstream gets its
	// events written without a flush each, and flushed together there: the
	// events of one upstream read leave in one write, and none waits.
	s.batch = batch{obs: obs}
	s.infoer, _ = st.(provider.ChunkInfoer)
	if rn, ok := st.(provider.ReadNotifier); ok {
		rn.BeforeRead((*flushHook)(s))
		s.queued = true
	}
	if tc, ok := st.(provider.TextCounter); ok {
		tc.CountText(&s.counted)
	}
	s.st = st
	defer func() { s.st = nil }()
	err = s.relay(a)
	s.settle(st)
	return err
}

// prompt tells a Prompter client encoder the prompt's tokens, once per
// attempt, before its first event: the counts the upstream reported so
// far, else the estimate. Out of line, like settle.
//
//go:noinline
func (s *Session) prompt() {
	s.asked = true
	p, ok := s.client.(Prompter)
	if !ok || s.native {
		return
	}
	var u api.Usage
	if r, ok := s.st.(provider.Reporter); ok {
		if ru, prompt, _ := r.Reported(); prompt {
			u.PromptTokens, u.PromptTokensDetails = ru.PromptTokens, ru.PromptTokensDetails
		}
	}
	if u.PromptTokens == 0 && s.opts.Prompt != nil {
		u.PromptTokens = s.opts.Prompt()
	}
	p.Prompt(u)
}

// resetUsage clears the usage measurements for a new attempt.
func (s *Session) resetUsage() {
	st := &s.stats
	st.Usage, st.HasUsage, st.PromptReported, st.OutputReported, st.Output = api.Usage{}, false, false, false, 0
	s.counted, s.covers, s.asked = fit.Text{}, false, false
}

// settle sets the ended attempt's Stats.PromptReported, OutputReported
// and Output: from the counts its stream read (provider.Reporter), which
// knows what they cover (an Anthropic stream without message_delta has a
// usage chunk whose output is message_start's 1), else from its usage
// chunk. Out of line, like closeStream.
//
//go:noinline
func (s *Session) settle(st provider.Stream) {
	stats := &s.stats
	stats.Output = s.counted.Tokens()
	if r, ok := st.(provider.Reporter); ok {
		if u, prompt, output := r.Reported(); prompt || output {
			stats.Usage, stats.HasUsage = u, true
			stats.PromptReported, stats.OutputReported = prompt, output
			return
		}
	}
	if stats.HasUsage {
		valid := !stats.Usage.Invalid
		stats.PromptReported, stats.OutputReported = valid, valid && s.covers
	}
}

// passthrough makes a stream in the client's dialect already
// (provider.Passthrough) the attempt's, written by the client encoder's
// passthrough (Passer). A client encoder without one for the stream's
// dialect, or a continuation (whose events the relay edits), cannot take
// it: the gateway passes a request through only to a client of the
// stream's dialect, and never continues one. Out of line, like
// closeStream.
//
//go:noinline
func (s *Session) passthrough(st provider.Stream) error {
	p, ok := st.(provider.Passthrough)
	if !ok {
		return nil
	}
	var enc Encoder
	if ps, ok := s.client.(Passer); ok {
		enc = ps.Pass(p.Dialect())
	}
	if enc == nil || s.cont {
		return fmt.Errorf("relay: a %s stream passed through cannot reach this client as it came", p.Dialect())
	}
	enc.Reset()
	s.use(enc, true)
	return nil
}

// use makes enc the encoder of the attempt (inside the smoother, when
// smoothing): under both locks, as the keep-alive and smoothing timers
// write through it.
func (s *Session) use(enc Encoder, native bool) {
	s.mu.Lock()
	s.wmu.Lock()
	if sm, ok := s.enc.(*smoother); ok {
		sm.inner = enc
	} else {
		s.enc = enc
	}
	s.native = native
	s.wmu.Unlock()
	s.mu.Unlock()
}

// attempt is what one Attempt's timer needs. Each attempt has its own, so
// a timer that fires as its attempt ends cancels only that attempt. The
// loop's own state is in the Session (st, last, n, queued, cont), on the
// lines a chunk touches anyway.
type attempt struct {
	s *Session
	// state decides, once, whether the first-token deadline or the first
	// content came first: the loop writes content only after winning
	// waiting → streaming, the timer cancels only after winning
	// waiting → expired.
	state  atomic.Int32
	over   atomic.Bool // the attempt returned: a timer firing late does nothing
	t      *time.Timer
	ctx    context.Context
	cancel context.CancelCauseFunc
	unlink func() bool // stops ctx's cancellation from reaching the upstream
	whole  bool        // the terminal event was read: ctx is left to the stream's Close
}

// complete is called at the stream's terminal event: neither the client
// leaving nor a timer cancels the upstream request from now on, so the
// stream's Close can drain the rest of its body for the connection's reuse.
func (a *attempt) complete() {
	a.unlink()
	a.over.Store(true)
	a.whole = true
}

// release ends the attempt's link to the client's context, and cancels the
// upstream request unless the stream was complete (its Close ran first and
// bounds its drain itself).
func (a *attempt) release() {
	a.unlink()
	if !a.whole {
		a.cancel(nil)
	}
}

// fire is the attempt's one timer: the first-token deadline, then the idle
// one. Once content flows, each event only stores its time in last; when
// the timer fires it re-arms itself for what is left of the idle window, so
// the per-event path does no timer work.
func (a *attempt) fire() {
	if a.over.Load() {
		return // s.last is the next attempt's now: this timer must not re-arm on it
	}
	if a.state.CompareAndSwap(waiting, expired) {
		a.cancel(provider.ErrFirstTokenTimeout)
		return
	}
	idle := a.s.opts.Idle
	if idle <= 0 { // the first-token timer fired as content began; no idle window
		return
	}
	if rest := idle - (time.Since(a.s.t0) - time.Duration(a.s.last.Load())); rest > 0 {
		a.t.Reset(rest)
		return
	}
	a.cancel(provider.ErrIdleTimeout)
}

// end stops the attempt's timer. A callback already running may still
// re-arm it once; over makes that and any later run do nothing.
func (a *attempt) end() {
	a.over.Store(true)
	a.t.Stop()
}

// relay is Attempt's loop. Its frame holds little (the loop's state is in
// the Session, the event's work in event): with thousands of streams open, the
// stack lines between this frame and the upstream read are cache misses
// each time a stream wakes, so the fewer the better.
func (s *Session) relay(a *attempt) error {
	for {
		ev, err := s.st.Next()
		if s.batch.err != nil {
			return wrap(ErrClientGone, s.batch.err)
		}
		if err != nil {
			if err == io.EOF {
				a.complete()
				return s.done()
			}
			return cause(a.ctx, err)
		}
		if len(ev.Data) == 0 {
			// A heartbeat: a comment-only block, an empty "data:" event, an
			// event without counterpart (Anthropic's ping). It is not
			// progress: the idle window does not restart (issue 22: an
			// upstream sending only pings after content held a stream
			// forever).
			continue
		}
		if err := s.event(a, ev); err != nil {
			return err
		}
	}
}

// event relays one upstream event that carries data. It returns nil also
// when the event was held or dropped (a role chunk before content, a
// usage-only chunk the client did not ask for).
func (s *Session) event(a *attempt, ev *sse.Event) error {
	// Only the sampled chunks' overhead is observed: take their read time alone.
	var read time.Time
	sampled := (s.n+1)%overheadSample == 0
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
		s.covers = true // it counts this chunk's content too
		if !info.Content && !info.Finish && !s.opts.IncludeUsage && !s.native {
			return nil // usage-only chunk the client did not ask for
		}
	} else if info.Content {
		s.covers = false
	}
	switch {
	case !s.contentSent:
		if !s.asked {
			s.prompt()
		}
		if held, err := s.first(a, ev, info); held || err != nil {
			return err
		}
	case s.cont:
		if ev = s.continued(ev, info); ev == nil {
			return nil
		}
		fallthrough
	default:
		if err := s.write(ev, info, !s.queued); err != nil {
			return wrap(ErrClientGone, err)
		}
		if s.queued {
			s.batch.dirty = true
		}
	}
	now := time.Now()
	since := int64(now.Sub(s.t0))
	if !roleOnly(info) {
		// Progress restarts the idle window: content, a finish, usage. A
		// chunk with none of them (an empty delta) is a ping in data's dress.
		s.last.Store(since)
	}
	s.lastWrite.Store(since)
	if info.Finish {
		s.finished = true
	}
	if info.Content {
		s.content(s.batch.obs, now)
		if s.opts.Continuable && s.opts.Smoothing == 0 { // smoothing collects what it writes
			s.collect(ev.Data)
		}
	}
	if s.n++; sampled {
		if s.batch.dirty {
			s.batch.read = read // observed when the batch is flushed
		} else {
			s.batch.obs.ChunkOverhead(now.Sub(read))
		}
	}
	return nil
}

// first handles an event before content flowed: a role-only chunk is held
// (held is true), so that a first-token timeout or a failure before content
// can still be an HTTP status or a fallback, and travels with the first
// content chunk, which commits the stream.
func (s *Session) first(a *attempt, ev *sse.Event, info *api.ChunkInfo) (held bool, err error) {
	if roleOnly(info) {
		if s.pendBuf.Cap() == 0 {
			s.pendBuf.Grow(256) // one allocation for the usual role chunk
		}
		return true, s.enc.Event(s.pendW, ev, info)
	}
	s.last.Store(int64(time.Since(s.t0)))
	if !a.state.CompareAndSwap(waiting, streaming) {
		// The first-token deadline fired first: nothing is written,
		// so another route may still serve the request.
		return false, cause(a.ctx, provider.ErrFirstTokenTimeout)
	}
	if err := s.commitContent(ev); err != nil {
		return false, err
	}
	arm(a.t, s.opts.Idle)
	return false, nil
}

// roleOnly reports whether a chunk carries nothing the client needs yet:
// no content, no finish, no usage (the role chunk that opens a stream).
func roleOnly(info *api.ChunkInfo) bool { return !info.Content && !info.Finish && !info.HasUsage }

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
	if s.info, err = api.ScanChunkText(ev.Data, &s.counted); err != nil {
		return wrap(provider.ErrMalformed, err)
	}
	return nil
}

// Attempt states (see attempt.state).
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
	if _, ok := sse.ParseStamp(ev.Comment); ok {
		if _, sm := enc.(*smoother); !sm { // it stamps what it writes, when it writes it
			w.CommentLine(ev.Comment) // the stamp as it came: it is well formed
		}
	}
	if err := enc.Event(w, ev, info); err != nil || !flush {
		return err
	}
	return w.Flush()
}

// write writes ev once content flows, serialised with mid-stream
// keep-alives.
func (s *Session) write(ev *sse.Event, info *api.ChunkInfo, flush bool) error {
	s.wmu.Lock()
	if flush {
		// A stream that does not say when it reads (no production adapter):
		// each event is flushed here, so the deadline needs the time now.
		s.deadlineNow()
	}
	err := writeEvent(&s.sw, s.enc, ev, info, flush)
	s.wmu.Unlock()
	return err
}

// Finish ends a stream whose content reached the client as complete
// although its last attempt did not say so (a max_tokens the text already
// sent used up): a finish chunk with reason, the usage chunk (the usage
// base) when the client asked for it, and the terminal event.
func (s *Session) Finish(reason string) error {
	if !s.contentSent {
		return errors.New("relay: Finish before content")
	}
	chunk := map[string]any{"object": "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}}
	for k, v := range s.ident {
		chunk[k] = v
	}
	data, err := json.Marshal(chunk)
	if err != nil {
		return err
	}
	info := api.ChunkInfo{Finish: true}
	s.finished = true
	if err := s.write(&sse.Event{Data: data}, &info, false); err != nil {
		return wrap(ErrClientGone, err)
	}
	if s.opts.IncludeUsage {
		u := s.usageBase
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		delete(chunk, "choices")
		chunk["choices"], chunk["usage"] = []any{}, u
		if data, err = json.Marshal(chunk); err != nil {
			return err
		}
		info = api.ChunkInfo{HasUsage: true, Usage: u}
		if err := s.write(&sse.Event{Data: data}, &info, false); err != nil {
			return wrap(ErrClientGone, err)
		}
	}
	return s.done()
}

// Skip sets text the next attempt's answer will begin with although the
// client has it already (the whitespace a continuation request left out):
// it is removed from that attempt's first content.
func (s *Session) Skip(text string) { s.skip = text }

// continued returns a continuing attempt's event as the client must see
// it: nil for its role chunk (the client has had one); its first content
// without the text set by Skip (nil when nothing is left of the chunk);
// its usage with the earlier attempts' added (in info too, for Encoders
// that read it).
//
//go:noinline
func (s *Session) continued(ev *sse.Event, info *api.ChunkInfo) *sse.Event {
	if roleOnly(info) {
		return nil // the role chunk, and thinking blocks (not content: see api.ChunkInfo)
	}
	if info.Content && bytes.Contains(ev.Data, []byte(`"reasoning`)) {
		var drop bool
		if ev, drop = dropReasoning(ev, info); drop {
			// Still progress: the upstream is thinking.
			s.last.Store(int64(time.Since(s.t0)))
			return nil
		}
	}
	if s.skip != "" && info.Content {
		var drop bool
		if ev, drop = s.skipText(ev, info); drop {
			return nil
		}
	}
	set := make(map[string]json.RawMessage, len(s.ident)+1)
	for k, v := range s.ident {
		set[k] = v
	}
	if b := s.usageBase; info.HasUsage && b != (api.Usage{}) {
		u := &info.Usage
		u.PromptTokens += b.PromptTokens
		u.CompletionTokens += b.CompletionTokens
		u.PromptTokensDetails.CachedTokens += b.PromptTokensDetails.CachedTokens
		u.PromptTokensDetails.CacheWriteTokens += b.PromptTokensDetails.CacheWriteTokens
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		if raw, err := json.Marshal(u); err == nil {
			set["usage"] = raw
		}
	}
	if len(set) == 0 {
		return ev
	}
	data, err := api.SetMembers(ev.Data, set)
	if err != nil {
		return ev
	}
	out := *ev
	out.Data = data
	return &out
}

// dropReasoning removes the reasoning (reasoning_content, reasoning) of a
// continuing attempt's chunk: the client has had the answer's. It reports
// drop when nothing is left to send (no content, tool call or refusal, no
// finish, no usage), and clears info.Content when no content is left. A
// chunk it cannot read is left as it is.
func dropReasoning(ev *sse.Event, info *api.ChunkInfo) (*sse.Event, bool) {
	var chunk map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	var delta map[string]json.RawMessage
	if json.Unmarshal(ev.Data, &chunk) != nil || json.Unmarshal(chunk["choices"], &choices) != nil || len(choices) != 1 ||
		json.Unmarshal(choices[0]["delta"], &delta) != nil {
		return ev, false
	}
	_, r1 := delta["reasoning_content"]
	_, r2 := delta["reasoning"]
	if !r1 && !r2 {
		return ev, false
	}
	delete(delta, "reasoning_content")
	delete(delta, "reasoning")
	content := false
	for k, v := range delta {
		switch k {
		case "content", "refusal":
			var s string
			content = content || json.Unmarshal(v, &s) == nil && s != ""
		case "tool_calls", "function_call":
			content = content || !isNull(v) && string(v) != "[]"
		}
	}
	info.Content = content
	if !content && !info.Finish && !info.HasUsage {
		return nil, true
	}
	var err error
	if choices[0]["delta"], err = json.Marshal(delta); err == nil {
		if chunk["choices"], err = json.Marshal(choices); err == nil {
			var data []byte
			if data, err = json.Marshal(chunk); err == nil {
				out := *ev
				out.Data = data
				return &out, false
			}
		}
	}
	return ev, false
}

// skipText removes s.skip from the start of the chunk's content. It
// reports drop when nothing is left to send (no text, no finish, no usage).
// Text that does not start with s.skip is left alone, and s.skip cleared.
func (s *Session) skipText(ev *sse.Event, info *api.ChunkInfo) (*sse.Event, bool) {
	var chunk map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	var delta map[string]json.RawMessage
	var content string
	if json.Unmarshal(ev.Data, &chunk) != nil || json.Unmarshal(chunk["choices"], &choices) != nil || len(choices) != 1 ||
		json.Unmarshal(choices[0]["delta"], &delta) != nil || json.Unmarshal(delta["content"], &content) != nil {
		s.skip = ""
		return ev, false
	}
	switch {
	case strings.HasPrefix(content, s.skip):
		content, s.skip = content[len(s.skip):], ""
	case strings.HasPrefix(s.skip, content):
		content, s.skip = "", s.skip[len(content):]
	default:
		s.skip = ""
		return ev, false
	}
	if content == "" && !info.Finish && !info.HasUsage {
		return nil, true
	}
	var err error
	if delta["content"], err = json.Marshal(content); err == nil {
		if choices[0]["delta"], err = json.Marshal(delta); err == nil {
			if chunk["choices"], err = json.Marshal(choices); err == nil {
				var data []byte
				if data, err = json.Marshal(chunk); err == nil {
					out := *ev
					out.Data = data
					return &out, false
				}
			}
		}
	}
	return ev, false
}

// collect appends the content text of the OpenAI chunk data to s.text and
// clears s.plain when the chunk carries anything but plain text or
// reasoning (a tool call, a refusal), which is never continued. Only with
// Options.Continuable: it decodes the chunk.
//
//go:noinline
func (s *Session) collect(data []byte) {
	var c struct {
		ID      json.RawMessage `json:"id"`
		Model   json.RawMessage `json:"model"`
		Created json.RawMessage `json:"created"`
		Choices []struct {
			Delta struct {
				Content      *string         `json:"content"`
				ToolCalls    json.RawMessage `json:"tool_calls"`
				Refusal      *string         `json:"refusal"`
				FunctionCall json.RawMessage `json:"function_call"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &c) != nil || len(c.Choices) != 1 {
		s.plain = false
		return
	}
	if s.ident == nil {
		s.ident = map[string]json.RawMessage{}
		for k, v := range map[string]json.RawMessage{"id": c.ID, "model": c.Model, "created": c.Created} {
			if len(v) > 0 {
				s.ident[k] = v
			}
		}
	}
	d := &c.Choices[0].Delta
	if !isNull(d.ToolCalls) || !isNull(d.FunctionCall) || nonEmpty(d.Refusal) {
		s.plain = false
	}
	if d.Content != nil {
		s.text = append(s.text, *d.Content...)
	}
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func nonEmpty(p *string) bool { return p != nil && *p != "" }

// batch holds what an attempt wrote to the client without flushing: the
// stream's reader calls Session.flush before it reads from the upstream
// again.
type batch struct {
	obs   *metrics.Stream // the attempt's
	dirty bool            // events written since the last flush
	read  time.Time       // upstream read time of a sampled event in the batch
	err   error           // the first failed flush: the client went away
}

// flushHook is the Session as the stream's read hook: it flushes before
// each upstream read. A conversion, not a method value: the hook is the
// Session itself, with no object of its own for a read to reach through.
type flushHook Session

func (h *flushHook) BeforeRead() { (*Session)(h).flush() }

// flush writes the batch to the client (the stream's read hook).
func (s *Session) flush() {
	b := &s.batch
	if !b.dirty {
		return
	}
	b.dirty = false
	s.wmu.Lock()
	s.deadline(s.lastWrite.Load()) // the batch's last event was written just now
	err := s.sw.Flush()
	s.wmu.Unlock()
	if err != nil && b.err == nil {
		b.err = err
	}
	if !b.read.IsZero() {
		b.obs.ChunkOverhead(time.Since(b.read))
		b.read = time.Time{}
	}
}

// deadline renews the client connection's write deadline when half of
// Options.ClientWrite has passed since it was set; now is time.Since(t0),
// current: a write follows at once. One load and compare when nothing is
// due, so the relay's flush of every batch can call it.
func (s *Session) deadline(now int64) {
	if now >= s.renew.Load() {
		s.setDeadline(now)
	}
}

// deadlineNow is deadline at the current time, for the writes off the
// per-chunk path (the commit, keep-alives, the end, errors).
func (s *Session) deadlineNow() {
	if s.renew.Load() != math.MaxInt64 {
		s.deadline(int64(time.Since(s.t0)))
	}
}

// setDeadline sets the write deadline to now + ClientWrite. A writer
// without write deadlines (a test recorder) turns the bound off. Out of
// line: the flush that calls deadline stays small.
//
//go:noinline
func (s *Session) setDeadline(now int64) {
	cw := s.opts.ClientWrite
	if err := s.rc.SetWriteDeadline(s.t0.Add(time.Duration(now) + cw)); err != nil {
		s.renew.Store(math.MaxInt64)
		return
	}
	s.renew.Store(now + int64(cw/2))
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
	if s.opts.Smoothing > 0 { // measured when written (smoother.sent)
		st.ContentChunks++
		return
	}
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
		s.ka.Reset(s.opts.KeepAlive) // from now on, for long gaps
	}
	s.lastWrite.Store(int64(time.Since(s.t0)))
	// The held events and ev go out in one write and one flush: both are
	// queued in the SSE writer, then flushed from this frame, not from
	// inside the Encoder: the first flush writes the
	// response headers, net/http's deepest call, and every frame saved above
	// it keeps the handler goroutine's stack at 8 KiB (see gateway.chat and
	// BenchmarkOpenStreamStack).
	var err error
	s.deadlineNow()
	if s.pendBuf.Len() > 0 {
		err = s.sw.QueueRaw(s.pendBuf.Bytes())
		s.pendBuf.Reset()
	}
	if err == nil {
		err = writeEvent(&s.sw, s.enc, ev, &s.info, false)
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
			s.sw.QueueRaw(s.pendBuf.Bytes())
			s.pendBuf.Reset()
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.ended.Store(true)
	s.deadlineNow() // it also bounds the response's end, written after the handler returns
	if s.opts.BeforeEnd != nil {
		s.opts.BeforeEnd()
	}
	if err := s.enc.Done(&s.sw); err != nil {
		return fmt.Errorf("%w: %w", ErrClientGone, err)
	}
	return nil
}

// upstreamError handles an error event of the upstream: before content it is
// an attempt failure (another route may serve); after, it is relayed as the
// stream's one error event, re-encoded with its strings redacted (the
// upstream's words may name its addresses or keys).
func (s *Session) upstreamError(data []byte) error {
	e := newUpstreamError(data, s.st)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.contentSent || s.closed || s.opts.Continuable {
		return e // Continuable: the caller continues or passes it on with Fail
	}
	s.errSent = true
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.ended.Store(true)
	s.deadlineNow()
	if err := s.enc.Error(&s.sw, e.Body); err != nil {
		return fmt.Errorf("%w: %w", ErrClientGone, err)
	}
	return e
}
