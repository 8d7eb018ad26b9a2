package bench

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/sim"
)

// newSim serves the simulator over loopback TCP with constant timings (TTFT
// 100ms, ITL 20ms) and stamps on; tests override them per request.
func newSim(t *testing.T) string {
	t.Helper()
	p := sim.DefaultProfile()
	p.TTFT, p.TTFTP99, p.ITL, p.ITLJitter = 100*time.Millisecond, 100*time.Millisecond, 20*time.Millisecond, 0
	srv := httptest.NewServer(sim.New(sim.Options{Profile: p, Profiles: []sim.Profile{}, Stamp: true, Seed: 3}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// TestSimAccuracy checks that the benchmark measures the simulator's
// configured constants (TTFT 100 ms, ITL 20 ms) as SPEC.md defines them. It
// runs client and simulator over in-memory connections in a synctest bubble:
// their clock only moves when both wait, so the figures are what the
// definitions give, exactly, however busy the machine is. Loopback TCP is
// covered by the e2e tests, which assert counts, not times.
func TestSimAccuracy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := sim.DefaultProfile()
		p.TTFT, p.TTFTP99, p.ITL, p.ITLJitter, p.PrefillPerToken = 100*time.Millisecond, 100*time.Millisecond, 20*time.Millisecond, 0, 0
		ln := newPipeListener()
		srv := &http.Server{Handler: sim.New(sim.Options{Profile: p, Profiles: []sim.Profile{}, Stamp: true, Seed: 3})}
		go srv.Serve(ln)
		defer srv.Close()

		res, err := Run(context.Background(), Config{
			BaseURL: "http://127.0.0.1:1/v1", Model: "any", Requests: 12, Concurrency: 6, Warmup: 6, MaxTokens: 30,
			KeepRequests: true, dial: ln.dial,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := res.Runs[0]
		if r.Succeeded != 12 {
			t.Fatalf("succeeded: got %d, want 12 (errors %v)", r.Succeeded, r.Errors)
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"TTFT p50 ms", r.TTFT.P50, 100}, {"TTFT p99 ms", r.TTFT.P99, 100},
			{"ITL p50 ms", r.ITL.P50, 20}, {"ITL p99 ms", r.ITL.P99, 20},
			// 30 tokens: the first at 100 ms, then 29 gaps of 20 ms.
			{"E2E p50 ms", r.E2E.P50, 100 + 29*20},
			{"TPOT p50 ms", r.TPOT.P50, 20},
		} {
			if math.Abs(c.got-c.want) > 1e-6 {
				t.Errorf("%s: got %.6f, want %.1f", c.name, c.got, c.want)
			}
		}
		if r.OutTok != 12*30 || r.TokSrc != "usage" {
			t.Errorf("output tokens: got %d from %s, want 360 from usage", r.OutTok, r.TokSrc)
		}
		for _, q := range r.Records {
			if len(q.Arrivals) != q.OutputTokens {
				t.Errorf("request %d: got %d content chunks, usage says %d", q.Index, len(q.Arrivals), q.OutputTokens)
			}
		}
		if d := res.Client.MeasurementDelay; d == nil || d.N < 12*30 || d.Max != 0 {
			t.Errorf("measurement delay: got %+v, want one sample per stamped event, all 0 on the bubble's clock", d)
		}
	})
}

// pipeListener hands out in-memory connections: dial makes a net.Pipe and
// Accept returns its server end. Inside a synctest bubble, reads and writes
// on them block durably, so the bubble's clock can advance.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func TestSimFaults(t *testing.T) {
	url := newSim(t)
	fast := func(kv ...string) http.Header {
		h := hdr(kv...)
		h.Set("X-Sim-TTFT", "1ms")
		h.Set("X-Sim-TTFT-P99", "1ms")
		h.Set("X-Sim-ITL", "1ms")
		return h
	}
	tests := []struct {
		name     string
		headers  http.Header
		wantKind string
		wantIntr int
	}{
		{"cut at chunk 5", fast("X-Sim-Cut-At", "5"), KindInterrupted, 20},
		{"error event at chunk 3", fast("X-Sim-Error-At", "3"), KindErrorEvent, 20},
		{"status 503", fast("X-Sim-Fail-Status", "503"), KindHTTP5xx, 0},
		{"status 429", fast("X-Sim-Fail-Status", "429"), KindHTTP429, 0},
		{"stall past idle timeout", fast("X-Sim-Stall-At", "2", "X-Sim-Stall-For", "10s"), KindIdle, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A short idle timeout for the stall alone: under -race on a
			// loaded machine, a quick answer can take longer than 200 ms.
			idle := 30 * time.Second
			if tt.wantKind == KindIdle {
				idle = 200 * time.Millisecond
			}
			res, err := Run(context.Background(), Config{BaseURL: url, Model: "m", Requests: 20, Concurrency: 10,
				MaxTokens: 10, Headers: tt.headers, IdleTimeout: idle})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Runs[0]
			if r.Failed != 20 || r.Errors[tt.wantKind] != 20 || r.Interrupted != tt.wantIntr {
				t.Errorf("got failed %d interrupted %d errors %v, want 20 %s, %d interrupted", r.Failed, r.Interrupted, r.Errors, tt.wantKind, tt.wantIntr)
			}
		})
	}
}

