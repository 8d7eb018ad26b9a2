package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

const (
	anthropicPath = "/v1/messages"
	geminiStream  = "/v1beta/models/sim-gem:streamGenerateContent?alt=sse"
	geminiUnary   = "/v1beta/models/sim-gem:generateContent"
)

// Bodies of the three dialects asking for the same thing.
func anthropicBody(stream bool, maxTokens int, extra string) string {
	b := `{"model":"sim-claude","max_tokens":` + itoa(maxTokens) + `,"messages":[{"role":"user","content":"Tell me about streaming latency."}]`
	if stream {
		b += `,"stream":true`
	}
	return b + extra + "}"
}

func geminiBody(maxTokens int, extra string) string {
	b := `{"contents":[{"role":"user","parts":[{"text":"Tell me about streaming latency."}]}]`
	if maxTokens > 0 {
		b += `,"generationConfig":{"maxOutputTokens":` + itoa(maxTokens) + `}`
	}
	return b + extra + "}"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Tools offered in each dialect: get_weather(city string, days integer).
const (
	openAITools    = `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]`
	anthropicTools = `,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}]`
	geminiTools    = `,"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"},"days":{"type":"INTEGER"}}}}]}]`
)

func postJSON(t *testing.T, ts *httptest.Server, path, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// namedEvent is one SSE event with its name.
type namedEvent struct {
	name, data, comment string
}

// readAll reads an SSE stream of a dialect without [DONE] to its end. err
// is nil for a clean end between two events, sse.ErrTruncated for a cut.
func readAll(t *testing.T, resp *http.Response) ([]namedEvent, error) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status: got %d, want 200 (%s)", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type: got %q, want text/event-stream", ct)
	}
	r := sse.NewReader(resp.Body, 0)
	r.NoDone = true
	var evs []namedEvent
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, namedEvent{string(ev.Name), string(ev.Data), string(ev.Comment)})
	}
}

// anthropicSummary is an Anthropic stream as the tests check it.
type anthropicSummary struct {
	names      []string
	text       string
	deltas     int
	partial    string // input_json_delta fragments joined
	stopReason string
	input      int // usage.input_tokens of message_start
	output     int // usage.output_tokens of message_delta
}

