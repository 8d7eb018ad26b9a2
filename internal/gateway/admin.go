package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/usage"
)

// errKeysOff: the key API was asked for and the gateway has no key store.
var errKeysOff = errors.New("no key store: the gateway was started without its database's keys")

// createKeyRequest is the body of POST /admin/keys.
type createKeyRequest struct {
	Name       string   `json:"name"`
	Models     []string `json:"models"`
	MaxStreams int      `json:"max_streams"`
	RPM        int      `json:"rpm"`
	TPM        int      `json:"tpm"`
	// BudgetUSD per BudgetPeriod (month, day, total; "" month); 0 none.
	BudgetUSD    float64 `json:"budget_usd"`
	BudgetPeriod string  `json:"budget_period"`
	// Team is the key's team: one of the database's or of the config's.
	Team string `json:"team"`
	// Expires is a duration from now ("30d", "12h") or an RFC 3339 time; "" never.
	Expires string `json:"expires"`
	// MCPTools are globs over the MCP tools the key may call ("docs__*");
	// absent or empty: every tool.
	MCPTools []string `json:"mcp_tools"`
}

// keyWithSecret is a created or rotated key: the secret is shown this once.
type keyWithSecret struct {
	keys.Key
	Secret string `json:"secret"`
}

// adminKeys serves /admin/keys (GET list, POST create) and
// /admin/keys/{ref} (GET, DELETE revokes) and /admin/keys/{ref}/rotate
// (POST). ref is a key's id or name. Secrets appear only in the answers to
// create and rotate.
func (g *Gateway) adminKeys(w http.ResponseWriter, r *http.Request) {
	if g.keyStore == nil {
		g.writeError(w, r, errKeysOff)
		return
	}
	ctx := r.Context()
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/admin/keys"), "/")
	ref, action, _ := strings.Cut(rest, "/")
	switch {
	case ref == "" && r.Method == http.MethodGet:
		list, err := g.keyStore.List(ctx)
		if err != nil {
			g.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"keys": list})
	case ref == "" && r.Method == http.MethodPost:
		var req createKeyRequest
		body, err := g.readBody(w, r)
		if err == nil {
			err = decodeObject(body, &req)
		}
		if err != nil {
			g.writeError(w, r, err)
			return
		}
		k := keys.Key{Name: req.Name, Models: req.Models, MaxStreams: req.MaxStreams, RPM: req.RPM, TPM: req.TPM,
			BudgetUSD: req.BudgetUSD, BudgetPeriod: req.BudgetPeriod, Team: req.Team, MCPTools: req.MCPTools}
		if req.Expires != "" {
			if k.ExpiresAt, err = ParseExpires(req.Expires, time.Now()); err != nil {
				g.writeError(w, r, invalid("expires", "%v", err))
				return
			}
		}
		created, secret, err := g.keyStore.Create(ctx, k)
		if err != nil {
			g.writeError(w, r, keyError(err))
			return
		}
		writeJSON(w, http.StatusCreated, keyWithSecret{created, secret})
	case ref == "":
		g.writeError(w, r, &methodError{allow: "GET, POST"})
	case action == "" && r.Method == http.MethodGet:
		k, err := g.keyStore.Get(ctx, ref)
		g.keyAnswer(w, r, k, "", err)
	case action == "" && r.Method == http.MethodDelete:
		k, err := g.keyStore.Revoke(ctx, ref)
		g.keyAnswer(w, r, k, "", err)
	case action == "":
		g.writeError(w, r, &methodError{allow: "GET, DELETE"})
	case action == "rotate" && r.Method == http.MethodPost:
		k, secret, err := g.keyStore.Rotate(ctx, ref)
		g.keyAnswer(w, r, k, secret, err)
	case action == "rotate":
		g.writeError(w, r, &methodError{allow: "POST"})
	default:
		g.writeError(w, r, fmt.Errorf("%w: %s %s", errUnknownPath, r.Method, r.URL.Path))
	}
}

func (g *Gateway) keyAnswer(w http.ResponseWriter, r *http.Request, k keys.Key, secret string, err error) {
	switch {
	case err != nil:
		g.writeError(w, r, keyError(err))
	case secret != "":
		writeJSON(w, http.StatusOK, keyWithSecret{k, secret})
	default:
		writeJSON(w, http.StatusOK, k)
	}
}

// keyError maps the key store's errors: not found 404, a name in use 409
// (as a 400 with its field), invalid input 400.
func keyError(err error) error {
	switch {
	case errors.Is(err, keys.ErrNotFound):
		return fmt.Errorf("%w: %v", errKeyNotFound, err)
	case errors.Is(err, keys.ErrNameTaken):
		return invalid("name", "%v", err)
	case errors.Is(err, keys.ErrInvalid):
		return invalid("", "%v", err)
	}
	return err
}

