package sim

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

// The continuation tests send one conversation in each dialect, the way a
// gateway continuing a cut stream would: the same turns, plus a trailing
// assistant message holding the text delivered so far.

var dialectNames = []string{"openai", "anthropic", "gemini"}

// conversation is one chat: an optional system text, turns alternating
// user and assistant from a user turn, and an optional trailing assistant
// prefix.
type conversation struct {
	system string
	turns  []string
	prefix *string
}

// withPrefix returns c with a trailing assistant message holding p.
func (c conversation) withPrefix(p string) conversation {
	c.prefix = &p
	return c
}

var latency = conversation{turns: []string{"Tell me about streaming latency."}}

// sendOpts are the request's options besides the conversation.
type sendOpts struct {
	maxTokens int  // 0 = none (Anthropic, which requires one: 4096)
	unary     bool // a non-stream request
	headers   map[string]string
}

// answer is a response as the continuation tests check it.
type answer struct {
	text       string
	pieces     []string // the text of each content chunk
	stop       string   // "stop" or "length", whatever the dialect's spelling
	prompt     int      // prompt tokens of the usage
	completion int      // completion tokens of the usage
}

// body returns the path and body of c in dialect d.
func (c conversation) body(d string, o sendOpts) (string, string) {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type part struct {
		Text string `json:"text"`
	}
	type content struct {
		Role  string `json:"role,omitempty"`
		Parts []part `json:"parts"`
	}
	role := func(i int, user, assistant string) string {
		if i%2 == 0 {
			return user
		}
		return assistant
	}
	var v map[string]any
	var path string
	switch d {
	case "openai":
		var msgs []msg
		if c.system != "" {
			msgs = append(msgs, msg{"system", c.system})
		}
		for i, t := range c.turns {
			msgs = append(msgs, msg{role(i, "user", "assistant"), t})
		}
		if c.prefix != nil {
			msgs = append(msgs, msg{"assistant", *c.prefix})
		}
		path, v = "/v1/chat/completions", map[string]any{"model": "sim-gpt", "messages": msgs}
		if !o.unary {
			v["stream"], v["stream_options"] = true, map[string]any{"include_usage": true}
		}
		if o.maxTokens > 0 {
			v["max_tokens"] = o.maxTokens
		}
	case "anthropic":
		var msgs []msg
		for i, t := range c.turns {
			msgs = append(msgs, msg{role(i, "user", "assistant"), t})
		}
		if c.prefix != nil {
			msgs = append(msgs, msg{"assistant", *c.prefix})
		}
		path, v = anthropicPath, map[string]any{"model": "sim-claude", "messages": msgs, "max_tokens": cmpOr(o.maxTokens, 4096)}
		if c.system != "" {
			v["system"] = c.system
		}
		if !o.unary {
			v["stream"] = true
		}
	case "gemini":
		var contents []content
		for i, t := range c.turns {
			contents = append(contents, content{role(i, "user", "model"), []part{{t}}})
		}
		if c.prefix != nil {
			contents = append(contents, content{"model", []part{{*c.prefix}}})
		}
		path, v = geminiStream, map[string]any{"contents": contents}
		if o.unary {
			path = geminiUnary
		}
		if c.system != "" {
			v["systemInstruction"] = content{Parts: []part{{c.system}}}
		}
		if o.maxTokens > 0 {
			v["generationConfig"] = map[string]any{"maxOutputTokens": o.maxTokens}
		}
	}
	b, _ := json.Marshal(v)
	return path, string(b)
}

