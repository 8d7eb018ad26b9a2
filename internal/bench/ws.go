package bench

import (
	"bytes"
	"context"
	"encoding/json"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/streamgate/streamgate/internal/sse"
)

// Session transports (Config.Transport).
const (
	TransportHTTP = "http"
	TransportWS   = "ws"
)

// wsSession runs session n over one WebSocket (Config.Transport
// TransportWS) and returns the turns it sent: a warm-up with the system
// prompt (generate: false, not measured), then each turn's user message
// alone, chained to the response before with previous_response_id and
// store: false, as Codex's built-in provider sends its turns. A failed
// turn ends the session, as over HTTP.
func (r *runner) wsSession(stopCtx, reqCtx context.Context, n int, id string, hdr http.Header, extra map[string]json.RawMessage, rng *mrand.Rand) (sent int) {
	cfg := &r.cfg
	url := "ws" + strings.TrimPrefix(r.url, "http")
	c, _, err := websocket.Dial(reqCtx, url, &websocket.DialOptions{HTTPHeader: hdr, HTTPClient: r.client})
	if err != nil {
		return 0
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	st := r.pool.Get().(*stream)
	defer r.pool.Put(st)
	st.t0, st.base = r.t0, r.base
	st.setAPI(APIResponses)
	prev := ""
	if r.system != "" {
		warm := map[string]any{"type": "response.create", "generate": false, "model": cfg.Model, "store": false,
			"input": []turnMessage{{"system", r.system}}}
		q := &Request{Index: -1}
		if prev = st.doWS(reqCtx, c, frame(warm, extra), q); prev == "" {
			return 0
		}
	}
	for turn := 1; turn <= cfg.Turns; turn++ {
		if turn > 1 && cfg.ThinkTime > 0 {
			d := time.Duration(float64(cfg.ThinkTime) * (1 - ThinkJitter + 2*ThinkJitter*rng.Float64()))
			if !wait(stopCtx, d) {
				return sent
			}
		}
		if stopCtx.Err() != nil {
			return sent
		}
		p, text, mt := r.turnPrompt(cfg, rng, id, turn)
		m := map[string]any{"type": "response.create", "model": cfg.Model, "store": false, "input": []turnMessage{{"user", text}}}
		if prev != "" {
			m["previous_response_id"] = prev
		}
		if lim := cmpOr(mt, r.bodies.fixed); lim > 0 {
			m["max_output_tokens"] = max(lim, minResponsesOutput)
		}
		body := frame(m, extra)
		req := &Request{Index: n*cfg.Turns + turn - 1, Prompt: p, MaxTokens: mt, Session: n + 1, Turn: turn, BodyBytes: len(body),
			Arrivals: make([]time.Duration, 0, cmpOr(mt, 510)+2)}
		sent++
		r.mu.Lock()
		r.inflight[req] = func(error) { c.CloseNow() }
		r.mu.Unlock()
		prev = st.doWS(reqCtx, c, body, req)
		st.req = nil
		r.recorded(req, true)
		if !req.OK() || prev == "" {
			return sent
		}
	}
	return sent
}

// frame is a response.create frame: m's members, then extra's (the
// --extra-body fields, not overriding m's).
func frame(m map[string]any, extra map[string]json.RawMessage) []byte {
	for k, v := range extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// doWS sends one response.create frame on c and reads its events into r,
// as do reads an SSE stream's; it returns the response's id from its
// terminal event ("" when it did not complete).
func (s *stream) doWS(ctx context.Context, c *websocket.Conn, body []byte, r *Request) string {
	s.req = r
	s.ended, s.input, s.cacheRead, s.cacheWrite = false, -1, -1, -1
	s.sent = time.Now()
	r.Sent = s.sent.Sub(s.t0)
	r.last.Store(int64(s.sent.Sub(s.base)))
	if err := c.Write(ctx, websocket.MessageText, body); err != nil {
		r.Kind, r.Err = KindTransport, err.Error()
		return ""
	}
	var ev sse.Event
	for {
		_, data, err := c.Read(ctx)
		now := time.Now()
		if err != nil {
			r.End = now.Sub(s.sent)
			r.Err = err.Error()
			if ctx.Err() != nil {
				r.Incomplete = true
			} else {
				r.Kind, r.Interrupted = KindInterrupted, true
			}
			return ""
		}
		if bytes.HasPrefix(data, []byte(`{"type":"error"`)) {
			var e struct {
				Status int `json:"status"`
			}
			json.Unmarshal(data, &e)
			r.Status, r.End = e.Status, now.Sub(s.sent)
			r.Kind, r.Err = statusKind(e.Status), "error frame: "+clip(data)
			return ""
		}
		r.Status = http.StatusOK
		ev = sse.Event{Data: data}
		if !s.onEvent(&ev, now) {
			r.End = now.Sub(s.sent)
			return ""
		}
		if s.ended {
			r.End, r.Done = now.Sub(s.sent), true
			if r.TokenSource == "" {
				r.TokenSource = "chunks"
				r.OutputTokens = len(r.Arrivals)
			}
			var t struct {
				Response struct {
					ID string `json:"id"`
				} `json:"response"`
			}
			if json.Unmarshal(data, &t) != nil || t.Response.ID == "" {
				r.Kind, r.Err = KindMalformed, "terminal event without a response id: "+clip(data)
				return ""
			}
			return t.Response.ID
		}
	}
}
