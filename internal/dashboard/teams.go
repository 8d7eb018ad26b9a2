package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/usage"
)

// Chargeback by team: each team's budget in its current period, and its
// cost, requests and prompt-cache savings over a range, from the ledger
// through usage.Report by "team", the query `streamgate usage --by team`
// runs, so both show the same figures.

// TeamBudget is one team's budget in its current period.
type TeamBudget struct {
	Team     string
	Period   string    // month, day or total
	Since    time.Time // the period's start (zero for total)
	Resets   time.Time // the next period's start (zero for total: never)
	LimitUSD float64
	SpentUSD float64
}

// teamRanges are the ranges of /dashboard/teams: today is since 00:00 UTC
// (the cost of the day), all is the whole ledger.
var teamRanges = map[string]time.Duration{"today": 0, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour, "all": -1}

// noTeam names the group of the requests of keys without a team, as
// `streamgate usage` does.
const noTeam = "(none)"

// teamsPage is the answer of /dashboard/teams.
type teamsPage struct {
	Range string     `json:"range"`
	Since string     `json:"since,omitempty"` // RFC 3339; absent for all
	AsOf  int64      `json:"as_of"`           // Unix ms
	Teams []teamView `json:"teams"`
	// BudgetsError and CostError are a failed query's message; the rows
	// then lack those figures.
	BudgetsError string `json:"budgets_error,omitempty"`
	CostError    string `json:"cost_error,omitempty"`
}

// teamView is one team: its budget (null without one) and what the
// ledger recorded of it in the range. Team is "(none)" for the requests
// of keys without a team.
type teamView struct {
	Team           string          `json:"team"`
	Budget         *teamBudgetView `json:"budget"`
	Requests       int64           `json:"requests"`
	InputTokens    int64           `json:"input_tokens"`
	OutputTokens   int64           `json:"output_tokens"`
	CostUSD        money           `json:"cost_usd"`
	CacheReadShare num             `json:"cache_read_share"` // null without prompt tokens
	SavingsUSD     money           `json:"savings_usd"`      // null without prices
}

type teamBudgetView struct {
	Period       string `json:"period"`
	Since        string `json:"since,omitempty"`  // RFC 3339; absent for total
	Resets       string `json:"resets,omitempty"` // RFC 3339; absent for total
	LimitUSD     money  `json:"limit_usd"`
	SpentUSD     money  `json:"spent_usd"`
	RemainingUSD money  `json:"remaining_usd"`
	UsedRatio    num    `json:"used_ratio"`
}

// money is an amount of USD encoded with every digit it has (null for
// NaN), not num's four: the teams' figures are chargeback, compared with
// `streamgate usage` to the cent.
type money float64

func (m money) MarshalJSON() ([]byte, error) {
	f := float64(m)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// ServeTeams serves GET ?range=today|7d|30d|all (default today): every
// team with a budget or with requests in the range. It checks no
// credential: /dashboard/teams asks for the dashboard's login.
func (d *Dashboard) ServeTeams(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "method not allowed: use GET")
		return
	}
	name := cmp.Or(r.URL.Query().Get("range"), "today")
	span, ok := teamRanges[name]
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", fmt.Sprintf("range %q: want today, 7d, 30d or all", name))
		return
	}
	if d.report == nil && d.teamBudgets == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "usage_ledger_off", errLedgerOff.Error())
		return
	}
	now := time.Now()
	var since time.Time
	switch {
	case span == 0:
		since = now.UTC().Truncate(24 * time.Hour)
	case span > 0:
		since = now.Add(-span)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	writeJSON(w, d.teams(ctx, name, since, now))
}

func (d *Dashboard) teams(ctx context.Context, name string, since, now time.Time) teamsPage {
	p := teamsPage{Range: name, AsOf: now.UnixMilli(), Teams: []teamView{}}
	if !since.IsZero() {
		p.Since = since.UTC().Format(time.RFC3339)
	}
	byName := map[string]*teamView{}
	get := func(team string) *teamView {
		if team == "" {
			team = noTeam
		}
		v := byName[team]
		if v == nil {
			v = &teamView{Team: team, CacheReadShare: num(math.NaN()), SavingsUSD: money(math.NaN())}
			if d.savings != nil {
				v.SavingsUSD = 0
			}
			byName[team] = v
		}
		return v
	}
	if d.teamBudgets != nil {
		bs, err := d.teamBudgets(ctx)
		if err != nil {
			d.log.Warn("dashboard: team budgets from the ledger", "error", err.Error())
			p.BudgetsError = "the ledger did not answer: " + err.Error()
		}
		for _, b := range bs {
			bv := &teamBudgetView{Period: b.Period, LimitUSD: money(b.LimitUSD), SpentUSD: money(b.SpentUSD),
				RemainingUSD: money(max(b.LimitUSD-b.SpentUSD, 0)), UsedRatio: num(ratio(b.SpentUSD, b.LimitUSD))}
			if !b.Since.IsZero() {
				bv.Since = b.Since.UTC().Format(time.RFC3339)
			}
			if !b.Resets.IsZero() {
				bv.Resets = b.Resets.UTC().Format(time.RFC3339)
			}
			get(b.Team).Budget = bv
		}
	}
	if d.report != nil {
		rows, err := d.report(ctx, usage.ReportQuery{Since: since, By: "team", Savings: d.savings})
		if err != nil {
			d.log.Warn("dashboard: cost by team from the ledger", "error", err.Error())
			p.CostError = "the ledger did not answer: " + err.Error()
		}
		for _, r := range rows {
			v := get(r.Group)
			v.Requests, v.InputTokens, v.OutputTokens = r.Requests, r.InputTokens, r.OutputTokens
			v.CostUSD = money(r.CostUSD)
			v.CacheReadShare = num(ratio(float64(r.CacheReadTokens), float64(r.InputTokens)))
			if d.savings != nil {
				v.SavingsUSD = money(r.SavingsUSD)
			}
		}
	}
	for _, v := range byName {
		p.Teams = append(p.Teams, *v)
	}
	// Teams by name, the keys without one last.
	slices.SortFunc(p.Teams, func(a, b teamView) int {
		if (a.Team == noTeam) != (b.Team == noTeam) {
			if a.Team == noTeam {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Team, b.Team)
	})
	return p
}