// send sends c in dialect d and reads the whole answer, checking the
// dialect's stream shape on the way.
func send(t *testing.T, ts *httptest.Server, d string, c conversation, o sendOpts) answer {
	t.Helper()
	path, body := c.body(d, o)
	resp := postJSON(t, ts, path, body, o.headers)
	if o.unary {
		return readUnary(t, d, resp)
	}
	switch d {
	case "openai":
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("status: got %d, want 200 (%s)", resp.StatusCode, b)
		}
		r := sse.NewReader(resp.Body, 0)
		var evs []event
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("openai stream: %v", err)
			}
			evs = append(evs, event{data: string(ev.Data)})
		}
		sum := checkShape(t, evs, true)
		return answer{text: strings.Join(sum.contents, ""), pieces: sum.contents, stop: sum.finish,
			prompt: sum.usage.PromptTokens, completion: sum.usage.CompletionTokens}
	case "anthropic":
		evs, err := readAll(t, resp)
		if err != nil {
			t.Fatalf("anthropic stream: %v", err)
		}
		sum := checkAnthropic(t, evs)
		var pieces []string
		for _, ev := range evs {
			var v struct{ Delta struct{ Text string } }
			if ev.name == "content_block_delta" && json.Unmarshal([]byte(ev.data), &v) == nil {
				pieces = append(pieces, v.Delta.Text)
			}
		}
		return answer{text: sum.text, pieces: pieces, stop: map[string]string{"end_turn": "stop", "max_tokens": "length"}[sum.stopReason],
			prompt: sum.input, completion: sum.output}
	default:
		evs, err := readAll(t, resp)
		if err != nil {
			t.Fatalf("gemini stream: %v", err)
		}
		sum := checkGemini(t, evs)
		var last geminiResponse
		if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &last); err != nil {
			t.Fatal(err)
		}
		var pieces []string
		for _, ev := range evs[:len(evs)-1] {
			var r geminiResponse
			if json.Unmarshal([]byte(ev.data), &r) == nil && r.Candidates[0].Content.Parts[0].Text != nil {
				pieces = append(pieces, *r.Candidates[0].Content.Parts[0].Text)
			}
		}
		return answer{text: sum.text, pieces: pieces, stop: map[string]string{"STOP": "stop", "MAX_TOKENS": "length"}[sum.finish],
			prompt: last.UsageMetadata.PromptTokenCount, completion: sum.tokens}
	}
}

// readUnary reads a non-stream answer of dialect d.
func readUnary(t *testing.T, d string, resp *http.Response) answer {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200 (%s)", resp.StatusCode, b)
	}
	var a answer
	switch d {
	case "openai":
		var c api.Completion
		if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 || c.Usage == nil {
			t.Fatalf("completion: got %s (%v), want one choice and usage", b, err)
		}
		a = answer{text: c.Choices[0].Message.Content, stop: c.Choices[0].FinishReason,
			prompt: c.Usage.PromptTokens, completion: c.Usage.CompletionTokens}
	case "anthropic":
		var m struct {
			Content    []struct{ Type, Text string }
			StopReason string `json:"stop_reason"`
			Usage      struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			}
		}
		if err := json.Unmarshal(b, &m); err != nil || len(m.Content) != 1 || m.Content[0].Type != "text" {
			t.Fatalf("message: got %s (%v), want one text block", b, err)
		}
		a = answer{text: m.Content[0].Text, stop: map[string]string{"end_turn": "stop", "max_tokens": "length"}[m.StopReason],
			prompt: m.Usage.InputTokens, completion: m.Usage.OutputTokens}
	default:
		var g geminiResponse
		if err := json.Unmarshal(b, &g); err != nil || len(g.Candidates) != 1 || len(g.Candidates[0].Content.Parts) != 1 ||
			g.Candidates[0].Content.Parts[0].Text == nil || g.UsageMetadata == nil {
			t.Fatalf("response: got %s (%v), want one text part and usage", b, err)
		}
		a = answer{text: *g.Candidates[0].Content.Parts[0].Text, stop: map[string]string{"STOP": "stop", "MAX_TOKENS": "length"}[g.Candidates[0].FinishReason],
			prompt: g.UsageMetadata.PromptTokenCount, completion: g.UsageMetadata.CandidatesTokenCount}
	}
	a.pieces = []string{a.text}
	return a
}

// tokens returns the token pieces of the uninterrupted answer to c, read in
// dialect d from a stream of one token a chunk.
func tokens(t *testing.T, ts *httptest.Server, d string, c conversation) []string {
	t.Helper()
	a := send(t, ts, d, c, sendOpts{headers: map[string]string{HeaderTokensPerChunk: "1"}})
	if len(a.pieces) != a.completion {
		t.Fatalf("%s: got %d chunks for %d tokens, want one token a chunk", d, len(a.pieces), a.completion)
	}
	return a.pieces
}

