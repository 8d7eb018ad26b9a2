package quota

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/usd"
)

// teamCase runs f on a local Quota and on Quotas sharing each Redis target.
func teamCase(t *testing.T, f func(t *testing.T, newQ func() *Quota)) {
	t.Run("local", func(t *testing.T) {
		q := newQuota(Options{})
		t.Cleanup(q.Close)
		f(t, func() *Quota { return q })
	})
	forTargets(t, func(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
		f(t, func() *Quota {
			q := newQuota(Options{Client: newClient(), Prefix: prefix})
			t.Cleanup(q.Close)
			return q
		})
	})
}

// A request is admitted only if its key's, its team's and its key×model
// budgets all allow it; the one spent refuses, names itself, and what it
// refused is counted against none of them.
func TestAdmitTeamKeyModelBudgets(t *testing.T) {
	teamCase(t, func(t *testing.T, newQ func() *Quota) {
		ctx := context.Background()
		q := newQ()
		tot := func(u float64) budget.Limit { return budget.Limit{USD: u, Period: budget.Total} }
		subs := func(key, model string, modelBudget float64) []Subject {
			s := []Subject{
				{Scope: ScopeKey, Name: key, Limits: Limits{Budget: tot(1)}},
				{Scope: ScopeTeam, Name: "search", Limits: Limits{Budget: tot(0.5)}},
			}
			if modelBudget > 0 {
				s = append(s, Subject{Scope: ScopeModel, Name: key, Model: model, Limits: Limits{Budget: tot(modelBudget)}})
			}
			return s
		}
		admit := func(s []Subject) error {
			tk, r, err := q.AdmitAll(ctx, s, 0.1)
			if err == nil && !r.Allowed {
				t.Fatalf("refused by a rate: %+v", r)
			}
			tk.Settle(0.1, 10)
			return err
		}
		// The key's budget for m1 ($0.30) is spent after three requests.
		for i := range 3 {
			if err := admit(subs("dev", "m1", 0.3)); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
		err := admit(subs("dev", "m1", 0.3))
		var ex *budget.Exceeded
		if !errors.As(err, &ex) || ex.Scope != ScopeModel || ex.Key != "dev" || ex.Model != "m1" {
			t.Fatalf("4th request on m1: got %v, want the model budget refused", err)
		}
		if want := `key "dev" budget for model "m1" of $0.30 in total is spent ($0.30 used)`; err.Error() != want {
			t.Errorf("message %q, want %q", err.Error(), want)
		}
		// Other models still serve until the team's $0.50 is spent, by
		// this key and another of the team.
		if err := admit(subs("dev", "m2", 0)); err != nil {
			t.Fatal(err)
		}
		if err := admit(subs("ops", "m2", 0)); err != nil {
			t.Fatal(err)
		}
		err = admit(subs("ops", "m2", 0))
		if !errors.As(err, &ex) || ex.Scope != ScopeTeam || ex.Key != "search" {
			t.Fatalf("team spent: got %v, want the team budget refused", err)
		}
		if ex.Spent < 0.5 {
			t.Errorf("team spent %v, want at least 0.5", ex.Spent)
		}
		// The refused requests counted nowhere: dev spent 0.4, ops 0.1.
		q.Close()
		check := newQ()
		for _, c := range []struct {
			key  string
			want float64
		}{{"dev", 0.4}, {"ops", 0.1}} {
			// Admitting with the key's budget at exactly its spend is refused
			// with that spend.
			_, _, err := check.AdmitAll(ctx, []Subject{{Scope: ScopeKey, Name: c.key, Limits: Limits{Budget: tot(c.want)}},
				{Scope: ScopeTeam, Name: "search", Limits: Limits{Budget: tot(5)}}}, 0)
			if !errors.As(err, &ex) || ex.Scope != ScopeKey || usd.Micro(ex.Spent) != usd.Micro(c.want) {
				t.Errorf("key %s: got %v, want its budget of $%.2f refused at exactly that spend", c.key, err, c.want)
			}
		}
	})
}

// A team's rpm is shared by its keys; a request the team refuses is not
// counted against its key's own rpm.
func TestAdmitTeamRPM(t *testing.T) {
	teamCase(t, func(t *testing.T, newQ func() *Quota) {
		ctx := context.Background()
		q := newQ()
		subs := func(key string, teamRPM int) []Subject {
			return []Subject{
				{Scope: ScopeKey, Name: key, Limits: Limits{RPM: 3}},
				{Scope: ScopeTeam, Name: "search", Limits: Limits{RPM: teamRPM}},
			}
		}
		for _, key := range []string{"a", "b"} {
			if _, r, err := q.AdmitAll(ctx, subs(key, 2), 0); err != nil || !r.Allowed {
				t.Fatalf("key %s: %+v %v", key, r, err)
			}
		}
		_, r, err := q.AdmitAll(ctx, subs("b", 2), 0)
		if err != nil || r.Allowed || r.Subject != 1 || r.Limit != "rpm" {
			t.Fatalf("3rd request of the team: got %+v %v, want refused by the team's rpm (subject 1)", r, err)
		}
		// The team's limit raised: b has 2 of its own 3 left (the refusal
		// was not counted), then its own rpm refuses.
		for i := range 2 {
			if _, r, err := q.AdmitAll(ctx, subs("b", 100), 0); err != nil || !r.Allowed {
				t.Fatalf("b's request %d: %+v %v", i, r, err)
			}
		}
		if _, r, err := q.AdmitAll(ctx, subs("b", 100), 0); err != nil || r.Allowed || r.Subject != 0 {
			t.Fatalf("b's 4th: got %+v %v, want refused by the key's rpm (subject 0)", r, err)
		}
	})
}
