package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// envOf returns a getenv reading from m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// fieldErrors returns the *FieldErrors joined in err, failing on others.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	var in []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		in = j.Unwrap()
	} else if err != nil {
		in = []error{err}
	}
	out := make([]*FieldError, 0, len(in))
	for _, e := range in {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("error %q (%T) is not a *FieldError", e, e)
		}
		out = append(out, fe)
	}
	return out
}

func TestLoadSpecExample(t *testing.T) {
	env := envOf(map[string]string{
		"OPENAI_API_KEY":     "sk-proj-0123456789abcdef",
		"STREAMGATE_DEV_KEY": "sg-dev-fedcba9876543210",
	})
	cfg, err := Load(filepath.Join("testdata", "spec.yaml"), env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Listen:   "127.0.0.1:8080",
		Database: "sqlite://streamgate.db",
		Timeouts: Timeouts{Connect: Duration(5 * time.Second), FirstToken: Duration(30 * time.Second), Idle: Duration(30 * time.Second), NonStream: Duration(10 * time.Minute), ClientWrite: Duration(30 * time.Second), RequestBody: Duration(time.Minute)}, // spec.yaml: total: 0s
		MaxBody:  10 << 20, MaxDecodingBytes: 16 << 20,
		KeepAlive: Duration(15 * time.Second),
		Responses: Responses{StoreRetention: Duration(720 * time.Hour)},
		Providers: []Provider{
			{Name: "openai", Kind: "openai", BaseURL: "https://api.openai.com/v1", APIKey: "sk-proj-0123456789abcdef"},
			{Name: "local-sim", Kind: "sim"},
		},
		Keys: []Key{{Name: "dev", Key: "sg-dev-fedcba9876543210"}},
		Models: []Model{{
			Name:          "gpt-4.1",
			Routes:        []Route{{Provider: "openai", Model: "gpt-4.1"}, {Provider: "local-sim", Model: "sim-fast"}},
			Price:         Price{Input: 2, Output: 8, CachedInput: ptr(0.5), CacheWrite: ptr(2.5)},
			Strategy:      "fallback",
			Retries:       2,
			Hedge:         &Hedge{After: "500ms", Budget: 0.1},
			ContextWindow: 1047576,
			ContextPolicy: "reject",
			Smoothing:     &Smoothing{MaxDelay: Duration(50 * time.Millisecond)},
		}},
	}
	want.idx = cfg.idx
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got\n%#v\nwant\n%#v", *cfg, *want)
	}
	d, pct, err := cfg.Models[0].Hedge.Delay()
	if err != nil || d != 500*time.Millisecond || pct != 0 {
		t.Errorf("hedge Delay: got %v, %v, %v; want 500ms, 0, nil", d, pct, err)
	}
}

func TestLoadSpecExampleUnsetKey(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "spec.yaml"), envOf(nil))
	want := "testdata/spec.yaml:6: providers[0].api_key: ${OPENAI_API_KEY} is unset or empty (write ${OPENAI_API_KEY:-} if this provider needs no key)\n" +
		"testdata/spec.yaml:9: keys[0].key: required (${STREAMGATE_DEV_KEY} is unset or empty)"
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v, want %q", err, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("got %v, want a not-exist error naming nope.yaml", err)
	}
}

