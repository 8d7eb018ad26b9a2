package sim

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	gwmetrics "github.com/streamgate/streamgate/internal/metrics"
)

// metrics are the simulator's collectors, registered on the Server's own
// registry (never the global one), so several simulators live in one process.
type metrics struct {
	requests   prometheus.Counter
	completed  prometheus.Counter
	cancelled  prometheus.Counter
	faults     *prometheus.CounterVec
	chunks     prometheus.Counter
	tokens     prometheus.Counter
	inflight   prometheus.Gauge
	conns      prometheus.Counter
	handshakes *prometheus.CounterVec
}

// Fault label values of streamgate_sim_faults_total.
const (
	faultFail       = "fail_status"
	faultStallFirst = "stall_first"
	faultStall      = "stall"
	faultCut        = "cut"
	faultError      = "error_event"
	faultMalformed  = "malformed"
)

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamgate_sim_requests_total",
			Help: "Requests received on the chat, messages, Gemini and embeddings endpoints (stream or not, including rejected ones).",
		}),
		completed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamgate_sim_streams_completed_total",
			Help: "Streams that ended complete (OpenAI data: [DONE], Anthropic message_stop, Gemini finishReason).",
		}),
		cancelled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamgate_sim_streams_cancelled_total",
			Help: "Streams the client went away from before the end (context cancelled or write failed).",
		}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamgate_sim_faults_total",
			Help: "Injected faults by kind.",
		}, []string{"fault"}),
		chunks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamgate_sim_chunks_total",
			Help: "Content chunks sent.",
		}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamgate_sim_tokens_total",
			Help: "Simulated completion tokens sent.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "streamgate_sim_inflight_streams",
			Help: "Streams open now, queued ones included.",
		}),
	}
	m.conns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "streamgate_sim_connections_total",
		Help: "Connections accepted (TCP; with TLS, before the handshake).",
	})
	m.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "streamgate_sim_tls_handshakes_total",
		Help: "TLS handshakes completed, by whether the session was resumed (only with --tls).",
	}, []string{"resumed"})
	m.handshakes.WithLabelValues("false")
	m.handshakes.WithLabelValues("true")
	for _, f := range []string{faultFail, faultStallFirst, faultStall, faultCut, faultError, faultMalformed} {
		m.faults.WithLabelValues(f)
	}
	reg.MustRegister(m.requests, m.completed, m.cancelled, m.faults, m.chunks, m.tokens, m.inflight, m.conns, m.handshakes,
		collectors.NewGoCollector(), gwmetrics.NewGCPauseCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
