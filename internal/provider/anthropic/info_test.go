package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/provider"
)

// checkInfo checks that st's ChunkInfo, asked after Next returned an event
// with data, is what api.ScanChunk finds in data, as the relay would have
// read it; a heartbeat's is zero. Usage details are not compared:
// api.ScanChunk reads only the three counts.
func checkInfo(t testing.TB, st provider.Stream, data []byte) {
	t.Helper()
	ci, ok := st.(provider.ChunkInfoer)
	if !ok {
		t.Fatalf("%T does not implement provider.ChunkInfoer", st)
	}
	got := ci.ChunkInfo()
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

// sameInfo compares what the relay reads of a ChunkInfo: the four flags,
// the three counts and the cache reads and writes.
func sameInfo(a, b api.ChunkInfo) bool {
	return a.Content == b.Content && a.Finish == b.Finish && a.HasUsage == b.HasUsage && a.Error == b.Error &&
		a.Usage.PromptTokens == b.Usage.PromptTokens &&
		a.Usage.CompletionTokens == b.Usage.CompletionTokens &&
		a.Usage.TotalTokens == b.Usage.TotalTokens &&
		a.Usage.PromptTokensDetails == b.Usage.PromptTokensDetails
}

// TestChunkInfo: each kind of chunk the stream writes, and a heartbeat,
// gets the info api.ScanChunk finds in it, spelled out here so a ChunkInfo
// that agrees with nothing fails too.
func TestChunkInfo(t *testing.T) {
	events := []string{
		`{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":12,"cache_read_input_tokens":2,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}`,
		`{"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "\u0000"}}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}`,
		`{"type":"message_stop"}`,
	}
	var body strings.Builder
	for _, e := range events {
		body.WriteString("data: " + e + "\n\n")
	}
	content, finish := api.ChunkInfo{Content: true}, api.ChunkInfo{Finish: true}
	want := []api.ChunkInfo{
		{},      // role chunk
		{},      // thinking start: heartbeat
		content, // thinking_delta
		{},      // signature_delta: heartbeat
		{},      // text start: heartbeat
		{},      // empty text_delta: heartbeat
		content, // "\u0000" is not empty
		content, // tool_use start
		{},      // "" partial_json: heartbeat
		content, // content_block_stop: arguments "{}"
		finish,
		{HasUsage: true, Usage: api.Usage{PromptTokens: 14, CompletionTokens: 7, TotalTokens: 21, PromptTokensDetails: api.PromptTokensDetails{CachedTokens: 2}}},
	}
	st := openStream(t, strings.NewReader(body.String()))
	defer st.Close()
	for i, w := range want {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		got := st.(provider.ChunkInfoer).ChunkInfo()
		if !sameInfo(got, w) {
			t.Errorf("event %d %q: got ChunkInfo %+v, want %+v", i, ev.Data, got, w)
		}
		checkInfo(t, st, ev.Data)
	}
	if _, err := st.Next(); err == nil {
		t.Fatal("got an event after the usage chunk, want io.EOF")
	}
}

// TestBadCountsNotReported: a count that is not a token count (api.Count:
// negative, fractional, a string, 2^40, 1e30), in message_start or in
// message_delta, or counts whose sum is not below api.CountLimit, leave
// the stream without a usage chunk and the answer (whose usage is the
// message_start one here) without usage: the gateway then estimates them,
// as for a stream cut before its usage.
func TestBadCountsNotReported(t *testing.T) {
	tests := []struct{ name, start, delta string }{
		{"negative input", `{"input_tokens":-1,"output_tokens":1}`, `{"output_tokens":7}`},
		{"string output", `{"input_tokens":5,"output_tokens":"12"}`, `{"output_tokens":"12"}`},
		{"fraction", `{"input_tokens":1.5,"output_tokens":1}`, `{"output_tokens":7}`},
		{"1e30", `{"input_tokens":1e30,"output_tokens":1}`, `{"output_tokens":7}`},
		{"2^40", `{"input_tokens":5,"output_tokens":1099511627776}`, `{"output_tokens":1099511627776}`},
		{"cache read bool", `{"input_tokens":5,"cache_read_input_tokens":true,"output_tokens":1}`, `{"output_tokens":7}`},
		{"sum at the limit", `{"input_tokens":99999999,"cache_read_input_tokens":1,"output_tokens":1}`, `{"output_tokens":7}`},
		{"good delta after bad", `{"input_tokens":-5,"output_tokens":1}`, `{"input_tokens":5,"output_tokens":7}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "data: " + `{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":` + tt.start + `}}` + "\n\n" +
				"data: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
				"data: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}` + "\n\n" +
				"data: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":` + tt.delta + `}` + "\n\n" +
				"data: " + `{"type":"message_stop"}` + "\n\n"
			st := openStream(t, strings.NewReader(body))
			defer st.Close()
			for i := 0; ; i++ {
				ev, err := st.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if info := st.(provider.ChunkInfoer).ChunkInfo(); info.HasUsage {
					t.Fatalf("event %d %s: got a usage chunk (%+v), want none", i, ev.Data, info.Usage)
				}
				checkInfo(t, st, ev.Data)
			}
			msg := `{"type":"message","id":"msg_1","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + tt.start + `}`
			out, err := completion([]byte(msg), "claude", fixedNow)
			if err != nil {
				t.Fatalf("completion(%s): %v", msg, err)
			}
			var c api.Completion
			if err := json.Unmarshal(out, &c); err != nil || c.Usage != nil || c.Choices[0].Message.Content != "hi" {
				t.Errorf("completion(%s) = %s (%v), want the answer without usage", msg, out, err)
			}
		})
	}
}

// textPieces is an api.TextSink that keeps what it gets.
type textPieces []string

func (p *textPieces) AddJSON(raw []byte) { *p = append(*p, string(raw)) }

// TestCountText: over every testdata stream, the text the stream counts
// (provider.TextCounter) is what api.ScanChunkText finds in the chunks it
// returns, event by event; the stream passed through counts the same text
// from the upstream's own events; Reported agrees with the usage chunk at
// the end (its output count covers the text only when message_delta gave
// it: no_message_delta's is message_start's 1).
func TestCountText(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stream fixtures: %v", err)
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			st := openStream(t, bytes.NewReader(body))
			defer st.Close()
			var got, all textPieces
			st.(provider.TextCounter).CountText(&got)
			var last api.ChunkInfo
			for {
				ev, err := st.Next()
				if err != nil {
					break
				}
				if len(ev.Data) == 0 {
					continue
				}
				var want textPieces
				if last, err = api.ScanChunkText(ev.Data, &want); err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
					t.Fatalf("chunk %s: counted %q, api.ScanChunkText finds %q", ev.Data, got, want)
				}
				all = append(all, got...)
				got = got[:0]
			}
			u, prompt, output := st.(provider.Reporter).Reported()
			covers := !strings.Contains(in, "no_message_delta")
			if last.HasUsage && (!prompt || output != covers || u.PromptTokens != last.Usage.PromptTokens || u.CompletionTokens != last.Usage.CompletionTokens) {
				t.Errorf("Reported() = %+v, %v, %v; the usage chunk says %+v", u, prompt, output, last.Usage)
			}

			pass := openPass(t, bytes.NewReader(body))
			defer pass.Close()
			var passed textPieces
			pass.(provider.TextCounter).CountText(&passed)
			for {
				if _, err := pass.Next(); err != nil {
					break
				}
			}
			var a, b fit.Text
			for _, p := range all {
				a.AddJSON([]byte(p))
			}
			for _, p := range passed {
				b.AddJSON([]byte(p))
			}
			if a.Tokens() != b.Tokens() {
				t.Errorf("passed through: counted %q (%d tokens), translated %q (%d)", passed, b.Tokens(), all, a.Tokens())
			}
		})
	}
}

