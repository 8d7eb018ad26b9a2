package messages

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/provider/gemini"
)

// The requests of a real Claude Code 2.1.197 session (claude -p with a
// Read tool loop, against the gateway on loopback), scrubbed: strings
// above 160 characters cut, the user id and billing header zeroed. Claude
// Code sent them with anthropic-version 2023-06-01 and anthropic-beta
// claude-code-20250219, interleaved-thinking-2025-05-14,
// thinking-token-count-2026-05-13, context-management-2025-06-27,
// prompt-caching-scope-2026-01-05, mid-conversation-system-2026-04-07,
// effort-2025-11-24, on /v1/messages?beta=true.
//   - turn: a tool loop's third request: system text blocks (a billing
//     header, then two with cache_control), 25 tools with input_schema, a
//     system message at messages[1], tool_use and tool_result blocks
//     (is_error, cache_control), metadata.user_id, thinking adaptive,
//     context_management (clear_thinking_20251015), output_config.effort.
//   - title: the session's title request: no tools, output_config.format
//     a JSON schema.
const (
	claudeCodeTurn  = "testdata/claude-code-2.1.197-turn.json"
	claudeCodeTitle = "testdata/claude-code-2.1.197-title.json"
)

// TestClaudeCodeToOpenAI: each field of Claude Code's requests either
// reaches an OpenAI-dialect route's body in its OpenAI form, or is left
// out on purpose (the package comment says which).
func TestClaudeCodeToOpenAI(t *testing.T) {
	raw, err := os.ReadFile(claudeCodeTurn)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Tools    []json.RawMessage `json:"tools"`
		Metadata struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
	}
	json.Unmarshal(raw, &in)
	req := providerRequest(t, string(raw))
	var body map[string]json.RawMessage
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"system", "thinking", "context_management", "output_config", "metadata"} {
		if _, ok := body[k]; ok {
			t.Errorf("the OpenAI body holds %q (not an OpenAI member)", k)
		}
	}
	if strings.Contains(string(req.Body), "x-anthropic-billing-header") {
		t.Errorf("the OpenAI body holds Claude Code's billing header")
	}
	var effort, user string
	json.Unmarshal(body["reasoning_effort"], &effort)
	json.Unmarshal(body["user"], &user)
	if effort != "high" || user != userID(in.Metadata.UserID) || len(user) > maxUser {
		t.Errorf("got reasoning_effort %q, user %q; want high (output_config.effort), the digest of %q (OpenAI's user is at most 64 bytes)", effort, user, in.Metadata.UserID)
	}
	if string(body["stream_options"]) != `{"include_usage":true}` {
		t.Errorf("got stream_options %s, want include_usage", body["stream_options"])
	}

	c := req.Chat
	var roles []string
	for _, m := range c.Messages {
		roles = append(roles, m.Role)
	}
	// system (top-level), user, system (messages[1], in place), then the
	// tool loop: assistant calls, tool results.
	if got, want := strings.Join(roles, ","), "system,user,system,assistant,tool,assistant,tool"; got != want {
		t.Fatalf("got roles %s, want %s", got, want)
	}
	if text := partsText(t, c.Messages[2].Content); !strings.HasPrefix(text, "Available agent types") {
		t.Errorf("messages[2]: got %.60q, want the system message Claude Code sent at messages[1]", text)
	}
	top := partsText(t, c.Messages[0].Content)
	if !strings.HasPrefix(top, "You are a Claude agent") {
		t.Errorf("system: got %.60q, want Claude Code's system prompt without the billing header", top)
	}
	for i, pair := range [][2]int{{3, 4}, {5, 6}} {
		a, r := c.Messages[pair[0]], c.Messages[pair[1]]
		if len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Name != "Read" || r.ToolCallID != a.ToolCalls[0].ID ||
			!json.Valid([]byte(a.ToolCalls[0].Function.Arguments)) || !strings.HasPrefix(partsText(t, r.Content), "Error: <tool_use_error>") {
			t.Errorf("tool round %d: got call %+v, result %s; want a Read call and its error result", i, a.ToolCalls, r.Content)
		}
	}
	if len(c.Tools) != len(in.Tools) || len(c.Tools) != 25 {
		t.Fatalf("got %d tools, want the 25 Claude Code sent", len(c.Tools))
	}
	for _, tool := range c.Tools {
		var schema struct {
			Type string `json:"type"`
		}
		if tool.Type != "function" || tool.Function.Name == "" || json.Unmarshal(tool.Function.Parameters, &schema) != nil || schema.Type != "object" {
			t.Errorf("tool %q: got %+v, want a function with its input_schema as parameters", tool.Function.Name, tool)
		}
	}

	// The title request: its JSON schema is the response_format.
	raw, err = os.ReadFile(claudeCodeTitle)
	if err != nil {
		t.Fatal(err)
	}
	title := providerRequest(t, string(raw))
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(title.Chat.ResponseFormat, &rf); err != nil || rf.Type != "json_schema" || rf.JSONSchema.Name == "" ||
		!strings.Contains(string(rf.JSONSchema.Schema), `"title"`) {
		t.Errorf("title: got response_format %s, want json_schema with Claude Code's schema", title.Chat.ResponseFormat)
	}
	if len(title.Chat.Tools) != 0 || title.Chat.ToolChoice != nil {
		t.Errorf("title: got tools %+v, tool_choice %s; want none (Claude Code sent an empty tools array)", title.Chat.Tools, title.Chat.ToolChoice)
	}
}

