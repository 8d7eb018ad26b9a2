// Package messages is the gateway's Anthropic Messages API front
// (POST /v1/messages): it turns a Messages request into the OpenAI chat
// request every route understands, writes the relayed OpenAI chunks back
// as Anthropic's event stream (an Encoder of the relay), turns a
// non-streaming chat completion into a Message, and answers errors in
// Anthropic's shape. Clients built for Anthropic (its SDKs, Claude Code)
// thus reach any configured model on any upstream kind.
//
// Request mapping: system (string or text blocks, cache_control kept) → a
// system message; text and image blocks → content parts; tool_use blocks →
// the assistant's tool_calls (input as the arguments' JSON); tool_result
// blocks → tool messages, before the rest of their user turn; thinking
// blocks → reasoning_content (their text joined) and thinking_blocks (each
// with its signature), redacted_thinking blocks → thinking_blocks (their
// data), which an Anthropic route sends back as they came; max_tokens → max_tokens; stop_sequences →
// stop; tools → function tools (input_schema as parameters); tool_choice
// auto/any/tool/none → auto/required/{function}/none, with
// disable_parallel_tool_use → parallel_tool_calls false; thinking → kept
// exact in ChatRequest.Thinking (a route that speaks Anthropic sends it as
// it came, never encoded for others) and, for OpenAI-dialect routes, the
// nearest reasoning_effort (enabled budget_tokens ≤ 2048 low, ≤ 8192
// medium, else high; adaptive and disabled none); metadata.user_id → user
// (one longer than 64 bytes, as Claude Code's ~150-byte JSON id is, as a
// stable 42-byte digest of it: OpenAI refuses a longer user).
// document blocks → ContentPart.Document (the block as sent, for an
// Anthropic route) with their nearest OpenAI part (a base64 PDF a "file"
// part, a text document text, others a "document" part an OpenAI upstream
// refuses); tool_result blocks keep the block as sent (api.Message.ToolResult)
// for an Anthropic route, their text in the tool message, and their images
// and documents in a user message after the tool messages (Attached), since
// OpenAI's tool messages hold text; cache_control on tools and tool_use
// blocks → api.Tool and api.ToolCall's CacheControl (never encoded).
// top_k has no OpenAI equivalent and is dropped; server tools and other
// block types are rejected with a message naming them.
//
// Claude Code (2.1.197, captured in testdata/claude-code-2.1.197-*.json)
// sends, besides the above: system messages within messages (at
// messages[1]) → a system message at the same place (a Gemini route folds
// it into systemInstruction, see convertMessage); output_config.effort →
// reasoning_effort (max → high), winning over the one a thinking budget
// suggests; output_config.format (a JSON schema, for its session title) →
// response_format json_schema; tool_result is_error → "Error: " before the
// result's text. Left out on purpose, having no meaning on another
// provider: the system block "x-anthropic-billing-header: …" (Anthropic's
// billing attribution, changing every request: it would defeat prefix
// caching); context_management (Anthropic's server-side clearing of old
// thinking and tool results to save its context: without it the route sees
// the whole conversation, which asks nothing the client did not send);
// the anthropic-beta and anthropic-version headers, x-claude-code-session-id
// and the ?beta=true query (affinity reads the session from
// metadata.user_id).
//
// Finish reasons: stop → end_turn (stop_sequence, with stop_sequence set,
// when the choice's stop_reason names the stop string that matched, as
// vLLM and the anthropic adapter report it), length → max_tokens, tool_calls →
// tool_use, content_filter → refusal; an OpenAI refusal (message.refusal,
// delta.refusal) is written as the answer's text and ends refusal instead
// of end_turn (the Messages API has no refusal field); a turn that holds tool calls ends
// tool_use whenever it would end end_turn (OpenAI-dialect servers often
// finish such a turn with "stop"; agent loops run tools only on tool_use).
//
// A route whose upstream speaks the Messages API itself (kind anthropic,
// or a sim of dialect anthropic) gets none of this: the client's body as
// it sent it and the upstream's events as they came (Encoder.Pass), same
// dialect, same bytes; the translation serves the routes of other kinds.
package messages

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
)

