package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/streamgate/streamgate/internal/affinity"
	"github.com/streamgate/streamgate/internal/keypool"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/admit"
	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/quota"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/route"
	"github.com/streamgate/streamgate/internal/usage"
)

// call is one chat completion request on its way through the gateway; it
// ends as one usage entry, one metrics update and one access line.
type call struct {
	info  *reqInfo
	st    *state        // the config the request runs on, from admit
	model *config.Model // nil until the model is known
	// asked is the model name the request gave (a model's name or one of
	// its aliases): a translated answer names it, as the client asked.
	asked  string
	entry  usage.Entry
	stats  relay.Stats
	bill   bill
	status int   // status the client got (499: it went away)
	err    error // why it failed, nil when it did not
	// reshape turns a non-streaming answer (a chat completion) into the
	// client's dialect; nil leaves it as it is.
	reshape func([]byte) ([]byte, error)
	// passUsage reads the usage of a non-streaming answer in the client's
	// own dialect, from a route that passed the request through
	// (provider.Passes); nil for an OpenAI client.
	passUsage func([]byte) (*api.Usage, error)
	passed    bool        // the answer came passed through: it is not reshaped
	release   func()      // gives back the admission slot; nil when none was taken
	team      config.Team // the key's team, read by admitQuota; zero: none
	// decoding gives back the request's room in the decoding budget once
	// its first upstream body is built (provider.Request.Built), or at
	// finish; nil when it took none.
	decoding     func()
	decodingDone atomic.Bool
	// ticket holds the request's rate counts and estimated cost against
	// its key's limits until finish settles it; nil without limits.
	ticket *quota.Ticket
	tr     *reqTrace // the request's spans; nil: tracing off
	// smoothing is a stream's smoothing max delay (see smoothingOf); 0 is off.
	smoothing time.Duration
	// session is the request's session identity for its model's affinity
	// (Key 0: none, or affinity off).
	session affinity.Identity
	// prefer, when set, puts the routes it is true of first in the
	// request's route order (a request with built-in tools: the routes
	// that pass it through, builtin.go); dropped is the
	// X-Streamgate-Dropped-Tools of the latest attempt ("" none).
	prefer  func(*target) bool
	dropped string
}

// decoded gives back the call's room in the decoding budget, once.
func (c *call) decoded() {
	if c.decoding != nil && c.decodingDone.CompareAndSwap(false, true) {
		c.decoding()
	}
}

// newCall returns a call on the heap: kept out of the handler's frame, which
// lives as long as the stream.
//
//go:noinline
func newCall(info *reqInfo) *call {
	c := &call{info: info}
	c.entry = usage.Entry{RequestID: info.id, Time: info.start}
	return c
}

// chat serves POST /v1/chat/completions. The whole request path is here:
// authenticate → parse and validate → plan routes (admit) → open the
// upstream, falling back to the next route while nothing reached the client →
// commit headers → relay (stream, complete) → record usage (in finish,
// whatever happened).
//
// chat's goroutine lives as long as the stream, so its frames are kept small
// (the checks of admit run in a frame of their own): net/http writes the
// response headers deep below the relay loop, and with lean frames above it
// the goroutine's stack stays at 8 KiB instead of growing to 16 KiB.
func (g *Gateway) chat(w http.ResponseWriter, r *http.Request) {
	c := newCall(infoFrom(r.Context()))
	defer g.finish(c)
	req, routes := g.admit(w, r, c, g.parse, chatRoutes)
	if req == nil {
		return
	}
	if req.Stream {
		g.stream(w, r, c, routes, req)
	} else {
		g.complete(w, r, c, routes, req, complete)
	}
}

// embeddings serves POST /v1/embeddings: the chat path's authentication,
// fallback over the model's OpenAI-dialect routes, usage entry (input
// tokens, priced at the model's input price) and metrics, without a stream.
func (g *Gateway) embeddings(w http.ResponseWriter, r *http.Request) {
	c := newCall(infoFrom(r.Context()))
	defer g.finish(c)
	req, routes := g.admit(w, r, c, g.parseEmbeddings, embedRoutes)
	if req == nil {
		return
	}
	g.complete(w, r, c, routes, req, embed)
}

// complete and embed are the non-streaming calls of complete.
func complete(ctx context.Context, p provider.Provider, req *provider.Request) ([]byte, error) {
	return p.Complete(ctx, req)
}

func embed(ctx context.Context, p provider.Provider, req *provider.Request) ([]byte, error) {
	return p.(provider.Embedder).Embed(ctx, req)
}

