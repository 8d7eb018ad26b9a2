// Package quota admits a request against its key's rate limits (rpm, tpm)
// and budget, and those of its key's team and its key's budget for the
// model asked for (its subjects, AdmitAll), in one step before the upstream
// call: counted against all of them or, when one refuses, against none, and settles it (actual
// cost, tokens) after the response has ended without waiting on anything.
// Without Redis it counts in process (ratelimit.Local, budget.Local); with
// Redis the admission is one script call, shared with the admissions of
// the same hash tag (key, or team) queued meanwhile, in one round trip
// shared with all of them (pipeliner), and the settles
// of every request of the replica are written back in batches by one
// goroutine, so Redis is never on the path after the upstream call.
//
// # Leases
//
// A key admitted at leaseMinRate or more a second on one replica is
// admitted there from a lease (lease.go): a block of its requests and of
// each of its budgets, counted in Redis by one script call as if admitted
// then, and handed out locally without a round trip; the next block is
// asked for in the background before this one runs out. Redis grants
// leases only far from the limits (at most an eighth of the room, none
// under leaseFloor requests or estimates of it), so near a limit every
// request is decided in Redis as before, and a lease never admits past a
// limit. What it costs: a leased request counts in the rpm minute its
// lease was granted in and passes the tpm Redis checked then (both at
// most leaseLife old), and the unused part of a replica's lease counts as
// spent for the other replicas until it is given back (leaseLife after
// its last grant, or at Close), so they may refuse early by that much. A
// refusal from Redis is taken back when this replica's own lease can
// admit the request.
//
// # Redis down
//
// When an admission call fails (down, or slower than redisguard.CallTimeout
// from when its round trip was sent) the replica decides alone: requests are counted by the local limiter and
// ledger (the ledger reloaded from the usage store when the outage starts)
// and their counts (requests, tokens, actual cost) are kept as deltas. The
// flusher retries every retryEvery; once every delta is written back, Redis
// decides again. Write-back is idempotent: each batch carries the replica's
// id and a sequence number, and the script that applies it first sets a
// marker (SET NX, kept markerTTL), so a batch resent after a timeout whose
// first copy did reach Redis is not counted twice.
//
// Every subject is counted alike: what follows of a key holds of a team
// (its spend is its keys' spend, R the replicas serving any of them) and
// of a key×model budget.
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
// An admission call that timed out, or whose caller gave up on it, may
// still run in Redis (a slow or paused server runs what it already
// received). Its budget hold is voided
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
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
	// flushTimeout bounds one write-back pipeline (off the request path),
	// or the call timeout when that is longer (Options.CallTimeout: a
	// replica that gives its admissions more time gives its write-backs
	// as much before it counts Redis down).
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

// Limits of one subject (a key, its team, or the key's use of one model);
// zero values mean none.
type Limits struct {
	RPM, TPM int
	Budget   budget.Limit
}

func (l Limits) rate() ratelimit.Limits { return ratelimit.Limits{RPM: l.RPM, TPM: l.TPM} }

func (l Limits) none() bool { return !(l.Budget.USD > 0) && l.RPM <= 0 && l.TPM <= 0 }

// Scopes of a Subject.
const (
	ScopeKey   = "key"   // a key's own limits
	ScopeTeam  = "team"  // the limits of the key's team, shared by its keys
	ScopeModel = "model" // a key's budget for one model
)

// Subject is one set of limits a request is admitted against: its key's,
// its team's, its key's budget for the model asked for. Admit counts a
// request against all of its subjects or none.
type Subject struct {
	Scope string // ScopeKey, ScopeTeam or ScopeModel
	// Name is the key's name (ScopeKey, ScopeModel) or the team's.
	Name string
	// Model is the model of a ScopeModel subject.
	Model string
	Limits
}

