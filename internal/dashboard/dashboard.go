// Package dashboard serves the gateway's live dashboard at /dashboard: one
// embedded page fed by a server-sent event a second. The figures come from
// sampling the gateway's own Prometheus registry while a page is open (no
// cost when nobody looks), and the cost of the day from the usage ledger. It
// asks for a login (the admin key, or a one-time link) unless the config
// opens it explicitly.
package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
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
}

// Dashboard is the handler of /dashboard and the paths below it. Shutdown
// ends its event streams; Close also waits for its goroutines.
type Dashboard struct {
	gather   prometheus.Gatherer
	report   ReportFunc
	auth     authenticator
	maxPages int
	interval time.Duration
	log      *slog.Logger

	ctx    context.Context // ended by Shutdown: ledger queries stop with it
	cancel context.CancelFunc

	mu     sync.Mutex
	pages  map[*page]struct{}
	stop   chan struct{} // ends the running sampler; nil when none runs
	closed bool
	wg     sync.WaitGroup // the sampler and ledger query goroutines

	// The sampler's state; one sampler at a time holds sampleMu (a new
	// one may start while the last one finishes its tick).
	sampleMu sync.Mutex
	samples  []*sample            // oldest first, covering maxWindow
	points   []point              // the history, one per sample
	bounds   map[string][]float64 // bucket bounds shared by the samples
	gatherOK bool                 // the last gathering worked (log a failure once)

	costMu   sync.Mutex
	cost     *costView // nil until the first query
	costAt   time.Time // when the last query started
	costBusy bool
}

// page is one open event stream.
type page struct {
	window time.Duration
	auth   string      // "open" or "login": the page offers logout after a login
	ch     chan []byte // the latest event not yet written; older ones are dropped
}

// New returns a Dashboard; it starts nothing until a page opens.
func New(opts Options) *Dashboard {
	d := &Dashboard{
		gather:   opts.Gatherer,
		report:   opts.Report,
		auth:     newAuthenticator(opts.Open, opts.AdminKey, opts.Throttle),
		maxPages: opts.MaxPages,
		interval: opts.Interval,
		log:      opts.Logger,
		pages:    map[*page]struct{}{},
		bounds:   map[string][]float64{},
		gatherOK: true,
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
	case "/dashboard/login":
		d.login(w, r)
	case "/dashboard/logout":
		d.logout(w, r)
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "unknown path: "+r.Method+" "+r.URL.Path)
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
	if len(d.pages) == 0 && d.stop != nil {
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
	if n := len(d.samples); n > 0 && now.Sub(d.samples[n-1].at) > 3*d.interval {
		// Nobody looked for a while: figures across the gap would be
		// averages labelled as the last minute. Start afresh.
		d.samples, d.points = d.samples[:0], d.points[:0]
	}
	d.samples = append(d.samples, s)
	d.points = append(d.points, pointOf(d.samples))
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
			v := compute(d.samples, p.window)
			v.Auth = p.auth
			v.History = historyOf(d.points, d.interval)
			v.Cost = d.costView()
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

// refreshCost starts a ledger query when the last one is costEvery old and
// none is running; pages show the last answer meanwhile.
func (d *Dashboard) refreshCost(now time.Time) {
	if d.report == nil {
		return
	}
	d.costMu.Lock()
	defer d.costMu.Unlock()
	if d.costBusy || now.Sub(d.costAt) < costEvery {
		return
	}
	d.costBusy, d.costAt = true, now
	d.wg.Add(1) // the sampler's own count is held: Close cannot be past Wait
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
		defer cancel()
		since := now.UTC().Truncate(24 * time.Hour)
		c := &costView{Since: since.Format(time.RFC3339), AsOf: now.UnixMilli()}
		byKey, err := d.report(ctx, usage.ReportQuery{Since: since, By: "key"})
		var byModel []usage.ReportRow
		if err == nil {
			byModel, err = d.report(ctx, usage.ReportQuery{Since: since, By: "model"})
		}
		d.costMu.Lock()
		defer d.costMu.Unlock()
		d.costBusy = false
		if err != nil {
			if d.cost == nil || d.cost.Error == "" {
				d.log.Warn("dashboard: cost of the day from the ledger", slog.String("error", err.Error()))
			}
			if d.cost != nil {
				c.ByKey, c.ByModel, c.AsOf = d.cost.ByKey, d.cost.ByModel, d.cost.AsOf
			}
			c.Error = "the ledger did not answer: " + err.Error()
		} else {
			c.ByKey, c.ByModel = costRows(byKey), costRows(byModel)
		}
		d.cost = c
	}()
}

func (d *Dashboard) costView() *costView {
	if d.report == nil {
		return nil
	}
	d.costMu.Lock()
	defer d.costMu.Unlock()
	if d.cost == nil {
		return &costView{ByKey: []costRow{}, ByModel: []costRow{}}
	}
	return d.cost
}

func costRows(rows []usage.ReportRow) []costRow {
	out := make([]costRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, costRow{Group: r.Group, Requests: r.Requests, CostUSD: num(r.CostUSD)})
	}
	return out
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
