package bench

import (
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

// LoadPrices reads model prices in USD per 1M tokens from a YAML or JSON
// file: either a map {model: {input: 2.0, output: 8.0}} or a gateway config
// file, whose models[].price are taken.
func LoadPrices(path string) (map[string]Price, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	var gw struct {
		Models []struct {
			Name  string `yaml:"name"`
			Price *Price `yaml:"price"`
		} `yaml:"models"`
	}
	out := map[string]Price{}
	if yaml.Unmarshal(b, &gw) == nil && len(gw.Models) > 0 {
		for _, m := range gw.Models {
			if m.Price != nil {
				out[m.Name] = *m.Price
			}
		}
		return out, nil
	}
	if err := yaml.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("prices %s: want {model: {input: N, output: N}} or a gateway config: %w", path, err)
	}
	return out, nil
}
