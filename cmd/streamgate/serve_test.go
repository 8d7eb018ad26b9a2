package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/usage"
)

// inProcess is `streamgate serve` on the embedded default run in this
// process (run with a context), its ledger a fresh SQLite file, on a free
// loopback port.
type inProcess struct {
	key, url, db string
	link         string // the dashboard's one-time login link
	stderr       *strings.Builder
	stop         context.CancelFunc
	exit         chan int
}

// serveInProcess starts serve with --grace grace and waits until it printed
// its development key, the dashboard's login link and its address.
func serveInProcess(t *testing.T, grace string) *inProcess {
	t.Helper()
	p := &inProcess{db: "sqlite://" + filepath.Join(t.TempDir(), "ledger.db"), stderr: &strings.Builder{}, exit: make(chan int, 1)}
	getenv := func(k string) string {
		if k == "STREAMGATE_DATABASE" {
			return p.db
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	go func() {
		code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--grace", grace, "--log-level", "warn"}, getenv, pw, p.stderr)
		pw.Close()
		p.exit <- code
	}()
	sc := bufio.NewScanner(pr)
	for p.url == "" && sc.Scan() {
		line := sc.Text()
		if m := devKeyLine.FindStringSubmatch(line); m != nil {
			p.key = m[1]
		}
		if u, ok := strings.CutPrefix(line, "streamgate: dashboard (login link, works once): "); ok {
			p.link = u
		}
		if u, ok := strings.CutPrefix(line, "streamgate: listening on "); ok {
			p.url = u
		}
	}
	go io.Copy(io.Discard, pr)
	if p.key == "" || p.url == "" || strings.HasSuffix(p.url, ":0") || !strings.HasPrefix(p.link, p.url+"/dashboard?token=") {
		t.Fatalf("got key %q link %q url %q, want all printed with the real port; stderr %q", p.key, p.link, p.url, p.stderr.String())
	}
	return p
}

// devKeyLine is the line serve prints its development key on.
var devKeyLine = regexp.MustCompile(`^streamgate: development key \(.*\): (\S+)$`)

// stream sends one short stream of 3 tokens and returns its status and body.
func (p *inProcess) stream(t *testing.T) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(
		`{"model":"sim-fast","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+p.key)
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "1ms")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	return resp.StatusCode, string(body)
}

// shutdown ends serve's context and returns its exit status, failing when
// it takes longer than within (a failsafe, not a measurement) and says why.
func (p *inProcess) shutdown(t *testing.T, within time.Duration, why string) int {
	t.Helper()
	p.stop()
	select {
	case code := <-p.exit:
		return code
	case <-time.After(within):
		t.Fatalf("serve did not stop within %s after its context ended: %s", within, why)
		return -1
	}
}

// serve on the embedded default: the dev key and the address are printed,
// a stream goes through the in-process sim, and on shutdown the ledger holds
// its entry.
func TestServeDefault(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := serveInProcess(t, "1s")
	if status, body := p.stream(t); status != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("got %d %q, want a complete stream", status, body)
	}
	if code := p.shutdown(t, 10*time.Second, "the drain should be immediate"); code != 0 {
		t.Fatalf("got exit %d, want 0; stderr %q", code, p.stderr.String())
	}
	db := p.db
	store, err := usage.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	entries, err := store.List(context.Background(), usage.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].KeyID != "dev" || entries[0].Outcome != usage.OutcomeOK || entries[0].OutputTokens != 3 {
		t.Errorf("got ledger %+v, want one ok entry of key dev with 3 output tokens", entries)
	}
	if want := "streamgate: database: " + strings.TrimPrefix(p.db, "sqlite://") + " (sqlite)\n"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr %q: want the database named, %q", p.stderr.String(), want)
	}
	if strings.Contains(p.stderr.String(), "no cache prices") {
		t.Errorf("stderr: got %q, want no cache price warning (the default prices its caches)", p.stderr.String())
	}
}

func TestServeUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bad log level", []string{"--log-level", "loud"}, "--log-level"},
		{"negative grace", []string{"--grace", "-1s"}, "--grace"},
		{"extra argument", []string{"extra"}, "extra"},
		{"address without port", []string{"--addr", "nope"}, "--addr"},
		{"pprof address without port", []string{"--pprof", "localhost"}, "--pprof"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), append([]string{"serve"}, tt.args...), func(string) string { return "" }, &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("got exit %d stderr %q, want 2 naming %s", code, errb.String(), tt.want)
			}
		})
	}
}

// runServe runs `streamgate serve args...` in-process with env and returns
// the exit status, stdout and stderr. A nil ctx is a context that has ended
// already, so a serve that wrongly got as far as serving stops at once
// instead of hanging the test.
func runServe(t *testing.T, ctx context.Context, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if ctx == nil {
		c, cancel := context.WithCancel(context.Background())
		cancel()
		ctx = c
	}
	var out, errb strings.Builder
	code = run(ctx, append([]string{"serve"}, args...), func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// A busy address fails before anything happens: no development key is
// printed and no ledger file is created (issue 12).
func TestServeBusyAddrHasNoSideEffects(t *testing.T) {
	defer goleak.VerifyNone(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	db := filepath.Join(t.TempDir(), "ledger.db")
	code, stdout, stderr := runServe(t, nil, map[string]string{"STREAMGATE_DATABASE": "sqlite://" + db}, "--addr", busy.Addr().String())
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, busy.Addr().String()) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("got exit %d stderr %q, want 1 and one line naming %s and the address in use", code, stderr, busy.Addr())
	}
	if stdout != "" {
		t.Errorf("stdout: got %q, want nothing (no development key)", stdout)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ledger file: got %v, want it not created", err)
	}
}

// A provider api_key written as ${VAR} with VAR unset stops serve at start,
// as an unset gateway key does (issue 12).
func TestServeUnsetProviderKey(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	cfg := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfg, []byte("database: sqlite://"+db+"\n"+
		"providers:\n"+
		"  - {name: up, kind: openai, base_url: \"http://127.0.0.1:9/v1\", api_key: \"${SG_TEST_UPSTREAM_KEY}\"}\n"+
		"keys: [{name: k, key: sg-test-0123456789}]\n"+
		"models: [{name: m, routes: [{provider: up, model: m}]}]\n"), 0o600)
	code, stdout, stderr := runServe(t, nil, nil, "--config", cfg, "--addr", "127.0.0.1:0")
	want := "streamgate: " + cfg + ":3: providers[0].api_key: ${SG_TEST_UPSTREAM_KEY} is unset or empty"
	if code != 2 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("got exit %d stderr %q, want 2 and one line starting %q", code, stderr, want)
	}
	if strings.Contains(stdout, "listening") {
		t.Errorf("stdout: got %q, want no listening line", stdout)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ledger file: got %v, want it not created", err)
	}
}

// A model with an input price and no cache prices is named once at start,
// in one warning line; a model with cache prices, or without a price, is
// not (issue 21).
func TestServeWarnsOfCachePrices(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfg, []byte("database: sqlite://"+filepath.Join(dir, "ledger.db")+"\n"+
		"providers: [{name: sim, kind: sim}]\n"+
		"keys: [{name: k, key: sg-test-0123456789}]\n"+
		"models:\n"+
		"  - {name: unpriced-cache, routes: [{provider: sim, model: a}], price: {input: 3, output: 15}}\n"+
		"  - {name: priced-cache, routes: [{provider: sim, model: b}], price: {input: 3, output: 15, cached_input: 0.3, cache_write: 3.75}}\n"+
		"  - {name: free-cache-reads, routes: [{provider: sim, model: b}], price: {input: 2, output: 8, cached_input: 0}}\n"+
		"  - {name: free, routes: [{provider: sim, model: c}]}\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var errb strings.Builder
	exit := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"serve", "--config", cfg, "--addr", "127.0.0.1:0"}, func(string) string { return "" }, pw, &errb)
		pw.Close()
		exit <- code
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "streamgate: listening on ") {
	}
	go io.Copy(io.Discard, pr)
	cancel() // started: the warnings come before the listening line
	if code := <-exit; code != 0 {
		t.Fatalf("got exit %d, want 0; stderr %q", code, errb.String())
	}
	stderr := errb.String()
	var warned []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "no cache prices") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "model=unpriced-cache") ||
		!strings.Contains(warned[0], "billed at the input price") {
		t.Errorf("got warnings %q, want one WARN line naming model=unpriced-cache", warned)
	}
}

// Every problem of the config is on stderr at once, one per line in line
// order, each naming file:line; a bad config is bad usage: exit 2 (issue 12).
func TestServeConfigProblemsAllAtOnce(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	os.WriteFile(cfg, []byte("timeouts: {idle: 30 seconds}\n"+
		"providers:\n"+
		"  - {name: up, kind: opnai, base_url: \"http://127.0.0.1:9/v1\"}\n"+
		"models:\n"+
		"  - {name: m, routes: [{provider: uq, model: m}]}\n"), 0o600)
	code, _, stderr := runServe(t, nil, nil, "--config", cfg)
	want := []string{
		"streamgate: " + cfg + `:1: timeouts.idle: "30 seconds" is not a duration (want e.g. "5s", "250ms", "0s")`,
		"streamgate: " + cfg + `:3: providers[0].kind: unknown kind "opnai" (want one of openai, anthropic, gemini, sim, bedrock, vertex, azure)`,
		"streamgate: " + cfg + `:5: models[0].routes[0].provider: unknown provider "uq" (providers: "up")`,
	}
	if got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); code != 2 || !slices.Equal(got, want) {
		t.Errorf("got exit %d stderr\n%s\nwant 2 and\n%s", code, stderr, strings.Join(want, "\n"))
	}
}

// TestHelperProcess is not a test: the signal tests run the test binary
// again with STREAMGATE_TEST_PROCESS=1 so that it is streamgate itself, a
// real process with real signals: `TEST_BINARY -test.run=^TestHelperProcess$ -- serve ...`.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("STREAMGATE_TEST_PROCESS") != "1" {
		t.Skip("runs only as the streamgate process of the signal tests")
	}
	i := slices.Index(os.Args, "--")
	os.Args = append([]string{"streamgate"}, os.Args[i+1:]...)
	main()
}

// serveProcess is a `streamgate serve` child process.
type serveProcess struct {
	cmd   *exec.Cmd
	url   string
	key   string
	db    string
	lines chan string // stderr, line by line
	log   strings.Builder
	exit  chan error
}

// startServeProcess starts streamgate serve on the embedded default with a
// ledger in a temporary directory and args, and waits for its address.
func startServeProcess(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{
		key:   "sg-dev-test0123456789abcdef",
		db:    filepath.Join(t.TempDir(), "ledger.db"),
		lines: make(chan string, 100),
		exit:  make(chan error, 1),
	}
	p.cmd = exec.Command(exe, append([]string{"-test.run=^TestHelperProcess$", "--", "serve", "--addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Env = append(os.Environ(), "STREAMGATE_TEST_PROCESS=1", "STREAMGATE_DEV_KEY="+p.key, "STREAMGATE_DATABASE=sqlite://"+p.db)
	stdout, _ := p.cmd.StdoutPipe()
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exit
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "streamgate: listening on "); ok {
				urls <- u
			}
		}
		close(urls)
		p.exit <- p.cmd.Wait() // after the pipes are read to their end
	}()
	select {
	case p.url = <-urls:
	case <-time.After(60 * time.Second): // a failsafe, not a measurement
	}
	if p.url == "" {
		t.Fatalf("serve did not print its address; stderr:\n%s", p.readLog())
	}
	return p
}

// waitLine returns the first stderr line from now on that contains all of
// want, failing if the process ends (or a minute passes) without one.
func (p *serveProcess) waitLine(t *testing.T, want ...string) string {
	t.Helper()
	failsafe := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("no stderr line with %q; stderr:\n%s", want, p.log.String())
			}
			p.log.WriteString(line + "\n")
			if containsAll(line, want...) {
				return line
			}
		case <-failsafe:
			t.Fatalf("no stderr line with %q within a minute; stderr:\n%s", want, p.log.String())
		}
	}
}

// readLog returns the stderr lines read so far and whatever is left once
// the process has ended.
func (p *serveProcess) readLog() string {
	for line := range p.lines {
		p.log.WriteString(line + "\n")
	}
	return p.log.String()
}

// wait returns the exit status, failing if the process does not exit
// within a minute (a failsafe, far beyond a prompt exit and far below the
// hour of --grace the tests set).
func (p *serveProcess) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exit:
		p.exit <- err // for the cleanup
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit; stderr:\n%s", p.log.String())
		return -1
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// openStream starts a streaming request through p that stays open for
// tokens × 50 ms, and returns once its first chunk arrived.
func (p *serveProcess) openStream(t *testing.T, tokens int) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(
		`{"model":"sim-fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+p.key)
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "50ms")
	req.Header.Set("X-Sim-Tokens", strconv.Itoa(tokens))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("stream: got status %d, want 200", resp.StatusCode)
	}
	body := bufio.NewReader(resp.Body)
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before its first chunk: %v", err)
		}
		if strings.HasPrefix(line, "data: {") {
			return body
		}
	}
}

