package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
	"github.com/streamgate/streamgate/internal/usd"
)

// In a real browser: the dashboard's teams table shows each team's cost
// as usage.Report by team has it (the query of `streamgate usage --by
// team`), formatted as the CLI formats money, and its budget.
func TestDashboardBrowserTeams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	browser, pageErrors := openBrowser(t, ctx)
	store := tempLedger(t)
	w := runLedger(t, store, 20*time.Millisecond)
	cfg := baseConfig()
	cfg.Dashboard.Open = true
	cfg.Teams = []config.Team{{Name: "search", BudgetUSD: 1, BudgetPeriod: "day"}}
	cfg.Keys = append(cfg.Keys, config.Key{Name: "s1", Key: "sk-s1", Team: "search"})
	report := func(ctx context.Context, q usage.ReportQuery) ([]usage.ReportRow, error) {
		return usage.Report(ctx, store, q)
	}
	url, stop, _ := serveDashboard(t, gateway.Options{Config: cfg, Recorder: w, Report: report,
		SpentTeam: func(ctx context.Context, team string, since time.Time) (float64, error) {
			return usage.SpentTeam(ctx, store, team, since)
		}}, time.Second)
	defer stop()
	for _, key := range []string{"sk-s1", "sk-s1", devKey} {
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"m-sim","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var rows []usage.ReportRow
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rows, _ = report(ctx, usage.ReportQuery{By: "team", Since: time.Now().UTC().Truncate(24 * time.Hour)})
		if len(rows) == 2 && rows[0].Requests+rows[1].Requests == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger rows by team: %+v", rows)
		}
	}
	if err := chromedp.Do(browser, chromedp.Navigate(url+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		group := r.Group
		if group == "" {
			group = "(none)"
		}
		sel := `#teams tr[data-team="` + group + `"] td[data-k="cost_usd"]`
		got, err := chromedp.Run(browser, chromedp.Poll[string](`(() => { const e = document.querySelector('`+sel+`'); return e && e.textContent; })()`,
			chromedp.WithPollingTimeout(20*time.Second)))
		if err != nil {
			page, _ := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("team %s not shown: %v\n%s", group, err, page)
		}
		if want := usd.Format(r.CostUSD); got != want {
			t.Errorf("team %s: cost %q in the page, want %q (usage --by team)", group, got, want)
		}
	}
	spent, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector('#teams tr[data-team="search"] td[data-k="spent_usd"]').textContent + " / " + document.querySelector('#teams tr[data-team="search"] td[data-k="resets"]').textContent`))
	if err != nil || !strings.Contains(spent, "UTC") {
		t.Errorf("search's budget: %q, %v; want spent and the reset", spent, err)
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the page raised errors: %q", errs)
	}
}
