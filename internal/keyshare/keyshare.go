// Package keyshare shares what one replica learns of its provider keys
// with every replica of the same Redis: a key benched by a 429 (until its
// Retry-After) or disabled by a 401/403 is out of service everywhere
// within one poll (Every, 100 ms), so ten replicas do not each spend a
// request to learn it; POST /admin/routes/{provider}/reset on one replica
// puts the keys back in service on all. Nothing of it is on a request's
// path: a replica publishes in the background, and learns by polling one
// version counter per provider (a GET per poll, the state read only when
// it changed). A key's secret never reaches Redis, only its name.
//
// Redis holds, per provider, a version counter and a hash, both under the
// provider's hash tag: "b:<key>" the end of a bench (Unix ms, the latest
// wins), "d:<key>" the reason of a disable, "r" the count of resets.
// While Redis fails each replica keeps what it learned alone (package
// keypool's own state), as before.
package keyshare

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/keypool"
	"github.com/streamgate/streamgate/internal/redisguard"
)

const (
	// Every is how often a replica looks for what the others published.
	Every = 100 * time.Millisecond
	// callTimeout bounds one Redis call (off the request path).
	callTimeout = time.Second
	// queueLen bounds the publications waiting to be sent; past it one is
	// dropped (the replica that saw the 429 still benches the key itself).
	queueLen = 256
)

// benchScript raises a key's bench end, and the version when it rose.
//
//	KEYS: hash, version; ARGV: field, end (Unix ms)
var benchScript = redis.NewScript(`
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > old then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('INCR', KEYS[2])
end
return 1
`)