// TestContinuationPrefixSameText checks that the text is a function of the
// seed and the prompt: the same conversation gets the same text on every
// request, with no seed as with one, in every dialect, stream or not.
func TestContinuationPrefixSameText(t *testing.T) {
	_, ts := newTestServer(t, Options{Seed: 4})
	c := conversation{system: "Be brief.", turns: []string{"Hi.", "Hello! How can I help?", "Tell me about streaming latency."}}
	for _, h := range []map[string]string{nil, {HeaderSeed: "11"}} {
		want := send(t, ts, "openai", c, sendOpts{headers: h}).text
		if again := send(t, ts, "openai", c, sendOpts{headers: h}).text; again != want {
			t.Errorf("seed header %v, second request: got %q, want %q", h, again, want)
		}
		for _, d := range dialectNames {
			for _, unary := range []bool{false, true} {
				if got := send(t, ts, d, c, sendOpts{headers: h, unary: unary}).text; got != want {
					t.Errorf("seed header %v, %s unary=%v: got %q, want the openai stream's %q", h, d, unary, got, want)
				}
			}
		}
	}
	// The body's seed (OpenAI seed, Gemini generationConfig.seed) is one
	// seed part in both dialects.
	path, body := c.body("openai", sendOpts{})
	a := checkShape(t, eventsOf(t, postJSON(t, ts, path, strings.Replace(body, `{`, `{"seed":9,`, 1), nil)), true)
	path, body = c.body("gemini", sendOpts{})
	evs, err := readAll(t, postJSON(t, ts, path, strings.Replace(body, `{`, `{"generationConfig":{"seed":9},`, 1), nil))
	if err != nil {
		t.Fatal(err)
	}
	if o, g := strings.Join(a.contents, ""), checkGemini(t, evs).text; o != g {
		t.Errorf("body seed 9: openai %q, gemini %q, want the same", o, g)
	}
	if o := strings.Join(a.contents, ""); o == send(t, ts, "openai", c, sendOpts{}).text {
		t.Errorf("body seed 9: got the text of no seed")
	}
}

// eventsOf reads an OpenAI stream's events.
func eventsOf(t *testing.T, resp *http.Response) []event {
	t.Helper()
	r := sse.NewReader(resp.Body, 0)
	var evs []event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		evs = append(evs, event{data: string(ev.Data)})
	}
}

// TestContinuationPrefixPromptChangesText checks that another prompt gets
// another text: another user turn, another system text, one more turn.
func TestContinuationPrefixPromptChangesText(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	base := send(t, ts, "openai", latency, sendOpts{}).text
	for name, c := range map[string]conversation{
		"user text":   {turns: []string{"Tell me about streaming latency!"}},
		"system text": {system: "Be brief.", turns: latency.turns},
		"more turns":  {turns: []string{"Hi.", "Hello.", "Tell me about streaming latency."}},
	} {
		for _, d := range dialectNames {
			if got := send(t, ts, d, c, sendOpts{}).text; got == base {
				t.Errorf("%s, %s: got the base prompt's text %q", name, d, got)
			}
		}
	}
}

// TestContinuationPrefixHashAcrossDialects checks the prompt hash directly:
// one conversation hashes alike in the three request parsers, also when a
// translating gateway merged consecutive user messages into one turn of two
// blocks, and tool calls and results are left out.
func TestContinuationPrefixHashAcrossDialects(t *testing.T) {
	var o api.ChatRequest
	openAI := `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"user","content":"And"},{"role":"user","content":[{"type":"text","text":"tomorrow?"}]},` +
		`{"role":"developer","content":"Use metric."},{"role":"assistant","content":"It will"}]}`
	if err := json.Unmarshal([]byte(openAI), &o); err != nil {
		t.Fatal(err)
	}
	or, err := openAIRequest(&o)
	if err != nil {
		t.Fatal(err)
	}
	var a anthropicRequest
	anthropic := `{"model":"m","max_tokens":9,"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use metric."}],"messages":[` +
		`{"role":"user","content":"Weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"w","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"},{"type":"text","text":"And"},{"type":"text","text":"tomorrow?"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"It "},{"type":"text","text":"will"}]}]}`
	if err := json.Unmarshal([]byte(anthropic), &a); err != nil {
		t.Fatal(err)
	}
	ar, err := anthropicParse(&a, false)
	if err != nil {
		t.Fatal(err)
	}
	var g geminiRequest
	gemini := `{"systemInstruction":{"parts":[{"text":"Be brief."},{"text":"Use metric."}]},"contents":[` +
		`{"role":"user","parts":[{"text":"Weather?"}]},{"role":"model","parts":[{"functionCall":{"name":"w","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"w","response":{"content":"sunny"}}},{"text":"And"},{"text":"tomorrow?"}]},` +
		`{"role":"model","parts":[{"text":"It will"}]}]}`
	if err := json.Unmarshal([]byte(gemini), &g); err != nil {
		t.Fatal(err)
	}
	gr, err := geminiParse(&g, "m", true)
	if err != nil {
		t.Fatal(err)
	}
	if or.prompt != ar.prompt || or.prompt != gr.prompt {
		t.Errorf("prompt hash: got openai %x, anthropic %x, gemini %x, want all the same", or.prompt, ar.prompt, gr.prompt)
	}
	for name, r := range map[string]*request{"openai": or, "anthropic": ar, "gemini": gr} {
		if r.prefix != "It will" {
			t.Errorf("%s prefix: got %q, want %q", name, r.prefix, "It will")
		}
	}
	// A final assistant turn with a tool call is no prefix, and a tool
	// call has no text to hash.
	msgs := o.Messages
	o.Messages = msgs[:3]
	withCall, _ := openAIRequest(&o)
	o.Messages = msgs[:2]
	without, _ := openAIRequest(&o)
	if withCall.prefix != "" || withCall.prompt != without.prompt {
		t.Errorf("final assistant tool call: got prefix %q and hash %x, want no prefix and the hash %x of the turns before",
			withCall.prefix, withCall.prompt, without.prompt)
	}
}

