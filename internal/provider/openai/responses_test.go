package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// respEvents are a Responses stream's events as OpenAI writes them.
var respEvents = []string{
	`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`,
	`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
	`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello","logprobs":[]}`,
	`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"","logprobs":[]}`,
	`{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_1","output_index":1,"delta":"{\"a\":1}"}`,
	`{"type":"response.web_search_call.searching","sequence_number":5,"item_id":"ws_1","output_index":2}`,
	`{"type":"response.completed","sequence_number":6,"response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":10},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":4},"total_tokens":42}}}`,
}

func sseBody(events ...string) string {
	var b strings.Builder
	for _, ev := range events {
		typ := ev[len(`{"type":"`):]
		typ = typ[:strings.IndexByte(typ, '"')]
		b.WriteString("event: " + typ + "\ndata: " + ev + "\n\n")
	}
	return b.String()
}

// openResp opens a passthrough stream on an upstream answering body.
func openResp(t *testing.T, body string) provider.Stream {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/responses" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	c := New(ts.URL+"/v1", "k", Options{Responses: true})
	req := &provider.Request{Model: "up", Stream: true, Native: &provider.Native{Dialect: provider.DialectResponses, Body: []byte(`{"model":"m","input":"x","stream":true}`)}}
	if !provider.Passes(c, req) {
		t.Fatal("a Responses request does not pass through a client with Responses set")
	}
	st, err := c.Open(context.Background(), req)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type sink struct{ text strings.Builder }

func (s *sink) AddJSON(raw []byte) { s.text.Write(raw) }

// TestResponsesStream: the events pass as they came; content for
// non-empty deltas, the finish with the usage (cached and reasoning tokens
// kept) at response.completed, then the end.
func TestResponsesStream(t *testing.T) {
	st := openResp(t, sseBody(respEvents...))
	var text sink
	st.(provider.TextCounter).CountText(&text)
	want := []api.ChunkInfo{{}, {}, {Content: true}, {}, {Content: true}, {}, {Finish: true, HasUsage: true, Usage: api.Usage{
		PromptTokens: 30, CompletionTokens: 12, TotalTokens: 42, PromptTokensDetails: api.PromptTokensDetails{CachedTokens: 10},
		CompletionTokensDetails: &api.CompletionTokensDetails{ReasoningTokens: 4}}}}
	for i, ev := range respEvents {
		got, err := st.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if string(got.Data) != ev {
			t.Errorf("event %d: got %s, want %s as it came", i, got.Data, ev)
		}
		info := st.(provider.ChunkInfoer).ChunkInfo()
		if info.Content != want[i].Content || info.Finish != want[i].Finish || info.HasUsage != want[i].HasUsage ||
			info.Usage.PromptTokens != want[i].Usage.PromptTokens || info.Usage.CompletionTokens != want[i].Usage.CompletionTokens ||
			info.Usage.PromptTokensDetails != want[i].Usage.PromptTokensDetails {
			t.Errorf("event %d: got %+v, want %+v", i, info, want[i])
		}
	}
	if _, err := st.Next(); err != io.EOF {
		t.Errorf("after the terminal event: got %v, want io.EOF", err)
	}
	if u, p, o := st.(provider.Reporter).Reported(); !p || !o || u.PromptTokens != 30 || u.CompletionTokens != 12 {
		t.Errorf("Reported: got %+v %v %v, want the terminal usage", u, p, o)
	}
	if got := text.text.String(); got != `"Hello""{\"a\":1}"` {
		t.Errorf("counted text: got %s", got)
	}
}

// TestResponsesStreamEnds: how a Responses stream fails.
func TestResponsesStreamEnds(t *testing.T) {
	created, delta, completed := respEvents[0], respEvents[2], respEvents[6]
	failed := `{"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"boom"},"output":[],"usage":{"input_tokens":30,"output_tokens":5}}}`
	for _, tt := range []struct {
		name   string
		body   string
		events int    // events returned before the error
		status int    // the *provider.Error's status; 0: not one
		is     error  // the error wraps it
		says   string // the error says it
	}{
		{"cut", sseBody(created, delta), 2, 0, provider.ErrTruncated, "terminal event"},
		{"done before the end", sseBody(created, delta) + "data: [DONE]\n\n", 2, 0, provider.ErrTruncated, "terminal event"},
		{"malformed", sseBody(created) + "data: {\"type\":\"response.output_text.delta\",\"delta\":\"tr\n\n", 1, 0, provider.ErrMalformed, ""},
		{"error event", sseBody(created, delta, `{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":3}`), 2, 429, nil, "slow down"},
		{"chat error object", sseBody(created) + "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n", 1, 500, nil, "overloaded"},
		{"failed before content", sseBody(created, failed), 1, 500, nil, "boom"},
		{"failed after content", sseBody(created, delta, failed), 3, 500, nil, "boom"},
		{"invalid_prompt", sseBody(created, `{"type":"response.failed","sequence_number":1,"response":{"error":{"code":"invalid_prompt","message":"no"},"usage":null}}`), 1, 400, nil, "no"},
		{"completed then more", sseBody(created, delta, completed, delta), 3, 0, io.EOF, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := openResp(t, tt.body)
			n := 0
			var err error
			for {
				if _, err = st.Next(); err != nil {
					break
				}
				n++
			}
			var pe *provider.Error
			switch {
			case n != tt.events:
				t.Errorf("got %d events before %v, want %d", n, err, tt.events)
			case tt.is != nil && !errors.Is(err, tt.is):
				t.Errorf("got %v, want %v", err, tt.is)
			case tt.status != 0 && (!errors.As(err, &pe) || pe.Status != tt.status || pe.Retryable != provider.RetryableStatus(tt.status)):
				t.Errorf("got %v, want a *provider.Error with status %d", err, tt.status)
			case !strings.Contains(err.Error(), tt.says):
				t.Errorf("got %v, want it to say %q", err, tt.says)
			}
			if strings.HasPrefix(tt.name, "failed") {
				if u, p, o := st.(provider.Reporter).Reported(); !p || !o || u.PromptTokens != 30 || u.CompletionTokens != 5 {
					t.Errorf("Reported: got %+v, want the failed response's usage", u)
				}
			}
		})
	}
}

