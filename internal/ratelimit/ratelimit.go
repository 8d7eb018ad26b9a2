// Package ratelimit enforces each key's requests per minute (RPM) and tokens
// per minute (TPM). It is called once per request, after auth and before any
// upstream (Allow), and once when the request's usage is known (Record). Local
// counts in process for one replica; package quota shares the counts between
// replicas through Redis (the same arithmetic in its script, Decide) and
// counts with a Local while Redis is unreachable.
//
// # Algorithm: sliding window counter
//
// Counts live in fixed one-minute buckets (minute = Unix time / 60 s). At
// elapsed ms e into the current minute, a key's estimate of the last 60 s is
//
//	estimate = prev·(60 000 − e)/60 000 + cur
//
// the previous bucket weighted by its overlap with the sliding window, as in
// Cloudflare's and Redis's "sliding window counter". A request is allowed
// while the request estimate < RPM and the token estimate < TPM; an allowed
// request adds 1 to the current request bucket, a refused one adds nothing.
// Tokens are added after the fact by Record, as providers count them, so one
// request may overshoot TPM by its own tokens; the next ones then wait.
//
// Bound: every fixed minute holds at most RPM allowed requests (cur < RPM
// before each increment), so any 60 s window, which overlaps two buckets, holds
// fewer than 2·RPM, and any span of n whole minutes at most n·RPM: a key's
// rate stays within RPM ± one window. The error against an exact sliding log
// is at most the previous bucket's count, in either direction: a burst at the
// end of a minute is under-counted (up to 2·RPM − 1 in some 60 s), a burst at
// the start of a minute still weighs on the next one after it left the
// window, which then admits only the elapsed share RPM·e/60 s. A key idle in
// the previous minute always gets its full RPM. The estimate uses milliseconds and integers, the same in Go and in
// package quota's Redis script, so both decide alike.
package ratelimit

import (
	"context"
	"time"
)

// Limits of one key; 0 (or less) means no limit.
type Limits struct{ RPM, TPM int }

// Decision of Allow.
type Decision struct {
	Allowed bool
	// Limit is "rpm" or "tpm" when refused: the limit that frees last, so
	// RetryAfter holds for both; "" when allowed.
	Limit string
	// RetryAfter is when the request would be allowed again if the key sent
	// nothing meanwhile, rounded up to a whole second (≥ 1s) for the
	// Retry-After header; 0 when allowed.
	RetryAfter time.Duration
}

// Limiter checks and counts. Safe for concurrent use.
type Limiter interface {
	// Allow counts one request of key against l.RPM and refuses it when the
	// key's tokens of the current sliding minute already reached l.TPM
	// (tokens are counted after the fact with Record, as providers do). A
	// refused request is not counted. With no limit in l it allows at once
	// and counts nothing.
	Allow(ctx context.Context, key string, l Limits) (Decision, error)
	// Record adds tokens (input + output of a finished request) to key's
	// token window. Tokens ≤ 0 are ignored.
	Record(ctx context.Context, key string, tokens int)
}

var _ Limiter = (*Local)(nil)

const (
	windowMS = 60_000 // one bucket and the sliding window, in ms
	// maxLimit caps limits and recorded tokens so that count·windowMS stays
	// far inside int64 and exact in the Redis script's float64 (2^53); a
	// limit above it is as good as none.
	maxLimit = 1 << 32
)

// clamp maps limits to [0, maxLimit].
func (l Limits) clamp() Limits {
	return Limits{RPM: min(max(l.RPM, 0), maxLimit), TPM: min(max(l.TPM, 0), maxLimit)}
}

func (l Limits) none() bool { return l.RPM == 0 && l.TPM == 0 }

// slot splits t into its minute number and the ms elapsed in that minute.
func slot(t time.Time) (minute, elapsed int64) {
	ms := t.UnixMilli()
	minute, elapsed = ms/windowMS, ms%windowMS
	if elapsed < 0 { // before 1970: keep elapsed in [0, windowMS)
		minute, elapsed = minute-1, elapsed+windowMS
	}
	return minute, elapsed
}

// Window is one key's sliding window counter: its requests and tokens in
// the previous and the current one-minute bucket, read at the ms elapsed
// in the current minute (Roll). Local keeps one per key in its map; a
// provider key pool keeps one per key behind the key's own lock (package
// keypool). Not safe for concurrent use; the zero Window is empty.
type Window struct {
	minute int64    // of the current bucket
	req    [2]int64 // [0] the previous minute, [1] the current
	tok    [2]int64
}

