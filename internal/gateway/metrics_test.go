package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

// Paths from this package's directory (go test runs in it).
const (
	metricsDocPath = "../../docs/metrics.md"
	dashboardPath  = "../../deploy/grafana/streamgate.json"
	specFallback   = "../../../shared/SPEC.md" // the product contract beside the checkout, when there is one
)

// The secrets and key names of TestMetricsExported: none may reach a label.
const (
	metricsAppKey   = "sk-metrics-app-7c1e5d0a9b34"
	metricsRPMKey   = "sk-metrics-rpm-4f2b8e61d0c7"
	metricsWrongKey = "sk-metrics-wrong-93d0c2aa5e18"
	metricsAppName  = "metrics-app-keyname"
	metricsRPMName  = "metrics-rpm-keyname"
)

// Label names a gateway metric may carry: each has a bounded set of values.
// le and quantile are histogram and summary bounds; version, revision and
// goversion are streamgate_build_info's and go_info's, one value per binary.
var allowedLabels = map[string]bool{
	"model": true, "route": true, "code": true, "outcome": true, "kind": true, "reason": true,
	"stage": true, "scope": true, "le": true, "quantile": true, "provider": true, "key": true,
	"version": true, "revision": true, "goversion": true,
	"server": true, "tool": true, // MCP: configured servers, tools a server listed (else "other")
}

// Label values of the enumerated labels, every one a constant of the code.
var allowedValues = map[string][]string{
	"outcome": {"ok", "error_event", "client_gone", "timeout", "upstream_error", "rejected", "error", "untranslatable", // requests
		"won", "lost", "none", // hedges
		"failed",                   // continuations (and ok)
		"tool_error", "too_large"}, // MCP tool calls (and ok, error, timeout, rejected, client_gone)
	"kind":  {"input", "output", "cache_read", "cache_write"},
	"stage": {"request", "chunk"},
	"scope": {"gateway", "key", "rpm", "tpm", "budget", "team", "team_rpm", "team_tpm", "team_budget", "model_budget", "decoding"},
}

// Labels that Prometheus adds to every scraped series (the target's), which
// dashboard queries may group by although the gateway does not export them.
var targetLabels = map[string]bool{"instance": true, "job": true}

// memStore is a usage store in memory: the ledger writer's destination.
type memStore struct {
	mu sync.Mutex
	n  int
}

func (s *memStore) Insert(_ context.Context, entries []usage.Entry) error {
	s.mu.Lock()
	s.n += len(entries)
	s.mu.Unlock()
	return nil
}

// metricsConfig has one model per behaviour that a metric counts: a plain
// answer, a fallback (the first route answers 503), a continuation (the
// first route cuts the stream), a hedge (the first route stalls before its
// first token), a retry (retryURL fails once); and a key limited to one
// request a minute.
func metricsConfig(retryURL string) (*config.Config, sim.Options) {
	healthy := sim.Profile{Name: "healthy", TTFT: time.Millisecond, ITL: time.Millisecond, Tokens: 12, TokensPerChunk: 1, Lang: "en"}
	down, cut, stall := healthy, healthy, healthy
	down.Name, down.Faults = "down", sim.Faults{FailStatus: 503}
	cut.Name, cut.Faults = "cut", sim.Faults{CutAt: 6}
	stall.Name, stall.Faults = "stall", sim.Faults{StallFirst: 5 * time.Second}
	price := config.Price{Input: 1, Output: 2}
	model := func(name string, routes ...string) config.Model {
		m := config.Model{Name: name, Strategy: "fallback", ContextPolicy: "reject", Price: price}
		for _, r := range routes {
			p, mod, _ := strings.Cut(r, "/")
			m.Routes = append(m.Routes, config.Route{Provider: p, Model: mod})
		}
		return m
	}
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Timeouts.FirstToken = config.Duration(10 * time.Second) // the hedge, not this timeout, ends the stall
	cfg.Timeouts.Idle = config.Duration(time.Second)
	cfg.Timeouts.NonStream = config.Duration(10 * time.Second)
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "flaky", Kind: "openai", BaseURL: retryURL},
		config.Provider{Name: "pool", Kind: "sim", APIKeys: []config.ProviderKey{{Name: "p1", Key: "sim-pool-1"}, {Name: "p2", Key: "sim-pool-2"}}})
	cfg.Keys = []config.Key{{Name: metricsAppName, Key: metricsAppKey}, {Name: metricsRPMName, Key: metricsRPMKey, RPM: 1}}
	hedged := model("m-hedge", "sim/stall", "sim/healthy")
	hedged.Hedge = &config.Hedge{After: "20ms", Budget: 1}
	continued := model("m-cut", "sim/cut", "sim/healthy")
	continued.ContinueOnCut = true
	retried := model("m-retry", "flaky/x")
	retried.Retries = 1
	pooled := model("m-pool", "pool/healthy")
	pooled.Affinity = "session"
	cfg.Models = []config.Model{model("m-ok", "sim/healthy"), model("m-fallback", "sim/down", "sim/healthy"), continued, hedged, retried, pooled}
	return cfg, sim.Options{Profiles: []sim.Profile{healthy, down, cut, stall}, Seed: 7}
}

