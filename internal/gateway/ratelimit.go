package gateway

import (
	"fmt"
	"net/http"
	"time"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/ratelimit"
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

// rateLimit checks the key's rpm and tpm. A limiter that fails lets the
// request through: the limits are a guard, not a reason to refuse service
// (the Redis limiter falls back to counting locally and says so itself).
func (g *Gateway) rateLimit(r *http.Request, p *auth.Principal) error {
	lim := ratelimit.Limits{RPM: p.RPM, TPM: p.TPM}
	d, err := g.rl.Allow(r.Context(), p.KeyID, lim)
	if err != nil || d.Allowed {
		return nil
	}
	value := p.RPM
	if d.Limit == "tpm" {
		value = p.TPM
	}
	g.m.Rejected(d.Limit)
	return &rateLimitError{limit: d.Limit, value: value, retryAfter: max(d.RetryAfter, time.Second)}
}
