package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/streamgate/streamgate/internal/api"
)

// The conversation of the caching tests, in ASCII so its tokens are
// countable by hand (estimateTokens: 4 characters a token; 3 more per
// message and per system prompt, 3 per request after the rest): a system
// prompt of 1024 tokens (1027 with its 3), user messages of 100 (103),
// assistant messages of 10 (13).
var (
	cacheSystem = fill("Be terse. ", 4096)
	cacheUsers  = []string{fill("Tell me more. ", 400), fill("And then? ", 400), fill("Why so slow? ", 400)}
	cacheAnswer = fill("Sure. ", 40)
)

// fill repeats s to n bytes.
func fill(s string, n int) string { return strings.Repeat(s, n/len(s)+1)[:n] }

// anthropicTurn is turn n (from 1) of the cached conversation: the system
// prompt with a breakpoint, the user and assistant messages so far, and a
// breakpoint on the last user message (as Claude Code places them).
func anthropicTurn(n int, system string) anthropic.MessageNewParams {
	var msgs []anthropic.MessageParam
	for i := range n {
		if i > 0 {
			msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewTextBlock(cacheAnswer)))
		}
		block := anthropic.TextBlockParam{Text: cacheUsers[i]}
		if i == n-1 {
			block.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &block}))
	}
	return anthropic.MessageNewParams{
		Model: "sim-claude", MaxTokens: 50, Messages: msgs,
		System: []anthropic.TextBlockParam{{Text: system, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
	}
}

type anthropicCounts struct{ input, read, write, write5m, write1h int64 }

func countsOf(u anthropic.Usage) anthropicCounts {
	return anthropicCounts{u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens,
		u.CacheCreation.Ephemeral5mInputTokens, u.CacheCreation.Ephemeral1hInputTokens}
}

// TestAnthropicPromptCache is a 3-turn conversation, each turn's
// breakpoint on its last user message: turn 1 writes the prefix, each
// later turn reads the previous turn's (found by looking back from its own
// breakpoint) and writes the new part; the 3 tokens of the request itself
// stay input. Another API key has its own cache; one byte changed after the
// system prompt leaves only the system prompt's breakpoint to read.
func TestAnthropicPromptCache(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	c := anthropicSDK(ts)
	ctx := context.Background()
	// Turn n's prefix to its last breakpoint: 1027 + 103 for the first user
	// message, + 13 + 103 for each later turn.
	want := []anthropicCounts{
		{input: 3, read: 0, write: 1130, write5m: 1130},
		{input: 3, read: 1130, write: 116, write5m: 116},
		{input: 3, read: 1246, write: 116, write5m: 116},
	}
	for n := 1; n <= 3; n++ {
		params := anthropicTurn(n, cacheSystem)
		var got anthropicCounts
		if n == 2 {
			msg, _, err := accumulate(t, c, params)
			if err != nil {
				t.Fatal(err)
			}
			// The SDK's accumulator takes the split from message_start and
			// the totals from message_delta.
			got = countsOf(msg.Usage)
		} else {
			msg, err := c.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			got = countsOf(msg.Usage)
		}
		if got != want[n-1] {
			t.Errorf("turn %d: got %+v, want %+v", n, got, want[n-1])
		}
		count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: params.Model, Messages: params.Messages,
			System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System}})
		if err != nil {
			t.Fatal(err)
		}
		if sum := got.input + got.read + got.write; count.InputTokens != sum {
			t.Errorf("turn %d: count_tokens %d, want input + cache read + cache write = %d", n, count.InputTokens, sum)
		}
	}

	other := anthropicSDK(ts, aoption.WithAPIKey("another key"))
	msg, err := other.Messages.New(ctx, anthropicTurn(2, cacheSystem))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := countsOf(msg.Usage), (anthropicCounts{input: 3, write: 1246, write5m: 1246}); got != want {
		t.Errorf("another API key: got %+v, want %+v (nothing read)", got, want)
	}

	changed := anthropicTurn(3, cacheSystem)
	first := *changed.Messages[0].OfUser.Content[0].OfText
	first.Text = "t" + first.Text[1:]
	changed.Messages[0] = anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &first})
	msg, err = c.Messages.New(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := countsOf(msg.Usage), (anthropicCounts{input: 3, read: 1027, write: 1362 - 1027, write5m: 1362 - 1027}); got != want {
		t.Errorf("first user message changed by one byte: got %+v, want %+v (the system prompt read)", got, want)
	}
	msg, err = c.Messages.New(ctx, anthropicTurn(3, "b"+cacheSystem[1:]))
	if err != nil {
		t.Fatal(err)
	}
	if got := countsOf(msg.Usage); got.read != 0 || got.write != 1362 {
		t.Errorf("system prompt changed by one byte: got %+v, want nothing read and 1362 written", got)
	}
}