// parseFunc reads and validates a request body; model is the model asked for.
type parseFunc func(w http.ResponseWriter, r *http.Request) (req *provider.Request, model string, err error)

// routeTable names a state's table of routes: the chat routes, or those
// that serve embeddings.
type routeTable bool

const (
	chatRoutes  routeTable = false
	embedRoutes routeTable = true
)

// admit authenticates, parses and validates the request and plans its
// routes (from table), on the config in force, which the request keeps to
// its end (c.st). On failure it answers the client and returns a nil
// request.
//
//go:noinline
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, c *call, parse parseFunc, table routeTable) (*provider.Request, *routeSet) {
	st := g.cur()
	c.st = st
	c.tr = st.tracing.start(r, c) // ended in finish
	if r.Method != http.MethodPost {
		g.reject(w, r, c, &methodError{allow: "POST"})
		return nil, nil
	}

	// Authenticate.
	principal, err := st.keys.Authenticate(r)
	if err != nil {
		g.reject(w, r, c, err)
		return nil, nil
	}
	c.entry.KeyID = principal.KeyID
	c.entry.Team = principal.Team

	// Parse and validate, within the decoding budget.
	release, err := g.decodeSlot(r)
	if err != nil {
		g.reject(w, r, c, err)
		return nil, nil
	}
	c.decoding = release // nil: a body that takes no room
	req, name, err := parse(w, r)
	if err != nil {
		g.reject(w, r, c, err)
		return nil, nil
	}
	c.asked, c.entry.Model, c.entry.Stream = name, name, req.Stream
	if release != nil {
		// The room is held until the first upstream body is built: a
		// translating adapter's structures cost more than the decoding.
		req.Built = c.decoded
	}
	// The model asked for, by its name or one of its aliases (an exact
	// alias, else the most specific glob): the ledger, the metrics, a
	// key's models and the routes see the configured model's name.
	model, ok := st.cfg.Resolve(name)
	if !ok {
		g.reject(w, r, c, unknownModel(name))
		return nil, nil
	}
	c.model, c.entry.Model = model, model.Name
	if !principal.Allowed(model.Name) {
		g.reject(w, r, c, fmt.Errorf("%w: key %q may not use model %q", errModelNotAllowed, principal.KeyID, model.Name))
		return nil, nil
	}

	// A stream's smoothing (the model's, or the request's header): a bad
	// header is refused here, before it counts against any limit.
	if req.Stream && !g.smoothingOf(w, r, c) {
		return nil, nil
	}

	// Context guard: a prompt and max_tokens that do not fit the model's
	// context_window are refused (or trimmed), a max_tokens above its
	// max_output_tokens is lowered.
	if model.ContextWindow > 0 || model.MaxOutputTokens > 0 {
		if err := fitRequest(req, model); err != nil {
			g.reject(w, r, c, err)
			return nil, nil
		}
	}

	// Rate limits and budget of the key: requests and tokens per minute,
	// the request's estimated cost reserved, in one step (shared by every
	// replica through Redis when configured); settled in finish.
	if needsQuota(principal) {
		if err := g.admitQuota(r, c, principal, model, req); err != nil {
			g.reject(w, r, c, err)
			return nil, nil
		}
	}

	// Admission: a slot of the gateway's and the key's concurrent requests
	// (limits), waited for up to limits.queue_wait; given back in finish.
	if g.limiter != nil {
		release, err := g.limiter.Acquire(r.Context(), principal.KeyID, principal.MaxStreams)
		if err != nil {
			var full *admit.Full
			if errors.As(err, &full) {
				g.m.Rejected(full.Scope)
			}
			g.reject(w, r, c, err)
			return nil, nil
		}
		c.release = release
	}
	if err := g.admitTeamSlot(r, c); err != nil { // the team's max_streams
		g.reject(w, r, c, err)
		return nil, nil
	}

	// The model's routes for this endpoint; run orders them per request.
	routes := st.routes[model.Name]
	if table == embedRoutes {
		routes = st.embedRoutes[model.Name]
	}
	if routes == nil {
		if st.routes[model.Name] != nil { // routes, but none serves this endpoint
			g.reject(w, r, c, invalid("model", "model %q has no route that serves %s (it needs an OpenAI-dialect provider)", model.Name, r.URL.Path))
			return nil, nil
		}
		g.reject(w, r, c, fmt.Errorf("%w for model %q", errNoRoute, model.Name))
		return nil, nil
	}
	req.RequestID, req.Header = c.info.id, simHeaders(r)
	if routes.aff != nil {
		c.session = sessionOf(r, req, routes.aff.mode)
		if c.session.Key != 0 && c.session.Source != affinity.PromptCacheKey {
			req.CacheKey = "sg-" + strconv.FormatUint(c.session.Key, 36)
		}
	}
	return req, routes
}

