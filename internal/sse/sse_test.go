package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

type got struct {
	name, data, id, comment string
}

// collect reads every event and the final error.
func collect(t *testing.T, r *Reader) ([]got, error) {
	t.Helper()
	var evs []got
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		g := got{data: string(ev.Data)}
		if ev.Name != nil {
			g.name = string(ev.Name)
		}
		if ev.ID != nil {
			g.id = string(ev.ID)
		}
		if ev.Comment != nil {
			g.comment = string(ev.Comment)
		}
		evs = append(evs, g)
		if len(evs) > 10000 {
			t.Fatal("too many events")
		}
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []got
		wantErr error
	}{
		{"openai", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", []got{{data: `{"a":1}`}, {data: `{"a":2}`}}, io.EOF},
		{"crlf", "data: x\r\n\r\ndata: [DONE]\r\n\r\n", []got{{data: "x"}}, io.EOF},
		{"cr only", "data: x\r\rdata: [DONE]\r\r", []got{{data: "x"}}, io.EOF},
		{"multi-line data", "data: a\ndata: b\ndata:c\n\ndata: [DONE]\n\n", []got{{data: "a\nb\nc"}}, io.EOF},
		{"event and id", "event: message_start\nid: 7\ndata: {}\n\ndata: [DONE]\n\n", []got{{name: "message_start", id: "7", data: "{}"}}, io.EOF},
		{"comments and heartbeats", ": keep-alive\n\n: ping\ndata: x\n\ndata: [DONE]\n\n", []got{{data: "x", comment: "ping"}}, io.EOF},
		{"stamp", ": sent_ns=123\ndata: x\n\ndata: [DONE]\n\n", []got{{data: "x", comment: "sent_ns=123"}}, io.EOF},
		{"no space after colon", "data:x\n\ndata:[DONE]\n\n", []got{{data: "x"}}, io.EOF},
		{"only one space stripped", "data:  x\n\ndata: [DONE]\n\n", []got{{data: " x"}}, io.EOF},
		{"field without colon", "data\n\ndata: [DONE]\n\n", []got{{data: ""}}, io.EOF},
		{"unknown fields and retry ignored", "retry: 10\nfoo: bar\ndata: x\n\ndata: [DONE]\n\n", []got{{data: "x"}}, io.EOF},
		{"bare EOF is truncation", "data: x\n\ndata: y\n\n", []got{{data: "x"}, {data: "y"}}, ErrTruncated},
		{"last event without blank line", "data: x\n\ndata: y", []got{{data: "x"}, {data: "y"}}, ErrTruncated},
		{"empty input", "", nil, ErrTruncated},
		{"utf8", "data: {\"c\":\"안녕하세요\"}\n\ndata: [DONE]\n\n", []got{{data: `{"c":"안녕하세요"}`}}, io.EOF},
		{"done then more is ignored", "data: [DONE]\n\ndata: x\n\n", nil, io.EOF},
	}
	for _, tt := range tests {
		for _, split := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"bytewise", iotest.OneByteReader}, {"halves", iotest.HalfReader}} {
			t.Run(tt.name+"/"+split.name, func(t *testing.T) {
				r := NewReader(split.wrap(strings.NewReader(tt.in)), 0)
				evs, err := collect(t, r)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err: got %v, want %v", err, tt.wantErr)
				}
				if len(evs) != len(tt.want) {
					t.Fatalf("events: got %q, want %q", evs, tt.want)
				}
				for i := range evs {
					if evs[i] != tt.want[i] {
						t.Errorf("event %d: got %+v, want %+v", i, evs[i], tt.want[i])
					}
				}
			})
		}
	}
}

func TestReaderNoDone(t *testing.T) {
	r := NewReader(strings.NewReader("event: message_stop\ndata: {}\n\n"), 0)
	r.NoDone = true
	evs, err := collect(t, r)
	if err != io.EOF || len(evs) != 1 {
		t.Fatalf("got %d events and %v, want 1 event and io.EOF", len(evs), err)
	}
}

func TestReaderCommentsOnly(t *testing.T) {
	r := NewReader(strings.NewReader(": keep-alive\n\ndata: x\n\ndata: [DONE]\n\n"), 0)
	r.CommentsOnly = true
	evs, err := collect(t, r)
	if err != io.EOF {
		t.Fatalf("err: got %v, want io.EOF", err)
	}
	want := []got{{comment: "keep-alive"}, {data: "x"}}
	if len(evs) != 2 || evs[0] != want[0] || evs[1] != want[1] {
		t.Fatalf("got %+v, want %+v", evs, want)
	}
}

func TestReaderLongLines(t *testing.T) {
	big := strings.Repeat("x", 1<<20) // far above bufio.Scanner's 64 KiB
	r := NewReader(strings.NewReader("data: "+big+"\n\ndata: [DONE]\n\n"), 2<<20)
	ev, err := r.Next()
	if err != nil || len(ev.Data) != len(big) {
		t.Fatalf("got %v (len %d), want one event of %d bytes", err, len(ev.Data), len(big))
	}

	r = NewReader(strings.NewReader("data: "+big+"\n\n"), 1000)
	_, err = r.Next()
	var tl *LineTooLongError
	if !errors.As(err, &tl) || tl.Limit != 1000 {
		t.Fatalf("got %v, want *LineTooLongError with limit 1000", err)
	}
	if !strings.Contains(err.Error(), "1000") {
		t.Errorf("error %q does not name the limit", err)
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: x\n\n"), iotest.ErrReader(boom)), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
}

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
	wantEvs := []got{{data: `{"a":1}`}, {name: "ping", data: "line1\nline2"}, {data: "stamped", comment: "sent_ns=42"}}
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

// FuzzReader checks that the events are the same whether the input arrives
// whole or one byte at a time.
func FuzzReader(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: e\r\ndata: a\r\ndata: b\r\n\r\n: c\r\rdata: [DONE]\n\n"))
	f.Add([]byte("data: x\r"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, errW := collect(t, NewReader(bytes.NewReader(in), 256))
		split, errS := collect(t, NewReader(iotest.OneByteReader(bytes.NewReader(in)), 256))
		if (errW == nil) != (errS == nil) || (errW != nil && errW.Error() != errS.Error()) {
			t.Fatalf("errors differ: whole %v, bytewise %v", errW, errS)
		}
		if len(whole) != len(split) {
			t.Fatalf("event counts differ: whole %d, bytewise %d", len(whole), len(split))
		}
		for i := range whole {
			if whole[i] != split[i] {
				t.Fatalf("event %d differs: whole %+v, bytewise %+v", i, whole[i], split[i])
			}
		}
	})
}

// loopReader replays one stream forever without allocating.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

func BenchmarkReader(b *testing.B) {
	chunk := []byte("data: {\"id\":\"chatcmpl-sim-42\",\"object\":\"chat.completion.chunk\",\"created\":1764441600,\"model\":\"sim-gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"finish_reason\":null}],\"usage\":null}\n\n")
	r := NewReader(&loopReader{data: chunk}, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
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

func TestReaderUnexpectedEOFIsTruncation(t *testing.T) {
	r := NewReader(io.MultiReader(strings.NewReader("data: x\n\n"), iotest.ErrReader(io.ErrUnexpectedEOF)), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != ErrTruncated {
		t.Fatalf("got %v, want ErrTruncated", err)
	}
}
