package gateway

import (
	"fmt"
	"time"
)

// rateLimitError: a key over its requests or tokens per minute (429).
type rateLimitError struct {
	limit      string // "rpm" or "tpm"
	value      int
	retryAfter time.Duration
}

func (e *rateLimitError) Error() string {
	what := "requests"
	if e.limit == "tpm" {
		what = "tokens"
	}
	return fmt.Sprintf("rate limit reached for this key: %d %s per minute (%s); retry after %s",
		e.value, what, e.limit, e.retryAfter.Round(time.Second))
}
