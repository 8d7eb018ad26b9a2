package converse

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// The Converse request, as much of it as the translation writes
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html).
type (
	converseRequest struct {
		Messages                     []message        `json:"messages"`
		System                       []systemBlock    `json:"system,omitempty"`
		InferenceConfig              *inferenceConfig `json:"inferenceConfig,omitempty"`
		ToolConfig                   *toolConfig      `json:"toolConfig,omitempty"`
		AdditionalModelRequestFields json.RawMessage  `json:"additionalModelRequestFields,omitempty"`
		OutputConfig                 *outputConfig    `json:"outputConfig,omitempty"`
	}
	message struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}
	// block is a ContentBlock, a union: exactly one member is set.
	block struct {
		Text             string          `json:"text,omitempty"`
		Image            *image          `json:"image,omitempty"`
		Document         *document       `json:"document,omitempty"`
		ToolUse          *toolUse        `json:"toolUse,omitempty"`
		ToolResult       *toolResult     `json:"toolResult,omitempty"`
		ReasoningContent *reasoningBlock `json:"reasoningContent,omitempty"`
		CachePoint       *cachePoint     `json:"cachePoint,omitempty"`
	}
	image struct {
		Format string `json:"format"` // png, jpeg, gif, webp
		Source source `json:"source"`
	}
	document struct {
		Format string `json:"format"` // pdf, csv, doc, docx, xls, xlsx, html, txt, md
		Name   string `json:"name"`
		Source source `json:"source"`
	}
	source struct {
		Bytes string `json:"bytes"` // base64
	}
	toolUse struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	}
	toolResult struct {
		ToolUseID string        `json:"toolUseId"`
		Content   []resultBlock `json:"content"`
		Status    string        `json:"status,omitempty"` // success, error
	}
	resultBlock struct {
		Text string `json:"text"`
	}
	reasoningBlock struct {
		ReasoningText   *reasoningText `json:"reasoningText,omitempty"`
		RedactedContent string         `json:"redactedContent,omitempty"` // base64
	}
	reasoningText struct {
		Text      string `json:"text"`
		Signature string `json:"signature,omitempty"`
	}
	cachePoint struct {
		Type string `json:"type"`          // default
		TTL  string `json:"ttl,omitempty"` // 5m, 1h
	}
	systemBlock struct {
		Text       string      `json:"text,omitempty"`
		CachePoint *cachePoint `json:"cachePoint,omitempty"`
	}
	inferenceConfig struct {
		MaxTokens     int      `json:"maxTokens,omitempty"`
		Temperature   *float64 `json:"temperature,omitempty"`
		TopP          *float64 `json:"topP,omitempty"`
		StopSequences []string `json:"stopSequences,omitempty"`
	}
	toolConfig struct {
		Tools      []tool      `json:"tools"`
		ToolChoice *toolChoice `json:"toolChoice,omitempty"`
	}
	tool struct {
		ToolSpec   *toolSpec   `json:"toolSpec,omitempty"`
		CachePoint *cachePoint `json:"cachePoint,omitempty"`
	}
	toolSpec struct {
		Name        string      `json:"name"`
		Description string      `json:"description,omitempty"`
		InputSchema inputSchema `json:"inputSchema"`
	}
	inputSchema struct {
		JSON json.RawMessage `json:"json"`
	}
	toolChoice struct {
		Auto *struct{}     `json:"auto,omitempty"`
		Any  *struct{}     `json:"any,omitempty"`
		Tool *specificTool `json:"tool,omitempty"`
	}
	specificTool struct {
		Name string `json:"name"`
	}
	outputConfig struct {
		Effort     string      `json:"effort,omitempty"`
		TextFormat *textFormat `json:"textFormat,omitempty"`
	}
	textFormat struct {
		Type      string    `json:"type"` // json_schema
		Structure structure `json:"structure"`
	}
	structure struct {
		JSONSchema jsonSchema `json:"jsonSchema"`
	}
	jsonSchema struct {
		Schema      string `json:"schema"` // the schema as a JSON text
		Name        string `json:"name,omitempty"`
		Description string `json:"description,omitempty"`
	}
)

