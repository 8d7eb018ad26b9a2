package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

// TestMain checks for leaked goroutines. go-genai (sdk_test.go) imports
// go.opencensus.io, whose stats worker starts in an init function and
// lives as long as the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// quick is a profile with no waits, for tests that look at content.
var quick = Profile{Name: "quick", Tokens: 12, TokensPerChunk: 1, Lang: "en"}

func newTestServer(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	if opts.Profile == (Profile{}) {
		opts.Profile = quick
	}
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

type reqOpts struct {
	stream       bool
	includeUsage bool
	maxTokens    int
	maxCompl     int
	seed         *int64
	model        string
	headers      map[string]string
	ctx          context.Context
	extra        string        // more body fields, `,"name":value...`
	messages     []api.Message // nil: one user message
}

func post(t *testing.T, ts *httptest.Server, o reqOpts) *http.Response {
	t.Helper()
	resp, err := tryPost(ts, o)
	if err != nil {
		t.Fatalf("POST /v1/chat/completions: %v", err)
	}
	return resp
}

func tryPost(ts *httptest.Server, o reqOpts) (*http.Response, error) {
	model := o.model
	if model == "" {
		model = "some-model"
	}
	msgs := o.messages
	if msgs == nil {
		msgs = []api.Message{api.TextMessage("user", "Tell me about streaming latency.")}
	}
	req := api.ChatRequest{Model: model, Messages: msgs, Stream: o.stream, Seed: o.seed}
	if o.includeUsage {
		req.StreamOptions = &api.StreamOptions{IncludeUsage: true}
	}
	if o.maxTokens != 0 {
		req.MaxTokens = &o.maxTokens
	}
	if o.maxCompl != 0 {
		req.MaxCompletionTokens = &o.maxCompl
	}
	body, _ := json.Marshal(req)
	if o.extra != "" {
		body = append(append(body[:len(body)-1], o.extra...), '}')
	}
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range o.headers {
		hr.Header.Set(k, v)
	}
	return ts.Client().Do(hr)
}

// event is one SSE event copied out of the reader.
type event struct {
	data    string
	comment string
}

// streamReader wraps an SSE response for step-by-step reading.
type streamReader struct {
	t    *testing.T
	resp *http.Response
	r    *sse.Reader
}

func openStream(t *testing.T, ts *httptest.Server, o reqOpts) *streamReader {
	t.Helper()
	o.stream = true
	resp := post(t, ts, o)
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status: got %d, want 200 (body %s)", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type: got %q, want text/event-stream", ct)
	}
	return &streamReader{t: t, resp: resp, r: sse.NewReader(resp.Body, 0)}
}

func (s *streamReader) next() (event, error) {
	ev, err := s.r.Next()
	if err != nil {
		return event{}, err
	}
	return event{data: string(ev.Data), comment: string(ev.Comment)}, nil
}

