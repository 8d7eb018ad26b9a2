package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/sse"
)

// request is what the engine needs from a request body, whatever its
// dialect: each endpoint decodes and validates its own body into one.
type request struct {
	model        string
	stream       bool
	promptTokens int        // estimate of every message, a prefix included
	prompt       promptHash // the conversation's text without the prefix
	// prefix is the text of a trailing assistant message (OpenAI assistant
	// without tool_calls, Anthropic prefill, Gemini model turn): the answer
	// continues it. "" = none.
	prefix       string
	limit        int    // output token limit; 0 = none given
	seed         *int64 // the body's seed, nil when none
	includeUsage bool   // OpenAI stream_options.include_usage
	tools        []tool // functions offered
	// search: the provider's web search tool is offered (search.go);
	// question is the last user message's text, what it searches for.
	search   bool
	question string
	thinking thinkingAsk
	signed   []signedBlock // Anthropic: thinking blocks passed back, to verify
	// cache returns the request's prompt cache checkpoints for a minimum
	// cacheable prefix of min tokens; nil = nothing to cache.
	cache func(min int) *cacheQuery
}

// stopReason is why an answer ended; each dialect spells it its own way.
type stopReason uint8

const (
	stopEnd    stopReason = iota // the answer is complete
	stopLength                   // the output limit cut it
	stopTool                     // it is a tool call
)

// plan is everything decided about one request before its first byte: the
// profile after header overrides, the output length, the drawn TTFT and the
// faults that hit it. Gaps and text are drawn lazily from its generators.
type plan struct {
	id           string
	key          uint64 // the request's seed; other ids derive from it
	model        string
	profile      Profile
	includeUsage bool
	promptTokens int
	tokens       int // answer tokens to send (text or tool call), thinking not included
	stop         stopReason
	chunks       int        // content chunks, visible thinking's included
	tool         *toolCall  // the forced tool call; nil = a text answer
	search       *webSearch // the search before a text answer (search.go); nil: none
	firstAfter   time.Duration

	// Thinking (see thinking.go): thinkTokens are output tokens spent
	// thinking before the answer, the first thinkChunks chunks stream
	// thinking (its tokens, thinking[i], when visible); signature signs
	// thinkText; redacted is the data of a redacted_thinking block sent
	// instead of the thinking text (X-Sim-Redacted-Thinking).
	thinkTokens int
	thinkChunks int
	thinking    []token
	thinkText   string
	signature   string
	redacted    string
	omitted     bool // Anthropic display "omitted": the block's text is empty

	cache cacheUsage // the prompt cache's part of promptTokens

	failStatus  int // 0 = no failure
	stallFirst  time.Duration
	stallAt     int // 0 = none; chunks counted from 1
	stallFor    time.Duration
	cutAt       int
	errorAt     int
	malformedAt int

	text   textGen // seeded by the text key, past the prefix it continues
	timing *rand.Rand
	// itlScale multiplies a gap drawn from ITLDist: the dialect's tokens
	// per chunk (when the profile sets none) times the hour's multiplier.
	itlScale float64
	// sizes draws the tokens of each text chunk from ChunkDist.
	sizes rand.PCG
}

// gap draws the wait before the next content chunk.
func (pl *plan) gap() time.Duration {
	if d := pl.profile.ITLDist; d != nil {
		return time.Duration(d.duration(pl.timing.Float64(), pl.itlScale))
	}
	return gapAt(pl.profile.ITL, pl.profile.ITLJitter, pl.timing.NormFloat64())
}

// chunkSize returns the tokens of the next text chunk.
func (pl *plan) chunkSize() int {
	if d := pl.profile.ChunkDist; d != nil {
		return d.draw(unit(pl.sizes.Uint64()))
	}
	return pl.profile.TokensPerChunk
}

// unit maps 64 random bits to a uniform float64 in [0, 1).
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// scaleDur returns d times m.
func scaleDur(d time.Duration, m float64) time.Duration { return time.Duration(float64(d) * m) }

