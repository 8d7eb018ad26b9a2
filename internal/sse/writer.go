package sse

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// Writer frames SSE events and flushes each one as soon as it is written.
// It keeps one scratch buffer, so writing an event does not allocate once the
// buffer has grown to the largest event. The buffer is allocated by the first
// event, at that event's size: a gateway holds Writers for every open stream,
// some of which never write. A Writer is not safe for concurrent use.
type Writer struct {
	w     io.Writer
	flush func() error
	buf   []byte
}

// NewWriter returns a Writer on w. When w is an http.ResponseWriter, events
// are flushed through http.NewResponseController, which also reaches
// writers wrapped by middleware that implement Unwrap.
func NewWriter(w io.Writer) *Writer {
	sw := &Writer{w: w}
	switch f := w.(type) {
	case http.ResponseWriter:
		rc := http.NewResponseController(f)
		sw.flush = rc.Flush
	case interface{ Flush() error }:
		sw.flush = f.Flush
	}
	return sw
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

// Event writes one event with an optional name ("event:" line) and flushes it.
func (w *Writer) Event(name, data []byte) error {
	if err := w.Queue(name, data); err != nil {
		return err
	}
	return w.Flush()
}

// Queue writes one event like Event but does not flush it: it waits in the
// underlying writer's buffer (net/http's) for the next Flush, so several
// events can leave in one write. The caller must flush before it waits for
// anything (see Reader.BeforeRead).
func (w *Writer) Queue(name, data []byte) error {
	b := w.scratch(len(name) + len(data) + 16)
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
	b = append(b, '\n', '\n')
	w.buf = b[:0] // keep the grown buffer
	_, err := w.w.Write(b)
	return err
}

// Comment writes a comment line (": text") and flushes it. Clients ignore
// comments; they serve as heartbeats and carry the simulator's stamps.
func (w *Writer) Comment(text []byte) error {
	b := append(w.scratch(len(text)+4), ": "...)
	b = append(b, text...)
	b = append(b, '\n', '\n')
	return w.emit(b)
}

// Stamp writes the comment ": sent_ns=<ns>" without flushing, so it travels
// in the same write as the event that follows it.
func (w *Writer) Stamp(ns int64) error {
	b := append(w.scratch(32), ": sent_ns="...)
	b = strconv.AppendInt(b, ns, 10)
	b = append(b, '\n')
	w.buf = b[:0]
	_, err := w.w.Write(b)
	return err
}

// Done writes the "data: [DONE]" sentinel that ends OpenAI-style streams.
func (w *Writer) Done() error { return w.emit(append(w.scratch(16), "data: [DONE]\n\n"...)) }

// Raw writes pre-framed bytes as they are and flushes them.
func (w *Writer) Raw(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

// Flush flushes buffered output to the client, if the underlying writer can.
func (w *Writer) Flush() error {
	if w.flush == nil {
		return nil
	}
	return w.flush()
}

// scratch returns the empty scratch buffer with room for at least n bytes:
// one allocation when it must grow, not one per append.
func (w *Writer) scratch(n int) []byte {
	if cap(w.buf) < n {
		w.buf = make([]byte, 0, n)
	}
	return w.buf[:0]
}

func (w *Writer) emit(b []byte) error {
	w.buf = b[:0] // keep the grown buffer
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	return w.Flush()
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