// TestAnthropicCacheCanonical: key order, white space and the place of
// cache_control markers do not change a prefix; the top-level
// cache_control puts a breakpoint on the last block; a prefix under the
// profile's minimum is not cached.
func TestAnthropicCacheCanonical(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	sys := jsonString(cacheSystem)
	user := jsonString(cacheUsers[0])
	usage := func(t *testing.T, body string) anthropicUsage {
		t.Helper()
		resp := postJSON(t, ts, anthropicPath, body, map[string]string{"x-api-key": "canonical"})
		var m struct {
			Usage anthropicUsage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("got %d (%v)", resp.StatusCode, err)
		}
		return m.Usage
	}
	u := usage(t, `{"model":"m","max_tokens":9,"system":[{"type":"text","text":`+sys+`,"cache_control":{"type":"ephemeral"}}],`+
		`"messages":[{"role":"user","content":`+user+`}]}`)
	if u.CacheCreationInputTokens != 1027 || u.InputTokens != 106 {
		t.Errorf("first: got %+v, want 1027 written, 106 input", u)
	}
	u = usage(t, "{\n  \"messages\": [{\"content\": [{\"text\": "+user+", \"type\": \"text\"}], \"role\": \"user\"}],\n"+
		`  "cache_control": {"type": "ephemeral", "ttl": "1h"}, "max_tokens": 9, "model": "m",`+"\n"+
		`  "system": `+sys+"\n}")
	if u.CacheReadInputTokens != 1027 || u.CacheCreationInputTokens != 103 || u.CacheCreation.Ephemeral1h != 103 || u.InputTokens != 3 {
		t.Errorf("reordered, string system, automatic 1h breakpoint: got %+v, want 1027 read, 103 written for 1h, 3 input", u)
	}
	u = usage(t, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"short","cache_control":{"type":"ephemeral"}}]}]}`)
	if u.CacheCreationInputTokens != 0 || u.CacheReadInputTokens != 0 || u.InputTokens != 8 {
		t.Errorf("below 1024 tokens: got %+v, want nothing cached", u)
	}
	_, low := newTestServer(t, Options{Profile: Profile{Name: "low", Tokens: 3, TokensPerChunk: 1, CacheMinTokens: 4}})
	resp := postJSON(t, low, anthropicPath, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"short","cache_control":{"type":"ephemeral"}}]}]}`, nil)
	var m struct {
		Usage anthropicUsage `json:"usage"`
	}
	if json.NewDecoder(resp.Body).Decode(&m); m.Usage.CacheCreationInputTokens != 5 || m.Usage.InputTokens != 3 {
		t.Errorf("profile minimum 4: got %+v, want the message's 5 tokens written, 3 input", m.Usage)
	}
}