// Roll moves w to now's minute and returns the ms elapsed in it. A clock
// read just before another caller rolled w into the next minute counts at
// the start of that minute (0), rather than weigh the previous bucket as
// if the minute had ended.
func (w *Window) Roll(now time.Time) int64 {
	minute, e := slot(now)
	switch {
	case w.minute == minute:
	case w.minute == minute-1:
		w.req = [2]int64{w.req[1], 0}
		w.tok = [2]int64{w.tok[1], 0}
	case w.minute < minute-1:
		w.req, w.tok = [2]int64{}, [2]int64{}
	default:
		return 0
	}
	w.minute = minute
	return e
}

// Minute is the minute of w's current bucket (Unix time / 60 s).
func (w *Window) Minute() int64 { return w.minute }

// Count adds n requests (n < 0 takes back) to the current bucket, never
// below 0.
func (w *Window) Count(n int64) { w.req[1] = max(w.req[1]+n, 0) }

// Record adds tokens (capped at 2^32) to the current bucket; ≤ 0 adds nothing.
func (w *Window) Record(tokens int) {
	if tokens > 0 {
		w.tok[1] += int64(min(tokens, maxLimit))
	}
}

// Decide is the admission rule on w at elapsed ms e (from Roll), with
// RetryAfter in whole seconds; it counts nothing.
func (w *Window) Decide(l Limits, e int64) Decision { return decide(w.req, w.tok, l.clamp(), e) }

// Wait is the ms from elapsed e (from Roll) until l allows a request, if
// nothing more is counted: 0 when it allows now.
func (w *Window) Wait(l Limits, e int64) int64 {
	l = l.clamp()
	var ms int64
	if l.RPM > 0 {
		ms = wait(w.req[0], w.req[1], int64(l.RPM), e)
	}
	if l.TPM > 0 {
		ms = max(ms, wait(w.tok[0], w.tok[1], int64(l.TPM), e))
	}
	return ms
}

// Estimate is w's requests and tokens in the sliding minute at elapsed e
// (from Roll), each rounded to the nearest.
func (w *Window) Estimate(e int64) (req, tok int64) {
	est := func(c [2]int64) int64 { return (c[0]*(windowMS-e) + c[1]*windowMS + windowMS/2) / windowMS }
	return est(w.req), est(w.tok)
}

// decide is the admission rule on the counts of the previous and current
// bucket ([0] previous, [1] current) at elapsed ms e. The Redis script applies
// the same inequality; decide also computes RetryAfter.
func decide(req, tok [2]int64, l Limits, e int64) Decision {
	var wr, wt int64
	if l.RPM > 0 {
		wr = wait(req[0], req[1], int64(l.RPM), e)
	}
	if l.TPM > 0 {
		wt = wait(tok[0], tok[1], int64(l.TPM), e)
	}
	switch {
	case wr == 0 && wt == 0:
		return Decision{Allowed: true}
	case wt > wr:
		return Decision{Limit: "tpm", RetryAfter: retryAfter(wt)}
	default:
		return Decision{Limit: "rpm", RetryAfter: retryAfter(wr)}
	}
}

// below reports whether the estimate is under limit, without division:
// prev·(W−e)/W + cur < limit  ⇔  prev·(W−e) + cur·W < limit·W.
func below(prev, cur, limit, e int64) bool {
	return prev*(windowMS-e)+cur*windowMS < limit*windowMS
}

// wait returns the ms from elapsed e until the estimate falls below limit
// (> 0), assuming nothing more is counted, or 0 when it is below already.
func wait(prev, cur, limit, e int64) int64 {
	if below(prev, cur, limit, e) {
		return 0
	}
	if cur < limit {
		// Within this minute (prev > 0 here): the smallest t with
		// prev·(W−t) < (limit−cur)·W is t = W − ⌈(limit−cur)·W/prev⌉ + 1;
		// t ≤ W, and at t = W the next minute starts with prev' = cur < limit.
		t := windowMS - ceilDiv((limit-cur)*windowMS, prev) + 1
		return t - e
	}
	// Only in the next minute, where prev' = cur and cur' = 0: the smallest
	// t' with cur·(W−t') < limit·W; 1 ≤ t' < W since cur ≥ limit > 0.
	t := windowMS - ceilDiv(limit*windowMS, cur) + 1
	return windowMS - e + t
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// retryAfter rounds ms up to whole seconds, at least one.
func retryAfter(ms int64) time.Duration {
	return time.Duration(max(ceilDiv(ms, 1000), 1)) * time.Second
}

// Decide is the admission rule on the counts of the previous and current
// bucket ([0] previous, [1] current) at elapsed ms e into the minute, for a
// shared store that applied the same inequality (package quota's script)
// and needs the refusal's limit and RetryAfter.
func Decide(req, tok [2]int64, l Limits, e int64) Decision { return decide(req, tok, l.clamp(), e) }
