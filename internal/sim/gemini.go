package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
)

// geminiDialect is the Gemini API dialect (POST /v1beta/models/{model}:generateContent
// and :streamGenerateContent?alt=sse). Shapes follow the Gemini API
// reference (GenerateContentResponse, UsageMetadata, the troubleshooting
// page's error statuses) and go-genai's stream decoder.
type geminiDialect struct{}

var _ dialect = geminiDialect{}

// geminiRequest is the part of a GenerateContentRequest the simulator
// reads. The REST API takes proto JSON, where each field may also be
// spelled in snake_case (Google's curl examples use system_instruction):
// both spellings are read. The x-goog-api-key header and key parameter are
// accepted and ignored.
type geminiRequest struct {
	Contents           []geminiContent `json:"contents"`
	SystemInstruction  *geminiContent  `json:"systemInstruction"`
	SystemInstruction2 *geminiContent  `json:"system_instruction"`
	GenerationConfig   *geminiConfig   `json:"generationConfig"`
	GenerationConfig2  *geminiConfig   `json:"generation_config"`
	Tools              []geminiTool    `json:"tools"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is a part of a content; only text parts are read. Text is nil
// in other parts (functionCall, functionResponse, inlineData...).
type geminiPart struct {
	Text    *string `json:"text"`
	Thought bool    `json:"thought"`
	// raw is the part as sent, for the prompt cache.
	raw json.RawMessage
}

func (p *geminiPart) UnmarshalJSON(b []byte) error {
	type plain geminiPart
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	p.raw = append(p.raw[:0], b...)
	return nil
}

func (c *geminiContent) text() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
	return b.String()
}

// hash adds the text parts to h; thoughts are not hashed.
func (c *geminiContent) hash(h *promptHash) {
	if c == nil {
		return
	}
	for _, p := range c.Parts {
		if p.Text != nil && !p.Thought {
			h.add(*p.Text)
		}
	}
}

// prefix returns the text of a model turn of text parts only, which the
// answer continues; ok is false for any other content.
func (c *geminiContent) prefix() (text string, ok bool) {
	if c.Role != "model" || len(c.Parts) == 0 {
		return "", false
	}
	for _, p := range c.Parts {
		if p.Text == nil || p.Thought {
			return "", false
		}
	}
	return c.text(), true
}

type geminiConfig struct {
	MaxOutputTokens  *int                  `json:"maxOutputTokens"`
	MaxOutputTokens2 *int                  `json:"max_output_tokens"`
	Seed             *int64                `json:"seed"`
	ThinkingConfig   *geminiThinkingConfig `json:"thinkingConfig"`
	ThinkingConfig2  *geminiThinkingConfig `json:"thinking_config"`
}

// geminiThinkingConfig is generationConfig.thinkingConfig: a budget in
// tokens (0 off, -1 dynamic) or a level (Gemini 3), and whether thought
// summaries are sent.
type geminiThinkingConfig struct {
	ThinkingBudget   *int   `json:"thinkingBudget"`
	ThinkingBudget2  *int   `json:"thinking_budget"`
	IncludeThoughts  bool   `json:"includeThoughts"`
	IncludeThoughts2 bool   `json:"include_thoughts"`
	ThinkingLevel    string `json:"thinkingLevel"`
	ThinkingLevel2   string `json:"thinking_level"`
}

// geminiLevelQuarters scales Profile.ThinkingTokens by thinkingLevel.
var geminiLevelQuarters = map[string]int{"minimal": 1, "low": 2, "medium": 4, "high": 8}

// ask reads the thinking config; without one the profile decides
// (Profile.Reasoning: Gemini 2.5 models think by default).
func (c *geminiThinkingConfig) ask() (thinkingAsk, error) {
	if c == nil {
		return thinkingAsk{}, nil
	}
	ask := thinkingAsk{mode: thinkOn, visible: c.IncludeThoughts || c.IncludeThoughts2}
	if level := strings.ToLower(cmpOr(c.ThinkingLevel, c.ThinkingLevel2)); level != "" {
		q, ok := geminiLevelQuarters[level]
		if !ok {
			return ask, paramError{"generationConfig.thinkingConfig.thinkingLevel",
				fmt.Sprintf("* GenerateContentRequest.generation_config.thinking_config.thinking_level: unknown level %q (want minimal, low, medium or high)", level)}
		}
		ask.quarters = q
	}
	switch b := cmpOr(c.ThinkingBudget, c.ThinkingBudget2); {
	case b == nil:
		if ask.quarters == 0 && !ask.visible {
			ask.mode = thinkUnset
		}
	case *b == 0:
		ask.mode = thinkOff
	case *b == -1:
	case *b < 0:
		return ask, paramError{"generationConfig.thinkingConfig.thinkingBudget",
			fmt.Sprintf("* GenerateContentRequest.generation_config.thinking_config.thinking_budget: must be -1 (dynamic) or at least 0, got %d", *b)}
	default:
		ask.budget = *b
	}
	return ask, nil
}

type geminiTool struct {
	FunctionDeclarations  []geminiFunction `json:"functionDeclarations"`
	FunctionDeclarations2 []geminiFunction `json:"function_declarations"`
	// Google Search grounding (search.go), and the retrieval tool of
	// Gemini 1.5 that newer models refuse.
	GoogleSearch           json.RawMessage `json:"google_search"`
	GoogleSearch2          json.RawMessage `json:"googleSearch"`
	GoogleSearchRetrieval  json.RawMessage `json:"google_search_retrieval"`
	GoogleSearchRetrieval2 json.RawMessage `json:"googleSearchRetrieval"`
}

type geminiFunction struct {
	Name string `json:"name"`
	// Parameters is an OpenAPI-style Schema ("type":"OBJECT");
	// ParametersJSONSchema a JSON Schema. Either may be given.
	Parameters            json.RawMessage `json:"parameters"`
	ParametersJSONSchema  json.RawMessage `json:"parametersJsonSchema"`
	ParametersJSONSchema2 json.RawMessage `json:"parameters_json_schema"`
}

// geminiParse validates a GenerateContentRequest and reads what the engine
// needs; model and stream come from the path.
func geminiParse(body *geminiRequest, model string, stream bool) (*request, error) {
	if len(body.Contents) == 0 {
		return nil, paramError{"contents", "* GenerateContentRequest.contents: contents is not specified"}
	}
	req := &request{model: model, stream: stream, promptTokens: 3}
	sys := cmpOr(body.SystemInstruction, body.SystemInstruction2)
	if t := sys.text(); t != "" {
		req.promptTokens += 3 + estimateTokens(t)
	}
	for i := range body.Contents {
		req.promptTokens += 3 + estimateTokens(body.Contents[i].text())
		if body.Contents[i].Role != "model" {
			req.question = body.Contents[i].text()
		}
	}
	h := newPromptHash()
	sys.hash(&h)
	contents := body.Contents
	if p, ok := contents[len(contents)-1].prefix(); ok {
		req.prefix, contents = p, contents[:len(contents)-1]
	}
	for i := range contents {
		contents[i].hash(&h)
	}
	req.prompt = h
	if cfg := cmpOr(body.GenerationConfig, body.GenerationConfig2); cfg != nil {
		if n := cmpOr(cfg.MaxOutputTokens, cfg.MaxOutputTokens2); n != nil {
			if *n < 0 {
				return nil, paramError{"generationConfig.maxOutputTokens", fmt.Sprintf("* GenerateContentRequest.generation_config.max_output_tokens: must be positive, got %d", *n)}
			}
			req.limit = *n
		}
		req.seed = cfg.Seed
		ask, err := cmpOr(cfg.ThinkingConfig, cfg.ThinkingConfig2).ask()
		if err != nil {
			return nil, err
		}
		req.thinking = ask
	}
	for i, t := range body.Tools {
		search, err := geminiSearchTool(&t, i)
		if err != nil {
			return nil, err
		}
		req.search = req.search || search
		for _, f := range append(t.FunctionDeclarations, t.FunctionDeclarations2...) {
			if f.Name == "" {
				continue
			}
			schema := f.ParametersJSONSchema
			if len(schema) == 0 {
				schema = f.ParametersJSONSchema2
			}
			if len(schema) == 0 {
				schema = f.Parameters
			}
			req.tools = append(req.tools, tool{name: f.Name, schema: schema})
		}
	}
	req.cache = func(min int) *cacheQuery {
		if req.promptTokens < min {
			return nil
		}
		return geminiCacheQuery(body, sys, min)
	}
	return req, nil
}

// geminiCacheQuery reads a request as the sim's Gemini implicit caching
// does: tools, the system instruction, then each content (its role, then
// its parts: text, in which a cached prefix may end, or other parts, which
// count no tokens as in promptTokens), with a checkpoint every cacheStep
// tokens from min; the request's own 3 tokens are never cached.
func geminiCacheQuery(body *geminiRequest, sys *geminiContent, min int) *cacheQuery {
	ph := newPrefixHasher()
	ph.automatic(min, cacheStep)
	for _, t := range body.Tools {
		b, _ := json.Marshal(t)
		ph.fixed(canonicalJSON(b), 0)
	}
	content := func(c *geminiContent) {
		ph.fixed([]byte("\x00"+c.Role+"\x00"), 3)
		for _, p := range c.Parts {
			if p.Text != nil {
				ph.fixed([]byte{0, boolByte(p.Thought)}, 0)
				ph.text(*p.Text)
				continue
			}
			ph.fixed(canonicalJSON(p.raw), 0)
		}
	}
	if sys.text() != "" {
		content(sys)
	}
	for i := range body.Contents {
		content(&body.Contents[i])
	}
	return &cacheQuery{points: ph.points}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// geminiModels serves /v1beta/models/{model}:{action} for the actions
// generateContent, streamGenerateContent (alt=sse only) and countTokens.
// geminiList is GET /v1beta/models, the Gemini API's models list (one
// page), which the gateway's active health check asks for.
func (s *Server) geminiList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		geminiDialect{}.writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on /v1beta/models")
		return
	}
	type model struct {
		Name                       string   `json:"name"`
		DisplayName                string   `json:"displayName"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	}
	out := struct {
		Models []model `json:"models"`
	}{Models: make([]model, 0, len(s.models))}
	for _, name := range s.models {
		out.Models = append(out.Models, model{Name: "models/" + name, DisplayName: name,
			SupportedGenerationMethods: []string{"generateContent", "countTokens"}})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) geminiModels(w http.ResponseWriter, r *http.Request) {
	s.m.requests.Inc()
	d := geminiDialect{}
	model, action, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
	if !ok || model == "" || (action != "generateContent" && action != "streamGenerateContent" && action != "countTokens") {
		d.writeError(w, http.StatusNotFound, "unknown path "+r.URL.Path+
			" (the simulator serves /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse and :countTokens)")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		d.writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
		return
	}
	stream := action == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		// Without alt=sse the API streams one JSON array; the simulator
		// only speaks the SSE form every SDK uses.
		d.writeError(w, http.StatusBadRequest, "the simulator serves streamGenerateContent only as server-sent events: add ?alt=sse")
		return
	}
	var body geminiRequest
	if status, err := decodeBody(w, r, &body); err != nil {
		d.requestError(w, status, err)
		return
	}
	req, err := geminiParse(&body, model, stream)
	if err != nil {
		d.requestError(w, http.StatusBadRequest, err)
		return
	}
	if action == "countTokens" {
		writeJSON(w, http.StatusOK, map[string]int{"totalTokens": req.promptTokens})
		return
	}
	s.serve(w, r, req, d)
}

