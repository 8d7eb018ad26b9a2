package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/usage"
	"github.com/streamgate/streamgate/internal/usd"
)

func init() { subcommands = append(subcommands, newUsageCmd) }

// usageFlags are the flags of `streamgate usage`.
type usageFlags struct {
	config, database string
	since, until     string
	by               string
	json, csv        bool
}

// newUsageCmd is `streamgate usage`: spend, cache savings and reliability
// per key, model, day, route, team or provider key, read from the usage
// ledger.
func newUsageCmd(e *env) *cobra.Command {
	var f usageFlags
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Spend, cache savings and reliability per key, model, day, route, team or provider key, from the usage ledger",
		Long: `usage reads the usage ledger (the database chosen as for every command: --database,
STREAMGATE_DATABASE, --config's database:, ./streamgate.yaml's, else
sqlite://streamgate.db; named on stderr) and prints, per group of --by over the
window [--since, --until): requests; refused (by the gateway's own checks before
any upstream: a bad key, bad input, an unknown model, a rate limit, a budget);
failed (served but not answered: upstream errors, timeouts); error rate (failed
/ (requests − refused), what the dashboard shows too); cancelled (the client
went away: served, not failed); fallbacks (more than one attempt, not hedged),
hedged, continued (a cut stream continued), input tokens (every prompt token),
the parts of them read from and written to the providers' prompt caches
(cache read, cache write: billed at the models' cached_input and cache_write
prices), the cache-read share (cache read / input tokens), output tokens, cost
and what the prompt caches saved (saved USD: the cache reads at the input
price less the cached_input price, less the cache writes at the cache_write
price less the input price; below 0 when the writes cost more than the reads
saved); then the total and a projection: the spend
rate over the window's span that the ledger covers (from --since, or from the
ledger's first entry when later; at least an hour) scaled to 30 days. Amounts
of USD show at least 2 decimals and, below $1, 3 significant digits (up to 6
decimals): $0.002 is "0.002", never "0.00".

--by team groups by the key's team, --by provider_key by the name of the
provider API key that served the request (a provider with one api_key has
none); entries without one are the group "(none)", in the table, --json and --csv alike.

Savings are priced at the current prices of the config read for them (named
on stderr): --config, else ./streamgate.yaml when present, else the embedded
default; not at the prices of the time of the requests (the ledger keeps
their cost, not their prices). A model the config does not know saves 0; a
./streamgate.yaml that does not load, the ledger named by --database or
STREAMGATE_DATABASE, prices nothing and says so.

--since and --until take a duration back from now (30d, 720h, 90m), a date
(2026-11-01: midnight UTC at its start) or an RFC 3339 time; --until is
exclusive, so "--since 2026-11-01 --until 2026-12-01" is November. Days
(--by day) are UTC dates.

--json prints {"since", "until", "by", "groups": [{"group", "requests",
"refused", "cancelled", "failed", "error_rate", "fallbacks", "hedged",
"continued", "input_tokens", "output_tokens", "cache_read_tokens",
"cache_write_tokens", "cache_read_share", "cost_usd", "savings_usd"}],
"total": {the same without "group"},
"projected_monthly_usd", "projection_days"}; --csv prints a header row and one
row per group, its first column named after --by, the cache columns, then
refused and cancelled, then cache_read_share and savings_usd last.

A SQLite database that does not exist is an error (the command never creates
an empty ledger).`,
		Example: `  streamgate usage
  streamgate usage --config streamgate.yaml --since 7d --by key
  streamgate usage --by team --since 2026-11-01 --until 2026-12-01
  streamgate usage --since 2026-11-01 --until 2026-12-01 --by day --csv > november.csv`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runUsage(c.Context(), e, &f, time.Now()) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "gateway config file whose database: holds the ledger (default: ./streamgate.yaml if present, else the embedded default's; secrets need not be set)")
	fl.StringVar(&f.database, "database", "", "the ledger's database instead of the config's (sqlite://PATH or postgres://...; env STREAMGATE_DATABASE)")
	fl.StringVar(&f.since, "since", "30d", "start of the window (inclusive): a duration back from now (30d, 720h), a date (2026-11-01) or an RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "end of the window (exclusive), in the same forms (default: now)")
	fl.StringVar(&f.by, "by", "model", "group by key, model, day (UTC), route, team or provider_key")
	fl.BoolVar(&f.json, "json", false, "print JSON")
	fl.BoolVar(&f.csv, "csv", false, "print CSV with a header row")
	return cmd
}

