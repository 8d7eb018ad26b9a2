package responses

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	oresponses "github.com/openai/openai-go/v3/responses"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/messages"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// parse decodes and translates body, failing the test on an error.
func parse(t *testing.T, body string) *Parsed {
	t.Helper()
	var r Request
	if err := Decode([]byte(body), &r); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	p, err := r.Parse()
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestParseConversation(t *testing.T) {
	enc := "streamgate.thinking.v1." + b64(`[{"type":"thinking","thinking":"hmm","signature":"sig=="}]`)
	body := `{"model":"m","instructions":"Be brief.","max_output_tokens":50,"temperature":0.5,"user":"u1",
		"reasoning":{"effort":"low","summary":"auto"},"parallel_tool_calls":false,"tool_choice":"required",
		"text":{"verbosity":"low"},"prompt_cache_key":"k","vendor_extension":{"x":1},
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":false},
			{"type":"custom","name":"apply_patch","description":"Patch files.","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}}],
		"input":[
			{"role":"developer","content":"Use tools."},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"weather?"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},
			{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"hmm"}],"encrypted_content":"` + enc + `"},
			{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAAAB-openai-own"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},
			{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
			{"type":"custom_tool_call","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch"},
			{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"sunny"},{"type":"input_image","image_url":"https://x/y.png"}]},
			{"type":"custom_tool_call_output","call_id":"call_2","output":"done"},
			{"role":"user","content":"thanks"}
		]}`
	p := parse(t, body)
	c := p.Chat
	if c.Model != "m" || *c.MaxCompletionTokens != 50 || *c.Temperature != 0.5 || c.User != "u1" || c.ReasoningEffort != "low" ||
		*c.ParallelToolCalls || string(c.ToolChoice) != `"required"` || c.Stream {
		t.Errorf("scalars: got %+v", c)
	}
	if len(c.Tools) != 2 || c.Tools[0].Function.Name != "get_weather" || c.Tools[1].Function.Name != "apply_patch" ||
		!strings.Contains(c.Tools[1].Function.Description, "start: /.+/") || !strings.Contains(string(c.Tools[1].Function.Parameters), `"input"`) {
		t.Errorf("tools: got %+v", c.Tools)
	}
	roles := []string{}
	for _, m := range c.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,system,user,assistant,tool,tool,user,user" {
		t.Fatalf("roles: got %s, want system,system,user,assistant,tool,tool,user,user", got)
	}
	a := c.Messages[3]
	if a.Text() != "Checking." || len(a.ToolCalls) != 2 || a.ToolCalls[1].Function.Arguments != `{"input":"*** Begin Patch"}` ||
		a.ReasoningContent != "hmm" || len(a.ThinkingBlocks) != 1 || a.ThinkingBlocks[0].Signature != "sig==" {
		t.Errorf("assistant turn: got %+v", a)
	}
	if tm := c.Messages[4]; tm.ToolCallID != "call_1" || tm.Text() != "sunny" || c.Messages[5].Text() != "done" {
		t.Errorf("tool messages: got %+v %+v", tm, c.Messages[5])
	}
	if parts, _ := c.Messages[6].Parts(); len(parts) != 1 || parts[0].ImageURL == nil || parts[0].ImageURL.URL != "https://x/y.png" {
		t.Errorf("the tool output's image: got %+v, want a user message with it after the tool messages", c.Messages[6])
	}
	var bodyMap map[string]json.RawMessage
	if err := json.Unmarshal(p.Body, &bodyMap); err != nil {
		t.Fatalf("body: %v", err)
	}
	for k, want := range map[string]string{"verbosity": `"low"`, "prompt_cache_key": `"k"`, "max_completion_tokens": "50"} {
		if string(bodyMap[k]) != want {
			t.Errorf("body %s: got %s, want %s", k, bodyMap[k], want)
		}
	}
	for _, k := range []string{"input", "instructions", "text", "reasoning", "max_output_tokens", "vendor_extension"} {
		if _, ok := bodyMap[k]; ok {
			t.Errorf("body: got a %s member, a Responses field, in the chat body", k)
		}
	}
	if !p.Meta.summary || p.Meta.encrypted || !p.Meta.tools["apply_patch"].custom || !strings.HasPrefix(p.Meta.ID, "resp_") {
		t.Errorf("meta: got %+v", p.Meta)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestParseFormats(t *testing.T) {
	for _, tt := range []struct{ format, want string }{
		{`{"type":"text"}`, ``},
		{`{"type":"json_object"}`, `{"type":"json_object"}`},
		{`{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}`, `{"json_schema":{"name":"w","schema":{"type":"object"},"strict":true},"type":"json_schema"}`},
	} {
		p := parse(t, `{"model":"m","input":"x","text":{"format":`+tt.format+`}}`)
		if string(p.Chat.ResponseFormat) != tt.want {
			t.Errorf("format %s: got %s, want %s", tt.format, p.Chat.ResponseFormat, tt.want)
		}
	}
	p := parse(t, `{"model":"m","input":"x","stream":true,"tool_choice":{"type":"function","name":"f"},"tools":[{"type":"function","name":"f"}]}`)
	if string(p.Chat.ToolChoice) != `{"function":{"name":"f"},"type":"function"}` || !p.Chat.IncludeUsage() {
		t.Errorf("tool_choice, stream: got %s, include_usage %v", p.Chat.ToolChoice, p.Chat.IncludeUsage())
	}
}

// TestParseBuiltins: built-in tools are left out of the chat form and
// named in Builtins, each once, with the first one's refusal in
// BuiltinErr; web_search's options reach WebSearch; a web_search_call
// input item is left out.
func TestParseBuiltins(t *testing.T) {
	p := parse(t, `{"model":"m","input":[{"role":"user","content":"q"},{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}},{"role":"assistant","content":"a"}],
		"tools":[{"type":"function","name":"f"},{"type":"web_search","filters":{"allowed_domains":["example.com"]},"user_location":{"type":"approximate","city":"Seoul","country":"KR"},"search_context_size":"low"},{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"web_search"}]}`)
	if p.Untranslatable != nil {
		t.Errorf("Untranslatable: got %+v, want nil: built-in tools are dropped or mapped, not untranslatable", p.Untranslatable)
	}
	if !slices.Equal(p.Builtins, []string{"web_search", "file_search"}) {
		t.Errorf("Builtins: got %q, want [web_search file_search]", p.Builtins)
	}
	if e := p.BuiltinErr; e == nil || e.Param != "tools[1].type" || !strings.Contains(e.Msg, `"web_search"`) {
		t.Errorf("BuiltinErr: got %+v, want one naming tools[1].type web_search", e)
	}
	ws := p.Chat.WebSearch
	if ws == nil || !slices.Equal(ws.AllowedDomains, []string{"example.com"}) || ws.UserLocation == nil || *ws.UserLocation != (api.UserLocation{City: "Seoul", Country: "KR"}) {
		t.Errorf("WebSearch: got %+v, want allowed example.com, location Seoul KR", ws)
	}
	if len(p.Chat.Tools) != 1 || p.Chat.Tools[0].Function.Name != "f" {
		t.Errorf("chat tools: got %+v, want f alone", p.Chat.Tools)
	}
	if len(p.Chat.Messages) != 2 || p.Chat.Messages[0].Role != "user" || p.Chat.Messages[1].Role != "assistant" {
		t.Errorf("messages: got %+v, want user and assistant, the web_search_call left out", p.Chat.Messages)
	}
	if strings.Contains(string(p.Body), "web_search") {
		t.Errorf("chat body: got %s, want no web_search in it (no chat route has the tool)", p.Body)
	}
	p = parse(t, `{"model":"m","input":"x","tools":[{"type":"web_search_preview_2025_03_11"}]}`)
	if p.Chat.WebSearch == nil || p.Chat.WebSearch.UserLocation != nil || !slices.Equal(p.Builtins, []string{"web_search_preview_2025_03_11"}) {
		t.Errorf("web_search_preview: got WebSearch %+v, builtins %q", p.Chat.WebSearch, p.Builtins)
	}
	p = parse(t, `{"model":"m","input":"x","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`)
	if p.Chat.WebSearch != nil || !slices.Equal(p.Builtins, []string{"code_interpreter"}) || p.Chat.Tools != nil {
		t.Errorf("code_interpreter: got WebSearch %+v, builtins %q, tools %+v", p.Chat.WebSearch, p.Builtins, p.Chat.Tools)
	}
	var r Request
	Decode([]byte(`{"model":"m","input":"x","tools":[{"type":"web_search","user_location":{"type":"exact"}}]}`), &r)
	if _, err := r.Parse(); err == nil || !strings.Contains(err.Error(), "user_location.type must be approximate") {
		t.Errorf("user_location exact: got %v, want a 400 naming user_location.type", err)
	}
}

// TestParseRefuses: what the gateway cannot serve is a 400 naming it.
// TestParseUntranslatable: what only a route that passes the Responses
// API through can serve is no error: it is left out of the chat form and
// named in Untranslatable (the gateway's translating routes then skip the
// request with a 400 naming it).
func TestParseUntranslatable(t *testing.T) {
	for _, tt := range []struct{ body, param, says string }{
		{`{"model":"m","input":"x","truncation":"auto"}`, "truncation", `"auto"`},
		{`{"model":"m","input":"x","include":["message.output_text.logprobs"]}`, "include[0]", "logprobs"},
		{`{"model":"m","input":"x","tool_choice":{"type":"web_search_preview"}}`, "tool_choice.type", "web_search_preview"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", "item_reference"},
		{`{"model":"m","input":"x","prompt":{"id":"pmpt_1"}}`, "prompt", "prompt"},
		{`{"model":"m","input":"x","max_tool_calls":3}`, "max_tool_calls", "max_tool_calls"},
	} {
		var r Request
		if err := Decode([]byte(tt.body), &r); err != nil {
			t.Fatalf("%s: Decode: %v", tt.body, err)
		}
		p, err := r.Parse()
		if err != nil {
			t.Errorf("%s: got %v, want a chat form and Untranslatable", tt.body, err)
			continue
		}
		e := p.Untranslatable
		if e == nil || e.Param != tt.param || !strings.Contains(e.Msg, tt.says) || !strings.Contains(e.Msg, "providers[].responses") {
			t.Errorf("%s: got %+v, want Untranslatable on %s saying %q and providers[].responses", tt.body, e, tt.param, tt.says)
		}
		if p.Chat == nil {
			continue
		}
		for _, tool := range p.Chat.Tools {
			if tool.Function.Name == "" {
				t.Errorf("%s: chat tools %+v hold a tool that is not a function", tt.body, p.Chat.Tools)
			}
		}
	}
	var r Request
	Decode([]byte(`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}]}`), &r)
	if p, err := r.Parse(); err != nil || p.Untranslatable != nil {
		t.Errorf("function tools: got %v, %+v; want no Untranslatable", err, p.Untranslatable)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ body, param, says string }{
		{`{"input":"x"}`, "model", "model"},
		{`{"model":"m"}`, "input", "input"},
		{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id", "previous_response_id is not supported"},
		{`{"model":"m","input":"x","background":true}`, "background", "background"},
		{`{"model":"m","input":"x","conversation":"conv_1"}`, "conversation", "conversation"},
		{`{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role", `"tool"`},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0].type", "input_audio"},
		{`{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", "call_id"},
		{`{"model":"m","input":"x","reasoning":{"effort":"max"}}`, "reasoning.effort", `"max"`},
		{`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n"}}}`, "text.format.schema", "schema"},
		{`{"model":"m","input":"x","max_output_tokens":0}`, "max_output_tokens", "at least 1"},
	} {
		var r Request
		if err := Decode([]byte(tt.body), &r); err != nil {
			t.Fatalf("%s: Decode: %v", tt.body, err)
		}
		_, err := r.Parse()
		e, ok := err.(*Error)
		if !ok || e.Param != tt.param || !strings.Contains(e.Msg, tt.says) {
			t.Errorf("%s: got %v, want an error on %s saying %q", tt.body, err, tt.param, tt.says)
		}
	}
	many := `{"model":"m","input":[` + strings.Repeat(`{},`, api.MaxMessages) + `{}]}`
	var r Request
	if err := Decode([]byte(many), &r); err == nil || !strings.Contains(err.Error(), "too many input") {
		t.Errorf("too many items: got %v, want a TooManyError", err)
	}
}

// chunks is a stream as the relay hands it to an Encoder: each chunk with
// its scan.
func run(t testing.TB, enc *Encoder, chunks []string, end func(w *sse.Writer) error) []byte {
	t.Helper()
	var out bytes.Buffer
	w := sse.NewWriter(&out)
	for _, c := range chunks {
		info, err := api.ScanChunk([]byte(c))
		if err != nil {
			t.Fatalf("ScanChunk(%s): %v", c, err)
		}
		if err := enc.Event(w, &sse.Event{Data: []byte(c)}, &info); err != nil {
			t.Fatal(err)
		}
	}
	if err := end(w); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// events reads a Responses stream with the SDK's event type, checking that
// sequence numbers count from 0 and that exactly one terminal event ends it.
func events(t *testing.T, stream []byte) []oresponses.ResponseStreamEventUnion {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(stream), 1<<20)
	var evs []oresponses.ResponseStreamEventUnion
	terminal := 0
	for {
		ev, err := r.Next()
		if err == io.EOF || errors.Is(err, sse.ErrTruncated) {
			break // no "[DONE]" ends a Responses stream: its terminal event does
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var u oresponses.ResponseStreamEventUnion
		if err := json.Unmarshal(ev.Data, &u); err != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		if string(ev.Name) != u.Type {
			t.Errorf("event name %q, type %q: want the same", ev.Name, u.Type)
		}
		if u.SequenceNumber != int64(len(evs)) {
			t.Errorf("event %d (%s): sequence_number %d", len(evs), u.Type, u.SequenceNumber)
		}
		if terminal > 0 {
			t.Errorf("event %s after the terminal event", u.Type)
		}
		switch u.Type {
		case "response.completed", "response.incomplete", "response.failed":
			terminal++
		}
		evs = append(evs, u)
	}
	if terminal != 1 {
		t.Fatalf("got %d terminal events, want 1", terminal)
	}
	return evs
}

func testMeta(t *testing.T, body string) *Meta {
	return parse(t, body).Meta
}

const (
	role   = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	finish = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"%s"}]}`
	usage1 = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":3}}}`
)

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

func fin(reason string) string { return strings.Replace(finish, "%s", reason, 1) }

// TestEncoderText: reasoning then text, as a reasoning item with a summary
// and a message; the final response holds both and the usage.
func TestEncoderText(t *testing.T) {
	m := testMeta(t, `{"model":"m","input":"hi","reasoning":{"summary":"auto"}}`)
	enc := NewEncoder(m)
	out := run(t, enc, []string{role,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"Let me "}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"think."}}]}`,
		text("Hello"), text(", \"wörld\"\n"), fin("stop"), usage1}, enc.Done)
	evs := events(t, out)
	var types []string
	var deltas strings.Builder
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			deltas.WriteString(ev.Delta)
		}
	}
	want := "response.created response.in_progress response.output_item.added response.reasoning_summary_part.added " +
		"response.reasoning_summary_text.delta response.reasoning_summary_text.delta response.reasoning_summary_text.done " +
		"response.reasoning_summary_part.done response.output_item.done response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done " +
		"response.output_item.done response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	res := evs[len(evs)-1].AsResponseCompleted().Response
	if res.Status != "completed" || res.OutputText() != "Hello, \"wörld\"\n" || deltas.String() != res.OutputText() || len(res.Output) != 2 ||
		res.Output[0].Type != "reasoning" || res.Output[0].Summary[0].Text != "Let me think." {
		t.Errorf("response: got status %s, text %q (deltas %q), output %+v", res.Status, res.OutputText(), deltas.String(), res.Output)
	}
	u := res.Usage
	if u.InputTokens != 12 || u.OutputTokens != 7 || u.TotalTokens != 19 || u.InputTokensDetails.CachedTokens != 4 || u.OutputTokensDetails.ReasoningTokens != 3 {
		t.Errorf("usage: got %+v", u)
	}
}

// TestEncoderCalls: two calls, the second of a custom tool, then the
// finish: function_call items with argument deltas, a custom_tool_call
// with its input; an answer cut by its limit is incomplete.
func TestEncoderCalls(t *testing.T) {
	m := testMeta(t, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"custom","name":"apply_patch"}]}`)
	enc := NewEncoder(m)
	out := run(t, enc, []string{role,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"line1\\n"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"line2\"}"}}]}}]}`,
		fin("tool_calls"), usage1}, enc.Done)
	evs := events(t, out)
	args := ""
	custom := 0
	for _, ev := range evs {
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args += ev.Delta
		case "response.custom_tool_call_input.done":
			custom++
		}
	}
	res := evs[len(evs)-1].AsResponseCompleted().Response
	if len(res.Output) != 2 || args != `{"a":1}` || custom != 1 {
		t.Fatalf("got output %+v, arguments %q, %d custom input events", res.Output, args, custom)
	}
	f, c := res.Output[0].AsFunctionCall(), res.Output[1].AsCustomToolCall()
	if f.CallID != "call_a" || f.Name != "f" || f.Arguments != `{"a":1}` || c.CallID != "call_b" || c.Name != "apply_patch" || c.Input != "line1\nline2" {
		t.Errorf("got calls %+v, %+v", f, c)
	}

	enc = NewEncoder(m)
	out = run(t, enc, []string{role, text("a"), text("b"), fin("length"), usage1}, enc.Done)
	evs = events(t, out)
	last := evs[len(evs)-1]
	if last.Type != "response.incomplete" {
		t.Fatalf("got %s, want response.incomplete", last.Type)
	}
	res = last.AsResponseIncomplete().Response
	if res.IncompleteDetails.Reason != "max_output_tokens" || res.Usage.OutputTokens != 7 || res.Output[0].Status != "incomplete" || res.JSON.CompletedAt.Raw() != "null" {
		t.Errorf("got %+v", res)
	}
}

// TestNamespaceTools: a namespace's tools are chat functions named
// namespace__name; their calls come back as the client declared them,
// with their namespace, and go upstream again under the chat name.
func TestNamespaceTools(t *testing.T) {
	body := `{"model":"m","input":[{"role":"user","content":"x"},
		{"type":"function_call","call_id":"c0","name":"spawn","namespace":"agents","arguments":"{}"},
		{"type":"function_call_output","call_id":"c0","output":"ok"}],
		"tools":[{"type":"function","name":"spawn"},{"type":"namespace","name":"agents","description":"Sub-agents.","tools":[
			{"type":"function","name":"spawn","parameters":{"type":"object"}},{"type":"custom","name":"note"}]}]}`
	p := parse(t, body)
	var names []string
	for _, tl := range p.Chat.Tools {
		names = append(names, tl.Function.Name)
	}
	if got := strings.Join(names, ","); got != "spawn,agents__spawn,agents__note" {
		t.Errorf("chat tools: got %s, want spawn,agents__spawn,agents__note", got)
	}
	if c := p.Chat.Messages[1].ToolCalls; len(c) != 1 || c[0].Function.Name != "agents__spawn" {
		t.Errorf("input call: got %+v, want agents__spawn", c)
	}
	enc := NewEncoder(p.Meta)
	out := run(t, enc, []string{role,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"agents__spawn","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"agents__note","arguments":"{\"input\":\"hi\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"c3","function":{"name":"spawn","arguments":"{}"}}]}}]}`,
		fin("tool_calls"), usage1}, enc.Done)
	evs := events(t, out)
	res := evs[len(evs)-1].AsResponseCompleted().Response
	f, c, g := res.Output[0].AsFunctionCall(), res.Output[1].AsCustomToolCall(), res.Output[2].AsFunctionCall()
	if f.Name != "spawn" || f.Namespace != "agents" || c.Name != "note" || c.Namespace != "agents" || c.Input != "hi" || g.Name != "spawn" || g.Namespace != "" {
		t.Errorf("got %s", res.RawJSON())
	}
	var r Request
	dup := `{"model":"m","input":"x","tools":[{"type":"function","name":"a__b"},{"type":"namespace","name":"a","tools":[{"type":"function","name":"b"}]}]}`
	Decode([]byte(dup), &r)
	if _, err := r.Parse(); err == nil || !strings.Contains(err.Error(), `"a__b" is declared twice`) {
		t.Errorf("a duplicate chat name: got %v", err)
	}
}