// id names s in the local counters and in the SpentFunc dispatch: a key's
// own name (as before teams), a team or a key×model behind a NUL, which
// no key name holds.
func (s Subject) id() string {
	switch s.Scope {
	case ScopeTeam:
		return "\x00team\x00" + s.Name
	case ScopeModel:
		return "\x00model\x00" + s.Name + "\x00" + s.Model
	}
	return s.Name
}

// Refusal is Admit's answer on its rate limits: Allowed, or the subject
// (an index into the subjects passed) whose rpm or tpm refused.
type Refusal struct {
	ratelimit.Decision
	Subject int
}

// clamp mirrors ratelimit's cap on limits (2^32: count·window stays exact
// in Lua's float64).
func clampLimit(n int) int64 { return int64(min(max(n, 0), 1<<32)) }

// ModelSpentFunc returns what key spent on model since a window's start,
// from the usage ledger.
type ModelSpentFunc func(ctx context.Context, key, model string, since time.Time) (float64, error)

// Options of New.
type Options struct {
	// Client shares the counts between replicas (redisguard.NewClient); nil
	// counts in process only.
	Client redis.UniversalClient
	// Spent reads a key's spend in a window from the usage ledger; nil:
	// nothing spent before.
	Spent budget.SpentFunc
	// SpentTeam reads a team's spend (its keys' entries, by the ledger's
	// team column); nil: nothing spent before.
	SpentTeam budget.SpentFunc
	// SpentModel reads a key's spend on one model; nil: nothing spent before.
	SpentModel ModelSpentFunc
	// Logger gets the outage's two lines; nil discards them.
	Logger *slog.Logger
	// Replica names this process in its write-back batches; empty: random.
	Replica string
	// Prefix of every Redis key; empty: "sg:". Tests set their own.
	Prefix string
	// CallTimeout bounds one admission round trip, from when it is sent
	// (time queued behind the round trip in flight is not counted; when
	// that one fails, the queued calls fail with it at once); 0 means
	// redisguard.CallTimeout.
	// Tests of sharing between replicas on a loaded machine set more, so
	// that a slow call does not turn into the outage path they do not test;
	// a write-back is then given as long (it is otherwise bounded by
	// flushTimeout).
	CallTimeout time.Duration
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
	pipe    *pipeliner // the admission calls' round trips; nil without Redis

	ch   chan delta
	kick chan struct{}
	mu   sync.Mutex
	over map[string]*agg // settles that found the queue full
	stop chan struct{}
	done chan struct{}
	once sync.Once // closes the leases
	// stopOnce closes stop
	stopOnce sync.Once

	holds atomic.Uint64 // numbers the hold keys

	rmu   sync.Mutex
	recon map[string]*flight // budget counters reconciled by this replica

	ls leases // lease.go; with Redis
}

// New returns a Quota; with opts.Client its flusher goroutine runs until Close.
func New(opts Options) *Quota {
	spent := spentBySubject(opts)
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	q := &Quota{client: opts.Client, rl: ratelimit.NewLocal(), lb: budget.NewLocal(spent), spent: spent,
		replica: opts.Replica, prefix: opts.Prefix, now: time.Now, timeout: cmp.Or(opts.CallTimeout, redisguard.CallTimeout),
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
		q.pipe = newPipeliner(q.client)
		q.ch = make(chan delta, queueLen)
		q.kick = make(chan struct{}, 1)
		q.stop = make(chan struct{})
		q.done = make(chan struct{})
		go q.flusher()
		q.ls.stop = make(chan struct{})
		q.ls.done = make(chan struct{})
		go q.sweeper()
	}
	return q
}

// Close writes back what is queued (for at most a second when Redis does
// not answer) and stops the flusher and the admissions' pipeliner (an
// admission after Close decides locally). It does not close the client.
func (q *Quota) Close() {
	if q.client == nil {
		return
	}
	q.once.Do(q.closeLeases)
	if q.pipe != nil {
		q.pipe.close()
	}
	q.stopOnce.Do(func() { close(q.stop) })
	<-q.done
}

