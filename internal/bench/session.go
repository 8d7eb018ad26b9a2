package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
)

// Multi-turn sessions (Config.Sessions): N conversations at once, each a
// closed loop of K turns. Turn k sends the session's system prompt, every
// earlier user message with the answer as it was received (the streamed
// text), then a new user message: the prompt grows each turn, so a prompt
// cache can serve all but the newest exchange from the turn before. The
// first user message names the session, so no two sessions share more
// than the system prompt. A failed turn ends its session (its history has
// no answer to carry on from); the turns left are counted as not sent.

// The ways a session tells its identity (Config.SessionID).
const (
	SessionIDHeader = "header" // the X-Session-Id header (the default)
	SessionIDBody   = "body"   // prompt_cache_key (chat, responses) or metadata.user_id (messages)
	SessionIDNone   = "none"   // nothing: a gateway can only fingerprint the prompt
)

// SessionIDModes lists the Config.SessionID values, the default first.
var SessionIDModes = []string{SessionIDHeader, SessionIDBody, SessionIDNone}

// HeaderSessionID carries a session's identity with SessionIDHeader.
const HeaderSessionID = "X-Session-Id"

// DefaultTurns is a session's turns when Config.Turns is 0.
const DefaultTurns = 5

// ThinkJitter is the spread of a think time: each wait is drawn uniformly
// from ThinkTime × [1 − ThinkJitter, 1 + ThinkJitter].
const ThinkJitter = 0.25

// SessionStats are a session run's figures in a RunResult.
type SessionStats struct {
	Count       int     `json:"count"`
	Turns       int     `json:"turns"`
	ThinkTimeMs float64 `json:"think_time_ms"`
	// SessionID is how sessions told their identity: header, body or none;
	// RunID the identities' prefix (session n is "<run_id>-<n>").
	SessionID    string `json:"session_id"`
	RunID        string `json:"run_id"`
	SystemTokens int    `json:"system_tokens"`
	// TurnsNotSent are the turns of sessions a failed turn ended (or the
	// run's end cut short).
	TurnsNotSent int `json:"turns_not_sent"`
	// TTFT of the successful first turns (nothing cached but what other
	// sessions share) and of the later turns.
	TTFTFirstTurn  Dist `json:"ttft_first_turn_ms"`
	TTFTLaterTurns Dist `json:"ttft_later_turns_ms"`
	// CacheReadShareLater is cache reads / prompt tokens over the later
	// turns alone (nil when none reported prompt tokens).
	CacheReadShareLater *float64 `json:"cache_read_share_later_turns,omitempty"`
	// Transport is how the turns travelled (http or ws); RequestBytes the
	// bytes of the turns' request bodies (ws: their response.create
	// frames), per turn sent.
	Transport    string `json:"transport"`
	RequestBytes Dist   `json:"request_bytes_per_turn"`
}

// checkSessions validates a session run's config and sets its request
// count and concurrency.
func checkSessions(cfg *Config) error {
	switch {
	case cfg.Rate > 0:
		return errors.New("bench: sessions set the load: no rate with them")
	case cfg.Trace != nil:
		return errors.New("bench: sessions and a trace exclude each other")
	case cfg.Duration > 0:
		return errors.New("bench: sessions run their turns: no duration with them")
	case cfg.Warmup > 0:
		return errors.New("bench: sessions have no warm-up: their first turns are measured apart (ttft_first_turn_ms)")
	case cfg.Turns < 0 || cfg.ThinkTime < 0 || cfg.SystemTokens < 0:
		return errors.New("bench: negative turns, think time or system tokens")
	case cfg.SessionID != "" && !slices.Contains(SessionIDModes, cfg.SessionID):
		return fmt.Errorf("bench: session id %q: want one of %s", cfg.SessionID, strings.Join(SessionIDModes, ", "))
	case cfg.Transport != "" && cfg.Transport != TransportHTTP && cfg.Transport != TransportWS:
		return fmt.Errorf("bench: transport %q: want http or ws", cfg.Transport)
	case cfg.Transport == TransportWS && cfg.API != APIResponses:
		return errors.New("bench: transport ws is the Responses API's WebSocket mode: it needs --api responses")
	}
	if cfg.Turns == 0 {
		cfg.Turns = DefaultTurns
	}
	if cfg.SessionID == "" {
		cfg.SessionID = SessionIDHeader
	}
	cfg.Requests = cfg.Sessions * cfg.Turns
	cfg.Concurrency = cfg.Sessions
	return nil
}

