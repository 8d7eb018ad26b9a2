package responses

import (
	"strings"
	"testing"
)

// TestEncoderWebSearch: a provider's search between two texts is a
// web_search_call item (added, in_progress, searching, completed, done,
// its action's query), closing the message before it; a citation of the
// second text is a url_citation annotation whose offsets count the
// characters of its own message, announced while it is open and kept in
// its part; FromCompletion gives the same items.
func TestEncoderWebSearch(t *testing.T) {
	m := testMeta(t, `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`)
	enc := NewEncoder(m)
	call := func(status, query string) string {
		return `{"choices":[{"index":0,"delta":{"web_search_calls":[{"id":"srvtoolu_1","status":"` + status + `","query":"` + query + `"}]}}]}`
	}
	out := run(t, enc, []string{role, text("Hi \"ü\" "), call("in_progress", ""), call("searching", "go news"), call("completed", "go news"),
		text("Go 1.30 is out."),
		`{"choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation","url_citation":{"start_index":7,"end_index":22,"url":"https://go.dev/","title":"Go"}}]}}]}`,
		fin("stop"), usage1}, enc.Done)
	evs := events(t, out)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	want := "response.web_search_call.in_progress response.web_search_call.searching response.web_search_call.completed response.output_item.done"
	if got := strings.Join(types, " "); !strings.Contains(got, want) || !strings.Contains(got, "response.output_text.annotation.added") {
		t.Errorf("events: got %s, want %s and an annotation", got, want)
	}
	res := evs[len(evs)-1].AsResponseCompleted().Response
	if len(res.Output) != 3 || res.Output[0].Type != "message" || res.Output[1].Type != "web_search_call" || res.Output[2].Type != "message" {
		t.Fatalf("output: got %s", res.RawJSON())
	}
	ws := res.Output[1].AsWebSearchCall()
	if ws.Status != "completed" || ws.Action.Type != "search" || ws.Action.Query != "go news" {
		t.Errorf("web_search_call: got %s", res.Output[1].RawJSON())
	}
	a := res.Output[2].Content[0].Annotations
	if len(a) != 1 || a[0].Type != "url_citation" || a[0].StartIndex != 0 || a[0].EndIndex != 15 || a[0].URL != "https://go.dev/" {
		t.Errorf("annotations: got %s, want one url_citation over the second message, 0 to 15", res.Output[2].RawJSON())
	}

	body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Go 1.30 is out.",
		"web_search_calls":[{"id":"ws1","status":"completed","query":"go news"}],
		"annotations":[{"type":"url_citation","url_citation":{"start_index":0,"end_index":15,"url":"https://go.dev/","title":"Go"}}]}}]}`
	b, _, err := FromCompletion([]byte(body), m)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `"type":"web_search_call","status":"completed","action":{"type":"search","query":"go news"}`) ||
		!strings.Contains(s, `"annotations":[{"type":"url_citation","start_index":0,"end_index":15,"url":"https://go.dev/","title":"Go"}]`) ||
		strings.Index(s, "web_search_call") > strings.Index(s, `"type":"message"`) {
		t.Errorf("FromCompletion: got %s", s)
	}
}