// emptyResult is the text of a tool result that has none: Bedrock refuses
// an empty text block, and every toolUse needs its toolResult.
const emptyResult = "(empty)"

// efforts are outputConfig.effort's values for reasoning_effort.
var efforts = map[string]string{"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh"}

// invalidError and unsupportedError are provider.Invalid and
// provider.Unsupported of this adapter.
func invalidError(format string, a ...any) error { return provider.Invalid("converse", format, a...) }

func unsupportedError(format string, a ...any) error {
	return provider.Unsupported("converse", format, a...)
}

// Body returns the Converse request body for req (see the package comment
// for the mapping). A request the translation cannot express is a
// *provider.Error with status 400 naming the field.
func Body(req *provider.Request) ([]byte, error) {
	chat, err := provider.ChatOf("converse", req)
	if err != nil {
		return nil, err
	}
	var r converseRequest
	toolBlocks, err := translateMessages(chat.Messages, &r)
	if err != nil {
		return nil, err
	}
	if err := translateTools(chat, &r, toolBlocks); err != nil {
		return nil, err
	}
	if err := translateConfig(chat, req.Body, &r); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&r); err != nil {
		return nil, invalidError("encode request: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// translateMessages fills r.Messages and r.System; toolBlocks reports
// whether the history holds toolUse or toolResult blocks (Converse then
// wants a toolConfig).
func translateMessages(msgs []api.Message, r *converseRequest) (toolBlocks bool, err error) {
	if len(msgs) == 0 {
		return false, invalidError("messages: at least one message is required")
	}
	add := func(role string, blocks ...block) {
		if len(blocks) == 0 {
			return
		}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			// Converse wants user and assistant turns to alternate: tool
			// results and the user message after them are one user turn.
			r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
			return
		}
		r.Messages = append(r.Messages, message{Role: role, Content: blocks})
	}
	docs := 0 // documents named so far: Converse wants each name unique
	for i, m := range msgs {
		where := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case "system", "developer":
			parts, err := m.Parts()
			if err != nil {
				return false, invalidError("%s.content: %v", where, err)
			}
			for j, p := range parts {
				if p.Type != "text" {
					return false, invalidError("%s.content[%d]: the converse adapter takes only text parts in %s messages, got %q", where, j, m.Role, p.Type)
				}
				if strings.TrimSpace(p.Text) != "" {
					r.System = append(r.System, systemBlock{Text: p.Text})
				}
				if cp := cachePointOf(p.CacheControl); cp != nil && len(r.System) > 0 {
					r.System = append(r.System, systemBlock{CachePoint: cp})
				}
			}
		case "user":
			blocks, err := userBlocks(m, where, &docs)
			if err != nil {
				return false, err
			}
			add("user", blocks...)
		case "assistant":
			blocks, err := assistantBlocks(m, where)
			if err != nil {
				return false, err
			}
			if len(m.ToolCalls) > 0 {
				toolBlocks = true
			}
			add("assistant", blocks...)
		case "tool":
			text, err := textOnly(m, where)
			if err != nil {
				return false, err
			}
			if m.ToolCallID == "" {
				return false, invalidError("%s.tool_call_id: required", where)
			}
			if text == "" {
				text = emptyResult
			}
			res := &toolResult{ToolUseID: m.ToolCallID, Content: []resultBlock{{Text: text}}}
			if isError(m.ToolResult) {
				res.Status = "error"
			}
			toolBlocks = true
			add("user", block{ToolResult: res})
		default:
			return false, invalidError("%s.role: %q is not a role the converse adapter translates (system, developer, user, assistant, tool)", where, m.Role)
		}
	}
	if len(r.Messages) == 0 {
		return false, unsupportedError("messages: no user or assistant content to send (converse needs at least one message besides the system prompt)")
	}
	return toolBlocks, nil
}

