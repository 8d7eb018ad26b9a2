package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/usage"
	"github.com/streamgate/streamgate/internal/usd"
)

func init() { subcommands = append(subcommands, newTeamsCmd) }

// newTeamsCmd is `streamgate teams`: the teams kept in the gateway's
// database (beside the teams: of the config file).
func newTeamsCmd(e *env) *cobra.Command {
	var cfgPath, dsn string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "teams",
		Short: "Create, list, show, change and delete teams kept in the gateway's database",
		Long: `teams manages the teams kept in the gateway's database: budgets and limits shared by
every key that names the team (streamgate keys create --team NAME). A request of
such a key is admitted only while its key's own limits and its team's allow it.
rpm, tpm and the budget are shared by every replica through redis; max_streams
is per replica. Every replica sees a change within a second.

A team of the config file (teams:) wins over a database team of the same name:
the commands refuse such a name when they can read the config (--config, or
./streamgate.yaml).

Each team is shown with what the usage ledger recorded of its keys' spend in the
current period (calendar UTC month or day, or all ever for total).

The database is chosen as for streamgate keys.`,
		Example: `  streamgate teams create --name search --budget-usd 500 --rpm 3000
  streamgate keys create --name app --team search
  streamgate teams set search --budget-usd 800
  streamgate teams list`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&cfgPath, "config", "", "gateway config file whose database: holds the teams (default: ./streamgate.yaml if present, else sqlite://streamgate.db)")
	pf.StringVar(&dsn, "database", "", "the database instead of the config's (sqlite://PATH or postgres://...; env STREAMGATE_DATABASE)")
	pf.BoolVar(&asJSON, "json", false, "print JSON")

	keyStore := storeCommand(e, &dsn, &cfgPath)
	// The teams' errors without the key store's "keys: " prefix: a team
	// command's failure is not the keys'.
	withStore := func(create bool, f func(ctx context.Context, s *keys.Store, db database) error) func(*cobra.Command, []string) error {
		run := keyStore(create, f)
		return func(c *cobra.Command, args []string) error { return unprefixed(run(c, args), "keys: ") }
	}
	// inConfig refuses a team the config defines: the config wins.
	inConfig := func(name string) error {
		names, err := configTeams(e, cfgPath)
		if err != nil {
			return err
		}
		if slices.Contains(names, name) {
			return usagef("team %q is defined in the config (teams:), which wins over the database: change it there", name)
		}
		return nil
	}
	print := func(ctx context.Context, db database, list []keys.Team, one bool) error {
		shown, err := teamsWithSpend(ctx, db, list, time.Now())
		if err != nil {
			return err
		}
		if asJSON {
			if one {
				return printJSON(e.stdout, shown[0])
			}
			return printJSON(e.stdout, map[string]any{"teams": shown})
		}
		printTeams(e.stdout, shown)
		return nil
	}

	var name, period string
	var budgetUSD float64
	var maxStreams, rpm, tpm int
	limits := func(c *cobra.Command) {
		c.Flags().Float64Var(&budgetUSD, "budget-usd", 0, "what the team's keys may spend together per --budget-period, in USD (0: no budget)")
		c.Flags().StringVar(&period, "budget-period", "month", "the budget's period: month, day (calendar UTC) or total")
		c.Flags().IntVar(&rpm, "rpm", 0, "requests per minute of the team's keys together (shared by every replica through redis; 0: no limit)")
		c.Flags().IntVar(&tpm, "tpm", 0, "tokens (input + output) per minute of the team's keys together (0: no limit)")
		c.Flags().IntVar(&maxStreams, "max-streams", 0, "concurrent requests of the team's keys together, per replica (0: no limit)")
	}
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create a team",
		Args:  cobra.NoArgs,
		RunE: withStore(true, func(ctx context.Context, s *keys.Store, db database) error {
			if err := inConfig(name); err != nil {
				return err
			}
			t, err := s.CreateTeam(ctx, keys.Team{Name: name, BudgetUSD: budgetUSD, BudgetPeriod: period, RPM: rpm, TPM: tpm, MaxStreams: maxStreams})
			if err != nil {
				return err
			}
			return print(ctx, db, []keys.Team{t}, true)
		}),
	}
	create.Flags().StringVar(&name, "name", "", "the team's name (keys name it with --team)")
	create.MarkFlagRequired("name")
	limits(create)

	set := &cobra.Command{
		Use:   "set NAME [--budget-usd USD] [--budget-period P] [--rpm N] [--tpm N] [--max-streams N]",
		Short: "Change the limits given of a team; the others stay",
		Args:  cobra.ExactArgs(1),
	}
	limits(set)
	set.RunE = func(c *cobra.Command, args []string) error {
		return withStore(false, func(ctx context.Context, s *keys.Store, db database) error {
			if err := inConfig(args[0]); err != nil {
				return err
			}
			var p keys.TeamPatch
			fl := c.Flags()
			if fl.Changed("budget-usd") {
				p.BudgetUSD = &budgetUSD
			}
			if fl.Changed("budget-period") {
				p.BudgetPeriod = &period
			}
			if fl.Changed("rpm") {
				p.RPM = &rpm
			}
			if fl.Changed("tpm") {
				p.TPM = &tpm
			}
			if fl.Changed("max-streams") {
				p.MaxStreams = &maxStreams
			}
			if p == (keys.TeamPatch{}) {
				return usagef("nothing to change: give at least one of --budget-usd, --budget-period, --rpm, --tpm, --max-streams")
			}
			t, err := s.UpdateTeam(ctx, args[0], p)
			if err != nil {
				return err
			}
			return print(ctx, db, []keys.Team{t}, true)
		})(c, nil)
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the database's teams",
		Args:  cobra.NoArgs,
		RunE: withStore(false, func(ctx context.Context, s *keys.Store, db database) error {
			all, err := s.ListTeams(ctx)
			if err != nil {
				return err
			}
			return print(ctx, db, all, false)
		}),
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show one team",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(false, func(ctx context.Context, s *keys.Store, db database) error {
				t, err := s.GetTeam(ctx, args[0])
				if err != nil {
					return err
				}
				return print(ctx, db, []keys.Team{t}, true)
			})(c, nil)
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a team no active key names",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(false, func(ctx context.Context, s *keys.Store, db database) error {
				t, err := s.DeleteTeam(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "streamgate: team %q deleted\n", t.Name)
				return print(ctx, db, []keys.Team{t}, true)
			})(c, nil)
		},
	}
	cmd.AddCommand(create, list, show, set, del)
	return cmd
}