// TestAnthropicCacheTTL runs on synctest's clock: a 5-minute entry is gone
// after 5 minutes without use, a hit refreshes it, a 1-hour entry lives an
// hour.
func TestAnthropicCacheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Options{Profile: quick})
		send := func(ttl string) anthropicUsage {
			body := `{"model":"m","max_tokens":9,"system":[{"type":"text","text":` + jsonString(cacheSystem) +
				`,"cache_control":{"type":"ephemeral"` + ttl + `}}],"messages":[{"role":"user","content":"hi"}]}`
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, anthropicPath, strings.NewReader(body)))
			var m struct {
				Usage anthropicUsage `json:"usage"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 {
				t.Fatalf("got %d %s", w.Code, w.Body)
			}
			return m.Usage
		}
		for _, step := range []struct {
			wait     time.Duration
			ttl      string
			read     int
			write5m  int
			write1h  int
			comments string
		}{
			{0, "", 0, 1027, 0, "first sight"},
			{4 * time.Minute, "", 1027, 0, 0, "4 minutes later"},
			{4 * time.Minute, "", 1027, 0, 0, "4 minutes after the refreshing hit"},
			{5 * time.Minute, "", 0, 1027, 0, "5 minutes without use"},
			{0, `,"ttl":"1h"`, 1027, 0, 0, "a 1h breakpoint on a live 5m entry"},
			{50 * time.Minute, "", 1027, 0, 0, "50 minutes later: the entry lives an hour now"},
			{61 * time.Minute, `,"ttl":"1h"`, 0, 0, 1027, "an hour without use"},
		} {
			time.Sleep(step.wait)
			u := send(step.ttl)
			if u.CacheReadInputTokens != step.read || u.CacheCreation.Ephemeral5m != step.write5m || u.CacheCreation.Ephemeral1h != step.write1h {
				t.Errorf("%s: got read %d, written 5m %d 1h %d; want %d, %d, %d", step.comments, u.CacheReadInputTokens,
					u.CacheCreation.Ephemeral5m, u.CacheCreation.Ephemeral1h, step.read, step.write5m, step.write1h)
			}
		}
	})
}

func TestAnthropicCacheControlErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	block := func(cc string) string { return `{"type":"text","text":"x","cache_control":` + cc + `}` }
	eph := `{"type":"ephemeral"}`
	for _, tt := range []struct{ name, body, want string }{
		{"five breakpoints", `"system":[` + block(eph) + `,` + block(eph) + `],"messages":[{"role":"user","content":[` +
			block(eph) + `,` + block(eph) + `,` + block(eph) + `]}]`, "A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"bad ttl", `"messages":[{"role":"user","content":[` + block(`{"type":"ephemeral","ttl":"10m"}`) + `]}]`,
			"messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"},
		{"bad type", `"tools":[{"name":"t","input_schema":{"type":"object"},"cache_control":{"type":"persistent"}}],"messages":[{"role":"user","content":"x"}]`,
			"tools.0.cache_control.type: Input should be 'ephemeral'"},
		{"1h after 5m", `"system":[` + block(eph) + `],"messages":[{"role":"user","content":[` + block(`{"type":"ephemeral","ttl":"1h"}`) + `]}]`,
			"messages.0.content.0.cache_control: a ttl='1h' cache breakpoint cannot come after a ttl='5m' one (system.0)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := postJSON(t, ts, anthropicPath, `{"model":"m","max_tokens":9,`+tt.body+`}`, nil)
			if e := decodeAnthropicError(t, resp); resp.StatusCode != 400 || !strings.HasPrefix(e.Error.Message, tt.want) {
				t.Errorf("got %d %q, want 400 %q", resp.StatusCode, e.Error.Message, tt.want)
			}
		})
	}
}

// openAITurn is turn n of the cached conversation in OpenAI's messages.
func openAITurn(n int, system string) openai.ChatCompletionNewParams {
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system)}
	for i := range n {
		if i > 0 {
			msgs = append(msgs, openai.AssistantMessage(cacheAnswer))
		}
		msgs = append(msgs, openai.UserMessage(cacheUsers[i]))
	}
	return openai.ChatCompletionNewParams{Model: "sim-gpt", Messages: msgs}
}

// TestOpenAIPromptCache: automatic caching of the prefix a previous request
// had, from 1024 tokens in steps of 128, reported as
// prompt_tokens_details.cached_tokens within prompt_tokens; per API key;
// a change of one byte before the cached prefix's end misses.
func TestOpenAIPromptCache(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(ts.Client()), option.WithMaxRetries(0))
	}
	c := client("key-a")
	ctx := context.Background()
	// Prompt tokens: 1027 + 103, + 116 a turn, + 3. Turn 1 leaves a
	// checkpoint at 1024 tokens; turn 2 reads it and leaves 1024 and 1152;
	// turn 3 reads 1152.
	for n, want := range []struct{ prompt, cached int64 }{{1133, 0}, {1249, 1024}, {1365, 1152}} {
		params := openAITurn(n+1, cacheSystem)
		var usage openai.CompletionUsage
		if n == 1 {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			stream.Close()
			usage = acc.Usage
		} else {
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			usage = resp.Usage
		}
		if usage.PromptTokens != want.prompt || usage.PromptTokensDetails.CachedTokens != want.cached {
			t.Errorf("turn %d: got %d prompt tokens, %d cached; want %d, %d", n+1, usage.PromptTokens,
				usage.PromptTokensDetails.CachedTokens, want.prompt, want.cached)
		}
	}
	other := client("key-b")
	resp, err := other.Chat.Completions.New(ctx, openAITurn(3, cacheSystem))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Usage.PromptTokensDetails.CachedTokens; got != 0 {
		t.Errorf("another API key: got %d cached, want 0", got)
	}
	resp, err = c.Chat.Completions.New(ctx, openAITurn(3, "b"+cacheSystem[1:]))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Usage.PromptTokensDetails.CachedTokens; got != 0 {
		t.Errorf("one byte changed at the start: got %d cached, want 0", got)
	}
	// A change after 1024 tokens (the system prompt's last characters)
	// keeps the first 1024.
	resp, err = c.Chat.Completions.New(ctx, openAITurn(3, cacheSystem[:4095]+"!"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Usage.PromptTokensDetails.CachedTokens; got != 1024 {
		t.Errorf("one byte changed after 1024 tokens: got %d cached, want 1024", got)
	}
	resp, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim-gpt",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("short")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("short prompt: got %+v, want nothing cached", resp.Usage)
	}
}

// TestGeminiPromptCache: Gemini's implicit caching of a repeated prefix,
// reported as usageMetadata.cachedContentTokenCount within
// promptTokenCount, read through go-genai; per API key.
func TestGeminiPromptCache(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	ctx := context.Background()
	turn := func(n int) []*genai.Content {
		var cs []*genai.Content
		for i := range n {
			if i > 0 {
				cs = append(cs, genai.NewContentFromText(cacheAnswer, genai.RoleModel))
			}
			cs = append(cs, genai.NewContentFromText(cacheUsers[i], genai.RoleUser))
		}
		return cs
	}
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(cacheSystem, genai.RoleUser)}
	c := genaiClient(t, ts, nil)
	for n, want := range []struct{ prompt, cached int32 }{{1133, 0}, {1249, 1024}, {1365, 1152}} {
		var usage *genai.GenerateContentResponseUsageMetadata
		if n == 1 {
			for resp, err := range c.Models.GenerateContentStream(ctx, "sim-gem", turn(n+1), cfg) {
				if err != nil {
					t.Fatal(err)
				}
				usage = resp.UsageMetadata
			}
		} else {
			resp, err := c.Models.GenerateContent(ctx, "sim-gem", turn(n+1), cfg)
			if err != nil {
				t.Fatal(err)
			}
			usage = resp.UsageMetadata
		}
		if usage.PromptTokenCount != want.prompt || usage.CachedContentTokenCount != want.cached {
			t.Errorf("turn %d: got %d prompt tokens, %d cached; want %d, %d", n+1, usage.PromptTokenCount,
				usage.CachedContentTokenCount, want.prompt, want.cached)
		}
	}
	other, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "another key", Backend: genai.BackendGeminiAPI, HTTPClient: ts.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL, APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := other.Models.GenerateContent(ctx, "sim-gem", turn(3), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if resp.UsageMetadata.CachedContentTokenCount != 0 {
		t.Errorf("another API key: got %d cached, want 0", resp.UsageMetadata.CachedContentTokenCount)
	}
}

// TestPrefixHasherCheckpoints: an automatic checkpoint falls inside a text
// at the character whose token reaches the count, and texts of one run
// count as one (estimateTokens of their concatenation).
func TestPrefixHasherCheckpoints(t *testing.T) {
	p := newPrefixHasher()
	p.automatic(4, 2)
	p.fixed([]byte("head"), 3)
	p.text("abcd")  // 4
	p.fixed(nil, 0) // same run
	p.text("efghi") // "abcdefghi": 3 tokens, 6 in all
	p.text("한국")    // 8
	p.fixed([]byte("x"), 3)
	var got []int
	for _, c := range p.points {
		got = append(got, c.tokens)
	}
	if want := []int{4, 6, 8, 10}; !equalInts(got, want) || p.tokens != 11 {
		t.Errorf("checkpoints: got %v (total %d), want %v (total 11)", got, p.tokens, want)
	}
	q := newPrefixHasher()
	q.automatic(4, 2)
	q.fixed([]byte("head"), 3)
	q.text("abcdefgh!") // differs in the 9th character: after the checkpoint at 4, before the one at 6
	if p.points[0].sum != q.points[0].sum || p.points[1].sum == q.points[1].sum {
		t.Errorf("sums: the checkpoint before the change must match, the one after it must not")
	}
}

// TestPromptCacheBounded: the least recently used entry goes first.
func TestPromptCacheBounded(t *testing.T) {
	c := newPromptCache(2)
	now := time.Now()
	k := func(b byte) [32]byte { return [32]byte{b} }
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(k(1), cacheTTL5m, now)
	c.put(k(2), cacheTTL5m, now)
	c.hit(k(1), now)
	c.put(k(3), cacheTTL5m, now)
	if !c.hit(k(1), now) || c.hit(k(2), now) || !c.hit(k(3), now) || len(c.entries) != 2 {
		t.Errorf("got entries 1 %v 2 %v 3 %v, want 1 and 3 kept", c.hit(k(1), now), c.hit(k(2), now), c.hit(k(3), now))
	}
}

// FuzzCanonicalJSON: the canonical form of a JSON value is valid JSON,
// canonical itself, the same for the value re-indented, and valid input
// only (encoding/json's verdict) is re-encoded.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}`,
		`{"content":[{"cache_control":null,"z":1.50}],"cache_control":1}`, `"str"`, `[1, 2]`, `{`, `{"a":1}{"b":2}`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := canonicalJSON(b, "cache_control")
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			if !bytes.Equal(c, b) {
				t.Fatalf("invalid JSON %q re-encoded as %q", b, c)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical %q of %q is not JSON", c, b)
		}
		if again := canonicalJSON(c, "cache_control"); !bytes.Equal(again, c) {
			t.Fatalf("canonical %q is not canonical: %q", c, again)
		}
		var indented bytes.Buffer
		if json.Indent(&indented, b, " ", "\t") == nil {
			if got := canonicalJSON(indented.Bytes(), "cache_control"); !bytes.Equal(got, c) {
				t.Fatalf("indented: got %q, want %q", got, c)
			}
		}
	})
}