// TestEncoderThinking: an Anthropic route's signed thinking and a redacted
// block are reasoning items whose encrypted_content (asked for by include)
// carries the blocks; sent back as input they are the assistant turn's
// thinking_blocks again, signatures included.
func TestEncoderThinking(t *testing.T) {
	m := testMeta(t, `{"model":"m","input":"hi","include":["reasoning.encrypted_content"]}`)
	enc := NewEncoder(m)
	out := run(t, enc, []string{role,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"I \"think\""}}]}`,
		`{"choices":[{"index":0,"delta":{"thinking_blocks":[{"type":"thinking","signature":"SIG1"}]}}]}`,
		`{"choices":[{"index":0,"delta":{"thinking_blocks":[{"type":"redacted_thinking","data":"REDACTED"}]}}]}`,
		text("ok"), fin("stop"), usage1}, enc.Done)
	evs := events(t, out)
	res := evs[len(evs)-1].AsResponseCompleted().Response
	if len(res.Output) != 3 || res.Output[0].Type != "reasoning" || res.Output[1].Type != "reasoning" || res.Output[2].Type != "message" {
		t.Fatalf("got output %+v", res.Output)
	}
	r0 := res.Output[0].AsReasoning()
	if len(r0.Content) != 1 || r0.Content[0].Text != `I "think"` || len(r0.Summary) != 0 {
		t.Errorf("reasoning without summary asked: got %+v, want its text as reasoning_text content", r0)
	}
	items, _ := json.Marshal([]any{res.Output[0].AsReasoning().ToParam(), res.Output[1].AsReasoning().ToParam(),
		map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "x"}})
	p := parse(t, `{"model":"m","input":`+string(items)+`}`)
	a := p.Chat.Messages[0]
	if len(a.ThinkingBlocks) != 2 || a.ThinkingBlocks[0] != (api.ThinkingBlock{Type: "thinking", Thinking: `I "think"`, Signature: "SIG1"}) ||
		a.ThinkingBlocks[1] != (api.ThinkingBlock{Type: "redacted_thinking", Data: "REDACTED"}) {
		t.Errorf("sent back: got %+v, want the two blocks as they came", a.ThinkingBlocks)
	}
}

// TestEncoderFailed: an error after content ends the stream with
// response.failed: the output so far, the error, the usage estimated.
func TestEncoderFailed(t *testing.T) {
	m := testMeta(t, `{"model":"m","input":"hi"}`)
	enc := NewEncoder(m)
	enc.EstimatePrompt = func() int { return 42 }
	out := run(t, enc, []string{role, text("a"), text("b")}, func(w *sse.Writer) error {
		return enc.Error(w, []byte(`{"error":{"message":"the upstream's stream ended before it was complete","type":"upstream_error","code":"stream_truncated","param":null}}`))
	})
	evs := events(t, out)
	last := evs[len(evs)-1]
	res := last.AsResponseFailed().Response
	if last.Type != "response.failed" || res.Status != "failed" || res.Error.Code != "stream_truncated" || res.OutputText() != "ab" ||
		res.Usage.InputTokens != 42 || res.Usage.OutputTokens != 2 || res.Output[0].Status != "incomplete" {
		t.Errorf("got %s %+v", last.Type, res)
	}

	// A failure before content after the relay held the role chunk's
	// events (written to a writer of their own, then dropped): the
	// client's stream still begins at sequence 0.
	enc = NewEncoder(m)
	held := sse.NewWriter(io.Discard)
	info, _ := api.ScanChunk([]byte(role))
	if err := enc.Event(held, &sse.Event{Data: []byte(role)}, &info); err != nil {
		t.Fatal(err)
	}
	out = run(t, enc, nil, func(w *sse.Writer) error {
		return enc.Error(w, []byte(`{"error":{"message":"x","type":"t","code":"first_token_timeout"}}`))
	})
	if evs = events(t, out); len(evs) != 3 || evs[0].Type != "response.created" || evs[2].AsResponseFailed().Response.Error.Code != "first_token_timeout" {
		t.Errorf("after held events: got %s", out)
	}

	// An error before anything was written is a whole stream too.
	enc = NewEncoder(m)
	out = run(t, enc, nil, func(w *sse.Writer) error { return enc.Error(w, []byte(`{"error":{"message":"x","type":"t"}}`)) })
	if evs = events(t, out); len(evs) != 3 || evs[2].AsResponseFailed().Response.Error.Code != "server_error" {
		t.Errorf("got %+v", evs)
	}
}

func TestFromCompletion(t *testing.T) {
	m := testMeta(t, `{"model":"m","input":"hi","tools":[{"type":"custom","name":"apply_patch"}],"reasoning":{"summary":"concise"}}`)
	body := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Sure.","reasoning_content":"why",
		"tool_calls":[{"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"P\"}"}}]},"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}`
	out, spans, err := FromCompletion([]byte(body), m)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputItems(t, out, spans)
	var res oresponses.Response
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "completed" || len(res.Output) != 3 || res.Output[0].Summary[0].Text != "why" || res.OutputText() != "Sure." ||
		res.Output[2].AsCustomToolCall().Input != "P" || res.Usage.TotalTokens != 11 || res.Object != "response" || res.Model != "m" {
		t.Errorf("got %s", out)
	}
}