// fitRequest applies the model's context guard (package fit) to req: to
// its chat form, the change mirrored in its native form (a max_tokens
// lowered is lowered there too; a trimmed conversation leaves no native
// form, so that every route gets the trimmed one, translated); to its
// native form alone when it has no chat form (measured, max_tokens
// lowered, never trimmed: fit.Check).
//
//go:noinline
func fitRequest(req *provider.Request, m *config.Model) error {
	l := fit.Limits{Window: m.ContextWindow, MaxOutput: m.MaxOutputTokens, Policy: m.ContextPolicy}
	n := req.Native
	if req.Chat == nil {
		if n == nil {
			return nil
		}
		body, _, err := fit.Check(n.Body, l)
		if err != nil {
			return err
		}
		n.Body = body
		return nil
	}
	body, res, err := fit.Apply(req.Body, req.Chat, l)
	if err != nil {
		return err
	}
	req.Body = body
	switch {
	case n == nil:
	case res.Dropped > 0 && n.Err != nil:
		return n.Err // the trimmed request has only its chat form, which cannot serve it
	case res.Dropped > 0:
		req.Native = nil
	case res.Clamped:
		limit := "max_tokens"
		if n.Dialect == provider.DialectResponses {
			limit = "max_output_tokens"
		}
		nb, err := api.SetMembers(n.Body, map[string]json.RawMessage{limit: strconv.AppendInt(nil, int64(res.MaxTokens), 10)})
		if err != nil {
			return invalid("", "lower max_tokens: %v", err)
		}
		n.Body = nb
	}
	return nil
}

// untranslated is the error of an attempt on p of a request that has no
// chat form (provider.Native.Err) when p would have to translate it:
// nothing is sent, and the next route may serve it. Nil otherwise.
func untranslated(p provider.Provider, req *provider.Request) error {
	if n := req.Native; n != nil && n.Err != nil && !provider.Passes(p, req) {
		return n.Err
	}
	return nil
}

// stream relays a streaming answer. The route loop (run) makes attempts
// until one ends with "[DONE]"; after content reached the client only a
// continuation may follow (continue_on_cut), judged as a stream is.
func (g *Gateway) stream(w http.ResponseWriter, r *http.Request, c *call, rs *routeSet, req *provider.Request) {
	g.m.Inflight.Inc()
	defer g.m.Inflight.Dec()
	sess := g.newSession(w, c, req)
	defer sess.Close()
	ctx := r.Context()
	if total := c.st.cfg.Timeouts.Total.D(); total > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, total, provider.ErrTotalTimeout)
		defer cancel()
	}
	try := func(ctx context.Context, p *plan, t *target) error {
		return g.streamAttempt(ctx, p, t, sess, req)
	}
	goOn := func(err error) bool {
		if !sess.ContentSent() {
			return true
		}
		_, ok := sess.Prefix() // continue_on_cut, plain text so far, no finish
		if !ok {
			return false
		}
		var cerr *continueError
		return fallbackReason(err) != "" && !errors.As(err, &cerr)
	}
	err := g.run(ctx, c, rs, try, goOn, req)
	if c.entry.Continuations > 0 {
		outcome := metrics.ContinuationOK
		if err != nil {
			outcome = metrics.ContinuationFailed
		}
		g.m.Continuation(c.model.Name, outcome)
	}
	if err == nil {
		c.status = http.StatusOK
		return
	}
	g.streamFailed(sess, c, err)
}

// streamAttempt is one attempt of a stream on t: a plain one, a hedged
// race of t and the plan's next target, or the continuation of a stream
// whose content already reached the client. It lives as long as the
// stream, so its frame is lean: the attempt's state is on the heap, its
// preparation and accounting run in frames of their own.
func (g *Gateway) streamAttempt(ctx context.Context, p *plan, t *target, sess *relay.Session, req *provider.Request) error {
	a, err := g.prepareStream(p, t, sess, req)
	if a == nil {
		return err
	}
	err = sess.Attempt(ctx, t.obs, a.openFn)
	return g.streamDone(a, sess, req, err)
}

