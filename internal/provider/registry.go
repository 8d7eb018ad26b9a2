package provider

import (
	"crypto/x509"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Config is what an adapter gets to build a Provider: one providers[]
// entry of the config file, with the gateway's connect timeout.
type Config struct {
	Name           string // the provider's name in the config
	Kind           string // the kind it was registered under
	BaseURL        string // as the provider's docs give it
	APIKey         string // "" sends none
	HTTP2          bool   // h2c by prior knowledge to an http:// base URL
	ConnectTimeout time.Duration
	// RootCAs verify an https:// base URL in place of the system's pool
	// (the config's ca_file, read by config.LoadCAs); nil: the system's.
	RootCAs *x509.CertPool
	// Responses: the upstream serves OpenAI's Responses API itself
	// (providers[].responses), for the adapters that can pass it through
	// (kind openai); others ignore it.
	Responses bool
	// Cloud is what a cloud kind (bedrock, vertex, azure) needs beyond a
	// base URL and a key; other kinds ignore it.
	Cloud Cloud
}

// Cloud is the configuration of a cloud provider kind (providers[].region,
// .project, .credentials_file, .api_version, .aws).
type Cloud struct {
	Region          string // bedrock, vertex
	Project         string // vertex
	CredentialsFile string // vertex: a service-account or authorized-user JSON; "" finds ADC
	APIVersion      string // azure: "" uses the v1 path
	// AWS static credentials (bedrock); empty: the environment's, then
	// the shared credentials file.
	AWSAccessKeyID, AWSSecretAccessKey, AWSSessionToken string
	// Entra ID client credentials (azure): the token is sent as a bearer
	// instead of APIKey when EntraClientID is set. EntraAuthority is the
	// authority host ("" is https://login.microsoftonline.com).
	EntraTenantID, EntraClientID, EntraClientSecret, EntraAuthority string
	// Getenv reads the environment for default credentials; nil is os.Getenv.
	Getenv func(string) string
}

// Factory builds a Provider from its Config.
type Factory func(Config) (Provider, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a provider kind available to New. Adapters call it from an
// init function, so the gateway lists no kinds itself: importing an adapter
// package is what makes its kind usable. Registering a kind twice panics.
func Register(kind string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[kind]; dup {
		panic("provider: kind " + kind + " registered twice")
	}
	registry[kind] = f
}

// Kinds returns the registered kinds, sorted.
func Kinds() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// New builds the Provider of cfg.Kind.
func New(cfg Config) (Provider, error) {
	registryMu.RLock()
	f, ok := registry[cfg.Kind]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("kind %q is not supported by this version (supported: %v)", cfg.Kind, Kinds())
	}
	return f(cfg)
}
