package gateway

import (
	"cmp"
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

// needsQuota reports whether p's requests go through admitQuota: a rate,
// a budget, a team or a budget for a model.
func needsQuota(p *auth.Principal) bool {
	return p.RPM > 0 || p.TPM > 0 || p.BudgetUSD > 0 || p.Team != "" || len(p.ModelBudgets) > 0
}

// admitQuota checks and counts the rpm and tpm and reserves the request's
// estimated cost against the budgets of every subject of the request: its
// key, its key's team (the config's or the database's), the key's budget
// for the model asked for (model_budgets), in one step (with Redis, one
// round trip before the upstream call; package quota): counted against all
// of them or, refused by one, against none; the refusal names which. The
// estimate is its
// prompt (estimated on the high side) at the input price, as if none of it
// came from a prompt cache, and its max_tokens (else the model's
// max_output_tokens, else 1,024) at the output price, a cost that saturates
// at $1e9 (config.Price.Cost), so a max_tokens of 2^63 − 1 or a huge prompt
// holds at most what is left of the budget (package budget); finish settles
// it with the cost the cache reads and writes really had, and counts the
// tokens for tpm, without waiting on Redis. Concurrent requests of a key can
// thus overspend by no more than what they have in flight beyond what they
// hold; a team's by what its keys have in flight. A quota that fails (the
// ledger's spend unreadable) lets the request through and logs it: limits
// are a guard, not a reason to refuse service. A team that cannot be read
// (the database down) or no longer exists refuses the request.
func (g *Gateway) admitQuota(r *http.Request, c *call, p *auth.Principal, m *config.Model, req *provider.Request) error {
	subs := make([]quota.Subject, 1, 3)
	subs[0] = quota.Subject{Scope: quota.ScopeKey, Name: p.KeyID,
		Limits: quota.Limits{RPM: p.RPM, TPM: p.TPM, Budget: budget.Limit{USD: p.BudgetUSD, Period: p.BudgetPeriod}}}
	if p.Team != "" {
		team, err := c.st.teams.get(r.Context(), p.Team)
		if err != nil {
			return err
		}
		c.team = team
		subs = append(subs, quota.Subject{Scope: quota.ScopeTeam, Name: team.Name,
			Limits: quota.Limits{RPM: team.RPM, TPM: team.TPM, Budget: budget.Limit{USD: team.BudgetUSD, Period: team.BudgetPeriod}}})
	}
	for _, mb := range p.ModelBudgets {
		if mb.Model == m.Name {
			subs = append(subs, quota.Subject{Scope: quota.ScopeModel, Name: p.KeyID, Model: m.Name,
				Limits: quota.Limits{Budget: budget.Limit{USD: mb.BudgetUSD, Period: cmp.Or(mb.BudgetPeriod, budget.Month)}}})
		}
	}
	est := 0.0
	for _, s := range subs {
		if s.Budget.USD > 0 {
			est = estimate(m, req)
			break
		}
	}
	t, d, err := g.quota.AdmitAll(r.Context(), subs, est)
	var ex *budget.Exceeded
	switch {
	case errors.As(err, &ex):
		switch ex.Scope {
		case quota.ScopeTeam:
			g.m.Rejected(metrics.ScopeTeamBudget)
		case quota.ScopeModel:
			g.m.Rejected(metrics.ScopeModelBudget)
		default:
			g.m.Rejected(metrics.ScopeBudget)
		}
		return err
	case err != nil:
		g.log.LogAttrs(r.Context(), slog.LevelWarn, "quota check failed; request let through", slog.String("key", p.KeyID), slog.String("error", err.Error()))
		return nil
	case !d.Allowed:
		s := subs[d.Subject]
		value := s.RPM
		if d.Limit == "tpm" {
			value = s.TPM
		}
		rle := &rateLimitError{limit: d.Limit, value: value, retryAfter: max(d.RetryAfter, time.Second)}
		if s.Scope == quota.ScopeTeam {
			rle.team = s.Name
			g.m.Rejected("team_" + d.Limit)
		} else {
			g.m.Rejected(d.Limit)
		}
		return rle
	}
	c.ticket = t
	return nil
}

// estimate is the cost a budget reserves for req on m (admitQuota).
func estimate(m *config.Model, req *provider.Request) float64 {
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
	return m.Price.Cost(config.Tokens{Input: int64(fit.EstimateTokens(promptBody(req))), Output: int64(out)})
}

// admitTeamSlot takes a slot of the team's max_streams (per replica), after
// the key's (chat's admission); the call's release gives back both.
func (g *Gateway) admitTeamSlot(r *http.Request, c *call) error {
	release, err := g.acquireTeam(r.Context(), c.team)
	if err != nil {
		var tf *teamFullError
		if errors.As(err, &tf) {
			g.m.Rejected(metrics.ScopeTeam)
		}
		return err
	}
	if release != nil {
		if prev := c.release; prev != nil {
			c.release = func() { release(); prev() }
		} else {
			c.release = release
		}
	}
	return nil
}