// streamTry is one stream attempt's state.
type streamTry struct {
	p      *plan
	t      *target
	preq   provider.Request
	opened bool
	cont   bool // a continuation
	chunks int  // content chunks sent before it
	begin  time.Time
	openFn func(context.Context) (provider.Stream, error)
	// A hedged first token: the race, its backup target, the backup's
	// request and its position in the plan.
	race   relay.Race
	backup *target
	bq     provider.Request
	bpos   int
	// The backup's provider key (a pool's) and its target with the key's
	// adapter; zero when its provider has one key.
	blease keypool.Lease
	bt     target
	// bslot is the backup's target in the model's affinity load set while
	// it counts there (from its start until it loses, fails or its stream
	// ends), −1 when none.
	bslot atomic.Int32
}

func (a *streamTry) open(ctx context.Context) (provider.Stream, error) {
	if err := untranslated(a.t.provider, &a.preq); err != nil {
		return nil, err
	}
	st, err := a.t.provider.Open(ctx, &a.preq)
	a.opened = err == nil
	return st, err
}

// openBackup starts the hedge, unless the budget is spent or the backup's
// circuit is open.
func (a *streamTry) openBackup(ctx context.Context) (provider.Stream, error) {
	h := a.p.rs.hedge
	if untranslated(a.backup.provider, &a.bq) != nil {
		return nil, relay.ErrNoHedge
	}
	sec, ok := h.allow(time.Now())
	if !ok {
		return nil, relay.ErrNoHedge
	}
	b := a.backup
	if k := b.keys; k != nil {
		l, err := k.pool.Acquire(ctx)
		if err != nil {
			h.undo(sec)
			return nil, relay.ErrNoHedge
		}
		a.blease, a.bt = l, *b
		a.bt.provider = k.provs[l.Index()]
		b = &a.bt
	}
	if !b.rt.Begin() {
		h.undo(sec)
		a.blease.Release(0)
		a.blease = keypool.Lease{}
		return nil, relay.ErrNoHedge
	}
	if aff := a.p.rs.aff; aff != nil {
		// The backup loads its target as any attempt does, so placements
		// meanwhile see it (it ends in backupEnded).
		key := -1
		if b.keys != nil {
			key = a.blease.Index()
		}
		slot := aff.slot(a.p.rs.index(b.rt), key)
		aff.set.Begin(slot)
		a.bslot.Store(int32(slot))
	}
	a.p.c.tr.hedge(b, a.p.c.entry.Attempts+1, &a.bq)
	st, err := b.provider.Open(ctx, &a.bq)
	if err != nil {
		a.backupEnded()
	}
	return st, err
}

// backupEnded takes the backup out of the affinity load set, once: when it
// failed to open, lost the race (relay.Race.Lost) or its stream ended.
func (a *streamTry) backupEnded() {
	if slot := a.bslot.Swap(-1); slot >= 0 {
		a.p.rs.aff.set.End(int(slot))
	}
}

// lost is the race's relay.Race.Lost: a backup that lost ends its load at
// once, not when the winner's stream ends.
func (a *streamTry) lost(i int) {
	if i == 1 {
		a.backupEnded()
	}
}

// prepareStream builds the attempt: its request (a continuation's with
// the text so far), its hedge, the counters and headers. A nil attempt
// means it ended here: err is its outcome.
//
//go:noinline
func (g *Gateway) prepareStream(p *plan, t *target, sess *relay.Session, req *provider.Request) (*streamTry, error) {
	c := p.c
	a := &streamTry{p: p, t: t, preq: *req, cont: sess.ContentSent(), chunks: c.stats.ContentChunks}
	a.bslot.Store(-1)
	a.preq.Model = t.model
	if a.cont {
		prefix, _ := sess.Prefix()
		sess.SetUsageBase(api.Usage{PromptTokens: c.bill.in, CompletionTokens: c.bill.out,
			PromptTokensDetails: api.PromptTokensDetails{CachedTokens: c.bill.cacheRead, CacheWriteTokens: c.bill.cacheWrite}})
		ws, err := continueRequest(&a.preq, prefix, t.cont, c.stats.ContentChunks)
		if errors.Is(err, errLimitReached) {
			// The cut came after the last token the client allowed: the
			// answer is whole, it only lacked its finish.
			p.res = route.Result{Outcome: route.Neutral}
			return nil, sess.Finish("length")
		}
		if err != nil {
			return nil, err
		}
		sess.Skip(ws)
		c.entry.Continuations++
	}
	c.entry.Attempts++
	c.entry.Route = t.name
	sess.SetHeader(HeaderRoute, t.name)
	if len(req.Builtins) > 0 {
		if d := g.droppedTools(context.Background(), c, t, &a.preq); d != "" || c.dropped != "" {
			sess.SetHeader(HeaderDroppedTools, d)
			c.dropped = d
		}
	}
	if c.entry.Attempts == 1 {
		t.obs.RequestOverhead(time.Since(c.info.start))
	}
	a.openFn = a.open
	if !a.cont && p.rs.hedge != nil {
		if after, ok := p.rs.hedge.delay(t.rt); ok {
			if a.backup, a.bpos = p.peek(); a.backup != nil {
				a.bq = *req
				a.bq.Model = a.backup.model
				if c.entry.Attempts == 1 {
					// The client has waited since its request arrived: the
					// backup starts after from then, not from the race's
					// start, which auth, admission and the key lease delay.
					after = max(after-time.Since(c.info.start), time.Nanosecond)
				}
				a.race.Lost = a.lost
				race := relay.Hedge(after, a.open, a.openBackup, &a.race)
				a.openFn = func(ctx context.Context) (provider.Stream, error) {
					st, err := race(ctx)
					if a.race.Winner == 1 {
						sess.Observe(a.backup.obs) // the winner's latency, under its route
					}
					return st, err
				}
			}
		}
	}
	sess.SetHeader(HeaderAttempts, strconv.Itoa(c.entry.Attempts))
	c.tr.attempt(c, t, c.entry.Attempts, attemptKind(c.entry.Attempts, a.cont, p.retry), &a.preq)
	a.begin = time.Now()
	return a, nil
}

