package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/usage"
)

// Span attributes of the gateway's own, beside the GenAI semantic
// conventions (semconv v1.41.0, the last of the otel module's versions that
// carries the gen_ai.* keys).
const (
	attrRequestID     = attribute.Key("streamgate.request_id")
	attrKey           = attribute.Key("streamgate.key") // the key's name, never its secret
	attrRoute         = attribute.Key("streamgate.route")
	attrProvider      = attribute.Key("streamgate.provider") // the provider's name in the config
	attrAttempts      = attribute.Key("streamgate.attempts")
	attrAttempt       = attribute.Key("streamgate.attempt")      // 1-based, as X-Streamgate-Attempts counts
	attrAttemptKind   = attribute.Key("streamgate.attempt.kind") // first, fallback, retry, hedge, continuation
	attrHedged        = attribute.Key("streamgate.hedged")
	attrHedgeWon      = attribute.Key("streamgate.hedge.won")
	attrContinuations = attribute.Key("streamgate.continuations")
	attrOutcome       = attribute.Key("streamgate.outcome") // the usage entry's
	attrTokenSource   = attribute.Key("streamgate.token_source")
	attrCost          = attribute.Key("streamgate.cost_usd")
)

// EventFirstToken is the span event at the first content chunk sent to
// the client: on the request span and on the attempt that produced it.
const EventFirstToken = "gen_ai.first_token"

// Attempt kinds (streamgate.attempt.kind).
const (
	kindFirst        = "first"
	kindFallback     = "fallback"
	kindRetry        = "retry"
	kindHedge        = "hedge"
	kindContinuation = "continuation"
)

// tracing makes the spans of the chat, messages and embeddings requests: one
// server span per request, one client span per upstream attempt under it.
// A nil *tracing (Options.Tracer nil) makes none, and its methods return
// at once: the request path then builds no attribute.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TraceContext // W3C traceparent, from the client and to the upstreams
	routes map[string]routeAttrs    // by route name ("provider/model")
}

// routeAttrs are the provider attributes of a route's spans.
type routeAttrs struct {
	span  string             // the attempt span's name
	name  attribute.KeyValue // streamgate.provider
	genai attribute.KeyValue // gen_ai.provider.name
}

func newTracing(tr trace.Tracer, cfg *config.Config) *tracing {
	if tr == nil {
		return nil
	}
	kinds := map[string]string{}
	for _, p := range cfg.Providers {
		kinds[p.Name] = p.Kind
	}
	t := &tracing{tracer: tr, routes: map[string]routeAttrs{}}
	for _, m := range cfg.Models {
		for _, r := range m.Routes {
			name := r.Provider + "/" + r.Model
			t.routes[name] = routeAttrs{"attempt " + name, attrProvider.String(r.Provider), genaiProvider(kinds[r.Provider])}
		}
	}
	return t
}

// genaiProvider is the gen_ai.provider.name of a provider kind: the API it
// speaks (an OpenAI-compatible server is "openai"; streamgate.provider
// names the configured one).
func genaiProvider(kind string) attribute.KeyValue {
	switch kind {
	case "openai":
		return semconv.GenAIProviderNameOpenAI
	case "anthropic":
		return semconv.GenAIProviderNameAnthropic
	case "gemini":
		return semconv.GenAIProviderNameGCPGemini
	case "sim":
		return semconv.GenAIProviderNameKey.String("streamgate.sim")
	}
	return semconv.GenAIProviderNameKey.String("_OTHER") // a provider given in Options, not in the config
}

// reqTrace is one request's spans. Its methods are called from the
// request's goroutine only, except hedge (see there); a nil *reqTrace
// (tracing off) does nothing.
type reqTrace struct {
	t    *tracing
	ctx  context.Context // holds the request span: the attempts' parent
	span trace.Span
	op   attribute.KeyValue // gen_ai.operation.name
	// The current attempt: its span, its start and the bill before it; a
	// hedge's backup span and target, and what its winner was billed.
	cur, backup trace.Span
	backupT     *target
	begun       time.Time
	in0, out0   int
	win         [2]int
	// served is the target of the latest attempt (the hedge's winner), for
	// the request span's response model and provider.
	served *target
	// A non-stream answer's id, model and finish reasons.
	respID, respModel string
	reasons           []string
}

// start begins r's request span at the request's arrival, as a child of the
// client's traceparent when it sent one. Its name gets the model in finish.
func (t *tracing) start(r *http.Request, c *call) *reqTrace {
	if t == nil {
		return nil
	}
	op := semconv.GenAIOperationNameChat
	if r.URL.Path == "/v1/embeddings" {
		op = semconv.GenAIOperationNameEmbeddings
	}
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, op.Value.AsString(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(c.info.start), trace.WithAttributes(op, attrRequestID.String(c.info.id)))
	if sc := span.SpanContext(); sc.IsValid() {
		c.info.trace = sc.TraceID()
	}
	return &reqTrace{t: t, ctx: ctx, span: span, op: op}
}