// TestMetricsExported runs a gateway over loopback with a real ledger
// writer, sends requests that make it count every kind of event, scrapes
// /metrics over HTTP and checks:
//   - every metric of docs/metrics.md's metrics reference is exported, with the
//     documented type and labels, and every streamgate_ metric exported is
//     documented there (so the reference cannot drift);
//   - every metric named in SPEC.md's "Metrics" section is exported (when
//     SPEC.md is found: $STREAMGATE_SPEC, or shared/SPEC.md beside the
//     checkout);
//   - labels are bounded: names from a fixed set, enumerated values from
//     theirs, model and route only configured names, never a key or a key's
//     name;
//   - every query of the Grafana dashboard names exported metrics and labels
//     (and the dashboard shows every streamgate_ metric).
func TestMetricsExported(t *testing.T) {
	retryURL, _ := failing(t, 1, "0")
	cfg, so := metricsConfig(retryURL)
	// An MCP server: its tool-call metrics exist (at 0) from the start.
	cfg.MCP.Servers = []config.MCPServer{{Name: "docs", URL: mcpUpstream(t)}}

	w := usage.NewWriter(&memStore{}, usage.WriterOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	gw, err := gateway.New(gateway.Options{Config: cfg, Recorder: w, Registry: prometheus.NewRegistry(), KeepAlive: -1, Sim: so,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		stopRun()
		t.Fatalf("gateway.New: %v", err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() {
		srv.Close()
		gw.Close()
		if err := w.Close(context.Background()); err != nil {
			t.Errorf("ledger writer Close: %v", err)
		}
		stopRun()
		<-ran
	})

	requests := []struct {
		name, key, model string
		stream           bool
		want             int
	}{
		{"stream", metricsAppKey, "m-ok", true, 200},
		{"non-stream", metricsAppKey, "m-ok", false, 200},
		{"fallback", metricsAppKey, "m-fallback", true, 200},
		{"continuation", metricsAppKey, "m-cut", true, 200},
		{"hedge", metricsAppKey, "m-hedge", true, 200},
		{"retry", metricsAppKey, "m-retry", true, 200},
		{"provider key pool", metricsAppKey, "m-pool", true, 200},
		// A model name holding a key: it must not become a label value.
		{"unknown model", metricsAppKey, "gpt-" + metricsAppKey, true, 404},
		{"wrong key", metricsWrongKey, "m-ok", true, 401},
		{"rpm first", metricsRPMKey, "m-ok", true, 200},
		{"rpm refused", metricsRPMKey, "m-ok", true, 429},
	}
	for _, rq := range requests {
		resp := do(t, "POST", srv.URL+"/v1/chat/completions", rq.key, promptBody(rq.model, rq.stream, "metrics "+rq.name))
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != rq.want {
			t.Fatalf("%s: got status %d, want %d: %s", rq.name, resp.StatusCode, rq.want, body)
		}
	}
	// Each request is counted once it ended, just after its response: wait
	// (bounded) until the last one is.
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Recorded < uint64(len(requests)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := w.Stats().Recorded; got != uint64(len(requests)) {
		t.Fatalf("ledger: got %d entries recorded, want %d", got, len(requests))
	}

	fams := scrapeFamilies(t, srv.URL)

	t.Run("events counted", func(t *testing.T) {
		for _, tc := range []struct {
			metric string
			labels map[string]string
			want   float64
		}{
			{"streamgate_requests_total", map[string]string{"model": "m-fallback", "route": "sim/healthy", "code": "200", "outcome": "ok"}, 1},
			{"streamgate_requests_total", map[string]string{"model": "", "code": "404", "outcome": "rejected"}, 1},
			{"streamgate_requests_total", map[string]string{"model": "", "code": "401", "outcome": "rejected"}, 1},
			{"streamgate_fallbacks_total", map[string]string{"model": "m-fallback", "reason": "status_5xx"}, 1},
			{"streamgate_continuations_total", map[string]string{"model": "m-cut", "outcome": "ok"}, 1},
			{"streamgate_hedges_total", map[string]string{"model": "m-hedge", "outcome": "won"}, 1},
			{"streamgate_retries_total", map[string]string{"model": "m-retry"}, 1},
			{"streamgate_provider_key_requests_total", map[string]string{"provider": "pool"}, 1},
			{"streamgate_provider_key_disabled", map[string]string{"provider": "pool", "key": "p2"}, 0},
			{"streamgate_admission_rejected_total", map[string]string{"scope": "rpm"}, 1},
			{"streamgate_usage_written_total", nil, -1}, // present; its value races the writer's flush
			{"streamgate_build_info", nil, 1},
			{"streamgate_inflight_streams", nil, 0},
		} {
			got, ok := seriesSum(fams, tc.metric, tc.labels)
			if !ok {
				t.Errorf("%s%v: no such series", tc.metric, tc.labels)
			} else if tc.want >= 0 && got != tc.want {
				t.Errorf("%s%v: got %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		}
	})

	documented := docMetrics(t)
	t.Run("documented metrics exported", func(t *testing.T) {
		for _, d := range documented {
			mf := fams[d.name]
			switch {
			case mf == nil:
				t.Errorf("docs/metrics.md documents %s, which /metrics does not export", d.name)
			case d.typ != "" && d.typ != strings.ToLower(mf.GetType().String()):
				t.Errorf("%s: docs/metrics.md says %s, /metrics exports a %s", d.name, d.typ, strings.ToLower(mf.GetType().String()))
			case d.typ != "" && !slices.Equal(d.labels, labelNames(mf)):
				t.Errorf("%s: docs/metrics.md documents labels %q, /metrics exports %q", d.name, d.labels, labelNames(mf))
			}
		}
	})

	t.Run("exported metrics documented", func(t *testing.T) {
		for name := range fams {
			if !strings.HasPrefix(name, "streamgate_") {
				continue
			}
			if i := slices.IndexFunc(documented, func(d documentedMetric) bool { return d.name == name && d.typ != "" }); i < 0 {
				t.Errorf("/metrics exports %s, which docs/metrics.md's metrics reference does not document", name)
			}
		}
	})

	t.Run("SPEC metrics exported", func(t *testing.T) {
		spec, path := specMetricsSection(t)
		if spec == "" {
			t.Logf("SPEC.md not found (set STREAMGATE_SPEC, or keep shared/SPEC.md beside the checkout at %s): its metric names are not checked; docs/metrics.md's are", path)
			return
		}
		names := specMetricNames(spec)
		if len(names) == 0 {
			t.Fatalf("%s: no streamgate_ metric named in its Metrics section", path)
		}
		for name, labels := range names {
			mf := fams[familyOf(fams, name)]
			if mf == nil {
				t.Errorf("SPEC.md names %s, which /metrics does not export", name)
				continue
			}
			for _, l := range labels {
				if !slices.Contains(labelNames(mf), l) {
					t.Errorf("SPEC.md names %s{%s}, /metrics exports it with labels %q", name, l, labelNames(mf))
				}
			}
		}
	})

	t.Run("labels bounded, no key", func(t *testing.T) {
		secrets := []string{metricsAppKey, metricsRPMKey, metricsWrongKey, metricsAppName, metricsRPMName}
		models, routes := map[string]bool{"": true}, map[string]bool{"": true}
		providers, providerKeys := map[string]bool{}, map[string]bool{}
		for _, p := range cfg.Providers {
			providers[p.Name] = true
			for _, k := range p.APIKeys {
				providerKeys[k.Name] = true
				secrets = append(secrets, k.Key)
			}
		}
		for _, m := range cfg.Models {
			models[m.Name] = true
			for _, r := range m.Routes {
				routes[r.Provider+"/"+r.Model] = true
			}
		}
		code := regexp.MustCompile(`^[1-5][0-9][0-9]$`)
		reason := regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
		for name, mf := range fams {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					n, v := l.GetName(), l.GetValue()
					for _, s := range secrets {
						if strings.Contains(v, s) {
							t.Errorf("%s{%s=%q}: a label holds the key or key name %q", name, n, v, s)
						}
					}
					var ok bool
					switch {
					case !allowedLabels[n]:
						t.Errorf("%s: label %q is not one of the bounded labels %q", name, n, slices.Sorted(maps.Keys(allowedLabels)))
						continue
					case n == "model":
						ok = models[v]
					case n == "route":
						ok = routes[v]
					case n == "provider":
						ok = providers[v]
					case n == "key": // a provider key's name (its secret is checked above)
						ok = providerKeys[v]
					case n == "server":
						ok = slices.ContainsFunc(cfg.MCP.Servers, func(s config.MCPServer) bool { return s.Name == v })
					case n == "tool": // only tools a server listed, else "other": a client cannot make values
						ok = v == "other"
					case n == "code":
						ok = code.MatchString(v)
					case n == "reason":
						ok = reason.MatchString(v)
					case allowedValues[n] != nil:
						ok = slices.Contains(allowedValues[n], v) || (n == "outcome" && v == "ok")
					default:
						ok = true // le, quantile, build labels: one set per binary
					}
					if !ok {
						t.Errorf("%s{%s=%q}: not a value of the label's bounded set", name, n, v)
					}
				}
			}
		}
	})

	t.Run("Grafana queries", func(t *testing.T) {
		exprs := dashboardQueries(t)
		if len(exprs) == 0 {
			t.Fatalf("%s: no query", dashboardPath)
		}
		shown := map[string]bool{}
		for _, q := range exprs {
			for _, problem := range checkQuery(fams, q.expr, shown) {
				t.Errorf("%s: %q: %s", q.where, q.expr, problem)
			}
		}
		for name := range fams {
			if strings.HasPrefix(name, "streamgate_") && !shown[name] {
				t.Errorf("%s: no query shows %s", dashboardPath, name)
			}
		}
	})
}

// scrapeFamilies reads /metrics over HTTP with Prometheus's own text parser.
func scrapeFamilies(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp := do(t, "GET", base+"/metrics", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: got status %d, want 200", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return fams
}

// labelNames is the sorted label names of mf's series, without the
// histogram's and summary's own (le, quantile).
func labelNames(mf *dto.MetricFamily) []string {
	set := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			set[l.GetName()] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// seriesSum adds the values of name's series whose labels include want; ok
// is false when no series matches.
func seriesSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, ok bool) {
	mf := fams[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if got[k] != v { // a missing label reads as "", as in PromQL
				match = false
			}
		}
		if !match {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, ok
}

// familyOf is the family a sample name belongs to: name itself, or name
// without the _bucket, _sum or _count suffix of a histogram or summary.
func familyOf(fams map[string]*dto.MetricFamily, name string) string {
	if fams[name] != nil {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || fams[base] == nil {
			continue
		}
		switch fams[base].GetType() {
		case dto.MetricType_HISTOGRAM:
			return base
		case dto.MetricType_SUMMARY:
			if suffix != "_bucket" {
				return base
			}
		}
	}
	return ""
}

// documentedMetric is one metric of docs/metrics.md's metrics reference: a row of
// its table (type and labels set), or a name mentioned in its prose (typ "").
type documentedMetric struct {
	name, typ string
	labels    []string // sorted
}

// docMetrics parses the section of docs/metrics.md whose heading starts with
// "## Gateway metrics": its table's rows, and the go_ and process_ metrics
// its text names.
func docMetrics(t *testing.T) []documentedMetric {
	t.Helper()
	b, err := os.ReadFile(metricsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	section, ok := mdSection(string(b), "## Gateway metrics")
	if !ok {
		t.Fatalf("docs/metrics.md: no section \"## Gateway metrics\"")
	}
	var out []documentedMetric
	seen := map[string]bool{}
	for line := range strings.Lines(section) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "| `")
		if !ok {
			continue
		}
		cells := strings.Split(rest, "|")
		if len(cells) < 3 {
			t.Fatalf("docs/metrics.md metrics table: row %q has fewer than 4 cells", line)
		}
		name, _, _ := strings.Cut(cells[0], "`")
		var labels []string
		for l := range strings.SplitSeq(cells[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		out = append(out, documentedMetric{name: name, typ: strings.TrimSpace(cells[1]), labels: labels})
		seen[name] = true
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md: no metrics table under \"## Gateway metrics\"")
	}
	for _, m := range regexp.MustCompile("`((?:go|process)_[a-z0-9_]+)`").FindAllStringSubmatch(section, -1) {
		if !seen[m[1]] {
			out = append(out, documentedMetric{name: m[1]})
			seen[m[1]] = true
		}
	}
	return out
}

// mdSection is the text under the first "## " heading starting with
// heading, up to the next "## " heading.
func mdSection(doc, heading string) (string, bool) {
	var b strings.Builder
	in, found := false, false
	for line := range strings.Lines(doc) {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, heading)
			found = found || in
			continue
		}
		if in {
			b.WriteString(line)
		}
	}
	return b.String(), found
}

// specMetricsSection is SPEC.md's "## Metrics" section and the path tried;
// "" when the file is not there.
func specMetricsSection(t *testing.T) (section, path string) {
	t.Helper()
	path = os.Getenv("STREAMGATE_SPEC")
	if path == "" {
		path, _ = filepath.Abs(specFallback)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", path
	}
	section, ok := mdSection(string(b), "## Metrics")
	if !ok {
		t.Fatalf("%s: no \"## Metrics\" section", path)
	}
	return section, path
}

// specMetricNames is every streamgate_ metric the text names, with the
// labels written after it as {a,b}.
func specMetricNames(text string) map[string][]string {
	out := map[string][]string{}
	for _, m := range regexp.MustCompile(`(streamgate_[a-z0-9_]+)(?:\{([a-z_, ]*)\})?`).FindAllStringSubmatch(text, -1) {
		var labels []string
		for l := range strings.SplitSeq(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		out[m[1]] = append(out[m[1]], labels...)
	}
	return out
}

// dashboardQuery is one PromQL query of the dashboard and where it is.
type dashboardQuery struct{ where, expr string }

// dashboardQueries is every panel target's expr (rows' nested panels
// included) and every query variable's query.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []dashboardQuery
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", dashboardPath, err)
			}
			for _, tg := range p.Targets {
				out = append(out, dashboardQuery{where: "panel " + p.Title + " target " + tg.RefID, expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string // a string, or {"query": "..."} since Grafana 9
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct{ Query string }
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("%s: variable %s: query: %v", dashboardPath, v.Name, err)
			}
			q = obj.Query
		}
		out = append(out, dashboardQuery{where: "variable " + v.Name, expr: q})
	}
	return out
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promVar      = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	labelValues  = regexp.MustCompile(`^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
)

// checkQuery returns the problems of one dashboard query against the
// exported families: a metric that is not exported, a label that none of
// the query's metrics carries (instance and job, added by Prometheus,
// excepted), a histogram's buckets used other than through
// histogram_quantile over a rate summed by le. It adds the families the
// query reads to shown.
func checkQuery(fams map[string]*dto.MetricFamily, expr string, shown map[string]bool) []string {
	var problems []string
	if m := labelValues.FindStringSubmatch(strings.TrimSpace(expr)); m != nil {
		mf := fams[m[1]]
		if mf == nil {
			return []string{"label_values of " + m[1] + ", which /metrics does not export"}
		}
		if l := m[2]; !slices.Contains(labelNames(mf), l) && !targetLabels[l] {
			problems = append(problems, "label_values of label "+l+", which "+m[1]+" does not carry")
		}
		shown[m[1]] = true
		return problems
	}
	// Grafana variables become a neutral word, strings empty: neither is a
	// metric or a label.
	e := promVar.ReplaceAllString(expr, "5m")
	e = promString.ReplaceAllString(e, `""`)

	labels := map[string]bool{"le": false} // le only when a histogram's buckets are read
	for k := range targetLabels {
		labels[k] = true
	}
	var metrics []string
	for _, id := range promIdent.FindAllString(e, -1) {
		if !strings.HasPrefix(id, "streamgate_") && !strings.HasPrefix(id, "go_") && !strings.HasPrefix(id, "process_") {
			continue
		}
		fam := familyOf(fams, id)
		if fam == "" {
			problems = append(problems, "metric "+id+" is not exported")
			continue
		}
		shown[fam] = true
		metrics = append(metrics, id)
		for _, l := range labelNames(fams[fam]) {
			labels[l] = true
		}
		if strings.HasSuffix(id, "_bucket") {
			labels["le"] = true
		}
	}
	if len(metrics) == 0 {
		problems = append(problems, "reads no exported metric")
	}
	for _, m := range promSelector.FindAllStringSubmatch(e, -1) {
		fam := familyOf(fams, m[1])
		if fam == "" {
			continue // reported above, or a function's braces
		}
		for _, matcher := range strings.Split(m[2], ",") {
			parts := strings.FieldsFunc(matcher, func(r rune) bool { return r == '=' || r == '!' || r == '~' })
			if len(parts) == 0 {
				continue
			}
			if name := strings.TrimSpace(parts[0]); name != "" && !slices.Contains(labelNames(fams[fam]), name) && !targetLabels[name] {
				problems = append(problems, "matcher on label "+name+", which "+m[1]+" does not carry")
			}
		}
	}
	for _, m := range promGrouping.FindAllStringSubmatch(e, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labels[l] {
				problems = append(problems, "groups by label "+l+", which none of its metrics carries")
			}
		}
	}
	// Quantiles the Prometheus way: each _bucket read inside
	// histogram_quantile, over a rate, summed by le.
	buckets := strings.Count(e, "_bucket")
	inQuantile := 0
	for _, arg := range callArgs(e, "histogram_quantile") {
		inQuantile += strings.Count(arg, "_bucket")
		if !strings.Contains(arg, "rate(") {
			problems = append(problems, "histogram_quantile of buckets that are not a rate()")
		}
		g := promGrouping.FindStringSubmatch(arg)
		if g == nil || !slices.Contains(strings.Fields(strings.ReplaceAll(g[1], ",", " ")), "le") {
			problems = append(problems, "histogram_quantile of buckets not summed by le")
		}
	}
	if buckets != inQuantile {
		problems = append(problems, "reads _bucket series outside histogram_quantile")
	}
	return problems
}

// callArgs is the argument text of every call of fn in e.
func callArgs(e, fn string) []string {
	var out []string
	for i := strings.Index(e, fn+"("); i >= 0; {
		start := i + len(fn) + 1
		depth, j := 1, start
		for ; j < len(e) && depth > 0; j++ {
			switch e[j] {
			case '(':
				depth++
			case ')':
				depth--
			}
		}
		out = append(out, e[start:j-1])
		next := strings.Index(e[j:], fn+"(")
		if next < 0 {
			break
		}
		i = j + next
	}
	return out
}