func (geminiDialect) name() string             { return "gemini" }
func (geminiDialect) tokensPerChunk() int      { return DefaultGeminiTokensPerChunk }
func (geminiDialect) idPrefix() string         { return "sim" }
func (geminiDialect) wholeToolCall() bool      { return true }
func (geminiDialect) toolCallID(uint64) string { return "" } // Gemini API calls carry no id
func (geminiDialect) encoder(pl *plan) encoder { return newGeminiEncoder(pl) }

// geminiStatus is the google.rpc status name Gemini gives each HTTP status
// (the Gemini API troubleshooting page; 401 and 504 from google.rpc.Code's
// HTTP mapping). Other 4xx are FAILED_PRECONDITION, other 5xx INTERNAL.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 500:
		return "INTERNAL"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status < 500 {
		return "FAILED_PRECONDITION"
	}
	return "INTERNAL"
}

// geminiError is Google's error body.
type geminiError struct {
	Error struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details,omitempty"`
	} `json:"error"`
}

func newGeminiError(status int, msg string) geminiError {
	var e geminiError
	e.Error.Code, e.Error.Message, e.Error.Status = status, msg, geminiStatus(status)
	return e
}

func (geminiDialect) writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, newGeminiError(status, msg))
}

func (d geminiDialect) requestError(w http.ResponseWriter, status int, err error) {
	d.writeError(w, status, err.Error())
}