// checkOutputItems checks that spans are where resp's output items stand,
// in order, with their ids, as a JSON parser reads them.
func checkOutputItems(t *testing.T, resp []byte, spans []OutputItem) {
	t.Helper()
	var r struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("response %s: %v", resp, err)
	}
	if len(spans) != len(r.Output) {
		t.Fatalf("got %d output items' places, want %d: %+v in %s", len(spans), len(r.Output), spans, resp)
	}
	for i, sp := range spans {
		var id struct {
			ID string `json:"id"`
		}
		json.Unmarshal(r.Output[i], &id)
		if got := string(resp[sp.Start:sp.End]); got != string(r.Output[i]) || sp.ID != id.ID || id.ID == "" {
			t.Errorf("output item %d: got %q (id %q), want %s (id %q)", i, got, sp.ID, r.Output[i], id.ID)
		}
	}
}

// The encoder's OnEnd hands the response object as the terminal event
// carries it, and where each of its output items stands in it: storing a
// response reads neither again.
func TestEncoderOnEndOutputItems(t *testing.T) {
	m := testMeta(t, `{"model":"m","input":"hi","reasoning":{"summary":"auto"},"tools":[{"type":"function","name":"f"}]}`)
	enc := NewEncoder(m)
	var resp []byte
	var spans []OutputItem
	enc.OnEnd = func(r []byte, s []OutputItem) { resp, spans = append(resp[:0], r...), append(spans[:0], s...) }
	out := run(t, enc, []string{role,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think."}}]}`,
		text("Hello"),
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
		fin("tool_calls"), usage1}, enc.Done)
	if !bytes.Contains(out, resp) || len(resp) == 0 {
		t.Fatalf("OnEnd's response %s is not the terminal event's", resp)
	}
	checkOutputItems(t, resp, spans)
	if len(spans) != 3 {
		t.Errorf("got %d output items, want reasoning, message and call", len(spans))
	}
}