// dialect is one provider's wire format: its error bodies, its non-stream
// answer and the encoder of its stream. The engine (plan, pacing, faults)
// is shared; a dialect only renders.
type dialect interface {
	// name names the dialect (prompt caches are per dialect).
	name() string
	// idPrefix starts the ids of answers (X-Request-Id, the answer's id).
	idPrefix() string
	// tokensPerChunk is the tokens of a content chunk when the profile
	// sets none: the size of the provider's own events.
	tokensPerChunk() int
	// wholeToolCall is true when the dialect sends a tool call's arguments
	// in one piece (Gemini's functionCall part) rather than in fragments.
	wholeToolCall() bool
	// toolCallID returns the id of a tool call in the dialect's form.
	toolCallID(key uint64) string
	// requestError answers a request the simulator rejects: a bad body
	// (paramError), a bad X-Sim-* header (*headerError), or another error.
	requestError(w http.ResponseWriter, status int, err error)
	// failure answers an injected error status before any output (the
	// fail-status fault), with the body the provider sends for it.
	failure(w http.ResponseWriter, status int)
	// generationFailure answers a non-stream request hit by the error-at
	// fault, as the provider answers an error during generation.
	generationFailure(w http.ResponseWriter)
	// complete writes the non-stream answer: text (already unescaped) or
	// pl.tool, with usage.
	complete(w http.ResponseWriter, pl *plan, text string)
	// truncated writes the non-stream answer of the malformed fault: status
	// 200 and a JSON body cut short.
	truncated(w http.ResponseWriter, pl *plan)
	// encoder returns the encoder of one stream.
	encoder(pl *plan) encoder
}

// encoder renders the engine's stream events in one dialect. Each method
// writes through st, which stamps every event when asked; a method whose
// flush is not a parameter flushes its last event. Tokens and fragments
// come JSON-escaped (the inside of a string literal) where noted.
type encoder interface {
	// start opens the answer before its first content chunk: OpenAI's role
	// chunk, Anthropic's message_start, content_block_start and ping.
	// With flush false the events wait for the first content chunk.
	start(st *streamState, flush bool) error
	// thinking writes one chunk of visible thinking (escaped tokens); sent
	// is the output tokens so far, this chunk's included. Only called for a
	// plan with thinkChunks.
	thinking(st *streamState, toks [][]byte, sent int) error
	// text writes one content chunk of escaped tokens; sent is the output
	// tokens so far (thinking included), this chunk's included.
	text(st *streamState, toks [][]byte, sent int) error
	// toolArgs writes fragment i (from 0) of the tool call's arguments
	// (raw JSON text, not escaped); sent as for text.
	toolArgs(st *streamState, i int, sent int) error
	// finish ends a complete stream with the stop reason, the usage and the
	// dialect's terminal event.
	finish(st *streamState, sent int) error
	// fail writes the mid-stream error event of the error-at fault at
	// content chunk n; the stream ends after it.
	fail(st *streamState, n int) error
	// malformed writes an event whose data is not valid JSON; the stream
	// goes on after it.
	malformed(st *streamState) error
}

// paramError is a request error about one body field.
type paramError struct {
	param string
	msg   string
}

func (e paramError) Error() string { return e.msg }

// decodeBody decodes a JSON request body into v. The error is a paramError
// whose param is "" for invalid JSON, with status 413 for a body above
// MaxBodyBytes and 400 otherwise.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes)).Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, errTooLarge
		}
		return http.StatusBadRequest, invalidJSON{err}
	}
	return 0, nil
}

// errTooLarge is the error of a body above MaxBodyBytes.
var errTooLarge = fmt.Errorf("request body larger than %d bytes", MaxBodyBytes)

// invalidJSON is a body that is not JSON of the expected shape.
type invalidJSON struct{ err error }

func (e invalidJSON) Error() string { return "invalid JSON body: " + e.err.Error() }

