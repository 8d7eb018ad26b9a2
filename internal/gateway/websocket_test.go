package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
)

// The client of these tests is written from OpenAI's published protocol of
// the Responses API's WebSocket mode (developers.openai.com, "WebSocket
// Mode"): GET /v1/responses with an upgrade and the key as Bearer; each
// turn a {"type":"response.create", …create body…} text frame; the server
// sends the Responses streaming events, one JSON text frame each; errors
// are {"type":"error","status":…,"error":{…}} frames; generate: false
// warms up; previous_response_id continues on the socket with store: false.

// wsDial opens a socket on e's gateway with the dev key and fast sim pacing.
func wsDial(t *testing.T, ctx context.Context, url string, header ...string) *websocket.Conn {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + devKey}, "Openai-Beta": {"responses_websockets=2026-02-06"},
		"X-Sim-Ttft": {"1ms"}, "X-Sim-Itl": {"1ms"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/responses", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	c.SetReadLimit(1 << 22)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func wsSend(t *testing.T, ctx context.Context, c *websocket.Conn, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// wsResponse is what one response.create got back.
type wsResponse struct {
	types    []string
	text     string         // the output_text deltas joined
	final    map[string]any // the terminal event's response
	terminal string
	err      map[string]any // an error frame, when that is what came
	calls    []map[string]any
}

// wsRead reads the frames of one response: events numbered 0, 1, 2, …,
// up to its terminal event, or one error frame.
func wsRead(t *testing.T, ctx context.Context, c *websocket.Conn) wsResponse {
	t.Helper()
	var r wsResponse
	for n := 0; ; n++ {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read after %v: %v", r.types, err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("frame %d: %v, want text", n, typ)
		}
		var ev map[string]any
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("frame %d %q: %v", n, data, err)
		}
		typeOf, _ := ev["type"].(string)
		if typeOf == "error" {
			if n != 0 {
				t.Fatalf("error frame %s after events %v", data, r.types)
			}
			r.err = ev
			return r
		}
		if seq, ok := ev["sequence_number"].(float64); !ok || int(seq) != n {
			t.Errorf("event %d (%s): sequence_number %v, want %d", n, typeOf, ev["sequence_number"], n)
		}
		r.types = append(r.types, typeOf)
		switch typeOf {
		case "response.output_text.delta":
			r.text += ev["delta"].(string)
		case "response.output_item.done":
			if it, _ := ev["item"].(map[string]any); it["type"] == "function_call" {
				r.calls = append(r.calls, it)
			}
		case "response.completed", "response.incomplete", "response.failed":
			r.final, _ = ev["response"].(map[string]any)
			r.terminal = typeOf
			return r
		}
	}
}

// outputText is the text of a response object's message items.
func outputText(resp map[string]any) string {
	var s strings.Builder
	out, _ := resp["output"].([]any)
	for _, it := range out {
		m, _ := it.(map[string]any)
		if m["type"] != "message" {
			continue
		}
		parts, _ := m["content"].([]any)
		for _, p := range parts {
			if pm, _ := p.(map[string]any); pm["type"] == "output_text" {
				s.WriteString(pm["text"].(string))
			}
		}
	}
	return s.String()
}

func userItem(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
}