// attemptKind is the streamgate.attempt.kind of attempt n (1-based): a
// continuation of a cut stream, the request's first, a retry (a second
// pass over the routes) or a fallback to the next route.
func attemptKind(n int, cont, retry bool) string {
	switch {
	case cont:
		return kindContinuation
	case n == 1:
		return kindFirst
	case retry:
		return kindRetry
	}
	return kindFallback
}

// attempt begins the span of attempt n on t, of kind, with the bill so far
// in c, and puts its traceparent in req's headers for the upstream (a
// copy: the client's headers are shared by every attempt).
func (rt *reqTrace) attempt(c *call, t *target, n int, kind string, req *provider.Request) {
	if rt == nil {
		return
	}
	rt.served, rt.begun, rt.in0, rt.out0 = t, time.Now(), c.bill.in, c.bill.out
	rt.cur, rt.backup, rt.backupT = rt.begin(t, n, kind, req), nil, nil
}

// hedge begins the span of a hedge's backup attempt n on t. It runs on the
// race's goroutine, and reads only what start set; the request's goroutine
// reads what it writes after relay.Race.Wait.
func (rt *reqTrace) hedge(t *target, n int, req *provider.Request) {
	if rt == nil {
		return
	}
	rt.backup, rt.backupT = rt.begin(t, n, kindHedge, req), t
}

func (rt *reqTrace) begin(t *target, n int, kind string, req *provider.Request) trace.Span {
	ra := rt.t.routes[t.name]
	_, span := rt.t.tracer.Start(rt.ctx, ra.span, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(rt.op, ra.genai, ra.name, semconv.GenAIRequestModel(t.model),
			attrRoute.String(t.name), attrAttempt.Int(n), attrAttemptKind.String(kind))
	}
	h := make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		h[k] = v
	}
	rt.t.prop.Inject(trace.ContextWithSpan(rt.ctx, span), propagation.HeaderCarrier(h))
	req.Header = h
	return span
}

// attemptEnd ends the current attempt's span: err is how it ended; its
// tokens are what c's bill grew by since it began.
func (rt *reqTrace) attemptEnd(c *call, err error) {
	if rt == nil {
		return
	}
	rt.endSpan(rt.cur, attemptEnd{err: err, in: c.bill.in - rt.in0, out: c.bill.out - rt.out0})
}

// streamEnd is attemptEnd for a stream's attempt a: with the first token's
// time when a sent it (a continuation's first token is not the answer's).
func (rt *reqTrace) streamEnd(c *call, err error, a *streamTry) {
	if rt == nil {
		return
	}
	e := attemptEnd{err: err, in: c.bill.in - rt.in0, out: c.bill.out - rt.out0, begin: rt.begun}
	if c.stats.ContentChunks > a.chunks && !a.cont {
		e.first = c.stats.FirstContent
	}
	rt.endSpan(rt.cur, e)
}

// winnerBilled notes what a hedge race's winner was billed: call it after
// its bill.attempt, before the loser's.
func (rt *reqTrace) winnerBilled(c *call) {
	if rt == nil {
		return
	}
	rt.win = [2]int{c.bill.in - rt.in0, c.bill.out - rt.out0}
}

// hedgedEnd ends the spans of both attempts of a hedge race: the winner's
// with the stream's end (err) and its first token; the loser's with its own
// error, at the moment the race was decided (the winner's first token),
// when it was cancelled or had failed already.
func (rt *reqTrace) hedgedEnd(c *call, race *relay.Race, err error, chunks int) {
	if rt == nil {
		return
	}
	if race.Winner == 1 && rt.backupT != nil {
		rt.served = rt.backupT
	}
	spans := [2]trace.Span{rt.cur, rt.backup}
	w, l := race.Winner, 1-race.Winner
	won, lost := true, false
	we := attemptEnd{err: err, in: rt.win[0], out: rt.win[1], begin: race.Start[w], won: &won}
	if c.stats.ContentChunks > chunks {
		we.first = c.stats.FirstContent
	}
	le := attemptEnd{err: race.Err[l], in: c.bill.in - rt.in0 - rt.win[0], out: c.bill.out - rt.out0 - rt.win[1],
		won: &lost, at: c.stats.FirstContent}
	rt.endSpan(spans[l], le)
	rt.endSpan(spans[w], we)
}

// attemptEnd is how an attempt ended, for its span.
type attemptEnd struct {
	err     error
	in, out int       // tokens billed for it (reported, else estimated); 0 and 0: none
	first   time.Time // its first content chunk reached the client; zero: none did
	begin   time.Time // when it was sent, for the time to first chunk
	won     *bool     // a hedge race: whether it won
	at      time.Time // when it ended; zero: now
}