func TestEnvExpansion(t *testing.T) {
	secret := `sk-a#b: 'c" {x}, [y] ${NOT_AGAIN}`
	env := envOf(map[string]string{
		"SG_PORT":    "9090",
		"SG_IDLE":    "45s",
		"SG_BASE":    "http://127.0.0.1:8081",
		"SG_SECRET":  secret,
		"SG_KEY":     "sg-0123456789",
		"SG_RETRIES": "3",
		"NOT_AGAIN":  "expanded twice",
	})
	cfg, err := Load(filepath.Join("testdata", "env.yaml"), env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m := cfg.Models[0]
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"listen (default + plain)", cfg.Listen, "127.0.0.1:9090"},
		{"connect default", cfg.Timeouts.Connect.D(), 5 * time.Second},
		{"idle quoted", cfg.Timeouts.Idle.D(), 45 * time.Second},
		{"base_url inside quotes", cfg.Providers[0].BaseURL, "http://127.0.0.1:8081/v1"},
		{"secret with YAML syntax kept verbatim", cfg.Providers[0].APIKey, secret},
		{"block value", cfg.Keys[0].Key, "sg-0123456789"},
		{"escaped $${", m.Routes[0].Model, "literal ${NOT_EXPANDED}"},
		{"integer typed after expansion", m.Retries, 3},
		{"float default", m.Price.Input, 0.5},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestHTTP2Field(t *testing.T) {
	const doc = "providers:\n  - {name: vllm, kind: openai, base_url: \"http://127.0.0.1:8000/v1\", http2: true}\n  - {name: sim, kind: sim}\nmodels: [{name: m, routes: [{provider: vllm, model: m}]}]\n"
	cfg, err := Parse("t.yaml", []byte(doc), envOf(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := []bool{cfg.Providers[0].HTTP2, cfg.Providers[1].HTTP2}; !reflect.DeepEqual(got, []bool{true, false}) {
		t.Errorf("got http2 %v, want [true false] (set, and off by default)", got)
	}
}

func TestStoreRetention(t *testing.T) {
	const base = "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n"
	for _, c := range []struct {
		doc  string
		want time.Duration
	}{
		{base, 720 * time.Hour},
		{base + "responses: {store_retention: 48h}\n", 48 * time.Hour},
		{base + "responses: {store_retention: 0s}\n", 720 * time.Hour},
	} {
		cfg, err := Parse("t.yaml", []byte(c.doc), envOf(nil))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got := cfg.Responses.StoreRetention.D(); got != c.want {
			t.Errorf("%q: store_retention %v, want %v", c.doc, got, c.want)
		}
	}
}

func TestBuiltinTools(t *testing.T) {
	const base = "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n"
	for doc, want := range map[string]string{base: "", base + "responses: {builtin_tools: reject}\n": BuiltinReject, base + "responses: {builtin_tools: drop}\n": BuiltinDrop} {
		cfg, err := Parse("t.yaml", []byte(doc), envOf(nil))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got := cfg.Responses.BuiltinTools; got != want {
			t.Errorf("%q: builtin_tools %q, want %q", doc, got, want)
		}
	}
	_, err := Parse("t.yaml", []byte(base+"responses: {builtin_tools: keep, store_retention: 1ms}\n"), envOf(nil))
	if err == nil || !strings.Contains(err.Error(), `responses.builtin_tools: must be drop or reject, got "keep"`) || !strings.Contains(err.Error(), "responses.store_retention") {
		t.Errorf("builtin_tools: keep: got %v, want both problems named", err)
	}
}

func TestParseShapeErrors(t *testing.T) {
	const base = "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // each a full error line
	}{
		{
			name: "duration without unit",
			yaml: base + "timeouts:\n  connect: 5\n",
			want: []string{`t.yaml:4: timeouts.connect: 5 has no unit; write a duration such as "5s" or "250ms"`},
		},
		{
			name: "duration not parseable",
			yaml: base + "timeouts: {idle: 5 seconds}\n",
			want: []string{`t.yaml:3: timeouts.idle: "5 seconds" is not a duration (want e.g. "5s", "250ms", "0s")`},
		},
		{
			name: "duration as float",
			yaml: base + "timeouts: {total: 1.5}\n",
			want: []string{`t.yaml:3: timeouts.total: 1.5 has no unit; write a duration such as "5s" or "250ms"`},
		},
		{
			name: "unknown top-level field",
			yaml: base + "listn: 127.0.0.1:1\n",
			want: []string{`t.yaml:3: listn: unknown field "listn" (known fields: admin_key, dashboard, database, keepalive, keys, limits, listen, max_body_bytes, max_decoding_bytes, mcp, models, otel, providers, redis, replica, responses, teams, timeouts, trusted_proxies)`},
		},
		{
			name: "responses block: unknown field",
			yaml: base + "responses: {store_retension: 48h}\n",
			want: []string{`t.yaml:3: responses.store_retension: unknown field "store_retension" (known fields: builtin_tools, store_retention, websocket)`},
		},
		{
			name: "responses.store_retention negative",
			yaml: base + "responses: {store_retention: -1h}\n",
			want: []string{`t.yaml:3: responses.store_retention: must be at least 1s (0s: the default, 720h), got -1h0m0s`},
		},
		{
			name: "dashboard block: unknown field",
			yaml: base + "dashboard: {opn: true}\n",
			want: []string{`t.yaml:3: dashboard.opn: unknown field "opn" (known fields: open)`},
		},
		{
			name: "dashboard.open given text",
			yaml: base + "dashboard: {open: maybe}\n",
			want: []string{`t.yaml:3: dashboard.open: want true or false, got "maybe"`},
		},
		{
			name: "integer field given text",
			yaml: "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, retries: two, routes: [{provider: sim, model: m}]}]\n",
			want: []string{`t.yaml:2: models[0].retries: want an integer, got "two"`},
		},
		{
			name: "float field given text",
			yaml: "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, price: {input: cheap}, routes: [{provider: sim, model: m}]}]\n",
			want: []string{`t.yaml:2: models[0].price.input: want a number, got "cheap"`},
		},
		{
			name: "bool field given text",
			yaml: "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, continue_on_cut: maybe, routes: [{provider: sim, model: m}]}]\n",
			want: []string{`t.yaml:2: models[0].continue_on_cut: want true or false, got "maybe"`},
		},
		{
			name: "http2 with an https base_url",
			yaml: "providers:\n  - {name: o, kind: openai, base_url: \"https://api.openai.com/v1\", http2: true}\nmodels: [{name: m, routes: [{provider: o, model: m}]}]\n",
			want: []string{`t.yaml:2: providers[0].http2: only for http:// base URLs (h2c); https negotiates HTTP/2 by ALPN already`},
		},
		{
			name: "list expected",
			yaml: "providers: {name: sim, kind: sim}\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n",
			want: []string{`t.yaml:1: providers: want a list, got a mapping`},
		},
		{
			name: "mapping expected",
			yaml: base + "timeouts: 5s\n",
			want: []string{`t.yaml:3: timeouts: want a mapping of fields, got a single value`},
		},
		{
			name: "string expected",
			yaml: base + "listen: [a, b]\n",
			want: []string{`t.yaml:3: listen: want a single value, got a list`},
		},
		{
			name: "field set twice",
			yaml: base + "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n",
			want: []string{`t.yaml:4: listen: set twice (first on line 3)`},
		},
		{
			name: "several shape problems together",
			yaml: "providers:\n  - {name: sim, kind: sim, colour: blue}\nmodels:\n  - {name: m, retries: x, routes: [{provider: sim, model: m, wieght: 2}]}\ntimeouts: {connect: 3}\n",
			want: []string{
				`t.yaml:2: providers[0].colour: unknown field "colour" (known fields: api_key, api_keys, api_version, aws, base_url, ca_file, continuation, credentials_file, dialect, entra, health_check, http2, kind, name, project, region, responses)`,
				`t.yaml:4: models[0].retries: want an integer, got "x"`,
				`t.yaml:4: models[0].routes[0].wieght: unknown field "wieght" (known fields: model, provider, weight)`,
				`t.yaml:5: timeouts.connect: 3 has no unit; write a duration such as "5s" or "250ms"`,
			},
		},
		{
			name: "value from environment of the wrong type is not echoed",
			yaml: base + "timeouts: {connect: ${SECRETISH}}\n",
			env:  map[string]string{"SECRETISH": "sk-hunter2hunter2"},
			want: []string{`t.yaml:3: timeouts.connect: want a duration with a unit such as "5s", but the value from ${SECRETISH} is not`},
		},
		{
			name: "syntax error",
			yaml: "listen: [\n",
			want: []string{`t.yaml:1: did not find expected node content`},
		},
		{
			name: "unterminated reference",
			yaml: base + "listen: ${HOST\n",
			want: []string{`t.yaml:3: unterminated ${ (want ${VAR} or ${VAR:-default})`},
		},
		{
			name: "invalid reference",
			yaml: base + "listen: ${1HOST}\n",
			want: []string{`t.yaml:3: invalid variable reference ${1HOST} (want ${VAR} or ${VAR:-default})`},
		},
		{
			name: "two documents",
			yaml: base + "---\nlisten: 127.0.0.1:1\n",
			want: []string{`t.yaml:3: more than one YAML document`},
		},
		{
			name: "not a mapping",
			yaml: "hello\n",
			want: []string{`t.yaml:1: want a mapping of fields, got a single value`},
		},
		{
			name: "comments only",
			yaml: "# nothing yet\n---\n",
			want: []string{`t.yaml:1: providers: at least one provider is required`, `t.yaml:1: models: at least one model is required`},
		},
		{
			name: "empty file",
			yaml: "",
			want: []string{`t.yaml:1: providers: at least one provider is required`, `t.yaml:1: models: at least one model is required`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml), envOf(tt.env))
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if len(fieldErrors(t, err)) != len(tt.want) {
				t.Errorf("got %d FieldErrors, want %d", len(fieldErrors(t, err)), len(tt.want))
			}
		})
	}
}

