// Package responses is the gateway's OpenAI Responses API front
// (POST /v1/responses): it turns a Responses request into the OpenAI chat
// request every route understands, writes the relayed chat chunks back as
// the Responses event stream (an Encoder of the relay), and turns a
// non-streaming chat completion into a response object. Clients built for
// the Responses API (the Codex CLI, the OpenAI Agents SDK, the SDKs'
// Responses helpers) thus reach any configured model on any upstream kind.
//
// Request mapping: instructions → a system message first; input as a
// string → one user message; input items: messages (user, assistant,
// system and developer; system and developer become system messages) with
// input_text/output_text → text parts, input_image → image_url parts,
// input_file with file_data or file_id → file parts, refusal → text;
// function_call and custom_tool_call items → the assistant's tool_calls
// (a custom call's input as {"input": …}); function_call_output and
// custom_tool_call_output → tool messages (their images in a user message
// after them); reasoning items → the assistant turn's reasoning_content
// (their summary and content text) and, when their encrypted_content is
// one the gateway wrote (Anthropic's signed thinking, see Encoder), its
// thinking_blocks, which an Anthropic route sends back as they came;
// encrypted_content of another origin is dropped, since no chat route can
// read it. Consecutive assistant-side items make one assistant message.
// tools: function tools as they are; custom (freeform) tools as a function
// with one string parameter "input", whose calls come back as
// custom_tool_call items; namespace tools as their function and custom
// tools, named namespace__name (bare in the default namespace
// "functions"), whose calls come back with their namespace (none for
// "functions"); the tools of additional_tools input items (Codex
// declares its tools there, "tools" empty) join tools, and a
// configuration_update item's reasoning.effort is the request's (neither
// item is a message);
// built-in tools (web_search, file_search, …) are left out and named in
// Parsed.Builtins (a route that passes the Responses API through gets
// them; the gateway drops them elsewhere, or refuses with
// Parsed.BuiltinErr), and web_search (or web_search_preview) asks a
// translating adapter for its provider's own search tool
// (api.ChatRequest.WebSearch), whose calls and citations come back as
// web_search_call items and url_citation annotations (see Encoder); a
// web_search_call input item, a search that ran before, is left out (its
// results are in the answer that followed it); hosted MCP's items
// (mcp_call, mcp_list_tools, mcp_approval_request, mcp_approval_response)
// are the function calls and outputs they stand for (mcp.go). Other things only an
// upstream that speaks the Responses API can serve are named in
// Parsed.Untranslatable (the gateway passes such requests through to one,
// see Pass, and refuses them elsewhere). tool_choice, parallel_tool_calls, temperature, top_p, user
// map to their chat namesakes; max_output_tokens → max_completion_tokens;
// reasoning.effort → reasoning_effort (which the anthropic adapter turns
// into extended thinking); text.format → response_format; text.verbosity,
// prompt_cache_key, prompt_cache_retention, safety_identifier and
// service_tier go to an OpenAI-dialect route in the chat body (translating
// adapters drop them). Other members are dropped, as a translating adapter
// drops the chat members it does not know (a route that passes Responses
// through gets them all); metadata is echoed in the response. What no
// route can serve yet is refused with 400 naming it: conversation,
// background.
//
// State is the gateway's (package respstore): Items normalises the input
// into the items a stored response keeps, resolving item_reference
// items; Request.Prior carries the stored chain of previous_response_id
// (refused when the caller did not resolve it) and Request.Keep the
// store flag the response echoes; Encoder.OnEnd and FromCompletion give
// the response object to store.
package responses

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/api"
)

// Request is the body of POST /v1/responses, the members the gateway reads.
type Request struct {
	// Warmup marks a warm-up (the Responses WebSocket's generate: false):
	// no model is called, so a request with no input (Codex's warm-up may
	// carry only tools and settings as items) is no error. Not a member.
	Warmup bool `json:"-"`

	Model                string            `json:"model"`
	Input                json.RawMessage   `json:"input"` // a string or an array of items
	Instructions         *string           `json:"instructions"`
	Tools                []json.RawMessage `json:"tools"` // read by type first (see Tool)
	ToolChoice           json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls    *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens      *int              `json:"max_output_tokens"`
	Temperature          *float64          `json:"temperature"`
	TopP                 *float64          `json:"top_p"`
	Reasoning            *Reasoning        `json:"reasoning"`
	Text                 *TextConfig       `json:"text"`
	Stream               bool              `json:"stream"`
	Store                *bool             `json:"store"`
	PreviousResponseID   *string           `json:"previous_response_id"`
	Include              []string          `json:"include"`
	Metadata             json.RawMessage   `json:"metadata"`
	PromptCacheKey       *string           `json:"prompt_cache_key"`
	PromptCacheRetention *string           `json:"prompt_cache_retention"`
	User                 *string           `json:"user"`
	SafetyIdentifier     *string           `json:"safety_identifier"`
	ServiceTier          *string           `json:"service_tier"`
	Background           *bool             `json:"background"`
	Conversation         json.RawMessage   `json:"conversation"`
	Prompt               json.RawMessage   `json:"prompt"`
	Truncation           *string           `json:"truncation"`
	TopLogprobs          *int              `json:"top_logprobs"`
	MaxToolCalls         *int              `json:"max_tool_calls"`
	ContextManagement    json.RawMessage   `json:"context_management"`
	StreamOptions        *struct {
		IncludeObfuscation *bool `json:"include_obfuscation"`
	} `json:"stream_options"`

	// Prior are the items of the conversation previous_response_id
	// continues (the stored chain, oldest first: each response's input
	// and output items), read before Input; nil when previous_response_id
	// was not resolved, which Parse then refuses.
	Prior []json.RawMessage `json:"-"`
	// Keep says the response is stored (store asked for it, the default,
	// and the gateway has a store): the response object says "store": true.
	Keep bool `json:"-"`
}