// checkAnthropic asserts the shape of a complete Anthropic stream: every
// event named and typed alike, in the order of Anthropic's streaming
// reference, one content block of index 0.
func checkAnthropic(t *testing.T, evs []namedEvent) anthropicSummary {
	t.Helper()
	var sum anthropicSummary
	for i, ev := range evs {
		var v struct {
			Type    string `json:"type"`
			Index   *int   `json:"index"`
			Message *struct {
				ID, Type, Role, Model string
				Content               []json.RawMessage
				StopReason            *string `json:"stop_reason"`
				Usage                 struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				}
			}
			Delta struct {
				Type        string  `json:"type"`
				Text        string  `json:"text"`
				PartialJSON string  `json:"partial_json"`
				StopReason  *string `json:"stop_reason"`
			}
			Usage struct {
				OutputTokens int `json:"output_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Fatalf("event %d %q: data %q is not JSON: %v", i, ev.name, ev.data, err)
		}
		if ev.name == "" || v.Type != ev.name {
			t.Errorf("event %d: event: %q with data type %q, want both the same", i, ev.name, v.Type)
		}
		sum.names = append(sum.names, ev.name)
		switch v.Type {
		case "message_start":
			m := v.Message
			if m == nil || !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != "sim-claude" ||
				len(m.Content) != 0 || m.StopReason != nil || m.Usage.OutputTokens != 1 {
				t.Errorf("message_start: got %s, want an empty assistant message with output_tokens 1", ev.data)
			}
			if m != nil {
				sum.input = m.Usage.InputTokens
			}
		case "content_block_start", "content_block_delta", "content_block_stop":
			if v.Index == nil || *v.Index != 0 {
				t.Errorf("%s: got %s, want index 0", v.Type, ev.data)
			}
			if v.Type != "content_block_delta" {
				break
			}
			switch v.Delta.Type {
			case "text_delta":
				sum.text += v.Delta.Text
				sum.deltas++
			case "input_json_delta":
				sum.partial += v.Delta.PartialJSON
				sum.deltas++
			default:
				t.Errorf("delta type: got %q", v.Delta.Type)
			}
		case "message_delta":
			if v.Delta.StopReason != nil {
				sum.stopReason = *v.Delta.StopReason
			}
			sum.output = v.Usage.OutputTokens
		}
	}
	want := []string{"message_start", "content_block_start", "ping"}
	if len(sum.names) < 6 || strings.Join(sum.names[:3], ",") != strings.Join(want, ",") {
		t.Fatalf("events: got %v, want message_start, content_block_start, ping first", sum.names)
	}
	tail := sum.names[len(sum.names)-3:]
	if strings.Join(tail, ",") != "content_block_stop,message_delta,message_stop" {
		t.Errorf("events: got %v, want content_block_stop, message_delta, message_stop last", sum.names)
	}
	for _, n := range sum.names[3 : len(sum.names)-3] {
		if n != "content_block_delta" {
			t.Errorf("events: got %v, want only content_block_delta between ping and content_block_stop", sum.names)
			break
		}
	}
	return sum
}

func TestAnthropicStream(t *testing.T) {
	tests := []struct {
		name       string
		maxTokens  int
		perChunk   int
		lang       string
		wantTokens int
		wantDeltas int
		wantStop   string
	}{
		{"end_turn", 100, 1, "en", 12, 12, "end_turn"},
		{"max_tokens", 5, 1, "en", 5, 5, "max_tokens"},
		{"ko three per chunk", 100, 3, "ko", 12, 4, "end_turn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := quick
			p.TokensPerChunk, p.Lang = tt.perChunk, tt.lang
			_, ts := newTestServer(t, Options{Profile: p})
			resp := postJSON(t, ts, anthropicPath, anthropicBody(true, tt.maxTokens, ""), map[string]string{
				"x-api-key": "anything", "anthropic-version": "2023-06-01"})
			if id := resp.Header.Get("request-id"); !strings.HasPrefix(id, "req_") {
				t.Errorf("request-id header: got %q, want req_…", id)
			}
			evs, err := readAll(t, resp)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			sum := checkAnthropic(t, evs)
			if sum.deltas != tt.wantDeltas || sum.output != tt.wantTokens || sum.stopReason != tt.wantStop {
				t.Errorf("got %d deltas, output_tokens %d, stop_reason %q; want %d, %d, %q",
					sum.deltas, sum.output, sum.stopReason, tt.wantDeltas, tt.wantTokens, tt.wantStop)
			}
			if sum.input <= 0 || sum.text == "" {
				t.Errorf("got input_tokens %d and text %q, want both", sum.input, sum.text)
			}
		})
	}
}

// TestDialectsSameText checks that the engine is shared: one seed gives
// the same text in the three dialects, stream and not.
func TestDialectsSameText(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	h := map[string]string{HeaderSeed: "11"}
	want := streamText(t, ts, reqOpts{headers: h})

	evs, err := readAll(t, postJSON(t, ts, anthropicPath, anthropicBody(true, 100, ""), h))
	if err != nil {
		t.Fatal(err)
	}
	if got := checkAnthropic(t, evs).text; got != want {
		t.Errorf("anthropic stream: got %q, want %q", got, want)
	}
	var msg struct {
		Content []struct{ Type, Text string }
	}
	if err := json.NewDecoder(postJSON(t, ts, anthropicPath, anthropicBody(false, 100, ""), h).Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != want {
		t.Errorf("anthropic message: got %+v, want one text block %q", msg.Content, want)
	}

	evs, err = readAll(t, postJSON(t, ts, geminiStream, geminiBody(0, ""), h))
	if err != nil {
		t.Fatal(err)
	}
	if got := checkGemini(t, evs).text; got != want {
		t.Errorf("gemini stream: got %q, want %q", got, want)
	}
	var g geminiResponse
	if err := json.NewDecoder(postJSON(t, ts, geminiUnary, geminiBody(0, ""), h).Body).Decode(&g); err != nil {
		t.Fatal(err)
	}
	if len(g.Candidates) != 1 || len(g.Candidates[0].Content.Parts) != 1 || g.Candidates[0].Content.Parts[0].Text == nil || *g.Candidates[0].Content.Parts[0].Text != want {
		t.Errorf("gemini response: got %+v, want the text %q", g, want)
	}
}

// geminiResponse is a GenerateContentResponse, written from the Gemini API
// reference, for reading the raw stream.
type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				FunctionCall *struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
		Index        *int   `json:"index"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

type geminiSummary struct {
	text    string
	chunks  int // chunks with content
	finish  string
	tokens  int // last candidatesTokenCount
	calls   []json.RawMessage
	idsSame bool
}

// checkGemini asserts the shape of a complete Gemini stream: unnamed data
// events of GenerateContentResponse, cumulative usage on each, one
// finishReason on the last.
func checkGemini(t *testing.T, evs []namedEvent) geminiSummary {
	t.Helper()
	sum := geminiSummary{idsSame: true}
	if len(evs) < 2 {
		t.Fatalf("got %d events, want content and a finishing chunk", len(evs))
	}
	prevTokens, id := 0, ""
	for i, ev := range evs {
		if ev.name != "" || ev.data == "[DONE]" {
			t.Errorf("event %d: got name %q data %q, want unnamed data and no [DONE]", i, ev.name, ev.data)
		}
		var r geminiResponse
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
			t.Fatalf("event %d: %q is not JSON: %v", i, ev.data, err)
		}
		if len(r.Candidates) != 1 || r.Candidates[0].Content.Role != "model" || len(r.Candidates[0].Content.Parts) != 1 ||
			r.UsageMetadata == nil || r.ModelVersion != "sim-gem" || r.ResponseID == "" {
			t.Fatalf("event %d: got %s, want one model candidate with one part, usageMetadata, modelVersion, responseId", i, ev.data)
		}
		if id != "" && r.ResponseID != id {
			sum.idsSame = false
		}
		id = r.ResponseID
		u := r.UsageMetadata
		if u.CandidatesTokenCount < prevTokens || u.TotalTokenCount != u.PromptTokenCount+u.CandidatesTokenCount || u.PromptTokenCount <= 0 {
			t.Errorf("event %d usage: got %+v after %d tokens, want cumulative counts", i, *u, prevTokens)
		}
		prevTokens, sum.tokens = u.CandidatesTokenCount, u.CandidatesTokenCount
		c := r.Candidates[0]
		last := i == len(evs)-1
		if (c.FinishReason != "") != last {
			t.Errorf("event %d: finishReason %q, want one only on the last chunk", i, c.FinishReason)
		}
		sum.finish = c.FinishReason
		part := c.Content.Parts[0]
		switch {
		case part.FunctionCall != nil:
			sum.calls = append(sum.calls, part.FunctionCall.Args)
			sum.chunks++
		case part.Text != nil && *part.Text != "":
			sum.text += *part.Text
			sum.chunks++
		case !last:
			t.Errorf("event %d: got %s, want content before the last chunk", i, ev.data)
		}
	}
	if !sum.idsSame {
		t.Errorf("responseId changes within one stream")
	}
	return sum
}

func TestGeminiStream(t *testing.T) {
	tests := []struct {
		name       string
		maxTokens  int
		perChunk   int
		wantChunks int
		wantTokens int
		wantFinish string
	}{
		{"stop", 0, 1, 12, 12, "STOP"},
		{"max tokens", 5, 1, 5, 5, "MAX_TOKENS"},
		{"five per chunk", 0, 5, 3, 12, "STOP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := quick
			p.TokensPerChunk = tt.perChunk
			_, ts := newTestServer(t, Options{Profile: p})
			evs, err := readAll(t, postJSON(t, ts, geminiStream, geminiBody(tt.maxTokens, ""), map[string]string{"x-goog-api-key": "anything"}))
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			sum := checkGemini(t, evs)
			if sum.chunks != tt.wantChunks || sum.tokens != tt.wantTokens || sum.finish != tt.wantFinish {
				t.Errorf("got %d chunks, %d tokens, finish %q; want %d, %d, %q", sum.chunks, sum.tokens, sum.finish,
					tt.wantChunks, tt.wantTokens, tt.wantFinish)
			}
		})
	}
}

func TestGeminiSnakeCaseAndSeed(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	body := `{"contents":[{"parts":[{"text":"hi"}]}],"system_instruction":{"parts":[{"text":"be brief"}]},` +
		`"generation_config":{"max_output_tokens":3,"seed":9}}`
	evs, err := readAll(t, postJSON(t, ts, geminiStream, body, nil))
	if err != nil {
		t.Fatal(err)
	}
	a := checkGemini(t, evs)
	if a.tokens != 3 || a.finish != "MAX_TOKENS" {
		t.Errorf("max_output_tokens 3: got %d tokens, finish %q", a.tokens, a.finish)
	}
	evs, err = readAll(t, postJSON(t, ts, geminiStream, body, nil))
	if err != nil {
		t.Fatal(err)
	}
	if b := checkGemini(t, evs); b.text != a.text {
		t.Errorf("same generationConfig.seed twice: got %q and %q", a.text, b.text)
	}
}

// TestToolCallShapes checks the forced tool call of each dialect on the
// wire: the arguments, joined from their fragments, are the object built
// from the schema, and the stop reason says tool call.
func TestToolCallShapes(t *testing.T) {
	p := quick
	p.TokensPerChunk = 2
	_, ts := newTestServer(t, Options{Profile: p})
	h := map[string]string{HeaderToolCall: "get_weather"}
	const wantArgs = `{"city":"sim","days":1}`

	// OpenAI: role chunk with id and name, argument deltas, tool_calls.
	evs, err := openStream(t, ts, reqOptsBody(openAITools, h)).all()
	if err != nil {
		t.Fatal(err)
	}
	var args, finish, name, id string
	for i, ev := range evs {
		c := decodeChunk(t, ev.data)
		if len(c.Choices) != 1 {
			t.Fatalf("chunk %d: got %s", i, ev.data)
		}
		d := c.Choices[0].Delta
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
			continue
		}
		if len(d.ToolCalls) != 1 || d.ToolCalls[0].Index == nil || *d.ToolCalls[0].Index != 0 {
			t.Fatalf("chunk %d: got %s, want one tool_calls delta of index 0", i, ev.data)
		}
		if i == 0 {
			name, id = d.ToolCalls[0].Function.Name, d.ToolCalls[0].ID
			if d.Role != "assistant" || d.ToolCalls[0].Type != "function" || d.ToolCalls[0].Function.Arguments != "" {
				t.Errorf("first chunk: got %s, want role, type function and empty arguments", ev.data)
			}
		}
		args += d.ToolCalls[0].Function.Arguments
	}
	if name != "get_weather" || !strings.HasPrefix(id, "call_") || args != wantArgs || finish != "tool_calls" {
		t.Errorf("openai: got name %q id %q args %s finish %q; want get_weather, call_…, %s, tool_calls", name, id, args, finish, wantArgs)
	}
	// 23 bytes of arguments are 6 pieces (tokens) of <= 4 bytes, 2 a chunk.
	if n := len(evs) - 2; n != 3 {
		t.Errorf("openai argument chunks: got %d, want 3", n)
	}

	// Anthropic: tool_use block, input_json_delta fragments, tool_use.
	aevs, err := readAll(t, postJSON(t, ts, anthropicPath, anthropicBody(true, 100, anthropicTools), h))
	if err != nil {
		t.Fatal(err)
	}
	sum := checkAnthropic(t, aevs)
	if sum.partial != wantArgs || sum.stopReason != "tool_use" || sum.text != "" {
		t.Errorf("anthropic: got partial_json %q stop %q text %q, want %s and tool_use", sum.partial, sum.stopReason, sum.text, wantArgs)
	}
	if !strings.Contains(aevs[1].data, `"content_block":{"type":"tool_use","id":"toolu_`) || !strings.Contains(aevs[1].data, `"name":"get_weather","input":{}}`) {
		t.Errorf("content_block_start: got %s, want a tool_use block with empty input", aevs[1].data)
	}

	// Gemini: one functionCall part, then finishReason STOP.
	gevs, err := readAll(t, postJSON(t, ts, geminiStream, geminiBody(0, geminiTools), h))
	if err != nil {
		t.Fatal(err)
	}
	g := checkGemini(t, gevs)
	if len(g.calls) != 1 || string(g.calls[0]) != wantArgs || g.finish != "STOP" || g.text != "" {
		t.Errorf("gemini: got calls %s finish %q text %q, want one call %s and STOP", g.calls, g.finish, g.text, wantArgs)
	}
	if g.tokens != sum.output {
		t.Errorf("tool call tokens: gemini %d, anthropic %d, want the same", g.tokens, sum.output)
	}
}

