package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// resilienceConfig: one in-process sim whose "faulty" profile injects f on
// every request and whose "healthy" one injects nothing; model "m" routes
// faulty first, then healthy, under strategy; model "ref" is healthy alone
// (the uninterrupted answer).
func resilienceConfig(strategy string, f sim.Faults) (*config.Config, sim.Options) {
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	// Timeouts short enough to keep the test quick, long enough for a
	// loaded machine under -race.
	cfg.Timeouts.FirstToken = config.Duration(time.Second)
	cfg.Timeouts.Idle = config.Duration(time.Second)
	cfg.Timeouts.NonStream = config.Duration(time.Second)
	cfg.Models = []config.Model{
		{Name: "m", Strategy: strategy, ContinueOnCut: true, ContextPolicy: "reject",
			Routes: []config.Route{{Provider: "sim", Model: "faulty"}, {Provider: "sim", Model: "healthy"}}},
		{Name: "ref", Strategy: "fallback", ContextPolicy: "reject", Routes: []config.Route{{Provider: "sim", Model: "healthy"}}},
	}
	healthy := sim.Profile{Name: "healthy", TTFT: time.Millisecond, ITL: time.Millisecond, Tokens: 12, TokensPerChunk: 1, Lang: "en"}
	faulty := healthy
	faulty.Name, faulty.Faults = "faulty", f
	return cfg, sim.Options{Profiles: []sim.Profile{healthy, faulty}, Seed: 7}
}

// streamed is what a client read from a stream.
type streamed struct {
	text      string
	roles     int
	done      bool
	errEvents []string
	usage     *struct{ Prompt, Completion int }
}

func readChat(t *testing.T, resp *http.Response) streamed {
	t.Helper()
	var s streamed
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			s.done = true
			return s
		}
		if err != nil {
			return s
		}
		var c struct {
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("event %q: %v", ev.Data, err)
		}
		if len(c.Error) > 0 {
			s.errEvents = append(s.errEvents, string(ev.Data))
		}
		for _, ch := range c.Choices {
			if ch.Delta.Role != "" {
				s.roles++
			}
			if ch.Delta.Content != nil {
				s.text += *ch.Delta.Content
			}
		}
		if c.Usage != nil {
			s.usage = &struct{ Prompt, Completion int }{c.Usage.Prompt, c.Usage.Completion}
		}
	}
}

// reference returns the uninterrupted answer to body's conversation.
func reference(t *testing.T, e *env, prompt string) string {
	t.Helper()
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, promptBody("ref", true, prompt))
	s := readChat(t, resp)
	if resp.StatusCode != 200 || !s.done || s.text == "" {
		t.Fatalf("reference: got %d done=%v text %q", resp.StatusCode, s.done, s.text)
	}
	return s.text
}

func promptBody(model string, stream bool, prompt string) string {
	return fmt.Sprintf(`{"model":%q,"stream":%v,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":%q}]}`, model, stream, prompt)
}

