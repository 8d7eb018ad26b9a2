package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const devKey = "sk-test-dev"

// recorder keeps the usage entries of a test.
type recorder struct {
	mu      sync.Mutex
	entries []usage.Entry
}

func (r *recorder) Record(e usage.Entry) {
	r.mu.Lock()
	r.entries = append(r.entries, e)
	r.mu.Unlock()
}

func (r *recorder) all() []usage.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]usage.Entry(nil), r.entries...)
}

type env struct {
	url string
	rec *recorder
	gw  *gateway.Gateway
}

// baseConfig: an in-process sim provider, short timeouts, a few models.
func baseConfig() *config.Config {
	return &config.Config{
		Timeouts: config.Timeouts{
			Connect:    config.Duration(time.Second),
			FirstToken: config.Duration(300 * time.Millisecond),
			Idle:       config.Duration(300 * time.Millisecond),
		},
		MaxBody:   4096,
		Providers: []config.Provider{{Name: "sim", Kind: "sim"}},
		Keys: []config.Key{
			{Name: "dev", Key: devKey},
			{Name: "narrow", Key: "sk-narrow", Models: []string{"m-sim"}},
		},
		Models: []config.Model{
			{Name: "m-sim", Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}}, Price: config.Price{Input: 1, Output: 2}},
			{Name: "m-other", Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}}},
		},
	}
}

// start runs a gateway over loopback; the test ends it and checks each
// request left exactly one usage entry (wantEntries, when >= 0).
func start(t *testing.T, cfg *config.Config) *env {
	t.Helper()
	return startWith(t, gateway.Options{Config: cfg, KeepAlive: -1})
}

