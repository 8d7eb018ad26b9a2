package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// seen is an event as a test sees it. Nil is told from empty where it
// carries meaning: Data is nil only for a comment-only block, and an empty
// "id:" or ":" line gives a present but empty ID or Comment. A nil and an
// empty Name both mean "message", so they are not told apart.
type seen struct {
	name, data, id, comment        string
	nilData, emptyID, emptyComment bool
}

func seenOf(ev *Event) seen {
	return seen{
		name: string(ev.Name), data: string(ev.Data), id: string(ev.ID), comment: string(ev.Comment),
		nilData:      ev.Data == nil,
		emptyID:      ev.ID != nil && len(ev.ID) == 0,
		emptyComment: ev.Comment != nil && len(ev.Comment) == 0,
	}
}

// collect reads every event and the final error, then checks that the
// error is sticky.
func collect(t *testing.T, r *Reader) ([]seen, error) {
	t.Helper()
	var evs []seen
	for {
		ev, err := r.Next()
		if err != nil {
			if _, again := r.Next(); again != err {
				t.Fatalf("Next after %v: got %v, want the same error again", err, again)
			}
			return evs, err
		}
		evs = append(evs, seenOf(ev))
		if len(evs) > 1<<20 {
			t.Fatal("too many events")
		}
	}
}

// sameErr compares a Reader's error with the one a test wants: the
// sentinels exactly, a *LineTooLongError by its limit.
func sameErr(got, want error) bool {
	var wl, gl *LineTooLongError
	if errors.As(want, &wl) {
		return errors.As(got, &gl) && gl.Limit == wl.Limit
	}
	return got == want
}

func sameEvents(got, want []seen) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// source returns in as a Reader would get it: whole (the error on the read
// after the last bytes), together (the error with the last bytes, as
// iotest.DataErrReader and some net.Conn reads do) or one byte per Read;
// ending with io.EOF, or with io.ErrUnexpectedEOF when cut (net/http's
// chunked reader on a connection cut mid-body).
func source(in, feed string, cut bool) io.Reader {
	var r io.Reader = strings.NewReader(in)
	if cut {
		r = io.MultiReader(r, iotest.ErrReader(io.ErrUnexpectedEOF))
	}
	switch feed {
	case "together":
		r = iotest.DataErrReader(r)
	case "bytewise":
		r = iotest.OneByteReader(r)
	}
	return r
}

// quirk is one row of TestReaderQuirks.
type quirk struct {
	name                 string
	in                   string
	commentsOnly, noDone bool
	max                  int // line limit; 0 is DefaultMaxLine
	want                 []seen
	err                  error // final error when the input ends with io.EOF
	cutErr               error // when it ends with io.ErrUnexpectedEOF; nil: the same as err
}

var bigLine = strings.Repeat("x", 256<<10)