// newRunID is a random 8-hex-digit prefix of a run's session identities,
// so the sessions of two runs never share an identity or a first message.
func newRunID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// systemPrompt is the sessions' shared system prompt of tokens tokens (by
// the simulator's estimate: 4 ASCII characters a token); "" for 0. It is
// the same for every session and run, as an application's is.
func systemPrompt(tokens int) string {
	if tokens <= 0 {
		return ""
	}
	const head = "You are a helpful assistant. Reference notes follow. "
	chars := max(4*tokens, len(head))
	b := make([]byte, 0, chars)
	b = append(b, head...)
	for k := uint64(0); len(b) < chars; k++ {
		b = appendBlock(append(b, ' '), splitmix64(k^0x73797374), min(chars-len(b)-1, blockChars))
	}
	return string(b[:chars])
}

// userText is the user message a prompt of the dataset gives a turn: its
// last user message, else all its texts.
func userText(p Prompt) string {
	for i := len(p.Messages) - 1; i >= 0; i-- {
		if p.Messages[i].Role == "user" {
			return p.Messages[i].Text()
		}
	}
	var parts []string
	for _, m := range p.Messages {
		parts = append(parts, m.Text())
	}
	return strings.Join(parts, "\n")
}

// sessionLoop runs the sessions, each on its own goroutine, started evenly
// over the ramp-up.
func (r *runner) sessionLoop(stopCtx, reqCtx context.Context) {
	var wg sync.WaitGroup
	for n := range r.cfg.Sessions {
		wg.Go(func() { r.session(stopCtx, reqCtx, n) })
	}
	wg.Wait()
}

// wait sleeps d unless stopCtx ends first; it reports whether to go on.
func wait(stopCtx context.Context, d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-stopCtx.Done():
		}
	}
	return stopCtx.Err() == nil
}

// session runs session n's turns one after the other.
func (r *runner) session(stopCtx, reqCtx context.Context, n int) {
	cfg := &r.cfg
	turns := cfg.Turns
	sent := 0
	defer func() { r.notSent.Add(int64(turns - sent)) }()
	if cfg.RampUp > 0 && n > 0 && !wait(stopCtx, cfg.RampUp*time.Duration(n)/time.Duration(cfg.Sessions)) {
		return
	}
	rng := mrand.New(mrand.NewPCG(cfg.Seed, uint64(n)<<16^0x5e55))
	id := r.runID + "-" + strconv.Itoa(n+1)
	hdr := r.header
	if cfg.SessionID == SessionIDHeader && r.header.Get(HeaderSessionID) == "" {
		hdr = r.header.Clone()
		hdr.Set(HeaderSessionID, id)
	}
	extra := r.sessionExtra(id)
	if cfg.Transport == TransportWS {
		sent = r.wsSession(stopCtx, reqCtx, n, id, hdr, extra, rng)
		return
	}
	var history []turnMessage
	for turn := 1; turn <= turns; turn++ {
		if turn > 1 && cfg.ThinkTime > 0 {
			d := time.Duration(float64(cfg.ThinkTime) * (1 - ThinkJitter + 2*ThinkJitter*rng.Float64()))
			if !wait(stopCtx, d) {
				return
			}
		}
		if stopCtx.Err() != nil {
			return
		}
		p, text, mt := r.turnPrompt(cfg, rng, id, turn)
		history = append(history, turnMessage{"user", text})
		body, err := sessionBody(cfg.API, cfg.Model, r.system, history, extra, cmpOr(mt, r.bodies.fixed))
		req := &Request{Index: n*turns + turn - 1, Prompt: p, MaxTokens: mt, Session: n + 1, Turn: turn, collect: true,
			Arrivals: make([]time.Duration, 0, cmpOr(mt, 510)+2)}
		if err != nil { // not for a valid config: prepare checked the API and the extra body
			return
		}
		sent++
		req.BodyBytes = len(body)
		r.sendWith(reqCtx, req, body, hdr, true)
		if !req.OK() {
			return
		}
		history = append(history, turnMessage{"assistant", req.answer()})
		req.text = nil
	}
}