// FuzzPrefixHasherText: a text read in two pieces of one run counts the
// tokens estimateTokens gives the whole and leaves the same checkpoints.
func FuzzPrefixHasherText(f *testing.F) {
	f.Add("Tell me about streaming latency.", 5, 3, 2)
	f.Add("한국어 텍스트와 English", 7, 2, 1)
	f.Fuzz(func(t *testing.T, s string, cut, first, step int) {
		if first < 1 || step < 1 || first > 1<<20 || step > 1<<20 {
			return
		}
		cut = max(0, min(cut, len(s)))
		for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut--
		}
		whole, split := newPrefixHasher(), newPrefixHasher()
		whole.automatic(first, step)
		split.automatic(first, step)
		whole.text(s)
		split.text(s[:cut])
		split.fixed([]byte{}, 0)
		split.text(s[cut:])
		if whole.tokens != estimateTokens(s) || split.tokens != whole.tokens {
			t.Fatalf("tokens: whole %d, split %d, want %d", whole.tokens, split.tokens, estimateTokens(s))
		}
		if len(whole.points) != len(split.points) {
			t.Fatalf("checkpoints: whole %d, split %d", len(whole.points), len(split.points))
		}
		for i := range whole.points {
			if whole.points[i] != split.points[i] {
				t.Fatalf("checkpoint %d differs: %+v, %+v", i, whole.points[i], split.points[i])
			}
		}
	})
}

