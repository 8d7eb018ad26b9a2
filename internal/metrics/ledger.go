package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamgate/streamgate/internal/usage"
)

// ledgerCollector exports the usage ledger writer's counters, read once per
// scrape: what a database outage holds in memory and what it lost.
type ledgerCollector struct {
	stats                                    func() usage.Stats
	pending, written, dropped, failedInserts *prometheus.Desc
}

// RegisterLedger registers on reg the collectors of the ledger writer whose
// counters stats returns: streamgate_usage_pending_entries,
// streamgate_usage_written_total, streamgate_usage_dropped_total{reason}
// (full: past the writer's MaxPending while the store was down; closed:
// recorded after shutdown began) and streamgate_usage_failed_inserts_total.
func RegisterLedger(reg prometheus.Registerer, stats func() usage.Stats) {
	reg.MustRegister(&ledgerCollector{
		stats:         stats,
		pending:       prometheus.NewDesc("streamgate_usage_pending_entries", "Usage entries accepted and not yet stored (queued, or waiting for the store to come back).", nil, nil),
		written:       prometheus.NewDesc("streamgate_usage_written_total", "Usage entries stored.", nil, nil),
		dropped:       prometheus.NewDesc("streamgate_usage_dropped_total", "Usage entries lost: reason=full past the writer's backlog limit while the store was down, reason=closed recorded after shutdown began.", []string{"reason"}, nil),
		failedInserts: prometheus.NewDesc("streamgate_usage_failed_inserts_total", "Batch inserts into the store that failed (their entries are retried).", nil, nil),
	})
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.written
	ch <- c.dropped
	ch <- c.failedInserts
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending))
	ch <- prometheus.MustNewConstMetric(c.written, prometheus.CounterValue, float64(s.Written))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.DroppedFull), "full")
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.Dropped), "closed")
	ch <- prometheus.MustNewConstMetric(c.failedInserts, prometheus.CounterValue, float64(s.FailedInserts))
}