// TestResponsesComplete: a non-stream request passes through; an
// upstream without Responses set translates instead.
func TestResponsesComplete(t *testing.T) {
	var got string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = r.URL.Path + " " + string(b)
		io.WriteString(w, `{"id":"resp_1","object":"response","usage":{"input_tokens":3,"output_tokens":2}}`)
	}))
	defer ts.Close()
	req := &provider.Request{Model: "up", Body: []byte(`{"messages":[]}`),
		Native: &provider.Native{Dialect: provider.DialectResponses, Body: []byte(`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`)}}
	b, err := New(ts.URL+"/v1", "", Options{Responses: true}).Complete(context.Background(), req)
	if err != nil || string(b) != `{"id":"resp_1","object":"response","usage":{"input_tokens":3,"output_tokens":2}}` ||
		got != `/v1/responses {"model":"up","input":"x","tools":[{"type":"web_search"}]}` {
		t.Errorf("passed: got %q, %v (upstream got %q)", b, err, got)
	}
	New(ts.URL+"/v1", "", Options{}).Complete(context.Background(), req)
	if !strings.HasPrefix(got, "/v1/chat/completions ") {
		t.Errorf("without Responses: upstream got %q, want the chat request", got)
	}
}

// FuzzResponsesStream: any upstream bytes end the stream with io.EOF only
// after a terminal event, else with an error; no panic, bounded.
func FuzzResponsesStream(f *testing.F) {
	f.Add(sseBody(respEvents...))
	f.Add(sseBody(respEvents[:3]...))
	f.Add("data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1e30}}}\n\n")
	f.Add("data: {\"type\":\"error\",\"code\":5}\n\ndata: [DONE]\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		st := openResp(t, body)
		ended := false
		for range 10000 {
			_, err := st.Next()
			if err == io.EOF {
				if !ended {
					t.Fatalf("io.EOF without a terminal event: %q", body)
				}
				return
			}
			if err != nil {
				return
			}
			info := st.(provider.ChunkInfoer).ChunkInfo()
			ended = ended || info.Finish
			if info.HasUsage && (info.Usage.PromptTokens < 0 || info.Usage.PromptTokens >= api.CountLimit) {
				t.Fatalf("usage %+v", info.Usage)
			}
		}
		t.Fatal("no end after 10000 events")
	})
}

// TestResponsesDeltaAllocs: reading a delta event (the most of a stream)
// allocates nothing.
func TestResponsesDeltaAllocs(t *testing.T) {
	s := &respStream{c: New("http://x.invalid/v1", "", Options{Responses: true})}
	data := []byte(respEvents[2])
	if n := testing.AllocsPerRun(100, func() {
		if err := s.see(data); err != nil || !s.info.Content {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("got %v allocations per delta event, want 0", n)
	}
}