// endSpan ends an attempt's span; nil does nothing.
func (rt *reqTrace) endSpan(span trace.Span, e attemptEnd) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		if e.in+e.out > 0 {
			span.SetAttributes(semconv.GenAIUsageInputTokens(e.in), semconv.GenAIUsageOutputTokens(e.out))
		}
		if !e.first.IsZero() {
			span.SetAttributes(semconv.GenAIResponseTimeToFirstChunk(e.first.Sub(e.begin).Seconds()))
			span.AddEvent(EventFirstToken, trace.WithTimestamp(e.first))
		}
		if e.won != nil {
			span.SetAttributes(attrHedgeWon.Bool(*e.won))
		}
		if e.err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(attemptErrorType(e.err)))
			span.SetStatus(codes.Error, e.err.Error())
		}
	}
	if e.at.IsZero() {
		span.End()
		return
	}
	span.End(trace.WithTimestamp(e.at))
}

// attemptErrorType is the error.type of an attempt: the fallback reason
// when it had one, else what ended it.
func attemptErrorType(err error) string {
	if r := fallbackReason(err); r != "" {
		return r
	}
	var perr *provider.Error
	switch {
	case errors.Is(err, relay.ErrHedgeLost):
		return "hedge_lost"
	case errors.Is(err, context.Canceled), errors.Is(err, relay.ErrClientGone):
		return "client_gone"
	case errors.Is(err, provider.ErrTotalTimeout):
		return "total_timeout"
	case errors.Is(err, provider.ErrResponseTimeout):
		return "response_timeout"
	case errors.Is(err, errShutdown):
		return "shutdown"
	case errors.As(err, &perr):
		return "upstream_error"
	}
	return "error"
}

// answer notes a non-stream answer's id, model and finish reasons (the
// upstream's body, before any reshaping).
func (rt *reqTrace) answer(body []byte) {
	if rt == nil || !rt.span.IsRecording() {
		return
	}
	var a struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &a) != nil {
		return
	}
	rt.respID, rt.respModel, rt.reasons = a.ID, a.Model, rt.reasons[:0]
	for _, ch := range a.Choices {
		if ch.FinishReason != nil {
			rt.reasons = append(rt.reasons, *ch.FinishReason)
		}
	}
}

// finish ends the request span with what the usage entry says: the model
// asked for and the one that answered, the tokens and cost billed, the
// route, attempts and outcome, and the first token's time.
func (rt *reqTrace) finish(c *call) {
	if rt == nil {
		return
	}
	span, e := rt.span, &c.entry
	if !span.IsRecording() {
		span.End()
		return
	}
	a := make([]attribute.KeyValue, 0, 24) // one SetAttributes: one copy into the span
	if e.Model != "" {
		span.SetName(rt.op.Value.AsString() + " " + e.Model)
		a = append(a, semconv.GenAIRequestModel(e.Model), semconv.GenAIRequestStream(e.Stream))
	}
	if e.KeyID != "" {
		a = append(a, attrKey.String(e.KeyID))
	}
	if t := rt.served; t != nil {
		model := t.model
		if rt.respModel != "" {
			model = rt.respModel
		}
		ra := rt.t.routes[t.name]
		a = append(a, ra.genai, ra.name, semconv.GenAIResponseModel(model), attrRoute.String(e.Route), attrAttempts.Int(e.Attempts))
	}
	if e.Hedged {
		a = append(a, attrHedged.Bool(true))
	}
	if e.Continuations > 0 {
		a = append(a, attrContinuations.Int(e.Continuations))
	}
	if e.TokenSource != usage.SourceNone {
		a = append(a, semconv.GenAIUsageInputTokens(e.InputTokens), semconv.GenAIUsageOutputTokens(e.OutputTokens),
			attrTokenSource.String(e.TokenSource), attrCost.Float64(e.CostUSD))
	}
	if rt.respID != "" {
		a = append(a, semconv.GenAIResponseID(rt.respID))
	}
	if len(rt.reasons) > 0 {
		a = append(a, semconv.GenAIResponseFinishReasons(rt.reasons...))
	}
	if e.TTFT > 0 {
		a = append(a, semconv.GenAIResponseTimeToFirstChunk(e.TTFT.Seconds()))
		span.AddEvent(EventFirstToken, trace.WithTimestamp(c.stats.FirstContent))
	}
	a = append(a, semconv.HTTPResponseStatusCode(e.Status), attrOutcome.String(e.Outcome))
	if c.err != nil {
		a = append(a, semconv.ErrorTypeKey.String(e.Outcome))
		span.SetStatus(codes.Error, e.Error)
	}
	span.SetAttributes(a...)
	span.End()
}