// Request is the body of POST /v1/messages, the fields the gateway reads.
type Request struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	System        json.RawMessage `json:"system,omitempty"` // a string or text blocks
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int            `json:"top_k,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    *ToolChoice     `json:"tool_choice,omitempty"`
	Thinking      json.RawMessage `json:"thinking,omitempty"` // see api.ReadThinking
	Metadata      *struct {
		UserID string `json:"user_id,omitempty"`
	} `json:"metadata,omitempty"`
	OutputConfig *OutputConfig `json:"output_config,omitempty"`
	// context_management (Claude Code sends clear_thinking_20251015) is
	// not read: see the package comment.
}

// OutputConfig is "output_config": the effort the answer may take and the
// format it must have.
type OutputConfig struct {
	Effort string          `json:"effort,omitempty"` // low, medium, high, max
	Format json.RawMessage `json:"format,omitempty"` // {"type":"json_schema","schema":{...}}
}

// Message is one turn; Content is a string or an array of blocks.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Block is one content block of a message or of a tool result.
type Block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Source       *ImageSource    `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`   // tool_use
	Name         string          `json:"name,omitempty"` // tool_use
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"` // tool_result
	Content      json.RawMessage `json:"content,omitempty"`     // tool_result: a string or blocks
	IsError      bool            `json:"is_error,omitempty"`
	Thinking     string          `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Data         string          `json:"data,omitempty"`  // redacted_thinking
	Title        string          `json:"title,omitempty"` // document
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ImageSource is an image block's source.
type ImageSource struct {
	Type      string `json:"type"` // base64, url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// Tool is a client tool.
type Tool struct {
	Type         string          `json:"type,omitempty"` // "custom" or absent; server tools have others
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ToolChoice is "tool_choice".
type ToolChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Error is a request the gateway cannot translate; Param names the field. (api.ParamError).
type Error = api.ParamError

var errorf = api.ParamErrorf

// Validate checks what the Messages API requires.
func (r *Request) Validate() error {
	switch {
	case r.Model == "":
		return errorf("model", "missing required field: model")
	case len(r.Messages) == 0:
		return errorf("messages", "missing required field: messages (a non-empty array)")
	case r.MaxTokens == nil:
		return errorf("max_tokens", "missing required field: max_tokens")
	case *r.MaxTokens < 1:
		return errorf("max_tokens", "max_tokens must be at least 1, got %d", *r.MaxTokens)
	}
	return nil
}

// ToChat returns the OpenAI chat request of r.
func (r *Request) ToChat() (*api.ChatRequest, error) {
	c := &api.ChatRequest{
		Model:         r.Model,
		Stream:        r.Stream,
		MaxTokens:     r.MaxTokens,
		Temperature:   r.Temperature,
		TopP:          r.TopP,
		StreamOptions: nil,
	}
	if r.Stream {
		c.StreamOptions = &api.StreamOptions{IncludeUsage: true}
	}
	if len(r.StopSequences) > 0 {
		c.Stop, _ = json.Marshal(r.StopSequences)
	}
	if r.Metadata != nil {
		c.User = userID(r.Metadata.UserID)
	}
	if len(r.Thinking) > 0 && string(r.Thinking) != "null" {
		th, err := api.ReadThinking(r.Thinking)
		if err != nil {
			return nil, errorf("thinking", "thinking: %v", err)
		}
		c.Thinking = compact(r.Thinking) // exact, for a route that speaks Anthropic
		c.ReasoningEffort = effortOf(th)
	}
	if oc := r.OutputConfig; oc != nil {
		if oc.Effort != "" {
			e, ok := efforts[oc.Effort]
			if !ok {
				return nil, errorf("output_config.effort", "output_config.effort must be low, medium, high or max, got %q", oc.Effort)
			}
			c.ReasoningEffort = e // the client's own level wins over the one a budget suggests
		}
		if len(oc.Format) > 0 && string(oc.Format) != "null" {
			rf, err := responseFormat(oc.Format)
			if err != nil {
				return nil, err
			}
			c.ResponseFormat = rf
		}
	}
	if len(r.System) > 0 && string(r.System) != "null" {
		parts, err := textParts(r.System, "system")
		if err != nil {
			return nil, err
		}
		parts = slices.DeleteFunc(parts, isBillingHeader)
		if len(parts) > 0 {
			c.Messages = append(c.Messages, partsMessage("system", parts))
		}
	}
	for i, m := range r.Messages {
		msgs, err := convertMessage(m, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		c.Messages = append(c.Messages, msgs...)
	}
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, errorf(fmt.Sprintf("tools[%d].type", i), "tool type %q (a server tool) is not supported by the gateway: only client tools with an input_schema", t.Type)
		}
		if t.Name == "" {
			return nil, errorf(fmt.Sprintf("tools[%d].name", i), "missing required field: tools[%d].name", i)
		}
		c.Tools = append(c.Tools, api.Tool{Type: "function", Function: api.FunctionDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema},
			CacheControl: t.CacheControl})
	}
	if tc := r.ToolChoice; tc != nil {
		var choice string
		switch tc.Type {
		case "auto", "":
			choice = `"auto"`
		case "any":
			choice = `"required"`
		case "none":
			choice = `"none"`
		case "tool":
			if tc.Name == "" {
				return nil, errorf("tool_choice.name", `tool_choice of type "tool" needs a name`)
			}
			b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
			choice = string(b)
		default:
			return nil, errorf("tool_choice.type", "unknown tool_choice type %q (want auto, any, tool or none)", tc.Type)
		}
		c.ToolChoice = json.RawMessage(choice)
		if tc.DisableParallelToolUse {
			f := false
			c.ParallelToolCalls = &f
		}
	}
	return c, nil
}

// efforts maps output_config.effort to reasoning_effort: max, above high,
// has no OpenAI level of its own (xhigh is known to few models, and Gemini's
// budgets stop at high).
var efforts = map[string]string{"low": "low", "medium": "medium", "high": "high", "max": "high"}

// responseFormat is output_config.format as OpenAI's response_format: a
// json_schema format becomes {"type":"json_schema","json_schema":{"name":
// "output","schema":…}}. Not "strict": Anthropic constrains the answer to
// the schema, but OpenAI's strict mode refuses schemas outside its subset
// (an optional property, a format keyword) that Anthropic accepts, and the
// schema as a guide is nearer the request than a 400.
func responseFormat(raw json.RawMessage) (json.RawMessage, error) {
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, errorf("output_config.format", "output_config.format must be an object with a type")
	}
	if f.Type != "json_schema" {
		return nil, errorf("output_config.format.type", "output_config.format.type %q is not supported (want json_schema)", f.Type)
	}
	if len(f.Schema) == 0 || f.Schema[0] != '{' {
		return nil, errorf("output_config.format.schema", "output_config.format.schema must be a JSON Schema object")
	}
	b, err := json.Marshal(map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": "output", "schema": json.RawMessage(compact(f.Schema))}})
	if err != nil {
		return nil, errorf("output_config.format.schema", "output_config.format.schema: %v", err)
	}
	return b, nil
}

// isBillingHeader reports the system text block Claude Code opens every
// request with ("x-anthropic-billing-header: cc_version=2.1.197.3d3;
// cc_entrypoint=sdk-cli;"): attribution for Anthropic's billing, not an
// instruction, and different in each request (the version's suffix), so
// on another provider it would only cost tokens and, standing first,
// defeat that provider's prefix cache. It is left out of the translation.
func isBillingHeader(p api.ContentPart) bool {
	return p.Type == "text" && strings.HasPrefix(p.Text, "x-anthropic-billing-header:")
}

// effortOf is the reasoning_effort nearest a thinking object, for an
// OpenAI-dialect route (which has no exact budget): an enabled budget up to
// 2048 tokens is low, up to 8192 medium, above high (the anthropic
// adapter's budgets for those levels). Adaptive and disabled give none,
// leaving the model's default: OpenAI's "none" is accepted by few models.
func effortOf(th api.Thinking) string {
	if th.Type != "enabled" {
		return ""
	}
	switch b := th.BudgetTokens; {
	case b <= 2048:
		return "low"
	case b <= 8192:
		return "medium"
	}
	return "high"
}

// convertMessage turns one Anthropic turn into OpenAI messages: a user
// turn's tool results become tool messages (first, as OpenAI wants them
// right after the assistant's calls), its other blocks one user message.
func convertMessage(m Message, path string) ([]api.Message, error) {
	switch m.Role {
	case "user", "assistant":
	case "system":
		// A system message within the conversation (Claude Code sends one
		// at messages[1], beta mid-conversation-system-2026-04-07): a
		// system message at the same place, where OpenAI reads it with a
		// system message's authority at that point of the conversation.
		// Gemini has one systemInstruction: its adapter appends it there
		// (in order after the top-level system), which keeps its authority
		// and loses only its position; a user turn quoting it would keep the
		// position but speak with the user's voice, which changes what the
		// model may do with it.
		parts, err := textParts(m.Content, path+".content")
		if err != nil {
			return nil, err
		}
		return []api.Message{partsMessage("system", parts)}, nil
	default:
		return nil, errorf(path+".role", "role must be \"user\", \"assistant\" or \"system\", got %q", m.Role)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []api.Message{api.TextMessage(m.Role, s)}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(m.Content, &raws); err != nil {
		return nil, errorf(path+".content", "%s.content must be a string or an array of content blocks", path)
	}
	var (
		out       []api.Message
		parts     []api.ContentPart
		calls     []api.ToolCall
		reasoning strings.Builder
		thinking  []api.ThinkingBlock
		attached  []api.ContentPart // the tool results' images and documents, for OpenAI routes
	)
	for j, raw := range raws {
		bp := fmt.Sprintf("%s.content[%d]", path, j)
		b, err := api.ReadTyped[Block](raw, bp, "content block", "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking")
		if err != nil {
			return nil, err
		}
		switch b.Type {
		case "text":
			parts = append(parts, api.ContentPart{Type: "text", Text: b.Text, CacheControl: b.CacheControl})
		case "image":
			if m.Role != "user" {
				return nil, errorf(bp, "an image block is only allowed in a user turn")
			}
			url, err := imageURL(b.Source, bp)
			if err != nil {
				return nil, err
			}
			parts = append(parts, api.ContentPart{Type: "image_url", ImageURL: &api.ImageURL{URL: url}, CacheControl: b.CacheControl})
		case "document":
			if m.Role != "user" {
				return nil, errorf(bp, "a document block is only allowed in a user turn")
			}
			p, err := documentPart(raw, b, bp)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "tool_use":
			if m.Role != "assistant" {
				return nil, errorf(bp, "a tool_use block is only allowed in an assistant turn")
			}
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			calls = append(calls, api.ToolCall{ID: b.ID, Type: "function", Function: api.FunctionCall{Name: b.Name, Arguments: string(compact(args))},
				CacheControl: b.CacheControl})
		case "tool_result":
			if m.Role != "user" {
				return nil, errorf(bp, "a tool_result block is only allowed in a user turn")
			}
			text, att, err := resultParts(b.Content, bp)
			if err != nil {
				return nil, err
			}
			if b.IsError && !strings.HasPrefix(text, "Error") {
				text = "Error: " + text
			}
			attached = append(attached, att...)
			out = append(out, api.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: jsonString(text), ToolResult: compact(raw)})
		case "thinking":
			reasoning.WriteString(b.Thinking)
			thinking = append(thinking, api.ThinkingBlock{Type: "thinking", Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			// Encrypted reasoning only Anthropic can read: carried for it.
			thinking = append(thinking, api.ThinkingBlock{Type: "redacted_thinking", Data: b.Data})
		}
	}
	if len(attached) > 0 {
		// OpenAI's tool messages hold text: the images and documents follow
		// the tool messages in a user message of their own.
		msg := partsMessage("user", attached)
		msg.Attached = true
		out = append(out, msg)
	}
	if len(parts) > 0 || len(calls) > 0 || len(thinking) > 0 {
		msg := partsMessage(m.Role, parts)
		msg.ToolCalls = calls
		msg.ReasoningContent = reasoning.String()
		msg.ThinkingBlocks = thinking
		out = append(out, msg)
	}
	return out, nil
}

// partsMessage makes a message of parts: a plain string when they are one
// text part without cache_control, else an array.
func partsMessage(role string, parts []api.ContentPart) api.Message {
	switch {
	case len(parts) == 0:
		return api.Message{Role: role}
	case len(parts) == 1 && parts[0].Type == "text" && len(parts[0].CacheControl) == 0:
		return api.TextMessage(role, parts[0].Text)
	}
	b, _ := json.Marshal(parts)
	return api.Message{Role: role, Content: b, ContentParts: parts} // typed too: a document's block is never encoded
}

// textParts reads a string or an array of text blocks.
func textParts(raw json.RawMessage, path string) ([]api.ContentPart, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []api.ContentPart{{Type: "text", Text: s}}, nil
	}
	var blocks []Block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, errorf(path, "%s must be a string or an array of text blocks", path)
	}
	parts := make([]api.ContentPart, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return nil, errorf(fmt.Sprintf("%s[%d].type", path, i), "%s[%d] must be a text block, got %q", path, i, b.Type)
		}
		parts = append(parts, api.ContentPart{Type: "text", Text: b.Text, CacheControl: b.CacheControl})
	}
	return parts, nil
}

// resultParts reads a tool result's content: its text blocks joined, and
// its image and document blocks as the content parts an OpenAI route gets
// in a user message after the tool messages.
func resultParts(raw json.RawMessage, path string) (string, []api.ContentPart, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return "", nil, errorf(path+".content", "%s.content must be a string or an array of blocks", path)
	}
	var (
		b   strings.Builder
		att []api.ContentPart
	)
	for i, r := range raws {
		bp := fmt.Sprintf("%s.content[%d]", path, i)
		bl, err := api.ReadTyped[Block](r, bp, "content block", "text", "image", "document")
		if err != nil {
			return "", nil, err
		}
		switch bl.Type {
		case "text":
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(bl.Text)
		case "image":
			url, err := imageURL(bl.Source, bp)
			if err != nil {
				return "", nil, err
			}
			att = append(att, api.ContentPart{Type: "image_url", ImageURL: &api.ImageURL{URL: url}})
		case "document":
			p, err := documentPart(r, bl, bp)
			if err != nil {
				return "", nil, err
			}
			att = append(att, p)
		}
	}
	return b.String(), att, nil
}

// documentPart is a document block as a content part: the block as sent
// (ContentPart.Document, for an Anthropic route), and its nearest OpenAI
// form: a base64 PDF as a "file" part, a text document as text. Other
// sources (url, file, content) have none: the part is of type "document",
// which an OpenAI-dialect upstream refuses with a 400 naming it.
func documentPart(raw json.RawMessage, b Block, path string) (api.ContentPart, error) {
	p := api.ContentPart{Type: "document", Document: compact(raw), CacheControl: b.CacheControl}
	src := b.Source
	switch {
	case src == nil:
		return p, errorf(path+".source", "a document block needs a source")
	case src.Type == "base64" && src.MediaType == "application/pdf":
		name := b.Title
		if name == "" {
			name = "document.pdf"
		}
		p.Type, p.File = "file", &api.File{FileData: "data:application/pdf;base64," + src.Data, Filename: name}
	case src.Type == "text":
		p.Type, p.Text = "text", src.Data
	}
	return p, nil
}

func imageURL(src *ImageSource, path string) (string, error) {
	switch {
	case src == nil:
		return "", errorf(path+".source", "an image block needs a source")
	case src.Type == "base64":
		return "data:" + src.MediaType + ";base64," + src.Data, nil
	case src.Type == "url":
		return src.URL, nil
	}
	return "", errorf(path+".source.type", "image source type %q is not supported (want base64 or url)", src.Type)
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// maxUser is the longest user OpenAI accepts.
const maxUser = 64

// userID is metadata.user_id as an OpenAI user: itself when it fits,
// else "u-" and 40 hex digits of its SHA-256, the same for the same id, so
// an upstream's per-user attribution and the gateway's affinity still see
// one user.
func userID(id string) string {
	if len(id) <= maxUser {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "u-" + hex.EncodeToString(sum[:20])
}
