package keys

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors of the teams, matched with errors.Is.
var (
	// ErrTeamNotFound: no team has that name.
	ErrTeamNotFound = errors.New("team not found")
	// ErrTeamTaken: CreateTeam was given the name of a team.
	ErrTeamTaken = errors.New("team name taken")
	// ErrTeamInUse: DeleteTeam was asked for a team active keys name.
	ErrTeamInUse = errors.New("team in use by active keys")
)

// Team is a team kept in the database: limits shared by the keys that
// name it (a key's own limits apply too). Zero values mean no limit.
type Team struct {
	Name         string    `json:"name"`
	BudgetUSD    float64   `json:"budget_usd"`
	BudgetPeriod string    `json:"budget_period"` // month (default), day or total
	RPM          int       `json:"rpm"`
	TPM          int       `json:"tpm"`
	MaxStreams   int       `json:"max_streams"` // per replica
	CreatedAt    time.Time `json:"created_at"`
}

// teamsMigration is schema version 2 of "keys": the key's team, and the
// teams table.
func teamsMigration(real, timeType string) []string {
	return []string{
		`ALTER TABLE api_keys ADD COLUMN team TEXT NOT NULL DEFAULT ''`,
		`CREATE TABLE teams (
			name          TEXT PRIMARY KEY,
			budget_usd    ` + real + ` NOT NULL DEFAULT 0,
			budget_period TEXT NOT NULL DEFAULT 'month',
			rpm           INTEGER NOT NULL DEFAULT 0,
			tpm           INTEGER NOT NULL DEFAULT 0,
			max_streams   INTEGER NOT NULL DEFAULT 0,
			created_at    ` + timeType + ` NOT NULL
		)`,
		`CREATE INDEX api_keys_team ON api_keys (team)`,
	}
}

// AllowTeams tells the Store of teams defined elsewhere (the gateway's
// config): Create accepts a key naming one of them as well as a team of
// the database. Call it before using the Store.
func (s *Store) AllowTeams(names ...string) {
	s.allowed = make(map[string]bool, len(names))
	for _, n := range names {
		s.allowed[n] = true
	}
}

// checkTeam is nil for no team, an allowed one or a team of the database;
// else an ErrInvalid naming it.
func (s *Store) checkTeam(ctx context.Context, team string) error {
	if team == "" || s.allowed[team] {
		return nil
	}
	_, err := s.GetTeam(ctx, team)
	if errors.Is(err, ErrTeamNotFound) {
		return fmt.Errorf("keys: %w: team: unknown team %q (create it first: streamgate teams create --name %s)", ErrInvalid, team, team)
	}
	return err
}