// TestReportedOnCut: a stream cut after message_start and some text
// reports message_start's prompt tokens (input and cache counts), and its
// output_tokens (1) as not covering the text that came after it; the
// counts of message_delta cover it.
func TestReportedOnCut(t *testing.T) {
	start := `event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"usage":{"input_tokens":10,"cache_read_input_tokens":30,"cache_creation_input_tokens":20,"output_tokens":1}}}` + "\n\n"
	text := `event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there"}}` + "\n\n"
	delta := `event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}` + "\n\n"
	for _, tt := range []struct {
		name           string
		body           string
		prompt, output bool
		completion     int
	}{
		{"nothing", "", false, false, 0},
		{"message_start", start, true, true, 1},
		{"message_start, text", start + text, true, false, 1},
		{"message_start, text, message_delta", start + text + delta, true, true, 5},
	} {
		for _, open := range []func(testing.TB, io.Reader) provider.Stream{openStream, openPass} {
			st := open(t, strings.NewReader(tt.body))
			for {
				if _, err := st.Next(); err != nil {
					break
				}
			}
			u, prompt, output := st.(provider.Reporter).Reported()
			st.Close()
			if prompt != tt.prompt || output != tt.output || prompt && (u.PromptTokens != 60 || u.PromptTokensDetails.CachedTokens != 30 || u.PromptTokensDetails.CacheWriteTokens != 20) || u.CompletionTokens != tt.completion {
				t.Errorf("%s (%T): got %+v, prompt %v, output %v; want 60 prompt tokens (30 read, 20 written) %v, %d completion %v",
					tt.name, st, u, prompt, output, tt.prompt, tt.completion, tt.output)
			}
		}
	}
}
