package quota

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/usd"
)

// Kinds of delta: a budget counter's (saturating, only if it exists) or a
// rate bucket's (INCRBY and TTL).
const (
	kindBudget = "b"
	kindBucket = "r"
	kindVoid   = "v" // aux: the hold's budget counter
)

// delta is one count to write back: n added to Redis key key, in the slot
// of hash tag tag.
type delta struct {
	key, tag, kind, aux string
	n                   int64
}

// agg is the sum of the deltas of one Redis key.
type agg struct {
	tag, kind, aux string
	n              int64
}

// batch is the write-back of one hash tag: frozen once built, so that a
// resend is the same batch under the same marker.
type batch struct {
	keys []string // marker, then counters
	args []any
}

// enqueue hands d to the flusher without waiting: into the queue, or, when
// it is full, summed into the overflow map (never dropped).
func (q *Quota) enqueue(d delta) {
	select {
	case q.ch <- d:
		return
	default:
	}
	q.mu.Lock()
	if q.over == nil {
		q.over = make(map[string]*agg)
	}
	add(q.over, d)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func add(m map[string]*agg, d delta) {
	a := m[d.key]
	if a == nil {
		m[d.key] = &agg{tag: d.tag, kind: d.kind, aux: d.aux, n: d.n}
		return
	}
	// Deltas are at most usd.MaxSum in size (2^53 − 1, exact in Lua):
	// a sum saturates there, in either direction.
	a.n = min(max(a.n+d.n, -usd.MaxSum), usd.MaxSum)
}

// flusher is the replica's one writer of settles: it sums the queued deltas
// per Redis key and writes them back every flushEvery (or maxBatch deltas)
// in one pipeline, one applyScript call per hash tag. A batch not
// acknowledged is kept and resent, as it is, every retryEvery; no new batch
// is built meanwhile (deltas keep summing per key), so what waits is bounded
// by the number of keys. While Redis is down the flusher is also the probe:
// when every delta is written back, Redis decides again.
func (q *Quota) flusher() {
	defer close(q.done)
	pending := make(map[string]*agg)
	var out []batch // built, not acknowledged
	var seq uint64
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed, n := false, 0
	arm := func(d time.Duration) {
		if !armed {
			timer.Reset(d)
			armed = true
		}
	}
	flush := func() {
		q.mu.Lock()
		for k, a := range q.over {
			add(pending, delta{key: k, tag: a.tag, kind: a.kind, aux: a.aux, n: a.n})
		}
		clear(q.over)
		q.mu.Unlock()
		n = 0
		for {
			if len(out) == 0 {
				out = q.build(pending, &seq)
				clear(pending)
			}
			if len(out) == 0 {
				if q.guard.IsDown() { // nothing to write: probe with a write
					if err := q.probe(); err != nil {
						q.fail(err)
						arm(retryEvery)
						return
					}
					q.guard.Recovered(q.now())
				}
				return
			}
			var err error
			if out, err = q.send(out); err != nil {
				q.fail(err)
				arm(retryEvery)
				return
			}
			if !q.guard.IsDown() {
				return
			}
			// Down until now: write back what summed meanwhile too, then
			// let Redis decide again.
			q.drain(pending)
			if len(pending) == 0 {
				q.guard.Recovered(q.now())
				return
			}
		}
	}
	for {
		select {
		case d := <-q.ch:
			add(pending, d)
			if n++; n >= maxBatch && len(out) == 0 {
				flush()
			} else {
				arm(flushEvery)
			}
		case <-q.kick:
			arm(flushEvery)
		case <-timer.C:
			armed = false
			flush()
			if q.guard.IsDown() {
				arm(retryEvery)
			}
		case <-q.stop:
			q.drain(pending)
			deadline := time.Now().Add(time.Second)
			for {
				armed = true // no timer from here on
				flush()
				q.drain(pending)
				q.mu.Lock()
				left := len(q.over)
				q.mu.Unlock()
				if (len(out) == 0 && len(pending) == 0 && left == 0) || time.Now().After(deadline) {
					timer.Stop()
					return
				}
				time.Sleep(retryEvery / 4)
			}
		}
	}
}

// drain moves what is queued into pending without waiting.
func (q *Quota) drain(pending map[string]*agg) {
	for {
		select {
		case d := <-q.ch:
			add(pending, d)
		default:
			return
		}
	}
}

// build makes one batch per hash tag of pending, numbered from *seq.
func (q *Quota) build(pending map[string]*agg, seq *uint64) []batch {
	if len(pending) == 0 {
		return nil
	}
	byTag := make(map[string]int)
	var out []batch
	for k, a := range pending {
		if a.n == 0 && a.kind != kindVoid {
			continue
		}
		i, ok := byTag[a.tag]
		if !ok {
			*seq++
			i = len(out)
			byTag[a.tag] = i
			marker := q.prefix + a.tag + ":ap:" + q.replica + ":" + strconv.FormatUint(*seq, 10)
			out = append(out, batch{keys: []string{marker},
				args: []any{int64(markerTTL / time.Second), bucketTTL, int64(usd.MaxSum)}})
		}
		out[i].keys = append(out[i].keys, k)
		out[i].args = append(out[i].args, a.kind, a.n)
		if a.kind == kindVoid {
			out[i].keys = append(out[i].keys, a.aux)
			out[i].args = append(out[i].args, "x", 0)
		}
	}
	return out
}

// send writes the batches in one pipeline and returns those not
// acknowledged, with the first error. A NOSCRIPT answer (Redis restarted,
// or a cluster node that never saw the script) is retried with EVAL.
func (q *Quota) send(out []batch) ([]batch, error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(flushTimeout, q.timeout))
	defer cancel()
	cmds := make([]*redis.Cmd, len(out))
	_, _ = q.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range out {
			cmds[i] = applyScript.EvalSha(ctx, p, b.keys, b.args...)
		}
		return nil
	})
	var left []batch
	var first error
	for i, c := range cmds {
		err := c.Err()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			err = applyScript.Run(ctx, q.client, out[i].keys, out[i].args...).Err()
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			left = append(left, out[i])
			if first == nil {
				first = err
			}
		}
	}
	return left, first
}

// probe asks Redis for a write (a PING would answer while writes are
// paused, as under CLIENT PAUSE WRITE): a key of this replica, kept a minute.
func (q *Quota) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	return q.client.Set(ctx, q.prefix+"probe:"+q.replica, 1, time.Minute).Err()
}
