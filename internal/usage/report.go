package usage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ProjectionDays is the month a Breakdown projects its cost to.
const ProjectionDays = 30

// reportDimensions are the values of ReportQuery.By, in the order messages
// list them.
var reportDimensions = []string{"key", "model", "day", "route", "team", "provider_key"}

// ReportQuery selects the entries of a report and how they are grouped.
type ReportQuery struct {
	Since time.Time // entries with Time >= Since; zero means no lower bound
	Until time.Time // entries with Time < Until; zero means no upper bound
	// By is the dimension of the groups: "key" (the key's name), "model"
	// (the model the client asked for), "route" (the provider/model that
	// served it, "" when none did), "day" (the UTC date of arrival,
	// YYYY-MM-DD), "team" (the key's team, "" for none) or "provider_key"
	// (the name of the provider API key that served it, "" for a provider
	// with a single key or none served). "" means "model".
	By string
	// Savings prices what the prompt cache saved model's entries of a
	// group, from their cache-read and cache-write token sums (as
	// config.Price.CacheSavings does at the model's price); nil: no
	// savings (ReportRow.SavingsUSD 0).
	Savings func(model string, cacheRead, cacheWrite int64) float64
}

// Validate reports a By that is not one of the dimensions, naming them.
func (q ReportQuery) Validate() error {
	if q.By == "" {
		return nil
	}
	for _, d := range reportDimensions {
		if q.By == d {
			return nil
		}
	}
	return fmt.Errorf("unknown dimension %q (want one of %s)", q.By, strings.Join(reportDimensions, ", "))
}

// ReportRow is the total of the entries of one group.
type ReportRow struct {
	Group    string // the value of the dimension; "" for entries without one (no key, no route)
	Requests int64  // entries
	// Refused are the entries the gateway refused itself, before any
	// upstream (OutcomeRejected: a bad or unknown key, bad input, an
	// unknown model, a rate limit, a budget; OutcomeUntranslatable: no
	// route's dialect can carry it): never served, so not failed.
	Refused int64
	// Cancelled are the entries whose client went away
	// (OutcomeClientCancelled): served, not failed.
	Cancelled int64
	// Failed are the entries the gateway tried to serve and could not:
	// any Outcome but ok, rejected, untranslatable and client_cancelled
	// (upstream_error, timeout).
	Failed int64
	// LedgerStart is the arrival of the ledger's earliest entry before the
	// query's Until, of any group (the ledger's age, which a projection
	// needs): the same in every row of a report, zero when unknown.
	LedgerStart  time.Time
	Fallbacks    int64 // entries with more than one attempt that were not hedged
	Hedged       int64 // entries with a hedged attempt
	Continued    int64 // entries with at least one continuation
	InputTokens  int64 // sum of InputTokens
	OutputTokens int64 // sum of OutputTokens
	// CacheReadTokens and CacheWriteTokens are the sums of the entries'
	// CacheReadTokens and CacheWriteTokens (parts of InputTokens).
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          float64 // sum of CostUSD
	// SavingsUSD is what the prompt cache saved the group's entries, the
	// sum of ReportQuery.Savings over the models of the group (0 without
	// it); below 0 when the cache writes cost more than the reads saved.
	SavingsUSD float64
}

// reporter is the optional capability of a Store that Report needs.
type reporter interface {
	report(ctx context.Context, q ReportQuery) ([]ReportRow, error)
}

var _ reporter = (*sqlStore)(nil)

// Report totals the entries in q's window per group of q.By, ordered by
// group (days chronologically). No matching entry gives an empty slice. An
// unknown q.By is an error naming the dimensions, as is a Store that cannot
// report (one not opened by Open).
func Report(ctx context.Context, s Store, q ReportQuery) ([]ReportRow, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("usage: report: %w", err)
	}
	if q.By == "" {
		q.By = "model"
	}
	r, ok := s.(reporter)
	if !ok {
		return nil, fmt.Errorf("usage: report: store %T cannot report", s)
	}
	return r.report(ctx, q)
}

// groupExpr maps a validated dimension to a fixed column expression: the
// dimension's name never reaches the SQL text.
func (d *dialect) groupExpr(by string) string {
	switch by {
	case "key":
		return "key_id"
	case "route":
		return "route"
	case "team":
		return "team"
	case "provider_key":
		return "provider_key"
	case "day":
		if d == postgresDialect {
			return "to_char(arrived_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
		}
		// arrived_at is Unix microseconds on SQLite.
		return "date(arrived_at / 1000000, 'unixepoch')"
	default:
		return "model"
	}
}

