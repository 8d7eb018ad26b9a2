package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// At start each upstream is probed once: /readyz says "unknown" until it
// answered, then "unreachable" for one that does not (status degraded,
// the error named) and "healthy" for one that does; the replica is named
// host:port unless STREAMGATE_REPLICA says otherwise; an admin_key that
// expands empty is warned about.
func TestServeProbesUpstreamsAtStart(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String() + "/v1"
	dead.Close() // nothing listens there now: connections are refused
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.yaml")
	yaml := `admin_key: ${STREAMGATE_TEST_ADMIN_KEY_UNSET}
providers:
  - {name: down, kind: openai, base_url: ` + deadURL + `, api_key: sk-x}
  - {name: sim, kind: sim}
keys: [{name: dev, key: sk-dev}]
models:
  - {name: m-down, routes: [{provider: down, model: gpt-x}]}
  - {name: m-sim, routes: [{provider: sim, model: sim-fast}]}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, env string }{{"default name", ""}, {"STREAMGATE_REPLICA", "gw-7"}} {
		t.Run(tc.name, func(t *testing.T) {
			stderr := &strings.Builder{}
			url, stop := serveConfigStderr(t, cfg, map[string]string{EnvReplica: tc.env}, stderr)
			var ready struct {
				Status, Replica, Reason string
				Routes                  map[string]map[string]string
				Upstreams               map[string]struct {
					Probe, Error, State string
				}
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				resp, err := http.Get(url + "/readyz")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err := json.Unmarshal(b, &ready); err != nil {
					t.Fatalf("/readyz: %v in %s", err, b)
				}
				if st := ready.Routes["m-down"]["down/gpt-x"]; st != "unknown" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz still unknown after 20s: %s", b)
				}
			}
			if got := ready.Routes["m-down"]["down/gpt-x"]; got != "unreachable" {
				t.Errorf("route on the dead upstream: got %q, want unreachable (%+v)", got, ready)
			}
			if ready.Status != "degraded" || !strings.Contains(ready.Reason, "m-down") {
				t.Errorf("status %q reason %q, want degraded naming m-down", ready.Status, ready.Reason)
			}
			if u := ready.Upstreams["down"]; u.Probe != "unreachable" || u.Error == "" {
				t.Errorf("upstream down: %+v, want unreachable with its error", u)
			}
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
			host, _ := os.Hostname()
			want := host + ":" + port
			if tc.env != "" {
				want = tc.env
			}
			if ready.Replica != want {
				t.Errorf("replica %q, want %q", ready.Replica, want)
			}
			// The sim answers: once probed its route is healthy.
			for deadline := time.Now().Add(20 * time.Second); ready.Routes["m-sim"]["sim/sim-fast"] != "healthy"; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("sim route: %+v, want healthy once probed", ready.Routes)
				}
				resp, _ := http.Get(url + "/readyz")
				json.NewDecoder(resp.Body).Decode(&ready)
				resp.Body.Close()
			}
			if code := stop(); code != 0 {
				t.Errorf("exit %d", code)
			}
			if n := strings.Count(stderr.String(), "admin_key is empty once expanded"); n != 1 {
				t.Errorf("stderr has %d admin_key warnings, want 1:\n%s", n, stderr)
			}
			if !strings.Contains(stderr.String(), "upstream endpoint unreachable at start") {
				t.Errorf("stderr: %s\nwant the unreachable upstream logged", stderr)
			}
		})
	}
}

// A team command's error is the team's, without the key store's "keys: "
// prefix (issue 39).
func TestTeamsErrorsWithoutKeysPrefix(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "gw.db")
	if code, _, errs := runCLI(t, nil, "teams", "create", "--name", "t1", "--database", db); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := runCLI(t, nil, "keys", "create", "--name", "k", "--team", "t1", "--database", db); code != 0 {
		t.Fatal(errs)
	}
	for name, want := range map[string]string{"nope": `streamgate: team "nope": team not found`, "t1": `streamgate: delete team "t1": team in use by active keys`} {
		code, _, errs := runCLI(t, nil, "teams", "delete", name, "--database", db)
		errs = dropDatabaseLine(errs)
		if code != 2 || !strings.HasPrefix(errs, want) {
			t.Errorf("teams delete %s: exit %d, stderr %q; want 2 and %q", name, code, errs, want)
		}
	}
}

// keys create --models checks the names against the config it reads, and
// says so when it reads none.
func TestKeysCreateChecksModels(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "gw.db")
	cfg := filepath.Join(dir, "gw.yaml")
	os.WriteFile(cfg, []byte("database: "+db+"\nproviders: [{name: sim, kind: sim}]\nmodels:\n  - {name: m1, routes: [{provider: sim, model: sim-fast}]}\n"), 0o600)
	code, _, errs := runCLI(t, nil, "keys", "create", "--name", "a", "--models", "m1,nosuchmodel", "--config", cfg)
	if code != 2 || !strings.Contains(errs, "--models: unknown model nosuchmodel (the models of "+cfg+": m1)") {
		t.Errorf("unknown model: exit %d, stderr %q; want 2 naming it and the known ones", code, errs)
	}
	if code, _, errs := runCLI(t, nil, "keys", "create", "--name", "a", "--models", "m1", "--config", cfg); code != 0 {
		t.Errorf("known model: exit %d, %s", code, errs)
	}
	code, _, errs = runCLI(t, nil, "keys", "create", "--name", "b", "--models", "whatever", "--database", db)
	if code != 0 || !strings.Contains(errs, "--models whatever not checked") {
		t.Errorf("no config: exit %d, stderr %q; want the key created and a warning", code, errs)
	}
}

// The embedded default keeps its development key in its database: the
// same key at the next start, printed with where it lives; the key works.
func TestServeDefaultKeepsDevKey(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "gw.db")
	start := func() (key, line string, stop func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func() {
			run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--log-level", "warn"}, func(k string) string {
				if k == "STREAMGATE_DATABASE" {
					return db
				}
				return ""
			}, pw, io.Discard)
			pw.Close()
			close(done)
		}()
		sc := bufio.NewScanner(pr)
		url := ""
		for url == "" && sc.Scan() {
			if m := devKeyLine.FindStringSubmatch(sc.Text()); m != nil {
				key, line = m[1], sc.Text()
			}
			if u, ok := strings.CutPrefix(sc.Text(), "streamgate: listening on "); ok {
				url = u
			}
		}
		go io.Copy(io.Discard, pr)
		req, _ := http.NewRequest("GET", url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("the printed key on /v1/models: %v %v", resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		return key, line, func() { cancel(); <-done; http.DefaultClient.CloseIdleConnections() }
	}
	k1, line1, stop := start()
	stop()
	k2, line2, stop := start()
	stop()
	if k1 == "" || k1 != k2 {
		t.Errorf("keys: %q then %q, want the same", k1, k2)
	}
	if !strings.Contains(line1, "new, kept in ") || strings.Contains(line2, "new,") || !strings.Contains(line2, "kept in "+strings.TrimPrefix(db, "sqlite://")) {
		t.Errorf("lines %q and %q: want the first new, both naming the database", line1, line2)
	}
}