// BenchmarkPromptCacheRequest is the cost the prompt cache adds to an agent
// turn of about 50,000 tokens (a 48-KB system prompt, 20 tools, 40
// messages), parse included: Anthropic with three breakpoints, OpenAI's
// automatic caching.
func BenchmarkPromptCacheRequest(b *testing.B) {
	var tools, msgs, oaTools, oaMsgs []string
	for i := range 20 {
		schema := `{"type":"object","properties":{"path":{"type":"string","description":"` + fill("A path to read. ", 400) + `"}}}`
		tools = append(tools, `{"name":"tool`+itoa(i)+`","input_schema":`+schema+`}`)
		oaTools = append(oaTools, `{"type":"function","function":{"name":"tool`+itoa(i)+`","parameters":`+schema+`}}`)
	}
	tools[19] = tools[19][:len(tools[19])-1] + `,"cache_control":{"type":"ephemeral"}}`
	for i := range 40 {
		role := []string{"user", "assistant"}[i%2]
		text := jsonString(fill("Some file content, line by line. ", 3000))
		cc := ""
		if i == 39 {
			cc = `,"cache_control":{"type":"ephemeral"}`
		}
		msgs = append(msgs, `{"role":"`+role+`","content":[{"type":"text","text":`+text+cc+`}]}`)
		oaMsgs = append(oaMsgs, `{"role":"`+role+`","content":`+text+`}`)
	}
	sys := jsonString(fill("You are a coding agent. ", 48000))
	anthropicJSON := `{"model":"m","max_tokens":100,"tools":[` + strings.Join(tools, ",") + `],"system":[{"type":"text","text":` + sys +
		`,"cache_control":{"type":"ephemeral"}}],"messages":[` + strings.Join(msgs, ",") + `]}`
	openAIJSON := `{"model":"m","tools":[` + strings.Join(oaTools, ",") + `],"messages":[{"role":"system","content":` + sys + `},` +
		strings.Join(oaMsgs, ",") + `]}`
	s := New(Options{Profile: quick})
	ns := cacheNamespace("bench", "m", "k")
	now := time.Now()
	b.Run("anthropic", func(b *testing.B) {
		b.SetBytes(int64(len(anthropicJSON)))
		for b.Loop() {
			var body anthropicRequest
			if err := json.Unmarshal([]byte(anthropicJSON), &body); err != nil {
				b.Fatal(err)
			}
			req, err := anthropicParse(&body, false)
			if err != nil {
				b.Fatal(err)
			}
			s.cache.apply(ns, req.cache(DefaultCacheMinTokens), DefaultCacheMinTokens, now)
		}
	})
	b.Run("openai", func(b *testing.B) {
		b.SetBytes(int64(len(openAIJSON)))
		for b.Loop() {
			var body api.ChatRequest
			if err := json.Unmarshal([]byte(openAIJSON), &body); err != nil {
				b.Fatal(err)
			}
			req, err := openAIRequest(&body)
			if err != nil {
				b.Fatal(err)
			}
			s.cache.apply(ns, req.cache(DefaultCacheMinTokens), DefaultCacheMinTokens, now)
		}
	})
}