// On SIGINT serve says it is draining (signal, deadline, open streams);
// a second SIGINT stops it at once: the stream still open ends with one
// error event (shutting_down), the exit status is 130, and the ledger holds
// the stream's entry with that outcome.
func TestServeSecondSignalStopsAtOnce(t *testing.T) {
	p := startServeProcess(t, "--grace", "1h", "--log-level", "warn")
	body := p.openStream(t, 100000) // about 80 minutes

	p.cmd.Process.Signal(syscall.SIGINT)
	p.waitLine(t, "level=WARN", "signal=SIGINT", "drain=1h0m0s", "deadline=", "open_streams=1", "open_connections=1")

	p.cmd.Process.Signal(syscall.SIGINT)
	p.waitLine(t, "level=WARN", "stopping at once", "signal=SIGINT")
	if code := p.wait(t); code != 130 {
		t.Errorf("exit: got %d, want 130; stderr:\n%s", code, p.readLog())
	}
	if log := p.readLog(); !strings.Contains(log, `msg=stopped`) || !strings.Contains(log, "exit_status=130") {
		t.Errorf("stderr: got\n%s\nwant a stopped line with exit_status=130", log)
	}
	rest, _ := io.ReadAll(body)
	if strings.Contains(string(rest), "[DONE]") || strings.Count(string(rest), `"code":"shutting_down"`) != 1 {
		t.Errorf("the stream's end: got %q; want one shutting_down error event and no [DONE]", lastBytes(rest, 300))
	}

	store, err := usage.Open(context.Background(), "sqlite://"+p.db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	entries, err := store.List(context.Background(), usage.Filter{})
	if err != nil || len(entries) != 1 || entries[0].Status != 200 || entries[0].Outcome == usage.OutcomeClientCancelled || entries[0].Outcome == usage.OutcomeOK {
		t.Errorf("ledger: got %+v (%v), want the stream's one entry, 200, ended by the shutdown", entries, err)
	}
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// On SIGTERM a stream open at the time finishes, then serve exits 0 and
// says so; with --log-level warn both lines show.
func TestServeSignalDrainsThenSaysStopped(t *testing.T) {
	p := startServeProcess(t, "--grace", "1h", "--log-level", "warn")
	body := p.openStream(t, 40) // about 2 s

	p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitLine(t, "level=WARN", "signal=SIGTERM", "drain=1h0m0s", "open_streams=")
	rest, _ := io.ReadAll(body)
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream: got %q at its end, want it finished with [DONE]", rest)
	}
	p.waitLine(t, "level=WARN", "msg=stopped", "exit_status=0")
	if code := p.wait(t); code != 0 {
		t.Errorf("exit: got %d, want 0; stderr:\n%s", code, p.readLog())
	}
}

// serve --help names every environment variable serve reads (issue 12).
func TestServeHelpNamesEnvironment(t *testing.T) {
	code, stdout, _ := runServe(t, context.Background(), nil, "--help")
	for _, v := range []string{config.EnvListen, config.EnvDatabase, config.EnvDevKey, "${VAR}", "${VAR:-", "GOGC", "GOMEMLIMIT", "HTTPS_PROXY", "NO_PROXY"} {
		if !strings.Contains(stdout, v) {
			t.Errorf("serve --help does not name %s", v)
		}
	}
	for _, s := range []string{"130 (SIGINT)", "143 (SIGTERM)"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("serve --help does not document exit status %s", s)
		}
	}
	if code != 0 {
		t.Errorf("exit: got %d, want 0", code)
	}
}