// The fault matrix: every sim fault × stream and non-stream × each
// strategy. A healthy second route and continue_on_cut let the gateway
// serve every stream in full (the text equal to the uninterrupted answer,
// one role chunk, one [DONE]), or end it with one well-formed error where
// no route can fix it (a non-stream whose upstream stalls: that limit ends
// it with 504 instead of sending the request twice); each request leaves
// exactly one usage entry, naming the route the client was told.
func TestFaultMatrix(t *testing.T) {
	faults := []struct {
		name string
		f    sim.Faults
	}{
		{"503", sim.Faults{FailStatus: 503}},
		{"429", sim.Faults{FailStatus: 429}},
		{"stall first", sim.Faults{StallFirst: 10 * time.Second}},
		{"stall mid-stream", sim.Faults{StallAt: 4, StallFor: 10 * time.Second}},
		{"cut", sim.Faults{CutAt: 5}},
		{"error event", sim.Faults{ErrorAt: 3}},
		{"malformed", sim.Faults{MalformedAt: 6}},
	}
	for _, strategy := range []string{"fallback", "weighted", "least-inflight", "lowest-latency"} {
		for _, fc := range faults {
			t.Run(strategy+"/"+fc.name, func(t *testing.T) {
				t.Parallel()
				cfg, so := resilienceConfig(strategy, fc.f)
				e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
				want := reference(t, e, "matrix "+fc.name)
				requests := 1
				told := map[string]string{} // request id → the route the client was told
				for _, stream := range []bool{true, false} {
					for i := 0; i < 3; i++ {
						requests++
						resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, promptBody("m", stream, "matrix "+fc.name))
						served := resp.Header.Get(gateway.HeaderRoute)
						told[resp.Header.Get(gateway.HeaderRequestID)] = served
						switch {
						case stream && resp.StatusCode == 200:
							s := readChat(t, resp)
							if !s.done || len(s.errEvents) != 0 || s.roles != 1 || s.text != want {
								t.Errorf("stream %d: got done=%v errors=%q roles=%d text %q; want [DONE], no error, 1 role, text %q",
									i, s.done, s.errEvents, s.roles, s.text, want)
							}
						case !stream && resp.StatusCode == 200:
							var c struct {
								Choices []struct {
									Message struct{ Content string } `json:"message"`
								} `json:"choices"`
							}
							if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content != want {
								t.Errorf("non-stream %d: got %+v (%v), want text %q", i, c, err, want)
							}
							if served != "sim/healthy" {
								t.Errorf("non-stream %d: served by %q, want sim/healthy", i, served)
							}
						case !stream && fc.f.StallFirst+fc.f.StallFor > 0 && resp.StatusCode == 504:
							readError(t, resp) // the non-stream limit: one well-formed error
						default:
							b, _ := io.ReadAll(resp.Body)
							t.Errorf("stream=%v %d: got status %d %s", stream, i, resp.StatusCode, b)
						}
					}
				}
				entries := e.waitEntries(t, requests)
				for _, en := range entries[1:] {
					if en.Attempts < 1 || en.Attempts > 3 {
						t.Errorf("entry %+v: attempts %d, want 1 to 3", en, en.Attempts)
					}
					route, ok := told[en.RequestID]
					if !ok {
						t.Errorf("entry %+v: no such request", en)
					}
					// The header names the route that began the answer; a
					// continued answer's entry names the one that finished it.
					if en.Status == 200 && en.Continuations == 0 && en.Route != route {
						t.Errorf("entry %+v: route %q, but the client was told %q", en, en.Route, route)
					}
					if en.Continuations > 0 && (en.Attempts < 2 || en.OutputTokens < 12) {
						t.Errorf("continued entry %+v: want 2+ attempts and all 12 output tokens counted", en)
					}
				}
			})
		}
	}
}

// A stream cut mid-answer is continued on another route, across dialects
// (the faulty route speaks OpenAI, the healthy one Anthropic): the client
// gets the uninterrupted text, one role chunk, one [DONE] and the usage of
// both attempts; the ledger counts the continuation; an official OpenAI
// client reads it as one answer.
func TestContinuationAcrossDialects(t *testing.T) {
	cfg, so := resilienceConfig("fallback", sim.Faults{CutAt: 6})
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "claude", Kind: "sim", Dialect: "anthropic"})
	cfg.Models[0].Routes[1].Provider = "claude"
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	want := reference(t, e, "continue me")

	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, promptBody("m", true, "continue me"))
	s := readChat(t, resp)
	if !s.done || s.text != want || s.roles != 1 || len(s.errEvents) != 0 {
		t.Fatalf("got done=%v roles=%d errors=%q text %q, want the whole answer %q", s.done, s.roles, s.errEvents, s.text, want)
	}
	// 5 tokens came from the cut attempt, 7 from the continuation: the
	// client's usage is their sum.
	if s.usage == nil || s.usage.Completion != 12 {
		t.Errorf("got usage %+v, want 12 completion tokens (5 + 7)", s.usage)
	}

	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("continue me")},
	})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != want {
		t.Errorf("official client: got %q, %v; want %q", acc.Choices[0].Message.Content, err, want)
	}

	for _, en := range e.waitEntries(t, 3)[1:] {
		if en.Outcome != usage.OutcomeOK || en.Continuations != 1 || en.Attempts != 2 || en.Route != "claude/healthy" || en.OutputTokens != 12 {
			t.Errorf("got entry %+v, want ok, 1 continuation, 2 attempts, served by claude/healthy, 12 output tokens", en)
		}
	}
	if got := sumSeries(scrape(t, e.url), "streamgate_continuations_total", `outcome="ok"`); got != 2 {
		t.Errorf("streamgate_continuations_total{outcome=ok}: got %v, want 2", got)
	}
}

