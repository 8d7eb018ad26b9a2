package gateway_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/streamgate/streamgate/internal/cloud"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/eventstream"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/provider"
	panthropic "github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/provider/converse"
	"github.com/streamgate/streamgate/internal/provider/gemini"
	popenai "github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/usage"
)

// The replay corpus (testdata/replay/<dialect>/, listed with its sources
// in docs/replay-corpus.md) holds recorded provider answers: <name>.sse a
// stream as the provider sent it, <name>.body a non-streaming answer, and
// <name>.json where it comes from and the answer a client must get, read
// off the recording by hand.

// replaySidecar is a recording's <name>.json.
type replaySidecar struct {
	Source  string `json:"source"`  // where the bytes come from
	Licence string `json:"licence"` // the licence they are under
	// Origin is "recorded" (a provider's answer, as captured),
	// "sdk-fixture" (written for an SDK's tests in the provider's shape),
	// "documented" (written here after the provider's documentation) or
	// "constructed" (written here for a behaviour servers of the dialect
	// show, said in the note).
	Origin      string `json:"origin"`
	Note        string `json:"note"`
	ContentType string `json:"content_type"` // of the stream; "" is text/event-stream
	// Clients are the client dialects the recording is replayed to
	// (chat, messages, responses); nil: every one. A Responses stream
	// reaches only /v1/responses clients (passed through).
	Clients []string   `json:"clients"`
	Want    replayWant `json:"want"`
}

// replayWant is the answer a client must assemble.
type replayWant struct {
	Text string `json:"text"`
	// Refusal is an OpenAI refusal's words (message.refusal), which a
	// Messages client, having no such field, gets as text.
	Refusal  string           `json:"refusal"`
	Thinking []replayThinking `json:"thinking"`
	Tools    []replayToolCall `json:"tool_calls"`
	// FinishReason is what a /v1/chat/completions client reads,
	// StopReason and StopSequence what a /v1/messages client reads.
	FinishReason string       `json:"finish_reason"`
	StopReason   string       `json:"stop_reason"`
	StopSequence string       `json:"stop_sequence"`
	Usage        *replayUsage `json:"usage"` // nil: not checked (see the note)
}

type replayThinking struct {
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"` // a redacted_thinking block's data
}

