// Package config loads the gateway's YAML configuration: defaults, then the
// file (with ${ENV} expanded), then environment, then flags; Validate reports
// every problem at once. Secrets are shown redacted.
package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Config is the whole gateway configuration (SPEC.md, "Config file").
type Config struct {
	Listen   string   `yaml:"listen"`
	Database string   `yaml:"database"` // sqlite://PATH or postgres://...
	Timeouts Timeouts `yaml:"timeouts"`
	MaxBody  int64    `yaml:"max_body_bytes"` // request body limit; default 10 MiB
	// MaxDecodingBytes bounds the request bytes the gateway reads and
	// decodes at once, over all requests: a body larger than 64 KiB waits
	// for room (up to 1 s) and is then refused with 503 and Retry-After.
	// Default 16 MiB; at least max_body_bytes.
	MaxDecodingBytes int64 `yaml:"max_decoding_bytes"`
	// KeepAlive is the interval of SSE keep-alive comments while a stream
	// waits: for its first token, and in a long gap mid-stream (a thinking
	// model), so that idle timeouts of load balancers do not end it.
	// Default 15s; 0s sends none.
	KeepAlive Duration `yaml:"keepalive"`
	// Redis is a redis:// (or rediss://) URL, or a Redis Cluster's
	// redis+cluster://host:port,host:port (redisguard.ClusterScheme): the
	// keys' rate limits and budgets are then shared by every replica using
	// it. Empty: limits per replica.
	Redis string `yaml:"redis"`
	// TrustedProxies are the CIDRs (or single addresses) of the reverse
	// proxies in front of the gateway: from a peer among them the client's
	// address is read from X-Forwarded-For (its right-most address not
	// among them), for logs and the wrong-admin-key throttle. Empty: the
	// peer's address, whatever the headers say.
	TrustedProxies []string `yaml:"trusted_proxies,omitempty"`
	// Replica names this replica in /readyz, /healthz, the admin API and
	// the dashboard. Empty: the host name.
	Replica string `yaml:"replica,omitempty"`
	// AdminKey guards /admin/*; empty means the admin API is off. It is
	// also the login of the dashboard.
	AdminKey  string     `yaml:"admin_key"`
	Dashboard Dashboard  `yaml:"dashboard"`
	Limits    Limits     `yaml:"limits"`
	Providers []Provider `yaml:"providers"`
	// Teams are budgets and limits shared by several keys (a key's team).
	Teams     []Team    `yaml:"teams,omitempty"`
	Keys      []Key     `yaml:"keys"`
	Models    []Model   `yaml:"models"`
	OTel      *OTel     `yaml:"otel"` // traces over OTLP/HTTP; nil: off (see otel.go)
	Responses Responses `yaml:"responses"`
	// MCP are the MCP servers served at /mcp (see mcp.go).
	MCP MCP `yaml:"mcp,omitempty"`

	idx *index // name lookups; built by prepare, nil for a Config built in code
}

// Timeouts are the gateway's upstream timeouts. Zero disables one.
type Timeouts struct {
	Connect    Duration `yaml:"connect"`     // dial + TLS; default 5s
	FirstToken Duration `yaml:"first_token"` // request sent → first upstream event; default 30s
	Idle       Duration `yaml:"idle"`        // between upstream events; default 30s
	Total      Duration `yaml:"total"`       // whole request, streams included; default 30m; 0 is off
	NonStream  Duration `yaml:"non_stream"`  // a non-streaming answer, per attempt; default 10m
	// ClientWrite bounds each write of a stream to the client (nginx's
	// send_timeout): a client that does not read for this long is gone;
	// default 30s, 0 is off.
	ClientWrite Duration `yaml:"client_write"`
	// RequestBody bounds reading a request's body, from the end of its
	// headers (net/http's ReadTimeout, nginx's client_body_timeout): a
	// client that drips its body is answered 408 and its connection
	// closed; default 60s, 0 is off. A request refused before its body is
	// read (no key, a wrong key, a body over max_body_bytes) is answered
	// at once, its body left unread and its connection closed.
	RequestBody Duration `yaml:"request_body"`
}

