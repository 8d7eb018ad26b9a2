package gateway_test

import (
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/metrics"
)

// TestZeroSeriesAtStart: a freshly started gateway's /metrics already has
// its labelled counters at 0 for every configured model (and route) and
// every reason, outcome, kind and scope, so an alert on rate() reads 0
// rather than nothing before the first fallback, hedge or refusal.
func TestZeroSeriesAtStart(t *testing.T) {
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "sim2", Kind: "sim"})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "m-hedged", Hedge: &config.Hedge{After: "400ms", Budget: 0.1}, ContinueOnCut: true,
			Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}, {Provider: "sim2", Model: "sim-fast"}}})
	e := start(t, cfg)
	text := scrape(t, e.url)
	var want []string
	for _, m := range []string{"m-sim", "m-other", "m-hedged"} {
		for _, r := range metrics.FallbackReasons {
			want = append(want, `streamgate_fallbacks_total{model="`+m+`",reason="`+r+`"} 0`)
		}
		for _, k := range []string{"input", "output", "cache_read", "cache_write"} {
			want = append(want, `streamgate_tokens_total{kind="`+k+`",model="`+m+`"} 0`)
		}
		want = append(want,
			`streamgate_cost_usd_total{model="`+m+`"} 0`,
			`streamgate_cache_savings_usd_total{model="`+m+`"} 0`,
			`streamgate_cache_loss_usd_total{model="`+m+`"} 0`,
			`streamgate_retries_total{model="`+m+`"} 0`,
			`streamgate_requests_total{code="200",model="`+m+`",outcome="ok",route="sim/sim-fast"} 0`,
			`streamgate_requests_total{code="200",model="`+m+`",outcome="error_event",route="sim/sim-fast"} 0`,
			`streamgate_requests_total{code="499",model="`+m+`",outcome="client_gone",route="sim/sim-fast"} 0`,
			`streamgate_requests_total{code="502",model="`+m+`",outcome="upstream_error",route="sim/sim-fast"} 0`,
			`streamgate_requests_total{code="504",model="`+m+`",outcome="timeout",route="sim/sim-fast"} 0`)
	}
	want = append(want, `streamgate_requests_total{code="200",model="m-hedged",outcome="ok",route="sim2/sim-fast"} 0`)
	for _, o := range metrics.HedgeOutcomes {
		want = append(want, `streamgate_hedges_total{model="m-hedged",outcome="`+o+`"} 0`)
	}
	for _, o := range metrics.ContinuationOutcomes {
		want = append(want, `streamgate_continuations_total{model="m-hedged",outcome="`+o+`"} 0`)
	}
	for _, s := range metrics.AdmissionScopes {
		want = append(want, `streamgate_admission_rejected_total{scope="`+s+`"} 0`)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("a fresh gateway's /metrics has no %s", w)
		}
	}
	// A model that neither hedges nor continues has no such series.
	for _, no := range []string{`streamgate_hedges_total{model="m-sim"`, `streamgate_continuations_total{model="m-sim"`} {
		if strings.Contains(text, no) {
			t.Errorf("/metrics has %s…, want none for a model without hedging or continuation", no)
		}
	}
}
