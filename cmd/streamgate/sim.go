package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/usage"
)

func init() { subcommands = append(subcommands, newSimCmd) }

// simFlags are the values of the sim command's flags.
type simFlags struct {
	addr, profile, lang        string
	profilesFile, googleOut    string
	ttft, ttftP99, itl         time.Duration
	prefill                    time.Duration
	jitter                     float64
	tokens, perChunk, maxConc  int
	seed                       int64
	stamp                      bool
	failStatus                 int
	failRate                   float64
	stallFirst                 time.Duration
	stallFirstRate             float64
	stallAt                    int
	stallFor                   time.Duration
	stallRate                  float64
	cutAt, errorAt, malformAt  int
	cutRate, errorRate, mfRate float64
}

func newSimCmd(e *env) *cobra.Command {
	var o *simFlags
	var tf *simTLSFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the simulated upstream (OpenAI, Anthropic and Gemini dialects)",
		Long: `sim serves a simulated upstream that streams like a real provider, faults included,
so the gateway and the benchmark run offline. Three dialects on one port, over HTTP/1.1
and, on the same port, HTTP/2 cleartext with prior knowledge (h2c):
  POST /v1/chat/completions                          OpenAI Chat Completions, stream and not
  POST /v1/messages, /v1/messages/count_tokens       Anthropic Messages (max_tokens required)
  POST /v1beta/models/{model}:generateContent        Gemini API
  POST /v1beta/models/{model}:streamGenerateContent?alt=sse
  POST /v1beta/models/{model}:countTokens
  POST /v1/embeddings, GET /v1/models, GET /metrics
Auth headers (Authorization, x-api-key, x-goog-api-key) are accepted whatever their
value (the key owns a prompt cache), so an OpenAI base URL is http://ADDR/v1, an
Anthropic or Gemini one http://ADDR.
With --tls it serves TLS instead (HTTP/2 and HTTP/1.1 by ALPN, as providers do): the
base URLs are https://, trusted through a provider's ca_file (--tls-ca-out writes it).

Any model name is answered. A name matching a profile uses that profile, others use
--profile (default: the flag defaults below, named sim-default). Flags given
explicitly override every profile. Built-in profiles (simulated; prices are the
published output prices of the model each imitates, USD per 1M tokens; the seed
models' TTFT and token rate are approximate third-party medians, whose source and
month ` + "`streamgate sim profiles`" + ` lists):
` + simProfileTable() + `
--profiles FILE adds the profiles of a YAML file (replacing built-in ones of the same
name): TTFT and gaps as quantile tables or Prometheus histograms, output length as a
table, tokens per chunk as weights, prefill per token, an hourly (UTC) shape and fault
rates; a draw takes a uniform quantile and interpolates linearly between the table's
points. ` + "`streamgate sim profiles export`" + ` writes such a file from what a running
gateway observed (see its --help).

Every dialect streams its provider's shape from one engine, so profiles, pacing,
headers and faults are the same in all three:
  OpenAI     role-only chunk, content chunks, finish_reason chunk, a usage chunk when
             stream_options.include_usage, then data: [DONE].
  Anthropic  message_start, content_block_start, ping, content_block_delta per chunk,
             content_block_stop, message_delta (stop_reason, usage), message_stop.
  Gemini     data: GenerateContentResponse per chunk with cumulative usageMetadata, a
             last chunk with finishReason; no [DONE].
Tokens are paced against absolute deadlines; --itl is the gap between content chunks.
Without --tokens-per-chunk a chunk carries what the provider's events do (OpenAI 1
token, Anthropic 4, Gemini 16) and comes that many --itl gaps after the previous one.
Same --seed and same requests give the same text, timings and faults.

Like the providers: Anthropic thinking (thinking_delta events and a signature_delta the
sim verifies when the block is passed back: a changed or unsigned block is a 400),
OpenAI reasoning_effort (completion_tokens_details.reasoning_tokens), Gemini
thinkingConfig (thoughtsTokenCount, thought parts); prompt caching per API key and
model (Anthropic cache_control breakpoints: cache_read_input_tokens and
cache_creation_input_tokens; OpenAI cached_tokens and Gemini cachedContentTokenCount
for a repeated prefix of 1024 tokens or more).

Faults: a fault flag without its -rate hits every request; with --X-rate it hits
that fraction of requests (seeded; a rate alone uses 503, 10s or a random chunk).
Chunks count content chunks from 1; a fault "at N" happens just before chunk N.
--fail-status answers in the dialect's error shape; --cut-at closes the connection
(no [DONE], message_stop or finishReason); --error-at sends the dialect's error event
(OpenAI data: {"error":...}, Anthropic event: error overloaded_error, Gemini data:
{"error":...} UNAVAILABLE) and ends; --malformed-at sends a data: line that is not
JSON and the stream goes on.

Tool calls: when the request offers tools, the header X-Sim-Tool-Call: NAME answers
with one call of that tool (arguments built from its schema, streamed in fragments:
OpenAI tool_calls deltas and finish_reason tool_calls, Anthropic tool_use with
input_json_delta and stop_reason tool_use, Gemini one functionCall part). NAME must be
offered, else 400. Without the header the answer is text.

Per-request overrides, request headers (a bad value answers 400 naming the header):
  X-Sim-Profile  X-Sim-TTFT  X-Sim-TTFT-P99  X-Sim-ITL  X-Sim-ITL-Jitter
  X-Sim-Prefill-Per-Token  X-Sim-Tokens  X-Sim-Tokens-Per-Chunk  X-Sim-Lang  X-Sim-Seed
  X-Sim-Tool-Call  X-Sim-Thinking-Tokens  X-Sim-Redacted-Thinking
  X-Sim-Fail-Status  X-Sim-Fail-Rate  X-Sim-Stall-First  X-Sim-Stall-First-Rate
  X-Sim-Stall-At  X-Sim-Stall-For  X-Sim-Stall-Rate  X-Sim-Cut-At  X-Sim-Cut-Rate
  X-Sim-Error-At  X-Sim-Error-Rate  X-Sim-Malformed-At  X-Sim-Malformed-Rate
Durations are Go durations (250ms, 1.5s); rates are 0..1; a fault header without its
rate header hits that request, a rate header of 0 switches the profile's fault off.`,
		Example: `  streamgate sim --stamp
  streamgate sim --profile sim-gpt-4.1 --max-concurrency 64
  streamgate sim --fail-status 429 --fail-rate 0.1 --cut-rate 0.05 --seed 7
  streamgate sim --tls --tls-ca-out sim-ca.pem     # https://, a provider's ca_file: sim-ca.pem
  streamgate sim --profiles prod.yaml              # sim profiles export wrote it
  streamgate sim --google-credentials-out sa.json  # a vertex provider's credentials_file
  curl -N localhost:8081/v1/chat/completions -H 'X-Sim-Tokens: 20' \
    -d '{"model":"sim-fast","stream":true,"messages":[{"role":"user","content":"hi"}]}'
  curl -N localhost:8081/v1/messages -H 'X-Sim-Tokens: 20' \
    -d '{"model":"sim-claude-sonnet-4.5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
  curl -N 'localhost:8081/v1beta/models/sim-gemini-2.5-flash:streamGenerateContent?alt=sse' \
    -d '{"contents":[{"parts":[{"text":"hi"}]}]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := o.options(cmd.Flags())
			if err != nil {
				return err
			}
			if opts.TLS, err = tf.config(cmd.Flags()); err != nil {
				return err
			}
			scheme := "http"
			if opts.TLS != nil {
				scheme = "https"
			}
			ln, err := net.Listen("tcp", o.addr)
			if err != nil {
				return fmt.Errorf("sim: listen on %s: %w", o.addr, err)
			}
			if o.googleOut != "" {
				key, err := writeSimServiceAccount(o.googleOut, scheme+"://"+ln.Addr().String()+"/token")
				if err != nil {
					ln.Close()
					return err
				}
				opts.GoogleKeys = append(opts.GoogleKeys, key)
			}
			fmt.Fprintf(e.stdout, "streamgate sim: listening on %s://%s (OpenAI at /v1, Anthropic at /v1/messages, Gemini at /v1beta; default profile %s, seed %d)\n",
				scheme, ln.Addr(), opts.Profile.Name, opts.Seed)
			if err := sim.New(opts).Serve(cmd.Context(), ln); err != nil {
				return fmt.Errorf("sim: serve: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().SortFlags = false
	o = bindSimFlags(cmd.Flags())
	tf = bindSimTLSFlags(cmd.Flags())
	cmd.AddCommand(newSimProfilesCmd(e))
	return cmd
}

// readProfilesFile reads a --profiles file; its errors name the file.
func readProfilesFile(path string) (*sim.ProfilesFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--profiles: %v", err)
	}
	defer f.Close()
	pf, err := sim.ReadProfiles(f)
	if err != nil {
		return nil, usagef("--profiles %s: %w", path, err)
	}
	return pf, nil
}

// bindSimFlags defines the sim flags on f, with their defaults.
func bindSimFlags(f *pflag.FlagSet) *simFlags {
	var o simFlags
	d := sim.DefaultProfile()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8081", "listen address HOST:PORT")
	f.StringVar(&o.profile, "profile", "", "profile for models without one of their own (default: the flag defaults, sim-default)")
	f.StringVar(&o.profilesFile, "profiles", "", "profiles file (YAML: quantile tables, histograms, fault rates; `sim profiles export` writes one) added to the built-in profiles")
	f.DurationVar(&o.ttft, "ttft", d.TTFT, "median time to first token (after any queue wait)")
	f.DurationVar(&o.ttftP99, "ttft-p99", d.TTFTP99, "p99 time to first token (lognormal); equal to --ttft means constant")
	f.DurationVar(&o.itl, "itl", d.ITL, "mean gap between content chunks")
	f.Float64Var(&o.jitter, "itl-jitter", d.ITLJitter, "relative std-dev of a gap (lognormal), 0 = constant")
	f.IntVar(&o.tokens, "tokens", d.Tokens, "output tokens when max_tokens is absent or larger")
	f.IntVar(&o.perChunk, "tokens-per-chunk", d.TokensPerChunk, "tokens in each content chunk (default: the dialect's, OpenAI 1, Anthropic 4, Gemini 16)")
	f.DurationVar(&o.prefill, "prefill-per-token", 0, "added to the TTFT per estimated prompt token (~4 chars of English)")
	f.IntVar(&o.maxConc, "max-concurrency", 0, "requests served at once, more wait in a FIFO queue (0 = unlimited)")
	f.StringVar(&o.lang, "lang", d.Lang, "output language: en or ko")
	f.Int64Var(&o.seed, "seed", 1, "seed of text, timings and fault draws")
	f.BoolVar(&o.stamp, "stamp", false, `write ": sent_ns=<unix ns>" before each event (every dialect; go-genai cannot read SSE comments)`)
	f.IntVar(&o.failStatus, "fail-status", sim.DefaultFailStatus, "answer this status (429/500/502/503...) before the stream")
	f.Float64Var(&o.failRate, "fail-rate", 0, "fraction of requests answered --fail-status")
	f.DurationVar(&o.stallFirst, "stall-first", 0, "stall before the first event (10s when only the rate is given)")
	f.Float64Var(&o.stallFirstRate, "stall-first-rate", 0, "fraction of requests with --stall-first")
	f.IntVar(&o.stallAt, "stall-at", 0, "stall before content chunk N (random chunk when only the rate is given)")
	f.DurationVar(&o.stallFor, "stall-for", sim.DefaultStall, "length of the --stall-at stall")
	f.Float64Var(&o.stallRate, "stall-rate", 0, "fraction of requests with the --stall-at stall")
	f.IntVar(&o.cutAt, "cut-at", 0, "close the connection before content chunk N (no [DONE])")
	f.Float64Var(&o.cutRate, "cut-rate", 0, "fraction of requests cut (at a random chunk without --cut-at)")
	f.IntVar(&o.errorAt, "error-at", 0, "send an error event before content chunk N, then end")
	f.Float64Var(&o.errorRate, "error-rate", 0, "fraction of requests with the error event")
	f.IntVar(&o.malformAt, "malformed-at", 0, "send a data: line that is not JSON before content chunk N")
	f.Float64Var(&o.mfRate, "malformed-rate", 0, "fraction of requests with the malformed line")
	f.StringVar(&o.googleOut, "google-credentials-out", "", "write a service-account JSON whose grants the sim's /token accepts (a vertex provider's credentials_file)")
	return &o
}

// writeSimServiceAccount writes a service-account key file for the
// simulator's token endpoint at tokenURI, and returns its public key.
func writeSimServiceAccount(path, tokenURI string) (*rsa.PublicKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("sim: --google-credentials-out: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sim: --google-credentials-out: %w", err)
	}
	sa, _ := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": "sim-project", "private_key_id": "sim",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "streamgate-sim@sim-project.iam.gserviceaccount.com", "token_uri": tokenURI,
	}, "", "  ")
	if err := os.WriteFile(path, sa, 0o600); err != nil {
		return nil, usagef("--google-credentials-out: %v", err)
	}
	return &key.PublicKey, nil
}

// options turns the flags into sim.Options: the chosen profile, then every
// flag given explicitly on top of it and of every built-in profile.
func (o *simFlags) options(fs *pflag.FlagSet) (sim.Options, error) {
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return sim.Options{}, usagef("--addr %q: want HOST:PORT", o.addr)
	}
	if o.maxConc < 0 {
		return sim.Options{}, usagef("--max-concurrency %d: want 0 (unlimited) or more", o.maxConc)
	}
	profiles := sim.Profiles()
	base := sim.DefaultProfile()
	if o.profilesFile != "" {
		file, err := readProfilesFile(o.profilesFile)
		if err != nil {
			return sim.Options{}, err
		}
		// A file's profile replaces the built-in one of its name.
		for _, fp := range file.Profiles {
			i := slices.IndexFunc(profiles, func(p sim.Profile) bool { return p.Name == fp.Name })
			if i < 0 {
				profiles = append(profiles, fp)
			} else {
				profiles[i] = fp
			}
		}
		if file.Default != "" && o.profile == "" {
			o.profile = file.Default
		}
	}
	if o.profile != "" {
		i := slices.IndexFunc(profiles, func(p sim.Profile) bool { return p.Name == o.profile })
		if i < 0 {
			var names []string
			for _, p := range profiles {
				names = append(names, p.Name)
			}
			return sim.Options{}, usagef("--profile %q: unknown profile (known: %s)", o.profile, strings.Join(names, ", "))
		}
		base = profiles[i]
	}
	set := fs.Changed
	apply := func(p *sim.Profile) {
		// A flag of a figure replaces the profile's distribution of it.
		if set("ttft") || set("ttft-p99") {
			p.TTFTDist = nil
		}
		if set("itl") || set("itl-jitter") {
			p.ITLDist = nil
		}
		if set("tokens") {
			p.TokensDist = nil
		}
		if set("tokens-per-chunk") {
			p.ChunkDist = nil
		}
		if set("ttft") {
			p.TTFT = o.ttft
			if !set("ttft-p99") && p.TTFTP99 < p.TTFT {
				p.TTFTP99 = p.TTFT
			}
		}
		if set("ttft-p99") {
			p.TTFTP99 = o.ttftP99
		}
		if set("itl") {
			p.ITL = o.itl
		}
		if set("itl-jitter") {
			p.ITLJitter = o.jitter
		}
		if set("tokens") {
			p.Tokens = o.tokens
		}
		if set("tokens-per-chunk") {
			p.TokensPerChunk = o.perChunk
		}
		if set("prefill-per-token") {
			p.PrefillPerToken = o.prefill
		}
		if set("lang") {
			p.Lang = o.lang
		}
		f := &p.Faults
		fault(set("fail-status"), set("fail-rate"), o.failRate, &f.FailRate, func() { f.FailStatus = 0 },
			func() { f.FailStatus = o.failStatus })
		fault(set("stall-first"), set("stall-first-rate"), o.stallFirstRate, &f.StallFirstRate, func() { f.StallFirst = 0 },
			func() { f.StallFirst = o.stallFirst })
		fault(set("stall-at") || set("stall-for"), set("stall-rate"), o.stallRate, &f.StallRate, func() { f.StallAt, f.StallFor = 0, 0 },
			func() {
				if set("stall-at") {
					f.StallAt = o.stallAt
				}
				if set("stall-for") {
					f.StallFor = o.stallFor
				}
			})
		fault(set("cut-at"), set("cut-rate"), o.cutRate, &f.CutRate, func() { f.CutAt = 0 }, func() { f.CutAt = o.cutAt })
		fault(set("error-at"), set("error-rate"), o.errorRate, &f.ErrorRate, func() { f.ErrorAt = 0 }, func() { f.ErrorAt = o.errorAt })
		fault(set("malformed-at"), set("malformed-rate"), o.mfRate, &f.MalformedRate, func() { f.MalformedAt = 0 },
			func() { f.MalformedAt = o.malformAt })
	}
	apply(&base)
	if err := base.Validate(); err != nil {
		return sim.Options{}, usagef("invalid flags: %w", err)
	}
	// A value of 0 for these flags would silently mean "the default".
	for _, n := range []struct {
		name string
		v    int
	}{{"tokens", o.tokens}, {"tokens-per-chunk", o.perChunk}} {
		if set(n.name) && n.v <= 0 {
			return sim.Options{}, usagef("--%s %d: want 1 or more", n.name, n.v)
		}
	}
	if set("fail-status") && (o.failStatus < 400 || o.failStatus > 599) {
		return sim.Options{}, usagef("--fail-status %d: want an HTTP error status (400-599)", o.failStatus)
	}
	for i := range profiles {
		apply(&profiles[i])
		if err := profiles[i].Validate(); err != nil {
			return sim.Options{}, usagef("invalid flags: %w", err)
		}
	}
	return sim.Options{Profile: base, Profiles: profiles, Stamp: o.stamp, Seed: o.seed, MaxConcurrency: o.maxConc}, nil
}

// fault applies the value/rate rule of sim.Faults to one fault: a value
// flag without its rate flag hits every request (rate 0 with a value), a
// rate flag of 0 switches the fault off, another rate applies as given.
func fault(valueSet, rateSet bool, rate float64, dstRate *float64, clear, setValue func()) {
	if valueSet {
		setValue()
	}
	switch {
	case rateSet && rate == 0:
		clear()
		*dstRate = 0
	case rateSet:
		*dstRate = rate
	case valueSet:
		*dstRate = 0
	}
}

// simProfileTable lists the built-in profiles for --help.
func simProfileTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-22s %-8s %-8s %-6s %-6s %-7s %s\n", "name", "ttft", "p99", "itl", "jitter", "out $", "faults")
	for _, p := range sim.Profiles() {
		price := "-"
		if p.OutputPrice > 0 {
			price = fmt.Sprintf("%.2f", p.OutputPrice)
		}
		faults := "-"
		if f := p.Faults; f != (sim.Faults{}) {
			faults = fmt.Sprintf("fail %d at %g, cut at %g", f.FailStatus, f.FailRate, f.CutRate)
		}
		fmt.Fprintf(&b, "  %-22s %-8s %-8s %-6s %-6g %-7s %s\n", p.Name, p.TTFT, p.TTFTP99, p.ITL, p.ITLJitter, price, faults)
	}
	return b.String()
}

// newSimProfilesCmd is `streamgate sim profiles`: the profiles of the sim
// and what makes them.
func newSimProfilesCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: "Sim profiles: list them, or export what a running gateway observed as a profiles file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := e.stdout
			for _, p := range sim.Profiles() {
				fmt.Fprintf(w, "%-22s %s\n", p.Name, p.Source)
			}
			return nil
		},
	}
	cmd.AddCommand(newSimExportCmd(e))
	return cmd
}

// simExportFlags are the flags of `streamgate sim profiles export`.
type simExportFlags struct {
	gateway, out, since string
	usage               usageFlags // config and database: the ledger
}

// maxExportEntries bounds the ledger entries an export reads.
const maxExportEntries = 1_000_000

func newSimExportCmd(e *env) *cobra.Command {
	var f simExportFlags
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a profiles file from what a running gateway observed per route",
		Long: `export reads a running gateway's /metrics (--gateway) and, with --database or
--config, its usage ledger over --since, and writes a profiles file with one
profile per route that served requests, named after the route's upstream model
(provider/model → model), which ` + "`streamgate sim --profiles FILE`" + ` serves:
  ttft              quantile table of the ledger's stream TTFTs (exact), else of the
                    gateway's TTFT histogram
  itl               quantile table of the gateway's inter-token histogram, interpolated
                    between bucket bounds in (log value, normal quantile): exact for a
                    lognormal
  tokens            quantile table of the output tokens of answers (ledger)
  tokens_per_chunk  stream output tokens (ledger) over chunks (histograms)
  hourly            with 50+ stream TTFTs in each UTC hour (ledger): the hour's median
                    over the overall median
  faults            fail_rate at the most frequent status of requests that failed
                    before their stream, cut_rate and error_rate of streams that broke
                    mid-answer (streamgate_requests_total; the ledger's errors split
                    error events from cuts)
Comment lines say what each figure was built from, and the prompt lengths seen.

The loop: observe in production → export → replay offline (sim --profiles) →
bench a new config (strategy, hedge, timeouts) against the real tails.`,
		Example: `  streamgate sim profiles export --gateway http://127.0.0.1:8080 --config streamgate.yaml --since 7d --out prod.yaml
  streamgate sim --profiles prod.yaml --addr 127.0.0.1:8081`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSimExport(cmd.Context(), e, &f, time.Now()) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.gateway, "gateway", "", "the running gateway's base URL (its /metrics is read)")
	fl.StringVar(&f.usage.config, "config", "", "gateway config file whose database: holds the ledger")
	fl.StringVar(&f.usage.database, "database", "", "the ledger's database instead of the config's (sqlite://PATH or postgres://...)")
	fl.StringVar(&f.since, "since", "7d", "ledger window start: a duration back from now (7d, 24h), a date or an RFC 3339 time")
	fl.StringVar(&f.out, "out", "-", "the profiles file to write (- = stdout)")
	return cmd
}

func runSimExport(ctx context.Context, e *env, f *simExportFlags, now time.Time) error {
	if f.gateway == "" {
		return usagef("--gateway: missing (the running gateway's base URL, e.g. http://127.0.0.1:8080)")
	}
	u, err := url.Parse(f.gateway)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--gateway %q: want an http:// or https:// base URL", f.gateway)
	}
	since, err := usage.ParseWhen(f.since, now)
	if err != nil {
		return usagef("--since: %v", err)
	}
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(mctx, http.MethodGet, strings.TrimRight(f.gateway, "/")+"/metrics", nil)
	if err != nil {
		return usagef("--gateway: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("sim profiles export: reading %s/metrics: %w", f.gateway, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sim profiles export: %s/metrics answered %s", f.gateway, resp.Status)
	}
	obs, err := sim.ParseGatewayMetrics(resp.Body)
	if err != nil {
		return fmt.Errorf("sim profiles export: %w", err)
	}
	if len(obs) == 0 {
		return fmt.Errorf("sim profiles export: the gateway at %s has served no requests on any route yet", f.gateway)
	}
	header := []string{
		"streamgate sim profiles, exported from " + f.gateway + " at " + now.UTC().Format(time.RFC3339),
		"Simulated upstreams replaying what the gateway observed per route; serve with: streamgate sim --profiles FILE",
	}
	if f.usage.config != "" || f.usage.database != "" {
		db, err := chooseDatabase(e, f.usage.database, f.usage.config, false)
		if err != nil {
			return err
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		store, err := usage.Open(octx, db.dsn)
		if err != nil {
			return err
		}
		defer store.Close()
		entries, err := store.List(ctx, usage.Filter{Since: since, Until: now, Limit: maxExportEntries})
		if err != nil {
			return fmt.Errorf("sim profiles export: reading the ledger: %w", err)
		}
		for _, en := range entries {
			if o := obs[en.Route]; o != nil {
				o.AddEntry(sim.LedgerEntry{Time: en.Time, Route: en.Route, Stream: en.Stream, Outcome: en.Outcome, Status: en.Status,
					InputTokens: en.InputTokens, OutputTokens: en.OutputTokens, TTFT: en.TTFT, Error: en.Error})
			}
		}
		line := fmt.Sprintf("ledger: %d entries since %s", len(entries), since.UTC().Format(time.RFC3339))
		if len(entries) == maxExportEntries {
			line += fmt.Sprintf(" (the first %d only)", maxExportEntries)
		}
		header = append(header, line)
	} else {
		header = append(header, "no ledger (--database or --config): TTFT from the histogram, no output lengths or tokens per chunk")
	}
	routes := make([]string, 0, len(obs))
	for r := range obs {
		routes = append(routes, r)
	}
	slices.Sort(routes)
	var profiles []sim.Profile
	names := map[string]bool{}
	for _, r := range routes {
		p, notes, err := obs[r].Profile()
		if err != nil {
			header = append(header, "skipped: "+err.Error())
			continue
		}
		if names[p.Name] {
			p.Name = r // two providers of one model: the second goes by its route
		}
		names[p.Name] = true
		header = append(header, "", p.Name+" (route "+r+"):")
		for _, n := range notes {
			header = append(header, "  "+n)
		}
		profiles = append(profiles, p)
	}
	if len(profiles) == 0 {
		return fmt.Errorf("sim profiles export: no route had enough observations:\n%s", strings.Join(header, "\n"))
	}
	var w io.Writer = e.stdout
	if f.out != "-" {
		file, err := os.Create(f.out)
		if err != nil {
			return usagef("--out: %v", err)
		}
		defer file.Close()
		w = file
	}
	if err := sim.WriteProfiles(w, header, profiles, ""); err != nil {
		return fmt.Errorf("sim profiles export: writing %s: %w", f.out, err)
	}
	if c, ok := w.(io.Closer); ok && f.out != "-" {
		if err := c.Close(); err != nil {
			return fmt.Errorf("sim profiles export: writing %s: %w", f.out, err)
		}
	}
	return nil
}
