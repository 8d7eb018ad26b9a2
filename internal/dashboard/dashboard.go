// Package dashboard serves the gateway's live dashboard at /dashboard: one
// embedded page fed by a server-sent event a second. The figures come from
// sampling the gateway's own Prometheus registry once a second by one
// goroutine (Start), kept for the last hour in a bounded ring whether or not
// a page is open; older history, the cost of the day, the budgets and the
// request log come from the usage ledger. It asks for a login (the admin
// key, or a one-time link) unless the config opens it explicitly.
package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/sse"
	"github.com/streamgate/streamgate/internal/usage"
)

// Defaults of Options.
const (
	DefaultMaxPages = 8
	DefaultInterval = time.Second
)

// Windows the page offers; the ring of samples covers the longest.
var windows = map[string]time.Duration{"1m": time.Minute, "5m": 5 * time.Minute}

const maxWindow = 5 * time.Minute

// costEvery is how often the ledger is asked for the cost of the day, however
// many pages are open: one GROUP BY per dimension each time.
const costEvery = 5 * time.Second

// ReportFunc totals the usage ledger as usage.Report does.
type ReportFunc func(context.Context, usage.ReportQuery) ([]usage.ReportRow, error)

// Options configure a Dashboard. Only Gatherer is required.
type Options struct {
	// Gatherer is the gateway's registry, sampled once per Interval while
	// at least one page is open.
	Gatherer prometheus.Gatherer
	// Open serves the dashboard with no credential asked (the config's
	// dashboard.open); false: only after a login.
	Open bool
	// AdminKey logs in to the dashboard (the form, or a Bearer header);
	// "": only a login link (NewLoginToken) does, and without one the
	// dashboard is off (its page says it needs admin_key).
	AdminKey string
	// Throttle refuses a client that tried too many wrong admin keys, at
	// the login form and in an Authorization header alike (shared with the
	// admin API); nil: none.
	Throttle *auth.Throttle
	// Report gives the cost of the day by key and by model; nil: the page
	// shows none.
	Report ReportFunc
	// MaxPages bounds the pages open at once (event streams); 0 means
	// DefaultMaxPages. One more is answered 503.
	MaxPages int
	// Interval is the time between samplings and events; 0 means DefaultInterval.
	Interval time.Duration
	// Logger reports failed samplings and ledger queries; nil: slog.Default().
	Logger *slog.Logger
	// Models are the configured model names: a ledger row of any other
	// name joins the one "(unknown model)" row. Nil: every name is shown.
	Models []string
	// Routes reads each route's health as the router keeps it (attempts,
	// failures, state), sampled with the metrics; nil: the metrics only.
	Routes func() []RouteHealth
	// MCP reads each MCP server's health (package mcp), sampled with the
	// metrics; nil: the MCP panel shows the metrics only.
	MCP func() []MCPHealth
	// Search pages the request log (usage.Search on the ledger); nil: the
	// request log answers 404 usage_ledger_off.
	Search SearchFunc
	// Series totals the ledger per time bucket, for history older than
	// the hour kept in memory; nil: the last hour only.
	Series SeriesFunc
	// Budgets reads each key's budget and spend; nil: none shown.
	Budgets func(context.Context) ([]Budget, error)
	// TeamBudgets reads each team's budget and spend (/dashboard/teams);
	// nil: none shown.
	TeamBudgets func(context.Context) ([]TeamBudget, error)
	// Replica names this gateway among its replicas; "": the hostname.
	Replica string
	// GrafanaURL is the board that sums every replica, linked from the
	// page; "": DefaultGrafanaURL.
	GrafanaURL string
	// Savings prices what the prompt cache saved a model (the gateway
	// passes config.Price.CacheSavings at the model's current price): the
	// live figures from streamgate_tokens_total's cache_read and
	// cache_write, the ledger's through usage.ReportQuery. Nil: no savings
	// shown (null), the cache-read share still is.
	Savings SavingsFunc
}

// SavingsFunc returns what the prompt cache saved model on cacheRead and
// cacheWrite tokens, in USD; below 0 when the writes cost more than the
// reads saved.
type SavingsFunc func(model string, cacheRead, cacheWrite int64) float64

// DefaultGrafanaURL is the board of deploy/grafana as deploy/compose.yaml serves it.
const DefaultGrafanaURL = "http://127.0.0.1:3000/d/streamgate"

// MCPHealth is one MCP server's health as its listener last saw it.
type MCPHealth struct {
	Server string
	Known  bool // false until it connected or failed once
	OK     bool
	Error  string // the last failure when not OK
}

// RouteHealth is one route's health as the router keeps it. The counts
// are cumulative; the dashboard shows their increase over its window, so
// a route whose attempts fail before any answer (connect refused) shows
// its failures although no request was served by it.
type RouteHealth struct {
	Model, Route        string
	State               string // healthy, probing, ejected, or what the router calls it
	Attempts, Failures  uint64
	ConsecutiveFailures int64
	Ejections           uint64
}

// SearchFunc pages the request log as usage.Search does.
type SearchFunc func(context.Context, usage.SearchQuery) ([]usage.Entry, bool, error)

// SeriesFunc totals the ledger per bucket as usage.Series does.
type SeriesFunc func(context.Context, usage.SeriesQuery) ([]usage.Bucket, error)

// Budget is one key's budget in its current period.
type Budget struct {
	Key      string
	Period   string    // month, day or total
	Since    time.Time // the period's start (zero for total)
	LimitUSD float64
	SpentUSD float64
}