// streamDone accounts for an attempt that ran: its bill, its target's
// health and latency, the stream's metrics.
//
//go:noinline
func (g *Gateway) streamDone(a *streamTry, sess *relay.Session, req *provider.Request, err error) error {
	p, t, c := a.p, a.t, a.p.c
	c.stats = sess.Stats()
	if a.backup != nil {
		// The race is decided; its loser's goroutine may still be ending, and
		// a backup refused after the decision was no hedge (relay.Race.Wait).
		a.race.Wait()
		a.backupEnded() // the winner's stream ended, or the loser's goroutine did
	}
	if a.race.Hedged {
		backup := a.backup
		if a.blease != (keypool.Lease{}) {
			backup = &a.bt
			if a.race.Winner == 1 {
				c.entry.ProviderKey = a.blease.Name()
			}
		}
		err = g.hedged(p, sess, t, backup, a.bpos, &a.race, req, err, a.chunks)
		if a.blease != (keypool.Lease{}) {
			var res route.Result
			keyOutcome(backup, a.blease, a.race.Err[1], &res)
			a.blease.Release(0) // its tokens count on the request's own key
		}
		return err
	}
	a.blease.Release(0) // a backup that was no hedge, if any
	c.bill.attempt(req, a.opened, err, streamed(&c.stats))
	p.res = route.Result{Outcome: outcomeFor(err)}
	if c.stats.ContentChunks > a.chunks {
		if !a.cont {
			p.res.TTFT = c.stats.FirstContent.Sub(a.begin)
		}
		t.obs.End(c.stats.MaxGap, tokensPerSecond(&c.stats))
	}
	c.tr.streamEnd(c, err, a)
	return err
}

// hedged accounts for an attempt that raced two targets: both are billed
// and counted, the winner is named (route, X-Streamgate-Route), and each
// target's health hears its own outcome (the cancelled loser's is neutral).
func (g *Gateway) hedged(p *plan, sess *relay.Session, t, backup *target, bpos int, race *relay.Race, req *provider.Request, err error, chunks int) error {
	c := p.c
	p.used |= 1 << bpos
	c.entry.Attempts++
	c.entry.Hedged = true
	win := t
	if race.Winner == 1 {
		win = backup
	}
	c.entry.Route = win.name
	sess.SetHeader(HeaderRoute, win.name)
	sess.SetHeader(HeaderAttempts, strconv.Itoa(c.entry.Attempts))
	l := 1 - race.Winner
	c.bill.attempt(req, race.Opened[race.Winner], err, streamed(&c.stats))
	c.tr.winnerBilled(c)
	c.bill.attempt(req, race.Opened[l], race.Err[l], counted{})
	wres := route.Result{Outcome: outcomeFor(err)}
	if c.stats.ContentChunks > chunks {
		wres.TTFT = c.stats.FirstContent.Sub(race.Start[race.Winner])
		win.obs.End(c.stats.MaxGap, tokensPerSecond(&c.stats))
	}
	lres := route.Result{Outcome: outcomeFor(race.Err[l])}
	outcome := metrics.HedgeNone
	switch {
	case err == nil && race.Winner == 1:
		outcome = metrics.HedgeWon
	case err == nil:
		outcome = metrics.HedgeLost
	}
	g.m.Hedge(c.model.Name, outcome)
	// The loop ends t's attempt with p.res; the backup's is ended here.
	if race.Winner == 1 {
		p.res = lres
		backup.rt.End(wres)
	} else {
		p.res = wres
		backup.rt.End(lres)
	}
	c.tr.hedgedEnd(c, race, err, chunks)
	return err
}

