// Package quota admits a request against its key's rate limits (rpm, tpm)
// and budget in one step before the upstream call, and settles it (actual
// cost, tokens) after the response has ended without waiting on anything.
// Without Redis it counts in process (ratelimit.Local, budget.Local); with
// Redis the admission is one script call (one round trip) and the settles
// of every request of the replica are written back in batches by one
// goroutine, so Redis is never on the path after the upstream call.
//
// # Redis down
//
// When an admission call fails (down, or slower than redisguard.CallTimeout)
// the replica decides alone: requests are counted by the local limiter and
// ledger (the ledger reloaded from the usage store when the outage starts)
// and their counts (requests, tokens, actual cost) are kept as deltas. The
// flusher retries every retryEvery; once every delta is written back, Redis
// decides again. Write-back is idempotent: each batch carries the replica's
// id and a sequence number, and the script that applies it first sets a
// marker (SET NX, kept markerTTL), so a batch resent after a timeout whose
// first copy did reach Redis is not counted twice.
//
// Worst case with Redis down for T: each replica sees its own spend and what
// the ledger held when the outage started (L0), not the other replicas'. So
// the key's spend at the end of the window is at most
//
//	budget + (R−1)·min(s·T, budget − L0) + 2R·c
//
// for R replicas spending s USD/s together, c the largest cost of one
// request: R·c in flight at the last admission, as without an outage, and
// R·c in flight when the outage began (their Redis holds are not in the
// local views); T counts until the last replica's deltas are written back
// (≤ retryEvery after Redis answers). Spend still queued in the usage
// writer at the outage's start is missing from L0 as well.
//
// An admission call that timed out may still run in Redis (a slow or
// paused server runs what it already received). Its budget hold is voided
// (admitScript's hold key); its rpm count is not, so a key may be counted
// one request too many per timed-out call: refusing early, never late.
//
// # Reconciling with the ledger
//
// The first time a replica reserves against a key's budget counter of a
// window (its start, and each period boundary), and whenever the admission
// script finds the counter missing (expired, Redis restarted), it reads the
// key's spend in the window from the SpentFunc (the usage ledger) and sets
// the counter to max(counter, ledger). Max, not the ledger: the counter also
// holds what requests in flight reserved and what settled but is still
// queued in the usage writer, which the ledger does not show yet; lowering
// it to the ledger would forget them. The price of max: a counter that
// under-counts (spend lost) and also holds reservations is raised only to
// the ledger, so those reservations are forgotten until they settle (their
// settle then takes back what they held), an under-count of at most what is
// in flight.
package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/ratelimit"
	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/usd"
)

const (
	// flushEvery is how long a settle waits at most for its batch.
	flushEvery = 5 * time.Millisecond
	// maxBatch deltas flush at once without waiting for flushEvery.
	maxBatch = 256
	// queueLen bounds the settle queue; past it settles are summed in a map.
	queueLen = 4096
	// retryEvery is how often the flusher tries Redis again while it is
	// down, or while a batch waits to be acknowledged.
	retryEvery = 100 * time.Millisecond
	// flushTimeout bounds one write-back pipeline (off the request path).
	flushTimeout = 250 * time.Millisecond
	// markerTTL keeps a batch's applied marker: a resend within it is
	// not counted again.
	markerTTL = time.Hour
	// bucketTTL keeps a rate bucket through the minute after its own.
	bucketTTL = 120
	// windowMS is ratelimit's bucket, in ms.
	windowMS = 60_000
	// pastEnd keeps a budget counter this long after its window's end, so
	// that requests in flight at the end settle into it.
	pastEnd = time.Hour
	// holdTTL keeps an admission's hold key: a void reaches Redis within
	// it (the flusher retries every retryEvery once Redis answers).
	holdTTL = 60
	// totalTTL is the idle life of a Total budget counter (each admission
	// renews it); an idle one is loaded again from the ledger.
	totalTTL = 24 * time.Hour
)

// Limits of one key; zero values mean none.
type Limits struct {
	RPM, TPM int
	Budget   budget.Limit
}

func (l Limits) rate() ratelimit.Limits { return ratelimit.Limits{RPM: l.RPM, TPM: l.TPM} }

// clamp mirrors ratelimit's cap on limits (2^32: count·window stays exact
// in Lua's float64).
func clampLimit(n int) int64 { return int64(min(max(n, 0), 1<<32)) }

// Options of New.
type Options struct {
	// Client shares the counts between replicas (redisguard.NewClient); nil
	// counts in process only.
	Client redis.UniversalClient
	// Spent reads a key's spend in a window from the usage ledger; nil:
	// nothing spent before.
	Spent budget.SpentFunc
	// Logger gets the outage's two lines; nil discards them.
	Logger *slog.Logger
	// Replica names this process in its write-back batches; empty: random.
	Replica string
	// Prefix of every Redis key; empty: "sg:". Tests set their own.
	Prefix string
}

