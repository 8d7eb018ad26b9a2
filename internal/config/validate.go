package config

import (
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/redisguard"
)

// Accepted values of enumerated fields.
var (
	kinds          = []string{"openai", "anthropic", "gemini", "sim", "bedrock", "vertex", "azure"}
	simDialects    = []string{"openai", "anthropic", "gemini"}
	strategies     = []string{"fallback", "weighted", "least-inflight", "lowest-latency"}
	contextPolicys = []string{"reject", "trim"}
	continuations  = []string{"prefill", "continue_final_message", "prompt"}
	budgetPeriods  = []string{"month", "day", "total"}
)

// Validate checks c and returns every problem at once, joined with
// errors.Join; each is a *FieldError whose Path names the value, e.g.
// `models[2].routes[0].provider: unknown provider "opnai"`. It returns nil
// for a valid config. It does not fill defaults (see SetDefaults): an empty
// strategy or context_policy is an error here. Messages never contain a
// provider api key, a gateway key or a database password.
//
// Checked: listen is HOST:PORT; database is sqlite://PATH or
// postgres[ql]://...; timeouts and max_body_bytes are not negative; at least
// one provider and one model; names present and unique; provider kind is
// openai, anthropic, gemini or sim; base_url is an absolute http(s) URL,
// required except for sim; http2 only with an http:// base_url or kind sim; keys have a name and a secret, no two keys share
// a secret, and key.models name configured models; each model has routes
// whose provider exists and whose model is set, weights ≥ 0, prices finite
// and ≥ 0, a known strategy and context_policy, retries ≥ 0,
// context_window ≥ 0, aliases valid globs or names, none a model's name
// nor another model's alias, and hedge.after a positive duration or pNN with
// hedge.budget in [0, 1]; the otel block (see OTel); teams have a unique
// name, limits ≥ 0 and a known budget_period; a key's model_budgets name
// models it may use, once each, with a positive budget. A key's team is
// not checked here: it may be a team of the database (gateway.New checks
// it).
func (c *Config) Validate() error {
	var v problems
	v.listen(c.Listen)
	v.database(c.Database)
	v.nonNegative("timeouts.connect", c.Timeouts.Connect)
	v.nonNegative("timeouts.first_token", c.Timeouts.FirstToken)
	v.nonNegative("timeouts.idle", c.Timeouts.Idle)
	v.nonNegative("timeouts.total", c.Timeouts.Total)
	v.nonNegative("timeouts.client_write", c.Timeouts.ClientWrite)
	v.nonNegative("timeouts.non_stream", c.Timeouts.NonStream)
	v.nonNegative("timeouts.request_body", c.Timeouts.RequestBody)
	if c.MaxBody < 0 {
		v.add("max_body_bytes", "must not be negative, got %d", c.MaxBody)
	}
	if c.MaxDecodingBytes < 0 {
		v.add("max_decoding_bytes", "must not be negative, got %d", c.MaxDecodingBytes)
	} else if c.MaxDecodingBytes > 0 && c.MaxDecodingBytes < c.MaxBody {
		v.add("max_decoding_bytes", "must be at least max_body_bytes (%d), got %d: a body of the largest size allowed could never be read", c.MaxBody, c.MaxDecodingBytes)
	}
	v.nonNegative("keepalive", c.KeepAlive)
	if c.Limits.MaxStreams < 0 {
		v.add("limits.max_streams", "must not be negative, got %d", c.Limits.MaxStreams)
	}
	if c.Limits.MaxStreamsPerKey < 0 {
		v.add("limits.max_streams_per_key", "must not be negative, got %d", c.Limits.MaxStreamsPerKey)
	}
	v.nonNegative("limits.queue_wait", c.Limits.QueueWait)
	if r := c.Responses.StoreRetention.D(); r < 0 || (r > 0 && r < time.Second) {
		v.add("responses.store_retention", "must be at least 1s (0s: the default, 720h), got %s", r)
	}
	switch c.Responses.BuiltinTools {
	case "", BuiltinDrop, BuiltinReject:
	default:
		v.add("responses.builtin_tools", "must be drop or reject, got %q", c.Responses.BuiltinTools)
	}
	if d := c.Responses.WebSocket.Idle.D(); d < 0 || (d > 0 && d < time.Second) {
		v.add("responses.websocket.idle", "must be at least 1s (0s: the default, %s), got %s", DefaultWebSocketIdle, d)
	}
	if d := c.Responses.WebSocket.MaxLifetime.D(); d < 0 || (d > 0 && d < time.Second) {
		v.add("responses.websocket.max_lifetime", "must be at least 1s (0s: the default, %s), got %s", DefaultWebSocketLifetime, d)
	}
	v.otel(c.OTel)
	for i, tp := range c.TrustedProxies {
		if _, err := ParsePrefix(tp); err != nil {
			v.add(fmt.Sprintf("trusted_proxies[%d]", i), "%v", err)
		}
	}
	if c.Redis != "" {
		if u, err := url.Parse(c.Redis); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != redisguard.ClusterScheme && u.Scheme != redisguard.ClusterSchemeTLS) || u.Host == "" {
			v.add("redis", "%s is not a redis://, rediss:// or redis+cluster:// URL (e.g. redis://127.0.0.1:6379/0, redis+cluster://10.0.0.1:7000,10.0.0.2:7000)", redactURL(c.Redis))
		} else if err := redisguard.CheckURL(c.Redis); err != nil {
			v.add("redis", "%s: %v", redactURL(c.Redis), err)
		}
	}

	providers := make(map[string]int, len(c.Providers))
	if len(c.Providers) == 0 {
		v.add("providers", "at least one provider is required")
	}
	for i, p := range c.Providers {
		path := fmt.Sprintf("providers[%d]", i)
		v.name(path, p.Name, "provider", providers, i)
		v.provider(path, p)
	}

	models := make(map[string]int, len(c.Models))
	if len(c.Models) == 0 {
		v.add("models", "at least one model is required")
	}
	for i, m := range c.Models {
		path := fmt.Sprintf("models[%d]", i)
		v.name(path, m.Name, "model", models, i)
		v.model(path, m, providers, c.Providers)
	}
	v.aliases(c.Models, models)

	teams := make(map[string]int, len(c.Teams))
	for i, t := range c.Teams {
		path := fmt.Sprintf("teams[%d]", i)
		v.name(path, t.Name, "team", teams, i)
		for _, n := range []struct {
			field string
			v     int
		}{{"max_streams", t.MaxStreams}, {"rpm", t.RPM}, {"tpm", t.TPM}} {
			if n.v < 0 {
				v.add(path+"."+n.field, "must not be negative, got %d", n.v)
			}
		}
		v.budget(path, t.BudgetUSD, t.BudgetPeriod)
	}

	keyNames := make(map[string]int, len(c.Keys))
	secrets := make(map[string]int, len(c.Keys))
	for i, k := range c.Keys {
		path := fmt.Sprintf("keys[%d]", i)
		v.name(path, k.Name, "key", keyNames, i)
		if k.Key == "" {
			v.add(path+".key", "required")
		} else if first, dup := secrets[k.Key]; dup {
			v.add(path+".key", "same secret as keys[%d]; each key needs its own", first)
		} else {
			secrets[k.Key] = i
		}
		for _, n := range []struct {
			field string
			v     int
		}{{"max_streams", k.MaxStreams}, {"rpm", k.RPM}, {"tpm", k.TPM}} {
			if n.v < 0 {
				v.add(path+"."+n.field, "must not be negative, got %d", n.v)
			}
		}
		v.budget(path, k.BudgetUSD, k.BudgetPeriod)
		for j, name := range k.Models {
			if _, ok := models[name]; !ok {
				if m, ok := c.Resolve(name); ok {
					v.add(fmt.Sprintf("%s.models[%d]", path, j), "%q is an alias of model %q: name the model (a key allowed a model may use its aliases)", name, m.Name)
					continue
				}
				v.addRef("models", fmt.Sprintf("%s.models[%d]", path, j), "unknown model %q", name)
			}
		}
		if k.Team != "" && strings.TrimSpace(k.Team) != k.Team {
			v.add(path+".team", "%q has leading or trailing space", k.Team)
		}
		// A team that is not in teams: may be one of the database's: the
		// gateway checks it there when it starts (gateway.New).
		budgeted := make(map[string]int, len(k.ModelBudgets))
		for j, mb := range k.ModelBudgets {
			mp := fmt.Sprintf("%s.model_budgets[%d]", path, j)
			switch _, known := models[mb.Model]; {
			case mb.Model == "":
				v.add(mp+".model", "required")
			case !known:
				v.addRef("models", mp+".model", "unknown model %q", mb.Model)
			case !k.Allows(mb.Model):
				v.add(mp+".model", "the key may not use model %q (not in its models): the budget would never apply", mb.Model)
			default:
				if first, dup := budgeted[mb.Model]; dup {
					v.add(mp+".model", "model %q has a budget already (model_budgets[%d])", mb.Model, first)
				} else {
					budgeted[mb.Model] = j
				}
			}
			if mb.BudgetUSD == 0 {
				v.add(mp+".budget_usd", "required (a positive number of USD)")
			}
			v.budget(mp, mb.BudgetUSD, mb.BudgetPeriod)
		}
	}
	v.mcp(c.MCP, c.Keys)
	return errors.Join(v...)
}

