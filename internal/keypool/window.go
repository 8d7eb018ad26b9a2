package keypool

import "time"

// window is a key's sliding window counter of requests and tokens, the
// algorithm of package ratelimit (one-minute buckets, the previous one
// weighted by its overlap with the last 60 s), kept per key behind the
// key's mutex so that Acquire reads and counts without a map lookup.
type window struct {
	minute int64    // of the current bucket
	req    [2]int64 // [0] previous minute, [1] current
	tok    [2]int64
}

const windowMS = 60_000

// roll moves w to now's minute and returns the ms elapsed in it.
func (w *window) roll(now time.Time) int64 {
	ms := now.UnixMilli()
	minute, e := ms/windowMS, ms%windowMS
	if e < 0 {
		minute, e = minute-1, e+windowMS
	}
	switch {
	case minute == w.minute:
	case minute == w.minute+1:
		w.req = [2]int64{w.req[1], 0}
		w.tok = [2]int64{w.tok[1], 0}
	case minute > w.minute+1:
		w.req, w.tok = [2]int64{}, [2]int64{}
	default:
		// A clock read before another caller rolled into the next minute:
		// count at the start of that minute (as ratelimit does).
		return 0
	}
	w.minute = minute
	return e
}

// estimate is the count of the last 60 s at elapsed e, rounded to the
// nearest.
func estimate(c [2]int64, e int64) int64 {
	return (c[0]*(windowMS-e) + c[1]*windowMS + windowMS/2) / windowMS
}

// wait returns the ms from elapsed e until the estimate of c falls below
// limit (> 0), if nothing more is counted, or 0 when it is below already.
// The same arithmetic as ratelimit's, so local and shared limits agree.
func wait(c [2]int64, limit, e int64) int64 {
	prev, cur := c[0], c[1]
	if prev*(windowMS-e)+cur*windowMS < limit*windowMS {
		return 0
	}
	if cur < limit {
		t := windowMS - ceilDiv((limit-cur)*windowMS, prev) + 1
		return t - e
	}
	t := windowMS - ceilDiv(limit*windowMS, cur) + 1
	return windowMS - e + t
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
