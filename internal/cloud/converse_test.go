package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sim"
)

// bedrockKind builds kind bedrock as the gateway does, against the
// simulator: SigV4 with the simulator's credentials, or an API key.
func bedrockKind(t *testing.T, base, apiKey string) provider.Provider {
	cfg := provider.Config{Name: "bedrock", Kind: "bedrock", BaseURL: base, APIKey: apiKey,
		Cloud: provider.Cloud{Region: "us-east-1", Getenv: func(string) string { return "" }}}
	if apiKey == "" {
		cfg.Cloud.AWSAccessKeyID, cfg.Cloud.AWSSecretAccessKey = sim.SimAWSCredentials.AccessKeyID, sim.SimAWSCredentials.SecretAccessKey
	}
	p, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.(interface{ CloseIdleConnections() }).CloseIdleConnections)
	return p
}

func chatBody(t *testing.T, model string, stream bool, body string) *provider.Request {
	var chat api.ChatRequest
	if err := json.Unmarshal([]byte(body), &chat); err != nil {
		t.Fatal(err)
	}
	return &provider.Request{Model: model, Stream: stream, Body: []byte(body), Chat: &chat}
}

// converseAnswer is a Converse stream gathered from its chunks.
type converseAnswer struct {
	text, finish string
	calls        map[int]*api.ToolCall
	usage        *api.Usage
}

func gather(t *testing.T, st provider.Stream) (converseAnswer, error) {
	defer st.Close()
	a := converseAnswer{calls: map[int]*api.ToolCall{}}
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return a, nil
		}
		if err != nil {
			return a, err
		}
		if len(ev.Data) == 0 {
			continue
		}
		var c api.Chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("chunk %s: %v", ev.Data, err)
		}
		if info, err := api.ScanChunk(ev.Data); err != nil || info.Error {
			t.Fatalf("chunk %s: scan %+v, %v", ev.Data, info, err)
		}
		for _, ch := range c.Choices {
			a.text += ch.Delta.Content
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
			for _, tc := range ch.Delta.ToolCalls {
				got := a.calls[*tc.Index]
				if got == nil {
					got = &api.ToolCall{}
					a.calls[*tc.Index] = got
				}
				got.ID += tc.ID
				got.Function.Name += tc.Function.Name
				got.Function.Arguments += tc.Function.Arguments
			}
		}
		if c.Usage != nil {
			a.usage = c.Usage
		}
	}
}

// TestBedrockConverse: a non-Claude model on kind bedrock goes through
// ConverseStream (and Converse unstreamed) on the simulated Bedrock, signed
// with SigV4 or a Bedrock API key: text, the finish and usage arrive.
func TestBedrockConverse(t *testing.T) {
	srv := bedrockSim(t)
	for _, key := range []string{"", "ABSK-bedrock-api-key"} {
		p := bedrockKind(t, srv.URL, key)
		st, err := p.Open(context.Background(), chatRequest(t, "us.amazon.nova-pro-v1:0", true))
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		a, err := gather(t, st)
		if err != nil || a.text == "" || (a.finish != "stop" && a.finish != "length") || a.usage == nil || a.usage.PromptTokens == 0 || a.usage.CompletionTokens == 0 {
			t.Errorf("key %q: got %+v (usage %+v), %v", key, a, a.usage, err)
		}
		b, err := p.Complete(context.Background(), chatRequest(t, "meta.llama3-70b-instruct-v1:0", false))
		var cc api.Completion
		if err != nil || json.Unmarshal(b, &cc) != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" || cc.Usage == nil || cc.Usage.CompletionTokens == 0 {
			t.Errorf("key %q non-stream: got %s, %v", key, b, err)
		}
	}
}

