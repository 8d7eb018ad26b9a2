package bench

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testdata/readme-config.yaml is the example config of docs/configuration.md
// (once the README's), which the CLI's --prices test loads; it must stay the
// page's.
func TestReadmeConfigIsTheReadmes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Skipf("no docs/configuration.md next to the module: %v", err)
	}
	_, after, ok := bytes.Cut(doc, []byte("\n## Example\n"))
	_, after, ok2 := bytes.Cut(after, []byte("```yaml\n"))
	example, _, ok3 := bytes.Cut(after, []byte("```"))
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/configuration.md: no yaml block under \"## Example\"")
	}
	copied, err := os.ReadFile(filepath.Join("testdata", "readme-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(example, copied) {
		t.Errorf("testdata/readme-config.yaml differs from docs/configuration.md's example config; copy it again:\n%s", example)
	}
}

// A gateway config is read by the gateway's own loader: ${VAR} and
// ${VAR:-default} expanded from getenv, unknown fields rejected with their
// line; variables that only the keys and providers use may be unset.
func TestLoadPricesGatewayConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const head = "providers: [{name: s, kind: openai, base_url: \"http://127.0.0.1:9/v1\", api_key: ${PROVIDER_KEY}}]\nkeys: [{name: k, key: ${KEY}}]\n"
	keys := map[string]string{"PROVIDER_KEY": "sk-1", "KEY": "sg-1"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := maps.Clone(m)
		out[k] = v
		return out
	}
	tests := []struct {
		name, path string
		env        map[string]string
		model      string
		want       Price
		wantErr    string
	}{
		{"readme, variables unset", filepath.Join("testdata", "readme-config.yaml"), nil, "gpt-4.1", Price{Input: 2, Output: 8, CachedInput: usd(0.5)}, ""},
		{"readme, variables set", filepath.Join("testdata", "readme-config.yaml"),
			map[string]string{"OPENAI_API_KEY": "sk-1", "STREAMGATE_DEV_KEY": "sg-dev-1", "APP_KEY": "sg-app-1"}, "gpt-4.1", Price{Input: 2, Output: 8, CachedInput: usd(0.5)}, ""},
		{"price from the environment and a default", write("env.yaml", head+"models:\n  - {name: m, routes: [{provider: s, model: x}], price: {input: ${IN:-2.5}, output: ${OUT}}}\n"),
			with(keys, "OUT", "10"), "m", Price{Input: 2.5, Output: 10}, ""},
		{"price from the environment, keys unset", write("env2.yaml", head+"models:\n  - {name: m, routes: [{provider: s, model: x}], price: {input: 1, output: ${OUT}}}\n"),
			map[string]string{"OUT": "10"}, "m", Price{Input: 1, Output: 10}, ""},
		{"model name from an unset variable", write("name.yaml", head+"models:\n  - {name: \"${MODEL}\", routes: [{provider: s, model: x}], price: {input: 1, output: 2}}\n"),
			keys, "", Price{}, "MODEL"},
		{"model name from an unset variable, keys unset", write("name2.yaml", head+"models:\n  - {name: \"${MODEL}\", routes: [{provider: s, model: x}], price: {input: 1, output: 2}}\n"),
			nil, "", Price{}, "MODEL"},
		{"model name from a default", write("namedef.yaml", head+"models:\n  - {name: \"${MODEL:-mm}\", routes: [{provider: s, model: x}], price: {input: 1, output: 2}}\n"),
			keys, "mm", Price{Input: 1, Output: 2}, ""},
		// Unset keys do not touch the other variables' defaults.
		{"model name from a default, keys unset", write("namedef2.yaml", head+"models:\n  - {name: \"${MODEL:-mm}\", routes: [{provider: s, model: x}], price: {input: 1, output: 2}}\n"),
			nil, "mm", Price{Input: 1, Output: 2}, ""},
		{"unknown field", write("typo.yaml", head+"models:\n  - {name: m, routes: [{provider: s, model: x}], prcie: {input: 1, output: 2}}\n"),
			nil, "", Price{}, "typo.yaml:4: models[0].prcie"},
		{"bad price", write("neg.yaml", head+"models:\n  - {name: m, routes: [{provider: s, model: x}], price: {input: -1, output: 2}}\n"),
			nil, "", Price{}, "models[0].price.input"},
		{"price map", write("map.yaml", "m: {input: 1, output: 3}\n"), nil, "m", Price{Input: 1, Output: 3}, ""},
		{"price map with cache prices", write("mapcache.yaml", "m: {input: 3, output: 15, cached_input: 0.3, cache_write: 3.75}\n"), nil, "m",
			Price{Input: 3, Output: 15, CachedInput: usd(0.3), CacheWrite: usd(3.75)}, ""},
		{"price map with free cache reads", write("mapfree.yaml", "m: {input: 2, cached_input: 0}\n"), nil, "m", Price{Input: 2, CachedInput: usd(0)}, ""},
		{"price map with a bad cache price", write("mapbad.yaml", "m: {input: 2, cache_write: -1}\n"), nil, "", Price{}, "mapbad.yaml:1: m.cache_write"},
		{"config with cache prices", write("cache.yaml", head+"models:\n  - {name: m, routes: [{provider: s, model: x}], price: {input: 3, output: 15, cached_input: 0.3, cache_write: 3.75}}\n"),
			keys, "m", Price{Input: 3, Output: 15, CachedInput: usd(0.3), CacheWrite: usd(3.75)}, ""},
		{"bad price map", write("badmap.yaml", "m: {input: 1, outptu: 3}\n"), nil, "", Price{}, "badmap.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := LoadPrices(tt.path, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v (prices %v), want an error naming %q", err, ps, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := ps[tt.model]; !ok || !reflect.DeepEqual(got, tt.want) || len(ps) != 1 {
				t.Errorf("got %v, want only %s: %+v", ps, tt.model, tt.want)
			}
		})
	}
}

func usd(v float64) *float64 { return &v }