// disableScript records a key's disable, and raises the version the first time.
//
//	KEYS: hash, version; ARGV: field, reason
var disableScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then redis.call('INCR', KEYS[2]) end
return 1
`)

// resetScript ends a provider's benches and disables and counts a reset.
//
//	KEYS: hash, version
var resetScript = redis.NewScript(`
local r = redis.call('HGET', KEYS[1], 'r') or '0'
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'r', tonumber(r) + 1)
redis.call('INCR', KEYS[2])
return 1
`)

// Options of New.
type Options struct {
	Client redis.UniversalClient
	// Pools are the provider key pools, by provider name.
	Pools map[string]*keypool.Pool
	// Prefix of every Redis key; empty: "sg:".
	Prefix string
	// Every is the poll interval; 0: Every.
	Every  time.Duration
	Logger *slog.Logger // nil discards
}

// Board is one replica's end of the shared state. Safe for concurrent use;
// Close it.
type Board struct {
	client redis.UniversalClient
	pools  map[string]*keypool.Pool
	names  []string // providers, in a fixed order
	prefix string
	every  time.Duration
	log    *slog.Logger

	out  chan publication
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	version map[string]int64 // per provider, the last version applied; -1: none yet
	resets  map[string]int64 // per provider, the reset count seen; -1: none yet
}

type publication struct {
	provider, key string
	until         time.Time // a bench; zero: a disable
	reason        string
}

// New returns a Board over opts.Pools and starts its goroutine (publish,
// then poll every opts.Every) until Close.
func New(opts Options) *Board {
	b := &Board{client: opts.Client, pools: opts.Pools, prefix: opts.Prefix, every: opts.Every, log: opts.Logger,
		out: make(chan publication, queueLen), stop: make(chan struct{}), done: make(chan struct{}),
		version: map[string]int64{}, resets: map[string]int64{}}
	if b.prefix == "" {
		b.prefix = "sg:"
	}
	if b.every <= 0 {
		b.every = Every
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	for name := range b.pools {
		b.names = append(b.names, name)
		b.version[name], b.resets[name] = -1, -1
	}
	go b.run()
	return b
}

// Close stops the goroutine after it sent what was queued (for at most a
// second). It does not close the client.
func (b *Board) Close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// keys are provider's hash and version counter.
func (b *Board) keys(provider string) []string {
	base := b.prefix + "{kp:" + redisguard.Tag(provider)[1:17] + "}:"
	return []string{base + "state", base + "ver"}
}

// Bench publishes that provider's key is benched until until (its pool's
// OnBench). It never waits.
func (b *Board) Bench(provider, key string, until time.Time) {
	b.publish(publication{provider: provider, key: key, until: until})
}

// Disable publishes that provider's key is disabled for reason (its pool's
// OnDisable). It never waits.
func (b *Board) Disable(provider, key, reason string) {
	b.publish(publication{provider: provider, key: key, reason: reason})
}

func (b *Board) publish(p publication) {
	select {
	case b.out <- p:
	default:
		b.log.Warn("provider key state not shared: queue full", "provider", p.provider, "key", p.key)
	}
}

// Reset ends provider's benches and disables for every replica (the admin
// reset): each resets its pool at its next poll. The caller resets its own
// pool itself.
func (b *Board) Reset(ctx context.Context, provider string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := resetScript.Run(ctx, b.client, b.keys(provider)).Err()
	if err == nil {
		b.mu.Lock()
		if b.resets[provider] >= 0 { // its own reset: not again at the poll
			b.resets[provider]++
		}
		b.mu.Unlock()
	}
	return err
}

func (b *Board) run() {
	defer close(b.done)
	tick := time.NewTicker(b.every)
	defer tick.Stop()
	b.poll()
	for {
		select {
		case p := <-b.out:
			b.send(p)
		case <-tick.C:
			b.poll()
		case <-b.stop:
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
				select {
				case p := <-b.out:
					b.send(p)
				default:
					return
				}
			}
			return
		}
	}
}

// send writes one publication.
func (b *Board) send(p publication) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var err error
	if p.until.IsZero() {
		err = disableScript.Run(ctx, b.client, b.keys(p.provider), "d:"+p.key, p.reason).Err()
	} else {
		err = benchScript.Run(ctx, b.client, b.keys(p.provider), "b:"+p.key, p.until.UnixMilli()).Err()
	}
	if err != nil {
		b.log.Debug("provider key state not shared", "provider", p.provider, "key", p.key, "error", err)
	}
}

// poll reads every provider's version in one pipeline and, for those that
// changed, their state, which it applies.
func (b *Board) poll() {
	if len(b.names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	vers := make([]*redis.StringCmd, len(b.names))
	_, _ = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range b.names {
			vers[i] = p.Get(ctx, b.keys(name)[1])
		}
		return nil
	})
	for i, name := range b.names {
		v, err := vers[i].Int64()
		if err == redis.Nil {
			v, err = 0, nil
		}
		if err != nil {
			continue
		}
		b.mu.Lock()
		same := b.version[name] == v
		b.mu.Unlock()
		if same {
			continue
		}
		state, err := b.client.HGetAll(ctx, b.keys(name)[0]).Result()
		if err != nil {
			continue
		}
		b.apply(name, state)
		b.mu.Lock()
		b.version[name] = v
		b.mu.Unlock()
	}
}

// apply makes provider's pool hold state: a reset counted since the last
// poll resets it first (not at the first poll: what the others did before
// this replica started is not undone here), then its benches and disables.
func (b *Board) apply(provider string, state map[string]string) {
	pool := b.pools[provider]
	r, _ := strconv.ParseInt(state["r"], 10, 64)
	b.mu.Lock()
	seen := b.resets[provider]
	b.resets[provider] = max(r, seen)
	b.mu.Unlock()
	if seen >= 0 && r > seen {
		if enabled := pool.Reset(); len(enabled) > 0 {
			b.log.Info("provider keys enabled again by another replica's reset", "provider", provider, "keys", enabled)
		}
	}
	now := time.Now()
	for f, v := range state {
		kind, key, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		switch kind {
		case "b":
			ms, err := strconv.ParseInt(v, 10, 64)
			if until := time.UnixMilli(ms); err == nil && until.After(now) {
				pool.Rest(key, until)
			}
		case "d":
			pool.Off(key, v)
		}
	}
}