type replayToolCall struct {
	ID        string `json:"id"` // "": the upstream gives none, any unique id will do
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// replayUsage is in the providers' common terms: Input is the fresh
// (uncached) prompt tokens, CacheRead and CacheWrite the prompt tokens read
// from and written to a cache, Output every output token (reasoning
// included) and Reasoning the part of it spent thinking.
type replayUsage struct {
	Input      int `json:"input"`
	CacheRead  int `json:"cache_read"`
	CacheWrite int `json:"cache_write"`
	Output     int `json:"output"`
	Reasoning  int `json:"reasoning"`
}

type recording struct {
	dialect, name string
	stream, body  []byte // either may be nil
	meta          replaySidecar
}

// replayDialects are the upstreams a recording's folder names: the
// dialect its bytes are in, and the kind that reads them.
var replayDialects = []string{"openai", "anthropic", "gemini", "bedrock-converse", "azure"}

// frameChunks frames a <name>.chunks file (one JSON event per line, as the
// Vercel AI SDK's fixtures keep them) as its upstream sends it: for
// bedrock-converse one event-stream message per line ({"eventType":
// payload}: :event-type the key, the payload its value), for azure one
// "data: " event per line and "data: [DONE]", as the SDK's tests frame them.
func frameChunks(t *testing.T, dialect string, chunks []byte) []byte {
	var out []byte
	for _, line := range strings.Split(string(chunks), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		switch dialect {
		case "bedrock-converse":
			var ev map[string]json.RawMessage
			if err := json.Unmarshal([]byte(line), &ev); err != nil || len(ev) != 1 {
				t.Fatalf("a converse event line is {\"eventType\": payload}: %s", line)
			}
			for typ, payload := range ev {
				var err error
				out, err = eventstream.AppendMessage(out, []eventstream.Header{eventstream.StringHeader(":event-type", typ),
					eventstream.StringHeader(":content-type", "application/json"), eventstream.StringHeader(":message-type", "event")}, payload)
				if err != nil {
					t.Fatal(err)
				}
			}
		case "azure":
			out = append(out, "data: "+line+"\n\n"...)
		default:
			t.Fatalf("no framing for %s chunks", dialect)
		}
	}
	if dialect == "azure" {
		out = append(out, "data: [DONE]\n\n"...)
	}
	return out
}

// responsesOnly reports whether rec is a Responses stream, replayed to
// /v1/responses clients only.
func (rec *recording) responsesOnly() bool {
	return slices.Equal(rec.meta.Clients, []string{"responses"})
}

// clients are the client dialects rec is replayed to.
func (rec *recording) clients() []string {
	if rec.meta.Clients != nil {
		return rec.meta.Clients
	}
	return []string{"chat", "messages", "responses"}
}

func loadCorpus(t *testing.T) []recording {
	t.Helper()
	paths, err := filepath.Glob("testdata/replay/*/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings in testdata/replay: %v", err)
	}
	var recs []recording
	for _, p := range paths {
		r := recording{dialect: filepath.Base(filepath.Dir(p)), name: strings.TrimSuffix(filepath.Base(p), ".json")}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r.meta); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		base := strings.TrimSuffix(p, ".json")
		r.stream, _ = os.ReadFile(base + ".sse")
		r.body, _ = os.ReadFile(base + ".body")
		if chunks, err := os.ReadFile(base + ".chunks"); err == nil {
			r.stream = frameChunks(t, r.dialect, chunks)
		}
		if !slices.Contains(replayDialects, r.dialect) {
			t.Fatalf("%s: unknown dialect folder %s", p, r.dialect)
		}
		switch {
		case r.stream == nil && r.body == nil:
			t.Fatalf("%s: none of %s.sse, %s.chunks, %s.body", p, r.name, r.name, r.name)
		case r.meta.Source == "" || r.meta.Licence == "" || !slices.Contains([]string{"recorded", "sdk-fixture", "documented", "constructed"}, r.meta.Origin):
			t.Fatalf("%s: every recording says where it comes from (source, licence, origin)", p)
		case r.meta.Want.FinishReason == "" || r.meta.Want.StopReason == "":
			t.Fatalf("%s: want.finish_reason and want.stop_reason are required", p)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestReplayCorpusDocumented: docs/replay-corpus.md lists every recording.
func TestReplayCorpusDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/replay-corpus.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range loadCorpus(t) {
		if !bytes.Contains(doc, []byte(r.dialect+"/"+r.name)) {
			t.Errorf("docs/replay-corpus.md does not list %s/%s", r.dialect, r.name)
		}
	}
}

// cut is how the upstream's bytes reach the adapter: split into pieces,
// each returned by its own Read, so every split point is one the
// adapter's reader sees.
type cut struct {
	name  string
	sizes func(n int) []int // piece sizes, summing to n
}

func replayCuts(name string, stream bool, n int) []cut {
	seed := fnv.New64a()
	io.WriteString(seed, name)
	random := func(most int, salt uint64) func(int) []int {
		return func(n int) []int {
			rng := rand.New(rand.NewPCG(seed.Sum64(), salt))
			var s []int
			for n > 0 {
				k := min(n, 1+rng.IntN(most))
				s, n = append(s, k), n-k
			}
			return s
		}
	}
	cuts := []cut{{"whole", func(n int) []int { return []int{n} }}}
	if !stream {
		return append(cuts, cut{"random", random(64, 1)})
	}
	if n <= 16<<10 {
		cuts = append(cuts, cut{"bytes", func(n int) []int {
			s := make([]int, n)
			for i := range s {
				s[i] = 1
			}
			return s
		}})
	}
	return append(cuts, cut{"random-small", random(16, 2)}, cut{"random-large", random(700, 3)})
}

// pieceReader returns its reader's bytes in the given pieces: no Read
// crosses the end of a piece.
type pieceReader struct {
	r     io.ReadCloser
	sizes []int
	left  int // of the current piece
}

func (p *pieceReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		if len(p.sizes) == 0 {
			return p.r.Read(b)
		}
		p.left, p.sizes = p.sizes[0], p.sizes[1:]
	}
	n, err := p.r.Read(b[:min(len(b), p.left)])
	p.left -= n
	return n, err
}

func (p *pieceReader) Close() error { return p.r.Close() }

// replayUpstream answers every request with the recording: the stream to
// a streaming request, the body (or the stream assembled, when the
// recording has no body) to the others. Its transport hands the answer to
// the adapter in the pieces of the current cut.
type replayUpstream struct {
	rec  *recording
	body []byte // the non-streaming answer
	srv  *httptest.Server
	tr   *http.Transport

	mu  sync.Mutex
	cut cut
}

func newReplayUpstream(t *testing.T, rec *recording) *replayUpstream {
	u := &replayUpstream{rec: rec, body: rec.body}
	if u.body == nil {
		u.body = assemble(t, rec)
	}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	u.tr = &http.Transport{}
	t.Cleanup(func() {
		u.tr.CloseIdleConnections()
		u.srv.Close()
	})
	return u
}