// Reasoning is "reasoning".
type Reasoning struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary"` // the deprecated name of summary
}

// TextConfig is "text".
type TextConfig struct {
	Format    json.RawMessage `json:"format"`
	Verbosity *string         `json:"verbosity"`
}

// Tool is one entry of "tools" the gateway serves: a function tool or a
// custom (freeform) tool.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Format      *struct {
		Type       string `json:"type"` // text or grammar
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"` // custom tools
	Tools []json.RawMessage `json:"tools"` // a namespace's
}

// toolRef is a declared tool as the client knows it: its name, its
// namespace ("" for none), and whether it is a custom tool.
type toolRef struct {
	name, namespace string
	custom          bool
}

// chatName is the chat function name of the tool name in namespace: the
// name itself, or the namespace and the name joined by "__" (chat function
// names allow letters, digits, "_" and "-"). The namespace "functions"
// is the default one (Codex's): its tools keep their names.
func chatName(namespace, name string) string {
	if namespace = spaceOf(namespace); namespace == "" {
		return name
	}
	return namespace + "__" + name
}

// spaceOf is the namespace a call is answered with: namespace, "" for the
// default namespace "functions".
func spaceOf(namespace string) string {
	if namespace == "functions" {
		return ""
	}
	return namespace
}

// Error is a request the gateway refuses; Param names the field. (api.ParamError).
type Error = api.ParamError

var errorf = api.ParamErrorf

// Parsed is a request translated: the chat request every route
// understands, its body (the chat request's JSON with the members only an
// OpenAI-dialect route reads), and the Meta its answer is written with.
type Parsed struct {
	Chat *api.ChatRequest
	Body []byte
	Meta *Meta
	// Untranslatable names the first thing of the request a chat route
	// cannot serve but an upstream that speaks the Responses API can (a
	// built-in tool, a tool_choice naming one, prompt, truncation auto,
	// …); Chat and Body are the rest of the request (nil when nothing is
	// left: input of such items only). Nil when a chat route serves the
	// whole request.
	Untranslatable *Error
	// Builtins are the types of the built-in tools of the request, each
	// once, in the order declared: left out of Chat (but web_search, see
	// api.ChatRequest.WebSearch), served only by a route that passes the
	// Responses API through or by an adapter that maps them. Nil: none.
	Builtins []string
	// BuiltinErr is the refusal of the first built-in tool, for a gateway
	// that refuses them on translated routes (responses.builtin_tools:
	// reject); nil when Builtins is.
	BuiltinErr *Error
}

// Parse translates a Responses request, decoded by Decode, into its chat
// form. Errors are *Error naming the field.
func (r *Request) Parse() (*Parsed, error) {
	extra, effort := configItems(r.Prior, r.Input)
	if effort != nil {
		var rs Reasoning
		if r.Reasoning != nil {
			rs = *r.Reasoning
		}
		rs.Effort = effort
		r.Reasoning = &rs
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	untr := r.untranslatable()
	tools := map[string]toolRef{}
	chat := &api.ChatRequest{
		Model:               r.Model,
		Stream:              r.Stream,
		MaxCompletionTokens: r.MaxOutputTokens,
		Temperature:         r.Temperature,
		TopP:                r.TopP,
		ParallelToolCalls:   r.ParallelToolCalls,
	}
	if r.Stream {
		chat.StreamOptions = &api.StreamOptions{IncludeUsage: true}
	}
	if r.User != nil {
		chat.User = *r.User
	}
	if r.PromptCacheKey != nil {
		chat.PromptCacheKey = *r.PromptCacheKey
	}
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		chat.ReasoningEffort = *r.Reasoning.Effort
	}
	var err error
	var (
		builtin  *Error
		builtins []string
	)
	if chat.Tools, chat.WebSearch, builtins, builtin, err = chatTools(r.Tools, extra, tools); err != nil {
		return nil, err
	}
	var choice *Error
	if chat.ToolChoice, choice, err = toolChoice(r.ToolChoice, tools); err != nil {
		return nil, err
	}
	untr = cmpOrErr(untr, choice)
	if r.Text != nil {
		if chat.ResponseFormat, err = responseFormat(r.Text.Format); err != nil {
			return nil, err
		}
	}
	if r.Instructions != nil && *r.Instructions != "" {
		chat.Messages = append(chat.Messages, api.TextMessage("system", *r.Instructions))
	}
	msgs, skipped, err := convertInput(r.Prior, r.Input)
	if err != nil {
		return nil, err
	}
	untr = cmpOrErr(untr, skipped)
	chat.Messages = append(chat.Messages, msgs...)
	meta, err := r.meta(tools)
	if err != nil {
		return nil, err
	}
	meta.search = chat.WebSearch != nil
	if len(chat.Messages) == 0 {
		if r.Warmup {
			return &Parsed{Meta: meta, Builtins: builtins}, nil
		}
		if untr != nil { // only items a chat route cannot take: no chat form
			return &Parsed{Meta: meta, Untranslatable: untr, Builtins: builtins, BuiltinErr: builtinErr(builtins, builtin)}, nil
		}
		return nil, errorf("input", "the request has no input: give input (a string or items) or instructions")
	}
	out, err := r.chatBody(chat)
	if err != nil {
		return nil, err
	}
	return &Parsed{Chat: chat, Body: out, Meta: meta, Untranslatable: untr, Builtins: builtins, BuiltinErr: builtinErr(builtins, builtin)}, nil
}