// Without continue_on_cut a cut after content ends with the error event,
// as before; with it, a tool call's arguments are never continued.
func TestContinuationOff(t *testing.T) {
	cfg, so := resilienceConfig("fallback", sim.Faults{CutAt: 4})
	cfg.Models[0].ContinueOnCut = false
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	s := readChat(t, do(t, "POST", e.url+"/v1/chat/completions", devKey, promptBody("m", true, "x")))
	if s.done || len(s.errEvents) != 1 || !strings.Contains(s.errEvents[0], "stream_truncated") {
		t.Errorf("got done=%v errors %q, want one stream_truncated error event and no [DONE]", s.done, s.errEvents)
	}
	en := e.waitEntries(t, 1)[0]
	if en.Continuations != 0 || en.Attempts != 1 {
		t.Errorf("got entry %+v, want 1 attempt, no continuation", en)
	}
}

// Hedged first token: the first route stalls before its first token; after
// hedge.after the second starts and serves; both attempts are billed and
// recorded, the winner named. The budget's bucket starts with 10 hedges,
// so the first requests of a run get theirs; once they are spent (budget
// 0.01 refills a hundredth per request), no hedge starts.
func TestHedge(t *testing.T) {
	cfg, so := resilienceConfig("fallback", sim.Faults{StallFirst: 2 * time.Second})
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Models[0].Hedge = &config.Hedge{After: "50ms", Budget: 0.01}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	want := reference(t, e, "hedge")
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, promptBody("m", true, "hedge"))
	s := readChat(t, resp)
	if !s.done || s.text != want {
		t.Fatalf("got done=%v text %q, want %q", s.done, s.text, want)
	}
	en := e.waitEntries(t, 2)[1]
	if !en.Hedged || en.Attempts != 2 || en.Route != "sim/healthy" || en.Outcome != usage.OutcomeOK {
		t.Errorf("got entry %+v, want hedged, 2 attempts, served by sim/healthy", en)
	}
	// Both attempts are billed: the loser's prompt is estimated, the
	// winner's usage reported.
	if en.InputTokens <= 0 || en.TokenSource != usage.SourcePartial {
		t.Errorf("got entry %+v, want the loser's prompt estimated into the input tokens", en)
	}
	m := scrape(t, e.url)
	if got := sumSeries(m, "streamgate_hedges_total", `outcome="won"`); got != 1 {
		t.Errorf("streamgate_hedges_total{outcome=won}: got %v, want 1", got)
	}
	// The winner's latency is observed under its own route.
	if got := sumSeries(m, "streamgate_time_to_first_token_seconds_count", `model="m",route="sim/healthy"`); got != 1 {
		t.Errorf("TTFT observations of m on sim/healthy: got %v, want 1 (the hedge that won)", got)
	}
	// Nine more hedged requests spend the bucket's 10 hedges; the
	// eleventh finds 0.1 of a hedge in it, gets none and waits for the
	// stalled first route.
	for i := 2; i <= 11; i++ {
		resp = do(t, "POST", e.url+"/v1/chat/completions", devKey, promptBody("m", true, "hedge"))
		if s := readChat(t, resp); !s.done || s.text != want {
			t.Errorf("request %d: got done=%v text %q", i, s.done, s.text)
		}
		en := e.waitEntries(t, i+1)[i]
		if hedged := i <= 10; en.Hedged != hedged {
			t.Errorf("request %d: got entry %+v, want hedged %v (10 hedges in the bucket)", i, en, hedged)
		}
		if i == 11 && en.Route != "sim/faulty" {
			t.Errorf("request 11: got entry %+v, want it served by the stalled route", en)
		}
	}
	// Every attempt that began on a route ended there, refused hedges
	// included: nothing is left in flight.
	if got := sumSeries(scrape(t, e.url), "streamgate_route_inflight", ""); got != 0 {
		t.Errorf("streamgate_route_inflight: got %v in all, want 0 after the requests ended", got)
	}
}

