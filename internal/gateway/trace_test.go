package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

// traced is a gateway over a sim upstream reached as an OpenAI provider
// ("up"), whose models "faulty" and "healthy" are resilienceConfig's, with
// an in-memory span exporter; the upstream keeps the traceparent of each
// request it got.
type traced struct {
	*env
	exp     *tracetest.InMemoryExporter
	started *starts    // spans begun recording
	logs    *logBuffer // the gateway's log, INFO and up

	mu      sync.Mutex
	parents []string // traceparent of each upstream request, in arrival order
}

func startTraced(t *testing.T, f sim.Faults, change func(*config.Config)) *traced {
	t.Helper()
	return startUpstream(t, f, change, true)
}

// startUpstream is startTraced, with a gateway without a tracer unless on.
func startUpstream(t *testing.T, f sim.Faults, change func(*config.Config), on bool) *traced {
	t.Helper()
	cfg, so := resilienceConfig("fallback", f)
	tr := &traced{exp: tracetest.NewInMemoryExporter(), started: &starts{}, logs: &logBuffer{}}
	s := sim.New(so)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		tr.parents = append(tr.parents, r.Header.Get("Traceparent"))
		tr.mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	// prefill: the sim continues a final assistant message, as kind sim does.
	cfg.Providers = []config.Provider{{Name: "up", Kind: "openai", BaseURL: up.URL + "/v1", Continuation: "prefill"}}
	for i := range cfg.Models {
		for j := range cfg.Models[i].Routes {
			cfg.Models[i].Routes[j].Provider = "up"
		}
	}
	if change != nil {
		change(cfg)
	}
	opts := gateway.Options{Config: cfg, KeepAlive: -1, Logger: slog.New(slog.NewTextHandler(tr.logs, nil))}
	if on {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tr.exp), sdktrace.WithSpanProcessor(tr.started))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		opts.Tracer = tp.Tracer("test")
	}
	tr.env = startWith(t, opts)
	return tr
}

// accessLine returns the one access line of a chat request, waiting for
// it: the handler writes it after the response went out.
func (tr *traced) accessLine(t *testing.T) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		lines := tr.logs.lines("msg=request", "path=/v1/chat/completions")
		if len(lines) == 1 {
			return lines[0]
		}
		if len(lines) > 1 || time.Now().After(deadline) {
			t.Fatalf("got %d access lines, want 1; log:\n%s", len(lines), tr.logs)
		}
	}
}

// upstreamParents returns the traceparents the upstream got.
func (tr *traced) upstreamParents() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.parents)
}

// requestTrace is one request's spans: its server span and its attempts
// (client spans), ordered by streamgate.attempt.
type requestTrace struct {
	req      tracetest.SpanStub
	attempts []tracetest.SpanStub
}

// wait returns the one request's spans once its request span ended (the
// handler ends it after the response went out), failing unless there is
// exactly one request span and every attempt span is its child.
func (tr *traced) wait(t *testing.T) requestTrace {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var spans tracetest.SpanStubs
	for {
		spans = tr.exp.GetSpans()
		n := 0
		for _, s := range spans {
			if s.SpanKind == trace.SpanKindServer {
				n++
			}
		}
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var rt requestTrace
	servers := 0
	for _, s := range spans {
		switch s.SpanKind {
		case trace.SpanKindServer:
			servers++
			rt.req = s
		case trace.SpanKindClient:
			rt.attempts = append(rt.attempts, s)
		default:
			t.Errorf("span %q: kind %v, want server or client", s.Name, s.SpanKind)
		}
	}
	if servers != 1 {
		t.Fatalf("got %d request spans, want 1: %v", servers, names(spans))
	}
	for _, a := range rt.attempts {
		if a.Parent.SpanID() != rt.req.SpanContext.SpanID() || a.SpanContext.TraceID() != rt.req.SpanContext.TraceID() {
			t.Errorf("attempt %q: parent %v in trace %v, want the request span %v", a.Name, a.Parent.SpanID(), a.SpanContext.TraceID(), rt.req.SpanContext.SpanID())
		}
	}
	slices.SortFunc(rt.attempts, func(a, b tracetest.SpanStub) int {
		return int(attr(a, "streamgate.attempt").AsInt64() - attr(b, "streamgate.attempt").AsInt64())
	})
	return rt
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// attr is the span's attribute key; an empty Value when absent.
func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// wantAttrs checks the span's attributes against want (emitted as their
// string form).
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attr(s, k).Emit(); got != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name, k, got, v)
		}
	}
}

