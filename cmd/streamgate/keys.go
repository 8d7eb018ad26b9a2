package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/keys"
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
		Long: `keys manages the gateway's API keys kept in its database (the config's database:,
or --database). A key's secret (sg-…) is shown once, when it is created or
rotated; the database keeps only its SHA-256 and a display prefix. Every
gateway replica using the database sees a new, revoked or rotated key within a
second. The static keys of the config file keep working beside them.`,
		Example: `  streamgate keys create --name app --models sim-gpt-4.1,sim-fast --max-streams 8 --expires 30d
  streamgate keys list
  streamgate keys revoke app`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&cfgPath, "config", "", "gateway config file whose database: holds the keys (default: the embedded default's)")
	pf.StringVar(&dsn, "database", "", "the database instead of the config's (sqlite://PATH or postgres://...)")
	pf.BoolVar(&asJSON, "json", false, "print JSON")

	open := func(ctx context.Context) (*keys.Store, error) {
		database := dsn
		if database == "" {
			var cfg *config.Config
			var err error
			if cfgPath != "" {
				cfg, err = config.LoadWithoutSecrets(cfgPath, e.getenv)
			} else {
				cfg, _, err = config.Default(e.getenv)
			}
			if err != nil {
				return nil, configError{err}
			}
			database = cfg.Database
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return keys.Open(octx, database)
	}
	withStore := func(f func(ctx context.Context, s *keys.Store) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, _ []string) error {
			s, err := open(c.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			return cliKeyError(f(c.Context(), s))
		}
	}
	print := func(k keys.Key, secret string) error {
		if asJSON {
			return printJSON(e.stdout, struct {
				keys.Key
				Secret string `json:"secret,omitempty"`
			}{k, secret})
		}
		printKeys(e.stdout, []keys.Key{k})
		if secret != "" {
			fmt.Fprintf(e.stdout, "\nsecret: %s\n(shown once: store it now; the database keeps only its hash)\n", secret)
		}
		return nil
	}

	var name, models, expires, period string
	var budgetUSD float64
	var maxStreams, rpm, tpm int
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create a key and print its secret once",
		Args:  cobra.NoArgs,
		RunE: withStore(func(ctx context.Context, s *keys.Store) error {
			k := keys.Key{Name: name, MaxStreams: maxStreams, RPM: rpm, TPM: tpm, BudgetUSD: budgetUSD, BudgetPeriod: period}
			if models != "" {
				for m := range strings.SplitSeq(models, ",") {
					k.Models = append(k.Models, strings.TrimSpace(m))
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
			return print(created, secret)
		}),
	}
	create.Flags().StringVar(&name, "name", "", "the key's name (shown in logs and usage records; unique among active keys)")
	create.Flags().StringVar(&models, "models", "", "models the key may use, comma-separated (default: all)")
	create.Flags().IntVar(&maxStreams, "max-streams", 0, "concurrent requests of the key (0: limits.max_streams_per_key)")
	create.Flags().IntVar(&rpm, "rpm", 0, "requests per minute (a sliding minute, shared by every replica through redis; 0: no limit)")
	create.Flags().IntVar(&tpm, "tpm", 0, "tokens (input + output) per minute (0: no limit)")
	create.Flags().Float64Var(&budgetUSD, "budget-usd", 0, "what the key may spend per --budget-period, in USD from the models' prices (0: no budget)")
	create.Flags().StringVar(&period, "budget-period", "month", "the budget's period: month, day (calendar UTC) or total")
	create.Flags().StringVar(&expires, "expires", "", "expiry: a duration such as 30d or 12h, or an RFC 3339 time (default: never)")
	create.MarkFlagRequired("name")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: withStore(func(ctx context.Context, s *keys.Store) error {
			all, err := s.List(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(e.stdout, map[string]any{"keys": all})
			}
			printKeys(e.stdout, all)
			return nil
		}),
	}
	one := func(use, short string, f func(context.Context, *keys.Store, string) (keys.Key, string, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID|NAME",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				return withStore(func(ctx context.Context, s *keys.Store) error {
					k, secret, err := f(ctx, s, args[0])
					if err != nil {
						return err
					}
					return print(k, secret)
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
	if errors.Is(err, keys.ErrInvalid) || errors.Is(err, keys.ErrNameTaken) || errors.Is(err, keys.ErrNotFound) {
		return usageError{err}
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printKeys prints keys as a table.
func printKeys(w io.Writer, list []keys.Key) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tMODELS\tMAX STREAMS\tRPM\tTPM\tCREATED\tEXPIRES\tSTATUS")
	for _, k := range list {
		models := strings.Join(k.Models, ",")
		if models == "" {
			models = "all"
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
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, models, k.MaxStreams, k.RPM, k.TPM,
			k.CreatedAt.UTC().Format(time.RFC3339), expiresAt, status)
	}
	tw.Flush()
}
