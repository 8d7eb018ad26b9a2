package dashboard

import (
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/usage"
)

// The hour ring is bounded: 3600 slots of a few words, whatever the traffic.
func TestHourRingSize(t *testing.T) {
	if got := unsafe.Sizeof(ring{}); got > 128<<10 {
		t.Errorf("the hour ring takes %d bytes, want at most 128 KiB", got)
	}
	var r ring
	for i := range hourSlots + 10 {
		r.push(slot{at: int64(i + 1)})
	}
	var first, n int64
	r.each(func(s slot) {
		if n == 0 {
			first = s.at
		}
		n++
	})
	if n != hourSlots || first != 11 {
		t.Errorf("after %d pushes: got %d slots from %d, want %d from 11", hourSlots+10, n, first, hourSlots)
	}
}

// Started, the dashboard samples with no page open: a page opened later
// sees the hour before it in /dashboard/history, the requests, the
// refusals apart from the errors, and a route whose attempts fail (connect
// refused, so no request ends on it) with its failures counted.
func TestMemoryWithoutPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m := metrics.New(reg)
		m.Known("m1", []string{"p/a", "p/b"}, false, false)
		var mu sync.Mutex
		health := []RouteHealth{{Model: "m1", Route: "p/a", State: "healthy"}, {Model: "m1", Route: "p/b", State: "healthy"}}
		d := New(Options{Gatherer: reg, Open: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Models: []string{"m1"},
			Routes: func() []RouteHealth { mu.Lock(); defer mu.Unlock(); return append([]RouteHealth(nil), health...) }})
		defer d.Close()
		d.Start()
		time.Sleep(2 * time.Second)
		// Ten minutes of traffic with no page open: 2 requests a second,
		// 1 refusal (unknown model) every 10 s; route p/b refuses its
		// connections and gets ejected.
		for i := range 600 {
			st := m.Stream("m1", "p/a")
			st.TTFT(50 * time.Millisecond)
			m.Request("m1", "p/a", 200, metrics.OutcomeOK)
			m.Request("m1", "p/a", 200, metrics.OutcomeOK)
			m.Fallback("m1", metrics.ReasonConnect)
			if i%10 == 0 {
				m.Request("", "", 404, metrics.OutcomeRejected)
			}
			mu.Lock()
			health[0].Attempts += 2
			health[1].Attempts++
			health[1].Failures++
			health[1].ConsecutiveFailures++
			if i == 5 {
				health[1].State, health[1].Ejections = "ejected", 1
			}
			mu.Unlock()
			time.Sleep(time.Second)
		}
		synctest.Wait()

		srv := http.Handler(d)
		rec := &recorder{header: http.Header{}}
		req, _ := http.NewRequest("GET", "/dashboard/history?range=1h", nil)
		srv.ServeHTTP(rec, req)
		var h struct {
			Source   string
			StepS    float64    `json:"step_s"`
			Requests []*float64 `json:"requests_per_s"`
			Rejected []*float64 `json:"rejected_per_s"`
			Errors   []*float64 `json:"errors_per_s"`
		}
		if err := json.Unmarshal([]byte(rec.body.String()), &h); err != nil {
			t.Fatalf("history: %v in %q", err, rec.body.String())
		}
		var reqs, rej, errs float64
		points := 0
		for i := range h.Requests {
			if h.Requests[i] != nil {
				points++
				reqs += *h.Requests[i] * h.StepS
				rej += *h.Rejected[i] * h.StepS
				errs += *h.Errors[i] * h.StepS
			}
		}
		// 1,260 requests of which 60 refusals: the requests include them.
		if h.Source != "memory" || points < 59 || points > 62 || reqs < 1259 || reqs > 1261 || rej < 59.5 || rej > 60.5 || errs != 0 {
			t.Errorf("history: got %s, %d points, %.1f requests, %.1f rejected, %.1f errors; want memory, ~60 points of 10 s, 1260, 60, 0",
				h.Source, points, reqs, rej, errs)
		}

		p, err := d.open(5*time.Minute, "open")
		if err != nil {
			t.Fatal(err)
		}
		defer d.close(p)
		time.Sleep(time.Second)
		synctest.Wait()
		var v view
		if err := json.Unmarshal(<-p.ch, &v); err != nil {
			t.Fatal(err)
		}
		var b *routeView
		for i := range v.Routes {
			if v.Routes[i].Route == "p/b" {
				b = &v.Routes[i]
			}
		}
		if b == nil || b.State != "ejected" || float64(b.Failures) < 290 || float64(b.FailureRatio) != 1 || b.Ejections != 1 {
			t.Fatalf("route p/b: got %+v, want ejected with ~300 failed attempts over 5 min, all of its attempts", b)
		}
		kinds := map[string]float64{}
		for _, k := range v.AttemptFailures {
			kinds[k.Kind] = float64(k.Count)
		}
		if kinds["connect"] < 290 || len(v.ErrorsByKind) != 0 || len(v.RejectedByCode) != 1 || v.RejectedByCode[0].Kind != "404" {
			t.Errorf("got attempt failures %v, errors %v, rejected %v; want ~300 connect failures, no error, 404 rejections",
				kinds, v.ErrorsByKind, v.RejectedByCode)
		}
		names := []string{}
		for _, m := range v.Models {
			names = append(names, m.Model)
		}
		if strings.Join(names, ",") != "m1,"+unknownModel {
			t.Errorf("models: got %v, want m1 and one %s row", names, unknownModel)
		}
	})
}

