package sim

import (
	"context"
	"math"
	"sync"
	"time"
)

// z99 is the standard normal quantile of 0.99.
const z99 = 2.3263478740408408

// lognormalQuantile returns the value of a lognormal distribution with the
// given median and p99 at the standard normal deviate z. A p99 at or below
// the median gives the median (a constant).
func lognormalQuantile(median, p99 time.Duration, z float64) time.Duration {
	if median <= 0 {
		return 0
	}
	if p99 <= median {
		return median
	}
	sigma := math.Log(float64(p99)/float64(median)) / z99
	return time.Duration(float64(median) * math.Exp(sigma*z))
}

// gapAt returns one inter-chunk gap: lognormal with mean itl and relative
// standard deviation jitter, at the standard normal deviate z. Lognormal
// keeps gaps positive and gives the right tail real servers show.
func gapAt(itl time.Duration, jitter, z float64) time.Duration {
	if itl <= 0 {
		return 0
	}
	if jitter <= 0 {
		return itl
	}
	s2 := math.Log1p(jitter * jitter)
	return time.Duration(float64(itl) * math.Exp(math.Sqrt(s2)*z-s2/2))
}

// pacer waits for absolute deadlines with one reusable timer, so a late
// wake-up does not push later chunks back: each deadline is computed from the
// previous deadline, never from the time a chunk was actually sent.
type pacer struct {
	ctx   context.Context
	timer *time.Timer
}

func newPacer(ctx context.Context) *pacer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{ctx: ctx, timer: t}
}

// wait blocks until deadline or until the context ends (its error is
// returned). A deadline in the past returns at once.
func (p *pacer) wait(deadline time.Time) error {
	d := time.Until(deadline)
	if d <= 0 {
		return p.ctx.Err()
	}
	// Since Go 1.23 Reset on a stopped or fired timer leaves no stale tick.
	p.timer.Reset(d)
	select {
	case <-p.timer.C:
		return nil
	case <-p.ctx.Done():
		p.timer.Stop()
		return p.ctx.Err()
	}
}

func (p *pacer) stop() { p.timer.Stop() }

// fifo is a counting semaphore that admits waiters in arrival order. A nil
// *fifo admits everyone at once (no limit).
type fifo struct {
	mu      sync.Mutex
	free    int
	waiters []chan struct{}
}

func newFIFO(n int) *fifo {
	if n <= 0 {
		return nil
	}
	return &fifo{free: n}
}

// acquire takes a slot, waiting behind earlier callers; it returns the
// context's error if the context ends first (and then holds no slot).
func (q *fifo) acquire(ctx context.Context) error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	if q.free > 0 && len(q.waiters) == 0 {
		q.free--
		q.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	q.waiters = append(q.waiters, ch)
	q.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		for i, w := range q.waiters {
			if w == ch {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				q.mu.Unlock()
				return ctx.Err()
			}
		}
		q.mu.Unlock()
		// The slot was handed over as the context ended: pass it on.
		q.release()
		return ctx.Err()
	}
}

// release frees a slot, handing it to the oldest waiter if there is one.
func (q *fifo) release() {
	if q == nil {
		return
	}
	q.mu.Lock()
	if len(q.waiters) > 0 {
		ch := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		close(ch)
	} else {
		q.free++
	}
	q.mu.Unlock()
}

// waiting returns the number of callers queued.
func (q *fifo) waiting() int {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}

// splitmix64 is a strong 64-bit mixer, used to derive independent seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
