package main

import (
	"bufio"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

func TestSimUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // the flag the message must name
	}{
		{"bad duration", []string{"--ttft", "soon"}, "--ttft"},
		{"negative itl", []string{"--itl", "-1ms"}, "itl"},
		{"jitter out of range", []string{"--itl-jitter", "-1"}, "itl-jitter"},
		{"p99 below median", []string{"--ttft", "1s", "--ttft-p99", "10ms"}, "ttft-p99"},
		{"unknown profile", []string{"--profile", "gpt-9"}, "--profile"},
		{"bad lang", []string{"--lang", "fr"}, "lang"},
		{"bad fail status", []string{"--fail-status", "200"}, "fail-status"},
		{"rate above 1", []string{"--cut-rate", "1.5"}, "cut-rate"},
		{"zero tokens", []string{"--tokens", "0"}, "--tokens"},
		{"negative concurrency", []string{"--max-concurrency", "-1"}, "--max-concurrency"},
		{"bad addr", []string{"--addr", "nowhere"}, "--addr"},
		{"missing profiles file", []string{"--profiles", "/nonexistent/profiles.yaml"}, "--profiles"},
		{"extra argument", []string{"extra"}, "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), append([]string{"sim"}, tt.args...), func(string) string { return "" }, &out, &errb)
			if code != 2 {
				t.Fatalf("exit: got %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr: got %q, want it to name %s", errb.String(), tt.want)
			}
		})
	}
}

// sim --help lists the endpoints of the three dialects and the headers.
func TestSimHelp(t *testing.T) {
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"sim", "--help"}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("exit: got %d, want 0 (stderr %q)", code, errb.String())
	}
	for _, want := range []string{"/v1/chat/completions", "/v1/messages", ":generateContent", ":streamGenerateContent?alt=sse",
		"/v1/embeddings", sim.HeaderToolCall, sim.HeaderFailStatus, "message_stop", "finishReason"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sim --help does not name %s", want)
		}
	}
}

func TestSimFlagsOverrideProfiles(t *testing.T) {
	fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
	o := bindSimFlags(fs)
	if err := fs.Parse([]string{"--profile", "sim-gpt-4.1", "--itl", "3ms", "--cut-at", "4", "--fail-rate", "0.2"}); err != nil {
		t.Fatal(err)
	}
	opts, err := o.options(fs)
	if err != nil {
		t.Fatal(err)
	}
	gpt, _ := sim.LookupProfile("sim-gpt-4.1")
	p := opts.Profile
	if p.Name != "sim-gpt-4.1" || p.TTFT != gpt.TTFT || p.ITL != 3*time.Millisecond {
		t.Errorf("base profile: got %s ttft %v itl %v, want sim-gpt-4.1 with its ttft and itl 3ms", p.Name, p.TTFT, p.ITL)
	}
	if p.Faults.CutAt != 4 || p.Faults.CutRate != 0 || p.Faults.FailRate != 0.2 {
		t.Errorf("faults: got %+v, want cut at 4 always and fail rate 0.2", p.Faults)
	}
	for _, q := range opts.Profiles {
		if q.ITL != 3*time.Millisecond || q.Faults.CutAt != 4 {
			t.Errorf("profile %s: got itl %v cut-at %d, want the flags applied", q.Name, q.ITL, q.Faults.CutAt)
		}
	}
}

