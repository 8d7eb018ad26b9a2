package keys

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestTeams(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		tm, err := s.CreateTeam(ctx, Team{Name: "search", BudgetUSD: 500, RPM: 3000, MaxStreams: 4})
		if err != nil || tm.BudgetPeriod != "month" || tm.CreatedAt.IsZero() {
			t.Fatalf("create: %+v %v", tm, err)
		}
		if _, err := s.CreateTeam(ctx, Team{Name: "search"}); !errors.Is(err, ErrTeamTaken) {
			t.Errorf("same name: got %v, want ErrTeamTaken", err)
		}
		_, err = s.CreateTeam(ctx, Team{Name: "", RPM: -1, BudgetPeriod: "week"})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "name: required; rpm: -1 is negative; budget_period: \"week\" is not month, day or total") {
			t.Errorf("invalid: got %v", err)
		}
		// A key of the team; of an unknown team refused, of a team the
		// config has (AllowTeams) accepted.
		k, _ := mustCreate(t, s, Key{Name: "dev", Team: "search"})
		if got, err := s.Get(ctx, k.ID); err != nil || got.Team != "search" {
			t.Errorf("key's team: got %+v %v", got, err)
		}
		if _, _, err := s.Create(ctx, Key{Name: "ci", Team: "ads"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `unknown team "ads"`) {
			t.Errorf("unknown team: got %v", err)
		}
		s.AllowTeams("ads")
		if _, _, err := s.Create(ctx, Key{Name: "ci", Team: "ads"}); err != nil {
			t.Errorf("a config team: %v", err)
		}
		rpm, period := 10, "day"
		up, err := s.UpdateTeam(ctx, "search", TeamPatch{RPM: &rpm, BudgetPeriod: &period})
		if err != nil || up.RPM != 10 || up.BudgetPeriod != "day" || up.BudgetUSD != 500 || up.MaxStreams != 4 {
			t.Errorf("update: %+v %v", up, err)
		}
		bad := -5
		if _, err := s.UpdateTeam(ctx, "search", TeamPatch{TPM: &bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("update tpm -5: got %v", err)
		}
		if _, err := s.UpdateTeam(ctx, "nope", TeamPatch{}); !errors.Is(err, ErrTeamNotFound) {
			t.Errorf("update unknown: got %v", err)
		}
		if _, err := s.DeleteTeam(ctx, "search"); !errors.Is(err, ErrTeamInUse) {
			t.Errorf("delete in use: got %v", err)
		}
		if _, err := s.Revoke(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteTeam(ctx, "search"); err != nil {
			t.Errorf("delete once its keys are revoked: %v", err)
		}
		if list, err := s.ListTeams(ctx); err != nil || len(list) != 0 {
			t.Errorf("list after delete: %+v %v", list, err)
		}
	})
}
