package gemini

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// translateAll runs events through one translator and returns the decoded
// output chunks.
func translateAll(t *testing.T, events ...string) ([]api.Chunk, error) {
	t.Helper()
	var tr translator
	tr.init("req-model", 1700000000, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	var out []api.Chunk
	add := func(n int) {
		for range n {
			data := tr.pop()
			checkChunk(t, data)
			var c api.Chunk
			json.Unmarshal(data, &c)
			out = append(out, c)
		}
	}
	for _, ev := range events {
		n, err := tr.translate([]byte(ev))
		if err != nil {
			return out, err
		}
		add(n)
	}
	if tr.finished { // the body ends here, as the stream's does after a finish
		add(tr.close())
	}
	return out, nil
}

func contentOf(chunks []api.Chunk) (text, reasoning string) {
	for _, c := range chunks {
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			reasoning += ch.Delta.ReasoningContent
		}
	}
	return text, reasoning
}

// TestJoinParts: text parts of one event are joined into one delta; a
// surrogate pair or a UTF-8 sequence split across two parts is not glued
// back together (each part decodes alone, as encoding/json reads them).
func TestJoinParts(t *testing.T) {
	tests := []struct {
		name, parts, want string
	}{
		{"plain", `{"text":"ab"},{"text":"cd"}`, "abcd"},
		{"escapes kept whole", `{"text":"a\"\\"},{"text":"\n\u00e9"}`, "a\"\\\né"},
		{"split surrogate escape", `{"text":"a\ud83d"},{"text":"\ude00b"}`, "a\ufffd\ufffdb"},
		{"escaped backslash before u", `{"text":"a\\ud83d"},{"text":"\ude00b"}`, `a\ud83d` + "\ufffdb"},
		{"whole pair in one part", `{"text":"\ud83d\ude00"},{"text":"!"}`, "😀!"},
		{"split UTF-8", "{\"text\":\"caf\xc3\"},{\"text\":\"\xa9\"}", "caf\ufffd\ufffd"},
		{"split 3-byte UTF-8", "{\"text\":\"\xe2\x82\"},{\"text\":\"\xac\"}", "\ufffd\ufffd\ufffd"},
		{"complete UTF-8", "{\"text\":\"caf\xc3\xa9\"},{\"text\":\" ok\"}", "café ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := `{"candidates":[{"content":{"parts":[` + tt.parts + `]}}]}`
			var want map[string]any
			if err := json.Unmarshal([]byte(ev), &want); err != nil {
				t.Fatalf("test event: %v", err)
			}
			chunks, err := translateAll(t, ev)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := contentOf(chunks); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFinishLastWins: the finish chunk comes once, at the body's end
// (close), with the last finishReason read; usage is the last reported.
func TestFinishLastWins(t *testing.T) {
	var tr translator
	tr.init("m", 1, [8]byte{})
	for _, ev := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`,
		`{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"thoughtsTokenCount":5,"cachedContentTokenCount":1}}`,
	} {
		n, err := tr.translate([]byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if c := tr.pop(); strings.Contains(string(c), `"finish_reason":"`) {
				t.Errorf("got a finish chunk before the body's end: %s", c)
			}
		}
	}
	if want := (usage{prompt: 3, candidates: 2, thoughts: 5, cached: 1}); tr.usage != want {
		t.Errorf("got usage %+v, want the last event's %+v", tr.usage, want)
	}
	if n := tr.close(); n != 2 {
		t.Fatalf("close queued %d events, want the finish and the usage chunk", n)
	}
	var c api.Chunk
	json.Unmarshal(tr.pop(), &c)
	if len(c.Choices) != 1 || c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "stop" {
		t.Errorf("got finish chunk %+v, want the last reason, stop", c)
	}
	c = api.Chunk{}
	json.Unmarshal(tr.pop(), &c)
	if u := c.Usage; u == nil || u.PromptTokens != 3 || u.CompletionTokens != 7 || u.TotalTokens != 10 {
		t.Errorf("got usage chunk %+v, want 3 + (2+5) = 10", u)
	}
}

