package dashboard

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var inf = math.Inf(1)

// h builds a hist from bounds (the last +Inf) and cumulative counts.
func h(upper []float64, cum ...uint64) hist { return hist{upper: upper, cum: cum} }

// near reports whether got is want to 1e-9, NaN matching NaN.
func near(got, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if math.IsInf(want, 0) {
		return got == want
	}
	return math.Abs(got-want) < 1e-9
}

// The quantiles are PromQL's histogram_quantile, computed by hand here.
func TestQuantile(t *testing.T) {
	b := []float64{.1, .2, .5, inf}
	tests := []struct {
		name string
		h    hist
		q    float64
		want float64
	}{
		// 10 in (0,.1], 20 in (.1,.2], 10 in (.2,.5]: rank 20 is the 10th of
		// the 20 in (.1,.2]: .1 + .1·10/20.
		{"median inside a bucket", h(b, 10, 30, 40, 40), .5, .15},
		// rank 39.6 is the 9.6th of 10 in (.2,.5]: .2 + .3·.96.
		{"p99 in the last finite bucket", h(b, 10, 30, 40, 40), .99, .488},
		// rank 10 is the end of the lowest bucket, which starts at 0.
		{"rank at a bucket's top", h(b, 10, 30, 40, 40), .25, .1},
		{"lowest bucket from zero", h(b, 40, 40, 40, 40), .5, .05},
		// rank 49.5 lies in +Inf: the highest finite bound.
		{"rank in +Inf", h(b, 10, 30, 40, 50), .99, .5},
		{"no observation", h(b, 0, 0, 0, 0), .5, math.NaN()},
		{"+Inf bucket only", h([]float64{inf}, 3), .5, math.NaN()},
		{"zero hist", hist{}, .5, math.NaN()},
		{"q above 1", h(b, 10, 30, 40, 40), 1.5, inf},
		{"q below 0", h(b, 10, 30, 40, 40), -1, math.Inf(-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.quantile(tt.q); !near(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHistSub(t *testing.T) {
	b := []float64{.1, .2, .5, inf}
	tests := []struct {
		name     string
		now, old hist
		want     []uint64
	}{
		{"increase per bucket", h(b, 12, 35, 50, 52), h(b, 2, 5, 10, 12), []uint64{10, 30, 40, 40}},
		{"new series", h(b, 1, 2, 3, 4), hist{}, []uint64{1, 2, 3, 4}},
		{"reset: taken whole", h(b, 1, 1, 1, 1), h(b, 2, 5, 10, 12), []uint64{1, 1, 1, 1}},
		{"nothing new", h(b, 2, 5, 10, 12), h(b, 2, 5, 10, 12), []uint64{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.now.sub(tt.old)
			if len(got.cum) != len(tt.want) {
				t.Fatalf("got %v, want %v", got.cum, tt.want)
			}
			for i := range got.cum {
				if got.cum[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got.cum, tt.want)
				}
			}
		})
	}
	// The window's median of the increase is the hand-computed one above.
	if got := h(b, 12, 35, 50, 52).sub(h(b, 2, 5, 10, 12)).quantile(.5); !near(got, .15) {
		t.Errorf("median of the increase: got %v, want .15", got)
	}
}

func TestMaxBoundAndAdd(t *testing.T) {
	b := []float64{.1, .2, .5, inf}
	tests := []struct {
		name string
		h    hist
		want float64
	}{
		{"highest non-empty bucket", h(b, 0, 3, 3, 3), .2},
		{"above every bound", h(b, 0, 3, 3, 4), inf},
		{"none", h(b, 0, 0, 0, 0), math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.maxBound(); !near(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	sum := hist{}.add(h(b, 1, 2, 3, 4)).add(h(b, 1, 1, 1, 1))
	if want := []uint64{2, 3, 4, 5}; len(sum.cum) != 4 || sum.cum[0] != want[0] || sum.cum[3] != want[3] {
		t.Errorf("got sum %v, want %v", sum.cum, want)
	}
}

func TestRate(t *testing.T) {
	tests := []struct {
		name          string
		now, old, sec float64
		want          float64
	}{
		{"increase over a minute", 110, 50, 60, 1},
		{"reset counts from zero", 5, 50, 10, .5},
		{"no time", 5, 1, 0, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rate(tt.now, tt.old, tt.sec); !near(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := ratio(1, 0); !math.IsNaN(got) {
		t.Errorf("ratio over no request: got %v, want NaN", got)
	}
}

// at picks the sample a window before the newest, or the oldest while the
// samples are younger than the window.
func TestWindowStart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := func(sec int) *sample { return &sample{at: t0.Add(time.Duration(sec) * time.Second)} }
	ring := []*sample{s(0), s(30), s(59), s(61), s(90)}
	tests := []struct {
		name    string
		samples []*sample
		window  time.Duration
		want    int // seconds after t0; -1: nil
	}{
		{"newest a window old", ring, time.Minute, 30},
		{"younger than the window", ring, 5 * time.Minute, 0},
		{"short window", ring, 10 * time.Second, 61},
		{"one sample", ring[:1], time.Minute, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := at(tt.samples, tt.window)
			switch {
			case tt.want < 0 && got != nil:
				t.Errorf("got sample at %v, want none", got.at)
			case tt.want >= 0 && (got == nil || !got.at.Equal(t0.Add(time.Duration(tt.want)*time.Second))):
				t.Errorf("got %v, want the sample at +%ds", got, tt.want)
			}
		})
	}
}

// compute reads the gateway's real collectors: a test that the metric names
// and labels the dashboard parses are the ones internal/metrics exposes,
// and that its figures are the hand-computed increases over the window.
func TestComputeFromGatewayMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	metrics.RegisterRouteState(reg, func() []metrics.RouteState {
		return []metrics.RouteState{{Model: "m1", Route: "p/a", State: 1, Inflight: 3}}
	})
	st := m.Stream("m1", "p/a")
	m.Stream("m1", "p/b") // an idle route is listed, without figures
	t0 := time.Unix(1_700_000_000, 0)
	var samples []*sample
	take := func(sec int) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, parse(t0.Add(time.Duration(sec)*time.Second), mfs, map[string][]float64{}))
	}
	// Before the window: what it must not count.
	st.TTFT(5 * time.Second)
	m.Request("m1", "p/a", 200, metrics.OutcomeOK)
	m.Usage("m1", 10, 1000, 0, 0, 0)
	take(0)
	// In the window (60 s): 4 requests, one error event, one client gone
	// (not an error), 1 fallback, 1 hedge, 2 continuations; 600 output tokens.
	for _, d := range []time.Duration{20, 40, 60, 80} {
		st.TTFT(d * time.Millisecond) // 1 in (.01,.025], 1 in (.025,.05], 2 in (.05,.1]
	}
	for range 98 {
		st.ITL(3 * time.Millisecond) // (.0025,.005]
	}
	st.ITL(200 * time.Millisecond) // (.15,.25]
	st.ITL(300 * time.Millisecond) // (.25,.4]
	m.Request("m1", "p/a", 200, metrics.OutcomeOK)
	m.Request("m1", "p/a", 200, metrics.OutcomeOK)
	m.Request("m1", "p/a", 200, metrics.OutcomeErrorEvent)
	m.Request("m1", "p/a", 499, metrics.OutcomeClientGone)
	m.Request("m1", "", 502, metrics.OutcomeUpstreamError) // failed before a route served it
	m.Usage("m1", 40, 600, 0, 0, 0.5)
	m.Fallback("m1", "status_502")
	m.Hedge("m1", "won")
	m.Continuation("m1", "ok")
	m.Continuation("m1", "failed")
	take(60)

	v := compute(samples, time.Minute, nil)
	if float64(v.SpanS) != 60 {
		t.Fatalf("got span %v, want 60", v.SpanS)
	}
	if len(v.Routes) != 2 || v.Routes[0].Route != "p/a" || v.Routes[1].Route != "p/b" {
		t.Fatalf("got routes %+v, want p/a and p/b of m1", v.Routes)
	}
	r := v.Routes[0]
	if r.State != "probing" || float64(r.Inflight) != 3 || !math.IsNaN(float64(v.Routes[1].Inflight)) {
		t.Errorf("route state: got %q with %v open (p/b %v), want probing with 3 open (p/b unknown)", r.State, r.Inflight, v.Routes[1].Inflight)
	}
	// TTFT: 2 at or below .05, 2 in (.05,.1]; median rank 2 = the top of
	// (.025,.05]: .05. p99 rank 3.96: .05 + .05·1.96/2 = .099.
	// ITL: 98 in (.0025,.005], then one each higher; p50 rank 50: .0025 +
	// .0025·50/98; p99 rank 99: the top of (.15,.25] = .25.
	// Requests on the route: 4 in 60 s, 1 error of 4.
	want := map[string][2]float64{
		"ttft p50":   {float64(r.TTFTP50S), .05},
		"ttft p99":   {float64(r.TTFTP99S), .099},
		"itl p50":    {float64(r.ITLP50S), .0025 + .0025*50/98},
		"itl p99":    {float64(r.ITLP99S), .25},
		"route rps":  {float64(r.RequestsPerS), 4.0 / 60},
		"route errs": {float64(r.ErrorRatio), .25},
		"idle ttft":  {float64(v.Routes[1].TTFTP50S), math.NaN()},
	}
	if len(v.Models) != 1 {
		t.Fatalf("got models %+v, want m1", v.Models)
	}
	mv := v.Models[0]
	// The model counts the request that no route served: 5 requests, 2
	// errors (error_event, upstream_error).
	for k, p := range map[string][2]float64{
		"model rps":      {float64(mv.RequestsPerS), 5.0 / 60},
		"model errs":     {float64(mv.ErrorRatio), .4},
		"output tok/s":   {float64(mv.OutputTokensPerS), 10},
		"input tok/s":    {float64(mv.InputTokensPerS), 40.0 / 60},
		"fallbacks/req":  {float64(mv.FallbackRatio), .2},
		"hedges/req":     {float64(mv.HedgeRatio), .2},
		"continues/req":  {float64(mv.ContinuationRatio), .4},
		"total tok/s":    {float64(v.OutputTokensPerS), 10},
		"open streams":   {float64(v.OpenStreams), 0},
		"total err rate": {float64(v.ErrorRatio), .4},
	} {
		want[k] = p
	}
	for k, p := range want {
		if !near(p[0], p[1]) {
			t.Errorf("%s: got %v, want %v", k, p[0], p[1])
		}
	}
	if _, err := json.Marshal(v); err != nil {
		t.Errorf("the view does not encode: %v", err)
	}
}

// num encodes what has no value as null, so the page shows a dash.
func TestNumJSON(t *testing.T) {
	b, err := json.Marshal([]num{num(math.NaN()), num(math.Inf(1)), 0, 0.123456, 12345})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `[null,null,0,0.1235,1.234e+04]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
