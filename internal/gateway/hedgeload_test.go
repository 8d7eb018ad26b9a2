package gateway

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// upstream is an OpenAI stream whose role chunk is sent at once and whose
// content waits for go (closed) and, after its first content chunk, for
// end; nil channels do not wait. arrived is closed when the request came.
func upstream(t *testing.T, arrived, goOn, end chan struct{}) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`))
		sw.Flush()
		close(arrived)
		wait := func(c chan struct{}) bool {
			if c == nil {
				return true
			}
			select {
			case <-c:
				return true
			case <-r.Context().Done():
				return false
			}
		}
		if !wait(goOn) {
			return
		}
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}`))
		sw.Flush()
		if !wait(end) {
			return
		}
		sw.Data([]byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`))
		sw.Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// A hedge's backup counts in the affinity load set of its target while it
// runs: placements meanwhile see it. When it serves, it counts until its
// stream ends; when it loses, it stops counting at once, while the
// winner's stream goes on.
func TestHedgeBackupLoad(t *testing.T) {
	for _, tc := range []struct {
		name       string
		backupWins bool
	}{{"backup serves", true}, {"backup loses", false}} {
		t.Run(tc.name, func(t *testing.T) {
			aIn, bIn := make(chan struct{}), make(chan struct{})
			aGo, bGo, end := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var aEnd, bEnd chan struct{}
			if tc.backupWins {
				bEnd = end
			} else {
				aEnd = end
			}
			cfg := &config.Config{
				Providers: []config.Provider{
					{Name: "a", Kind: "openai", BaseURL: upstream(t, aIn, aGo, aEnd)},
					{Name: "b", Kind: "openai", BaseURL: upstream(t, bIn, bGo, bEnd)},
				},
				Keys: []config.Key{{Name: "k", Key: "sg-test-0123456789abcdef"}},
				Models: []config.Model{{Name: "m", Affinity: "session", Hedge: &config.Hedge{After: "1ms", Budget: 1},
					Routes: []config.Route{{Provider: "a", Model: "x"}, {Provider: "b", Model: "x"}}}},
			}
			cfg.SetDefaults()
			cfg.Timeouts.FirstToken = config.Duration(time.Minute)
			g, err := New(Options{Config: cfg, KeepAlive: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			srv := httptest.NewServer(g)
			defer srv.Close()
			rs := g.cur().routes["m"]
			// The session goes to a first: the backup is b.
			aSlot, bSlot := rs.aff.slot(0, -1), rs.aff.slot(1, -1)
			req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer sg-test-0123456789abcdef")
			req.Header.Set("X-Session-Id", sessionOnFirst(t, rs))
			done := make(chan *http.Response, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
				}
				done <- resp
			}()
			<-aIn
			<-bIn // the backup started
			if a, b := rs.aff.set.Load(aSlot), rs.aff.set.Load(bSlot); a != 1 || b != 1 {
				t.Fatalf("both racing: got loads a %d b %d, want 1 and 1", a, b)
			}
			if tc.backupWins {
				close(bGo)
			} else {
				close(aGo)
			}
			resp := <-done
			if resp == nil {
				t.FailNow()
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for { // up to the first content
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(line, `"content":"ok"`) {
					break
				}
			}
			if !tc.backupWins {
				// The winner streams on; the backup lost: it stops counting
				// as soon as its goroutine ends.
				waitFor(t, func() bool { return rs.aff.set.Load(bSlot) == 0 }, "the lost backup's load back to 0")
				if a := rs.aff.set.Load(aSlot); a != 1 {
					t.Errorf("primary streaming: got load %d, want 1", a)
				}
			} else if b := rs.aff.set.Load(bSlot); b != 1 {
				t.Errorf("backup streaming: got load %d, want 1", b)
			}
			close(end)
			io.Copy(io.Discard, br)
			waitFor(t, func() bool { return rs.aff.set.Load(aSlot) == 0 && rs.aff.set.Load(bSlot) == 0 }, "every load back to 0 after the stream")
		})
	}
}

// sessionOnFirst is a session id whose placement puts route 0 first.
func sessionOnFirst(t *testing.T, rs *routeSet) string {
	for i := range 1000 {
		id := "s" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("X-Session-Id", id)
		c := &call{}
		p := &plan{c: c, rs: rs, pinKey: -1}
		p.order = rs.set.Order(p.buf[:0])
		c.session = sessionOf(r, &provider.Request{}, rs.aff.mode)
		rs.aff.place(p, c.session.Key)
		if p.order[0] == rs.targets[0].rt {
			return id
		}
	}
	t.Fatal("no session placed on the first route")
	return ""
}

// waitFor polls cond until it holds (a goroutine ending in the
// background), failing after a long while: it waits for an event, it times
// nothing.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
	}
}