// isError reports whether an Anthropic tool_result block (a /v1/messages
// client's, api.Message.ToolResult) says is_error: true.
func isError(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	var b struct {
		IsError bool `json:"is_error"`
	}
	return json.Unmarshal(raw, &b) == nil && b.IsError
}

// cachePointOf is the cachePoint block of a part's cache_control
// ({"type":"ephemeral"}, with an optional ttl of 5m or 1h); nil when none.
func cachePointOf(cc json.RawMessage) *cachePoint {
	if len(cc) == 0 || string(cc) == "null" {
		return nil
	}
	var c struct {
		TTL string `json:"ttl"`
	}
	json.Unmarshal(cc, &c)
	cp := &cachePoint{Type: "default"}
	if c.TTL == "5m" || c.TTL == "1h" {
		cp.TTL = c.TTL
	}
	return cp
}

// textOnly is provider.TextOnly for this adapter.
func textOnly(m api.Message, where string) (string, error) {
	return provider.TextOnly("converse", m, where)
}

func userBlocks(m api.Message, where string, docs *int) ([]block, error) {
	parts, err := m.Parts()
	if err != nil {
		return nil, invalidError("%s.content: %v", where, err)
	}
	out := make([]block, 0, len(parts))
	for j, p := range parts {
		at := where + ".content[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case "text":
			// Bedrock refuses empty text blocks.
			if strings.TrimSpace(p.Text) != "" {
				out = append(out, block{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, invalidError("%s.image_url.url: required", at)
			}
			b, err := imageBlock(p.ImageURL.URL, at)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		case "file":
			if p.File == nil || p.File.FileData == "" {
				return nil, unsupportedError("%s.file: the converse adapter takes a file's data as a data: URL (file_data), not an uploaded file's id", at)
			}
			*docs++
			b, err := documentBlock(p.File, *docs, at)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		default:
			return nil, unsupportedError("%s.type: content parts of type %q are not supported by the converse adapter (text, image_url, file)", at, p.Type)
		}
		if cp := cachePointOf(p.CacheControl); cp != nil && len(out) > 0 {
			out = append(out, block{CachePoint: cp})
		}
	}
	return out, nil
}

// dataURL splits a base64 data: URL into its MIME type and data.
func dataURL(url string) (mime, data string, ok bool) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	mime, isBase64 := strings.CutSuffix(meta, ";base64")
	return strings.ToLower(mime), data, ok && isBase64 && mime != ""
}

// imageFormats are Converse's image formats by MIME type.
var imageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

// imageBlock is an image from a data: URL; Converse takes images by value
// (or from S3), never by an https: URL.
func imageBlock(url, at string) (block, error) {
	mime, data, ok := dataURL(url)
	if !ok {
		if strings.HasPrefix(url, "data:") {
			return block{}, invalidError("%s.image_url.url: a data: URL must be data:<mime type>;base64,<data>", at)
		}
		return block{}, unsupportedError("%s.image_url.url: the converse adapter takes images as base64 data: URLs (Bedrock does not fetch URLs)", at)
	}
	format, known := imageFormats[mime]
	if !known {
		return block{}, unsupportedError("%s.image_url.url: image type %q is not one Converse takes (png, jpeg, gif, webp)", at, mime)
	}
	return block{Image: &image{Format: format, Source: source{Bytes: data}}}, nil
}

// documentFormats are Converse's document formats by MIME type.
var documentFormats = map[string]string{
	"application/pdf": "pdf", "text/csv": "csv", "application/msword": "doc",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
	"application/vnd.ms-excel": "xls",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
	"text/html": "html", "text/plain": "txt", "text/markdown": "md",
}

