package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/usage"
)

// The team CLI end to end on a SQLite database: create, list with the
// ledger's spend, show, set, a key of the team (keys create --team), an
// unknown team refused, delete refused while a key names the team; a name
// the config defines refused.
func TestTeamsCLI(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "sg.db")
	code, out, errs := runCLI(t, nil, "teams", "create", "--database", db, "--name", "search", "--budget-usd", "500", "--rpm", "3000", "--max-streams", "8")
	if code != 0 || !strings.Contains(out, "search") || !strings.Contains(out, "$500.00") {
		t.Fatalf("create: exit %d, out %q, stderr %s", code, out, errs)
	}
	if code, _, errs := runCLI(t, nil, "teams", "create", "--database", db, "--name", "search"); code != 2 || !strings.Contains(errs, "team name taken") {
		t.Errorf("create again: exit %d, stderr %s; want 2 naming the name taken", code, errs)
	}
	if code, _, errs := runCLI(t, nil, "teams", "create", "--database", db, "--name", "x", "--rpm", "-1", "--budget-period", "week"); code != 2 || !strings.Contains(errs, "rpm: -1 is negative; budget_period") {
		t.Errorf("invalid: exit %d, stderr %s", code, errs)
	}
	// A key of the team; of an unknown team refused.
	if code, out, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "app", "--team", "search"); code != 0 || !strings.Contains(out, "search") {
		t.Fatalf("keys create --team: exit %d, out %q, stderr %s", code, out, errs)
	}
	if code, _, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "lost", "--team", "ghost"); code != 2 || !strings.Contains(errs, `unknown team "ghost"`) {
		t.Errorf("keys create --team ghost: exit %d, stderr %s", code, errs)
	}
	code, out, _ = runCLI(t, nil, "keys", "show", "app", "--database", db, "--json")
	var k struct{ Team string }
	if code != 0 || json.Unmarshal([]byte(out), &k) != nil || k.Team != "search" {
		t.Errorf("keys show --json: %d %q, want team search", code, out)
	}
	// The ledger's spend of the team's keys this month.
	s, err := usage.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Insert(context.Background(), []usage.Entry{
		{Time: time.Now(), KeyID: "app", Team: "search", Model: "m", Outcome: usage.OutcomeOK, CostUSD: 1.25},
		{Time: time.Now(), KeyID: "other", Team: "", Model: "m", Outcome: usage.OutcomeOK, CostUSD: 7},
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, nil, "teams", "list", "--database", db, "--json")
	var list struct {
		Teams []struct {
			Name         string   `json:"name"`
			SpentUSD     float64  `json:"spent_usd"`
			RemainingUSD *float64 `json:"remaining_usd"`
			MaxStreams   int      `json:"max_streams"`
		} `json:"teams"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Teams) != 1 || list.Teams[0].SpentUSD != 1.25 || *list.Teams[0].RemainingUSD != 498.75 || list.Teams[0].MaxStreams != 8 {
		t.Errorf("list: %d %q; want search with $1.25 spent", code, out)
	}
	code, out, errs = runCLI(t, nil, "teams", "set", "search", "--database", db, "--budget-usd", "800", "--budget-period", "day")
	if code != 0 || !strings.Contains(out, "$800.00") || !strings.Contains(out, "day") || !strings.Contains(out, "3000") {
		t.Errorf("set: exit %d, out %q, stderr %s; want the new budget, the rpm kept", code, out, errs)
	}
	if code, _, errs := runCLI(t, nil, "teams", "set", "search", "--database", db); code != 2 || !strings.Contains(errs, "nothing to change") {
		t.Errorf("set nothing: exit %d, stderr %s", code, errs)
	}
	if code, out, _ := runCLI(t, nil, "teams", "show", "search", "--database", db); code != 0 || !strings.Contains(out, "search") {
		t.Errorf("show: %d %q", code, out)
	}
	if code, _, errs := runCLI(t, nil, "teams", "delete", "search", "--database", db); code != 2 || !strings.Contains(errs, "in use") {
		t.Errorf("delete in use: exit %d, stderr %s", code, errs)
	}
	if code, _, _ := runCLI(t, nil, "keys", "revoke", "app", "--database", db); code != 0 {
		t.Fatal("revoke")
	}
	if code, _, errs := runCLI(t, nil, "teams", "delete", "search", "--database", db); code != 0 {
		t.Errorf("delete: exit %d, stderr %s", code, errs)
	}
	if code, _, errs := runCLI(t, nil, "teams", "show", "search", "--database", db); code != 2 || !strings.Contains(errs, "team not found") {
		t.Errorf("show deleted: exit %d, stderr %s", code, errs)
	}
	// A config that defines a team: the name is refused (the config wins),
	// and a key may name it.
	cfgPath := filepath.Join(dir, "streamgate.yaml")
	yaml := "database: " + db + "\nteams:\n  - {name: ads, budget_usd: 5}\nproviders:\n  - {name: sim, kind: sim}\nmodels:\n  - {name: m, routes: [{provider: sim, model: sim-fast}]}\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, nil, "teams", "create", "--config", cfgPath, "--name", "ads"); code != 2 || !strings.Contains(errs, "defined in the config") {
		t.Errorf("create a config team: exit %d, stderr %s", code, errs)
	}
	if code, _, errs := runCLI(t, nil, "keys", "create", "--config", cfgPath, "--name", "ad-app", "--team", "ads"); code != 0 {
		t.Errorf("keys create --team of the config: exit %d, stderr %s", code, errs)
	}
}
