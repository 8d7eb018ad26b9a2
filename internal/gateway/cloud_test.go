package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
)

// cloudEnv is the gateway in front of a simulator that speaks Bedrock
// (SigV4), Vertex AI (tokens from its own token endpoint) and Azure
// (api-key, both paths).
func cloudEnv(t *testing.T) (*env, *sim.Server) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(sim.Options{Seed: 3, GoogleKeys: []*rsa.PublicKey{&key.PublicKey}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": "gw@proj.iam.gserviceaccount.com",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": srv.URL + "/token",
	})
	saPath := filepath.Join(t.TempDir(), "sa.json")
	os.WriteFile(saPath, sa, 0o600)

	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	creds := sim.SimAWSCredentials
	cfg.Providers = []config.Provider{
		{Name: "bedrock", Kind: "bedrock", BaseURL: srv.URL, Region: "us-east-1", AWS: &config.AWSKeys{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey}},
		{Name: "bedrock-key", Kind: "bedrock", BaseURL: srv.URL, Region: "us-east-1", APIKey: "ABSK-bedrock-api-key"},
		{Name: "vertex", Kind: "vertex", BaseURL: srv.URL, Project: "proj", Region: "us-east5", CredentialsFile: saPath},
		{Name: "azure", Kind: "azure", BaseURL: srv.URL, APIKey: "azure-key", APIVersion: "2024-10-21"},
		{Name: "azure-v1", Kind: "azure", BaseURL: srv.URL, APIKey: "azure-key"},
		{Name: "azure-entra", Kind: "azure", BaseURL: srv.URL, APIVersion: "2024-10-21", Entra: &config.EntraApp{
			TenantID: "contoso", ClientID: entraClient, ClientSecret: sim.SimEntraApps[entraClient], AuthorityHost: srv.URL}},
		{Name: "azure-entra-wrong", Kind: "azure", BaseURL: srv.URL, APIVersion: "2024-10-21", Entra: &config.EntraApp{
			TenantID: "contoso", ClientID: entraClient, ClientSecret: "not-the-secret", AuthorityHost: srv.URL}},
	}
	price := config.Price{Input: 3, Output: 15, CachedInput: ptr(0.3), CacheWrite: ptr(3.75)}
	cfg.Models = []config.Model{
		{Name: "m-bedrock", Routes: []config.Route{{Provider: "bedrock", Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}}, Price: price},
		{Name: "m-bedrock-key", Routes: []config.Route{{Provider: "bedrock-key", Model: "anthropic.claude-3-5-haiku-20241022-v1:0"}}, Price: price},
		{Name: "m-bedrock-nova", Routes: []config.Route{{Provider: "bedrock", Model: "us.amazon.nova-pro-v1:0"}}, Price: price},
		{Name: "m-bedrock-llama-key", Routes: []config.Route{{Provider: "bedrock-key", Model: "meta.llama3-3-70b-instruct-v1:0"}}, Price: price},
		{Name: "m-vertex-claude", Routes: []config.Route{{Provider: "vertex", Model: "claude-sonnet-4-5@20250929"}}, Price: price},
		{Name: "m-vertex-gemini", Routes: []config.Route{{Provider: "vertex", Model: "gemini-2.5-flash"}}, Price: price},
		{Name: "m-azure", Routes: []config.Route{{Provider: "azure", Model: "gpt-4o-deployment"}}, Price: price},
		{Name: "m-azure-v1", Routes: []config.Route{{Provider: "azure-v1", Model: "gpt-4o-deployment"}}, Price: price},
		{Name: "m-azure-entra", Routes: []config.Route{{Provider: "azure-entra", Model: "gpt-4o-deployment"}}, Price: price},
		{Name: "m-azure-entra-wrong", Routes: []config.Route{{Provider: "azure-entra-wrong", Model: "gpt-4o-deployment"}}, Price: price},
	}
	return startWith(t, gateway.Options{Config: cfg, KeepAlive: -1}), s
}

func ptr[T any](v T) *T { return &v }

// entraClient is the simulator's Entra ID app registration.
const entraClient = "00000000-0000-0000-0000-00000000a2e0"

