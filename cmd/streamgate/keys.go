package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/usage"
	"github.com/streamgate/streamgate/internal/usd"
)

func init() { subcommands = append(subcommands, newKeysCmd) }

// newKeysCmd is `streamgate keys`: the gateway's API keys kept in its
// database (beside the static keys of the config file).
func newKeysCmd(e *env) *cobra.Command {
	var cfgPath, dsn string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list, show, revoke and rotate API keys kept in the gateway's database",
		Long: `keys manages the gateway's API keys kept in its database. A key's secret (sg-…) is
shown once, when it is created or rotated; the database keeps only its SHA-256
and a display prefix. Every gateway replica using the database sees a new,
revoked or rotated key within a second. The static keys of the config file keep
working beside them.

Each key is shown with its limits, its budget and period, what the usage ledger
recorded of its spend in the current period (calendar UTC month or day, or all
ever for total; a month for a key without a budget) and what remains of the
budget; --json adds "spent_usd", "spent_since" and "remaining_usd".

The database is the first of: --database, STREAMGATE_DATABASE, the database: of
--config FILE, that of ./streamgate.yaml when the working directory has one,
sqlite://streamgate.db; each command names it on stderr. Only create may
create a SQLite file: the others fail when it does not exist.`,
		Example: `  streamgate keys create --name app --models sim-gpt-4.1,sim-fast --max-streams 8 --expires 30d
  streamgate keys list
  streamgate keys create --name search-app --team search
  streamgate keys create --name agent --mcp-tools 'docs__*,fs__read_file'
  streamgate keys revoke app`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&cfgPath, "config", "", "gateway config file whose database: holds the keys (default: ./streamgate.yaml if present, else sqlite://streamgate.db)")
	pf.StringVar(&dsn, "database", "", "the database instead of the config's (sqlite://PATH or postgres://...; env STREAMGATE_DATABASE)")
	pf.BoolVar(&asJSON, "json", false, "print JSON")

	withStore := storeCommand(e, &dsn, &cfgPath)
	print := func(ctx context.Context, db database, k keys.Key, secret string) error {
		shown, err := withSpend(ctx, db, []keys.Key{k}, time.Now())
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(e.stdout, struct {
				keyView
				Secret string `json:"secret,omitempty"`
			}{shown[0], secret})
		}
		printKeys(e.stdout, shown)
		if secret != "" {
			fmt.Fprintf(e.stdout, "\nsecret: %s\n(shown once: store it now; the database keeps only its hash)\n", secret)
		}
		return nil
	}

	var name, models, mcpTools, expires, period, team string
	var budgetUSD float64
	var maxStreams, rpm, tpm int
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create a key and print its secret once",
		Args:  cobra.NoArgs,
		RunE: withStore(true, func(ctx context.Context, s *keys.Store, db database) error {
			k := keys.Key{Name: name, MaxStreams: maxStreams, RPM: rpm, TPM: tpm, BudgetUSD: budgetUSD, BudgetPeriod: period, Team: team}
			if team != "" { // a team of the config is a team too
				names, err := configTeams(e, cfgPath)
				if err != nil {
					return err
				}
				s.AllowTeams(names...)
			}
			if models != "" {
				for m := range strings.SplitSeq(models, ",") {
					k.Models = append(k.Models, strings.TrimSpace(m))
				}
				if err := checkModels(e, cfgPath, db, k.Models); err != nil {
					return err
				}
			}
			if mcpTools != "" {
				for g := range strings.SplitSeq(mcpTools, ",") {
					k.MCPTools = append(k.MCPTools, strings.TrimSpace(g))
				}
				if err := checkMCPTools(e, cfgPath, db, k.MCPTools); err != nil {
					return err
				}
			}
			if expires != "" {
				t, err := gateway.ParseExpires(expires, time.Now())
				if err != nil {
					return usagef("--expires: %v", err)
				}
				k.ExpiresAt = t
			}
			created, secret, err := s.Create(ctx, k)
			if err != nil {
				return err
			}
			return print(ctx, db, created, secret)
		}),
	}
	create.Flags().StringVar(&name, "name", "", "the key's name (shown in logs and usage records; unique among active keys)")
	create.Flags().StringVar(&models, "models", "", "models the key may use, comma-separated (default: all)")
	create.Flags().StringVar(&mcpTools, "mcp-tools", "", "MCP tools the key may call through /mcp, comma-separated globs over prefixed names such as docs__* or fs__read_file (default: all)")
	create.Flags().IntVar(&maxStreams, "max-streams", 0, "concurrent requests of the key (0: limits.max_streams_per_key)")
	create.Flags().IntVar(&rpm, "rpm", 0, "requests per minute (a sliding minute, shared by every replica through redis; 0: no limit)")
	create.Flags().IntVar(&tpm, "tpm", 0, "tokens (input + output) per minute (0: no limit)")
	create.Flags().Float64Var(&budgetUSD, "budget-usd", 0, "what the key may spend per --budget-period, in USD from the models' prices (0: no budget)")
	create.Flags().StringVar(&period, "budget-period", "month", "the budget's period: month, day (calendar UTC) or total")
	create.Flags().StringVar(&team, "team", "", "the key's team: its limits and budget apply too (a team of the database, streamgate teams, or of the config's teams:)")
	create.Flags().StringVar(&expires, "expires", "", "expiry: a duration such as 30d or 12h, or an RFC 3339 time (default: never)")
	create.MarkFlagRequired("name")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: withStore(false, func(ctx context.Context, s *keys.Store, db database) error {
			all, err := s.List(ctx)
			if err != nil {
				return err
			}
			shown, err := withSpend(ctx, db, all, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(e.stdout, map[string]any{"keys": shown})
			}
			printKeys(e.stdout, shown)
			return nil
		}),
	}
	one := func(use, short string, f func(context.Context, *keys.Store, string) (keys.Key, string, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID|NAME",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				return withStore(false, func(ctx context.Context, s *keys.Store, db database) error {
					k, secret, err := f(ctx, s, args[0])
					if err != nil {
						return err
					}
					return print(ctx, db, k, secret)
				})(c, nil)
			},
		}
	}
	show := one("show", "Show one key", func(ctx context.Context, s *keys.Store, ref string) (keys.Key, string, error) {
		k, err := s.Get(ctx, ref)
		return k, "", err
	})
	revoke := one("revoke", "Revoke a key: every replica refuses it within a second", func(ctx context.Context, s *keys.Store, ref string) (keys.Key, string, error) {
		k, err := s.Revoke(ctx, ref)
		return k, "", err
	})
	rotate := one("rotate", "Give a key a new secret (printed once); the old one stops working", func(ctx context.Context, s *keys.Store, ref string) (keys.Key, string, error) {
		return s.Rotate(ctx, ref)
	})
	cmd.AddCommand(create, list, show, revoke, rotate)
	return cmd
}

