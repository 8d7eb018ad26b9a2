package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/streamgate/streamgate/internal/redisguard/redistest"
)

// gate is a tool, "gated", that sends progress 1, waits for release (or
// its end), then sends progress 2 and 3 and answers "done".
type gate struct {
	release   chan struct{}
	cancelled chan struct{}
	dropped   chan struct{}
}

func newGate(e *env) *gate {
	gt := &gate{release: make(chan struct{}), cancelled: make(chan struct{}, 1), dropped: make(chan struct{}, 4)}
	e.gw.onDrop = func() { gt.dropped <- struct{}{} }
	e.sdkDocs.AddTool(&sdk.Tool{Name: "gated", InputSchema: objectSchema}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 3})
		select {
		case <-gt.release:
		case <-ctx.Done():
			gt.cancelled <- struct{}{}
			return nil, ctx.Err()
		}
		for i := 2; i <= 3; i++ {
			req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
		}
		return textResult("done"), nil
	})
	return gt
}

// sseEvent is one event of a stream as the client reads it.
type sseEvent struct{ id, data string }

// readEvent reads the next event (comments skipped); io.EOF at the end.
func readEvent(br *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.data != "" || ev.id != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// open sends method with the session's headers and returns the response
// (its body to be read and closed by the caller).
func open(t *testing.T, method, url, sid string, h map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer sk-dev")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const gatedCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"docs__gated","arguments":{},"_meta":{"progressToken":"p1"}}}`

// startGated calls the gated tool and returns the first event (progress 1)
// and the stream, still open.
func startGated(t *testing.T, url, sid string) (sseEvent, *http.Response) {
	t.Helper()
	resp := open(t, http.MethodPost, url, sid, nil, gatedCall)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("tools/call: %d %s", resp.StatusCode, b)
	}
	ev, err := readEvent(bufio.NewReader(resp.Body))
	if err != nil || !strings.Contains(ev.data, `"progress":1`) {
		t.Fatalf("first event: %+v %v", ev, err)
	}
	if _, _, ok := parseEventID(ev.id); !ok {
		t.Fatalf("first event's id %q: want <stream>.<n>", ev.id)
	}
	return ev, resp
}

func waitFor(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
}

// rowsOf waits for n ledger rows and returns them.
func rowsOf(t *testing.T, e *env, n int) []ToolCall {
	t.Helper()
	for range 1000 {
		if rows := e.gov.ledger(); len(rows) >= n {
			return rows
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("ledger: got %d rows, want %d", len(e.gov.ledger()), n)
	return nil
}

// resumeAndCheck resumes the stream after first on url and checks that it
// replays or follows progress 2 and 3, then the result, each once, then ends.
func resumeAndCheck(t *testing.T, url, sid string, first sseEvent, gt *gate) {
	t.Helper()
	resp := open(t, http.MethodGet, url, sid, map[string]string{"Last-Event-ID": first.id}, "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	close(gt.release)
	stream, _, _ := parseEventID(first.id)
	br := bufio.NewReader(resp.Body)
	for i, want := range []string{`"progress":2`, `"progress":3`, `"text":"done"`} {
		ev, err := readEvent(br)
		if err != nil || !strings.Contains(ev.data, want) {
			t.Fatalf("resumed event %d: got %+v %v, want %s", i, ev, err, want)
		}
		if want := stream + "." + string(rune('2'+i)); ev.id != want {
			t.Fatalf("resumed event %d: id %q, want %q", i, ev.id, want)
		}
		if i == 2 {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal([]byte(ev.data), &m); string(m.ID) != "7" {
				t.Fatalf("result's id: got %s, want 7", m.ID)
			}
		}
	}
	if ev, err := readEvent(br); err != io.EOF {
		t.Fatalf("after the result: got %+v %v, want the end", ev, err)
	}
}

// TestResume: a 2025-11-25 client whose tools/call stream breaks after its
// first progress event resumes it with GET and Last-Event-ID: the call
// went on, and every later event comes once, then the result. The ledger
// has one row. The same id under another session opens an empty stream.
func TestResume(t *testing.T) {
	e := newEnv(t, nil)
	gt := newGate(e)
	url := e.srv.URL + "/mcp"
	sid := initialize(t, url, "sk-dev")
	first, resp := startGated(t, url, sid)
	resp.Body.Close() // the client's connection breaks
	waitFor(t, gt.dropped, "the gateway seeing the stream break")

	// Another session of the same key does not get the stream.
	other := initialize(t, url, "sk-dev")
	r := open(t, http.MethodGet, url, other, map[string]string{"Last-Event-ID": first.id}, "")
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("another session's Last-Event-ID: got %d %q, want an empty stream", r.StatusCode, b)
	}

	resumeAndCheck(t, url, sid, first, gt)
	rows := rowsOf(t, e, 1)
	if len(rows) != 1 || rows[0].Tool != "gated" || rows[0].Outcome != OutcomeOK {
		t.Fatalf("ledger: got %+v, want one ok row", rows)
	}
	// Resumed again after the end: the whole rest replayed from the journal.
	r = open(t, http.MethodGet, url, sid, map[string]string{"Last-Event-ID": first.id}, "")
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if strings.Count(string(b), "event: message") != 3 || !strings.Contains(string(b), `"text":"done"`) {
		t.Fatalf("replayed after the end: got %q", b)
	}
}

// TestResumeGrace: a broken stream nobody resumes ends its call after the
// grace period (ledger: client_gone, one row).
func TestResumeGrace(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ResumeGrace = 50 * time.Millisecond })
	gt := newGate(e)
	url := e.srv.URL + "/mcp"
	sid := initialize(t, url, "sk-dev")
	_, resp := startGated(t, url, sid)
	resp.Body.Close()
	waitFor(t, gt.cancelled, "the call cancelled after the grace period")
	if rows := rowsOf(t, e, 1); len(rows) != 1 || rows[0].Outcome != OutcomeClientGone {
		t.Fatalf("ledger: got %+v, want one client_gone row", rows)
	}
}

// TestResumeCancelled: notifications/cancelled still ends a call whose
// stream is resumable.
func TestResumeCancelled(t *testing.T) {
	e := newEnv(t, nil)
	gt := newGate(e)
	url := e.srv.URL + "/mcp"
	sid := initialize(t, url, "sk-dev")
	_, resp := startGated(t, url, sid)
	defer resp.Body.Close()
	r := open(t, http.MethodPost, url, sid, nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", r.StatusCode)
	}
	waitFor(t, gt.cancelled, "the call cancelled")
	rows := rowsOf(t, e, 1)
	if len(rows) != 1 || rows[0].Outcome != OutcomeClientGone {
		t.Fatalf("ledger: got %+v, want one client_gone row", rows)
	}
}

// TestResumeRedis: the stream of a call one replica runs is resumed on
// another through the Redis journal.
func TestResumeRedis(t *testing.T) {
	c := redistest.Client(t, nil)
	prefix := redistest.Prefix(t, c, "mcpjournal")
	journal := func(o *Options) { o.Journal = NewRedisJournal(redistest.Client(t, nil), prefix) }
	e1, e2 := newEnv(t, journal), newEnv(t, journal)
	gt := newGate(e1)
	sid := initialize(t, e1.srv.URL+"/mcp", "sk-dev")
	first, resp := startGated(t, e1.srv.URL+"/mcp", sid)
	resp.Body.Close()
	waitFor(t, gt.dropped, "the gateway seeing the stream break")

	other := initialize(t, e2.srv.URL+"/mcp", "sk-dev")
	r := open(t, http.MethodGet, e2.srv.URL+"/mcp", other, map[string]string{"Last-Event-ID": first.id}, "")
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("another session's Last-Event-ID: got %d %q, want an empty stream", r.StatusCode, b)
	}

	resumeAndCheck(t, e2.srv.URL+"/mcp", sid, first, gt)
	if rows := rowsOf(t, e1, 1); len(rows) != 1 || rows[0].Outcome != OutcomeOK || len(e2.gov.ledger()) != 0 {
		t.Fatalf("ledger: got %+v and %+v, want one ok row on the first replica", rows, e2.gov.ledger())
	}
}

