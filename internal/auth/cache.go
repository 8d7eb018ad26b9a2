package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// ErrKeyStore wraps a failure of a Source's store (the database down): the
// key could not be checked, which is the gateway's problem, not the client's.
var ErrKeyStore = errors.New("API key store unreachable")

// DefaultCacheTTL is how long a Cache keeps an answer: a key created,
// revoked or rotated is seen by every replica within it.
const DefaultCacheTTL = time.Second

// maxCached bounds a Cache; when full it starts afresh.
const maxCached = 100_000

// Cache is a Source in front of a slower one (the database): each answer,
// a key or its absence, is kept for a TTL, so the store sees at most one
// lookup per secret per TTL and a change reaches every replica within it.
// A store failure is not kept. Secrets are kept as their SHA-256 only.
type Cache struct {
	src Source
	ttl time.Duration
	mu  sync.Mutex
	m   map[[sha256.Size]byte]cached
}

type cached struct {
	p       *Principal
	err     error
	expires time.Time
}

var _ Source = (*Cache)(nil)

// NewCache returns a Cache of src keeping answers for ttl (0: DefaultCacheTTL).
func NewCache(src Source, ttl time.Duration) *Cache {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	return &Cache{src: src, ttl: ttl, m: map[[sha256.Size]byte]cached{}}
}

// Lookup answers from the cache while its answer is fresh, else from the source.
func (c *Cache) Lookup(ctx context.Context, secret string) (*Principal, error) {
	sum := sha256.Sum256([]byte(secret))
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[sum]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.p, e.err
	}
	p, err := c.src.Lookup(ctx, secret)
	if errors.Is(err, ErrKeyStore) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[sum] = cached{p: p, err: err, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return p, err
}

// Purge forgets every answer: the next lookup of each secret asks the
// source. Call it when the source says its keys changed.
func (c *Cache) Purge() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}
