package config

import (
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty stays empty", "", ""},
		{"short hidden entirely", "abc1234", "(redacted)"},
		{"8 chars show 2", "abcd1234", "ab…(redacted)"},
		{"openai style", "sk-abcdefghijklmnopqrstuvwxyz", "sk-a…(redacted)"},
		{"dev key", "sg-dev-0123456789abcdef0123456789abcdef", "sg-d…(redacted)"},
		{"multi-byte kept whole", "키키키키키키키키키키키키키키키키", "키키키키…(redacted)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// Secrets used below; none may appear in any output.
const (
	apiSecret = "sk-proj-TOPSECRET-api-0123456789"
	keySecret = "sg-TOPSECRET-key-0123456789"
	dbSecret  = "TOPSECRETdbpassword"
)

func secretConfig(t *testing.T) *Config {
	t.Helper()
	y := `
database: postgres://sg:` + dbSecret + `@db:5432/sg
providers:
  - {name: openai, kind: openai, base_url: "https://u:` + dbSecret + `@api.openai.com/v1", api_key: ${API}}
keys:
  - {name: dev, key: ` + keySecret + `}
models:
  - {name: m, routes: [{provider: openai, model: m}]}
`
	cfg, err := Parse("s.yaml", []byte(y), envOf(map[string]string{"API": apiSecret}))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{apiSecret, keySecret, dbSecret, "TOPSECRET"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s contains secret %q:\n%s", what, secret, s)
		}
	}
}

func TestRedactedOutputs(t *testing.T) {
	cfg := secretConfig(t)
	r := cfg.Redacted()
	if r.Providers[0].APIKey != "sk-p…(redacted)" || r.Keys[0].Key != "sg-T…(redacted)" {
		t.Errorf("Redacted: got api_key %q, key %q; want sk-p…(redacted), sg-T…(redacted)", r.Providers[0].APIKey, r.Keys[0].Key)
	}
	if want := "postgres://sg:xxxxx@db:5432/sg"; r.Database != want {
		t.Errorf("Redacted database: got %q, want %q", r.Database, want)
	}
	if cfg.Providers[0].APIKey != apiSecret || cfg.Keys[0].Key != keySecret {
		t.Error("Redacted changed the original config")
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", cfg, "provider", cfg.Providers[0], "key", cfg.Keys[0])
	outputs := map[string]string{
		"String":         cfg.String(),
		"%v":             fmt.Sprintf("%v", cfg),
		"%+v":            fmt.Sprintf("%+v", *cfg),
		"Redacted %#v":   fmt.Sprintf("%#v", r),
		"provider %v":    fmt.Sprintf("%v", cfg.Providers[0]),
		"provider %#v":   fmt.Sprintf("%#v", cfg.Providers[0]),
		"providers %+v":  fmt.Sprintf("%+v", cfg.Providers),
		"key %v":         fmt.Sprintf("%v", cfg.Keys[0]),
		"key %#v":        fmt.Sprintf("%#v", cfg.Keys),
		"slog":           logged.String(),
		"Redacted model": fmt.Sprint(r.Models),
	}
	for what, s := range outputs {
		assertNoSecret(t, what, s)
	}
	if !strings.Contains(cfg.String(), "api_key: sk-p…(redacted)") {
		t.Errorf("String: got\n%s\nwant the redacted api key in it", cfg.String())
	}
}

func TestSecretsNotInErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
	}{
		{"many problems file", "", nil},
		{"duplicate key secrets", `
providers: [{name: sim, kind: sim}]
keys: [{name: a, key: ` + keySecret + `}, {name: b, key: ` + keySecret + `}]
models: [{name: m, routes: [{provider: sim, model: m}]}]`, nil},
		{"secret from env in a typed field", `
providers: [{name: sim, kind: sim}]
models: [{name: m, retries: ${API}, price: {input: ${API}}, routes: [{provider: sim, model: m}]}]
timeouts: {idle: ${API}}`, map[string]string{"API": apiSecret}},
		{"secret from env in a bool", `
providers: [{name: sim, kind: sim}]
models: [{name: m, continue_on_cut: ${API}, routes: [{provider: sim, model: m}]}]`, map[string]string{"API": apiSecret}},
		{"database password in a bad URL", `
database: postgres://u:` + dbSecret + `@db:bad port/x
providers: [{name: sim, kind: sim}]
models: [{name: m, routes: [{provider: sim, model: m}]}]`, nil},
		{"database password with unknown scheme", `
database: mysql://u:` + dbSecret + `@db/x
providers: [{name: sim, kind: sim}]
models: [{name: m, routes: [{provider: sim, model: m}]}]`, nil},
		{"database without scheme", `
database: ` + dbSecret + `
providers: [{name: sim, kind: sim}]
models: [{name: m, routes: [{provider: sim, model: m}]}]`, nil},
		{"base_url with password, invalid", `
providers: [{name: o, kind: openai, base_url: "ftp://u:` + dbSecret + `@host/v1", api_key: ` + apiSecret + `}]
models: [{name: m, routes: [{provider: o, model: m}]}]`, nil},
		{"secret in a misplaced key", `
providers: [{name: sim, kind: sim, api_key: ` + apiSecret + `, kindd: x}]
models: [{name: m, routes: [{provider: sim, model: m}]}]`, nil},
		{"database from env", `
providers: [{name: sim, kind: sim}]
models: [{name: m, routes: [{provider: sim, model: m}]}]`, map[string]string{EnvDatabase: "redis://u:" + dbSecret + "@h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.yaml == "" {
				_, err = Load(filepath.Join("testdata", "many_problems.yaml"), nil)
			} else {
				_, err = Parse("s.yaml", []byte(tt.yaml), envOf(tt.env))
			}
			if err == nil {
				t.Fatal("got no error, want one")
			}
			assertNoSecret(t, "error", err.Error())
			if strings.Contains(err.Error(), "SAMEKEY") || strings.Contains(err.Error(), "SECRETSECRET") {
				t.Errorf("error shows a secret of many_problems.yaml:\n%s", err)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	cfg := secretConfig(t)
	if m, ok := cfg.Model("m"); !ok || m != &cfg.Models[0] {
		t.Errorf("Model(m): got %p, %v; want %p, true", m, ok, &cfg.Models[0])
	}
	if _, ok := cfg.Model("nope"); ok {
		t.Error("Model(nope): got ok, want not found")
	}
	if p, ok := cfg.Provider("openai"); !ok || p.Kind != "openai" {
		t.Errorf("Provider(openai): got %v, %v; want the openai provider", p, ok)
	}
	if _, ok := cfg.Provider("m"); ok {
		t.Error("Provider(m): got ok, want not found")
	}
	if k, ok := cfg.Key("dev"); !ok || k.Key != keySecret {
		t.Errorf("Key(dev): got %v, %v; want the dev key", k, ok)
	}
	if _, ok := cfg.Key(keySecret); ok {
		t.Error("Key(secret): got ok, want lookup by name only")
	}

	// A config changed after loading is still answered correctly.
	cfg.Models = append([]Model{{Name: "first", Price: Price{Input: 1, Output: 3}}}, cfg.Models...)
	if m, ok := cfg.Model("m"); !ok || m.Name != "m" {
		t.Errorf("after prepend, Model(m): got %v, %v; want m", m, ok)
	}
	if p, ok := cfg.Price("first"); !ok || p != (Price{Input: 1, Output: 3}) {
		t.Errorf("Price(first): got %v, %v; want {1 3}, true", p, ok)
	}
	if _, ok := cfg.Price("nope"); ok {
		t.Error("Price(nope): got ok, want not found")
	}

	// A config built in code, without an index.
	code := &Config{Models: []Model{{Name: "x"}}, Providers: []Provider{{Name: "p"}}}
	if _, ok := code.Model("x"); !ok {
		t.Error("code-built Model(x): not found")
	}
	if _, ok := code.Provider("p"); !ok {
		t.Error("code-built Provider(p): not found")
	}
}

// TestPriceCostSaturates: a cost is a number of USD in [0, $1e9] whatever the token
// counts and prices: never +Inf (which the ledger, the metrics and JSON
// reports would keep for ever), NaN or negative.
func TestPriceCostSaturates(t *testing.T) {
	inf, huge := math.Inf(1), math.MaxFloat64
	tests := []struct {
		name    string
		p       Price
		in, out int64
		want    float64
	}{
		{"plain", Price{Input: 2, Output: 8}, 1_000_000, 500_000, 6},
		{"no tokens", Price{Input: 2, Output: 8}, 0, 0, 0},
		{"MaxInt64 tokens", Price{Input: 2, Output: 8}, math.MaxInt64, math.MaxInt64, 1e9},
		{"MaxInt64 output tokens at $2", Price{Output: 2}, 0, math.MaxInt64, 1e9},
		{"largest price", Price{Input: huge, Output: huge}, 1, 1, 1e9},
		{"largest price, MaxInt64 tokens", Price{Input: huge, Output: huge}, math.MaxInt64, math.MaxInt64, 1e9},
		{"+Inf price", Price{Input: inf, Output: 8}, 1_000_000, 0, 1e9},
		{"+Inf price, no tokens", Price{Input: inf, Output: inf}, 0, 0, 0},
		{"NaN price", Price{Input: math.NaN(), Output: 8}, 1_000_000, 1_000_000, 8},
		{"negative price", Price{Input: -2, Output: 8}, 1_000_000, 1_000_000, 8},
		{"negative tokens", Price{Input: 2, Output: 8}, math.MinInt64, 1_000_000, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Cost(Tokens{Input: tt.in, Output: tt.out}); got != tt.want {
				t.Errorf("Cost(%d, %d) at %+v: got %v, want %v", tt.in, tt.out, tt.p, got, tt.want)
			}
		})
	}
}

func ptr(v float64) *float64 { return &v }

// TestPriceCost: fresh input, cache reads, cache writes and output each at
// their price; unconfigured cache prices are the input price; cache counts
// above the prompt leave no fresh input rather than a negative one.
func TestPriceCost(t *testing.T) {
	// Claude Sonnet 4.5's published prices.
	sonnet := Price{Input: 3, Output: 15, CachedInput: ptr(0.3), CacheWrite: ptr(3.75)}
	tests := []struct {
		name  string
		price Price
		t     Tokens
		want  float64 // USD, compared to the micro-dollar
	}{
		{"input and output", Price{Input: 2, Output: 8}, Tokens{Input: 1_000_000, Output: 500_000}, 6},
		// An agent turn: 50k prompt tokens of which 45k read from the cache
		// and 4k written to it, 500 output tokens: 1k fresh.
		{"agent turn", sonnet, Tokens{Input: 50_000, CacheRead: 45_000, CacheWrite: 4_000, Output: 500}, 0.003 + 0.0135 + 0.015 + 0.0075},
		{"no cache prices: the input price", Price{Input: 3, Output: 15}, Tokens{Input: 50_000, CacheRead: 45_000, CacheWrite: 4_000, Output: 500}, 0.15 + 0.0075},
		{"cache reads priced, writes not", Price{Input: 2, Output: 8, CachedInput: ptr(0.5)}, Tokens{Input: 10_000, CacheRead: 8_000, CacheWrite: 1_000}, 0.002 + 0.004 + 0.002},
		{"free cache reads", Price{Input: 2, CachedInput: ptr(0)}, Tokens{Input: 10_000, CacheRead: 10_000}, 0},
		{"cache counts above the prompt", sonnet, Tokens{Input: 10, CacheRead: 20, CacheWrite: 5}, (20*0.3 + 5*3.75) / 1e6},
		{"nothing", sonnet, Tokens{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.price.Cost(tt.t); math.Round(got*1e6) != math.Round(tt.want*1e6) {
				t.Errorf("Cost(%+v): got %.9f, want %.9f", tt.t, got, tt.want)
			}
		})
	}
}

func TestCacheUnpriced(t *testing.T) {
	tests := []struct {
		name  string
		price Price
		want  bool
	}{
		{"no price", Price{}, false},
		{"free input", Price{Output: 2}, false},
		{"input priced, no cache prices", Price{Input: 2, Output: 8}, true},
		{"cached_input", Price{Input: 2, Output: 8, CachedInput: ptr(0.5)}, false},
		{"cache_write only", Price{Input: 2, CacheWrite: ptr(2.5)}, false},
		{"free cache reads", Price{Input: 2, CachedInput: ptr(0)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.price.CacheUnpriced(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKeyAllows(t *testing.T) {
	tests := []struct {
		name   string
		models []string
		model  string
		want   bool
	}{
		{"empty list allows all", nil, "anything", true},
		{"listed", []string{"a", "b"}, "b", true},
		{"not listed", []string{"a"}, "b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &Key{Models: tt.models}
			if got := k.Allows(tt.model); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClone(t *testing.T) {
	cfg := validConfig()
	c := cfg.Clone()
	c.Providers[0].Name = "changed"
	c.Keys[0].Models[0] = "changed"
	c.Models[0].Routes[0].Model = "changed"
	c.Models[0].Hedge.Budget = 0.9
	if cfg.Providers[0].Name == "changed" || cfg.Keys[0].Models[0] == "changed" ||
		cfg.Models[0].Routes[0].Model == "changed" || cfg.Models[0].Hedge.Budget == 0.9 {
		t.Error("changing the clone changed the original")
	}
}

func BenchmarkModelLookup(b *testing.B) {
	cfg, _, err := Default(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := cfg.Model("sim-fallback"); !ok {
			b.Fatal("not found")
		}
	}
}

// CacheSavings is the cost without the cache (every prompt token at the
// input price) less the cost with it.
func TestPriceCacheSavings(t *testing.T) {
	sonnet := Price{Input: 3, Output: 15, CachedInput: ptr(0.3), CacheWrite: ptr(3.75)}
	tests := []struct {
		name        string
		price       Price
		read, write int64
		want        float64 // USD, compared to the micro-dollar
	}{
		// The agent turn of TestPriceCost: 45k read save 45k × 2.70, 4k
		// written cost 4k × 0.75 more.
		{"agent turn", sonnet, 45_000, 4_000, 0.1215 - 0.003},
		{"writes only: negative", sonnet, 0, 10_000, -0.0075},
		{"no cache prices: nothing saved", Price{Input: 3}, 45_000, 4_000, 0},
		{"free cache reads", Price{Input: 2, CachedInput: ptr(0)}, 10_000, 0, 0.02},
		{"negative counts are none", sonnet, -5, -5, 0},
		{"saturates", sonnet, math.MaxInt64, 0, 1e9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.price.CacheSavings(tt.read, tt.write)
			if math.Round(got*1e6) != math.Round(tt.want*1e6) {
				t.Errorf("CacheSavings(%d, %d): got %.9f, want %.9f", tt.read, tt.write, got, tt.want)
			}
			without := tt.price.Cost(Tokens{Input: max(tt.read, 0) + max(tt.write, 0)})
			with := tt.price.Cost(Tokens{Input: max(tt.read, 0) + max(tt.write, 0), CacheRead: max(tt.read, 0), CacheWrite: max(tt.write, 0)})
			if tt.want != 1e9 && math.Round((without-with)*1e6) != math.Round(got*1e6) {
				t.Errorf("CacheSavings(%d, %d) = %.9f, want Cost without the cache less Cost with it, %.9f", tt.read, tt.write, got, without-with)
			}
		})
	}
}

// TestRedactedAWS: a bedrock provider's secret access key and session
// token are redacted in the printed config, and the config itself keeps
// them.
func TestRedactedAWS(t *testing.T) {
	c := Config{Providers: []Provider{{Name: "b", Kind: "bedrock", Region: "us-east-1",
		AWS: &AWSKeys{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "FwoGZXIvYXdzEXAMPLETOKENVALUE"}}}}
	out := c.String()
	if strings.Contains(out, "K7MDENG") || strings.Contains(out, "EXAMPLETOKENVALUE") {
		t.Errorf("printed config shows an AWS secret:\n%s", out)
	}
	if c.Providers[0].AWS.SecretAccessKey != "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" {
		t.Errorf("Redacted changed the config's own secret")
	}
}