// failure answers an injected status with Gemini's wording; a 429 carries
// a google.rpc.RetryInfo detail, Gemini's way of saying when to retry.
func (geminiDialect) failure(w http.ResponseWriter, status int) {
	e := newGeminiError(status, fmt.Sprintf("simulated error status %d", status))
	switch status {
	case http.StatusTooManyRequests:
		e.Error.Message = "Resource has been exhausted (e.g. check quota). (simulated)"
		e.Error.Details = []map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}}
	case http.StatusInternalServerError:
		e.Error.Message = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting (simulated)"
	case http.StatusServiceUnavailable:
		e.Error.Message = "The model is overloaded. Please try again later. (simulated)"
	}
	writeJSON(w, status, e)
}

// generationFailure answers 503 UNAVAILABLE, as the stream's error event says.
func (d geminiDialect) generationFailure(w http.ResponseWriter) {
	d.writeError(w, http.StatusServiceUnavailable, "The model is overloaded. Please try again later. (simulated)")
}

func (geminiDialect) truncated(w http.ResponseWriter, _ *plan) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(dataTruncatedGemini)
}

// geminiFinish spells the stop reasons as Gemini's finishReason: a
// function call ends with STOP.
var geminiFinish = [...]string{stopEnd: "STOP", stopLength: "MAX_TOKENS", stopTool: "STOP"}

