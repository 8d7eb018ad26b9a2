package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/streamgate/streamgate/internal/provider"
)

// TestRequestGolden sends each testdata/request/*.json client body through
// Open over loopback HTTP and compares the body the upstream received with
// its .golden.json.
func TestRequestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "request", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no request fixtures: %v", err)
	}
	for _, in := range files {
		if strings.HasSuffix(in, ".golden.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := upstreamBody(t, body, true)
			var out bytes.Buffer
			if err := json.Indent(&out, got, "", "  "); err != nil {
				t.Fatalf("the upstream got invalid JSON %s: %v", got, err)
			}
			out.WriteByte('\n')
			golden(t, strings.TrimSuffix(in, ".json")+".golden.json", out.Bytes())
		})
	}
}

// upstreamBody returns the body the upstream receives for the client body.
func upstreamBody(t *testing.T, body []byte, stream bool) []byte {
	t.Helper()
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		if stream {
			replay([]byte(minimal))(w, r)
			return
		}
		w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL)
	req := chatRequest(t, body, stream)
	orig := bytes.Clone(req.Body)
	if stream {
		st, err := c.Open(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
	} else if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req.Body, orig) {
		t.Errorf("the request's body was modified")
	}
	return got
}

// Complete sends the same translation with "stream": false.
func TestRequestNonStream(t *testing.T) {
	body := []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	var got struct {
		Stream    *bool `json:"stream"`
		MaxTokens int   `json:"max_tokens"`
	}
	if err := json.Unmarshal(upstreamBody(t, body, false), &got); err != nil {
		t.Fatal(err)
	}
	if got.Stream == nil || *got.Stream || got.MaxTokens != DefaultMaxTokens {
		t.Errorf("got stream %v, max_tokens %d; want false and %d", got.Stream, got.MaxTokens, DefaultMaxTokens)
	}
}

// A request that cannot be translated is answered before anything is sent,
// with a 400 that names the field; only features the Messages API lacks are
// retryable (another route may have them).
func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		param     string // the message starts with it
		retryable bool
	}{
		{"unparsable arguments", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}]}`,
			"messages[1].tool_calls[0].function.arguments", false},
		{"arguments not an object", `{"messages":[{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"[1,2]"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments", false},
		{"tool call without id", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			"messages[0].tool_calls[0].id", false},
		{"tool message without id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", false},
		{"unknown role", `{"messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", false},
		{"image in system", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "messages[0].content[0]", false},
		{"ftp image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url", false},
		{"data url not base64", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml,%3Csvg%3E"}}]}]}`, "messages[0].content[0].image_url.url", false},
		{"bad tool_choice", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"}`, "tool_choice", false},
		{"bad stop", `{"messages":[{"role":"user","content":"x"}],"stop":5}`, "stop", false},
		{"bad reasoning_effort", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"}`, "reasoning_effort", false},
		{"bad thinking type", `{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"sometimes"}}`, "thinking", false},
		{"thinking without budget", `{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled"}}`, "thinking", false},
		{"json_schema without schema", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "response_format.json_schema.schema", false},
		{"n > 1", `{"messages":[{"role":"user","content":"x"}],"n":3}`, "n", true},
		{"logprobs", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":2}`, "logprobs", true},
		{"audio output", `{"messages":[{"role":"user","content":"x"}],"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}`, "audio", true},
		{"json_object", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`, "response_format", true},
		{"input_audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "messages[0].content[0].type", true},
		{"non-function tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","function":{"name":"f"}}]}`, "tools[0].type", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				replay([]byte(minimal))(w, r)
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			for _, stream := range []bool{true, false} {
				req := chatRequest(t, []byte(tt.body), stream)
				var err error
				if stream {
					_, err = c.Open(context.Background(), req)
				} else {
					_, err = c.Complete(context.Background(), req)
				}
				var perr *provider.Error
				if !errors.As(err, &perr) {
					t.Fatalf("got %v, want a *provider.Error", err)
				}
				if perr.Status != http.StatusBadRequest || perr.Retryable != tt.retryable || !strings.HasPrefix(perr.Message, tt.param+": ") {
					t.Errorf("got %+v, want status 400, retryable %v, a message starting %q", *perr, tt.retryable, tt.param+": ")
				}
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("got %d upstream requests, want none", n)
			}
		})
	}
}

// The gateway fills req.Chat; Body also works from the raw body alone.
func TestBodyWithoutChat(t *testing.T) {
	raw := []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}],"max_tokens":9}`)
	withChat, err := Body(chatRequest(t, raw, true), true)
	if err != nil {
		t.Fatal(err)
	}
	without, err := Body(&provider.Request{Model: "claude-up", Body: raw}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(withChat, without) {
		t.Errorf("got %s without Chat, want %s", without, withChat)
	}
}

func BenchmarkBody(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "request", "tool_results.json"))
	if err != nil {
		b.Fatal(err)
	}
	req := chatRequest(b, body, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Body(req, true); err != nil {
			b.Fatal(err)
		}
	}
}
