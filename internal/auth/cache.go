package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/streamgate/streamgate/internal/memo"
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
// lookup per secret per TTL (concurrent lookups of one secret share it; a
// secret in steady use is looked up again in the background in the TTL's
// second half: package memo) and a change reaches every replica within
// it. A store failure is not kept. Secrets are kept as their SHA-256 only.
type Cache struct {
	lookup func(context.Context, string) (*Principal, error) // the source's, bound once
	m      *memo.Cache[[sha256.Size]byte, *Principal]
}

var _ Source = (*Cache)(nil)

// NewCache returns a Cache of src keeping answers for ttl (0: DefaultCacheTTL).
func NewCache(src Source, ttl time.Duration) *Cache {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	keep := func(err error) bool { return !errors.Is(err, ErrKeyStore) }
	return &Cache{lookup: src.Lookup, m: memo.New[[sha256.Size]byte, *Principal](ttl, maxCached, keep)}
}

// Lookup answers from the cache while its answer is fresh, else from the source.
func (c *Cache) Lookup(ctx context.Context, secret string) (*Principal, error) {
	return c.m.Get(ctx, sha256.Sum256([]byte(secret)), secret, c.lookup)
}

// Purge forgets every answer: the next lookup of each secret asks the
// source. Call it when the source says its keys changed.
func (c *Cache) Purge() { c.m.Purge() }
