package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// DefaultMaxTokens is max_tokens when the client gave no limit: the
// Messages API requires one, OpenAI's does not.
const DefaultMaxTokens = 4096

// Thinking budgets (budget_tokens) per reasoning_effort. 1024 is the API's
// minimum; each level doubles or quadruples the one below, and "high" keeps
// DefaultMaxTokens+budget (20480) under the 21,333 tokens above which the
// docs require streaming.
const (
	BudgetMinimal = 1024
	BudgetLow     = 2048
	BudgetMedium  = 8192
	BudgetHigh    = 16384
)

// minBudget is the smallest budget_tokens the API accepts.
const minBudget = 1024

// request is the Messages API body, members in the order written.
type request struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        []block         `json:"system,omitempty"`
	Messages      []turn          `json:"messages"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int            `json:"top_k,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
	Thinking      json.RawMessage `json:"thinking,omitempty"`
	OutputConfig  *outputConfig   `json:"output_config,omitempty"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	Stream        bool            `json:"stream"`

	pending []turn // turns of messages before mergeTurns
}

type turn struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block of any type: the members of a text block, the
// commonest, in it, those of the other types in more, so that a block
// costs 88 bytes, not 232 (a long conversation is mostly short blocks).
type block struct {
	Type         string
	Text         string
	CacheControl json.RawMessage
	// raw, when set, is the whole block as a client of the Messages API
	// sent it (a tool_result, a document), written as it came; Type still
	// says its type.
	raw  json.RawMessage
	more *blockMore
}

// blockMore holds the members of the blocks other than text; those a type
// lacks are empty and omitted.
type blockMore struct {
	Source    *imageSource
	ID        string
	Name      string
	Input     json.RawMessage
	ToolUseID string
	Content   []block
	Thinking  string
	Signature string
	Data      string // redacted_thinking
}

type imageSource struct {
	Type      string `json:"type"` // "base64" or "url"
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// tool is a client tool (Type "": a function) or a server tool (Type
// web_search_20250305, see webSearchTool).
type tool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"` // set for every client tool: required there
	Strict       *bool           `json:"strict,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	// A web search tool's options.
	AllowedDomains []string      `json:"allowed_domains,omitempty"`
	UserLocation   *userLocation `json:"user_location,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type thinking struct {
	Type         string `json:"type"` // "enabled"
	BudgetTokens int    `json:"budget_tokens"`
}

type outputConfig struct {
	Format *outputFormat `json:"format,omitempty"`
}

