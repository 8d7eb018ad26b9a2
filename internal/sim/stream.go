package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

// plan is everything decided about one request before its first byte: the
// profile after header overrides, the output length, the drawn TTFT and the
// faults that hit it. Gaps and text are drawn lazily from its generators.
type plan struct {
	id           string
	model        string
	profile      Profile
	includeUsage bool
	promptTokens int
	tokens       int    // completion tokens to send
	finish       string // "stop" or "length"
	chunks       int    // content chunks
	firstAfter   time.Duration

	failStatus  int // 0 = no failure
	stallFirst  time.Duration
	stallAt     int // 0 = none; chunks counted from 1
	stallFor    time.Duration
	cutAt       int
	errorAt     int
	malformedAt int

	text   *rand.Rand
	timing *rand.Rand
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.m.requests.Inc()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			"method "+r.Method+" not allowed on /v1/chat/completions")
		return
	}
	var req api.ChatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes)).Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", "",
				fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "",
			"invalid JSON body: "+err.Error())
		return
	}
	pl, status, err := s.plan(r, &req)
	if err != nil {
		param, code := "", "invalid_request"
		var he *headerError
		if errors.As(err, &he) {
			param, code = he.header, "invalid_sim_header"
		} else if pe, ok := err.(paramError); ok {
			param = pe.param
		}
		writeError(w, status, "invalid_request_error", code, param, err.Error())
		return
	}
	w.Header().Set("X-Request-Id", pl.id)
	w.Header().Set("X-Sim-Profile", pl.profile.Name)
	if pl.failStatus != 0 {
		s.m.faults.WithLabelValues(faultFail).Inc()
		writeFailure(w, pl.failStatus)
		return
	}
	if req.Stream {
		s.stream(w, r, pl)
		return
	}
	s.complete(w, r, pl)
}

// paramError is a request error about one body field.
type paramError struct {
	param string
	msg   string
}

func (e paramError) Error() string { return e.msg }

// plan decides the request's behaviour. On error it returns the status to
// answer with.
func (s *Server) plan(r *http.Request, req *api.ChatRequest) (*plan, int, error) {
	if req.Model == "" {
		return nil, http.StatusBadRequest, paramError{"model", "model is required"}
	}
	if len(req.Messages) == 0 {
		return nil, http.StatusBadRequest, paramError{"messages", "messages is required and must not be empty"}
	}
	limit := req.OutputLimit()
	if limit < 0 {
		return nil, http.StatusBadRequest, paramError{"max_tokens", fmt.Sprintf("max_tokens %d is negative", limit)}
	}
	p := s.profileFor(req.Model)
	if name := r.Header.Get(HeaderProfile); name != "" {
		q, ok := s.byName[name]
		if !ok {
			if name != s.def.Name {
				return nil, http.StatusBadRequest, &headerError{HeaderProfile, fmt.Errorf("unknown profile %q", name)}
			}
			q = s.def
		}
		p = q
	}
	var hdrSeed int64
	var hdrSeedSet bool
	if err := applyHeaders(r.Header, &p, &hdrSeed, &hdrSeedSet); err != nil {
		return nil, http.StatusBadRequest, err
	}
	p = p.normalize()

	n := s.counter.Add(1)
	root := splitmix64(uint64(s.opts.Seed))
	var key uint64
	switch {
	case hdrSeedSet:
		key = splitmix64(uint64(hdrSeed) ^ 0x6865616465727365) // independent of Options.Seed
	case req.Seed != nil:
		key = splitmix64(root ^ splitmix64(uint64(*req.Seed)^0x626f647973656564))
	default:
		key = splitmix64(root + n)
	}
	pl := &plan{
		id:           "chatcmpl-sim" + strconv.FormatUint(key, 36),
		model:        req.Model,
		profile:      p,
		includeUsage: req.IncludeUsage(),
		tokens:       p.Tokens,
		finish:       "stop",
		text:         rand.New(rand.NewPCG(key, 1)),
		timing:       rand.New(rand.NewPCG(key, 2)),
	}
	if limit > 0 && limit < pl.tokens {
		pl.tokens, pl.finish = limit, "length"
	}
	pl.chunks = (pl.tokens + p.TokensPerChunk - 1) / p.TokensPerChunk
	pl.promptTokens = 3
	for _, m := range req.Messages {
		pl.promptTokens += 3 + estimateTokens(m.Text())
	}
	pl.firstAfter = lognormalQuantile(p.TTFT, p.TTFTP99, pl.timing.NormFloat64()) +
		time.Duration(pl.promptTokens)*p.PrefillPerToken

	// Faults: a fixed number of draws whatever is on, so turning one fault
	// on does not change which requests another one hits.
	fr := rand.New(rand.NewPCG(key, 3))
	f := p.Faults
	at := func(n int, set bool, rate float64) int {
		u, pick := fr.Float64(), 1+fr.IntN(pl.chunks+1)
		if !hits(u, set, rate) {
			return 0
		}
		if n == 0 {
			n = pick
		}
		return min(n, pl.chunks+1)
	}
	if hits(fr.Float64(), f.FailStatus != 0, f.FailRate) {
		pl.failStatus = cmpOr(f.FailStatus, DefaultFailStatus)
	}
	if hits(fr.Float64(), f.StallFirst != 0, f.StallFirstRate) {
		pl.stallFirst = cmpOr(f.StallFirst, DefaultStall)
	}
	if pl.stallAt = at(f.StallAt, f.StallAt != 0 || f.StallFor != 0, f.StallRate); pl.stallAt != 0 {
		pl.stallFor = cmpOr(f.StallFor, DefaultStall)
	}
	pl.cutAt = at(f.CutAt, f.CutAt != 0, f.CutRate)
	pl.errorAt = at(f.ErrorAt, f.ErrorAt != 0, f.ErrorRate)
	pl.malformedAt = at(f.MalformedAt, f.MalformedAt != 0, f.MalformedRate)
	return pl, 0, nil
}