// newSession starts the stream's relay session. Out of line: its options
// stay out of the stream's frame.
//
//go:noinline
func (g *Gateway) newSession(w http.ResponseWriter, c *call, req *provider.Request) *relay.Session {
	to := c.st.cfg.Timeouts
	var body http.ResponseWriter
	if sw, ok := w.(*statusWriter); ok {
		body = sw.ResponseWriter // the status is recorded at the commit, through w
	}
	var prompt func() int
	if _, ok := c.info.enc.(relay.Prompter); ok {
		// An Anthropic client reads the prompt's tokens in message_start:
		// the upstream's by then, else this estimate (the ledger's).
		prompt = func() int { return c.bill.promptTokens(req) }
	}
	if c.release != nil {
		// Given back before the end is written (BeforeEnd), and in finish
		// when the stream did not end whole: once either way.
		c.release = sync.OnceFunc(c.release)
	}
	return relay.NewSession(w, relay.Options{
		BeforeEnd:    c.release,
		Prompt:       prompt,
		Body:         body,
		FirstToken:   to.FirstToken.D(),
		Idle:         to.Idle.D(),
		ClientWrite:  to.ClientWrite.D(),
		KeepAlive:    g.keepAlive,
		IncludeUsage: req.Native != nil || req.Chat.IncludeUsage(), // an Anthropic client's stream ends with its usage
		Start:        c.info.start,
		LateHeaders:  lateHeaders,
		Encoder:      c.info.enc,
		Continuable:  c.model.ContinueOnCut,
		Smoothing:    c.smoothing,
	})
}

// streamFailed ends a stream that failed: an HTTP error before the commit
// point, one SSE error event after it (the upstream's own error event when
// that is what ended it). Out of line, like admit.
//
//go:noinline
func (g *Gateway) streamFailed(sess *relay.Session, c *call, err error) {
	h := statusOf(err)
	h.setRetryHeaders(func(k, v string) { sess.SetHeader(k, v) })
	body := errorJSON(h.body)
	var uerr *relay.UpstreamError
	if errors.As(err, &uerr) && sess.ContentSent() {
		body = uerr.Body // held back for a continuation that did not come
	}
	c.status = sess.Fail(h.status, body)
	if h.status == StatusClientClosed {
		c.status = StatusClientClosed
	}
	c.err = err
}

// fallback counts and logs (INFO) an attempt given up for the next route.
// Out of line: its attributes stay out of the stream's frame.
//
//go:noinline
func (g *Gateway) fallback(ctx context.Context, c *call, route, reason string, err error) {
	g.m.Fallback(c.model.Name, reason)
	g.log.LogAttrs(ctx, slog.LevelInfo, "fallback", slog.String("request_id", c.info.id), slog.String("route", route), slog.String("reason", reason), slog.String("error", err.Error()))
}

// lateHeaders are known for sure only once a route serves: after a
// keep-alive committed the headers they travel as trailers.
var lateHeaders = []string{HeaderRoute, HeaderAttempts}