// serve plans req and answers it in dialect d: the fail-status fault, a
// stream or a non-stream answer.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *request, d dialect) {
	pl, err := s.plan(r, req, d)
	if err != nil {
		d.requestError(w, http.StatusBadRequest, err)
		return
	}
	w.Header().Set("X-Request-Id", pl.id)
	w.Header().Set("X-Sim-Profile", pl.profile.Name)
	if h, ok := d.(interface{ headers(http.Header, *plan) }); ok {
		h.headers(w.Header(), pl)
	}
	if pl.failStatus != 0 {
		s.m.faults.WithLabelValues(faultFail).Inc()
		d.failure(w, pl.failStatus)
		return
	}
	// The prompt is read (and cached) once the request is admitted; a
	// cached prefix is not prefilled again.
	if req.cache != nil {
		if q := req.cache(pl.profile.CacheMinTokens); q != nil {
			ns := cacheNamespace(d.name(), req.model, apiKey(r))
			pl.cache = s.cache.apply(ns, q, pl.profile.CacheMinTokens, time.Now())
			pl.firstAfter -= time.Duration(pl.cache.read) * pl.profile.PrefillPerToken
		}
	}
	if req.stream {
		s.stream(w, r, pl, d.encoder(pl))
		return
	}
	s.complete(w, r, pl, d)
}

// plan decides the request's behaviour. Its errors name the X-Sim-* header
// at fault (*headerError).
func (s *Server) plan(r *http.Request, req *request, d dialect) (*plan, error) {
	p := s.profileFor(req.model)
	if name := r.Header.Get(HeaderProfile); name != "" {
		q, ok := s.byName[name]
		if !ok {
			if name != s.def.Name {
				return nil, &headerError{HeaderProfile, fmt.Errorf("unknown profile %q", name)}
			}
			q = s.def
		}
		p = q
	}
	var hdrSeed int64
	var hdrSeedSet bool
	var redacted bool
	if err := applyHeaders(r.Header, &p, &hdrSeed, &hdrSeedSet, &redacted); err != nil {
		return nil, err
	}
	p = p.normalize()
	itlScale := 1.0
	if p.TokensPerChunk == 0 {
		// The dialect's event size, at the profile's token rate.
		n := d.tokensPerChunk()
		p.TokensPerChunk, p.ITL = n, p.ITL*time.Duration(n)
		itlScale = float64(n)
	}
	ttftScale := 1.0
	if p.Hourly != nil {
		// The time-of-day shape: every wait of this request scaled.
		m := p.Hourly[time.Now().UTC().Hour()]
		p.TTFT, p.TTFTP99, p.ITL = scaleDur(p.TTFT, m), scaleDur(p.TTFTP99, m), scaleDur(p.ITL, m)
		ttftScale, itlScale = m, itlScale*m
	}
	forced, err := pickTool(r.Header, req.tools)
	if err != nil {
		return nil, err
	}

	// Text depends on the seed part and the prompt only, so a continuation
	// request can find where the text it continues stands. Timing and
	// faults depend on the request key, which counts requests when no seed
	// is given, so fault rates hit different requests.
	n := s.counter.Add(1)
	root := splitmix64(uint64(s.opts.Seed))
	var part, key uint64
	switch {
	case hdrSeedSet:
		part = splitmix64(uint64(hdrSeed) ^ 0x6865616465727365) // independent of Options.Seed
		key = part
	case req.seed != nil:
		part = splitmix64(root ^ splitmix64(uint64(*req.seed)^0x626f647973656564))
		key = part
	default:
		part = root
		key = splitmix64(root + n)
	}
	if p.TokensDist != nil {
		p.Tokens = max(1, int(math.Round(p.TokensDist.at(unit(splitmix64(key^0x746f6b656e73))))))
	}
	textKey := splitmix64(part ^ splitmix64(uint64(req.prompt)^0x70726f6d7074))
	src := rand.NewPCG(textKey, 1)
	pl := &plan{
		id:           d.idPrefix() + strconv.FormatUint(key, 36),
		key:          key,
		model:        req.model,
		profile:      p,
		includeUsage: req.includeUsage,
		promptTokens: req.promptTokens,
		tokens:       p.Tokens,
		stop:         stopEnd,
		text:         newTextGen(p.Lang, rand.New(src)),
		timing:       rand.New(rand.NewPCG(key, 2)),
		itlScale:     itlScale,
	}
	if req.prefix != "" && forced == nil {
		k, ok := pl.text.continueFrom(req.prefix)
		if !ok {
			// The sim cannot continue text it did not write: it answers
			// from the start, which a client sees as repeated text.
			src.Seed(textKey, 1)
			pl.text, k = newTextGen(p.Lang, pl.text.rng), 0
		}
		pl.tokens = max(0, p.Tokens-k)
	}
	if th := req.thinking; th.mode == thinkOn || th.mode == thinkUnset && p.Reasoning {
		// Only Anthropic has redacted_thinking blocks.
		s.think(pl, th, req.limit, redacted && d.name() == "anthropic", textKey)
	}
	if limit := req.limit - pl.thinkTokens; req.limit > 0 && limit < pl.tokens {
		pl.tokens, pl.stop = max(0, limit), stopLength
	}
	pl.chunks = (pl.tokens + p.TokensPerChunk - 1) / p.TokensPerChunk
	if p.ChunkDist != nil && forced == nil {
		// Count the chunks the sizes drawn later will make: the same
		// sequence, from a copy of the generator.
		pl.sizes.Seed(key, 6)
		cp := pl.sizes
		n := 0
		for left := pl.tokens; left > 0; n++ {
			left -= p.ChunkDist.draw(unit(cp.Uint64()))
		}
		pl.chunks = n
	}
	if forced != nil {
		// A tool call ignores the output limit: it is a few tokens.
		pl.tool = newToolCall(forced, d.toolCallID(key), p.TokensPerChunk, d.wholeToolCall())
		pl.tokens, pl.chunks, pl.stop = pl.tool.tokens, len(pl.tool.frags), stopTool
	}
	if req.search && pl.tool == nil {
		pl.search = newWebSearch(req.question, key)
	}
	pl.chunks += pl.thinkChunks
	// Thinking that is not streamed still takes its time before the first
	// content, a chunk's gap per chunk it would have made.
	hidden := pl.thinkTokens
	if pl.thinkChunks > 0 {
		hidden = 0
	}
	var ttft time.Duration
	if p.TTFTDist != nil {
		ttft = time.Duration(p.TTFTDist.duration(pl.timing.Float64(), ttftScale))
	} else {
		ttft = lognormalQuantile(p.TTFT, p.TTFTP99, pl.timing.NormFloat64())
	}
	pl.firstAfter = ttft +
		time.Duration(pl.promptTokens)*p.PrefillPerToken +
		time.Duration((hidden+p.TokensPerChunk-1)/p.TokensPerChunk)*p.ITL

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
	return pl, nil
}