// reqOptsBody is a stream request with extra body fields (the tools).
func reqOptsBody(extra string, h map[string]string) reqOpts {
	return reqOpts{stream: true, headers: h, extra: extra}
}

func TestToolsOfferedWithoutHeader(t *testing.T) {
	// Tools offered but no X-Sim-Tool-Call: text, as before.
	_, ts := newTestServer(t, Options{})
	evs, err := openStream(t, ts, reqOptsBody(openAITools, nil)).all()
	if err != nil {
		t.Fatal(err)
	}
	if sum := checkShape(t, evs, false); len(sum.contents) != 12 || sum.finish != "stop" {
		t.Errorf("got %d chunks finish %q, want the 12-token text answer", len(sum.contents), sum.finish)
	}
}

func TestToolCallHeaderErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	tests := []struct {
		name, path, body, tool string
	}{
		{"openai no tools", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "get_weather"},
		{"openai other tool", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]` + openAITools + `}`, "get_time"},
		{"anthropic no tools", anthropicPath, anthropicBody(true, 10, ""), "get_weather"},
		{"anthropic other tool", anthropicPath, anthropicBody(false, 10, anthropicTools), "get_time"},
		{"gemini no tools", geminiStream, geminiBody(0, ""), "get_weather"},
		{"gemini other tool", geminiUnary, geminiBody(0, geminiTools), "get_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postJSON(t, ts, tt.path, tt.body, map[string]string{HeaderToolCall: tt.tool})
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 400 || !strings.Contains(string(b), HeaderToolCall) || !strings.Contains(string(b), tt.tool) {
				t.Errorf("got %d %s, want 400 naming %s and the tool", resp.StatusCode, b, HeaderToolCall)
			}
		})
	}
}

func TestAnthropicRequestErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	tests := []struct {
		name, body string
		headers    map[string]string
		want       string // in the message
	}{
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil, "max_tokens"},
		{"zero max_tokens", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, nil, "max_tokens"},
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil, "model"},
		{"no messages", `{"model":"m","max_tokens":5}`, nil, "messages"},
		{"bad content", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":7}]}`, nil, "messages.0.content"},
		{"invalid json", `{"model":`, nil, "invalid JSON"},
		{"bad header", anthropicBody(true, 5, ""), map[string]string{HeaderTTFT: "soon"}, HeaderTTFT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postJSON(t, ts, anthropicPath, tt.body, tt.headers)
			e := decodeAnthropicError(t, resp)
			if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("got %d %+v, want 400 invalid_request_error naming %s", resp.StatusCode, e, tt.want)
			}
		})
	}
}

func TestGeminiRequestErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	tests := []struct {
		name, path, body string
		method           string
		want             int
		wantStatus, msg  string
	}{
		{"no contents", geminiStream, `{}`, "POST", 400, "INVALID_ARGUMENT", "contents"},
		{"negative max", geminiUnary, `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":-1}}`, "POST", 400, "INVALID_ARGUMENT", "max_output_tokens"},
		{"stream without alt=sse", "/v1beta/models/m:streamGenerateContent", geminiBody(0, ""), "POST", 400, "INVALID_ARGUMENT", "alt=sse"},
		{"unknown action", "/v1beta/models/m:predict", geminiBody(0, ""), "POST", 404, "NOT_FOUND", "unknown path"},
		{"no model", "/v1beta/models/:generateContent", geminiBody(0, ""), "POST", 404, "NOT_FOUND", "unknown path"},
		{"wrong method", geminiUnary, "", "GET", 405, "FAILED_PRECONDITION", "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			e := decodeGeminiError(t, resp)
			if resp.StatusCode != tt.want || e.Error.Code != tt.want || e.Error.Status != tt.wantStatus || !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("got %d %+v, want %d %s naming %s", resp.StatusCode, e.Error, tt.want, tt.wantStatus, tt.msg)
			}
		})
	}
}