// builtinErr is err when builtins is not empty.
func builtinErr(builtins []string, err *Error) *Error {
	if len(builtins) == 0 {
		return nil
	}
	return err
}

// cmpOrErr returns a unless it is nil, else b.
func cmpOrErr(a, b *Error) *Error {
	if a != nil {
		return a
	}
	return b
}

// validate refuses what the gateway cannot serve on any route, naming it.
func (r *Request) validate() error {
	notYet := func(param, why string) error {
		return errorf(param, "%s is not supported by the gateway yet: %s", param, why)
	}
	switch {
	case r.Model == "":
		return errorf("model", "missing required field: model")
	case r.PreviousResponseID != nil && *r.PreviousResponseID != "" && r.Prior == nil:
		return errorf("previous_response_id", "previous_response_id is not supported by this gateway: it has no database to store responses in; send the whole conversation as input (and store: false)")
	case isSet(r.Conversation):
		return notYet("conversation", "it keeps no conversations; send the whole conversation as input")
	case r.Background != nil && *r.Background:
		return notYet("background", "responses run in the foreground only (background: false)")
	case r.MaxOutputTokens != nil && *r.MaxOutputTokens < 1:
		return errorf("max_output_tokens", "max_output_tokens must be at least 1, got %d", *r.MaxOutputTokens)
	}
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		switch *r.Reasoning.Effort {
		case "none", "minimal", "low", "medium", "high", "xhigh":
		default:
			return errorf("reasoning.effort", "reasoning.effort must be none, minimal, low, medium, high or xhigh, got %q", *r.Reasoning.Effort)
		}
	}
	return nil
}

// untranslatable returns what only an upstream that speaks the Responses
// API itself can serve (see Parsed.Untranslatable), naming it; nil when
// a chat route can serve the request.
func (r *Request) untranslatable() *Error {
	notYet := func(param, why string) *Error {
		return &Error{Param: param, Msg: fmt.Sprintf("%s is served only by a route that passes the Responses API through (providers[].responses): %s", param, why)}
	}
	switch {
	case isSet(r.Prompt):
		return notYet("prompt", "chat routes have no prompt templates; send instructions and input")
	case isSet(r.ContextManagement):
		return notYet("context_management", "send the conversation as it should be read")
	case r.Truncation != nil && *r.Truncation != "disabled":
		return notYet("truncation", fmt.Sprintf("truncation %q (only \"disabled\" on chat routes; a model's context_policy: trim trims on the gateway's side)", *r.Truncation))
	case r.TopLogprobs != nil && *r.TopLogprobs != 0:
		return notYet("top_logprobs", "chat routes return no log probabilities through it")
	case r.MaxToolCalls != nil:
		return notYet("max_tool_calls", "chat routes run no built-in tools to count")
	}
	for i, inc := range r.Include {
		if inc == "message.output_text.logprobs" {
			return notYet(fmt.Sprintf("include[%d]", i), fmt.Sprintf("include %q: chat routes return no log probabilities through it", inc))
		}
	}
	return nil
}

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// isString reports whether raw, a JSON value, is a string: tried first,
// a decode into a string of a value of another kind costs an error.
func isString(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '"'
}

// toolSource is the tools of an additional_tools input item and their
// path ("input[0].tools").
type toolSource struct {
	raws []json.RawMessage
	path string
}

// configItems reads the input items that configure the request rather
// than converse (prior's first): the tools of additional_tools items
// (Codex declares its tools there, grouped in namespaces, with "tools"
// empty), and the reasoning effort of the last configuration_update item
// that gives a valid one (nil: none). Items that do not decode are left
// to convertInput to name.
func configItems(prior []json.RawMessage, raw json.RawMessage) (extra []toolSource, effort *string) {
	read := func(it json.RawMessage, path string) {
		var head struct {
			Type      string            `json:"type"`
			Tools     []json.RawMessage `json:"tools"`
			Reasoning *struct {
				Effort *string `json:"effort"`
			} `json:"reasoning"`
		}
		if json.Unmarshal(it, &head) != nil {
			return
		}
		switch head.Type {
		case "additional_tools":
			if len(head.Tools) > 0 {
				extra = append(extra, toolSource{raws: head.Tools, path: path + ".tools"})
			}
		case "configuration_update":
			if rs := head.Reasoning; rs != nil && rs.Effort != nil {
				switch *rs.Effort {
				case "none", "minimal", "low", "medium", "high", "xhigh":
					effort = rs.Effort
				}
			}
		}
	}
	for i, it := range prior {
		read(it, fmt.Sprintf("previous_response_id's item %d", i))
	}
	if !isSet(raw) || isString(raw) {
		return extra, effort
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return extra, effort
	}
	for i, it := range items {
		read(it, fmt.Sprintf("input[%d]", i))
	}
	return extra, effort
}