func hasEvent(s tracetest.SpanStub, name string) (time.Time, bool) {
	for _, e := range s.Events {
		if e.Name == name {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// traceparent is the W3C header of span s's context.
func traceparent(s tracetest.SpanStub) string {
	sc := s.SpanContext
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

const clientParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A request whose first route answers 503 and whose second serves: one
// request span (a child of the client's traceparent) with two attempt
// children, the first failed (status_5xx), the second the fallback that
// served; the GenAI attributes carry the usage entry's tokens; a stream's
// first token is an event on the request span and on the attempt that sent
// it; each upstream request carries its attempt's traceparent.
func TestTraceFallback(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "non-stream"}[stream]
		t.Run(name, func(t *testing.T) {
			tr := startTraced(t, sim.Faults{FailStatus: 503}, nil)
			resp := do(t, "POST", tr.url+"/v1/chat/completions", devKey, promptBody("m", stream, "trace me"), "traceparent", clientParent)
			var answerID string
			if stream {
				if s := readChat(t, resp); !s.done || resp.StatusCode != 200 {
					t.Fatalf("got %d done=%v, want a whole stream", resp.StatusCode, s.done)
				}
			} else {
				var a struct{ ID string }
				if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 || a.ID == "" {
					t.Fatalf("got %d %+v (%v), want an answer with an id", resp.StatusCode, a, err)
				}
				answerID = a.ID
			}
			en := tr.waitEntries(t, 1)[0]
			if en.Attempts != 2 || en.Route != "up/healthy" || en.InputTokens == 0 || en.OutputTokens == 0 {
				t.Fatalf("got entry %+v, want 2 attempts served by up/healthy with tokens", en)
			}
			rt := tr.wait(t)

			// The request span.
			req := rt.req
			if line, id := tr.accessLine(t), req.SpanContext.TraceID().String(); !strings.Contains(line, " trace_id="+id) {
				t.Errorf("access line %q: want trace_id=%s", line, id)
			}
			if req.Name != "chat m" {
				t.Errorf("request span: got name %q, want \"chat m\"", req.Name)
			}
			if got := req.Parent.TraceID().String() + "/" + req.Parent.SpanID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736/00f067aa0ba902b7" || !req.Parent.IsRemote() {
				t.Errorf("request span: got parent %s, want the client's traceparent", got)
			}
			wantAttrs(t, req, map[string]string{
				"gen_ai.operation.name":      "chat",
				"gen_ai.request.model":       "m",
				"gen_ai.response.model":      "healthy",
				"gen_ai.provider.name":       "openai",
				"gen_ai.request.stream":      map[bool]string{true: "true", false: "false"}[stream],
				"gen_ai.usage.input_tokens":  itoa(en.InputTokens),
				"gen_ai.usage.output_tokens": itoa(en.OutputTokens),
				"streamgate.provider":        "up",
				"streamgate.route":           "up/healthy",
				"streamgate.attempts":        "2",
				"streamgate.request_id":      en.RequestID,
				"streamgate.key":             "dev",
				"streamgate.outcome":         usage.OutcomeOK,
				"streamgate.token_source":    en.TokenSource,
				"http.response.status_code":  "200",
			})
			if req.Status.Code == codes.Error {
				t.Errorf("request span: got status %+v, want not an error", req.Status)
			}

			// Its two attempts.
			if len(rt.attempts) != 2 {
				t.Fatalf("got %d attempt spans, want 2: %v", len(rt.attempts), names(tr.exp.GetSpans()))
			}
			failed, served := rt.attempts[0], rt.attempts[1]
			wantAttrs(t, failed, map[string]string{
				"streamgate.attempt": "1", "streamgate.attempt.kind": "first", "streamgate.route": "up/faulty",
				"gen_ai.request.model": "faulty", "gen_ai.provider.name": "openai", "error.type": "status_5xx",
				"gen_ai.usage.input_tokens": "", // refused: not billed
			})
			if failed.Name != "attempt up/faulty" || failed.Status.Code != codes.Error {
				t.Errorf("failed attempt: got %q status %+v, want \"attempt up/faulty\" with an error status", failed.Name, failed.Status)
			}
			wantAttrs(t, served, map[string]string{
				"streamgate.attempt": "2", "streamgate.attempt.kind": "fallback", "streamgate.route": "up/healthy",
				"gen_ai.request.model": "healthy", "error.type": "",
				"gen_ai.usage.input_tokens":  itoa(en.InputTokens),
				"gen_ai.usage.output_tokens": itoa(en.OutputTokens),
			})
			if served.StartTime.Before(failed.EndTime) {
				t.Errorf("the fallback started at %v, before the failed attempt ended at %v", served.StartTime, failed.EndTime)
			}

			// The first token, on the request and the attempt that sent it.
			reqFirst, onReq := hasEvent(req, gateway.EventFirstToken)
			attFirst, onServed := hasEvent(served, gateway.EventFirstToken)
			_, onFailed := hasEvent(failed, gateway.EventFirstToken)
			if stream {
				if !onReq || !onServed || onFailed || !reqFirst.Equal(attFirst) {
					t.Errorf("first token events: request %v (%v), serving attempt %v (%v), failed attempt %v; want on both the request and the serving attempt, at one time",
						onReq, reqFirst, onServed, attFirst, onFailed)
				}
				if got, want := attr(req, "gen_ai.response.time_to_first_chunk").AsFloat64(), en.TTFT.Seconds(); got != want {
					t.Errorf("request span: time_to_first_chunk %v, want the entry's TTFT %v", got, want)
				}
			} else {
				if onReq || onServed {
					t.Error("non-stream: got a first token event, want none")
				}
				wantAttrs(t, req, map[string]string{"gen_ai.response.id": answerID, "gen_ai.response.finish_reasons": `["stop"]`})
			}

			// Each upstream request carried its attempt's traceparent.
			want := []string{traceparent(failed), traceparent(served)}
			if got := tr.upstreamParents(); !slices.Equal(got, want) {
				t.Errorf("upstream traceparents: got %q, want the attempts' %q", got, want)
			}
		})
	}
}

// starts is a span processor that counts the spans begun recording.
type starts struct{ n atomic.Int64 }

func (s *starts) OnStart(context.Context, sdktrace.ReadWriteSpan) { s.n.Add(1) }
func (s *starts) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (s *starts) Shutdown(context.Context) error                  { return nil }
func (s *starts) ForceFlush(context.Context) error                { return nil }

func itoa(n int) string { return attribute.IntValue(n).Emit() }

// A stream cut mid-answer and continued on the next route: a first
// attempt that ended truncated, and a continuation; the request span counts
// the continuation and the tokens of both, as the usage entry does.
func TestTraceContinuation(t *testing.T) {
	tr := startTraced(t, sim.Faults{CutAt: 5}, nil)
	s := readChat(t, do(t, "POST", tr.url+"/v1/chat/completions", devKey, promptBody("m", true, "continue me")))
	if !s.done {
		t.Fatal("got no [DONE], want the continued answer whole")
	}
	en := tr.waitEntries(t, 1)[0]
	if en.Continuations != 1 || en.Attempts != 2 {
		t.Fatalf("got entry %+v, want 1 continuation, 2 attempts", en)
	}
	rt := tr.wait(t)
	wantAttrs(t, rt.req, map[string]string{
		"streamgate.continuations": "1", "streamgate.attempts": "2", "streamgate.route": "up/healthy",
		"gen_ai.usage.output_tokens": itoa(en.OutputTokens), "gen_ai.usage.input_tokens": itoa(en.InputTokens),
	})
	if len(rt.attempts) != 2 {
		t.Fatalf("got %d attempt spans, want 2", len(rt.attempts))
	}
	cut, cont := rt.attempts[0], rt.attempts[1]
	wantAttrs(t, cut, map[string]string{"streamgate.attempt.kind": "first", "error.type": "truncated", "streamgate.route": "up/faulty"})
	wantAttrs(t, cont, map[string]string{"streamgate.attempt.kind": "continuation", "error.type": "", "streamgate.route": "up/healthy"})
	if _, ok := hasEvent(cut, gateway.EventFirstToken); !ok {
		t.Error("cut attempt: got no first token event, want one (its content reached the client)")
	}
	if _, ok := hasEvent(cont, gateway.EventFirstToken); ok {
		t.Error("continuation: got a first token event, want none (the answer's first token came before it)")
	}
	// The tokens of both attempts make the request's.
	in := attr(cut, "gen_ai.usage.input_tokens").AsInt64() + attr(cont, "gen_ai.usage.input_tokens").AsInt64()
	out := attr(cut, "gen_ai.usage.output_tokens").AsInt64() + attr(cont, "gen_ai.usage.output_tokens").AsInt64()
	if in != int64(en.InputTokens) || out != int64(en.OutputTokens) || attr(cut, "gen_ai.usage.output_tokens").AsInt64() == 0 {
		t.Errorf("attempts' tokens: got %d in, %d out (cut attempt %d out); want the entry's %d, %d, some from each", in, out,
			attr(cut, "gen_ai.usage.output_tokens").AsInt64(), en.InputTokens, en.OutputTokens)
	}
}

// A route retried and failing again: attempts "first" and "retry", and a
// request span that ended in error, with no tokens (nothing was billed).
func TestTraceRetryFails(t *testing.T) {
	tr := startTraced(t, sim.Faults{FailStatus: 503}, func(cfg *config.Config) {
		cfg.Models = append(cfg.Models, config.Model{Name: "r", Strategy: "fallback", ContextPolicy: "reject", Retries: 1,
			Routes: []config.Route{{Provider: "up", Model: "faulty"}}})
	})
	resp := do(t, "POST", tr.url+"/v1/chat/completions", devKey, promptBody("r", false, "retry"))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("got status %d, want 503", resp.StatusCode)
	}
	en := tr.waitEntries(t, 1)[0]
	rt := tr.wait(t)
	wantAttrs(t, rt.req, map[string]string{
		"gen_ai.request.model": "r", "http.response.status_code": "503", "streamgate.outcome": usage.OutcomeUpstreamError,
		"error.type": usage.OutcomeUpstreamError, "gen_ai.usage.input_tokens": "", "streamgate.attempts": "2",
	})
	if rt.req.Status.Code != codes.Error || rt.req.Status.Description != en.Error {
		t.Errorf("request span: got status %+v, want an error saying %q", rt.req.Status, en.Error)
	}
	if len(rt.attempts) != 2 {
		t.Fatalf("got %d attempt spans, want 2", len(rt.attempts))
	}
	for i, kind := range []string{"first", "retry"} {
		wantAttrs(t, rt.attempts[i], map[string]string{"streamgate.attempt.kind": kind, "streamgate.route": "up/faulty", "error.type": "status_5xx"})
	}
}

