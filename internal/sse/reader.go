// Package sse reads and writes Server-Sent Events, the framing every
// streaming LLM API uses, for the gateway, the benchmark and the simulator
// alike. The Reader parses as the WHATWG HTML standard does, plus documented
// extensions for LLM streams, without allocating in steady state; the Writer
// flushes each event, or queues events for one flush when their reader is
// about to read again (Reader.Hook), so nothing waits between an
// upstream read and a client write.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLine is the longest line a Reader accepts when no limit is given.
const DefaultMaxLine = 10 << 20

// ErrTruncated reports a stream that ended before it was complete: without
// the "[DONE]" sentinel, in the middle of a line or in the middle of an
// event. The upstream cut the connection or crashed mid-answer. It wraps
// io.ErrUnexpectedEOF.
var ErrTruncated = fmt.Errorf("sse: stream ended without [DONE] or mid-event: %w", io.ErrUnexpectedEOF)

// LineTooLongError is returned when a single line, or the data of one event,
// exceeds the Reader's limit.
type LineTooLongError struct{ Limit int }

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("sse: line longer than the %d-byte limit", e.Limit)
}

// A ReadHook is told before each read from a Reader's source (Reader.Hook).
type ReadHook interface{ BeforeRead() }

// HookFunc is a function as a ReadHook.
type HookFunc func()

// BeforeRead calls f.
func (f HookFunc) BeforeRead() { f() }

// Event is one event: the lines of one block, up to the blank line that
// dispatches it (or the end of the input, see Reader). Its slices point into
// the Reader's buffers and stay valid only until the next call to Next.
type Event struct {
	// Name is the value of the block's last "event:" line, nil when there was
	// none. Nil and empty both mean WHATWG's default type, "message".
	Name []byte
	// Data is the block's "data:" lines joined by "\n" (the SSE rule for
	// multi-line data). It is non-nil whenever the block had at least one
	// data line, even an empty one: "data:" alone gives a non-nil Data of
	// length 0, an event WHATWG dispatches too. Data is nil only for a
	// comment-only block, which Next reports when CommentsOnly is set.
	Data []byte
	// ID is the value of the block's last "id:" line, nil when the block had
	// none; an "id:" value holding a NUL byte is ignored, as WHATWG says.
	// Unlike WHATWG's lastEventId it does not carry over: an event without
	// its own "id:" line has a nil ID, and the "id:" of a block that
	// dispatched nothing is dropped. A consumer that needs the last event ID
	// keeps the last non-nil ID it saw.
	ID []byte
	// Comment is the text of the block's last comment line (": ..."),
	// without the colon and one leading space; nil when none. WHATWG ignores
	// comments; heartbeats and the simulator's "sent_ns=" stamps arrive here.
	Comment []byte
}