// TestContinuationPrefix is the gateway's continuation check: for cut
// points k (0, 1, middle, last-1) the answer to the conversation plus the
// first k tokens as a trailing assistant message is exactly the rest of
// the uninterrupted text, whichever dialect gave the first part and which
// continues it, at another chunk size too, and with a prefix ending inside
// a token.
func TestContinuationPrefix(t *testing.T) {
	p := quick
	p.Tokens = 40
	_, ts := newTestServer(t, Options{Profile: p})
	c := conversation{system: "Be brief.", turns: latency.turns}
	full := send(t, ts, "openai", c, sendOpts{}).text
	for _, src := range dialectNames {
		toks := tokens(t, ts, src, c)
		n := len(toks)
		if got := strings.Join(toks, ""); got != full {
			t.Fatalf("%s uninterrupted: got %q, want the openai text %q", src, got, full)
		}
		type cut struct {
			name   string
			prefix string
			tokens int // tokens left to send
		}
		var cuts []cut
		for _, k := range []int{0, 1, n / 2, n - 1} {
			cuts = append(cuts, cut{"k=" + itoa(k), strings.Join(toks[:k], ""), n - k})
		}
		m, inside := cutInside(toks)
		cuts = append(cuts, cut{"inside token " + itoa(m), inside, n - m})
		for _, ct := range cuts {
			for _, d := range dialectNames {
				for _, per := range []int{1, 3} {
					name := src + " to " + d + ", " + ct.name + ", " + itoa(per) + " a chunk"
					a := send(t, ts, d, c.withPrefix(ct.prefix), sendOpts{headers: map[string]string{HeaderTokensPerChunk: itoa(per)}})
					if want := full[len(ct.prefix):]; a.text != want {
						t.Errorf("%s: got %q, want the rest %q", name, a.text, want)
					}
					if a.completion != ct.tokens || a.stop != "stop" {
						t.Errorf("%s: got %d tokens, stop %q; want %d, stop", name, a.completion, a.stop, ct.tokens)
					}
					if want := (ct.tokens + per - 1) / per; len(a.pieces) != want {
						t.Errorf("%s: got %d chunks, want %d", name, len(a.pieces), want)
					}
				}
			}
		}
		// The rest of the token cut inside leaves with the first content
		// chunk, whole, and chunks count from there.
		a := send(t, ts, src, c.withPrefix(inside), sendOpts{headers: map[string]string{HeaderTokensPerChunk: "2"}})
		if want := full[len(inside):len(strings.Join(toks[:m+2], ""))]; len(a.pieces) == 0 || a.pieces[0] != want {
			t.Errorf("%s, first chunk after a cut inside a token: got %q, want %q", src, a.pieces, want)
		}
	}
}