// Degraded reports whether Redis is counted unreachable and this replica
// decides alone, and why ("" when not); false without Redis.
func (q *Quota) Degraded() (bool, string) { return q.guard.Degraded() }

// Shared reports whether the counts are shared through Redis.
func (q *Quota) Shared() bool { return q.client != nil }

// spentBySubject is the SpentFunc of the local ledger and of the
// reconciliations: it reads a subject id's spend (Subject.id) from the
// Options' SpentFunc of its scope.
func spentBySubject(opts Options) budget.SpentFunc {
	return func(ctx context.Context, id string, since time.Time) (float64, error) {
		rest, ok := strings.CutPrefix(id, "\x00team\x00")
		if ok {
			if opts.SpentTeam == nil {
				return 0, nil
			}
			return opts.SpentTeam(ctx, rest, since)
		}
		if rest, ok = strings.CutPrefix(id, "\x00model\x00"); ok {
			key, model, _ := strings.Cut(rest, "\x00")
			if opts.SpentModel == nil {
				return 0, nil
			}
			return opts.SpentModel(ctx, key, model, since)
		}
		if opts.Spent == nil {
			return 0, nil
		}
		return opts.Spent(ctx, id, since)
	}
}

// Ticket is an admitted request's hold until Settle. A nil *Ticket is valid
// (nothing to settle).
type Ticket struct {
	q    *Quota
	done atomic.Bool
	tag  string // the hash tag of every Redis key of the admission, "{…}"
	subs []held
}