// A profiles file adds its profiles (its default becomes --profile's); a
// flag of a figure replaces the file's distribution of it; a bad file is
// bad usage naming the file and the field.
func TestSimProfilesFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	os.WriteFile(file, []byte("profiles:\n  - name: up\n    ttft: {quantiles: {p0: 10ms, p50: 20ms, p100: 90ms}}\n"+
		"    itl: {quantiles: {p0: 1ms, p100: 3ms}}\n  - name: sim-fast\n    ttft: 7ms\ndefault: up\n"), 0o600)
	parse := func(args ...string) sim.Options {
		t.Helper()
		fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
		o := bindSimFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		opts, err := o.options(fs)
		if err != nil {
			t.Fatal(err)
		}
		return opts
	}
	opts := parse("--profiles", file)
	if p := opts.Profile; p.Name != "up" || p.TTFTDist == nil || p.ITLDist == nil {
		t.Errorf("default profile: got %s (ttft table %v), want the file's up with its tables", p.Name, p.TTFTDist != nil)
	}
	fast := 0
	for _, p := range opts.Profiles {
		if p.Name == "sim-fast" {
			fast++
			if p.TTFT != 7*time.Millisecond {
				t.Errorf("sim-fast: got ttft %v, want the file's 7ms", p.TTFT)
			}
		}
	}
	if fast != 1 {
		t.Errorf("sim-fast: %d profiles, want the file's replacing the built-in one", fast)
	}
	opts = parse("--profiles", file, "--ttft", "5ms")
	if p := opts.Profile; p.TTFTDist != nil || p.TTFT != 5*time.Millisecond || p.ITLDist == nil {
		t.Errorf("--ttft 5ms: got ttft %v table %v, itl table %v; want 5ms without a ttft table, the itl table kept", p.TTFT, p.TTFTDist != nil, p.ITLDist != nil)
	}
	os.WriteFile(file, []byte("profiles:\n  - name: up\n    itl: {quantiles: {p50: 2ms}}\n"), 0o600)
	code, _, stderr := runCLI(t, nil, "sim", "--profiles", file)
	if code != 2 || !strings.Contains(stderr, file) || !strings.Contains(stderr, "itl") || !strings.Contains(stderr, "p0 and p100") {
		t.Errorf("bad file: got exit %d stderr %q, want 2 naming the file, itl and p0 and p100", code, stderr)
	}
}