// startWith is start with the gateway's options; the Recorder is the
// test's own, and so is the Logger unless opts has one.
func startWith(t testing.TB, opts gateway.Options) *env {
	t.Helper()
	rec := &recorder{}
	opts.Recorder = rec
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	gw, err := gateway.New(opts)
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() {
		srv.Close()
		gw.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return &env{url: srv.URL, rec: rec, gw: gw}
}

// serve runs the gateway with its own Serve (graceful shutdown, h2c) on a
// loopback port. stop cancels Serve and returns its error; it is also
// called at cleanup, so a test that does not stop it still ends cleanly.
func serve(t *testing.T, cfg *config.Config, grace time.Duration) (e *env, stop func() error) {
	t.Helper()
	return serveWith(t, gateway.Options{Config: cfg}, grace)
}

// serveWith is serve with opts: keep-alives off; by default a recorder
// (e.rec) and a discarding logger.
func serveWith(t *testing.T, opts gateway.Options, grace time.Duration) (e *env, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var rec *recorder
	if opts.Recorder == nil {
		rec = &recorder{}
		opts.Recorder = rec
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts.KeepAlive = -1
	gw, err := gateway.New(opts)
	if err != nil {
		ln.Close()
		t.Fatalf("gateway.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln, grace) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() { cancel(); serveErr = <-served })
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
		gw.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return &env{url: "http://" + ln.Addr().String(), rec: rec, gw: gw}, stop
}

func chatBody(model string, stream bool, extra string) string {
	return fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]%s}`, model, stream, extra)
}

// do sends a request; header pairs are set as given.
func do(t *testing.T, method, url, key, body string, header ...string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	// Fast sim pacing unless the test says otherwise.
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "1ms")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readError(t *testing.T, resp *http.Response) api.ErrorResponse {
	t.Helper()
	var e api.ErrorResponse
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("got body %q, want an OpenAI error object", b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
	return e
}

// waitEntries waits for n usage entries (the handler records after the
// response is complete) and returns them.
func (e *env) waitEntries(t *testing.T, n int) []usage.Entry {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := e.rec.all()
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("got %d usage entries, want %d: %+v", len(got), n, got)
			}
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBadInput(t *testing.T) {
	e := start(t, baseConfig())
	chat := e.url + "/v1/chat/completions"
	tests := []struct {
		name, method, url, key, body string
		wantStatus                   int
		wantMsg                      string
		wantEntry                    bool
		header                       []string
	}{
		{"invalid JSON", "POST", chat, devKey, `{"model":`, 400, "invalid JSON", true, nil},
		{"not an object", "POST", chat, devKey, `[1]`, 400, "invalid JSON", true, nil},
		{"missing model", "POST", chat, devKey, `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model", true, nil},
		{"missing messages", "POST", chat, devKey, `{"model":"m-sim"}`, 400, "messages", true, nil},
		{"messages a string", "POST", chat, devKey, `{"model":"m-sim","messages":"hi"}`, 400, "invalid field messages: must be an array of message objects", true, nil},
		{"message a string", "POST", chat, devKey, `{"model":"m-sim","messages":["hi"]}`, 400, "invalid field messages: must be an array of message objects", true, nil},
		{"role a number", "POST", chat, devKey, `{"model":"m-sim","messages":[{"role":1}]}`, 400, "invalid field messages.role: must be a string, got a number", true, nil},
		{"stream a string", "POST", chat, devKey, `{"model":"m-sim","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid field stream: must be true or false, got a string", true, nil},
		{"max_tokens fractional", "POST", chat, devKey, `{"model":"m-sim","max_tokens":1.5,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid field max_tokens: must be an integer, got a number (1.5)", true, nil},
		{"model an object", "POST", chat, devKey, `{"model":{},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid field model: must be a string, got an object", true, nil},
		{"unknown model", "POST", chat, devKey, chatBody("nope", false, ""), 404, `"nope"`, true, nil},
		{"no key", "POST", chat, "", chatBody("m-sim", false, ""), 401, "missing API key", true, nil},
		{"wrong key", "POST", chat, "sk-wrong", chatBody("m-sim", false, ""), 401, "invalid API key", true, nil},
		{"key without Bearer", "POST", chat, "", chatBody("m-sim", false, ""), 401, `the "Bearer " scheme is missing`, true, []string{"Authorization", devKey}},
		{"model not allowed", "POST", chat, "sk-narrow", chatBody("m-other", false, ""), 403, "m-other", true, nil},
		{"body too large", "POST", chat, devKey, chatBody("m-sim", false, `,"pad":"`+strings.Repeat("x", 5000)+`"`), 413, "too large", true, nil},
		{"wrong method", "GET", chat, devKey, "", 405, "method", true, nil},
		{"wrong path", "POST", e.url + "/v1/chat/complete", devKey, "{}", 404, "/v1/chat/complete", false, nil},
		{"models without key", "GET", e.url + "/v1/models", "", "", 401, "missing API key", false, nil},
	}
	entries := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, tt.method, tt.url, tt.key, tt.body, tt.header...)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("got status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if resp.StatusCode == 405 && resp.Header.Get("Allow") != "POST" {
				t.Errorf("got Allow %q, want POST", resp.Header.Get("Allow"))
			}
			if resp.Header.Get(gateway.HeaderRequestID) == "" {
				t.Errorf("got no %s header", gateway.HeaderRequestID)
			}
			er := readError(t, resp)
			if !strings.Contains(er.Error.Message, tt.wantMsg) {
				t.Errorf("got message %q, want it to name %q", er.Error.Message, tt.wantMsg)
			}
			if tt.wantEntry {
				entries++
				got := e.waitEntries(t, entries)
				last := got[len(got)-1]
				if last.Outcome != usage.OutcomeRejected || last.Status != tt.wantStatus {
					t.Errorf("got entry outcome %q status %d, want %q %d", last.Outcome, last.Status, usage.OutcomeRejected, tt.wantStatus)
				}
			}
		})
	}
}

func TestModelsListsOnlyAllowed(t *testing.T) {
	e := start(t, baseConfig())
	for _, tt := range []struct {
		key  string
		want []string
	}{
		{devKey, []string{"m-sim", "m-other"}},
		{"sk-narrow", []string{"m-sim"}},
	} {
		resp := do(t, "GET", e.url+"/v1/models", tt.key, "")
		var list api.ModelList
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range list.Data {
			got = append(got, m.ID)
		}
		if list.Object != "list" || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("key %s: got %s %v, want list %v", tt.key, list.Object, got, tt.want)
		}
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	e := start(t, baseConfig())
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp := do(t, "GET", e.url+path, "", ""); resp.StatusCode != 200 {
			t.Errorf("%s: got %d, want 200", path, resp.StatusCode)
		}
	}
	io.Copy(io.Discard, do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, "")).Body)
	e.waitEntries(t, 1)
	resp := do(t, "GET", e.url+"/metrics", "", "")
	b, _ := io.ReadAll(resp.Body)
	for _, name := range []string{
		"streamgate_time_to_first_token_seconds_bucket", "streamgate_inter_token_latency_seconds_bucket",
		"streamgate_stream_max_gap_seconds", "streamgate_output_tokens_per_second", "streamgate_gateway_overhead_seconds",
		`streamgate_requests_total{code="200",model="m-sim",outcome="ok",route="sim/sim-fast"} 1`, "streamgate_tokens_total",
		"streamgate_inflight_streams 0", "go_gc_pauses_seconds", "process_cpu_seconds_total",
	} {
		if !strings.Contains(string(b), name) {
			t.Errorf("metrics: missing %s", name)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "streamgate_requests_total") {
					t.Log(l)
				}
			}
		}
	}
	if strings.Contains(string(b), devKey) {
		t.Error("metrics contain the API key")
	}
}

// readStream reads a gateway stream to its end: the events, whether [DONE]
// came, and the read error otherwise.
func readStream(t *testing.T, resp *http.Response) (events []string, done bool) {
	t.Helper()
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return events, true
		}
		if err != nil {
			return events, false
		}
		events = append(events, string(ev.Data))
	}
}

func TestStreamThroughSim(t *testing.T) {
	for _, include := range []bool{false, true} {
		t.Run(fmt.Sprint("include_usage=", include), func(t *testing.T) {
			e := start(t, baseConfig())
			extra := ""
			if include {
				extra = `,"stream_options":{"include_usage":true}`
			}
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, extra), "X-Request-Id", "my-id-1")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("got %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if got := resp.Header.Get(gateway.HeaderRequestID); got != "my-id-1" {
				t.Errorf("got request id %q, want the client's my-id-1", got)
			}
			if got := resp.Header.Get(gateway.HeaderRoute); got != "sim/sim-fast" {
				t.Errorf("got route %q, want sim/sim-fast", got)
			}
			if got := resp.Header.Get(gateway.HeaderAttempts); got != "1" {
				t.Errorf("got attempts %q, want 1", got)
			}
			events, done := readStream(t, resp)
			if !done {
				t.Fatalf("stream ended without [DONE]: %q", events)
			}
			sawUsage := strings.Contains(strings.Join(events, "\n"), `"usage":{`)
			if sawUsage != include {
				t.Errorf("got usage chunk %v, want %v", sawUsage, include)
			}
			en := e.waitEntries(t, 1)[0]
			if en.Outcome != usage.OutcomeOK || en.OutputTokens != 4 || en.InputTokens == 0 || en.TokenSource != "usage" || en.KeyID != "dev" || en.RequestID != "my-id-1" {
				t.Errorf("got entry %+v, want ok with usage (4 output tokens) recorded either way", en)
			}
			if want := (float64(en.InputTokens)*1 + 4*2) / 1e6; en.CostUSD != want {
				t.Errorf("got cost %v, want %v", en.CostUSD, want)
			}
		})
	}
}

func TestOfficialClient(t *testing.T) {
	e := start(t, baseConfig())
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{
		Model:     "m-sim",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		MaxTokens: openai.Int(6),
	}

	comp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("non-streaming: %v", err)
	}
	if comp.Usage.CompletionTokens != 6 || len(comp.Choices) == 0 || comp.Choices[0].Message.Content == "" {
		t.Errorf("non-streaming: got usage %+v and %d choices, want 6 completion tokens and content", comp.Usage, len(comp.Choices))
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streaming: %v", err)
	}
	if acc.Usage.CompletionTokens != 6 || acc.Choices[0].Message.Content == "" {
		t.Errorf("streaming: got usage %+v, content %q, want 6 completion tokens and content", acc.Usage, acc.Choices[0].Message.Content)
	}
	entries := e.waitEntries(t, 2)
	for _, en := range entries {
		if en.Outcome != usage.OutcomeOK || en.OutputTokens != 6 {
			t.Errorf("got entry %+v, want ok with 6 output tokens", en)
		}
	}
	if entries[0].Stream || !entries[1].Stream {
		t.Errorf("got stream flags %v %v, want false true", entries[0].Stream, entries[1].Stream)
	}
}

// Each sim fault, through the gateway.
func TestSimFaults(t *testing.T) {
	tests := []struct {
		name        string
		header      []string
		wantStatus  int
		wantCode    string // error code in the JSON or the SSE error event
		wantOutcome string
		midStream   bool
	}{
		{"429 before the stream", []string{"X-Sim-Fail-Status", "429"}, 429, "", usage.OutcomeUpstreamError, false},
		{"500 before the stream", []string{"X-Sim-Fail-Status", "500"}, 502, "", usage.OutcomeUpstreamError, false},
		{"502 before the stream", []string{"X-Sim-Fail-Status", "502"}, 502, "", usage.OutcomeUpstreamError, false},
		{"503 before the stream", []string{"X-Sim-Fail-Status", "503"}, 503, "", usage.OutcomeUpstreamError, false},
		{"stall before first token", []string{"X-Sim-Stall-First", "3s"}, 504, "first_token_timeout", usage.OutcomeTimeout, false},
		{"stall mid-stream", []string{"X-Sim-Stall-At", "2", "X-Sim-Stall-For", "3s"}, 200, "idle_timeout", usage.OutcomeTimeout, true},
		{"cut mid-stream", []string{"X-Sim-Cut-At", "2"}, 200, "stream_truncated", usage.OutcomeUpstreamError, true},
		{"malformed line", []string{"X-Sim-Malformed-At", "2"}, 200, "malformed_upstream_event", usage.OutcomeUpstreamError, true},
		{"error event", []string{"X-Sim-Error-At", "2"}, 200, "", usage.OutcomeUpstreamError, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, baseConfig())
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, ""), tt.header...)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if !tt.midStream {
				er := readError(t, resp)
				if tt.wantCode != "" && (er.Error.Code == nil || *er.Error.Code != tt.wantCode) {
					t.Errorf("got code %v, want %s", er.Error.Code, tt.wantCode)
				}
				// The sim answers 429 with Retry-After: 1; the gateway passes it on.
				if ra := resp.Header.Get("Retry-After"); (tt.wantStatus == 429) != (ra == "1") {
					t.Errorf("Retry-After: got %q with status %d, want \"1\" exactly on 429", ra, tt.wantStatus)
				}
			} else {
				events, done := readStream(t, resp)
				if done {
					t.Errorf("got [DONE] after a fault: %q", events)
				}
				var errs []string
				for _, ev := range events {
					if strings.HasPrefix(ev, `{"error"`) {
						errs = append(errs, ev)
					}
				}
				if len(errs) != 1 {
					t.Fatalf("got %d error events, want 1: %q", len(errs), events)
				}
				if !strings.Contains(errs[0], tt.wantCode) || !strings.HasPrefix(events[len(events)-1], `{"error"`) {
					t.Errorf("got events %q, want the last to be an error naming %q", events, tt.wantCode)
				}
			}
			en := e.waitEntries(t, 1)[0]
			if en.Outcome != tt.wantOutcome || en.Error == "" {
				t.Errorf("got entry outcome %q error %q, want %q with a message", en.Outcome, en.Error, tt.wantOutcome)
			}
		})
	}
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	// A socket bound but not listening: a connection to it is refused,
	// and no other test can take the port while it is held (a listener
	// closed at once could be reused by a parallel test's server).
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

func TestFallback(t *testing.T) {
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
	}))
	defer unavailable.Close()
	for _, tt := range []struct {
		name, baseURL, reason string
	}{
		{"first answers 503", unavailable.URL + "/v1", "status_5xx"},
		{"first refuses the connection", "http://" + closedPort(t) + "/v1", "connect"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Providers = append(cfg.Providers, config.Provider{Name: "bad", Kind: "openai", BaseURL: tt.baseURL})
			cfg.Models = append(cfg.Models, config.Model{Name: "fb", Routes: []config.Route{{Provider: "bad", Model: "x"}, {Provider: "sim", Model: "sim-fast"}}})
			e := start(t, cfg)
			for _, stream := range []bool{true, false} {
				resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("fb", stream, ""))
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRoute) != "sim/sim-fast" || resp.Header.Get(gateway.HeaderAttempts) != "2" {
					t.Errorf("stream=%v: got %d route %q attempts %q, want 200 from sim/sim-fast after 2 attempts; body %s", stream,
						resp.StatusCode, resp.Header.Get(gateway.HeaderRoute), resp.Header.Get(gateway.HeaderAttempts), b)
				}
			}
			for _, en := range e.waitEntries(t, 2) {
				if en.Outcome != usage.OutcomeOK || en.Attempts != 2 || en.Route != "sim/sim-fast" {
					t.Errorf("got entry %+v, want ok after 2 attempts", en)
				}
			}
		})
	}
}

func TestNoFallbackAfterContent(t *testing.T) {
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]}`))
		// The handler returns: the stream ends without [DONE].
	}))
	defer cut.Close()
	called := make(chan struct{}, 1)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called <- struct{}{}
		http.Error(w, "no", 500)
	}))
	defer second.Close()
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "cut", Kind: "openai", BaseURL: cut.URL + "/v1"},
		config.Provider{Name: "second", Kind: "openai", BaseURL: second.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "fb", Routes: []config.Route{{Provider: "cut", Model: "x"}, {Provider: "second", Model: "y"}}})
	e := start(t, cfg)
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("fb", true, ""))
	events, done := readStream(t, resp)
	if resp.StatusCode != 200 || done || len(events) != 2 || !strings.Contains(events[0], "partial") || !strings.Contains(events[1], "stream_truncated") {
		t.Errorf("got %d %q done=%v, want 200, the partial chunk, one truncation error event, no [DONE]", resp.StatusCode, events, done)
	}
	select {
	case <-called:
		t.Error("the second route was called after content had been sent")
	default:
	}
	if en := e.waitEntries(t, 1)[0]; en.Attempts != 1 || en.Outcome != usage.OutcomeUpstreamError {
		t.Errorf("got entry %+v, want 1 attempt, upstream_error", en)
	}
}