// quirks are the WHATWG interpretation cases and the framing real upstreams
// show. Each row names where its quirk is seen.
var quirks = []quirk{
	// OpenAI / vLLM: one data: line per chunk, then "data: [DONE]\n\n".
	{name: "openai", in: "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n",
		want: []seen{{data: `{"a":1}`}, {data: `{"a":2}`}}, err: io.EOF},
	// Reproduced divergence: an upstream that closes right after the sentinel's newline.
	{name: "done without blank line", in: "data: x\n\ndata: [DONE]\n",
		want: []seen{{data: "x"}}, err: io.EOF},
	// Reproduced divergence: an upstream that closes right after the sentinel itself.
	{name: "done without newline", in: "data: x\n\ndata: [DONE]",
		want: []seen{{data: "x"}}, err: io.EOF},
	// WHATWG spec: the space after the colon is optional, also for [DONE].
	{name: "done without space", in: "data:x\n\ndata:[DONE]\n\n",
		want: []seen{{data: "x"}}, err: io.EOF},
	// WHATWG spec and the case above: both at once.
	{name: "done without space or newline", in: "data: x\n\ndata:[DONE]",
		want: []seen{{data: "x"}}, err: io.EOF},
	// Extension: nothing after [DONE] is read, whatever an upstream sends.
	{name: "done then more bytes", in: "data: [DONE]\n\ndata: x\n\n", err: io.EOF},
	// Extension: not even a cut line after it.
	{name: "done then a cut line", in: "data: [DONE]\n\ndata: {\"a", err: io.EOF},
	// Gemini / Vertex AI and proxies: CRLF, here on the sentinel too.
	{name: "done with crlf", in: "data: x\r\n\r\ndata: [DONE]\r\n\r\n",
		want: []seen{{data: "x"}}, err: io.EOF},
	// WHATWG spec: a CR as the very last byte ends the line.
	{name: "done with cr at the end", in: "data: x\r\rdata: [DONE]\r",
		want: []seen{{data: "x"}}, err: io.EOF},
	// Extension: the sentinel is matched on the data alone, whatever the event's name.
	{name: "done with a name", in: "event: end\ndata: [DONE]\n\n", err: io.EOF},
	// openai-go and openai-python: data that starts with "[DONE]" is the
	// sentinel (issue 22: a trailing space, or a second data line, turned a
	// complete answer into a malformed event); a space more before it is not.
	{name: "done with a trailing space", in: "data: x\n\ndata: [DONE] \n\n", want: []seen{{data: "x"}}, err: io.EOF},
	{name: "done then a data line", in: "data: x\n\ndata: [DONE]\ndata: {\"a\":1}\n\n", want: []seen{{data: "x"}}, err: io.EOF},
	{name: "done then a cut data line", in: "data: x\n\ndata: [DONE]\ndata: {\"a", want: []seen{{data: "x"}}, err: io.EOF},
	{name: "done cut with a trailing space", in: "data: x\n\ndata: [DONE] ", want: []seen{{data: "x"}}, err: io.EOF},
	{name: "done after an event line", in: "data: x\n\nevent: e\ndata: [DONE]\n\n", want: []seen{{data: "x"}}, err: io.EOF},
	{name: "done must start the data", in: "data:  [DONE]\n\ndata: [DON\n\n",
		want: []seen{{data: " [DONE]"}, {data: "[DON"}}, err: ErrTruncated},
	// WHATWG spec: the cut line would have joined "a", so it is not the sentinel.
	{name: "done cut after another data line", in: "data: a\ndata: [DONE]",
		want: []seen{{data: "a"}}, err: ErrTruncated},

	// Anthropic: event: lines and no [DONE]; message_stop is the last event.
	{name: "anthropic", noDone: true,
		in: "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		want: []seen{
			{name: "message_start", data: `{"type":"message_start"}`},
			{name: "ping", data: `{"type": "ping"}`},
			{name: "message_stop", data: `{"type":"message_stop"}`},
		}, err: io.EOF, cutErr: ErrTruncated},
	// Anthropic, read as an OpenAI dialect: no [DONE], so truncated.
	{name: "anthropic without NoDone", in: "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		want: []seen{{name: "message_stop", data: `{"type":"message_stop"}`}}, err: ErrTruncated},
	// Anthropic: an overloaded stream ends with an error event (overloaded_error).
	{name: "anthropic error event", noDone: true,
		in:   "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
		want: []seen{{name: "error", data: `{"type":"error","error":{"type":"overloaded_error"}}`}}, err: io.EOF, cutErr: ErrTruncated},
	// Anthropic, cut mid-event: the complete data line still arrives, but the end is a cut.
	// The cut rows below are WHATWG spec plus the NoDone extension.
	{name: "no done, cut mid-event", noDone: true,
		in:   "event: message_start\ndata: {}\n\nevent: content_block_delta\ndata: {\"a\":1}\n",
		want: []seen{{name: "message_start", data: "{}"}, {name: "content_block_delta", data: `{"a":1}`}}, err: ErrTruncated},
	// Anthropic, cut mid-line: the partial line is discarded.
	{name: "no done, cut mid-line", noDone: true,
		in:   "event: message_start\ndata: {}\n\nevent: content_block_delta\ndata: {\"a",
		want: []seen{{name: "message_start", data: "{}"}}, err: ErrTruncated},
	// Anthropic, cut between an event: line and its data.
	{name: "no done, cut after an event line", noDone: true, in: "data: {}\n\nevent: message_stop\n",
		want: []seen{{data: "{}"}}, err: ErrTruncated},
	// Seen from proxies: a comment line, then a cut before its blank line.
	{name: "no done, cut after a comment", noDone: true, in: "data: {}\n\n: ping\n",
		want: []seen{{data: "{}"}}, err: ErrTruncated},
	// Anthropic / Gemini: an empty body is no answer.
	{name: "no done, empty input", noDone: true, err: ErrTruncated},
	// Heartbeats alone are no answer: NoDone needs an event with data.
	{name: "no done, heartbeats only", noDone: true, commentsOnly: true, in: ": ping\n\n",
		want: []seen{{nilData: true, comment: "ping"}}, err: ErrTruncated},
	// Gemini / Vertex AI: streamGenerateContent?alt=sse, CRLF, no [DONE].
	{name: "gemini", noDone: true, in: "data: {\"candidates\":[1]}\r\n\r\ndata: {\"candidates\":[2]}\r\n\r\n",
		want: []seen{{data: `{"candidates":[1]}`}, {data: `{"candidates":[2]}`}}, err: io.EOF, cutErr: ErrTruncated},

	// WHATWG spec: the three line endings, alone and mixed.
	{name: "lf", in: "data: a\n\ndata: [DONE]\n\n", want: []seen{{data: "a"}}, err: io.EOF},
	// Gemini / Vertex AI and proxies: CRLF.
	{name: "crlf", in: "data: a\r\ndata: b\r\n\r\ndata: [DONE]\r\n\r\n", want: []seen{{data: "a\nb"}}, err: io.EOF},
	// WHATWG spec: lone CRs (old Mac line ends).
	{name: "cr only", in: "data: x\r\rdata: [DONE]\r\r", want: []seen{{data: "x"}}, err: io.EOF},
	// WHATWG spec: mixed within one stream, as when a proxy rewrites part of it.
	{name: "mixed", in: "data: a\r\ndata: b\rdata: c\n\r\ndata: [DONE]\n\n", want: []seen{{data: "a\nb\nc"}}, err: io.EOF},
	// WHATWG spec: CR then CRLF is two line ends; the CR at the very end a third.
	{name: "cr then crlf", in: "data: x\r\r\ndata: y\n\r", want: []seen{{data: "x"}, {data: "y"}}, err: ErrTruncated},
	// WHATWG spec: LF then a lone CR is two line ends.
	{name: "lf then cr", in: "data: x\n\rdata: [DONE]\n\n", want: []seen{{data: "x"}}, err: io.EOF},
	// WHATWG spec: a CR at the end of the input is a line end, not a cut.
	{name: "cr at the end", in: "data: x\r", want: []seen{{data: "x"}}, err: ErrTruncated},

	// OpenRouter: ": OPENROUTER PROCESSING" comments keep the connection open.
	{name: "openrouter comment", in: ": OPENROUTER PROCESSING\n\ndata: x\n\ndata: [DONE]\n\n",
		want: []seen{{data: "x"}}, err: io.EOF},
	// OpenRouter, with CommentsOnly: the relay sees the keep-alive.
	{name: "openrouter comment reported", commentsOnly: true, in: ": OPENROUTER PROCESSING\n\ndata: x\n\ndata: [DONE]\n\n",
		want: []seen{{nilData: true, comment: "OPENROUTER PROCESSING"}, {data: "x"}}, err: io.EOF},
	// WHATWG spec: ":" alone, the shortest keep-alive.
	{name: "bare colon heartbeat", commentsOnly: true, in: ":\n\ndata: x\n\n",
		want: []seen{{nilData: true, emptyComment: true}, {data: "x"}}, err: ErrTruncated},
	// WHATWG spec plus the Comment extension: a comment inside the event's
	// block; a comment-only block before it does not leak into it.
	{name: "comment in the event's block", in: ": keep-alive\n\n: ping\ndata: x\n\ndata: [DONE]\n\n",
		want: []seen{{data: "x", comment: "ping"}}, err: io.EOF},
	// This repository's simulator: a "sent_ns=" stamp right before the data.
	{name: "stamp", in: ": sent_ns=123\ndata: x\n\ndata: [DONE]\n\n",
		want: []seen{{data: "x", comment: "sent_ns=123"}}, err: io.EOF},
	// Extension: a comment-only block reports its name and id too.
	{name: "comment-only block keeps its other fields", commentsOnly: true, in: "event: hb\nid: 3\n: beat\n\n",
		want: []seen{{name: "hb", id: "3", nilData: true, comment: "beat"}}, err: ErrTruncated},
	// Extension: a comment-only block cut before its blank line is not reported.
	{name: "comment-only block cut at the end", commentsOnly: true, in: "data: x\n\n: ping\n",
		want: []seen{{data: "x"}}, err: ErrTruncated},

	// WHATWG spec: one byte order mark at the start is dropped.
	{name: "bom", in: "\xEF\xBB\xBFdata: x\n\ndata: [DONE]\n\n", want: []seen{{data: "x"}}, err: io.EOF},
	// WHATWG spec: a BOM and nothing else is an empty stream.
	{name: "bom only", in: "\xEF\xBB\xBF", err: ErrTruncated},
	// WHATWG spec: only one BOM is dropped; a second one spoils the first line.
	{name: "two boms", in: "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n", want: []seen{{data: "y"}}, err: ErrTruncated},
	// WHATWG spec: two bytes of a BOM are no BOM (they would decode to U+FFFD).
	{name: "partial bom", in: "\xEF\xBBdata: x\n\ndata: y\n\n", want: []seen{{data: "y"}}, err: ErrTruncated},
	// WHATWG spec: a BOM later on is part of its line.
	{name: "bom mid-stream", in: "data: x\n\n\xEF\xBB\xBFdata: y\n\n", want: []seen{{data: "x"}}, err: ErrTruncated},
	// Connection cut inside the BOM.
	{name: "cut mid-bom", in: "\xEF\xBB", err: ErrTruncated},

	// WHATWG spec: an empty data line makes an event with empty data, the
	// same at the start as later. Seen from gateways: empty data: lines as keep-alives.
	{name: "empty data", in: "data:\n\ndata: x\n\ndata: \n\ndata\n\ndata: [DONE]\n\n",
		want: []seen{{}, {data: "x"}, {}, {}}, err: io.EOF},
	// WHATWG spec: two empty data lines are one "\n".
	{name: "empty data lines join", in: "data:\ndata:\n\n", want: []seen{{data: "\n"}}, err: ErrTruncated},
	// WHATWG spec: a blank line resets the event name even when it dispatched nothing.
	{name: "event name without data", in: "event: foo\n\ndata: x\n\n", want: []seen{{data: "x"}}, err: ErrTruncated},
	// WHATWG spec: so it does the id, which this package keeps per event.
	{name: "id without data", in: "id: 1\n\ndata: x\n\n", want: []seen{{data: "x"}}, err: ErrTruncated},
	// WHATWG spec: blank lines alone dispatch nothing.
	{name: "blank lines only", in: "\n\r\n\r", err: ErrTruncated},
	// An upstream that closes at once.
	{name: "empty input", err: ErrTruncated},

	// WHATWG spec: multi-line data, joined with "\n".
	{name: "multi-line data", in: "data: a\ndata: b\ndata:c\n\ndata: [DONE]\n\n", want: []seen{{data: "a\nb\nc"}}, err: io.EOF},
	// WHATWG spec: one space after the colon is dropped, not two.
	{name: "only one space stripped", in: "data:  x\n\ndata: [DONE]\n\n", want: []seen{{data: " x"}}, err: io.EOF},
	// WHATWG spec: only the first colon splits.
	{name: "colon in the value", in: "data: a: b\n\n", want: []seen{{data: "a: b"}}, err: ErrTruncated},
	// Anthropic, OpenAI Responses API: event: lines name the event.
	{name: "event and id", in: "event: message_start\nid: 7\ndata: {}\n\ndata: [DONE]\n\n",
		want: []seen{{name: "message_start", id: "7", data: "{}"}}, err: io.EOF},
	// WHATWG spec: the last event: line of a block wins.
	{name: "last event line wins", in: "event: a\nevent: b\ndata: x\n\n", want: []seen{{name: "b", data: "x"}}, err: ErrTruncated},
	// WHATWG spec: an empty event: line means "message", as none does.
	{name: "empty event name", in: "event:\ndata: x\n\n", want: []seen{{data: "x"}}, err: ErrTruncated},
	// WHATWG spec: id: lines, an empty one, one holding NUL (ignored).
	{name: "ids", in: "id: 7\ndata: a\n\nid:\ndata: b\n\nid: 1\nid: x\x00y\ndata: c\n\nid: \x00\ndata: d\n\n",
		want: []seen{{id: "7", data: "a"}, {emptyID: true, data: "b"}, {id: "1", data: "c"}, {data: "d"}}, err: ErrTruncated},
	// WHATWG spec: retry: and unknown fields are ignored; names are case-sensitive.
	{name: "retry and unknown fields", in: "retry: 10\nretry: x\nfoo: bar\nData: no\ndata: x\n\ndata: [DONE]\n\n",
		want: []seen{{data: "x"}}, err: io.EOF},
	// WHATWG spec: a block of unknown fields dispatches nothing.
	{name: "unknown field alone", in: "foo: bar\n\n", err: ErrTruncated},
	// WHATWG spec: "data " is not "data".
	{name: "space before the colon", in: "data : x\n\n", err: ErrTruncated},
	// WHATWG spec: a field with no colon has an empty value.
	{name: "field without colon", in: "data\n\nevent\ndata: x\n\n", want: []seen{{}, {data: "x"}}, err: ErrTruncated},
	// Every provider: UTF-8 text in the JSON.
	{name: "utf8", in: "data: {\"c\":\"안녕하세요\"}\n\ndata: [DONE]\n\n", want: []seen{{data: `{"c":"안녕하세요"}`}}, err: io.EOF},
	// Extension: bytes pass through without UTF-8 decoding.
	{name: "invalid utf8 and nul", in: "data: \xff\xfe\x00\n\n", want: []seen{{data: "\xff\xfe\x00"}}, err: ErrTruncated},

	// Large chunks (long tool-call arguments, base64 images): far above
	// bufio.Scanner's 64 KiB default.
	{name: "line far above 64 KiB", in: "data: " + bigLine + "\r\n\r\ndata: [DONE]\r\n\r\n",
		want: []seen{{data: bigLine}}, err: io.EOF},
	// Extension: a line over the limit is an error, not an unbounded buffer.
	{name: "line over the limit", max: 1000, in: "data: " + bigLine[:2000] + "\n\n", err: &LineTooLongError{Limit: 1000}},
	// Extension: so are many short data lines over the limit.
	{name: "data over the limit", max: 100, in: strings.Repeat("data: 0123456789\n", 20) + "\n", err: &LineTooLongError{Limit: 100}},

	// Connection cuts, from any upstream: truncation, not malformed JSON.
	// OpenAI dialect: a bare EOF between events has no [DONE].
	{name: "bare EOF", in: "data: x\n\ndata: y\n\n", want: []seen{{data: "x"}, {data: "y"}}, err: ErrTruncated},
	// Cut mid-line: WHATWG discards the partial line.
	{name: "cut mid-line", in: "data: x\n\ndata: {\"a", want: []seen{{data: "x"}}, err: ErrTruncated},
	// Cut before the blank line: the complete event is delivered (extension), then the cut.
	{name: "cut mid-event", in: "data: x\n\nevent: e\nid: 2\n: c\ndata: {\"a\":1}\n",
		want: []seen{{data: "x"}, {name: "e", id: "2", comment: "c", data: `{"a":1}`}}, err: ErrTruncated},
	// Cut in a later data line: the complete lines make the event.
	{name: "cut in the second data line", in: "data: a\ndata: b", want: []seen{{data: "a"}}, err: ErrTruncated},
	// Cut a few bytes in.
	{name: "cut mid-field name", in: "da", err: ErrTruncated},
	// Cut after an event: line, before any data.
	{name: "cut after an event line", in: "event: x\n", err: ErrTruncated},
}

