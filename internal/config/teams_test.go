package config

import (
	"math"
	"strings"
	"testing"
)

func TestValidateTeamsAndModelBudgets(t *testing.T) {
	c := validConfig()
	c.Teams = []Team{{Name: "search", BudgetUSD: 500, RPM: 3000, MaxStreams: 8}, {Name: "ops", BudgetPeriod: "day", BudgetUSD: 5}}
	c.Keys[0].Team = "search"
	c.Keys[0].ModelBudgets = []ModelBudget{{Model: "gpt-4.1", BudgetUSD: 5, BudgetPeriod: "day"}}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid teams and model budgets: %v", err)
	}
	if tm, ok := c.Team("ops"); !ok || tm.BudgetPeriod != "day" {
		t.Errorf("Team(ops) = %+v, %v", tm, ok)
	}
	// Every problem at once, each naming its field.
	c.Teams = append(c.Teams,
		Team{Name: "search", RPM: -1, TPM: -2, MaxStreams: -3, BudgetUSD: math.NaN(), BudgetPeriod: "week"},
		Team{})
	c.Keys[0].Team = " search"
	c.Keys[0].ModelBudgets = append(c.Keys[0].ModelBudgets,
		ModelBudget{Model: "gpt-4.1", BudgetUSD: 1},
		ModelBudget{Model: "gpt-9", BudgetUSD: -1, BudgetPeriod: "year"},
		ModelBudget{BudgetUSD: 1})
	c.Keys = append(c.Keys, Key{Name: "ci", Key: "sg-ci-0123456789abcdef", Models: []string{"gpt-4.1"}})
	c.Models = append(c.Models, Model{Name: "other", Routes: []Route{{Provider: "sim", Model: "x"}}, Strategy: "fallback", ContextPolicy: "reject"})
	c.Keys[1].ModelBudgets = []ModelBudget{{Model: "other"}}
	want := []string{
		`teams[2].name: duplicate team name "search" (first at teams[0])`,
		`teams[2].max_streams: must not be negative, got -3`,
		`teams[2].rpm: must not be negative, got -1`,
		`teams[2].tpm: must not be negative, got -2`,
		`teams[2].budget_usd: must be a non-negative number of USD, got NaN`,
		`teams[2].budget_period: unknown period "week" (want one of month, day, total)`,
		`teams[3].name: required`,
		`keys[0].team: " search" has leading or trailing space`,
		`keys[0].model_budgets[1].model: model "gpt-4.1" has a budget already (model_budgets[0])`,
		`keys[0].model_budgets[2].model: unknown model "gpt-9"`,
		`keys[0].model_budgets[2].budget_usd: must be a non-negative number of USD, got -1`,
		`keys[0].model_budgets[2].budget_period: unknown period "year" (want one of month, day, total)`,
		`keys[0].model_budgets[3].model: required`,
		`keys[1].model_budgets[0].model: the key may not use model "other" (not in its models): the budget would never apply`,
		`keys[1].model_budgets[0].budget_usd: required (a positive number of USD)`,
	}
	err := c.Validate()
	if err == nil {
		t.Fatal("got nil, want every problem")
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", err, strings.Join(want, "\n"))
	}
}