// A client that leaves at chunk k cancels the upstream request.
func TestClientDisconnect(t *testing.T) {
	ended := make(chan time.Time, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				ended <- time.Now()
				return
			case <-tick.C:
				sw.Data([]byte(`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`))
			}
		}
	}))
	defer up.Close()
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Kind: "openai", BaseURL: up.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "endless", Routes: []config.Route{{Provider: "up", Model: "x"}}})
	e := start(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/chat/completions", strings.NewReader(chatBody("endless", true, "")))
	req.Header.Set("Authorization", "Bearer "+devKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := sse.NewReader(resp.Body, 0)
	for k := range 3 {
		if _, err := rd.Next(); err != nil {
			t.Fatalf("chunk %d: %v", k, err)
		}
	}
	cancel()
	left := time.Now()
	resp.Body.Close()
	select {
	case at := <-ended:
		t.Logf("upstream request ended %v after the client left", at.Sub(left))
	case <-time.After(2 * time.Second):
		t.Fatal("upstream request still open 2s after the client left")
	}
	en := e.waitEntries(t, 1)[0]
	if en.Outcome != usage.OutcomeClientCancelled || en.Status != gateway.StatusClientClosed || en.Attempts != 1 {
		t.Errorf("got entry %+v, want client_cancelled 499 after 1 attempt", en)
	}
}

// Shutdown lets a short stream finish and ends a stalled one after the
// grace period with an error event; both are recorded before Serve returns.
func TestGracefulShutdown(t *testing.T) {
	e, stop := serve(t, baseConfig(), 100*time.Millisecond)
	rec, url := e.rec, e.url
	// A stream stalled mid-way for longer than idle would allow... idle is
	// 300ms, grace 100ms: the shutdown ends it first.
	resp := do(t, "POST", url+"/v1/chat/completions", devKey, chatBody("m-sim", true, ""), "X-Sim-Stall-At", "2", "X-Sim-Stall-For", "5s")
	rd := sse.NewReader(resp.Body, 0)
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	// Serve returns once the grace period ended the stalled stream and
	// every handler recorded its usage.
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	var events []string
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		events = append(events, string(ev.Data))
	}
	if len(events) == 0 || !strings.Contains(events[len(events)-1], `"error"`) {
		t.Errorf("got events %q, want an error event last", events)
	}
	if got := rec.all(); len(got) != 1 {
		t.Errorf("got %d entries when Serve returned, want 1", len(got))
	}
	http.DefaultClient.CloseIdleConnections()
}

// An upstream 429 is answered 429 with its Retry-After passed on, after
// every route was tried.
func TestRateLimitRetryAfter(t *testing.T) {
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"rate limit reached","type":"rate_limit_error"}}`)
	}))
	defer limited.Close()
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "limited", Kind: "openai", BaseURL: limited.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "rl", Routes: []config.Route{{Provider: "limited", Model: "a"}, {Provider: "limited", Model: "b"}}})
	e := start(t, cfg)
	for _, stream := range []bool{true, false} {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("rl", stream, ""))
		er := readError(t, resp)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(er.Error.Message, "rate limiting (429)") {
			t.Errorf("stream=%v: got %d Retry-After %q message %q, want 429, 7 and a rate-limit message", stream,
				resp.StatusCode, resp.Header.Get("Retry-After"), er.Error.Message)
		}
	}
	for _, en := range e.waitEntries(t, 2) {
		if en.Attempts != 2 || en.Status != 429 {
			t.Errorf("got entry %+v, want 2 attempts, status 429", en)
		}
	}
}