// budget checks a budget_usd and its budget_period at path.
func (v *problems) budget(path string, usd float64, period string) {
	if math.IsNaN(usd) || math.IsInf(usd, 0) || usd < 0 {
		v.add(path+".budget_usd", "must be a non-negative number of USD, got %v", usd)
	}
	if period != "" && !oneOf(period, budgetPeriods) {
		v.add(path+".budget_period", "unknown period %q (want one of %s)", period, strings.Join(budgetPeriods, ", "))
	}
}

// problems collects the problems Validate finds.
type problems []error

func (v *problems) add(path, format string, args ...any) {
	*v = append(*v, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// addRef adds a problem with a name that is not in the list at refersTo.
func (v *problems) addRef(refersTo, path, format string, args ...any) {
	*v = append(*v, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...), refersTo: refersTo})
}

// name checks that an entry's name is present and unique among seen.
func (v *problems) name(path, name, what string, seen map[string]int, i int) {
	if name == "" {
		v.add(path+".name", "required")
		return
	}
	if first, dup := seen[name]; dup {
		v.add(path+".name", "duplicate %s name %q (first at %ss[%d])", what, name, what, first)
		return
	}
	seen[name] = i
}

func (v *problems) listen(addr string) {
	if addr == "" {
		v.add("listen", "required (HOST:PORT)")
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add("listen", "%q is not HOST:PORT", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.add("listen", "%q has an invalid port (want 0-65535)", addr)
	}
}

func (v *problems) database(db string) {
	if db == "" {
		v.add("database", "required (sqlite://PATH or postgres://...)")
		return
	}
	scheme, rest, ok := strings.Cut(db, "://")
	switch {
	case !ok:
		// Not echoed: a value without "://" cannot be redacted reliably.
		v.add("database", "no scheme (want sqlite://PATH or postgres://...)")
	case scheme == "sqlite":
		if rest == "" {
			v.add("database", "sqlite:// needs a file path, e.g. sqlite://streamgate.db")
		}
	case scheme == "postgres" || scheme == "postgresql":
		if _, err := url.Parse(db); err != nil {
			v.add("database", "not a valid postgres URL")
		}
	default:
		v.add("database", "unsupported scheme %q (want sqlite:// or postgres://)", scheme)
	}
}

func (v *problems) nonNegative(path string, d Duration) {
	if d < 0 {
		v.add(path, "must not be negative, got %s", d)
	}
}

func (v *problems) provider(path string, p Provider) {
	switch {
	case p.Kind == "":
		v.add(path+".kind", "required (one of %s)", strings.Join(kinds, ", "))
	case !oneOf(p.Kind, kinds):
		v.add(path+".kind", "unknown kind %q (want one of %s)", p.Kind, strings.Join(kinds, ", "))
	}
	if p.Dialect != "" {
		switch {
		case p.Kind != "sim":
			v.add(path+".dialect", "only for kind sim (a provider of kind %s speaks its own API)", p.Kind)
		case !oneOf(p.Dialect, simDialects):
			v.add(path+".dialect", "unknown dialect %q (want one of %s)", p.Dialect, strings.Join(simDialects, ", "))
		}
	}
	if p.Responses && p.Kind != "openai" && p.Kind != "azure" && (p.Kind != "sim" || p.Dialect != "" && p.Dialect != "openai") {
		v.add(path+".responses", "only for kind openai or azure (or sim of dialect openai): a provider of kind %s does not speak the Responses API", cmp.Or(p.Dialect, p.Kind))
	}
	v.nonNegative(path+".health_check.interval", p.HealthCheck.Interval)
	v.nonNegative(path+".health_check.timeout", p.HealthCheck.Timeout)
	v.providerKeys(path, p)
	if p.Continuation != "" && !oneOf(p.Continuation, continuations) {
		v.add(path+".continuation", "unknown continuation %q (want one of %s)", p.Continuation, strings.Join(continuations, ", "))
	}
	v.cloud(path, p)
	if p.BaseURL == "" {
		if p.Kind != "sim" && p.Kind != "bedrock" && p.Kind != "vertex" && oneOf(p.Kind, kinds) {
			v.add(path+".base_url", "required for kind %s", p.Kind)
		}
		return
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(path+".base_url", "%s is not an absolute http(s) URL", redactURL(p.BaseURL))
		return
	}
	if p.HTTP2 && u.Scheme != "http" {
		v.add(path+".http2", "only for http:// base URLs (h2c); %s negotiates HTTP/2 by ALPN already", u.Scheme)
	}
	if p.CAFile != "" {
		if u.Scheme != "https" {
			v.add(path+".ca_file", "only for https:// base URLs; %s is not verified by certificates", u.Scheme)
		} else if _, err := LoadCAs(p.CAFile); err != nil {
			v.add(path+".ca_file", "%v", err)
		}
	}
}

// maxProviderKeys bounds a provider's api_keys (keypool.MaxKeys).
const maxProviderKeys = 64

func (v *problems) providerKeys(path string, p Provider) {
	if p.APIKeys == nil {
		return
	}
	if p.APIKey != "" {
		v.add(path+".api_keys", "give api_key or api_keys, not both")
	}
	switch n := len(p.APIKeys); {
	case n == 0:
		v.add(path+".api_keys", "empty (give at least one key, or api_key)")
	case n > maxProviderKeys:
		v.add(path+".api_keys", "%d keys, more than %d", n, maxProviderKeys)
	}
	names := map[string]int{}
	secrets := map[string]int{}
	for i, k := range p.APIKeys {
		kp := fmt.Sprintf("%s.api_keys[%d]", path, i)
		if k.Name == "" {
			v.add(kp+".name", "required (it names the key in metrics, logs and the ledger)")
		} else if first, dup := names[k.Name]; dup {
			v.add(kp+".name", "duplicate key name %q (first at api_keys[%d])", k.Name, first)
		} else {
			names[k.Name] = i
		}
		if k.Key == "" {
			v.add(kp+".key", "required")
		} else if first, dup := secrets[k.Key]; dup {
			v.add(kp+".key", "same secret as api_keys[%d]", first)
		} else {
			secrets[k.Key] = i
		}
		for _, n := range []struct {
			field string
			v     int
		}{{"rpm", k.RPM}, {"tpm", k.TPM}, {"max_streams", k.MaxStreams}, {"weight", k.Weight}} {
			if n.v < 0 {
				v.add(kp+"."+n.field, "must not be negative, got %d", n.v)
			}
		}
	}
}

// cloud checks the fields of the cloud kinds: each only where its kind
// reads it, and what each kind needs.
func (v *problems) cloud(path string, p Provider) {
	only := func(field string, set bool, kinds ...string) {
		if set && !oneOf(p.Kind, kinds) {
			v.add(path+"."+field, "only for kind %s (a provider of kind %s does not read it)", strings.Join(kinds, " or "), p.Kind)
		}
	}
	only("region", p.Region != "", "bedrock", "vertex")
	only("project", p.Project != "", "vertex")
	only("credentials_file", p.CredentialsFile != "", "vertex")
	only("api_version", p.APIVersion != "", "azure")
	only("aws", p.AWS != nil, "bedrock")
	only("entra", p.Entra != nil, "azure")
	switch p.Kind {
	case "bedrock":
		if p.Region == "" {
			v.add(path+".region", "required for kind bedrock (the region signed requests are scoped to, e.g. us-east-1)")
		}
		if p.AWS != nil {
			if p.APIKey != "" || p.APIKeys != nil {
				v.add(path+".aws", "give aws (SigV4) or api_key (a Bedrock API key), not both")
			}
			if p.AWS.AccessKeyID == "" || p.AWS.SecretAccessKey == "" {
				v.add(path+".aws", "access_key_id and secret_access_key are both required")
			}
		}
	case "vertex":
		if p.Project == "" {
			v.add(path+".project", "required for kind vertex (the Google Cloud project)")
		}
		if p.Region == "" {
			v.add(path+".region", "required for kind vertex (global, or a region such as us-east5)")
		}
		if p.APIKey != "" || p.APIKeys != nil {
			v.add(path+".api_key", "kind vertex authenticates with credentials_file (or application-default credentials), not an API key")
		}
		if p.CredentialsFile != "" {
			if _, err := os.Stat(p.CredentialsFile); err != nil {
				v.add(path+".credentials_file", "%v", err)
			}
		}
	case "azure":
		switch e := p.Entra; {
		case e != nil && (p.APIKey != "" || p.APIKeys != nil):
			v.add(path+".entra", "give entra (an Entra ID bearer token) or api_key, not both")
		case e != nil:
			for _, f := range []struct{ name, v string }{{"tenant_id", e.TenantID}, {"client_id", e.ClientID}, {"client_secret", e.ClientSecret}} {
				if f.v == "" {
					v.add(path+".entra."+f.name, "required (the app registration's client-credentials grant)")
				}
			}
			if e.AuthorityHost != "" {
				if u, err := url.Parse(e.AuthorityHost); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
					v.add(path+".entra.authority_host", "%s is not an absolute http(s) URL", redactURL(e.AuthorityHost))
				}
			}
		case p.APIKey == "" && p.APIKeys == nil:
			v.add(path+".api_key", "required for kind azure (sent as the api-key header), or entra")
		}
	}
}