func TestUnknownFieldFile(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "unknown_field.yaml"), nil)
	want := []string{
		`testdata/unknown_field.yaml:3: providers[0].baseurl: unknown field "baseurl" (known fields: api_key, api_keys, api_version, aws, base_url, ca_file, continuation, credentials_file, dialect, entra, health_check, http2, kind, name, project, region, responses)`,
		`testdata/unknown_field.yaml:7: models[0].prices: unknown field "prices" (known fields: affinity, affinity_epsilon, aliases, context_policy, context_window, continue_on_cut, hedge, max_output_tokens, name, price, retries, routes, smoothing, strategy)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got %v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

func TestManyProblems(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "many_problems.yaml"), nil)
	if err == nil {
		t.Fatal("got no error, want many")
	}
	want := []string{
		`testdata/many_problems.yaml:2: listen: "localhost" is not HOST:PORT`,
		`testdata/many_problems.yaml:3: database: unsupported scheme "mysql" (want sqlite:// or postgres://)`,
		`testdata/many_problems.yaml:4: timeouts.connect: must not be negative, got -1s`,
		`testdata/many_problems.yaml:6: providers[0].base_url: api.openai.com/v1 is not an absolute http(s) URL`,
		`testdata/many_problems.yaml:7: providers[1].name: duplicate provider name "openai" (first at providers[0])`,
		`testdata/many_problems.yaml:7: providers[1].kind: unknown kind "opnai" (want one of openai, anthropic, gemini, sim, bedrock, vertex, azure)`,
		`testdata/many_problems.yaml:10: keys[1].key: same secret as keys[0]; each key needs its own`,
		`testdata/many_problems.yaml:10: keys[1].models[0]: unknown model "gpt-5"`,
		`testdata/many_problems.yaml:14: models[0].price.input: must be a non-negative number of USD per 1M tokens, got -1`,
		`testdata/many_problems.yaml:15: models[0].strategy: unknown strategy "random" (want one of fallback, weighted, least-inflight, lowest-latency)`,
		`testdata/many_problems.yaml:16: models[0].retries: must not be negative, got -1`,
		`testdata/many_problems.yaml:17: models[0].hedge.after: "soon" is neither a positive duration (500ms) nor a percentile (p95)`,
		`testdata/many_problems.yaml:17: models[0].hedge.budget: must be between 0 and 1, got 2`,
		`testdata/many_problems.yaml:18: models[0].context_policy: unknown policy "drop" (want one of reject, trim)`,
		`testdata/many_problems.yaml:19: models[1].name: duplicate model name "gpt-4.1" (first at models[0])`,
		`testdata/many_problems.yaml:20: models[1].routes: at least one route is required`,
		`testdata/many_problems.yaml:22: models[2].routes[0].provider: unknown provider "anthropic" (providers: "openai")`,
		`testdata/many_problems.yaml:22: models[2].routes[0].model: required (the model name the provider expects)`,
	}
	got := strings.Split(err.Error(), "\n")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDefaultsAndOverrides(t *testing.T) {
	const base = "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n"
	tests := []struct {
		name  string
		yaml  string
		env   map[string]string
		check func(c *Config) (got, want any)
	}{
		{"listen default", base, nil, func(c *Config) (any, any) { return c.Listen, "127.0.0.1:8080" }},
		{"database default", base, nil, func(c *Config) (any, any) { return c.Database, "sqlite://streamgate.db" }},
		{"max body default", base, nil, func(c *Config) (any, any) { return c.MaxBody, int64(10 << 20) }},
		{"max body 0 means default", base + "max_body_bytes: 0\n", nil, func(c *Config) (any, any) { return c.MaxBody, int64(10 << 20) }},
		{"max decoding default", base, nil, func(c *Config) (any, any) { return c.MaxDecodingBytes, int64(16 << 20) }},
		{"max decoding follows a larger max body", base + "max_body_bytes: 100000000\n", nil, func(c *Config) (any, any) { return c.MaxDecodingBytes, int64(100000000) }},
		{"strategy default", base, nil, func(c *Config) (any, any) { return c.Models[0].Strategy, "fallback" }},
		{"context policy default", base, nil, func(c *Config) (any, any) { return c.Models[0].ContextPolicy, "reject" }},
		{"timeouts default", base, nil, func(c *Config) (any, any) {
			return c.Timeouts, Timeouts{Connect: Duration(5 * time.Second), FirstToken: Duration(30 * time.Second), Idle: Duration(30 * time.Second), Total: Duration(30 * time.Minute), NonStream: Duration(10 * time.Minute), ClientWrite: Duration(30 * time.Second), RequestBody: Duration(time.Minute)}
		}},
		{"one timeout set keeps the others", base + "timeouts: {first_token: 2s}\n", nil, func(c *Config) (any, any) {
			return c.Timeouts, Timeouts{Connect: Duration(5 * time.Second), FirstToken: Duration(2 * time.Second), Idle: Duration(30 * time.Second), Total: Duration(30 * time.Minute), NonStream: Duration(10 * time.Minute), ClientWrite: Duration(30 * time.Second), RequestBody: Duration(time.Minute)}
		}},
		{"explicit 0s turns a timeout off", base + "timeouts: {idle: 0s}\n", nil, func(c *Config) (any, any) { return c.Timeouts.Idle.D(), time.Duration(0) }},
		{"explicit 0s turns total off", base + "timeouts: {total: 0s}\n", nil, func(c *Config) (any, any) { return c.Timeouts.Total.D(), time.Duration(0) }},
		{"null timeout keeps default", base + "timeouts: {connect: }\n", nil, func(c *Config) (any, any) { return c.Timeouts.Connect.D(), 5 * time.Second }},
		{"env overrides file listen", base + "listen: 127.0.0.1:1\n", map[string]string{EnvListen: "0.0.0.0:9000"}, func(c *Config) (any, any) { return c.Listen, "0.0.0.0:9000" }},
		{"env overrides database", base, map[string]string{EnvDatabase: "postgres://u:pw@db/sg"}, func(c *Config) (any, any) { return c.Database, "postgres://u:pw@db/sg" }},
		{"postgresql scheme", base + "database: postgresql://db/sg\n", nil, func(c *Config) (any, any) { return c.Database, "postgresql://db/sg" }},
		{"percentile hedge", "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, hedge: {after: p95, budget: 0.05}, routes: [{provider: sim, model: m}]}]\n", nil,
			func(c *Config) (any, any) {
				_, pct, err := c.Models[0].Hedge.Delay()
				return fmt.Sprint(pct, err), "95 <nil>"
			}},
		{"yaml anchors and merge keys", "providers: [{name: sim, kind: sim}]\nbase: &b {routes: [{provider: sim, model: m}], retries: 1}\n", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte(tt.yaml), envOf(tt.env))
			if tt.check == nil {
				if err == nil || !strings.Contains(err.Error(), `base: unknown field "base"`) {
					t.Fatalf("got %v, want unknown field base", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got, want := tt.check(cfg); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestMergeKey(t *testing.T) {
	const y = `
providers: [{name: sim, kind: sim}]
models:
  - &first {name: a, routes: [{provider: sim, model: a}], retries: 1, price: {input: 1, output: 2}}
  - <<: *first
    name: b
  - {<<: *first, name: c, wrong: 1}
`
	_, err := Parse("t.yaml", []byte(y), nil)
	want := `t.yaml:7: models[2].wrong: unknown field "wrong"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q...", err, want)
	}
	cfg, err := Parse("t.yaml", []byte(strings.Replace(y, ", wrong: 1", "", 1)), nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := cfg.Models[1]; got.Name != "b" || got.Retries != 1 || got.Price.Output != 2 || got.Routes[0].Model != "a" {
		t.Errorf("merged model: got %+v, want b with a's fields", got)
	}
}

func TestEnvOverrideNamedInErrors(t *testing.T) {
	const y = "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n"
	_, err := Parse("t.yaml", []byte(y), envOf(map[string]string{EnvListen: "nowhere", EnvDatabase: "postgres://u:hunter2pw@db/x%zz"}))
	want := "listen: \"nowhere\" is not HOST:PORT (set by STREAMGATE_LISTEN)\n" +
		"database: not a valid postgres URL (set by STREAMGATE_DATABASE)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want\n%s", err, want)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    time.Duration
		wantErr string
	}{
		{"seconds", `d: 5s`, 5 * time.Second, ""},
		{"milliseconds", `d: 250ms`, 250 * time.Millisecond, ""},
		{"zero", `d: 0s`, 0, ""},
		{"quoted", `d: "1m30s"`, 90 * time.Second, ""},
		{"plain integer", `d: 5`, 0, `line 1: 5 has no unit; write a duration such as "5s" or "250ms"`},
		{"plain zero", `d: 0`, 0, `line 1: 0 has no unit`},
		{"words", `d: soon`, 0, `line 1: "soon" is not a duration`},
		{"list", "d: [1s]", 0, `line 1: want a duration such as "5s", got a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v struct {
				D Duration `yaml:"d"`
			}
			err := yaml.Unmarshal([]byte(tt.yaml), &v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if v.D.D() != tt.want {
				t.Errorf("got %v, want %v", v.D.D(), tt.want)
			}
			out, err := yaml.Marshal(v)
			if err != nil || string(out) != "d: "+tt.want.String()+"\n" {
				t.Errorf("Marshal: got %q, %v; want %q", out, err, "d: "+tt.want.String()+"\n")
			}
		})
	}
}

// TestRoundTrip checks that a marshalled config (unredacted) loads back equal.
func TestRoundTrip(t *testing.T) {
	cfg, _, err := Default(envOf(map[string]string{EnvDevKey: "sg-dev-roundtrip0000"}))
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	cfg.Models[0].Hedge = &Hedge{After: "p99", Budget: 0.1}
	cfg.Timeouts.Total = Duration(90 * time.Second)
	text, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	back, err := Parse("round.yaml", text, nil)
	if err != nil {
		t.Fatalf("Parse of marshalled config: %v\n%s", err, text)
	}
	back.idx = cfg.idx
	cfg.Keys[0].Models = []string{} // written as "models: []"
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip changed the config:\ngot  %#v\nwant %#v", back, cfg)
	}
}

var devKey = regexp.MustCompile(`^sg-dev-[0-9a-f]{32}$`)

func TestDefault(t *testing.T) {
	cfg, gen, err := Default(nil)
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	if !devKey.MatchString(gen) {
		t.Errorf("generated key: got %q, want sg-dev-<32 hex>", gen)
	}
	if len(cfg.Keys) != 1 || cfg.Keys[0].Key != gen || cfg.Keys[0].Name != "dev" {
		t.Errorf("keys: got %v, want one key named dev with the generated secret", cfg.Keys)
	}
	_, gen2, _ := Default(nil)
	if gen2 == gen {
		t.Errorf("two generated keys are equal: %q", gen)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if got, want := cfg.Providers, []Provider{{Name: "sim", Kind: "sim"}, {Name: "sim-anthropic", Kind: "sim", Dialect: "anthropic"},
		{Name: "sim-gemini", Kind: "sim", Dialect: "gemini"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("providers: got %v, want %v", got, want)
	}
	if cfg.Database != "sqlite://streamgate.db" || cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("database, listen: got %q, %q; want sqlite://streamgate.db, 127.0.0.1:8080", cfg.Database, cfg.Listen)
	}
	// The published prices, prompt cache reads and writes included: no
	// priced model of the default is billed at the input price for its
	// cache reads (serve would warn of it at every start).
	wantModels := []struct {
		name   string
		price  Price
		routes []Route
	}{
		{"sim-gpt-4.1", Price{Input: 2.00, Output: 8.00, CachedInput: ptr(0.50)}, nil},
		{"sim-claude-sonnet-4.5", Price{Input: 3.00, Output: 15.00, CachedInput: ptr(0.30), CacheWrite: ptr(3.75)}, []Route{{Provider: "sim-anthropic", Model: "sim-claude-sonnet-4.5"}}},
		{"sim-gemini-2.5-flash", Price{Input: 0.30, Output: 2.50, CachedInput: ptr(0.03)}, []Route{{Provider: "sim-gemini", Model: "sim-gemini-2.5-flash"}}},
		{"sim-deepseek-v3.2", Price{Input: 0.28, Output: 0.42, CachedInput: ptr(0.028)}, nil},
		{"sim-fast", Price{}, nil},
		{"sim-fallback", Price{}, []Route{{Provider: "sim", Model: "sim-flaky"}, {Provider: "sim", Model: "sim-fast"}}},
	}
	if len(cfg.Models) != len(wantModels) {
		t.Fatalf("models: got %d, want %d", len(cfg.Models), len(wantModels))
	}
	for i, w := range wantModels {
		t.Run(w.name, func(t *testing.T) {
			m := cfg.Models[i]
			routes := w.routes
			if routes == nil {
				routes = []Route{{Provider: "sim", Model: w.name}}
			}
			if m.Name != w.name || !reflect.DeepEqual(m.Price, w.price) || !reflect.DeepEqual(m.Routes, routes) {
				t.Errorf("got %s %+v %+v, want %s %+v %+v", m.Name, m.Price, m.Routes, w.name, w.price, routes)
			}
			if m.Price.CacheUnpriced() {
				t.Errorf("model %q: priced without cache prices", m.Name)
			}
			if !strings.HasPrefix(m.Name, "sim-") {
				t.Errorf("model %q: name does not say it is simulated", m.Name)
			}
		})
	}
}

func TestDefaultFromEnv(t *testing.T) {
	cfg, gen, err := Default(envOf(map[string]string{EnvDevKey: "sg-mine-0123456789", EnvListen: "127.0.0.1:0"}))
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	if gen != "" || cfg.Keys[0].Key != "sg-mine-0123456789" || cfg.Listen != "127.0.0.1:0" {
		t.Errorf("got generated %q, key %q, listen %q; want \"\", sg-mine-0123456789, 127.0.0.1:0", gen, Redact(cfg.Keys[0].Key), cfg.Listen)
	}
	if got := DefaultYAML(); !strings.Contains(string(got), "sim-fallback") {
		t.Errorf("DefaultYAML: got %d bytes without sim-fallback", len(got))
	}
}

// An unknown field does not hide the file's other problems.
func TestUnknownFieldWithInvalidValues(t *testing.T) {
	data := []byte(`listen: 127.0.0.1:99999
providers:
  - {name: sim, kind: sim}
models:
  - name: m
    routes: [{provider: nope, model: x}]
    bogus: 1
`)
	_, err := Parse("x.yaml", data, nil)
	want := []string{
		`x.yaml:7: models[0].bogus: unknown field "bogus"`,
		`x.yaml:1: listen: "127.0.0.1:99999" has an invalid port`,
		`x.yaml:6: models[0].routes[0].provider: unknown provider "nope"`,
	}
	if err == nil {
		t.Fatal("got nil error, want three problems")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("got %v\nwant it to contain %q", err, w)
		}
	}
}

// A bad duration (a problem of the file's shape) does not hide the problems
// Validate finds, and every problem is listed in the order of its line.
func TestAllProblemsInLineOrder(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "hidden_problems.yaml"), nil)
	want := []string{
		`testdata/hidden_problems.yaml:5: providers[1].kind: unknown kind "opnai" (want one of openai, anthropic, gemini, sim, bedrock, vertex, azure)`,
		`testdata/hidden_problems.yaml:8: models[0].routes[0].provider: unknown provider "openia" (providers: "openai", "local")`,
		`testdata/hidden_problems.yaml:10: timeouts.first_token: "30 seconds" is not a duration (want e.g. "5s", "250ms", "0s")`,
	}
	if err == nil {
		t.Fatalf("got no error, want\n%s", strings.Join(want, "\n"))
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(fieldErrors(t, err)); n != len(want) {
		t.Errorf("got %d FieldErrors, want %d", n, len(want))
	}
}

// A shape problem drops the value it is about, so Validate does not report
// that value again, nor a reference to a list that is not a list.
func TestShapeProblemsDoNotCascade(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "key secret of the wrong shape",
			yaml: "providers: [{name: sim, kind: sim}]\nkeys: [{name: a, key: [x]}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n",
			want: []string{`t.yaml:2: keys[0].key: want a single value, got a list`},
		},
		{
			name: "routes of the wrong shape",
			yaml: "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: {provider: sim}}]\n",
			want: []string{`t.yaml:2: models[0].routes: want a list, got a mapping`},
		},
		{
			name: "models of the wrong shape hide unknown-model references",
			yaml: "providers: [{name: sim, kind: sim}]\nkeys: [{name: a, key: sg-0123456789, models: [m]}]\nmodels: m\n",
			want: []string{`t.yaml:3: models: want a list, got a single value`},
		},
		{
			name: "field set twice and a bad merge do not stop the rest",
			yaml: "providers: [{name: sim, kind: sim, kind: openai}]\nmodels: [{<<: 1, name: m, routes: [{provider: nope, model: m}]}]\n",
			want: []string{
				`t.yaml:1: providers[0].kind: set twice (first on line 1)`,
				`t.yaml:2: models[0]: merge key << wants a mapping, got a single value`,
				`t.yaml:2: models[0].routes[0].provider: unknown provider "nope" (providers: "sim")`,
			},
		},
		{
			name: "invalid reference and validation problems together",
			yaml: "listen: ${1HOST}\nproviders: [{name: sim, kind: simm}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n",
			want: []string{
				`t.yaml:1: invalid variable reference ${1HOST} (want ${VAR} or ${VAR:-default})`,
				`t.yaml:2: providers[0].kind: unknown kind "simm" (want one of openai, anthropic, gemini, sim, bedrock, vertex, azure)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml), nil)
			if err == nil {
				t.Fatalf("got no error, want\n%s", strings.Join(tt.want, "\n"))
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A provider api_key written as ${VAR} needs VAR, like a gateway key;
// ${VAR:-} says the key is optional.
func TestProviderKeyFromUnsetVariable(t *testing.T) {
	const models = "models: [{name: m, routes: [{provider: up, model: m}]}]\n"
	tests := []struct {
		name    string
		apiKey  string
		env     map[string]string
		wantErr string
	}{
		{"unset", "${UP_KEY}", nil, `t.yaml:2: providers[0].api_key: ${UP_KEY} is unset or empty (write ${UP_KEY:-} if this provider needs no key)`},
		{"empty", "${UP_KEY}", map[string]string{"UP_KEY": ""}, `t.yaml:2: providers[0].api_key: ${UP_KEY} is unset or empty`},
		{"quoted with a prefix", `"Bearer-${UP_KEY}"`, nil, `t.yaml:2: providers[0].api_key: ${UP_KEY} is unset or empty`},
		{"set", "${UP_KEY}", map[string]string{"UP_KEY": "sk-0123456789"}, ""},
		{"optional", "${UP_KEY:-}", nil, ""},
		{"no key at all", `""`, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "providers:\n  - {name: up, kind: openai, base_url: \"http://127.0.0.1:8000/v1\", api_key: " + tt.apiKey + "}\n" + models
			_, err := Parse("t.yaml", []byte(doc), envOf(tt.env))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n")):
				t.Errorf("got %v, want one line starting %q", err, tt.wantErr)
			}
		})
	}
}

// LoadWithoutSecrets reads a config whose key variables are unset, as
// serve would validate it otherwise; Load refuses the same file.
func TestLoadWithoutSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	os.WriteFile(path, []byte(`providers: [{name: up, kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: "${UP_KEY}"}]
keys: [{name: a, key: "${A_KEY}"}, {name: b, key: "${B_KEY}"}]
models: [{name: "${M:-m}", routes: [{provider: up, model: x}], price: {input: 1, output: 2}}]
`), 0o600)
	if _, err := Load(path, nil); err == nil {
		t.Fatal("Load: got no error, want the unset keys reported")
	}
	cfg, err := LoadWithoutSecrets(path, nil)
	if err != nil {
		t.Fatalf("LoadWithoutSecrets: %v", err)
	}
	if m, ok := cfg.Model("m"); !ok || m.Price != (Price{Input: 1, Output: 2}) {
		t.Errorf("model m: got %+v, %v; want its price", m, ok)
	}
	os.WriteFile(path, []byte(`providers: [{name: up, kind: openai, base_url: "http://127.0.0.1:9/v1"}]
models: [{name: m, routes: [{provider: upp, model: x}]}]
`), 0o600)
	if _, err := LoadWithoutSecrets(path, nil); err == nil || !strings.Contains(err.Error(), `unknown provider "upp"`) {
		t.Errorf("other problems: got %v, want them reported", err)
	}
}

// The dashboard is open only when the config says so; the embedded default
// does not.
func TestDashboardOpen(t *testing.T) {
	const base = "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n"
	for yaml, want := range map[string]bool{"": false, "dashboard: {}\n": false, "dashboard: {open: false}\n": false, "dashboard: {open: true}\n": true} {
		cfg, err := Parse("t.yaml", []byte(base+yaml), nil)
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if cfg.Dashboard.Open != want {
			t.Errorf("%q: got open %v, want %v", yaml, cfg.Dashboard.Open, want)
		}
	}
	cfg, _, err := Default(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dashboard.Open {
		t.Error("the embedded default opens the dashboard without a credential")
	}
}
