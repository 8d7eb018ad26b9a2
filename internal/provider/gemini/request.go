package gemini

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// The GenerateContentRequest, as much of it as the translation writes
// (https://ai.google.dev/api/generate-content#request-body).
type (
	genRequest struct {
		Contents          []content         `json:"contents"`
		SystemInstruction *content          `json:"systemInstruction,omitempty"`
		Tools             []tool            `json:"tools,omitempty"`
		ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
		GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
	}
	content struct {
		Role  string    `json:"role,omitempty"`
		Parts []reqPart `json:"parts"`
	}
	reqPart struct {
		Text             string            `json:"text,omitempty"`
		InlineData       *blob             `json:"inlineData,omitempty"`
		FileData         *fileData         `json:"fileData,omitempty"`
		FunctionCall     *functionCall     `json:"functionCall,omitempty"`
		FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
		ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	}
	blob struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	}
	fileData struct {
		MimeType string `json:"mimeType,omitempty"`
		FileURI  string `json:"fileUri"`
	}
	functionCall struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	functionResponse struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	}
	tool struct {
		FunctionDeclarations []functionDeclaration `json:"functionDeclarations,omitempty"`
		GoogleSearch         *googleSearch         `json:"google_search,omitempty"` // search.go
	}
	functionDeclaration struct {
		Name                 string          `json:"name"`
		Description          string          `json:"description,omitempty"`
		ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
	}
	toolConfig struct {
		FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
	}
	functionCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	}
	generationConfig struct {
		StopSequences      []string        `json:"stopSequences,omitempty"`
		ResponseMimeType   string          `json:"responseMimeType,omitempty"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
		MaxOutputTokens    int             `json:"maxOutputTokens,omitempty"`
		Temperature        *float64        `json:"temperature,omitempty"`
		TopP               *float64        `json:"topP,omitempty"`
		Seed               *int64          `json:"seed,omitempty"`
		PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
		FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
		ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
	}
	thinkingConfig struct {
		ThinkingBudget  *int `json:"thinkingBudget,omitempty"`
		IncludeThoughts bool `json:"includeThoughts,omitempty"`
	}
)

// skipSignature is the value Google documents for a functionCall part
// whose thought signature is not known (history from another model, or a
// client that cannot carry it): Gemini 3 rejects a function call turn
// without a signature, and skips the check for this one.
// https://ai.google.dev/gemini-api/docs/thought-signatures
const skipSignature = "skip_thought_signature_validator"

// thinkingBudgets are the thinking budgets of reasoning_effort, Google's
// own mapping for its OpenAI-compatible endpoint
// (https://ai.google.dev/gemini-api/docs/openai#thinking): low, medium and
// high are 1K, 8K and 24K tokens, "none" turns thinking off. "minimal",
// which that endpoint maps only for Gemini 3 levels, gets low's budget,
// which every Gemini 2.5 model accepts.
var thinkingBudgets = map[string]int{"none": 0, "minimal": 1024, "low": 1024, "medium": 8192, "high": 24576}

// invalidError and unsupportedError are provider.Invalid and
// provider.Unsupported of this adapter.
func invalidError(format string, a ...any) error { return provider.Invalid("gemini", format, a...) }

func unsupportedError(format string, a ...any) error {
	return provider.Unsupported("gemini", format, a...)
}

// Body returns the GenerateContentRequest body for req (see the package
// comment for the mapping). A request the translation cannot express is
// an *provider.Error with status 400 naming the field.
func Body(req *provider.Request) ([]byte, error) {
	chat, err := provider.ChatOf("gemini", req)
	if err != nil {
		return nil, err
	}
	var g genRequest
	if err := translateMessages(chat.Messages, &g); err != nil {
		return nil, err
	}
	if err := translateTools(chat, &g); err != nil {
		return nil, err
	}
	if chat.WebSearch != nil {
		g.Tools = append(g.Tools, tool{GoogleSearch: &googleSearch{}})
	}
	gc, err := translateConfig(chat, req.Body)
	if err != nil {
		return nil, err
	}
	if !gc.empty() {
		g.GenerationConfig = gc
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&g); err != nil {
		// Raw members (schemas, arguments) were validated before.
		return nil, invalidError("encode request: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func translateMessages(msgs []api.Message, g *genRequest) error {
	if len(msgs) == 0 {
		return invalidError("messages: at least one message is required")
	}
	// The name of each tool call, for the tool messages that answer it:
	// Gemini matches a functionResponse to its call by name.
	calls := map[string]string{}
	add := func(role string, parts ...reqPart) {
		if len(parts) == 0 {
			return
		}
		if n := len(g.Contents); n > 0 && g.Contents[n-1].Role == role {
			// Gemini wants user and model turns to alternate; tool results
			// and the user message after them are one user turn.
			g.Contents[n-1].Parts = append(g.Contents[n-1].Parts, parts...)
			return
		}
		g.Contents = append(g.Contents, content{Role: role, Parts: parts})
	}
	for i, m := range msgs {
		where := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case "system", "developer":
			text, err := textOnly(m, where)
			if err != nil {
				return err
			}
			if text == "" {
				continue
			}
			if g.SystemInstruction == nil {
				g.SystemInstruction = &content{}
			}
			g.SystemInstruction.Parts = append(g.SystemInstruction.Parts, reqPart{Text: text})
		case "user":
			parts, err := userParts(m, where)
			if err != nil {
				return err
			}
			add("user", parts...)
		case "assistant":
			parts, err := assistantParts(m, where, calls)
			if err != nil {
				return err
			}
			add("model", parts...)
		case "tool", "function":
			name := m.Name
			if m.Role == "tool" {
				var ok bool
				if name, ok = calls[m.ToolCallID]; !ok {
					return invalidError("%s.tool_call_id: %q answers no tool call of an earlier assistant message", where, m.ToolCallID)
				}
			} else if name == "" {
				return invalidError("%s.name: a function message needs the function's name", where)
			}
			text, err := textOnly(m, where)
			if err != nil {
				return err
			}
			add("user", reqPart{FunctionResponse: &functionResponse{Name: name, Response: toolResponse(text)}})
		default:
			return invalidError("%s.role: %q is not a role the gemini adapter translates (system, developer, user, assistant, tool)", where, m.Role)
		}
	}
	if len(g.Contents) == 0 {
		return unsupportedError("messages: no user or assistant content to send (gemini needs at least one turn besides the system instruction)")
	}
	return nil
}

// textOnly is provider.TextOnly for this adapter.
func textOnly(m api.Message, where string) (string, error) {
	return provider.TextOnly("gemini", m, where)
}

func userParts(m api.Message, where string) ([]reqPart, error) {
	parts, err := m.Parts()
	if err != nil {
		return nil, invalidError("%s.content: %v", where, err)
	}
	out := make([]reqPart, 0, len(parts))
	for j, p := range parts {
		at := where + ".content[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, reqPart{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, invalidError("%s.image_url.url: required", at)
			}
			ip, err := imagePart(p.ImageURL.URL, at)
			if err != nil {
				return nil, err
			}
			out = append(out, ip)
		default:
			return nil, unsupportedError("%s.type: content parts of type %q are not supported by the gemini adapter (text, image_url)", at, p.Type)
		}
	}
	return out, nil
}

// imagePart turns an image URL into a part: a data: URL is sent inline
// (inlineData), an https: URL by reference (fileData), which Gemini fetches
// itself; its MIME type is guessed from the path's extension and omitted
// when unknown.
func imagePart(url, at string) (reqPart, error) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mime, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 || mime == "" {
			return reqPart{}, invalidError("%s.image_url.url: a data: URL must be data:<mime type>;base64,<data>", at)
		}
		return reqPart{InlineData: &blob{MimeType: mime, Data: data}}, nil
	}
	if len(url) > 8 && strings.EqualFold(url[:8], "https://") {
		return reqPart{FileData: &fileData{MimeType: mimeOf(url), FileURI: url}}, nil
	}
	return reqPart{}, unsupportedError("%s.image_url.url: the gemini adapter takes data: and https: URLs", at)
}

// imageTypes are the MIME types of the image extensions Gemini reads
// (https://ai.google.dev/gemini-api/docs/image-understanding), and PDF.
var imageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
	".heic": "image/heic", ".heif": "image/heif", ".gif": "image/gif", ".pdf": "application/pdf",
}

func mimeOf(url string) string {
	path, _, _ := strings.Cut(url, "?")
	path, _, _ = strings.Cut(path, "#")
	dot := strings.LastIndexByte(path, '.')
	if dot < 0 || strings.IndexByte(path[dot:], '/') >= 0 {
		return ""
	}
	return imageTypes[strings.ToLower(path[dot:])]
}

func assistantParts(m api.Message, where string, calls map[string]string) ([]reqPart, error) {
	text, err := textOnly(m, where)
	if err != nil {
		return nil, err
	}
	var out []reqPart
	if text != "" {
		out = append(out, reqPart{Text: text})
	}
	for j, tc := range m.ToolCalls {
		at := where + ".tool_calls[" + strconv.Itoa(j) + "]"
		if tc.Type != "" && tc.Type != "function" {
			return nil, unsupportedError("%s.type: %q tool calls are not supported by the gemini adapter (function)", at, tc.Type)
		}
		if tc.Function.Name == "" {
			return nil, invalidError("%s.function.name: required", at)
		}
		args := strings.TrimSpace(tc.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if !isObject(args) {
			return nil, invalidError("%s.function.arguments: not a JSON object (gemini takes a call's arguments as an object)", at)
		}
		if tc.ID != "" {
			calls[tc.ID] = tc.Function.Name
		}
		p := reqPart{FunctionCall: &functionCall{Name: tc.Function.Name, Args: json.RawMessage(args)}}
		if j == 0 {
			// Only the first call of a turn carries the signature (Gemini
			// 3's parallel calls); OpenAI clients do not keep Gemini's.
			p.ThoughtSignature = skipSignature
		}
		out = append(out, p)
	}
	return out, nil
}

func isObject(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "{") && json.Valid([]byte(s))
}

// toolResponse is a tool result as a functionResponse's response object:
// the content itself when it is a JSON object, else {"content": text}.
func toolResponse(text string) json.RawMessage {
	if isObject(text) {
		return json.RawMessage(text)
	}
	b := api.AppendString([]byte(`{"content":`), text)
	return append(b, '}')
}

func translateTools(chat *api.ChatRequest, g *genRequest) error {
	var decls []functionDeclaration
	for i, t := range chat.Tools {
		at := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "function" {
			return unsupportedError("%s.type: %q tools are not supported by the gemini adapter (function)", at, t.Type)
		}
		if t.Function.Name == "" {
			return invalidError("%s.function.name: required", at)
		}
		d := functionDeclaration{Name: t.Function.Name, Description: t.Function.Description}
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" {
			if p[0] != '{' || !json.Valid(p) {
				return invalidError("%s.function.parameters: not a JSON Schema object", at)
			}
			d.ParametersJSONSchema = json.RawMessage(p)
		}
		decls = append(decls, d)
	}
	if len(decls) > 0 {
		g.Tools = []tool{{FunctionDeclarations: decls}}
	}
	tc := bytes.TrimSpace(chat.ToolChoice)
	if len(tc) == 0 || string(tc) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(tc, &mode) == nil {
		switch mode {
		case "auto":
			g.ToolConfig = &toolConfig{functionCallingConfig{Mode: "AUTO"}}
		case "none":
			g.ToolConfig = &toolConfig{functionCallingConfig{Mode: "NONE"}}
		case "required":
			g.ToolConfig = &toolConfig{functionCallingConfig{Mode: "ANY"}}
		default:
			return invalidError("tool_choice: %q is not one of none, auto, required", mode)
		}
		return nil
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		AllowedTools struct {
			Mode  string `json:"mode"`
			Tools []struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		} `json:"allowed_tools"`
	}
	if err := json.Unmarshal(tc, &obj); err != nil {
		return invalidError("tool_choice: must be a string or an object")
	}
	switch obj.Type {
	case "function":
		if obj.Function.Name == "" {
			return invalidError("tool_choice.function.name: required")
		}
		g.ToolConfig = &toolConfig{functionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{obj.Function.Name}}}
	case "allowed_tools":
		var names []string
		for _, t := range obj.AllowedTools.Tools {
			if t.Function.Name != "" {
				names = append(names, t.Function.Name)
			}
		}
		switch obj.AllowedTools.Mode {
		case "required":
			g.ToolConfig = &toolConfig{functionCallingConfig{Mode: "ANY", AllowedFunctionNames: names}}
		case "auto", "":
			// Gemini restricts names only in ANY mode: in AUTO the model
			// sees only the allowed declarations.
			if len(g.Tools) > 0 && names != nil {
				var kept []functionDeclaration
				for _, d := range g.Tools[0].FunctionDeclarations {
					for _, n := range names {
						if d.Name == n {
							kept = append(kept, d)
							break
						}
					}
				}
				g.Tools[0].FunctionDeclarations = kept
				if len(kept) == 0 {
					g.Tools = nil
				}
			}
			g.ToolConfig = &toolConfig{functionCallingConfig{Mode: "AUTO"}}
		default:
			return invalidError("tool_choice.allowed_tools.mode: %q is not auto or required", obj.AllowedTools.Mode)
		}
	default:
		return invalidError("tool_choice.type: %q is not function or allowed_tools", obj.Type)
	}
	return nil
}

func translateConfig(chat *api.ChatRequest, body []byte) (*generationConfig, error) {
	gc := &generationConfig{
		MaxOutputTokens: chat.OutputLimit(),
		Temperature:     chat.Temperature,
		TopP:            chat.TopP,
		Seed:            chat.Seed,
	}
	stop, err := chat.StopSequences()
	if err != nil {
		return nil, invalidError("stop: %v", err)
	}
	gc.StopSequences = stop
	if rf := bytes.TrimSpace(chat.ResponseFormat); len(rf) > 0 && string(rf) != "null" {
		var f struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(rf, &f); err != nil {
			return nil, invalidError("response_format: must be an object with a type")
		}
		switch f.Type {
		case "text":
		case "json_object":
			gc.ResponseMimeType = "application/json"
		case "json_schema":
			if f.JSONSchema == nil {
				return nil, invalidError("response_format.json_schema: required for type json_schema")
			}
			s := bytes.TrimSpace(f.JSONSchema.Schema)
			if len(s) == 0 || s[0] != '{' {
				return nil, invalidError("response_format.json_schema.schema: a JSON Schema object is required")
			}
			gc.ResponseMimeType = "application/json"
			gc.ResponseJSONSchema = json.RawMessage(s)
		default:
			return nil, invalidError("response_format.type: %q is not text, json_object or json_schema", f.Type)
		}
	}
	if effort := chat.ReasoningEffort; effort != "" {
		budget, ok := thinkingBudgets[effort]
		if !ok {
			return nil, invalidError("reasoning_effort: %q is not none, minimal, low, medium or high", effort)
		}
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: &budget, IncludeThoughts: budget > 0}
	}
	thinking := chat.Thinking
	if err := bodyExtras(body, gc, &thinking); err != nil {
		return nil, err
	}
	if len(thinking) > 0 && string(thinking) != "null" {
		th, err := api.ReadThinking(thinking)
		if err != nil {
			return nil, invalidError("thinking: %v", err)
		}
		gc.ThinkingConfig = thinkingOf(th)
	}
	return gc, nil
}

// thinkingOf is the thinkingConfig of an Anthropic thinking object, which
// wins over reasoning_effort: an enabled budget exact, adaptive as dynamic
// thinking (thinkingBudget -1, the model decides), disabled as 0.
// https://ai.google.dev/gemini-api/docs/thinking#set-budget
func thinkingOf(th api.Thinking) *thinkingConfig {
	budget := 0
	switch th.Type {
	case "enabled":
		budget = th.BudgetTokens
	case "adaptive":
		budget = -1
	}
	return &thinkingConfig{ThinkingBudget: &budget, IncludeThoughts: budget != 0}
}

func (gc *generationConfig) empty() bool {
	return gc.StopSequences == nil && gc.ResponseMimeType == "" && gc.ResponseJSONSchema == nil &&
		gc.MaxOutputTokens == 0 && gc.Temperature == nil && gc.TopP == nil && gc.Seed == nil &&
		gc.PresencePenalty == nil && gc.FrequencyPenalty == nil && gc.ThinkingConfig == nil
}

// bodyExtras reads the members of the client's body that api.ChatRequest
// does not type but Gemini has a field for (presence_penalty,
// frequency_penalty, and Anthropic's thinking object into *thinking when
// the chat request had none), and refuses n > 1. Other members are not read.
func bodyExtras(body []byte, gc *generationConfig, thinking *json.RawMessage) error {
	if len(body) == 0 {
		return nil
	}
	var s scanner
	s.reset(body)
	number := func(name string) (*float64, error) {
		v, err := s.value()
		if err != nil || string(v) == "null" {
			return nil, err
		}
		f, perr := strconv.ParseFloat(string(v), 64)
		if perr != nil {
			return nil, invalidError("%s: must be a number", name)
		}
		return &f, nil
	}
	err := s.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "presence_penalty":
			gc.PresencePenalty, err = number("presence_penalty")
		case "frequency_penalty":
			gc.FrequencyPenalty, err = number("frequency_penalty")
		case "thinking":
			var v []byte
			if v, err = s.value(); err == nil && len(*thinking) == 0 {
				*thinking = v
			}
		case "n":
			var n *float64
			if n, err = number("n"); err == nil && n != nil && *n != 1 {
				err = unsupportedError("n: the gemini adapter serves one choice per request (n must be 1)")
			}
		default:
			err = s.skip()
		}
		return err
	})
	if _, ok := err.(*provider.Error); ok {
		return err
	}
	if err != nil {
		return invalidError("body: %v", err)
	}
	return nil
}