// documentBlock is a file part as a document: its format from the data:
// URL's MIME type, its name the file name reduced to what Converse allows
// (letters, digits, single spaces, hyphens, parentheses, brackets), made
// unique with the document's number n.
func documentBlock(f *api.File, n int, at string) (block, error) {
	mime, data, ok := dataURL(f.FileData)
	if !ok {
		return block{}, invalidError("%s.file.file_data: a data: URL must be data:<mime type>;base64,<data>", at)
	}
	format, known := documentFormats[mime]
	if !known {
		return block{}, unsupportedError("%s.file.file_data: document type %q is not one Converse takes (pdf, csv, doc, docx, xls, xlsx, html, txt, md)", at, mime)
	}
	name := documentName(f.Filename)
	if name == "" {
		name = "document"
	}
	name += " " + strconv.Itoa(n)
	return block{Document: &document{Format: format, Name: name, Source: source{Bytes: data}}}, nil
}

func documentName(file string) string {
	if dot := strings.LastIndexByte(file, '.'); dot > 0 {
		file = file[:dot]
	}
	var b strings.Builder
	space := false
	for _, r := range file {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-()[]", r):
			b.WriteRune(r)
			space = false
		case !space && b.Len() > 0:
			b.WriteByte(' ')
			space = true
		}
		if b.Len() >= 100 {
			break
		}
	}
	return strings.TrimSpace(b.String())
}

func assistantBlocks(m api.Message, where string) ([]block, error) {
	var out []block
	// Signed thinking first, as the turn produced it: a model that thinks
	// wants its own blocks back before the tool calls they led to.
	for _, tb := range m.ThinkingBlocks {
		switch {
		case tb.Type == "thinking" && tb.Signature != "":
			out = append(out, block{ReasoningContent: &reasoningBlock{ReasoningText: &reasoningText{Text: tb.Thinking, Signature: tb.Signature}}})
		case tb.Type == "redacted_thinking" && tb.Data != "":
			out = append(out, block{ReasoningContent: &reasoningBlock{RedactedContent: tb.Data}})
		}
	}
	parts, err := m.Parts()
	if err != nil {
		return nil, invalidError("%s.content: %v", where, err)
	}
	for j, p := range parts {
		switch p.Type {
		case "text":
			if strings.TrimSpace(p.Text) != "" {
				out = append(out, block{Text: p.Text})
			}
		case "refusal":
		default:
			return nil, invalidError("%s.content[%d]: the converse adapter takes only text parts in assistant messages, got %q", where, j, p.Type)
		}
		if cp := cachePointOf(p.CacheControl); cp != nil && len(out) > 0 {
			out = append(out, block{CachePoint: cp})
		}
	}
	for j, tc := range m.ToolCalls {
		at := where + ".tool_calls[" + strconv.Itoa(j) + "]"
		if tc.Type != "" && tc.Type != "function" {
			return nil, unsupportedError("%s.type: %q tool calls are not supported by the converse adapter (function)", at, tc.Type)
		}
		if tc.Function.Name == "" {
			return nil, invalidError("%s.function.name: required", at)
		}
		if tc.ID == "" {
			return nil, invalidError("%s.id: required (the tool message answering it names it)", at)
		}
		args := strings.TrimSpace(tc.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if !isObject(args) {
			return nil, invalidError("%s.function.arguments: not a JSON object (Converse takes a call's input as an object)", at)
		}
		out = append(out, block{ToolUse: &toolUse{ToolUseID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(args)}})
		if cp := cachePointOf(tc.CacheControl); cp != nil {
			out = append(out, block{CachePoint: cp})
		}
	}
	return out, nil
}

func isObject(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "{") && json.Valid([]byte(s))
}

