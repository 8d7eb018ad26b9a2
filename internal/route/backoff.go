package route

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff defaults, used where Backoff leaves a field zero.
const (
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffMax  = 2 * time.Second
)

// ErrBudget reports a retry not waited for: its wait would end after the
// request's deadline.
var ErrBudget = errors.New("retry budget exhausted")

// Backoff spaces retries with full jitter ("Exponential Backoff And
// Jitter", AWS Architecture Blog, 2015): retry n waits a uniform draw in
// [0, min(Max, Base·2^(n-1))), so that clients that failed together do not
// retry together. The zero value is usable.
type Backoff struct {
	Base time.Duration // the first retry's ceiling; 0 means DefaultBackoffBase
	Max  time.Duration // the ceiling's cap; 0 means DefaultBackoffMax
	// Rand draws from [0, 1); nil means math/rand/v2's Float64. Tests set
	// it to pin the draw.
	Rand func() float64
}

// Delay returns the wait before retry number n (1 is the first retry; n < 1
// counts as 1): a uniform draw in [0, min(Max, Base·2^(n-1))), and at least
// retryAfter (the upstream's Retry-After, 0 when it sent none), which Max
// does not cap.
func (b Backoff) Delay(n int, retryAfter time.Duration) time.Duration {
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if limit <= 0 {
		limit = DefaultBackoffMax
	}
	ceiling := limit
	if s := max(n, 1) - 1; s < 62 && base <= limit>>s {
		ceiling = base << s
	}
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	d := time.Duration(r() * float64(ceiling))
	return max(d, retryAfter)
}

// Wait sleeps Delay(n, retryAfter). It returns context.Cause(ctx) when ctx
// ends first (at once when it already has), and an error wrapping ErrBudget
// at once, without sleeping, when deadline is not zero and the wait would
// end after it. It returns nil after the full wait.
func (b Backoff) Wait(ctx context.Context, n int, retryAfter time.Duration, deadline time.Time) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	d := b.Delay(n, retryAfter)
	if !deadline.IsZero() {
		if left := time.Until(deadline); d > left {
			return fmt.Errorf("%w: retry %d would wait %v, %v left", ErrBudget, n, d, max(left, 0))
		}
	}
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
		return nil
	}
}
