// Package redisguard is the health of a Redis the gateway can do without:
// while it fails, callers decide locally (rate limits, budgets) instead of
// waiting on it. The first failure of an outage logs one WARN, requests
// stop asking Redis, one request per probe interval tries it again, and
// the first success logs one INFO and ends the outage.
package redisguard

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// CallTimeout bounds one Redis call of a request (a limit check, a
	// budget reservation): Redis hanging must not add more than this.
	CallTimeout = 50 * time.Millisecond
	// ProbeEvery is how often, while Redis is counted down, one request
	// tries it again instead of deciding locally.
	ProbeEvery = time.Second
)

// Tag returns the Redis hash tag ("{16 hex digits}") that names a client
// key's counters: a hash, so neither the name's characters nor its length
// reach Redis, and a tag, so one key's counters share a cluster slot (one
// script may touch them all).
func Tag(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "{" + hex.EncodeToString(sum[:8]) + "}"
}

// Guard is one Redis dependency's state. Set the exported fields before
// use; the zero state is healthy. Safe for concurrent use.
type Guard struct {
	Logger     *slog.Logger  // nil discards the two state-change lines
	Down, Up   string        // the WARN and INFO messages
	ProbeEvery time.Duration // while degraded, how often one request tries Redis

	degraded  atomic.Bool
	nextProbe atomic.Int64 // unix ns; while degraded, the first request after it probes Redis

	mu     sync.Mutex
	reason string    // of the last failure while degraded
	since  time.Time // start of the outage
}

// Degraded reports whether Redis is counted unreachable, and the error that
// made it so ("" when not).
func (g *Guard) Degraded() (bool, string) {
	if !g.degraded.Load() {
		return false, ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return true, g.reason
}

// IsDown reports whether Redis is counted unreachable (no lock: for hot paths).
func (g *Guard) IsDown() bool { return g.degraded.Load() }

// Use reports whether a request at now should ask Redis: always while
// healthy, one request per ProbeEvery while degraded.
func (g *Guard) Use(now time.Time) bool {
	if !g.degraded.Load() {
		return true
	}
	next := g.nextProbe.Load()
	return now.UnixNano() >= next && g.nextProbe.CompareAndSwap(next, now.Add(g.ProbeEvery).UnixNano())
}

// Fail records a Redis failure at now and reports whether it began an
// outage (the caller may then reset its local state); that first failure
// logs the WARN.
func (g *Guard) Fail(err error, now time.Time) (first bool) {
	g.mu.Lock()
	g.reason = err.Error()
	first = g.degraded.CompareAndSwap(false, true)
	if first {
		g.since = now
		g.nextProbe.Store(now.Add(g.ProbeEvery).UnixNano())
	}
	g.mu.Unlock()
	if first && g.Logger != nil {
		g.Logger.Warn(g.Down, "err", err)
	}
	return first
}

// Recovered records a successful call at now; it ends an outage, with the INFO.
func (g *Guard) Recovered(now time.Time) {
	if !g.degraded.Load() {
		return
	}
	g.mu.Lock()
	last := g.degraded.CompareAndSwap(true, false)
	since := g.since
	g.reason = ""
	g.mu.Unlock()
	if last && g.Logger != nil {
		g.Logger.Info(g.Up, "down_for", now.Sub(since).Round(time.Millisecond))
	}
}

// ClusterSchemes are the URL schemes of a Redis Cluster: redis+cluster://
// (rediss+cluster:// for TLS) followed by one or more comma-separated
// host:port seed nodes, with an optional user:password@ before them and no
// path but "/" or "/0" (a cluster has database 0 only) and no query, e.g.
// redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7000.
const (
	ClusterScheme    = "redis+cluster"
	ClusterSchemeTLS = "rediss+cluster"
)

// CheckURL reports what is wrong with a redis:// or rediss:// URL or a
// cluster URL (ClusterScheme), nil when it is usable.
func CheckURL(u string) error {
	_, err := options(u)
	return err
}

// NewClient returns a client of the Redis u names (a server or a cluster,
// see ClusterScheme), built so that a call's context deadline reaches the
// socket (ContextTimeoutEnabled) and a refused connection fails at once
// (MaxRetries -1, DialerRetries 1): callers bound each call by CallTimeout
// and decide locally when it fails.
func NewClient(u string) (redis.UniversalClient, error) {
	o, err := options(u)
	if err != nil {
		return nil, err
	}
	if o.cluster != nil {
		return redis.NewClusterClient(o.cluster), nil
	}
	return redis.NewClient(o.single), nil
}

type clientOptions struct {
	single  *redis.Options
	cluster *redis.ClusterOptions
}

func options(raw string) (clientOptions, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return clientOptions{}, errors.New("not a URL (want redis://host:port/db or redis+cluster://host:port,host:port)")
	}
	if scheme != ClusterScheme && scheme != ClusterSchemeTLS {
		o, err := redis.ParseURL(raw)
		if err != nil {
			return clientOptions{}, err
		}
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries = true, -1, 1
		return clientOptions{single: o}, nil
	}
	if strings.ContainsAny(rest, "?#") {
		return clientOptions{}, fmt.Errorf("%s:// takes no query or fragment", scheme)
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if path != "" && path != "0" {
		return clientOptions{}, fmt.Errorf("%s:// has database 0 only, got /%s", scheme, path)
	}
	o := &redis.ClusterOptions{ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}
	if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
		user, pass, _ := strings.Cut(hosts[:i], ":")
		var err error
		if o.Username, err = url.PathUnescape(user); err == nil {
			o.Password, err = url.PathUnescape(pass)
		}
		if err != nil {
			return clientOptions{}, fmt.Errorf("%s:// user or password: %w", scheme, err)
		}
		hosts = hosts[i+1:]
	}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p <= 0 || p > 65535 {
			return clientOptions{}, fmt.Errorf("%s:// node %q is not host:port", scheme, h)
		}
		o.Addrs = append(o.Addrs, h)
	}
	if scheme == ClusterSchemeTLS {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return clientOptions{cluster: o}, nil
}