// Reader parses an SSE byte stream as the WHATWG HTML standard's
// "interpreting an event stream" does: one UTF-8 byte order mark at the
// start is dropped (also split across reads); lines end in CRLF, LF or a
// lone CR, and a CR ends its line at once, also as the last byte of a read
// (a LF that starts the next read is then taken as the rest of a CRLF, not
// as a blank line): no event waits for a read that may never come; a line
// without a colon is a field with an empty value, and one space after the
// colon is dropped; "event", "data" and "id" fields are kept, "retry" and
// unknown fields ignored; a blank line dispatches the block's event when the
// block had at least one data line, and resets the block (event name, data,
// id, comment) whatever it held; an unterminated last line is discarded.
//
// Extensions, for LLM streams:
//   - "[DONE]": a block whose first data line starts with "[DONE]"
//     (OpenAI's sentinel) ends the stream at that line: Next returns io.EOF
//     instead of an event and reads no further, so nothing after it (a
//     second data line, the blank line, the source's error) is seen. The
//     official SDKs match it so (openai-go's ssestream: bytes.HasPrefix of
//     the event's data; openai-python: data.startswith("[DONE]")), so
//     "data: [DONE] " and "[DONE]" followed by another data line end a
//     complete answer, as they do for the SDKs (issue 22). An unterminated
//     last line "data: [DONE]..." (or "data:[DONE]...") ends it too.
//   - End of input (the source returns io.EOF, or io.ErrUnexpectedEOF as
//     net/http's chunked reader does for a connection cut mid-body): a block
//     whose data lines were all complete but whose blank line never came is
//     still returned as an event (an upstream that closes right after its
//     last data line did send it); the next call returns ErrTruncated. An
//     input that ends mid-line (the partial line is discarded) or without
//     "[DONE]" also gives ErrTruncated; see NoDone for the one exception.
//     Both kinds of end give the same events and, but for NoDone, the same
//     error.
//   - Comments are surfaced in Event.Comment, and comment-only blocks as
//     events with nil Data when CommentsOnly is set.
//   - Event.ID belongs to its block rather than carrying over (see Event.ID).
//   - Bytes pass through as they are: invalid UTF-8 is not replaced with
//     U+FFFD as WHATWG's decoder would; the JSON decoder downstream judges it.
//   - A line, or the data of one event, longer than the limit is an error
//     (*LineTooLongError) instead of an unbounded buffer.
//
// Any other read error is returned as it is, after the complete events read
// before it; the block in progress is dropped. Once Next has returned an
// error it returns that error again until Reset.
//
// The zero value is not usable; call NewReader. A Reader is not safe for
// concurrent use.
type Reader struct {
	// The fields every event touches come first, on the Reader's first
	// four cache lines (a gateway holds thousands of Readers; each line an
	// event touches is likely a cache miss).
	src  io.Reader
	buf  []byte // read buffer; buf[r:w] is unread input
	r, w int
	max  int
	// ev is the block being read: its fields' values, which point into buf
	// while it holds them (alias), so that most events, which arrive whole
	// in one read, are returned without a copy.
	ev  Event
	err error // sticky source error: io.EOF, ErrTruncated for io.ErrUnexpectedEOF, or as read
	end error // sticky result of Next once the stream is over

	// Hook, when set, is called (Hook.BeforeRead) before each read from
	// the source: everything Next could return without waiting has been
	// returned. A relay that writes events without flushing them flushes
	// here, so the events that arrived in one read go out in one write and
	// none waits for input that has not arrived. An interface rather than a
	// func: a method value would be one more object, on a cache line of its
	// own, that every read of every stream touches.
	Hook ReadHook
	// events, when set (ResetEvents), is the source of the events Next
	// returns, in place of src's bytes.
	events Events
	alias  block // the fields of ev whose value points into buf
	bom    bool  // the input's first bytes may still be a byte order mark
	cr     bool  // the last line ended in a CR at the end of buf: a LF next ends the same line
	saw    bool  // an event with data was returned (for NoDone)
	// CommentsOnly, when set, reports comment-only blocks (heartbeats) as
	// events with nil Data, so a relay can see keep-alives. Off by default:
	// such blocks are skipped, as WHATWG skips them.
	CommentsOnly bool
	// NoDone, for dialects without a "[DONE]" sentinel (Anthropic, Gemini),
	// makes an io.EOF that comes between two events, after at least one
	// event with data, a clean end: Next returns io.EOF instead of
	// ErrTruncated. A cut mid-line or mid-event (lines after the last blank
	// line) is still ErrTruncated, and so is io.ErrUnexpectedEOF, since the
	// transport itself saw the body cut. A cut exactly between two events
	// looks the same as a clean end at this level: adapters must still
	// decide completeness from the dialect's own terminal event (Anthropic's
	// message_stop, Gemini's finishReason).
	NoDone bool

	// own holds the values copied out of buf (see keep), by field (fData,
	// fName, fID, fComment), kept for the next blocks.
	own [4][]byte
}

// The fields of a block, as indexes of Reader.own; 1<<f is the field's
// block bit (hasData, hasName, hasID, hasComment).
const (
	fData = iota
	fName
	fID
	fComment
)

// val returns the value of field f in the block being read.
func (r *Reader) val(f int) *[]byte {
	switch f {
	case fData:
		return &r.ev.Data
	case fName:
		return &r.ev.Name
	case fID:
		return &r.ev.ID
	}
	return &r.ev.Comment
}

// set makes b, a slice of the read buffer, the value of field f.
func (r *Reader) set(f int, b []byte) {
	*r.val(f) = b
	r.alias |= 1 << f
}