// held is what one subject of a Ticket counted.
type held struct {
	id   string // Subject.id
	name string // for errors
	tpm  bool
	rpm  bool
	base string // the subject's Redis prefix, within the ticket's hash tag
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
// is AdmitAll with the key as the only subject.
func (q *Quota) Admit(ctx context.Context, key string, l Limits, est float64) (*Ticket, ratelimit.Decision, error) {
	t, r, err := q.AdmitAll(ctx, []Subject{{Scope: ScopeKey, Name: key, Limits: l}}, est)
	return t, r.Decision, err
}

// AdmitAll checks and counts one request against every subject (the key,
// its team, the key's budget for the model): the rpm of each, its tpm
// (tokens counted by earlier Settles) and est USD reserved against each
// budget. The request is counted against all of them or, refused by one,
// against none. It returns the ticket to settle, or a refusal: a Refusal
// that is not Allowed (naming the subject whose rate refused), or a
// *budget.Exceeded error (its Scope, Key and Model name the subject).
// Rates are checked before budgets, subjects in the order given. Other
// errors: an unknown budget period, a failed SpentFunc, ctx ended; the
// request was then not counted. With Redis it is one round trip, one
// script over every subject (a first request per subject and window adds
// one for the ledger reconciliation); Redis failing is no error (see the
// package comment).
//
// With Redis, every key of one admission shares one hash tag (one cluster
// slot): the team's when a subject is a team, else the key's. A key that
// joins or leaves a team thus starts its rate minute afresh and reloads its
// budget counter from the ledger.
func (q *Quota) AdmitAll(ctx context.Context, subs []Subject, est float64) (*Ticket, Refusal, error) {
	allowed := Refusal{Decision: ratelimit.Decision{Allowed: true}}
	live := make([]Subject, 0, len(subs))
	pos := make([]int, 0, len(subs)) // live[i] is subs[pos[i]]
	for i, s := range subs {
		if s.none() {
			continue
		}
		if s.Budget.USD > 0 && s.Budget.Period != budget.Month && s.Budget.Period != budget.Day && s.Budget.Period != budget.Total {
			return nil, Refusal{}, fmt.Errorf("budget: %s %q: unknown period %q (want %q, %q or %q)", s.Scope, s.Name, s.Budget.Period, budget.Month, budget.Day, budget.Total)
		}
		live = append(live, s)
		pos = append(pos, i)
	}
	if len(live) == 0 {
		return nil, allowed, nil
	}
	index := func(i int) int { return pos[i] }
	t := &Ticket{q: q, subs: make([]held, len(live))}
	for i, s := range live {
		t.subs[i] = held{id: s.id(), name: s.Name, tpm: s.TPM > 0, rpm: s.RPM > 0}
	}
	if q.client == nil {
		t, r, err := q.admitLocal(ctx, t, live, est)
		r.Subject = index(r.Subject)
		return t, r, err
	}
	q.bases(t, live)
	now := q.now()
	for i, s := range live {
		if s.Budget.USD > 0 {
			start, _ := budget.Window(s.Budget.Period, now)
			t.subs[i].counter = t.subs[i].base + "b:" + s.Budget.Period + ":" + window(s.Budget.Period, start)
		}
	}
	if q.guard.IsDown() {
		t, r, err := q.admitDown(ctx, t, live, est, now)
		r.Subject = index(r.Subject)
		return t, r, err
	}
	if q.admitLeased(t, live, est, now) {
		for _, h := range t.subs {
			if h.rpm {
				q.rl.Count(h.id) // this replica's share, for an outage
			}
		}
		return t, allowed, nil
	}
	for i := range t.subs {
		if t.subs[i].counter != "" {
			t.subs[i].hold = q.holdKey(t.subs[i].base)
		}
	}
	r, err := q.admitRedis(ctx, t, live, est, now)
	var ex *budget.Exceeded
	var le errLoad
	if (err == nil && !r.Allowed) || errors.As(err, &ex) {
		// Refused in Redis, maybe for what this replica's lease took
		// meanwhile: a request the lease can admit is not refused.
		if q.retake(t, live, est, now) {
			r, err = allowed, nil
		}
	}
	switch {
	case err == nil, errors.As(err, &ex):
		if r.Allowed && err == nil {
			for _, h := range t.subs {
				if h.rpm {
					q.rl.Count(h.id) // this replica's share, for an outage
				}
			}
		}
		r.Subject = index(r.Subject)
		return ticketIf(t, r, err), r, err
	case errors.As(err, &le):
		return nil, Refusal{}, le.err
	case ctx.Err() != nil:
		q.void(t) // given up on after its call may have been sent
		return nil, Refusal{}, fmt.Errorf("quota: admit %s %q: %w", live[0].Scope, live[0].Name, context.Cause(ctx))
	}
	q.fail(err)
	q.void(t)
	t, r, err = q.admitDown(ctx, t, live, est, now)
	r.Subject = index(r.Subject)
	return t, r, err
}

// holdKey names a new hold key of an admission call under a subject's
// base: this replica's, numbered.
func (q *Quota) holdKey(base string) string {
	return base + "h:" + q.replica + ":" + strconv.FormatUint(q.holds.Add(1), 10)
}

// void voids the holds of t's admission call, which may still run in
// Redis (admitScript): released if it ran, counting nothing if it runs
// later.
func (q *Quota) void(t *Ticket) {
	for _, h := range t.subs {
		if h.hold != "" {
			q.enqueue(delta{key: h.hold, aux: h.counter, tag: t.tag, kind: kindVoid})
		}
	}
}

// bases sets the ticket's hash tag and each subject's Redis prefix. A key
// alone keeps the prefix it had before teams, "{k:<hash>}:"; with a team
// every subject lives under the team's tag, "{t:<hash>}:", the key's
// under "k:<hash>:" there, a key×model's under the key's "m:<hash>:".
func (q *Quota) bases(t *Ticket, subs []Subject) {
	h := func(s string) string { return redisguard.Tag(s)[1:17] }
	team := ""
	for _, s := range subs {
		if s.Scope == ScopeTeam {
			team = s.Name
		}
	}
	var root, keyRoot string
	if team != "" {
		t.tag = "{t:" + h(team) + "}"
		root = q.prefix + t.tag + ":"
	}
	for i, s := range subs {
		if s.Scope == ScopeTeam {
			t.subs[i].base = root
			continue
		}
		if team == "" {
			t.tag = "{k:" + h(s.Name) + "}"
			keyRoot = q.prefix + t.tag + ":"
		} else {
			keyRoot = root + "k:" + h(s.Name) + ":"
		}
		t.subs[i].base = keyRoot
		if s.Scope == ScopeModel {
			t.subs[i].base = keyRoot + "m:" + h(s.Model) + ":"
		}
	}
}

func ticketIf(t *Ticket, r Refusal, err error) *Ticket {
	if err != nil || !r.Allowed {
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

// admitLocal decides in process: the rates first, then the budgets. A
// subject that refuses takes back what the earlier ones counted (their rpm
// count, their reservation): in process this is not one atomic step, so a
// concurrent request may see that count for a moment and be refused early,
// never late.
func (q *Quota) admitLocal(ctx context.Context, t *Ticket, subs []Subject, est float64) (*Ticket, Refusal, error) {
	undo := func(counted, reserved int) {
		for i := range counted {
			if subs[i].RPM > 0 || subs[i].TPM > 0 {
				q.rl.Uncount(t.subs[i].id)
			}
		}
		for i := range reserved {
			t.subs[i].res.Settle(ctx, 0)
		}
	}
	for i, s := range subs {
		if d, _ := q.rl.Allow(ctx, t.subs[i].id, s.rate()); !d.Allowed {
			undo(i, 0)
			return nil, Refusal{Decision: d, Subject: i}, nil
		}
	}
	for i, s := range subs {
		if !(s.Budget.USD > 0) {
			continue
		}
		res, err := q.lb.Reserve(ctx, t.subs[i].id, s.Budget, est)
		if err != nil {
			undo(len(subs), i)
			var ex *budget.Exceeded
			if errors.As(err, &ex) {
				ex.Scope, ex.Key, ex.Model = s.Scope, s.Name, s.Model
			}
			return nil, Refusal{Decision: ratelimit.Decision{Allowed: true}, Subject: i}, err
		}
		t.subs[i].res = res
	}
	return t, Refusal{Decision: ratelimit.Decision{Allowed: true}}, nil
}

// admitDown decides locally while Redis is down and keeps the request for
// write-back (its rpm now, its cost and tokens at Settle).
func (q *Quota) admitDown(ctx context.Context, t *Ticket, subs []Subject, est float64, now time.Time) (*Ticket, Refusal, error) {
	t, r, err := q.admitLocal(ctx, t, subs, est)
	if t != nil {
		minute := now.UnixMilli() / windowMS
		for _, h := range t.subs {
			if h.rpm {
				q.enqueue(delta{key: h.base + "rpm:" + strconv.FormatInt(minute, 10), tag: t.tag, kind: kindBucket, n: 1})
			}
		}
	}
	return t, r, err
}

// Settle charges the request's actual cost in USD to every budget it was
// admitted against and counts its tokens (input + output) against every
// tpm. It never waits on Redis: the deltas are queued for the flusher.
// Only the first call counts; nil does nothing.
func (t *Ticket) Settle(actual float64, tokens int) {
	if t == nil || !t.done.CompareAndSwap(false, true) {
		return
	}
	q := t.q
	tokens = min(max(tokens, 0), 1<<32)
	var minute int64
	if q.client != nil {
		minute = q.now().UnixMilli() / windowMS
	}
	for i := range t.subs {
		h := &t.subs[i]
		if h.tpm && tokens > 0 {
			q.rl.Record(context.Background(), h.id, tokens)
		}
		if h.res != nil {
			h.res.Settle(context.Background(), actual)
		}
		if q.client == nil {
			continue
		}
		if h.counter != "" {
			if d := usd.Micro(actual) - h.held; d != 0 {
				q.enqueue(delta{key: h.counter, tag: t.tag, kind: kindBudget, n: d})
			}
		}
		if h.tpm && tokens > 0 {
			q.enqueue(delta{key: h.base + "tpm:" + strconv.FormatInt(minute, 10), tag: t.tag, kind: kindBucket, n: int64(tokens)})
		}
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