// Dashboard is the `dashboard:` block of the live dashboard at /dashboard.
type Dashboard struct {
	// Open serves the dashboard to anyone who reaches the gateway, with no
	// credential asked. false (the default): a login with admin_key, or
	// the one-time link `streamgate serve` prints on its embedded default,
	// wherever the gateway listens and whatever the request's Host.
	Open bool `yaml:"open"`
}

// Limits is admission control: concurrent requests (streaming or not) the
// gateway serves at once, in all and per key. A request over a limit waits
// up to QueueWait for a slot, then gets 503 (gateway) or 429 (key) with
// Retry-After. Zero means no limit.
type Limits struct {
	MaxStreams       int      `yaml:"max_streams"`         // for the whole gateway
	MaxStreamsPerKey int      `yaml:"max_streams_per_key"` // for each key, unless the key sets its own
	QueueWait        Duration `yaml:"queue_wait"`          // longest wait for a slot; default 0 (refuse at once)
}

// Responses is the `responses:` block: the state of POST /v1/responses.
type Responses struct {
	// StoreRetention is how long a stored response (store: true, the
	// default) is kept in the database after it was created: older ones
	// are not found and are purged periodically. Default 720h (30 days,
	// as OpenAI keeps them); 0s means the default. A client that wants
	// nothing kept sends store: false.
	StoreRetention Duration `yaml:"store_retention"`
	// BuiltinTools is what a request's built-in tools (web_search,
	// file_search, …) do on a route that cannot run them, one that
	// translates the Responses API (a route that passes it through gets
	// them as sent): BuiltinDrop ("" too, the default) leaves them out
	// (web_search becomes the provider's own search tool where it has
	// one) and names them in X-Streamgate-Dropped-Tools; BuiltinReject
	// refuses the request there with 400 naming the tool.
	BuiltinTools string `yaml:"builtin_tools"`
	// WebSocket is OpenAI's WebSocket mode of the Responses API: GET
	// /v1/responses with an upgrade (what Codex's built-in provider tries
	// first).
	WebSocket WebSocket `yaml:"websocket"`
}

// WebSocket is the `responses: websocket:` block.
type WebSocket struct {
	// Enabled serves the upgrade; nil (absent) means true. false: an
	// upgrade is answered 426, so a client falls back to HTTP at once.
	Enabled *bool `yaml:"enabled,omitempty"`
	// Idle closes a socket on which no response runs and no frame came for
	// this long; 0s means DefaultWebSocketIdle.
	Idle Duration `yaml:"idle"`
	// MaxLifetime is the longest a socket lives (OpenAI's is 60 minutes):
	// past it, the response running ends, and the next response.create is
	// answered with the error websocket_connection_limit_reached and the
	// socket closed; 0s means DefaultWebSocketLifetime.
	MaxLifetime Duration `yaml:"max_lifetime"`
}

// On reports whether WebSocket mode is on (Enabled absent or true).
func (w WebSocket) On() bool { return w.Enabled == nil || *w.Enabled }

// Defaults of responses.websocket.
const (
	DefaultWebSocketIdle     = 10 * time.Minute
	DefaultWebSocketLifetime = 60 * time.Minute
)

// Values of responses.builtin_tools.
const (
	BuiltinDrop   = "drop"
	BuiltinReject = "reject"
)

// DefaultStoreRetention is responses.store_retention's default.
const DefaultStoreRetention = 30 * 24 * time.Hour

// Duration is a time.Duration written as "5s", "250ms" in YAML.
type Duration time.Duration

