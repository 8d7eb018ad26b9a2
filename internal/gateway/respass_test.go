package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

// teeSim is a simulator over loopback that keeps, per request to
// /v1/responses, the body it got and the bytes it answered.
type teeSim struct {
	ts *httptest.Server
	mu sync.Mutex
	in [][]byte // request bodies
	// out are the bytes answered, one buffer per request, written as
	// they are sent.
	out []*bytes.Buffer
}

func newTeeSim(t *testing.T) *teeSim {
	fast := sim.Profile{Name: "sim-fast", Tokens: 8, TokensPerChunk: 1, Lang: "en"}
	down := fast
	down.Name = "down"
	down.Faults.FailStatus = http.StatusServiceUnavailable
	s := sim.New(sim.Options{Profiles: []sim.Profile{fast, down}, Seed: 1})
	u := &teeSim{}
	u.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/responses" {
			s.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		out := &bytes.Buffer{}
		u.mu.Lock()
		u.in, u.out = append(u.in, body), append(u.out, out)
		u.mu.Unlock()
		s.ServeHTTP(&teeWriter{ResponseWriter: w, mu: &u.mu, out: out}, r)
	}))
	t.Cleanup(u.ts.Close)
	return u
}

// last returns the last request's body and answer.
func (u *teeSim) last() (in, out []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.in) == 0 {
		return nil, nil
	}
	return u.in[len(u.in)-1], bytes.Clone(u.out[len(u.out)-1].Bytes())
}

func (u *teeSim) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.in)
}

