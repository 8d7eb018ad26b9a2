package config

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// validConfig returns a small valid Config built in code.
func validConfig() *Config {
	c := New()
	c.Providers = []Provider{
		{Name: "openai", Kind: "openai", BaseURL: "https://api.openai.com/v1", APIKey: "sk-proj-abcdefghijklmnop"},
		{Name: "sim", Kind: "sim"},
	}
	c.Keys = []Key{{Name: "dev", Key: "sg-dev-0123456789abcdef", Models: []string{"gpt-4.1"}}}
	c.Models = []Model{{
		Name:   "gpt-4.1",
		Routes: []Route{{Provider: "openai", Model: "gpt-4.1"}, {Provider: "sim", Model: "sim-fast", Weight: 1}},
		Price:  Price{Input: 2, Output: 8},
		Hedge:  &Hedge{After: "500ms", Budget: 0.1},
	}}
	c.SetDefaults()
	return c
}

func TestValidConfigs(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
	}{
		{"as built", func(c *Config) {}},
		{"listen any host", func(c *Config) { c.Listen = ":8080" }},
		{"listen ipv6", func(c *Config) { c.Listen = "[::1]:0" }},
		{"postgres", func(c *Config) { c.Database = "postgres://u:p@db:5432/sg?sslmode=disable" }},
		{"sqlite memory", func(c *Config) { c.Database = "sqlite://:memory:" }},
		{"sim with base_url", func(c *Config) { c.Providers[1].BaseURL = "http://127.0.0.1:8081/v1" }},
		{"anthropic", func(c *Config) {
			c.Providers = append(c.Providers, Provider{Name: "a", Kind: "anthropic", BaseURL: "https://api.anthropic.com"})
		}},
		{"gemini", func(c *Config) {
			c.Providers = append(c.Providers, Provider{Name: "g", Kind: "gemini", BaseURL: "https://generativelanguage.googleapis.com"})
		}},
		{"no keys", func(c *Config) { c.Keys = nil }},
		{"http2 on http base_url", func(c *Config) {
			c.Providers = append(c.Providers, Provider{Name: "vllm", Kind: "openai", BaseURL: "http://127.0.0.1:8000/v1", HTTP2: true})
		}},
		{"http2 on sim", func(c *Config) { c.Providers[1].HTTP2 = true }},
		{"sim dialect", func(c *Config) { c.Providers[1].Dialect = "gemini" }},
		{"each strategy", func(c *Config) {
			for _, s := range strategies {
				m := c.Models[0]
				m.Name, m.Strategy = "m-"+s, s
				c.Models = append(c.Models, m)
			}
		}},
		{"trim policy", func(c *Config) { c.Models[0].ContextPolicy = "trim" }},
		{"hedge percentile", func(c *Config) { c.Models[0].Hedge = &Hedge{After: "p99.9", Budget: 1} }},
		{"zero timeouts", func(c *Config) { c.Timeouts = Timeouts{} }},
		{"api key pool", func(c *Config) {
			c.Providers[0].APIKey = ""
			c.Providers[0].APIKeys = []ProviderKey{{Name: "o1", Key: "sk-1", RPM: 500, TPM: 90000, MaxStreams: 10, Weight: 2}, {Name: "o2", Key: "sk-2"}}
		}},
		{"api key pool on sim", func(c *Config) {
			c.Providers[1].APIKeys = []ProviderKey{{Name: "s1", Key: "k1"}, {Name: "s2", Key: "k2"}}
		}},
		{"each affinity", func(c *Config) {
			for _, a := range affinities {
				m := c.Models[0]
				m.Name, m.Affinity = "m-"+a, a
				c.Models = append(c.Models, m)
			}
			c.Models[1].AffinityEpsilon = 0.5
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.change(c)
			if err := c.Validate(); err != nil {
				t.Errorf("got %v, want nil", err)
			}
		})
	}
}

