package mcp

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the MCP gateway's collectors (SPEC "Metrics"; never a key in
// a label): streamgate_mcp_tool_calls_total{server,tool,outcome} and
// streamgate_mcp_tool_call_duration_seconds{server}. A tool's counters
// exist, at 0, from the first list of its server that showed it; a tool no
// list showed is counted as tool "other".
type Metrics struct {
	calls *prometheus.CounterVec
	dur   *prometheus.HistogramVec
	seen  sync.Map // server + "\x00" + tool: its counters exist
}

// NewMetrics registers the collectors on every registerer given.
func NewMetrics(regs ...prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamgate_mcp_tool_calls_total",
			Help: "MCP tools/call requests by server, tool and outcome (ok, tool_error, error, timeout, too_large, rejected, client_gone)."},
			[]string{"server", "tool", "outcome"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamgate_mcp_tool_call_duration_seconds",
			Help:    "Duration of MCP tools/call requests through the gateway, by server.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600}},
			[]string{"server"}),
	}
	for _, r := range regs {
		if err := r.Register(m.calls); err != nil {
			return nil, err
		}
		if err := r.Register(m.dur); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Servers makes every server's "other" counters and duration exist at 0.
func (m *Metrics) Servers(names []string) {
	for _, s := range names {
		m.known(s, []string{"other"})
		m.dur.WithLabelValues(s)
	}
}

func (m *Metrics) known(server string, tools []string) {
	for _, t := range tools {
		if _, loaded := m.seen.LoadOrStore(server+"\x00"+t, struct{}{}); loaded {
			continue
		}
		for _, o := range Outcomes {
			m.calls.WithLabelValues(server, t, o)
		}
	}
}

func (m *Metrics) call(server, tool, outcome string, d time.Duration) {
	m.calls.WithLabelValues(server, tool, outcome).Inc()
	m.dur.WithLabelValues(server).Observe(d.Seconds())
}
