package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sim"
)

// seen is one request a recorder saw: its session identity, its
// conversation (the non-system messages' roles and texts), the answer it
// streamed back, and the order of its start and end among all events.
type seen struct {
	session    string
	roles      []string
	texts      []string
	answer     string
	start, end int64
}

// recorder serves next and records every request, for assertions about
// what the benchmark sent.
type recorder struct {
	next  http.Handler
	api   string
	clock atomic.Int64
	mu    sync.Mutex
	reqs  []*seen
}

// capture keeps what a handler writes; Unwrap keeps flushing working.
type capture struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (c *capture) Write(b []byte) (int, error) { c.buf.Write(b); return c.ResponseWriter.Write(b) }
func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	s := &seen{start: rc.clock.Add(1), session: r.Header.Get(HeaderSessionID)}
	var req struct {
		System   string `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"input"`
		PromptCacheKey string `json:"prompt_cache_key"`
		Metadata       struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
	}
	json.Unmarshal(body, &req)
	if s.session == "" {
		s.session = req.PromptCacheKey + req.Metadata.UserID
	}
	for _, m := range append(req.Messages, req.Input...) {
		if m.Role == "system" {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			var blocks []struct{ Text string }
			json.Unmarshal(m.Content, &blocks)
			for _, b := range blocks {
				text += b.Text
			}
		}
		s.roles, s.texts = append(s.roles, m.Role), append(s.texts, text)
	}
	c := &capture{ResponseWriter: w}
	rc.next.ServeHTTP(c, r)
	s.answer = streamedText(rc.api, c.buf.Bytes())
	s.end = rc.clock.Add(1)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, s)
	rc.mu.Unlock()
}

// streamedText is the answer text of a stream of api's events, decoded
// in full (a check of the benchmark's allocation-free extraction).
func streamedText(apiName string, stream []byte) string {
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Delta json.RawMessage `json:"delta"`
		}
		json.Unmarshal([]byte(data), &ev)
		switch apiName {
		case APIChat:
			for _, c := range ev.Choices {
				b.WriteString(c.Delta.Content)
			}
		case APIMessages:
			var d struct{ Text string }
			if ev.Type == "content_block_delta" && json.Unmarshal(ev.Delta, &d) == nil {
				b.WriteString(d.Text)
			}
		case APIResponses:
			var d string
			if ev.Type == "response.output_text.delta" && json.Unmarshal(ev.Delta, &d) == nil {
				b.WriteString(d)
			}
		}
	}
	return b.String()
}

func fastSim() sim.Profile {
	p := sim.DefaultProfile()
	p.TTFT, p.TTFTP99, p.ITL, p.ITLJitter, p.PrefillPerToken = 5*time.Millisecond, 5*time.Millisecond, time.Millisecond, 0, 0
	return p
}