// TestValidateBedrockModels: kind bedrock takes any model id: Claude's
// through InvokeModel, the others (and opaque ARNs) through Converse.
func TestValidateBedrockModels(t *testing.T) {
	for _, m := range []string{"anthropic.claude-3-5-haiku-20241022-v1:0", "us.amazon.nova-pro-v1:0", "meta.llama3-70b-instruct-v1:0",
		"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3"} {
		c := validConfig()
		c.Providers[1] = Provider{Name: "sim", Kind: "bedrock", Region: "us-east-1"}
		c.Models[0].Routes[1].Model = m
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}

// TestValidateEntra: kind azure with an Entra ID app registration needs
// no api_key; its secret is redacted.
func TestValidateEntra(t *testing.T) {
	c := validConfig()
	c.Providers[1] = Provider{Name: "sim", Kind: "azure", BaseURL: "https://r.openai.azure.com",
		Entra: &EntraApp{TenantID: "contoso", ClientID: "app", ClientSecret: "entra-secret-value-123"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if r := c.Redacted(); r.Providers[1].Entra.ClientSecret == "entra-secret-value-123" || c.Providers[1].Entra.ClientSecret != "entra-secret-value-123" {
		t.Errorf("redacted %q, original %q", r.Providers[1].Entra.ClientSecret, c.Providers[1].Entra.ClientSecret)
	}
}

func TestValidateEachProblem(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		want   string // the one "path: message" expected
	}{
		{"listen empty", func(c *Config) { c.Listen = "" }, "listen: required (HOST:PORT)"},
		{"dialect on openai", func(c *Config) { c.Providers[0].Dialect = "anthropic" }, "providers[0].dialect: only for kind sim (a provider of kind openai speaks its own API)"},
		{"unknown sim dialect", func(c *Config) { c.Providers[1].Dialect = "cohere" }, `providers[1].dialect: unknown dialect "cohere" (want one of openai, anthropic, gemini)`},
		{"listen without port", func(c *Config) { c.Listen = "localhost" }, `listen: "localhost" is not HOST:PORT`},
		{"listen bad port", func(c *Config) { c.Listen = "localhost:http" }, `listen: "localhost:http" has an invalid port (want 0-65535)`},
		{"listen port too big", func(c *Config) { c.Listen = "127.0.0.1:70000" }, `listen: "127.0.0.1:70000" has an invalid port (want 0-65535)`},
		{"database empty", func(c *Config) { c.Database = "" }, "database: required (sqlite://PATH or postgres://...)"},
		{"database no scheme", func(c *Config) { c.Database = "streamgate.db" }, "database: no scheme (want sqlite://PATH or postgres://...)"},
		{"database other scheme", func(c *Config) { c.Database = "mysql://db" }, `database: unsupported scheme "mysql" (want sqlite:// or postgres://)`},
		{"database sqlite no path", func(c *Config) { c.Database = "sqlite://" }, "database: sqlite:// needs a file path, e.g. sqlite://streamgate.db"},
		{"connect negative", func(c *Config) { c.Timeouts.Connect = Duration(-time.Second) }, "timeouts.connect: must not be negative, got -1s"},
		{"first_token negative", func(c *Config) { c.Timeouts.FirstToken = -1 }, "timeouts.first_token: must not be negative, got -1ns"},
		{"idle negative", func(c *Config) { c.Timeouts.Idle = Duration(-time.Millisecond) }, "timeouts.idle: must not be negative, got -1ms"},
		{"total negative", func(c *Config) { c.Timeouts.Total = Duration(-time.Minute) }, "timeouts.total: must not be negative, got -1m0s"},
		{"client_write negative", func(c *Config) { c.Timeouts.ClientWrite = Duration(-time.Second) }, "timeouts.client_write: must not be negative, got -1s"},
		{"max body negative", func(c *Config) { c.MaxBody = -1 }, "max_body_bytes: must not be negative, got -1"},
		{"max decoding below max body", func(c *Config) { c.MaxDecodingBytes = 1000 }, "max_decoding_bytes: must be at least max_body_bytes (10485760), got 1000: a body of the largest size allowed could never be read"},
		{"request body timeout negative", func(c *Config) { c.Timeouts.RequestBody = -1 }, "timeouts.request_body: must not be negative, got -1ns"},
		{"store retention negative", func(c *Config) { c.Responses.StoreRetention = Duration(-time.Hour) }, "responses.store_retention: must be at least 1s (0s: the default, 720h), got -1h0m0s"},
		{"store retention below a second", func(c *Config) { c.Responses.StoreRetention = Duration(time.Millisecond) }, "responses.store_retention: must be at least 1s (0s: the default, 720h), got 1ms"},
		{"builtin tools unknown", func(c *Config) { c.Responses.BuiltinTools = "ignore" }, `responses.builtin_tools: must be drop or reject, got "ignore"`},
		{"no providers", func(c *Config) {
			c.Providers = nil
			c.Models[0].Routes = c.Models[0].Routes[:0:0]
			c.Models[0].Routes = append(c.Models[0].Routes, Route{Provider: "x", Model: "y"})
		}, ""},
		{"provider name missing", func(c *Config) { c.Providers[1].Name = "" }, "providers[1].name: required\n" +
			`models[0].routes[1].provider: unknown provider "sim" (providers: "openai")`},
		{"provider name duplicate", func(c *Config) { c.Providers[1].Name = "openai" }, `providers[1].name: duplicate provider name "openai" (first at providers[0])` + "\n" +
			`models[0].routes[1].provider: unknown provider "sim" (providers: "openai")`},
		{"provider kind missing", func(c *Config) { c.Providers[1].Kind = "" }, "providers[1].kind: required (one of openai, anthropic, gemini, sim, bedrock, vertex, azure)"},
		{"provider kind unknown", func(c *Config) { c.Providers[1].Kind = "azur" }, `providers[1].kind: unknown kind "azur" (want one of openai, anthropic, gemini, sim, bedrock, vertex, azure)`},
		{"bedrock without region", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "bedrock"}
			c.Models[0].Routes[1].Model = "anthropic.claude-x"
		}, "providers[1].region: required for kind bedrock (the region signed requests are scoped to, e.g. us-east-1)"},
		{"bedrock aws and api_key", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "bedrock", Region: "us-east-1", APIKey: "k", AWS: &AWSKeys{AccessKeyID: "a", SecretAccessKey: "s"}}
			c.Models[0].Routes[1].Model = "anthropic.claude-x"
		}, "providers[1].aws: give aws (SigV4) or api_key (a Bedrock API key), not both"},
		{"bedrock aws without secret", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "bedrock", Region: "us-east-1", AWS: &AWSKeys{AccessKeyID: "a"}}
			c.Models[0].Routes[1].Model = "anthropic.claude-x"
		}, "providers[1].aws: access_key_id and secret_access_key are both required"},
		{"vertex without project and region", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "vertex", CredentialsFile: "testdata/spec.yaml"}
		},
			"providers[1].project: required for kind vertex (the Google Cloud project)\nproviders[1].region: required for kind vertex (global, or a region such as us-east5)"},
		{"vertex with an api key", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "vertex", Project: "p", Region: "global", APIKey: "k"}
		},
			"providers[1].api_key: kind vertex authenticates with credentials_file (or application-default credentials), not an API key"},
		{"azure without key", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "azure", BaseURL: "https://r.openai.azure.com"}
		}, "providers[1].api_key: required for kind azure (sent as the api-key header), or entra"},
		{"entra with an api key", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "azure", BaseURL: "https://r.openai.azure.com", APIKey: "k", Entra: &EntraApp{TenantID: "t", ClientID: "c", ClientSecret: "s"}}
		}, "providers[1].entra: give entra (an Entra ID bearer token) or api_key, not both"},
		{"entra without its secret", func(c *Config) {
			c.Providers[1] = Provider{Name: "sim", Kind: "azure", BaseURL: "https://r.openai.azure.com", Entra: &EntraApp{TenantID: "t", ClientID: "c"}}
		}, "providers[1].entra.client_secret: required (the app registration's client-credentials grant)"},
		{"entra on another kind", func(c *Config) {
			c.Providers[0].Entra = &EntraApp{TenantID: "t", ClientID: "c", ClientSecret: "s"}
		}, "providers[0].entra: only for kind azure (a provider of kind openai does not read it)"},
		{"cloud fields on another kind", func(c *Config) { c.Providers[0].Region, c.Providers[0].APIVersion = "us-east-1", "2024-10-21" },
			"providers[0].region: only for kind bedrock or vertex (a provider of kind openai does not read it)\nproviders[0].api_version: only for kind azure (a provider of kind openai does not read it)"},
		{"base_url missing", func(c *Config) { c.Providers[0].BaseURL = "" }, "providers[0].base_url: required for kind openai"},
		{"base_url relative", func(c *Config) { c.Providers[0].BaseURL = "/v1" }, "providers[0].base_url: /v1 is not an absolute http(s) URL"},
		{"base_url no scheme", func(c *Config) { c.Providers[0].BaseURL = "api.openai.com/v1" }, "providers[0].base_url: api.openai.com/v1 is not an absolute http(s) URL"},
		{"base_url ftp", func(c *Config) { c.Providers[0].BaseURL = "ftp://host/v1" }, "providers[0].base_url: ftp://host/v1 is not an absolute http(s) URL"},
		{"base_url of sim checked when set", func(c *Config) { c.Providers[1].BaseURL = "localhost:8081" }, "providers[1].base_url: localhost:8081 is not an absolute http(s) URL"},
		{"http2 on https base_url", func(c *Config) { c.Providers[0].HTTP2 = true }, "providers[0].http2: only for http:// base URLs (h2c); https negotiates HTTP/2 by ALPN already"},
		{"http2 on bad base_url reports the url only", func(c *Config) { c.Providers[0].BaseURL, c.Providers[0].HTTP2 = "/v1", true }, "providers[0].base_url: /v1 is not an absolute http(s) URL"},
		{"api_key and api_keys", func(c *Config) { c.Providers[0].APIKeys = []ProviderKey{{Name: "o1", Key: "sk-1"}} }, "providers[0].api_keys: give api_key or api_keys, not both"},
		{"api_keys empty", func(c *Config) { c.Providers[1].APIKeys = []ProviderKey{} }, "providers[1].api_keys: empty (give at least one key, or api_key)"},
		{"api_keys name missing", func(c *Config) { c.Providers[1].APIKeys = []ProviderKey{{Key: "k"}} }, "providers[1].api_keys[0].name: required (it names the key in metrics, logs and the ledger)"},
		{"api_keys name twice", func(c *Config) {
			c.Providers[1].APIKeys = []ProviderKey{{Name: "a", Key: "k1"}, {Name: "a", Key: "k2"}}
		}, `providers[1].api_keys[1].name: duplicate key name "a" (first at api_keys[0])`},
		{"api_keys secret missing", func(c *Config) { c.Providers[1].APIKeys = []ProviderKey{{Name: "a"}} }, "providers[1].api_keys[0].key: required"},
		{"api_keys secret twice", func(c *Config) { c.Providers[1].APIKeys = []ProviderKey{{Name: "a", Key: "k"}, {Name: "b", Key: "k"}} }, "providers[1].api_keys[1].key: same secret as api_keys[0]"},
		{"api_keys rpm negative", func(c *Config) { c.Providers[1].APIKeys = []ProviderKey{{Name: "a", Key: "k", RPM: -1}} }, "providers[1].api_keys[0].rpm: must not be negative, got -1"},
		{"api_keys weight negative", func(c *Config) { c.Providers[1].APIKeys = []ProviderKey{{Name: "a", Key: "k", Weight: -2}} }, "providers[1].api_keys[0].weight: must not be negative, got -2"},
		{"affinity unknown", func(c *Config) { c.Models[0].Affinity = "sticky" }, `models[0].affinity: unknown affinity "sticky" (want one of session, prefix, off)`},
		{"affinity epsilon negative", func(c *Config) { c.Models[0].Affinity, c.Models[0].AffinityEpsilon = "session", -1 }, "models[0].affinity_epsilon: must be a non-negative number, got -1"},
		{"affinity epsilon without affinity", func(c *Config) { c.Models[0].AffinityEpsilon = 0.5 }, "models[0].affinity_epsilon: only with affinity session or prefix (affinity is off)"},
		{"health check interval negative", func(c *Config) { c.Providers[0].HealthCheck.Interval = Duration(-time.Second) }, "providers[0].health_check.interval: must not be negative, got -1s"},
		{"health check timeout negative", func(c *Config) { c.Providers[1].HealthCheck.Timeout = -1 }, "providers[1].health_check.timeout: must not be negative, got -1ns"},
		{"model name missing", func(c *Config) { c.Models[0].Name = "" }, "models[0].name: required\n" +
			`keys[0].models[0]: unknown model "gpt-4.1"`},
		{"model duplicate", func(c *Config) { c.Models = append(c.Models, c.Models[0]) }, `models[1].name: duplicate model name "gpt-4.1" (first at models[0])`},
		{"no routes", func(c *Config) { c.Models[0].Routes = nil }, "models[0].routes: at least one route is required"},
		{"route provider missing", func(c *Config) { c.Models[0].Routes[0].Provider = "" }, "models[0].routes[0].provider: required"},
		{"route provider unknown", func(c *Config) { c.Models[0].Routes[1].Provider = "opnai" }, `models[0].routes[1].provider: unknown provider "opnai" (providers: "openai", "sim")`},
		{"route model missing", func(c *Config) { c.Models[0].Routes[0].Model = "" }, "models[0].routes[0].model: required (the model name the provider expects)"},
		{"route weight negative", func(c *Config) { c.Models[0].Routes[1].Weight = -2 }, "models[0].routes[1].weight: must not be negative, got -2"},
		{"price input negative", func(c *Config) { c.Models[0].Price.Input = -0.5 }, "models[0].price.input: must be a non-negative number of USD per 1M tokens, got -0.5"},
		{"price output NaN", func(c *Config) { c.Models[0].Price.Output = math.NaN() }, "models[0].price.output: must be a non-negative number of USD per 1M tokens, got NaN"},
		{"price output infinite", func(c *Config) { c.Models[0].Price.Output = math.Inf(1) }, "models[0].price.output: must be a non-negative number of USD per 1M tokens, got +Inf"},
		{"price cached_input negative", func(c *Config) { c.Models[0].Price.CachedInput = ptr(-0.1) }, "models[0].price.cached_input: must be a non-negative number of USD per 1M tokens, got -0.1"},
		{"price cached_input NaN", func(c *Config) { c.Models[0].Price.CachedInput = ptr(math.NaN()) }, "models[0].price.cached_input: must be a non-negative number of USD per 1M tokens, got NaN"},
		{"price cache_write infinite", func(c *Config) { c.Models[0].Price.CacheWrite = ptr(math.Inf(1)) }, "models[0].price.cache_write: must be a non-negative number of USD per 1M tokens, got +Inf"},
		{"price cache_write negative", func(c *Config) { c.Models[0].Price.CacheWrite = ptr(-1) }, "models[0].price.cache_write: must be a non-negative number of USD per 1M tokens, got -1"},
		{"strategy unknown", func(c *Config) { c.Models[0].Strategy = "round-robin" }, `models[0].strategy: unknown strategy "round-robin" (want one of fallback, weighted, least-inflight, lowest-latency)`},
		{"strategy empty without SetDefaults", func(c *Config) { c.Models[0].Strategy = "" }, `models[0].strategy: unknown strategy "" (want one of fallback, weighted, least-inflight, lowest-latency)`},
		{"retries negative", func(c *Config) { c.Models[0].Retries = -1 }, "models[0].retries: must not be negative, got -1"},
		{"context window negative", func(c *Config) { c.Models[0].ContextWindow = -5 }, "models[0].context_window: must not be negative, got -5"},
		{"context policy unknown", func(c *Config) { c.Models[0].ContextPolicy = "truncate" }, `models[0].context_policy: unknown policy "truncate" (want one of reject, trim)`},
		{"hedge after missing", func(c *Config) { c.Models[0].Hedge.After = "" }, "models[0].hedge.after: required (a duration such as 500ms, or a percentile such as p95)"},
		{"hedge after zero", func(c *Config) { c.Models[0].Hedge.After = "0s" }, `models[0].hedge.after: "0s" is neither a positive duration (500ms) nor a percentile (p95)`},
		{"hedge after p100", func(c *Config) { c.Models[0].Hedge.After = "p100" }, `models[0].hedge.after: "p100" is not a percentile (want p1 to p99.9)`},
		{"hedge after pxx", func(c *Config) { c.Models[0].Hedge.After = "pxx" }, `models[0].hedge.after: "pxx" is not a percentile (want p1 to p99.9)`},
		{"hedge budget above 1", func(c *Config) { c.Models[0].Hedge.Budget = 1.5 }, "models[0].hedge.budget: must be between 0 and 1, got 1.5"},
		{"hedge budget negative", func(c *Config) { c.Models[0].Hedge.Budget = -0.1 }, "models[0].hedge.budget: must be between 0 and 1, got -0.1"},
		{"key name missing", func(c *Config) { c.Keys[0].Name = "" }, "keys[0].name: required"},
		{"key secret missing", func(c *Config) { c.Keys[0].Key = "" }, "keys[0].key: required"},
		{"key name duplicate", func(c *Config) { c.Keys = append(c.Keys, Key{Name: "dev", Key: "sg-other-0123456789"}) }, `keys[1].name: duplicate key name "dev" (first at keys[0])`},
		{"key secret duplicate", func(c *Config) { c.Keys = append(c.Keys, Key{Name: "ci", Key: c.Keys[0].Key}) }, "keys[1].key: same secret as keys[0]; each key needs its own"},
		{"key model unknown", func(c *Config) { c.Keys[0].Models = append(c.Keys[0].Models, "gpt-5") }, `keys[0].models[1]: unknown model "gpt-5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.change(c)
			err := c.Validate()
			if tt.want == "" { // several problems; covered elsewhere
				if err == nil {
					t.Fatal("got nil, want an error")
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			fes := fieldErrors(t, err)
			if n := strings.Count(tt.want, "\n") + 1; len(fes) != n || !strings.HasPrefix(tt.want, fes[0].Path+": ") {
				t.Errorf("got FieldErrors %+v, want %d, the first with the path of %q", fes, n, tt.want)
			}
		})
	}
}

func TestValidateReportsAllTogether(t *testing.T) {
	c := validConfig()
	c.Listen = "nope"
	c.Providers[0].Kind = "opnai"
	c.Models[0].Routes[1].Provider = "missing"
	c.Models[0].Retries = -3
	c.Keys[0].Models = []string{"ghost"}
	got := fieldErrors(t, c.Validate())
	var paths []string
	for _, fe := range got {
		paths = append(paths, fe.Path)
	}
	want := []string{"listen", "providers[0].kind", "models[0].routes[1].provider", "models[0].retries", "keys[0].models[0]"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("got paths %v, want %v", paths, want)
	}
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		e    FieldError
		want string
	}{
		{"all", FieldError{File: "a.yaml", Line: 3, Path: "listen", Msg: "bad"}, "a.yaml:3: listen: bad"},
		{"no line", FieldError{File: "a.yaml", Path: "listen", Msg: "bad"}, "a.yaml: listen: bad"},
		{"no file", FieldError{Path: "listen", Msg: "bad"}, "listen: bad"},
		{"no path", FieldError{File: "a.yaml", Line: 1, Msg: "bad"}, "a.yaml:1: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHedgeDelay(t *testing.T) {
	tests := []struct {
		after string
		d     time.Duration
		pct   float64
		ok    bool
	}{
		{"500ms", 500 * time.Millisecond, 0, true},
		{"2s", 2 * time.Second, 0, true},
		{"p95", 0, 95, true},
		{"p99.9", 0, 99.9, true},
		{"p0", 0, 0, false},
		{"-1s", 0, 0, false},
		{"500", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("after=%q", tt.after), func(t *testing.T) {
			d, pct, err := Hedge{After: tt.after}.Delay()
			if d != tt.d || pct != tt.pct || (err == nil) != tt.ok {
				t.Errorf("got %v, %v, %v; want %v, %v, ok=%v", d, pct, err, tt.d, tt.pct, tt.ok)
			}
		})
	}
}

// TestCheckCoversAllFieldKinds guards the shape check of Parse: every field
// type reachable from Config must be one it knows, or a new field would
// escape the unknown-field and type checks.
func TestCheckCoversAllFieldKinds(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(path string, ty reflect.Type)
	walk = func(path string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty == durationType || seen[ty] {
			return
		}
		seen[ty] = true
		switch ty.Kind() {
		case reflect.Struct:
			for name, f := range yamlFields(ty) {
				walk(path+"."+name, f.Type)
			}
		case reflect.Map: // parser.check checks each value
			walk(path+".*", ty.Elem())
		case reflect.String, reflect.Bool, reflect.Float64, reflect.Int, reflect.Int64:
		default:
			t.Errorf("%s: kind %s is not checked by parser.check", path, ty.Kind())
		}
	}
	walk("config", reflect.TypeFor[Config]())
}

func TestHealthCheckEvery(t *testing.T) {
	for _, tt := range []struct {
		name              string
		h                 HealthCheck
		interval, timeout time.Duration
		on                bool
	}{
		{"zero: on with the defaults", HealthCheck{}, DefaultHealthCheckInterval, DefaultHealthCheckTimeout, true},
		{"set", HealthCheck{Interval: Duration(time.Second), Timeout: Duration(300 * time.Millisecond)}, time.Second, 300 * time.Millisecond, true},
		{"timeout at most the interval", HealthCheck{Interval: Duration(500 * time.Millisecond)}, 500 * time.Millisecond, 500 * time.Millisecond, true},
		{"disabled", HealthCheck{Disabled: true, Interval: Duration(time.Second)}, 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			i, to, on := tt.h.Every()
			if i != tt.interval || to != tt.timeout || on != tt.on {
				t.Fatalf("got %v, %v, %v; want %v, %v, %v", i, to, on, tt.interval, tt.timeout, tt.on)
			}
		})
	}
}
