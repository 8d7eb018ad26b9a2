package gateway_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sim"
)

// The agent session of the cache tests: a system prompt long enough to be
// cached (over 1,024 tokens), a second system block, two tools, and turns
// that alternate a tool call (its result sent back with an image) and a
// text answer, as a coding agent's loop does.
var (
	agentSystem = strings.Repeat("You are a careful coding agent. Read before you write. ", 120)
	agentTools  = []string{"read_file", "run_tests"}
)

// agentTurns is the number of turns of each session.
const agentTurns = 20

// simPair is two simulators with separate prompt caches: one the client
// reaches directly, one behind a gateway, so that a session sent both ways
// can be compared turn by turn.
func simPair(t *testing.T) (direct, behind *httptest.Server) {
	t.Helper()
	direct = httptest.NewServer(sim.New(sim.Options{}))
	behind = httptest.NewServer(sim.New(sim.Options{}))
	t.Cleanup(direct.Close)
	t.Cleanup(behind.Close)
	return direct, behind
}

// TestAgentSessionCacheThroughGateway: a 20-turn Claude Code-style session
// (cache breakpoints on the last system block, the last tool and the last
// user block; thinking on, its signed blocks passed back; tool results
// with an image) through /v1/messages to an Anthropic route reads and
// writes exactly the prompt-cache tokens the same session sent to the
// simulator directly does, turn by turn: the gateway causes no cache miss.
// Likewise an OpenAI chat session through /v1/chat/completions to an
// OpenAI route, for OpenAI's automatic caching.
func TestAgentSessionCacheThroughGateway(t *testing.T) {
	direct, behind := simPair(t)
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20 // an agent's conversation
	// The sim computes its prompt cache before the first token: slow
	// under -race on a loaded machine.
	cfg.Timeouts.FirstToken = config.Duration(time.Minute)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "up-anthropic", Kind: "anthropic", BaseURL: behind.URL, APIKey: "sk-agent"},
		config.Provider{Name: "up-openai", Kind: "openai", BaseURL: behind.URL + "/v1", APIKey: "sk-agent"})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "sim-claude-sonnet-4.5", Routes: []config.Route{{Provider: "up-anthropic", Model: "sim-claude-sonnet-4.5"}}},
		config.Model{Name: "sim-gpt-4.1", Routes: []config.Route{{Provider: "up-openai", Model: "sim-gpt-4.1"}}})
	e, _ := serve(t, cfg, time.Second)
	fast := []string{"X-Sim-TTFT", "1ms", "X-Sim-ITL", "0s", "X-Sim-Prefill-Per-Token", "0s"}

	t.Run("anthropic", func(t *testing.T) {
		var opts []aoption.RequestOption
		for i := 0; i < len(fast); i += 2 {
			opts = append(opts, aoption.WithHeader(fast[i], fast[i+1]))
		}
		d := anthropic.NewClient(append(opts, aoption.WithBaseURL(direct.URL), aoption.WithAPIKey("sk-agent"), aoption.WithMaxRetries(0))...)
		g := anthropic.NewClient(append(opts, aoption.WithBaseURL(e.url), aoption.WithAPIKey(devKey), aoption.WithMaxRetries(0))...)
		ds, gs := newAnthropicSession(), newAnthropicSession()
		var reads int64
		for turn := range agentTurns {
			dm := ds.turn(t, d, turn)
			gm := gs.turn(t, g, turn)
			du, gu := dm.Usage, gm.Usage
			if du.InputTokens != gu.InputTokens || du.CacheReadInputTokens != gu.CacheReadInputTokens || du.CacheCreationInputTokens != gu.CacheCreationInputTokens {
				t.Errorf("turn %d: through the gateway input %d, cache read %d, cache write %d; direct %d, %d, %d",
					turn+1, gu.InputTokens, gu.CacheReadInputTokens, gu.CacheCreationInputTokens, du.InputTokens, du.CacheReadInputTokens, du.CacheCreationInputTokens)
			}
			if turn > 0 && gu.CacheReadInputTokens == 0 {
				t.Errorf("turn %d: no cache read through the gateway", turn+1)
			}
			if dm.StopReason != gm.StopReason {
				t.Errorf("turn %d: stop reason %q through the gateway, %q direct", turn+1, gm.StopReason, dm.StopReason)
			}
			reads += gu.CacheReadInputTokens
		}
		if reads == 0 {
			t.Fatal("the session read nothing from the cache")
		}
		t.Logf("%d turns: %d cache-read tokens through the gateway, as direct", agentTurns, reads)
	})

	t.Run("openai", func(t *testing.T) {
		var opts []option.RequestOption
		for i := 0; i < len(fast); i += 2 {
			opts = append(opts, option.WithHeader(fast[i], fast[i+1]))
		}
		d := openai.NewClient(append(opts, option.WithBaseURL(direct.URL+"/v1"), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))...)
		g := openai.NewClient(append(opts, option.WithBaseURL(e.url+"/v1"), option.WithAPIKey(devKey), option.WithMaxRetries(0))...)
		ds, gs := newChatSession(), newChatSession()
		var reads int64
		for turn := range agentTurns {
			du := ds.turn(t, d, turn)
			gu := gs.turn(t, g, turn)
			if du.PromptTokens != gu.PromptTokens || du.PromptTokensDetails.CachedTokens != gu.PromptTokensDetails.CachedTokens {
				t.Errorf("turn %d: through the gateway prompt %d, cached %d; direct %d, %d",
					turn+1, gu.PromptTokens, gu.PromptTokensDetails.CachedTokens, du.PromptTokens, du.PromptTokensDetails.CachedTokens)
			}
			if turn > 0 && gu.PromptTokensDetails.CachedTokens == 0 {
				t.Errorf("turn %d: no cached tokens through the gateway", turn+1)
			}
			reads += gu.PromptTokensDetails.CachedTokens
		}
		t.Logf("%d turns: %d cached prompt tokens through the gateway, as direct", agentTurns, reads)
	})
}