// cutInside returns a prefix ending inside token m, from the middle on: the
// tokens before it and all its runes but the last, for the first token
// where that is not empty and does not end in white space (which the
// Anthropic dialect refuses). Two tokens at least follow m.
func cutInside(toks []string) (int, string) {
	for m := len(toks) / 2; m < len(toks)-2; m++ {
		_, size := utf8.DecodeLastRuneInString(toks[m])
		if part := toks[m][:len(toks[m])-size]; part != "" && !endsInSpace(part) {
			return m, strings.Join(toks[:m], "") + part
		}
	}
	panic("no token to cut inside")
}

// TestContinuationPrefixPromptTokens checks that usage counts the prefix
// in the prompt: its estimate and the message's 3 tokens.
func TestContinuationPrefixPromptTokens(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	toks := tokens(t, ts, "openai", latency)
	prefix := strings.Join(toks[:5], "")
	for _, d := range dialectNames {
		without := send(t, ts, d, latency, sendOpts{}).prompt
		with := send(t, ts, d, latency.withPrefix(prefix), sendOpts{})
		if want := without + 3 + estimateTokens(prefix); with.prompt != want {
			t.Errorf("%s prompt tokens with a prefix: got %d, want %d (%d without)", d, with.prompt, want, without)
		}
	}
}

// TestContinuationPrefixMaxTokens checks the output limit of a
// continuation: max_tokens = N-k gives exactly the rest with a stop reason
// of a complete answer, one less cuts the last token with the dialect's
// length reason; a limit above N-k changes nothing.
func TestContinuationPrefixMaxTokens(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	toks := tokens(t, ts, "openai", latency)
	n, k := len(toks), 4
	prefix := strings.Join(toks[:k], "")
	tests := []struct {
		name      string
		maxTokens int
		want      string
		stop      string
	}{
		{"max_tokens N-k", n - k, strings.Join(toks[k:], ""), "stop"},
		{"max_tokens N-k-1", n - k - 1, strings.Join(toks[k:n-1], ""), "length"},
		{"max_tokens 2", 2, strings.Join(toks[k:k+2], ""), "length"},
		{"max_tokens N", n, strings.Join(toks[k:], ""), "stop"},
	}
	for _, tt := range tests {
		for _, d := range dialectNames {
			for _, unary := range []bool{false, true} {
				a := send(t, ts, d, latency.withPrefix(prefix), sendOpts{maxTokens: tt.maxTokens, unary: unary})
				if want := min(tt.maxTokens, n-k); a.text != tt.want || a.stop != tt.stop || a.completion != want {
					t.Errorf("%s, %s unary=%v: got %q, %s, %d tokens; want %q, %s, %d", tt.name, d, unary,
						a.text, a.stop, a.completion, tt.want, tt.stop, want)
				}
			}
		}
	}
	// The prefix covers the whole answer: an empty continuation that stops.
	a := send(t, ts, "openai", latency.withPrefix(strings.Join(toks, "")), sendOpts{})
	if a.text != "" || a.completion != 0 || a.stop != "stop" {
		t.Errorf("prefix of the whole answer: got %q, %d tokens, %s; want nothing, stop", a.text, a.completion, a.stop)
	}
}

