package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/keys"
	"github.com/streamgate/streamgate/internal/sqldb"
	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
	"github.com/streamgate/streamgate/internal/usage"
)

// snapshot is what a database holds of the ledger and the keys.
type snapshot struct {
	entries []usage.Entry
	keys    []keys.Key
	teams   []keys.Team
}

func readSnapshot(t *testing.T, dsn string) snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ledger, err := usage.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open ledger %s: %v", dsn, err)
	}
	defer ledger.Close()
	ks, err := keys.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open keys %s: %v", dsn, err)
	}
	defer ks.Close()
	var s snapshot
	if s.entries, err = ledger.List(ctx, usage.Filter{}); err != nil {
		t.Fatal(err)
	}
	if s.keys, err = ks.List(ctx); err != nil {
		t.Fatal(err)
	}
	if s.teams, err = ks.ListTeams(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// streamsOpen starts n streams through p, each past its first content
// event when streamsOpen returns; wait reads them to their end.
func streamsOpen(t *testing.T, p *inProcess, n int) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	started := make(chan error, n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(
				`{"model":"sim-fast","stream":true,"max_tokens":60,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+p.key)
			req.Header.Set("X-Sim-TTFT", "1ms")
			req.Header.Set("X-Sim-ITL", "20ms")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				started <- err
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			first := false
			for sc.Scan() {
				if !first && strings.Contains(sc.Text(), `"content"`) {
					first = true
					started <- nil
				}
			}
			if !first {
				started <- context.Canceled
			}
		})
	}
	for range n {
		if err := <-started; err != nil {
			t.Fatalf("a stream did not start: %v", err)
		}
	}
	return wg.Wait
}

// `streamgate backup` while 20 streams run through the serving gateway:
// the copy is consistent (every ledger row it holds is the source's, the
// keys and teams identical), and once the streams ended and the gateway
// stopped, a second backup restored in place of the database gives the
// same ledger, keys and `usage` report.
func TestBackupWhileServing(t *testing.T) {
	p := serveInProcess(t, "5s")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"teams", "create", "--name", "search", "--budget-usd", "5", "--database", p.db},
		{"keys", "create", "--name", "app", "--team", "search", "--database", p.db},
		{"keys", "create", "--name", "ops", "--budget-usd", "2", "--database", p.db},
	} {
		if code, _, errs := runCLI(t, nil, args...); code != 0 {
			t.Fatalf("%v: exit %d, stderr %s", args, code, errs)
		}
	}
	for range 5 {
		if code, _ := p.stream(t); code != 200 {
			t.Fatalf("stream: status %d", code)
		}
	}
	// The ledger's writer batches: wait until the 5 are in the database.
	for deadline := time.Now().Add(10 * time.Second); len(readSnapshot(t, p.db).entries) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the 5 entries were not written within 10s")
		}
	}
	wait := streamsOpen(t, p, 20)
	during := filepath.Join(dir, "during.db")
	code, out, errs := runCLI(t, nil, "backup", "--database", p.db, "--out", during)
	if code != 0 || !strings.Contains(out, "integrity ok") || !strings.Contains(out, "usage_entries") || !strings.Contains(out, "restore:") {
		t.Fatalf("backup while serving: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	wait()
	if code := p.shutdown(t, 30*time.Second, "after 25 streams"); code != 0 {
		t.Fatalf("serve exit %d, stderr %s", code, p.stderr.String())
	}

	src := readSnapshot(t, p.db)
	if len(src.entries) != 25 || len(src.keys) != 2 || len(src.teams) != 1 {
		t.Fatalf("source: %d entries, %d keys, %d teams; want 25, 2, 1", len(src.entries), len(src.keys), len(src.teams))
	}
	mid := readSnapshot(t, "sqlite://"+during)
	if len(mid.entries) < 5 {
		t.Errorf("backup during the streams: %d entries, want at least the 5 recorded before", len(mid.entries))
	}
	byID := map[string]usage.Entry{}
	for _, e := range src.entries {
		byID[e.ID] = e
	}
	for _, e := range mid.entries {
		if !reflect.DeepEqual(byID[e.ID], e) {
			t.Errorf("entry %s in the backup: got %+v, want the source's %+v", e.ID, e, byID[e.ID])
		}
	}
	if !reflect.DeepEqual(mid.keys, src.keys) || !reflect.DeepEqual(mid.teams, src.teams) {
		t.Errorf("keys and teams of the backup during the streams differ from the source's:\n%+v\n%+v", mid.keys, src.keys)
	}

	// Restore: the backup in place of the database (its -wal and -shm moved aside).
	after := filepath.Join(dir, "after.db")
	if code, out, errs := runCLI(t, nil, "backup", "--database", p.db, "--out", after); code != 0 {
		t.Fatalf("backup after the stop: exit %d, %s %s", code, out, errs)
	}
	restored := filepath.Join(dir, "restored", "streamgate.db")
	os.MkdirAll(filepath.Dir(restored), 0o755)
	b, err := os.ReadFile(after)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{after + "-wal", after + "-shm"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s exists: want a backup of one file", f)
		}
	}
	got := readSnapshot(t, "sqlite://"+restored)
	if !reflect.DeepEqual(got, src) {
		t.Errorf("restored: %d entries, %d keys, %d teams, not identical to the source's", len(got.entries), len(got.keys), len(got.teams))
	}
	_, want, _ := runCLI(t, nil, "usage", "--database", p.db, "--by", "team", "--json", "--since", "1d")
	_, have, _ := runCLI(t, nil, "usage", "--database", "sqlite://"+restored, "--by", "team", "--json", "--since", "1d")
	if want == "" || have != want {
		t.Errorf("usage --by team of the restored database:\n%s\nwant the source's:\n%s", have, want)
	}
}

func TestBackupRefusals(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "gw.db")
	if code, _, errs := runCLI(t, nil, "keys", "create", "--name", "a", "--database", db); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := runCLI(t, nil, "backup", "--database", db); code != 2 || !strings.Contains(errs, "--out") {
		t.Errorf("no --out: exit %d, %q; want 2 naming --out", code, errs)
	}
	out := filepath.Join(t.TempDir(), "b.db")
	os.WriteFile(out, []byte("x"), 0o644)
	if code, _, errs := runCLI(t, nil, "backup", "--database", db, "--out", out); code != 1 || !strings.Contains(errs, "exists") {
		t.Errorf("existing --out: exit %d, %q; want 1 saying it exists", code, errs)
	}
	missing := "sqlite://" + filepath.Join(t.TempDir(), "none.db")
	if code, _, errs := runCLI(t, nil, "backup", "--database", missing, "--out", out+"2"); code != 1 || !strings.Contains(errs, "no database at") {
		t.Errorf("missing database: exit %d, %q", code, errs)
	}
}

// With PostgreSQL, backup prints a pg_dump of the gateway's tables,
// schema-qualified; run as printed (when pg_dump is installed), the dump
// restores into an empty schema with the same rows.
func TestBackupPostgres(t *testing.T) {
	dsn := sqldbtest.PostgresDSN(t)
	if code, _, errs := runCLI(t, nil, "keys", "create", "--name", "a", "--database", dsn); code != 0 {
		t.Fatal(errs)
	}
	ctx := sqldbtest.Context(t)
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schema string
	db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema)
	out := filepath.Join(t.TempDir(), "gw.dump")
	code, stdout, errs := runCLI(t, nil, "backup", "--database", dsn, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	for _, want := range []string{"pg_dump --format=custom --file=" + out, "--table=" + schema + ".usage_entries", "--table=" + schema + ".api_keys",
		"--table=" + schema + ".streamgate_schema", "--table=" + schema + ".teams", "pg_restore"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout %q: want %q", stdout, want)
		}
	}
}

// gatewayTables names every table the components create (backup prints
// them for pg_dump and counts them in a copy).
func TestGatewayTables(t *testing.T) {
	ctx := sqldbtest.Context(t)
	db, err := sqldb.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range schemas(db.Dialect) {
		if err := db.MigrateSchema(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		got = append(got, n)
	}
	want := slices.Sorted(slices.Values(gatewayTables))
	if !slices.Equal(got, want) {
		t.Errorf("tables: got %v, want gatewayTables %v", got, want)
	}
}

// migrate --dry-run shows the pending steps and changes nothing; --to
// stops at a version; going down is refused naming the restore path.
func TestMigrateCLI(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "gw.db")
	ctx := sqldbtest.Context(t)
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MigrateTo(ctx, usage.Schema(db.Dialect), 5); err != nil {
		t.Fatal(err)
	}
	db.Close()
	status := func() sqldb.Status {
		db, err := sqldb.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		st, err := db.SchemaStatus(ctx, usage.Schema(db.Dialect))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	code, out, errs := runCLI(t, nil, "migrate", "--database", dsn, "--dry-run")
	for _, want := range []string{"usage: database version 5, this binary's 7", "step 6 (compatible", "ADD COLUMN team", "step 7", "2 step(s) pending (--dry-run", "keys: database version 0", "responses: database version 0", "dev_key: database version 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("--dry-run: stdout %q, want %q", out, want)
		}
	}
	if code != 0 || status().Version != 5 {
		t.Errorf("--dry-run: exit %d (stderr %s), version %d; want 0 and 5 unchanged", code, errs, status().Version)
	}

	if code, out, errs := runCLI(t, nil, "migrate", "--database", dsn, "--component", "usage", "--to", "6"); code != 0 || !strings.Contains(out, "applied: usage is at version 6") || status().Version != 6 {
		t.Errorf("--to 6: exit %d, %q %q, version %d", code, out, errs, status().Version)
	}
	code, _, errs = runCLI(t, nil, "migrate", "--database", dsn, "--component", "usage", "--to", "5")
	if code != 1 || !strings.Contains(errs, "usage is at version 6; --to 5 would go down") || !strings.Contains(errs, "streamgate backup") || status().Version != 6 {
		t.Errorf("--to 5: exit %d, stderr %q; want 1, a refusal naming the restore path", code, errs)
	}
	for _, args := range [][]string{{"--to", "3"}, {"--component", "usage"}, {"--component", "nope", "--to", "1"}} {
		if code, _, errs := runCLI(t, nil, append([]string{"migrate", "--database", dsn}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, code, errs)
		}
	}
	if code, out, errs := runCLI(t, nil, "migrate", "--database", dsn); code != 0 || status().Version != 7 || !strings.Contains(out, "applied: keys is at version 3") {
		t.Errorf("migrate: exit %d, %q %q, usage version %d; want every step applied", code, out, errs, status().Version)
	}
	if code, out, _ := runCLI(t, nil, "migrate", "--database", dsn, "--dry-run"); code != 0 || strings.Count(out, "up to date") != 4 {
		t.Errorf("after: %q, want 4 components up to date", out)
	}
}