// anthropicSession is one agent conversation in Anthropic's Messages form.
type anthropicSession struct {
	history []anthropic.MessageParam // without cache_control: turn adds the breakpoint to the last block
	tools   []anthropic.ToolUnionParam
}

func newAnthropicSession() *anthropicSession {
	s := &anthropicSession{}
	for i, name := range agentTools {
		tool := anthropic.ToolParam{Name: name, Description: anthropic.String("Tool " + name),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}, Required: []string{"path"}}}
		if i == len(agentTools)-1 {
			tool.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		s.tools = append(s.tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	s.history = append(s.history, anthropic.NewUserMessage(anthropic.NewTextBlock("Fix the failing test in the parser package.")))
	return s
}

// turn sends the conversation so far, streamed, the last user block with
// a breakpoint and even turns asking for a tool call, and appends the
// answer and the next user message: the tool results (text and an image)
// after a tool call, else a new instruction.
func (s *anthropicSession) turn(t *testing.T, c anthropic.Client, n int) anthropic.Message {
	t.Helper()
	msgs := make([]anthropic.MessageParam, len(s.history))
	copy(msgs, s.history)
	last := msgs[len(msgs)-1].OfUser // the history ends with a user turn
	content := make([]anthropic.ContentBlockParamUnion, len(last.Content))
	copy(content, last.Content)
	switch b := content[len(content)-1]; {
	case b.OfText != nil:
		tb := *b.OfText
		tb.CacheControl = anthropic.NewCacheControlEphemeralParam()
		content[len(content)-1] = anthropic.ContentBlockParamUnion{OfText: &tb}
	case b.OfToolResult != nil:
		tr := *b.OfToolResult
		tr.CacheControl = anthropic.NewCacheControlEphemeralParam()
		content[len(content)-1] = anthropic.ContentBlockParamUnion{OfToolResult: &tr}
	}
	msgs[len(msgs)-1] = anthropic.NewUserMessage(content...)
	params := anthropic.MessageNewParams{
		Model: "sim-claude-sonnet-4.5", MaxTokens: 2048, Messages: msgs, Tools: s.tools,
		System: []anthropic.TextBlockParam{
			{Text: agentSystem},
			{Text: "The repository is a Go module.", CacheControl: anthropic.NewCacheControlEphemeralParam()},
		},
		Thinking: anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: 1024}},
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("agent-session-1")},
	}
	var opts []aoption.RequestOption
	opts = append(opts, aoption.WithHeader("anthropic-beta", "interleaved-thinking-2025-05-14"))
	if n%2 == 0 {
		opts = append(opts, aoption.WithHeader("X-Sim-Tool-Call", agentTools[n/2%len(agentTools)]))
	}
	stream := c.Messages.NewStreaming(context.Background(), params, opts...)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("turn %d: %v", n+1, err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("turn %d: %v", n+1, err)
	}
	s.history = append(s.history, msg.ToParam())
	var results []anthropic.ContentBlockParamUnion
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			results = append(results, anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
				ToolUseID: b.ID,
				Content: []anthropic.ToolResultBlockParamContentUnion{
					{OfText: &anthropic.TextBlockParam{Text: fmt.Sprintf("output of %s, turn %d", b.Name, n+1)}},
					{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
						MediaType: anthropic.Base64ImageSourceMediaTypeImagePNG, Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}}}},
				},
			}})
		}
	}
	if n%2 == 0 && len(results) == 0 {
		t.Fatalf("turn %d: asked for a tool call, got stop reason %q", n+1, msg.StopReason)
	}
	if len(results) > 0 {
		s.history = append(s.history, anthropic.NewUserMessage(results...))
	} else {
		s.history = append(s.history, anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("Good. Now step %d.", n+2))))
	}
	return msg
}