func (geminiDialect) complete(w http.ResponseWriter, pl *plan, text string) {
	type part struct {
		Text             *string `json:"text,omitempty"`
		Thought          bool    `json:"thought,omitempty"`
		FunctionCall     any     `json:"functionCall,omitempty"`
		ThoughtSignature string  `json:"thoughtSignature,omitempty"`
	}
	var parts []part
	if pl.thinkChunks > 0 {
		parts = append(parts, part{Text: &pl.thinkText, Thought: true})
	}
	p := part{Text: &text, ThoughtSignature: pl.signature}
	if pl.tool != nil {
		p = part{FunctionCall: struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		}{pl.tool.name, pl.tool.args}, ThoughtSignature: pl.signature}
	}
	parts = append(parts, p)
	type content struct {
		Parts []part `json:"parts"`
		Role  string `json:"role"`
	}
	type candidate struct {
		Content           content         `json:"content"`
		FinishReason      string          `json:"finishReason"`
		Index             int             `json:"index"`
		GroundingMetadata json.RawMessage `json:"groundingMetadata,omitempty"`
	}
	type usage struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		TotalTokenCount         int `json:"totalTokenCount"`
		CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
		ThoughtsTokenCount      int `json:"thoughtsTokenCount,omitempty"`
	}
	writeJSON(w, http.StatusOK, struct {
		Candidates    []candidate `json:"candidates"`
		UsageMetadata usage       `json:"usageMetadata"`
		ModelVersion  string      `json:"modelVersion"`
		ResponseID    string      `json:"responseId"`
	}{
		Candidates: []candidate{{Content: content{Parts: parts, Role: "model"}, FinishReason: geminiFinish[pl.stop], GroundingMetadata: pl.search.geminiGrounding(len(text))}},
		UsageMetadata: usage{pl.promptTokens, pl.tokens, pl.promptTokens + pl.tokens + pl.thinkTokens,
			pl.cache.read, pl.thinkTokens},
		ModelVersion: pl.model,
		ResponseID:   pl.id,
	})
}

var (
	dataTruncatedGemini = []byte(`{"candidates":[{"content":{"parts":[{"text":"trunc`)
	dataUnavailable     = []byte(`{"error":{"code":503,"message":"The model is overloaded. Please try again later. (simulated)","status":"UNAVAILABLE"}}`)
)

// geminiEncoder writes a Gemini SSE stream (alt=sse): one data: line per
// GenerateContentResponse, no event names and no [DONE]. Each chunk holds
// candidates[0].content {parts [{text}], role model}, usageMetadata with
// cumulative counts, modelVersion and responseId; after the content a last
// chunk with an empty text part carries finishReason, as recorded Gemini
// streams end. A tool call is one functionCall part, sent whole.
type geminiEncoder struct {
	buf    []byte
	pl     *plan
	suffix []byte // ,"modelVersion":...,"responseId":...}
	// textBytes is the answer's text so far in bytes, decoded: a search's
	// groundingSupports segment spans it (search.go).
	textBytes int
}

var _ encoder = (*geminiEncoder)(nil)

func newGeminiEncoder(pl *plan) *geminiEncoder {
	e := &geminiEncoder{buf: make([]byte, 0, 512), pl: pl}
	e.suffix = append(e.suffix, `,"modelVersion":`...)
	e.suffix = api.AppendString(e.suffix, pl.model)
	e.suffix = append(e.suffix, `,"responseId":`...)
	e.suffix = api.AppendString(e.suffix, pl.id)
	e.suffix = append(e.suffix, '}')
	return e
}