func TestSimServesAndShutsDown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errb strings.Builder
	go func() {
		done <- run(ctx, []string{"sim", "--addr", "127.0.0.1:0", "--tokens", "3", "--ttft", "1ms", "--itl", "1ms"},
			func(string) string { return "" }, pw, &errb)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %q)", err, errb.String())
	}
	go io.Copy(io.Discard, pr)
	_, rest, ok := strings.Cut(line, "http://")
	if !ok {
		t.Fatalf("first line: got %q, want the listen address", line)
	}
	addr := strings.Fields(rest)[0]
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim-fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") || strings.Count(string(body), `"content":"`) != 4 {
		t.Errorf("stream: got %q, want role + 3 content chunks and [DONE]", body)
	}
	// The other dialects on the same port.
	for _, c := range []struct{ path, body, last string }{
		{"/v1/messages", `{"model":"sim-fast","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"/v1beta/models/sim-fast:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"hi"}]}]}`,
			`"finishReason":"STOP"`},
	} {
		resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), c.last) {
			t.Errorf("%s: got %d %q, want a complete stream", c.path, resp.StatusCode, body)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit: got %d, want 0 (stderr %q)", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sim did not shut down after its context ended")
	}
}

// The loop, in process: a sim with a heavy-tailed profile behind a gateway,
// a few hundred streams, `sim profiles export` from the gateway's /metrics
// and ledger, and a fresh sim from the file. The exported tables must
// reflect the source: each exported quantile lies where the source's CDF
// puts it, within generous bounds (a few hundred samples; gateway overhead
// and timer wake-ups only add), and the fault rates are close to the
// source's (fault draws are seeded: the same requests fail on every run).
func TestSimExportLoop(t *testing.T) {
	ms := float64(time.Millisecond)
	srcTTFT := map[float64]float64{0: 20 * ms, 0.5: 60 * ms, 0.9: 150 * ms, 0.99: 400 * ms, 1: 600 * ms}
	srcITL := map[float64]float64{0: 2 * ms, 0.5: 8 * ms, 0.9: 20 * ms, 0.99: 45 * ms, 1: 60 * ms}
	ttft, err := sim.NewQuantileDist(srcTTFT)
	if err != nil {
		t.Fatal(err)
	}
	itl, err := sim.NewQuantileDist(srcITL)
	if err != nil {
		t.Fatal(err)
	}
	src := sim.Profile{Name: "up-model", TTFTDist: ttft, ITLDist: itl, Tokens: 12, TokensPerChunk: 1,
		Faults: sim.Faults{FailStatus: 503, FailRate: 0.05, CutRate: 0.05}}
	up := httptest.NewServer(sim.New(sim.Options{Profile: src, Profiles: []sim.Profile{src}, Seed: 3}))
	defer up.Close()

	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "ledger.db")
	cfg := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfg, []byte("database: "+db+"\n"+
		"providers: [{name: up, kind: openai, base_url: \""+up.URL+"/v1\", api_key: x}]\n"+
		"keys: [{name: k, key: sg-test-0123456789}]\n"+
		"models: [{name: m, routes: [{provider: up, model: up-model}]}]\n"), 0o600)
	gwURL, stop := startProcess(t, []string{"serve", "--config", cfg, "--addr", "127.0.0.1:0", "--log-level", "error"}, "streamgate: listening on ")
	defer stop()

	// A moderate concurrency: failures answered at once complete first, and
	// five in a row would eject the only route (passive health).
	const n, conc = 400, 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				req, _ := http.NewRequest("POST", gwURL+"/v1/chat/completions", strings.NewReader(
					`{"model":"m","stream":true,"messages":[{"role":"user","content":"tell me something"}]}`))
				req.Header.Set("Authorization", "Bearer sg-test-0123456789")
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	// The ledger is written in batches: wait for every request's entry.
	store, err := usage.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := store.Count(context.Background(), usage.Filter{})
		if err == nil && c == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger: %d entries (err %v), want %d", c, err, n)
		}
	}

	out := filepath.Join(dir, "exported.yaml")
	if code, stdout, stderr := runCLI(t, nil, "sim", "profiles", "export", "--gateway", gwURL, "--database", db, "--out", out); code != 0 {
		t.Fatalf("export: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	text, _ := os.ReadFile(out)
	file, err := sim.ReadProfiles(strings.NewReader(string(text)))
	if err != nil {
		t.Fatalf("reading the export: %v\n%s", err, text)
	}
	if len(file.Profiles) != 1 || file.Profiles[0].Name != "up-model" {
		t.Fatalf("exported profiles: got %d, want one named up-model (the route's model)\n%s", len(file.Profiles), text)
	}
	got := file.Profiles[0]
	var notes []string
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, "#") || strings.Contains(l, "_rate") || strings.Contains(l, "p50:") || strings.Contains(l, "p99:") {
			notes = append(notes, l)
		}
	}
	t.Logf("exported:\n%s", strings.Join(notes, "\n"))
	if got.TTFTDist == nil || got.ITLDist == nil || !strings.Contains(string(text), "stream TTFTs in the ledger") {
		t.Fatalf("exported profile: got %+v, want TTFT (from the ledger) and ITL tables\n%s", got, text)
	}
	// The tables are what the gateway measured, whatever the machine's
	// load added to it: the TTFT table holds the ledger's sample quantiles
	// (to the µs the file keeps), the ITL table passes through the
	// histogram's cumulative share at each bucket bound (within the table's
	// half-percent grid).
	entries, err := store.List(context.Background(), usage.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ttfts []float64
	for _, e := range entries {
		if e.Stream && e.TTFT > 0 {
			ttfts = append(ttfts, float64(e.TTFT))
		}
	}
	slices.Sort(ttfts)
	for _, p := range []float64{0.5, 0.9, 0.99} {
		r := p * float64(len(ttfts)-1)
		i := int(r)
		want := ttfts[i] + (r-float64(i))*(ttfts[i+1]-ttfts[i])
		if v := got.TTFTDist.Quantile(p); math.Abs(v-want) > float64(time.Microsecond) {
			t.Errorf("ttft p%g: exported %v, want the ledger's %v", p*100, time.Duration(v), time.Duration(want))
		}
		// The gateway measures from the request's arrival, before the sim
		// draws: a measured TTFT is never below the drawn one, and the
		// seeded draws' p-0.1 quantile is below the source's p.
		if v := got.TTFTDist.Quantile(p); v < ttft.Quantile(p-0.1) {
			t.Errorf("ttft p%g: exported %v, below the source's p%g %v", p*100, time.Duration(v), (p-0.1)*100, time.Duration(ttft.Quantile(p-0.1)))
		}
	}
	resp, err := http.Get(gwURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	obs, err := sim.ParseGatewayMetrics(resp.Body)
	resp.Body.Close()
	if err != nil || obs["up/up-model"] == nil {
		t.Fatalf("gateway metrics: got %v (%v), want route up/up-model", obs, err)
	}
	le, cum := obs["up/up-model"].ITL.Buckets()
	for i, b := range le {
		f := cum[i] / cum[len(cum)-1]
		if f <= 0.01 || f >= 0.99 || math.IsInf(b, 1) {
			continue
		}
		if lo, hi := got.ITLDist.Quantile(f-0.006), got.ITLDist.Quantile(f+0.006); b < lo-float64(time.Microsecond) || b > hi+float64(time.Microsecond) {
			t.Errorf("itl: the gateway saw %.4f of gaps at or below %v; the exported table puts that share at [%v, %v]",
				f, time.Duration(b), time.Duration(lo), time.Duration(hi))
		}
	}
	if got.TokensPerChunk != 1 || got.ChunkDist != nil || got.TokensDist == nil || got.TokensDist.Quantile(0.5) != 12 {
		t.Errorf("exported sizes: got tokens per chunk %d (dist %v), tokens %v; want 1 and 12", got.TokensPerChunk, got.ChunkDist, got.TokensDist)
	}
	// The source fails 5 % with 503 and cuts 5 % at a random one of 13
	// positions; the export undoes what the gateway's view mixes (a cut
	// before the first chunk looks like a failure before the stream), so
	// both rates come out near 0.05 (400 seeded draws, the same on every
	// run; about 20 of each).
	f := got.Faults
	if f.FailStatus != 503 || f.FailRate < 0.025 || f.FailRate > 0.085 {
		t.Errorf("fail: got status %d rate %v, want 503 at about 0.05", f.FailStatus, f.FailRate)
	}
	if f.CutRate < 0.025 || f.CutRate > 0.085 || f.ErrorRate != 0 {
		t.Errorf("mid-stream: got cut rate %v error rate %v, want cuts at about 0.05 and no error events", f.CutRate, f.ErrorRate)
	}

	// A fresh sim serves the exported file.
	simURL, stopSim := startProcess(t, []string{"sim", "--profiles", out, "--addr", "127.0.0.1:0", "--seed", "5"}, "streamgate sim: listening on ")
	defer stopSim()
	simURL = strings.Fields(simURL)[0]
	for i := 0; ; i++ {
		resp, err := client.Post(simURL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"up-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 503 && i < 20 {
			continue // one of the exported profile's failures
		}
		if resp.StatusCode != 200 || resp.Header.Get(sim.HeaderProfile) != "up-model" {
			t.Errorf("fresh sim: got %d profile %q, want 200 from up-model", resp.StatusCode, resp.Header.Get(sim.HeaderProfile))
		}
		_ = body
		break
	}
}

// startProcess runs the CLI with args in this process until the test ends
// and returns what follows prefix on the first stdout line that has it.
func startProcess(t *testing.T, args []string, prefix string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb strings.Builder
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, args, func(string) string { return "" }, pw, &errb)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var rest string
	for sc.Scan() {
		if r, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			rest = r
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if rest == "" {
		cancel()
		t.Fatalf("%v: no line %q (exit %d, stderr %q)", args, prefix, <-exit, errb.String())
	}
	return rest, func() {
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}
