// Package sse reads and writes Server-Sent Events, the framing every
// streaming LLM API uses. The gateway, the benchmark and the simulator share
// this one implementation: the Reader turns a byte stream into events without
// allocating in steady state, and the Writer frames and flushes events one by
// one so nothing is buffered between an upstream read and a client write.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLine is the longest line a Reader accepts when no limit is given.
const DefaultMaxLine = 10 << 20

// ErrTruncated reports a stream that ended (EOF) without the "[DONE]"
// sentinel: the upstream cut the connection or crashed mid-answer. It wraps
// io.ErrUnexpectedEOF.
var ErrTruncated = fmt.Errorf("sse: stream ended without [DONE]: %w", io.ErrUnexpectedEOF)

// LineTooLongError is returned when a single line exceeds the Reader's limit.
type LineTooLongError struct{ Limit int }

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("sse: line longer than the %d-byte limit", e.Limit)
}

// Event is one dispatched SSE event. Its slices point into the Reader's
// buffers and stay valid only until the next call to Next.
type Event struct {
	// Name is the value of the last "event:" line, nil when there was none.
	Name []byte
	// Data is the "data:" lines joined by "\n" (the SSE rule for multi-line data).
	Data []byte
	// ID is the value of the last "id:" line, nil when there was none.
	ID []byte
	// Comment is the text of the last comment line (": ...") seen since the
	// previous event, without the colon and one leading space; nil when none.
	// Heartbeats and the simulator's "sent_ns=" stamps arrive here.
	Comment []byte
}

// Reader parses an SSE byte stream. The zero value is not usable; call NewReader.
type Reader struct {
	src     io.Reader
	buf     []byte // read buffer; buf[r:w] is unread input
	r, w    int
	max     int
	err     error // sticky read error
	data    []byte
	name    []byte
	id      []byte
	comment []byte
	ev      Event
	// CommentsOnly, when set, reports comment-only blocks (heartbeats) as
	// events with nil Data, so a relay can see keep-alives. Off by default.
	CommentsOnly bool
	// NoDone, when set, treats a bare EOF after at least one event as a clean
	// end (io.EOF). Dialects without a "[DONE]" sentinel (Anthropic) use it.
	NoDone   bool
	sawEvent bool
}

// initialBuf is the Reader's first buffer size: one typical chunk line fits
// (a stream chunk is 200-400 bytes), and it doubles for longer lines. Kept
// small because a gateway holds one Reader per open stream.
const initialBuf = 1024

// NewReader returns a Reader on src. maxLine bounds a single line in bytes;
// 0 means DefaultMaxLine.
func NewReader(src io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Reader{src: src, buf: make([]byte, initialBuf), max: maxLine}
}

// Reset makes the Reader read from src, keeping its buffers.
func (r *Reader) Reset(src io.Reader) {
	r.src, r.r, r.w, r.err, r.sawEvent = src, 0, 0, nil, false
	r.data, r.name, r.id, r.comment = r.data[:0], r.name[:0], r.id[:0], r.comment[:0]
}

// Next returns the next event. It returns io.EOF after a "data: [DONE]"
// event (which is not itself returned), ErrTruncated when the input ends
// without it (also when the source reports io.ErrUnexpectedEOF, as an HTTP
// body cut mid-chunk does), a *LineTooLongError for an over-long line, or the underlying
// read error.
func (r *Reader) Next() (*Event, error) {
	r.data = r.data[:0]
	hasData, hasName, hasID, hasComment := false, false, false, false
	r.name, r.id, r.comment = r.name[:0], r.id[:0], r.comment[:0]
	for {
		line, err := r.line()
		if err != nil {
			if err == io.EOF {
				// A final event without its blank line still counts (browsers
				// discard it, but an upstream that closes right after the last
				// data line has still sent it), then the stream is truncated.
				if hasData {
					return r.event(hasName, hasID, hasComment), nil
				}
				if r.NoDone && r.sawEvent {
					return nil, io.EOF
				}
				return nil, ErrTruncated
			}
			return nil, err
		}
		if len(line) == 0 { // blank line: dispatch
			if hasData {
				if bytes.Equal(r.data, done) {
					return nil, io.EOF
				}
				return r.event(hasName, hasID, hasComment), nil
			}
			if hasComment && r.CommentsOnly {
				r.data = r.data[:0]
				ev := r.event(hasName, hasID, hasComment)
				ev.Data = nil
				return ev, nil
			}
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch {
		case len(field) == 0: // comment
			r.comment = append(r.comment[:0], value...)
			hasComment = true
		case string(field) == "data":
			// Many short data lines must not grow one event past the limit either.
			if len(r.data)+len(value) > r.max {
				return nil, &LineTooLongError{Limit: r.max}
			}
			if hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			hasData = true
		case string(field) == "event":
			r.name = append(r.name[:0], value...)
			hasName = true
		case string(field) == "id":
			r.id = append(r.id[:0], value...)
			hasID = true
		}
		// "retry:" and unknown fields are ignored, as the SSE spec says.
	}
}

var done = []byte("[DONE]")

func (r *Reader) event(hasName, hasID, hasComment bool) *Event {
	r.sawEvent = true
	r.ev = Event{Data: r.data}
	if hasName {
		r.ev.Name = r.name
	}
	if hasID {
		r.ev.ID = r.id
	}
	if hasComment {
		r.ev.Comment = r.comment
	}
	return &r.ev
}

// line returns the next line without its terminator (LF, CRLF or CR).
// The slice is valid until the next call.
func (r *Reader) line() ([]byte, error) {
	scanned := 0
	for {
		if i := indexEOL(r.buf[r.r+scanned : r.w]); i >= 0 {
			end := r.r + scanned + i
			if end-r.r > r.max {
				return nil, &LineTooLongError{Limit: r.max}
			}
			// A CR at the very end of the buffer may be the first half of
			// CRLF: read more before deciding.
			if r.buf[end] == '\r' && end+1 == r.w && r.err == nil {
				scanned = end - r.r
				if err := r.fill(); err != nil && err != io.EOF {
					return nil, err
				}
				continue
			}
			line := r.buf[r.r:end]
			next := end + 1
			if r.buf[end] == '\r' && next < r.w && r.buf[next] == '\n' {
				next++
			}
			r.r = next
			return line, nil
		}
		scanned = r.w - r.r
		if scanned > r.max {
			return nil, &LineTooLongError{Limit: r.max}
		}
		if r.err != nil {
			if r.r < r.w { // last line without a terminator
				line := r.buf[r.r:r.w]
				r.r = r.w
				return line, nil
			}
			return nil, r.err
		}
		if err := r.fill(); err != nil && err != io.EOF {
			return nil, err
		}
	}
}

// fill reads more input, compacting or growing the buffer as needed.
func (r *Reader) fill() error {
	if r.err != nil {
		return r.err
	}
	if r.r > 0 {
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
			return &LineTooLongError{Limit: r.max}
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	for range 100 {
		n, err := r.src.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				err = io.EOF
			case errors.Is(err, io.ErrUnexpectedEOF):
				// net/http's chunked reader reports a connection cut
				// mid-body this way: the same truncation as a bare EOF.
				err = ErrTruncated
			}
			r.err = err
			return err
		}
		if n > 0 {
			return nil
		}
	}
	r.err = io.ErrNoProgress
	return r.err
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
