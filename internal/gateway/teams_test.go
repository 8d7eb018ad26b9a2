package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
	"github.com/streamgate/streamgate/internal/usage"
)

// sdkChat sends one streamed chat request with the official openai-go
// client (no retries) and returns its error.
func sdkChat(ctx context.Context, url, key, model string) error {
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	st := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: openai.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(4)})
	for st.Next() {
	}
	return st.Err()
}

// untilRefused sends requests until one is refused (at most n) and returns
// the refusal as the SDK sees it.
func untilRefused(t *testing.T, url, key, model string, n int) *openai.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		err := sdkChat(ctx, url, key, model)
		if err == nil {
			continue
		}
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("request %d: %v", i, err)
		}
		return apiErr
	}
	t.Fatalf("%d requests of %s on %s served, want a refusal", n, key, model)
	return nil
}

// Each refusal names the limit that was hit: the team's budget, the key's
// budget for the model, the team's rpm, the team's max_streams; the key's
// own stay as they were. The ledger records each request's team.
func TestTeamRefusalsNameTheirLimit(t *testing.T) {
	upURL, release := heldUpstream(t)
	defer release()
	cfg := baseConfig() // m-sim: $1 input, $2 output per 1M tokens
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "held", Kind: "openai", BaseURL: upURL})
	cfg.Models = append(cfg.Models, config.Model{Name: "m-held", Routes: []config.Route{{Provider: "held", Model: "x"}}})
	cfg.Teams = []config.Team{
		{Name: "search", BudgetUSD: 0.00003},
		{Name: "chatty", RPM: 2},
		{Name: "narrow", MaxStreams: 1},
	}
	cfg.Keys = append(cfg.Keys,
		config.Key{Name: "s1", Key: "sk-s1", Team: "search"},
		config.Key{Name: "mb", Key: "sk-mb", ModelBudgets: []config.ModelBudget{{Model: "m-sim", BudgetUSD: 0.00003, BudgetPeriod: "day"}}},
		config.Key{Name: "c1", Key: "sk-c1", Team: "chatty"},
		config.Key{Name: "c2", Key: "sk-c2", Team: "chatty"},
		config.Key{Name: "n1", Key: "sk-n1", Team: "narrow"},
		config.Key{Name: "n2", Key: "sk-n2", Team: "narrow"},
	)
	e := start(t, cfg)

	t.Run("team budget", func(t *testing.T) {
		err := untilRefused(t, e.url, "sk-s1", "m-sim", 12)
		if err.StatusCode != 429 || err.Code != "insufficient_quota" || err.Type != "insufficient_quota" ||
			!strings.Contains(err.Message, `team "search" budget of $0.00003 per month is spent (`) || !strings.Contains(err.Message, "resets at") {
			t.Errorf("got %d %s/%s %q; want 429 insufficient_quota naming the team's budget", err.StatusCode, err.Code, err.Type, err.Message)
		}
	})
	t.Run("model budget", func(t *testing.T) {
		err := untilRefused(t, e.url, "sk-mb", "m-sim", 12)
		if err.StatusCode != 429 || err.Code != "insufficient_quota" ||
			!strings.Contains(err.Message, `key "mb" budget for model "m-sim" of $0.00003 per day is spent (`) {
			t.Errorf("got %d %s %q; want 429 insufficient_quota naming the key's budget for m-sim", err.StatusCode, err.Code, err.Message)
		}
		// Its other models are served.
		if err := sdkChat(context.Background(), e.url, "sk-mb", "m-other"); err != nil {
			t.Errorf("m-other after m-sim's budget was spent: %v", err)
		}
	})
	t.Run("team rpm", func(t *testing.T) {
		ctx := context.Background()
		if err := sdkChat(ctx, e.url, "sk-c1", "m-sim"); err != nil {
			t.Fatal(err)
		}
		err := untilRefused(t, e.url, "sk-c2", "m-sim", 3)
		if err.StatusCode != 429 || err.Code != "rate_limit_exceeded" || err.Type != "rate_limit_error" ||
			!strings.Contains(err.Message, `rate limit reached for team "chatty": 2 requests per minute (rpm)`) {
			t.Errorf("got %d %s/%s %q; want 429 rate_limit_exceeded naming the team's rpm", err.StatusCode, err.Code, err.Type, err.Message)
		}
	})
	t.Run("team max_streams", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		held := make(chan error, 1)
		client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey("sk-n1"), option.WithMaxRetries(0))
		st := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m-held",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		if !st.Next() { // its first chunk: the stream holds the team's slot
			t.Fatalf("held stream: %v", st.Err())
		}
		go func() {
			for st.Next() {
			}
			held <- st.Err()
		}()
		err := untilRefused(t, e.url, "sk-n2", "m-sim", 1)
		if err.StatusCode != 429 || err.Code != "too_many_concurrent_requests" ||
			!strings.Contains(err.Message, `too many concurrent requests for team "narrow" (limit 1 on this replica)`) {
			t.Errorf("got %d %s %q; want 429 too_many_concurrent_requests naming the team", err.StatusCode, err.Code, err.Message)
		}
		release()
		if err := <-held; err != nil {
			t.Errorf("held stream: %v", err)
		}
		if err := sdkChat(context.Background(), e.url, "sk-n2", "m-sim"); err != nil {
			t.Errorf("after the held stream ended: %v", err)
		}
	})

	time.Sleep(100 * time.Millisecond)
	for _, en := range e.rec.all() {
		want := map[string]string{"s1": "search", "c1": "chatty", "c2": "chatty", "n1": "narrow", "n2": "narrow"}[en.KeyID]
		if en.Team != want {
			t.Errorf("entry of key %s: team %q, want %q", en.KeyID, en.Team, want)
		}
	}
	m := scrape(t, e.url)
	for _, s := range []string{`scope="team_budget"} 1`, `scope="model_budget"} 1`, `scope="team_rpm"} 1`, `scope="team"} 1`} {
		if !strings.Contains(m, "streamgate_admission_rejected_total{"+s) {
			t.Errorf("metrics lack streamgate_admission_rejected_total{%s", s)
		}
	}
}

