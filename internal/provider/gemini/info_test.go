package gemini

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// checkInfo checks that got, a stream's ChunkInfo after Next returned an
// event with data, is what api.ScanChunk finds in data, as the relay would
// have read it; a heartbeat's is zero. Usage details are not compared:
// api.ScanChunk reads only the three counts.
func checkInfo(t testing.TB, got api.ChunkInfo, data []byte) {
	t.Helper()
	var want api.ChunkInfo
	if len(data) > 0 {
		var err error
		if want, err = api.ScanChunk(data); err != nil {
			t.Fatalf("api.ScanChunk(%s): %v", data, err)
		}
	}
	if !sameInfo(got, want) {
		t.Fatalf("ChunkInfo() = %+v, api.ScanChunk finds %+v in %q", got, want, data)
	}
}

// streamInfo is st's ChunkInfo; st must implement provider.ChunkInfoer.
func streamInfo(t testing.TB, st provider.Stream) api.ChunkInfo {
	t.Helper()
	ci, ok := st.(provider.ChunkInfoer)
	if !ok {
		t.Fatalf("%T does not implement provider.ChunkInfoer", st)
	}
	return ci.ChunkInfo()
}

// sameInfo compares what the relay reads of a ChunkInfo: the four flags,
// the three counts and the cache reads and writes.
func sameInfo(a, b api.ChunkInfo) bool {
	return a.Content == b.Content && a.Finish == b.Finish && a.HasUsage == b.HasUsage && a.Error == b.Error &&
		a.Usage.PromptTokens == b.Usage.PromptTokens &&
		a.Usage.CompletionTokens == b.Usage.CompletionTokens &&
		a.Usage.TotalTokens == b.Usage.TotalTokens &&
		a.Usage.PromptTokensDetails == b.Usage.PromptTokensDetails
}

// newTestStream is a stream reading body without HTTP, as Open builds it
// but for its Client: it must not be closed.
func newTestStream(body io.Reader) *stream {
	r := sse.NewReader(body, 4096)
	r.CommentsOnly, r.NoDone = true, true
	s := &stream{c: &Client{}, body: io.NopCloser(body), r: r, ctx: context.Background()}
	s.t.init("req-model", 1700000000, [8]byte{9, 9, 9, 9, 9, 9, 9, 9})
	s.hb.Data = heartbeat
	return s
}

// TestChunkInfo: each kind of chunk the stream writes, and the heartbeats,
// get the info api.ScanChunk finds in them, spelled out here so a
// ChunkInfo that agrees with nothing fails too.
func TestChunkInfo(t *testing.T) {
	body := strings.Join([]string{
		`data: {"candidates":[{"content":{"parts":[{"text":"hm","thought":true},{"text":"hi"},{"functionCall":{"name":"f","args":{}}}]}}]}`,
		`: keep-alive`,
		`data: {"candidates":[{"content":{"parts":[{"text":"\u0000"}]}}]}`,
		`data: {"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3,"thoughtsTokenCount":2}}`,
		`data: {"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP"}]}`,
	}, "\n\n") + "\n\n"
	content := api.ChunkInfo{Content: true}
	want := []api.ChunkInfo{
		{},             // role chunk
		content,        // reasoning_content and content
		content,        // the call
		{},             // comment: heartbeat
		content,        // "\u0000" is not empty
		{},             // usage only: heartbeat
		{},             // the finishReason, no text: heartbeat
		{Finish: true}, // the body's end: the finish chunk
		{HasUsage: true, Usage: api.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}},
	}
	st := newTestStream(strings.NewReader(body))
	for i, w := range want {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		got := streamInfo(t, st)
		if !sameInfo(got, w) {
			t.Errorf("event %d %q: got ChunkInfo %+v, want %+v", i, ev.Data, got, w)
		}
		checkInfo(t, got, ev.Data)
	}
	if _, err := st.Next(); err != io.EOF {
		t.Fatalf("got %v after the usage chunk, want io.EOF", err)
	}
}

