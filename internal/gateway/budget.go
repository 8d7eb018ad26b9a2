package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/quota"
)

// defaultOutputEstimate is the output a budget reserves for a request that
// sets no max_tokens on a model without max_output_tokens.
const defaultOutputEstimate = 1024

// admitQuota checks and counts the key's rpm and tpm and reserves the
// request's estimated cost against its budget, in one step (with Redis, one
// round trip before the upstream call; package quota). The estimate is its
// prompt (estimated on the high side) at the input price, as if none of it
// came from a prompt cache, and its max_tokens (else the model's
// max_output_tokens, else 1,024) at the output price, a cost that saturates
// at $1e9 (config.Price.Cost), so a max_tokens of 2^63 − 1 or a huge prompt
// holds at most what is left of the budget (package budget); finish settles
// it with the cost the cache reads and writes really had, and counts the
// tokens for tpm, without waiting on Redis. Concurrent requests of a key can
// thus overspend by no more than what they have in flight beyond what they
// hold. A quota that fails (the ledger's spend unreadable) lets the request
// through and logs it: limits are a guard, not a reason to refuse service.
func (g *Gateway) admitQuota(r *http.Request, c *call, p *auth.Principal, m *config.Model, req *provider.Request) error {
	est := 0.0
	if p.BudgetUSD > 0 {
		out := defaultOutputEstimate
		if m.MaxOutputTokens > 0 {
			out = m.MaxOutputTokens
		}
		if ch := req.Chat; ch != nil {
			if ch.MaxCompletionTokens != nil && *ch.MaxCompletionTokens > 0 {
				out = *ch.MaxCompletionTokens
			} else if ch.MaxTokens != nil && *ch.MaxTokens > 0 {
				out = *ch.MaxTokens
			}
		}
		est = m.Price.Cost(config.Tokens{Input: int64(fit.EstimateTokens(promptBody(req))), Output: int64(out)})
	}
	lim := quota.Limits{RPM: p.RPM, TPM: p.TPM, Budget: budget.Limit{USD: p.BudgetUSD, Period: p.BudgetPeriod}}
	t, d, err := g.quota.Admit(r.Context(), p.KeyID, lim, est)
	var ex *budget.Exceeded
	switch {
	case errors.As(err, &ex):
		g.m.Rejected(metrics.ScopeBudget)
		return err
	case err != nil:
		g.log.LogAttrs(r.Context(), slog.LevelWarn, "quota check failed; request let through", slog.String("key", p.KeyID), slog.String("error", err.Error()))
		return nil
	case !d.Allowed:
		value := p.RPM
		if d.Limit == "tpm" {
			value = p.TPM
		}
		g.m.Rejected(d.Limit)
		return &rateLimitError{limit: d.Limit, value: value, retryAfter: max(d.RetryAfter, time.Second)}
	}
	c.ticket = t
	return nil
}