// chatTools turns "tools", then the tools of additional_tools items
// (extra), into chat functions, recording each in tools under its chat
// name. A namespace's tools are functions named after it (chatName); a
// built-in tool is left out, its type named in builtins (once) and the
// first one's refusal in builtin; web_search's options are ws (see
// readWebSearch). A tool declared twice in "tools" is an error; one an
// additional_tools item declares again (Codex repeats them in the
// history it resends) replaces the earlier declaration.
func chatTools(raws []json.RawMessage, extra []toolSource, tools map[string]toolRef) (out []api.Tool, ws *api.WebSearch, builtins []string, builtin *Error, err error) {
	at := map[string]int{} // index in out by chat name
	var add func(raws []json.RawMessage, namespace, path string, again bool) error
	add = func(raws []json.RawMessage, namespace, path string, again bool) error {
		for i, raw := range raws {
			tp := fmt.Sprintf("%s[%d]", path, i)
			t, err := readTool(raw, tp, namespace == "")
			var bt *builtinTool
			if errors.As(err, &bt) {
				if builtin == nil {
					builtin = &Error{Param: tp + ".type", Msg: bt.Error()}
				}
				if !slices.Contains(builtins, bt.typ) {
					builtins = append(builtins, bt.typ)
				}
				if IsWebSearch(bt.typ) && ws == nil {
					if ws, err = readWebSearch(raw, tp); err != nil {
						return err
					}
				}
				continue
			}
			if err != nil {
				return err
			}
			if t.Type == "namespace" {
				if err := add(t.Tools, t.Name, tp+".tools", again); err != nil {
					return err
				}
				continue
			}
			name := chatName(namespace, t.Name)
			tools[name] = toolRef{name: t.Name, namespace: spaceOf(namespace), custom: t.Type == "custom"}
			f := functionOf(t)
			f.Function.Name = name
			if i, dup := at[name]; dup {
				if !again {
					return errorf(tp+".name", "tool %q is declared twice", name)
				}
				out[i] = f
				continue
			}
			at[name] = len(out)
			out = append(out, f)
		}
		return nil
	}
	if err = add(raws, "", "tools", false); err != nil {
		return out, ws, builtins, builtin, err
	}
	for _, src := range extra {
		if err = add(src.raws, "", src.path, true); err != nil {
			break
		}
	}
	return out, ws, builtins, builtin, err
}

// IsWebSearch reports whether a built-in tool's type is OpenAI's web
// search: web_search, web_search_preview and their dated versions
// (web_search_2025_08_26, web_search_preview_2025_03_11).
func IsWebSearch(typ string) bool { return strings.HasPrefix(typ, "web_search") }

// readWebSearch reads a web_search tool's options: filters.allowed_domains
// and an approximate user_location. search_context_size has no
// counterpart in the providers' search tools and is ignored.
func readWebSearch(raw json.RawMessage, path string) (*api.WebSearch, error) {
	var t struct {
		Filters *struct {
			AllowedDomains []string `json:"allowed_domains"`
		} `json:"filters"`
		UserLocation *struct {
			Type string `json:"type"`
			api.UserLocation
		} `json:"user_location"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, errorf(path, "%s is not a valid web search tool: %v", path, err)
	}
	ws := &api.WebSearch{}
	if t.Filters != nil {
		ws.AllowedDomains = t.Filters.AllowedDomains
	}
	if l := t.UserLocation; l != nil {
		if l.Type != "" && l.Type != "approximate" {
			return nil, errorf(path+".user_location.type", "user_location.type must be approximate, got %q", l.Type)
		}
		if l.UserLocation != (api.UserLocation{}) {
			ws.UserLocation = &l.UserLocation
		}
	}
	return ws, nil
}

// builtinTool is a tool of a built-in type (web_search, file_search, …),
// which only an upstream that runs it can serve.
type builtinTool struct{ path, typ string }

func (b *builtinTool) Error() string {
	return fmt.Sprintf("%s: tool type %q (a built-in tool) is served only by a route that passes the Responses API through (providers[].responses); chat routes run function and custom tools only", b.path, b.typ)
}

// readTool reads the tool at path: a function or custom tool, or, when
// nest is set, a namespace of them; any other type (a built-in tool) is an
// error naming it.
func readTool(raw json.RawMessage, path string, nest bool) (Tool, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Tool{}, errorf(path, "%s must be a tool object with a type", path)
	}
	switch {
	case head.Type == "function", head.Type == "custom", head.Type == "namespace" && nest:
	case head.Type == "namespace":
		return Tool{}, errorf(path+".type", "a namespace holds function and custom tools only")
	default:
		return Tool{}, &builtinTool{path: path, typ: head.Type}
	}
	var t Tool
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, errorf(path, "%s is not a valid %s tool: %v", path, head.Type, err)
	}
	if t.Name == "" {
		return Tool{}, errorf(path+".name", "missing required field: %s.name", path)
	}
	return t, nil
}

// functionOf is a tool as a chat function. A custom tool takes its free
// text as the one string parameter "input"; its grammar, if any, is told
// in the description, as the model needs it to write the input.
func functionOf(t Tool) api.Tool {
	if t.Type == "function" {
		return api.Tool{Type: "function", Function: api.FunctionDef{Name: t.Name, Description: t.Description,
			Parameters: compact(t.Parameters), Strict: t.Strict}}
	}
	desc := t.Description
	if f := t.Format; f != nil && f.Type == "grammar" && f.Definition != "" {
		desc += "\n\nThe input must follow this " + cmpOr(f.Syntax, "grammar") + " grammar:\n" + f.Definition
	}
	return api.Tool{Type: "function", Function: api.FunctionDef{Name: t.Name, Description: desc, Parameters: customParams}}
}

// customParams are the parameters of a custom tool as a function.
var customParams = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The tool's input, as free text."}},"required":["input"],"additionalProperties":false}`)

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// toolChoice maps "tool_choice": none, auto and required as they are, a
// function or custom tool by name to the chat form; another type
// (allowed_tools, a built-in tool) is left out and named in builtin (only
// a Responses route can serve it).
func toolChoice(raw json.RawMessage, tools map[string]toolRef) (_ json.RawMessage, builtin *Error, _ error) {
	c, err := chatToolChoice(raw, tools)
	var bt *builtinTool
	if errors.As(err, &bt) {
		return nil, &Error{Param: bt.path, Msg: fmt.Sprintf("tool_choice of type %q is served only by a route that passes the Responses API through (providers[].responses): chat routes take none, auto, required, or a function or custom tool by name", bt.typ)}, nil
	}
	return c, nil, err
}

func chatToolChoice(raw json.RawMessage, tools map[string]toolRef) (json.RawMessage, error) {
	if !isSet(raw) {
		return nil, nil
	}
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto", "required":
			return compact(raw), nil
		}
		return nil, errorf("tool_choice", "tool_choice must be none, auto, required or an object naming a function, got %q", s)
	}
	var tc struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, errorf("tool_choice", "tool_choice must be a string or an object with a type")
	}
	switch tc.Type {
	case "function", "custom":
		if tc.Name == "" {
			return nil, errorf("tool_choice.name", "a tool_choice of type %q needs a name", tc.Type)
		}
		name := chatName(tc.Namespace, tc.Name)
		if ref, ok := tools[name]; !ok || ref.custom != (tc.Type == "custom") {
			return nil, errorf("tool_choice.name", "tool_choice names %s tool %q, which tools does not declare", tc.Type, name)
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
		return b, nil
	}
	return nil, &builtinTool{path: "tool_choice.type", typ: tc.Type}
}