// emptySchema is the input schema of a function declared without
// parameters: Converse requires one.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func translateTools(chat *api.ChatRequest, r *converseRequest, toolBlocks bool) error {
	var tools []tool
	for i, t := range chat.Tools {
		at := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "function" {
			return unsupportedError("%s.type: %q tools are not supported by the converse adapter (function)", at, t.Type)
		}
		if t.Function.Name == "" {
			return invalidError("%s.function.name: required", at)
		}
		spec := &toolSpec{Name: t.Function.Name, Description: t.Function.Description, InputSchema: inputSchema{JSON: emptySchema}}
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" {
			if p[0] != '{' || !json.Valid(p) {
				return invalidError("%s.function.parameters: not a JSON Schema object", at)
			}
			spec.InputSchema.JSON = json.RawMessage(p)
		}
		tools = append(tools, tool{ToolSpec: spec})
		if cp := cachePointOf(t.CacheControl); cp != nil {
			tools = append(tools, tool{CachePoint: cp})
		}
	}
	choice, names, err := readToolChoice(chat.ToolChoice)
	if err != nil {
		return err
	}
	if names != nil {
		// allowed_tools: only those are offered.
		kept := tools[:0:0]
		for _, t := range tools {
			if t.ToolSpec == nil || containsName(names, t.ToolSpec.Name) {
				kept = append(kept, t)
			}
		}
		tools = kept
	}
	if choice == "none" {
		if toolBlocks {
			// Converse has no "none": the tools are withheld, and a
			// history with tool calls needs them declared.
			return unsupportedError("tool_choice: \"none\" cannot be expressed on Converse for a conversation that holds tool calls (Bedrock wants its tools declared, and has no choice that forbids calling them)")
		}
		return nil
	}
	if !hasSpec(tools) {
		if toolBlocks {
			return unsupportedError("tools: the conversation holds tool calls but the request declares no tools, which Bedrock's Converse refuses")
		}
		return nil
	}
	tc := &toolConfig{Tools: tools}
	switch choice {
	case "auto":
		tc.ToolChoice = &toolChoice{Auto: &struct{}{}}
	case "required":
		tc.ToolChoice = &toolChoice{Any: &struct{}{}}
	case "":
	default:
		if !hasName(tools, choice) {
			return invalidError("tool_choice.function.name: %q is not one of the request's tools", choice)
		}
		tc.ToolChoice = &toolChoice{Tool: &specificTool{Name: choice}}
	}
	r.ToolConfig = tc
	return nil
}

func hasSpec(tools []tool) bool {
	for _, t := range tools {
		if t.ToolSpec != nil {
			return true
		}
	}
	return false
}

