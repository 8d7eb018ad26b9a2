package sim

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"hash"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Prompt caching, as the providers report it (see the package
// documentation, "Prompt caching"): a request's prompt is read as a
// sequence of canonical bytes, in the order the provider reads it, with a
// checkpoint (the prompt tokens so far and a hash of the bytes so far) at
// each place a cache entry may start or end. The cache holds the hashes of
// prefixes seen before, per API key, model and dialect.

// Prompt cache lifetimes: Anthropic's two cache_control ttl values, and
// the lifetime of OpenAI's and Gemini's automatic caches (OpenAI: "cleared
// after 5-10 minutes of inactivity"). A hit refreshes an entry.
const (
	cacheTTL5m = 5 * time.Minute
	cacheTTL1h = time.Hour
)

// cacheStep is the granularity of OpenAI's automatic caching: a hit covers
// the first CacheMinTokens tokens and then whole steps of 128 tokens. The
// sim's Gemini dialect uses the same steps (Gemini documents none).
const cacheStep = 128

// DefaultPromptCacheEntries bounds a Server's prompt cache when
// Options.PromptCacheEntries is 0.
const DefaultPromptCacheEntries = 1 << 17

// checkpoint is a prefix of a prompt that the cache can keep or find.
type checkpoint struct {
	tokens int      // prompt tokens of the prefix
	sum    [32]byte // SHA-256 of the prefix's canonical bytes
}

// cacheQuery is what one request offers the prompt cache.
type cacheQuery struct {
	points []checkpoint
	// breaks are, for Anthropic, the checkpoints that carry cache_control,
	// in order, with their ttl; nil means automatic caching (OpenAI,
	// Gemini): every checkpoint is kept and the longest known one is read.
	breaks []breakpoint
	// lookback is how many checkpoints before a breakpoint are looked up
	// too (Anthropic: about 20 content blocks).
	lookback int
}

type breakpoint struct {
	at  int // index in points
	ttl time.Duration
}

// cacheUsage is what the cache did for one request, in prompt tokens.
type cacheUsage struct {
	read    int
	write5m int // written with the 5-minute lifetime
	write1h int // written with the 1-hour lifetime
}

func (u cacheUsage) written() int { return u.write5m + u.write1h }

// apiKey is the credential a request authenticates with (x-api-key,
// x-goog-api-key, the Authorization bearer token, Gemini's key
// parameter), "" when none: the prompt cache's owner, as caches are per
// organisation (Anthropic, OpenAI) or project (Gemini) at the providers.
func apiKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return r.URL.Query().Get("key")
}

// promptCache is the Server's prompt cache: SHA-256 keys of (owner,
// prefix) with an expiry, bounded by an LRU order. The zero value is not
// usable; see newPromptCache.
type promptCache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *cacheEntry, most recently used first
	entries map[[32]byte]*list.Element
}

type cacheEntry struct {
	key     [32]byte
	ttl     time.Duration
	expires time.Time
}

func newPromptCache(max int) *promptCache {
	if max <= 0 {
		max = DefaultPromptCacheEntries
	}
	return &promptCache{max: max, order: list.New(), entries: map[[32]byte]*list.Element{}}
}

// cacheNamespace hashes what separates caches: the dialect (provider), the
// model and the API key.
func cacheNamespace(dialect, model, key string) [32]byte {
	h := sha256.New()
	for _, s := range []string{dialect, model, key} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var ns [32]byte
	h.Sum(ns[:0])
	return ns
}

func entryKey(ns [32]byte, sum [32]byte) [32]byte {
	var b [64]byte
	copy(b[:32], ns[:])
	copy(b[32:], sum[:])
	return sha256.Sum256(b[:])
}

// hit reports whether key is cached and alive at now, refreshing it.
// Callers hold c.mu.
func (c *promptCache) hit(key [32]byte, now time.Time) bool {
	el, ok := c.entries[key]
	if !ok {
		return false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.entries, key)
		return false
	}
	e.expires = now.Add(e.ttl)
	c.order.MoveToFront(el)
	return true
}

// put caches key for ttl (never shortening a longer lifetime it has).
// Callers hold c.mu.
func (c *promptCache) put(key [32]byte, ttl time.Duration, now time.Time) {
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*cacheEntry)
		e.ttl = max(e.ttl, ttl)
		if exp := now.Add(ttl); exp.After(e.expires) {
			e.expires = exp
		}
		c.order.MoveToFront(el)
		return
	}
	for len(c.entries) >= c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).key)
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, ttl: ttl, expires: now.Add(ttl)})
}