// TestBedrockConverseToolCall: a tool call streams its arguments in
// fragments, with its id and name first, and finishes tool_calls; the next
// turn (the call and its result) is accepted by the simulated Bedrock,
// which refuses what Bedrock refuses.
func TestBedrockConverseToolCall(t *testing.T) {
	srv := bedrockSim(t)
	p := bedrockKind(t, srv.URL, "")
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	req := chatBody(t, "mistral.mistral-large-2407-v1:0", true, `{"model":"x","max_tokens":50,"messages":[{"role":"user","content":"weather in Paris?"}],`+tools+`,"tool_choice":"required"}`)
	req.Header = http.Header{sim.HeaderToolCall: {"get_weather"}}
	st, err := p.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	a, err := gather(t, st)
	if err != nil {
		t.Fatal(err)
	}
	call := a.calls[0]
	if len(a.calls) != 1 || call.Function.Name != "get_weather" || call.ID == "" || !json.Valid([]byte(call.Function.Arguments)) || a.finish != "tool_calls" {
		t.Fatalf("got calls %+v finish %q", a.calls, a.finish)
	}
	next := `{"model":"x","max_tokens":20,"messages":[{"role":"user","content":"weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":` + strings.TrimSpace(string(api.AppendString(nil, call.ID))) + `,"type":"function","function":{"name":"get_weather","arguments":` + string(api.AppendString(nil, call.Function.Arguments)) + `}}]},` +
		`{"role":"tool","tool_call_id":` + string(api.AppendString(nil, call.ID)) + `,"content":""}],` + tools + `}`
	st, err = p.Open(context.Background(), chatBody(t, "mistral.mistral-large-2407-v1:0", true, next))
	if err != nil {
		t.Fatalf("the turn after the call: %v", err)
	}
	if a, err := gather(t, st); err != nil || a.text == "" {
		t.Errorf("the turn after the call: got %+v, %v", a, err)
	}
	// Without tools declared, a history with tool calls is the gateway's
	// refusal (Converse would refuse it), retryable on another route.
	noTools := strings.Replace(next, ","+tools, "", 1)
	_, err = p.Open(context.Background(), chatBody(t, "mistral.mistral-large-2407-v1:0", true, noTools))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 400 || !pe.Retryable || !errors.Is(err, provider.ErrUntranslatable) {
		t.Errorf("tool history without tools: got %v, want a retryable 400 refusal", err)
	}
}

// TestBedrockConverseCache: cache_control on the system prompt becomes a
// cachePoint: the first request writes the prefix to the simulated cache,
// the second reads it, and prompt_tokens counts both as OpenAI does
// (Converse's inputTokens excludes them).
func TestBedrockConverseCache(t *testing.T) {
	srv := bedrockSim(t)
	p := bedrockKind(t, srv.URL, "")
	system := strings.Repeat("You are a careful assistant who answers in plain words. ", 300)
	body := `{"model":"x","max_tokens":10,"messages":[{"role":"system","content":[{"type":"text","text":"` + system + `","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"hello"}]}`
	var written int
	for turn := range 2 {
		st, err := p.Open(context.Background(), chatBody(t, "us.amazon.nova-pro-v1:0", true, body))
		if err != nil {
			t.Fatal(err)
		}
		a, err := gather(t, st)
		if err != nil || a.usage == nil {
			t.Fatalf("turn %d: %+v, %v", turn, a, err)
		}
		d := a.usage.PromptTokensDetails
		if turn == 0 {
			written = d.CacheWriteTokens
			if written == 0 || d.CachedTokens != 0 || a.usage.PromptTokens <= written {
				t.Errorf("turn 0: usage %+v, want a cache write counted in prompt_tokens", a.usage)
			}
		} else if d.CachedTokens != written || d.CacheWriteTokens != 0 || a.usage.PromptTokens <= written {
			t.Errorf("turn 1: usage %+v, want %d cached tokens counted in prompt_tokens", a.usage, written)
		}
		if a.usage.TotalTokens != a.usage.PromptTokens+a.usage.CompletionTokens {
			t.Errorf("turn %d: total_tokens %d is not prompt + completion", turn, a.usage.TotalTokens)
		}
	}
}

// TestBedrockConverseException: an error mid-stream comes as an exception
// frame, which reaches the adapter's client as an upstream error after the
// text, never a silent end; a wrong secret is AWS's 403.
func TestBedrockConverseException(t *testing.T) {
	srv := bedrockSim(t)
	p := bedrockKind(t, srv.URL, "")
	req := chatRequest(t, "us.amazon.nova-pro-v1:0", true)
	req.Header = http.Header{sim.HeaderErrorAt: {"3"}}
	st, err := p.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	a, err := gather(t, st)
	var pe *provider.Error
	if !errors.As(err, &pe) || a.text == "" || a.finish != "" {
		t.Errorf("got %+v and %v, want text then an upstream error", a, err)
	}
	bad, err := provider.New(provider.Config{Kind: "bedrock", BaseURL: srv.URL, Cloud: provider.Cloud{Region: "us-east-1",
		AWSAccessKeyID: sim.SimAWSCredentials.AccessKeyID, AWSSecretAccessKey: "wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	_, err = bad.Open(context.Background(), chatRequest(t, "us.amazon.nova-pro-v1:0", true))
	if !errors.As(err, &pe) || pe.Status != http.StatusForbidden || pe.Type != "InvalidSignatureException" {
		t.Errorf("wrong secret: got %v, want AWS's 403", err)
	}
}