// keep copies field f's value into own storage if it points into buf.
func (r *Reader) keep(f int) {
	if r.alias&(1<<f) != 0 {
		v := r.val(f)
		r.own[f] = append(r.own[f][:0], *v...)
		*v = r.own[f]
		r.alias &^= 1 << f
	}
}

// clear empties the block being read.
func (r *Reader) clear() { r.ev, r.alias = Event{}, 0 }

// initialBuf is the Reader's first buffer size: one typical chunk line fits
// (a stream chunk is 200-400 bytes), and it doubles for longer lines. Kept
// small because a gateway holds one Reader per open stream (pooled readers
// keep what they grew to, up to the pool's limit).
const initialBuf = 512

// NewReader returns a Reader on src. maxLine bounds a single line, and the
// data of one event, in bytes; 0 means DefaultMaxLine.
func NewReader(src io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Reader{src: src, buf: make([]byte, initialBuf), max: maxLine, bom: true}
}

// Size is the memory the Reader's buffers hold, in bytes: a pool can drop
// a Reader that grew on a long line instead of keeping it.
func (r *Reader) Size() int {
	return cap(r.buf) + cap(r.own[fData]) + cap(r.own[fName]) + cap(r.own[fID]) + cap(r.own[fComment])
}

// Reset makes the Reader read a new stream from src, keeping its buffers
// and options: a byte order mark may start it again, and a sticky error is
// cleared.
func (r *Reader) Reset(src io.Reader) {
	r.src, r.r, r.w, r.err, r.end, r.bom, r.saw, r.cr = src, 0, 0, nil, nil, true, false, false
	r.events = nil
	r.clear()
}

// Events is a source of events that arrive framed otherwise than as SSE
// bytes (a cloud's binary frames, unwrapped): a Reader reset with
// ResetEvents returns its events as they come, with no SSE to write and
// parse again. NextEvent returns the next event, valid until the next call,
// and calls h.BeforeRead (h may be nil) before each read from the source
// underneath, as a Reader calls its Hook. At a clean end of input it
// returns io.EOF, and ErrTruncated for an input that ended inside an event.
type Events interface {
	NextEvent(h ReadHook) (*Event, error)
}

// ResetEvents makes the Reader return src's events (see Events), keeping
// its options: NoDone decides, as for bytes, whether the end of input after
// an event is a clean end (io.EOF) or ErrTruncated. Reset ends it.
func (r *Reader) ResetEvents(src Events) {
	r.Reset(nil)
	r.events = src
}

// nextEvent is Next for a Reader reset with ResetEvents.
func (r *Reader) nextEvent() (*Event, error) {
	ev, err := r.events.NextEvent(r.Hook)
	if err != nil {
		if err == io.EOF && !(r.NoDone && r.saw) {
			err = ErrTruncated
		}
		r.end = err
		return nil, err
	}
	r.saw = true
	return ev, nil
}

// block records what the block being read has held so far.
type block uint8

const (
	hasData    block = 1 << iota // at least one data line
	hasName                      // an "event:" line
	hasID                        // an "id:" line without NUL
	hasComment                   // a comment line
	hasLine                      // any line: the input is not between two events
)

// Next returns the next event. It returns io.EOF at "[DONE]" (which is not
// itself returned) or, with NoDone, at a bare EOF between two events;
// ErrTruncated when the input ends otherwise (also when the source reports
// io.ErrUnexpectedEOF, as an HTTP body cut mid-chunk does); a
// *LineTooLongError for an over-long line; or the source's read error. See
// Reader for the exact rules.
func (r *Reader) Next() (*Event, error) {
	if r.end != nil {
		return nil, r.end
	}
	if r.events != nil {
		return r.nextEvent()
	}
	var b block
	r.clear()
	for {
		line, err := r.line()
		if err != nil {
			return r.finish(line, err, b)
		}
		if len(line) == 0 { // blank line: dispatch
			if b&hasData != 0 {
				r.saw = true
				return r.event(b), nil
			}
			if b&hasComment != 0 && r.CommentsOnly {
				return r.event(b), nil
			}
			// Nothing to dispatch, but WHATWG resets the block all the same:
			// an "event:" line must not name the next block's event.
			b = 0
			r.clear()
			continue
		}
		f, err := r.field(line, b)
		if err != nil {
			return r.stop(err)
		}
		b |= hasLine | f
	}
}

