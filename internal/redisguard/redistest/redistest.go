// Package redistest gives tests a Redis of their own: a client of the server
// STREAMGATE_TEST_REDIS names (the test skips, and says so, when it is
// unset), a key prefix deleted when the test ends, a hook that records the
// round trips sent, and a logger whose lines can be counted.
package redistest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL returns STREAMGATE_TEST_REDIS, skipping the test when it is unset.
func URL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv("STREAMGATE_TEST_REDIS")
	if url == "" {
		tb.Skip("STREAMGATE_TEST_REDIS unset: set it to a Redis URL (e.g. redis://127.0.0.1:6379/0) to run the Redis tests (.ci/run sets it)")
	}
	return url
}

// Client returns a pinged client of STREAMGATE_TEST_REDIS with context
// timeouts on, closed when the test ends; opt (may be nil) changes its
// options first. It skips the test when the variable is unset.
func Client(tb testing.TB, opt func(*redis.Options)) *redis.Client {
	tb.Helper()
	url := URL(tb)
	o, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("STREAMGATE_TEST_REDIS=%q: %v", url, err)
	}
	o.ContextTimeoutEnabled = true
	if opt != nil {
		opt(o)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("ping %s: %v", url, err)
	}
	return c
}

// Prefix is a key prefix of the test's own under component; its keys are
// deleted when the test ends.
func Prefix(tb testing.TB, c *redis.Client, component string) string {
	prefix := fmt.Sprintf("sgtest:%s:%s:%d:", component, tb.Name(), time.Now().UnixNano())
	tb.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return prefix
}

// Trips is a go-redis hook recording round trips: a command's name, or
// "pipeline(a,b)" for a pipeline. Safe for concurrent use.
type Trips struct {
	mu    sync.Mutex
	trips []string
}

var _ redis.Hook = (*Trips)(nil)

func (c *Trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *Trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.trips = append(c.trips, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *Trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, cmd := range cmds {
			names[i] = cmd.Name()
		}
		c.mu.Lock()
		c.trips = append(c.trips, "pipeline("+strings.Join(names, ",")+")")
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// Take returns the round trips recorded since the last Take, and forgets them.
func (c *Trips) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.trips
	c.trips = nil
	return t
}

// Count returns how many recorded round trips (not yet taken) are name.
func (c *Trips) Count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.trips {
		if t == name {
			n++
		}
	}
	return n
}

// Log is what a logger of NewLog wrote. Safe for concurrent use.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// NewLog returns a text logger writing to the returned Log.
func NewLog() (*slog.Logger, *Log) {
	l := &Log{}
	return slog.New(slog.NewTextHandler(l, nil)), l
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Count returns how many times s occurs in what was logged.
func (l *Log) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// String returns everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
