package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a small OpenAI-style streaming server for tests, steered by
// X-Test-* headers: Tokens, TTFT, ITL, Status, Cut-At, Error-At, Stall-At,
// Malformed-At, No-Usage, No-Done; every request's max_tokens wins over Tokens.
type upstream struct {
	stamp    bool
	requests atomic.Int64
	bodies   chan []byte // when set, receives each request body
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	if u.bodies != nil {
		u.bodies <- body
	}
	var req api.ChatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	hint := func(k string) int { v, _ := strconv.Atoi(r.Header.Get("X-Test-" + k)); return v }
	dur := func(k string) time.Duration { d, _ := time.ParseDuration(r.Header.Get("X-Test-" + k)); return d }
	if s := hint("Status"); s != 0 {
		w.WriteHeader(s)
		fmt.Fprint(w, `{"error":{"message":"injected","type":"server_error"}}`)
		return
	}
	tokens := hint("Tokens")
	if tokens == 0 {
		tokens = 5
	}
	if n := req.OutputLimit(); n > 0 {
		tokens = n
	}
	sse.SetHeaders(w.Header())
	sw := sse.NewWriter(w)
	emit := func(b string) error {
		if u.stamp {
			sw.Stamp(time.Now().UnixNano())
		}
		return sw.Data([]byte(b))
	}
	start := time.Now()
	emit(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`)
	for i := range tokens {
		at := dur("TTFT") + time.Duration(i)*dur("ITL")
		if i == hint("Stall-At") && i > 0 {
			at += dur("Stall-For")
		}
		select {
		case <-time.After(time.Until(start.Add(at))):
		case <-r.Context().Done():
			return
		}
		switch i {
		case hint("Cut-At") - 1:
			return // connection ends: no finish_reason, no [DONE]
		case hint("Error-At") - 1:
			emit(`{"error":{"message":"injected mid-stream","type":"server_error"}}`)
			return
		case hint("Malformed-At") - 1:
			sw.Data([]byte(`{"choices":[{"delta":{"content":"x"`))
			return
		}
		emit(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`)
	}
	emit(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	if req.IncludeUsage() && r.Header.Get("X-Test-No-Usage") == "" {
		details := "" // X-Test-Cached: the prompt's cache reads and writes, as "READ,WRITE"
		if c := r.Header.Get("X-Test-Cached"); c != "" {
			read, write, _ := strings.Cut(c, ",")
			details = `,"prompt_tokens_details":{"cached_tokens":` + read + `,"cache_write_tokens":` + write + `}`
		}
		emit(fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":%d,"total_tokens":%d%s}}`, tokens, tokens+11, details))
	}
	if r.Header.Get("X-Test-No-Done") == "" {
		sw.Done()
	}
}

func newUpstream(t *testing.T, u *upstream) string {
	t.Helper()
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestRunCounts(t *testing.T) {
	tests := []struct {
		name       string
		headers    http.Header
		maxTokens  int
		wantOK     int
		wantFail   int
		wantIntr   int
		wantKind   string
		wantTokens int
		wantSource string
	}{
		{"clean", nil, 7, 10, 0, 0, "", 70, "usage"},
		{"no usage counts chunks", hdr("X-Test-No-Usage", "1"), 4, 10, 0, 0, "", 40, "chunks"},
		{"finish without done is complete", hdr("X-Test-No-Done", "1"), 3, 10, 0, 0, "", 30, "usage"},
		{"cut", hdr("X-Test-Cut-At", "3"), 6, 0, 10, 10, KindInterrupted, 0, "none"},
		{"error event", hdr("X-Test-Error-At", "2"), 6, 0, 10, 10, KindErrorEvent, 0, "none"},
		{"malformed", hdr("X-Test-Malformed-At", "2"), 6, 0, 10, 0, KindMalformed, 0, "none"},
		{"http 503", hdr("X-Test-Status", "503"), 6, 0, 10, 0, KindHTTP5xx, 0, "none"},
		{"http 429", hdr("X-Test-Status", "429"), 6, 0, 10, 0, KindHTTP429, 0, "none"},
		{"idle timeout", hdr("X-Test-Stall-At", "2", "X-Test-Stall-For", "5s"), 4, 0, 10, 10, KindIdle, 0, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := newUpstream(t, &upstream{})
			res, err := Run(context.Background(), Config{
				BaseURL: url, Model: "m", Requests: 10, Concurrency: 4, MaxTokens: tt.maxTokens,
				Headers: tt.headers, IdleTimeout: 100 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Runs[0]
			if r.Requests != 10 || r.Succeeded != tt.wantOK || r.Failed != tt.wantFail || r.Interrupted != tt.wantIntr {
				t.Errorf("requests/ok/failed/interrupted: got %d/%d/%d/%d, want 10/%d/%d/%d (errors %v)",
					r.Requests, r.Succeeded, r.Failed, r.Interrupted, tt.wantOK, tt.wantFail, tt.wantIntr, r.Errors)
			}
			if tt.wantKind != "" && r.Errors[tt.wantKind] != tt.wantFail {
				t.Errorf("errors[%s]: got %d, want %d (all %v)", tt.wantKind, r.Errors[tt.wantKind], tt.wantFail, r.Errors)
			}
			if r.OutTok != tt.wantTokens || r.TokSrc != tt.wantSource {
				t.Errorf("tokens: got %d from %q, want %d from %q", r.OutTok, r.TokSrc, tt.wantTokens, tt.wantSource)
			}
		})
	}
}

func TestRunTimingAndSelfCheck(t *testing.T) {
	u := &upstream{stamp: true}
	url := newUpstream(t, u)
	res, err := Run(context.Background(), Config{
		BaseURL: url, Model: "m", Requests: 8, Concurrency: 4, MaxTokens: 20, Warmup: 2,
		Headers: hdr("X-Test-TTFT", "30ms", "X-Test-ITL", "5ms"), KeepRequests: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := u.requests.Load(); got != 10 {
		t.Errorf("upstream requests: got %d, want 10 (8 measured + 2 warm-up)", got)
	}
	r := res.Runs[0]
	if r.Requests != 8 || len(r.Records) != 8 {
		t.Fatalf("measured: got %d (%d records), want 8", r.Requests, len(r.Records))
	}
	// The sleeps only bound the values from below; no upper timing bound is asserted.
	if r.TTFT.P50 < 30 || r.ITL.P50 < 4 || r.ITL.N != 8*19 || r.MaxGap.N != 8 || r.TPOT.N != 8 {
		t.Errorf("got ttft p50 %.2f itl p50 %.2f itl n %d gaps n %d, want ttft >= 30, itl >= 4, 152 gaps, 8 max gaps",
			r.TTFT.P50, r.ITL.P50, r.ITL.N, r.MaxGap.N)
	}
	if r.E2E.P50 < r.TTFT.P50 {
		t.Errorf("e2e p50 %.2f below ttft p50 %.2f", r.E2E.P50, r.TTFT.P50)
	}
	if res.Client.MeasurementDelay == nil || res.Client.MeasurementDelay.N != 8*23 {
		t.Errorf("measurement delay: got %+v, want 184 samples (23 stamped events x 8)", res.Client.MeasurementDelay)
	}
	if res.Client.CPUUsPerChunk <= 0 || r.Chunks != 8*23 {
		t.Errorf("cpu per chunk %v over %d chunks, want > 0 over 184", res.Client.CPUUsPerChunk, r.Chunks)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["schema"] != Schema {
		t.Errorf("schema: got %v, want %s", m["schema"], Schema)
	}
	client := m["client"].(map[string]any)
	for _, k := range []string{"gc_pause_max_ms", "sched_lag_p99_ms", "cpu_us_per_chunk", "measurement_delay_ms"} {
		if _, ok := client[k]; !ok {
			t.Errorf("client.%s missing in %s", k, b)
		}
	}
	run := m["runs"].([]any)[0].(map[string]any)
	for _, k := range []string{"label", "model", "base_url", "requests", "succeeded", "failed", "interrupted", "ttft_ms", "itl_ms",
		"max_gap_ms", "tpot_ms", "e2e_ms", "tps", "output_tokens", "input_tokens", "token_source", "throughput_tokens_per_s", "cost_usd", "errors"} {
		if _, ok := run[k]; !ok {
			t.Errorf("runs[0].%s missing", k)
		}
	}
	for _, k := range []string{"mean", "p50", "p90", "p95", "p99", "max"} {
		if _, ok := run["ttft_ms"].(map[string]any)[k]; !ok {
			t.Errorf("runs[0].ttft_ms.%s missing", k)
		}
	}
}

func TestRunOpenLoopReproducible(t *testing.T) {
	var seqs [3][]int
	for i, seed := range []uint64{5, 5, 6} {
		url := newUpstream(t, &upstream{})
		res, err := Run(context.Background(), Config{
			BaseURL: url, Model: "m", Requests: 30, Rate: 500, Concurrency: 8, MaxTokens: 2, Seed: seed, KeepRequests: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := res.Runs[0]
		if r.Succeeded != 30 || r.ScheduleLag == nil || r.ScheduleLag.N != 30 || r.AchievedRate <= 0 || r.RequestedRate != 500 {
			t.Fatalf("got ok %d lag %+v achieved %v requested %v, want 30 ok with schedule lag and rates", r.Succeeded, r.ScheduleLag, r.AchievedRate, r.RequestedRate)
		}
		for _, q := range r.Records {
			seqs[i] = append(seqs[i], q.Prompt, int(q.Intended))
		}
	}
	if fmt.Sprint(seqs[0]) != fmt.Sprint(seqs[1]) {
		t.Errorf("same seed: got different sequences\n%v\n%v", seqs[0], seqs[1])
	}
	if fmt.Sprint(seqs[0]) == fmt.Sprint(seqs[2]) {
		t.Error("different seeds gave the same sequence")
	}
}

func TestRunDuration(t *testing.T) {
	url := newUpstream(t, &upstream{})
	res, err := Run(context.Background(), Config{
		BaseURL: url, Model: "m", Duration: 150 * time.Millisecond, Grace: 50 * time.Millisecond, Concurrency: 2,
		MaxTokens: 3, Headers: hdr("X-Test-ITL", "10ms"),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Requests == 0 || r.Failed != 0 {
		t.Errorf("got %d requests, %d failed; want some, none failed", r.Requests, r.Failed)
	}
}

func TestRunCancelIsPartial(t *testing.T) {
	url := newUpstream(t, &upstream{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	res, err := Run(ctx, Config{
		BaseURL: url, Model: "m", Requests: 1000, Concurrency: 2, MaxTokens: 50, Headers: hdr("X-Test-ITL", "10ms"),
	})
	if err != ErrInterrupted {
		t.Fatalf("error: got %v, want ErrInterrupted", err)
	}
	if !res.Partial || res.Runs[0].Incomplete == 0 || res.Runs[0].Failed != 0 {
		t.Errorf("got partial %v incomplete %d failed %d, want partial, some incomplete, none failed",
			res.Partial, res.Runs[0].Incomplete, res.Runs[0].Failed)
	}
}

func TestGoodput(t *testing.T) {
	url := newUpstream(t, &upstream{})
	res, err := Run(context.Background(), Config{
		BaseURL: url, Model: "m", Requests: 10, Concurrency: 2, MaxTokens: 3,
		Goodput: SLO{TTFT: time.Hour, E2E: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Runs[0].Goodput; g == nil || g.Fraction != 1 || g.PerS <= 0 {
		t.Errorf("goodput: got %+v, want fraction 1", g)
	}
	res, err = Run(context.Background(), Config{
		BaseURL: url, Model: "m", Requests: 10, Concurrency: 2, MaxTokens: 3,
		Goodput: SLO{TTFT: time.Nanosecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Runs[0].Goodput; g == nil || g.Fraction != 0 {
		t.Errorf("goodput with an impossible TTFT: got %+v, want fraction 0", g)
	}
}

func TestRequestBody(t *testing.T) {
	u := &upstream{bodies: make(chan []byte, 4)}
	url := newUpstream(t, u)
	_, err := Run(context.Background(), Config{
		BaseURL: url, Model: "m1", Requests: 1, MaxTokens: 9, ExtraBody: `{"ignore_eos":true,"temperature":0}`,
		Dataset: []Prompt{{Messages: []api.Message{api.TextMessage("user", "안녕하세요")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(<-u.bodies, &got); err != nil {
		t.Fatal(err)
	}
	want := `map[ignore_eos:true max_tokens:9 messages:[map[content:안녕하세요 role:user]] model:m1 stream:true stream_options:map[include_usage:true] temperature:0]`
	if fmt.Sprint(got) != want {
		t.Errorf("body:\ngot  %v\nwant %s", got, want)
	}
}

func TestRunConnectError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	res, err := Run(context.Background(), Config{BaseURL: url + "/v1", Model: "m", Requests: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Runs[0].Errors[KindConnect]; got != 3 {
		t.Errorf("connect errors: got %d, want 3 (%v)", got, res.Runs[0].Errors)
	}
}

// Sequential requests to an HTTP/1.1 upstream whose body ends 5 ms after
// [DONE] reuse one connection (at most two): the bench reads the rest of
// each body instead of throwing the connection away, so no TTFT pays for a
// new handshake.
func TestRunReusesConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`))
		sw.Done()
		time.Sleep(5 * time.Millisecond)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	res, err := Run(context.Background(), Config{BaseURL: srv.URL + "/v1", Model: "m", Requests: 10, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Runs[0].Succeeded; got != 10 {
		t.Fatalf("got %d succeeded, want 10 (%v)", got, res.Runs[0].Errors)
	}
	if n := conns.Load(); n > 2 {
		t.Errorf("10 sequential requests opened %d connections, want at most 2", n)
	}
}

func TestWriteOutputs(t *testing.T) {
	url := newUpstream(t, &upstream{})
	res, err := Run(context.Background(), Config{BaseURL: url, Model: "m", Requests: 3, MaxTokens: 2, KeepRequests: true, Label: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var tab, csvOut, reqs strings.Builder
	if err := WriteTable(&tab, res.Runs...); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tab.String(), "TTFT p50") || !strings.Contains(tab.String(), "x m") {
		t.Errorf("table: got\n%s\nwant a header and the run row", tab.String())
	}
	if err := WriteCSV(&csvOut, res.Runs...); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csvOut.String(), "\n"); lines != 2 {
		t.Errorf("csv lines: got %d, want 2", lines)
	}
	if err := WriteRequests(&reqs, res.Runs...); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(reqs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("requests-out lines: got %d, want 3", len(lines))
	}
	var l struct {
		ChunkMs []float64 `json:"chunk_ms"`
		TTFTMs  float64   `json:"ttft_ms"`
		Status  int       `json:"status"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.ChunkMs) != 2 || l.Status != 200 || l.TTFTMs != l.ChunkMs[0] {
		t.Errorf("request line: got %s, want 2 chunk offsets, status 200, ttft = first chunk", lines[0])
	}
}

func TestRunHTTP2Cleartext(t *testing.T) {
	u := &upstream{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		u.ServeHTTP(w, r)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	res, err := Run(context.Background(), Config{BaseURL: srv.URL + "/v1", Model: "m", Requests: 6, Concurrency: 3, MaxTokens: 4, HTTP2: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Runs[0]; r.Succeeded != 6 || r.OutTok != 24 {
		t.Errorf("got %d ok, %d tokens (errors %v), want 6 and 24 over h2c", r.Succeeded, r.OutTok, r.Errors)
	}
}

// An achieved rate belongs to an open loop, whose rate was asked for; a
// closed loop reports its requests per second over the run instead.
func TestRateByLoopKind(t *testing.T) {
	url := newUpstream(t, &upstream{})
	res, err := RunAll(context.Background(), []Config{
		{BaseURL: url, Model: "closed", Requests: 6, Concurrency: 2, MaxTokens: 2},
		{BaseURL: url, Model: "open", Requests: 6, Rate: 300, MaxTokens: 2},
	}, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	closed, open := res.Runs[0], res.Runs[1]
	if closed.AchievedRate != 0 || closed.RequestsPerS <= 0 {
		t.Errorf("closed loop: got achieved rate %g, %g req/s; want no achieved rate and req/s > 0", closed.AchievedRate, closed.RequestsPerS)
	}
	if open.AchievedRate <= 0 {
		t.Errorf("open loop: got achieved rate %g, want > 0", open.AchievedRate)
	}
	var b strings.Builder
	if err := WriteJSON(&b, res); err != nil {
		t.Fatal(err)
	}
	var saved struct{ Runs []map[string]any }
	if err := json.Unmarshal([]byte(b.String()), &saved); err != nil {
		t.Fatal(err)
	}
	if _, ok := saved.Runs[0]["achieved_rate"]; ok {
		t.Errorf("closed loop JSON: got achieved_rate %v, want none", saved.Runs[0]["achieved_rate"])
	}
	if _, ok := saved.Runs[1]["achieved_rate"]; !ok {
		t.Error("open loop JSON: achieved_rate missing")
	}
	var tab strings.Builder
	if err := WriteTable(&tab, res.Runs...); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("closed c=2: %.2f req/s", closed.RequestsPerS); !strings.Contains(tab.String(), want) {
		t.Errorf("table: got\n%s\nwant %q", tab.String(), want)
	}
}
