package metrics

import (
	"fmt"
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamgate/streamgate/internal/usage"
)

func TestNamesAndRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	s := m.Stream("gpt", "openai/gpt")
	s.TTFT(time.Millisecond)
	s.ITL(time.Millisecond)
	s.ChunkOverhead(time.Microsecond)
	s.End(time.Millisecond, 50)
	s.RequestOverhead(time.Microsecond)
	m.Request("gpt", "openai/gpt", 200, OutcomeOK)
	m.Usage("gpt", 10, 20, 6, 3, 0.5)
	m.Fallback("gpt", "connect")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{
		"streamgate_time_to_first_token_seconds", "streamgate_inter_token_latency_seconds", "streamgate_stream_max_gap_seconds",
		"streamgate_output_tokens_per_second", "streamgate_gateway_overhead_seconds", "streamgate_requests_total",
		"streamgate_tokens_total", "streamgate_cost_usd_total", "streamgate_fallbacks_total", "streamgate_inflight_streams",
		"go_gc_pauses_seconds", "go_goroutines",
	} {
		if !got[name] {
			t.Errorf("missing metric %s", name)
		}
	}
	for _, mf := range mfs {
		if mf.GetName() != "streamgate_tokens_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var kind string
			for _, l := range mt.GetLabel() {
				if l.GetName() == "kind" {
					kind = l.GetValue()
				}
			}
			if want := map[string]float64{"input": 10, "output": 20, "cache_read": 6, "cache_write": 3}[kind]; mt.GetCounter().GetValue() != want {
				t.Errorf("got %s tokens %v, want %v", kind, mt.GetCounter().GetValue(), want)
			}
		}
	}
}

func TestStreamObserveDoesNotAllocate(t *testing.T) {
	s := New(nil).Stream("m", "p/m")
	if n := testing.AllocsPerRun(1000, func() {
		s.ITL(time.Millisecond)
		s.ChunkOverhead(time.Microsecond)
	}); n != 0 {
		t.Errorf("got %v allocs per observation, want 0", n)
	}
	var nilStream *Stream
	nilStream.ITL(time.Millisecond) // a nil Stream ignores calls
}

func TestRebucket(t *testing.T) {
	h := &rtmetrics.Float64Histogram{
		Counts:  []uint64{1, 0, 2, 3, 1},
		Buckets: []float64{math.Inf(-1), 10e-6, 90e-6, 110e-6, 1.2e-3, math.Inf(1)},
	}
	count, sum, cum := rebucket(h, []float64{100e-6, 1e-3, 2e-3})
	if count != 7 {
		t.Errorf("count: got %d, want 7", count)
	}
	// [-inf,10µs) and [10µs,90µs) fit under 100µs; [90µs,110µs) does not
	// (its upper edge is above 100µs) and goes to 1ms; [110µs,1.2ms) to 2ms;
	// the +Inf bucket fits no bound and is only in the total count.
	want := map[float64]uint64{100e-6: 1, 1e-3: 3, 2e-3: 6}
	for b, n := range want {
		if cum[b] != n {
			t.Errorf("bucket %g: got %d, want %d", b, cum[b], n)
		}
	}
	if sum <= 0 {
		t.Errorf("sum: got %g, want > 0", sum)
	}
}

func TestGCPauseCollectorAfterGC(t *testing.T) {
	runtime.GC()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewGCPauseCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "streamgate_gc_pause_seconds" {
		t.Fatalf("got %v, want one family streamgate_gc_pause_seconds", mfs)
	}
	if n := mfs[0].GetMetric()[0].GetHistogram().GetSampleCount(); n == 0 {
		t.Errorf("got %d pauses after runtime.GC, want > 0", n)
	}
}

func TestLedgerCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterLedger(reg, func() usage.Stats {
		return usage.Stats{Pending: 3, Written: 40, DroppedFull: 5, Dropped: 1, FailedInserts: 2}
	})
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			label := ""
			for _, l := range m.GetLabel() {
				label = "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			fmt.Fprintf(&b, "%s%s %v\n", mf.GetName(), label, v)
		}
	}
	want := "streamgate_usage_dropped_total{reason=closed} 1\nstreamgate_usage_dropped_total{reason=full} 5\nstreamgate_usage_failed_inserts_total 2\nstreamgate_usage_pending_entries 3\nstreamgate_usage_written_total 40\n"
	if b.String() != want {
		t.Errorf("got\n%swant\n%s", b.String(), want)
	}
}

// streamgate_cache_savings_usd_total and streamgate_cache_loss_usd_total
// exist at 0 for a known model; a request's savings go to the first, a
// loss (writes that cost more than the reads saved) to the second, and
// recording one allocates nothing.
func TestCacheSaved(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Known("m1", []string{"p/a"}, false, false)
	value := func(name string) (float64, bool) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, mt := range mf.GetMetric() {
					if mt.GetLabel()[0].GetValue() == "m1" {
						return mt.GetCounter().GetValue(), true
					}
				}
			}
		}
		return 0, false
	}
	for _, name := range []string{"streamgate_cache_savings_usd_total", "streamgate_cache_loss_usd_total"} {
		if v, ok := value(name); !ok || v != 0 {
			t.Errorf("%s{model=m1} before any request: got %v (present %v), want 0", name, v, ok)
		}
	}
	m.CacheSaved("m1", 0.5)
	m.CacheSaved("m1", 0.25)
	m.CacheSaved("m1", -0.125)
	m.CacheSaved("m1", 0)
	if s, _ := value("streamgate_cache_savings_usd_total"); s != 0.75 {
		t.Errorf("savings: got %v, want 0.75", s)
	}
	if l, _ := value("streamgate_cache_loss_usd_total"); l != 0.125 {
		t.Errorf("loss: got %v, want 0.125", l)
	}
	if n := testing.AllocsPerRun(1000, func() { m.CacheSaved("m1", 0.001) }); n != 0 {
		t.Errorf("got %v allocs per request, want 0", n)
	}
	var none *Metrics
	none.CacheSaved("m1", 1) // nil Metrics ignore calls
}
