package quota

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// pipeMax is the most admission calls sent in one pipeline.
	pipeMax = 256
	// pipeQueue bounds the admission calls waiting for their round trip;
	// past it a caller waits for room within its own deadline.
	pipeQueue = 4096
)

// errClosed answers the admissions of a closed Quota.
var errClosed = errors.New("quota: closed")

// admission is one admitScript call waiting for its round trip.
type admission struct {
	ctx  context.Context
	keys []string
	args []any
	cmd  *redis.Cmd
	err  error         // the round trip's own failure (closed), else cmd's
	done chan struct{} // one send when cmd (or err) is set; buffered
}

var admissions = sync.Pool{New: func() any { return &admission{done: make(chan struct{}, 1)} }}

// pipeliner is the replica's one sender of admission calls (auto-
// pipelining): it takes the calls queued while its previous round trip was
// in flight and sends them all in one pipeline, so that a burst of
// admissions costs Redis and this process a few round trips instead of
// one each, queued behind the connection pool. A call alone is sent at
// once. Calls leave in the order they came and Redis runs a pipeline in
// order, so the admissions of one key are counted in arrival order.
// Each caller waits within its own context (Quota.run bounds it by
// CallTimeout): one that gives up is not sent if it has not been yet, and
// its answer, if it was, is dropped.
type pipeliner struct {
	client redis.UniversalClient
	in     chan *admission
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newPipeliner(c redis.UniversalClient) *pipeliner {
	p := &pipeliner{client: c, in: make(chan *admission, pipeQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// call runs admitScript through q's pipeliner, or in a round trip of its
// own when q has none (tests compare both).
func (q *Quota) call(ctx context.Context, keys []string, args []any) (*redis.Cmd, error) {
	if q.pipe == nil {
		return admitScript.Run(ctx, q.client, keys, args...), nil
	}
	return q.pipe.call(ctx, keys, args)
}

// call runs admitScript with keys and args in the next pipeline and
// returns its command (its reply or Redis's error), or ctx's cause when
// ctx ends first. Once the pipeliner is closed a call makes its own round
// trip (a call queued when it closed gets errClosed).
func (p *pipeliner) call(ctx context.Context, keys []string, args []any) (*redis.Cmd, error) {
	select {
	case <-p.stop:
		return admitScript.Run(ctx, p.client, keys, args...), nil
	default:
	}
	a := admissions.Get().(*admission)
	a.ctx, a.keys, a.args = ctx, keys, args
	select {
	case p.in <- a:
	case <-ctx.Done():
		a.reset()
		return nil, context.Cause(ctx)
	case <-p.stop:
		a.reset()
		return admitScript.Run(ctx, p.client, keys, args...), nil
	}
	select {
	case <-a.done:
		cmd, err := a.cmd, a.err
		a.reset()
		return cmd, err
	case <-ctx.Done():
		return nil, context.Cause(ctx) // a is the pipeliner's now: not reused
	}
}

// reset empties a and gives it back to the pool.
func (a *admission) reset() {
	*a = admission{done: a.done}
	admissions.Put(a)
}

// close stops the pipeliner: calls queued get errClosed, later ones make
// their own round trips.
func (p *pipeliner) close() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

func (p *pipeliner) run() {
	defer close(p.done)
	batch := make([]*admission, 0, pipeMax)
	var cmds []*redis.Cmd
	for {
		select {
		case a := <-p.in:
			batch = append(batch, a)
		case <-p.stop:
			for {
				select {
				case a := <-p.in:
					a.err = errClosed
					a.done <- struct{}{}
				default:
					return
				}
			}
		}
	gather: // what queued meanwhile goes in the same round trip
		for len(batch) < pipeMax {
			select {
			case a := <-p.in:
				batch = append(batch, a)
			default:
				break gather
			}
		}
		cmds = p.send(batch, cmds[:0])
		clear(batch)
		batch = batch[:0]
	}
}

// send runs the batch's live calls in one pipeline, bounded by the latest
// of their deadlines, and hands each its command. A NOSCRIPT answer (Redis
// restarted, or a cluster node that never saw the script) is sent again
// with EVAL, in a second pipeline.
func (p *pipeliner) send(batch []*admission, cmds []*redis.Cmd) []*redis.Cmd {
	live := batch[:0:len(batch)]
	var deadline time.Time
	for _, a := range batch {
		if a.ctx.Err() != nil {
			a.err = context.Cause(a.ctx) // given up on: not sent
			a.done <- struct{}{}
			continue
		}
		d, ok := a.ctx.Deadline()
		if !ok {
			d = time.Now().Add(time.Minute)
		}
		if d.After(deadline) {
			deadline = d
		}
		live = append(live, a)
	}
	if len(live) == 0 {
		return cmds
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, _ = p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for _, a := range live {
			cmds = append(cmds, admitScript.EvalSha(ctx, pl, a.keys, a.args...))
		}
		return nil
	})
	again := false
	for _, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = true
		}
	}
	if again {
		_, _ = p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i, c := range cmds {
				if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
					cmds[i] = admitScript.Eval(ctx, pl, live[i].keys, live[i].args...)
				}
			}
			return nil
		})
	}
	for i, a := range live {
		a.cmd = cmds[i]
		a.done <- struct{}{}
	}
	clear(cmds)
	return cmds[:0]
}
