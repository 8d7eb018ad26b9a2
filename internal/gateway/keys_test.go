package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/usage"
)

// adminDo sends an admin API request with the admin key.
func adminDo(t *testing.T, e *env, method, path, body string) (int, []byte) {
	t.Helper()
	resp := do(t, method, e.url+path, "admin-secret", body)
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// eventually retries check for up to 5 s: a change of the key store reaches
// the gateway within its cache TTL (1 s).
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !check(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Keys kept in the database: created through the admin API (the secret
// shown once), used at once, listed without secrets, rotated and revoked,
// each change seen by the gateway within its cache TTL; a revoked or
// expired key's 401 says so.
func TestDatabaseKeys(t *testing.T) {
	ctx := context.Background()
	store := tempKeyStore(t)
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, KeyStore: store})

	status, body := adminDo(t, e, "POST", "/admin/keys", `{"name":"app","models":["m-sim"],"max_streams":2}`)
	var created struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(body, &created); status != 201 || err != nil || created.Secret == "" || created.Name != "app" {
		t.Fatalf("create: got %d %s, want 201 with the secret", status, body)
	}
	chat := func(secret, model string) int {
		resp := do(t, "POST", e.url+"/v1/chat/completions", secret, chatBody(model, false, ""))
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if got := chat(created.Secret, "m-sim"); got != 200 {
		t.Fatalf("a new key: got %d, want 200", got)
	}
	if got := chat(created.Secret, "m-other"); got != 403 {
		t.Errorf("a model the key may not use: got %d, want 403", got)
	}
	if en := e.waitEntries(t, 2)[0]; en.KeyID != "app" {
		t.Errorf("usage entry key: got %q, want the key's name", en.KeyID)
	}
	if status, body := adminDo(t, e, "GET", "/admin/keys", ""); status != 200 || !strings.Contains(string(body), `"app"`) || strings.Contains(string(body), created.Secret) || strings.Contains(string(body), created.Secret[3:]) {
		t.Errorf("list: got %d %s, want the key without its secret", status, body)
	}
	if status, _ := adminDo(t, e, "GET", "/admin/keys/nope", ""); status != 404 {
		t.Errorf("unknown key: got %d, want 404", status)
	}
	if status, body := adminDo(t, e, "POST", "/admin/keys", `{"name":"app"}`); status != 400 || !strings.Contains(string(body), "name") {
		t.Errorf("a taken name: got %d %s, want 400 naming the name", status, body)
	}

	// Rotate: the old secret stops working, the new one works.
	status, body = adminDo(t, e, "POST", "/admin/keys/app/rotate", "")
	var rotated struct{ Secret string }
	if json.Unmarshal(body, &rotated); status != 200 || rotated.Secret == "" || rotated.Secret == created.Secret {
		t.Fatalf("rotate: got %d %s", status, body)
	}
	eventually(t, "the old secret refused after rotation", func() bool { return chat(created.Secret, "m-sim") == 401 })
	if got := chat(rotated.Secret, "m-sim"); got != 200 {
		t.Errorf("the rotated secret: got %d, want 200", got)
	}

	// Revoke: refused within the cache TTL, with a message that says so.
	if status, _ := adminDo(t, e, "DELETE", "/admin/keys/"+created.ID, ""); status != 200 {
		t.Fatalf("revoke: got %d", status)
	}
	eventually(t, "the revoked key refused", func() bool { return chat(rotated.Secret, "m-sim") == 401 })
	resp := do(t, "POST", e.url+"/v1/chat/completions", rotated.Secret, chatBody("m-sim", false, ""))
	if er := readError(t, resp); !strings.Contains(er.Error.Message, "revoked") {
		t.Errorf("revoked key: got %q, want the message to say revoked", er.Error.Message)
	}

	// Expired.
	k, secret, err := store.Create(ctx, keys.Key{Name: "short", ExpiresAt: time.Now().Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the expired key refused", func() bool { return time.Now().After(k.ExpiresAt) && chat(secret, "m-sim") == 401 })
	resp = do(t, "POST", e.url+"/v1/chat/completions", secret, chatBody("m-sim", false, ""))
	if er := readError(t, resp); !strings.Contains(er.Error.Message, "expired") {
		t.Errorf("expired key: got %q, want the message to say expired", er.Error.Message)
	}

	// The admin API needs the admin key, and the key API a store.
	if resp := do(t, "GET", e.url+"/admin/keys", rotated.Secret, ""); resp.StatusCode != 401 {
		t.Errorf("/admin/keys with a client key: got %d, want 401", resp.StatusCode)
	}
	e2 := start(t, cfg)
	if status, _ := adminDo(t, e2, "GET", "/admin/keys", ""); status != 404 {
		t.Errorf("/admin/keys without a key store: got %d, want 404", status)
	}
}

// No secret, right or wrong, ever appears in a log line (at debug level),
// a metric, an error answer or the admin API's lists.
func TestSecretsNeverLeak(t *testing.T) {
	ctx := context.Background()
	store := tempKeyStore(t)
	_, dbSecret, err := store.Create(ctx, keys.Key{Name: "db-key", RPM: 2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret-0123456789"
	cfg.Keys = append(cfg.Keys, config.Key{Name: "static", Key: "sk-static-secret-0123456789", RPM: 1})
	logs := &logBuffer{}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, KeyStore: store,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	wrong := []string{"sg-wrong-secret-0123456789", `"sk-static-secret-0123456789"`, "sk-ant-api03-secret-0123456789"}
	secrets := append([]string{dbSecret, "sk-static-secret-0123456789", "admin-secret-0123456789"}, wrong...)
	var answers strings.Builder
	for _, key := range append([]string{dbSecret, dbSecret, dbSecret, "sk-static-secret-0123456789", "sk-static-secret-0123456789"}, wrong...) {
		for _, stream := range []bool{false, true} {
			resp := do(t, "POST", e.url+"/v1/chat/completions", key, chatBody("m-sim", stream, ""))
			b, _ := io.ReadAll(resp.Body)
			answers.Write(b)
			for k, v := range resp.Header {
				fmt.Fprintf(&answers, "%s: %s\n", k, v)
			}
		}
	}
	for _, path := range []string{"/admin/keys", "/admin/routes"} {
		_, b := adminDo(t, e, "GET", path, "")
		answers.Write(b)
	}
	resp := do(t, "GET", e.url+"/admin/keys", "sg-wrong-secret-0123456789", "")
	b, _ := io.ReadAll(resp.Body)
	answers.Write(b)
	e.waitEntries(t, 2*(5+len(wrong)))
	for what, text := range map[string]string{"logs": logs.String(), "metrics": scrape(t, e.url), "answers": answers.String()} {
		for _, s := range secrets {
			if strings.Contains(text, s) || strings.Contains(text, strings.Trim(s, `"`)[4:]) {
				t.Errorf("%s contain a secret (%.6s…)", what, s)
			}
		}
	}
	if l := logs.String(); !strings.Contains(l, "key=db-key") || !strings.Contains(l, "key=static") {
		t.Errorf("the access lines should name the keys (by name): %.300s", l)
	}
	if !strings.Contains(answers.String(), "rate limit reached") || !strings.Contains(answers.String(), "Anthropic API key") {
		t.Errorf("answers lack the expected refusals: %.300s", answers.String())
	}
}

// GET /admin/usage: the ledger's totals per key (the shape of `streamgate
// usage --json`), only with the admin key; a bad parameter is a 400 naming
// it; without a ledger a 404 saying so.
func TestAdminUsage(t *testing.T) {
	ctx := context.Background()
	store := tempLedger(t)
	now := time.Now()
	if err := store.Insert(ctx, []usage.Entry{
		{Time: now.Add(-time.Hour), KeyID: "app", Model: "m1", Route: "p/a", Attempts: 1, Outcome: usage.OutcomeOK, InputTokens: 100, OutputTokens: 1000, CostUSD: 1.5},
		{Time: now.Add(-2 * time.Hour), KeyID: "app", Model: "m1", Route: "p/b", Attempts: 2, Outcome: usage.OutcomeOK, InputTokens: 100, OutputTokens: 500, CostUSD: 0.5},
		{Time: now.Add(-3 * time.Hour), KeyID: "dev", Model: "m2", Attempts: 1, Outcome: usage.OutcomeUpstreamError},
		{Time: now.Add(-40 * 24 * time.Hour), KeyID: "old", Model: "m1", Attempts: 1, Outcome: usage.OutcomeOK, CostUSD: 100},
		{Time: now.Add(-4 * time.Hour), KeyID: "t1", Team: "red", Model: "m-sim", Attempts: 1, Outcome: usage.OutcomeOK,
			InputTokens: 1_000_000, CacheReadTokens: 500_000, CacheWriteTokens: 100_000, CostUSD: 1},
		{Time: now.Add(-5 * time.Hour), KeyID: "t2", Team: "red", Model: "m-cached", Attempts: 1, Outcome: usage.OutcomeOK,
			InputTokens: 1_000_000, CacheReadTokens: 500_000, CacheWriteTokens: 100_000, CostUSD: 1},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.AdminKey = "admin-secret"
	cached, written := 0.25, 1.5
	cfg.Models = append(cfg.Models, config.Model{Name: "m-cached", Routes: []config.Route{{Provider: "sim", Model: "sim-fast"}},
		Price: config.Price{Input: 1, Output: 2, CachedInput: &cached, CacheWrite: &written}})
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1,
		Report: func(ctx context.Context, q usage.ReportQuery) ([]usage.ReportRow, error) {
			return usage.Report(ctx, store, q)
		}})
	// By team, the savings at the config's prices: m-sim has no cache
	// prices (nothing saved), m-cached saves 0.5M × $0.75 − 0.1M × $0.50.
	status, body := adminDo(t, e, "GET", "/admin/usage?by=team&since=7d", "")
	var byTeam usage.Breakdown
	if err := json.Unmarshal(body, &byTeam); status != 200 || err != nil {
		t.Fatalf("usage by team: got %d %s (%v), want 200 and a report", status, body, err)
	}
	wantTeams := []usage.Group{
		{Group: "", Totals: usage.Totals{Requests: 3, Failed: 1, ErrorRate: 1.0 / 3, Fallbacks: 1, InputTokens: 200, OutputTokens: 1500, CostUSD: 2}},
		{Group: "red", Totals: usage.Totals{Requests: 2, InputTokens: 2_000_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 200_000,
			CacheReadShare: 0.5, CostUSD: 2, SavingsUSD: 0.375 - 0.05}},
	}
	if byTeam.By != "team" || !reflect.DeepEqual(byTeam.Groups, wantTeams) || !strings.Contains(string(body), `"cache_read_share":0.5,`) ||
		!strings.Contains(string(body), `"savings_usd":0.325`) {
		t.Errorf("usage by team: got %s, want groups %+v", body, wantTeams)
	}
	status, body = adminDo(t, e, "GET", "/admin/usage?by=key&since=7d", "")
	var rep usage.Breakdown
	if err := json.Unmarshal(body, &rep); status != 200 || err != nil {
		t.Fatalf("usage by key: got %d %s (%v), want 200 and a report", status, body, err)
	}
	want := []usage.Group{
		{Group: "app", Totals: usage.Totals{Requests: 2, Fallbacks: 1, InputTokens: 200, OutputTokens: 1500, CostUSD: 2}},
		{Group: "dev", Totals: usage.Totals{Requests: 1, Failed: 1, ErrorRate: 1}},
		{Group: "t1", Totals: usage.Totals{Requests: 1, InputTokens: 1_000_000, CacheReadTokens: 500_000, CacheWriteTokens: 100_000, CacheReadShare: 0.5, CostUSD: 1}},
		{Group: "t2", Totals: usage.Totals{Requests: 1, InputTokens: 1_000_000, CacheReadTokens: 500_000, CacheWriteTokens: 100_000, CacheReadShare: 0.5, CostUSD: 1, SavingsUSD: 0.325}},
	}
	if rep.By != "key" || !reflect.DeepEqual(rep.Groups, want) || rep.Total.CostUSD != 4 || rep.ProjectedMonthlyUSD <= 0 {
		t.Errorf("usage by key: got %+v, want groups %+v, total $4 and a projection", rep, want)
	}
	for _, tt := range []struct{ query, param string }{
		{"?by=colour", "by"},
		{"?since=yesterday", "since"},
		{"?since=1d&until=2d", "since"},
	} {
		status, body := adminDo(t, e, "GET", "/admin/usage"+tt.query, "")
		if status != 400 || !strings.Contains(string(body), `"param":"`+tt.param+`"`) {
			t.Errorf("%s: got %d %s, want 400 naming %s", tt.query, status, body, tt.param)
		}
	}
	if resp := do(t, "GET", e.url+"/admin/usage", "wrong", ""); resp.StatusCode != 401 {
		t.Errorf("a wrong admin key: got %d, want 401", resp.StatusCode)
	}
	if status, _ := adminDo(t, e, "POST", "/admin/usage", ""); status != 405 {
		t.Errorf("POST: got %d, want 405", status)
	}
	off := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1})
	if status, body := adminDo(t, off, "GET", "/admin/usage", ""); status != 404 || !strings.Contains(string(body), "usage_ledger_off") {
		t.Errorf("without a ledger: got %d %s, want 404 usage_ledger_off", status, body)
	}
}

// tempKeyStore is a key store in a SQLite file of the test's own, closed
// when the test ends.
func tempKeyStore(t *testing.T) *keys.Store {
	t.Helper()
	s, err := keys.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tempLedger is a usage ledger in a SQLite file of the test's own, closed
// when the test ends.
func tempLedger(t *testing.T) usage.Store {
	t.Helper()
	s, err := usage.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runLedger runs the batching ledger writer serve runs over store,
// flushing every flush; it is closed (its queue written) when the test
// ends, before store.
func runLedger(t *testing.T, store usage.Store, flush time.Duration) *usage.Writer {
	t.Helper()
	w := usage.NewWriter(store, usage.WriterOptions{FlushInterval: flush})
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	t.Cleanup(func() {
		fctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		w.Close(fctx)
		c()
		stopRun()
		<-ran
	})
	return w
}