// responseFormat maps text.format to a chat response_format.
func responseFormat(raw json.RawMessage) (json.RawMessage, error) {
	if !isSet(raw) {
		return nil, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, errorf("text.format", "text.format must be an object with a type")
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		if f.Name == "" {
			return nil, errorf("text.format.name", "missing required field: text.format.name")
		}
		if !isSet(f.Schema) {
			return nil, errorf("text.format.schema", "missing required field: text.format.schema")
		}
		js := struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict,omitempty"`
		}{f.Name, f.Description, compact(f.Schema), f.Strict}
		b, err := json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
		if err != nil {
			return nil, errorf("text.format.schema", "text.format.schema: %v", err)
		}
		return b, nil
	}
	return nil, errorf("text.format.type", "text.format.type must be text, json_object or json_schema, got %q", f.Type)
}

// chatBody is the chat request's JSON with the members only an
// OpenAI-dialect route reads: text.verbosity as verbosity, and the cache,
// safety and tier members.
func (r *Request) chatBody(chat *api.ChatRequest) ([]byte, error) {
	out, err := json.Marshal(chat)
	if err != nil {
		return nil, errorf("", "encode the chat request: %v", err)
	}
	out = out[:len(out)-1] // reopen the object
	add := func(name string, v *string) {
		if v != nil {
			out = append(out, ',')
			out = api.AppendString(out, name)
			out = append(out, ':')
			out = api.AppendString(out, *v)
		}
	}
	if r.Text != nil {
		add("verbosity", r.Text.Verbosity)
	}
	// prompt_cache_key is the chat request's own member (api.ChatRequest).
	add("prompt_cache_retention", r.PromptCacheRetention)
	add("safety_identifier", r.SafetyIdentifier)
	add("service_tier", r.ServiceTier)
	return append(out, '}'), nil
}

// Decode decodes a Responses body into r as encoding/json does, with the
// number of input items bounded by api.MaxMessages (a *api.TooManyError
// past it, like a chat request's messages).
func Decode(body []byte, r *Request) error {
	if err := api.EachMember(body, func(key, _, value []byte) error {
		if string(key) != "input" {
			return nil
		}
		n := 0
		api.EachElement(value, func([]byte) error { n++; return nil })
		if n > api.MaxMessages {
			return &api.TooManyError{Field: "input", Limit: api.MaxMessages, Got: n}
		}
		return nil
	}); err != nil {
		if many, ok := err.(*api.TooManyError); ok {
			return many
		}
	}
	return json.Unmarshal(body, r)
}

// Meta is what a response object says besides its output and status: the
// response's id and time, the model asked for, and the request's
// parameters as OpenAI echoes them. Built once per request.
type Meta struct {
	ID        string // "resp_" and 32 hex digits
	Model     string
	CreatedAt int64
	// echo is the response object's members that echo the request, written
	// once: `"background":false,…,"user":…` (no braces).
	echo []byte
	// encrypted: include asked for reasoning.encrypted_content.
	encrypted bool
	// summary: reasoning.summary asked for reasoning summaries: reasoning
	// is written as summary_text, else as reasoning_text.
	summary bool
	tools   map[string]toolRef // the declared tools by chat name
	// search: the request asked for web search (api.ChatRequest.WebSearch):
	// the encoder counts the text's characters for the annotations.
	search bool
	base   string // the random part of the ids
}