type teeWriter struct {
	http.ResponseWriter
	mu  *sync.Mutex
	out *bytes.Buffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.out.Write(b)
	w.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// respPassConfig: provider "pass" speaks Responses (passthrough), "chat"
// is the same sim spoken to in chat (translated).
func respPassConfig(u *teeSim) *config.Config {
	cfg := baseConfig()
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	cfg.MaxBody = 1 << 20
	cfg.Providers = []config.Provider{
		{Name: "pass", Kind: "openai", BaseURL: u.ts.URL + "/v1", Responses: true},
		{Name: "chat", Kind: "openai", BaseURL: u.ts.URL + "/v1"},
	}
	price := config.Price{Input: 1, Output: 2}
	cfg.Models = []config.Model{
		{Name: "m-pass", Routes: []config.Route{{Provider: "pass", Model: "sim-fast"}}, Price: price},
		{Name: "m-chat", Routes: []config.Route{{Provider: "chat", Model: "sim-fast"}}, Price: price},
		{Name: "m-fb", Routes: []config.Route{{Provider: "pass", Model: "down"}, {Provider: "chat", Model: "sim-fast"}}, Price: price},
		{Name: "m-builtin", Routes: []config.Route{{Provider: "chat", Model: "sim-fast"}, {Provider: "pass", Model: "sim-fast"}}, Price: price},
		{Name: "m-guard", Routes: []config.Route{{Provider: "pass", Model: "sim-fast"}}, Price: price, MaxOutputTokens: 20},
	}
	return cfg
}

// simUsage is the usage of the terminal event in a Responses stream.
func simUsage(t *testing.T, stream []byte) (in, out int) {
	t.Helper()
	for _, line := range bytes.Split(stream, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				Usage *struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(data, &ev) == nil && ev.Response.Usage != nil &&
			(ev.Type == "response.completed" || ev.Type == "response.incomplete" || ev.Type == "response.failed") {
			return ev.Response.Usage.InputTokens, ev.Response.Usage.OutputTokens
		}
	}
	t.Fatalf("no terminal event with usage in %q", stream)
	return 0, 0
}

// TestResponsesPassthrough: a /v1/responses request routed to a provider
// that speaks Responses (responses: true) reaches it as sent but for the
// model (an unknown field and a built-in tool included), and the client
// gets the upstream's bytes as they came, stream and not; the usage entry
// is the terminal event's (the response's) usage.
func TestResponsesPassthrough(t *testing.T) {
	u := newTeeSim(t)
	e := start(t, respPassConfig(u))
	body := `{"model":"m-pass","input":"hello","stream":true,"x_future":{"a":[1,2]},"instructions":"Be brief."}`

	resp := do(t, "POST", e.url+"/v1/responses", devKey, body)
	got, _ := io.ReadAll(resp.Body)
	in, out := u.last()
	if resp.StatusCode != http.StatusOK || len(got) == 0 || !bytes.Equal(got, out) {
		t.Fatalf("stream: got %d %q, want the upstream's bytes %q", resp.StatusCode, got, out)
	}
	if want := strings.Replace(body, `"m-pass"`, `"sim-fast"`, 1); string(in) != want {
		t.Errorf("upstream body: got %s, want %s", in, want)
	}
	if r := resp.Header.Get("X-Streamgate-Route"); r != "pass/sim-fast" {
		t.Errorf("route: got %q, want pass/sim-fast", r)
	}
	wantIn, wantOut := simUsage(t, out)
	en := e.waitEntries(t, 1)[0]
	if en.Outcome != usage.OutcomeOK || en.TokenSource != usage.SourceUsage || en.InputTokens != wantIn || en.OutputTokens != wantOut ||
		wantOut != 8 || en.Route != "pass/sim-fast" || en.TTFT <= 0 {
		t.Errorf("entry: got %+v, want ok with the response's usage (%d in, %d out)", en, wantIn, wantOut)
	}

	// Not streamed: the response object as it came.
	body = strings.Replace(body, `"stream":true`, `"stream":false`, 1)
	resp = do(t, "POST", e.url+"/v1/responses", devKey, body)
	got, _ = io.ReadAll(resp.Body)
	_, out = u.last()
	var r struct {
		Object string
		Usage  struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, out) || json.Unmarshal(got, &r) != nil || r.Object != "response" {
		t.Fatalf("non-stream: got %d %q, want the upstream's response %q", resp.StatusCode, got, out)
	}
	en = e.waitEntries(t, 2)[1]
	if en.Outcome != usage.OutcomeOK || en.TokenSource != usage.SourceUsage || en.InputTokens != r.Usage.InputTokens || en.OutputTokens != 8 {
		t.Errorf("non-stream entry: got %+v, want the response's usage %+v", en, r.Usage)
	}

	// openai-go reads the passed stream: one sequence, one terminal event.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := responsesClient(e)
	params := responses.ResponseNewParams{Model: "m-pass", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
	s := readResponses(t, client.Responses.NewStreaming(ctx, params))
	if s.terminal != "response.completed" || s.final.Usage.OutputTokens != 8 || s.final.OutputText() != s.text || !strings.HasPrefix(s.final.ID, "resp_sim") {
		t.Errorf("sdk: got %s %s, want the sim's completed response", s.terminal, s.final.RawJSON())
	}

	// max_output_tokens: the upstream's response.incomplete, its usage billed.
	params.MaxOutputTokens = openai.Int(16)
	s = readResponses(t, client.Responses.NewStreaming(ctx, params, option.WithHeader("X-Sim-Tokens", "40")))
	en = e.waitEntries(t, 4)[3]
	if s.terminal != "response.incomplete" || s.final.IncompleteDetails.Reason != "max_output_tokens" || s.final.Usage.OutputTokens != 16 ||
		en.OutputTokens != 16 || en.TokenSource != usage.SourceUsage || en.Outcome != usage.OutcomeOK {
		t.Errorf("incomplete: got %s %s, entry %+v; want incomplete with 16 output tokens billed", s.terminal, s.final.RawJSON(), en)
	}
}

// TestResponsesPassthroughFaults: the faults of a passed-through stream
// end in one terminal event for the client and one usage entry: the
// upstream's response.failed relayed with its usage; a cut answered with
// the gateway's response.failed (numbered after the upstream's last
// event) and billed from what was received.
func TestResponsesPassthroughFaults(t *testing.T) {
	u := newTeeSim(t)
	e := start(t, respPassConfig(u))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := responsesClient(e)
	params := responses.ResponseNewParams{Model: "m-pass", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}

	s := readResponses(t, client.Responses.NewStreaming(ctx, params, option.WithHeader("X-Sim-Error-At", "4")))
	_, out := u.last()
	wantIn, wantOut := simUsage(t, out)
	en := e.waitEntries(t, 1)[0]
	if s.terminal != "response.failed" || s.final.Usage.OutputTokens != 3 || s.final.Error.Code != "server_error" ||
		en.OutputTokens != wantOut || en.InputTokens != wantIn || en.TokenSource != usage.SourceUsage || en.Outcome != usage.OutcomeUpstreamError {
		t.Errorf("error-at: got %s %s, entry %+v; want the upstream's response.failed, its usage billed", s.terminal, s.final.RawJSON(), en)
	}

	s = readResponses(t, client.Responses.NewStreaming(ctx, params, option.WithHeader("X-Sim-Cut-At", "4")))
	_, out = u.last()
	en = e.waitEntries(t, 2)[1]
	if s.terminal != "response.failed" || s.final.Status != "failed" || s.final.Error.Code != "stream_truncated" ||
		!strings.HasPrefix(s.final.ID, "resp_sim") || s.final.OutputText() != "" || s.text == "" {
		t.Errorf("cut: got %s %s, want the gateway's response.failed on the upstream's response", s.terminal, s.final.RawJSON())
	}
	if en.Outcome != usage.OutcomeUpstreamError || en.TokenSource != usage.SourceEstimated || en.OutputTokens < 1 || en.InputTokens < 1 {
		t.Errorf("cut entry: got %+v, want one estimated entry", en)
	}
	// The bytes before the gateway's event are the upstream's.
	resp := do(t, "POST", e.url+"/v1/responses", devKey, `{"model":"m-pass","input":"hello","stream":true}`, "X-Sim-Cut-At", "4")
	got, _ := io.ReadAll(resp.Body)
	_, out = u.last()
	if !bytes.HasPrefix(got, out) || !bytes.Contains(got[len(out):], []byte(`"type":"response.failed","sequence_number":7,`)) {
		t.Errorf("cut bytes: got %q, want the upstream's %q then response.failed numbered 7", got, out)
	}
	e.waitEntries(t, 3)
}

// TestResponsesPassthroughRoutes: fallback from a passthrough route to a
// translated one before content; a built-in tool skips the chat routes
// (400 naming it when none other) and is served by a Responses route; the
// context guard's max_output_tokens reaches the upstream's body.
func TestResponsesPassthroughRoutes(t *testing.T) {
	u := newTeeSim(t)
	e := start(t, respPassConfig(u))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := responsesClient(e)
	params := responses.ResponseNewParams{Model: "m-fb", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
	s := readResponses(t, client.Responses.NewStreaming(ctx, params))
	en := e.waitEntries(t, 1)[0]
	if s.terminal != "response.completed" || s.final.Usage.OutputTokens != 8 || en.Attempts != 2 || en.Route != "chat/sim-fast" || en.Outcome != usage.OutcomeOK {
		t.Errorf("fallback: got %s, entry %+v; want completed on chat/sim-fast after 2 attempts", s.terminal, en)
	}

	web := `{"model":"%s","input":"news?","stream":true,"tools":[{"type":"web_search"}]}`
	resp := do(t, "POST", e.url+"/v1/responses", devKey, strings.Replace(web, "%s", "m-chat", 1))
	io.ReadAll(resp.Body)
	in, _ := u.last()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(gateway.HeaderDroppedTools) != "web_search" || bytes.Contains(in, []byte("web_search")) {
		t.Errorf("built-in tool on a chat route: got %d, %s %q, upstream got %s; want 200 without the tool, named dropped", resp.StatusCode, gateway.HeaderDroppedTools, resp.Header.Get(gateway.HeaderDroppedTools), in)
	}
	resp = do(t, "POST", e.url+"/v1/responses", devKey, strings.Replace(web, "%s", "m-builtin", 1))
	got, _ := io.ReadAll(resp.Body)
	in, out := u.last()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, out) || !bytes.Contains(in, []byte(`"tools":[{"type":"web_search"}]`)) ||
		resp.Header.Get("X-Streamgate-Route") != "pass/sim-fast" || resp.Header.Get(gateway.HeaderDroppedTools) != "" {
		t.Errorf("built-in tool: got %d via %q, upstream got %s; want the Responses route to serve it", resp.StatusCode, resp.Header.Get("X-Streamgate-Route"), in)
	}
	en = e.waitEntries(t, 3)[2]
	if en.Attempts != 1 || en.Outcome != usage.OutcomeOK {
		t.Errorf("built-in tool entry: got %+v, want ok at once: the route that passes it through goes first", en)
	}

	resp = do(t, "POST", e.url+"/v1/responses", devKey, `{"model":"m-guard","input":"hi","max_output_tokens":100,"stream":true}`)
	io.ReadAll(resp.Body)
	in, _ = u.last()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(in, []byte(`"max_output_tokens":20`)) {
		t.Errorf("guard: got %d, upstream body %s; want max_output_tokens lowered to 20", resp.StatusCode, in)
	}
	e.waitEntries(t, 4)
}

// TestResponsesBuiltinReject: with responses.builtin_tools: reject, a
// built-in tool skips the chat routes with a 400 naming it (nothing sent
// when no route passes it through) and is served by a Responses route.
func TestResponsesBuiltinReject(t *testing.T) {
	u := newTeeSim(t)
	cfg := respPassConfig(u)
	cfg.Responses.BuiltinTools = config.BuiltinReject
	e := start(t, cfg)
	web := `{"model":"%s","input":"news?","stream":true,"tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`
	n := u.count()
	resp := do(t, "POST", e.url+"/v1/responses", devKey, strings.Replace(web, "%s", "m-chat", 1))
	er := readError(t, resp)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(er.Error.Message, `tools[1]: tool type "web_search" (a built-in tool) is served only by a route that passes the Responses API through`) || u.count() != n {
		t.Errorf("reject on a chat route: got %d %+v, want 400 naming web_search, nothing sent", resp.StatusCode, er.Error)
	}
	resp = do(t, "POST", e.url+"/v1/responses", devKey, strings.Replace(web, "%s", "m-builtin", 1))
	io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Streamgate-Route") != "pass/sim-fast" {
		t.Errorf("reject with a Responses route: got %d via %q, want it served there", resp.StatusCode, resp.Header.Get("X-Streamgate-Route"))
	}
	en := e.waitEntries(t, 2)
	if en[1].Attempts != 1 || en[1].Outcome != usage.OutcomeOK {
		t.Errorf("reject entry: got %+v, want ok in 1 attempt (the chat route's refusal is the gateway's, no attempt)", en[1])
	}
}