// sessionExtra is the --extra-body fields with the session's identity
// added (SessionIDBody) unless they set it.
func (r *runner) sessionExtra(id string) map[string]json.RawMessage {
	extra := r.bodies.extra
	if r.cfg.SessionID != SessionIDBody {
		return extra
	}
	key, val := "prompt_cache_key", json.RawMessage(strconv.Quote(id))
	if r.cfg.API == APIMessages {
		key = "metadata"
		val, _ = json.Marshal(map[string]string{"user_id": id})
	}
	if _, ok := extra[key]; ok {
		return extra
	}
	out := make(map[string]json.RawMessage, len(extra)+1)
	for k, v := range extra {
		out[k] = v
	}
	out[key] = val
	return out
}

// turnMessage is one message of a session's history.
type turnMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// cacheControl marks a Messages block as a prompt cache breakpoint.
var cacheControl = json.RawMessage(`{"type":"ephemeral"}`)

// sessionBody is the body of a session's turn in apiName's shape: the
// system prompt (none when ""), the history, the limit maxTokens (0: none).
// A Messages request puts a cache_control breakpoint on its last block, as
// Anthropic clients do to have a conversation cached (Anthropic caches
// nothing without one); OpenAI caches prefixes on its own.
func sessionBody(apiName, model, system string, history []turnMessage, extra map[string]json.RawMessage, maxTokens int) ([]byte, error) {
	m := map[string]any{"model": model, "stream": true}
	msgs := make([]any, 0, len(history)+1)
	switch apiName {
	case APIChat, APIResponses:
		if system != "" {
			msgs = append(msgs, turnMessage{"system", system})
		}
		for _, h := range history {
			msgs = append(msgs, h)
		}
		if apiName == APIChat {
			m["messages"] = msgs
			m["stream_options"] = api.StreamOptions{IncludeUsage: true}
		} else {
			m["input"] = msgs
		}
	case APIMessages:
		if system != "" {
			m["system"] = system
		}
		type block struct {
			Type         string          `json:"type"`
			Text         string          `json:"text"`
			CacheControl json.RawMessage `json:"cache_control,omitempty"`
		}
		type msg struct {
			Role    string  `json:"role"`
			Content []block `json:"content"`
		}
		for i, h := range history {
			b := block{Type: "text", Text: h.Content}
			if i == len(history)-1 {
				b.CacheControl = cacheControl
			}
			msgs = append(msgs, msg{h.Role, []block{b}})
		}
		m["messages"] = msgs
	default:
		return nil, fmt.Errorf("api %q: want one of chat, messages, responses", apiName)
	}
	enc, err := openObject(m, extra)
	if err != nil {
		return nil, err
	}
	if maxTokens > 0 {
		enc = append(enc, limitField(apiName)...)
		enc = strconv.AppendInt(enc, int64(maxTokens), 10)
	}
	return append(enc, '}'), nil
}

// answer is the text the request's stream carried, unescaped.
func (q *Request) answer() string {
	quoted := make([]byte, 0, len(q.text)+2)
	quoted = append(append(append(quoted, '"'), q.text...), '"')
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return string(q.text)
	}
	return s
}

// appendString appends a JSON string value's contents (still escaped,
// without its quotes); other values append nothing. Escaped pieces joined
// are the escaped whole, so a stream's pieces are unescaped once, at its end.
func appendString(dst, value []byte) []byte {
	if len(value) >= 2 && value[0] == '"' {
		return append(dst, value[1:len(value)-1]...)
	}
	return dst
}

// chatText appends the answer text of a chat chunk: its choices' delta
// (or message) content, reasoning left out.
func chatText(dst, data []byte) []byte {
	api.EachMember(data, func(key, _, value []byte) error {
		if string(key) != "choices" {
			return nil
		}
		return api.EachElement(value, func(choice []byte) error {
			return api.EachMember(choice, func(key, _, value []byte) error {
				if string(key) != "delta" && string(key) != "message" {
					return nil
				}
				return api.EachMember(value, func(key, _, value []byte) error {
					if string(key) == "content" {
						dst = appendString(dst, value)
					}
					return nil
				})
			})
		})
	})
	return dst
}