// hits decides a fault from the uniform draw u: off when neither its value
// nor its rate is set, always when the value is set with rate 0.
func hits(u float64, valueSet bool, rate float64) bool {
	switch {
	case rate > 0:
		return u < rate
	default:
		return valueSet
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// writeFailure answers an injected error status with the body OpenAI sends
// for it (and Retry-After on 429).
func writeFailure(w http.ResponseWriter, status int) {
	typ, code, msg := "server_error", "", "simulated upstream error"
	switch status {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		typ, code, msg = "requests", "rate_limit_exceeded", "Rate limit reached for requests (simulated). Please try again in 1s."
	case http.StatusInternalServerError:
		msg = "The server had an error while processing your request (simulated)."
	case http.StatusBadGateway:
		code, msg = "bad_gateway", "Bad gateway (simulated)."
	case http.StatusServiceUnavailable:
		code, msg = "overloaded", "The engine is currently overloaded, please try again later (simulated)."
	default:
		if status < 500 {
			typ = "invalid_request_error"
		}
		msg = fmt.Sprintf("simulated error status %d", status)
	}
	writeError(w, status, typ, code, "", msg)
}

// streamState is one stream being written.
type streamState struct {
	w     io.Writer // the ResponseWriter, for events written without a flush
	sw    *sse.Writer
	stamp bool
	frame []byte
}

// emit writes one event, stamped right before the write when asked. With
// flush false the event waits in the response buffer for the next flushed
// one: events due at the same instant (role and first content, finish, usage
// and [DONE]) leave in one write, as real servers send them.
func (st *streamState) emit(data []byte, flush bool) error {
	if st.stamp {
		if err := st.sw.Stamp(time.Now().UnixNano()); err != nil {
			return err
		}
	}
	if flush {
		return st.sw.Data(data)
	}
	// Chunk JSON never holds a raw newline, so one data: line frames it.
	st.frame = append(append(append(st.frame[:0], "data: "...), data...), '\n', '\n')
	_, err := st.w.Write(st.frame)
	return err
}

// done writes the [DONE] sentinel and flushes everything pending.
func (st *streamState) done() error {
	if st.stamp {
		if err := st.sw.Stamp(time.Now().UnixNano()); err != nil {
			return err
		}
	}
	return st.sw.Done()
}

// stream writes pl as an SSE stream. It returns when the stream ends or the
// client goes away; a cut fault panics with http.ErrAbortHandler so the
// server drops the connection without ending the response.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, pl *plan) {
	ctx := r.Context()
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()
	cancelled := func() { s.m.cancelled.Inc() }

	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	st := &streamState{w: w, sw: sse.NewWriter(w), stamp: s.opts.Stamp}
	if err := st.sw.Flush(); err != nil {
		cancelled()
		return
	}
	if err := s.queue.acquire(ctx); err != nil {
		cancelled()
		return
	}
	defer s.queue.release()

	p := &pl.profile
	pc := newPacer(ctx)
	defer pc.stop()
	ck := newChunker(pl.id, pl.model, time.Now().Unix(), pl.includeUsage)
	gen := newTextGen(p.Lang, pl.text)
	var sent, chunks int
	defer func() {
		s.m.chunks.Add(float64(chunks))
		s.m.tokens.Add(float64(sent))
	}()

	if pl.stallFirst > 0 {
		s.m.faults.WithLabelValues(faultStallFirst).Inc()
	}
	deadline := time.Now().Add(pl.firstAfter + pl.stallFirst)
	// The role chunk goes out with the first content chunk unless a fault
	// comes between them.
	flushRole := pl.stallAt == 1 || pl.cutAt == 1
	if pc.wait(deadline) != nil || st.emit(ck.role(), flushRole) != nil {
		cancelled()
		return
	}
	for i := 1; i <= pl.chunks+1; i++ {
		if i > 1 && i <= pl.chunks {
			deadline = deadline.Add(gapAt(p.ITL, p.ITLJitter, pl.timing.NormFloat64()))
		}
		if i == pl.stallAt {
			s.m.faults.WithLabelValues(faultStall).Inc()
			deadline = deadline.Add(pl.stallFor)
		}
		if pc.wait(deadline) != nil {
			cancelled()
			return
		}
		switch i {
		case pl.cutAt:
			s.m.faults.WithLabelValues(faultCut).Inc()
			panic(http.ErrAbortHandler)
		case pl.errorAt:
			s.m.faults.WithLabelValues(faultError).Inc()
			if st.emit(errorEvent(i), true) != nil {
				cancelled()
			}
			return
		case pl.malformedAt:
			s.m.faults.WithLabelValues(faultMalformed).Inc()
			if st.emit(ck.malformed(), true) != nil {
				cancelled()
				return
			}
		}
		if i > pl.chunks {
			break
		}
		ck.beginContent()
		for k := 0; k < p.TokensPerChunk && sent < pl.tokens; k++ {
			ck.token(gen.next())
			sent++
		}
		if st.emit(ck.endContent(), true) != nil {
			cancelled()
			return
		}
		chunks++
	}
	if st.emit(ck.finish(pl.finish), false) != nil {
		cancelled()
		return
	}
	if pl.includeUsage && st.emit(ck.usageChunk(pl.promptTokens, sent), false) != nil {
		cancelled()
		return
	}
	if st.done() != nil {
		cancelled()
		return
	}
	s.m.completed.Inc()
}

// errorEvent is the data of a mid-stream error event, as OpenAI sends one.
func errorEvent(chunk int) []byte {
	b, _ := json.Marshal(api.NewError("server_error", "sim_error_event", "",
		fmt.Sprintf("simulated upstream error at chunk %d", chunk)))
	return b
}

// complete answers a non-stream request after the time its stream would
// have taken.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, pl *plan) {
	ctx := r.Context()
	if err := s.queue.acquire(ctx); err != nil {
		return
	}
	defer s.queue.release()
	p := &pl.profile
	total := pl.firstAfter + pl.stallFirst
	for i := 2; i <= pl.chunks; i++ {
		total += gapAt(p.ITL, p.ITLJitter, pl.timing.NormFloat64())
	}
	if pl.stallFirst != 0 {
		s.m.faults.WithLabelValues(faultStallFirst).Inc()
	}
	if pl.stallAt != 0 {
		s.m.faults.WithLabelValues(faultStall).Inc()
		total += pl.stallFor
	}
	pc := newPacer(ctx)
	defer pc.stop()
	if pc.wait(time.Now().Add(total)) != nil {
		return
	}
	if pl.cutAt != 0 {
		s.m.faults.WithLabelValues(faultCut).Inc()
		panic(http.ErrAbortHandler)
	}
	if pl.errorAt != 0 {
		s.m.faults.WithLabelValues(faultError).Inc()
		writeError(w, http.StatusInternalServerError, "server_error", "sim_error_event", "",
			"simulated upstream error during generation")
		return
	}
	gen := newTextGen(p.Lang, pl.text)
	var text strings.Builder
	for range pl.tokens {
		text.Write(gen.next())
	}
	// The tokens are stored JSON-escaped; unquote them back to text.
	var content string
	if err := json.Unmarshal([]byte(`"`+text.String()+`"`), &content); err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "", "sim: building the text failed: "+err.Error())
		return
	}
	if pl.malformedAt != 0 {
		s.m.faults.WithLabelValues(faultMalformed).Inc()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"id":"` + pl.id + `","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"trunc`))
		return
	}
	s.m.tokens.Add(float64(pl.tokens))
	writeJSON(w, http.StatusOK, api.Completion{
		ID:      pl.id,
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   pl.model,
		Choices: []api.Choice{{Index: 0, Message: api.RespMsg{Role: "assistant", Content: content}, FinishReason: pl.finish}},
		Usage:   &api.Usage{PromptTokens: pl.promptTokens, CompletionTokens: pl.tokens, TotalTokens: pl.promptTokens + pl.tokens},
	})
}
