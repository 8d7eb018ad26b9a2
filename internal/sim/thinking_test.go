package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/streamgate/streamgate/internal/api"
)

// thinkingParams asks for extended thinking with budget (and max_tokens
// max) on top of a conversation.
func thinkingParams(max, budget int64, msgs []anthropic.MessageParam, tools ...anthropic.ToolUnionParam) anthropic.MessageNewParams {
	if msgs == nil {
		msgs = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))}
	}
	return anthropic.MessageNewParams{
		Model: "sim-claude", MaxTokens: max, Messages: msgs, Tools: tools,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(budget),
	}
}

// anthropicErr returns the message of an Anthropic 400, failing otherwise.
func anthropicErr(t *testing.T, err error) string {
	t.Helper()
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Type() != anthropic.ErrorTypeInvalidRequestError {
		t.Fatalf("got %v, want a 400 invalid_request_error", err)
	}
	var body anthropicError
	if err := json.Unmarshal([]byte(ae.RawJSON()), &body); err != nil {
		t.Fatalf("error body %s: %v", ae.RawJSON(), err)
	}
	return body.Error.Message
}

// TestAnthropicThinkingStream reads a thinking stream with the SDK's
// accumulator: a thinking block with its text and signature, then the
// text; the events in Anthropic's order, one signature_delta; the thinking
// tokens counted as output.
func TestAnthropicThinkingStream(t *testing.T) {
	p := quick
	p.ThinkingTokens = 10
	s, ts := newTestServer(t, Options{Profile: p})
	c := anthropicSDK(ts)
	msg, _, err := accumulate(t, c, thinkingParams(4000, 2048, anthropicParams(1).Messages))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[1].Type != "text" {
		t.Fatalf("content: got %+v, want a thinking block then a text block", msg.Content)
	}
	th := msg.Content[0].AsThinking()
	if th.Thinking == "" || !s.signer.verify(th.Thinking, th.Signature) {
		t.Errorf("thinking: got %q signed %q, want text with its signature", th.Thinking, th.Signature)
	}
	if msg.Usage.OutputTokens != 10+12 || msg.Usage.OutputTokensDetails.ThinkingTokens != 10 {
		t.Errorf("usage: got output %d (thinking %d), want 22 (10)", msg.Usage.OutputTokens, msg.Usage.OutputTokensDetails.ThinkingTokens)
	}
	if want := streamText(t, ts, reqOpts{}); msg.Content[1].AsText().Text != want {
		t.Errorf("text: got %q, want the same answer as without thinking, %q", msg.Content[1].AsText().Text, want)
	}

	body := `{"model":"m","max_tokens":2000,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`
	evs, err := readAll(t, postJSON(t, ts, anthropicPath, body, nil))
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, ev := range evs {
		var v struct {
			Index        int `json:"index"`
			ContentBlock struct {
				Type      string  `json:"type"`
				Signature *string `json:"signature"`
				Thinking  *string `json:"thinking"`
			} `json:"content_block"`
			Delta struct {
				Type string `json:"type"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Fatal(err)
		}
		step := ev.name
		switch ev.name {
		case "content_block_start":
			step += ":" + v.ContentBlock.Type
			if v.ContentBlock.Type == "thinking" && (v.ContentBlock.Signature == nil || *v.ContentBlock.Signature != "" || *v.ContentBlock.Thinking != "") {
				t.Errorf("thinking block start: got %s, want thinking and signature empty", ev.data)
			}
		case "content_block_delta":
			step += ":" + v.Delta.Type
		}
		if strings.HasPrefix(ev.name, "content_block_") {
			step += "@" + itoa(v.Index)
		}
		if n := len(seq); n == 0 || seq[n-1] != step {
			seq = append(seq, step)
		}
	}
	want := "message_start content_block_start:thinking@0 ping content_block_delta:thinking_delta@0 content_block_delta:signature_delta@0 " +
		"content_block_stop@0 content_block_start:text@1 content_block_delta:text_delta@1 content_block_stop@1 message_delta message_stop"
	if got := strings.Join(seq, " "); got != want {
		t.Errorf("events (repeats folded):\n got %s\nwant %s", got, want)
	}
}

// TestAnthropicThinkingPassBack is an agent's tool loop with thinking:
// the turn's signed thinking block goes back with the tool result and is
// accepted; changed, unsigned, dropped or made up, it is refused as
// Anthropic refuses it.
func TestAnthropicThinkingPassBack(t *testing.T) {
	p := quick
	p.ThinkingTokens = 8
	_, ts := newTestServer(t, Options{Profile: p})
	c := anthropicSDK(ts)
	ctx := context.Background()
	first := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))}
	turn, _, err := accumulate(t, c, thinkingParams(4000, 2048, first, weatherTool), aoption.WithHeader(HeaderToolCall, "get_weather"))
	if err != nil {
		t.Fatal(err)
	}
	if len(turn.Content) != 2 || turn.Content[0].Type != "thinking" || turn.Content[1].Type != "tool_use" || turn.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("first turn: got %+v (%s), want thinking then tool_use", turn.Content, turn.StopReason)
	}
	result := anthropic.NewUserMessage(anthropic.NewToolResultBlock(turn.Content[1].AsToolUse().ID, "sunny", false))
	next := func(assistant anthropic.MessageParam) []anthropic.MessageParam {
		return []anthropic.MessageParam{first[0], assistant, result}
	}

	t.Run("passed back", func(t *testing.T) {
		msg, err := c.Messages.New(ctx, thinkingParams(4000, 2048, next(turn.ToParam()), weatherTool))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].AsThinking().Signature == "" {
			t.Errorf("second turn: got %+v, want a signed thinking block and text", msg.Content)
		}
	})
	tampered := func(change func(b *anthropic.ThinkingBlockParam)) anthropic.MessageParam {
		content := turn.ToParam().OfAssistant.Content
		b := *content[0].OfThinking
		change(&b)
		return anthropic.NewAssistantMessage(append([]anthropic.ContentBlockParamUnion{{OfThinking: &b}}, content[1:]...)...)
	}
	for _, tt := range []struct {
		name      string
		assistant anthropic.MessageParam
		want      string
	}{
		{"text changed", tampered(func(b *anthropic.ThinkingBlockParam) { b.Thinking += " " }),
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"signature of another text", tampered(func(b *anthropic.ThinkingBlockParam) { b.Signature = newSigner(nil).sign("other") }),
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"signature made up", tampered(func(b *anthropic.ThinkingBlockParam) { b.Signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl" }),
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"signature of another key", tampered(func(b *anthropic.ThinkingBlockParam) { b.Signature = newSigner([]byte("k")).sign(b.Thinking) }),
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"thinking dropped", anthropic.NewAssistantMessage(turn.ToParam().OfAssistant.Content[1:]...),
			"messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Messages.New(ctx, thinkingParams(4000, 2048, next(tt.assistant), weatherTool))
			if got := anthropicErr(t, err); !strings.HasPrefix(got, tt.want) {
				t.Errorf("message: got %q, want %q…", got, tt.want)
			}
		})
	}
	t.Run("signature missing", func(t *testing.T) {
		a, _ := json.Marshal(turn.ToParam())
		raw := strings.Replace(string(a), `"signature":"`+turn.Content[0].AsThinking().Signature+`",`, "", 1)
		body := `{"model":"m","max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` +
			`{"role":"user","content":"Weather in Paris?"},` + raw + `,{"role":"user","content":"thanks"}]}`
		resp := postJSON(t, ts, anthropicPath, body, nil)
		if e := decodeAnthropicError(t, resp); resp.StatusCode != 400 || e.Error.Message != "messages.1.content.0.thinking.signature: Field required" {
			t.Errorf("got %d %q, want 400 naming the missing signature", resp.StatusCode, e.Error.Message)
		}
	})
	t.Run("another sim's key", func(t *testing.T) {
		_, other := newTestServer(t, Options{Profile: p, ThinkingKey: []byte("another provider")})
		oc := anthropicSDK(other)
		_, err := oc.Messages.New(ctx, thinkingParams(4000, 2048, next(turn.ToParam()), weatherTool))
		if got := anthropicErr(t, err); got != "messages.1.content.0: Invalid `signature` in `thinking` block" {
			t.Errorf("got %q, want the signature refused", got)
		}
	})
}

// TestAnthropicRedactedThinking: X-Sim-Redacted-Thinking sends the
// thinking as a redacted_thinking block, whose data comes back as it was
// or is refused.
func TestAnthropicRedactedThinking(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	c := anthropicSDK(ts)
	ctx := context.Background()
	first := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))}
	for _, stream := range []bool{true, false} {
		var turn anthropic.Message
		var err error
		if stream {
			turn, _, err = accumulate(t, c, thinkingParams(4000, 2048, first), aoption.WithHeader(HeaderRedactedThinking, "true"))
		} else {
			var m *anthropic.Message
			if m, err = c.Messages.New(ctx, thinkingParams(4000, 2048, first), aoption.WithHeader(HeaderRedactedThinking, "true")); err == nil {
				turn = *m
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(turn.Content) != 2 || turn.Content[0].Type != "redacted_thinking" || turn.Content[0].AsRedactedThinking().Data == "" {
			t.Fatalf("stream %v: got %+v, want redacted_thinking with data, then text", stream, turn.Content)
		}
		if turn.Usage.OutputTokens != DefaultThinkingTokens+12 {
			t.Errorf("stream %v: output tokens %d, want %d", stream, turn.Usage.OutputTokens, DefaultThinkingTokens+12)
		}
		again := append(first, turn.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And tomorrow?")))
		if _, err := c.Messages.New(ctx, thinkingParams(4000, 2048, again)); err != nil {
			t.Errorf("stream %v: redacted block passed back: %v", stream, err)
		}
	}
	bad := anthropic.NewAssistantMessage(anthropic.NewRedactedThinkingBlock("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"),
		anthropic.NewTextBlock("Sunny."))
	msgs := append(first, bad, anthropic.NewUserMessage(anthropic.NewTextBlock("And tomorrow?")))
	_, err := c.Messages.New(ctx, thinkingParams(4000, 2048, msgs))
	if got := anthropicErr(t, err); got != "messages.1.content.0: Invalid `data` in `redacted_thinking` block" {
		t.Errorf("made-up data: got %q", got)
	}
}

// TestAnthropicThinkingRequestErrors: what Anthropic refuses about
// thinking, refused in its words.
func TestAnthropicThinkingRequestErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	user := `{"role":"user","content":"hi"}`
	for _, tt := range []struct {
		name, body, want string
	}{
		{"budget below 1024", `"max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":1000},"messages":[` + user + `]`,
			"thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"},
		{"budget not below max_tokens", `"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[` + user + `]`,
			"`max_tokens` must be greater than `thinking.budget_tokens`."},
		{"no budget", `"max_tokens":2048,"thinking":{"type":"enabled"},"messages":[` + user + `]`,
			"thinking.enabled.budget_tokens: Field required"},
		{"unknown type", `"max_tokens":2048,"thinking":{"type":"on"},"messages":[` + user + `]`,
			"thinking: Input tag 'on' found using 'type' does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'"},
		{"prefill with thinking", `"max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` + user + `,{"role":"assistant","content":"The"}]`,
			"messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`."},
		{"forced tool", `"max_tokens":4000,"thinking":{"type":"adaptive"},"tool_choice":{"type":"any"},"messages":[` + user + `]`,
			"Thinking may not be enabled when tool_choice forces tool use."},
		{"temperature", `"max_tokens":4000,"thinking":{"type":"adaptive"},"temperature":0.2,"messages":[` + user + `]`,
			"`temperature` may only be set to 1 when thinking is enabled."},
		{"thinking in a final message without thinking", `"max_tokens":4000,"messages":[` + user +
			`,{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"` + newSigner(nil).sign("x") + `"},{"type":"text","text":"The"}]}]`,
			"messages.1.content.0: When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`."},
		{"final block thinking", `"max_tokens":4000,"thinking":{"type":"adaptive"},"messages":[` + user +
			`,{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"` + newSigner(nil).sign("x") + `"}]}]`,
			"messages.1: The final block in an assistant message cannot be `thinking`."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := postJSON(t, ts, anthropicPath, `{"model":"m",`+tt.body+`}`, nil)
			e := decodeAnthropicError(t, resp)
			if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || !strings.HasPrefix(e.Error.Message, tt.want) {
				t.Errorf("got %d %s %q, want 400 invalid_request_error %q…", resp.StatusCode, e.Error.Type, e.Error.Message, tt.want)
			}
		})
	}
}