func (u *replayUpstream) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct{ Stream bool }
	json.Unmarshal(b, &req)
	stream := req.Stream
	want := map[string]string{"openai": "/v1/chat/completions", "anthropic": "/v1/messages",
		"azure": "/openai/deployments/up-model/chat/completions"}[u.rec.dialect]
	ct := cmp.Or(u.rec.meta.ContentType, "text/event-stream")
	switch u.rec.dialect {
	case "azure":
		if u.rec.responsesOnly() {
			want = "/openai/responses"
		}
		if r.URL.Query().Get("api-version") == "" || r.Header.Get("Api-Key") != "sk-up" {
			http.Error(w, "replay upstream: Azure wants api-version and the api-key header", http.StatusBadRequest)
			return
		}
	case "bedrock-converse":
		stream = strings.HasSuffix(r.URL.Path, "/converse-stream")
		want = "/model/up-model/converse"
		if stream {
			want += "-stream"
		}
		ct = "application/vnd.amazon.eventstream"
		if r.Header.Get("Authorization") != "Bearer sk-up" {
			http.Error(w, "replay upstream: Bedrock wants the API key as a bearer token", http.StatusForbidden)
			return
		}
	}
	if u.rec.dialect == "gemini" {
		_, method, _ := strings.Cut(r.URL.Path, ":")
		stream = method == "streamGenerateContent"
		want = "/v1beta/models/up-model:" + method
		if stream && r.URL.Query().Get("alt") != "sse" {
			http.Error(w, "replay upstream: a stream is asked with alt=sse", http.StatusBadRequest)
			return
		}
	}
	if r.URL.Path != want {
		http.Error(w, fmt.Sprintf("replay upstream: got %s, want %s", r.URL.Path, want), http.StatusNotFound)
		return
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		w.Write(u.body)
		return
	}
	if u.rec.stream == nil {
		http.Error(w, "replay upstream: this recording has no stream", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Write(u.rec.stream)
}

// RoundTrip is the adapter's transport: the real one, with the answer's
// body read in the current cut's pieces.
func (u *replayUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.tr.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	c := u.cut
	u.mu.Unlock()
	n := len(u.body)
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") || ct == "application/vnd.amazon.eventstream" {
		n = len(u.rec.stream)
	}
	resp.Body = &pieceReader{r: resp.Body, sizes: c.sizes(n)}
	return resp, nil
}

// replayGateway is a gateway with one model, "replay", served by the
// recording's upstream through an adapter of its kind.
func replayGateway(t *testing.T, u *replayUpstream) *env {
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Timeouts.FirstToken = config.Duration(10 * time.Second)
	cfg.Timeouts.Idle = config.Duration(10 * time.Second)
	cfg.Timeouts.NonStream = config.Duration(10 * time.Second)
	kind, base := u.rec.dialect, u.srv.URL
	var p provider.Provider
	switch kind {
	case "openai":
		base += "/v1"
		p = popenai.New(base, "sk-up", popenai.Options{Transport: u})
	case "anthropic":
		p = panthropic.New(base, "sk-up", panthropic.Options{Transport: u})
	case "gemini":
		p = gemini.New(base, "sk-up", gemini.Options{Transport: u})
	case "bedrock-converse":
		kind = "bedrock"
		p = converse.New(base, converse.Options{Transport: &cloud.BedrockAuth{Base: u, APIKey: "sk-up"}})
	case "azure":
		// A Responses recording is Azure's Responses API, which a route
		// with responses: true passes Responses clients through to; a chat
		// recording is its chat completions, which every client's request
		// reaches translated.
		p = popenai.New(base, "", popenai.Options{Transport: &cloud.Azure{Base: u, Resource: base, APIVersion: "2024-10-21", APIKey: "sk-up"}, Responses: u.rec.responsesOnly()})
	}
	pc := config.Provider{Name: "up", Kind: kind, BaseURL: base, APIKey: "sk-up"}
	switch kind {
	case "bedrock":
		pc.Region = "us-east-1"
	case "azure":
		pc.APIVersion, pc.Responses = "2024-10-21", u.rec.responsesOnly()
	}
	cfg.Providers = append(cfg.Providers, pc)
	cfg.Models = append(cfg.Models, config.Model{Name: "replay", Routes: []config.Route{{Provider: "up", Model: "up-model"}},
		Price: config.Price{Input: 1, Output: 2}})
	return startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Providers: map[string]provider.Provider{"up": p}})
}

