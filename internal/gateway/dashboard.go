package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/dashboard"
)

// The dashboard's narrow views of the gateway: route health as the router
// keeps it and each key's budget. Both adapt here when the router or the
// budgets change, the dashboard does not.

// routeHealth is every model route's health for the dashboard.
func (g *Gateway) routeHealth() []dashboard.RouteHealth {
	var out []dashboard.RouteHealth
	st := g.cur()
	states, _ := g.routeStatesNow()
	for _, m := range st.cfg.Models {
		rs := st.routes[m.Name]
		if rs == nil {
			continue
		}
		for _, t := range rs.targets {
			s := t.rt.Snapshot()
			out = append(out, dashboard.RouteHealth{Model: m.Name, Route: t.name, State: states[t.name],
				Attempts: s.Requests, Failures: s.Failures, ConsecutiveFailures: s.ConsecutiveFailures, Ejections: s.Ejections})
		}
	}
	return out
}

// budgets are the budgets of the config's keys and the database's keys
// not revoked, with what each spent in its current period (from the ledger).
func (g *Gateway) budgets(ctx context.Context) ([]dashboard.Budget, error) {
	now := time.Now()
	var out []dashboard.Budget
	add := func(name string, limit float64, period string) error {
		if !(limit > 0) {
			return nil
		}
		if period == "" {
			period = budget.Month
		}
		since, _ := budget.Window(period, now)
		b := dashboard.Budget{Key: name, Period: period, Since: since, LimitUSD: limit}
		if g.spent != nil {
			var err error
			if b.SpentUSD, err = g.spent(ctx, name, since); err != nil {
				return err
			}
		}
		out = append(out, b)
		return nil
	}
	var errs []error
	for _, k := range g.cur().cfg.Keys {
		errs = append(errs, add(k.Name, k.BudgetUSD, k.BudgetPeriod))
	}
	if g.keyStore != nil {
		ks, err := g.keyStore.List(ctx)
		errs = append(errs, err)
		for _, k := range ks {
			if !k.Revoked() {
				errs = append(errs, add(k.Name, k.BudgetUSD, k.BudgetPeriod))
			}
		}
	}
	return out, errors.Join(errs...)
}

// teamBudgets are the budgets of the config's teams and the database's
// teams (a config team wins over a database one of its name), with what
// each spent in its current period (from the ledger, as the team budget
// reads it).
func (g *Gateway) teamBudgets(ctx context.Context) ([]dashboard.TeamBudget, error) {
	now := time.Now()
	var out []dashboard.TeamBudget
	add := func(name string, limit float64, period string) error {
		if !(limit > 0) {
			return nil
		}
		if period == "" {
			period = budget.Month
		}
		since, resets := budget.Window(period, now)
		b := dashboard.TeamBudget{Team: name, Period: period, Since: since, Resets: resets, LimitUSD: limit}
		if g.spentTeam != nil {
			var err error
			if b.SpentUSD, err = g.spentTeam(ctx, name, since); err != nil {
				return err
			}
		}
		out = append(out, b)
		return nil
	}
	var errs []error
	cfg := g.cur().cfg
	for _, t := range cfg.Teams {
		errs = append(errs, add(t.Name, t.BudgetUSD, t.BudgetPeriod))
	}
	if g.keyStore != nil {
		ts, err := g.keyStore.ListTeams(ctx)
		errs = append(errs, err)
		for _, t := range ts {
			if _, ok := cfg.Team(t.Name); !ok {
				errs = append(errs, add(t.Name, t.BudgetUSD, t.BudgetPeriod))
			}
		}
	}
	return out, errors.Join(errs...)
}
