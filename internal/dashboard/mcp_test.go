package dashboard

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMCPPanel: the MCP panel's figures over the window: calls per second,
// the share that failed (the server's errors and timeouts, not a tool's
// isError nor a refusal), p50/p99 durations, and each server's health.
func TestMCPPanel(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mMCPCalls}, []string{"server", "tool", "outcome"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: mMCPDuration, Buckets: []float64{.01, .1, 1}}, []string{"server"})
	reg.MustRegister(calls, dur)
	gather := func(at time.Time, health []MCPHealth) *sample {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		s := parse(at, mfs, nil)
		s.mcpHealth = health
		return s
	}
	t0 := time.Unix(1_800_000_000, 0)
	old := gather(t0, nil)
	for range 8 {
		calls.WithLabelValues("docs", "search", "ok").Inc()
		dur.WithLabelValues("docs").Observe(.005)
	}
	calls.WithLabelValues("docs", "search", "tool_error").Inc()
	calls.WithLabelValues("docs", "search", "rejected").Inc()
	calls.WithLabelValues("docs", "search", "timeout").Inc()
	calls.WithLabelValues("docs", "other", "error").Inc()
	dur.WithLabelValues("docs").Observe(.5)
	dur.WithLabelValues("docs").Observe(.5)
	now := gather(t0.Add(2*time.Second), []MCPHealth{{Server: "docs", Known: true, OK: true}, {Server: "fs", Known: true, Error: "connection refused"}})
	v := compute([]*sample{old, now}, time.Minute, nil)
	if len(v.MCP) != 2 {
		t.Fatalf("got %+v, want docs and fs", v.MCP)
	}
	d, fs := v.MCP[0], v.MCP[1]
	if d.Server != "docs" || d.Health != "ok" || d.CallsPerS != 6 || d.ErrorRatio != num(2.0/12) {
		t.Errorf("docs: got %+v, want 6 calls/s, 2 of 12 failed, healthy", d)
	}
	if float64(d.P50S) > .01 || float64(d.P99S) < .1 {
		t.Errorf("docs durations: got p50 %v, p99 %v", d.P50S, d.P99S)
	}
	if fs.Server != "fs" || fs.Health != "down" || fs.Error != "connection refused" || fs.CallsPerS != 0 {
		t.Errorf("fs: got %+v, want down with its error and no calls", fs)
	}
}