func decodeAnthropicError(t *testing.T, resp *http.Response) anthropicError {
	t.Helper()
	var e anthropicError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Type != "error" || e.Error.Message == "" {
		t.Fatalf("body: got %+v (%v), want an Anthropic error", e, err)
	}
	return e
}

func decodeGeminiError(t *testing.T, resp *http.Response) geminiError {
	t.Helper()
	var e geminiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Message == "" {
		t.Fatalf("body: got %+v (%v), want a Gemini error", e, err)
	}
	return e
}

func TestFailStatusDialects(t *testing.T) {
	tests := []struct {
		status           int
		anthropicType    string
		geminiStatus     string
		anthropicRetryIn bool
	}{
		{400, "invalid_request_error", "INVALID_ARGUMENT", false},
		{429, "rate_limit_error", "RESOURCE_EXHAUSTED", true},
		{500, "api_error", "INTERNAL", false},
		{503, "api_error", "UNAVAILABLE", false},
		{529, "overloaded_error", "INTERNAL", false},
		{504, "timeout_error", "DEADLINE_EXCEEDED", false},
	}
	s, ts := newTestServer(t, Options{})
	for _, tt := range tests {
		t.Run(itoa(tt.status), func(t *testing.T) {
			h := map[string]string{HeaderFailStatus: itoa(tt.status)}
			for _, stream := range []bool{true, false} {
				resp := postJSON(t, ts, anthropicPath, anthropicBody(stream, 10, ""), h)
				e := decodeAnthropicError(t, resp)
				if resp.StatusCode != tt.status || e.Error.Type != tt.anthropicType || !strings.HasPrefix(e.RequestID, "req_") {
					t.Errorf("anthropic stream=%v: got %d %+v, want %d %s with a request_id", stream, resp.StatusCode, e, tt.status, tt.anthropicType)
				}
				if got := resp.Header.Get("Retry-After") != ""; got != tt.anthropicRetryIn {
					t.Errorf("anthropic retry-after: got %v, want %v", got, tt.anthropicRetryIn)
				}
				path := geminiUnary
				if stream {
					path = geminiStream
				}
				resp = postJSON(t, ts, path, geminiBody(0, ""), h)
				g := decodeGeminiError(t, resp)
				if resp.StatusCode != tt.status || g.Error.Code != tt.status || g.Error.Status != tt.geminiStatus {
					t.Errorf("gemini stream=%v: got %d %+v, want %d %s", stream, resp.StatusCode, g.Error, tt.status, tt.geminiStatus)
				}
				if tt.status == 429 && (len(g.Error.Details) != 1 || g.Error.Details[0]["retryDelay"] != "1s") {
					t.Errorf("gemini 429 details: got %v, want a RetryInfo", g.Error.Details)
				}
			}
		})
	}
	waitMetric(t, s, `streamgate_sim_faults_total{fault="fail_status"}`, float64(4*len(tests)))
}