// configTeams returns the names of the config's teams: of --config, else
// of ./streamgate.yaml when there is one; nil without a config.
func configTeams(e *env, cfgPath string) ([]string, error) {
	path := cfgPath
	if path == "" {
		if _, err := os.Stat(workingConfig); err != nil {
			return nil, nil
		}
		path = workingConfig
	}
	cfg, err := config.LoadWithoutSecrets(path, e.getenv)
	if err != nil {
		return nil, configError{err}
	}
	names := make([]string, 0, len(cfg.Teams))
	for _, t := range cfg.Teams {
		names = append(names, t.Name)
	}
	return names, nil
}

// teamView is a team as the team commands show it, with what the usage
// ledger recorded of its keys' spend in its current period.
type teamView struct {
	keys.Team
	spendView
}

func teamsWithSpend(ctx context.Context, db database, list []keys.Team, now time.Time) ([]teamView, error) {
	out := make([]teamView, len(list))
	err := readSpend(ctx, db, now, usage.SpentTeam, len(list), func(i int) (string, *string, float64, *spendView) {
		out[i].Team = list[i]
		t := &out[i].Team
		return t.Name, &t.BudgetPeriod, t.BudgetUSD, &out[i].spendView
	})
	return out, err
}

func printTeams(w io.Writer, list []teamView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBUDGET\tPERIOD\tSPENT\tREMAINING\tRPM\tTPM\tMAX_STREAMS\tCREATED")
	for _, t := range list {
		budgetUSD, remaining := "none", "-"
		if t.RemainingUSD != nil {
			budgetUSD, remaining = usd.Format(t.BudgetUSD), usd.Format(*t.RemainingUSD)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", t.Name, budgetUSD, t.BudgetPeriod, usd.Format(t.SpentUSD), remaining,
			t.RPM, t.TPM, t.MaxStreams, t.CreatedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
}

// isTeamInput reports a team error of the user's input (exit 2).
func isTeamInput(err error) bool {
	return errors.Is(err, keys.ErrTeamNotFound) || errors.Is(err, keys.ErrTeamTaken) || errors.Is(err, keys.ErrTeamInUse)
}

// unprefixed is err with prefix cut from its message, still wrapping it
// (its exit status and errors.Is unchanged); nil for nil.
func unprefixed(err error, prefix string) error {
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		return err
	}
	var ue usageError
	if errors.As(err, &ue) {
		return usageError{cutPrefix{ue.err, prefix}}
	}
	return cutPrefix{err, prefix}
}

type cutPrefix struct {
	err    error
	prefix string
}

func (c cutPrefix) Error() string { return strings.TrimPrefix(c.err.Error(), c.prefix) }
func (c cutPrefix) Unwrap() error { return c.err }