// Quota is the admission of one replica. Safe for concurrent use; Close it.
type Quota struct {
	client  redis.UniversalClient
	rl      *ratelimit.Local
	lb      *budget.Local
	spent   budget.SpentFunc
	replica string
	prefix  string
	now     func() time.Time
	guard   redisguard.Guard
	timeout time.Duration

	ch   chan delta
	kick chan struct{}
	mu   sync.Mutex
	over map[string]*agg // settles that found the queue full
	stop chan struct{}
	done chan struct{}
	once sync.Once

	holds atomic.Uint64 // numbers the hold keys

	rmu   sync.Mutex
	recon map[string]*flight // budget counters reconciled by this replica
}

// New returns a Quota; with opts.Client its flusher goroutine runs until Close.
func New(opts Options) *Quota {
	spent := opts.Spent
	if spent == nil {
		spent = func(context.Context, string, time.Time) (float64, error) { return 0, nil }
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	q := &Quota{client: opts.Client, rl: ratelimit.NewLocal(), lb: budget.NewLocal(spent), spent: spent,
		replica: opts.Replica, prefix: opts.Prefix, now: time.Now, timeout: redisguard.CallTimeout,
		guard: redisguard.Guard{Logger: logger, ProbeEvery: retryEvery,
			Down: "quota: redis unreachable, each replica enforces limits and budgets alone and keeps its counts to write back",
			Up:   "quota: redis reachable again, counts written back, limits and budgets shared again"}}
	if q.prefix == "" {
		q.prefix = "sg:"
	}
	if q.replica == "" {
		var b [6]byte
		rand.Read(b[:])
		q.replica = hex.EncodeToString(b[:])
	}
	if q.client != nil {
		q.ch = make(chan delta, queueLen)
		q.kick = make(chan struct{}, 1)
		q.stop = make(chan struct{})
		q.done = make(chan struct{})
		go q.flusher()
	}
	return q
}

// Close writes back what is queued (for at most a second when Redis does
// not answer) and stops the flusher. It does not close the client.
func (q *Quota) Close() {
	if q.client == nil {
		return
	}
	q.once.Do(func() { close(q.stop) })
	<-q.done
}

// Degraded reports whether Redis is counted unreachable and this replica
// decides alone, and why ("" when not); false without Redis.
func (q *Quota) Degraded() (bool, string) { return q.guard.Degraded() }

// Shared reports whether the counts are shared through Redis.
func (q *Quota) Shared() bool { return q.client != nil }

// Ticket is an admitted request's hold until Settle. A nil *Ticket is valid
// (nothing to settle).
type Ticket struct {
	q    *Quota
	done atomic.Bool
	key  string
	tpm  bool
	base string // the key's Redis prefix, with its hash tag
	// budget: the local reservation (no Redis, or Redis down), the Redis
	// counter ("" without a budget) and what the admission held in it
	// (0 when admitted locally: the whole cost is then written back).
	res     *budget.Reservation
	counter string
	hold    string // the admission's hold key (admitScript)
	held    int64
}

// Admit checks and counts one request of key: its rpm, its tpm (tokens
// counted by earlier Settles) and est USD reserved against its budget. It
// returns the ticket to settle, or a refusal: a ratelimit.Decision that is
// not Allowed, or an *budget.Exceeded error. Other errors: an unknown budget
// period, a failed SpentFunc, ctx ended; the request was then not counted.
// With Redis it is one round trip (a first request per key and window adds
// one for the ledger reconciliation); Redis failing is no error (see the
// package comment).
func (q *Quota) Admit(ctx context.Context, key string, l Limits, est float64) (*Ticket, ratelimit.Decision, error) {
	rate := l.rate()
	hasBudget := l.Budget.USD > 0
	if !hasBudget && rate.RPM <= 0 && rate.TPM <= 0 {
		return nil, ratelimit.Decision{Allowed: true}, nil
	}
	if hasBudget && l.Budget.Period != budget.Month && l.Budget.Period != budget.Day && l.Budget.Period != budget.Total {
		return nil, ratelimit.Decision{}, fmt.Errorf("budget: key %q: unknown period %q (want %q, %q or %q)", key, l.Budget.Period, budget.Month, budget.Day, budget.Total)
	}
	t := &Ticket{q: q, key: key, tpm: rate.TPM > 0}
	if q.client == nil {
		return q.admitLocal(ctx, t, l, est)
	}
	t.base = q.prefix + "{k:" + redisguard.Tag(key)[1:17] + "}:"
	now := q.now()
	if hasBudget {
		start, _ := budget.Window(l.Budget.Period, now)
		t.counter = t.base + "b:" + l.Budget.Period + ":" + window(l.Budget.Period, start)
		t.hold = t.base + "h:" + q.replica + ":" + strconv.FormatUint(q.holds.Add(1), 10)
	}
	if q.guard.IsDown() {
		return q.admitDown(ctx, t, l, est, now)
	}
	d, err := q.admitRedis(ctx, t, l, est, now)
	var ex *budget.Exceeded
	var le errLoad
	switch {
	case err == nil, errors.As(err, &ex):
		if d.Allowed && err == nil && rate.RPM > 0 {
			q.rl.Count(key) // this replica's share, for an outage
		}
		return ticketIf(t, d, err), d, err
	case errors.As(err, &le):
		return nil, ratelimit.Decision{}, le.err
	case ctx.Err() != nil:
		return nil, ratelimit.Decision{}, fmt.Errorf("quota: admit key %q: %w", key, context.Cause(ctx))
	}
	q.fail(err)
	if t.hold != "" { // the call may still run in Redis: void it
		q.enqueue(delta{key: t.hold, aux: t.counter, tag: tagOf(t.base), kind: kindVoid})
	}
	return q.admitDown(ctx, t, l, est, now)
}

func ticketIf(t *Ticket, d ratelimit.Decision, err error) *Ticket {
	if err != nil || !d.Allowed {
		return nil
	}
	return t
}

// fail counts a Redis failure; the first of an outage empties the local
// ledger (it reloads from the usage store) and wakes the flusher to probe.
func (q *Quota) fail(err error) {
	if q.guard.Fail(err, q.now()) {
		q.lb.Reset()
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
}

// admitLocal decides in process: the rate first, then the budget.
func (q *Quota) admitLocal(ctx context.Context, t *Ticket, l Limits, est float64) (*Ticket, ratelimit.Decision, error) {
	d, _ := q.rl.Allow(ctx, t.key, l.rate())
	if !d.Allowed {
		return nil, d, nil
	}
	if l.Budget.USD > 0 {
		res, err := q.lb.Reserve(ctx, t.key, l.Budget, est)
		if err != nil {
			return nil, d, err
		}
		t.res = res
	}
	return t, d, nil
}

// admitDown decides locally while Redis is down and keeps the request for
// write-back (its rpm now, its cost and tokens at Settle).
func (q *Quota) admitDown(ctx context.Context, t *Ticket, l Limits, est float64, now time.Time) (*Ticket, ratelimit.Decision, error) {
	t, d, err := q.admitLocal(ctx, t, l, est)
	if t != nil && l.RPM > 0 {
		minute := now.UnixMilli() / windowMS
		q.enqueue(delta{key: t.base + "rpm:" + strconv.FormatInt(minute, 10), tag: tagOf(t.base), kind: kindBucket, n: 1})
	}
	return t, d, err
}

// Settle charges the request's actual cost in USD and counts its tokens
// (input + output) against tpm. It never waits on Redis: the deltas are
// queued for the flusher. Only the first call counts; nil does nothing.
func (t *Ticket) Settle(actual float64, tokens int) {
	if t == nil || !t.done.CompareAndSwap(false, true) {
		return
	}
	q := t.q
	tokens = min(max(tokens, 0), 1<<32)
	if t.tpm && tokens > 0 {
		q.rl.Record(context.Background(), t.key, tokens)
	}
	if t.res != nil {
		t.res.Settle(context.Background(), actual)
	}
	if q.client == nil {
		return
	}
	if t.counter != "" {
		if d := usd.Micro(actual) - t.held; d != 0 {
			q.enqueue(delta{key: t.counter, tag: tagOf(t.base), kind: kindBudget, n: d})
		}
	}
	if t.tpm && tokens > 0 {
		minute := q.now().UnixMilli() / windowMS
		q.enqueue(delta{key: t.base + "tpm:" + strconv.FormatInt(minute, 10), tag: tagOf(t.base), kind: kindBucket, n: int64(tokens)})
	}
}

// window names a budget window in its counter: its start in Unix seconds,
// or "total".
func window(period string, start time.Time) string {
	if period == budget.Total {
		return "total"
	}
	return strconv.FormatInt(start.Unix(), 10)
}

// tagOf is base's hash tag with its braces, "{k:…}".
func tagOf(base string) string {
	for i := 0; i < len(base); i++ {
		if base[i] == '{' {
			for j := i; j < len(base); j++ {
				if base[j] == '}' {
					return base[i : j+1]
				}
			}
		}
	}
	return base
}