// TestCutDialects: a cut stream ends with an unexpected EOF and lacks the
// dialect's terminal event (message_stop, finishReason).
func TestCutDialects(t *testing.T) {
	for _, at := range []string{"1", "3", "999"} {
		t.Run("at "+at, func(t *testing.T) {
			s, ts := newTestServer(t, Options{})
			h := map[string]string{HeaderCutAt: at}
			evs, err := readAll(t, postJSON(t, ts, anthropicPath, anthropicBody(true, 100, ""), h))
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("anthropic end: got %v, want an unexpected EOF", err)
			}
			for _, ev := range evs {
				if ev.name == "message_stop" || ev.name == "message_delta" {
					t.Errorf("anthropic: got %s before the cut", ev.name)
				}
			}
			if at == "1" && len(evs) != 3 {
				t.Errorf("anthropic cut at 1: got %d events, want message_start, content_block_start, ping", len(evs))
			}
			evs, err = readAll(t, postJSON(t, ts, geminiStream, geminiBody(0, ""), h))
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("gemini end: got %v, want an unexpected EOF", err)
			}
			for _, ev := range evs {
				if strings.Contains(ev.data, "finishReason") {
					t.Errorf("gemini: got a finishReason before the cut: %s", ev.data)
				}
			}
			if want := map[string]int{"1": 0, "3": 2, "999": 12}[at]; len(evs) != want {
				t.Errorf("gemini: got %d chunks before the cut, want %d", len(evs), want)
			}
			waitMetric(t, s, `streamgate_sim_faults_total{fault="cut"}`, 2)
		})
	}
}

func TestErrorEventDialects(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	h := map[string]string{HeaderErrorAt: "2"}
	evs, err := readAll(t, postJSON(t, ts, anthropicPath, anthropicBody(true, 100, ""), h))
	if err != nil {
		t.Fatalf("anthropic end: %v", err)
	}
	if len(evs) != 5 || evs[3].name != "content_block_delta" {
		t.Fatalf("anthropic: got %v, want the opening events, one delta and the error", evs)
	}
	last := evs[4]
	var e anthropicError
	if last.name != "error" || json.Unmarshal([]byte(last.data), &e) != nil || e.Type != "error" || e.Error.Type != "overloaded_error" {
		t.Errorf("anthropic error event: got %q %s, want event: error with overloaded_error", last.name, last.data)
	}

	evs, err = readAll(t, postJSON(t, ts, geminiStream, geminiBody(0, ""), h))
	if err != nil {
		t.Fatalf("gemini end: %v", err)
	}
	var g geminiError
	if len(evs) != 2 || json.Unmarshal([]byte(evs[1].data), &g) != nil || g.Error.Code != 503 || g.Error.Status != "UNAVAILABLE" {
		t.Errorf("gemini: got %v, want one chunk and a data: {\"error\":...} UNAVAILABLE", evs)
	}

	// Non-stream: the status the dialect answers for an error during generation.
	resp := postJSON(t, ts, anthropicPath, anthropicBody(false, 100, ""), h)
	if e := decodeAnthropicError(t, resp); resp.StatusCode != 529 || e.Error.Type != "overloaded_error" {
		t.Errorf("anthropic non-stream: got %d %+v, want 529 overloaded_error", resp.StatusCode, e)
	}
	resp = postJSON(t, ts, geminiUnary, geminiBody(0, ""), h)
	if g := decodeGeminiError(t, resp); resp.StatusCode != 503 || g.Error.Status != "UNAVAILABLE" {
		t.Errorf("gemini non-stream: got %d %+v, want 503 UNAVAILABLE", resp.StatusCode, g)
	}
}