// The ledger's rows of names that are no configured model join one row.
func TestCostRowsGroupUnknown(t *testing.T) {
	rows := costRows([]usage.ReportRow{{Group: "m1", Requests: 3, CostUSD: 0.5, InputTokens: 100, CacheReadTokens: 25, SavingsUSD: 0.25},
		{Group: "gpt-4o-typo", Requests: 2, InputTokens: 10, CacheReadTokens: 10}, {Group: "m1x", Requests: 1, InputTokens: 30}},
		map[string]bool{"m1": true}, true)
	if len(rows) != 2 || rows[0].Group != "m1" || rows[1].Group != unknownModel || rows[1].Requests != 3 {
		t.Errorf("got %+v, want m1 and one %s row of 3 requests", rows, unknownModel)
	}
	if len(rows) == 2 && (rows[0].CacheReadShare != .25 || rows[0].SavingsUSD != .25 || rows[1].CacheReadShare != .25 || rows[1].SavingsUSD != 0) {
		t.Errorf("got %+v, want m1's read share .25 and $0.25 saved, the unknown's .25 (10 of 40) and $0", rows)
	}
	// Without prices, no savings (null); the share still is.
	rows = costRows([]usage.ReportRow{{Group: "m1", Requests: 1, InputTokens: 4, CacheReadTokens: 1}}, nil, false)
	if len(rows) != 1 || rows[0].CacheReadShare != .25 || !math.IsNaN(float64(rows[0].SavingsUSD)) {
		t.Errorf("unpriced: got %+v, want share .25 and savings null", rows)
	}
}

// recorder is a minimal ResponseWriter for handlers called in a bubble.
type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(c int)   { r.code = c }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.WriteString(string(b))
}

// The error ratio is over the requests the gateway tried to serve, as in
// streamgate usage: its own refusals are counted apart, not in the base.
func TestErrorRatioOverServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m := metrics.New(reg)
		m.Known("m1", []string{"p/a"}, false, false)
		d := New(Options{Gatherer: reg, Open: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Models: []string{"m1"}})
		defer d.Close()
		d.Start()
		p, err := d.open(time.Minute, "open")
		if err != nil {
			t.Fatal(err)
		}
		defer d.close(p)
		for range 3 {
			m.Request("m1", "p/a", 200, metrics.OutcomeOK)
		}
		m.Request("m1", "p/a", 502, metrics.OutcomeUpstreamError)
		for range 4 {
			m.Request("m1", "", 429, metrics.OutcomeRejected)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		var v view
		for len(p.ch) > 0 {
			if err := json.Unmarshal(<-p.ch, &v); err != nil {
				t.Fatal(err)
			}
		}
		if len(v.Models) != 1 || float64(v.Models[0].ErrorRatio) != 0.25 || float64(v.ErrorRatio) != 0.25 {
			t.Errorf("got model rows %+v, overall %v; want an error ratio of 1/4 (4 served, 4 refused apart)", v.Models, v.ErrorRatio)
		}
	})
}
