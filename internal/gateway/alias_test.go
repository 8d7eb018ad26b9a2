package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/usage"
)

// aliasConfig is baseConfig with aliases: m-sim (OpenAI dialect) takes
// gpt-* and o*, m-claude (the sim in Anthropic's dialect) claude-* and
// the exact claude-opus-4-8.
func aliasConfig() *config.Config {
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "sim-anthropic", Kind: "sim", Dialect: "anthropic"})
	cfg.Models[0].Aliases = []string{"gpt-*", "o*"}
	cfg.Models = append(cfg.Models, config.Model{Name: "m-claude", Aliases: []string{"claude-*", "claude-opus-4-8"},
		Routes: []config.Route{{Provider: "sim-anthropic", Model: "sim-fast"}}, Price: config.Price{Input: 3, Output: 15}})
	return cfg
}

// TestAliasesOfficialClients: openai-go asks for gpt-6.2-sol (the glob
// gpt-*), anthropic-sdk-go for claude-opus-4-8 (an exact alias) and
// claude-haiku-4-5 (the glob claude-*), streaming and not; each is served
// by the configured model, whose name the ledger and the metrics carry
// (never the alias) and whose price applies.
func TestAliasesOfficialClients(t *testing.T) {
	e := start(t, aliasConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	oc := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	params := openai.ChatCompletionNewParams{Model: "gpt-6.2-sol", MaxTokens: openai.Int(4),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
	comp, err := oc.Chat.Completions.New(ctx, params)
	if err != nil || len(comp.Choices) == 0 || comp.Choices[0].Message.Content == "" {
		t.Fatalf("openai non-stream gpt-6.2-sol: got %+v, %v; want an answer", comp, err)
	}
	stream := oc.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content == "" {
		t.Fatalf("openai stream gpt-6.2-sol: %v, content %q", err, acc.Choices[0].Message.Content)
	}

	ac := anthropicClient(e, devKey)
	for i, model := range []string{"claude-opus-4-8", "claude-haiku-4-5"} {
		mp := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 4,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}
		if i == 0 {
			s := ac.Messages.NewStreaming(ctx, mp)
			var msg anthropic.Message
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil || len(msg.Content) == 0 || msg.Content[0].Text == "" {
				t.Fatalf("anthropic stream %s: got %+v, %v; want an answer", model, msg, err)
			}
			continue
		}
		res, err := ac.Messages.New(ctx, mp)
		if err != nil || len(res.Content) == 0 || res.Content[0].Text == "" {
			t.Fatalf("anthropic non-stream %s: got %+v, %v; want an answer", model, res, err)
		}
	}

	entries := e.waitEntries(t, 4)
	for i, want := range []string{"m-sim", "m-sim", "m-claude", "m-claude"} {
		en := entries[i]
		if en.Model != want || en.Outcome != usage.OutcomeOK || en.CostUSD <= 0 {
			t.Errorf("entry %d: got model %q outcome %q cost %v; want %s, ok, a cost", i, en.Model, en.Outcome, en.CostUSD, want)
		}
	}
	metrics := scrape(t, e.url)
	if !strings.Contains(metrics, `model="m-claude"`) || strings.Contains(metrics, `model="claude-`) || strings.Contains(metrics, `model="gpt-`) {
		t.Errorf("metrics: want model labels of configured names only, got:\n%s", grepLines(metrics, "model="))
	}
}

// TestAliasesEveryAPI: an alias resolves on /v1/responses, /v1/embeddings,
// /v1/messages/count_tokens and GET /v1/models/{id} (answered under the
// id asked); GET /v1/models lists the configured names only; a key
// allowed m-sim may use m-sim's aliases and no other model's.
func TestAliasesEveryAPI(t *testing.T) {
	e := start(t, aliasConfig())
	for _, tt := range []struct {
		method, path, key, body string
		want                    int
	}{
		{"POST", "/v1/responses", devKey, `{"model":"o3","input":"hi","max_output_tokens":3}`, 200},
		{"POST", "/v1/responses", devKey, `{"model":"claude-sonnet-4-6","input":"hi","max_output_tokens":3,"stream":true}`, 200},
		{"POST", "/v1/embeddings", devKey, `{"model":"gpt-embed","input":"hi"}`, 200},
		{"POST", "/v1/messages/count_tokens", devKey, `{"model":"claude-opus-4-8","messages":[{"role":"user","content":"hi"}]}`, 200},
		{"POST", "/v1/messages/count_tokens", "sk-narrow", `{"model":"claude-opus-4-8","messages":[{"role":"user","content":"hi"}]}`, 404},
		{"GET", "/v1/models/claude-opus-4-8", devKey, "", 200},
		{"GET", "/v1/models/gpt-6.2-sol", "sk-narrow", "", 200}, // m-sim's alias
		{"GET", "/v1/models/claude-x", "sk-narrow", "", 404},    // m-claude's: not allowed
		{"GET", "/v1/models/gemini-2.5-pro", devKey, "", 404},
		{"POST", "/v1/chat/completions", "sk-narrow", chatBody("gpt-5", false, ""), 200},
		{"POST", "/v1/chat/completions", "sk-narrow", chatBody("claude-opus-4-8", false, ""), 403},
		{"POST", "/v1/chat/completions", devKey, chatBody("gemini-2.5-pro", false, ""), 404},
	} {
		resp := do(t, tt.method, e.url+tt.path, tt.key, tt.body)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tt.want {
			t.Errorf("%s %s %s: got %d %s, want %d", tt.method, tt.path, tt.body, resp.StatusCode, b, tt.want)
			continue
		}
		if tt.method == "GET" && tt.want == 200 {
			var m struct{ ID string }
			if json.Unmarshal(b, &m); !strings.HasSuffix(tt.path, "/"+m.ID) {
				t.Errorf("GET %s: got id %q, want the id asked", tt.path, m.ID)
			}
		}
	}
	resp := do(t, "GET", e.url+"/v1/models", devKey, "")
	var list struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "m-sim,m-other,m-claude" {
		t.Errorf("GET /v1/models: got %v, want the configured names m-sim, m-other, m-claude", ids)
	}
}

// grepLines returns text's lines that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
