// Package budget enforces each key's spending budget in USD per calendar
// month, per day or in total. The gateway calls Reserve once per request,
// after auth and before any upstream, with the request's estimated cost, and
// Settle once its actual cost is known. Local keeps the spend in process for
// one replica; package quota shares it between replicas through Redis and
// counts with a Local while Redis is unreachable. Neither needs a database: the spend already
// recorded in a window comes from a SpentFunc (the gateway's SUM over the
// usage ledger), read once per key and window.
//
// The "key" of a Ledger is any subject with a budget: package quota also
// counts a team's budget (the spend of all its keys) and a key's budget for
// one model here, under names of their own, each with its SpentFunc; the
// rule and bound below hold for each of them alike.
//
// # Admission rule and overspend bound
//
// A key's committed spend in a window is settled (actual costs) plus reserved
// (what requests in flight hold), counted in integer micro-dollars. A request
// is allowed while committed < budget; it then holds its estimate, but never
// more than what is left of the budget (budget − committed), and Settle
// replaces what it holds by its actual cost. The estimate takes no part in
// the check: a request whose estimate alone exceeds what is left (a
// max_tokens of 2^63 − 1, a huge prompt) is served and holds all that is
// left, so that the key's other requests are refused until it settles; its
// spend is then its actual cost, as for any request, and the key serves again
// while that leaves budget. Refusing on the estimate would refuse requests
// that cost little (clients often set max_tokens to the model's limit), and
// could not stop the overspend below anyway: a request without max_tokens may
// also cost more than its estimate.
//
// All amounts saturate (package usd): a cost, estimate or budget counts at
// most $1e9, a sum at most 2^53 − 1 µ$ (≈ $9e9, exact in Redis's Lua). Holds
// in flight never total more than the budget; only actual costs push the
// committed spend past it, and a sum that saturated stays above every budget
// until the window ends. So the committed spend never wraps or goes below
// zero, and after every request settled it is exactly the sum of their actual
// costs (below the saturation point).
//
// Bound: let L be the last request allowed in a window, F the requests in
// flight when L was allowed (L excluded), held(i) ≤ est(i) what i holds. Then
// the window's final spend is
//
//	spend < budget + actual(L) + Σ_{i∈F} (actual(i) − held(i))
//
// since committed = settled + Σ_F held(i) < budget when L was allowed. So
// concurrent requests overspend by less than the actual cost of what was in
// flight at the last admission (Σ over F and L of actual, as held ≥ 0), and
// with exact estimates that fit the budget by less than one request's cost.
// Sequential requests (F empty) overspend by less than the last request's
// cost. Across replicas sharing Redis, package quota keeps the same rule in
// one atomic check-and-reserve per request and states its bound while Redis
// is unreachable.
package budget

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/streamgate/streamgate/internal/usd"
)

// Period of a budget: calendar months or days in UTC, or no period at all.
const (
	Month = "month"
	Day   = "day"
	Total = "total"
)

// Limit of one key: USD per Period. USD 0 (or less, or NaN) means no budget:
// Reserve allows at once and tracks nothing; above $1e9 (+Inf included) it
// counts as $1e9.
type Limit struct {
	USD    float64
	Period string // Month, Day or Total; anything else is an error of Reserve
}

func (l Limit) none() bool { return !(l.USD > 0) }

func validPeriod(p string) bool { return p == Month || p == Day || p == Total }

// Window returns the period containing now: its start and its end, the reset
// time, both in UTC. Months and days are calendar months and days in UTC. For
// Total, and for an unknown period, both are zero: a Total window starts at
// the zero time (all spend ever) and never resets.
func Window(period string, now time.Time) (start, end time.Time) {
	now = now.UTC()
	y, m, d := now.Date()
	switch period {
	case Month:
		start = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	case Day:
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	}
	return time.Time{}, time.Time{}
}