// complete proxies a non-streaming answer, of send on each route in turn
// (a chat completion, embeddings). A non-stream upstream sends
// nothing before the whole answer, which may take minutes, so the stream
// timeouts do not apply: each attempt is bounded by timeouts.non_stream (and
// timeouts.total when shorter). That limit ends the request with 504 instead
// of trying the next route, which would send (and bill) the request twice.
func (g *Gateway) complete(w http.ResponseWriter, r *http.Request, c *call, rs *routeSet, req *provider.Request,
	send func(context.Context, provider.Provider, *provider.Request) ([]byte, error)) {
	limit, cause := c.st.cfg.Timeouts.NonStream.D(), provider.ErrResponseTimeout
	if total := c.st.cfg.Timeouts.Total.D(); total > 0 && (limit <= 0 || total < limit) {
		limit, cause = total, provider.ErrTotalTimeout
	}
	var body []byte
	try := func(ctx context.Context, p *plan, t *target) error {
		c.entry.Attempts++
		c.entry.Route = t.name
		if c.entry.Attempts == 1 {
			t.obs.RequestOverhead(time.Since(c.info.start))
		}
		preq := *req
		preq.Model = t.model
		c.tr.attempt(c, t, c.entry.Attempts, attemptKind(c.entry.Attempts, false, p.retry), &preq)
		actx, cancel := ctx, context.CancelFunc(func() {})
		if limit > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, limit, cause)
		}
		begin := time.Now()
		err := untranslated(t.provider, &preq)
		c.passed = c.passUsage != nil && provider.Passes(t.provider, &preq)
		if err == nil && len(preq.Builtins) > 0 {
			c.dropped = g.droppedTools(ctx, c, t, &preq)
		}
		if err == nil {
			body, err = send(actx, t.provider, &preq)
		}
		cancel()
		if err == nil {
			c.tr.answer(body)
			var aerr error
			if c.passed {
				aerr = c.bill.passed(req, body, c.passUsage)
			} else {
				aerr = c.bill.answer(req, body)
			}
			if aerr != nil { // it answered: it bills
				err = fmt.Errorf("%w: the upstream's answer is not JSON: %v", provider.ErrMalformed, aerr)
				p.res = route.Result{Outcome: route.Failure}
				c.tr.attemptEnd(c, err)
				return err
			}
		}
		p.res = route.Result{Outcome: outcomeFor(err)}
		if err != nil {
			c.bill.attempt(req, false, err, counted{})
			c.tr.attemptEnd(c, err)
			return err
		}
		p.res.TTFT = time.Since(begin)
		c.tr.attemptEnd(c, nil)
		return nil
	}
	goOn := func(error) bool { return r.Context().Err() == nil }
	err := g.run(r.Context(), c, rs, try, goOn, req)
	if err != nil && r.Context().Err() != nil {
		err = context.Cause(r.Context())
	}
	if err != nil {
		h := statusOf(err)
		g.writeError(w, r, err)
		c.status, c.err = h.status, err
		return
	}
	if c.reshape != nil && !c.passed {
		var rerr error
		if body, rerr = c.reshape(body); rerr != nil {
			err = fmt.Errorf("%w: %w", provider.ErrMalformed, rerr)
			g.writeError(w, r, err)
			c.status, c.err = statusOf(err).status, err
			return
		}
	}
	h := w.Header()
	h.Set(HeaderRoute, c.entry.Route)
	h.Set(HeaderAttempts, strconv.Itoa(c.entry.Attempts))
	if c.dropped != "" {
		h.Set(HeaderDroppedTools, c.dropped)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if _, werr := w.Write(body); werr != nil {
		c.status, c.err = StatusClientClosed, fmt.Errorf("%w: %w", relay.ErrClientGone, werr)
		return
	}
	c.status = http.StatusOK
}

// parse reads and validates the body: JSON, "model" and "messages" present.
// The returned request keeps the body's fields raw for the adapters.
func (g *Gateway) parse(w http.ResponseWriter, r *http.Request) (*provider.Request, string, error) {
	body, err := g.readBody(w, r)
	if err != nil {
		return nil, "", err
	}
	if err := oneReading(body, chatFields); err != nil {
		return nil, "", err
	}
	// One decode: the typed view validates the JSON and the types of the
	// fields the gateway reads; the body itself goes upstream as received.
	chat := &api.ChatRequest{}
	if err := chat.Presize(body); err != nil {
		return nil, "", decodeError(err)
	}
	if err := decodeObject(body, chat); err != nil {
		return nil, "", err
	}
	if chat.Model == "" {
		return nil, "", invalid("model", "missing required field: model")
	}
	if len(chat.Messages) == 0 {
		return nil, "", invalid("messages", "missing required field: messages (a non-empty array)")
	}
	return &provider.Request{Stream: chat.Stream, Body: body, Chat: chat}, chat.Model, nil
}

// parseEmbeddings reads and validates an embeddings body: JSON, "model"
// and "input" present. The rest is the upstream's to judge.
func (g *Gateway) parseEmbeddings(w http.ResponseWriter, r *http.Request) (*provider.Request, string, error) {
	body, err := g.readBody(w, r)
	if err != nil {
		return nil, "", err
	}
	if err := oneReading(body, embeddingsFields); err != nil {
		return nil, "", err
	}
	var e struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := decodeObject(body, &e); err != nil {
		return nil, "", err
	}
	if e.Model == "" {
		return nil, "", invalid("model", "missing required field: model")
	}
	switch string(e.Input) {
	case "", "null", `""`, "[]":
		return nil, "", invalid("input", "missing required field: input (a string or an array of strings or token ids)")
	}
	return &provider.Request{Body: body}, e.Model, nil
}

