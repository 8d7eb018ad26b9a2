package anthropic

import (
	"context"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	gwopenai "github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/sse"
)

// openaiClient is the openai adapter reading body as its upstream's answer.
func openaiClient(body *loopBody) *gwopenai.Client {
	return gwopenai.New("http://upstream.invalid/v1", "", gwopenai.Options{Transport: bodyTransport(body)})
}

// loopBody is an endless upstream body: head once, then loop forever.
type loopBody struct {
	head, loop []byte
	i          int
	inHead     bool
}

func newLoopBody(head, loop string) *loopBody {
	return &loopBody{head: []byte(head), loop: []byte(loop), inHead: true}
}

func (l *loopBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		src := l.loop
		if l.inHead {
			src = l.head
		}
		c := copy(p[n:], src[l.i:])
		n += c
		if l.i += c; l.i == len(src) {
			l.i, l.inHead = 0, false
		}
	}
	return n, nil
}

func (l *loopBody) Close() error { return nil }

// benchEvents are upstream events as Anthropic sends them, one per kind of
// chunk the benchmarks measure.
var benchEvents = map[string]string{
	"TextDelta":      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the quick brown fox\"}}\n\n",
	"ThinkingDelta":  "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\" so the answer is\"}}\n\n",
	"InputJSONDelta": "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"location\\\": \\\"San\"}}\n\n",
	"Ping":           "event: ping\ndata: {\"type\": \"ping\"}\n\n",
}

const benchHead = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_014p7gG3wDgGV9EUtLvnow3U\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":2}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"name\":\"get_weather\",\"input\":{}}}\n\n"