// TestReplayCorpus replays every recording through the gateway to each
// client dialect (the official openai-go and anthropic-sdk-go clients),
// streamed and not, with the upstream's bytes cut at arbitrary places
// (whole, byte by byte, seeded random pieces): the client's assembled
// answer, finish or stop reason and usage are the recording's, and so is
// the usage entry the gateway records.
func TestReplayCorpus(t *testing.T) {
	recs := loadCorpus(t)
	var pairs, passed int
	for i := range recs {
		rec := &recs[i]
		t.Run(rec.dialect+"/"+rec.name, func(t *testing.T) {
			u := newReplayUpstream(t, rec)
			e := replayGateway(t, u)
			entries := 0
			for _, client := range rec.clients() {
				for _, stream := range []bool{true, false} {
					if stream && rec.stream == nil {
						continue
					}
					n := len(u.body)
					if stream {
						n = len(rec.stream)
					}
					pairs++
					ok := t.Run(fmt.Sprintf("%s/stream=%v", client, stream), func(t *testing.T) {
						for _, c := range replayCuts(rec.name, stream, n) {
							u.mu.Lock()
							u.cut = c
							u.mu.Unlock()
							t.Run(c.name, func(t *testing.T) {
								var got replayAnswer
								var err error
								switch client {
								case "chat":
									got, err = chatAnswer(e, rec, stream)
								case "messages":
									got, err = messagesAnswer(e, rec, stream)
								case "responses":
									got, err = responsesAnswer(e, rec, stream)
								}
								entries++
								if err != nil {
									t.Fatalf("request: %v", err)
								}
								checkAnswer(t, client, rec, got)
								checkEntry(t, rec, stream, e.waitEntries(t, entries)[entries-1])
							})
						}
					})
					if ok {
						passed++
					}
				}
			}
		})
	}
	t.Logf("replay corpus: %d of %d recording × client dialect × stream pairs passed, over %d recordings", passed, pairs, len(recs))
}

// replayAnswer is what a client assembled, in the common terms of
// replayWant.
type replayAnswer struct {
	text, refusal string
	thinking      []replayThinking
	tools         []replayToolCall
	finish        string // finish_reason or stop_reason
	stopSequence  string
	usage         replayUsage
}

func replayTools(rec *recording) (chat []openai.ChatCompletionToolUnionParam, msgs []anthropic.ToolUnionParam) {
	seen := map[string]bool{}
	for _, tc := range rec.meta.Want.Tools {
		if seen[tc.Name] {
			continue
		}
		seen[tc.Name] = true
		chat = append(chat, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: tc.Name, Parameters: openai.FunctionParameters{"type": "object"}}))
		msgs = append(msgs, anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{}, tc.Name))
	}
	return chat, msgs
}

