package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/usage"
)

func init() { subcommands = append(subcommands, newUsageCmd) }

// usageFlags are the flags of `streamgate usage`.
type usageFlags struct {
	config, database string
	since, until     string
	by               string
	json, csv        bool
}

// newUsageCmd is `streamgate usage`: spend and reliability per key, model,
// day or route, read from the usage ledger.
func newUsageCmd(e *env) *cobra.Command {
	var f usageFlags
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Spend and reliability per key, model, day or route, from the usage ledger",
		Long: `usage reads the usage ledger (the config's database:, or --database) and prints,
per group of --by over the window [--since, --until): requests, failed
(outcome not ok), error rate, fallbacks (more than one attempt, not hedged),
hedged, continued (a cut stream continued), input tokens (every prompt token),
the parts of them read from and written to the providers' prompt caches
(cache read, cache write: billed at the models' cached_input and cache_write
prices), output tokens and cost; then the total and the window's cost scaled
to 30 days.

--since and --until take a duration back from now (30d, 720h, 90m), a date
(2026-11-01: midnight UTC at its start) or an RFC 3339 time; --until is
exclusive, so "--since 2026-11-01 --until 2026-12-01" is November. Days
(--by day) are UTC dates.

--json prints {"since", "until", "by", "groups": [{"group", "requests",
"failed", "error_rate", "fallbacks", "hedged", "continued", "input_tokens",
"output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd"}],
"total": {the same without "group"}, "projected_monthly_usd",
"projection_days"}; --csv prints a header row and one row per group, its
first column named after --by, the cache columns last.`,
		Example: `  streamgate usage
  streamgate usage --config streamgate.yaml --since 7d --by key
  streamgate usage --since 2026-11-01 --until 2026-12-01 --by day --csv > november.csv`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runUsage(c.Context(), e, &f, time.Now()) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "gateway config file whose database: holds the ledger (default: the embedded default's; secrets need not be set)")
	fl.StringVar(&f.database, "database", "", "the ledger's database instead of the config's (sqlite://PATH or postgres://...)")
	fl.StringVar(&f.since, "since", "30d", "start of the window (inclusive): a duration back from now (30d, 720h), a date (2026-11-01) or an RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "end of the window (exclusive), in the same forms (default: now)")
	fl.StringVar(&f.by, "by", "model", "group by key, model, day (UTC) or route")
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

	dsn, err := ledgerDSN(e, f)
	if err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := usage.Open(octx, dsn)
	if err != nil {
		return err
	}
	defer store.Close()
	rows, err := usage.Report(ctx, store, q)
	if err != nil {
		return err
	}

	rep := usage.NewBreakdown(q, rows, now)
	switch {
	case f.json:
		return printJSON(e.stdout, rep)
	case f.csv:
		return writeUsageCSV(e.stdout, rep)
	default:
		return writeUsageTable(e.stdout, rep)
	}
}

// ledgerDSN returns the database of --database, else of --config, else of
// the embedded default (STREAMGATE_DATABASE applies to both). A SQLite file
// that does not exist is an error: opening it would create an empty ledger.
func ledgerDSN(e *env, f *usageFlags) (string, error) {
	dsn := f.database
	if dsn == "" {
		var cfg *config.Config
		var err error
		if f.config != "" {
			cfg, err = config.LoadWithoutSecrets(f.config, e.getenv)
		} else {
			cfg, _, err = config.Default(e.getenv)
		}
		if err != nil {
			return "", configError{err}
		}
		dsn = cfg.Database
	}
	if rest, ok := cutPrefixFold(dsn, "sqlite://"); ok {
		path, _, _ := strings.Cut(rest, "?")
		if path != "" && path != ":memory:" {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("no usage ledger at %s (%s does not exist): pass the gateway's --config or --database", dsn, path)
			}
		}
	}
	return dsn, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// writeUsageTable writes the report as a table, right-aligned like the
// benchmark's, then the total and the projection.
func writeUsageTable(w io.Writer, rep *usage.Breakdown) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\trequests\tfailed\terror rate\tfallbacks\thedged\tcontinued\tinput tok\tcache read\tcache write\toutput tok\tcost USD\t\n", rep.By)
	line := func(name string, t *usage.Totals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f%%\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t\n", name, t.Requests, t.Failed, 100*t.ErrorRate,
			t.Fallbacks, t.Hedged, t.Continued, t.InputTokens, t.CacheReadTokens, t.CacheWriteTokens, t.OutputTokens, t.CostUSD)
	}
	for i := range rep.Groups {
		name := rep.Groups[i].Group
		if name == "" {
			name = "(none)"
		}
		line(name, &rep.Groups[i].Totals)
	}
	line("total", &rep.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "window %s to %s; projected monthly cost $%.2f (cost over %s, scaled to %d days)\n",
		rep.Since, rep.Until, rep.ProjectedMonthlyUSD, daysText(rep.ProjectionDays), usage.ProjectionDays)
	return err
}

func daysText(d float64) string {
	if d == 1 {
		return "1 day"
	}
	if d == float64(int64(d)) {
		return strconv.FormatInt(int64(d), 10) + " days"
	}
	return strconv.FormatFloat(d, 'f', 2, 64) + " days"
}

// writeUsageCSV writes a header row (the first column named after --by) and
// one row per group; the total is left to the spreadsheet.
func writeUsageCSV(w io.Writer, rep *usage.Breakdown) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{rep.By, "requests", "failed", "error_rate", "fallbacks", "hedged", "continued", "input_tokens", "output_tokens", "cost_usd",
		"cache_read_tokens", "cache_write_tokens"})
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, g := range rep.Groups {
		cw.Write([]string{g.Group, i(g.Requests), i(g.Failed), f(g.ErrorRate), i(g.Fallbacks), i(g.Hedged), i(g.Continued),
			i(g.InputTokens), i(g.OutputTokens), f(g.CostUSD), i(g.CacheReadTokens), i(g.CacheWriteTokens)})
	}
	cw.Flush()
	return cw.Error()
}
