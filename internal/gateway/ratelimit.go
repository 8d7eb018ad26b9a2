package gateway

import (
	"fmt"
	"time"
)

// rateLimitError: a key over its requests or tokens per minute (429).
type rateLimitError struct {
	limit      string // "rpm" or "tpm"
	team       string // the key's team whose limit it is; "": the key's
	value      int
	retryAfter time.Duration
}

func (e *rateLimitError) Error() string {
	what := "requests"
	if e.limit == "tpm" {
		what = "tokens"
	}
	if e.team != "" {
		return fmt.Sprintf("rate limit reached for team %q: %d %s per minute (%s); retry after %s",
			e.team, e.value, what, e.limit, e.retryAfter.Round(time.Second))
	}
	return fmt.Sprintf("rate limit reached for this key: %d %s per minute (%s); retry after %s",
		e.value, what, e.limit, e.retryAfter.Round(time.Second))
}