// cliKeyError makes the store's input errors bad usage (exit 2).
func cliKeyError(err error) error {
	if errors.Is(err, keys.ErrInvalid) || errors.Is(err, keys.ErrNameTaken) || errors.Is(err, keys.ErrNotFound) || isTeamInput(err) {
		return usageError{err}
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// storeCommand returns withStore for the commands whose flags fill dsn and
// cfgPath: withStore(create, f) runs f on the chosen database's key store
// (keys and teams); only a command that writes (create) may create a
// SQLite file.
func storeCommand(e *env, dsn, cfgPath *string) func(create bool, f func(ctx context.Context, s *keys.Store, db database) error) func(*cobra.Command, []string) error {
	return func(create bool, f func(ctx context.Context, s *keys.Store, db database) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, _ []string) error {
			db, err := chooseDatabase(e, *dsn, *cfgPath, create)
			if err != nil {
				return err
			}
			octx, cancel := context.WithTimeout(c.Context(), 10*time.Second)
			defer cancel()
			s, err := keys.Open(octx, db.dsn)
			if err != nil {
				return err
			}
			defer s.Close()
			return cliKeyError(f(c.Context(), s, db))
		}
	}
}

// keyView is a key as the key commands show it: with its budget's period
// and what the usage ledger recorded of its spend in the current period.
type keyView struct {
	keys.Key
	spendView
}

// spendView is what the usage ledger recorded of a key's or a team's
// spend in its current budget period.
type spendView struct {
	// SpentUSD is the cost the ledger recorded since SpentSince, the start
	// of the current budget period (month without a budget; the zero
	// time, all ever, for total): requests still running or queued in a
	// gateway's ledger writer are not in it.
	SpentUSD   float64   `json:"spent_usd"`
	SpentSince time.Time `json:"spent_since,omitzero"`
	// RemainingUSD is the budget less SpentUSD, at least 0; absent
	// without a budget.
	RemainingUSD *float64 `json:"remaining_usd,omitempty"`
}

// withSpend reads the spend of each key's current period from the usage
// ledger in db (the keys' database holds it too).
func withSpend(ctx context.Context, db database, list []keys.Key, now time.Time) ([]keyView, error) {
	out := make([]keyView, len(list))
	err := readSpend(ctx, db, now, usage.Spent, len(list), func(i int) (string, *string, float64, *spendView) {
		out[i].Key = list[i]
		k := &out[i].Key
		return k.Name, &k.BudgetPeriod, k.BudgetUSD, &out[i].spendView
	})
	return out, err
}

// readSpend fills the spend of n budget holders (keys or teams) from the
// usage ledger in db with spent: holder i gives its name, its budget
// period (set to month when empty), its budget and where its figures go.
func readSpend(ctx context.Context, db database, now time.Time, spent func(context.Context, usage.Store, string, time.Time) (float64, error),
	n int, holder func(i int) (name string, period *string, budgetUSD float64, v *spendView)) error {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := usage.Open(octx, db.dsn)
	if err != nil {
		return err
	}
	defer store.Close()
	for i := range n {
		name, period, budgetUSD, v := holder(i)
		*period = cmp.Or(*period, budget.Month)
		since, _ := budget.Window(*period, now)
		s, err := spent(octx, store, name, since)
		if err != nil {
			return err
		}
		v.SpentUSD, v.SpentSince = s, since
		if budgetUSD > 0 {
			left := max(budgetUSD-s, 0)
			v.RemainingUSD = &left
		}
	}
	return nil
}

// printKeys prints keys as a table, amounts in usd.Format.
func printKeys(w io.Writer, list []keyView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tMODELS\tMCP TOOLS\tTEAM\tMAX STREAMS\tRPM\tTPM\tBUDGET\tPERIOD\tSPENT\tREMAINING\tCREATED\tEXPIRES\tSTATUS")
	for _, k := range list {
		models := strings.Join(k.Models, ",")
		if models == "" {
			models = "all"
		}
		tools := strings.Join(k.MCPTools, ",")
		if tools == "" {
			tools = "all"
		}
		expiresAt, status := "never", "active"
		if !k.ExpiresAt.IsZero() {
			expiresAt = k.ExpiresAt.UTC().Format(time.RFC3339)
			if !k.ExpiresAt.After(time.Now()) {
				status = "expired"
			}
		}
		if !k.RevokedAt.IsZero() {
			status = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
		}
		budgetUSD, remaining := "none", "-"
		if k.RemainingUSD != nil {
			budgetUSD, remaining = usd.Format(k.BudgetUSD), usd.Format(*k.RemainingUSD)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, models, tools, cmp.Or(k.Team, "-"), k.MaxStreams, k.RPM, k.TPM,
			budgetUSD, k.BudgetPeriod, usd.Format(k.SpentUSD), remaining, k.CreatedAt.UTC().Format(time.RFC3339), expiresAt, status)
	}
	tw.Flush()
}