// failing answers 503 to its first n requests, then streams a short answer.
func failing(t *testing.T, n int64, retryAfter string) (url string, calls *atomic.Int64) {
	calls = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if calls.Add(1) <= n {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
			return
		}
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`))
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`))
		sw.Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", calls
}

// Retries: a route that fails twice and then serves is retried (after a
// backoff) within the model's retries; the entry counts every attempt.
func TestRetries(t *testing.T) {
	url, calls := failing(t, 2, "0")
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Kind: "openai", BaseURL: url})
	cfg.Models = append(cfg.Models, config.Model{Name: "r", Strategy: "fallback", ContextPolicy: "reject", Retries: 2,
		Routes: []config.Route{{Provider: "up", Model: "x"}}})
	e := start(t, cfg)
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("r", true, ""))
	s := readChat(t, resp)
	if resp.StatusCode != 200 || !s.done || s.text != "ok" || calls.Load() != 3 {
		t.Fatalf("got %d done=%v text %q after %d calls, want 200 \"ok\" after 3", resp.StatusCode, s.done, s.text, calls.Load())
	}
	if en := e.waitEntries(t, 1)[0]; en.Attempts != 3 || en.Outcome != usage.OutcomeOK {
		t.Errorf("got entry %+v, want ok after 3 attempts", en)
	}
	if got := sumSeries(scrape(t, e.url), "streamgate_retries_total", `model="r"`); got != 2 {
		t.Errorf("streamgate_retries_total: got %v, want 2", got)
	}

	// Without retries the same upstream's 503 is the answer.
	url, calls = failing(t, 1, "")
	cfg.Providers[len(cfg.Providers)-1].BaseURL = url
	cfg.Models[len(cfg.Models)-1].Retries = 0
	e = start(t, cfg)
	if resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("r", true, "")); resp.StatusCode != 503 || calls.Load() != 1 {
		t.Errorf("no retries: got %d after %d calls, want 503 after 1", resp.StatusCode, calls.Load())
	}
}

// A Retry-After beyond the request's retry budget is not waited for: the
// client gets the 503 (with the upstream's Retry-After) at once.
func TestRetryAfterBeyondBudget(t *testing.T) {
	url, calls := failing(t, 5, "120")
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Kind: "openai", BaseURL: url})
	cfg.Models = append(cfg.Models, config.Model{Name: "r", Strategy: "fallback", ContextPolicy: "reject", Retries: 3,
		Routes: []config.Route{{Provider: "up", Model: "x"}}})
	e := start(t, cfg)
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("r", false, ""))
	if resp.StatusCode != 503 || calls.Load() != 1 {
		t.Errorf("got %d after %d calls, want 503 after 1 (Retry-After 120s is past the budget)", resp.StatusCode, calls.Load())
	}
}