func TestMalformedDialects(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	h := map[string]string{HeaderMalformedAt: "2"}
	evs, err := readAll(t, postJSON(t, ts, anthropicPath, anthropicBody(true, 100, ""), h))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 5 || evs[4].name != "content_block_delta" || json.Valid([]byte(evs[4].data)) {
		t.Fatalf("anthropic event 4: got %+v, want a content_block_delta that is not JSON", evs)
	}
	if sum := checkAnthropic(t, append(evs[:4:4], evs[5:]...)); sum.deltas != 12 || sum.stopReason != "end_turn" {
		t.Errorf("anthropic besides the malformed line: got %d deltas, stop %q, want 12 and end_turn", sum.deltas, sum.stopReason)
	}

	evs, err = readAll(t, postJSON(t, ts, geminiStream, geminiBody(0, ""), h))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2 || json.Valid([]byte(evs[1].data)) {
		t.Fatalf("gemini event 1: got %+v, want a line that is not JSON", evs)
	}
	if sum := checkGemini(t, append(evs[:1:1], evs[2:]...)); sum.chunks != 12 || sum.finish != "STOP" {
		t.Errorf("gemini besides the malformed line: got %d chunks, finish %q, want 12 and STOP", sum.chunks, sum.finish)
	}

	for _, path := range []string{anthropicPath, geminiUnary} {
		body := geminiBody(0, "")
		if path == anthropicPath {
			body = anthropicBody(false, 100, "")
		}
		resp := postJSON(t, ts, path, body, h)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Valid(b) {
			t.Errorf("%s non-stream: got %d %s, want 200 and a body that is not JSON", path, resp.StatusCode, b)
		}
	}
}

func TestStampDialects(t *testing.T) {
	_, ts := newTestServer(t, Options{Stamp: true})
	for _, c := range []struct{ path, body string }{
		{anthropicPath, anthropicBody(true, 100, "")},
		{geminiStream, geminiBody(0, "")},
	} {
		evs, err := readAll(t, postJSON(t, ts, c.path, c.body, nil))
		if err != nil {
			t.Fatal(err)
		}
		prev := int64(0)
		for i, ev := range evs {
			ns, ok := sse.ParseStamp([]byte(ev.comment))
			if !ok || ns < prev {
				t.Errorf("%s event %d: stamp %q after %d, want a rising sent_ns", c.path, i, ev.comment, prev)
			}
			prev = ns
		}
	}
}

// TestPacingDialects runs the same profile in the three dialects on
// synctest's clock: one engine, so the same flush instants (the opening
// events leave with the first content chunk; the finishing events together).
func TestPacingDialects(t *testing.T) {
	ms := time.Millisecond
	p := Profile{Name: "p", TTFT: 100 * ms, ITL: 10 * ms, Tokens: 4, TokensPerChunk: 1, Faults: Faults{StallAt: 3, StallFor: time.Second}}
	want := []time.Duration{100 * ms, 110 * ms, 1120 * ms, 1130 * ms, 1130 * ms}
	for _, c := range []struct{ name, path, body, last string }{
		{"openai", "/v1/chat/completions", `{"model":"x","stream":true,"messages":[{"role":"user","content":"hello there"}]}`, "data: [DONE]\n\n"},
		{"anthropic", anthropicPath, `{"model":"x","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hello there"}]}`, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"gemini", geminiStream, `{"contents":[{"parts":[{"text":"hello there"}]}]}`, "\"finishReason\":\"STOP\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Options{Profile: p})
				w := &timedWriter{h: http.Header{}, start: time.Now()}
				s.ServeHTTP(w, httptest.NewRequest("POST", c.path, strings.NewReader(c.body)))
				if len(w.at) != len(want) {
					t.Fatalf("flushes: got %d %q, want %d", len(w.at), w.data, len(want))
				}
				for i := range w.at {
					if w.at[i] != want[i] {
						t.Errorf("flush %d (%q): got %v, want %v", i, w.data[i], w.at[i], want[i])
					}
				}
				if last := w.data[len(w.data)-1]; !strings.Contains(last, c.last) {
					t.Errorf("last flush: got %q, want %q in it", last, c.last)
				}
				if c.name == "anthropic" && strings.Count(w.data[0], "event: ") != 4 {
					t.Errorf("first flush: got %q, want message_start, content_block_start, ping and the first delta", w.data[0])
				}
			})
		})
	}
}