func (v *problems) model(path string, m Model, providers map[string]int, list []Provider) {
	if len(m.Routes) == 0 {
		v.add(path+".routes", "at least one route is required")
	}
	for j, r := range m.Routes {
		rp := fmt.Sprintf("%s.routes[%d]", path, j)
		if r.Provider == "" {
			v.add(rp+".provider", "required")
		} else if _, ok := providers[r.Provider]; !ok {
			names := make([]string, 0, len(list))
			for i, p := range list {
				if p.Name != "" && providers[p.Name] == i {
					names = append(names, fmt.Sprintf("%q", p.Name))
				}
			}
			v.addRef("providers", rp+".provider", "unknown provider %q (providers: %s)", r.Provider, strings.Join(names, ", "))
		}
		if r.Model == "" {
			v.add(rp+".model", "required (the model name the provider expects)")
		}
		if r.Weight < 0 {
			v.add(rp+".weight", "must not be negative, got %d", r.Weight)
		}
	}
	v.price(path+".price.input", m.Price.Input)
	v.price(path+".price.output", m.Price.Output)
	if p := m.Price.CachedInput; p != nil {
		v.price(path+".price.cached_input", *p)
	}
	if p := m.Price.CacheWrite; p != nil {
		v.price(path+".price.cache_write", *p)
	}
	if !oneOf(m.Strategy, strategies) {
		v.add(path+".strategy", "unknown strategy %q (want one of %s)", m.Strategy, strings.Join(strategies, ", "))
	}
	if m.Retries < 0 {
		v.add(path+".retries", "must not be negative, got %d", m.Retries)
	}
	if m.Hedge != nil {
		if _, _, err := m.Hedge.Delay(); err != nil {
			v.add(path+".hedge.after", "%v", err)
		}
		if b := m.Hedge.Budget; math.IsNaN(b) || b < 0 || b > 1 {
			v.add(path+".hedge.budget", "must be between 0 and 1, got %v", b)
		}
	}
	if m.ContextWindow < 0 {
		v.add(path+".context_window", "must not be negative, got %d", m.ContextWindow)
	}
	if m.MaxOutputTokens < 0 {
		v.add(path+".max_output_tokens", "must not be negative, got %d", m.MaxOutputTokens)
	}
	if !oneOf(m.ContextPolicy, contextPolicys) {
		v.add(path+".context_policy", "unknown policy %q (want one of %s)", m.ContextPolicy, strings.Join(contextPolicys, ", "))
	}
	v.smoothing(path+".smoothing", m.Smoothing)
	if m.Affinity != "" && !oneOf(m.Affinity, affinities) {
		v.add(path+".affinity", "unknown affinity %q (want one of %s)", m.Affinity, strings.Join(affinities, ", "))
	}
	if e := m.AffinityEpsilon; math.IsNaN(e) || math.IsInf(e, 0) || e < 0 {
		v.add(path+".affinity_epsilon", "must be a non-negative number, got %v", e)
	} else if e > 0 && (m.Affinity == "" || m.Affinity == "off") {
		v.add(path+".affinity_epsilon", "only with affinity session or prefix (affinity is off)")
	}
}