// Provider is one upstream.
type Provider struct {
	Name    string `yaml:"name"`
	Kind    string `yaml:"kind"` // openai | anthropic | gemini | sim | bedrock | vertex | azure
	BaseURL string `yaml:"base_url"`
	// Region is the cloud region of kind bedrock (required unless
	// base_url is given: the endpoint is bedrock-runtime.{region}) and
	// vertex ("global" or a region such as us-east5).
	Region string `yaml:"region"`
	// Project is the Google Cloud project of kind vertex (required).
	Project string `yaml:"project"`
	// CredentialsFile is kind vertex's Google credentials JSON (a service
	// account's key, or gcloud's application-default credentials); empty:
	// GOOGLE_APPLICATION_CREDENTIALS, then gcloud's default file.
	CredentialsFile string `yaml:"credentials_file"`
	// APIVersion is kind azure's api-version: requests go to
	// /openai/deployments/{route model}/…?api-version=; empty: the v1 path
	// /openai/v1/… with the route's model (the deployment) in the body.
	APIVersion string `yaml:"api_version"`
	// AWS are kind bedrock's static credentials, signed with SigV4; with
	// neither aws nor api_key (a Bedrock API key, sent as a bearer token)
	// the environment's AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the
	// shared credentials file are read at start.
	AWS *AWSKeys `yaml:"aws,omitempty"`
	// Entra is kind azure's Microsoft Entra ID app registration: its
	// client-credentials grant's token is sent as Authorization: Bearer,
	// instead of an api_key.
	Entra  *EntraApp `yaml:"entra,omitempty"`
	APIKey string    `yaml:"api_key"`
	// APIKeys is a pool of the provider's API keys, instead of APIKey:
	// each attempt takes the least-loaded key its limits allow, a 429
	// benches only that key until its Retry-After, a 401/403 disables
	// only that key (see ProviderKey).
	APIKeys []ProviderKey `yaml:"api_keys,omitempty"`
	// Dialect is the API a "kind: sim" provider is spoken to in: openai
	// (the default), anthropic or gemini; the in-process simulator serves
	// all three. Only for kind sim.
	Dialect string `yaml:"dialect"`
	// HTTP2 speaks HTTP/2 cleartext with prior knowledge (h2c) to an http://
	// base_url (or to the in-process simulator of kind sim): many streams
	// share a few connections. Only meaningful for http:// URLs (https://
	// negotiates HTTP/2 by ALPN already), so it is an error with https://.
	// false (the default) speaks HTTP/1.1, one connection per open stream.
	HTTP2 bool `yaml:"http2"`
	// CAFile is a PEM file of the certificate authorities this provider's
	// https:// base_url is verified against, in place of the system's: a
	// private upstream (vLLM behind an internal CA, the simulator's --tls).
	// Only with an https:// base_url.
	CAFile string `yaml:"ca_file"`
	// Continuation is how a stream cut mid-answer is continued by this
	// provider (a model's continue_on_cut): "prefill" sends the text so
	// far as a final assistant message the model continues (Anthropic's
	// prefill, the simulator), "continue_final_message" does the same with
	// vLLM's continue_final_message flag, "prompt" sends the text so far
	// as an assistant message and asks in a user message to continue (text
	// the answer repeats is not removed). Empty means the kind's: prefill
	// for anthropic and sim, prompt for openai and gemini. A request that
	// asks for thinking (a thinking object not disabled, a reasoning_effort
	// other than none) is continued in the prompt mode whatever this says:
	// Anthropic refuses prefill with thinking on.
	Continuation string `yaml:"continuation"`
	// Responses: the upstream serves OpenAI's Responses API itself
	// (POST {base_url}/responses, as OpenAI does), so /v1/responses
	// requests routed to it are passed through as sent (only the model
	// replaced, max_output_tokens lowered by the context guard) and its
	// events relayed as they come; built-in tools (web_search, …) can be
	// served only by such a route. Only for kind openai, and kind sim of
	// dialect openai (the simulator speaks it). false: /v1/responses
	// requests are translated into chat requests for it.
	Responses bool `yaml:"responses"`
	// HealthCheck is the active check of this provider's upstream while it
	// is ejected (see HealthCheck); on by default.
	HealthCheck HealthCheck `yaml:"health_check"`
}

// AWSKeys are AWS credentials (providers[].aws).
type AWSKeys struct {
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key"`
	SessionToken    string `yaml:"session_token"`
}

// EntraApp is a Microsoft Entra ID app registration (providers[].entra):
// the client-credentials grant of ClientID and ClientSecret in TenantID,
// for the scope https://cognitiveservices.azure.com/.default, at
// {AuthorityHost}/{TenantID}/oauth2/v2.0/token. The token is cached until
// 5 minutes before it expires, one grant in flight.
type EntraApp struct {
	TenantID     string `yaml:"tenant_id"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// AuthorityHost is the Entra endpoint; empty is
	// https://login.microsoftonline.com (another cloud's, or a test's).
	AuthorityHost string `yaml:"authority_host"`
}

// ProviderKey is one key of a provider's pool (providers[].api_keys).
type ProviderKey struct {
	// Name is the key's name in /admin/routes, metrics, logs and the
	// ledger; never the secret.
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
	// RPM and TPM are the provider's limits on this key, counted by the
	// gateway (shared by every replica through redis); 0: none.
	RPM int `yaml:"rpm"`
	TPM int `yaml:"tpm"`
	// MaxStreams bounds the key's requests in flight on this replica; 0:
	// none.
	MaxStreams int `yaml:"max_streams"`
	// Weight is the key's share of the load against the others; 0 means 1.
	Weight int `yaml:"weight"`
}

// Active health check defaults, used where HealthCheck leaves a field zero.
const (
	DefaultHealthCheckInterval = 5 * time.Second
	DefaultHealthCheckTimeout  = 2 * time.Second
)

// HealthCheck is a provider's active health check: while its upstream is
// ejected (consecutive failures opened the circuit of every route on it),
// the gateway sends one cheap request every Interval (GET {base_url}/models
// for kind openai, GET /v1/models for anthropic, the models list for
// gemini; no tokens spent), and the first 2xx answer readmits the
// upstream. A healthy upstream is never checked: requests are its check.
// The zero value is on, with the defaults above.
type HealthCheck struct {
	// Interval between checks of an ejected upstream; 0 means
	// DefaultHealthCheckInterval.
	Interval Duration `yaml:"interval"`
	// Timeout of one check; 0 means DefaultHealthCheckTimeout (and never
	// more than Interval).
	Timeout Duration `yaml:"timeout"`
	// Disabled turns the check off: an ejected upstream is readmitted only
	// by a request's success (a probe once its window ends, or panic
	// routing when every route of a model is ejected).
	Disabled bool `yaml:"disabled"`
}

// Every returns the interval and the timeout of the check with their
// defaults, the timeout at most the interval; false when it is disabled.
func (h HealthCheck) Every() (interval, timeout time.Duration, on bool) {
	if h.Disabled {
		return 0, 0, false
	}
	interval = cmp.Or(h.Interval.D(), DefaultHealthCheckInterval)
	timeout = min(cmp.Or(h.Timeout.D(), DefaultHealthCheckTimeout), interval)
	return interval, timeout, true
}

// Key is a static API key of the gateway.
type Key struct {
	Name   string   `yaml:"name"`
	Key    string   `yaml:"key"`
	Models []string `yaml:"models"` // models this key may use; empty = all
	// MaxStreams bounds the key's concurrent requests; 0 means
	// limits.max_streams_per_key.
	MaxStreams int `yaml:"max_streams"`
	// RPM and TPM bound the key's requests and tokens per minute (a
	// sliding minute; shared by every replica through redis); 0: none.
	RPM int `yaml:"rpm"`
	TPM int `yaml:"tpm"`
	// BudgetUSD is what the key may spend per BudgetPeriod (month, the
	// default, day or total), from the models' prices; 0: no budget.
	BudgetUSD    float64 `yaml:"budget_usd"`
	BudgetPeriod string  `yaml:"budget_period"`
	// Team is the name of the key's team (teams:, or a team of the
	// database, `streamgate teams`): its requests count against the
	// team's limits and budget too. Empty: none.
	Team string `yaml:"team,omitempty"`
	// ModelBudgets are the key's budgets for single models, beside its
	// own: a request for such a model is admitted only while both allow.
	ModelBudgets []ModelBudget `yaml:"model_budgets,omitempty"`
	// MCPTools are globs ('*': any run of characters) over the tools the
	// key may list and call at /mcp, named server__tool ("docs__*",
	// "fs__read_file"); empty: every tool of every MCP server.
	MCPTools []string `yaml:"mcp_tools,omitempty"`
}

// ModelBudget is a key's budget for one model.
type ModelBudget struct {
	Model        string  `yaml:"model"`
	BudgetUSD    float64 `yaml:"budget_usd"`
	BudgetPeriod string  `yaml:"budget_period"` // month (default), day or total
}

// Team is a set of limits shared by every key that names it: a request of
// any of them is admitted only while its key's limits and its team's
// allow it. RPM, TPM and the budget are shared across replicas through
// redis, as a key's are; MaxStreams is per replica, as a key's is. Zero
// values mean no limit.
type Team struct {
	Name         string  `yaml:"name"`
	BudgetUSD    float64 `yaml:"budget_usd"`
	BudgetPeriod string  `yaml:"budget_period"` // month (default), day or total
	RPM          int     `yaml:"rpm"`
	TPM          int     `yaml:"tpm"`
	MaxStreams   int     `yaml:"max_streams"`
}

// Model is a name clients ask for and the routes that serve it.
type Model struct {
	Name string `yaml:"name"`
	// Aliases are other names a request's model may use for this model:
	// exact names ("claude-opus-4-8") and globs where '*' stands for any
	// run of characters, '/' included ("claude-*", "*-mini"). A request's
	// model resolves to the model of that exact name, else of that exact
	// alias, else of the most specific matching glob (see
	// Config.Resolve). The resolved model is what routing, a key's models,
	// prices, metrics and the ledger see; the alias itself is never a
	// metric label. Two models may not share an alias, and an alias may
	// not be a model's name.
	Aliases  []string `yaml:"aliases,omitempty"`
	Routes   []Route  `yaml:"routes"`
	Price    Price    `yaml:"price"`
	Strategy string   `yaml:"strategy"` // fallback (default) | weighted | least-inflight | lowest-latency
	// Affinity keeps a conversation on one (route, provider key) target
	// while it is available, so the provider's prompt cache stays warm:
	// "session" (an explicit session id, else the prompt's prefix),
	// "prefix" (the prompt's prefix only) or "off" (the default; the
	// strategy places every request).
	Affinity string `yaml:"affinity"`
	// AffinityEpsilon bounds the load of an affinity target: none above
	// (1 + ε) × its share of the requests in flight; 0 means 0.25.
	AffinityEpsilon float64 `yaml:"affinity_epsilon"`
	Retries         int     `yaml:"retries"`
	Hedge           *Hedge  `yaml:"hedge"`
	ContinueOnCut   bool    `yaml:"continue_on_cut"`
	ContextWindow   int     `yaml:"context_window"`
	// MaxOutputTokens is the most output tokens the model gives per answer:
	// a larger max_tokens is lowered to it. 0 means unknown.
	MaxOutputTokens int    `yaml:"max_output_tokens"`
	ContextPolicy   string `yaml:"context_policy"` // reject | trim
	// Smoothing re-chunks the model's streams on word boundaries; nil is off.
	Smoothing *Smoothing `yaml:"smoothing"`
}

// Route is one provider/model pair that can serve a Model.
type Route struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	Weight   int    `yaml:"weight"`
}

// Price is USD per 1M tokens. Input is the price of a fresh prompt token,
// Output of an output token (reasoning tokens included). CachedInput is
// the price of a prompt token read from the provider's prompt cache
// (OpenAI's cached_tokens, Anthropic's cache_read_input_tokens, Gemini's
// cachedContentTokenCount), CacheWrite of one written to it (Anthropic's
// cache_creation_input_tokens); nil (not configured) means Input's price.
type Price struct {
	Input       float64  `yaml:"input"`
	Output      float64  `yaml:"output"`
	CachedInput *float64 `yaml:"cached_input"`
	CacheWrite  *float64 `yaml:"cache_write"`
}

// CacheUnpriced reports whether p bills cache reads and writes at the
// input price for want of cache prices while input costs something: input
// above 0, neither cached_input nor cache_write configured. Every provider
// kind can report cache reads, so such a model is likely billed above what
// the provider charges (a cache read costs 0.1 to 0.5 times the input
// price at Anthropic, OpenAI and Gemini).
func (p Price) CacheUnpriced() bool {
	return p.Input > 0 && p.CachedInput == nil && p.CacheWrite == nil
}

// Hedge starts a second attempt when the first is slow (routing issue).
type Hedge struct {
	After  string  `yaml:"after"` // a duration or "p95"
	Budget float64 `yaml:"budget"`
}

// ParsePrefix reads one trusted_proxies entry: a CIDR (10.0.0.0/8,
// fd00::/8) or a single address (a /32 or /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (e.g. 10.0.0.0/8) or an IP address", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (e.g. 10.0.0.0/8) or an IP address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