// TestBadCountsNotReported: a billed count that is not a token count
// (api.Count: negative, fractional, a string, 2^40, 1e30), or counts whose
// sum is not below api.CountLimit, in the last usageMetadata leave the
// stream without a usage chunk and the answer without usage: the gateway
// then estimates them. So does a bad cached count: cache reads are billed
// at their own price.
func TestBadCountsNotReported(t *testing.T) {
	tests := []struct {
		name, usage string
		reported    bool
	}{
		{"negative prompt", `{"promptTokenCount":-1,"candidatesTokenCount":3}`, false},
		{"string candidates", `{"promptTokenCount":5,"candidatesTokenCount":"12"}`, false},
		{"fraction", `{"promptTokenCount":1.5,"candidatesTokenCount":3}`, false},
		{"1e30", `{"promptTokenCount":1e30,"candidatesTokenCount":3}`, false},
		{"2^40 thoughts", `{"promptTokenCount":5,"candidatesTokenCount":3,"thoughtsTokenCount":1099511627776}`, false},
		{"sum at the limit", `{"promptTokenCount":99999999,"candidatesTokenCount":1}`, false},
		{"repeated: the last counts", `{"promptTokenCount":-1,"promptTokenCount":5,"candidatesTokenCount":3}`, true},
		{"bad cached count", `{"promptTokenCount":5,"candidatesTokenCount":3,"cachedContentTokenCount":-1}`, false},
		{"good cached count", `{"promptTokenCount":5,"candidatesTokenCount":3,"cachedContentTokenCount":4}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `data: {"candidates":[{"content":{"parts":[{"text":"hi"}]}}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1}}` + "\n\n" +
				`data: {"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP"}],"usageMetadata":` + tt.usage + "}\n\n"
			st := newTestStream(strings.NewReader(body))
			reported := false
			for i := 0; ; i++ {
				ev, err := st.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				got := streamInfo(t, st)
				checkInfo(t, got, ev.Data)
				reported = reported || got.HasUsage
			}
			if reported != tt.reported {
				t.Errorf("stream: got a usage chunk %v, want %v", reported, tt.reported)
			}
			answer := `{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":` + tt.usage + `}`
			out, err := completion([]byte(answer), "m", 1700000000, [8]byte{})
			if err != nil {
				t.Fatalf("completion(%s): %v", answer, err)
			}
			var c api.Completion
			if err := json.Unmarshal(out, &c); err != nil || (c.Usage != nil) != tt.reported || c.Choices[0].Message.Content != "hi" {
				t.Errorf("completion(%s) = %s (%v), want usage %v", answer, out, err, tt.reported)
			}
		})
	}
}

// textPieces is an api.TextSink that keeps what it gets.
type textPieces []string

func (p *textPieces) AddJSON(raw []byte) { *p = append(*p, string(raw)) }

// TestCountText: over every testdata stream, the text the stream counts
// (provider.TextCounter) is what api.ScanChunkText finds in the chunks it
// returns, given with the upstream event that carried it; Reported agrees
// with the usage chunk at the end.
func TestCountText(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	if len(files) == 0 {
		t.Fatal("no testdata/stream/*.sse")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			up := newUpstream(t, 200, "text/event-stream", body, nil)
			st, err := testClient(t, up.URL).Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var counted, found textPieces
			st.(provider.TextCounter).CountText(&counted)
			var last api.ChunkInfo
			for {
				ev, err := st.Next()
				if err != nil {
					break
				}
				if len(ev.Data) > 0 {
					if last, err = api.ScanChunkText(ev.Data, &found); err != nil {
						t.Fatal(err)
					}
				}
			}
			var a, b fit.Text
			for _, p := range counted {
				a.AddJSON([]byte(p))
			}
			for _, p := range found {
				b.AddJSON([]byte(p))
			}
			// A call's arguments are counted as Gemini sent them (an
			// object), the chunk has them as a string: the same text but
			// for its escapes.
			if d := a.Tokens() - b.Tokens(); d < -2 || d > 2 {
				t.Errorf("counted %q (%d tokens), the chunks hold %q (%d)", counted, a.Tokens(), found, b.Tokens())
			}
			u, prompt, output := st.(provider.Reporter).Reported()
			if last.HasUsage && (!prompt || !output || u.PromptTokens != last.Usage.PromptTokens || u.CompletionTokens != last.Usage.CompletionTokens) {
				t.Errorf("Reported() = %+v, %v, %v; the usage chunk says %+v", u, prompt, output, last.Usage)
			}
		})
	}
}

// TestReportedOnCut: a stream cut before its finish reports the last
// cumulative usageMetadata; its output covers the text when the last event
// with text carried candidatesTokenCount, not when text came after it or
// the count was absent.
func TestReportedOnCut(t *testing.T) {
	ev := func(text, usage string) string {
		return `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"` + text + `"}]}}],"usageMetadata":{` + usage + `}}` + "\n\n"
	}
	for _, tt := range []struct {
		name           string
		body           string
		prompt, output bool
		completion     int
	}{
		{"usage on each event", ev("Hello", `"promptTokenCount":9,"candidatesTokenCount":1,"cachedContentTokenCount":4`) + ev(" there", `"promptTokenCount":9,"candidatesTokenCount":2,"cachedContentTokenCount":4`), true, true, 2},
		{"text after the last usage", ev("Hello", `"promptTokenCount":9,"candidatesTokenCount":1,"cachedContentTokenCount":4`) + `data: {"candidates":[{"content":{"role":"model","parts":[{"text":" there"}]}}]}` + "\n\n", true, false, 1},
		{"no candidates count", ev("Hello", `"promptTokenCount":9,"cachedContentTokenCount":4`), true, false, 0},
		{"no usage", `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]}}]}` + "\n\n", false, false, 0},
	} {
		up := newUpstream(t, 200, "text/event-stream", []byte(tt.body), nil)
		st, err := testClient(t, up.URL).Open(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := st.Next(); err != nil {
				break
			}
		}
		u, prompt, output := st.(provider.Reporter).Reported()
		st.Close()
		if prompt != tt.prompt || output != tt.output || prompt && (u.PromptTokens != 9 || u.PromptTokensDetails.CachedTokens != 4) || u.CompletionTokens != tt.completion {
			t.Errorf("%s: got %+v, prompt %v, output %v; want 9 prompt tokens (4 cached) %v, %d completion %v", tt.name, u, prompt, output, tt.prompt, tt.completion, tt.output)
		}
	}
}