var cloudModels = []string{"m-bedrock", "m-bedrock-key", "m-bedrock-nova", "m-bedrock-llama-key", "m-vertex-claude", "m-vertex-gemini", "m-azure", "m-azure-v1", "m-azure-entra"}

// TestCloudsOpenAIClient: openai-go through the gateway to Claude on
// Bedrock (SigV4 and an API key), Claude and Gemini on Vertex and GPT on
// Azure (deployment and v1 paths): the stream's text and usage, and one
// ledger entry each billed as the client was told.
func TestCloudsOpenAIClient(t *testing.T) {
	e, s := cloudEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	for _, model := range cloudModels {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         openai.ChatModel(model),
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")},
			MaxTokens:     openai.Int(8),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Usage.CompletionTokens == 0 || acc.Usage.PromptTokens == 0 {
			t.Errorf("%s: got %+v usage %+v, want text and usage", model, acc.Choices, acc.Usage)
		}
		if acc.Choices[0].FinishReason != "length" && acc.Choices[0].FinishReason != "stop" {
			t.Errorf("%s: finish reason %q", model, acc.Choices[0].FinishReason)
		}
		// Not streamed.
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: openai.ChatModel(model), MaxTokens: openai.Int(8),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		if err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
			t.Errorf("%s non-stream: got %+v, %v", model, c, err)
		}
	}
	entries := e.waitEntries(t, 2*len(cloudModels))
	for _, en := range entries {
		if en.Outcome != "ok" || en.OutputTokens == 0 || en.CostUSD <= 0 {
			t.Errorf("entry %s: outcome %s, %d output tokens, $%f", en.Model, en.Outcome, en.OutputTokens, en.CostUSD)
		}
	}
	if n := s.TokenGrants(); n != 1 {
		t.Errorf("vertex: %d token grants for 4 requests, want 1", n)
	}
}

// TestCloudsMessagesCache: anthropic-sdk-go's /v1/messages to Claude on
// Bedrock and on Vertex keeps its cache breakpoints as sent: the second
// request reads from the simulated cloud's cache what the first wrote,
// and the ledger bills those cache tokens.
func TestCloudsMessagesCache(t *testing.T) {
	e, _ := cloudEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey(devKey), aoption.WithMaxRetries(0),
		aoption.WithHeader("X-Sim-TTFT", "1ms"), aoption.WithHeader("X-Sim-ITL", "1ms"))
	system := strings.Repeat("You are a careful assistant who answers in plain words. ", 300)
	for _, model := range []string{"m-bedrock", "m-vertex-claude"} {
		var written int64
		for turn := range 2 {
			stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
				Model:     anthropic.Model(model),
				MaxTokens: 16,
				System:    []anthropic.TextBlockParam{{Text: system, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
			})
			var msg anthropic.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("%s turn %d: %v", model, turn, err)
			}
			u := msg.Usage
			if turn == 0 {
				written = u.CacheCreationInputTokens
				if written == 0 {
					t.Errorf("%s: the first request wrote nothing to the cache: %+v", model, u)
				}
			} else if u.CacheReadInputTokens != written {
				t.Errorf("%s: the second request read %d cached tokens, want the %d written", model, u.CacheReadInputTokens, written)
			}
			if len(msg.Content) == 0 || msg.StopReason == "" {
				t.Errorf("%s: got %+v", model, msg)
			}
		}
	}
	entries := e.waitEntries(t, 4)
	if entries[1].CacheReadTokens == 0 || entries[3].CacheReadTokens == 0 {
		t.Errorf("ledger: cache reads %d and %d, want both billed", entries[1].CacheReadTokens, entries[3].CacheReadTokens)
	}
}

