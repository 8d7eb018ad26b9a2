package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
)

// Teams kept in the database, through the admin API: created, given to a
// database key, enforced (its rpm), changed (seen at once by this replica),
// refused while a key names it; the config's teams are listed, read-only.
func TestAdminTeams(t *testing.T) {
	ctx := context.Background()
	store := tempKeyStore(t)
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	cfg.Teams = []config.Team{{Name: "search", BudgetUSD: 500, RPM: 3000}}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, KeyStore: store})

	if status, body := adminDo(t, e, "POST", "/admin/teams", `{"name":"ads","rpm":1,"budget_period":"day"}`); status != 201 || !strings.Contains(string(body), `"source":"database"`) {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body := adminDo(t, e, "POST", "/admin/teams", `{"name":"ads"}`); status != 409 || !strings.Contains(string(body), "team_conflict") {
		t.Errorf("create again: %d %s, want 409 team_conflict", status, body)
	}
	if status, body := adminDo(t, e, "POST", "/admin/teams", `{"name":"search"}`); status != 409 || !strings.Contains(string(body), "defined in the config") {
		t.Errorf("create a config team's name: %d %s, want 409", status, body)
	}
	if status, body := adminDo(t, e, "POST", "/admin/teams", `{"name":"x","rpm":-1,"budget_period":"week"}`); status != 400 || !strings.Contains(string(body), "rpm: -1 is negative; budget_period") {
		t.Errorf("invalid: %d %s, want 400 naming each field", status, body)
	}
	status, body := adminDo(t, e, "POST", "/admin/keys", `{"name":"ad-app","team":"ads"}`)
	var created struct {
		Team   string `json:"team"`
		Secret string `json:"secret"`
	}
	if status != 201 || json.Unmarshal(body, &created) != nil || created.Team != "ads" {
		t.Fatalf("create key of team ads: %d %s", status, body)
	}
	if status, body := adminDo(t, e, "POST", "/admin/keys", `{"name":"lost","team":"nope"}`); status != 400 || !strings.Contains(string(body), `unknown team \"nope\"`) {
		t.Errorf("key of an unknown team: %d %s, want 400", status, body)
	}
	if status, body := adminDo(t, e, "POST", "/admin/keys", `{"name":"cfg-app","team":"search"}`); status != 201 {
		t.Errorf("key of a config team: %d %s, want 201", status, body)
	}
	// The team's rpm of 1 refuses the key's second request.
	if err := sdkChat(ctx, e.url, created.Secret, "m-sim"); err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if err := sdkChat(ctx, e.url, created.Secret, "m-sim"); !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, `rate limit reached for team "ads"`) {
		t.Fatalf("second request: got %v, want the team's rpm", err)
	}
	if status, body := adminDo(t, e, "PATCH", "/admin/teams/ads", `{"rpm":100}`); status != 200 || !strings.Contains(string(body), `"rpm":100`) || !strings.Contains(string(body), `"budget_period":"day"`) {
		t.Fatalf("patch: %d %s", status, body)
	}
	if err := sdkChat(ctx, e.url, created.Secret, "m-sim"); err != nil {
		t.Errorf("after raising the team's rpm: %v", err)
	}
	status, body = adminDo(t, e, "GET", "/admin/teams", "")
	var list struct {
		Teams []struct {
			Name     string   `json:"name"`
			Source   string   `json:"source"`
			SpentUSD *float64 `json:"spent_usd"`
		} `json:"teams"`
	}
	if status != 200 || json.Unmarshal(body, &list) != nil || len(list.Teams) != 2 || list.Teams[0].Name != "search" || list.Teams[0].Source != "config" || list.Teams[1].Name != "ads" {
		t.Errorf("list: %d %s, want search (config) and ads (database)", status, body)
	}
	if status, body := adminDo(t, e, "PATCH", "/admin/teams/search", `{"rpm":1}`); status != 409 {
		t.Errorf("patch a config team: %d %s, want 409", status, body)
	}
	if status, body := adminDo(t, e, "GET", "/admin/teams/search", ""); status != 200 || !strings.Contains(string(body), `"source":"config"`) {
		t.Errorf("get a config team: %d %s", status, body)
	}
	if status, body := adminDo(t, e, "DELETE", "/admin/teams/ads", ""); status != 409 || !strings.Contains(string(body), "in use") {
		t.Errorf("delete a team in use: %d %s, want 409", status, body)
	}
	if status, _ := adminDo(t, e, "DELETE", "/admin/keys/ad-app", ""); status != 200 {
		t.Fatal("revoke")
	}
	if status, body := adminDo(t, e, "DELETE", "/admin/teams/ads", ""); status != 200 {
		t.Errorf("delete once unused: %d %s", status, body)
	}
	if status, body := adminDo(t, e, "GET", "/admin/teams/ads", ""); status != 404 || !strings.Contains(string(body), "team_not_found") {
		t.Errorf("get deleted: %d %s, want 404", status, body)
	}
}
