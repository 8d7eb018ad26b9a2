package main

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/usage"
)

// The key CLI end to end on a SQLite database: create (the secret shown
// once), list and show (never the secret), rotate, revoke, bad input.
func TestKeysCLI(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "keys.db")
	code, out, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "app", "--models", "m1,m2", "--max-streams", "3", "--expires", "30d")
	if code != 0 {
		t.Fatalf("create: exit %d, stderr %s", code, errs)
	}
	secret := regexp.MustCompile(`secret: (sg-[0-9A-Za-z]+)`).FindStringSubmatch(out)
	if secret == nil || !strings.Contains(out, "app") || !strings.Contains(out, "m1,m2") {
		t.Fatalf("create: got %q, want the key and its secret", out)
	}
	for _, args := range [][]string{{"list"}, {"show", "app"}, {"list", "--json"}} {
		code, out, errs := runCLI(t, nil, append(append([]string{"keys"}, args...), "--database", db)...)
		if code != 0 || !strings.Contains(out, "app") || strings.Contains(out, secret[1]) || strings.Contains(out, secret[1][3:]) {
			t.Errorf("%v: exit %d, out %q, stderr %s; want the key without its secret", args, code, out, errs)
		}
	}
	code, out, _ = runCLI(t, nil, "keys", "rotate", "app", "--database", db, "--json")
	var rotated struct {
		Name   string `json:"name"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(out), &rotated); code != 0 || err != nil || rotated.Name != "app" || rotated.Secret == "" || rotated.Secret == secret[1] {
		t.Errorf("rotate: exit %d, %q (%v); want a new secret", code, out, err)
	}
	if code, out, _ := runCLI(t, nil, "keys", "revoke", "app", "--database", db); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("revoke: exit %d, %q; want the key shown revoked", code, out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create", "--database", db}, "name"},
		{[]string{"keys", "create", "--database", db, "--name", "x", "--expires", "soon"}, "--expires"},
		{[]string{"keys", "show", "nope", "--database", db}, "nope"},
	} {
		code, _, errs := runCLI(t, nil, tt.args...)
		errs = dropDatabaseLine(errs)
		if code != 2 || !strings.Contains(errs, tt.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %q", tt.args, code, errs, tt.want)
		}
	}
}

// keys create --mcp-tools stores the key's MCP tool globs; list and show
// print them (all when none), --json as mcp_tools; a bad glob is bad usage
// naming it; a glob naming an MCP server the config lacks is refused (with
// the database alone, a warning says the globs were not checked).
func TestKeysCLIMCPTools(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "keys.db")
	if code, out, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "agent", "--mcp-tools", "docs__*, fs__read_file"); code != 0 || !strings.Contains(out, "docs__*,fs__read_file") ||
		!strings.Contains(errs, "--mcp-tools docs__*,fs__read_file not checked") {
		t.Fatalf("create: exit %d, out %q, stderr %s", code, out, errs)
	}
	if code, _, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "open"); code != 0 {
		t.Fatalf("create without --mcp-tools: exit %d, stderr %s", code, errs)
	}
	code, out, errs := runCLI(t, nil, "keys", "list", "--database", db)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "MCP TOOLS") || !strings.Contains(lines[1], "docs__*,fs__read_file") || strings.Fields(lines[2])[4] != "all" {
		t.Errorf("list: exit %d, out %q, stderr %s; want agent's globs and all for open", code, out, errs)
	}
	code, out, _ = runCLI(t, nil, "keys", "show", "agent", "--database", db, "--json")
	var shown struct {
		MCPTools []string `json:"mcp_tools"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || len(shown.MCPTools) != 2 || shown.MCPTools[1] != "fs__read_file" {
		t.Errorf("show --json: exit %d, %q (%v); want mcp_tools", code, out, err)
	}
	for _, tt := range []struct{ flag, want string }{
		{"docs__*,,fs__x", "mcp_tools[1]: empty"},
		{"docs/search", `mcp_tools[0]: "docs/search" has '/'`},
	} {
		code, _, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "bad", "--mcp-tools", tt.flag)
		if errs = dropDatabaseLine(errs); code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("--mcp-tools %q: exit %d, stderr %q; want 2 naming %q", tt.flag, code, errs, tt.want)
		}
	}

	// With a config, a glob naming its server literally must name one of
	// its mcp.servers, as keys[].mcp_tools must.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.yaml")
	os.WriteFile(cfg, []byte("database: "+db+"\nproviders: [{name: sim, kind: sim}]\nmodels:\n  - {name: m1, routes: [{provider: sim, model: sim-fast}]}\n"+
		"mcp: {servers: [{name: docs, url: \"http://127.0.0.1:1/mcp\"}]}\n"), 0o600)
	code, _, errs = runCLI(t, nil, "keys", "create", "--config", cfg, "--name", "typo", "--mcp-tools", "docs__*,fs__read_file")
	if want := `--mcp-tools: "fs__read_file" names MCP server "fs", which ` + cfg + ` does not configure (its servers: docs)`; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("an unknown server: exit %d, stderr %q; want 2 and %q", code, errs, want)
	}
	if code, _, errs := runCLI(t, nil, "keys", "create", "--config", cfg, "--name", "known", "--mcp-tools", "docs__*,*search"); code != 0 || strings.Contains(errs, "not checked") {
		t.Errorf("known servers: exit %d, stderr %q", code, errs)
	}
}