// TestCloudsConverse: a Bedrock model served through Converse (Nova,
// SigV4) reached from every inbound API with the official SDKs: chat
// completions (openai-go), /v1/responses (openai-go) and /v1/messages
// (anthropic-sdk-go), streamed and not, each with text and with a tool
// call whose arguments stream, the finish reason each dialect names, and
// usage; a cache breakpoint from /v1/messages becomes a cachePoint, so the
// second request reads what the first wrote, and the client and the
// ledger see both.
func TestCloudsConverse(t *testing.T) {
	e, _ := cloudEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const model = "m-bedrock-nova"
	fast := []option.RequestOption{option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms")}
	oc := openai.NewClient(append([]option.RequestOption{option.WithBaseURL(e.url + "/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0)}, fast...)...)
	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})
	entries := 0

	// Chat completions: text, then a tool call, streamed.
	for _, tool := range []bool{false, true} {
		params := openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(12),
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}
		var opts []option.RequestOption
		if tool {
			params.Tools = []openai.ChatCompletionToolUnionParam{weather}
			opts = append(opts, option.WithHeader("X-Sim-Tool-Call", "get_weather"))
		}
		s := oc.Chat.Completions.NewStreaming(ctx, params, opts...)
		acc := openai.ChatCompletionAccumulator{}
		argChunks := 0
		for s.Next() {
			c := s.Current()
			acc.AddChunk(c)
			if len(c.Choices) > 0 && len(c.Choices[0].Delta.ToolCalls) > 0 && c.Choices[0].Delta.ToolCalls[0].Function.Arguments != "" {
				argChunks++
			}
		}
		entries++
		if err := s.Err(); err != nil {
			t.Fatalf("chat tool=%v: %v", tool, err)
		}
		ch := acc.Choices[0]
		if acc.Usage.PromptTokens == 0 || acc.Usage.CompletionTokens == 0 || acc.Usage.TotalTokens != acc.Usage.PromptTokens+acc.Usage.CompletionTokens {
			t.Errorf("chat tool=%v: usage %+v", tool, acc.Usage)
		}
		if tool && (len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" || ch.Message.ToolCalls[0].ID == "" ||
			!json.Valid([]byte(ch.Message.ToolCalls[0].Function.Arguments)) || argChunks == 0 || ch.FinishReason != "tool_calls") {
			t.Errorf("chat tool call: got %+v finish %q (%d argument chunks)", ch.Message.ToolCalls, ch.FinishReason, argChunks)
		}
		if !tool && (ch.Message.Content == "" || (ch.FinishReason != "stop" && ch.FinishReason != "length")) {
			t.Errorf("chat text: got %q finish %q", ch.Message.Content, ch.FinishReason)
		}
	}
	c, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(12),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")}, Tools: []openai.ChatCompletionToolUnionParam{weather}},
		option.WithHeader("X-Sim-Tool-Call", "get_weather"))
	entries++
	if err != nil || len(c.Choices) != 1 || len(c.Choices[0].Message.ToolCalls) != 1 || c.Choices[0].FinishReason != "tool_calls" || c.Usage.PromptTokens == 0 {
		t.Errorf("chat non-stream tool call: got %+v, %v", c, err)
	}

	// The Responses API: text, then a function call with streamed arguments.
	rparams := func(tool bool) responses.ResponseNewParams {
		p := responses.ResponseNewParams{Model: model, MaxOutputTokens: openai.Int(16),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Paris?")}}
		if tool {
			p.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
		}
		return p
	}
	rs := readResponses(t, oc.Responses.NewStreaming(ctx, rparams(false)))
	entries++
	if rs.text == "" || (rs.terminal == "response.incomplete") != (rs.final.IncompleteDetails.Reason == "max_output_tokens") || rs.final.Usage.InputTokens == 0 || rs.final.Usage.OutputTokens == 0 {
		t.Errorf("responses text: got %q, %s, usage %+v", rs.text, rs.terminal, rs.final.Usage)
	}
	rs = readResponses(t, oc.Responses.NewStreaming(ctx, rparams(true), option.WithHeader("X-Sim-Tool-Call", "get_weather")))
	entries++
	var call responses.ResponseFunctionToolCall
	for _, it := range rs.final.Output {
		if it.Type == "function_call" {
			call = it.AsFunctionCall()
		}
	}
	if rs.terminal != "response.completed" || call.Name != "get_weather" || call.CallID == "" || rs.argDelta == 0 || rs.args != call.Arguments {
		t.Errorf("responses function call: got %+v (%d argument deltas %q), %s", call, rs.argDelta, rs.args, rs.terminal)
	}
	res, err := oc.Responses.New(ctx, rparams(false))
	entries++
	if err != nil || (res.Status != "completed" && res.IncompleteDetails.Reason != "max_output_tokens") || res.OutputText() == "" || res.Usage.OutputTokens == 0 {
		t.Errorf("responses non-stream: got %v: %s", err, res.RawJSON())
	}

	// /v1/messages: a tool call, then the cache breakpoint written and read.
	ac := anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey(devKey), aoption.WithMaxRetries(0),
		aoption.WithHeader("X-Sim-TTFT", "1ms"), aoption.WithHeader("X-Sim-ITL", "1ms"))
	ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 32,
		Tools:    []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "get_weather")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather?"))}},
		aoption.WithHeader("X-Sim-Tool-Call", "get_weather"))
	var msg anthropic.Message
	for ms.Next() {
		if err := msg.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	entries++
	if err := ms.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) == 0 || msg.Content[len(msg.Content)-1].Type != "tool_use" || msg.Usage.InputTokens == 0 {
		t.Errorf("messages tool call: got %+v", msg)
	}
	system := strings.Repeat("You are a careful assistant who answers in plain words. ", 300)
	var written int64
	for turn := range 2 {
		ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 16,
			System:   []anthropic.TextBlockParam{{Text: system, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}})
		var msg anthropic.Message
		for ms.Next() {
			if err := msg.Accumulate(ms.Current()); err != nil {
				t.Fatal(err)
			}
		}
		entries++
		if err := ms.Err(); err != nil {
			t.Fatalf("messages turn %d: %v", turn, err)
		}
		u := msg.Usage
		if turn == 0 {
			written = u.CacheCreationInputTokens
			if written == 0 || u.CacheReadInputTokens != 0 {
				t.Errorf("messages turn 0: usage %+v, want a cache write", u)
			}
		} else if u.CacheReadInputTokens != written || u.CacheCreationInputTokens != 0 {
			t.Errorf("messages turn 1: read %d, want the %d written", u.CacheReadInputTokens, written)
		}
		if u.InputTokens == 0 || u.InputTokens >= written || msg.StopReason == "" {
			t.Errorf("messages turn %d: input_tokens %d (want the uncached part), stop %q", turn, u.InputTokens, msg.StopReason)
		}
	}
	all := e.waitEntries(t, entries)
	last := all[len(all)-2:]
	if last[0].CacheWriteTokens != int(written) || last[1].CacheReadTokens != int(written) || last[1].InputTokens <= int(written) {
		t.Errorf("ledger: write %d then read %d of %d input, want %d written then read", last[0].CacheWriteTokens, last[1].CacheReadTokens, last[1].InputTokens, written)
	}
	for _, en := range all {
		if en.Outcome != "ok" || en.Route != "bedrock/us.amazon.nova-pro-v1:0" || en.OutputTokens == 0 || en.CostUSD <= 0 {
			t.Errorf("entry: outcome %s via %s, %d output tokens, $%f", en.Outcome, en.Route, en.OutputTokens, en.CostUSD)
		}
	}
}

// TestCloudsAzureEntra: kind azure with entra gets a token from the
// (simulated) Entra ID token endpoint by the client-credentials grant and
// sends it as Authorization: Bearer: many requests, one grant; a wrong
// client secret fails the route with Entra's own words, redacted of the
// secret, and no request reaches Azure without a token.
func TestCloudsAzureEntra(t *testing.T) {
	e, s := cloudEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	for i := range 4 {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m-azure-entra", MaxTokens: openai.Int(5),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
		if err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
			t.Fatalf("request %d: got %+v, %v", i, c, err)
		}
	}
	if n := s.EntraGrants(); n != 1 {
		t.Errorf("%d Entra grants for 4 requests, want 1", n)
	}
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m-azure-entra-wrong", MaxTokens: openai.Int(5),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 502 || ae.Code != "upstream_failed" || strings.Contains(ae.RawJSON(), "not-the-secret") {
		t.Errorf("wrong secret: got %v, want the gateway's 502 upstream_failed without the secret", err)
	}
	if n := s.EntraGrants(); n != 1 {
		t.Errorf("%d Entra grants after a refused one, want still 1", n)
	}
}