// TestContinuationPrefixTrailingWhitespace checks Anthropic's rule: a
// final assistant message ending in white space is refused with 400
// invalid_request_error, stream or not; the other dialects continue from
// inside the token the space begins.
func TestContinuationPrefixTrailingWhitespace(t *testing.T) {
	p := quick
	p.Tokens = 200
	_, ts := newTestServer(t, Options{Profile: p})
	toks := tokens(t, ts, "openai", latency)
	k := 1 + indexOf(toks[1:], "\n\n")
	if k == 0 {
		t.Fatalf("no paragraph break in %q", toks)
	}
	for name, content := range map[string]string{
		"paragraph break": jsonString(strings.Join(toks[:k+1], "")),
		"space":           jsonString(strings.Join(toks[:3], "") + " "),
		"text blocks":     `[{"type":"text","text":"The"},{"type":"text","text":" end\t"}]`,
	} {
		for _, unary := range []bool{false, true} {
			body := strings.Replace(anthropicBody(!unary, 100, ""), `]`, `,{"role":"assistant","content":`+content+`}]`, 1)
			resp := postJSON(t, ts, anthropicPath, body, nil)
			b, _ := io.ReadAll(resp.Body)
			var e anthropicError
			if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != http.StatusBadRequest || e.Type != "error" ||
				e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "final assistant content cannot end with trailing whitespace") {
				t.Errorf("%s, stream=%v: got %d %s, want 400 invalid_request_error about trailing whitespace", name, !unary, resp.StatusCode, b)
			}
		}
	}
	// Trimmed, as a gateway must, the prefill continues with the break.
	trimmed := strings.Join(toks[:k], "")
	if a := send(t, ts, "anthropic", latency.withPrefix(trimmed), sendOpts{}); a.text != strings.Join(toks[k:], "") {
		t.Errorf("trimmed prefill: got %q, want %q", a.text, strings.Join(toks[k:], ""))
	}
	// OpenAI and Gemini take a prefix ending in white space: " " begins
	// token 3 (" word"), whose rest comes first.
	spaced := strings.Join(toks[:3], "") + " "
	for _, d := range []string{"openai", "gemini"} {
		if !strings.HasPrefix(toks[3], " ") {
			t.Fatalf("token 3 %q: want a word with its leading space", toks[3])
		}
		if a := send(t, ts, d, latency.withPrefix(spaced), sendOpts{}); a.text != strings.Join(toks, "")[len(spaced):] {
			t.Errorf("%s, prefix ending in a space: got %q, want %q", d, a.text, strings.Join(toks, "")[len(spaced):])
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestContinuationPrefixNotOurs checks that the sim cannot continue text
// it did not write: a trailing assistant message that is not a beginning of
// its text is ignored for matching and the answer starts from the
// beginning, so prefix and answer repeat text.
func TestContinuationPrefixNotOurs(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	toks := tokens(t, ts, "openai", latency)
	full := strings.Join(toks, "")
	for _, prefix := range []string{"Something else entirely.", toks[0] + " zebra", strings.Join(toks[:3], "") + "x"} {
		for _, d := range dialectNames {
			if a := send(t, ts, d, latency.withPrefix(prefix), sendOpts{}); a.text != full || a.completion != len(toks) {
				t.Errorf("%s, prefix %q: got %q (%d tokens), want the text from the start %q", d, prefix, a.text, a.completion, full)
			}
		}
	}
}

// TestContinuationPrefixToolCall checks that a forced tool call ignores a
// prefix: the same call as without one.
func TestContinuationPrefixToolCall(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	h := map[string]string{HeaderToolCall: "get_weather"}
	var got []string
	for _, c := range []conversation{latency, latency.withPrefix("The")} {
		_, body := c.body("openai", sendOpts{unary: true})
		body = body[:len(body)-1] + openAITools + "}"
		resp := postJSON(t, ts, "/v1/chat/completions", body, h)
		var comp struct {
			Choices []struct {
				Message      openAIToolMessage `json:"message"`
				FinishReason string            `json:"finish_reason"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&comp); err != nil || len(comp.Choices) != 1 || len(comp.Choices[0].Message.ToolCalls) != 1 ||
			comp.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("tool call: got %+v (%v), want one call", comp, err)
		}
		got = append(got, comp.Choices[0].Message.ToolCalls[0].Function.Arguments)
	}
	if got[0] != got[1] {
		t.Errorf("tool call arguments: got %q with a prefix, want %q as without", got[1], got[0])
	}
}

// TestContinuationPrefixFaultsVary checks that fault draws still vary per
// request without a seed while the text does not: CutRate 0.5 over 200
// requests cuts between 30% and 70% of them, and every complete one has
// the same text.
func TestContinuationPrefixFaultsVary(t *testing.T) {
	p := quick
	p.Tokens = 3
	p.Faults = Faults{CutRate: 0.5}
	_, ts := newTestServer(t, Options{Profile: p})
	const n = 200
	cut, texts := 0, map[string]int{}
	for range n {
		resp := post(t, ts, reqOpts{stream: true})
		r := sse.NewReader(resp.Body, 0)
		var text strings.Builder
		var err error
		for {
			var ev *sse.Event
			if ev, err = r.Next(); err != nil {
				break
			}
			var c api.Chunk
			if json.Unmarshal(ev.Data, &c) == nil && len(c.Choices) == 1 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
		}
		resp.Body.Close()
		switch {
		case errors.Is(err, sse.ErrTruncated) || errors.Is(err, io.ErrUnexpectedEOF):
			cut++
		case err == io.EOF:
			texts[text.String()]++
		default:
			t.Fatalf("stream: %v", err)
		}
	}
	t.Logf("cut %d of %d streams", cut, n)
	if cut < 60 || cut > 140 {
		t.Errorf("cut streams: got %d of %d, want 30%%..70%% of them", cut, n)
	}
	if len(texts) != 1 {
		t.Errorf("complete streams: got %d different texts, want one", len(texts))
	}
}

// TestContinueFrom checks the generator's matching against every cut of a
// long text, in both languages: a prefix ending on a token boundary or
// inside a token continues exactly, anything else is refused.
func TestContinueFrom(t *testing.T) {
	for _, lang := range []string{"en", "ko"} {
		g := newTextGen(lang, rand.New(rand.NewPCG(7, 1)))
		var full strings.Builder
		var ends []int // text length after each token
		for range 300 {
			full.WriteString(g.token().text)
			ends = append(ends, full.Len())
		}
		text := full.String()
		for cut := 0; cut < len(text)-100; cut++ {
			if !utf8.RuneStart(text[cut]) {
				continue
			}
			g := newTextGen(lang, rand.New(rand.NewPCG(7, 1)))
			k, ok := g.continueFrom(text[:cut])
			if !ok {
				t.Fatalf("%s, cut at %d: refused a prefix of its own text", lang, cut)
			}
			if covered := countLE(ends, cut); k != covered {
				t.Fatalf("%s, cut at %d: covered %d tokens, want %d", lang, cut, k, covered)
			}
			var rest strings.Builder
			for rest.Len() < 100 {
				rest.WriteString(g.token().text)
			}
			if got := text[:cut] + rest.String(); !strings.HasPrefix(text, got) {
				t.Fatalf("%s, cut at %d: prefix and continuation %q are not the text %q", lang, cut, got, text[:len(got)])
			}
		}
		g = newTextGen(lang, rand.New(rand.NewPCG(7, 1)))
		if _, ok := g.continueFrom(text[:50] + "~"); ok {
			t.Errorf("%s: took a prefix that leaves the text", lang)
		}
	}
}

// countLE returns how many of the ascending ends are at most n.
func countLE(ends []int, n int) int {
	i := 0
	for i < len(ends) && ends[i] <= n {
		i++
	}
	return i
}

// FuzzContinueFrom checks continueFrom against the text itself: a prefix
// it takes is followed by the rest of the text, and a prefix it refuses
// is not a beginning of the text.
func FuzzContinueFrom(f *testing.F) {
	g := newTextGen("en", rand.New(rand.NewPCG(3, 1)))
	var b strings.Builder
	for b.Len() < 4000 {
		b.WriteString(g.token().text)
	}
	text := b.String()
	for _, n := range []int{0, 1, 2, 7, 40, 41, 300} {
		f.Add(text[:n])
	}
	f.Add("Not the text")
	f.Fuzz(func(t *testing.T, prefix string) {
		prefix = strings.ToValidUTF8(prefix, "\uFFFD") // as JSON decoding gives it
		if len(prefix) > 2000 {
			return
		}
		g := newTextGen("en", rand.New(rand.NewPCG(3, 1)))
		_, ok := g.continueFrom(prefix)
		if ok != strings.HasPrefix(text, prefix) {
			t.Fatalf("continueFrom(%q): got ok %v, want %v", prefix, ok, !ok)
		}
		if !ok {
			return
		}
		got := prefix
		for len(got) < len(prefix)+50 {
			got += g.token().text
		}
		if !strings.HasPrefix(text, got) {
			t.Fatalf("continueFrom(%q): continued %q, want the text %q", prefix, got, text[:len(got)])
		}
	})
}

// BenchmarkContinueFrom measures the planning cost of a continuation: a
// 1,000-token answer less its last byte matched token by token (ns/token
// reported).
func BenchmarkContinueFrom(b *testing.B) {
	const n = 1000
	g := newTextGen("en", rand.New(rand.NewPCG(1, 1)))
	var sb strings.Builder
	for range n {
		sb.WriteString(g.token().text)
	}
	prefix := sb.String()
	prefix = prefix[:len(prefix)-1]
	src := rand.NewPCG(1, 1)
	rng := rand.New(src)
	b.ReportAllocs()
	for b.Loop() {
		src.Seed(1, 1)
		g := newTextGen("en", rng)
		if k, ok := g.continueFrom(prefix); !ok || k != n-1 {
			b.Fatalf("continueFrom: got %d, %v; want %d, true", k, ok, n-1)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
}