// chatAnswer asks /v1/chat/completions with openai-go: a stream gathered
// by its ChatCompletionAccumulator, or a chat completion. Thinking is read
// from the chunks' reasoning_content and thinking_blocks (the gateway's
// documented fields, which the SDK does not type).
func chatAnswer(e *env, rec *recording, stream bool) (replayAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0))
	tools, _ := replayTools(rec)
	params := openai.ChatCompletionNewParams{
		Model:     "replay",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Replay the recording.")},
		MaxTokens: openai.Int(4096),
		Tools:     tools,
	}
	var a replayAnswer
	var extra struct {
		Choices []struct {
			Delta, Message struct {
				ReasoningContent string           `json:"reasoning_content"`
				Reasoning        string           `json:"reasoning"` // OpenRouter's name for it
				ThinkingBlocks   []map[string]any `json:"thinking_blocks"`
			}
			FinishReason *string         `json:"finish_reason"`
			StopReason   json.RawMessage `json:"stop_reason"` // the stop sequence, vLLM's field
		}
		Usage *chatUsage
	}
	var comp openai.ChatCompletion
	var pending string  // reasoning text not yet closed by a signed block
	var finish string   // the stream's finish_reason, read off the chunks
	var usage chatUsage // the last usage sent
	if stream {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			chunk := s.Current()
			if !acc.AddChunk(chunk) {
				return a, fmt.Errorf("the accumulator rejected chunk %s", chunk.RawJSON())
			}
			extra.Choices, extra.Usage = nil, nil
			if err := json.Unmarshal([]byte(chunk.RawJSON()), &extra); err != nil {
				return a, err
			}
			for _, ch := range extra.Choices {
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
				json.Unmarshal(ch.StopReason, &a.stopSequence)
				pending += ch.Delta.ReasoningContent + ch.Delta.Reasoning
				for _, tb := range ch.Delta.ThinkingBlocks {
					a.thinking, pending = append(a.thinking, thinkingBlock(tb, pending)), ""
				}
			}
			if extra.Usage != nil {
				// The last counts: OpenAI sends one usage chunk, vLLM's
				// continuous_usage_stats a cumulative usage on every chunk
				// (which the SDK's accumulator would add up).
				usage = *extra.Usage
			}
		}
		if err := s.Err(); err != nil {
			return a, err
		}
		comp = acc.ChatCompletion
	} else {
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			return a, err
		}
		comp = *c
		if err := json.Unmarshal([]byte(c.RawJSON()), &extra); err != nil {
			return a, err
		}
		if len(extra.Choices) > 0 {
			m := extra.Choices[0].Message
			for _, tb := range m.ThinkingBlocks {
				a.thinking = append(a.thinking, thinkingBlock(tb, ""))
			}
			if len(m.ThinkingBlocks) == 0 {
				pending = m.ReasoningContent + m.Reasoning
			}
			json.Unmarshal(extra.Choices[0].StopReason, &a.stopSequence)
		}
		if extra.Usage != nil {
			usage = *extra.Usage
		}
	}
	if pending != "" {
		a.thinking = append(a.thinking, replayThinking{Thinking: pending})
	}
	if len(comp.Choices) != 1 {
		return a, fmt.Errorf("got %d choices, want 1: %s", len(comp.Choices), comp.RawJSON())
	}
	ch := comp.Choices[0]
	a.text, a.refusal, a.finish = ch.Message.Content, ch.Message.Refusal, ch.FinishReason
	if stream {
		// OpenAI sends finish_reason once; OpenRouter repeats the choice
		// with finish_reason null in its usage chunk, which the SDK's
		// accumulator takes as the finish (""): the stream's finish is the
		// one it sent.
		if a.finish != "" && a.finish != finish {
			return a, fmt.Errorf("the accumulator's finish_reason %q is not the stream's %q", a.finish, finish)
		}
		a.finish = finish
	}
	for _, tc := range ch.Message.ToolCalls {
		a.tools = append(a.tools, replayToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	u := usage
	a.usage = replayUsage{CacheRead: u.Prompt.Cached, CacheWrite: u.Prompt.CacheWrite, Output: u.CompletionTokens, Reasoning: u.Completion.Reasoning}
	a.usage.Input = u.PromptTokens - u.Prompt.Cached - u.Prompt.CacheWrite
	return a, nil
}

// chatUsage is a chat usage object: prompt_tokens counts the cache reads
// (cached_tokens) and writes (cache_write_tokens, the gateway's field).
type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	Prompt           struct {
		Cached     int `json:"cached_tokens"`
		CacheWrite int `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	Completion struct {
		Reasoning int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// thinkingBlock reads one of thinking_blocks: a streamed signed block's
// text is the reasoning streamed since the previous block.
func thinkingBlock(tb map[string]any, streamed string) replayThinking {
	s := func(k string) string { v, _ := tb[k].(string); return v }
	if s("type") == "redacted_thinking" {
		return replayThinking{Redacted: s("data")}
	}
	return replayThinking{Thinking: streamed + s("thinking"), Signature: s("signature")}
}

// messagesAnswer asks /v1/messages with anthropic-sdk-go: a stream
// gathered by Message.Accumulate, or a Message.
func messagesAnswer(e *env, rec *recording, stream bool) (replayAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := anthropicClient(e, devKey)
	_, tools := replayTools(rec)
	params := anthropic.MessageNewParams{
		Model: "replay", MaxTokens: 4096, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Replay the recording."))},
	}
	var a replayAnswer
	var msg anthropic.Message
	if stream {
		s := client.Messages.NewStreaming(ctx, params)
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				return a, err
			}
		}
		if err := s.Err(); err != nil {
			return a, err
		}
	} else {
		m, err := client.Messages.New(ctx, params)
		if err != nil {
			return a, err
		}
		msg = *m
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			a.text += b.Text
		case "thinking":
			a.thinking = append(a.thinking, replayThinking{Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			a.thinking = append(a.thinking, replayThinking{Redacted: b.Data})
		case "tool_use":
			a.tools = append(a.tools, replayToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
		}
	}
	a.finish, a.stopSequence = string(msg.StopReason), msg.StopSequence
	u := msg.Usage
	a.usage = replayUsage{Input: int(u.InputTokens), CacheRead: int(u.CacheReadInputTokens),
		CacheWrite: int(u.CacheCreationInputTokens), Output: int(u.OutputTokens)}
	return a, nil
}

// mergeThinking joins each unsigned thinking text to the block after it:
// a stream's reasoning may arrive in several runs, the text of one block.
func mergeThinking(in []replayThinking) []replayThinking {
	var out []replayThinking
	carry := ""
	for _, b := range in {
		if b.Redacted == "" && b.Signature == "" {
			carry += b.Thinking
			continue
		}
		if b.Redacted == "" {
			b.Thinking = carry + b.Thinking
			carry = ""
		}
		out = append(out, b)
	}
	if carry != "" {
		out = append(out, replayThinking{Thinking: carry})
	}
	return out
}

func checkAnswer(t *testing.T, client string, rec *recording, got replayAnswer) {
	t.Helper()
	want := rec.meta.Want
	wantText, wantRefusal := want.Text, want.Refusal
	if client == "messages" {
		wantText, wantRefusal = want.Text+want.Refusal, ""
	}
	if got.text != wantText || got.refusal != wantRefusal {
		t.Errorf("text: got %q (refusal %q), want %q (refusal %q)", got.text, got.refusal, wantText, wantRefusal)
	}
	if g, w := mergeThinking(got.thinking), mergeThinking(want.Thinking); client != "responses" && !slices.Equal(g, w) {
		t.Errorf("thinking: got %+v, want %+v", g, w)
	}
	if len(got.tools) != len(want.Tools) {
		t.Errorf("tool calls: got %+v, want %+v", got.tools, want.Tools)
	} else {
		ids := map[string]bool{}
		for i, g := range got.tools {
			w := want.Tools[i]
			if g.Name != w.Name || !jsonEqual(g.Arguments, w.Arguments) || (w.ID != "" && g.ID != w.ID) || g.ID == "" || ids[g.ID] {
				t.Errorf("tool call %d: got %+v, want %+v (a unique id when the want has none)", i, g, w)
			}
			ids[g.ID] = true
		}
	}
	wantFinish, wantSeq := want.FinishReason, want.StopSequence
	if client == "chat" && rec.dialect != "anthropic" || client == "responses" {
		wantSeq = "" // only the anthropic adapter reports it to chat clients (the choice's stop_reason); Responses has none
	}
	switch client {
	case "messages":
		wantFinish = want.StopReason
	case "responses":
		wantFinish = responsesStatus(want.FinishReason)
	}
	if got.stopSequence != wantSeq {
		t.Errorf("stop sequence: got %q, want %q", got.stopSequence, wantSeq)
	}
	if got.finish != wantFinish {
		t.Errorf("finish: got %q, want %q", got.finish, wantFinish)
	}
	if wu := want.Usage; wu != nil {
		w := *wu
		if client == "messages" {
			w.Reasoning = 0 // the Messages API reports none
		}
		if got.usage != w {
			t.Errorf("usage: got %+v, want %+v", got.usage, w)
		}
	}
}

// checkEntry checks the usage entry of one replay: answered in full, with
// the recording's usage.
func checkEntry(t *testing.T, rec *recording, stream bool, en usage.Entry) {
	t.Helper()
	if en.Outcome != usage.OutcomeOK || en.Status != 200 || en.Stream != stream || en.Route != "up/up-model" {
		t.Errorf("usage entry: got %+v, want ok, 200, stream %v, via up/up-model", en, stream)
	}
	if w := rec.meta.Want.Usage; w != nil {
		got := [4]int{en.InputTokens, en.CacheReadTokens, en.CacheWriteTokens, en.OutputTokens}
		want := [4]int{w.Input + w.CacheRead + w.CacheWrite, w.CacheRead, w.CacheWrite, w.Output}
		if got != want || en.TokenSource != usage.SourceUsage {
			t.Errorf("usage entry tokens (input, cache read, cache write, output): got %v from %q, want %v from usage", got, en.TokenSource, want)
		}
	}
}

func jsonEqual(a, b string) bool {
	if a == "" {
		a = "{}"
	}
	if b == "" {
		b = "{}"
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// sseEvent is one event of a recording.
type sseEvent struct{ name, data string }

// sseEvents splits a recorded stream into its events (LF or CRLF lines;
// comments and events without data skipped): the test's own reading,
// apart from the gateway's parser.
func sseEvents(b []byte) []sseEvent {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	var out []sseEvent
	for _, block := range strings.Split(s, "\n\n") {
		var ev sseEvent
		var data []string
		for _, line := range strings.Split(block, "\n") {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.name = value
			case "data":
				data = append(data, value)
			}
		}
		if data != nil {
			ev.data = strings.Join(data, "\n")
			out = append(out, ev)
		}
	}
	return out
}

// assemble builds the non-streaming answer of a recording that has only
// its stream, as the provider's non-streaming API would have answered it:
// for Anthropic with the official SDK's Message.Accumulate, for OpenAI
// and Gemini by their documented merge rules (deltas appended, tool calls
// by index, Gemini's parts joined, the last finish and usage).
func assemble(t *testing.T, rec *recording) []byte {
	t.Helper()
	var (
		out any
		err error
	)
	events := sseEvents(rec.stream)
	switch rec.dialect {
	case "anthropic":
		var msg anthropic.Message
		for _, ev := range events {
			var u anthropic.MessageStreamEventUnion
			if err = u.UnmarshalJSON([]byte(ev.data)); err == nil {
				err = msg.Accumulate(u)
			}
			if err != nil {
				t.Fatalf("assemble %s: %v", rec.name, err)
			}
		}
		return []byte(msg.RawJSON())
	case "openai":
		out, err = assembleOpenAI(events)
	case "azure":
		if rec.responsesOnly() {
			out, err = assembleResponses(events)
		} else {
			out, err = assembleOpenAI(events)
		}
	case "bedrock-converse":
		out, err = assembleConverse(rec.stream)
	case "gemini":
		out, err = assembleGemini(events)
	}
	if err != nil {
		t.Fatalf("assemble %s: %v", rec.name, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assembleOpenAI(events []sseEvent) (any, error) {
	type call struct {
		ID       string `json:"id,omitempty"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var (
		id, model        string
		created          int64
		content, refusal *string
		reasoning        string
		reasoningKey     = "reasoning_content" // or OpenRouter's "reasoning", as the stream names it
		blocks           []map[string]any
		calls            []*call
		finish           any
		stopReason       json.RawMessage
		usage            json.RawMessage
	)
	for _, ev := range events {
		if ev.data == "[DONE]" {
			break
		}
		var c struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Created int64  `json:"created"`
			Choices []struct {
				Delta struct {
					Content          *string          `json:"content"`
					Refusal          *string          `json:"refusal"`
					ReasoningContent string           `json:"reasoning_content"`
					Reasoning        *string          `json:"reasoning"`
					ThinkingBlocks   []map[string]any `json:"thinking_blocks"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string         `json:"finish_reason"`
				StopReason   json.RawMessage `json:"stop_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			return nil, err
		}
		if id == "" {
			id, model, created = c.ID, c.Model, c.Created
		}
		if len(c.Usage) > 0 && string(c.Usage) != "null" {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.Content != nil {
				content = ptrCat(content, *d.Content)
			}
			if d.Refusal != nil {
				refusal = ptrCat(refusal, *d.Refusal)
			}
			reasoning += d.ReasoningContent
			if d.Reasoning != nil && *d.Reasoning != "" {
				reasoning, reasoningKey = reasoning+*d.Reasoning, "reasoning"
			}
			blocks = append(blocks, d.ThinkingBlocks...)
			for _, tc := range d.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, &call{Type: "function"})
				}
				c := calls[tc.Index]
				c.ID += tc.ID
				c.Function.Name += tc.Function.Name
				c.Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
			if len(ch.StopReason) > 0 && string(ch.StopReason) != "null" {
				stopReason = ch.StopReason
			}
		}
	}
	if content != nil && *content == "" && len(calls) > 0 {
		content = nil
	}
	msg := map[string]any{"role": "assistant", "content": content, "refusal": refusal}
	if reasoning != "" {
		msg[reasoningKey] = reasoning
	}
	if len(blocks) > 0 {
		msg["thinking_blocks"] = blocks
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}
	if stopReason != nil {
		choice["stop_reason"] = stopReason
	}
	return map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []any{choice}, "usage": usage}, nil
}