// meta builds the request's Meta.
func (r *Request) meta(tools map[string]toolRef) (*Meta, error) {
	var rnd [16]byte
	rand.Read(rnd[:])
	base := hex.EncodeToString(rnd[:])
	m := &Meta{ID: "resp_" + base, Model: r.Model, CreatedAt: time.Now().Unix(), tools: tools, base: base,
		encrypted: slices.Contains(r.Include, "reasoning.encrypted_content")}
	var effort, summary *string
	if rs := r.Reasoning; rs != nil {
		effort, summary = rs.Effort, rs.Summary
		if summary == nil {
			summary = rs.GenerateSummary
		}
		m.summary = summary != nil && *summary != "" && *summary != "none"
	}
	var format json.RawMessage = json.RawMessage(`{"type":"text"}`)
	verbosity := "medium"
	if t := r.Text; t != nil {
		if isSet(t.Format) {
			format = compact(t.Format)
		}
		if t.Verbosity != nil {
			verbosity = *t.Verbosity
		}
	}
	b := make([]byte, 0, 512)
	str := func(name string, v *string) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		b = appendNullable(b, v)
	}
	raw := func(name string, v []byte, def string) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		if isSet(v) {
			b = append(b, compact(v)...)
		} else {
			b = append(b, def...)
		}
	}
	num := func(name string, v *float64) {
		f := 1.0
		if v != nil {
			f = *v
		}
		nb, _ := json.Marshal(f)
		raw(name, nb, "1")
	}
	b = append(b, `"background":false`...)
	str("instructions", r.Instructions)
	if r.MaxOutputTokens != nil {
		raw("max_output_tokens", fmt.Appendf(nil, "%d", *r.MaxOutputTokens), "")
	} else {
		raw("max_output_tokens", nil, "null")
	}
	raw("max_tool_calls", nil, "null")
	raw("metadata", r.Metadata, "{}")
	parallel := r.ParallelToolCalls == nil || *r.ParallelToolCalls
	raw("parallel_tool_calls", fmt.Appendf(nil, "%t", parallel), "")
	str("previous_response_id", nonEmpty(r.PreviousResponseID))
	str("prompt_cache_key", r.PromptCacheKey)
	b = append(b, `,"reasoning":{"effort":`...)
	b = appendNullable(b, effort)
	b = append(b, `,"summary":`...)
	b = appendNullable(b, summary)
	b = append(b, '}')
	str("safety_identifier", r.SafetyIdentifier)
	tier := "default"
	if r.ServiceTier != nil {
		tier = *r.ServiceTier
	}
	str("service_tier", &tier)
	b = append(b, `,"store":`...)
	b = strconv.AppendBool(b, r.Keep)
	num("temperature", r.Temperature)
	b = append(b, `,"text":{"format":`...)
	b = append(b, format...)
	b = append(b, `,"verbosity":`...)
	b = api.AppendString(b, verbosity)
	b = append(b, '}')
	raw("tool_choice", r.ToolChoice, `"auto"`)
	list := []byte("[")
	for i, t := range r.Tools {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, compact(t)...)
	}
	raw("tools", append(list, ']'), "[]")
	b = append(b, `,"top_logprobs":0`...)
	num("top_p", r.TopP)
	b = append(b, `,"truncation":"disabled"`...)
	str("user", r.User)
	if !json.Valid(append(append([]byte("{"), b...), '}')) {
		return nil, errorf("", "the request's parameters cannot be echoed as JSON")
	}
	m.echo = b
	return m, nil
}

// nonEmpty is v, nil when it is "".
func nonEmpty(v *string) *string {
	if v == nil || *v == "" {
		return nil
	}
	return v
}

// appendNullable appends *v as a JSON string, null when v is nil.
func appendNullable(b []byte, v *string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return api.AppendString(b, *v)
}

