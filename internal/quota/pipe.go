package quota

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// pipeMax is the most admission calls sent in one pipeline (and so in
	// one admitScript call).
	pipeMax = 256
	// pipeQueue bounds the admission calls waiting for their round trip;
	// past it a caller waits for room within its own deadline.
	pipeQueue = 4096
)

// errClosed answers the admissions of a closed Quota.
var errClosed = errors.New("quota: closed")

// admission is one call waiting for its round trip.
type admission struct {
	ctx   context.Context
	c     *call
	bound time.Duration // of the round trip, from its start
	v     []int64       // the call's answer, if err is nil
	err   error
	done  chan struct{} // one send when v (or err) is set; buffered
}

var admissions = sync.Pool{New: func() any { return &admission{done: make(chan struct{}, 1)} }}

// pipeliner is the replica's one sender of admission calls (auto-
// pipelining and batching): it takes the calls queued while its previous
// round trip was in flight and sends them all in one pipeline, one
// admitScript call per hash tag, so that a burst of admissions of one key
// (or of one team's keys) costs Redis and this process one script call
// and one round trip instead of one each, queued behind the connection
// pool. A call alone is sent at once. Calls leave in the order they came,
// and admitScript takes those of one tag in that order, so the admissions
// of one key are counted in arrival order.
//
// A round trip is bounded by the call timeout from when it is sent, not
// from when its calls were queued: waiting in the queue behind the round
// trip in flight does not count against Redis. What bounds that wait is
// the round trip in flight; when it fails (Redis timed out, or is gone),
// the calls queued meanwhile get its error at once rather than a round
// trip of their own, as an admission that starts after it decides locally.
// Each caller also waits within its own context: one that gives up is not
// sent if it has not been yet, and its answer, if it was, is dropped.
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

// call returns c's answer from the next pipeline, whose round trip is
// bounded by bound, or ctx's cause when ctx ends first. Once the
// pipeliner is closed a call makes its own round trip (a call queued when
// it closed gets errClosed).
func (p *pipeliner) call(ctx context.Context, c *call, bound time.Duration) ([]int64, error) {
	alone := func() ([]int64, error) {
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		return runAlone(ctx, p.client, c)
	}
	select {
	case <-p.stop:
		return alone()
	default:
	}
	a := admissions.Get().(*admission)
	a.ctx, a.c, a.bound = ctx, c, bound
	select {
	case p.in <- a:
	case <-ctx.Done():
		a.reset()
		return nil, context.Cause(ctx)
	case <-p.stop:
		a.reset()
		return alone()
	}
	select {
	case <-a.done:
		v, err := a.v, a.err
		a.reset()
		return v, err
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
	var s sender
	for {
		select {
		case a := <-p.in:
			batch = append(batch, a)
		case <-p.stop:
			p.answerQueued(errClosed)
			return
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
		if err := s.send(p.client, batch); err != nil {
			p.answerQueued(err) // queued behind a round trip that failed
		}
		clear(batch)
		batch = batch[:0]
	}
}

// answerQueued answers the calls queued now with err, without sending them.
func (p *pipeliner) answerQueued(err error) {
	for {
		select {
		case a := <-p.in:
			a.err = err
			a.done <- struct{}{}
		default:
			return
		}
	}
}

// sender sends the pipeliner's batches; its slices are reused.
type sender struct {
	live   []*admission
	groups []group
	byTag  map[string]int
}

// group is the calls of one hash tag in a batch: one admitScript call.
type group struct {
	adm   []*admission
	calls []*call
	keys  []string
	args  []any
	cmd   *redis.Cmd
}

// send runs the batch's live calls in one pipeline, one admitScript call
// per hash tag, bounded by the largest of their bounds from now, and
// hands each its answer. A NOSCRIPT answer (Redis restarted, or a
// cluster node that never saw the script) is sent again with EVAL, in a
// second pipeline. It returns the round trip's failure (not a Redis error
// reply), if any.
func (s *sender) send(client redis.UniversalClient, batch []*admission) error {
	s.live = s.live[:0]
	var bound time.Duration
	for _, a := range batch {
		if a.ctx.Err() != nil {
			a.err = context.Cause(a.ctx) // given up on: not sent
			a.done <- struct{}{}
			continue
		}
		bound = max(bound, a.bound)
		s.live = append(s.live, a)
	}
	if len(s.live) == 0 {
		return nil
	}
	if s.byTag == nil {
		s.byTag = make(map[string]int)
	}
	for _, a := range s.live {
		i, ok := s.byTag[a.c.tag]
		if !ok {
			i = len(s.groups)
			s.byTag[a.c.tag] = i
			if i < cap(s.groups) {
				s.groups = s.groups[:i+1] // its slices emptied by reset
			} else {
				s.groups = append(s.groups, group{})
			}
		}
		g := &s.groups[i]
		g.adm = append(g.adm, a)
		g.calls = append(g.calls, a.c)
	}
	defer s.reset()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_, err := client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i := range s.groups {
			g := &s.groups[i]
			g.keys, g.args = scriptArgs(g.calls)
			g.cmd = admitScript.EvalSha(ctx, pl, g.keys, g.args...)
		}
		return nil
	})
	again := false
	for _, g := range s.groups {
		if err := g.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = true
		}
	}
	if again {
		_, err = client.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i := range s.groups {
				g := &s.groups[i]
				if err := g.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
					g.cmd = admitScript.Eval(ctx, pl, g.keys, g.args...)
				}
			}
			return nil
		})
	}
	for _, g := range s.groups {
		v, err := g.cmd.Int64Slice()
		var ans [][]int64
		if err == nil {
			ans, err = answers(v, g.calls)
		}
		for j, a := range g.adm {
			if err != nil {
				a.err = err
			} else {
				a.v = ans[j]
			}
			a.done <- struct{}{}
		}
	}
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		return err
	}
	return nil
}

// reset empties s's groups for the next batch.
func (s *sender) reset() {
	for i := range s.groups {
		g := &s.groups[i]
		clear(g.adm)
		clear(g.calls)
		*g = group{adm: g.adm[:0], calls: g.calls[:0]}
	}
	s.groups = s.groups[:0]
	clear(s.byTag)
	clear(s.live)
}
