package gemini

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/streamgate/streamgate/internal/api"
)

// Web search: a request with api.ChatRequest.WebSearch gets Google Search
// grounding (a tools[] entry {"google_search":{}}; Gemini's search has no
// options for domains or location); a candidate's groundingMetadata comes
// back as one api.WebSearchCall per webSearchQueries entry (searching,
// then completed: the search ran before the text) and its
// groundingSupports as url_citation annotations (api.Annotation) of the
// groundingChunks' web pages, their segments' byte offsets in the
// answer's text made character offsets.

// RunsTool implements provider.ToolRunner: web_search runs as Google
// Search grounding.
func (c *Client) RunsTool(name string) bool { return name == "web_search" }

// googleSearch is the google_search tool: no options.
type googleSearch struct{}

// grounding is a candidate's groundingMetadata, the members read.
type grounding struct {
	WebSearchQueries []string `json:"webSearchQueries"`
	GroundingChunks  []struct {
		Web *struct {
			URI   string `json:"uri"`
			Title string `json:"title"`
		} `json:"web"`
	} `json:"groundingChunks"`
	GroundingSupports []struct {
		Segment struct {
			StartIndex int `json:"startIndex"`
			EndIndex   int `json:"endIndex"`
		} `json:"segment"`
		GroundingChunkIndices []int `json:"groundingChunkIndices"`
	} `json:"groundingSupports"`
}

// searchState is what a stream keeps of its answer's grounding.
type searchState struct {
	text    []byte   // the answer's text so far, decoded: segments count bytes of it
	queries []string // the searches reported so far
}

// searches returns the calls of g's queries not in seen (appended to it),
// each searching then completed, with ids of idBase, and the annotations
// of its supports over text.
func (g *grounding) searches(seen *[]string, idBase string, text []byte) ([]api.WebSearchCall, []api.Annotation) {
	var calls []api.WebSearchCall
	for _, q := range g.WebSearchQueries {
		dup := false
		for _, s := range *seen {
			dup = dup || s == q
		}
		if dup || q == "" {
			continue
		}
		*seen = append(*seen, q)
		id := idBase + strconv.Itoa(len(*seen))
		calls = append(calls, api.WebSearchCall{ID: id, Status: "searching", Query: q}, api.WebSearchCall{ID: id, Status: "completed", Query: q})
	}
	var annots []api.Annotation
	chars := func(n int) int {
		n = min(max(n, 0), len(text))
		return utf8.RuneCount(text[:n])
	}
	for _, s := range g.GroundingSupports {
		for _, ci := range s.GroundingChunkIndices {
			if ci < 0 || ci >= len(g.GroundingChunks) || g.GroundingChunks[ci].Web == nil {
				continue
			}
			w := g.GroundingChunks[ci].Web
			annots = append(annots, api.Annotation{Type: "url_citation", URLCitation: api.URLCitation{
				StartIndex: chars(s.Segment.StartIndex), EndIndex: chars(s.Segment.EndIndex), URL: w.URI, Title: w.Title}})
		}
	}
	return calls, annots
}

// grounded queues the chunk of the event's groundingMetadata: its new
// searches and its citations, when it has any.
func (t *translator) grounded(raw []byte) {
	var g grounding
	if json.Unmarshal(raw, &g) != nil {
		return
	}
	calls, annots := g.searches(&t.search.queries, "ws_"+string(t.seed[:16])+"_", t.search.text)
	if len(calls) == 0 && len(annots) == 0 {
		return
	}
	b, _ := json.Marshal(struct {
		Calls  []api.WebSearchCall `json:"web_search_calls,omitempty"`
		Annots []api.Annotation    `json:"annotations,omitempty"`
	}{calls, annots})
	t.chunk(string(b), nil)
}
