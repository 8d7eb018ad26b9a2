package anthropic

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
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
