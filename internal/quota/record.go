package quota

import (
	"context"
	"strconv"

	"github.com/streamgate/streamgate/internal/redisguard"
)

// Record counts tokens against key's tpm without an admission's ticket: a
// provider key's tokens, known when its attempt ends (package keypool's
// shared limits). Like Settle it never waits on Redis.
func (q *Quota) Record(key string, tokens int) {
	tokens = min(max(tokens, 0), 1<<32)
	if tokens == 0 {
		return
	}
	q.rl.Record(context.Background(), key, tokens)
	if q.client == nil {
		return
	}
	base := q.prefix + "{k:" + redisguard.Tag(key)[1:17] + "}:"
	minute := q.now().UnixMilli() / windowMS
	q.enqueue(delta{key: base + "tpm:" + strconv.FormatInt(minute, 10), tag: tagOf(base), kind: kindBucket, n: int64(tokens)})
}