// BenchmarkEncoderTextChunk is a relayed text chunk written as an
// output_text.delta (compare messages.BenchmarkEncoderTextChunk and
// BenchmarkEncoderOthers below, on the same chunk).
func BenchmarkEncoderTextChunk(b *testing.B) {
	var r Request
	Decode([]byte(`{"model":"m","input":"hi"}`), &r)
	p, _ := r.Parse()
	w := sse.NewWriter(io.Discard)
	enc := NewEncoder(p.Meta)
	ev := &sse.Event{Data: []byte(text(" token"))}
	info := &api.ChunkInfo{Content: true}
	enc.Event(w, ev, info) // created, the item's start
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.Event(w, ev, info); err != nil {
			b.Fatal(err)
		}
		if len(enc.items[0].text) > 1<<20 {
			enc.items[0].text = enc.items[0].text[:0]
		}
	}
}

// BenchmarkEncoderOthers is the same chunk through the Messages encoder and
// the OpenAI (passthrough) encoder.
func BenchmarkEncoderOthers(b *testing.B) {
	ev := &sse.Event{Data: []byte(text(" token"))}
	info := &api.ChunkInfo{Content: true}
	for name, enc := range map[string]relay.Encoder{"messages": messages.NewEncoder("m"), "openai": relay.OpenAI} {
		b.Run(name, func(b *testing.B) {
			w := sse.NewWriter(io.Discard)
			enc.Event(w, ev, info)
			b.ReportAllocs()
			for b.Loop() {
				if err := enc.Event(w, ev, info); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzDecode: the request decoder agrees with encoding/json on which
// bodies are JSON objects, never panics, and whatever it accepts either
// translates into a chat request whose body is a JSON object, or is refused
// with an *Error naming a field.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"y"}]}`,
		`{"model":"m","input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}],"encrypted_content":"streamgate.thinking.v1.W10"}],"tools":[{"type":"custom","name":"p"}]}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{}}},"tool_choice":{"type":"custom","name":"p"}}`,
		`{"model":"m","input":[[[[]]]]}`, `null`, `[]`, `{"model":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Request
		err := Decode(body, &r)
		var ref Request
		refErr := json.Unmarshal(body, &ref)
		if (err == nil) != (refErr == nil) {
			if _, many := err.(*api.TooManyError); !many {
				t.Fatalf("Decode: %v, encoding/json: %v", err, refErr)
			}
		}
		if err != nil || bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
			return
		}
		p, err := r.Parse()
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse: %v, want an *Error", err)
			}
			return
		}
		var chat map[string]json.RawMessage
		if err := json.Unmarshal(p.Body, &chat); err != nil {
			t.Fatalf("chat body %s: %v", p.Body, err)
		}
		if !json.Valid(p.Meta.appendResponse(nil, nil, &final{status: "completed"}, nil)) {
			t.Fatalf("response object of %s is not JSON", body)
		}
	})
}

// FuzzEncoder: whatever chunks an upstream sends (each line of the input
// that the relay would relay: a JSON object ScanChunk accepts), the
// stream written is well formed: every event a JSON object of its type,
// sequence numbers from 0, exactly one terminal event, last.
func FuzzEncoder(f *testing.F) {
	f.Add([]byte(role + "\n" + text("a") + "\n" + fin("stop") + "\n" + usage1))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"reasoning_content":"r","tool_calls":[{"index":0,"id":"x","function":{"name":"apply_patch","arguments":"{\"in"}}]}}]}` + "\n" +
		`{"choices":[{"index":0,"delta":{"thinking_blocks":[{"type":"thinking","signature":"s"},{"type":"redacted_thinking","data":"d"}],"refusal":"no"},"finish_reason":"length"}]}`))
	f.Add([]byte(`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f"}},{"function":{"arguments":"1"}},{"id":"y"}]}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Request
		body := `{"model":"m","input":"x","include":["reasoning.encrypted_content"],"tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"f"}]}`
		Decode([]byte(body), &r)
		p, err := r.Parse()
		if err != nil {
			t.Fatal(err)
		}
		var chunks []string
		for _, line := range bytes.Split(in, []byte("\n")) {
			if _, err := api.ScanChunk(line); err == nil {
				chunks = append(chunks, string(line))
			}
		}
		enc := NewEncoder(p.Meta)
		end := enc.Done
		if len(in) > 0 && in[0]%2 == 1 {
			end = func(w *sse.Writer) error {
				return enc.Error(w, []byte(`{"error":{"message":"cut","code":"stream_truncated"}}`))
			}
		}
		out := run(t, enc, chunks, end)
		evs := events(t, out)
		if len(evs) < 3 || evs[0].Type != "response.created" {
			t.Fatalf("got %s", out)
		}
	})
}

// BenchmarkEncoderPass is a Responses delta event through the passthrough
// encoder (Encoder.Pass): written as it came, its sequence number read.
func BenchmarkEncoderPass(b *testing.B) {
	var r Request
	Decode([]byte(`{"model":"m","input":"hi"}`), &r)
	p, _ := r.Parse()
	w := sse.NewWriter(io.Discard)
	enc := NewEncoder(p.Meta).Pass(provider.DialectResponses)
	ev := &sse.Event{Name: []byte("response.output_text.delta"),
		Data: []byte(`{"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" token","logprobs":[]}`)}
	info := &api.ChunkInfo{Content: true}
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.Event(w, ev, info); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAdditionalTools: Codex's additional_tools input items declare tools
// (grouped in namespaces) that join the request's, the default namespace
// "functions" keeping bare names and others namespace__name; a
// configuration_update item sets the reasoning effort. Neither is
// refused; built-in tools in them are left out as in "tools".
func TestAdditionalTools(t *testing.T) {
	captured, err := os.ReadFile("testdata/codex_additional_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	at := func(tools string) string {
		return `{"type":"additional_tools","id":"at_1","role":"developer","tools":[` + tools + `]}`
	}
	clock := `{"type":"namespace","name":"clock","tools":[{"type":"function","name":"sleep","parameters":{"type":"object"}}]}`
	fns := `{"type":"namespace","name":"functions","description":"","tools":[{"type":"custom","name":"exec"},{"type":"function","name":"wait"}]}`
	user := `{"role":"user","content":"hi"}`
	tests := []struct {
		name     string
		body     string
		tools    string // chat tool names
		effort   string
		msgs     int
		builtins string
		calls    string // the chat names of the input's calls
	}{
		{name: "captured", body: string(captured), tools: "exec,wait,clock__sleep,collaboration__spawn_agent", effort: "low", msgs: 2},
		{name: "with tools", body: `{"model":"m","tools":[{"type":"function","name":"f"}],"input":[` + at(fns+","+clock) + `,` + user + `]}`,
			tools: "f,exec,wait,clock__sleep", msgs: 1},
		{name: "builtins dropped", body: `{"model":"m","input":[` + at(`{"type":"web_search"},{"type":"namespace","name":"x","tools":[{"type":"file_search"},{"type":"function","name":"g"}]}`) + `,` + user + `]}`,
			tools: "x__g", msgs: 1, builtins: "web_search,file_search"},
		{name: "declared again", body: `{"model":"m","input":[` + at(clock) + `,` + user + `,` + at(clock) + `]}`, tools: "clock__sleep", msgs: 1},
		{name: "configuration_update without effort", body: `{"model":"m","reasoning":{"effort":"medium"},"input":[` + user + `,{"type":"configuration_update"},{"type":"configuration_update","reasoning":{"effort":"bogus"}}]}`,
			effort: "medium", msgs: 1},
		{name: "last effort wins", body: `{"model":"m","input":[{"type":"configuration_update","reasoning":{"effort":"high"}},` + user + `,{"type":"configuration_update","reasoning":{"effort":"minimal"}}]}`,
			effort: "minimal", msgs: 1},
		{name: "calls with namespaces", body: `{"model":"m","input":[` + at(fns+","+clock) + `,` + user + `,
			{"type":"function_call","call_id":"c1","name":"sleep","namespace":"clock","arguments":"{}"},
			{"type":"function_call","call_id":"c2","name":"wait","namespace":"functions","arguments":"{}"},
			{"type":"custom_tool_call","call_id":"c3","name":"exec","input":"1"},
			{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"function_call_output","call_id":"c2","output":"ok"},
			{"type":"custom_tool_call_output","call_id":"c3","output":"ok"}]}`,
			tools: "exec,wait,clock__sleep", msgs: 5, calls: "clock__sleep,wait,exec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := parse(t, tt.body)
			if p.Untranslatable != nil {
				t.Fatalf("untranslatable: %v", p.Untranslatable)
			}
			var names, calls []string
			for _, tl := range p.Chat.Tools {
				names = append(names, tl.Function.Name)
			}
			for _, m := range p.Chat.Messages {
				for _, c := range m.ToolCalls {
					calls = append(calls, c.Function.Name)
				}
			}
			if got := strings.Join(names, ","); got != tt.tools {
				t.Errorf("chat tools: got %q, want %q", got, tt.tools)
			}
			if got := strings.Join(calls, ","); got != tt.calls {
				t.Errorf("input calls: got %q, want %q", got, tt.calls)
			}
			if p.Chat.ReasoningEffort != tt.effort {
				t.Errorf("reasoning effort: got %q, want %q", p.Chat.ReasoningEffort, tt.effort)
			}
			if len(p.Chat.Messages) != tt.msgs {
				t.Errorf("got %d messages, want %d: %+v", len(p.Chat.Messages), tt.msgs, p.Chat.Messages)
			}
			if got := strings.Join(p.Builtins, ","); got != tt.builtins {
				t.Errorf("builtins: got %q, want %q", got, tt.builtins)
			}
		})
	}
}

// TestAdditionalToolsCalls: the calls of additional tools come back named
// as declared: a namespace's with it, the default namespace's ("functions")
// with none.
func TestAdditionalToolsCalls(t *testing.T) {
	captured, err := os.ReadFile("testdata/codex_additional_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, string(captured))
	enc := NewEncoder(p.Meta)
	out := run(t, enc, []string{role,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"clock__sleep","arguments":"{\"duration_ms\":1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"wait","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"c3","function":{"name":"exec","arguments":"{\"input\":\"1+1\"}"}}]}}]}`,
		fin("tool_calls"), usage1}, enc.Done)
	evs := events(t, out)
	var added []string
	for _, ev := range evs {
		if ev.Type == "response.output_item.added" {
			added = append(added, ev.Item.Name+"/"+ev.Item.Namespace)
		}
	}
	if got := strings.Join(added, ","); got != "sleep/clock,wait/,exec/" {
		t.Errorf("output_item.added: got %s, want sleep/clock,wait/,exec/", got)
	}
	res := evs[len(evs)-1].AsResponseCompleted().Response
	s, w, x := res.Output[0].AsFunctionCall(), res.Output[1].AsFunctionCall(), res.Output[2].AsCustomToolCall()
	if s.Name != "sleep" || s.Namespace != "clock" || w.Name != "wait" || w.Namespace != "" || x.Name != "exec" || x.Namespace != "" || x.Input != "1+1" {
		t.Errorf("got %s", res.RawJSON())
	}
	if raw := res.Output[1].RawJSON(); strings.Contains(raw, "namespace") {
		t.Errorf("a default-namespace call has a namespace: %s", raw)
	}
	if !strings.Contains(res.RawJSON(), `"reasoning":{"effort":"low"`) {
		t.Errorf("the configuration_update's effort is not echoed: %s", res.RawJSON())
	}
}
