package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/respstore"
	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
)

// chatUpstream is an OpenAI-dialect upstream that records the chat
// requests it gets and answers each with reply, streamed or not.
type chatUpstream struct {
	mu     sync.Mutex
	bodies [][]byte
	reply  string
}

func (u *chatUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, b)
	u.mu.Unlock()
	var req struct {
		Stream bool `json:"stream"`
	}
	json.Unmarshal(b, &req)
	text, _ := json.Marshal(u.reply)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`, text)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":%s}}]}`, text),
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`,
		`[DONE]`,
	} {
		fmt.Fprintf(w, "data: %s\n\n", d)
	}
}

// last returns the messages of the last chat request the upstream got,
// as "role: text" lines.
func (u *chatUpstream) last(t *testing.T) []string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		t.Fatal("the upstream got no request")
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(u.bodies[len(u.bodies)-1], &req); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content)
		}
		out = append(out, m.Role+": "+s)
	}
	return out
}

// storeEnv is a gateway with a response store on db (a DSN), a recording
// OpenAI-dialect upstream (model m-rec), the sim's dialects, and a second
// key, "other".
func storeEnv(t *testing.T, dsn string, o respstore.Options) (*env, *chatUpstream, *respstore.Store) {
	t.Helper()
	ctx := sqldbtest.Context(t)
	store, err := respstore.Open(ctx, dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // after the gateway's cleanup: LIFO
	up := &chatUpstream{reply: "Hello Ada."}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	cfg, so := dialectConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "rec", Kind: "openai", BaseURL: srv.URL + "/v1", APIKey: "sk-up"})
	cfg.Models = append(cfg.Models, config.Model{Name: "m-rec", Routes: []config.Route{{Provider: "rec", Model: "up"}}})
	cfg.Keys = append(cfg.Keys, config.Key{Name: "other", Key: "sk-other"})
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so, Responses: store})
	return e, up, store
}

func wantNotFound(t *testing.T, what string, err error, code, param string) {
	t.Helper()
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Code != code || ae.Param != param {
		t.Errorf("%s: got %v; want 404 (code %q, param %q)", what, err, code, param)
	}
}

// TestResponsesStore: openai-go's Responses client against a gateway with
// a response store, on SQLite and PostgreSQL: a response is stored by
// default and read back as it was returned; previous_response_id sends
// the earlier turns upstream (on a route of another kind too); an
// item_reference is replaced by the stored item; input_items pages as
// OpenAI's; DELETE removes it; another key gets 404 for all of it; store
// false keeps nothing. One usage entry per POST.
func TestResponsesStore(t *testing.T) {
	for _, k := range sqldbtest.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			e, up, _ := storeEnv(t, k.DSN(t), respstore.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			client := responsesClient(e)
			other := responsesClient(e, option.WithAPIKey("sk-other"))
			posts := 0

			// Created, streamed, store by default.
			s := readResponses(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: "m-rec", Instructions: openai.String("Be brief."),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("My name is Ada.")},
			}))
			posts++
			first := s.final
			if s.terminal != "response.completed" || !strings.Contains(first.RawJSON(), `"store":true`) || first.OutputText() != "Hello Ada." {
				t.Fatalf("first: got %s %s; want completed, store true", s.terminal, first.RawJSON())
			}
			got, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			if got.RawJSON() != first.RawJSON() {
				t.Errorf("GET: got %s\nwant the response as it was returned: %s", got.RawJSON(), first.RawJSON())
			}

			// Continued, not streamed: the upstream gets the first turn
			// (not its instructions, which do not carry over).
			second, err := client.Responses.New(ctx, responses.ResponseNewParams{
				Model: "m-rec", PreviousResponseID: openai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my name?")},
			})
			posts++
			if err != nil {
				t.Fatalf("continue: %v", err)
			}
			want := []string{"user: My name is Ada.", "assistant: Hello Ada.", "user: What is my name?"}
			if got := up.last(t); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("continue: the upstream got %q, want %q", got, want)
			}
			if second.PreviousResponseID != first.ID || !strings.Contains(second.RawJSON(), `"store":true`) {
				t.Errorf("continue: got %s; want previous_response_id %s, store true", second.RawJSON(), first.ID)
			}

			// The chain continued on a route of another kind (Anthropic
			// dialect): its prompt holds the earlier turns.
			fresh := readResponses(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m-anthropic", Store: openai.Bool(false),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And now?")}}))
			third := readResponses(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m-anthropic", PreviousResponseID: openai.String(second.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And now?")}}))
			posts += 2
			if third.terminal != "response.completed" || third.final.Usage.InputTokens <= fresh.final.Usage.InputTokens {
				t.Errorf("anthropic continuation: got %s with %d input tokens; want completed with more input tokens than without the chain (%d)",
					third.terminal, third.final.Usage.InputTokens, fresh.final.Usage.InputTokens)
			}

			// An item_reference to the first answer is the stored item.
			_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec", Store: openai.Bool(false),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfItemReference(first.Output[0].ID),
					responses.ResponseInputItemParamOfMessage("Again?", responses.EasyInputMessageRoleUser),
				}}})
			posts++
			if err != nil {
				var ae *openai.Error
				errors.As(err, &ae)
				t.Fatalf("item_reference: %v %s", err, ae.RawJSON())
			}
			want = []string{"assistant: Hello Ada.", "user: Again?"}
			if got := up.last(t); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("item_reference: the upstream got %q, want %q", got, want)
			}

			// input_items: three messages, paged by two, both orders.
			many, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec",
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("one", responses.EasyInputMessageRoleUser),
					responses.ResponseInputItemParamOfMessage("two", responses.EasyInputMessageRoleAssistant),
					responses.ResponseInputItemParamOfMessage("three", responses.EasyInputMessageRoleUser),
				}}})
			posts++
			if err != nil {
				t.Fatal(err)
			}
			texts := func(items []responses.ResponseItemUnion) string {
				var out []string
				for _, it := range items {
					if it.Type != "message" || !strings.HasPrefix(it.ID, "msg_") || len(it.Content.OfInputItemContentList) != 1 {
						t.Errorf("input item %s: want a message with an id and one content part", it.RawJSON())
						continue
					}
					out = append(out, it.Content.OfInputItemContentList[0].Text)
				}
				return strings.Join(out, ",")
			}
			page, err := client.Responses.InputItems.List(ctx, many.ID, responses.InputItemListParams{Limit: openai.Int(2)})
			if err != nil || texts(page.Data) != "three,two" || !page.HasMore {
				t.Fatalf("input_items limit 2: got %v %v; want three,two with more", page, err)
			}
			page, err = page.GetNextPage()
			if err != nil || page == nil || texts(page.Data) != "one" || page.HasMore {
				t.Fatalf("input_items next page: got %v %v; want one, no more", page, err)
			}
			page, err = client.Responses.InputItems.List(ctx, many.ID, responses.InputItemListParams{Order: responses.InputItemListParamsOrderAsc})
			if err != nil || texts(page.Data) != "one,two,three" || page.HasMore {
				t.Fatalf("input_items asc: got %v %v; want one,two,three", page, err)
			}
			raw := do(t, "GET", e.url+"/v1/responses/"+many.ID+"/input_items?limit=1", devKey, "")
			b, _ := io.ReadAll(raw.Body)
			var m map[string]any
			json.Unmarshal(b, &m)
			if m["object"] != "list" || m["first_id"] == nil || m["first_id"] != m["last_id"] || m["has_more"] != true {
				t.Errorf("input_items raw: got %s; want a list with first_id = last_id, has_more", b)
			}

			// Another key: every read and a continuation are 404.
			_, err = other.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
			wantNotFound(t, "another key's GET", err, "", "")
			err = other.Responses.Delete(ctx, first.ID)
			wantNotFound(t, "another key's DELETE", err, "", "")
			_, err = other.Responses.InputItems.List(ctx, first.ID, responses.InputItemListParams{})
			wantNotFound(t, "another key's input_items", err, "", "")
			_, err = other.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec", PreviousResponseID: openai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Who?")}})
			posts++
			wantNotFound(t, "another key's previous_response_id", err, "previous_response_not_found", "previous_response_id")
			var ae *openai.Error
			if errors.As(err, &ae) && ae.Message != "Previous response with id '"+first.ID+"' not found." {
				t.Errorf("not found message: got %q", ae.Message)
			}
			_, err = other.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec",
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfItemReference(first.Output[0].ID)}}})
			posts++
			wantNotFound(t, "another key's item_reference", err, "item_not_found", "input")

			// store false: nothing kept.
			nostore, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec", Store: openai.Bool(false),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("secret")}})
			posts++
			if err != nil || !strings.Contains(nostore.RawJSON(), `"store":false`) {
				t.Fatalf("store false: got %v %v; want store false", nostore, err)
			}
			_, err = client.Responses.Get(ctx, nostore.ID, responses.ResponseGetParams{})
			wantNotFound(t, "GET of a store false response", err, "", "")
			_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec", PreviousResponseID: openai.String(nostore.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("more")}})
			posts++
			wantNotFound(t, "continuing a store false response", err, "previous_response_not_found", "previous_response_id")

			// DELETE, then it is gone, and so is what continues it.
			resp := do(t, "DELETE", e.url+"/v1/responses/"+first.ID, devKey, "")
			b, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(b) != `{"id":"`+first.ID+`","object":"response.deleted","deleted":true}` {
				t.Errorf("DELETE: got %d %s", resp.StatusCode, b)
			}
			_, err = client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
			wantNotFound(t, "GET after DELETE", err, "", "")
			err = client.Responses.Delete(ctx, first.ID)
			wantNotFound(t, "DELETE after DELETE", err, "", "")
			_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec", PreviousResponseID: openai.String(second.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("more")}})
			posts++
			wantNotFound(t, "continuing a chain with a deleted response", err, "previous_response_not_found", "previous_response_id")
			e.waitEntries(t, posts)
		})
	}
}

// TestResponsesStoreRetention: a stored response past the retention is
// not found, and the purge deletes it.
func TestResponsesStoreRetention(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e, _, store := storeEnv(t, sqldbtest.SQLiteDSN(t), respstore.Options{Retention: time.Hour, Now: clock})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := responsesClient(e)
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m-rec",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("GET within the retention: %v", err)
	}
	mu.Lock()
	now = now.Add(time.Hour + time.Second)
	mu.Unlock()
	_, err = client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	wantNotFound(t, "GET past the retention", err, "", "")
	if n, err := store.Purge(ctx); err != nil || n != 1 {
		t.Errorf("Purge: got %d, %v; want 1 response purged", n, err)
	}
	e.waitEntries(t, 1)
}

// BenchmarkResponsesStored100 is BenchmarkResponsesStream100 with the
// response stored (store true, the default) in a SQLite response store:
// what storing adds to a stream. The write runs off the request's path,
// so each iteration waits for it (a read of the id waits for its write)
// and cpu-ns/op is the process's CPU time (user and system) per stream,
// the write's included.
func BenchmarkResponsesStored100(b *testing.B) {
	ctx := context.Background()
	store, err := respstore.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "resp.db"), respstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	gw := benchGatewayWith(b, 100, func(o *gateway.Options) { o.Responses = store })
	b.Cleanup(func() { store.Close() })
	body := []byte(`{"model":"m","stream":true,"max_output_tokens":64,"temperature":0.7,"instructions":"You are a helpful assistant.","input":[{"role":"user","content":"Write a haiku about latency and the sea, in English, with a title."}]}`)
	req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/responses", nil)
	req.Header.Set("Authorization", "Bearer sg-bench-0123456789abcdef")
	req.Header.Set("Content-Type", "application/json")
	rd := bytes.NewReader(body)
	w := &idRecorder{flushRecorder: flushRecorder{h: http.Header{}}}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.status, w.id = 0, ""
		gw.ServeHTTP(w, req)
		if w.status != http.StatusOK || w.id == "" {
			b.Fatalf("got status %d, response id %q; want 200 and an id", w.status, w.id)
		}
		if _, err := store.Get(ctx, "bench", w.id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// idRecorder is a flushRecorder that keeps the first response id written.
type idRecorder struct {
	flushRecorder
	id string
}

func (w *idRecorder) Write(b []byte) (int, error) {
	if w.id == "" {
		if _, rest, ok := bytes.Cut(b, []byte(`"id":"resp_`)); ok {
			if id, _, ok := bytes.Cut(rest, []byte(`"`)); ok {
				w.id = "resp_" + string(id)
			}
		}
	}
	return w.flushRecorder.Write(b)
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