func ptrCat(p *string, s string) *string {
	if p == nil {
		return &s
	}
	s = *p + s
	return &s
}

func assembleGemini(events []sseEvent) (any, error) {
	var (
		parts    []map[string]any
		last     map[string]any // the last candidate, for finishReason and its ratings
		top      = map[string]any{}
		finished bool
	)
	for _, ev := range events {
		var r map[string]any
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
			return nil, err
		}
		for k, v := range r {
			if k != "candidates" {
				top[k] = v // usageMetadata, modelVersion, responseId, promptFeedback: the last wins
			}
		}
		cands, _ := r["candidates"].([]any)
		if len(cands) == 0 {
			continue
		}
		c, _ := cands[0].(map[string]any)
		content, _ := c["content"].(map[string]any)
		ps, _ := content["parts"].([]any)
		for _, p := range ps {
			part, _ := p.(map[string]any)
			text, isText := part["text"].(string)
			if n := len(parts); isText && n > 0 {
				prev := parts[n-1]
				if pt, ok := prev["text"].(string); ok && prev["thought"] == part["thought"] {
					prev["text"] = pt + text
					if sig, ok := part["thoughtSignature"]; ok {
						prev["thoughtSignature"] = sig
					}
					continue
				}
			}
			parts = append(parts, part)
		}
		if c["finishReason"] != nil {
			finished = true
		}
		last = c
	}
	if last != nil {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		for _, k := range []string{"finishReason", "safetyRatings", "citationMetadata"} {
			if v, ok := last[k]; ok {
				cand[k] = v
			}
		}
		if !finished {
			return nil, fmt.Errorf("gemini: the recording has no finishReason")
		}
		top["candidates"] = []any{cand}
	}
	return top, nil
}

