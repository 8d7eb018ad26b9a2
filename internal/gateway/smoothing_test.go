package gateway_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
)

// smoothConfig is baseConfig with m-smooth: the same route, smoothing on
// (a 1 s limit, so that on a loaded machine words decide the events, not
// the limit).
func smoothConfig() *config.Config {
	cfg := baseConfig()
	cfg.Models = append(cfg.Models, config.Model{Name: "m-smooth", Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}},
		Smoothing: &config.Smoothing{MaxDelay: config.Duration(time.Second)}})
	return cfg
}

// openAIText streams a seeded sim answer in lang with openai-go and
// returns the content of each chunk; header pairs are sent as given.
func openAIText(t *testing.T, e *env, model, lang string, header ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := []option.RequestOption{option.WithBaseURL(e.url + "/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"), option.WithHeader(sim.HeaderTokens, "80"),
		option.WithHeader(sim.HeaderSeed, "7"), option.WithHeader(sim.HeaderLang, lang)}
	for i := 0; i+1 < len(header); i += 2 {
		opts = append(opts, option.WithHeader(header[i], header[i+1]))
	}
	client := openai.NewClient(opts...)
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    openai.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	acc := openai.ChatCompletionAccumulator{}
	var parts []string
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		if len(c.Choices) == 1 && c.Choices[0].Delta.Content != "" {
			parts = append(parts, c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("%s stream: %v", model, err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != strings.Join(parts, "") || acc.Choices[0].FinishReason == "" {
		t.Fatalf("%s: got %+v, want one choice with the chunks' text and a finish reason", model, acc.Choices)
	}
	return parts
}

// Through the gateway over HTTP, the official OpenAI client reads the
// smoothed stream (the model's smoothing block, or the request header) as
// the same text as the unsmoothed one, in fewer events, each ending where a
// word ends; "off" turns the model's smoothing off.
func TestSmoothingOpenAIClient(t *testing.T) {
	e := start(t, smoothConfig())
	for _, lang := range []string{"en", "ko"} {
		t.Run(lang, func(t *testing.T) {
			plain := openAIText(t, e, "m-sim", lang)
			byModel := openAIText(t, e, "m-smooth", lang)
			byHeader := openAIText(t, e, "m-sim", lang, gateway.HeaderSmoothing, "1s")
			off := openAIText(t, e, "m-smooth", lang, gateway.HeaderSmoothing, "off")
			text := strings.Join(plain, "")
			for name, parts := range map[string][]string{"model": byModel, "header": byHeader, "off": off} {
				if got := strings.Join(parts, ""); got != text {
					t.Fatalf("%s: got text %q, want the unsmoothed %q", name, got, text)
				}
			}
			if len(off) != len(plain) {
				t.Errorf("off: got %d events, want %d as unsmoothed", len(off), len(plain))
			}
			for name, parts := range map[string][]string{"model": byModel, "header": byHeader} {
				if len(parts) >= len(plain) {
					t.Errorf("%s: got %d events, want fewer than the %d unsmoothed", name, len(parts), len(plain))
				}
				end := 0
				for _, p := range parts[:len(parts)-1] {
					end += len(p)
					if r, _ := utf8.DecodeRuneInString(text[end:]); !unicode.IsSpace(r) {
						t.Fatalf("%s: an event ends inside a word: %q|%q", name, text[max(0, end-15):end], text[end:min(len(text), end+15)])
					}
				}
			}
			t.Logf("%s answer of %d bytes: %d events unsmoothed, %d smoothed", lang, len(text), len(plain), len(byModel))
		})
	}
}

// The same through /v1/messages: anthropic-sdk-go reads the smoothed
// stream as the same text, in fewer text deltas.
func TestSmoothingMessagesClient(t *testing.T) {
	e := start(t, smoothConfig())
	read := func(model string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client := anthropicClient(e, devKey, aoption.WithHeader("X-Sim-TTFT", "1ms"), aoption.WithHeader("X-Sim-ITL", "1ms"),
			aoption.WithHeader(sim.HeaderSeed, "7"), aoption.WithHeader(sim.HeaderLang, "ko"), aoption.WithHeader(sim.HeaderTokens, "60"))
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 200,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
		})
		var msg anthropic.Message
		deltas := 0
		for stream.Next() {
			ev := stream.Current()
			if ev.Type == "content_block_delta" {
				deltas++
			}
			if err := msg.Accumulate(ev); err != nil {
				t.Fatalf("Accumulate: %v", err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s stream: %v", model, err)
		}
		if len(msg.Content) != 1 || msg.StopReason == "" {
			t.Fatalf("%s: got %+v, want one text block and a stop reason", model, msg)
		}
		return msg.Content[0].Text, deltas
	}
	plain, n := read("m-sim")
	smoothed, m := read("m-smooth")
	if smoothed != plain {
		t.Fatalf("got text %q, want the unsmoothed %q", smoothed, plain)
	}
	if m >= n {
		t.Errorf("got %d text deltas smoothed, want fewer than the %d unsmoothed", m, n)
	}
	t.Logf("/v1/messages, ko: %d text deltas unsmoothed, %d smoothed", n, m)
}

// A tool call streams through smoothing untouched: the events are the
// unsmoothed stream's byte for byte (but the ids and times of each answer).
func TestSmoothingToolCall(t *testing.T) {
	e := start(t, smoothConfig())
	body := `{"model":"%s","stream":true,"messages":[{"role":"user","content":"weather?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
	ids := regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)`)
	raw := func(model string) string {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, strings.Replace(body, "%s", model, 1),
			sim.HeaderToolCall, "get_weather", sim.HeaderSeed, "7")
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"tool_calls"`) {
			t.Fatalf("%s: got %d %q, want a tool call stream", model, resp.StatusCode, b)
		}
		return ids.ReplaceAllString(string(b), `"$1":0`)
	}
	if plain, smoothed := raw("m-sim"), raw("m-smooth"); smoothed != plain {
		t.Errorf("got smoothed\n%s\nwant the unsmoothed\n%s", smoothed, plain)
	}
}

// A bad X-Streamgate-Smoothing is a 400 naming the header, in the
// client's dialect, before any upstream is called.
func TestSmoothingHeaderRejected(t *testing.T) {
	e := start(t, smoothConfig())
	for _, v := range []string{"fast", "0s", "-5ms", "2s", "on"} {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, ""), gateway.HeaderSmoothing, v)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: got status %d, want 400", v, resp.StatusCode)
		}
		if er := readError(t, resp); !strings.Contains(er.Error.Message, gateway.HeaderSmoothing) || er.Error.Type != "invalid_request_error" {
			t.Errorf("%q: got %+v, want an invalid_request_error naming %s", v, er.Error, gateway.HeaderSmoothing)
		}
	}
	resp := do(t, "POST", e.url+"/v1/messages", "", `{"model":"m-sim","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"X-Api-Key", devKey, gateway.HeaderSmoothing, "soon")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"type":"error"`) || !strings.Contains(string(b), gateway.HeaderSmoothing) {
		t.Errorf("/v1/messages: got %d %s, want 400 in Anthropic's shape naming the header", resp.StatusCode, b)
	}
	// A refused header is refused before the key's limits count it: a key
	// of rpm 1 still has its one request after a bad header.
	cfg := smoothConfig()
	cfg.Keys = append(cfg.Keys, config.Key{Name: "one", Key: "sg-one-a-minute", RPM: 1})
	one := start(t, cfg)
	if resp := do(t, "POST", one.url+"/v1/chat/completions", "sg-one-a-minute", chatBody("m-sim", true, ""), gateway.HeaderSmoothing, "fast"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad header: got %d, want 400", resp.StatusCode)
	}
	if resp := do(t, "POST", one.url+"/v1/chat/completions", "sg-one-a-minute", chatBody("m-sim", true, "")); resp.StatusCode != http.StatusOK {
		t.Errorf("the key's one request after a refused header: got %d, want 200 (the refusal must not count)", resp.StatusCode)
	} else {
		readStream(t, resp)
	}
	for _, v := range []string{"OFF", "50ms", " 1s "} {
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("m-smooth", true, ""), gateway.HeaderSmoothing, v)
		if _, done := readStream(t, resp); resp.StatusCode != http.StatusOK || !done {
			t.Errorf("%q: got status %d (complete %v), want a complete stream", v, resp.StatusCode, done)
		}
	}
}