// Passive health: a route failing again and again is ejected (its circuit
// opens): requests go straight to the next route, /metrics, /readyz and
// /admin/routes show it; the admin API needs the admin key.
func TestCircuitBreaker(t *testing.T) {
	url, calls := failing(t, 1<<30, "")
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "bad", Kind: "openai", BaseURL: url})
	cfg.Models = append(cfg.Models, config.Model{Name: "cb", Strategy: "fallback", ContextPolicy: "reject",
		Routes: []config.Route{{Provider: "bad", Model: "x"}, {Provider: "sim", Model: "sim-fast"}}})
	e := start(t, cfg)
	for i := 0; i < 8; i++ {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("cb", false, ""))
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: got %d, want 200 from the second route", i, resp.StatusCode)
		}
	}
	if got := calls.Load(); got != 5 {
		t.Errorf("the failing route got %d calls, want 5 (then ejected)", got)
	}
	entries := e.waitEntries(t, 8)
	if entries[7].Attempts != 1 || entries[7].Route != "sim/sim-fast" {
		t.Errorf("after ejection: got entry %+v, want one attempt on sim/sim-fast", entries[7])
	}
	if got := sumSeries(scrape(t, e.url), "streamgate_route_state", `route="bad/x"`); got != 2 {
		t.Errorf("streamgate_route_state{route=bad/x}: got %v, want 2 (ejected)", got)
	}
	var ready struct {
		Status string                       `json:"status"`
		Routes map[string]map[string]string `json:"routes"`
	}
	resp := do(t, "GET", e.url+"/readyz", "", "")
	json.NewDecoder(resp.Body).Decode(&ready)
	if resp.StatusCode != 200 || ready.Routes["cb"]["bad/x"] != "ejected" || ready.Routes["cb"]["sim/sim-fast"] != "healthy" {
		t.Errorf("/readyz: got %d %+v, want 200 with bad/x ejected", resp.StatusCode, ready)
	}

	if resp := do(t, "GET", e.url+"/admin/routes", "wrong", ""); resp.StatusCode != 401 {
		t.Errorf("/admin/routes with a wrong key: got %d, want 401", resp.StatusCode)
	}
	if resp := do(t, "GET", e.url+"/admin/routes", devKey, ""); resp.StatusCode != 401 {
		t.Errorf("/admin/routes with a client key: got %d, want 401", resp.StatusCode)
	}
	resp = do(t, "GET", e.url+"/admin/routes", "admin-secret", "")
	var admin struct {
		Models []struct {
			Name     string `json:"name"`
			Strategy string `json:"strategy"`
			Routes   []struct {
				Name         string `json:"name"`
				State        string `json:"state"`
				Failures     int    `json:"failures"`
				EjectedUntil string `json:"ejected_until"`
			} `json:"routes"`
		} `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&admin); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/admin/routes: got %d, %v", resp.StatusCode, err)
	}
	found := false
	for _, m := range admin.Models {
		for _, r := range m.Routes {
			if m.Name == "cb" && r.Name == "bad/x" {
				found = true
				if r.State != "ejected" || r.Failures != 5 || r.EjectedUntil == "" || m.Strategy != "fallback" {
					t.Errorf("/admin/routes: got %+v in %s, want ejected after 5 failures", r, m.Name)
				}
			}
		}
	}
	if !found {
		t.Errorf("/admin/routes: no bad/x in %+v", admin)
	}

	// Without admin_key the admin API is off.
	cfg.AdminKey = ""
	e = start(t, cfg)
	if resp := do(t, "GET", e.url+"/admin/routes", "", ""); resp.StatusCode != 404 || !strings.Contains(readError(t, resp).Error.Message, "admin_key") {
		t.Errorf("/admin/routes without admin_key: got %d, want 404 naming admin_key", resp.StatusCode)
	}
}

// Admission control: a key at its concurrent limit gets 429 with
// Retry-After at once (queue_wait 0); the gateway at its limit gets 503.
// Refusals are recorded as rejected.
func TestAdmission(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits config.Limits
		key    int
		status int
	}{
		{"per key", config.Limits{}, 1, 429},
		{"gateway", config.Limits{MaxStreams: 1}, 0, 503},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Limits = tt.limits
			cfg.Keys[0].MaxStreams = tt.key
			e := start(t, cfg)
			slow := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, ""), "X-Sim-ITL", "100ms")
			rd := bufio.NewReader(slow.Body)
			if _, err := rd.ReadString('\n'); err != nil { // the stream is open
				t.Fatal(err)
			}
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, ""))
			if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") == "" {
				t.Errorf("got %d Retry-After %q, want %d with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), tt.status)
			}
			readError(t, resp)
			io.Copy(io.Discard, rd)
			entries := e.waitEntries(t, 2)
			rejected := 0
			for _, en := range entries {
				if en.Outcome == usage.OutcomeRejected && en.Status == tt.status {
					rejected++
				}
			}
			if rejected != 1 {
				t.Errorf("got entries %+v, want one rejected with %d", entries, tt.status)
			}
		})
	}
}

// Context guard: a request that does not fit the context window is
// refused with the numbers; max_tokens above max_output_tokens is lowered;
// with trim, the oldest turns go.
func TestContextGuard(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Models[0].ContextWindow = 100
	cfg.Models[0].MaxOutputTokens = 3
	cfg.Models[0].ContextPolicy = "reject"
	cfg.Models[1].ContextWindow = 100
	cfg.Models[1].ContextPolicy = "trim"
	e := start(t, cfg)
	long := strings.Repeat("word ", 200)
	body := fmt.Sprintf(`{"model":"m-sim","max_tokens":2,"messages":[{"role":"user","content":%q}]}`, long)
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, body)
	er := readError(t, resp)
	if resp.StatusCode != 400 || er.Error.Code == nil || *er.Error.Code != "context_length_exceeded" || !strings.Contains(er.Error.Message, "100") {
		t.Errorf("got %d %+v, want 400 context_length_exceeded naming the window of 100", resp.StatusCode, er.Error)
	}

	resp = do(t, "POST", e.url+"/v1/chat/completions", devKey, `{"model":"m-sim","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	var c struct {
		Usage struct {
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	json.NewDecoder(resp.Body).Decode(&c)
	if resp.StatusCode != 200 || c.Usage.Completion != 3 {
		t.Errorf("max_tokens 50 on a model with max_output_tokens 3: got %d with %d completion tokens, want 3", resp.StatusCode, c.Usage.Completion)
	}

	trimmed := fmt.Sprintf(`{"model":"m-other","messages":[{"role":"system","content":"be brief"},{"role":"user","content":%q},{"role":"assistant","content":"ok"},{"role":"user","content":"hi"}]}`, long)
	if resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, trimmed); resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("trim: got %d %s, want 200 with the old turns trimmed", resp.StatusCode, b)
	}
	e.waitEntries(t, 3)
}