// tail appends the end of a candidate, usageMetadata and the suffix.
// sent is the output tokens so far, thinking included: candidatesTokenCount
// counts the answer's, thoughtsTokenCount the thinking's (when there is
// any), totalTokenCount both and the prompt; cachedContentTokenCount is
// the part of promptTokenCount read from the cache (when there is any).
func (e *geminiEncoder) tail(b []byte, finish string, sent int) []byte {
	pl := e.pl
	thoughts := min(sent, pl.thinkTokens)
	b = append(b, `],"role":"model"},`...)
	if finish != "" {
		b = append(b, `"finishReason":"`...)
		b = append(b, finish...)
		b = append(b, `",`...)
	}
	b = append(b, `"index":0}],"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(pl.promptTokens), 10)
	b = append(b, `,"candidatesTokenCount":`...)
	b = strconv.AppendInt(b, int64(sent-thoughts), 10)
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(pl.promptTokens+sent), 10)
	if pl.cache.read > 0 {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = strconv.AppendInt(b, int64(pl.cache.read), 10)
	}
	if thoughts > 0 {
		b = append(b, `,"thoughtsTokenCount":`...)
		b = strconv.AppendInt(b, int64(thoughts), 10)
	}
	b = append(b, '}')
	return append(b, e.suffix...)
}

// signature appends the part's thoughtSignature when the answer thought:
// Gemini signs the first function call part, or else the last part.
func (e *geminiEncoder) signature(b []byte) []byte {
	if e.pl.signature == "" {
		return b
	}
	b = append(b, `,"thoughtSignature":`...)
	return api.AppendString(b, e.pl.signature)
}

// start writes nothing: a Gemini stream opens with its first content.
func (e *geminiEncoder) start(*streamState, bool) error { return nil }

// thinking writes a thought part (includeThoughts).
func (e *geminiEncoder) thinking(st *streamState, toks [][]byte, sent int) error {
	b := append(e.buf[:0], `{"candidates":[{"content":{"parts":[{"text":"`...)
	for _, t := range toks {
		b = append(b, t...)
	}
	b = append(b, `","thought":true}`...)
	b = e.tail(b, "", sent)
	e.buf = b
	return st.emit(nil, b, true)
}

func (e *geminiEncoder) text(st *streamState, toks [][]byte, sent int) error {
	b := append(e.buf[:0], `{"candidates":[{"content":{"parts":[{"text":"`...)
	for _, t := range toks {
		b = append(b, t...)
		if e.pl.search != nil {
			d, _ := api.AppendUnescaped(nil, t)
			e.textBytes += len(d)
		}
	}
	b = append(b, `"}`...)
	b = e.tail(b, "", sent)
	e.buf = b
	return st.emit(nil, b, true)
}

func (e *geminiEncoder) toolArgs(st *streamState, i int, sent int) error {
	b := append(e.buf[:0], `{"candidates":[{"content":{"parts":[{"functionCall":{"name":`...)
	b = api.AppendString(b, e.pl.tool.name)
	b = append(b, `,"args":`...)
	b = append(b, e.pl.tool.frags[i]...)
	b = append(b, '}')
	b = append(e.signature(b), '}')
	b = e.tail(b, "", sent)
	e.buf = b
	return st.emit(nil, b, true)
}

func (e *geminiEncoder) finish(st *streamState, sent int) error {
	b := append(e.buf[:0], `{"candidates":[{"content":{"parts":[{"text":""`...)
	if e.pl.tool == nil {
		b = e.signature(b)
	}
	b = append(b, '}')
	b = e.tail(b, geminiFinish[e.pl.stop], sent)
	if g := e.pl.search.geminiGrounding(e.textBytes); g != nil {
		// groundingMetadata in the candidate, after its index.
		i := bytes.Index(b, []byte(`"index":0}`)) + len(`"index":0`)
		b = append(b[:i], append(append([]byte(`,"groundingMetadata":`), g...), b[i:]...)...)
	}
	e.buf = b
	return st.emit(nil, b, true)
}

// fail sends data: {"error":{...}} with 503 UNAVAILABLE: the error object
// of a failed request, which go-genai's stream decoder reports as an
// APIError when it arrives as a data line.
func (e *geminiEncoder) fail(st *streamState, _ int) error {
	return st.emit(nil, dataUnavailable, true)
}

func (e *geminiEncoder) malformed(st *streamState) error {
	return st.emit(nil, dataTruncatedGemini, true)
}
