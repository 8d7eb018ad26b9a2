package quota

import (
	"context"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/usd"
)

// Leases. With Redis, a key (a set of subjects) admitted often on this
// replica is admitted from a lease: a block of requests and of each
// budget that this replica took in one admitScript call, counted in Redis
// as if admitted then, and handed out locally, one request and one
// estimate at a time, without a round trip. A burst of one busy key then
// waits for no Redis call, and no request waits for another's: the
// waiting behind one round trip and the waking of hundreds of requests at
// once are what made a limited key slower than an unlimited one under a
// burst (issue 35).
//
// A lease is asked for in the background, never by a request: when the
// key is admitted at leaseMinRate or more a second and its lease runs low
// (under half of the last grant) or is older than half its life. It asks
// for leaseAhead seconds of the key's recent rate. Redis grants it only
// far from the limits (admitScript): at most an eighth of the rpm room
// and of what each budget has left, and nothing when there is less than
// leaseFloor requests of room or estimates left. Near a limit every
// request is thus decided in Redis, one by one, as without leases.
//
// What a lease costs in accuracy, documented in the package comment:
//   - a request admitted from a lease counts in the rpm minute in which
//     the lease was granted, at most leaseLife earlier;
//   - its tpm is the one Redis checked at the grant, at most leaseLife old;
//   - what a lease holds but has not handed out counts as spent for the
//     other replicas until it is given back (when it expires, leaseLife
//     after its last grant, or at Close): they may refuse early by the
//     unused part of the leases, each at most an eighth of the room left
//     when it was granted. A lease never admits past a limit: every
//     request it hands out was counted in Redis before.
const (
	// leaseLife is how long a grant may be handed out.
	leaseLife = 2 * time.Second
	// leaseMinRate is the admissions a second of one key from which
	// this replica leases.
	leaseMinRate = 16
	// leaseAhead is the seconds of the recent rate one lease asks for.
	leaseAhead = 2
	// leaseMax bounds the requests one lease asks for.
	leaseMax = 4096
	// leaseFloor: fewer requests of room, or estimates left in a budget,
	// grant no lease (admitScript).
	leaseFloor = 64
	// leaseRetry is how long a refused or failed lease call keeps the key
	// from asking again.
	leaseRetry = time.Second
)

// lease is what this replica holds for one key's subjects (its
// signature: hash tag, Redis keys and limits).
type lease struct {
	mu sync.Mutex
	// what is left to hand out: requests (counted in the rpm buckets
	// when rpm is set), and µ$ per subject with a budget
	n      int64
	rpm    bool
	usd    []int64
	minute int64     // the rpm minute the requests left were counted in
	until  time.Time // when what is left expires
	size   int64     // the last grant's requests
	asking bool
	retry  time.Time // no ask before
	dead   bool      // forgotten by the sweeper: a grant to it is given back at once

	// admissions a second, this second's and the last
	sec       int64
	cur, prev int64
	used      time.Time

	// what giving back needs
	tag      string
	rpmBase  []string // the bases of the subjects with an rpm
	counters []string // per subject, its budget counter ("" none)
}

// leases is the replica's leases by signature.
type leases struct {
	mu     sync.RWMutex
	m      map[signature]*lease
	closed bool           // no lease is asked for after Close
	wg     sync.WaitGroup // the asks in flight
	stop   chan struct{}  // ends the sweeper
	done   chan struct{}
}

// signature names the lease of t's subjects: the same Redis keys (hash
// tag, bases, budget counters) and the same limits. A map key made
// without allocating: an admission has at most maxSubjects subjects.
type signature struct {
	tag  string
	n    int
	subs [maxSubjects]sigSub
}

type sigSub struct {
	base, counter string
	rpm, tpm      int
	usd           float64
}

// maxSubjects: a key, its team, the key's budget for the model.
const maxSubjects = 3

// signatureOf is t's signature; ok false when t has more subjects than
// a signature holds (then no lease).
func signatureOf(t *Ticket, subs []Subject) (sig signature, ok bool) {
	if len(subs) > maxSubjects {
		return sig, false
	}
	sig.tag, sig.n = t.tag, len(subs)
	for i, s := range subs {
		sig.subs[i] = sigSub{base: t.subs[i].base, counter: t.subs[i].counter, rpm: s.RPM, tpm: s.TPM}
		if s.Budget.USD > 0 { // not a NaN, which no key would equal
			sig.subs[i].usd = s.Budget.USD
		}
	}
	return sig, true
}

// leaseOf returns the lease of sig, made for t's subjects if new.
func (q *Quota) leaseOf(sig signature, t *Ticket) *lease {
	q.ls.mu.RLock()
	l := q.ls.m[sig]
	q.ls.mu.RUnlock()
	if l != nil {
		return l
	}
	q.ls.mu.Lock()
	defer q.ls.mu.Unlock()
	l = q.ls.m[sig]
	if l == nil {
		if q.ls.m == nil {
			q.ls.m = make(map[signature]*lease)
		}
		l = &lease{tag: t.tag, usd: make([]int64, len(t.subs)), counters: make([]string, len(t.subs))}
		for i, h := range t.subs {
			if h.rpm {
				l.rpm = true
				l.rpmBase = append(l.rpmBase, h.base)
			}
			l.counters[i] = h.counter
		}
		q.ls.m[sig] = l
	}
	return l
}

// count notes one admission at now; l.mu held.
func (l *lease) count(now time.Time) {
	s := now.Unix()
	switch {
	case s == l.sec:
	case s == l.sec+1:
		l.prev, l.cur = l.cur, 0
	default:
		l.prev, l.cur = 0, 0
	}
	l.sec = s
	l.cur++
	l.used = now
}

// take admits t from l when what is left covers one request and est µ$ of
// each budget; it reports whether it did. l.mu held.
func (q *Quota) take(l *lease, t *Ticket, est int64, now time.Time) bool {
	if now.After(l.until) {
		q.giveBack(l)
		return false
	}
	if l.n < 1 {
		return false
	}
	for i, c := range l.counters {
		if c != "" && l.usd[i] < est {
			return false
		}
	}
	l.n--
	for i, c := range l.counters {
		if c != "" {
			l.usd[i] -= est
			t.subs[i].held = est
		}
	}
	return true
}

// giveBack queues what l holds unused for write-back and empties it.
// l.mu held.
func (q *Quota) giveBack(l *lease) {
	if l.n > 0 && l.rpm {
		for _, b := range l.rpmBase {
			q.enqueue(delta{key: b + "rpm:" + itoa(l.minute), tag: l.tag, kind: kindBucket, n: -l.n})
		}
	}
	for i, c := range l.counters {
		if c != "" && l.usd[i] > 0 {
			q.enqueue(delta{key: c, tag: l.tag, kind: kindBudget, n: -l.usd[i]})
		}
		l.usd[i] = 0
	}
	l.n = 0
}

// admitLeased admits t from its lease when it can, and asks for a lease
// in the background when the key is busy and its lease low. It reports
// whether t was admitted.
func (q *Quota) admitLeased(t *Ticket, subs []Subject, est float64, now time.Time) bool {
	sig, ok := signatureOf(t, subs)
	if !ok {
		return false
	}
	e := usd.Micro(est)
	l := q.leaseOf(sig, t)
	l.mu.Lock()
	for l.dead { // forgotten by the sweeper meanwhile
		l.mu.Unlock()
		l = q.leaseOf(sig, t)
		l.mu.Lock()
	}
	l.count(now)
	ok = q.take(l, t, e, now)
	ask := !l.asking && !now.Before(l.retry) && max(l.cur, l.prev) >= leaseMinRate &&
		(l.n*2 < l.size || l.until.Sub(now) < leaseLife/2 || !ok)
	var want int64
	if ask {
		l.asking = true
		want = min(max(l.cur, l.prev)*leaseAhead, leaseMax)
	}
	l.mu.Unlock()
	if ask {
		q.ls.mu.Lock()
		if q.ls.closed {
			l.mu.Lock()
			l.asking = false
			l.mu.Unlock()
		} else {
			q.ls.wg.Go(func() { q.askLease(l, subs, e, want) })
		}
		q.ls.mu.Unlock()
	}
	return ok
}