// replicaName is this gateway's name among replicas: the configured one,
// else the hostname.
func replicaName(configured string) string {
	if configured != "" {
		return configured
	}
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// Dashboard is the handler of /dashboard and the paths below it. Shutdown
// ends its event streams; Close also waits for its goroutines.
type Dashboard struct {
	gather    prometheus.Gatherer
	report    ReportFunc
	models    atomic.Pointer[map[string]bool] // nil: every name is known; SetModels replaces it
	routes    func() []RouteHealth
	mcpHealth func() []MCPHealth // Options.MCP
	search    SearchFunc
	series    SeriesFunc
	budgets   func(context.Context) ([]Budget, error)
	savings   SavingsFunc
	// teamBudgets reads the teams' budgets (teams.go).
	teamBudgets func(context.Context) ([]TeamBudget, error)
	replica     string
	grafana     string
	auth        authenticator
	maxPages    int
	interval    time.Duration
	log         *slog.Logger

	ctx    context.Context // ended by Shutdown: ledger queries stop with it
	cancel context.CancelFunc

	mu     sync.Mutex
	pages  map[*page]struct{}
	stop   chan struct{} // ends the running sampler; nil when none runs
	always bool          // Start was called: the sampler runs without pages
	closed bool
	wg     sync.WaitGroup // the sampler and ledger query goroutines

	// The sampler's state; one sampler at a time holds sampleMu (a new
	// one may start while the last one finishes its tick).
	sampleMu sync.Mutex
	samples  []*sample            // oldest first, covering maxWindow
	points   []point              // the history, one per sample
	bounds   map[string][]float64 // bucket bounds shared by the samples
	gatherOK bool                 // the last gathering worked (log a failure once)
	hour     ring                 // the last hour, one slot a sampling
	// cacheHour is the last hour of the prompt caches' tokens and savings,
	// in 10 s slots.
	cacheHour cacheRing

	costMu   sync.Mutex
	cost     *costView // nil until the first query
	budget   *budgetView
	costAt   time.Time // when the last query started
	costBusy bool
}

// page is one open event stream.
type page struct {
	window time.Duration
	auth   string      // "open" or "login": the page offers logout after a login
	ch     chan []byte // the latest event not yet written; older ones are dropped
}

// New returns a Dashboard; it samples only while a page is open until
// Start is called.
func New(opts Options) *Dashboard {
	d := &Dashboard{
		gather:      opts.Gatherer,
		report:      opts.Report,
		routes:      opts.Routes,
		mcpHealth:   opts.MCP,
		search:      opts.Search,
		series:      opts.Series,
		budgets:     opts.Budgets,
		teamBudgets: opts.TeamBudgets,
		savings:     opts.Savings,
		replica:     replicaName(opts.Replica),
		grafana:     cmp.Or(opts.GrafanaURL, DefaultGrafanaURL),
		auth:        newAuthenticator(opts.Open, opts.AdminKey, opts.Throttle),
		maxPages:    opts.MaxPages,
		interval:    opts.Interval,
		log:         opts.Logger,
		pages:       map[*page]struct{}{},
		bounds:      map[string][]float64{},
		gatherOK:    true,
	}
	if d.maxPages <= 0 {
		d.maxPages = DefaultMaxPages
	}
	if d.interval <= 0 {
		d.interval = DefaultInterval
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	if opts.Models != nil {
		d.SetModels(opts.Models)
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// NewLoginToken returns a fresh one-time login token: a browser that opens
// /dashboard?token=<it> is logged in (the login cookie, as the form sets it)
// and sent on to /dashboard without it. It works once; an earlier one not
// used yet stops working. The caller shows it to whoever started the
// gateway, as notebook servers print their login URL, and nowhere else.
func (d *Dashboard) NewLoginToken() string { return d.auth.link.issue() }

// ServeHTTP serves the page (/dashboard), its events (/dashboard/events),
// login and logout.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/dashboard", "/dashboard/":
		d.servePage(w, r)
	case "/dashboard/events":
		d.serveEvents(w, r)
	case "/dashboard/teams":
		if d.allowed(w, r) {
			d.ServeTeams(w, r)
		}
	case "/dashboard/history":
		if d.allowed(w, r) {
			d.ServeHistory(w, r)
		}
	case "/dashboard/requests":
		switch {
		case !d.allowed(w, r):
		case d.search == nil && r.Method == http.MethodGet:
			// The page asks at load: no ledger is a state to show, not an
			// error (the admin API's /admin/requests answers 404).
			writeJSON(w, map[string]any{"requests": []any{}, "page": 0, "more": false, "ledger_off": true})
		default:
			d.ServeRequests(w, r)
		}
	case "/dashboard/login":
		d.login(w, r)
	case "/dashboard/logout":
		d.logout(w, r)
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "unknown path: "+r.Method+" "+r.URL.Path)
	}
}

// Start keeps the sampler running from now until Shutdown, whether or not
// a page is open, so that a page opened later shows the hour before it.
// Its cost is one gathering of the registry a second (BenchmarkTick).
func (d *Dashboard) Start() {
	// The first sample before Start returns: requests served right after
	// it fall inside every window.
	d.tick()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.always {
		return
	}
	d.always = true
	if d.stop == nil {
		d.stop = make(chan struct{})
		d.wg.Add(1)
		go d.sampler(d.stop)
	}
}

// Shutdown ends every event stream at once and refuses new ones: a page
// must not hold the gateway's drain, which waits for open requests. The
// page's EventSource reconnects to the next gateway by itself.
func (d *Dashboard) Shutdown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.cancel()
	if d.stop != nil {
		close(d.stop)
		d.stop = nil
	}
}

// Close is Shutdown, then waits for the sampler and any ledger query.
func (d *Dashboard) Close() {
	d.Shutdown()
	d.wg.Wait()
}

var (
	errBusy   = errors.New("too many dashboard pages open")
	errClosed = errors.New("the gateway is shutting down")
)

