package sse

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Writer frames SSE events and flushes each one as soon as it is written.
// Queued events and stamps collect in a buffer and leave in a single Write
// at the next Flush: one response-writer call and one system call for every
// event of a batch. The buffer is taken from a pool for the batch and given
// back once it is written, so an open stream holds none between its chunks,
// and a gateway relaying thousands of streams frames them all in the few
// buffers, warm in the CPU's cache, that the pool hands out. On a writer
// that cannot flush (a bytes.Buffer) every event is written through at once.
// A Writer is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	fl  flusher // flushes w; nil when w cannot flush
	buf []byte  // framed bytes not yet written to w
	pb  *[]byte // the pooled buffer buf came from, nil when buf is nil
}

// flusher is net/http's own ResponseWriter's flush (http.response has
// FlushError), called directly; other writers' flushes are adapted to it.
type flusher interface{ FlushError() error }

type flushFunc func() error

func (f flushFunc) FlushError() error { return f() }

// bufs holds the Writers' batch buffers. A batch is usually one event of a
// few hundred bytes; buffers that grew past maxPooled (a huge event) are
// left to the garbage collector instead of being kept.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooled = 64 << 10

// NewWriter returns a Writer on w. When w is an http.ResponseWriter, events
// are flushed through http.NewResponseController, which also reaches
// writers wrapped by middleware that implement Unwrap.
func NewWriter(w io.Writer) *Writer {
	sw := new(Writer)
	sw.Init(w)
	return sw
}

// Init makes sw a new Writer on w, as NewWriter does: a Writer can be a
// field of the struct that uses it.
func (sw *Writer) Init(w io.Writer) {
	*sw = Writer{w: w}
	switch f := w.(type) {
	case flusher: // net/http's own: no ResponseController on every flush
		sw.fl = f
	case http.ResponseWriter:
		sw.fl = flushFunc(http.NewResponseController(f).Flush)
	case interface{ Flush() error }:
		sw.fl = flushFunc(f.Flush)
	}
}

// SetHeaders sets the response headers of an SSE stream on h.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	// Tells nginx-style proxies in front of the gateway not to buffer.
	h.Set("X-Accel-Buffering", "no")
}

// Data writes one event with the given data and flushes it. Data holding
// newlines is split over several "data:" lines, as the SSE format requires.
func (w *Writer) Data(data []byte) error { return w.Event(nil, data) }

// Event writes one event with an optional name ("event:" line) and flushes
// it, with whatever was queued before it.
func (w *Writer) Event(name, data []byte) error {
	w.frame(name, data)
	return w.Flush()
}

// Queue frames one event like Event but does not write it: it waits in the
// Writer's buffer for the next Flush, so several events leave in one write.
// The caller must flush before it waits for anything (see
// Reader.Hook).
func (w *Writer) Queue(name, data []byte) error {
	w.frame(name, data)
	return w.through()
}

func (w *Writer) frame(name, data []byte) {
	b := w.grow(len(name) + len(data) + 16)
	if len(name) > 0 {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		i := bytes.IndexByte(data, '\n')
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		data = data[i+1:]
	}
	w.buf = append(b, '\n', '\n')
}

// Comment writes a comment line (": text") and flushes it. Clients ignore
// comments; they serve as heartbeats and carry the simulator's stamps.
func (w *Writer) Comment(text []byte) error {
	b := append(w.grow(len(text)+4), ": "...)
	b = append(b, text...)
	w.buf = append(b, '\n', '\n')
	return w.Flush()
}

// CommentLine queues the comment line ": <text>", so it travels in the
// same write as the event that follows it, as a line of that event's block
// (a relay passes an upstream's "sent_ns=" stamp on as it came, without
// parsing and formatting its number again). text must hold no line break.
func (w *Writer) CommentLine(text []byte) error {
	b := append(w.grow(len(text)+3), ": "...)
	b = append(b, text...)
	w.buf = append(b, '\n')
	return w.through()
}

// Stamp queues the comment ": sent_ns=<ns>", so it travels in the same
// write as the event that follows it.
func (w *Writer) Stamp(ns int64) error {
	b := append(w.grow(32), ": sent_ns="...)
	b = strconv.AppendInt(b, ns, 10)
	w.buf = append(b, '\n')
	return w.through()
}

// Done writes the "data: [DONE]" sentinel that ends OpenAI-style streams.
func (w *Writer) Done() error {
	w.buf = append(w.grow(16), "data: [DONE]\n\n"...)
	return w.Flush()
}

// QueueRaw queues pre-framed bytes as they are (see Queue).
func (w *Writer) QueueRaw(b []byte) error {
	w.buf = append(w.grow(len(b)), b...)
	return w.through()
}

// Flush writes what is queued in one Write and flushes it to the client,
// if the underlying writer can.
func (w *Writer) Flush() error {
	if err := w.write(); err != nil {
		return err
	}
	if w.fl == nil {
		return nil
	}
	return w.fl.FlushError()
}

// grow returns the buffer with room for n more bytes: a pooled one for a
// new batch, and one allocation when it must grow, not one per append.
func (w *Writer) grow(n int) []byte {
	if w.pb == nil {
		w.pb = bufs.Get().(*[]byte)
		w.buf = (*w.pb)[:0]
	}
	if cap(w.buf)-len(w.buf) < n {
		b := make([]byte, len(w.buf), 2*cap(w.buf)+n)
		copy(b, w.buf)
		w.buf = b
	}
	return w.buf
}

// through writes the queue at once when the underlying writer cannot flush:
// there is no later Flush to wait for.
func (w *Writer) through() error {
	if w.fl != nil {
		return nil
	}
	return w.write()
}

func (w *Writer) write() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.w.Write(w.buf) // an io.Writer does not keep the slice
	if cap(w.buf) <= maxPooled {
		*w.pb = w.buf[:0]
		bufs.Put(w.pb)
	}
	w.buf, w.pb = nil, nil
	return err
}

// ParseStamp returns the nanoseconds of a "sent_ns=<ns>" comment, or 0, false.
func ParseStamp(comment []byte) (int64, bool) {
	const p = "sent_ns="
	if !bytes.HasPrefix(comment, []byte(p)) {
		return 0, false
	}
	var n int64
	digits := comment[len(p):]
	if len(digits) == 0 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
