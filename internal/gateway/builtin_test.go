package gateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/streamgate/streamgate/internal/gateway"
)

// codexTools is a tool list as Codex sends it: function tools and the
// built-in web_search.
func codexTools() []responses.ToolUnionParam {
	fn := func(name string) responses.ToolUnionParam {
		return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name, Strict: openai.Bool(false),
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}}
	}
	return []responses.ToolUnionParam{fn("exec_command"), fn("apply_patch"), fn("update_plan"),
		{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}
}

// TestResponsesBuiltinToolsAcrossKinds: Codex's tool list (function tools
// and web_search) through openai-go's Responses client to a chat route,
// an Anthropic and a Gemini route: each answers 200. The chat route drops
// web_search and says so (X-Streamgate-Dropped-Tools, one log line for
// many requests); the Anthropic route maps it to Anthropic's web search
// server tool and the Gemini route to Google Search grounding, whose
// search comes back as a web_search_call item (its events, its query) and
// the text with a url_citation annotation, streamed and not.
func TestResponsesBuiltinToolsAcrossKinds(t *testing.T) {
	cfg, so := dialectConfig()
	logs := &syncBuf{}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := responsesClient(e)
	params := func(model string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: model, Tools: codexTools(),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is new in Go?")}}
	}
	entries := 0
	search := []string{"response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed"}
	annotated := []string{"response.output_text.annotation.added"}
	for _, tt := range []struct {
		model, dropped string
		events         []string // in this order among the stream's
	}{
		{"m-openai", "web_search", nil},
		// Anthropic searches before it answers, and cites as it does.
		{"m-anthropic", "", append(search, annotated...)},
		// Gemini's groundingMetadata comes with the end of the answer.
		{"m-gemini", "", append(annotated, search...)},
	} {
		t.Run(tt.model, func(t *testing.T) {
			for i := range 3 {
				var hr *http.Response
				s := readResponses(t, client.Responses.NewStreaming(ctx, params(tt.model), option.WithResponseInto(&hr)))
				entries++
				if got := hr.Header.Get(gateway.HeaderDroppedTools); got != tt.dropped {
					t.Errorf("request %d: %s %q, want %q", i, gateway.HeaderDroppedTools, got, tt.dropped)
				}
				if s.terminal != "response.completed" || s.text == "" {
					t.Fatalf("request %d: got %s with text %q, want completed with text", i, s.terminal, s.text)
				}
				checkSearch(t, tt.model+" stream", s.final, tt.events != nil, tt.model == "m-anthropic")
				at := 0
				for _, typ := range s.types {
					if at < len(tt.events) && typ == tt.events[at] {
						at++
					}
				}
				if at != len(tt.events) {
					t.Errorf("events: got %v, want %v in order", s.types, tt.events)
				}
			}
			var hr *http.Response
			res, err := client.Responses.New(ctx, params(tt.model), option.WithResponseInto(&hr))
			entries++
			if err != nil || res.Status != "completed" || hr.Header.Get(gateway.HeaderDroppedTools) != tt.dropped {
				t.Fatalf("non-stream: got %v, header %q", err, hr.Header.Get(gateway.HeaderDroppedTools))
			}
			checkSearch(t, tt.model+" non-stream", *res, tt.events != nil, tt.model == "m-anthropic")

			// The next turn, as Codex sends it (store false, the whole
			// conversation): the web_search_call item and the annotated
			// message go back as input.
			items := []string{`{"role":"user","content":"What is new in Go?"}`}
			for _, it := range res.Output {
				items = append(items, it.RawJSON())
			}
			items = append(items, `{"role":"user","content":"And in Rust?"}`)
			body := `{"model":"` + tt.model + `","store":false,"tools":[{"type":"function","name":"exec_command","parameters":{"type":"object"}},{"type":"web_search"}],"input":[` + strings.Join(items, ",") + `]}`
			resp := do(t, "POST", e.url+"/v1/responses", devKey, body, "X-Sim-TTFT", "1ms", "X-Sim-ITL", "1ms")
			entries++
			var next responses.Response
			if err := json.NewDecoder(resp.Body).Decode(&next); err != nil || resp.StatusCode != http.StatusOK || next.Status != "completed" {
				t.Fatalf("second turn: got %d %v %+v", resp.StatusCode, err, next)
			}
			for _, it := range next.Output {
				if it.Type == "web_search_call" && tt.events != nil && it.AsWebSearchCall().Action.Query != "and in rust" {
					t.Errorf("second turn: searched %s, want the new question", it.RawJSON())
				}
			}
		})
	}
	e.waitEntries(t, entries)
	if n := strings.Count(logs.String(), "built-in tools dropped"); n != 1 || !strings.Contains(logs.String(), "model=m-openai") {
		t.Errorf("log: %d lines of dropped built-in tools, want 1 naming m-openai:\n%s", n, logs.String())
	}
}

// checkSearch checks a response's web search: with search, a completed
// web_search_call item with its query (before the message when first),
// and the message's text with a url_citation annotation over it; without,
// none.
func checkSearch(t *testing.T, what string, res responses.Response, search, first bool) {
	t.Helper()
	var calls, annots int
	for _, it := range res.Output {
		switch it.Type {
		case "web_search_call":
			calls++
			ws := it.AsWebSearchCall()
			if ws.Status != "completed" || ws.Action.Type != "search" || ws.Action.Query != "what is new in go" {
				t.Errorf("%s: web_search_call %s, want completed, searching for the question", what, it.RawJSON())
			}
		case "message":
			if calls == 0 && search && first {
				t.Errorf("%s: the message came before the search: %s", what, res.RawJSON())
			}
			for _, c := range it.Content {
				for _, a := range c.Annotations {
					annots++
					if a.Type != "url_citation" || !strings.HasPrefix(a.URL, "https://example.com/what-is-new-in-go/") || a.StartIndex != 0 || int(a.EndIndex) != len([]rune(c.Text)) {
						t.Errorf("%s: annotation %s over %q, want a url_citation of the whole text", what, a.RawJSON(), c.Text)
					}
				}
			}
		}
	}
	if want := map[bool]int{true: 1, false: 0}[search]; calls != want || annots != want {
		t.Errorf("%s: %d web_search_call items, %d annotations; want %d each: %s", what, calls, annots, want, res.RawJSON())
	}
}
