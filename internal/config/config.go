// Package config loads the gateway's YAML configuration: defaults, then the
// file (with ${ENV} expanded), then environment, then flags; Validate reports
// every problem at once. Secrets are shown redacted.
package config

import (
	"fmt"
	"time"
)

// Config is the whole gateway configuration (SPEC.md, "Config file").
type Config struct {
	Listen    string     `yaml:"listen"`
	Database  string     `yaml:"database"` // sqlite://PATH or postgres://...
	Timeouts  Timeouts   `yaml:"timeouts"`
	MaxBody   int64      `yaml:"max_body_bytes"` // request body limit; default 10 MiB
	Providers []Provider `yaml:"providers"`
	Keys      []Key      `yaml:"keys"`
	Models    []Model    `yaml:"models"`

	idx *index // name lookups; built by prepare, nil for a Config built in code
}

// Timeouts are the gateway's upstream timeouts. Zero disables one.
type Timeouts struct {
	Connect    Duration `yaml:"connect"`     // dial + TLS; default 5s
	FirstToken Duration `yaml:"first_token"` // request sent → first upstream event; default 30s
	Idle       Duration `yaml:"idle"`        // between upstream events; default 30s
	Total      Duration `yaml:"total"`       // whole request; default 0 (off) for streams
	NonStream  Duration `yaml:"non_stream"`  // a non-streaming answer, per attempt; default 10m
}

// Duration is a time.Duration written as "5s", "250ms" in YAML.
type Duration time.Duration

// Provider is one upstream.
type Provider struct {
	Name    string `yaml:"name"`
	Kind    string `yaml:"kind"` // openai | anthropic | gemini | sim
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
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
}

// Key is a static API key of the gateway.
type Key struct {
	Name   string   `yaml:"name"`
	Key    string   `yaml:"key"`
	Models []string `yaml:"models"` // models this key may use; empty = all
}

// Model is a name clients ask for and the routes that serve it.
type Model struct {
	Name          string  `yaml:"name"`
	Routes        []Route `yaml:"routes"`
	Price         Price   `yaml:"price"`
	Strategy      string  `yaml:"strategy"` // fallback (default) | weighted | least-inflight | lowest-latency
	Retries       int     `yaml:"retries"`
	Hedge         *Hedge  `yaml:"hedge"`
	ContinueOnCut bool    `yaml:"continue_on_cut"`
	ContextWindow int     `yaml:"context_window"`
	ContextPolicy string  `yaml:"context_policy"` // reject | trim
}

// Route is one provider/model pair that can serve a Model.
type Route struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	Weight   int    `yaml:"weight"`
}

// Price is USD per 1M tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// Hedge starts a second attempt when the first is slow (routing issue).
type Hedge struct {
	After  string  `yaml:"after"` // a duration or "p95"
	Budget float64 `yaml:"budget"`
}

// NotActedOn lists the fields set in c that this version accepts and
// validates but does not act on yet (routing strategies other than ordered
// fallback, retries, hedging, continuation, context windows, route
// weights), as "models[i].field" paths, so that serve can warn about each
// at start instead of silently ignoring it.
func (c *Config) NotActedOn() []string {
	var out []string
	for i, m := range c.Models {
		p := fmt.Sprintf("models[%d]", i)
		if m.Strategy != "" && m.Strategy != DefaultStrategy {
			out = append(out, p+".strategy")
		}
		if m.Retries != 0 {
			out = append(out, p+".retries")
		}
		if m.Hedge != nil {
			out = append(out, p+".hedge")
		}
		if m.ContinueOnCut {
			out = append(out, p+".continue_on_cut")
		}
		if m.ContextWindow != 0 {
			out = append(out, p+".context_window")
		}
		if m.ContextPolicy != "" && m.ContextPolicy != DefaultContextPolicy {
			out = append(out, p+".context_policy")
		}
		for j, r := range m.Routes {
			if r.Weight != 0 {
				out = append(out, fmt.Sprintf("%s.routes[%d].weight", p, j))
			}
		}
	}
	return out
}
