package bench

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/streamgate/streamgate/internal/config"
)

// LoadPrices reads model prices in USD per 1M tokens from path: either a
// gateway config file, whose models[].price are taken, or a YAML/JSON map
// {model: {input: 2.0, output: 8.0, cached_input: 0.5, cache_write: 2.5}}
// (the cache prices optional, as in the gateway's config). A file is a
// price map when it parses as plain YAML and has none of the gateway
// config's top-level fields.
//
// A gateway config is read by the gateway's own loader, the way
// "streamgate serve --config" reads it (${VAR} and ${VAR:-default} expanded
// with getenv, nil: every variable unset; every problem reported), except
// that key variables left unset do not matter: prices need no secret
// (config.LoadWithoutSecrets).
func LoadPrices(path string, getenv func(string) string) (map[string]Price, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) == nil && !isGatewayConfig(&doc) {
		return priceMap(path, &doc)
	}
	cfg, err := config.LoadWithoutSecrets(path, getenv)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	return modelPrices(cfg), nil
}

func modelPrices(c *config.Config) map[string]Price {
	out := make(map[string]Price, len(c.Models))
	for _, m := range c.Models {
		out[m.Name] = m.Price
	}
	return out
}

// isGatewayConfig reports whether the document is a mapping with one of
// the gateway config's top-level fields.
func isGatewayConfig(doc *yaml.Node) bool {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return false
	}
	fields := map[string]bool{}
	t := reflect.TypeFor[config.Config]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			fields[name] = true
		}
	}
	m := doc.Content[0]
	for i := 0; i < len(m.Content); i += 2 {
		if fields[m.Content[i].Value] {
			return true
		}
	}
	return false
}

// priceMap reads {model: {input: N, output: N, cached_input: N,
// cache_write: N}}, naming the line of the first problem.
func priceMap(path string, doc *yaml.Node) (map[string]Price, error) {
	bad := func(n *yaml.Node, format string, a ...any) error {
		return fmt.Errorf("prices %s:%d: %s (want {model: {input: N, output: N, cached_input: N, cache_write: N}} or a gateway config)", path, n.Line, fmt.Sprintf(format, a...))
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("prices %s: empty file", path)
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode || len(m.Content) == 0 {
		return nil, bad(m, "not a mapping of models")
	}
	out := map[string]Price{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		name, v := m.Content[i].Value, m.Content[i+1]
		if v.Kind != yaml.MappingNode {
			return nil, bad(v, "%s: not a mapping of input and output", name)
		}
		var p Price
		for j := 0; j+1 < len(v.Content); j += 2 {
			k, val := v.Content[j], v.Content[j+1]
			var dst *float64
			switch k.Value {
			case "input":
				dst = &p.Input
			case "output":
				dst = &p.Output
			case "cached_input":
				p.CachedInput = new(float64)
				dst = p.CachedInput
			case "cache_write":
				p.CacheWrite = new(float64)
				dst = p.CacheWrite
			default:
				return nil, bad(k, "%s: unknown field %q", name, k.Value)
			}
			if err := val.Decode(dst); err != nil || math.IsNaN(*dst) || math.IsInf(*dst, 0) || *dst < 0 {
				return nil, bad(val, "%s.%s: want a non-negative number of USD per 1M tokens, got %q", name, k.Value, val.Value)
			}
		}
		out[name] = p
	}
	return out, nil
}
