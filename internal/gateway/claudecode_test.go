package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

// claudeCodeBeta is the anthropic-beta header Claude Code 2.1.197 sends.
const claudeCodeBeta = "claude-code-20250219,interleaved-thinking-2025-05-14,thinking-token-count-2026-05-13,context-management-2025-06-27," +
	"prompt-caching-scope-2026-01-05,mid-conversation-system-2026-04-07,effort-2025-11-24"

// claudeCodeBody is a request Claude Code 2.1.197 sent (a tool loop's
// third turn: a system message at messages[1], tool_use and tool_result
// blocks, 25 tools, adaptive thinking, context_management, output_config;
// see internal/messages/claudecode_test.go), for model, with max_tokens
// lowered; extra members are set too.
func claudeCodeBody(t *testing.T, model string, extra map[string]any) []byte {
	t.Helper()
	raw, err := os.ReadFile("../messages/testdata/claude-code-2.1.197-turn.json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	body["model"], body["max_tokens"] = model, 64
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deadAddr is a loopback address nothing listens on: a connection to it
// is refused.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// claudeCodeConfig: Claude Code's model on an OpenAI-dialect sim route, on
// a Gemini-dialect one, behind a dead Anthropic provider (connection
// refused), and on the OpenAI-dialect route alone.
func claudeCodeConfig(t *testing.T) (*config.Config, sim.Options) {
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	cfg.MaxBody = 1 << 20
	cfg.Providers = []config.Provider{
		{Name: "sim", Kind: "sim"},
		{Name: "sim-gemini", Kind: "sim", Dialect: "gemini"},
		{Name: "dead", Kind: "anthropic", BaseURL: "http://" + deadAddr(t), APIKey: "sk-ant-x"},
	}
	cfg.Models = []config.Model{
		{Name: "cc-openai", Routes: []config.Route{{Provider: "sim", Model: "sim-a"}}},
		{Name: "cc-gemini", Routes: []config.Route{{Provider: "sim-gemini", Model: "sim-g"}}},
		{Name: "cc-failover", Routes: []config.Route{{Provider: "dead", Model: "claude-opus-4-8"}, {Provider: "sim", Model: "sim-b"}}},
		{Name: "cc-only", Routes: []config.Route{{Provider: "sim", Model: "sim-c"}}},
	}
	fast := sim.Profile{Tokens: 16, ThinkingTokens: 4, TokensPerChunk: 1, Lang: "en"}
	var profiles []sim.Profile
	for _, name := range []string{"sim-a", "sim-b", "sim-c", "sim-g"} {
		p := fast
		p.Name = name
		profiles = append(profiles, p)
	}
	return cfg, sim.Options{Profiles: profiles, Seed: 1}
}

// claudeCodeClient is anthropic-sdk-go as Claude Code configures its
// client: the gateway's root as base URL, its key as x-api-key, its beta
// header; retries as the SDK's default (2), which x-should-retry: false
// must stop.
func claudeCodeClient(e *env) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey(devKey),
		aoption.WithHeader("anthropic-beta", claudeCodeBeta), aoption.WithHeader(sim.HeaderTTFT, "1ms"), aoption.WithHeader(sim.HeaderITL, "1ms"))
}

// streamRaw sends body as a streamed Messages request and accumulates the
// answer; the response's headers come back with it.
func streamRaw(ctx context.Context, client anthropic.Client, body []byte) (anthropic.Message, *http.Response, error) {
	var resp *http.Response
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{},
		aoption.WithRequestBody("application/json", body), aoption.WithResponseInto(&resp))
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return msg, resp, err
		}
	}
	return msg, resp, stream.Err()
}

// TestClaudeCodeOnEveryRouteKind: what Claude Code 2.1.197 sends (its
// captured tool-loop turn) is served on an OpenAI-dialect route, a Gemini
// one, and after a dead Anthropic route (connection refused) by the
// OpenAI-dialect route behind it, through anthropic-sdk-go over loopback:
// an answer each, the attempts counting the upstream calls made.
func TestClaudeCodeOnEveryRouteKind(t *testing.T) {
	cfg, so := claudeCodeConfig(t)
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := claudeCodeClient(e)
	for _, tt := range []struct {
		model, route, attempts string
	}{
		{"cc-openai", "sim/sim-a", "1"},
		{"cc-gemini", "sim-gemini/sim-g", "1"},
		{"cc-failover", "sim/sim-b", "2"},
	} {
		t.Run(tt.model, func(t *testing.T) {
			msg, resp, err := streamRaw(ctx, client, claudeCodeBody(t, tt.model, nil))
			if err != nil {
				t.Fatalf("got %v, want an answer", err)
			}
			text := ""
			for _, b := range msg.Content {
				text += b.Text
			}
			if text == "" || msg.Usage.OutputTokens == 0 || msg.StopReason == "" {
				t.Errorf("got content %+v, usage %+v, stop %q; want text, output tokens, a stop reason", msg.Content, msg.Usage, msg.StopReason)
			}
			if got, att := resp.Header.Get(gateway.HeaderRoute), resp.Header.Get(gateway.HeaderAttempts); got != tt.route || att != tt.attempts {
				t.Errorf("got route %q, attempts %q; want %q, %q", got, att, tt.route, tt.attempts)
			}
		})
	}
	for _, en := range e.waitEntries(t, 3) {
		if en.Outcome != usage.OutcomeOK {
			t.Errorf("%s: got outcome %q, want ok", en.Model, en.Outcome)
		}
	}
}