// all reads to the end; err is nil when the stream ended with [DONE].
func (s *streamReader) all() ([]event, error) {
	var evs []event
	for {
		ev, err := s.next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func decodeChunk(t *testing.T, data string) api.Chunk {
	t.Helper()
	var c api.Chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("chunk %q: %v", data, err)
	}
	return c
}

// streamSummary is the shape of a stream as the tests check it.
type streamSummary struct {
	contents []string // content of each content chunk
	finish   string
	usage    *api.Usage
}

// checkShape asserts the OpenAI stream shape and returns its parts.
func checkShape(t *testing.T, evs []event, includeUsage bool) streamSummary {
	t.Helper()
	var sum streamSummary
	if len(evs) < 2 {
		t.Fatalf("got %d events, want at least role and finish", len(evs))
	}
	first := decodeChunk(t, evs[0].data)
	if len(first.Choices) != 1 || first.Choices[0].Delta.Role != "assistant" || first.Choices[0].Delta.Content != "" ||
		!strings.Contains(evs[0].data, `"delta":{"role":"assistant","content":""}`) {
		t.Errorf("first chunk: got %s, want a role-only delta", evs[0].data)
	}
	i := 1
	for ; i < len(evs); i++ {
		c := decodeChunk(t, evs[i].data)
		if c.Object != "chat.completion.chunk" {
			t.Errorf("chunk %d object: got %q, want chat.completion.chunk", i, c.Object)
		}
		if got := strings.Contains(evs[i].data, `"usage":null`); got != includeUsage && c.Usage == nil {
			t.Errorf("chunk %d: \"usage\":null present %v, want %v: %s", i, got, includeUsage, evs[i].data)
		}
		if len(c.Choices) == 1 && c.Choices[0].FinishReason == nil {
			if c.Choices[0].Delta.Content == "" {
				t.Errorf("chunk %d: empty content chunk %s", i, evs[i].data)
			}
			sum.contents = append(sum.contents, c.Choices[0].Delta.Content)
			continue
		}
		break
	}
	if i >= len(evs) {
		t.Fatalf("no finish chunk")
	}
	fin := decodeChunk(t, evs[i].data)
	if len(fin.Choices) != 1 || fin.Choices[0].FinishReason == nil || !strings.Contains(evs[i].data, `"delta":{}`) {
		t.Fatalf("finish chunk: got %s, want empty delta and finish_reason", evs[i].data)
	}
	sum.finish = *fin.Choices[0].FinishReason
	i++
	if includeUsage {
		if i >= len(evs) {
			t.Fatalf("no usage chunk with include_usage")
		}
		u := decodeChunk(t, evs[i].data)
		if u.Usage == nil || len(u.Choices) != 0 || !strings.Contains(evs[i].data, `"choices":[]`) {
			t.Fatalf("usage chunk: got %s, want choices [] and usage", evs[i].data)
		}
		sum.usage = u.Usage
		i++
	}
	if i != len(evs) {
		t.Errorf("events after the end: got %d more (%q)", len(evs)-i, evs[i].data)
	}
	return sum
}

func TestStreamShape(t *testing.T) {
	tests := []struct {
		name         string
		includeUsage bool
		lang         string
		perChunk     int
		tokens       int
		wantChunks   int
	}{
		{"en no usage", false, "en", 1, 12, 12},
		{"en usage", true, "en", 1, 12, 12},
		{"ko usage", true, "ko", 1, 30, 30},
		{"three per chunk", true, "en", 3, 10, 4},
		{"ko four per chunk", true, "ko", 4, 25, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := quick
			p.Lang, p.TokensPerChunk, p.Tokens = tt.lang, tt.perChunk, tt.tokens
			_, ts := newTestServer(t, Options{Profile: p})
			sr := openStream(t, ts, reqOpts{includeUsage: tt.includeUsage})
			evs, err := sr.all()
			if err != nil {
				t.Fatalf("stream: got %v, want [DONE] at the end", err)
			}
			sum := checkShape(t, evs, tt.includeUsage)
			if len(sum.contents) != tt.wantChunks {
				t.Errorf("content chunks: got %d, want %d", len(sum.contents), tt.wantChunks)
			}
			if sum.finish != "stop" {
				t.Errorf("finish_reason: got %q, want stop", sum.finish)
			}
			if tt.includeUsage {
				if sum.usage.CompletionTokens != tt.tokens {
					t.Errorf("completion_tokens: got %d, want %d", sum.usage.CompletionTokens, tt.tokens)
				}
				if sum.usage.PromptTokens <= 0 || sum.usage.TotalTokens != sum.usage.PromptTokens+sum.usage.CompletionTokens {
					t.Errorf("usage: got %+v, want positive prompt tokens and total = prompt + completion", *sum.usage)
				}
			}
			for i, c := range sum.contents {
				if !utf8.ValidString(c) {
					t.Errorf("chunk %d content is not valid UTF-8: %q", i, c)
				}
				if tt.lang == "ko" && strings.TrimSpace(c) != "" && !hasHangulOrPunct(c) {
					t.Errorf("chunk %d: got %q, want Korean text", i, c)
				}
			}
			for i, ev := range evs {
				if !utf8.ValidString(ev.data) {
					t.Errorf("event %d is not valid UTF-8", i)
				}
			}
		})
	}
}

func hasHangulOrPunct(s string) bool {
	for _, r := range s {
		if (r >= 0xAC00 && r <= 0xD7A3) || r == '.' || r == '\n' {
			return true
		}
	}
	return false
}