// open registers a page and starts the sampler if it is the first.
func (d *Dashboard) open(window time.Duration, auth string) (*page, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	if len(d.pages) >= d.maxPages {
		return nil, errBusy
	}
	p := &page{window: window, auth: auth, ch: make(chan []byte, 1)}
	d.pages[p] = struct{}{}
	if d.stop == nil {
		d.stop = make(chan struct{})
		d.wg.Add(1)
		go d.sampler(d.stop)
	}
	return p, nil
}

// close forgets a page; the last one stops the sampler.
func (d *Dashboard) close(p *page) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pages, p)
	if len(d.pages) == 0 && d.stop != nil && !d.always {
		close(d.stop)
		d.stop = nil
	}
}

// sampler samples and publishes once per interval until stop closes.
func (d *Dashboard) sampler(stop <-chan struct{}) {
	defer d.wg.Done()
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		d.tick()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// tick takes one sample and sends each page its view.
func (d *Dashboard) tick() {
	d.sampleMu.Lock()
	defer d.sampleMu.Unlock()
	now := time.Now()
	mfs, err := d.gather.Gather()
	if err != nil && d.gatherOK {
		// A failing collector still leaves the others' families.
		d.log.Warn("dashboard: gather metrics", slog.String("error", err.Error()))
	}
	d.gatherOK = err == nil
	s := parse(now, mfs, d.bounds)
	if d.routes != nil {
		s.health = map[routeKey]RouteHealth{}
		for _, h := range d.routes() {
			s.health[routeKey{h.Model, h.Route}] = h
		}
	}
	if d.mcpHealth != nil {
		s.mcpHealth = d.mcpHealth()
	}
	d.mu.Lock()
	always := d.always
	d.mu.Unlock()
	// Sampled always, a late tick is a busy machine, not a gap.
	if n := len(d.samples); n > 0 && !always && now.Sub(d.samples[n-1].at) > 3*d.interval {
		// Nobody looked for a while: figures across the gap would be
		// averages labelled as the last minute. Start afresh.
		d.samples, d.points = d.samples[:0], d.points[:0]
	}
	d.samples = append(d.samples, s)
	d.points = append(d.points, pointOf(d.samples))
	d.hour.push(slotOf(d.samples))
	if n := len(d.samples); n > 1 {
		in, read, saved := cacheOf(d.samples[n-2], d.samples[n-1], d.savings)
		d.cacheHour.add(now.Unix(), in, read, saved)
	}
	if drop := len(d.samples) - int(maxWindow/d.interval) - 1; drop > 0 {
		d.samples = append(d.samples[:0], d.samples[drop:]...)
		d.points = append(d.points[:0], d.points[drop:]...)
	}
	d.refreshCost(now)

	d.mu.Lock()
	pages := make([]*page, 0, len(d.pages))
	for p := range d.pages {
		pages = append(pages, p)
	}
	d.mu.Unlock()
	type kind struct {
		window time.Duration
		auth   string
	}
	events := map[kind][]byte{}
	for _, p := range pages {
		b, ok := events[kind{p.window, p.auth}]
		if !ok {
			v := compute(d.samples, p.window, d.savings)
			d.groupUnknown(&v)
			v.Auth = p.auth
			v.History = historyOf(d.points, d.interval)
			v.Cost, v.Budgets = d.costView()
			v.Replica, v.Grafana = d.replica, d.grafana
			var err error
			if b, err = json.Marshal(v); err != nil {
				d.log.Error("dashboard: encode event", slog.String("error", err.Error()))
				return
			}
			events[kind{p.window, p.auth}] = b
		}
		// Keep only the newest event for a page that has not written the
		// last one yet: a slow page skips seconds instead of queueing them.
		select {
		case <-p.ch:
		default:
		}
		select {
		case p.ch <- b:
		default:
		}
	}
}

// refreshCost starts the ledger queries (cost of the day, budgets) when
// the last ones are costEvery old and none is running; pages show the last
// answers meanwhile. Without a page open nothing is asked.
func (d *Dashboard) refreshCost(now time.Time) {
	if d.report == nil && d.budgets == nil {
		return
	}
	d.mu.Lock()
	pages := len(d.pages)
	d.mu.Unlock()
	d.costMu.Lock()
	defer d.costMu.Unlock()
	if pages == 0 || d.costBusy || now.Sub(d.costAt) < costEvery {
		return
	}
	d.costBusy, d.costAt = true, now
	d.wg.Add(1) // the sampler's own count is held: Close cannot be past Wait
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
		defer cancel()
		c := d.queryCost(ctx, now)
		b := d.queryBudgets(ctx, now)
		d.costMu.Lock()
		defer d.costMu.Unlock()
		d.costBusy = false
		d.cost, d.budget = c, b
	}()
}

