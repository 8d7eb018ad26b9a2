package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/streamgate/streamgate/internal/metrics"
)

// Request bodies are the one input whose size a client chooses, so reading
// them is bounded three ways (issue 22):
//   - size: a Content-Length over max_body_bytes is refused (413) before a
//     byte is read; a chunked body is cut at the limit;
//   - time: the body must arrive within timeouts.request_body (net/http's
//     ReadTimeout, nginx's client_body_timeout), else 408;
//   - memory: the bytes of bodies over smallBody being read and decoded at
//     once, gateway-wide, stay within max_decoding_bytes (a body waits up
//     to decodeWait for room, then 503 with Retry-After).
//
// A reply written before the body was read (no key, a wrong key, a body
// too large, a body too slow) closes the connection instead of reading
// what is left of the body first, as net/http otherwise does for up to
// 256 KiB: a client dripping its body is answered at once (statusWriter).

// smallBody is the size below which a body does not take part in the
// decoding budget: its memory is small whatever its shape, and a small
// request never queues behind large ones.
const smallBody = 64 << 10

// decodeWait is how long a large body waits for room in the decoding budget.
const decodeWait = time.Second

// decodeBudget bounds the request bytes being read and decoded at once.
type decodeBudget struct {
	sem *semaphore.Weighted
	max int64
}

func newDecodeBudget(max int64) *decodeBudget {
	return &decodeBudget{sem: semaphore.NewWeighted(max), max: max}
}

// acquire takes room for r's body: its Content-Length, or maxBody for a
// body of unknown length (it may be as large). A small body, and one
// readBody will refuse for its size, take none: their release is nil. The
// release gives the room back; call it once.
func (d *decodeBudget) acquire(r *http.Request, maxBody int64) (release func(), err error) {
	n := r.ContentLength
	if n == 0 || r.Body == nil || r.Body == http.NoBody || (n > 0 && n <= smallBody) || n > maxBody {
		return nil, nil
	}
	if n < 0 {
		n = maxBody
	}
	n = min(n, d.max)
	if !d.sem.TryAcquire(n) {
		ctx, cancel := context.WithTimeout(r.Context(), decodeWait)
		err := d.sem.Acquire(ctx, n)
		cancel()
		if err != nil {
			if r.Context().Err() != nil {
				return nil, r.Context().Err()
			}
			return nil, &decodeBusyError{max: d.max}
		}
	}
	return func() { d.sem.Release(n) }, nil
}

// decodeBusyError refuses a large body when max_decoding_bytes of bodies
// are being read and decoded already: 503 with Retry-After.
type decodeBusyError struct{ max int64 }

func (e *decodeBusyError) Error() string {
	return fmt.Sprintf("the gateway is reading and decoding %d bytes of large request bodies already (max_decoding_bytes): retry after 1s", e.max)
}

// bodyTimeoutError is a body that did not arrive within
// timeouts.request_body: 408.
type bodyTimeoutError struct{ after time.Duration }

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("request body not received within %v (timeouts.request_body)", e.after)
}

// readBody reads the request body within the size limit and the body
// deadline, and marks it read (see statusWriter). A Content-Length over the
// limit is refused before reading.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(*readBytes); ok && b.Reader.Len() == len(b.b) {
		return b.b, nil // read already, whole (hostedResponses looked for mcp tools in it)
	}
	if r.ContentLength > g.maxBody {
		return nil, &http.MaxBytesError{Limit: g.maxBody}
	}
	var rc *http.ResponseController // only with a deadline to set: it costs an allocation
	if g.bodyTimeout > 0 {
		rc = http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(g.bodyTimeout)) // not supported: no deadline
	}
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 {
		// The length is known: one allocation of the right size instead of
		// ReadAll's doubling.
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, g.maxBody))
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return nil, err
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, &bodyTimeoutError{after: g.bodyTimeout}
		}
		return nil, invalid("", "read request body: %v", err)
	}
	if g.bodyTimeout > 0 {
		// The stream that follows must not end at the body's deadline.
		// (net/http lifts an HTTP/1 connection's deadline itself when the
		// body hits its end; an HTTP/2 stream keeps it.)
		rc.SetReadDeadline(time.Time{})
	}
	bodyRead(w)
	// Closed once read: net/http then need not probe for an unread rest
	// when the headers are written, a deep call that would otherwise double
	// the stream goroutine's stack (8 to 16 KiB) for the stream's life.
	r.Body.Close()
	return body, nil
}

// bodyRead tells the statusWriter under w that the request's body was read
// to its end, so its reply keeps the connection.
func bodyRead(w http.ResponseWriter) {
	for {
		switch t := w.(type) {
		case *statusWriter:
			t.unread = false
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return
		}
	}
}

// closeUnread makes a reply written while the request's body is unread the
// connection's last: net/http would otherwise read up to 256 KiB of the
// body before writing the reply (and again when the handler returns),
// waiting on a client that drips it. The past read deadline ends those
// reads at once; the bytes already buffered are still read.
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
}

// decodeSlot takes the decoding budget's room for r's body, counting a
// refusal; see decodeBudget.acquire.
func (g *Gateway) decodeSlot(r *http.Request) (func(), error) {
	release, err := g.decoding.acquire(r, g.maxBody)
	var busy *decodeBusyError
	if errors.As(err, &busy) {
		g.m.Rejected(metrics.ScopeDecoding)
	}
	return release, err
}

// readBytes is a request body read already by readBody and put back, so a
// later readBody of the same request takes the bytes instead of copying
// them again.
type readBytes struct {
	*bytes.Reader
	b []byte
}

func (*readBytes) Close() error { return nil }

// putBack makes body, read by readBody, r's body again.
func putBack(r *http.Request, body []byte) {
	r.Body, r.ContentLength = &readBytes{bytes.NewReader(body), body}, int64(len(body))
}