func TestMaxTokens(t *testing.T) {
	tests := []struct {
		name       string
		maxTokens  int
		maxCompl   int
		want       int
		wantFinish string
	}{
		{"max_tokens below length", 5, 0, 5, "length"},
		{"max_completion_tokens below length", 0, 7, 7, "length"},
		{"max_completion_tokens wins", 3, 9, 9, "length"},
		{"max_tokens above length", 500, 0, 12, "stop"},
		{"max_tokens equal to length", 12, 0, 12, "stop"},
	}
	_, ts := newTestServer(t, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := openStream(t, ts, reqOpts{includeUsage: true, maxTokens: tt.maxTokens, maxCompl: tt.maxCompl})
			evs, err := sr.all()
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			sum := checkShape(t, evs, true)
			if len(sum.contents) != tt.want || sum.usage.CompletionTokens != tt.want {
				t.Errorf("tokens: got %d chunks and usage %d, want %d", len(sum.contents), sum.usage.CompletionTokens, tt.want)
			}
			if sum.finish != tt.wantFinish {
				t.Errorf("finish_reason: got %q, want %q", sum.finish, tt.wantFinish)
			}
		})
	}
}

func streamText(t *testing.T, ts *httptest.Server, o reqOpts) string {
	t.Helper()
	evs, err := openStream(t, ts, o).all()
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return strings.Join(checkShape(t, evs, o.includeUsage).contents, "")
}

func TestSeedReproducible(t *testing.T) {
	p := quick
	p.Tokens = 60
	_, a := newTestServer(t, Options{Profile: p, Seed: 1})
	_, b := newTestServer(t, Options{Profile: p, Seed: 1})
	_, c := newTestServer(t, Options{Profile: p, Seed: 2})
	ta, tb, tc := streamText(t, a, reqOpts{}), streamText(t, b, reqOpts{}), streamText(t, c, reqOpts{})
	if ta != tb {
		t.Errorf("same seed: got different texts %q and %q", ta, tb)
	}
	if ta == tc {
		t.Errorf("seeds 1 and 2: got the same text %q", ta)
	}
	// Text depends on the seed and the prompt, not on the request counter:
	// the second request of a server gets the first one's text, another
	// prompt another text.
	if t2 := streamText(t, a, reqOpts{}); t2 != ta {
		t.Errorf("second request: got %q, want the first request's %q", t2, ta)
	}
	other := []api.Message{api.TextMessage("user", "Tell me about something else.")}
	if t3 := streamText(t, a, reqOpts{messages: other}); t3 == ta {
		t.Errorf("another prompt: got the same text %q", t3)
	}
	seed := int64(42)
	if x, y := streamText(t, a, reqOpts{seed: &seed}), streamText(t, a, reqOpts{seed: &seed}); x != y {
		t.Errorf("body seed 42 twice: got %q and %q, want the same", x, y)
	}
	h := map[string]string{HeaderSeed: "7"}
	if x, y := streamText(t, a, reqOpts{headers: h}), streamText(t, c, reqOpts{headers: h}); x != y {
		t.Errorf("X-Sim-Seed 7 on two servers: got %q and %q, want the same", x, y)
	}
	// Non-stream gives the same text as stream for the same seed.
	resp := post(t, a, reqOpts{headers: h})
	defer resp.Body.Close()
	var comp api.Completion
	if err := json.NewDecoder(resp.Body).Decode(&comp); err != nil {
		t.Fatal(err)
	}
	if want := streamText(t, a, reqOpts{headers: h}); comp.Choices[0].Message.Content != want {
		t.Errorf("non-stream text: got %q, want the stream's %q", comp.Choices[0].Message.Content, want)
	}
}

func TestFailStatus(t *testing.T) {
	tests := []struct {
		name     string
		headers  map[string]string
		faults   Faults
		want     int
		wantType string
	}{
		{"header 429", map[string]string{HeaderFailStatus: "429"}, Faults{}, 429, "requests"},
		{"header 500", map[string]string{HeaderFailStatus: "500"}, Faults{}, 500, "server_error"},
		{"header 502", map[string]string{HeaderFailStatus: "502"}, Faults{}, 502, "server_error"},
		{"header 503", map[string]string{HeaderFailStatus: "503"}, Faults{}, 503, "server_error"},
		{"header rate 1 defaults to 503", map[string]string{HeaderFailRate: "1"}, Faults{}, 503, "server_error"},
		{"profile rate 1", nil, Faults{FailStatus: 502, FailRate: 1}, 502, "server_error"},
		{"profile value only", nil, Faults{FailStatus: 500}, 500, "server_error"},
		{"header rate 0 switches the profile's fault off", map[string]string{HeaderFailRate: "0"}, Faults{FailStatus: 500}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := quick
			p.Faults = tt.faults
			s, ts := newTestServer(t, Options{Profile: p})
			for _, stream := range []bool{true, false} {
				resp := post(t, ts, reqOpts{stream: stream, headers: tt.headers})
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tt.want {
					t.Fatalf("stream=%v status: got %d, want %d (%s)", stream, resp.StatusCode, tt.want, body)
				}
				if tt.want == 200 {
					continue
				}
				var e api.ErrorResponse
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type != tt.wantType {
					t.Errorf("body: got %s (%v), want an OpenAI error of type %s", body, err, tt.wantType)
				}
				if ra := resp.Header.Get("Retry-After"); (tt.want == 429) != (ra != "") {
					t.Errorf("Retry-After: got %q for status %d", ra, tt.want)
				}
			}
			if tt.want != 200 {
				waitMetric(t, s, `streamgate_sim_faults_total{fault="fail_status"}`, 2)
			}
		})
	}
}

