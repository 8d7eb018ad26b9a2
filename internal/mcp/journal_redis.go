package mcp

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisJournal is a Journal in Redis, shared by the replicas: a stream is
// a Redis stream whose entry ids are the events' (0-<seq>), written with
// XADD (MAXLEN bounded) and EXPIRE by the replica running the call, read
// with XREAD BLOCK by whichever replica a client resumes on.
type RedisJournal struct {
	c      redis.UniversalClient
	prefix string
	// block is how long one XREAD waits (a follower sees its request end
	// between two).
	block time.Duration

	mu    sync.Mutex
	bytes map[string]int // the bytes appended per running stream of this replica
}

// journalRunningTTL is how long a running stream's journal is kept after
// its last event (a call runs at most its timeout; a call quiet for
// longer loses its stream's start).
const journalRunningTTL = time.Hour

// appendTimeout bounds one append (the call goes on without it).
const appendTimeout = time.Second

// NewRedisJournal returns a RedisJournal on c, its keys under prefix
// ("" means "sg:"). c should be a client of its own: a follower holds a
// connection for each XREAD BLOCK.
func NewRedisJournal(c redis.UniversalClient, prefix string) *RedisJournal {
	if prefix == "" {
		prefix = "sg:"
	}
	return &RedisJournal{c: c, prefix: prefix + "mcp:j:", block: time.Second, bytes: map[string]int{}}
}

// keys: the stream and its resumed mark, in one hash slot.
func (j *RedisJournal) keys(key string) (stream, resumed string) {
	k := j.prefix + "{" + key + "}"
	return k, k + ":r"
}

// Append implements Journal.
func (j *RedisJournal) Append(ctx context.Context, key string, seq int, data []byte, final bool) error {
	j.mu.Lock()
	n := j.bytes[key] + len(data)
	over := seq > JournalMaxEvents || n > JournalMaxBytes
	if final {
		delete(j.bytes, key)
	} else {
		j.bytes[key] = n
	}
	j.mu.Unlock()
	stream, _ := j.keys(key)
	values := []any{"d", data}
	if over {
		values = []any{"o", "1"} // past the bound: not resumable
	}
	if final {
		values = append(values, "f", "1")
	}
	ttl := journalRunningTTL
	if final {
		ttl = JournalTTL
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	_, err := j.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: "0-" + strconv.Itoa(seq), MaxLen: JournalMaxEvents + 1, Values: values})
		p.Expire(ctx, stream, ttl)
		return nil
	})
	if err != nil {
		j.mu.Lock()
		delete(j.bytes, key)
		j.mu.Unlock()
	}
	return err
}

// Follow implements Journal.
func (j *RedisJournal) Follow(ctx context.Context, key string, after int, send func(int, []byte) bool) error {
	stream, resumed := j.keys(key)
	n, err := j.c.Exists(ctx, stream).Result()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNoStream
	}
	if err := j.c.Set(ctx, resumed, "1", journalRunningTTL).Err(); err != nil {
		return err
	}
	last := "0-" + strconv.Itoa(after)
	for {
		res, err := j.c.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, last}, Block: j.block, Count: 100}).Result()
		switch {
		case errors.Is(err, redis.Nil): // nothing new within block
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		case err != nil:
			return err
		}
		for _, s := range res {
			for _, m := range s.Messages {
				last = m.ID
				_, n, _ := strings.Cut(m.ID, "-")
				seq, _ := strconv.Atoi(n)
				if _, over := m.Values["o"]; over {
					return ErrNoStream
				}
				d, _ := m.Values["d"].(string)
				if !send(seq, []byte(d)) {
					return nil
				}
				if _, final := m.Values["f"]; final {
					return nil
				}
			}
		}
	}
}

// Resumed implements Journal.
func (j *RedisJournal) Resumed(ctx context.Context, key string) bool {
	_, resumed := j.keys(key)
	n, err := j.c.Exists(ctx, resumed).Result()
	return err == nil && n > 0
}