func hasName(tools []tool, name string) bool {
	for _, t := range tools {
		if t.ToolSpec != nil && t.ToolSpec.Name == name {
			return true
		}
	}
	return false
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// readToolChoice reads tool_choice: "" (none given), "auto", "none",
// "required", or a function's name; names are an allowed_tools choice's
// tools (nil for other choices), whose mode gives auto or required.
func readToolChoice(raw json.RawMessage) (choice string, names []string, err error) {
	tc := bytes.TrimSpace(raw)
	if len(tc) == 0 || string(tc) == "null" {
		return "", nil, nil
	}
	var mode string
	if json.Unmarshal(tc, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			return mode, nil, nil
		}
		return "", nil, invalidError("tool_choice: %q is not one of none, auto, required", mode)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		AllowedTools struct {
			Mode  string `json:"mode"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		} `json:"allowed_tools"`
	}
	if err := json.Unmarshal(tc, &obj); err != nil {
		return "", nil, invalidError("tool_choice: must be a string or an object")
	}
	switch obj.Type {
	case "function":
		if obj.Function.Name == "" {
			return "", nil, invalidError("tool_choice.function.name: required")
		}
		return obj.Function.Name, nil, nil
	case "allowed_tools":
		names = []string{}
		for _, t := range obj.AllowedTools.Tools {
			if t.Function.Name != "" {
				names = append(names, t.Function.Name)
			}
		}
		switch obj.AllowedTools.Mode {
		case "required":
			return "required", names, nil
		case "auto", "":
			return "auto", names, nil
		}
		return "", nil, invalidError("tool_choice.allowed_tools.mode: %q is not auto or required", obj.AllowedTools.Mode)
	}
	return "", nil, invalidError("tool_choice.type: %q is not function or allowed_tools", obj.Type)
}

func translateConfig(chat *api.ChatRequest, body []byte, r *converseRequest) error {
	ic := &inferenceConfig{MaxTokens: chat.OutputLimit(), Temperature: chat.Temperature, TopP: chat.TopP}
	if ic.MaxTokens < 0 {
		return invalidError("max_tokens: must not be negative")
	}
	stop, err := chat.StopSequences()
	if err != nil {
		return invalidError("stop: %v", err)
	}
	for _, s := range stop {
		if s != "" { // Converse refuses empty stop sequences
			ic.StopSequences = append(ic.StopSequences, s)
		}
	}
	if ic.MaxTokens != 0 || ic.Temperature != nil || ic.TopP != nil || ic.StopSequences != nil {
		r.InferenceConfig = ic
	}
	oc := &outputConfig{}
	if rf := bytes.TrimSpace(chat.ResponseFormat); len(rf) > 0 && string(rf) != "null" {
		var f struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Schema      json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(rf, &f); err != nil {
			return invalidError("response_format: must be an object with a type")
		}
		switch f.Type {
		case "text":
		case "json_schema":
			if f.JSONSchema == nil {
				return invalidError("response_format.json_schema: required for type json_schema")
			}
			s := bytes.TrimSpace(f.JSONSchema.Schema)
			if len(s) == 0 || s[0] != '{' {
				return invalidError("response_format.json_schema.schema: a JSON Schema object is required")
			}
			oc.TextFormat = &textFormat{Type: "json_schema", Structure: structure{JSONSchema: jsonSchema{
				Schema: string(s), Name: f.JSONSchema.Name, Description: f.JSONSchema.Description}}}
		case "json_object":
			return unsupportedError("response_format: json_object has no Converse counterpart (use json_schema)")
		default:
			return invalidError("response_format.type: %q is not text, json_object or json_schema", f.Type)
		}
	}
	switch e := chat.ReasoningEffort; e {
	case "", "none":
	default:
		effort, ok := efforts[e]
		if !ok {
			return invalidError("reasoning_effort: %q is not none, minimal, low, medium, high or xhigh", e)
		}
		oc.Effort = effort
	}
	if oc.Effort != "" || oc.TextFormat != nil {
		r.OutputConfig = oc
	}
	extra, err := bodyExtras(body)
	if err != nil {
		return err
	}
	fields := extra.fields
	thinking := chat.Thinking
	if len(thinking) == 0 {
		thinking = extra.thinking
	}
	if len(thinking) > 0 && string(thinking) != "null" {
		if _, err := api.ReadThinking(thinking); err != nil {
			return invalidError("thinking: %v", err)
		}
		// Claude on Converse reads Anthropic's thinking object from the
		// model's own fields.
		if fields, err = api.SetMembers(orObject(fields), map[string]json.RawMessage{"thinking": thinking}); err != nil {
			return invalidError("additionalModelRequestFields: %v", err)
		}
	}
	if len(fields) > 0 {
		r.AdditionalModelRequestFields = fields
	}
	if extra.n > 1 {
		return unsupportedError("n: Converse serves one choice per request (n must be 1)")
	}
	return nil
}

func orObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`{}`)
	}
	return b
}

// extras are the members of a chat body that api.ChatRequest does not
// type but the translation reads.
type extras struct {
	fields   json.RawMessage // additionalModelRequestFields, an object
	thinking json.RawMessage // Anthropic's thinking object
	n        int
}

// bodyExtras reads a chat body's additionalModelRequestFields (passed to
// the model as they are), thinking and n.
func bodyExtras(body []byte) (extras, error) {
	var e extras
	if len(body) == 0 {
		return e, nil
	}
	var b struct {
		Fields   json.RawMessage `json:"additionalModelRequestFields"`
		Thinking json.RawMessage `json:"thinking"`
		N        *float64        `json:"n"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return e, invalidError("body: %v", err)
	}
	if f := bytes.TrimSpace(b.Fields); len(f) > 0 && string(f) != "null" {
		if f[0] != '{' {
			return e, invalidError("additionalModelRequestFields: must be an object")
		}
		e.fields = f
	}
	e.thinking = b.Thinking
	if b.N != nil {
		e.n = int(*b.N)
	}
	return e, nil
}