// TestClaudeCodeToGemini: the same requests translate for a Gemini route:
// the system message within the conversation joins systemInstruction
// after the top-level system, the turns alternate user and model with the
// tool calls and results, the title's schema is the response schema.
func TestClaudeCodeToGemini(t *testing.T) {
	raw, err := os.ReadFile(claudeCodeTurn)
	if err != nil {
		t.Fatal(err)
	}
	body, err := gemini.Body(providerRequest(t, string(raw)))
	if err != nil {
		t.Fatalf("gemini: %v", err)
	}
	var g struct {
		SystemInstruction struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Role  string                       `json:"role"`
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
			ThinkingConfig     *struct {
				ThinkingBudget int `json:"thinkingBudget"`
			} `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &g); err != nil {
		t.Fatal(err)
	}
	si := g.SystemInstruction.Parts
	if len(si) < 2 || !strings.HasPrefix(si[0].Text, "You are a Claude agent") || !strings.HasPrefix(si[len(si)-1].Text, "Available agent types") ||
		strings.Contains(string(body), "x-anthropic-billing-header") {
		t.Errorf("systemInstruction: got %d parts, want Claude Code's system first and its messages[1] last, no billing header", len(si))
	}
	var roles []string
	calls, results := 0, 0
	for _, c := range g.Contents {
		roles = append(roles, c.Role)
		for _, p := range c.Parts {
			if _, ok := p["functionCall"]; ok {
				calls++
			}
			if _, ok := p["functionResponse"]; ok {
				results++
			}
		}
	}
	if got, want := strings.Join(roles, ","), "user,model,user,model,user"; got != want || calls != 2 || results != 2 {
		t.Errorf("contents: got roles %s, %d calls, %d results; want %s, 2 and 2", got, calls, results, want)
	}
	if len(g.Tools) != 1 || len(g.Tools[0].FunctionDeclarations) != 25 {
		t.Errorf("got tools %d, want 25 function declarations", len(g.Tools))
	}
	// Adaptive thinking is Gemini's dynamic budget (the model decides),
	// which the exact thinking object gives before the effort's budget.
	if tc := g.GenerationConfig.ThinkingConfig; tc == nil || tc.ThinkingBudget != -1 {
		t.Errorf("got thinkingConfig %+v, want the dynamic budget -1 (thinking adaptive)", tc)
	}

	raw, err = os.ReadFile(claudeCodeTitle)
	if err != nil {
		t.Fatal(err)
	}
	body, err = gemini.Body(providerRequest(t, string(raw)))
	if err != nil {
		t.Fatalf("gemini, title: %v", err)
	}
	g.GenerationConfig.ResponseJSONSchema = nil
	json.Unmarshal(body, &g)
	if !strings.Contains(string(g.GenerationConfig.ResponseJSONSchema), `"title"`) {
		t.Errorf("title: got responseJsonSchema %s, want Claude Code's schema", g.GenerationConfig.ResponseJSONSchema)
	}
}

// partsText is the text of a message's content, a string or text parts.
func partsText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatalf("content %s: %v", raw, err)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