// TestAnthropicCacheThinkingChange: changing the thinking settings between
// turns invalidates the cached messages but not the system prompt, as at
// Anthropic, so a gateway that toggles thinking shows as cache misses.
func TestAnthropicCacheThinkingChange(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	send := func(thinking string) anthropicUsage {
		t.Helper()
		body := `{"model":"m","max_tokens":3000` + thinking + `,"system":[{"type":"text","text":` + jsonString(cacheSystem) +
			`,"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":` +
			jsonString(cacheUsers[0]) + `,"cache_control":{"type":"ephemeral"}}]}]}`
		resp := postJSON(t, ts, anthropicPath, body, nil)
		var m struct {
			Usage anthropicUsage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("got %d (%v)", resp.StatusCode, err)
		}
		return m.Usage
	}
	on := `,"thinking":{"type":"enabled","budget_tokens":1024}`
	for _, step := range []struct {
		name, thinking string
		read, write    int
	}{
		{"first", on, 0, 1130},
		{"same settings", on, 1130, 0},
		{"thinking off", "", 1027, 103},
		{"another budget", `,"thinking":{"type":"enabled","budget_tokens":2048}`, 1027, 103},
		{"disabled reads as off", `,"thinking":{"type":"disabled"}`, 1130, 0},
	} {
		if u := send(step.thinking); u.CacheReadInputTokens != step.read || u.CacheCreationInputTokens != step.write {
			t.Errorf("%s: got read %d, written %d; want %d, %d", step.name, u.CacheReadInputTokens, u.CacheCreationInputTokens, step.read, step.write)
		}
	}
}

// TestResponsesPromptCache: the Responses API caches as chat does (the
// instructions, then each input item), reported as
// input_tokens_details.cached_tokens within input_tokens; per API key.
func TestResponsesPromptCache(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	turn := func(key string, n int) (prompt, cached int) {
		t.Helper()
		var input []map[string]string
		for i := range n {
			if i > 0 {
				input = append(input, map[string]string{"role": "assistant", "content": cacheAnswer})
			}
			input = append(input, map[string]string{"role": "user", "content": cacheUsers[i]})
		}
		body, _ := json.Marshal(map[string]any{"model": "sim-gpt", "instructions": cacheSystem, "input": input})
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/responses", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Usage struct {
				InputTokens        int `json:"input_tokens"`
				InputTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: status %d, %v", n, resp.StatusCode, err)
		}
		return out.Usage.InputTokens, out.Usage.InputTokensDetails.CachedTokens
	}
	// The chat conversation's counts: 1133 prompt tokens, + 116 a turn;
	// checkpoints at 1024 and every 128 tokens after.
	for n, want := range []struct{ prompt, cached int }{{1133, 0}, {1249, 1024}, {1365, 1152}} {
		if prompt, cached := turn("key-a", n+1); prompt != want.prompt || cached != want.cached {
			t.Errorf("turn %d: got %d input tokens, %d cached; want %d, %d", n+1, prompt, cached, want.prompt, want.cached)
		}
	}
	if _, cached := turn("key-b", 3); cached != 0 {
		t.Errorf("another API key: got %d cached, want 0", cached)
	}
}
