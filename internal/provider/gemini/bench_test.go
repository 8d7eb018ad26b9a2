package gemini

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/openai"
)

// cyclic is an endless body repeating one SSE event, at most one event per
// Read, as events arrive from a streaming upstream.
type cyclic struct {
	ev  []byte
	off int
}

func (c *cyclic) Read(p []byte) (int, error) {
	n := copy(p, c.ev[c.off:])
	c.off = (c.off + n) % len(c.ev)
	return n, nil
}

func (c *cyclic) Close() error { return nil }

// canned is a transport answering every request with a cyclic body.
type canned struct{ ev string }

func (t canned) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: &cyclic{ev: []byte(t.ev)}, Request: r}, nil
}

// Real chunks of both dialects carrying the same text: a Gemini event as
// gemini-2.5-flash streams it (every event repeats usage, model and id),
// and an OpenAI chunk as api.openai.com streams it.
const (
	geminiTextEvent = `data: {"candidates": [{"content": {"parts": [{"text": " jumps over"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 8}]},"modelVersion": "gemini-2.5-flash","responseId": "mAitaOTnDtfRz7IPnM2oyQ4"}` + "\r\n\r\n"
	openaiTextEvent = `data: {"id":"chatcmpl-BmTXrH8PZp1C7wG0kd3cZQcxqRsTZ","object":"chat.completion.chunk","created":1750975915,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_51e1070cf2","choices":[{"index":0,"delta":{"content":" jumps over"},"logprobs":null,"finish_reason":null}],"obfuscation":"hRs0Q"}` + "\n\n"
	geminiCallEvent = `data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"location": "Boston, MA","unit": "celsius"}},"thoughtSignature": "CiQBVKhc7ZpU0aHvm2vHfkO3cW/aE1YrZ5vQ=="}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 54,"candidatesTokenCount": 10,"totalTokenCount": 101,"thoughtsTokenCount": 37},"modelVersion": "gemini-2.5-flash","responseId": "mAitaOTnDtfRz7IPnM2oyQ4"}` + "\n\n"
)

var benchReq = &provider.Request{
	Model: "gemini-2.5-flash", Stream: true, Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`),
	Chat: &api.ChatRequest{Messages: []api.Message{api.TextMessage("user", "hi")}},
}

// benchNext measures one Next per iteration on an open stream; with relay,
// also what the relay then runs to learn the chunk's info (relay.Session's
// scan): the stream's ChunkInfo when it tells it (provider.ChunkInfoer, as
// this adapter's does), else api.ScanChunk of the event (the OpenAI
// passthrough).
func benchNext(b *testing.B, st provider.Stream, relay bool) {
	defer st.Close()
	if _, err := st.Next(); err != nil { // the role chunk, for Gemini
		b.Fatal(err)
	}
	ci, _ := st.(provider.ChunkInfoer)
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for b.Loop() {
		ev, err := st.Next()
		if err != nil {
			b.Fatal(err)
		}
		if relay {
			var info api.ChunkInfo
			if ci != nil {
				info = ci.ChunkInfo()
			} else if info, err = api.ScanChunk(ev.Data); err != nil {
				b.Fatal(err)
			}
			if !info.Content {
				b.Fatalf("got %+v for a text chunk, want Content", info)
			}
		}
		size = len(ev.Data)
	}
	b.ReportMetric(float64(size), "out-bytes")
}

// BenchmarkTranslateText: one Gemini text event read, decoded and
// re-encoded as an OpenAI chunk, through Client.Open's stream.
func BenchmarkTranslateText(b *testing.B) {
	c := New("http://upstream.invalid", "k", Options{Transport: canned{geminiTextEvent}})
	st, err := c.Open(context.Background(), benchReq)
	if err != nil {
		b.Fatal(err)
	}
	benchNext(b, st, false)
}

// BenchmarkTranslateToolCall: a Gemini functionCall event to a tool_calls chunk.
func BenchmarkTranslateToolCall(b *testing.B) {
	c := New("http://upstream.invalid", "k", Options{Transport: canned{geminiCallEvent}})
	st, err := c.Open(context.Background(), benchReq)
	if err != nil {
		b.Fatal(err)
	}
	benchNext(b, st, false)
}

// BenchmarkPassthroughOpenAI is the baseline: the OpenAI adapter's stream
// on the same text, measured the same way (its chunks pass through as read).
func BenchmarkPassthroughOpenAI(b *testing.B) {
	c := openai.New("http://upstream.invalid", "k", openai.Options{Transport: canned{openaiTextEvent}})
	st, err := c.Open(context.Background(), benchReq)
	if err != nil {
		b.Fatal(err)
	}
	benchNext(b, st, false)
}

// BenchmarkRelayChunkTranslated: what the relay spends on a translated
// text chunk before writing it: Next, then ChunkInfo. The budget: at most
// twice BenchmarkRelayChunkPassthrough, 3 allocations.
func BenchmarkRelayChunkTranslated(b *testing.B) {
	c := New("http://upstream.invalid", "k", Options{Transport: canned{geminiTextEvent}})
	st, err := c.Open(context.Background(), benchReq)
	if err != nil {
		b.Fatal(err)
	}
	benchNext(b, st, true)
}

// BenchmarkRelayChunkPassthrough: the same for an OpenAI passthrough chunk:
// Next, then api.ScanChunk of the chunk as read.
func BenchmarkRelayChunkPassthrough(b *testing.B) {
	c := openai.New("http://upstream.invalid", "k", openai.Options{Transport: canned{openaiTextEvent}})
	st, err := c.Open(context.Background(), benchReq)
	if err != nil {
		b.Fatal(err)
	}
	if _, ok := st.(provider.ChunkInfoer); ok {
		b.Fatal("the openai adapter's stream tells its chunks' info: the baseline would not scan")
	}
	benchNext(b, st, true)
}

// BenchmarkTranslateOnly: the translation of one event alone, without SSE
// framing or I/O.
func BenchmarkTranslateOnly(b *testing.B) {
	data := []byte(geminiTextEvent[len("data: ") : len(geminiTextEvent)-4])
	var t translator
	t.init("gemini-2.5-flash", 1700000000, [8]byte{})
	t.translate(data)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := t.translate(data); n != 1 || err != nil {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkBody: the request translation of a typical chat request.
func BenchmarkBody(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"max_tokens":64,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about latency and the sea, in English, with a title."}]}`)
	req := &provider.Request{Model: "gemini-2.5-flash", Body: body, Chat: new(api.ChatRequest)}
	if err := json.Unmarshal(body, req.Chat); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Body(req); err != nil {
			b.Fatal(err)
		}
	}
}