// BenchmarkTranslate measures Next on an endless upstream stream of one
// event kind: SSE parsing, the JSON scan and the chunk write, per chunk.
func BenchmarkTranslate(b *testing.B) {
	for _, name := range []string{"TextDelta", "ThinkingDelta", "InputJSONDelta", "Ping"} {
		b.Run(name, func(b *testing.B) {
			st := openStream(b, newLoopBody(benchHead, benchEvents[name]))
			defer st.Close()
			for range 4 { // the head's events
				if _, err := st.Next(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTranslateTextDelta is the figure the performance budget names.
func BenchmarkTranslateTextDelta(b *testing.B) {
	st := openStream(b, newLoopBody(benchHead, benchEvents["TextDelta"]))
	defer st.Close()
	for range 4 {
		if _, err := st.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// passthroughChunks are the OpenAI chunks BenchmarkTranslate's events
// become: what an OpenAI-compatible upstream would send for the same token.
var passthroughChunks = map[string]string{
	"TextDelta":      `{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","object":"chat.completion.chunk","created":1750000000,"model":"claude-sonnet-4-5","choices":[{"index":0,"delta":{"content":" the quick brown fox"},"finish_reason":null}]}`,
	"ThinkingDelta":  `{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","object":"chat.completion.chunk","created":1750000000,"model":"claude-sonnet-4-5","choices":[{"index":0,"delta":{"reasoning_content":" so the answer is"},"finish_reason":null}]}`,
	"InputJSONDelta": `{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","object":"chat.completion.chunk","created":1750000000,"model":"claude-sonnet-4-5","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\": \"San"}}]},"finish_reason":null}]}`,
}

// BenchmarkPassthroughOpenAI is the baseline: the openai adapter's Next on
// an endless stream of the chunk each BenchmarkTranslate case produces.
func BenchmarkPassthroughOpenAI(b *testing.B) {
	for _, name := range []string{"TextDelta", "ThinkingDelta", "InputJSONDelta"} {
		b.Run(name, func(b *testing.B) {
			chunk := passthroughChunks[name]
			body := newLoopBody("", "data: "+chunk+"\n\n")
			body.inHead = false
			c := openaiClient(body)
			st, err := c.Open(context.Background(), chatRequest(b, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.ReportAllocs()
			for b.Loop() {
				ev, err := st.Next()
				if err != nil || string(ev.Data) != chunk {
					b.Fatal(ev, err)
				}
			}
		})
	}
}

// relayChunk is what the relay runs on each chunk it relays (relay.Session's
// scan): Next, then the chunk's info, from the stream when it tells it
// (provider.ChunkInfoer, as this adapter's does), else api.ScanChunk of
// the event (the OpenAI passthrough).
func relayChunk(st provider.Stream, ci provider.ChunkInfoer) (*sse.Event, api.ChunkInfo, error) {
	ev, err := st.Next()
	if err != nil {
		return nil, api.ChunkInfo{}, err
	}
	if ci != nil {
		return ev, ci.ChunkInfo(), nil
	}
	info, err := api.ScanChunk(ev.Data)
	return ev, info, err
}

// BenchmarkRelayChunkTranslated is the relay's cost of a translated chunk
// before it writes it: Next and ChunkInfo. BenchmarkRelayChunkPassthrough
// is the same for the chunk an OpenAI upstream would send: Next and
// api.ScanChunk. The budget: at most twice the passthrough, 3 allocations.
func BenchmarkRelayChunkTranslated(b *testing.B) {
	for _, name := range []string{"TextDelta", "ThinkingDelta", "InputJSONDelta"} {
		b.Run(name, func(b *testing.B) {
			st := openStream(b, newLoopBody(benchHead, benchEvents[name]))
			defer st.Close()
			for range 4 { // the head's events
				if _, err := st.Next(); err != nil {
					b.Fatal(err)
				}
			}
			ci, _ := st.(provider.ChunkInfoer)
			b.ReportAllocs()
			for b.Loop() {
				if _, info, err := relayChunk(st, ci); err != nil || !info.Content {
					b.Fatal(info, err)
				}
			}
		})
	}
}

// BenchmarkRelayChunkNative is the same for a Messages client's stream
// passed through (provider.Passthrough): Next and ChunkInfo of the
// upstream's own event, which the relay then writes as it came.
func BenchmarkRelayChunkNative(b *testing.B) {
	for _, name := range []string{"TextDelta", "ThinkingDelta", "InputJSONDelta"} {
		b.Run(name, func(b *testing.B) {
			st := openPass(b, newLoopBody(benchHead, benchEvents[name]))
			defer st.Close()
			for range 4 { // the head's events
				if _, err := st.Next(); err != nil {
					b.Fatal(err)
				}
			}
			ci := st.(provider.ChunkInfoer)
			b.ReportAllocs()
			for b.Loop() {
				if _, info, err := relayChunk(st, ci); err != nil || !info.Content {
					b.Fatal(info, err)
				}
			}
		})
	}
}

func BenchmarkRelayChunkPassthrough(b *testing.B) {
	for _, name := range []string{"TextDelta", "ThinkingDelta", "InputJSONDelta"} {
		b.Run(name, func(b *testing.B) {
			body := newLoopBody("", "data: "+passthroughChunks[name]+"\n\n")
			body.inHead = false
			st, err := openaiClient(body).Open(context.Background(), chatRequest(b, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ci, _ := st.(provider.ChunkInfoer)
			if ci != nil {
				b.Fatal("the openai adapter's stream tells its chunks' info: the baseline would not scan")
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, info, err := relayChunk(st, ci); err != nil || !info.Content {
					b.Fatal(info, err)
				}
			}
		})
	}
}

// BenchmarkReaderAnthropic is the sse.Reader alone on the events of
// BenchmarkTranslateTextDelta: the part of a translated chunk's cost that
// is the shared SSE parsing, not the translation.
func BenchmarkReaderAnthropic(b *testing.B) {
	r := sse.NewReader(newLoopBody(benchHead, benchEvents["TextDelta"]), 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse is the JSON scan of one event alone: the fast path for
// the compact text_delta the API sends, and the general path for the same
// event spelled with spaces, as the API's docs print it.
func BenchmarkParse(b *testing.B) {
	fast := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the quick brown fox"}}`)
	slow := []byte(`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " the quick brown fox"}}`)
	b.Run("Fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, ok := scanFastDelta(fast); !ok {
				b.Fatal("not read")
			}
		}
	})
	b.Run("Slow", func(b *testing.B) {
		s := &stream{}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.parse(slow); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Each translated chunk equals its passthrough benchmark's chunk, so both
// benchmarks measure the same output.
func TestBenchmarkChunksMatch(t *testing.T) {
	for name, want := range passthroughChunks {
		st := openStream(t, newLoopBody(benchHead, benchEvents[name]))
		var ev *sse.Event
		for range 5 {
			var err error
			if ev, err = st.Next(); err != nil {
				t.Fatal(err)
			}
		}
		if string(ev.Data) != want {
			t.Errorf("%s: got %s, want %s", name, ev.Data, want)
		}
		st.Close()
	}
}

// The translated stream allocates nothing per chunk once running, its
// ChunkInfo included.
func TestTranslateAllocs(t *testing.T) {
	for name, event := range benchEvents {
		st := openStream(t, newLoopBody(benchHead, event))
		for range 8 {
			st.Next()
		}
		ci := st.(provider.ChunkInfoer)
		if n := testing.AllocsPerRun(1000, func() { st.Next(); ci.ChunkInfo() }); n > 0 {
			t.Errorf("%s: got %v allocations per chunk, want 0", name, n)
		}
		st.Close()
	}
}