// Keep-alive comments go out during a long gap mid-stream too (a thinking
// model), so a proxy's idle timeout does not end the stream.
func TestKeepAliveMidStream(t *testing.T) {
	cfg := baseConfig()
	cfg.Timeouts.Idle = 0
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: 50 * time.Millisecond})
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, ""), "X-Sim-Stall-At", "2", "X-Sim-Stall-For", "400ms")
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	first := strings.Index(body, `"content"`)
	last := strings.LastIndex(body, ": keep-alive")
	if first < 0 || last < first || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("got body %q, want keep-alive comments after the first content and a complete stream", body)
	}
	e.waitEntries(t, 1)
}

// A cut after the last token the client's max_tokens allowed (before the
// finish chunk) needs no continuation: the answer is whole; the gateway
// ends it with finish_reason "length", the usage and [DONE].
func TestContinuationLimitReached(t *testing.T) {
	cfg, so := resilienceConfig("fallback", sim.Faults{CutAt: 6})
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	body := `{"model":"m","stream":true,"max_tokens":5,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"limit"}]}`
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, body)
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), `"finish_reason":"length"`) || !strings.HasSuffix(string(raw), "data: [DONE]\n\n") || strings.Contains(string(raw), `"error"`) {
		t.Errorf("got %s, want a finish chunk with reason length and [DONE], no error", raw)
	}
	en := e.waitEntries(t, 1)[0]
	if en.Outcome != usage.OutcomeOK || en.Continuations != 0 || en.Attempts != 1 || en.OutputTokens != 5 {
		t.Errorf("got entry %+v, want ok after 1 attempt, 5 output tokens", en)
	}
}