// TestClaudeCodeRefusalDecides: a request no route of the model can
// translate (an Anthropic server tool) behind a dead Anthropic route: the
// client gets the translation's 400 with x-should-retry: false (so the SDK
// does not retry), not the dead route's retryable 502; the refusal is the
// gateway's: outcome untranslatable, no route, one attempt (the dead
// route's upstream call only; no retry pass follows), nothing held
// against the OpenAI route's health or counted as its attempt, and usage
// by route shows no route failing. On the OpenAI route alone: the same 400
// with no attempt at all (no X-Streamgate-Attempts).
func TestClaudeCodeRefusalDecides(t *testing.T) {
	cfg, so := claudeCodeConfig(t)
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := claudeCodeClient(e)
	server := map[string]any{"tools": []map[string]any{{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}}}
	const deadCalls = 1 // retries: 0, and a refusal is no attempt: no second pass
	for _, tt := range []struct {
		model, attempts string
	}{
		{"cc-failover", "1"},
		{"cc-only", ""},
	} {
		t.Run(tt.model, func(t *testing.T) {
			_, _, err := streamRaw(ctx, client, claudeCodeBody(t, tt.model, server))
			var aerr *anthropic.Error
			if !errors.As(err, &aerr) {
				t.Fatalf("got %v, want the gateway's 400", err)
			}
			h := aerr.Response.Header
			if aerr.StatusCode != http.StatusBadRequest || h.Get("X-Should-Retry") != "false" || !strings.Contains(aerr.Error(), "tools[0].type") {
				t.Errorf("got %d (x-should-retry %q): %v; want 400, x-should-retry false, naming tools[0].type", aerr.StatusCode, h.Get("X-Should-Retry"), err)
			}
			if got := h.Get(gateway.HeaderAttempts); got != tt.attempts {
				t.Errorf("got %s %q, want %q (upstream calls only)", gateway.HeaderAttempts, got, tt.attempts)
			}
		})
	}
	entries := e.waitEntries(t, 2) // one each: the SDK did not retry
	for _, en := range entries {
		want := deadCalls
		if en.Model == "cc-only" {
			want = 0
		}
		if en.Outcome != usage.OutcomeUntranslatable || en.Route != "" || en.Attempts != want || en.Status != http.StatusBadRequest {
			t.Errorf("%s: got outcome %q, route %q, %d attempts, status %d; want untranslatable, no route, %d, 400",
				en.Model, en.Outcome, en.Route, en.Attempts, en.Status, want)
		}
	}
	routes := adminRoutes(t, e)
	for _, name := range []string{"sim/sim-b", "sim/sim-c"} {
		if r := routes[name]; r.Requests != 0 || r.Failures != 0 || r.State != "healthy" {
			t.Errorf("%s: got %+v, want no attempt, no failure, healthy", name, r)
		}
	}
	if r := routes["dead/claude-opus-4-8"]; r.Requests != deadCalls || r.Failures != deadCalls {
		t.Errorf("dead route: got %+v, want its %d refused connections counted", r, deadCalls)
	}

	// usage --by route: the refusals are the gateway's, under no route.
	store := tempLedger(t)
	if err := store.Insert(ctx, entries); err != nil {
		t.Fatal(err)
	}
	rows, err := usage.Report(ctx, store, usage.ReportQuery{By: "route"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Failed != 0 || r.Group != "" || r.Refused != 2 {
			t.Errorf("usage by route: got %+v, want the two refusals under no route, none failed", r)
		}
	}
	if len(rows) != 1 {
		t.Errorf("usage by route: got %d rows, want 1", len(rows))
	}

	// requests_total counts them as untranslatable, under no route.
	resp := do(t, "GET", e.url+"/metrics", "", "")
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, want := range []string{
		`streamgate_requests_total{code="400",model="cc-failover",outcome="untranslatable",route=""} 1`,
		`streamgate_requests_total{code="400",model="cc-openai",outcome="untranslatable",route=""} 0`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics: want %s", want)
		}
	}
}