// field takes in one line of the block b (not blank), and returns the
// block's flag it set: hasData, hasName, hasID, hasComment, or 0 for
// "retry:" and unknown fields, which are ignored as the SSE spec says. Out
// of line: Next's frame sits between the relay loop and every upstream
// read, so it stays small.
func (r *Reader) field(line []byte, b block) (block, error) {
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch {
	case len(field) == 0: // comment
		r.set(fComment, value)
		return hasComment, nil
	case string(field) == "data":
		// Many short data lines must not grow one event past the limit either.
		if len(r.ev.Data)+len(value) > r.max {
			return 0, &LineTooLongError{Limit: r.max}
		}
		if b&hasData == 0 && bytes.HasPrefix(value, done) {
			// The sentinel as the SDKs match it: what follows it (more of
			// the line, more data lines) cannot make the block anything else.
			return 0, io.EOF
		}
		if b&hasData != 0 {
			// A second data line: joined with a newline, in own storage.
			r.keep(fData)
			r.ev.Data = append(append(r.ev.Data, '\n'), value...)
			r.own[fData] = r.ev.Data
		} else {
			r.set(fData, value)
		}
		return hasData, nil
	case string(field) == "event":
		r.set(fName, value)
		return hasName, nil
	case string(field) == "id":
		if bytes.IndexByte(value, 0) < 0 { // WHATWG ignores an id holding NUL
			r.set(fID, value)
			return hasID, nil
		}
	}
	return 0, nil
}

var (
	done            = []byte("[DONE]")
	doneLine        = []byte("data: [DONE]")
	doneLineNoSpace = []byte("data:[DONE]")
	bom             = []byte("\xEF\xBB\xBF")
	// empty is a present but empty field, without allocating.
	empty = []byte{}
)

// finish ends the stream at the read error err. tail is the input's
// unterminated last line, if any, and b the block in progress.
func (r *Reader) finish(tail []byte, err error, b block) (*Event, error) {
	if err != io.EOF && err != ErrTruncated {
		// A read error or an over-long line: not the end of the input, so
		// nothing in progress can be trusted.
		return r.stop(err)
	}
	if len(tail) > 0 {
		// WHATWG discards an unterminated last line, so a cut mid-line
		// reads as a truncation, not as malformed JSON. Only a first data
		// line that starts with "[DONE]", cut before its newline, is taken
		// as the sentinel: nothing that follows can change it.
		if b&hasData == 0 && (bytes.HasPrefix(tail, doneLine) || bytes.HasPrefix(tail, doneLineNoSpace)) {
			return r.stop(io.EOF)
		}
		b |= hasLine
	}
	r.end = ErrTruncated
	if err == io.EOF && b&hasLine == 0 && r.NoDone && r.saw {
		r.end = io.EOF
	}
	if b&hasData != 0 {
		// Complete data lines whose blank line never came: the upstream did
		// send them; the error follows on the next call.
		return r.event(b), nil
	}
	return nil, r.end
}

func (r *Reader) stop(err error) (*Event, error) {
	r.end = err
	return nil, err
}

func (r *Reader) event(b block) *Event {
	// The block's fields hold their values already; a field that was
	// present is never nil.
	if b&hasData != 0 {
		r.ev.Data = present(r.ev.Data)
	}
	if b&hasName != 0 {
		r.ev.Name = present(r.ev.Name)
	}
	if b&hasID != 0 {
		r.ev.ID = present(r.ev.ID)
	}
	if b&hasComment != 0 {
		r.ev.Comment = present(r.ev.Comment)
	}
	return &r.ev
}

// present returns b, or an empty non-nil slice when b is nil: a field that
// was present is never nil, even before its buffer first grew.
func present(b []byte) []byte {
	if b == nil {
		return empty
	}
	return b
}

