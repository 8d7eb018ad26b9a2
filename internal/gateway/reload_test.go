package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
)

// reloadYAML is a config with one model m (price in, out) taking aliases.
func reloadYAML(listen, model, aliases string, in float64) string {
	return `listen: ` + listen + `
admin_key: adm-secret
providers: [{name: sim, kind: sim}]
keys: [{name: dev, key: ` + devKey + `}]
models:
  - name: ` + model + `
    aliases: ` + aliases + `
    routes: [{provider: sim, model: sim-fast}]
    price: {input: ` + jsonNum(in) + `, output: 0}
`
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

// TestReload: POST /admin/reload swaps the config while a stream is open.
// The stream, admitted on m-a, ends on it (its ledger entry names m-a at
// m-a's price) while a request admitted after the reload resolves the
// same alias to m-b; the answer says what changed and names the changed
// field that needs a restart (listen); m-b's series exist before its first
// request. A file with problems is refused, all of them listed, and the
// config in force stays; without a file a reload answers 409.
func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "streamgate.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadYAML("127.0.0.1:1", "m-a", `["claude-*"]`, 1e6)) // 1 USD per input token
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, File: path,
		Reload: func() (*config.Config, error) { return config.Load(path, nil) }})

	// A stream on m-a (through its alias), open across the reload.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+devKey)
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "20ms")
	req.Header.Set("X-Sim-Tokens", "40")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: got %v %v, want 200", resp, err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before its first chunk: %v", err)
		}
		if strings.HasPrefix(line, "data: {") {
			break
		}
	}

	admin := func() (int, map[string]any) {
		r := do(t, "POST", e.url+"/admin/reload", "adm-secret", "")
		var out map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("POST /admin/reload: got %d %q, want JSON", r.StatusCode, b)
		}
		return r.StatusCode, out
	}
	write(reloadYAML("127.0.0.1:2", "m-b", `["claude-*"]`, 2e6))
	code, out := admin()
	if code != 200 {
		t.Fatalf("reload: got %d %v, want 200", code, out)
	}
	models := out["models"].(map[string]any)
	if got := [2]any{models["added"], models["removed"]}; !strings.Contains(jsonOf(got), `[["m-b"],["m-a"]]`) {
		t.Errorf("reload: got models %v, want m-b added and m-a removed", models)
	}
	if got := jsonOf(out["restart_required"]); got != `["listen"]` {
		t.Errorf("reload: got restart_required %s, want [\"listen\"]", got)
	}
	if m := scrape(t, e.url); !strings.Contains(m, `model="m-b"`) {
		t.Error("metrics: no series of m-b after the reload, want them pre-registered")
	}

	// A new request sees the new config; the stream ends on the old one.
	r := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("claude-y", false, ""))
	io.Copy(io.Discard, r.Body)
	if r.StatusCode != 200 {
		t.Fatalf("after reload: got %d, want 200", r.StatusCode)
	}
	rest, _ := io.ReadAll(body)
	if !strings.Contains(string(rest), "data: [DONE]") {
		t.Errorf("stream: got %q after the reload, want it to end with [DONE]", rest)
	}
	entries := e.waitEntries(t, 2)
	byModel := map[string]float64{}
	for _, en := range entries {
		byModel[en.Model] = en.CostUSD / float64(max(en.InputTokens, 1))
	}
	if byModel["m-a"] != 1 || byModel["m-b"] != 2 {
		t.Errorf("ledger: got cost per input token by model %v, want m-a (the stream) at 1 and m-b at 2", byModel)
	}

	// A file with problems: refused, every one listed, m-b still serves.
	write(strings.Replace(reloadYAML("127.0.0.1:2", "m-c", `["claude-*", "bad?"]`, 1), "providers:", "provders:", 1))
	code, out = admin()
	errObj, _ := out["error"].(map[string]any)
	ps := jsonOf(errObj["problems"])
	if code != 400 || errObj["code"] != "config_invalid" || !strings.Contains(ps, "provders") || !strings.Contains(ps, "bad?") {
		t.Errorf("invalid reload: got %d %v, want 400 config_invalid listing the unknown field and the bad glob", code, out)
	}
	r = do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("claude-z", false, ""))
	io.Copy(io.Discard, r.Body)
	if en := e.waitEntries(t, 3)[2]; r.StatusCode != 200 || en.Model != "m-b" {
		t.Errorf("after a refused reload: got %d on %q, want 200 on m-b", r.StatusCode, en.Model)
	}

	// Without a file (the embedded default): 409.
	e2 := start(t, baseConfig())
	if _, err := e2.gw.ReloadFile(context.Background()); err != gateway.ErrNoConfigFile {
		t.Errorf("ReloadFile without a file: got %v, want ErrNoConfigFile", err)
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }
