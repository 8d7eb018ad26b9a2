// Package memo keeps the answers of a slow source (the database's keys and
// teams) for a TTL, in front of the request path: concurrent misses of one
// name share one call to the source, so a burst of requests that finds an
// answer expired waits for one query instead of queueing a query each
// behind the database's few connections; and a hit in the second half of
// an answer's TTL refreshes it in the background, so a name in steady use
// never waits for the source at all. An answer is never used past its TTL.
package memo

import (
	"context"
	"errors"
	"sync"
	"time"
)

// refreshTimeout bounds a background refresh (it has no request's context).
const refreshTimeout = 5 * time.Second

// Cache maps names to answers (a value or an error) kept for a TTL. The
// zero Cache is not usable: make it with New. Safe for concurrent use.
type Cache[K comparable, V any] struct {
	ttl  time.Duration
	max  int
	keep func(error) bool
	now  func() time.Time

	mu  sync.Mutex
	m   map[K]*entry[V]
	gen uint64 // Purge's count: a call begun before a Purge keeps nothing
}

type entry[V any] struct {
	v       V
	err     error
	expires time.Time
	// done is closed when the call under way for this name ends (nil: no
	// call under way); refreshing marks a background refresh.
	done       chan struct{}
	refreshing bool
	gen        uint64 // Cache.gen when its call began
}

// New returns a Cache keeping answers for ttl, at most max names (past it,
// it starts afresh). keep reports whether an answer with err is kept (a
// value always is; nil keep keeps every error): a store failure should not
// be.
func New[K comparable, V any](ttl time.Duration, max int, keep func(error) bool) *Cache[K, V] {
	if keep == nil {
		keep = func(error) bool { return true }
	}
	return &Cache[K, V]{ttl: ttl, max: max, keep: keep, now: time.Now, m: map[K]*entry[V]{}}
}

// Get returns k's answer: the kept one while fresh, else load(ctx, arg)'s
// (arg names k to the source: a secret k is the hash of, say), one call
// shared by every concurrent Get of k (each waits for it within its own
// ctx; when the call ended by its caller's context, a waiter whose own
// context is alive calls load itself). A fresh answer past half its TTL
// is refreshed by one background call of load (its context detached from
// ctx, bounded by 5 s); the answer given is the kept one.
func (c *Cache[K, V]) Get(ctx context.Context, k K, arg string, load func(context.Context, string) (V, error)) (V, error) {
	for {
		now := c.now()
		c.mu.Lock()
		e := c.m[k]
		if e != nil && e.done == nil && now.Before(e.expires) {
			v, err := e.v, e.err
			if !e.refreshing && e.expires.Sub(now) < c.ttl/2 {
				e.refreshing = true
				go c.refresh(context.WithoutCancel(ctx), k, e, arg, load)
			}
			c.mu.Unlock()
			return v, err
		}
		if e != nil && e.done != nil {
			done := e.done
			c.mu.Unlock()
			select {
			case <-done:
			case <-ctx.Done():
				var zero V
				return zero, context.Cause(ctx)
			}
			c.mu.Lock()
			v, err, purged := e.v, e.err, e.gen != c.gen
			c.mu.Unlock()
			if purged || (isCtxErr(err) && ctx.Err() == nil) {
				continue // begun before a Purge, or ended by its caller's context: again
			}
			return v, err // the shared answer, a store failure included
		}
		// The leader: this Get calls load.
		e = &entry[V]{done: make(chan struct{}), gen: c.gen}
		c.m[k] = e
		c.mu.Unlock()
		v, err := load(ctx, arg)
		c.settle(k, e, v, err)
		return v, err
	}
}

// settle ends e's call with its answer, which its waiters take: kept for
// the TTL when keep says so and no Purge came meanwhile, else dropped.
func (c *Cache[K, V]) settle(k K, e *entry[V], v V, err error) {
	c.mu.Lock()
	e.v, e.err = v, err
	e.expires = c.now().Add(c.ttl)
	if !c.keep(err) || isCtxErr(err) || e.gen != c.gen {
		e.expires = time.Time{} // expired: used by no later Get
		if c.m[k] == e {
			delete(c.m, k)
		}
	} else if len(c.m) > c.max {
		clear(c.m)
		c.m[k] = e
	}
	done := e.done
	e.done = nil
	c.mu.Unlock()
	close(done)
}

// refresh replaces e, a fresh answer past half its TTL, by load's answer;
// a failure or a Purge meanwhile leaves things as they are (e expires).
func (c *Cache[K, V]) refresh(ctx context.Context, k K, e *entry[V], arg string, load func(context.Context, string) (V, error)) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	v, err := load(ctx, arg)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.keep(err) || isCtxErr(err) || c.m[k] != e {
		e.refreshing = false
		return
	}
	c.m[k] = &entry[V]{v: v, err: err, expires: c.now().Add(c.ttl), gen: c.gen}
}

// Purge forgets every answer: the next Get of each name calls load, and
// calls under way keep nothing.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	c.gen++
	for k, e := range c.m {
		if e.done == nil {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