func runUsage(ctx context.Context, e *env, f *usageFlags, now time.Time) error {
	q := usage.ReportQuery{By: f.by}
	if err := q.Validate(); err != nil {
		return usagef("--by: %v", err)
	}
	if f.json && f.csv {
		return usagef("--json and --csv exclude each other")
	}
	var err error
	if q.Since, err = usage.ParseWhen(f.since, now); err != nil {
		return usagef("--since: %v", err)
	}
	q.Until = now
	if f.until != "" {
		if q.Until, err = usage.ParseWhen(f.until, now); err != nil {
			return usagef("--until: %v", err)
		}
	}
	if !q.Since.Before(q.Until) {
		return usagef("--since %s is not before --until %s", stamp(q.Since), stamp(q.Until))
	}

	db, err := chooseDatabase(e, f.database, f.config, false)
	if err != nil {
		return err
	}
	if q.Savings, err = usagePrices(e, f.config); err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := usage.Open(octx, db.dsn)
	if err != nil {
		return err
	}
	defer store.Close()
	rows, err := usage.Report(ctx, store, q)
	if err != nil {
		return err
	}

	rep := usage.NewBreakdown(q, rows, now)
	// The entries without a key, route, team or provider key are the
	// group "(none)" in every format, as the table has always shown them
	// (the JSON and CSV said "" before).
	for i := range rep.Groups {
		if rep.Groups[i].Group == "" {
			rep.Groups[i].Group = noneGroup
		}
	}
	switch {
	case f.json:
		return printJSON(e.stdout, rep)
	case f.csv:
		return writeUsageCSV(e.stdout, rep)
	default:
		return writeUsageTable(e.stdout, rep)
	}
}

// usagePrices returns the savings at the prices of the config --config
// names, else ./streamgate.yaml when present, else the embedded default's,
// and names it on stderr. A ./streamgate.yaml that does not load when the
// database came from elsewhere is said on stderr and prices nothing (nil):
// the report does not need it.
func usagePrices(e *env, cfgPath string) (func(model string, read, write int64) float64, error) {
	path, from := cfgPath, "--config "+cfgPath
	if path == "" {
		if _, err := os.Stat(workingConfig); err == nil {
			path, from = workingConfig, "./"+workingConfig
		}
	}
	var cfg *config.Config
	var err error
	if path != "" {
		cfg, err = config.LoadWithoutSecrets(path, e.getenv)
		if err != nil && cfgPath == "" {
			fmt.Fprintf(e.stderr, "streamgate: prices: ./%s does not load, savings not priced (0): %s\n", workingConfig, strings.ReplaceAll(err.Error(), "\n", "; "))
			return nil, nil
		}
	} else {
		from = "the embedded default"
		cfg, _, err = config.Default(e.getenv)
	}
	if err != nil {
		return nil, configError{err}
	}
	fmt.Fprintf(e.stderr, "streamgate: prices: from %s (savings at its current prices)\n", from)
	return func(model string, read, write int64) float64 {
		p, ok := cfg.Price(model)
		if !ok {
			return 0
		}
		return p.CacheSavings(read, write)
	}, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// writeUsageTable writes the report as a table, right-aligned like the
// benchmark's, then the total and the projection.
func writeUsageTable(w io.Writer, rep *usage.Breakdown) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\trequests\trefused\tfailed\terror rate\tcancelled\tfallbacks\thedged\tcontinued\tinput tok\tcache read\tcache write\tread share\toutput tok\tcost USD\tsaved USD\t\n", rep.By)
	line := func(name string, t *usage.Totals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f%%\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f%%\t%d\t%s\t%s\t\n", name, t.Requests, t.Refused, t.Failed, 100*t.ErrorRate,
			t.Cancelled, t.Fallbacks, t.Hedged, t.Continued, t.InputTokens, t.CacheReadTokens, t.CacheWriteTokens, 100*t.CacheReadShare,
			t.OutputTokens, usd.Figure(t.CostUSD), usd.Figure(t.SavingsUSD))
	}
	for i := range rep.Groups {
		line(rep.Groups[i].Group, &rep.Groups[i].Totals)
	}
	line("total", &rep.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.ProjectionDays == 0 {
		_, err := fmt.Fprintf(w, "window %s to %s; nothing spent to project\n", rep.Since, rep.Until)
		return err
	}
	_, err := fmt.Fprintf(w, "window %s to %s; projected monthly cost %s (the spend rate over %s, scaled to %d days)\n",
		rep.Since, rep.Until, usd.Format(rep.ProjectedMonthlyUSD), spanText(rep.ProjectionDays), usage.ProjectionDays)
	return err
}

// spanText writes a projection's span: days, or hours below a day.
func spanText(days float64) string {
	unit, n := "day", days
	if days < 1 {
		unit, n = "hour", days*24
	}
	t := strconv.FormatFloat(n, 'f', 2, 64)
	t = strings.TrimSuffix(strings.TrimRight(t, "0"), ".")
	if t == "1" {
		return "1 " + unit
	}
	return t + " " + unit + "s"
}

// writeUsageCSV writes a header row (the first column named after --by) and
// one row per group; the total is left to the spreadsheet.
func writeUsageCSV(w io.Writer, rep *usage.Breakdown) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{rep.By, "requests", "failed", "error_rate", "fallbacks", "hedged", "continued", "input_tokens", "output_tokens", "cost_usd",
		"cache_read_tokens", "cache_write_tokens", "refused", "cancelled", "cache_read_share", "savings_usd"})
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, g := range rep.Groups {
		cw.Write([]string{g.Group, i(g.Requests), i(g.Failed), f(g.ErrorRate), i(g.Fallbacks), i(g.Hedged), i(g.Continued),
			i(g.InputTokens), i(g.OutputTokens), f(g.CostUSD), i(g.CacheReadTokens), i(g.CacheWriteTokens), i(g.Refused), i(g.Cancelled),
			f(g.CacheReadShare), f(g.SavingsUSD)})
	}
	cw.Flush()
	return cw.Error()
}

// noneGroup names the group of the entries without a value of --by.
const noneGroup = "(none)"