// Exceeded is Reserve's refusal: the key's budget of the current window is
// spent. It holds the key's name (never its secret: callers pass a name).
type Exceeded struct {
	// Scope is whose budget it is: "" or "key" the key's own, "team" its
	// team's (Key is then the team's name), "model" the key's budget for
	// Model (package quota sets them).
	Scope string
	Key   string
	Model string
	Limit Limit
	// Spent is the key's committed spend: settled plus held by its
	// requests in flight, at least Limit.USD (at least $1e9 for a larger
	// budget), at most about $9e9 (see the package comment).
	Spent float64
	// Reset is the end of the window, when the budget is available again;
	// zero for Total.
	Reset time.Time
}

// Error reads "budget of $50.00 per month spent ($50.13 used); it resets at
// 2026-12-01T00:00:00Z", or "budget of $0.002 in total spent ($0.00213
// used)": amounts in usd.Format, digits enough to be true below a cent.
//
// A team's reads `team "search" budget of $500.00 per month is spent
// ($500.12 used); it resets at 2026-12-01T00:00:00Z`, a key's budget for
// a model `key "dev" budget for model "gpt-4.1" of $5.00 per day is spent
// (…)`.
func (e *Exceeded) Error() string {
	who := ""
	switch e.Scope {
	case "team":
		who = fmt.Sprintf("team %q ", e.Key)
	case "model":
		who = fmt.Sprintf("key %q budget for model %q", e.Key, e.Model)
	}
	if who != "" {
		if e.Scope == "team" {
			who += "budget"
		}
		if e.Limit.Period == Total || e.Reset.IsZero() {
			return fmt.Sprintf("%s of %s in total is spent (%s used)", who, usd.Format(e.Limit.USD), usd.Format(e.Spent))
		}
		return fmt.Sprintf("%s of %s per %s is spent (%s used); it resets at %s",
			who, usd.Format(e.Limit.USD), e.Limit.Period, usd.Format(e.Spent), e.Reset.UTC().Format(time.RFC3339))
	}
	if e.Limit.Period == Total || e.Reset.IsZero() {
		return fmt.Sprintf("budget of %s in total spent (%s used)", usd.Format(e.Limit.USD), usd.Format(e.Spent))
	}
	return fmt.Sprintf("budget of %s per %s spent (%s used); it resets at %s",
		usd.Format(e.Limit.USD), e.Limit.Period, usd.Format(e.Spent), e.Reset.UTC().Format(time.RFC3339))
}

// Reservation is the budget held by one allowed request until Settle. A nil
// *Reservation (Reserve's answer when the key has no budget) is valid: Settle
// on it does nothing.
type Reservation struct {
	done atomic.Bool
	held int64 // micro-dollars held: the estimate, at most what was left

	// The entry and its load generation when reserved.
	e   *entry
	gen uint64
}

// Settle replaces the reservation by the request's actual cost in USD
// (negative or NaN counts as 0). Only the first call counts; later calls, and
// calls on nil, do nothing. Call it also for a request that failed, with the
// cost it incurred (often 0), so that its estimate is released. A request
// reserved in a window that has ended since is not counted in the new one.
func (r *Reservation) Settle(ctx context.Context, actual float64) {
	if r == nil || !r.done.CompareAndSwap(false, true) {
		return
	}
	r.e.settle(r.gen, r.held, usd.Micro(actual))
}

// SpentFunc returns what key already spent since a window's start (the zero
// time for Total), in USD, from the usage ledger: the gateway passes a SUM
// over usage_entries, so this package needs no database. It is called once
// per key and window per replica. Spend still queued in an
// asynchronous ledger writer is not in it.
type SpentFunc func(ctx context.Context, key string, since time.Time) (float64, error)

// Ledger tracks spend per key and period: what is settled plus what is
// reserved by requests in flight. Safe for concurrent use.
type Ledger interface {
	// Reserve allows the request while the key's settled spend plus its
	// reservations stays below l.USD, and then reserves est (the request's
	// estimated cost in USD; negative or NaN counts as 0, +Inf or more
	// than $1e9 as $1e9), at most what is left of l.USD. It returns the
	// Reservation to settle, nil and no error when l has no budget, or an
	// *Exceeded when the budget of the current window is spent. Other errors:
	// an unknown period, a failed SpentFunc, or ctx ended.
	Reserve(ctx context.Context, key string, l Limit, est float64) (*Reservation, error)
}

var (
	_ Ledger = (*Local)(nil)
)