// report implements reporter: one GROUP BY over the window, per group and
// model (a model's price prices its savings), the models of a group then
// summed. hedged is an INTEGER on SQLite and a BOOLEAN on PostgreSQL; both
// read it as a truth value in CASE.
func (s *sqlStore) report(ctx context.Context, q ReportQuery) ([]ReportRow, error) {
	var b query
	ok, rejected, untranslatable, cancelled := b.arg(OutcomeOK), b.arg(OutcomeRejected), b.arg(OutcomeUntranslatable), b.arg(OutcomeClientCancelled)
	g := s.d.groupExpr(q.By)
	// CAST: PostgreSQL's SUM(bigint) is numeric.
	b.b.WriteString("SELECT " + g + ", model, COUNT(*), " +
		"CAST(SUM(CASE WHEN outcome IN (" + rejected + ", " + untranslatable + ") THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(CASE WHEN outcome = " + cancelled + " THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(CASE WHEN outcome NOT IN (" + ok + ", " + rejected + ", " + untranslatable + ", " + cancelled + ") THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(CASE WHEN attempts > 1 AND NOT hedged THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(CASE WHEN hedged THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(CASE WHEN continuations > 0 THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), " +
		"CAST(SUM(cache_read_tokens) AS BIGINT), CAST(SUM(cache_write_tokens) AS BIGINT), SUM(cost_usd) " +
		"FROM usage_entries")
	b.where(s.d, Filter{Since: q.Since, Until: q.Until})
	b.b.WriteString(" GROUP BY 1, 2 ORDER BY 1, 2")
	rows, err := s.db.QueryContext(ctx, b.b.String(), b.args...)
	if err != nil {
		return nil, fmt.Errorf("usage: report by %s from %s: %w", q.By, s.d.name, err)
	}
	defer rows.Close()
	out := []ReportRow{}
	for rows.Next() {
		var r ReportRow
		var model string
		if err := rows.Scan(&r.Group, &model, &r.Requests, &r.Refused, &r.Cancelled, &r.Failed, &r.Fallbacks, &r.Hedged, &r.Continued,
			&r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &r.CostUSD); err != nil {
			return nil, fmt.Errorf("usage: report by %s from %s: %w", q.By, s.d.name, err)
		}
		if q.Savings != nil && (r.CacheReadTokens > 0 || r.CacheWriteTokens > 0) {
			r.SavingsUSD = q.Savings(model, r.CacheReadTokens, r.CacheWriteTokens)
		}
		if n := len(out); n > 0 && out[n-1].Group == r.Group {
			out[n-1].merge(r)
			continue
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: report by %s from %s: %w", q.By, s.d.name, err)
	}
	if len(out) == 0 {
		return out, nil
	}
	start, err := s.ledgerStart(ctx, q.Until)
	if err != nil {
		return nil, fmt.Errorf("usage: report by %s from %s: %w", q.By, s.d.name, err)
	}
	for i := range out {
		out[i].LedgerStart = start
	}
	return out, nil
}

// merge adds the sums of o, another model of r's group, to r.
func (r *ReportRow) merge(o ReportRow) {
	r.Requests += o.Requests
	r.Refused += o.Refused
	r.Cancelled += o.Cancelled
	r.Failed += o.Failed
	r.Fallbacks += o.Fallbacks
	r.Hedged += o.Hedged
	r.Continued += o.Continued
	r.InputTokens += o.InputTokens
	r.OutputTokens += o.OutputTokens
	r.CacheReadTokens += o.CacheReadTokens
	r.CacheWriteTokens += o.CacheWriteTokens
	r.CostUSD += o.CostUSD
	r.SavingsUSD += o.SavingsUSD
}

// ledgerStart returns the arrival of the earliest entry before until (zero:
// no bound), zero when there is none: an indexed MIN(arrived_at).
func (s *sqlStore) ledgerStart(ctx context.Context, until time.Time) (time.Time, error) {
	var b query
	b.b.WriteString("SELECT MIN(arrived_at) FROM usage_entries")
	b.where(s.d, Filter{Until: until})
	var v any
	if err := s.db.QueryRowContext(ctx, b.b.String(), b.args...).Scan(&v); err != nil {
		return time.Time{}, fmt.Errorf("earliest entry: %w", err)
	}
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case int64: // SQLite: Unix microseconds
		return time.UnixMicro(v).UTC(), nil
	case time.Time: // PostgreSQL: timestamptz
		return v.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("earliest entry: arrived_at has type %T", v)
}

// ParseWhen parses the start or end of a report's window relative to now:
// a duration back from now (30d, 720h, 90m), a date (midnight UTC at its
// start) or an RFC 3339 time. Its errors name the accepted forms.
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil // midnight UTC
	}
	d, err := ParseDays(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("%q: want a duration back from now (30d, 720h, 90m), a date (2026-11-01) or an RFC 3339 time (2026-11-01T09:00:00Z)", s)
	}
	return now.Add(-d), nil
}