func TestCountTokens(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	var a struct {
		InputTokens int `json:"input_tokens"`
	}
	resp := postJSON(t, ts, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"Tell me about streaming latency."}]}`, nil)
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("count_tokens: got %d (%v)", resp.StatusCode, err)
	}
	evs, err := readAll(t, postJSON(t, ts, anthropicPath, anthropicBody(true, 5, ""), nil))
	if err != nil {
		t.Fatal(err)
	}
	if in := checkAnthropic(t, evs).input; a.InputTokens != in || in <= 0 {
		t.Errorf("count_tokens: got %d, want the Messages input_tokens %d", a.InputTokens, in)
	}
	var g struct {
		TotalTokens int `json:"totalTokens"`
	}
	resp = postJSON(t, ts, "/v1beta/models/m:countTokens", geminiBody(0, ""), nil)
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil || g.TotalTokens != a.InputTokens {
		t.Errorf("gemini countTokens: got %d (%v), want %d", g.TotalTokens, err, a.InputTokens)
	}
}

func TestUnknownPathNamesEndpoints(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	resp, err := ts.Client().Get(ts.URL + "/v2/whatever")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.ErrorResponse
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 404 {
		t.Fatalf("got %d (%v)", resp.StatusCode, err)
	}
	for _, want := range []string{"/v1/chat/completions", "/v1/messages", ":streamGenerateContent", "/v1/embeddings"} {
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("message %q: %s missing", e.Error.Message, want)
		}
	}
}

func TestToolArgs(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"none", ``, `{}`},
		{"not json", `{`, `{}`},
		{"no properties", `{"type":"object"}`, `{}`},
		{"types in order", `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"},"n":{"type":"number"},` +
			`"b":{"type":"boolean"},"l":{"type":"array","items":{"type":"string"}},"o":{"type":"object"}}}`,
			`{"z":"sim","a":1,"n":1.5,"b":true,"l":[],"o":{}}`},
		{"enum first", `{"properties":{"unit":{"type":"string","enum":["c", "f"]}}}`, `{"unit":"c"}`},
		{"nullable", `{"properties":{"x":{"type":["null","integer"]}}}`, `{"x":1}`},
		{"gemini upper case", `{"type":"OBJECT","properties":{"city":{"type":"STRING"},"days":{"type":"INTEGER"}}}`, `{"city":"sim","days":1}`},
		{"odd names", `{"properties":{"a\"b":{},"도시":{"type":"string"}}}`, `{"a\"b":"sim","도시":"sim"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toolArgs(json.RawMessage(tt.schema))
			if string(got) != tt.want || !json.Valid(got) {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNewToolCallFragments(t *testing.T) {
	tl := &tool{name: "f", schema: json.RawMessage(`{"properties":{"도시":{"type":"string"},"days":{"type":"integer"}}}`)}
	for _, per := range []int{1, 2, 5, 100} {
		c := newToolCall(tl, "id", per, false)
		var joined []byte
		for i, f := range c.frags {
			joined = append(joined, f...)
			if !utf8.Valid(f) {
				t.Errorf("per %d: fragment %d %q splits a rune", per, i, f)
			}
		}
		if string(joined) != string(c.args) {
			t.Errorf("per %d: fragments join to %s, want %s", per, joined, c.args)
		}
		if want := (c.tokens + per - 1) / per; len(c.frags) != want {
			t.Errorf("per %d: got %d fragments for %d tokens, want %d", per, len(c.frags), c.tokens, want)
		}
	}
	whole := newToolCall(tl, "id", 1, true)
	if len(whole.frags) != 1 || string(whole.frags[0]) != string(whole.args) || whole.tokens != newToolCall(tl, "id", 1, false).tokens {
		t.Errorf("whole: got %q (%d tokens), want one fragment and the same tokens", whole.frags, whole.tokens)
	}
}