// A hedged first token: both racing attempts get a span, the stalled
// primary the loser's (cancelled: hedge_lost), the backup the winner's
// with the first token; both upstream requests carry their own
// traceparent.
func TestTraceHedge(t *testing.T) {
	tr := startTraced(t, sim.Faults{StallFirst: 2 * time.Second}, func(cfg *config.Config) {
		cfg.Timeouts.FirstToken = config.Duration(5 * time.Second)
		cfg.Models[0].Hedge = &config.Hedge{After: "50ms", Budget: 1}
	})
	if s := readChat(t, do(t, "POST", tr.url+"/v1/chat/completions", devKey, promptBody("m", true, "hedge"))); !s.done {
		t.Fatal("got no [DONE]")
	}
	en := tr.waitEntries(t, 1)[0]
	if !en.Hedged || en.Route != "up/healthy" {
		t.Fatalf("got entry %+v, want hedged, served by up/healthy", en)
	}
	rt := tr.wait(t)
	wantAttrs(t, rt.req, map[string]string{
		"streamgate.hedged": "true", "streamgate.attempts": "2", "streamgate.route": "up/healthy", "gen_ai.response.model": "healthy",
		"gen_ai.usage.input_tokens": itoa(en.InputTokens), "gen_ai.usage.output_tokens": itoa(en.OutputTokens),
	})
	if len(rt.attempts) != 2 {
		t.Fatalf("got %d attempt spans, want 2", len(rt.attempts))
	}
	lost, won := rt.attempts[0], rt.attempts[1]
	wantAttrs(t, lost, map[string]string{"streamgate.attempt.kind": "first", "streamgate.route": "up/faulty", "streamgate.hedge.won": "false", "error.type": "hedge_lost"})
	wantAttrs(t, won, map[string]string{"streamgate.attempt.kind": "hedge", "streamgate.route": "up/healthy", "streamgate.hedge.won": "true", "error.type": ""})
	if _, ok := hasEvent(won, gateway.EventFirstToken); !ok {
		t.Error("winning hedge: got no first token event")
	}
	if !won.StartTime.After(lost.StartTime) {
		t.Errorf("hedge started at %v, want after the primary (%v)", won.StartTime, lost.StartTime)
	}
	// The loser was billed its prompt (estimated), the winner what it reported.
	in := attr(lost, "gen_ai.usage.input_tokens").AsInt64() + attr(won, "gen_ai.usage.input_tokens").AsInt64()
	if in != int64(en.InputTokens) {
		t.Errorf("attempts' input tokens: got %d, want the entry's %d", in, en.InputTokens)
	}
	got := tr.upstreamParents()
	want := []string{traceparent(lost), traceparent(won)}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("upstream traceparents: got %q, want the attempts' %q", got, want)
	}
}