// responsesAnswer asks /v1/responses with openai-go: the response of the
// stream's terminal event, or the response object. Its finish is the
// status ("completed", or "incomplete:" and the reason); thinking is not
// read (reasoning items carry no Anthropic signature to compare).
func responsesAnswer(e *env, rec *recording, stream bool) (replayAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "replay", MaxOutputTokens: openai.Int(4096),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Replay the recording.")}}
	seen := map[string]bool{}
	for _, tc := range rec.meta.Want.Tools {
		if !seen[tc.Name] {
			seen[tc.Name] = true
			params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: tc.Name, Parameters: map[string]any{"type": "object"}}})
		}
	}
	var a replayAnswer
	var res responses.Response
	if stream {
		s := client.Responses.NewStreaming(ctx, params)
		terminal := ""
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.completed", "response.incomplete", "response.failed":
				if terminal != "" {
					return a, fmt.Errorf("a second terminal event %s after %s", ev.Type, terminal)
				}
				terminal = ev.Type
				res = ev.AsResponseCompleted().Response
			}
		}
		if err := s.Err(); err != nil {
			return a, err
		}
		if terminal == "" {
			return a, errors.New("the stream ended without a terminal event")
		}
	} else {
		r, err := client.Responses.New(ctx, params)
		if err != nil {
			return a, err
		}
		res = *r
	}
	for _, it := range res.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					a.text += c.Text
				case "refusal":
					a.refusal += c.Refusal
				}
			}
		case "function_call":
			a.tools = append(a.tools, replayToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments.OfString})
		}
	}
	a.finish = string(res.Status)
	if res.Status == "incomplete" {
		a.finish += ":" + res.IncompleteDetails.Reason
	}
	u := res.Usage
	var details struct {
		CacheWrite int `json:"cache_write_tokens"` // the gateway's field
	}
	json.Unmarshal([]byte(u.InputTokensDetails.RawJSON()), &details)
	a.usage = replayUsage{Input: int(u.InputTokens-u.InputTokensDetails.CachedTokens) - details.CacheWrite, CacheRead: int(u.InputTokensDetails.CachedTokens),
		CacheWrite: details.CacheWrite, Output: int(u.OutputTokens), Reasoning: int(u.OutputTokensDetails.ReasoningTokens)}
	return a, nil
}

