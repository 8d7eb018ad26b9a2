package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/streamgate/streamgate/internal/admit"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/memo"
)

// errUnknownTeam: a key names a team that neither the config nor the
// database has (deleted since the gateway started).
var errUnknownTeam = errors.New("team not found")

// teams answers a key's team's limits: the config's teams first (a team
// defined in both the config and the database is the config's: the
// database's is ignored, and the admin API refuses to change it), then
// the database's through a one-second cache, as keys are (package memo:
// concurrent lookups of a team share one query).
type teams struct {
	cfg   *config.Config
	store *keys.Store // nil: the config's teams only
	m     *memo.Cache[string, config.Team]
	load  func(context.Context, string) (config.Team, error) // ts.lookup, bound once
}

func newTeams(cfg *config.Config, store *keys.Store) *teams {
	keep := func(err error) bool { return !errors.Is(err, auth.ErrKeyStore) }
	ts := &teams{cfg: cfg, store: store, m: memo.New[string, config.Team](auth.DefaultCacheTTL, 10_000, keep)}
	ts.load = ts.lookup
	return ts
}

// get returns the team called name with its budget period filled in, an
// errUnknownTeam, or an auth.ErrKeyStore when the database failed.
func (ts *teams) get(ctx context.Context, name string) (config.Team, error) {
	if t, ok := ts.cfg.Team(name); ok {
		out := *t
		out.BudgetPeriod = cmp.Or(out.BudgetPeriod, "month")
		return out, nil
	}
	if ts.store == nil {
		return config.Team{}, fmt.Errorf("%w: %q", errUnknownTeam, name)
	}
	return ts.m.Get(ctx, name, name, ts.load)
}

// lookup reads the database's team called name (memo's load).
func (ts *teams) lookup(ctx context.Context, name string) (config.Team, error) {
	dt, err := ts.store.GetTeam(ctx, name)
	switch {
	case errors.Is(err, keys.ErrTeamNotFound):
		return config.Team{}, fmt.Errorf("%w: %q (the key's team is neither in the config nor in the database)", errUnknownTeam, name)
	case err != nil:
		return config.Team{}, fmt.Errorf("%w: %v", auth.ErrKeyStore, err)
	}
	return config.Team{Name: dt.Name, BudgetUSD: dt.BudgetUSD, BudgetPeriod: cmp.Or(dt.BudgetPeriod, "month"), RPM: dt.RPM, TPM: dt.TPM, MaxStreams: dt.MaxStreams}, nil
}

// purge forgets the database's teams: a change is seen at the next request.
func (ts *teams) purge() { ts.m.Purge() }

// checkTeams is gateway.New's check of the config keys' teams: each must be
// a team of the config or of the database. It also tells the key store of
// the config's teams (a database key may name one) and logs a database team
// that a config team shadows.
func checkTeams(ctx context.Context, cfg *config.Config, store *keys.Store, log *slog.Logger) error {
	names := make([]string, 0, len(cfg.Teams))
	for _, t := range cfg.Teams {
		names = append(names, t.Name)
	}
	var problems []error
	for i, k := range cfg.Keys {
		if k.Team == "" {
			continue
		}
		if _, ok := cfg.Team(k.Team); ok {
			continue
		}
		if store == nil {
			problems = append(problems, fmt.Errorf("keys[%d].team: unknown team %q (not in teams:, and the gateway has no database of teams)", i, k.Team))
			continue
		}
		if _, err := store.GetTeam(ctx, k.Team); errors.Is(err, keys.ErrTeamNotFound) {
			problems = append(problems, fmt.Errorf("keys[%d].team: unknown team %q (neither in teams: nor in the database: streamgate teams create --name %s)", i, k.Team, k.Team))
		} else if err != nil {
			problems = append(problems, fmt.Errorf("keys[%d].team: %w", i, err))
		}
	}
	if store == nil {
		return errors.Join(problems...)
	}
	store.AllowTeams(names...)
	if list, err := store.ListTeams(ctx); err == nil {
		for _, t := range list {
			if _, ok := cfg.Team(t.Name); ok {
				log.Warn("team defined in both the config and the database: the config's limits apply, the database's are ignored", slog.String("team", t.Name))
			}
		}
	}
	return errors.Join(problems...)
}

// acquireTeam takes a slot of the team's concurrent requests on this
// replica (max_streams per replica, as a key's): nil release when the team
// has no such limit.
func (g *Gateway) acquireTeam(ctx context.Context, team config.Team) (func(), error) {
	if team.MaxStreams <= 0 {
		return nil, nil
	}
	release, err := g.teamSlots.Acquire(ctx, team.Name, team.MaxStreams)
	var full *admit.Full
	if errors.As(err, &full) {
		return nil, &teamFullError{team: team.Name, full: full}
	}
	return release, err
}

// teamFullError: the team's max_streams are all in flight on this replica.
type teamFullError struct {
	team string
	full *admit.Full
}

func (e *teamFullError) Error() string {
	return fmt.Sprintf("too many concurrent requests for team %q (limit %d on this replica): retry after %v", e.team, e.full.Limit, e.full.RetryAfter)
}