// decodeObject decodes a JSON object body into v.
func decodeObject(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return decodeError(err)
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		// Only a JSON null decodes into a struct without error.
		return invalid("", "invalid JSON body: want an object, got null")
	}
	return nil
}

// decodeError turns a json.Unmarshal error into the client's error: the
// field and the JSON it must be, in JSON's words, never Go's type names.
func decodeError(err error) error {
	var many *api.TooManyError
	if errors.As(err, &many) {
		return invalid(many.Field, "%v", many)
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return invalid("", "invalid JSON body at byte %d: %v", se.Offset, err)
		}
		return invalid("", "invalid JSON body: %v", err)
	}
	got := jsonValueName(te.Value)
	if te.Field == "" {
		return invalid("", "invalid JSON body: want an object, got %s", got)
	}
	want := jsonTypeName(te.Type)
	if f, ok := arrayFields[te.Field]; ok {
		want = f // te.Type is the array's, or its element's for a bad element
	}
	return invalid(te.Field, "invalid field %s: must be %s, got %s", te.Field, want, got)
}

// arrayFields names what the elements of the request's arrays of objects are.
var arrayFields = map[string]string{
	"messages": "an array of message objects ({\"role\": ..., \"content\": ...})",
}

// jsonTypeName says in JSON's words what a value decoding into t must be.
func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another JSON type"
}

// jsonValueName turns UnmarshalTypeError.Value ("string", "number 1.5",
// "bool", "array", "object") into words.
func jsonValueName(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "string":
		return "a string"
	case "number":
		if n, ok := strings.CutPrefix(v, "number "); ok {
			return "a number (" + n + ")"
		}
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return v
}

// simHeaders are the client headers an upstream gets besides the request
// id: the simulator's per-request X-Sim-* controls (ignored by real
// providers); nil when there are none.
func simHeaders(r *http.Request) http.Header {
	var h http.Header
	for k, v := range r.Header {
		if strings.HasPrefix(k, "X-Sim-") {
			if h == nil {
				h = http.Header{}
			}
			h[k] = v
		}
	}
	return h
}

// reject answers a request refused before any upstream call.
func (g *Gateway) reject(w http.ResponseWriter, r *http.Request, c *call, err error) {
	g.writeError(w, r, err)
	c.status, c.err = statusOf(err).status, err
}

// finish records the request: one usage entry, the metrics, the access line's fields.
func (g *Gateway) finish(c *call) {
	if c.release != nil {
		c.release()
	}
	c.decoded()
	in, out, source := c.bill.in, c.bill.out, c.bill.source()
	cost := 0.0
	label := "" // only configured model names become label values
	if c.model != nil {
		cost = c.model.Price.Cost(c.bill.tokens())
		label = c.model.Name
	}
	e := &c.entry
	e.Status = c.status
	e.Outcome = outcomeOf(c.err, c.status)
	e.InputTokens, e.OutputTokens, e.TokenSource = in, out, source
	e.CacheReadTokens, e.CacheWriteTokens = c.bill.cacheRead, c.bill.cacheWrite
	e.CostUSD = cost
	e.TTFT = c.stats.TTFT
	e.Duration = time.Since(c.info.start)
	if c.err != nil {
		e.Error = c.err.Error()
	}
	g.m.Request(label, e.Route, c.status, requestOutcome(c.err, c.status))
	if label != "" {
		g.m.Usage(label, in, out, c.bill.cacheRead, c.bill.cacheWrite, cost)
		g.m.CacheSaved(label, c.model.Price.CacheSavings(int64(c.bill.cacheRead), int64(c.bill.cacheWrite)))
	}
	c.ticket.Settle(cost, in+out) // queued: never waits on Redis
	g.rec.Record(*e)
	i := c.info
	i.keyID, i.model, i.route, i.attempts, i.stream = e.KeyID, e.Model, e.Route, e.Attempts, e.Stream
	i.hedged, i.continuations = e.Hedged, e.Continuations
	i.status, i.ttft, i.in, i.out, i.err, i.outcome = c.status, e.TTFT, in, out, e.Error, e.Outcome
	c.tr.finish(c)
}

// tokensPerSecond is output tokens over the span from first to last content chunk.
func tokensPerSecond(s *relay.Stats) float64 {
	out := s.Output
	if s.OutputReported {
		out = s.Usage.CompletionTokens
	}
	span := s.LastContent.Sub(s.FirstContent).Seconds()
	if out < 2 || span <= 0 {
		return 0
	}
	return float64(out) / span
}
