package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestNamesAndRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	s := m.Stream("gpt", "openai/gpt")
	s.TTFT(time.Millisecond)
	s.ITL(time.Millisecond)
	s.ChunkOverhead(time.Microsecond)
	s.End(time.Millisecond, 50)
	m.RequestOverhead("gpt", "openai/gpt", time.Microsecond)
	m.Request("gpt", "openai/gpt", 200)
	m.Usage("gpt", 10, 20, 0.5)
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
			if want := map[string]float64{"input": 10, "output": 20}[kind]; mt.GetCounter().GetValue() != want {
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