// With no tracer the gateway makes no span, not even through the process's
// global tracer provider, and sends no traceparent upstream; with one, a
// caller that sampled its trace out is followed: nothing recorded, the
// not-sampled flag passed on.
func TestTraceOff(t *testing.T) {
	t.Run("no tracer", func(t *testing.T) {
		globalStarts := &starts{}
		global := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(globalStarts))
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(global)
		t.Cleanup(func() {
			otel.SetTracerProvider(prev)
			global.Shutdown(context.Background())
		})
		tr := startUpstream(t, sim.Faults{FailStatus: 503}, nil, false)
		resp := do(t, "POST", tr.url+"/v1/chat/completions", devKey, promptBody("m", true, "off"), "traceparent", clientParent)
		if s := readChat(t, resp); !s.done {
			t.Fatal("got no [DONE]")
		}
		tr.waitEntries(t, 1)
		// A span would have begun before its upstream request.
		if n := globalStarts.n.Load() + tr.started.n.Load(); n != 0 {
			t.Errorf("got %d spans, want none", n)
		}
		for _, p := range tr.upstreamParents() {
			if p != "" {
				t.Errorf("upstream got traceparent %q, want none", p)
			}
		}
		if len(tr.upstreamParents()) != 2 {
			t.Errorf("upstream got %d requests, want 2 (a fallback)", len(tr.upstreamParents()))
		}
		if line := tr.accessLine(t); strings.Contains(line, "trace_id=") {
			t.Errorf("access line %q: want no trace_id with tracing off", line)
		}
	})
	t.Run("caller not sampled", func(t *testing.T) {
		tr := startTraced(t, sim.Faults{}, nil)
		notSampled := strings.TrimSuffix(clientParent, "-01") + "-00"
		if s := readChat(t, do(t, "POST", tr.url+"/v1/chat/completions", devKey, promptBody("m", true, "x"), "traceparent", notSampled)); !s.done {
			t.Fatal("got no [DONE]")
		}
		tr.waitEntries(t, 1)
		// A recording span would have begun before the upstream request.
		if n := tr.started.n.Load(); n != 0 {
			t.Errorf("got %d spans recorded, want none", n)
		}
		p := tr.upstreamParents()
		if len(p) != 1 || !strings.HasPrefix(p[0], "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(p[0], "-00") {
			t.Errorf("upstream traceparents: got %q, want the caller's trace, not sampled", p)
		}
		// Not recorded here, but the upstream got the trace: the access
		// line names it, so the two logs can be joined.
		if line := tr.accessLine(t); !strings.Contains(line, " trace_id=4bf92f3577b34da6a3ce929d0e0e4736") {
			t.Errorf("access line %q: want the caller's trace_id", line)
		}
	})
}

