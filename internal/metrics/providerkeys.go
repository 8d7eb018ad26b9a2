package metrics

import "github.com/prometheus/client_golang/prometheus"

// ProviderKeyState is one provider API key's state at a scrape, by its
// name (never the secret).
type ProviderKeyState struct {
	Provider, Key string
	Inflight      float64 // attempts holding the key now
	Acquired      float64 // attempts that took the key
	Refused       float64 // times its rpm/tpm passed it over
	Benches       float64 // 429s that benched it
	Benched       float64 // 1 while benched
	Disabled      float64 // 1 once a 401/403 disabled it
}

// RegisterProviderKeys adds the provider key pools' series
// (providers[].api_keys), labelled provider and key, read from states at
// each scrape: every configured key is present from the start.
func RegisterProviderKeys(reg prometheus.Registerer, states func() []ProviderKeyState) {
	if reg == nil {
		return
	}
	l := []string{"provider", "key"}
	reg.MustRegister(&providerKeyCollector{
		requests: prometheus.NewDesc("streamgate_provider_key_requests_total", "Upstream attempts made with each provider API key (a pool's key, by its name).", l, nil),
		refused:  prometheus.NewDesc("streamgate_provider_key_refused_total", "Times a provider key was passed over because its rpm or tpm was reached.", l, nil),
		benches:  prometheus.NewDesc("streamgate_provider_key_benches_total", "429 answers that benched a provider key until its Retry-After.", l, nil),
		inflight: prometheus.NewDesc("streamgate_provider_key_inflight", "Upstream attempts holding each provider key now.", l, nil),
		benched:  prometheus.NewDesc("streamgate_provider_key_benched", "1 while a provider key rests after a 429.", l, nil),
		disabled: prometheus.NewDesc("streamgate_provider_key_disabled", "1 once the provider refused a key with 401/403: it takes no more requests until POST /admin/routes/{provider}/reset or a restart.", l, nil),
		states:   states,
	})
}

type providerKeyCollector struct {
	requests, refused, benches, inflight, benched, disabled *prometheus.Desc
	states                                                  func() []ProviderKeyState
}

func (c *providerKeyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.refused, c.benches, c.inflight, c.benched, c.disabled} {
		ch <- d
	}
}

func (c *providerKeyCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.states() {
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, s.Acquired, s.Provider, s.Key)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, s.Refused, s.Provider, s.Key)
		ch <- prometheus.MustNewConstMetric(c.benches, prometheus.CounterValue, s.Benches, s.Provider, s.Key)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, s.Inflight, s.Provider, s.Key)
		ch <- prometheus.MustNewConstMetric(c.benched, prometheus.GaugeValue, s.Benched, s.Provider, s.Key)
		ch <- prometheus.MustNewConstMetric(c.disabled, prometheus.GaugeValue, s.Disabled, s.Provider, s.Key)
	}
}
