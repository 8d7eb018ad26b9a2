package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
)

// defaultOutputEstimate is the output a budget reserves for a request that
// sets no max_tokens on a model without max_output_tokens.
const defaultOutputEstimate = 1024

// reserveBudget reserves the request's estimated cost against the key's
// budget: its prompt (estimated on the high side) at the input price, as
// if none of it came from a prompt cache, and its max_tokens (else the
// model's max_output_tokens, else 1,024) at the output price, a cost that
// saturates at $1e9 (config.Price.Cost), so a max_tokens of 2^63 − 1 or a
// huge prompt holds at most what is left of the budget (package budget);
// finish settles it with the cost the cache reads and writes really had.
// Concurrent requests of a key can thus overspend by no more than what
// they have in flight beyond what they hold. A budget ledger
// that fails lets the request through and logs it: a budget is a guard,
// not a reason to refuse service.
func (g *Gateway) reserveBudget(r *http.Request, c *call, p *auth.Principal, m *config.Model, req *provider.Request) error {
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
	est := m.Price.Cost(config.Tokens{Input: int64(fit.EstimateTokens(promptBody(req))), Output: int64(out)})
	res, err := g.budget.Reserve(r.Context(), p.KeyID, budget.Limit{USD: p.BudgetUSD, Period: p.BudgetPeriod}, est)
	var ex *budget.Exceeded
	switch {
	case errors.As(err, &ex):
		g.m.Rejected(metrics.ScopeBudget)
		return err
	case err != nil:
		g.log.LogAttrs(r.Context(), slog.LevelWarn, "budget check failed; request let through", slog.String("key", p.KeyID), slog.String("error", err.Error()))
		return nil
	}
	c.reservation = res
	return nil
}

// settleBudget charges the request's cost, replacing its reservation.
func settleBudget(c *call, cost float64) {
	if c.reservation != nil {
		c.reservation.Settle(context.Background(), cost)
	}
}
