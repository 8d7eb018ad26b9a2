package anthropic

import (
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

// sameInfo compares what the relay reads of a ChunkInfo: the four flags
// and the three counts.
func sameInfo(a, b api.ChunkInfo) bool {
	return a.Content == b.Content && a.Finish == b.Finish && a.HasUsage == b.HasUsage && a.Error == b.Error &&
		a.Usage.PromptTokens == b.Usage.PromptTokens &&
		a.Usage.CompletionTokens == b.Usage.CompletionTokens &&
		a.Usage.TotalTokens == b.Usage.TotalTokens
}

// TestChunkInfo: each kind of chunk the stream writes, and a heartbeat,
// gets the info api.ScanChunk finds in it, spelled out here so a ChunkInfo
// that agrees with nothing fails too. The prompt count sums to more than
// 1<<40, which api.ScanChunk reads as 0.
func TestChunkInfo(t *testing.T) {
	events := []string{
		`{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":1099511627776,"cache_read_input_tokens":2,"output_tokens":1}}}`,
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
		{HasUsage: true, Usage: api.Usage{PromptTokens: 0, CompletionTokens: 7, TotalTokens: 0}},
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