// SIGHUP reloads the config file: a file with a typo is refused with its
// problem logged and the running config serves on; a valid one is applied
// (one INFO line), so an alias added by it resolves and the one it removed
// answers 404.
func TestServeSIGHUPReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "streamgate.yaml")
	cfg := func(model, alias string) string {
		return "providers: [{name: sim, kind: sim}]\nkeys: [{name: dev, key: sg-dev-test0123456789abcdef}]\n" +
			"models: [{name: " + model + ", aliases: [\"" + alias + "\"], routes: [{provider: sim, model: sim-fast}]}]\n"
	}
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg("m-a", "claude-*"))
	p := startServeProcess(t, "--config", path, "--log-level", "info")
	status := func(model string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(
			`{"model":"`+model+`","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+p.key)
		req.Header.Set("X-Sim-TTFT", "1ms")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("claude-opus-4-8"); got != 200 {
		t.Fatalf("claude-opus-4-8 before any reload: got %d, want 200", got)
	}

	write(strings.Replace(cfg("m-b", "gpt-*"), "models:", "modles:", 1))
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLine(t, "level=WARN", "config reload refused", "modles")
	if got := status("claude-opus-4-8"); got != 200 {
		t.Errorf("claude-opus-4-8 after a refused reload: got %d, want 200 (the running config)", got)
	}

	write(cfg("m-b", "gpt-*"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLine(t, "level=INFO", "config reloaded", "models=\"1 (+m-b -m-a)\"")
	if got := status("gpt-6.2-sol"); got != 200 {
		t.Errorf("gpt-6.2-sol after the reload: got %d, want 200", got)
	}
	if got := status("claude-opus-4-8"); got != 404 {
		t.Errorf("claude-opus-4-8 after the reload: got %d, want 404", got)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
}
