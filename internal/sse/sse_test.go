package sse

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriterRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Data([]byte(`{"a":1}`)))
	must(w.Event([]byte("ping"), []byte("line1\nline2")))
	must(w.Comment([]byte("keep-alive")))
	must(w.Stamp(42))
	must(w.Data([]byte("stamped")))
	must(w.Done())
	if !rec.Flushed {
		t.Error("writer did not flush")
	}
	want := "data: {\"a\":1}\n\nevent: ping\ndata: line1\ndata: line2\n\n: keep-alive\n\n: sent_ns=42\ndata: stamped\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want {
		t.Fatalf("got %q, want %q", rec.Body.String(), want)
	}
	r := NewReader(bytes.NewReader(rec.Body.Bytes()), 0)
	evs, err := collect(t, r)
	if err != io.EOF {
		t.Fatalf("err: got %v, want io.EOF", err)
	}
	wantEvs := []seen{{data: `{"a":1}`}, {name: "ping", data: "line1\nline2"}, {data: "stamped", comment: "sent_ns=42"}}
	if len(evs) != len(wantEvs) {
		t.Fatalf("got %+v, want %+v", evs, wantEvs)
	}
	for i := range evs {
		if evs[i] != wantEvs[i] {
			t.Errorf("event %d: got %+v, want %+v", i, evs[i], wantEvs[i])
		}
	}
	if ns, ok := ParseStamp([]byte(evs[2].comment)); !ok || ns != 42 {
		t.Errorf("ParseStamp: got %d %v, want 42 true", ns, ok)
	}
}

func TestParseStamp(t *testing.T) {
	for in, want := range map[string]bool{"sent_ns=1": true, "sent_ns=": false, "sent_ns=1x": false, "keep-alive": false} {
		if _, ok := ParseStamp([]byte(in)); ok != want {
			t.Errorf("ParseStamp(%q): got %v, want %v", in, ok, want)
		}
	}
}

func BenchmarkWriter(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-sim-42","object":"chat.completion.chunk","created":1764441600,"model":"sim-gpt-4.1","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"usage":null}`)
	w := NewWriter(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Data(data); err != nil {
			b.Fatal(err)
		}
	}
}

// chunkedSource returns one chunk per Read.
type chunkedSource struct{ chunks []string }

func (s *chunkedSource) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0])
	s.chunks[0] = s.chunks[0][n:]
	if s.chunks[0] == "" {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

// Hook is called before each read, once every event the bytes already
// read hold has been returned: a relay that flushes there sends the events
// of one read in one write, and never holds one back waiting for input.
func TestReaderHook(t *testing.T) {
	src := &chunkedSource{chunks: []string{"data: a\n\ndata: b\n\ndata: c", "\n\n: ping\n\ndata: d\n\n", "data: [DONE]\n\n"}}
	r := NewReader(src, 0)
	var log []string
	r.Hook = HookFunc(func() { log = append(log, "read") })
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, string(ev.Data))
	}
	want := "read a b read c d read"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// countingFlusher counts writes and flushes.
type countingFlusher struct {
	bytes.Buffer
	writes, flushes int
}

func (f *countingFlusher) Write(p []byte) (int, error) { f.writes++; return f.Buffer.Write(p) }
func (f *countingFlusher) Flush() error                { f.flushes++; return nil }

// Queue frames like Event but leaves the flush to the caller; everything
// queued, stamps included, reaches the underlying writer in one Write.
func TestWriterQueue(t *testing.T) {
	var f countingFlusher
	w := NewWriter(&f)
	w.Stamp(7)
	w.CommentLine([]byte("note"))
	w.Queue([]byte("x"), []byte("a\nb"))
	w.QueueRaw([]byte(": raw\n\n"))
	w.Queue(nil, []byte("c"))
	if f.flushes != 0 || f.writes != 0 {
		t.Errorf("got %d writes and %d flushes after Queue, want 0 and 0", f.writes, f.flushes)
	}
	w.Flush()
	want := ": sent_ns=7\n: note\nevent: x\ndata: a\ndata: b\n\n: raw\n\ndata: c\n\n"
	if got := f.String(); got != want || f.writes != 1 || f.flushes != 1 {
		t.Errorf("got %q in %d writes and %d flushes, want %q in 1 and 1", got, f.writes, f.flushes, want)
	}
	// The next batch starts empty (its buffer is a pooled one).
	w.Data([]byte("d"))
	if got := f.String(); got != want+"data: d\n\n" || f.writes != 2 || f.flushes != 2 {
		t.Errorf("after Data: got %q in %d writes and %d flushes", got, f.writes, f.flushes)
	}
}

// On a writer that cannot flush, every event is written through at once:
// there is no Flush to wait for (the relay holds role chunks this way).
func TestWriterThrough(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Stamp(1)
	w.Queue(nil, []byte("a"))
	if got, want := buf.String(), ": sent_ns=1\ndata: a\n\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
