package gateway_test

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/sse"
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
			if resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-Should-Retry") != "false" {
				t.Errorf("429 with Retry-After %q, x-should-retry %q; want none and false (no retry fixes it)", resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry"))
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

// heldUpstream is an OpenAI upstream whose streams send one content chunk,
// then wait for release (or the request's end), then report usage of 10
// prompt and 5 completion tokens and [DONE].
func heldUpstream(t *testing.T) (url string, release func()) {
	t.Helper()
	ch := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		sw.Data([]byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"x"},"finish_reason":null}]}`))
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
		sw.Data([]byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`))
		sw.Data([]byte(`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`))
		sw.Data([]byte(`[DONE]`))
	}))
	t.Cleanup(up.Close)
	var once sync.Once
	return up.URL + "/v1", func() { once.Do(func() { close(ch) }) }
}

// TestBudgetHugeEstimate reproduces issue 22's report: on a key with a $1
// budget, a request with max_tokens or max_completion_tokens of 10^18 or
// 2^63 − 1, or a huge prompt, is served (the estimate never refuses) and
// holds what is left of the budget, $1, so that the key's other requests are
// refused meanwhile, with the spend named as $1.00 (not the $1e9 estimate);
// once it ends its spend is its actual cost and the key serves again. 1e18
// is not an integer: 400. A price so large that the cost overflows float64
// counts as $1e9 (never +Inf) in the ledger, the metrics and the budget.
func TestBudgetHugeEstimate(t *testing.T) {
	huge := strings.Repeat("word ", 40_000) // about 50,000 tokens: $50 at $1,000 per 1M
	tests := []struct {
		name  string
		price config.Price
		extra string // members of a request besides model and stream (default: max_tokens 4 and one message)
		// want400 names the field refused; else the request is served.
		want400 string
		// wantCost is the request's recorded cost; wantSpent the key's
		// spend named by a refusal once it ended ("" when the key still
		// serves).
		wantCost  float64
		wantSpent string
	}{
		{name: "max_tokens 1e18", extra: `,"max_tokens":1e18,"messages":[{"role":"user","content":"hi"}]`, want400: "max_tokens"},
		{name: "max_completion_tokens 1e18", extra: `,"max_completion_tokens":1e18,"messages":[{"role":"user","content":"hi"}]`, want400: "max_completion_tokens"},
		{name: "max_tokens 10^18", extra: `,"max_tokens":1000000000000000000,"messages":[{"role":"user","content":"hi"}]`},
		{name: "max_tokens 2^63-1", extra: `,"max_tokens":9223372036854775807,"messages":[{"role":"user","content":"hi"}]`},
		{name: "max_completion_tokens 10^18", extra: `,"max_completion_tokens":1000000000000000000,"messages":[{"role":"user","content":"hi"}]`},
		{name: "max_completion_tokens 2^63-1", extra: `,"max_completion_tokens":9223372036854775807,"messages":[{"role":"user","content":"hi"}]`},
		{name: "huge prompt", price: config.Price{Input: 1000, Output: 2},
			extra: `,"max_tokens":4,"messages":[{"role":"user","content":"` + huge + `"}]`, wantCost: 0.01001},
		{name: "largest price", price: config.Price{Input: 1, Output: math.MaxFloat64},
			wantCost: 1e9, wantSpent: "($1000000000.00 used)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upURL, release := heldUpstream(t)
			defer release()
			cfg := baseConfig()
			cfg.MaxBody = 1 << 20
			cfg.Timeouts.Idle = config.Duration(time.Minute) // the held stream waits for the test
			cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Kind: "openai", BaseURL: upURL})
			price := tt.price
			if price == (config.Price{}) {
				price = config.Price{Input: 1, Output: 2}
			}
			cfg.Models = append(cfg.Models, config.Model{Name: "held", Routes: []config.Route{{Provider: "up", Model: "x"}}, Price: price})
			cfg.Keys = append(cfg.Keys, config.Key{Name: "one", Key: "sk-one", BudgetUSD: 1, BudgetPeriod: "month"})
			e := start(t, cfg)
			small := chatBody("held", true, "")
			wantCost := tt.wantCost
			if wantCost == 0 {
				wantCost = price.Cost(config.Tokens{Input: 10, Output: 5})
			}

			extra := tt.extra
			if extra == "" {
				extra = `,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]`
			}
			resp := do(t, "POST", e.url+"/v1/chat/completions", "sk-one", `{"model":"held","stream":true`+extra+`}`)
			if tt.want400 != "" {
				er := readError(t, resp)
				if resp.StatusCode != 400 || er.Error.Param == nil || *er.Error.Param != tt.want400 {
					t.Fatalf("got %d %+v, want 400 naming %s", resp.StatusCode, er.Error, tt.want400)
				}
				e.waitEntries(t, 1)
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("got %d %s, want 200 (the estimate alone never refuses)", resp.StatusCode, b)
			}
			rd := sse.NewReader(resp.Body, 0)
			if _, err := rd.Next(); err != nil { // admitted: its hold is in place
				t.Fatalf("first chunk: %v", err)
			}

			// In flight: it holds all that is left.
			during := do(t, "POST", e.url+"/v1/chat/completions", "sk-one", small)
			er := readError(t, during)
			if during.StatusCode != 429 || er.Error.Code == nil || *er.Error.Code != "insufficient_quota" || !strings.Contains(er.Error.Message, "($1.00 used)") {
				t.Fatalf("while it runs: got %d %q, want 429 insufficient_quota naming $1.00 used", during.StatusCode, er.Error.Message)
			}

			release()
			if _, done := readStream(t, resp); !done {
				t.Fatal("stream ended without [DONE]")
			}
			entries := e.waitEntries(t, 2)
			var got *usage.Entry
			for i := range entries {
				if entries[i].Status == 200 {
					got = &entries[i]
				}
			}
			if got == nil || got.CostUSD != wantCost || got.InputTokens != 10 || got.OutputTokens != 5 {
				t.Fatalf("served entry: got %+v, want cost $%v for 10 + 5 tokens", got, wantCost)
			}

			// Ended: the key's spend is its actual cost.
			after := do(t, "POST", e.url+"/v1/chat/completions", "sk-one", small)
			if tt.wantSpent == "" {
				if after.StatusCode != 200 {
					er := readError(t, after)
					t.Fatalf("after it ended: got %d %q, want 200", after.StatusCode, er.Error.Message)
				}
				readStream(t, after)
			} else if er := readError(t, after); after.StatusCode != 429 || !strings.Contains(er.Error.Message, tt.wantSpent) {
				t.Fatalf("after it ended: got %d %q, want 429 naming %s", after.StatusCode, er.Error.Message, tt.wantSpent)
			}
			e.waitEntries(t, 3)

			m := do(t, "GET", e.url+"/metrics", "", "")
			b, _ := io.ReadAll(m.Body)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, `streamgate_cost_usd_total{model="held"}`) && (strings.Contains(l, "Inf") || strings.Contains(l, "NaN")) {
					t.Fatalf("metrics: %s, want a finite cost", l)
				}
			}
		})
	}
}