var errKeyNotFound = errors.New("key not found")

// errTeamNotFound: /admin/teams/{name} names no team of the database.
var errTeamNotFound = errors.New("team not found")

// errTeamConflict: a change the database's teams refuse as it stands (a
// name taken, a team its keys still name, a team the config defines).
var errTeamConflict = errors.New("team conflict")

// teamView is a team as /admin/teams shows it: where it is defined, and
// what the ledger recorded of its spend in its current period.
type teamView struct {
	keys.Team
	// Source is "database" or "config" (a config team is read-only here;
	// it wins over a database team of the same name).
	Source     string    `json:"source"`
	SpentUSD   *float64  `json:"spent_usd,omitempty"` // nil: no ledger
	SpentSince time.Time `json:"spent_since,omitzero"`
}

// adminTeams serves /admin/teams (GET list, POST create) and
// /admin/teams/{name} (GET, PATCH changes the fields sent, DELETE). The
// list holds the config's teams too (source "config"); they cannot be
// created, changed or deleted here: the config wins over the database, so
// a database team of the same name would have no effect.
func (g *Gateway) adminTeams(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := g.cur()
	name := strings.Trim(strings.TrimPrefix(r.URL.Path, "/admin/teams"), "/")
	if name == "" && r.Method == http.MethodGet {
		list := []teamView{}
		for _, t := range st.cfg.Teams {
			list = append(list, g.teamView(ctx, configTeam(t), "config"))
		}
		if g.keyStore != nil {
			db, err := g.keyStore.ListTeams(ctx)
			if err != nil {
				g.writeError(w, r, err)
				return
			}
			for _, t := range db {
				if _, ok := st.cfg.Team(t.Name); !ok {
					list = append(list, g.teamView(ctx, t, "database"))
				}
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"teams": list})
		return
	}
	if name != "" && r.Method == http.MethodGet {
		if t, ok := st.cfg.Team(name); ok {
			writeJSON(w, http.StatusOK, g.teamView(ctx, configTeam(*t), "config"))
			return
		}
	}
	if g.keyStore == nil {
		g.writeError(w, r, errKeysOff)
		return
	}
	if _, ok := st.cfg.Team(name); ok && name != "" {
		g.writeError(w, r, fmt.Errorf("%w: team %q is defined in the config, which wins over the database: change it there", errTeamConflict, name))
		return
	}
	switch {
	case name == "" && r.Method == http.MethodPost:
		var t keys.Team
		body, err := g.readBody(w, r)
		if err == nil {
			err = decodeObject(body, &t)
		}
		if err != nil {
			g.writeError(w, r, err)
			return
		}
		if _, ok := st.cfg.Team(t.Name); ok {
			g.writeError(w, r, fmt.Errorf("%w: team %q is defined in the config, which wins over the database", errTeamConflict, t.Name))
			return
		}
		created, err := g.keyStore.CreateTeam(ctx, t)
		if err != nil {
			g.writeError(w, r, teamError(err))
			return
		}
		st.teams.purge()
		writeJSON(w, http.StatusCreated, g.teamView(ctx, created, "database"))
	case name == "":
		g.writeError(w, r, &methodError{allow: "GET, POST"})
	case r.Method == http.MethodGet:
		t, err := g.keyStore.GetTeam(ctx, name)
		if err != nil {
			g.writeError(w, r, teamError(err))
			return
		}
		writeJSON(w, http.StatusOK, g.teamView(ctx, t, "database"))
	case r.Method == http.MethodPatch:
		var p keys.TeamPatch
		body, err := g.readBody(w, r)
		if err == nil {
			err = decodeObject(body, &p)
		}
		if err != nil {
			g.writeError(w, r, err)
			return
		}
		t, err := g.keyStore.UpdateTeam(ctx, name, p)
		if err != nil {
			g.writeError(w, r, teamError(err))
			return
		}
		st.teams.purge()
		writeJSON(w, http.StatusOK, g.teamView(ctx, t, "database"))
	case r.Method == http.MethodDelete:
		t, err := g.keyStore.DeleteTeam(ctx, name)
		if err != nil {
			g.writeError(w, r, teamError(err))
			return
		}
		st.teams.purge()
		writeJSON(w, http.StatusOK, g.teamView(ctx, t, "database"))
	default:
		g.writeError(w, r, &methodError{allow: "GET, PATCH, DELETE"})
	}
}

func configTeam(t config.Team) keys.Team {
	return keys.Team{Name: t.Name, BudgetUSD: t.BudgetUSD, BudgetPeriod: cmp.Or(t.BudgetPeriod, "month"), RPM: t.RPM, TPM: t.TPM, MaxStreams: t.MaxStreams}
}