func TestFailRate(t *testing.T) {
	p := quick
	p.Tokens = 1
	p.Faults = Faults{FailStatus: 503, FailRate: 0.3}
	_, ts := newTestServer(t, Options{Profile: p, Seed: 5})
	failed := 0
	const n = 200
	for range n {
		resp := post(t, ts, reqOpts{})
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 503 {
			failed++
		}
	}
	// 30% of 200 is 60; a seeded draw far outside [30, 90] means a broken rate.
	if failed < 30 || failed > 90 {
		t.Errorf("failed requests: got %d of %d, want about 30%%", failed, n)
	}
}

func TestStallFirst(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sr := openStream(t, ts, reqOpts{ctx: ctx, headers: map[string]string{HeaderStallFirst: "1h"}})
	ev, err := sr.next()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first event: got %+v, %v; want nothing before the client's deadline", ev, err)
	}
	waitMetric(t, s, "streamgate_sim_streams_cancelled_total", 1)
	waitMetric(t, s, `streamgate_sim_faults_total{fault="stall_first"}`, 1)
}

func TestStallAt(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sr := openStream(t, ts, reqOpts{ctx: ctx, headers: map[string]string{HeaderStallAt: "3", HeaderStallFor: "1h"}})
	for i := range 3 { // role, content 1, content 2
		if _, err := sr.next(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	got := make(chan error, 1)
	go func() { _, err := sr.next(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("event after chunk 2: got %v, want a stall", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	<-got
	waitMetric(t, s, "streamgate_sim_streams_cancelled_total", 1)
	waitMetric(t, s, `streamgate_sim_faults_total{fault="stall"}`, 1)
}

func TestStallShort(t *testing.T) {
	// A short stall ends and the stream goes on to [DONE].
	_, ts := newTestServer(t, Options{})
	sr := openStream(t, ts, reqOpts{headers: map[string]string{HeaderStallAt: "2", HeaderStallFor: "20ms", HeaderStallFirst: "10ms"}})
	evs, err := sr.all()
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if sum := checkShape(t, evs, false); len(sum.contents) != 12 {
		t.Errorf("content chunks: got %d, want 12", len(sum.contents))
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		name       string
		headers    map[string]string
		wantChunks int // content chunks before the cut; -1 = any
	}{
		{"at 3", map[string]string{HeaderCutAt: "3"}, 2},
		{"at 1", map[string]string{HeaderCutAt: "1"}, 0},
		{"after the last chunk", map[string]string{HeaderCutAt: "999"}, 12},
		{"rate 1 random chunk", map[string]string{HeaderCutRate: "1"}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := newTestServer(t, Options{})
			evs, err := openStream(t, ts, reqOpts{headers: tt.headers}).all()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("end: got %v, want an unexpected EOF (no [DONE])", err)
			}
			if len(evs) == 0 || !strings.Contains(evs[0].data, `"role":"assistant"`) {
				t.Fatalf("got %d events, want the role chunk first", len(evs))
			}
			for _, ev := range evs[1:] {
				if strings.Contains(ev.data, `"finish_reason":"`) {
					t.Errorf("finish chunk before the cut: %s", ev.data)
				}
			}
			if tt.wantChunks >= 0 && len(evs)-1 != tt.wantChunks {
				t.Errorf("content chunks before the cut: got %d, want %d", len(evs)-1, tt.wantChunks)
			}
			waitMetric(t, s, `streamgate_sim_faults_total{fault="cut"}`, 1)
		})
	}
}

func TestErrorEvent(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	evs, err := openStream(t, ts, reqOpts{headers: map[string]string{HeaderErrorAt: "2"}}).all()
	if !errors.Is(err, sse.ErrTruncated) {
		t.Fatalf("end: got %v, want sse.ErrTruncated (no [DONE] after the error)", err)
	}
	if len(evs) != 3 {
		t.Fatalf("events: got %d, want role, one content chunk, error", len(evs))
	}
	var e api.ErrorResponse
	if err := json.Unmarshal([]byte(evs[2].data), &e); err != nil || e.Error.Message == "" || e.Error.Type != "server_error" {
		t.Errorf("error event: got %s, want an OpenAI error object", evs[2].data)
	}
}

func TestMalformed(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	evs, err := openStream(t, ts, reqOpts{headers: map[string]string{HeaderMalformedAt: "2"}}).all()
	if err != nil {
		t.Fatalf("end: got %v, want [DONE]: the stream goes on after the malformed line", err)
	}
	if len(evs) < 3 || json.Valid([]byte(evs[2].data)) {
		t.Fatalf("event 2: got %q, want a line that is not JSON", evs[2].data)
	}
	rest := append(evs[:2:2], evs[3:]...)
	if sum := checkShape(t, rest, false); len(sum.contents) != 12 {
		t.Errorf("content chunks besides the malformed line: got %d, want 12", len(sum.contents))
	}
}

func TestNonStreamFaults(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	resp, err := tryPost(ts, reqOpts{headers: map[string]string{HeaderCutAt: "1"}})
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Errorf("cut non-stream: got a response, want a connection error")
	}
	resp = post(t, ts, reqOpts{headers: map[string]string{HeaderErrorAt: "1"}})
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("error-at non-stream: got status %d, want 500", resp.StatusCode)
	}
	resp = post(t, ts, reqOpts{headers: map[string]string{HeaderMalformedAt: "1"}})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Valid(b) {
		t.Errorf("malformed non-stream: got %d %s, want 200 and invalid JSON", resp.StatusCode, b)
	}
}

func TestHeaderOverride(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	evs, err := openStream(t, ts, reqOpts{includeUsage: true, headers: map[string]string{
		HeaderTokens: "7", HeaderTokensPerChunk: "2", HeaderLang: "ko", HeaderTTFT: "1ms", HeaderITL: "1ms", HeaderITLJitter: "0.5",
	}}).all()
	if err != nil {
		t.Fatal(err)
	}
	sum := checkShape(t, evs, true)
	if len(sum.contents) != 4 || sum.usage.CompletionTokens != 7 {
		t.Errorf("got %d chunks and %d tokens, want 4 and 7", len(sum.contents), sum.usage.CompletionTokens)
	}
	if !hasHangulOrPunct(strings.Join(sum.contents, "")) {
		t.Errorf("got %q, want Korean", strings.Join(sum.contents, ""))
	}

	// X-Sim-Profile picks a profile whatever the model; the response says which.
	resp := post(t, ts, reqOpts{headers: map[string]string{HeaderProfile: "sim-fast", HeaderTokens: "1"}})
	resp.Body.Close()
	if got := resp.Header.Get("X-Sim-Profile"); got != "sim-fast" {
		t.Errorf("X-Sim-Profile response header: got %q, want sim-fast", got)
	}
	// The model name selects its profile.
	resp = post(t, ts, reqOpts{model: "sim-gpt-4.1", headers: map[string]string{HeaderTokens: "1", HeaderTTFT: "0s"}})
	resp.Body.Close()
	if got := resp.Header.Get("X-Sim-Profile"); got != "sim-gpt-4.1" {
		t.Errorf("profile for model sim-gpt-4.1: got %q", got)
	}
}

func TestBadHeaders(t *testing.T) {
	tests := []struct{ header, value string }{
		{HeaderTTFT, "fast"},
		{HeaderTTFT, "-1s"},
		{HeaderTTFTP99, "1ms"}, // below the median of the default profile
		{HeaderITL, "10"},
		{HeaderITLJitter, "-0.1"},
		{HeaderPrefillPerToken, "x"},
		{HeaderTokens, "0"},
		{HeaderTokensPerChunk, "zero"},
		{HeaderLang, "fr"},
		{HeaderSeed, "1.5"},
		{HeaderFailStatus, "200"},
		{HeaderFailRate, "1.5"},
		{HeaderStallFirst, "soon"},
		{HeaderStallFirstRate, "NaN"},
		{HeaderStallAt, "-2"},
		{HeaderStallFor, "long"},
		{HeaderStallRate, "2"},
		{HeaderCutAt, "0"},
		{HeaderCutRate, "half"},
		{HeaderErrorAt, "x"},
		{HeaderErrorRate, "-1"},
		{HeaderMalformedAt, "1e3"},
		{HeaderMalformedRate, "7"},
		{HeaderProfile, "no-such-profile"},
	}
	_, ts := newTestServer(t, Options{Profile: DefaultProfile()})
	for _, tt := range tests {
		t.Run(tt.header+"="+tt.value, func(t *testing.T) {
			resp := post(t, ts, reqOpts{stream: true, headers: map[string]string{tt.header: tt.value}})
			defer resp.Body.Close()
			var e api.ErrorResponse
			err := json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != 400 || err != nil {
				t.Fatalf("got status %d (%v), want 400 with an error body", resp.StatusCode, err)
			}
			if e.Error.Param == nil || *e.Error.Param != tt.header || !strings.Contains(e.Error.Message, tt.header) {
				t.Errorf("error: got %+v, want it to name %s", e.Error, tt.header)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"invalid json", "POST", "/v1/chat/completions", `{"model":`, 400},
		{"missing model", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400},
		{"missing messages", "POST", "/v1/chat/completions", `{"model":"m"}`, 400},
		{"negative max_tokens", "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`, 400},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405},
		{"wrong method models", "POST", "/v1/models", ``, 405},
		{"unknown path", "GET", "/v2/whatever", ``, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.ErrorResponse
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Message == "" {
				t.Errorf("body: want an OpenAI error (%v)", err)
			}
			if resp.StatusCode != tt.want {
				t.Errorf("status: got %d, want %d (%s)", resp.StatusCode, tt.want, e.Error.Message)
			}
		})
	}
}

func TestNonStream(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, tt := range []struct {
		name       string
		maxTokens  int
		want       int
		wantFinish string
	}{{"full", 0, 12, "stop"}, {"max_tokens", 4, 4, "length"}} {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, ts, reqOpts{maxTokens: tt.maxTokens})
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
				t.Fatalf("got %d %q, want 200 application/json", resp.StatusCode, ct)
			}
			var c api.Completion
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				t.Fatal(err)
			}
			if c.Object != "chat.completion" || c.Model != "some-model" || len(c.Choices) != 1 {
				t.Fatalf("completion: got %+v", c)
			}
			ch := c.Choices[0]
			if ch.Message.Role != "assistant" || ch.Message.Content == "" || ch.FinishReason != tt.wantFinish {
				t.Errorf("choice: got %+v, want assistant text with finish %q", ch, tt.wantFinish)
			}
			if c.Usage == nil || c.Usage.CompletionTokens != tt.want || c.Usage.PromptTokens <= 0 {
				t.Errorf("usage: got %+v, want %d completion tokens", c.Usage, tt.want)
			}
		})
	}
}