// TestMemoryJournalBounds: a stream past the bound is not resumable; an
// ended one is forgotten JournalTTL after its end.
func TestMemoryJournalBounds(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	now := time.Unix(1000, 0)
	j.now = func() time.Time { return now }
	for i := 1; i <= JournalMaxEvents+1; i++ {
		j.Append(ctx, "big", i, []byte("{}"), false)
	}
	if err := j.Follow(ctx, "big", 0, func(int, []byte) bool { return true }); err != ErrNoStream {
		t.Fatalf("over the bound: got %v, want ErrNoStream", err)
	}
	j.Append(ctx, "s", 1, []byte(`{"a":1}`), false)
	j.Append(ctx, "s", 2, []byte(`{"b":2}`), true)
	var got []int
	if err := j.Follow(ctx, "s", 1, func(seq int, _ []byte) bool { got = append(got, seq); return true }); err != nil || len(got) != 1 || got[0] != 2 {
		t.Fatalf("after 1: got %v %v, want [2]", got, err)
	}
	if !j.Resumed(ctx, "s") || j.Resumed(ctx, "big") {
		t.Fatal("Resumed: want s only")
	}
	now = now.Add(JournalTTL + time.Second)
	if err := j.Follow(ctx, "s", 0, func(int, []byte) bool { return true }); err != ErrNoStream {
		t.Fatalf("expired: got %v, want ErrNoStream", err)
	}
	j.Append(ctx, "t", 1, nil, false) // a new stream sweeps the expired
	if _, ok := j.streams["s"]; ok {
		t.Fatal("the expired stream is still kept")
	}
}