// teamView adds the ledger's spend of the team's current period, when the
// gateway has a ledger and it answers.
func (g *Gateway) teamView(ctx context.Context, t keys.Team, source string) teamView {
	v := teamView{Team: t, Source: source}
	if g.spentTeam == nil {
		return v
	}
	since, _ := budget.Window(cmp.Or(t.BudgetPeriod, budget.Month), time.Now())
	if spent, err := g.spentTeam(ctx, t.Name, since); err == nil {
		v.SpentUSD, v.SpentSince = &spent, since
	}
	return v
}

// teamError maps the store's team errors: not found 404, a name taken or
// a team in use 409, invalid input 400.
func teamError(err error) error {
	switch {
	case errors.Is(err, keys.ErrTeamNotFound):
		return fmt.Errorf("%w: %v", errTeamNotFound, err)
	case errors.Is(err, keys.ErrTeamTaken), errors.Is(err, keys.ErrTeamInUse):
		return fmt.Errorf("%w: %v", errTeamConflict, err)
	case errors.Is(err, keys.ErrInvalid):
		return invalid("", "%v", err)
	}
	return err
}

// ParseExpires reads an expiry: a duration from now ("30d", "12h", "90m")
// or an RFC 3339 time; it must be in the future.
func ParseExpires(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if !t.After(now) {
			return time.Time{}, fmt.Errorf("expiry %s is not in the future", s)
		}
		return t, nil
	}
	d, err := usage.ParseDays(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("expiry %q: want a positive duration such as 30d or 12h, or an RFC 3339 time", s)
	}
	return now.Add(d), nil
}

// errUsageOff: the usage API was asked for and the gateway has no ledger to
// report from.
var errUsageOff = errors.New("no usage ledger: the gateway was started without a database")

// errLedger wraps a failed read of the usage ledger (logged, not shown).
var errLedger = errors.New("usage ledger unreachable")

// adminUsage serves GET /admin/usage?since=30d&until=&by=key|model|day|route|team|provider_key:
// the ledger's totals per group, in the shape of `streamgate usage --json`
// (usage.Breakdown), the cache savings at the config's prices. since
// defaults to 30d, until to now, by to model.
func (g *Gateway) adminUsage(w http.ResponseWriter, r *http.Request) {
	if g.report == nil {
		g.writeError(w, r, errUsageOff)
		return
	}
	now := time.Now()
	qv := r.URL.Query()
	q := usage.ReportQuery{By: cmp.Or(qv.Get("by"), "model"), Until: now, Savings: g.cacheSavings}
	if err := q.Validate(); err != nil {
		g.writeError(w, r, invalid("by", "by: %v", err))
		return
	}
	var err error
	if q.Since, err = usage.ParseWhen(cmp.Or(qv.Get("since"), "30d"), now); err != nil {
		g.writeError(w, r, invalid("since", "since: %v", err))
		return
	}
	if u := qv.Get("until"); u != "" {
		if q.Until, err = usage.ParseWhen(u, now); err != nil {
			g.writeError(w, r, invalid("until", "until: %v", err))
			return
		}
	}
	if !q.Since.Before(q.Until) {
		g.writeError(w, r, invalid("since", "since %s is not before until %s", q.Since.UTC().Format(time.RFC3339), q.Until.UTC().Format(time.RFC3339)))
		return
	}
	rows, err := g.report(r.Context(), q)
	if err != nil {
		g.writeError(w, r, fmt.Errorf("%w: %v", errLedger, err))
		return
	}
	writeJSON(w, http.StatusOK, usage.NewBreakdown(q, rows, now))
}

// keySource is the key store as the authenticator's Source.
type keySource struct{ s *keys.Store }

func (k keySource) Lookup(ctx context.Context, secret string) (*auth.Principal, error) {
	key, err := k.s.Lookup(ctx, secret)
	switch {
	case errors.Is(err, keys.ErrNotFound):
		return nil, auth.ErrUnknownKey
	case err != nil:
		return nil, fmt.Errorf("%w: %v", auth.ErrKeyStore, err)
	case key.Revoked():
		return nil, auth.ErrRevokedKey
	}
	return &auth.Principal{KeyID: key.Name, Models: key.Models, MaxStreams: key.MaxStreams, RPM: key.RPM, TPM: key.TPM,
		BudgetUSD: key.BudgetUSD, BudgetPeriod: cmp.Or(key.BudgetPeriod, "month"), ExpiresAt: key.ExpiresAt, Team: key.Team, MCPTools: key.MCPTools}, nil
}