// A config key naming a team that is neither in teams: nor in the
// database: the gateway does not start, and says which.
func TestTeamUnknownAtStart(t *testing.T) {
	cfg := baseConfig()
	cfg.Keys = append(cfg.Keys, config.Key{Name: "x", Key: "sk-x", Team: "ghost"})
	_, err := gateway.New(gateway.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), `keys[2].team: unknown team "ghost"`) {
		t.Fatalf("got %v, want keys[2].team named", err)
	}
}

// ledgerRecorder writes to the usage store and keeps what it was given.
type ledgerRecorder struct {
	w   *usage.Writer
	rec *recorder
}

func (l ledgerRecorder) Record(e usage.Entry) { l.w.Record(e); l.rec.Record(e) }

// Three replicas on PostgreSQL and Redis share one team budget, spent by
// three keys of the team, one per replica, concurrently: the team's spend
// passes its budget by less than what was in flight at the last admission
// (one request per replica here: package budget's bound), and the ledger's
// sum for the team is exactly what the replicas served.
func TestTeamBudgetAcrossReplicas(t *testing.T) {
	redisURL := redistest.URL(t)
	dsn := sqldbtest.PostgresDSN(t)
	ctx := sqldbtest.Context(t)
	store, err := usage.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var b [6]byte
	rand.Read(b[:])
	team := "team-" + hex.EncodeToString(b[:]) // its own counters in Redis
	const budgetUSD = 0.0005
	cfg := baseConfig()
	cfg.Redis = redisURL
	cfg.Teams = []config.Team{{Name: team, BudgetUSD: budgetUSD, BudgetPeriod: "total"}}
	for i := range 3 {
		cfg.Keys = append(cfg.Keys, config.Key{Name: team + "-k" + string(rune('0'+i)), Key: "sk-team-" + string(rune('0'+i)), Team: team})
	}
	rec := &recorder{}
	var urls []string
	var writers []*usage.Writer
	var logMu sync.Mutex
	var logs strings.Builder // the replicas' warnings: an outage of the quota's Redis changes the bound
	for range 3 {
		w := usage.NewWriter(store, usage.WriterOptions{})
		wctx, wcancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { w.Run(wctx); close(done) }()
		gw, err := gateway.New(gateway.Options{Config: cfg, KeepAlive: -1, RedisCallTimeout: sharedCallTimeout, Recorder: ledgerRecorder{w, rec},
			Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Spent: func(ctx context.Context, key string, since time.Time) (float64, error) {
				return usage.Spent(ctx, store, key, since)
			},
			SpentTeam: func(ctx context.Context, team string, since time.Time) (float64, error) {
				return usage.SpentTeam(ctx, store, team, since)
			}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(func() { srv.Close(); gw.Close(); wcancel(); <-done })
		urls = append(urls, srv.URL)
		writers = append(writers, w)
	}
	var wg sync.WaitGroup
	refusals := make([]*openai.Error, 3)
	for i := range 3 {
		wg.Go(func() { refusals[i] = untilRefused(t, urls[i], "sk-team-"+string(rune('0'+i)), "m-sim", 200) })
	}
	wg.Wait()
	for i, err := range refusals {
		if err == nil || err.StatusCode != 429 || !strings.Contains(err.Message, `team "`+team+`" budget of $0.0005 in total is spent`) {
			t.Errorf("replica %d: got %v, want the team's budget refused", i, err)
		}
	}
	for _, w := range writers {
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.Close(fctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	served, maxCost, n := 0.0, 0.0, 0
	for _, en := range rec.all() {
		if en.Outcome == usage.OutcomeOK {
			served += en.CostUSD
			maxCost = max(maxCost, en.CostUSD)
			n++
		}
		if en.Team != team {
			t.Errorf("entry of %s: team %q, want %q", en.KeyID, en.Team, team)
		}
	}
	ledger, err := usage.SpentTeam(ctx, store, team, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests served, team spend $%.7f of a $%.4f budget, largest request $%.7f; ledger $%.7f", n, served, budgetUSD, maxCost, ledger)
	// A replica refuses while the others' requests in flight hold their
	// reservations, which settle at their cost after; so the first refusal
	// may leave up to one request per other replica of the budget unspent.
	if floor := budgetUSD - 3*maxCost; served < floor {
		t.Errorf("served $%.7f, less than the budget $%.4f less one request per replica ($%.7f): refused early", served, budgetUSD, floor)
	}
	if bound := budgetUSD + 3*maxCost; served > bound {
		logMu.Lock()
		t.Errorf("served $%.7f, more than the budget plus one request per replica ($%.7f); the replicas' warnings (a quota outage lets each replica count alone):\n%s", served, bound, logs.String())
		logMu.Unlock()
	}
	if math.Abs(ledger-served) > 1e-12 {
		t.Errorf("ledger's team sum $%.9f, served $%.9f: want equal", ledger, served)
	}
}