// line returns the next line without its terminator (LF, CRLF or CR). The
// slice is valid until the next call. When the input has ended it returns
// the unterminated rest (possibly empty) with the source's sticky error.
func (r *Reader) line() ([]byte, error) {
	scanned := 0
	for {
		if r.cr && r.r < r.w {
			// The previous line ended in a CR that was the last byte read:
			// a LF now is the second half of its CRLF.
			r.cr = false
			if r.buf[r.r] == '\n' {
				r.r++
			}
		}
		if i := indexEOL(r.buf[r.r+scanned : r.w]); i >= 0 {
			end := r.r + scanned + i
			if end-r.r > r.max {
				return nil, &LineTooLongError{Limit: r.max}
			}
			line := r.buf[r.r:end]
			next := end + 1
			if r.buf[end] == '\r' {
				// A CR ends the line at once, even as the last byte read
				// (issue 22: waiting for a possible LF held a complete
				// event until the upstream's next write); a LF that starts
				// the next read is skipped then.
				if next < r.w {
					if r.buf[next] == '\n' {
						next++
					}
				} else {
					r.cr = true
				}
			}
			r.r = next
			return line, nil
		}
		scanned = r.w - r.r
		if scanned > r.max && !r.bom {
			return nil, &LineTooLongError{Limit: r.max}
		}
		if r.err != nil {
			line := r.buf[r.r:r.w]
			r.r = r.w
			return line, r.err
		}
		if r.bom {
			// The bytes so far start a BOM that fill may drop: scan again
			// from the start (they hold no line end).
			scanned = 0
		}
		r.fill()
	}
}

// fill reads more input, compacting or growing the buffer as needed. A read
// error is kept in r.err: the bytes read with it are parsed first.
func (r *Reader) fill() {
	if r.err != nil {
		return
	}
	if r.r > 0 || r.w == len(r.buf) {
		if r.room(); r.err != nil {
			return
		}
	}
	if r.Hook != nil {
		r.Hook.BeforeRead()
	}
	for tries := 1; ; tries++ {
		n, err := r.src.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.readError(err)
			break
		}
		if n > 0 {
			break
		}
		if tries == 100 {
			r.err = io.ErrNoProgress
			break
		}
	}
	if r.bom {
		r.dropBOM()
	}
}

// room makes room at the end of the buffer for fill: it moves the unread
// bytes to the start, and grows the buffer when it is full. A function of
// its own (too large to be inlined), like readError: fill's frame sits
// between the relay loop and every upstream read, so it stays small.
func (r *Reader) room() {
	if r.r > 0 {
		// The copy overwrites the lines already read: the block's values
		// that point there move to their own storage first.
		r.keep(fData)
		r.keep(fName)
		r.keep(fID)
		r.keep(fComment)
		n := copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, n
	}
	if r.w == len(r.buf) {
		size := 2 * len(r.buf)
		if size > r.max+2 {
			size = r.max + 2
		}
		if size <= len(r.buf) {
			// Unreachable with the checks in line, kept as a guard.
			r.err = &LineTooLongError{Limit: r.max}
			return
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
}

// readError records the error a read of the source returned.
func (r *Reader) readError(err error) {
	switch {
	case errors.Is(err, io.EOF):
		err = io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		// net/http's chunked reader reports a connection cut
		// mid-body this way: the same end of input as a bare EOF,
		// but never a clean one.
		err = ErrTruncated
	}
	r.err = err
}

// dropBOM skips one UTF-8 byte order mark at the start of the input, as
// WHATWG's UTF-8 decode does. A BOM split across reads waits for its next
// bytes: they hold no line terminator, so line keeps reading meanwhile.
func (r *Reader) dropBOM() {
	b := r.buf[r.r:r.w]
	if len(b) < len(bom) && bytes.HasPrefix(bom, b) && r.err == nil {
		return
	}
	r.bom = false
	if bytes.HasPrefix(b, bom) {
		r.r += len(bom)
	}
}

// indexEOL finds the first LF or CR. Two IndexByte scans (vectorised in the
// runtime) beat one byte loop on the long JSON lines of LLM streams.
func indexEOL(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	head := b
	if n >= 0 {
		head = b[:n]
	}
	if c := bytes.IndexByte(head, '\r'); c >= 0 {
		return c
	}
	return n
}