// chatSession is one agent conversation in OpenAI's chat form.
type chatSession struct {
	history []openai.ChatCompletionMessageParamUnion
	tools   []openai.ChatCompletionToolUnionParam
}

func newChatSession() *chatSession {
	s := &chatSession{history: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage(agentSystem),
		openai.UserMessage("Fix the failing test in the parser package."),
	}}
	for _, name := range agentTools {
		s.tools = append(s.tools, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: name,
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}))
	}
	return s
}

// turn sends the conversation so far, streamed with its usage, even turns
// asking for a tool call, and appends the answer and the next message.
func (s *chatSession) turn(t *testing.T, c openai.Client, n int) openai.CompletionUsage {
	t.Helper()
	params := openai.ChatCompletionNewParams{Model: "sim-gpt-4.1", Messages: s.history, Tools: s.tools,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}
	var opts []option.RequestOption
	if n%2 == 0 {
		opts = append(opts, option.WithHeader("X-Sim-Tool-Call", agentTools[n/2%len(agentTools)]))
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params, opts...)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("turn %d: %v", n+1, err)
	}
	if len(acc.Choices) == 0 {
		t.Fatalf("turn %d: no choice", n+1)
	}
	m := acc.Choices[0].Message
	s.history = append(s.history, m.ToParam())
	for _, tc := range m.ToolCalls {
		s.history = append(s.history, openai.ToolMessage(fmt.Sprintf("output of %s, turn %d", tc.Function.Name, n+1), tc.ID))
	}
	if n%2 == 0 && len(m.ToolCalls) == 0 {
		t.Fatalf("turn %d: asked for a tool call, got none", n+1)
	}
	if len(m.ToolCalls) == 0 {
		s.history = append(s.history, openai.UserMessage(fmt.Sprintf("Good. Now step %d.", n+2)))
	}
	return acc.Usage
}