func compact(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// inputItem is the members of an input item the translation reads; which
// apply depends on its type.
type inputItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Namespace        string          `json:"namespace"`
	Arguments        string          `json:"arguments"`
	Input            string          `json:"input"`
	Output           json.RawMessage `json:"output"`
	Summary          []textPart      `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
}

type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// part is a content part of a message or of a tool call's output.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
	FileID   string `json:"file_id"`
	FileData string `json:"file_data"`
	FileURL  string `json:"file_url"`
	Filename string `json:"filename"`
}

// convertInput turns the prior items (previous_response_id's) and
// "input" into chat messages; skipped names the first item only a route
// that passes the Responses API through can serve.
func convertInput(prior []json.RawMessage, raw json.RawMessage) (_ []api.Message, skipped *Error, _ error) {
	var c converter
	for i, it := range prior {
		if err := c.item(it, fmt.Sprintf("previous_response_id's item %d", i)); err != nil {
			return nil, nil, err
		}
	}
	if !isSet(raw) {
		c.flush()
		return c.out, c.skipped, nil
	}
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		c.flush()
		return append(c.out, api.TextMessage("user", s)), c.skipped, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, errorf("input", "input must be a string or an array of input items")
	}
	for i, it := range items {
		if err := c.item(it, fmt.Sprintf("input[%d]", i)); err != nil {
			return nil, nil, err
		}
	}
	c.flush()
	return c.out, c.skipped, nil
}

// converter builds the chat messages of the input items, one at a time:
// the items of an assistant turn (reasoning, messages, calls) gather in
// asst until an item of another role ends the turn.
type converter struct {
	out      []api.Message
	asst     *api.Message
	parts    []api.ContentPart // asst's
	reason   strings.Builder   // asst's reasoning text
	attached []api.ContentPart // images of the tool outputs since the last other item
	skipped  *Error            // the first item left out (see Parsed.Untranslatable)
	mcp      mcpExpander       // the hosted-MCP items' approval requests
}

func (c *converter) flush() {
	c.flushAttached()
	if c.asst == nil {
		return
	}
	m := c.asst
	c.asst = nil
	m.ReasoningContent = c.reason.String()
	c.reason.Reset()
	if len(c.parts) > 0 {
		*m = withParts(*m, c.parts)
	}
	c.parts = nil
	if len(m.Content) == 0 && len(m.ToolCalls) == 0 {
		return // reasoning alone is no turn a route takes
	}
	c.out = append(c.out, *m)
}

// flushAttached writes the images of the tool outputs before as a user
// message after them: chat tool messages hold text only.
func (c *converter) flushAttached() {
	if len(c.attached) > 0 {
		c.out = append(c.out, withParts(api.Message{Role: "user"}, c.attached))
		c.attached = nil
	}
}

func (c *converter) assistant() *api.Message {
	c.flushAttached()
	if c.asst == nil {
		c.asst = &api.Message{Role: "assistant"}
	}
	return c.asst
}

// item converts one input item.
func (c *converter) item(raw json.RawMessage, path string) error {
	var it inputItem
	var head itemHead
	if err := json.Unmarshal(raw, &head); err != nil {
		return errorf(path, "%s must be an input item object", path)
	}
	typ := head.kind()
	switch typ {
	case "message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", "reasoning":
	case "additional_tools", "configuration_update":
		// Read before the conversation (configItems): the tools join
		// the request's, the reasoning effort is the request's.
		return nil
	case "web_search_call":
		// A search that ran (on a route that mapped web_search, or
		// passed it through): what it found is in the answer after it,
		// and no chat route can send it back.
		return nil
	case "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response":
		// Hosted MCP's (mcp.go): the function calls and outputs they
		// stand for.
		for _, x := range c.mcp.expand(raw) {
			if err := c.item(x, path); err != nil {
				return err
			}
		}
		return nil
	case "":
		return errorf(path+".type", "missing required field: %s.type", path)
	default:
		// item_reference, a built-in tool's call (web_search_call, …):
		// left out, and only a Responses route may serve the request.
		if c.skipped == nil {
			c.skipped = &Error{Param: path + ".type", Msg: fmt.Sprintf("%s.type: input item type %q is served only by a route that passes the Responses API through (providers[].responses); chat routes take message, function_call, function_call_output, custom_tool_call, custom_tool_call_output and reasoning items", path, typ)}
		}
		return nil
	}
	if err := json.Unmarshal(raw, &it); err != nil {
		return errorf(path, "%s is not a valid %s item: %v", path, typ, err)
	}
	switch typ {
	case "message":
		return c.message(&it, path)
	case "function_call", "custom_tool_call":
		if it.CallID == "" {
			return errorf(path+".call_id", "missing required field: %s.call_id", path)
		}
		if it.Name == "" {
			return errorf(path+".name", "missing required field: %s.name", path)
		}
		args := it.Arguments
		if typ == "custom_tool_call" {
			b, _ := json.Marshal(map[string]string{"input": it.Input})
			args = string(b)
		}
		a := c.assistant()
		a.ToolCalls = append(a.ToolCalls, api.ToolCall{ID: it.CallID, Type: "function", Function: api.FunctionCall{Name: chatName(it.Namespace, it.Name), Arguments: args}})
	case "function_call_output", "custom_tool_call_output":
		if it.CallID == "" {
			return errorf(path+".call_id", "missing required field: %s.call_id", path)
		}
		text, att, err := outputParts(it.Output, path+".output")
		if err != nil {
			return err
		}
		if c.asst != nil {
			c.flush()
		}
		c.out = append(c.out, api.Message{Role: "tool", ToolCallID: it.CallID, Content: jsonString(text)})
		c.attached = append(c.attached, att...)
	case "reasoning":
		return c.reasoning(&it, path)
	}
	return nil
}

// message converts a message item.
func (c *converter) message(it *inputItem, path string) error {
	role := it.Role
	switch role {
	case "user", "assistant":
	case "system", "developer":
		role = "system" // every route takes system; not every one takes developer
	case "":
		return errorf(path+".role", "missing required field: %s.role", path)
	default:
		return errorf(path+".role", "role must be user, assistant, system or developer, got %q", role)
	}
	parts, err := contentParts(it.Content, path+".content", role)
	if err != nil {
		return err
	}
	if role == "assistant" {
		c.assistant()
		c.parts = append(c.parts, parts...)
		return nil
	}
	c.flush()
	c.out = append(c.out, withParts(api.Message{Role: role}, parts))
	return nil
}

// reasoning adds a reasoning item to the assistant turn: its text as
// reasoning_content, its encrypted_content, when the gateway wrote it, as
// thinking_blocks.
func (c *converter) reasoning(it *inputItem, path string) error {
	a := c.assistant()
	add := func(s string) {
		if s == "" {
			return
		}
		if c.reason.Len() > 0 {
			c.reason.WriteByte('\n')
		}
		c.reason.WriteString(s)
	}
	for _, s := range it.Summary {
		add(s.Text)
	}
	if isSet(it.Content) {
		var content []textPart
		if err := json.Unmarshal(it.Content, &content); err != nil {
			return errorf(path+".content", "%s.content must be an array of reasoning_text parts", path)
		}
		for _, p := range content {
			add(p.Text)
		}
	}
	if it.EncryptedContent != nil {
		blocks, ok := readThinking(*it.EncryptedContent)
		if ok {
			a.ThinkingBlocks = append(a.ThinkingBlocks, blocks...)
		}
		// Another origin's (OpenAI's own): no chat route can read it.
	}
	return nil
}

// thinkingPrefix starts the encrypted_content the gateway writes: the
// reasoning item's Anthropic thinking blocks, signatures included, as
// base64 of their JSON array (thinkingBlock). It is not encrypted: the
// signature is what Anthropic checks, and it carries its own integrity.
const thinkingPrefix = "streamgate.thinking.v1."

// readThinking reads an encrypted_content the gateway wrote.
func readThinking(s string) ([]api.ThinkingBlock, bool) {
	rest, ok := strings.CutPrefix(s, thinkingPrefix)
	if !ok {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, false
	}
	var blocks []api.ThinkingBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, false
	}
	for _, b := range blocks {
		if b.Type != "thinking" && b.Type != "redacted_thinking" {
			return nil, false
		}
	}
	return blocks, true
}

// contentParts reads a message's content: a string or an array of parts.
func contentParts(raw json.RawMessage, path, role string) ([]api.ContentPart, error) {
	if !isSet(raw) {
		return nil, nil
	}
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		return []api.ContentPart{{Type: "text", Text: s}}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, errorf(path, "%s must be a string or an array of content parts", path)
	}
	out := make([]api.ContentPart, 0, len(raws))
	for i, r := range raws {
		pp := fmt.Sprintf("%s[%d]", path, i)
		p, err := api.ReadTyped[part](r, pp, "content part", "input_text", "output_text", "refusal", "input_image", "input_file")
		if err != nil {
			return nil, err
		}
		if role != "user" && (p.Type == "input_image" || p.Type == "input_file") {
			return nil, errorf(pp+".type", "a %s part is only allowed in a user message", p.Type)
		}
		cp, err := chatPart(p, pp)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	return out, nil
}

// outputParts reads a tool call's output: a string, or parts whose text is
// joined and whose images and files are returned apart.
func outputParts(raw json.RawMessage, path string) (string, []api.ContentPart, error) {
	if !isSet(raw) {
		return "", nil, nil
	}
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return "", nil, errorf(path, "%s must be a string or an array of content parts", path)
	}
	var (
		b   strings.Builder
		att []api.ContentPart
	)
	for i, r := range raws {
		pp := fmt.Sprintf("%s[%d]", path, i)
		p, err := api.ReadTyped[part](r, pp, "content part", "input_text", "output_text", "input_image", "input_file")
		if err != nil {
			return "", nil, err
		}
		cp, err := chatPart(p, pp)
		if err != nil {
			return "", nil, err
		}
		if cp.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(cp.Text)
			continue
		}
		att = append(att, cp)
	}
	return b.String(), att, nil
}

// chatPart is a content part in the chat dialect.
func chatPart(p part, path string) (api.ContentPart, error) {
	switch p.Type {
	case "input_text", "output_text":
		return api.ContentPart{Type: "text", Text: p.Text}, nil
	case "refusal":
		return api.ContentPart{Type: "text", Text: p.Refusal}, nil
	case "input_image":
		if p.ImageURL == "" {
			if p.FileID != "" {
				return api.ContentPart{}, errorf(path+".file_id", "an input_image by file_id is not supported by the gateway (it has no file store): send image_url, a URL or a data: URL")
			}
			return api.ContentPart{}, errorf(path+".image_url", "missing required field: %s.image_url", path)
		}
		return api.ContentPart{Type: "image_url", ImageURL: &api.ImageURL{URL: p.ImageURL, Detail: p.Detail}}, nil
	case "input_file":
		switch {
		case p.FileData != "":
			data := p.FileData
			if !strings.HasPrefix(data, "data:") {
				// OpenAI takes bare base64 too; the routes read a data: URL.
				data = "data:" + mediaType(p.Filename) + ";base64," + data
			}
			return api.ContentPart{Type: "file", File: &api.File{FileData: data, Filename: p.Filename}}, nil
		case p.FileID != "":
			return api.ContentPart{Type: "file", File: &api.File{FileID: p.FileID, Filename: p.Filename}}, nil
		case p.FileURL != "":
			return api.ContentPart{}, errorf(path+".file_url", "an input_file by file_url is not supported by the gateway: send file_data")
		}
		return api.ContentPart{}, errorf(path+".file_data", "an input_file needs file_data or file_id")
	}
	return api.ContentPart{}, errorf(path+".type", "content part type %q is not supported", p.Type)
}

// mediaType guesses a file's media type from its name: PDF unless it says
// otherwise (the file inputs the routes take are PDFs).
func mediaType(name string) string {
	switch {
	case strings.HasSuffix(strings.ToLower(name), ".txt"):
		return "text/plain"
	}
	return "application/pdf"
}

// withParts sets m's content to parts: a plain string when they are one
// text part, else an array.
func withParts(m api.Message, parts []api.ContentPart) api.Message {
	switch {
	case len(parts) == 0:
		return m
	case len(parts) == 1 && parts[0].Type == "text":
		m.Content = jsonString(parts[0].Text)
		return m
	}
	m.Content, _ = json.Marshal(parts)
	return m
}

func jsonString(s string) json.RawMessage {
	return api.AppendString(nil, s)
}
