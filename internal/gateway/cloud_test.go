package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
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
	}
	price := config.Price{Input: 3, Output: 15, CachedInput: ptr(0.3), CacheWrite: ptr(3.75)}
	cfg.Models = []config.Model{
		{Name: "m-bedrock", Routes: []config.Route{{Provider: "bedrock", Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}}, Price: price},
		{Name: "m-bedrock-key", Routes: []config.Route{{Provider: "bedrock-key", Model: "anthropic.claude-3-5-haiku-20241022-v1:0"}}, Price: price},
		{Name: "m-vertex-claude", Routes: []config.Route{{Provider: "vertex", Model: "claude-sonnet-4-5@20250929"}}, Price: price},
		{Name: "m-vertex-gemini", Routes: []config.Route{{Provider: "vertex", Model: "gemini-2.5-flash"}}, Price: price},
		{Name: "m-azure", Routes: []config.Route{{Provider: "azure", Model: "gpt-4o-deployment"}}, Price: price},
		{Name: "m-azure-v1", Routes: []config.Route{{Provider: "azure-v1", Model: "gpt-4o-deployment"}}, Price: price},
	}
	return startWith(t, gateway.Options{Config: cfg, KeepAlive: -1}), s
}

func ptr[T any](v T) *T { return &v }

var cloudModels = []string{"m-bedrock", "m-bedrock-key", "m-vertex-claude", "m-vertex-gemini", "m-azure", "m-azure-v1"}

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