// TestAnthropicThinkingLimits: adaptive thinking thinks the profile's
// length, a budget caps it, max_tokens cuts the answer after it, display
// omitted sends an empty signed block.
func TestAnthropicThinkingLimits(t *testing.T) {
	p := quick
	p.ThinkingTokens = 2000
	_, ts := newTestServer(t, Options{Profile: p})
	c := anthropicSDK(ts)
	ctx := context.Background()
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	adaptive := anthropic.MessageNewParams{Model: "m", MaxTokens: 3000, Messages: user,
		Thinking: anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}}
	msg, err := c.Messages.New(ctx, adaptive)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.OutputTokens != 2012 || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("adaptive: got %d output tokens, stop %s, want 2012 and end_turn", msg.Usage.OutputTokens, msg.StopReason)
	}
	msg, err = c.Messages.New(ctx, thinkingParams(1030, 1024, user))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.OutputTokens != 1030 || msg.StopReason != anthropic.StopReasonMaxTokens || msg.Content[1].AsText().Text == "" {
		t.Errorf("budget 1024, max_tokens 1030: got %d output tokens, stop %s, want 1030 (1024 thinking, 6 text) and max_tokens",
			msg.Usage.OutputTokens, msg.StopReason)
	}
	omitted := adaptive
	omitted.Thinking.OfAdaptive.Display = anthropic.ThinkingConfigAdaptiveDisplayOmitted
	got, _, err := accumulate(t, c, omitted)
	if err != nil {
		t.Fatal(err)
	}
	if th := got.Content[0].AsThinking(); got.Content[0].Type != "thinking" || th.Thinking != "" || th.Signature == "" || got.Usage.OutputTokens != 2012 {
		t.Errorf("display omitted: got %+v, %d output tokens, want an empty signed thinking block and 2012", got.Content[0], got.Usage.OutputTokens)
	}
	again := append(user, got.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("more")))
	if _, err := c.Messages.New(ctx, thinkingParams(3000, 2048, again)); err != nil {
		t.Errorf("omitted block passed back: %v", err)
	}
}