type outputFormat struct {
	Type   string          `json:"type"` // "json_schema"
	Schema json.RawMessage `json:"schema"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

// extra are the members of the client's body that the typed
// api.ChatRequest does not hold and this adapter reads.
type extra struct {
	N           *int            `json:"n"`
	Logprobs    *bool           `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`
	TopK        *int            `json:"top_k"`
	Audio       json.RawMessage `json:"audio"`
	Thinking    json.RawMessage `json:"thinking"` // a chat client's Anthropic thinking object
}

// Body returns the Messages API body for req: req.Chat translated (see the
// package comment for every member), "model" set to req.Model and "stream"
// to stream. A request this route cannot serve is a *provider.Error with
// Status 400 (see invalid and unsupported); req is not modified.
func Body(req *provider.Request, stream bool) ([]byte, error) {
	out, err := translate(req, stream)
	if err != nil {
		return nil, err
	}
	b, err := out.appendJSON(make([]byte, 0, len(req.Body)+512))
	if err != nil {
		// Raw members (schemas, cache_control) came from a valid body.
		return nil, invalid("", "the request cannot be encoded: %v", err)
	}
	return b, nil
}

// translate is the request Body writes.
func translate(req *provider.Request, stream bool) (*request, error) {
	chat := req.Chat
	if chat == nil {
		chat = &api.ChatRequest{}
		if len(req.Body) > 0 {
			if err := json.Unmarshal(req.Body, chat); err != nil {
				return nil, invalid("", "the request body is not a chat completion request: %v", err)
			}
		}
	}
	var x extra
	if len(req.Body) > 0 {
		_ = json.Unmarshal(req.Body, &x) // members of the wrong type read as absent
	}
	out := request{Model: req.Model, Stream: stream}
	if err := checkUnsupported(&x); err != nil {
		return nil, err
	}
	if err := out.messages(chat.Messages); err != nil {
		return nil, err
	}
	if err := out.sampling(chat, &x); err != nil {
		return nil, err
	}
	if err := out.tools(chat); err != nil {
		return nil, err
	}
	if err := out.format(chat.ResponseFormat); err != nil {
		return nil, err
	}
	thinkingRaw := chat.Thinking
	if len(thinkingRaw) == 0 {
		thinkingRaw = x.Thinking
	}
	if err := out.reasoning(chat, thinkingRaw); err != nil {
		return nil, err
	}
	if out.Temperature != nil && out.TopP != nil {
		out.TopP = nil // recent models reject both together; the temperature wins
	}
	if chat.User != "" {
		out.Metadata = &metadata{UserID: chat.User}
	}
	return &out, nil
}

// invalid is a request that no route could serve as sent: a 400 the
// gateway returns without trying another route.
func invalid(param, format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	if param != "" {
		msg = param + ": " + msg
	}
	return &provider.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_request", Message: msg, Err: provider.ErrUntranslatable}
}

// unsupported is a request that the Messages API cannot serve but an
// OpenAI-compatible route may: a 400 that is Retryable, so the gateway
// tries the model's next route and answers 400 when there is none.
func unsupported(param, what string) error {
	return &provider.Error{Status: http.StatusBadRequest, Retryable: true, Type: "invalid_request_error",
		Code: "unsupported_parameter", Message: param + ": " + what + " is not supported by Anthropic routes", Err: provider.ErrUntranslatable}
}

func checkUnsupported(x *extra) error {
	switch {
	case x.N != nil && *x.N > 1:
		return unsupported("n", "more than one choice (n > 1)")
	case x.Logprobs != nil && *x.Logprobs, x.TopLogprobs != nil && *x.TopLogprobs > 0:
		return unsupported("logprobs", "log probabilities")
	case len(x.Audio) > 0 && string(x.Audio) != "null":
		return unsupported("audio", "audio output")
	}
	return nil
}

// messages translates the conversation: system and developer messages into
// the top-level system, the rest into alternating user and assistant turns.
func (out *request) messages(msgs []api.Message) error {
	out.pending = make([]turn, 0, len(msgs))
	for i, m := range msgs {
		path := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			parts, err := m.Parts()
			if err != nil {
				return invalid(path+".content", "%v", err)
			}
			for j, p := range parts {
				if p.Type != "text" {
					return invalid(fmt.Sprintf("%s.content[%d]", path, j), "a %s message holds text parts only, got %q", m.Role, p.Type)
				}
				if p.Text != "" {
					out.System = append(out.System, block{Type: "text", Text: p.Text, CacheControl: p.CacheControl})
				}
			}
		case "user":
			if m.Attached {
				continue // the tool results before it hold these, as sent
			}
			blocks, err := userBlocks(m, path)
			if err != nil {
				return err
			}
			out.add("user", blocks)
		case "assistant":
			blocks, err := assistantBlocks(m, path)
			if err != nil {
				return err
			}
			out.add("assistant", blocks)
		case "tool":
			if m.ToolCallID == "" {
				return invalid(path+".tool_call_id", "a tool message needs the id of the call it answers")
			}
			if m.ToolResult != nil { // a Messages client's block, images and documents included
				out.add("user", []block{{Type: "tool_result", raw: m.ToolResult}})
				continue
			}
			parts, err := m.Parts()
			if err != nil {
				return invalid(path+".content", "%v", err)
			}
			res := block{Type: "tool_result", more: &blockMore{ToolUseID: m.ToolCallID}}
			for j, p := range parts {
				b, err := partBlock(p, fmt.Sprintf("%s.content[%d]", path, j))
				if err != nil {
					return err
				}
				if b.Type != "" {
					res.more.Content = append(res.more.Content, b)
				}
			}
			out.add("user", []block{res})
		default:
			return invalid(path+".role", "unknown role %q (want system, developer, user, assistant or tool)", m.Role)
		}
	}
	out.mergeTurns()
	out.toolResultsFirst()
	return nil
}

// add appends blocks as a turn of role. Consecutive turns of the same role
// are merged afterwards, by mergeTurns: the API wants user and assistant
// turns to alternate. A message without blocks (empty text) adds nothing.
func (out *request) add(role string, blocks []block) {
	if len(blocks) > 0 {
		out.pending = append(out.pending, turn{Role: role, Content: blocks})
	}
}

// mergeTurns makes out.Messages of the pending turns, each run of one role
// merged into one turn made at its final length: appending message after
// message to a turn grew it ~1.25x at a time, five times its final size
// for a long run (issue 22). A turn of one message keeps its blocks.
func (out *request) mergeTurns() {
	p := out.pending
	n := 0
	for i := range p {
		if i == 0 || p[i].Role != p[i-1].Role {
			n++
		}
	}
	out.Messages = make([]turn, 0, n)
	for i := 0; i < len(p); {
		j, size := i+1, len(p[i].Content)
		for ; j < len(p) && p[j].Role == p[i].Role; j++ {
			size += len(p[j].Content)
		}
		t := p[i]
		if j > i+1 {
			t.Content = make([]block, 0, size)
			for _, q := range p[i:j] {
				t.Content = append(t.Content, q.Content...)
			}
		}
		out.Messages = append(out.Messages, t)
		i = j
	}
	out.pending = nil
}

// toolResultsFirst puts the tool_result blocks of each user turn before
// its other blocks, keeping the order within each kind, as the API
// requires of the turn that answers tool calls. Once for the whole
// conversation: sorting in add, per message merged, was quadratic in a
// turn's length (issue 22: a body of 300,000 user messages never ended).
func (out *request) toolResultsFirst() {
	for i := range out.Messages {
		t := &out.Messages[i]
		if t.Role != "user" {
			continue
		}
		results := 0
		for _, b := range t.Content {
			if b.Type == "tool_result" {
				results++
			}
		}
		if results == 0 || results == len(t.Content) {
			continue
		}
		sorted := make([]block, 0, len(t.Content))
		for _, b := range t.Content {
			if b.Type == "tool_result" {
				sorted = append(sorted, b)
			}
		}
		for _, b := range t.Content {
			if b.Type != "tool_result" {
				sorted = append(sorted, b)
			}
		}
		t.Content = sorted
	}
}

func userBlocks(m api.Message, path string) ([]block, error) {
	parts, err := m.Parts()
	if err != nil {
		return nil, invalid(path+".content", "%v", err)
	}
	blocks := make([]block, 0, len(parts)) // grown, it cost 5x its final size
	for j, p := range parts {
		b, err := partBlock(p, fmt.Sprintf("%s.content[%d]", path, j))
		if err != nil {
			return nil, err
		}
		if b.Type != "" {
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

// partBlock translates a content part; an empty text part gives an empty
// block (Type ""), to be dropped: the API rejects empty text blocks.
func partBlock(p api.ContentPart, path string) (block, error) {
	if p.Document != nil { // a Messages client's document block, as sent
		return block{Type: "document", raw: p.Document}, nil
	}
	switch p.Type {
	case "text":
		if p.Text == "" {
			return block{}, nil
		}
		return block{Type: "text", Text: p.Text, CacheControl: p.CacheControl}, nil
	case "image_url":
		if p.ImageURL == nil || p.ImageURL.URL == "" {
			return block{}, invalid(path+".image_url", "missing url")
		}
		src, err := imageFrom(p.ImageURL.URL, path+".image_url.url")
		if err != nil {
			return block{}, err
		}
		return block{Type: "image", more: &blockMore{Source: src}, CacheControl: p.CacheControl}, nil
	case "file":
		// OpenAI's PDF input: a document block with a base64 source.
		if p.File != nil && strings.HasPrefix(p.File.FileData, "data:application/pdf;base64,") {
			return block{Type: "document", more: &blockMore{Source: &imageSource{Type: "base64", MediaType: "application/pdf",
				Data: strings.TrimPrefix(p.File.FileData, "data:application/pdf;base64,")}}, CacheControl: p.CacheControl}, nil
		}
		return block{}, unsupported(path+".file", "a file part other than a base64 PDF (file_data data:application/pdf;base64,…)")
	}
	return block{}, unsupported(path+".type", fmt.Sprintf("a content part of type %q", p.Type))
}

// imageFrom translates an image URL: a base64 data: URL into a base64
// source with its media type, an http(s) URL into a url source.
func imageFrom(u, path string) (*imageSource, error) {
	lower := strings.ToLower(u)
	switch {
	case strings.HasPrefix(lower, "data:"):
		meta, data, ok := strings.Cut(u[len("data:"):], ",")
		media, enc, _ := strings.Cut(meta, ";")
		if !ok || !strings.EqualFold(enc, "base64") || media == "" {
			return nil, invalid(path, "a data: URL must be data:<media type>;base64,<data>")
		}
		return &imageSource{Type: "base64", MediaType: strings.ToLower(media), Data: data}, nil
	case strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "http://"):
		return &imageSource{Type: "url", URL: u}, nil
	}
	return nil, invalid(path, "an image URL must be https:// or a base64 data: URL")
}

func assistantBlocks(m api.Message, path string) ([]block, error) {
	parts, err := m.Parts()
	if err != nil {
		return nil, invalid(path+".content", "%v", err)
	}
	var blocks []block
	for _, tb := range m.ThinkingBlocks {
		// First in the turn, as the API wants them, and as they came.
		switch {
		case tb.Type == "thinking" && tb.Signature != "":
			blocks = append(blocks, block{Type: "thinking", more: &blockMore{Thinking: tb.Thinking, Signature: tb.Signature}})
		case tb.Type == "redacted_thinking" && tb.Data != "":
			blocks = append(blocks, block{Type: "redacted_thinking", more: &blockMore{Data: tb.Data}})
		}
		// Unsigned thinking (another provider's) is dropped: the API
		// rejects a thinking block without its signature.
	}
	for j, p := range parts {
		if p.Type == "refusal" {
			continue // a refusal the model made is not something to continue from
		}
		if p.Type != "text" {
			return nil, invalid(fmt.Sprintf("%s.content[%d]", path, j), "an assistant message holds text parts only, got %q", p.Type)
		}
		if p.Text != "" {
			blocks = append(blocks, block{Type: "text", Text: p.Text, CacheControl: p.CacheControl})
		}
	}
	for j, tc := range m.ToolCalls {
		tpath := fmt.Sprintf("%s.tool_calls[%d]", path, j)
		if tc.ID == "" {
			return nil, invalid(tpath+".id", "a tool call needs an id")
		}
		if tc.Function.Name == "" {
			return nil, invalid(tpath+".function.name", "a tool call needs a function name")
		}
		input, err := toolInput(tc.Function.Arguments)
		if err != nil {
			return nil, invalid(tpath+".function.arguments", "%v", err)
		}
		blocks = append(blocks, block{Type: "tool_use", more: &blockMore{ID: tc.ID, Name: tc.Function.Name, Input: input}, CacheControl: tc.CacheControl})
	}
	return blocks, nil
}

// toolInput parses a call's arguments, a JSON text, into the tool_use
// input, a JSON object; "" (a call without arguments) is {}.
func toolInput(args string) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(args)
	switch {
	case trimmed == "":
		return json.RawMessage(`{}`), nil
	case !json.Valid([]byte(trimmed)):
		return nil, fmt.Errorf("not valid JSON: %.80q", args)
	case trimmed[0] != '{':
		return nil, fmt.Errorf("want a JSON object, got %.80q", args)
	}
	return json.RawMessage(trimmed), nil
}

// sampling translates the output limit and the sampling parameters.
func (out *request) sampling(chat *api.ChatRequest, x *extra) error {
	out.MaxTokens = chat.OutputLimit()
	if out.MaxTokens <= 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if t := chat.Temperature; t != nil {
		v := min(max(*t, 0), 1) // OpenAI's range is 0–2, Anthropic's 0–1
		out.Temperature = &v
	}
	if chat.TopP != nil {
		v := *chat.TopP
		out.TopP = &v
	}
	if x.TopK != nil && *x.TopK > 0 {
		out.TopK = x.TopK
	}
	stops, err := chat.StopSequences()
	if err != nil {
		return invalid("stop", "%v", err)
	}
	for _, s := range stops {
		if s != "" {
			out.StopSequences = append(out.StopSequences, s)
		}
	}
	return nil
}

// tools translates the function tools and tool_choice.
func (out *request) tools(chat *api.ChatRequest) error {
	if len(chat.Tools) > 0 {
		out.Tools = make([]tool, 0, len(chat.Tools))
	}
	for i, t := range chat.Tools {
		if t.Type != "" && t.Type != "function" {
			return unsupported(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("a tool of type %q", t.Type))
		}
		if t.Function.Name == "" {
			return invalid(fmt.Sprintf("tools[%d].function.name", i), "a tool needs a name")
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`) // input_schema is required
		}
		out.Tools = append(out.Tools, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema, Strict: t.Function.Strict,
			CacheControl: t.CacheControl})
	}
	if ws := chat.WebSearch; ws != nil && !slices.ContainsFunc(out.Tools, func(t tool) bool { return t.Name == "web_search" }) {
		out.Tools = append(out.Tools, webSearchTool(ws))
	}
	if len(out.Tools) == 0 {
		return nil // tool_choice and parallel_tool_calls mean nothing without tools
	}
	var tc *toolChoice
	switch raw := bytes.TrimSpace(chat.ToolChoice); {
	case len(raw) == 0, string(raw) == "null":
	case raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto":
			tc = &toolChoice{Type: "auto"}
		case "required":
			tc = &toolChoice{Type: "any"}
		case "none":
			tc = &toolChoice{Type: "none"}
		default:
			return invalid("tool_choice", "want none, auto, required or a function, got %q", s)
		}
	default:
		var obj struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" || obj.Function.Name == "" {
			return invalid("tool_choice", `want none, auto, required or {"type":"function","function":{"name":...}}`)
		}
		tc = &toolChoice{Type: "tool", Name: obj.Function.Name}
	}
	if p := chat.ParallelToolCalls; p != nil && !*p {
		if tc == nil {
			tc = &toolChoice{Type: "auto"}
		}
		tc.DisableParallelToolUse = tc.Type != "none" // none takes no such member
	}
	out.ToolChoice = tc
	return nil
}

// format translates response_format: json_schema into output_config.format
// (structured outputs), text into nothing; json_object has no counterpart.
func (out *request) format(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return invalid("response_format", "want an object with a type")
	}
	switch rf.Type {
	case "text", "":
		return nil
	case "json_schema":
		if len(rf.JSONSchema.Schema) == 0 || string(rf.JSONSchema.Schema) == "null" {
			return invalid("response_format.json_schema.schema", "a json_schema response format needs a schema")
		}
		out.OutputConfig = &outputConfig{Format: &outputFormat{Type: "json_schema", Schema: rf.JSONSchema.Schema}}
		return nil
	case "json_object":
		return unsupported("response_format", "JSON mode without a schema (json_object; use json_schema)")
	}
	return invalid("response_format.type", "want text, json_object or json_schema, got %q", rf.Type)
}

// reasoning translates the client's thinking object, sent as it came (the
// budget exact, adaptive and disabled kept: the client chose them), or else
// reasoning_effort into extended thinking, within the API's rules:
// budget_tokens of at least 1024 and below max_tokens, no forced tool use,
// and the signed thinking blocks of a tool-use turn sent back (which an
// OpenAI conversation may not carry). Where the rules leave an effort no
// room thinking is left off and the request is served without it. Either
// way, with thinking on, temperature and top_k are dropped and top_p kept
// only from 0.95 to 1, as the API requires.
func (out *request) reasoning(chat *api.ChatRequest, raw json.RawMessage) error {
	if len(raw) > 0 && string(raw) != "null" {
		th, err := api.ReadThinking(raw)
		if err != nil {
			return invalid("thinking", "%v", err)
		}
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return invalid("thinking", "not valid JSON")
		}
		out.Thinking = b.Bytes()
		if th.Type == "enabled" && chat.OutputLimit() <= 0 {
			out.MaxTokens = DefaultMaxTokens + th.BudgetTokens // the answer keeps its default room
		}
		if th.Type != "disabled" {
			out.thinkingSampling()
		}
		return nil
	}
	var budget int
	switch chat.ReasoningEffort {
	case "", "none":
		return nil
	case "minimal":
		budget = BudgetMinimal
	case "low":
		budget = BudgetLow
	case "medium":
		budget = BudgetMedium
	case "high", "xhigh":
		budget = BudgetHigh
	default:
		return invalid("reasoning_effort", "want none, minimal, low, medium or high, got %q", chat.ReasoningEffort)
	}
	if tc := out.ToolChoice; tc != nil && (tc.Type == "any" || tc.Type == "tool") {
		return nil // forced tool use wins: the client's code expects the call
	}
	if unsignedToolLoop(out.Messages) {
		return nil // the API would refuse thinking: the turn's signed blocks are missing
	}
	if chat.OutputLimit() > 0 {
		budget = min(budget, out.MaxTokens-1) // the client's limit counts thinking too
		if budget < minBudget {
			return nil
		}
	} else {
		out.MaxTokens = DefaultMaxTokens + budget // the answer keeps its default room
	}
	out.Thinking, _ = json.Marshal(thinking{Type: "enabled", BudgetTokens: budget})
	out.thinkingSampling()
	return nil
}

// thinkingSampling drops what the API refuses with thinking on:
// temperature, top_k, and top_p below 0.95.
func (out *request) thinkingSampling() {
	out.Temperature, out.TopK = nil, nil
	if out.TopP != nil && *out.TopP < 0.95 {
		out.TopP = nil
	}
}

// unsignedToolLoop reports whether the conversation continues an assistant
// turn that called tools (its last turn is the user turn holding their
// results) and that turn does not start with its thinking blocks: the API
// refuses thinking then ("a final assistant message must start with a
// thinking block"). A client that sends the blocks back (thinking_blocks)
// keeps its thinking on.
func unsignedToolLoop(turns []turn) bool {
	n := len(turns)
	if n < 2 || turns[n-1].Role != "user" || turns[n-2].Role != "assistant" {
		return false
	}
	results := false
	for _, b := range turns[n-1].Content {
		if b.Type == "tool_result" {
			results = true
		}
	}
	c := turns[n-2].Content
	return results && (len(c) == 0 || c[0].Type != "thinking" && c[0].Type != "redacted_thinking")
}