// validateTeam returns an ErrInvalid naming every problem of t, or nil.
func validateTeam(t Team) error {
	var problems []string
	switch {
	case t.Name == "":
		problems = append(problems, "name: required")
	case !utf8.ValidString(t.Name):
		problems = append(problems, "name: not valid UTF-8")
	case utf8.RuneCountInString(t.Name) > maxNameLen:
		problems = append(problems, fmt.Sprintf("name: %d characters, want at most %d", utf8.RuneCountInString(t.Name), maxNameLen))
	case strings.IndexFunc(t.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		problems = append(problems, fmt.Sprintf("name %q: not printable", t.Name))
	case strings.TrimSpace(t.Name) != t.Name:
		problems = append(problems, fmt.Sprintf("name %q: leading or trailing space", t.Name))
	}
	for _, n := range []struct {
		f string
		v int
	}{{"max_streams", t.MaxStreams}, {"rpm", t.RPM}, {"tpm", t.TPM}} {
		if n.v < 0 {
			problems = append(problems, fmt.Sprintf("%s: %d is negative", n.f, n.v))
		}
	}
	if b := t.BudgetUSD; math.IsNaN(b) || math.IsInf(b, 0) || b < 0 {
		problems = append(problems, fmt.Sprintf("budget_usd: %v is not a non-negative number", b))
	}
	switch t.BudgetPeriod {
	case "", "month", "day", "total":
	default:
		problems = append(problems, fmt.Sprintf("budget_period: %q is not month, day or total", t.BudgetPeriod))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("keys: %w: %s", ErrInvalid, strings.Join(problems, "; "))
}

const teamColumns = "name, budget_usd, budget_period, rpm, tpm, max_streams, created_at"

// CreateTeam stores a new team; it sets CreatedAt. Invalid input is an
// ErrInvalid naming every failing field; a name in use ErrTeamTaken.
func (s *Store) CreateTeam(ctx context.Context, t Team) (Team, error) {
	if err := validateTeam(t); err != nil {
		return Team{}, err
	}
	if t.BudgetPeriod == "" {
		t.BudgetPeriod = "month"
	}
	t.CreatedAt = storedTime(s.now())
	_, err := s.db.ExecContext(ctx, `INSERT INTO teams (`+teamColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		t.Name, t.BudgetUSD, t.BudgetPeriod, int64(t.RPM), int64(t.TPM), int64(t.MaxStreams), s.timeArg(t.CreatedAt))
	if err != nil {
		if _, gerr := s.GetTeam(ctx, t.Name); gerr == nil {
			return Team{}, fmt.Errorf("keys: create team %q: %w", t.Name, ErrTeamTaken)
		}
		return Team{}, fmt.Errorf("keys: create team %q in %s: %w", t.Name, s.db.Dialect, err)
	}
	s.changed(ctx, "team:"+t.Name)
	return t, nil
}

// ListTeams returns every team by name; none gives an empty slice.
func (s *Store) ListTeams(ctx context.Context) ([]Team, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+teamColumns+` FROM teams ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("keys: list teams from %s: %w", s.db.Dialect, err)
	}
	defer rows.Close()
	out := []Team{}
	for rows.Next() {
		t, err := scanTeam(rows)
		if err != nil {
			return nil, fmt.Errorf("keys: list teams from %s: %w", s.db.Dialect, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keys: list teams from %s: %w", s.db.Dialect, err)
	}
	return out, nil
}

// GetTeam returns the team called name, or ErrTeamNotFound.
func (s *Store) GetTeam(ctx context.Context, name string) (Team, error) {
	t, err := scanTeam(s.db.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams WHERE name = $1`, name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Team{}, fmt.Errorf("keys: team %q: %w", name, ErrTeamNotFound)
	case err != nil:
		return Team{}, fmt.Errorf("keys: get team %q from %s: %w", name, s.db.Dialect, err)
	}
	return t, nil
}

// TeamPatch is a change of some of a team's fields; nil leaves one as is.
type TeamPatch struct {
	BudgetUSD    *float64 `json:"budget_usd"`
	BudgetPeriod *string  `json:"budget_period"`
	RPM          *int     `json:"rpm"`
	TPM          *int     `json:"tpm"`
	MaxStreams   *int     `json:"max_streams"`
}

// UpdateTeam applies p to the team called name and returns it as stored.
func (s *Store) UpdateTeam(ctx context.Context, name string, p TeamPatch) (Team, error) {
	t, err := s.GetTeam(ctx, name)
	if err != nil {
		return Team{}, err
	}
	if p.BudgetUSD != nil {
		t.BudgetUSD = *p.BudgetUSD
	}
	if p.BudgetPeriod != nil {
		t.BudgetPeriod = *p.BudgetPeriod
	}
	if p.RPM != nil {
		t.RPM = *p.RPM
	}
	if p.TPM != nil {
		t.TPM = *p.TPM
	}
	if p.MaxStreams != nil {
		t.MaxStreams = *p.MaxStreams
	}
	if err := validateTeam(t); err != nil {
		return Team{}, err
	}
	if t.BudgetPeriod == "" {
		t.BudgetPeriod = "month"
	}
	res, err := s.db.ExecContext(ctx, `UPDATE teams SET budget_usd = $2, budget_period = $3, rpm = $4, tpm = $5, max_streams = $6 WHERE name = $1`,
		t.Name, t.BudgetUSD, t.BudgetPeriod, int64(t.RPM), int64(t.TPM), int64(t.MaxStreams))
	if err != nil {
		return Team{}, fmt.Errorf("keys: update team %q in %s: %w", name, s.db.Dialect, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return Team{}, fmt.Errorf("keys: team %q: %w", name, ErrTeamNotFound) // deleted meanwhile
	}
	s.changed(ctx, "team:"+name)
	return t, nil
}

// DeleteTeam deletes the team called name and returns it. A team that
// active keys name is ErrTeamInUse (revoke them or create them anew
// first): their requests would otherwise lose the team's limits.
func (s *Store) DeleteTeam(ctx context.Context, name string) (Team, error) {
	t, err := s.GetTeam(ctx, name)
	if err != nil {
		return Team{}, err
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE team = $1 AND revoked_at IS NULL`, name).Scan(&n); err != nil {
		return Team{}, fmt.Errorf("keys: delete team %q in %s: %w", name, s.db.Dialect, err)
	}
	if n > 0 {
		return Team{}, fmt.Errorf("keys: delete team %q: %w (%d; revoke them first)", name, ErrTeamInUse, n)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM teams WHERE name = $1`, name); err != nil {
		return Team{}, fmt.Errorf("keys: delete team %q in %s: %w", name, s.db.Dialect, err)
	}
	s.changed(ctx, "team:"+name)
	return t, nil
}

func scanTeam(row interface{ Scan(...any) error }) (Team, error) {
	var (
		t                    Team
		rpm, tpm, maxStreams int64
		created              any
	)
	if err := row.Scan(&t.Name, &t.BudgetUSD, &t.BudgetPeriod, &rpm, &tpm, &maxStreams, &created); err != nil {
		return Team{}, err
	}
	t.RPM, t.TPM, t.MaxStreams = int(rpm), int(tpm), int(maxStreams)
	var err error
	if t.CreatedAt, err = scanTime(created); err != nil {
		return Team{}, fmt.Errorf("created_at of team %q: %w", t.Name, err)
	}
	return t, nil
}