// BenchmarkChatRequestTraced is BenchmarkChatRequest with every request
// traced (sampled, spans handed to an exporter that drops them): the cost
// of tracing on, against BenchmarkChatRequest's off.
func BenchmarkChatRequestTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	benchServe(b, benchGateway(b, 1, tp.Tracer("bench")), true)
}

// An embeddings request is traced as the operation "embeddings".
func TestTraceEmbeddings(t *testing.T) {
	tr := startTraced(t, sim.Faults{}, nil)
	resp := do(t, "POST", tr.url+"/v1/embeddings", devKey, `{"model":"ref","input":"hello"}`)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("got %d %s, want 200", resp.StatusCode, b)
	}
	en := tr.waitEntries(t, 1)[0]
	rt := tr.wait(t)
	if rt.req.Name != "embeddings ref" || len(rt.attempts) != 1 {
		t.Fatalf("got request span %q with %d attempts, want \"embeddings ref\" with 1", rt.req.Name, len(rt.attempts))
	}
	wantAttrs(t, rt.req, map[string]string{"gen_ai.operation.name": "embeddings", "gen_ai.usage.input_tokens": itoa(en.InputTokens)})
	wantAttrs(t, rt.attempts[0], map[string]string{"gen_ai.operation.name": "embeddings", "streamgate.attempt.kind": "first"})
}