// dialectText appends the answer text of a Messages event (a text_delta)
// or a Responses event (response.output_text.delta).
func dialectText(apiName string, dst, name, data []byte) []byte {
	var typ, delta []byte
	api.EachMember(data, func(key, _, value []byte) error {
		switch string(key) {
		case "type":
			typ = value
		case "delta":
			delta = value
		}
		return nil
	})
	if apiName == APIResponses {
		if string(typ) == `"response.output_text.delta"` {
			dst = appendString(dst, delta)
		}
		return dst
	}
	if string(name) != "content_block_delta" && string(typ) != `"content_block_delta"` {
		return dst
	}
	api.EachMember(delta, func(key, _, value []byte) error {
		if string(key) == "text" {
			dst = appendString(dst, value)
		}
		return nil
	})
	return dst
}

// sessionStats summarises a session run's records (sorted by index) into
// rr.Sessions and rr.CacheReadShare.
func (r *runner) sessionStats(rr *RunResult, recs []*Request) {
	cfg := &r.cfg
	st := &SessionStats{Count: cfg.Sessions, Turns: cfg.Turns, ThinkTimeMs: ms(cfg.ThinkTime), SessionID: cfg.SessionID,
		RunID: r.runID, SystemTokens: cfg.SystemTokens, TurnsNotSent: int(r.notSent.Load()), Transport: cmpOrStr(cfg.Transport, TransportHTTP)}
	var first, later, sizes []float64
	for _, q := range recs {
		sizes = append(sizes, float64(q.BodyBytes))
	}
	st.RequestBytes = Summarize(sizes)
	var laterIn, laterRead int
	for _, q := range recs {
		if !q.OK() {
			continue
		}
		d, ok := q.TTFT()
		if q.Turn == 1 {
			if ok {
				first = append(first, ms(d))
			}
			continue
		}
		if ok {
			later = append(later, ms(d))
		}
		laterIn += q.InputTokens
		laterRead += q.CacheReadTokens
	}
	st.TTFTFirstTurn, st.TTFTLaterTurns = Summarize(first), Summarize(later)
	if laterIn > 0 {
		share := float64(laterRead) / float64(laterIn)
		st.CacheReadShareLater = &share
	}
	rr.Sessions = st
	if rr.InTok > 0 {
		share := float64(rr.CacheReadTok) / float64(rr.InTok)
		rr.CacheReadShare = &share
	}
}

// sessionTables is the HTML report's table of session runs (none without).
func sessionTables(runs []RunResult) []Table {
	t := Table{Caption: "Multi-turn sessions", Head: []string{"run", "load", "think ms", "session id", "turns not sent",
		"cache-read share", "turns 2+", "TTFT first turn p50 ms", "p99 ms", "later turns p50 ms", "p99 ms", "cost"}, Text: []int{3}}
	pct := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100**v)
	}
	for i := range runs {
		r := &runs[i]
		s := r.Sessions
		if s == nil {
			continue
		}
		cost := "-"
		if r.CostUSD > 0 {
			cost = money(r.CostUSD)
		}
		t.Rows = append(t.Rows, []string{runName(r), loadName(r), fms(s.ThinkTimeMs), s.SessionID, strconv.Itoa(s.TurnsNotSent),
			pct(r.CacheReadShare), pct(s.CacheReadShareLater),
			pctText(s.TTFTFirstTurn, s.TTFTFirstTurn.P50), pctText(s.TTFTFirstTurn, s.TTFTFirstTurn.P99),
			pctText(s.TTFTLaterTurns, s.TTFTLaterTurns.P50), pctText(s.TTFTLaterTurns, s.TTFTLaterTurns.P99), cost})
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return []Table{t}
}

// turnPrompt draws a session turn's prompt (its index), its user text
// (the first turn names the session, so sessions' prefixes differ) and its
// max_tokens (0: the prompt's own, or none).
func (r *runner) turnPrompt(cfg *Config, rng *mrand.Rand, id string, turn int) (int, string, int) {
	p := rng.IntN(len(r.prompts))
	var drawn int
	if cfg.OutputTokens.Mean > 0 {
		drawn = cfg.OutputTokens.draw(rng)
	}
	mt := cmpOr(cfg.MaxTokens, cmpOr(drawn, r.prompts[p].MaxTokens))
	text := userText(r.prompts[p])
	if turn == 1 {
		text = "Session " + id + ". " + text
	}
	return p, text, mt
}