// affinities are the values of models[].affinity.
var affinities = []string{"session", "prefix", "off"}

func (v *problems) price(path string, p float64) {
	if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
		v.add(path, "must be a non-negative number of USD per 1M tokens, got %v", p)
	}
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// Delay parses After: a duration ("500ms") returns it, a percentile of the
// route's observed first-token latency ("p95", "p99.9") returns it in pct
// (0 < pct < 100). Exactly one of d and pct is non-zero when err is nil.
// An empty After is an error.
func (h Hedge) Delay() (d time.Duration, pct float64, err error) {
	a := h.After
	if a == "" {
		return 0, 0, errors.New("required (a duration such as 500ms, or a percentile such as p95)")
	}
	if num, ok := strings.CutPrefix(a, "p"); ok {
		pct, err := strconv.ParseFloat(num, 64)
		if err != nil || !(pct > 0 && pct < 100) {
			return 0, 0, fmt.Errorf("%q is not a percentile (want p1 to p99.9)", a)
		}
		return 0, pct, nil
	}
	d, err = time.ParseDuration(a)
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("%q is neither a positive duration (500ms) nor a percentile (p95)", a)
	}
	return d, 0, nil
}

// LoadCAs reads a PEM file of certificate authorities (a provider's
// ca_file). A file without one certificate is an error naming it.
func LoadCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
