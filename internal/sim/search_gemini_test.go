package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestGeminiGoogleSearch: google_search grounds the answer as Gemini
// reports it: the last chunk's candidate carries groundingMetadata with
// the query, the results as groundingChunks and a support spanning the
// text's bytes (startIndex omitted, as Gemini omits zero values); the
// same in the non-stream answer.
func TestGeminiGoogleSearch(t *testing.T) {
	_, ts := newTestServer(t, Options{Profile: quick})
	hdr := map[string]string{"x-goog-api-key": "k"}
	type grounding struct {
		WebSearchQueries []string `json:"webSearchQueries"`
		GroundingChunks  []struct {
			Web struct{ URI, Title string } `json:"web"`
		} `json:"groundingChunks"`
		GroundingSupports []struct {
			Segment map[string]int `json:"segment"`
		} `json:"groundingSupports"`
	}
	type answer struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
			GroundingMetadata *grounding `json:"groundingMetadata"`
		} `json:"candidates"`
	}
	check := func(what, text string, g *grounding) {
		t.Helper()
		if g == nil || len(g.WebSearchQueries) != 1 || g.WebSearchQueries[0] != "tell me about streaming latency" ||
			len(g.GroundingChunks) != 2 || !strings.HasPrefix(g.GroundingChunks[0].Web.URI, "https://example.com/tell-me-about-streaming-latency/") ||
			len(g.GroundingSupports) != 1 || g.GroundingSupports[0].Segment["endIndex"] != len(text) {
			t.Errorf("%s: grounding %+v over %d bytes of text", what, g, len(text))
		}
		if _, ok := g.GroundingSupports[0].Segment["startIndex"]; ok {
			t.Errorf("%s: startIndex 0 written, want it omitted", what)
		}
	}
	for _, tool := range []string{`{"google_search":{}}`, `{"googleSearch":{}}`} {
		resp := postJSON(t, ts, geminiStream, geminiBody(100, `,"tools":[`+geminiTools[len(`,"tools":[`):len(geminiTools)-1]+`,`+tool+`]`), hdr)
		evs, err := readAll(t, resp)
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		var text string
		var g *grounding
		for i, ev := range evs {
			var a answer
			if err := json.Unmarshal([]byte(ev.data), &a); err != nil {
				t.Fatalf("%s: %v", ev.data, err)
			}
			for _, p := range a.Candidates[0].Content.Parts {
				text += p.Text
			}
			if a.Candidates[0].GroundingMetadata != nil {
				if i != len(evs)-1 {
					t.Errorf("groundingMetadata on chunk %d of %d, want the last", i, len(evs))
				}
				g = a.Candidates[0].GroundingMetadata
			}
		}
		check(tool+" stream", text, g)
	}
	resp := postJSON(t, ts, geminiUnary, geminiBody(100, `,"tools":[{"google_search":{}}]`), hdr)
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("non-stream: %v", err)
	}
	check("non-stream", a.Candidates[0].Content.Parts[0].Text, a.Candidates[0].GroundingMetadata)

	for _, tt := range []struct{ tool, says string }{
		{`{"google_search_retrieval":{}}`, "google_search_retrieval is not supported"},
		{`{"google_search":"on"}`, "Invalid value at 'tools[0].google_search'"},
		{`{"google_search":{"max_results":3}}`, `Unknown name \"max_results\"`},
	} {
		resp := postJSON(t, ts, geminiUnary, geminiBody(100, `,"tools":[`+tt.tool+`]`), hdr)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tt.says) {
			t.Errorf("%s: got %d %s, want 400 saying %q", tt.tool, resp.StatusCode, b, tt.says)
		}
	}
}