// dropDatabaseLine removes the line naming the database from a command's
// stderr.
func dropDatabaseLine(errs string) string {
	if strings.HasPrefix(errs, "streamgate: database: ") {
		_, errs, _ = strings.Cut(errs, "\n")
	}
	return errs
}

// Keys show their budget, period, what the ledger recorded of their spend
// in the current period and what remains, amounts with digits enough to
// be true (issue 25: key commands never showed a budget or spend).
func TestKeysCLIBudget(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "keys.db")
	code, out, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "thrifty", "--budget-usd", "0.002", "--budget-period", "day")
	if code != 0 || !strings.Contains(out, "$0.002") || !strings.Contains(out, "day") {
		t.Fatalf("create: exit %d, %q, stderr %s; want the budget shown", code, out, errs)
	}
	if code, _, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "free"); code != 0 {
		t.Fatalf("create free: exit %d, stderr %s", code, errs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := usage.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err = s.Insert(ctx, []usage.Entry{
		{Time: now, KeyID: "thrifty", Model: "m", Outcome: usage.OutcomeOK, CostUSD: 0.0005},
		{Time: now.Add(-3 * 24 * time.Hour), KeyID: "thrifty", Model: "m", Outcome: usage.OutcomeOK, CostUSD: 5}, // an earlier day
		{Time: now, KeyID: "free", Model: "m", Outcome: usage.OutcomeOK, CostUSD: 1.25},
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, nil, "keys", "list", "--database", db)
	if code != 0 {
		t.Fatalf("list: exit %d, stderr %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// A column starts at the character where its heading does (tabwriter
	// pads with spaces); some headings are two words.
	col := func(line, name string) string {
		i := strings.Index(lines[0], " "+name+" ")
		r := []rune(line)
		if i < 0 || i+1 >= len(r) {
			return ""
		}
		if f := strings.Fields(string(r[i+1:])); len(f) > 0 {
			return f[0]
		}
		return ""
	}
	for _, tt := range []struct{ name, budget, period, spent, remaining string }{
		{"thrifty", "$0.002", "day", "$0.0005", "$0.0015"},
		{"free", "none", "month", "$1.25", "-"},
	} {
		var line string
		for _, l := range lines[1:] {
			if strings.Fields(l)[1] == tt.name {
				line = l
			}
		}
		got := []string{col(line, "BUDGET"), col(line, "PERIOD"), col(line, "SPENT"), col(line, "REMAINING")}
		if want := []string{tt.budget, tt.period, tt.spent, tt.remaining}; !slices.Equal(got, want) {
			t.Errorf("%s: got budget, period, spent, remaining %q, want %q in:\n%s", tt.name, got, want, out)
		}
	}
	code, out, _ = runCLI(t, nil, "keys", "show", "thrifty", "--database", db, "--json")
	var k struct {
		BudgetUSD    float64  `json:"budget_usd"`
		SpentUSD     float64  `json:"spent_usd"`
		RemainingUSD *float64 `json:"remaining_usd"`
	}
	if err := json.Unmarshal([]byte(out), &k); code != 0 || err != nil || k.SpentUSD != 0.0005 || k.RemainingUSD == nil || math.Abs(*k.RemainingUSD-0.0015) > 1e-12 {
		t.Errorf("show --json: exit %d, %q (%v); want spent_usd 0.0005, remaining_usd 0.0015", code, out, err)
	}
}

// The key lifecycle end to end across processes, as an operator runs it: a
// running gateway (serve on the embedded default, its ledger in SQLite),
// `keys create` against the same database, the key used at once through
// the official OpenAI client, `keys list` without its secret, `keys
// revoke` refusing it (401 naming the revocation), and its spend in `usage
// --by key --json` once the gateway has stopped and flushed its ledger.
func TestKeysUsageEndToEnd(t *testing.T) {
	p := startServeProcess(t, "--grace", "10s")
	db := "sqlite://" + p.db
	code, out, errs := runCLI(t, nil, "keys", "create", "--database", db, "--name", "shop")
	secret := regexp.MustCompile(`secret: (sg-[0-9A-Za-z]+)`).FindStringSubmatch(out)
	if code != 0 || secret == nil {
		t.Fatalf("keys create: exit %d, %q, stderr %s", code, out, errs)
	}
	client := openai.NewClient(option.WithBaseURL(p.url+"/v1/"), option.WithAPIKey(secret[1]), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const uses = 3
	var wantTokens int64
	for range uses {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     "sim-gpt-4.1",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			MaxTokens: openai.Int(8),
		})
		if err != nil {
			t.Fatalf("chat with the new key: %v", err)
		}
		wantTokens += resp.Usage.CompletionTokens
	}
	if code, out, _ := runCLI(t, nil, "keys", "list", "--database", db); code != 0 || !strings.Contains(out, "shop") || strings.Contains(out, secret[1][3:]) {
		t.Errorf("keys list: exit %d, %q; want the key without its secret", code, out)
	}
	if code, _, errs := runCLI(t, nil, "keys", "revoke", "shop", "--database", db); code != 0 {
		t.Fatalf("keys revoke: exit %d, stderr %s", code, errs)
	}
	// SQLite has no notifications: the revocation applies within the key
	// cache's second.
	// Requests served meanwhile are the key's too (sim-fast is free).
	var refused error
	served := uses
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     "sim-fast",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			MaxTokens: openai.Int(8),
		})
		if refused = err; err != nil {
			break
		}
		served++
		wantTokens += resp.Usage.CompletionTokens
	}
	var apiErr *openai.Error
	if !errors.As(refused, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.Message, "revoked") {
		t.Fatalf("a revoked key: got %v, want 401 saying it was revoked", refused)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("serve after SIGTERM: exit %d; stderr:\n%s", code, p.readLog())
	}
	code, out, errs = runCLI(t, nil, "usage", "--database", db, "--by", "key", "--json")
	var rep usage.Breakdown
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("usage --json: exit %d, %q (%v), stderr %s", code, out, err, errs)
	}
	var shop *usage.Group
	for i := range rep.Groups {
		if rep.Groups[i].Group == "shop" {
			shop = &rep.Groups[i]
		}
	}
	// The refused request is recorded too, under no key: a revoked secret
	// names none.
	// sim-gpt-4.1 costs $2 (input) and $8 (output) per million tokens.
	if shop == nil || shop.Requests != int64(served) || shop.OutputTokens != wantTokens || shop.CostUSD <= 0 || shop.Failed != 0 {
		t.Fatalf("usage of the key: got %+v in %s; want %d requests, %d output tokens, a cost", shop, out, served, wantTokens)
	}
}