// ParseDays is time.ParseDuration with a "d" (24 h) unit on its own
// ("30d"; at most 100 years of days).
func ParseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days > 100*365 {
			return 0, fmt.Errorf("bad number of days %q", n)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// Totals are the figures of a report's group or of its total.
type Totals struct {
	Requests  int64 `json:"requests"`
	Refused   int64 `json:"refused"`   // refused by the gateway's own checks, before any upstream
	Cancelled int64 `json:"cancelled"` // the client went away; served, not failed
	Failed    int64 `json:"failed"`    // served and failed: upstream errors, timeouts
	// ErrorRate is failed / served, served being requests − refused: the
	// failures among what the gateway tried to serve (the dashboard's
	// definition); 0 when nothing was served.
	ErrorRate    float64 `json:"error_rate"`
	Fallbacks    int64   `json:"fallbacks"`
	Hedged       int64   `json:"hedged"`
	Continued    int64   `json:"continued"`
	InputTokens  int64   `json:"input_tokens"` // every prompt token, the cache reads and writes included
	OutputTokens int64   `json:"output_tokens"`
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens
	// read from and written to the upstreams' prompt caches.
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// CacheReadShare is CacheReadTokens / InputTokens: the share of the
	// prompt tokens read from a cache; 0 without prompt tokens.
	CacheReadShare float64 `json:"cache_read_share"`
	CostUSD        float64 `json:"cost_usd"`
	// SavingsUSD is what the prompt caches saved (ReportRow.SavingsUSD):
	// the cache reads at the input price less the cached_input price,
	// less the cache writes at the cache_write price less the input price,
	// at each model's price in the config the report was made with (the
	// current prices, not those at the time of the requests).
	SavingsUSD float64 `json:"savings_usd"`
}

func (t *Totals) add(r ReportRow) {
	t.Requests += r.Requests
	t.Refused += r.Refused
	t.Cancelled += r.Cancelled
	t.Failed += r.Failed
	t.Fallbacks += r.Fallbacks
	t.Hedged += r.Hedged
	t.Continued += r.Continued
	t.InputTokens += r.InputTokens
	t.OutputTokens += r.OutputTokens
	t.CacheReadTokens += r.CacheReadTokens
	t.CacheWriteTokens += r.CacheWriteTokens
	t.CostUSD += r.CostUSD
	t.SavingsUSD += r.SavingsUSD
	t.CacheReadShare = 0
	if t.InputTokens > 0 {
		t.CacheReadShare = float64(t.CacheReadTokens) / float64(t.InputTokens)
	}
	t.ErrorRate = 0
	if served := t.Requests - t.Refused; served > 0 {
		t.ErrorRate = float64(t.Failed) / float64(served)
	}
}

// Group is one group of a Breakdown.
type Group struct {
	Group string `json:"group"` // "" for entries without a key or route
	Totals
}

// Breakdown is a report in the shape `streamgate usage --json` and
// GET /admin/usage give: keep it stable.
type Breakdown struct {
	Since  string  `json:"since"` // RFC 3339, UTC
	Until  string  `json:"until"`
	By     string  `json:"by"`
	Groups []Group `json:"groups"`
	Total  Totals  `json:"total"`
	// ProjectedMonthlyUSD is the spend rate over ProjectionDays, the total
	// cost divided by them, times 30 days (the package's ProjectionDays).
	ProjectedMonthlyUSD float64 `json:"projected_monthly_usd"`
	// ProjectionDays is the span the rate is taken over: the window, from
	// since or from the ledger's first entry when that is later (a ledger
	// an hour old has an hour of spend, not 30 days'), to until or to now
	// when until is later (the future has no entries yet); at least an hour
	// unless the window is shorter. 0 when nothing is projected.
	ProjectionDays float64 `json:"projection_days"`
}

// minProjectionSpan is the shortest span a projection scales from: a few
// minutes of spend say little about a month.
const minProjectionSpan = time.Hour

// NewBreakdown totals rows of a report of q made at now, with the spend
// rate projected to ProjectionDays.
func NewBreakdown(q ReportQuery, rows []ReportRow, now time.Time) *Breakdown {
	rep := &Breakdown{Since: q.Since.UTC().Format(time.RFC3339), Until: q.Until.UTC().Format(time.RFC3339), By: q.By, Groups: make([]Group, 0, len(rows))}
	var first time.Time
	for _, r := range rows {
		var g Group
		g.Group = r.Group
		g.add(r)
		rep.Groups = append(rep.Groups, g)
		rep.Total.add(r)
		if !r.LedgerStart.IsZero() && (first.IsZero() || r.LedgerStart.Before(first)) {
			first = r.LedgerStart
		}
	}
	end := q.Until
	if end.IsZero() || end.After(now) {
		end = now
	}
	window := end.Sub(q.Since)
	if q.Since.IsZero() {
		if first.IsZero() {
			return rep // no start known: nothing to scale
		}
		window = end.Sub(first)
	}
	if window <= 0 || len(rows) == 0 {
		return rep
	}
	span := window
	if !first.IsZero() && first.After(q.Since) {
		span = min(window, max(end.Sub(first), minProjectionSpan))
	}
	rep.ProjectionDays = span.Hours() / 24
	rep.ProjectedMonthlyUSD = rep.Total.CostUSD * ProjectionDays / rep.ProjectionDays
	return rep
}