// TestSimCutRateCountedExactly injects cuts in a seeded fraction of
// requests and checks the benchmark counts every one and nothing else.
func TestSimCutRateCountedExactly(t *testing.T) {
	url := newSim(t)
	res, err := Run(context.Background(), Config{BaseURL: url, Model: "m", Requests: 60, Concurrency: 20, MaxTokens: 8,
		KeepRequests: true,
		Headers:      hdr("X-Sim-Cut-Rate", "0.3", "X-Sim-TTFT", "1ms", "X-Sim-TTFT-P99", "1ms", "X-Sim-ITL", "1ms")})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	cut := 0
	for _, q := range r.Records {
		// A cut stream has neither [DONE] nor finish_reason.
		if !q.Done && !q.Finish {
			cut++
		}
	}
	if cut == 0 || r.Interrupted != cut || r.Errors[KindInterrupted] != cut || r.Succeeded != 60-cut {
		t.Errorf("got interrupted %d (errors %v), succeeded %d; want exactly the %d cut streams", r.Interrupted, r.Errors, r.Succeeded, cut)
	}
	for _, q := range r.Records {
		if q.OK() && q.OutputTokens != 8 {
			t.Errorf("request %d: got %d tokens, want 8", q.Index, q.OutputTokens)
		}
	}
}

// With --runs, schedule warnings come from each repeat (the pooled records
// overlap in time and would inflate the achieved rate in the text). One
// stream at a time against a 100 ms TTFT cannot reach 10 requests/s, so every
// achieved rate named in a warning must be below that.
func TestRepeatsWarningsPerRepeat(t *testing.T) {
	url := newSim(t)
	res, err := RunAll(context.Background(), []Config{{
		BaseURL: url, Model: "any", Requests: 4, Rate: 1000, Concurrency: 1, MaxTokens: 1, Seed: 5,
	}}, RunOptions{Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	warnings := res.Runs[0].Warnings
	rates := 0
	for _, w := range warnings {
		if !strings.HasPrefix(w, "repeat ") {
			t.Errorf("warning %q: want it to name its repeat", w)
		}
		var k int
		var got, intended float64
		if _, err := fmt.Sscanf(w, "repeat %d: achieved rate %f/s is below the intended %f/s", &k, &got, &intended); err == nil {
			rates++
			if got >= 10 {
				t.Errorf("repeat %d: achieved rate %.1f/s, want < 10/s for one stream at a time with a 100 ms TTFT", k, got)
			}
		}
	}
	if rates != 2 {
		t.Errorf("got %d achieved-rate warnings in %q, want one per repeat", rates, warnings)
	}
}

// TestSimAccuracyAPIs: --api messages and responses measure the sim's
// constants as chat does (first token = the API's first content delta,
// tokens from the API's usage fields), in the same synctest bubble as
// TestSimAccuracy, and their faults are counted as chat's are.
func TestSimAccuracyAPIs(t *testing.T) {
	for _, apiName := range []string{APIChat, APIMessages, APIResponses} {
		t.Run(apiName, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := sim.DefaultProfile()
				p.TTFT, p.TTFTP99, p.ITL, p.ITLJitter, p.PrefillPerToken, p.TokensPerChunk = 100*time.Millisecond, 100*time.Millisecond, 20*time.Millisecond, 0, 0, 1
				ln := newPipeListener()
				srv := &http.Server{Handler: sim.New(sim.Options{Profile: p, Profiles: []sim.Profile{}, Seed: 3})}
				go srv.Serve(ln)
				defer srv.Close()
				res, err := Run(context.Background(), Config{
					BaseURL: "http://127.0.0.1:1/v1", API: apiName, Model: "any", Requests: 6, Concurrency: 3, MaxTokens: 30,
					KeepRequests: true, dial: ln.dial,
				})
				if err != nil {
					t.Fatal(err)
				}
				r := res.Runs[0]
				if r.Succeeded != 6 || r.API != apiName || res.Config.API != apiName {
					t.Fatalf("got %d succeeded (errors %v), api %q; want 6 of %s", r.Succeeded, r.Errors, r.API, apiName)
				}
				if r.TTFT.P50 != 100 || r.ITL.P50 != 20 || r.ITL.P99 != 20 || r.E2E.P50 != 100+29*20 {
					t.Errorf("got TTFT %.3f ITL %.3f/%.3f E2E %.3f ms, want 100, 20, 680", r.TTFT.P50, r.ITL.P50, r.ITL.P99, r.E2E.P50)
				}
				if r.OutTok != 6*30 || r.TokSrc != "usage" || r.InTok <= 0 {
					t.Errorf("tokens: got %d out, %d in, from %s; want 180 out from usage", r.OutTok, r.InTok, r.TokSrc)
				}
				for _, q := range r.Records {
					if len(q.Arrivals) != q.OutputTokens || !q.Done || !q.Finish {
						t.Errorf("request %d: %d content events, usage %d, done %v, finish %v", q.Index, len(q.Arrivals), q.OutputTokens, q.Done, q.Finish)
					}
				}
			})
		})
	}
	url := newSim(t)
	for _, apiName := range []string{APIMessages, APIResponses} {
		for _, tt := range []struct {
			header, kind string
		}{{"X-Sim-Cut-At", KindInterrupted}, {"X-Sim-Error-At", KindErrorEvent}, {"X-Sim-Malformed-At", KindMalformed}} {
			res, err := Run(context.Background(), Config{BaseURL: url, API: apiName, Model: "m", Requests: 4, Concurrency: 2, MaxTokens: 20,
				Headers: hdr(tt.header, "3", "X-Sim-TTFT", "1ms", "X-Sim-TTFT-P99", "1ms", "X-Sim-ITL", "1ms")})
			if err != nil {
				t.Fatal(err)
			}
			if r := res.Runs[0]; r.Failed != 4 || r.Errors[tt.kind] != 4 {
				t.Errorf("%s %s: got failed %d, errors %v; want 4 %s", apiName, tt.header, r.Failed, r.Errors, tt.kind)
			}
		}
	}
}