// TestResponsesWebSocketAcrossKinds: on an OpenAI-, an Anthropic- and a
// Gemini-dialect route, a warm-up (no ledger row), two turns chained with
// previous_response_id and store: false (the first from the warm-up's
// id), a bad frame answered in-band with the socket still usable, a
// previous_response_id the socket does not know; events numbered from 0,
// text equal to the deltas, usage present, one ledger row per generated
// response with its usage.
func TestResponsesWebSocketAcrossKinds(t *testing.T) {
	cfg, so := dialectConfig()
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rows := 0
	for _, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		t.Run(model, func(t *testing.T) {
			c := wsDial(t, ctx, e.url)
			wsSend(t, ctx, c, map[string]any{"type": "response.create", "generate": false, "model": model, "store": false,
				"input": []any{map[string]any{"type": "message", "role": "developer", "content": "You are terse."}}})
			warm := wsRead(t, ctx, c)
			if warm.err != nil || warm.terminal != "response.completed" || strings.Join(warm.types, " ") != "response.created response.completed" {
				t.Fatalf("warm-up: got %v %v, want response.created and response.completed", warm.types, warm.err)
			}
			warmID, _ := warm.final["id"].(string)
			if out, _ := warm.final["output"].([]any); len(out) != 0 || !strings.HasPrefix(warmID, "resp_") {
				t.Errorf("warm-up response: got id %q output %v, want an id and no output", warmID, out)
			}

			prev := warmID
			for turn := 1; turn <= 2; turn++ {
				wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": model, "store": false,
					"previous_response_id": prev, "input": []any{userItem(fmt.Sprintf("turn %d", turn))}})
				r := wsRead(t, ctx, c)
				if r.err != nil {
					t.Fatalf("turn %d: error frame %v", turn, r.err)
				}
				if r.terminal != "response.completed" || r.text == "" || r.text != outputText(r.final) {
					t.Errorf("turn %d: got %s with deltas %q and output %q; want completed, the deltas' text", turn, r.terminal, r.text, outputText(r.final))
				}
				u, _ := r.final["usage"].(map[string]any)
				if in, _ := u["input_tokens"].(float64); in <= 0 || u["output_tokens"] != float64(8) {
					t.Errorf("turn %d: usage %v, want input tokens and 8 output tokens", turn, u)
				}
				if r.final["id"] == prev {
					t.Errorf("turn %d: got the id %v of the response it continues", turn, prev)
				}
				prev = r.final["id"].(string)
			}

			// A frame the gateway cannot read: an in-band 400, and the
			// socket goes on.
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":`)); err != nil {
				t.Fatal(err)
			}
			bad := wsRead(t, ctx, c)
			if bad.err == nil || bad.err["status"] != float64(400) {
				t.Fatalf("bad frame: got %v, want an error frame with status 400", bad)
			}
			if ee, _ := bad.err["error"].(map[string]any); ee["type"] != "invalid_request_error" || ee["message"] == "" {
				t.Errorf("bad frame: error %v, want invalid_request_error with a message", ee)
			}
			wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": model, "store": false,
				"previous_response_id": "resp_unknown", "input": []any{userItem("hi")}})
			nf := wsRead(t, ctx, c)
			if ee, _ := nf.err["error"].(map[string]any); nf.err == nil || nf.err["status"] != float64(404) || ee["code"] != "previous_response_not_found" {
				t.Errorf("unknown previous_response_id: got %v, want a 404 error frame previous_response_not_found", nf.err)
			}
			wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": model, "store": false,
				"previous_response_id": prev, "input": []any{userItem("turn 3")}})
			if r := wsRead(t, ctx, c); r.terminal != "response.completed" {
				t.Errorf("after the errors: got %v %v, want a completed response", r.types, r.err)
			}
			c.Close(websocket.StatusNormalClosure, "")
			// One row per response.create but the warm-up: three answered,
			// one refused (as POST /v1/responses records it).
			rows += 4
			entries := e.waitEntries(t, rows)
			for i, en := range entries[rows-4:] {
				if i == 2 {
					if en.Status != http.StatusNotFound || en.Outcome != usage.OutcomeRejected || en.CostUSD != 0 {
						t.Errorf("ledger row %+v: want the refusal, 404 rejected", en)
					}
					continue
				}
				if en.Model != model || en.Status != http.StatusOK || en.Outcome != usage.OutcomeOK || !en.Stream ||
					en.InputTokens <= 0 || en.OutputTokens != 8 || en.CostUSD <= 0 {
					t.Errorf("ledger row %+v: want %s, 200 ok, streamed, with its usage and cost", en, model)
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if got := len(e.rec.all()); got != rows {
		t.Errorf("ledger: got %d rows, want %d (one per response.create, none for warm-ups)", got, rows)
	}
}

// recordingUpstream is an OpenAI-dialect upstream that keeps the chat
// bodies it gets and answers each with a short stream: a tool call when
// the body has no tool result yet, else text.
type recordingUpstream struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(b, &body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
	}
	if !strings.Contains(string(b), `"role":"tool"`) {
		chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}}]}`, "null")
		chunk(`{}`, `"tool_calls"`)
	} else {
		chunk(`{"role":"assistant","content":"done"}`, "null")
		chunk(`{}`, `"stop"`)
	}
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":5,\"total_tokens\":55}}\n\ndata: [DONE]\n\n")
}

func (u *recordingUpstream) all() []map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]map[string]any(nil), u.bodies...)
}

// TestResponsesWebSocketWarmupReachesUpstream: a Codex-like session: the
// warm-up carries the instructions (as Codex 0.171 does, a developer
// message in input, and as "instructions"), the first turn sends only the
// new user item chained from the warm-up's id, the second only the tool's
// output chained from the first: every upstream request holds the
// warm-up's instructions and the whole conversation, in order.
func TestResponsesWebSocketWarmupReachesUpstream(t *testing.T) {
	e, up := recordingEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := wsDial(t, ctx, e.url)
	tools := []any{map[string]any{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object"}}}
	wsSend(t, ctx, c, map[string]any{"type": "response.create", "generate": false, "model": "m-up", "store": false,
		"instructions": "INSTRUCTIONS-A", "tools": tools,
		"input": []any{map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "DEVELOPER-B"}}}}})
	warm := wsRead(t, ctx, c)
	if warm.terminal != "response.completed" {
		t.Fatalf("warm-up: %v %v", warm.types, warm.err)
	}
	if n := len(up.all()); n != 0 {
		t.Fatalf("warm-up: the upstream got %d requests, want none", n)
	}
	wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": "m-up", "store": false, "tools": tools,
		"previous_response_id": warm.final["id"], "input": []any{userItem("USER-C")}})
	first := wsRead(t, ctx, c)
	if len(first.calls) != 1 {
		t.Fatalf("turn 1: got %v %v, want one function call", first.types, first.err)
	}
	wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": "m-up", "store": false, "tools": tools,
		"previous_response_id": first.final["id"],
		"input":                []any{map[string]any{"type": "function_call_output", "call_id": first.calls[0]["call_id"], "output": "OUTPUT-D"}}})
	second := wsRead(t, ctx, c)
	if second.terminal != "response.completed" || second.text != "done" {
		t.Fatalf("turn 2: got %v %q %v", second.types, second.text, second.err)
	}
	bodies := up.all()
	if len(bodies) != 2 {
		t.Fatalf("the upstream got %d requests, want 2", len(bodies))
	}
	for i, want := range [][]string{{"INSTRUCTIONS-A", "DEVELOPER-B", "USER-C"}, {"INSTRUCTIONS-A", "DEVELOPER-B", "USER-C", "call_1", "OUTPUT-D"}} {
		msgs, _ := json.Marshal(bodies[i]["messages"])
		at := 0
		for _, w := range want {
			j := strings.Index(string(msgs[at:]), w)
			if j < 0 {
				t.Errorf("request %d: messages %s lack %q (in order %v)", i+1, msgs, w, want)
				break
			}
			at += j
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	if got := e.waitEntries(t, 2); got[0].InputTokens != 50 || got[1].OutputTokens != 5 {
		t.Errorf("ledger: %+v, want the upstream's usage", got)
	}
}

// TestResponsesWebSocketRefusals: an upgrade with WebSocket mode off gets
// 426 and a plain GET keeps its 405; a wrong key is refused at the
// upgrade; a second response.create while one runs is answered in-band;
// a dropped socket cancels its response upstream (client_cancelled).
func TestResponsesWebSocketRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("disabled", func(t *testing.T) {
		cfg := baseConfig()
		off := false
		cfg.Responses.WebSocket.Enabled = &off
		e := start(t, cfg)
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/v1/responses",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + devKey}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUpgradeRequired {
			t.Fatalf("upgrade with WebSocket mode off: got %v (%v), want 426", resp, err)
		}
		plain := do(t, http.MethodGet, e.url+"/v1/responses", devKey, "")
		plain.Body.Close()
		if plain.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("plain GET: got %d, want 405", plain.StatusCode)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		e := start(t, baseConfig())
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/v1/responses",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sk-wrong"}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("upgrade with a wrong key: got %v (%v), want 401", resp, err)
		}
	})
	t.Run("one at a time and dropped", func(t *testing.T) {
		cfg, so := dialectConfig()
		e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
		c := wsDial(t, ctx, e.url, "X-Sim-Itl", "50ms", "X-Sim-Tokens", "400")
		create := map[string]any{"type": "response.create", "model": "m-openai", "store": false, "input": "count"}
		wsSend(t, ctx, c, create)
		// The events of the first response, then the second create while
		// it runs.
		for i := 0; i < 6; i++ {
			if _, _, err := c.Read(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wsSend(t, ctx, c, create)
		found := false
		for i := 0; i < 200 && !found; i++ {
			_, data, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ev map[string]any
			json.Unmarshal(data, &ev)
			if ev["type"] == "error" {
				ee, _ := ev["error"].(map[string]any)
				if ev["status"] != float64(400) || ee["code"] != "response_already_in_flight" {
					t.Errorf("second create: got %s, want a 400 response_already_in_flight", data)
				}
				found = true
			}
		}
		if !found {
			t.Fatal("second create: no error frame")
		}
		c.CloseNow() // dropped mid-stream
		got := e.waitEntries(t, 1)
		if got[0].Outcome != usage.OutcomeClientCancelled || got[0].Status != gateway.StatusClientClosed {
			t.Errorf("dropped socket: ledger %+v, want client_cancelled (499)", got[0])
		}
	})
}

// TestResponsesWebSocketWarmupToolsOnly: Codex's warm-up for its default
// model carries no message, only its tools as an additional_tools item and
// a configuration_update: it is answered (no input is no error when no
// model is called), and the turn chained from it reaches the upstream with
// those tools, flattened, and the user's message.
func TestResponsesWebSocketWarmupToolsOnly(t *testing.T) {
	e, up := recordingEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := wsDial(t, ctx, e.url)
	defer c.Close(websocket.StatusNormalClosure, "")
	extra := map[string]any{"type": "additional_tools", "id": "at_1", "role": "developer", "tools": []any{
		map[string]any{"type": "namespace", "name": "clock", "description": "", "tools": []any{
			map[string]any{"type": "function", "name": "sleep", "strict": false, "parameters": map[string]any{"type": "object"}}}}}}
	wsSend(t, ctx, c, map[string]any{"type": "response.create", "generate": false, "model": "m-up", "store": false, "tools": []any{},
		"input": []any{extra, map[string]any{"type": "configuration_update", "reasoning": map[string]any{"effort": "low"}}}})
	warm := wsRead(t, ctx, c)
	if warm.terminal != "response.completed" {
		t.Fatalf("tools-only warm-up: got %v %v, want response.completed", warm.types, warm.err)
	}
	wsSend(t, ctx, c, map[string]any{"type": "response.create", "model": "m-up", "store": false, "tools": []any{},
		"previous_response_id": warm.final["id"], "input": []any{userItem("USER-C")}})
	if first := wsRead(t, ctx, c); first.terminal == "" {
		t.Fatalf("turn 1: got %v %v", first.types, first.err)
	}
	bodies := up.all()
	if len(bodies) != 1 {
		t.Fatalf("the upstream got %d requests, want 1", len(bodies))
	}
	b, _ := json.Marshal(bodies[0])
	if !strings.Contains(string(b), `"clock__sleep"`) || !strings.Contains(string(b), "USER-C") {
		t.Errorf("the turn after a tools-only warm-up: upstream body %s, want the clock__sleep tool and the user's message", b)
	}
}

// recordingEnv is the gateway with one model, m-up, routed to a
// recordingUpstream (an OpenAI-dialect fake that keeps every body).
func recordingEnv(t *testing.T) (*env, *recordingUpstream) {
	up := &recordingUpstream{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Providers = []config.Provider{{Name: "up", Kind: "openai", BaseURL: srv.URL}}
	cfg.Models = []config.Model{{Name: "m-up", Routes: []config.Route{{Provider: "up", Model: "up"}}}}
	return startWith(t, gateway.Options{Config: cfg, KeepAlive: -1}), up
}
