package config

import (
	"fmt"
	"net/url"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// redactedMark replaces the hidden part of a secret.
const redactedMark = "(redacted)"

// Redact returns secret with all but a short prefix hidden, for logs and
// messages: "sk-proj-abc…" becomes "sk-p…(redacted)". The prefix is at most
// 4 characters and at most a quarter of the secret; secrets shorter than 8
// characters show no prefix at all ("(redacted)"). The empty string stays
// empty so an unset secret is visibly unset.
func Redact(secret string) string {
	if secret == "" {
		return ""
	}
	n := utf8.RuneCountInString(secret)
	show := min(n/4, 4)
	if n < 8 {
		show = 0
	}
	if show == 0 {
		return redactedMark
	}
	end := 0
	for i := 0; i < show; i++ {
		_, size := utf8.DecodeRuneInString(secret[end:])
		end += size
	}
	return secret[:end] + "…" + redactedMark
}

// redactURL hides the password of a URL such as postgres://u:pw@host/db
// (postgres://u:xxxxx@host/db). A
// value that does not parse is not shown at all, since it might be a secret
// put in the wrong place.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable, not shown)"
	}
	return u.Redacted() // the password becomes "xxxxx"
}

// Clone returns a deep copy of c: slices and the hedge are copied, so the
// copy can be changed without touching c (for reloads).
func (c *Config) Clone() *Config {
	out := *c
	out.Providers = append([]Provider(nil), c.Providers...)
	for i := range out.Providers {
		out.Providers[i].APIKeys = append([]ProviderKey(nil), out.Providers[i].APIKeys...)
		if a := out.Providers[i].AWS; a != nil {
			cp := *a
			out.Providers[i].AWS = &cp
		}
		if e := out.Providers[i].Entra; e != nil {
			cp := *e
			out.Providers[i].Entra = &cp
		}
	}
	out.Keys = append([]Key(nil), c.Keys...)
	for i := range out.Keys {
		out.Keys[i].Models = append([]string(nil), out.Keys[i].Models...)
		out.Keys[i].MCPTools = append([]string(nil), out.Keys[i].MCPTools...)
	}
	out.MCP = c.MCP.clone()
	out.Models = append([]Model(nil), c.Models...)
	out.OTel = c.OTel.clone()
	for i := range out.Models {
		m := &out.Models[i]
		m.Routes = append([]Route(nil), m.Routes...)
		if m.Hedge != nil {
			h := *m.Hedge
			m.Hedge = &h
		}
		if m.Smoothing != nil {
			sm := *m.Smoothing
			m.Smoothing = &sm
		}
	}
	return &out
}

// Redacted returns a deep copy of c that is safe to print: provider api
// keys and gateway keys are passed through Redact, and a password in the
// database URL or a base_url is replaced by "xxxxx".
func (c Config) Redacted() Config {
	out := c.Clone()
	for i := range out.Providers {
		out.Providers[i].APIKey = Redact(out.Providers[i].APIKey)
		for j := range out.Providers[i].APIKeys {
			out.Providers[i].APIKeys[j].Key = Redact(out.Providers[i].APIKeys[j].Key)
		}
		if out.Providers[i].BaseURL != "" {
			out.Providers[i].BaseURL = redactURL(out.Providers[i].BaseURL)
		}
		if a := out.Providers[i].AWS; a != nil {
			a.SecretAccessKey, a.SessionToken = Redact(a.SecretAccessKey), Redact(a.SessionToken)
		}
		if e := out.Providers[i].Entra; e != nil {
			e.ClientSecret = Redact(e.ClientSecret)
		}
	}
	for i := range out.Keys {
		out.Keys[i].Key = Redact(out.Keys[i].Key)
	}
	if out.Database != "" {
		out.Database = redactURL(out.Database)
	}
	out.AdminKey = Redact(out.AdminKey)
	if out.Redis != "" {
		out.Redis = redactURL(out.Redis)
	}
	out.OTel.redact() // header values, an endpoint's password
	out.MCP.redact()
	return *out
}

// String returns the redacted configuration as YAML, so printing a Config
// with fmt or slog never shows a secret.
func (c Config) String() string {
	r := c.Redacted()
	b, err := yaml.Marshal(&r)
	if err != nil {
		return fmt.Sprintf("config: %v", err)
	}
	return string(b)
}

// String shows p with its api key redacted.
func (p Provider) String() string {
	if len(p.APIKeys) > 0 {
		names := make([]string, len(p.APIKeys))
		for i, k := range p.APIKeys {
			names[i] = k.Name
		}
		return fmt.Sprintf("{name: %s, kind: %s, base_url: %s, api_keys: %v}",
			p.Name, p.Kind, redactURL(p.BaseURL), names)
	}
	return fmt.Sprintf("{name: %s, kind: %s, base_url: %s, api_key: %s}",
		p.Name, p.Kind, redactURL(p.BaseURL), Redact(p.APIKey))
}

// String shows k by its name only.
func (k ProviderKey) String() string { return k.Name }

// GoString is String, so %#v does not print the secret either.
func (k ProviderKey) GoString() string { return k.Name }

// GoString is String, so %#v does not print the api key either.
func (p Provider) GoString() string { return p.String() }

// String shows k with its secret redacted.
func (k Key) String() string {
	return fmt.Sprintf("{name: %s, key: %s, models: %v}", k.Name, Redact(k.Key), k.Models)
}

// GoString is String, so %#v does not print the secret either.
func (k Key) GoString() string { return k.String() }