func TestEventErrors(t *testing.T) {
	tests := []struct {
		ev        string
		status    int
		retryable bool
		msg       string
	}{
		{`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, 503, true, "The model is overloaded."},
		{`{"error":{"code":400,"message":"bad \u0022arg\u0022","status":"INVALID_ARGUMENT"}}`, 400, false, `bad "arg"`},
		{`{"error":"boom"}`, 0, true, "the upstream sent an error event"},
		{`{"error":{"code":42}}`, 0, true, "the upstream sent an error event"},
	}
	for _, tt := range tests {
		_, err := translateAll(t, `{"candidates":[{"content":{"parts":[{"text":"x"}]}}]}`, tt.ev)
		var perr *provider.Error
		if !errors.As(err, &perr) {
			t.Fatalf("%s: got %v, want *provider.Error", tt.ev, err)
		}
		if perr.Status != tt.status || perr.Retryable != tt.retryable || perr.Message != tt.msg {
			t.Errorf("%s: got %+v, want status %d retryable %v message %q", tt.ev, perr, tt.status, tt.retryable, tt.msg)
		}
	}
}

// TestToolCallIDs: ids are unique within a stream and across streams.
func TestToolCallIDs(t *testing.T) {
	ids := map[string]bool{}
	for stream := range 2 {
		var tr translator
		tr.init("m", 1, [8]byte{byte(stream)})
		n, err := tr.translate([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a"}},{"functionCall":{"name":"b","args":{"x":1}}}]}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			var c api.Chunk
			json.Unmarshal(tr.pop(), &c)
			for _, ch := range c.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					if ids[tc.ID] {
						t.Errorf("id %q repeated", tc.ID)
					}
					ids[tc.ID] = true
				}
			}
		}
	}
	if len(ids) != 4 {
		t.Errorf("got %d ids, want 4", len(ids))
	}
}

// TestTranslateAllocs: a text event costs no allocation once the buffers
// have grown (the budget is 3), its chunk's info included.
func TestTranslateAllocs(t *testing.T) {
	data := []byte(geminiTextEvent[len("data: ") : len(geminiTextEvent)-4])
	var tr translator
	tr.init("m", 1, [8]byte{})
	tr.translate(data)
	if n := testing.AllocsPerRun(100, func() { tr.translate(data); tr.pop(); tr.info() }); n > 0 {
		t.Errorf("got %v allocations per event, want 0", n)
	}
}

// TestContentAfterFinish: a finishReason does not end the answer, the
// body's end does (issue 35: Vertex AI's Gemini 1.x put STOP on every
// event, and only the first event's text was relayed). Every event's text
// and calls are relayed, then one finish chunk with the last reason
// ("tool_calls": calls came), then the usage: no content follows the
// finish (issue 22).
func TestContentAfterFinish(t *testing.T) {
	chunks, err := translateAll(t,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"b"}]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"late"},{"functionCall":{"name":"f","args":{}}}]}}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5}}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := contentOf(chunks); text != "ablate" {
		t.Errorf("got text %q, want %q", text, "ablate")
	}
	var finishes, calls, finishAt int
	for i, c := range chunks {
		for _, ch := range c.Choices {
			calls += len(ch.Delta.ToolCalls)
			if ch.FinishReason != nil {
				finishes, finishAt = finishes+1, i
				if *ch.FinishReason != "tool_calls" {
					t.Errorf("got finish_reason %q, want tool_calls", *ch.FinishReason)
				}
			}
		}
	}
	if calls != 1 {
		t.Errorf("got %d tool calls, want 1", calls)
	}
	if last := chunks[len(chunks)-1]; finishes != 1 || finishAt != len(chunks)-2 || last.Usage == nil {
		t.Errorf("got %d finish chunks, at %d of %d; want one, just before the usage chunk", finishes, finishAt, len(chunks))
	}
}
