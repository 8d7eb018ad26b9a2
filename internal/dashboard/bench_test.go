package dashboard

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamgate/streamgate/internal/metrics"
)

// BenchmarkTick is the dashboard's cost per second while a page is open:
// one gathering of the gateway's dashboard registry with 20 routes
// (metrics.DashboardRegistry), the figures over a full 5-minute ring and
// the event encoded. Nothing of it runs while no page is open.
func BenchmarkTick(b *testing.B) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	for i := range 10 {
		for j := range 2 {
			model, route := fmt.Sprintf("model-%d", i), fmt.Sprintf("provider-%d/model-%d", j, i)
			st := m.Stream(model, route)
			for k := range 100 {
				st.TTFT(time.Duration(k) * time.Millisecond)
				st.ITL(time.Duration(k) * 100 * time.Microsecond)
				st.ChunkOverhead(time.Duration(k) * time.Microsecond)
			}
			st.End(50*time.Millisecond, 80)
			m.Request(model, route, 200, metrics.OutcomeOK)
			m.Usage(model, 10, 100, 0, 0, 0.01)
		}
	}
	d := New(Options{Gatherer: m.DashboardRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p := &page{window: time.Minute, auth: "open", ch: make(chan []byte, 1)}
	d.pages[p] = struct{}{}
	// A full ring, as after five minutes.
	for range int(maxWindow / d.interval) {
		d.tick()
		<-p.ch
	}
	var size int
	b.ReportAllocs()
	for b.Loop() {
		d.tick()
		size = len(<-p.ch)
	}
	b.ReportMetric(float64(size), "event-bytes")
}

// BenchmarkSampleNoPage is the always-on cost: one sampling a second with
// no page open (gathering, parsing, the hour ring's slot), 20 routes.
func BenchmarkSampleNoPage(b *testing.B) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	for i := range 10 {
		for j := range 2 {
			model, route := fmt.Sprintf("model-%d", i), fmt.Sprintf("provider-%d/model-%d", j, i)
			st := m.Stream(model, route)
			st.TTFT(time.Duration(i+j) * time.Millisecond)
			m.Request(model, route, 200, metrics.OutcomeOK)
		}
	}
	d := New(Options{Gatherer: m.DashboardRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for range int(maxWindow / d.interval) {
		d.tick()
	}
	b.ReportAllocs()
	for b.Loop() {
		d.tick()
	}
}