// retake admits t from its lease, if it holds one that can, without
// counting t again in the key's rate.
func (q *Quota) retake(t *Ticket, subs []Subject, est float64, now time.Time) bool {
	sig, ok := signatureOf(t, subs)
	if !ok {
		return false
	}
	q.ls.mu.RLock()
	l := q.ls.m[sig]
	q.ls.mu.RUnlock()
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return q.take(l, t, usd.Micro(est), now)
}

// askLease asks Redis for want requests of l's subjects, each estimated
// est µ$, and adds what is granted to l.
func (q *Quota) askLease(l *lease, subs []Subject, est, want int64) {
	now := q.now()
	t := &Ticket{q: q, tag: l.tag, subs: make([]held, len(subs))}
	for i, s := range subs {
		t.subs[i] = held{id: s.id(), name: s.Name, tpm: s.TPM > 0, rpm: s.RPM > 0}
	}
	q.bases(t, subs)
	for i := range subs {
		if l.counters[i] != "" {
			t.subs[i].counter = l.counters[i]
			t.subs[i].hold = q.holdKey(t.subs[i].base)
		}
	}
	c := newCall(t, subs, now, est, want)
	minute := now.UnixMilli() / windowMS
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	var v []int64
	var err error
	for i, s := range subs { // as an admission: the counter reconciled first (shared with one in flight)
		if err == nil && l.counters[i] != "" {
			start, end := budget.Window(s.Budget.Period, now)
			err = q.reconcileOnce(ctx, l.counters[i], t.subs[i].id, start, end, now, false)
		}
	}
	if err == nil {
		v, err = q.run(ctx, c)
	}
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asking = false
	if err != nil || v[0] != 1 {
		if err != nil {
			q.void(t) // it may have run
		}
		l.retry = now.Add(leaseRetry)
		return
	}
	g := v[7]
	if l.rpm && l.minute != minute {
		q.giveBack(l) // requests counted in another minute
	}
	l.minute = minute
	l.n += g
	l.size = g
	for i := range l.counters {
		if l.counters[i] != "" {
			l.usd[i] += v[8+i]
		}
	}
	l.until = now.Add(leaseLife)
	if l.dead {
		q.giveBack(l)
	}
}

// sweeper gives back what expired leases hold, every half lease life,
// until Close.
func (q *Quota) sweeper() {
	defer close(q.ls.done)
	tick := time.NewTicker(leaseLife / 2)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			q.sweepLeases(q.now(), false)
		case <-q.ls.stop:
			return
		}
	}
}

// closeLeases stops the asks and the sweeper and gives back every lease
// (to be written back by the flusher, still running).
func (q *Quota) closeLeases() {
	q.ls.mu.Lock()
	q.ls.closed = true
	q.ls.mu.Unlock()
	close(q.ls.stop)
	<-q.ls.done
	q.ls.wg.Wait()
	q.sweepLeases(q.now(), true)
}

// sweepLeases gives back what expired leases hold, and forgets leases
// unused for a while. closing gives back every lease.
func (q *Quota) sweepLeases(now time.Time, closing bool) {
	q.ls.mu.Lock()
	defer q.ls.mu.Unlock()
	for sig, l := range q.ls.m {
		l.mu.Lock()
		if closing || now.After(l.until) {
			q.giveBack(l)
		}
		if !l.asking && now.Sub(l.used) > 10*leaseLife {
			l.dead = true
			delete(q.ls.m, sig)
		}
		l.mu.Unlock()
	}
}