// responsesStatus is the Responses status a chat finish_reason gives.
func responsesStatus(finish string) string {
	switch finish {
	case "length":
		return "incomplete:max_output_tokens"
	case "content_filter":
		return "incomplete:content_filter"
	}
	return "completed"
}

// assembleConverse builds the ConverseResponse of a ConverseStream
// recording, as Converse would have answered it: text blocks and
// reasoning joined, tool inputs parsed, the stopReason and usage.
func assembleConverse(frames []byte) (any, error) {
	type block map[string]any
	var content []block
	idx := map[int]block{}
	out := map[string]any{}
	dec := eventstream.NewDecoder(bytes.NewReader(frames), 0)
	for {
		m, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var ev struct {
			Index *int `json:"contentBlockIndex"`
			Start struct {
				ToolUse map[string]any `json:"toolUse"`
			} `json:"start"`
			Delta struct {
				Text             *string `json:"text"`
				ToolUse          *struct{ Input string }
				ReasoningContent *struct{ Text, Signature string } `json:"reasoningContent"`
			} `json:"delta"`
			StopReason string          `json:"stopReason"`
			Usage      json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal(m.Payload, &ev); err != nil {
			return nil, err
		}
		get := func(kind string) block {
			b := idx[*ev.Index]
			if b == nil {
				b = block{}
				idx[*ev.Index] = b
				content = append(content, b)
			}
			return b
		}
		switch m.String(":event-type") {
		case "contentBlockStart":
			if ev.Start.ToolUse != nil {
				tu := maps.Clone(ev.Start.ToolUse)
				tu["input"] = ""
				get("toolUse")["toolUse"] = tu
			}
		case "contentBlockDelta":
			b := get("")
			switch d := ev.Delta; {
			case d.Text != nil:
				t, _ := b["text"].(string)
				b["text"] = t + *d.Text
			case d.ToolUse != nil:
				tu := b["toolUse"].(map[string]any)
				tu["input"] = tu["input"].(string) + d.ToolUse.Input
			case d.ReasoningContent != nil:
				rc, _ := b["reasoningContent"].(map[string]any)
				if rc == nil {
					rc = map[string]any{"reasoningText": map[string]any{"text": ""}}
					b["reasoningContent"] = rc
				}
				rt := rc["reasoningText"].(map[string]any)
				rt["text"] = rt["text"].(string) + d.ReasoningContent.Text
				if d.ReasoningContent.Signature != "" {
					rt["signature"] = d.ReasoningContent.Signature
				}
			}
		case "messageStop":
			out["stopReason"] = ev.StopReason
		case "metadata":
			out["usage"] = ev.Usage
		}
	}
	for _, b := range content {
		if tu, ok := b["toolUse"].(map[string]any); ok {
			in := tu["input"].(string)
			if in == "" {
				in = "{}"
			}
			tu["input"] = json.RawMessage(in)
		}
	}
	out["output"] = map[string]any{"message": map[string]any{"role": "assistant", "content": content}}
	return out, nil
}

// assembleResponses is a Responses stream's response object: its terminal
// event's.
func assembleResponses(events []sseEvent) (any, error) {
	for _, ev := range events {
		var e struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal([]byte(ev.data), &e) == nil && (e.Type == "response.completed" || e.Type == "response.incomplete") {
			return e.Response, nil
		}
	}
	return nil, errors.New("the responses recording has no terminal event")
}