// queryCost asks the ledger for the cost of the day by key and by model;
// nil without a ledger.
func (d *Dashboard) queryCost(ctx context.Context, now time.Time) *costView {
	if d.report == nil {
		return nil
	}
	since := now.UTC().Truncate(24 * time.Hour)
	c := &costView{Since: since.Format(time.RFC3339), AsOf: now.UnixMilli()}
	byKey, err := d.report(ctx, usage.ReportQuery{Since: since, By: "key", Savings: d.savings})
	var byModel []usage.ReportRow
	if err == nil {
		byModel, err = d.report(ctx, usage.ReportQuery{Since: since, By: "model", Savings: d.savings})
	}
	d.costMu.Lock()
	last := d.cost
	d.costMu.Unlock()
	if err != nil {
		if last == nil || last.Error == "" {
			d.log.Warn("dashboard: cost of the day from the ledger", slog.String("error", err.Error()))
		}
		if last != nil {
			c.ByKey, c.ByModel, c.AsOf = last.ByKey, last.ByModel, last.AsOf
		}
		c.Error = "the ledger did not answer: " + err.Error()
		return c
	}
	c.ByKey, c.ByModel = costRows(byKey, nil, d.savings != nil), costRows(byModel, d.knownModels(), d.savings != nil)
	return c
}

// queryBudgets reads every key's budget and spend; nil without Budgets.
func (d *Dashboard) queryBudgets(ctx context.Context, now time.Time) *budgetView {
	if d.budgets == nil {
		return nil
	}
	bs, err := d.budgets(ctx)
	v := &budgetView{AsOf: now.UnixMilli(), Keys: []budgetRow{}}
	if err != nil {
		v.Error = "the ledger did not answer: " + err.Error()
		return v
	}
	for _, b := range bs {
		r := budgetRow{Key: b.Key, Period: b.Period, LimitUSD: num(b.LimitUSD), SpentUSD: num(b.SpentUSD),
			RemainingUSD: num(max(b.LimitUSD-b.SpentUSD, 0)), UsedRatio: num(ratio(b.SpentUSD, b.LimitUSD))}
		if !b.Since.IsZero() {
			r.Since = b.Since.UTC().Format(time.RFC3339)
		}
		v.Keys = append(v.Keys, r)
	}
	return v
}

func (d *Dashboard) costView() (*costView, *budgetView) {
	d.costMu.Lock()
	defer d.costMu.Unlock()
	c, b := d.cost, d.budget
	if c == nil && d.report != nil {
		c = &costView{ByKey: []costRow{}, ByModel: []costRow{}}
	}
	if b == nil && d.budgets != nil {
		b = &budgetView{Keys: []budgetRow{}}
	}
	return c, b
}

