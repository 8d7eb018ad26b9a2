package sse

import (
	"bytes"
	"io"
	"net/http/httptest"
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