// TestOpenAIReasoningTokens: reasoning_effort (or a reasoning profile)
// reports completion_tokens_details.reasoning_tokens, part of the
// completion tokens, as OpenAI's reasoning models do; effort scales them.
func TestOpenAIReasoningTokens(t *testing.T) {
	p := quick
	p.ThinkingTokens = 40
	reasoner := quick
	reasoner.Name, reasoner.Reasoning = "reasoner", true
	_, ts := newTestServer(t, Options{Profile: p, Profiles: []Profile{reasoner}})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("sim"), option.WithHTTPClient(ts.Client()), option.WithMaxRetries(0))
	ctx := context.Background()
	for _, tt := range []struct {
		model    string
		effort   shared.ReasoningEffort
		thinking int64
	}{
		{"m", "", 0}, {"m", shared.ReasoningEffortLow, 20}, {"m", shared.ReasoningEffortMedium, 40}, {"m", shared.ReasoningEffortHigh, 80},
		{"reasoner", "", DefaultThinkingTokens}, {"reasoner", "none", 0},
	} {
		t.Run(tt.model+"/"+string(tt.effort), func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: tt.model, ReasoningEffort: tt.effort,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
			c, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if c.Usage.CompletionTokensDetails.ReasoningTokens != tt.thinking || c.Usage.CompletionTokens != 12+tt.thinking {
				t.Errorf("non-stream usage: got %+v, want %d reasoning of %d completion tokens", c.Usage, tt.thinking, 12+tt.thinking)
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			defer stream.Close()
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Usage.CompletionTokensDetails.ReasoningTokens != tt.thinking || acc.Usage.CompletionTokens != 12+tt.thinking {
				t.Errorf("stream usage: got %+v, want %d reasoning of %d completion tokens", acc.Usage, tt.thinking, 12+tt.thinking)
			}
		})
	}
	resp := post(t, ts, reqOpts{extra: `,"reasoning_effort":"max"`})
	var e api.ErrorResponse
	if json.NewDecoder(resp.Body).Decode(&e); resp.StatusCode != 400 || e.Error.Param == nil || *e.Error.Param != "reasoning_effort" {
		t.Errorf("reasoning_effort max: got %d %+v, want 400 naming reasoning_effort", resp.StatusCode, e.Error)
	}
}