// TestReaderQuirks runs every row whole, with the end of input in the same
// read as the last bytes, and one byte at a time; each ending with io.EOF
// and with io.ErrUnexpectedEOF.
func TestReaderQuirks(t *testing.T) {
	for _, tt := range quirks {
		for _, feed := range []string{"whole", "together", "bytewise"} {
			for _, cut := range []bool{false, true} {
				name := tt.name + "/" + feed
				wantErr := tt.err
				if cut {
					name += "/unexpected-eof"
					if tt.cutErr != nil {
						wantErr = tt.cutErr
					}
				}
				t.Run(name, func(t *testing.T) {
					r := NewReader(source(tt.in, feed, cut), tt.max)
					r.CommentsOnly, r.NoDone = tt.commentsOnly, tt.noDone
					evs, err := collect(t, r)
					if !sameEvents(evs, tt.want) {
						t.Errorf("events: got %s, want %s", show(evs), show(tt.want))
					}
					if !sameErr(err, wantErr) {
						t.Errorf("err: got %v, want %v", err, wantErr)
					}
				})
			}
		}
	}
}

// show prints events short enough to read next to a 256 KiB line.
func show(evs []seen) string {
	var b strings.Builder
	for _, e := range evs {
		if len(e.data) > 40 {
			e.data = fmt.Sprintf("%.20s... (%d bytes)", e.data, len(e.data))
		}
		fmt.Fprintf(&b, "%+v ", e)
	}
	return "[" + strings.TrimSpace(b.String()) + "]"
}