// TestSessions runs 4 sessions × 5 turns against the simulator over
// loopback, one API key, in each API and each way of telling the session:
// every turn k carries 2k−1 messages, the earlier answers as streamed, the
// sends of one session one after the other, and the prompt cache serves
// most of the prompt tokens.
func TestSessions(t *testing.T) {
	for _, tc := range []struct{ api, id string }{
		{APIChat, SessionIDHeader}, {APIMessages, SessionIDBody}, {APIResponses, SessionIDBody}, {APIChat, SessionIDNone},
	} {
		t.Run(tc.api+"/"+tc.id, func(t *testing.T) {
			rec := &recorder{next: sim.New(sim.Options{Profile: fastSim(), Profiles: []sim.Profile{}, Seed: 5}), api: tc.api}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			res, err := Run(context.Background(), Config{
				BaseURL: srv.URL + "/v1", API: tc.api, APIKey: "one-key", Model: "m", MaxTokens: 24,
				Sessions: 4, Turns: 5, ThinkTime: 2 * time.Millisecond, SessionID: tc.id, SystemTokens: 1500, KeepRequests: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Runs[0]
			if r.Succeeded != 20 || r.Requests != 20 {
				t.Fatalf("requests: got %d succeeded of %d, want 20 of 20 (errors %v)", r.Succeeded, r.Requests, r.Errors)
			}
			if r.CacheReadShare == nil || *r.CacheReadShare <= 0.5 {
				t.Errorf("cache_read_share: got %v, want > 0.5 (%d of %d prompt tokens)", r.CacheReadShare, r.CacheReadTok, r.InTok)
			}
			s := r.Sessions
			if s == nil || s.Count != 4 || s.Turns != 5 || s.SessionID != tc.id || s.TurnsNotSent != 0 || s.TTFTFirstTurn.N != 4 || s.TTFTLaterTurns.N != 16 {
				t.Fatalf("sessions: got %+v, want 4 × 5 turns, all sent, 4 first and 16 later TTFTs", s)
			}
			bySession := map[string][]*seen{}
			for _, q := range rec.reqs {
				bySession[q.session] = append(bySession[q.session], q)
			}
			if tc.id == SessionIDNone {
				if len(bySession) != 1 || bySession[""] == nil {
					t.Fatalf("session id none: got identities %v, want none sent", keys(bySession))
				}
				// Tell the sessions apart by their first message, which names them.
				bySession = map[string][]*seen{}
				for _, q := range rec.reqs {
					bySession[q.texts[0]] = append(bySession[q.texts[0]], q)
				}
			}
			if len(bySession) != 4 {
				t.Fatalf("sessions seen: got %d (%v), want 4", len(bySession), keys(bySession))
			}
			for id, qs := range bySession {
				if tc.id != SessionIDNone && (!strings.HasPrefix(id, s.RunID+"-") || !strings.Contains(qs[0].texts[0], id)) {
					t.Errorf("session %q: want the identity <run id %s>-<n>, named in its first message %q", id, s.RunID, qs[0].texts[0])
				}
				if len(qs) != 5 {
					t.Fatalf("session %q: got %d turns, want 5", id, len(qs))
				}
				for k, q := range qs {
					if len(q.roles) != 2*k+1 {
						t.Fatalf("session %q turn %d: got %d messages, want %d", id, k+1, len(q.roles), 2*k+1)
					}
					if k == 0 {
						continue
					}
					if q.start < qs[k-1].end {
						t.Errorf("session %q turn %d: sent before turn %d ended", id, k+1, k)
					}
					for j := range k {
						if q.roles[2*j] != "user" || q.roles[2*j+1] != "assistant" || q.texts[2*j] != qs[k-1].texts[2*j] {
							t.Fatalf("session %q turn %d: history %v differs from the turn before", id, k+1, q.roles)
						}
						if got, want := q.texts[2*j+1], qs[j].answer; got != want || want == "" {
							t.Errorf("session %q turn %d: answer of turn %d sent back as %q, streamed as %q", id, k+1, j+1, got, want)
						}
					}
				}
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSessionsCost checks that a session run's cost is what a ledger
// would say: fresh input at the input price, cache reads at cached_input,
// cache writes at cache_write (Anthropic reports all three).
func TestSessionsCost(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{Profile: fastSim(), Profiles: []sim.Profile{}, Seed: 5}))
	defer srv.Close()
	cached, write := 0.3, 3.75
	price := Price{Input: 3, Output: 15, CachedInput: &cached, CacheWrite: &write}
	res, err := Run(context.Background(), Config{
		BaseURL: srv.URL + "/v1", API: APIMessages, APIKey: "k", Model: "m", MaxTokens: 16,
		Sessions: 2, Turns: 4, SystemTokens: 1200, Price: price, KeepRequests: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	var fresh, read, wrote, out int
	for _, q := range r.Records {
		fresh += q.InputTokens - q.CacheReadTokens - q.CacheWriteTokens
		read += q.CacheReadTokens
		wrote += q.CacheWriteTokens
		out += q.OutputTokens
	}
	if read == 0 || wrote == 0 || fresh <= 0 {
		t.Fatalf("tokens: got %d fresh, %d cache reads, %d cache writes, want all > 0", fresh, read, wrote)
	}
	want := (float64(fresh)*3 + float64(read)*cached + float64(wrote)*write + float64(out)*15) / 1e6
	if math.Abs(r.CostUSD-want) > 1e-9 {
		t.Errorf("cost_usd: got %.9f, want %.9f", r.CostUSD, want)
	}
	if all := price.Cost(config.Tokens{Input: int64(r.InTok), Output: int64(r.OutTok)}); r.CostUSD >= all {
		t.Errorf("cost_usd: got %.6f, want less than %.6f, all input at the input price", r.CostUSD, all)
	}
}

// TestSessionsPrefill checks on a synctest clock that the simulator's TTFT
// grows with the uncached prompt tokens only (prefill-per-token), so the
// sessions' later turns, mostly cached, start sooner than the first.
func TestSessionsPrefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fastSim()
		p.TTFT, p.TTFTP99, p.PrefillPerToken = 100*time.Millisecond, 100*time.Millisecond, time.Millisecond
		ln := newPipeListener()
		srv := &http.Server{Handler: sim.New(sim.Options{Profile: p, Profiles: []sim.Profile{}, Seed: 3})}
		go srv.Serve(ln)
		defer srv.Close()
		res, err := Run(context.Background(), Config{
			BaseURL: "http://127.0.0.1:1/v1", APIKey: "k", Model: "m", MaxTokens: 8,
			Sessions: 1, Turns: 4, SystemTokens: 1500, KeepRequests: true, dial: ln.dial,
		})
		if err != nil {
			t.Fatal(err)
		}
		recs := res.Runs[0].Records
		if len(recs) != 4 {
			t.Fatalf("requests: got %d, want 4", len(recs))
		}
		for _, q := range recs {
			ttft, _ := q.TTFT()
			want := 100*time.Millisecond + time.Duration(q.InputTokens-q.CacheReadTokens)*time.Millisecond
			if ttft != want {
				t.Errorf("turn %d: TTFT %v, want %v (%d prompt tokens, %d cached)", q.Turn, ttft, want, q.InputTokens, q.CacheReadTokens)
			}
		}
		first, _ := recs[0].TTFT()
		later, _ := recs[3].TTFT()
		if recs[3].InputTokens <= recs[0].InputTokens || later >= first {
			t.Errorf("turn 4: %d prompt tokens in %v, want more tokens than turn 1's %d in less time than its %v", recs[3].InputTokens, later, recs[0].InputTokens, first)
		}
	})
}

// TestSessionsConfig checks what sessions refuse.
func TestSessionsConfig(t *testing.T) {
	base := Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Sessions: 2}
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"rate", func(c *Config) { c.Rate = 1 }, "no rate"},
		{"duration", func(c *Config) { c.Duration = time.Second }, "no duration"},
		{"warmup", func(c *Config) { c.Warmup = 1 }, "no warm-up"},
		{"session id", func(c *Config) { c.SessionID = "cookie" }, `session id "cookie"`},
		{"turns without sessions", func(c *Config) { c.Sessions, c.Turns = 0, 3 }, "need sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.set(&c)
			_, err := Run(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