// costRows are the ledger's rows for the page; with known model names, the
// rows of every other name are summed into one unknownModel row. priced:
// the rows' savings were priced (else shown as null).
func costRows(rows []usage.ReportRow, known map[string]bool, priced bool) []costRow {
	out := make([]costRow, 0, len(rows))
	var unknown usage.ReportRow
	row := func(group string, r usage.ReportRow) costRow {
		c := costRow{Group: group, Requests: r.Requests, CostUSD: num(r.CostUSD),
			CacheReadShare: num(ratio(float64(r.CacheReadTokens), float64(r.InputTokens))), SavingsUSD: num(math.NaN())}
		if priced {
			c.SavingsUSD = num(r.SavingsUSD)
		}
		return c
	}
	for _, r := range rows {
		if known != nil && !known[r.Group] {
			unknown.Requests += r.Requests
			unknown.CostUSD += r.CostUSD
			unknown.InputTokens += r.InputTokens
			unknown.CacheReadTokens += r.CacheReadTokens
			unknown.SavingsUSD += r.SavingsUSD
			continue
		}
		out = append(out, row(r.Group, r))
	}
	if unknown.Requests > 0 {
		out = append(out, row(unknownModel, unknown))
	}
	return out
}

// SetModels replaces the configured model names (Options.Models), as a
// config reload changes them. Safe for concurrent use.
func (d *Dashboard) SetModels(names []string) {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	d.models.Store(&m)
}

// knownModels are the configured model names; nil: every name is known.
func (d *Dashboard) knownModels() map[string]bool {
	if p := d.models.Load(); p != nil {
		return *p
	}
	return nil
}

// groupUnknown folds the metric rows of unconfigured models into one:
// the gateway labels them "", parse names that unknownModel; nothing else
// to do unless the registry holds names the config does not (a reload).
func (d *Dashboard) groupUnknown(v *view) {
	known := d.knownModels()
	if known == nil {
		return
	}
	out := v.Models[:0]
	var other *modelView
	for _, m := range v.Models {
		if m.Model == unknownModel || !known[m.Model] {
			if other == nil {
				m.Model = unknownModel
				other = &m
				continue
			}
			other.RequestsPerS = num(nan0(other.RequestsPerS) + nan0(m.RequestsPerS))
			continue
		}
		out = append(out, m)
	}
	if other != nil {
		out = append(out, *other)
	}
	v.Models = out
}

func nan0(n num) float64 {
	if math.IsNaN(float64(n)) {
		return 0
	}
	return float64(n)
}

// allowed checks the dashboard's login for a JSON endpoint, refusing
// the request when it fails.
func (d *Dashboard) allowed(w http.ResponseWriter, r *http.Request) bool {
	if err := d.auth.check(r); err != nil {
		refuse(w, err)
		return false
	}
	return true
}

// serveEvents streams the page's figures, one event per interval, until
// the client goes or the gateway shuts down.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "method not allowed: use GET")
		return
	}
	if err := d.auth.check(r); err != nil {
		refuse(w, err)
		return
	}
	window := time.Minute
	if q := r.URL.Query().Get("window"); q != "" {
		var ok bool
		if window, ok = windows[q]; !ok {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", fmt.Sprintf("window %q: want 1m or 5m", q))
			return
		}
	}
	auth := "login"
	if d.auth.open {
		auth = "open"
	}
	p, err := d.open(window, auth)
	switch {
	case errors.Is(err, errBusy):
		writeError(w, http.StatusServiceUnavailable, "server_error", "dashboard_busy",
			fmt.Sprintf("too many dashboard pages open (at most %d at once): close one and reload", d.maxPages))
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "server_error", "shutting_down", err.Error())
		return
	}
	defer d.close(p)
	done := d.ctx.Done()

	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	sw := sse.NewWriter(w)
	rc := http.NewResponseController(w)
	// The connection may serve other requests after this one: no deadline
	// of ours may outlive it.
	defer rc.SetWriteDeadline(time.Time{})
	// The headers leave at once, so the page knows it is connected.
	if err := sw.Comment([]byte("streamgate dashboard")); err != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case b := <-p.ch:
			// A page that stopped reading must not hold a goroutine.
			rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := sw.Data(b); err != nil {
				return
			}
		}
	}
}

// writeError writes an OpenAI-format error object.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.NewError(typ, code, "", msg))
}