// apply looks q up in the cache of namespace ns and stores what it
// writes, at now; prefixes shorter than min tokens are neither read nor
// written. Anthropic (q.breaks set): the read is the longest cached prefix
// found at a breakpoint or up to q.lookback checkpoints before one; the
// write is every breakpoint's prefix beyond it, each segment counted under
// the ttl of the breakpoint that ends it. Automatic (OpenAI, Gemini): the
// read is the longest cached checkpoint; there is no write to report.
func (c *promptCache) apply(ns [32]byte, q *cacheQuery, min int, now time.Time) cacheUsage {
	var u cacheUsage
	if q == nil || len(q.points) == 0 {
		return u
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if q.breaks == nil {
		for i := len(q.points) - 1; i >= 0; i-- {
			if p := q.points[i]; p.tokens >= min && c.hit(entryKey(ns, p.sum), now) {
				u.read = p.tokens
				break
			}
		}
		for _, p := range q.points {
			if p.tokens >= min {
				c.put(entryKey(ns, p.sum), cacheTTL5m, now)
			}
		}
		return u
	}
	for _, b := range q.breaks {
		if q.points[b.at].tokens < min {
			continue
		}
		for j := b.at; j >= 0 && j >= b.at-q.lookback; j-- {
			if p := q.points[j]; p.tokens >= min && c.hit(entryKey(ns, p.sum), now) {
				u.read = max(u.read, p.tokens)
				break
			}
		}
	}
	prev := u.read
	for _, b := range q.breaks {
		p := q.points[b.at]
		if p.tokens < min {
			continue
		}
		if p.tokens > prev {
			if b.ttl == cacheTTL1h {
				u.write1h += p.tokens - prev
			} else {
				u.write5m += p.tokens - prev
			}
			prev = p.tokens
		}
		c.put(entryKey(ns, p.sum), b.ttl, now)
	}
	return u
}

// prefixHasher reads a prompt as canonical bytes and tokens, recording
// checkpoints: by mark (Anthropic's block boundaries) or, with step set,
// every step tokens from next on (OpenAI's and Gemini's automatic
// caching), inside texts too.
type prefixHasher struct {
	h      hash.Hash
	tokens int
	step   int // 0: checkpoints by mark only
	next   int // the token count of the next automatic checkpoint
	points []checkpoint
	// The run of text being read: texts read one after the other (with
	// bytes of no tokens between them) count as one text.
	runBase, ascii, other int
}

func newPrefixHasher() *prefixHasher { return &prefixHasher{h: sha256.New()} }

// automatic makes checkpoints every step tokens, the first at first.
func (p *prefixHasher) automatic(first, step int) {
	p.step, p.next = step, first
}

func (p *prefixHasher) point(tokens int) {
	var c checkpoint
	c.tokens = tokens
	p.h.Sum(c.sum[:0])
	p.points = append(p.points, c)
}

// mark records a checkpoint at the current position and returns its index.
func (p *prefixHasher) mark() int {
	p.point(p.tokens)
	return len(p.points) - 1
}

// fixed reads bytes that count tokens as a whole (a canonical block, a
// message's role, an image). Bytes with tokens end the run of text.
func (p *prefixHasher) fixed(b []byte, tokens int) {
	p.h.Write(b)
	if tokens == 0 {
		return
	}
	p.tokens += tokens
	p.runBase, p.ascii, p.other = p.tokens, 0, 0
	for p.step > 0 && p.tokens >= p.next {
		p.point(p.next)
		p.next += p.step
	}
}

// text reads a text counting its tokens as estimateTokens counts the run
// it continues, so an automatic checkpoint can fall inside it: at the
// first character of the token that reaches the count.
func (p *prefixHasher) text(s string) {
	from := 0
	for i := 0; i < len(s); {
		size := 1
		if s[i] >= utf8.RuneSelf {
			_, size = utf8.DecodeRuneInString(s[i:])
			p.other++
		} else {
			p.ascii++
		}
		i += size
		if p.step > 0 && p.runBase+(p.ascii+3)/4+p.other >= p.next {
			p.h.Write([]byte(s[from:i]))
			from = i
			p.point(p.next)
			p.next += p.step
		}
	}
	p.h.Write([]byte(s[from:]))
	p.tokens = p.runBase + (p.ascii+3)/4 + p.other
}

// canonicalJSON re-encodes a JSON value so that key order and white space
// do not matter while any change of content does: objects with sorted
// keys, numbers as written, strings as encoding/json escapes them. Keys
// named in drop are left out of the top-level object and of the objects of
// its "content" array (cache_control, which marks a prefix but is not part
// of it). Invalid JSON is returned as it is.
func canonicalJSON(raw []byte, drop ...string) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	if m, ok := v.(map[string]any); ok && len(drop) > 0 {
		dropKeys(m, drop)
		if content, ok := m["content"].([]any); ok {
			for _, c := range content {
				if cm, ok := c.(map[string]any); ok {
					dropKeys(cm, drop)
				}
			}
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

func dropKeys(m map[string]any, keys []string) {
	for _, k := range keys {
		delete(m, k)
	}
}