func TestModels(t *testing.T) {
	_, ts := newTestServer(t, Options{Profile: DefaultProfile()})
	resp, err := ts.Client().Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list api.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, m := range list.Data {
		got[m.ID] = true
		if m.Object != "model" {
			t.Errorf("model %s object: got %q, want model", m.ID, m.Object)
		}
	}
	for _, want := range []string{"sim-default", "sim-fast", "sim-gpt-4.1", "sim-claude-sonnet-4.5", "sim-gemini-2.5-flash", "sim-deepseek-v3.2", "sim-flaky"} {
		if !got[want] {
			t.Errorf("models: %s missing from %v", want, got)
		}
	}
	if list.Object != "list" || len(list.Data) != 7 {
		t.Errorf("list: got object %q with %d models, want list with 7", list.Object, len(list.Data))
	}
}

func TestClientDisconnect(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	sr := openStream(t, ts, reqOpts{ctx: ctx, headers: map[string]string{HeaderITL: "1h"}})
	for range 2 { // role, first content
		if _, err := sr.next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	waitMetric(t, s, "streamgate_sim_streams_cancelled_total", 1)
	waitMetric(t, s, "streamgate_sim_inflight_streams", 0)
	if v := metricValue(t, s, "streamgate_sim_streams_completed_total"); v != 0 {
		t.Errorf("completed: got %v, want 0", v)
	}
}

func TestQueueFIFO(t *testing.T) {
	p := quick
	p.Tokens = 3
	s, ts := newTestServer(t, Options{Profile: p, MaxConcurrency: 1, Stamp: true})

	// A takes the only slot and holds it (an endless stall after chunk 1).
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := openStream(t, ts, reqOpts{ctx: ctxA, headers: map[string]string{HeaderStallAt: "2", HeaderStallFor: "1h"}})
	var lastA int64
	for range 2 {
		ev, err := a.next()
		if err != nil {
			t.Fatal(err)
		}
		lastA = stampOf(t, ev)
	}

	// B then C queue behind A, in that order.
	type result struct {
		evs []event
		err error
	}
	start := func() chan result {
		ch := make(chan result, 1)
		go func() {
			o := reqOpts{stream: true}
			resp, err := tryPost(ts, o)
			if err != nil {
				ch <- result{err: err}
				return
			}
			defer resp.Body.Close()
			r := sse.NewReader(resp.Body, 0)
			var evs []event
			for {
				ev, err := r.Next()
				if err != nil {
					if err == io.EOF {
						err = nil
					}
					ch <- result{evs, err}
					return
				}
				evs = append(evs, event{data: string(ev.Data), comment: string(ev.Comment)})
			}
		}()
		return ch
	}
	bc := start()
	waitMetric(t, s, "streamgate_sim_queued_requests", 1)
	cc := start()
	waitMetric(t, s, "streamgate_sim_queued_requests", 2)

	cancelA() // frees the slot: B, then C
	b, c := <-bc, <-cc
	if b.err != nil || c.err != nil {
		t.Fatalf("queued streams: got errors %v, %v", b.err, c.err)
	}
	bFirst, bLast := stampOf(t, b.evs[0]), stampOf(t, b.evs[len(b.evs)-1])
	cFirst := stampOf(t, c.evs[0])
	if bFirst < lastA {
		t.Errorf("B's first event (sent_ns %d) came before A's last (%d)", bFirst, lastA)
	}
	if cFirst < bLast {
		t.Errorf("C's first event (sent_ns %d) came before B's last (%d): not one after the other", cFirst, bLast)
	}
}

func stampOf(t *testing.T, ev event) int64 {
	t.Helper()
	ns, ok := sse.ParseStamp([]byte(ev.comment))
	if !ok {
		t.Fatalf("event %q: no sent_ns stamp in comment %q", ev.data, ev.comment)
	}
	return ns
}

func TestStamp(t *testing.T) {
	_, ts := newTestServer(t, Options{Stamp: true})
	evs, err := openStream(t, ts, reqOpts{includeUsage: true}).all()
	if err != nil {
		t.Fatal(err)
	}
	prev := int64(0)
	for i, ev := range evs {
		ns := stampOf(t, ev)
		if ns < prev {
			t.Errorf("event %d: stamp %d before the previous %d", i, ns, prev)
		}
		prev = ns
	}
}

// metricValue reads one sample from the server's /metrics.
func metricValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return v
		}
	}
	return -1
}

// waitMetric polls /metrics until name reaches want, failing after 5s.
func waitMetric(t *testing.T, s *Server, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v := metricValue(t, s, name)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric %s: got %v, want %v", name, v, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	streamText(t, ts, reqOpts{})
	// Counted after the handler's last write: the client can be faster.
	waitMetric(t, s, "streamgate_sim_streams_completed_total", 1)
	resp, err := ts.Client().Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"streamgate_sim_requests_total 1", "streamgate_sim_streams_completed_total 1",
		"streamgate_sim_streams_cancelled_total 0", "streamgate_sim_chunks_total 12", "go_gc_duration_seconds"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics: %q missing", want)
		}
	}
}

func ExampleNew() {
	ts := httptest.NewServer(New(Options{Profile: Profile{Name: "demo", Tokens: 3}, Seed: 1}))
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var c api.Completion
	json.NewDecoder(resp.Body).Decode(&c)
	fmt.Println(resp.StatusCode, c.Usage.CompletionTokens, c.Choices[0].FinishReason)
	// Output: 200 3 stop
}
