package gateway_test

import (
	"io"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/usage"
)

// A key's budget: requests are served until what it spent (from the
// models' prices) reaches the budget, then 429 insufficient_quota with the
// period's reset; spend never passes the budget by more than one request.
func TestBudget(t *testing.T) {
	cfg := baseConfig() // m-sim: $1 input, $2 output per 1M tokens
	cfg.Keys = append(cfg.Keys, config.Key{Name: "thrifty", Key: "sk-thrifty", BudgetUSD: 0.00005, BudgetPeriod: "month"})
	e := start(t, cfg)
	served, refused := 0, 0
	var last string
	for range 12 {
		resp := do(t, "POST", e.url+"/v1/chat/completions", "sk-thrifty", chatBody("m-sim", true, ""))
		b, _ := io.ReadAll(resp.Body)
		switch resp.StatusCode {
		case 200:
			served++
		case 429:
			refused++
			last = string(b)
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		default:
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
	}
	if served == 0 || refused == 0 || !strings.Contains(last, "insufficient_quota") || !strings.Contains(last, "resets") {
		t.Fatalf("served %d, refused %d, last refusal %s; want some served, then insufficient_quota naming the reset", served, refused, last)
	}
	entries := e.waitEntries(t, 12)
	spent, maxCost := 0.0, 0.0
	for _, en := range entries {
		if en.Outcome == usage.OutcomeOK {
			spent += en.CostUSD
			maxCost = max(maxCost, en.CostUSD)
		} else if en.Status != 429 || en.Outcome != usage.OutcomeRejected {
			t.Errorf("entry %+v: want ok, or rejected with 429", en)
		}
	}
	if spent > 0.00005+maxCost {
		t.Errorf("spent $%.8f, more than the budget $0.00005 plus one request ($%.8f)", spent, maxCost)
	}
}
