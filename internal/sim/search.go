package sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"unicode"
)

// Web search, emulated as the providers run it, with deterministic fake
// results: a request that offers Anthropic's web search server tool
// (tools[] entry of type web_search_20250305, …) or Gemini's Google Search
// grounding (tools[] entry {"google_search":{}}) and gets a text answer
// searches once, for the first words of its last user message; the
// results are example.com pages named after the query. Anthropic's
// answer then holds a server_tool_use block, a web_search_tool_result
// block and the text with a web_search_result_location citation, and its
// usage server_tool_use.web_search_requests; Gemini's candidate holds
// groundingMetadata (webSearchQueries, groundingChunks, groundingSupports
// over the text). Malformed tool entries are refused as the providers
// refuse them.

// webSearch is the one search an answer makes.
type webSearch struct {
	id      string
	query   string
	results []searchResult
}

type searchResult struct{ url, title string }

// anthropicSearchTypes are the web search tool versions Anthropic accepts.
var anthropicSearchTypes = []string{"web_search_20250305", "web_search_20260209", "web_search_20260318"}

// anthropicSearchTool validates a tools[] entry whose type starts with
// web_search as Anthropic does.
func anthropicSearchTool(raw json.RawMessage, i int) error {
	var t struct {
		Type           string   `json:"type"`
		Name           string   `json:"name"`
		MaxUses        *int     `json:"max_uses"`
		AllowedDomains []string `json:"allowed_domains"`
		BlockedDomains []string `json:"blocked_domains"`
		UserLocation   *struct {
			Type string `json:"type"`
		} `json:"user_location"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	p := fmt.Sprintf("tools.%d", i)
	if err := json.Unmarshal(raw, &t); err != nil {
		return paramError{"tools", p + ": Input should be a valid dictionary or object"}
	}
	switch {
	case !slices.Contains(anthropicSearchTypes, t.Type):
		return paramError{"tools", fmt.Sprintf("%s: Input tag '%s' found using 'type' does not match any of the expected tags", p, t.Type)}
	case t.Name != "web_search":
		return paramError{"tools", p + ".web_search.name: Input should be 'web_search'"}
	case t.MaxUses != nil && *t.MaxUses < 1:
		return paramError{"tools", p + ".web_search.max_uses: Input should be greater than 0"}
	case len(t.AllowedDomains) > 0 && len(t.BlockedDomains) > 0:
		return paramError{"tools", p + ".web_search: Cannot specify both allowed_domains and blocked_domains"}
	case t.UserLocation != nil && t.UserLocation.Type != "approximate":
		return paramError{"tools", p + ".web_search.user_location.type: Input should be 'approximate'"}
	case len(t.InputSchema) > 0:
		return paramError{"tools", p + ".web_search.input_schema: Extra inputs are not permitted"}
	}
	return nil
}

// newWebSearch is the search of a question: its first words, results
// derived from them.
func newWebSearch(question string, key uint64) *webSearch {
	words := strings.FieldsFunc(question, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) > 6 {
		words = words[:6]
	}
	q := strings.ToLower(strings.Join(words, " "))
	if q == "" {
		q = "news"
	}
	slug := strings.ReplaceAll(q, " ", "-")
	h := fnv.New32a()
	h.Write([]byte(q))
	ws := &webSearch{id: fmt.Sprintf("srvtoolu_sim%016x", key), query: q}
	for i := range 2 {
		ws.results = append(ws.results, searchResult{
			url:   fmt.Sprintf("https://example.com/%s/%d", slug, i+1),
			title: fmt.Sprintf("%s (result %d, %08x)", q, i+1, h.Sum32()),
		})
	}
	return ws
}

// anthropicResults is the web_search_tool_result block's content.
func (ws *webSearch) anthropicResults() []byte {
	type result struct {
		Type             string  `json:"type"`
		Title            string  `json:"title"`
		URL              string  `json:"url"`
		EncryptedContent string  `json:"encrypted_content"`
		PageAge          *string `json:"page_age"`
	}
	out := make([]result, len(ws.results))
	for i, r := range ws.results {
		out[i] = result{Type: "web_search_result", Title: r.title, URL: r.url, EncryptedContent: "sim-encrypted-" + r.url}
	}
	b, _ := json.Marshal(out)
	return b
}

// anthropicCitation is the citation of the answer's text: the first result.
func (ws *webSearch) anthropicCitation() []byte {
	r := ws.results[0]
	b, _ := json.Marshal(map[string]any{"type": "web_search_result_location", "url": r.url, "title": r.title,
		"cited_text": "About " + ws.query + ".", "encrypted_index": "sim-index"})
	return b
}

// geminiSearchTool validates a tools[] entry's search members as Gemini
// does: google_search (or googleSearch) an object; the retrieval tool is
// refused. It reports whether the entry asks for Google Search.
func geminiSearchTool(t *geminiTool, i int) (bool, error) {
	if len(t.GoogleSearchRetrieval) > 0 || len(t.GoogleSearchRetrieval2) > 0 {
		return false, paramError{"tools", "google_search_retrieval is not supported; please use google_search field instead."}
	}
	raw := t.GoogleSearch
	if len(raw) == 0 {
		raw = t.GoogleSearch2
	}
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return false, paramError{"tools", fmt.Sprintf("Invalid value at 'tools[%d].google_search' (type.googleapis.com/google.ai.generativelanguage.v1beta.GoogleSearch), %s", i, raw)}
	}
	for k := range v {
		if k != "timeRangeFilter" && k != "time_range_filter" && k != "excludeDomains" && k != "exclude_domains" {
			return false, paramError{"tools", fmt.Sprintf("Invalid JSON payload received. Unknown name %q at 'tools[%d].google_search': Cannot find field.", k, i)}
		}
	}
	return true, nil
}

// geminiGrounding is a candidate's groundingMetadata for an answer of
// textBytes bytes: the query, the results as groundingChunks, one support
// spanning the text (startIndex omitted when 0, as Gemini omits zero
// values); nil when ws is.
func (ws *webSearch) geminiGrounding(textBytes int) json.RawMessage {
	if ws == nil {
		return nil
	}
	type web struct {
		URI   string `json:"uri"`
		Title string `json:"title"`
	}
	type chunk struct {
		Web web `json:"web"`
	}
	chunks := make([]chunk, len(ws.results))
	for i, r := range ws.results {
		chunks[i] = chunk{web{r.url, r.title}}
	}
	type segment struct {
		StartIndex int `json:"startIndex,omitempty"`
		EndIndex   int `json:"endIndex"`
	}
	type support struct {
		Segment               segment   `json:"segment"`
		GroundingChunkIndices []int     `json:"groundingChunkIndices"`
		ConfidenceScores      []float64 `json:"confidenceScores"`
	}
	b, _ := json.Marshal(struct {
		SearchEntryPoint  map[string]string `json:"searchEntryPoint"`
		GroundingChunks   []chunk           `json:"groundingChunks"`
		GroundingSupports []support         `json:"groundingSupports"`
		WebSearchQueries  []string          `json:"webSearchQueries"`
	}{
		SearchEntryPoint:  map[string]string{"renderedContent": "<div class=\"sim-search\">" + ws.query + "</div>"},
		GroundingChunks:   chunks,
		GroundingSupports: []support{{Segment: segment{EndIndex: textBytes}, GroundingChunkIndices: []int{0}, ConfidenceScores: []float64{0.9}}},
		WebSearchQueries:  []string{ws.query},
	})
	return b
}
