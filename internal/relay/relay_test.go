package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func role() string {
	return `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`
}
func content(s string) string {
	return `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}`
}
func finish() string {
	return `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
}
func usageChunk(in, out int) string {
	return fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

// sseUpstream serves the given script: each string is one data event,
// "" is the end of the handler without [DONE]; "[DONE]" ends properly.
func sseUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request, send func(string))) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		sw := sse.NewWriter(w)
		h(w, r, func(s string) {
			if s == "[DONE]" {
				sw.Done()
				return
			}
			sw.Data([]byte(s))
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

type result struct {
	err   error
	stats relay.Stats
	sent  bool
}

// front is the client-facing side: a server whose handler relays the
// upstreams in order, falling back while no content was sent.
func front(t *testing.T, opts relay.Options, ups ...string) (*httptest.Server, chan result) {
	t.Helper()
	var clients []*openai.Client
	for _, u := range ups {
		clients = append(clients, openai.New(u+"/v1", "sk-up", openai.Options{MaxLine: 4096}))
	}
	results := make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess := relay.NewSession(w, opts)
		defer sess.Close()
		var err error
		for _, c := range clients {
			err = sess.Attempt(r.Context(), nil, func(ctx context.Context) (provider.Stream, error) {
				return c.Open(ctx, &provider.Request{Model: "m", Stream: true, Body: []byte(`{"messages":[]}`)})
			})
			if err == nil || sess.ContentSent() {
				break
			}
		}
		if err != nil {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": err.Error(), "type": "upstream_error"}})
			sess.Fail(http.StatusBadGateway, b)
		}
		results <- result{err: err, stats: sess.Stats(), sent: sess.ContentSent()}
	}))
	t.Cleanup(func() {
		srv.Close()
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	})
	return srv, results
}

func post(t *testing.T, url string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close(); http.DefaultClient.CloseIdleConnections() })
	return resp
}

func wait(t *testing.T, results chan result) result {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("relay did not finish")
	}
	return result{}
}

// Each chunk reaches the client before the upstream sends the next one.
func TestChunksRelayedOneByOne(t *testing.T) {
	const n = 5
	release := make(chan struct{})
	up := sseUpstream(t, func(w http.ResponseWriter, r *http.Request, send func(string)) {
		send(role())
		for i := range n {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			send(content(fmt.Sprint("t", i)))
		}
		send(finish())
		send(usageChunk(3, n))
		send("[DONE]")
	})
	fr, results := front(t, relay.Options{FirstToken: 5 * time.Second, Idle: 5 * time.Second}, up.URL)
	// The role chunk is held until content: headers come with the first
	// content, so release it before waiting for the response.
	go func() { release <- struct{}{} }()
	resp := post(t, fr.URL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200", resp.StatusCode)
	}
	rd := sse.NewReader(resp.Body, 0)
	ev, err := rd.Next()
	if err != nil || !strings.Contains(string(ev.Data), `"role":"assistant"`) {
		t.Fatalf("got first event %q, %v; want the role chunk", evData(ev), err)
	}
	for i := range n {
		if i > 0 {
			release <- struct{}{} // the upstream sends chunk i only now
		}
		ev, err := rd.Next()
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if want := fmt.Sprintf(`"content":"t%d"`, i); !strings.Contains(string(ev.Data), want) {
			t.Fatalf("chunk %d: got %q, want it to contain %s", i, ev.Data, want)
		}
	}
	if ev, err := rd.Next(); err != nil || !strings.Contains(string(ev.Data), `"finish_reason":"stop"`) {
		t.Fatalf("got %q, %v; want the finish chunk", evData(ev), err)
	}
	// No include_usage: the usage chunk is dropped, [DONE] comes next.
	if ev, err := rd.Next(); err != io.EOF {
		t.Fatalf("got %q, %v; want [DONE] (io.EOF)", evData(ev), err)
	}
	res := wait(t, results)
	if res.err != nil {
		t.Fatalf("relay: %v", res.err)
	}
	if !res.stats.HasUsage || res.stats.Usage.CompletionTokens != n || res.stats.ContentChunks != n {
		t.Errorf("got stats %+v, want usage %d tokens and %d content chunks", res.stats, n, n)
	}
}

func evData(ev *sse.Event) string {
	if ev == nil {
		return ""
	}
	return string(ev.Data)
}

func TestUsageChunkOnlyWhenAsked(t *testing.T) {
	for _, include := range []bool{false, true} {
		t.Run(fmt.Sprint("include_usage=", include), func(t *testing.T) {
			up := sseUpstream(t, func(w http.ResponseWriter, r *http.Request, send func(string)) {
				send(role())
				send(content("a"))
				send(finish())
				send(usageChunk(7, 1))
				send("[DONE]")
			})
			fr, results := front(t, relay.Options{IncludeUsage: include}, up.URL)
			resp := post(t, fr.URL)
			body, _ := io.ReadAll(resp.Body)
			if got := strings.Contains(string(body), `"usage"`); got != include {
				t.Errorf("got usage chunk sent %v, want %v; body:\n%s", got, include, body)
			}
			if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
				t.Errorf("got body ending %q, want [DONE] last", body[max(0, len(body)-30):])
			}
			res := wait(t, results)
			if res.stats.Usage.PromptTokens != 7 {
				t.Errorf("got prompt tokens %d, want 7 (usage read either way)", res.stats.Usage.PromptTokens)
			}
		})
	}
}

// Faults after the commit point end in one SSE error event and no [DONE];
// before it, the attempt error is returned with nothing sent.
func TestFaults(t *testing.T) {
	long := strings.Repeat("x", 8192)
	tests := []struct {
		name     string
		script   func(r *http.Request, send func(string))
		wantErr  error
		wantSent bool
	}{
		{"stall before first token", func(r *http.Request, send func(string)) {
			send(role())
			<-r.Context().Done()
		}, provider.ErrFirstTokenTimeout, false},
		{"stall mid-stream", func(r *http.Request, send func(string)) {
			send(content("a"))
			<-r.Context().Done()
		}, provider.ErrIdleTimeout, true},
		{"cut mid-stream", func(r *http.Request, send func(string)) {
			send(content("a"))
		}, provider.ErrTruncated, true},
		{"malformed line", func(r *http.Request, send func(string)) {
			send(content("a"))
			send(`{"choices":[{"delta":{"content":"b"`)
			send("[DONE]")
		}, provider.ErrMalformed, true},
		{"over-long line", func(r *http.Request, send func(string)) {
			send(content("a"))
			send(content(long))
			send("[DONE]")
		}, provider.ErrMalformed, true},
		{"cut before content", func(r *http.Request, send func(string)) {
			send(role())
		}, provider.ErrTruncated, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := sseUpstream(t, func(w http.ResponseWriter, r *http.Request, send func(string)) { tt.script(r, send) })
			fr, results := front(t, relay.Options{FirstToken: 100 * time.Millisecond, Idle: 100 * time.Millisecond}, up.URL)
			resp := post(t, fr.URL)
			body, _ := io.ReadAll(resp.Body)
			res := wait(t, results)
			if !errors.Is(res.err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", res.err, tt.wantErr)
			}
			if res.sent != tt.wantSent {
				t.Errorf("got content sent %v, want %v", res.sent, tt.wantSent)
			}
			if !tt.wantSent {
				if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), "data:") {
					t.Errorf("got %d %q, want 502 with a JSON error and no events", resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Errorf("got status %d, want 200 (committed)", resp.StatusCode)
			}
			if n := strings.Count(string(body), `data: {"error"`); n != 1 {
				t.Errorf("got %d error events, want 1; body:\n%s", n, body)
			}
			if strings.Contains(string(body), "data: [DONE]") {
				t.Errorf("got [DONE] after an error; body:\n%s", body)
			}
		})
	}
}

// A client that goes away cancels the upstream request.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	upstreamDone := make(chan time.Time, 1)
	up := sseUpstream(t, func(w http.ResponseWriter, r *http.Request, send func(string)) {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-r.Context().Done():
				upstreamDone <- time.Now()
				return
			case <-tick.C:
				send(content(fmt.Sprint(i)))
			}
		}
	})
	fr, results := front(t, relay.Options{}, up.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fr.URL, strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for range 3 { // read three events
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	gone := time.Now()
	resp.Body.Close()
	select {
	case at := <-upstreamDone:
		t.Logf("upstream request ended %v after the client left", at.Sub(gone))
	case <-time.After(2 * time.Second):
		t.Fatal("upstream request still running 2s after the client left")
	}
	res := wait(t, results)
	if !errors.Is(res.err, context.Canceled) && !errors.Is(res.err, relay.ErrClientGone) {
		t.Errorf("got %v, want context.Canceled or ErrClientGone", res.err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// Keep-alive comments commit the headers but not content: the next route
// still serves the stream behind them.
func TestKeepAliveKeepsFallbackOpen(t *testing.T) {
	sawKeepAlive := make(chan struct{})
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-sawKeepAlive:
		case <-r.Context().Done():
		}
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}))
	defer first.Close()
	second := sseUpstream(t, func(w http.ResponseWriter, r *http.Request, send func(string)) {
		send(content("from-second"))
		send("[DONE]")
	})
	fr, results := front(t, relay.Options{KeepAlive: 5 * time.Millisecond}, first.URL, second.URL)
	resp := post(t, fr.URL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200", resp.StatusCode)
	}
	rd := sse.NewReader(resp.Body, 0)
	rd.CommentsOnly = true
	ev, err := rd.Next()
	if err != nil || string(ev.Comment) != "keep-alive" {
		t.Fatalf("got %+v, %v; want a keep-alive comment", ev, err)
	}
	close(sawKeepAlive)
	for {
		ev, err = rd.Next()
		if err != nil {
			t.Fatalf("got %v before content", err)
		}
		if ev.Data != nil {
			break
		}
	}
	if !strings.Contains(string(ev.Data), "from-second") {
		t.Errorf("got %q, want the second route's content", ev.Data)
	}
	if res := wait(t, results); res.err != nil {
		t.Errorf("got %v, want nil", res.err)
	}
}

// A stamping upstream's "sent_ns=" comment reaches the client as it came,
// in the block of the event it stamped; a comment that is no stamp does not.
func TestStampPassedThrough(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(w.Header())
		io.WriteString(w, ": sent_ns=1796092631322220391\ndata: "+role()+"\n\n"+
			": sent_ns=1796092631322230015\ndata: "+content("hi")+"\n\n"+
			": sent_ns=12x\ndata: "+finish()+"\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	srv, results := front(t, relay.Options{}, up.URL)
	resp := post(t, srv.URL)
	body, _ := io.ReadAll(resp.Body)
	if r := wait(t, results); r.err != nil {
		t.Fatalf("relay: %v", r.err)
	}
	got := string(body)
	want := ": sent_ns=1796092631322230015\ndata: " + content("hi") + "\n\n"
	if !strings.Contains(got, want) || strings.Contains(got, "12x") || !strings.HasSuffix(got, "data: "+finish()+"\n\ndata: [DONE]\n\n") {
		t.Errorf("client got %q; want the content chunk after its stamp as sent (%q), the finish without the malformed one", got, want)
	}
}

// TestUsageStats: an attempt's Stats say which reported counts stand for
// it and estimate its output from its text (fit.Text), not its chunks: a
// usage chunk at the end covers both counts; usage on a chunk followed by
// content without usage covers the prompt only; a cut before any usage
// leaves the estimate alone; a count that is not a token count covers
// nothing.
func TestUsageStats(t *testing.T) {
	withUsage := func(c string, in, out int) string {
		return c[:len(c)-1] + fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
	}
	words := []string{"Streaming gateways", " relay tokens", " as soon as", " they arrive."}
	for _, tt := range []struct {
		name           string
		script         []string
		has            bool
		prompt, output bool
		usageOut       int
	}{
		{"usage at the end", []string{role(), content(words[0]), content(words[1]), finish(), usageChunk(7, 9), "[DONE]"}, true, true, true, 9},
		{"content after usage, cut", []string{withUsage(content(words[0]), 7, 3), content(words[1]), ""}, true, true, false, 3},
		{"usage on every chunk, cut", []string{withUsage(content(words[0]), 7, 3), withUsage(content(words[1]), 7, 5), ""}, true, true, true, 5},
		{"no usage, cut", []string{content(words[0]), content(words[1]), content(words[2]), content(words[3]), ""}, false, false, false, 0},
		{"not a token count", []string{content(words[0]), finish(), `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":2,"total_tokens":1}}`, "[DONE]"}, true, false, false, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := sseUpstream(t, func(w http.ResponseWriter, r *http.Request, send func(string)) {
				for _, s := range tt.script {
					if s == "" {
						return
					}
					send(s)
				}
			})
			srv, results := front(t, relay.Options{IncludeUsage: true}, up.URL)
			io.Copy(io.Discard, post(t, srv.URL).Body)
			st := wait(t, results).stats
			var text strings.Builder
			for _, s := range tt.script {
				var c struct {
					Choices []struct{ Delta struct{ Content string } } `json:"choices"`
				}
				if json.Unmarshal([]byte(s), &c) == nil && len(c.Choices) == 1 {
					text.WriteString(c.Choices[0].Delta.Content)
				}
			}
			if st.HasUsage != tt.has || st.PromptReported != tt.prompt || st.OutputReported != tt.output || tt.has && st.Usage.CompletionTokens != tt.usageOut {
				t.Errorf("got usage %v %+v, prompt reported %v, output reported %v; want %v (%d out), %v, %v",
					st.HasUsage, st.Usage, st.PromptReported, st.OutputReported, tt.has, tt.usageOut, tt.prompt, tt.output)
			}
			if want := fit.EstimateText(text.String()); st.Output != want || want < 2 {
				t.Errorf("got output estimate %d, want fit's estimate of %q, %d", st.Output, text.String(), want)
			}
		})
	}
}

// TestBeforeEnd: Options.BeforeEnd runs once, before the client can read
// the stream's "[DONE]" (a client that sends its next request on reading
// it finds the request's slots given back); a stream cut before its end
// does not run it.
func TestBeforeEnd(t *testing.T) {
	for _, whole := range []bool{true, false} {
		t.Run(fmt.Sprint("whole=", whole), func(t *testing.T) {
			up := sseUpstream(t, func(w http.ResponseWriter, r *http.Request, send func(string)) {
				send(role())
				send(content("a"))
				if whole {
					send(finish())
					send("[DONE]")
				}
			})
			var calls atomic.Int32
			fr, results := front(t, relay.Options{BeforeEnd: func() { calls.Add(1) }}, up.URL)
			resp := post(t, fr.URL)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if sc.Text() == "data: [DONE]" && calls.Load() != 1 {
					t.Errorf("the client read [DONE] with BeforeEnd run %d times, want once before", calls.Load())
				}
			}
			resp.Body.Close()
			wait(t, results)
			if want := map[bool]int32{true: 1, false: 0}[whole]; calls.Load() != want {
				t.Errorf("BeforeEnd ran %d times, want %d", calls.Load(), want)
			}
		})
	}
}