// TestGeminiThinking: thinkingConfig with includeThoughts streams thought
// parts first; thoughtsTokenCount counts them apart from the candidates;
// the last part (or the function call) carries a thoughtSignature;
// thinkingBudget 0 switches a thinking profile off.
func TestGeminiThinking(t *testing.T) {
	p := quick
	p.TokensPerChunk, p.ThinkingTokens = 4, 10
	reasoner := p
	reasoner.Name, reasoner.Reasoning = "reasoner", true
	_, ts := newTestServer(t, Options{Profile: p, Profiles: []Profile{reasoner}})
	type part struct {
		Text             *string         `json:"text"`
		Thought          bool            `json:"thought"`
		FunctionCall     json.RawMessage `json:"functionCall"`
		ThoughtSignature string          `json:"thoughtSignature"`
	}
	type chunk struct {
		Candidates []struct {
			Content struct {
				Parts []part `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
		UsageMetadata struct {
			Prompt     int `json:"promptTokenCount"`
			Candidates int `json:"candidatesTokenCount"`
			Total      int `json:"totalTokenCount"`
			Thoughts   int `json:"thoughtsTokenCount"`
		} `json:"usageMetadata"`
	}
	read := func(t *testing.T, path, body string, h map[string]string) []chunk {
		t.Helper()
		evs, err := readAll(t, postJSON(t, ts, path, body, h))
		if err != nil {
			t.Fatal(err)
		}
		var out []chunk
		for _, ev := range evs {
			var c chunk
			if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		return out
	}
	const cfg = `,"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":-1}}`
	chunks := read(t, geminiStream, geminiBody(0, cfg), nil)
	// 10 thought tokens in chunks of 4: 3 thought chunks, then 12 text
	// tokens: 3 chunks, then the finish chunk.
	if len(chunks) != 7 {
		t.Fatalf("got %d chunks, want 7", len(chunks))
	}
	for i, c := range chunks {
		pt := c.Candidates[0].Content.Parts[0]
		if thought := i < 3; pt.Thought != thought {
			t.Errorf("chunk %d: thought %v, want %v", i, pt.Thought, thought)
		}
		if sig := i == 6; (pt.ThoughtSignature != "") != sig {
			t.Errorf("chunk %d: thoughtSignature %q, want one only on the last part", i, pt.ThoughtSignature)
		}
	}
	last := chunks[6].UsageMetadata
	if last.Thoughts != 10 || last.Candidates != 12 || last.Total != last.Prompt+22 {
		t.Errorf("usage: got %+v, want 10 thoughts, 12 candidates, total = prompt + 22", last)
	}
	if u := chunks[1].UsageMetadata; u.Thoughts != 8 || u.Candidates != 0 {
		t.Errorf("second chunk usage: got %+v, want 8 thoughts so far and no candidates", u)
	}

	chunks = read(t, "/v1beta/models/reasoner:streamGenerateContent?alt=sse", geminiBody(0, geminiTools), map[string]string{HeaderToolCall: "get_weather"})
	if n := len(chunks); n != 2 || chunks[0].Candidates[0].Content.Parts[0].ThoughtSignature == "" || chunks[1].Candidates[0].Content.Parts[0].ThoughtSignature != "" ||
		chunks[1].UsageMetadata.Thoughts != 10 {
		t.Errorf("reasoning profile, function call: got %+v, want the call signed, 10 thought tokens, no thought part", chunks)
	}
	chunks = read(t, "/v1beta/models/reasoner:streamGenerateContent?alt=sse", geminiBody(0, `,"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}`), nil)
	if u := chunks[len(chunks)-1].UsageMetadata; u.Thoughts != 0 || u.Candidates != 12 {
		t.Errorf("thinkingBudget 0: got %+v, want no thoughts", u)
	}
}
