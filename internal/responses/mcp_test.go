package responses

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestMCPFunctionName(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
	long := strings.Repeat("x", 70)
	for _, tc := range []struct {
		label, tool, want string
	}{
		{"docs", "search", "docs__search"},
		{"my-server", "get_page", "my-server__get_page"},
		{"docs", "pages.read", ""}, // a dot: shortened with a hash
		{"9lives", "x", ""},        // a digit first
		{"docs", long, ""},         // too long
		{"docs", "página", ""},     // not ASCII
		{"docs", "pages_read", "docs__pages_read"},
	} {
		got := MCPFunctionName(tc.label, tc.tool)
		if !valid.MatchString(got) {
			t.Errorf("MCPFunctionName(%q, %q) = %q: not a valid function name", tc.label, tc.tool, got)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("MCPFunctionName(%q, %q) = %q, want %q", tc.label, tc.tool, got, tc.want)
		}
		if again := MCPFunctionName(tc.label, tc.tool); again != got {
			t.Errorf("MCPFunctionName(%q, %q): %q then %q, want the same", tc.label, tc.tool, got, again)
		}
	}
	// Names that the cut or the replacement would merge stay apart.
	if a, b := MCPFunctionName("docs", "pages.read"), MCPFunctionName("docs", "pages_read"); a == b {
		t.Errorf("pages.read and pages_read share %q", a)
	}
	if a, b := MCPFunctionName("docs", long+"a"), MCPFunctionName("docs", long+"b"); a == b {
		t.Errorf("two long names share %q", a)
	}
}

func TestMCPHistory(t *testing.T) {
	items := []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"user","content":"hi"}`),
		json.RawMessage(`{"type":"mcp_list_tools","id":"mcpl_1","server_label":"docs","tools":[]}`),
		json.RawMessage(`{"type":"mcp_call","id":"mcp_1","server_label":"docs","name":"search","arguments":"{\"q\":1}","output":"found","status":"completed"}`),
		json.RawMessage(`{"type":"mcp_call","id":"mcp_2","server_label":"docs","name":"fetch","arguments":"{}","output":null,"error":{"type":"mcp_tool_execution_error","content":[{"type":"text","text":"boom"}]},"status":"failed"}`),
		json.RawMessage(`{"type":"mcp_approval_request","id":"mcpr_1","server_label":"docs","name":"delete","arguments":"{\"id\":7}"}`),
		json.RawMessage(`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":false,"reason":"too risky"}`),
		json.RawMessage(`{"type":"mcp_approval_request","id":"mcpr_2","server_label":"docs","name":"fetch","arguments":"{}"}`),
		json.RawMessage(`{"type":"mcp_approval_response","approval_request_id":"mcpr_2","approve":true}`),
	}
	out := MCPHistory(items)
	var got []string
	for _, it := range out {
		var h struct {
			Type, Name, Arguments, Output string
			CallID                        string `json:"call_id"`
		}
		json.Unmarshal(it, &h)
		got = append(got, h.Type+"|"+h.CallID+"|"+h.Name+"|"+h.Arguments+"|"+h.Output)
	}
	want := []string{
		"message||||",
		`function_call|mcp_1|docs__search|{"q":1}|`,
		"function_call_output|mcp_1|||found",
		"function_call|mcp_2|docs__fetch|{}|",
		"function_call_output|mcp_2|||error: boom",
		`function_call|mcpr_1|docs__delete|{"id":7}|`,
		"function_call_output|mcpr_1|||The user did not approve this call of delete on the MCP server docs: it was not run. Reason: too risky",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestParseMCPItems: a conversation with hosted-MCP items (a request
// continuing one, without mcp tools) reaches a chat route as the calls
// and outputs they stand for; it is not left for a Responses route.
func TestParseMCPItems(t *testing.T) {
	p := parse(t, `{"model":"m","input":[
		{"role":"user","content":"what do the docs say?"},
		{"type":"mcp_list_tools","id":"mcpl_1","server_label":"docs","tools":[{"name":"search","input_schema":{}}]},
		{"type":"mcp_call","id":"mcp_1","server_label":"docs","name":"search","arguments":"{}","output":"found it","status":"completed"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"They say so."}]},
		{"role":"user","content":"thanks"}]}`)
	if p.Untranslatable != nil {
		t.Fatalf("got untranslatable %v", p.Untranslatable)
	}
	var roles []string
	for _, m := range p.Chat.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant,user" {
		t.Fatalf("roles: got %v", roles)
	}
	a := p.Chat.Messages[1]
	if len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != "mcp_1" || a.ToolCalls[0].Function.Name != "docs__search" ||
		p.Chat.Messages[2].ToolCallID != "mcp_1" || p.Chat.Messages[2].Text() != "found it" {
		t.Errorf("got %+v %+v", a, p.Chat.Messages[2])
	}
}

func TestAppendResponse(t *testing.T) {
	var r Request
	if err := Decode([]byte(`{"model":"m","input":"hi","tools":[{"type":"mcp","server_label":"docs"}]}`), &r); err != nil {
		t.Fatal(err)
	}
	p, err := r.Parse()
	if err != nil {
		t.Fatal(err)
	}
	out := []json.RawMessage{json.RawMessage(`{"type":"mcp_list_tools","id":"mcpl_1","server_label":"docs","tools":[]}`)}
	var pos []OutputItem
	b := p.Meta.AppendResponse(nil, out, &Ending{Status: "completed", Usage: &Usage{Input: 3, Output: 4, Cached: 1}}, &pos)
	if len(pos) != 1 || pos[0].ID != "mcpl_1" || string(b[pos[0].Start:pos[0].End]) != string(out[0]) {
		t.Errorf("positions: got %+v in %s", pos, b)
	}
	var resp struct {
		ID, Status  string
		CompletedAt *int64 `json:"completed_at"`
		Output      []json.RawMessage
		Tools       []json.RawMessage
		Usage       struct {
			Total int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if resp.ID != p.Meta.ID || resp.Status != "completed" || resp.CompletedAt == nil || len(resp.Output) != 1 || len(resp.Tools) != 1 || resp.Usage.Total != 7 {
		t.Errorf("got %s", b)
	}
	if u, ok := ReadUsage(b); !ok || u != (Usage{Input: 3, Output: 4, Cached: 1}) {
		t.Errorf("ReadUsage: got %+v %v", u, ok)
	}
}
