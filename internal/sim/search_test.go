package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const anthropicSearch = `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search","max_uses":3,"user_location":{"type":"approximate","city":"Seoul"}}]`

// TestAnthropicWebSearchStream: the web search server tool searches once
// before the answer, as Anthropic streams it: a server_tool_use block with
// its query as input_json_delta, a web_search_tool_result block with the
// results, the text block with a citations_delta first, and the search
// counted in message_delta's usage.
func TestAnthropicWebSearchStream(t *testing.T) {
	_, ts := newTestServer(t, Options{Profile: quick})
	hdr := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	resp := postJSON(t, ts, anthropicPath, anthropicBody(true, 100, anthropicSearch), hdr)
	evs, err := readAll(t, resp)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var blocks []string
	var partial, citation, usage string
	for _, ev := range evs {
		var v struct {
			Index        int `json:"index"`
			ContentBlock *struct {
				Type      string          `json:"type"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			} `json:"content_block"`
			Delta struct {
				Type        string          `json:"type"`
				PartialJSON string          `json:"partial_json"`
				Citation    json.RawMessage `json:"citation"`
			} `json:"delta"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Fatalf("%s: %v", ev.data, err)
		}
		switch ev.name {
		case "content_block_start":
			blocks = append(blocks, v.ContentBlock.Type)
			if v.ContentBlock.Type == "web_search_tool_result" && (!strings.HasPrefix(v.ContentBlock.ToolUseID, "srvtoolu_") || !strings.Contains(string(v.ContentBlock.Content), `"type":"web_search_result"`)) {
				t.Errorf("result block: got %s", ev.data)
			}
		case "content_block_delta":
			switch v.Delta.Type {
			case "input_json_delta":
				partial += v.Delta.PartialJSON
			case "citations_delta":
				citation = string(v.Delta.Citation)
			}
		case "message_delta":
			usage = string(v.Usage)
		}
	}
	if strings.Join(blocks, ",") != "server_tool_use,web_search_tool_result,text" {
		t.Errorf("blocks: got %v, want server_tool_use, web_search_tool_result, text", blocks)
	}
	if partial != `{"query":"tell me about streaming latency"}` {
		t.Errorf("query: got %s", partial)
	}
	if !strings.Contains(citation, `"type":"web_search_result_location"`) || !strings.Contains(citation, `"url":"https://example.com/tell-me-about-streaming-latency/1"`) {
		t.Errorf("citation: got %s", citation)
	}
	if !strings.Contains(usage, `"server_tool_use":{"web_search_requests":1}`) {
		t.Errorf("usage: got %s, want server_tool_use.web_search_requests 1", usage)
	}

	resp = postJSON(t, ts, anthropicPath, anthropicBody(false, 100, anthropicSearch), hdr)
	var m struct {
		Content []struct {
			Type      string          `json:"type"`
			Input     json.RawMessage `json:"input"`
			Citations json.RawMessage `json:"citations"`
		} `json:"content"`
		Usage struct {
			ServerToolUse struct {
				WebSearchRequests int `json:"web_search_requests"`
			} `json:"server_tool_use"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || len(m.Content) != 3 || m.Content[0].Type != "server_tool_use" ||
		m.Content[1].Type != "web_search_tool_result" || !strings.Contains(string(m.Content[2].Citations), "web_search_result_location") || m.Usage.ServerToolUse.WebSearchRequests != 1 {
		t.Errorf("non-stream: got %+v (%v), want the search's blocks, cited text, one search request", m, err)
	}
}

// TestAnthropicWebSearchRefused: a malformed web search tool is refused as
// Anthropic refuses it.
func TestAnthropicWebSearchRefused(t *testing.T) {
	_, ts := newTestServer(t, Options{Profile: quick})
	hdr := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	for _, tt := range []struct{ tool, says string }{
		{`{"type":"web_search_20250305","name":"search"}`, "name: Input should be 'web_search'"},
		{`{"type":"web_search_20250305","name":"web_search","max_uses":0}`, "max_uses"},
		{`{"type":"web_search_20250305","name":"web_search","allowed_domains":["a.com"],"blocked_domains":["b.com"]}`, "both allowed_domains and blocked_domains"},
		{`{"type":"web_search_20250305","name":"web_search","user_location":{"type":"exact"}}`, "user_location.type"},
		{`{"type":"web_search_2025","name":"web_search"}`, "does not match any of the expected tags"},
		{`{"type":"web_search_20250305","name":"web_search","input_schema":{"type":"object"}}`, "input_schema"},
	} {
		resp := postJSON(t, ts, anthropicPath, anthropicBody(false, 100, `,"tools":[`+tt.tool+`]`), hdr)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tt.says) {
			t.Errorf("%s: got %d %s, want 400 saying %q", tt.tool, resp.StatusCode, b, tt.says)
		}
	}
}
