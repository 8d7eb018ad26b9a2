package usage

import (
	"database/sql"
	"strings"
	"testing"
	"time"
)

// A team's spend is the sum of its keys' records since a time; a key's
// spend on one model the sum of its records of that model. On SQLite the
// team's query reads by its index.
func TestSpentTeamAndKeyModel(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		now := time.Now().UTC().Truncate(time.Second)
		err := s.Insert(ctx, []Entry{
			{Time: now, KeyID: "a", Team: "search", Model: "m1", Outcome: OutcomeOK, CostUSD: 1},
			{Time: now, KeyID: "b", Team: "search", Model: "m2", Outcome: OutcomeOK, CostUSD: 2},
			{Time: now.Add(-48 * time.Hour), KeyID: "a", Team: "search", Model: "m1", Outcome: OutcomeOK, CostUSD: 4},
			{Time: now, KeyID: "c", Team: "ads", Model: "m1", Outcome: OutcomeOK, CostUSD: 8},
			{Time: now, KeyID: "a", Model: "m1", Outcome: OutcomeOK, CostUSD: 16}, // before a joined the team
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			got  func() (float64, error)
			want float64
		}{
			{"team since yesterday", func() (float64, error) { return SpentTeam(ctx, s, "search", now.Add(-time.Hour)) }, 3},
			{"team ever", func() (float64, error) { return SpentTeam(ctx, s, "search", time.Time{}) }, 7},
			{"no team", func() (float64, error) { return SpentTeam(ctx, s, "", time.Time{}) }, 0},
			{"key on m1", func() (float64, error) { return SpentKeyModel(ctx, s, "a", "m1", time.Time{}) }, 21},
			{"key on m2", func() (float64, error) { return SpentKeyModel(ctx, s, "a", "m2", time.Time{}) }, 0},
		} {
			if got, err := c.got(); err != nil || got != c.want {
				t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
			}
		}
		if ss, ok := s.(*sqlStore); ok && ss.d == sqliteDialect {
			var plan []string
			rows, err := ss.db.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT SUM(cost_usd) FROM usage_entries WHERE team = ? AND arrived_at >= ?`, "search", int64(0))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, parent, unused sql.NullInt64
				var detail string
				rows.Scan(&id, &parent, &unused, &detail)
				plan = append(plan, detail)
			}
			rows.Close()
			if p := strings.Join(plan, "; "); !strings.Contains(p, "usage_entries_team_arrived_at") {
				t.Errorf("plan %q: want the team index", p)
			}
		}
	})
}
