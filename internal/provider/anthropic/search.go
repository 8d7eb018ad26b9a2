package anthropic

import (
	"encoding/json"

	"github.com/streamgate/streamgate/internal/api"
)

// Web search: a request with api.ChatRequest.WebSearch gets Anthropic's
// web search server tool (webSearchTool); the answer's server_tool_use
// blocks named web_search and their web_search_tool_result blocks come
// back as api.WebSearchCall deltas (in_progress at the call's start,
// searching with its query at its end, completed or failed with its
// result), and the web_search_result_location citations of a text block
// as url_citation annotations over the block's text, once it ends
// (api.Annotation: characters of the whole content).

// webSearchTool is the server tool of ws.
func webSearchTool(ws *api.WebSearch) tool {
	t := tool{Type: "web_search_20250305", Name: "web_search", AllowedDomains: ws.AllowedDomains}
	if l := ws.UserLocation; l != nil {
		t.UserLocation = &userLocation{Type: "approximate", UserLocation: *l}
	}
	return t
}

// userLocation is a web search tool's user_location.
type userLocation struct {
	Type string `json:"type"` // approximate
	api.UserLocation
}

// RunsTool implements provider.ToolRunner: web_search runs as Anthropic's
// web search server tool.
func (c *Client) RunsTool(name string) bool { return name == "web_search" }

// searchState is what a stream keeps of the web searches of its answer.
type searchState struct {
	runes     int    // characters of content returned so far
	textStart int    // runes when the open text block started
	args      []byte // the open server_tool_use's input so far, escaped as in a JSON string
	ids       []string
	queries   []string // by ids' index
	cites     []api.Annotation
}

// query is the query of the search id, "" when unknown.
func (ss *searchState) query(id string) string {
	for i, x := range ss.ids {
		if x == id {
			return ss.queries[i]
		}
	}
	return ""
}

// searchCall writes a chunk whose delta holds the one search call c.
func (s *stream) searchCall(c api.WebSearchCall) {
	b, _ := json.Marshal([]api.WebSearchCall{c})
	s.delta(`"web_search_calls":`, b, "")
}

// searchStart reads a web_search server_tool_use's start.
func (s *stream) searchStart(id []byte) {
	ss := s.search
	ss.args = ss.args[:0]
	ss.ids = append(ss.ids, unquoteLit(id))
	ss.queries = append(ss.queries, "")
	s.searchCall(api.WebSearchCall{ID: unquoteLit(id), Status: "in_progress"})
}

// searchEnd reads the end of the open server_tool_use: its query.
func (s *stream) searchEnd() {
	ss := s.search
	if len(ss.ids) == 0 {
		return
	}
	var in struct {
		Query string `json:"query"`
	}
	if raw, ok := api.AppendUnescaped(nil, ss.args); ok {
		_ = json.Unmarshal(raw, &in)
	}
	last := len(ss.ids) - 1
	ss.queries[last] = in.Query
	s.searchCall(api.WebSearchCall{ID: ss.ids[last], Status: "searching", Query: in.Query})
}

// searchResult reads a web_search_tool_result block: its content is the
// results, or an error object (web_search_tool_result_error).
func (s *stream) searchResult(toolUseID, content []byte) {
	id := unquoteLit(toolUseID)
	status := "completed"
	var e struct {
		Type string `json:"type"`
	}
	if len(content) > 0 && content[0] == '{' && json.Unmarshal(content, &e) == nil && e.Type == "web_search_tool_result_error" {
		status = "failed"
	}
	s.searchCall(api.WebSearchCall{ID: id, Status: status, Query: s.search.query(id)})
}

// cite keeps a citations_delta's citation for the open text block.
func (s *stream) cite(raw []byte) {
	var c struct {
		Type  string `json:"type"`
		URL   string `json:"url"`
		Title string `json:"title"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type != "web_search_result_location" || c.URL == "" {
		return
	}
	ss := s.search
	for _, a := range ss.cites {
		if a.URLCitation.URL == c.URL {
			return // one annotation per page and block
		}
	}
	ss.cites = append(ss.cites, api.Annotation{Type: "url_citation", URLCitation: api.URLCitation{URL: c.URL, Title: c.Title}})
}

// textEnd ends a text block: its citations as annotations over its text.
func (s *stream) textEnd() {
	ss := s.search
	if len(ss.cites) == 0 {
		return
	}
	for i := range ss.cites {
		ss.cites[i].URLCitation.StartIndex, ss.cites[i].URLCitation.EndIndex = ss.textStart, ss.runes
	}
	b, _ := json.Marshal(ss.cites)
	ss.cites = ss.cites[:0]
	s.delta(`"annotations":`, b, "")
}

// escapedRunes counts the characters of the string literal lit (quotes
// included).
func escapedRunes(lit []byte) int {
	if len(lit) < 2 {
		return 0
	}
	return api.EscapedRunes(lit[1 : len(lit)-1])
}

// unquoteLit is the string literal lit's value, "" when absent.
func unquoteLit(lit []byte) string {
	if len(lit) < 2 {
		return ""
	}
	return unquote(lit)
}