// think plans the thinking phase before pl's answer: Profile.ThinkingTokens
// scaled by the ask's quarters, capped by its budget and by the output
// limit; the text from a generator of its own (so the answer's text is the
// same with thinking and without), signed.
func (s *Server) think(pl *plan, th thinkingAsk, limit int, redacted bool, textKey uint64) {
	p := &pl.profile
	n := p.ThinkingTokens
	if th.quarters > 0 {
		n = max(1, n*th.quarters/4)
	}
	if th.budget > 0 {
		n = min(n, th.budget)
	}
	if limit > 0 {
		n = min(n, limit)
	}
	gen := newTextGen(p.Lang, rand.New(rand.NewPCG(textKey, 4)))
	pl.thinking = make([]token, n)
	var text strings.Builder
	for i := range n {
		pl.thinking[i] = *gen.token()
		text.WriteString(pl.thinking[i].text)
	}
	pl.thinkTokens, pl.thinkText = n, text.String()
	switch {
	case redacted && th.visible:
		pl.redacted = s.signer.redacted(pl.key)
	case th.omitted:
		pl.omitted, pl.signature = true, s.signer.sign("")
	default:
		pl.signature = s.signer.sign(pl.thinkText)
		if th.visible {
			pl.thinkChunks = (n + p.TokensPerChunk - 1) / p.TokensPerChunk
		}
	}
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

// streamState is one stream being written.
type streamState struct {
	sw    *sse.Writer
	stamp bool
}

// emit writes one event (name nil: no "event:" line), stamped right before
// the write when asked. With flush false the event waits in the response
// buffer for the next flushed one: events due at the same instant (OpenAI's
// role and first content, finish, usage and [DONE]; Anthropic's
// message_start, content_block_start, ping and first delta) leave in one
// write, as real servers send them.
func (st *streamState) emit(name, data []byte, flush bool) error {
	if st.stamp {
		if err := st.sw.Stamp(time.Now().UnixNano()); err != nil {
			return err
		}
	}
	if flush {
		return st.sw.Event(name, data)
	}
	return st.sw.Queue(name, data)
}

// done writes OpenAI's [DONE] sentinel and flushes everything pending.
func (st *streamState) done() error {
	if st.stamp {
		if err := st.sw.Stamp(time.Now().UnixNano()); err != nil {
			return err
		}
	}
	return st.sw.Done()
}

// maxBatch bounds the token slice a stream keeps for one chunk; larger
// chunks reuse it in several appends.
const maxBatch = 64

// stream writes pl as an SSE stream through enc. It returns when the
// stream ends or the client goes away; a cut fault panics with
// http.ErrAbortHandler so the server drops the connection without ending
// the response.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, pl *plan, enc encoder) {
	ctx := r.Context()
	s.m.inflight.Inc()
	defer s.m.inflight.Dec()
	cancelled := func() { s.m.cancelled.Inc() }

	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	st := &streamState{sw: sse.NewWriter(w), stamp: s.opts.Stamp}
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
	gen := &pl.text
	batch := p.TokensPerChunk
	if p.ChunkDist != nil {
		batch = max(batch, p.ChunkDist.Max())
	}
	toks := make([][]byte, 0, min(batch, maxBatch))
	// sent counts output tokens: thinking that is not streamed counts from
	// the start, as the provider reports it with the first content.
	var sent, chunks, answered, thought int
	if pl.thinkChunks == 0 {
		sent = pl.thinkTokens
	}
	defer func() {
		s.m.chunks.Add(float64(chunks))
		s.m.tokens.Add(float64(sent))
	}()

	if pl.stallFirst > 0 {
		s.m.faults.WithLabelValues(faultStallFirst).Inc()
	}
	deadline := time.Now().Add(pl.firstAfter + pl.stallFirst)
	// The opening events go out with the first content chunk unless a
	// fault comes between them.
	flushStart := pl.stallAt == 1 || pl.cutAt == 1
	if pc.wait(deadline) != nil || enc.start(st, flushStart) != nil {
		cancelled()
		return
	}
	for i := 1; i <= pl.chunks+1; i++ {
		if i > 1 && i <= pl.chunks {
			deadline = deadline.Add(pl.gap())
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
			if enc.fail(st, i) != nil {
				cancelled()
			}
			return
		case pl.malformedAt:
			s.m.faults.WithLabelValues(faultMalformed).Inc()
			if enc.malformed(st) != nil {
				cancelled()
				return
			}
		}
		if i > pl.chunks {
			break
		}
		var err error
		switch {
		case i <= pl.thinkChunks:
			toks = toks[:0]
			for k := 0; k < p.TokensPerChunk && thought < pl.thinkTokens; k++ {
				toks = append(toks, pl.thinking[thought].esc)
				thought++
				sent++
			}
			err = enc.thinking(st, toks, sent)
		case pl.tool != nil:
			n := min(p.TokensPerChunk, pl.tokens-answered)
			if i == pl.chunks {
				n = pl.tokens - answered
			}
			answered += n
			sent += n
			err = enc.toolArgs(st, i-1-pl.thinkChunks, sent)
		default:
			toks = toks[:0]
			for k, size := 0, pl.chunkSize(); k < size && answered < pl.tokens; k++ {
				toks = append(toks, gen.next())
				answered++
				sent++
			}
			err = enc.text(st, toks, sent)
		}
		if err != nil {
			cancelled()
			return
		}
		chunks++
	}
	if enc.finish(st, sent) != nil {
		cancelled()
		return
	}
	s.m.completed.Inc()
}

// complete answers a non-stream request after the time its stream would
// have taken.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, pl *plan, d dialect) {
	ctx := r.Context()
	if err := s.queue.acquire(ctx); err != nil {
		return
	}
	defer s.queue.release()
	total := pl.firstAfter + pl.stallFirst
	for i := 2; i <= pl.chunks; i++ {
		total += pl.gap()
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
		d.generationFailure(w)
		return
	}
	if pl.malformedAt != 0 {
		s.m.faults.WithLabelValues(faultMalformed).Inc()
		d.truncated(w, pl)
		return
	}
	var content string
	if pl.tool == nil {
		var text strings.Builder
		for range pl.tokens {
			text.WriteString(pl.text.token().text)
		}
		content = text.String()
	}
	s.m.tokens.Add(float64(pl.tokens + pl.thinkTokens))
	d.complete(w, pl, content)
}