func TestReaderReset(t *testing.T) {
	r := NewReader(strings.NewReader("event: e\ndata: x\n\ndata: [DONE]\n\n"), 0)
	r.CommentsOnly = true
	if evs, err := collect(t, r); err != io.EOF || len(evs) != 1 {
		t.Fatalf("first stream: got %d events and %v, want 1 event and io.EOF", len(evs), err)
	}
	// A byte order mark split across reads starts the second stream.
	r.Reset(iotest.OneByteReader(strings.NewReader("\xEF\xBB\xBF: hb\n\ndata: y\n\n")))
	evs, err := collect(t, r)
	want := []seen{{nilData: true, comment: "hb"}, {data: "y"}}
	if err != ErrTruncated || !sameEvents(evs, want) {
		t.Fatalf("after Reset: got %s and %v, want %s and ErrTruncated", show(evs), err, show(want))
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	// The complete event arrives; the block the error cut is dropped, since
	// the input did not end there.
	for _, feed := range []string{"whole", "together", "bytewise"} {
		src := io.MultiReader(strings.NewReader("data: x\n\ndata: y\n"), iotest.ErrReader(boom))
		switch feed {
		case "together":
			src = iotest.DataErrReader(src)
		case "bytewise":
			src = iotest.OneByteReader(src)
		}
		evs, err := collect(t, NewReader(src, 0))
		if !errors.Is(err, boom) || !sameEvents(evs, []seen{{data: "x"}}) {
			t.Errorf("%s: got %s and %v, want [x] and %v", feed, show(evs), err, boom)
		}
	}
}

func TestReaderLongLines(t *testing.T) {
	big := strings.Repeat("x", 1<<20) // far above bufio.Scanner's 64 KiB
	r := NewReader(strings.NewReader("data: "+big+"\n\ndata: [DONE]\n\n"), 2<<20)
	ev, err := r.Next()
	if err != nil || len(ev.Data) != len(big) {
		t.Fatalf("got %v, want one event of %d bytes", err, len(big))
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

// TestReaderNoAllocs guards the steady state, empty-data events included.
func TestReaderNoAllocs(t *testing.T) {
	stream := []byte("data:\n\n: ping\n\nevent: e\nid: 1\n: c\ndata: {\"a\":1}\ndata: {}\r\n\r\n")
	r := NewReader(&loopReader{data: stream}, 0)
	r.CommentsOnly = true
	if allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("got %v allocs per event, want 0", allocs)
	}
}

// FuzzReader checks that the events and the error are the same whether the
// input arrives whole, with its end in the last read, or one byte at a
// time. The line limit is small, so over-long lines are split too.
func FuzzReader(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: e\r\ndata: a\r\ndata: b\r\n\r\n: c\r\rdata: [DONE]\n\n"))
	f.Add([]byte("data: x\r"))
	f.Add([]byte("\xEF\xBB\xBFdata: " + strings.Repeat("y", 300) + "\n\n"))
	for _, tt := range quirks {
		if len(tt.in) < 4096 {
			f.Add([]byte(tt.in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, errW := collect(t, NewReader(bytes.NewReader(in), 256))
		for _, feed := range []string{"together", "bytewise"} {
			split, errS := collect(t, NewReader(source(string(in), feed, false), 256))
			if errW.Error() != errS.Error() {
				t.Fatalf("errors differ: whole %v, %s %v", errW, feed, errS)
			}
			if !sameEvents(whole, split) {
				t.Fatalf("events differ: whole %s, %s %s", show(whole), feed, show(split))
			}
		}
	})
}

// FuzzReaderWHATWG checks the Reader against whatwg, the reference parser
// below, plus the documented extensions (withExtensions), for any input
// and options, fed whole and byte by byte, ending with io.EOF and with
// io.ErrUnexpectedEOF. The line limit is the default, out of reach of the
// fuzzer's inputs: the reference has none.
func FuzzReaderWHATWG(f *testing.F) {
	for _, tt := range quirks {
		if tt.max == 0 && len(tt.in) < 4096 {
			f.Add([]byte(tt.in), tt.commentsOnly, tt.noDone)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, commentsOnly, noDone bool) {
		blocks, end := whatwg(string(in))
		for _, cut := range []bool{false, true} {
			want, wantErr := withExtensions(blocks, end, commentsOnly, noDone, cut)
			for _, feed := range []string{"whole", "bytewise"} {
				r := NewReader(source(string(in), feed, cut), 0)
				r.CommentsOnly, r.NoDone = commentsOnly, noDone
				got, err := collect(t, r)
				if !sameEvents(got, want) || err != wantErr {
					t.Fatalf("%s, unexpected EOF %v:\ngot  %s, %v\nwant %s, %v", feed, cut, show(got), err, show(want), wantErr)
				}
			}
		}
		// No event waits for a read: each event a blank line dispatched
		// (a lone CR as the last byte read included) comes back before the
		// source is asked for anything past the input's last byte.
		early, _ := withExtensions(blocks, whatwgEnd{}, commentsOnly, noDone, false)
		src := &askSource{in: string(in)}
		r := NewReader(src, 0)
		r.CommentsOnly, r.NoDone = commentsOnly, noDone
		for i := range early {
			ev, err := r.Next()
			if err != nil {
				t.Fatalf("event %d of %s: got %v", i, show(early), err)
			}
			if src.asked {
				t.Fatalf("event %d (%+v) of %s came back only after a read past the input's end", i, seenOf(ev), show(early))
			}
		}
	})
}

// askSource gives in one byte per Read and notes a Read past its end
// (asked), which returns io.EOF.
type askSource struct {
	in    string
	off   int
	asked bool
}

func (s *askSource) Read(p []byte) (int, error) {
	if s.off == len(s.in) {
		s.asked = true
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = s.in[s.off]
	s.off++
	return 1, nil
}

// A line that ends in a CR, the last byte of a read, ends at once: its
// event is returned without a read more (issue 22: it waited 300-600 ms
// for the upstream's next write), and a LF that starts the next read is
// the rest of that CRLF, not a blank line.
func TestReaderLoneCR(t *testing.T) {
	for _, tt := range []struct {
		name   string
		chunks []string
		want   []seen
	}{
		{"cr cr", []string{"data: a\r\r", "data: b\r\r"}, []seen{{data: "a"}, {data: "b"}}},
		{"crlf split after the blank line's cr", []string{"data: a\r\n\r", "\ndata: b\r\n\r", "\n"}, []seen{{data: "a"}, {data: "b"}}},
		{"cr cr then lf", []string{"data: a\r\r", "\ndata: b\r\r"}, []seen{{data: "a"}, {data: "b"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// gate holds each chunk back until the event before it was
			// returned: a Reader that waits for more before returning an
			// event sees the gate shut.
			g := &gateSource{chunks: tt.chunks}
			r := NewReader(g, 0)
			var got []seen
			for {
				g.open = true
				ev, err := r.Next()
				if err != nil {
					break
				}
				got = append(got, seenOf(ev))
			}
			if g.waited {
				t.Errorf("the Reader read on before returning the event a CR had ended")
			}
			if !sameEvents(got, tt.want) {
				t.Errorf("got %s, want %s", show(got), show(tt.want))
			}
		})
	}
	// A data line's CR at the end of a read, and the LF the next read
	// starts with, are one CRLF: the next data line joins the same event.
	evs, err := collect(t, NewReader(&chunkedSource{chunks: []string{"data: a\r", "\ndata: b\r", "\n\r", "\ndata: [DONE]\r", "\n\r\n"}}, 0))
	if want := []seen{{data: "a\nb"}}; err != io.EOF || !sameEvents(evs, want) {
		t.Errorf("CRLF split after its CR: got %s and %v, want %s and io.EOF", show(evs), err, show(want))
	}
}

// gateSource gives one chunk per Read while open; a Read that finds it
// shut (an event whose bytes all arrived was not returned yet) is noted
// in waited and gets the next chunk all the same. The chunks hold one
// event each, its last byte at the end of a chunk.
type gateSource struct {
	chunks []string
	open   bool
	waited bool
}

func (g *gateSource) Read(p []byte) (int, error) {
	if len(g.chunks) == 0 {
		return 0, io.EOF
	}
	if !g.open {
		g.waited = true
	}
	g.open = false
	n := copy(p, g.chunks[0])
	if g.chunks[0] = g.chunks[0][n:]; g.chunks[0] == "" {
		g.chunks = g.chunks[1:]
	}
	return n, nil
}

// whatwg parses an event stream as the WHATWG HTML standard's
// "interpreting an event stream" says, step by step, on strings: the
// reference FuzzReaderWHATWG holds the Reader to. It stands for a browser's
// EventSource, so it has no line limit and sees the whole input at once.
//
// It returns one block per blank line, dispatched or not, and the state at
// the end of the input. The spec decodes the stream as UTF-8 first; here
// only the BOM step is kept, since the Reader passes bytes through (a
// documented extension) and for valid UTF-8 the two agree. What the spec
// ignores but the Reader surfaces (comments, a block's own id line, whether
// the block had any line) is recorded on the side in ext; it does not
// change what the spec computes.
func whatwg(in string) ([]whatwgBlock, whatwgEnd) {
	// "The UTF-8 decode algorithm strips one leading UTF-8 Byte Order Mark (BOM), if any."
	in = strings.TrimPrefix(in, "\xEF\xBB\xBF")
	// "When a stream is parsed, a data buffer, an event type buffer, and a
	// last event ID buffer must be associated with it. They must be
	// initialized to the empty string."
	var data, eventType, lastEventIDBuffer string
	var ext blockExt
	var blocks []whatwgBlock
	for {
		// Lines end in a CRLF pair, a LF, or a CR. The spec reads the
		// stream to its end, so a CR can be told from a CRLF here.
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // no line end: the rest is not a line
		}
		line := in[:i]
		if strings.HasPrefix(in[i:], "\r\n") {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
		switch {
		case line == "":
			// "If the line is empty (a blank line): Dispatch the event."
			b := whatwgBlock{eventType: eventType, ext: ext}
			// 1. "Set the last event ID string of the event source to the
			// value of the last event ID buffer."
			b.lastEventID = lastEventIDBuffer
			// 2. "If the data buffer is an empty string, set the data buffer
			// and the event type buffer to the empty string and return."
			if data != "" {
				// 3. "If the data buffer's last character is a U+000A LINE
				// FEED (LF) character, then remove the last character."
				// 4-5. The event, typed "message" if the type buffer is empty.
				b.dispatched, b.data = true, strings.TrimSuffix(data, "\n")
			}
			// 6. "Set the data buffer and the event type buffer to the empty string."
			data, eventType = "", ""
			blocks = append(blocks, b)
			ext = blockExt{}
		case line[0] == ':':
			// "If the line starts with a U+003A COLON character (:): Ignore the line."
			c := strings.TrimPrefix(line[1:], " ")
			ext.comment, ext.lines = &c, true
		default:
			ext.lines = true
			// "If the line contains a U+003A COLON character: field is the
			// characters before the first colon, value those after it; if
			// value starts with a U+0020 SPACE character, remove it.
			// Otherwise: field is the whole line, value the empty string."
			field, value, found := strings.Cut(line, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch field {
			case "event":
				eventType = value // "Set the event type buffer to field value."
			case "data":
				data += value + "\n" // "Append the field value to the data buffer, then a single LF."
			case "id":
				// "If the field value does not contain U+0000 NULL, then set
				// the last event ID buffer to the field value. Otherwise, ignore the field."
				if !strings.Contains(value, "\x00") {
					lastEventIDBuffer = value
					ext.id = &value
				}
			case "retry":
				// Sets the reconnection time: no effect on events.
			default:
				// "Otherwise: The field is ignored."
			}
		}
	}
	// "Once the end of the file is reached, any pending data must be
	// discarded. (If the file ends in the middle of an event, before the
	// final empty line, the incomplete event is not dispatched.)"
	return blocks, whatwgEnd{
		pending: data != "", eventType: eventType, data: strings.TrimSuffix(data, "\n"),
		tail: in, ext: ext,
	}
}

// whatwgBlock is what the spec did at one blank line.
type whatwgBlock struct {
	dispatched  bool
	eventType   string // the event type buffer: "" means "message"
	data        string
	lastEventID string // the dispatched event's lastEventId
	ext         blockExt
}

// whatwgEnd is the state the spec discards at the end of the input.
type whatwgEnd struct {
	pending   bool // the data buffer held data lines
	eventType string
	data      string // the data buffer as it would have been dispatched
	tail      string // the unterminated last line
	ext       blockExt
}

// blockExt is what the spec ignores in a block but the Reader surfaces.
type blockExt struct {
	comment *string // the last comment line, without ":" and one space
	id      *string // the block's last id line without NUL
	lines   bool    // the block had a line: the input is not between events
}

// withExtensions turns the reference's result into what Next documents
// beyond WHATWG, for the given options and end of input (io.EOF, or
// io.ErrUnexpectedEOF when cut): the [DONE] sentinel, comment-only blocks,
// per-event IDs, the complete block delivered at the end, and the final
// error. It is the only place where the two may differ.
func withExtensions(blocks []whatwgBlock, end whatwgEnd, commentsOnly, noDone, cut bool) ([]seen, error) {
	var evs []seen
	saw := false
	for _, b := range blocks {
		switch {
		case b.dispatched && strings.HasPrefix(b.data, "[DONE]"):
			return evs, io.EOF // the sentinel, never returned as an event
		case b.dispatched:
			if b.ext.id != nil && *b.ext.id != b.lastEventID {
				panic("reference: a block's own id is not its lastEventId")
			}
			evs, saw = append(evs, extSeen(b.eventType, &b.data, b.ext)), true
		case commentsOnly && b.ext.comment != nil:
			evs = append(evs, extSeen(b.eventType, nil, b.ext))
		}
	}
	// The end of the input: "[DONE]" without its blank line, or as the
	// block's first data line without its newline, still ends the stream
	// cleanly.
	if end.pending && strings.HasPrefix(end.data, "[DONE]") ||
		!end.pending && (strings.HasPrefix(end.tail, "data: [DONE]") || strings.HasPrefix(end.tail, "data:[DONE]")) {
		return evs, io.EOF
	}
	err := ErrTruncated
	if noDone && saw && !cut && !end.ext.lines && end.tail == "" {
		err = io.EOF
	}
	if end.pending { // complete data lines whose blank line never came
		evs = append(evs, extSeen(end.eventType, &end.data, end.ext))
	}
	return evs, err
}

func extSeen(eventType string, data *string, ext blockExt) seen {
	s := seen{name: eventType, nilData: data == nil}
	if data != nil {
		s.data = *data
	}
	if ext.id != nil {
		s.id, s.emptyID = *ext.id, *ext.id == ""
	}
	if ext.comment != nil {
		s.comment, s.emptyComment = *ext.comment, *ext.comment == ""
	}
	return s
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

// Field values point into the read buffer until the buffer's bytes move:
// a block whose lines arrived in several reads (the buffer compacted, and
// grown, between them) still comes back whole, and so does the block after
// it, read in one piece.
func TestReaderFieldsAcrossReads(t *testing.T) {
	long := strings.Repeat("z", 3*initialBuf) // grows the buffer mid-block
	src := &chunkedSource{chunks: []string{
		"data: one\n\n: stamp\ndata: two\n", "\n",
		"id: 3\nevent: e\ndata: x\n", ": c\ndata: " + long + "\n", "data: y\n", "\n",
		": s2\ndata: three\n\n",
		"data: [DONE]\n\n",
	}}
	evs, err := collect(t, NewReader(src, 0))
	if err != io.EOF {
		t.Fatalf("err: got %v, want io.EOF", err)
	}
	want := []seen{
		{data: "one"},
		{data: "two", comment: "stamp"},
		{name: "e", id: "3", comment: "c", data: "x\n" + long + "\ny"},
		{data: "three", comment: "s2"},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(evs), evs, len(want))
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d: got %+v, want %+v", i, evs[i], want[i])
		}
	}
}

// eventList is an Events of a fixed list, then its end.
type eventList struct {
	evs   []Event
	end   error
	hooks int
}

func (l *eventList) NextEvent(h ReadHook) (*Event, error) {
	if h != nil {
		h.BeforeRead()
	}
	if len(l.evs) == 0 {
		return nil, l.end
	}
	ev := &l.evs[0]
	l.evs = l.evs[1:]
	return ev, nil
}

// TestResetEvents: a Reader reset with ResetEvents returns the source's
// events as they are, passes its Hook on, ends as NoDone says, and Reset
// returns it to bytes.
func TestResetEvents(t *testing.T) {
	r := NewReader(nil, 0)
	r.NoDone = true
	n := 0
	r.Hook = HookFunc(func() { n++ })
	r.ResetEvents(&eventList{evs: []Event{{Name: []byte("a"), Data: []byte("1")}, {Data: []byte("2")}}, end: io.EOF})
	var got []string
	for {
		ev, err := r.Next()
		if err != nil {
			if err != io.EOF {
				t.Fatalf("end: got %v, want io.EOF (NoDone, after events)", err)
			}
			break
		}
		got = append(got, string(ev.Name)+":"+string(ev.Data))
	}
	if strings.Join(got, ",") != "a:1,:2" || n != 3 {
		t.Errorf("got %v with %d hooks, want a:1,:2 with 3", got, n)
	}
	r.NoDone = false
	r.ResetEvents(&eventList{evs: []Event{{Data: []byte("x")}}, end: io.EOF})
	r.Next()
	if _, err := r.Next(); err != ErrTruncated {
		t.Errorf("without NoDone: got %v, want ErrTruncated", err)
	}
	r.Reset(strings.NewReader("data: y\n\n"))
	if ev, err := r.Next(); err != nil || string(ev.Data) != "y" {
		t.Errorf("after Reset: got %v, %v", ev, err)
	}
}
