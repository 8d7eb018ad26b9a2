package config

import (
	"strings"
	"testing"
)

// aliasConfig is validConfig with three models and aliases.
func aliasConfig() *Config {
	c := validConfig()
	c.Keys[0].Models = nil
	m := c.Models[0]
	m.Hedge = nil
	opus, haiku, gpt := m, m, m
	opus.Name, opus.Aliases = "opus", []string{"claude-*", "claude-opus-4-8"}
	haiku.Name, haiku.Aliases = "haiku", []string{"claude-haiku-*", "*-haiku"}
	gpt.Name, gpt.Aliases = "gpt", []string{"gpt-*", "o*", "codex-*"}
	c.Models = append(c.Models, opus, haiku, gpt)
	return c
}

func TestValidateAliases(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		want   string // "" for a valid config
	}{
		{"valid", func(c *Config) {}, ""},
		{"catch-all glob", func(c *Config) { c.Models[0].Aliases = []string{"*"} }, ""},
		{"slash in glob", func(c *Config) { c.Models[0].Aliases = []string{"openai/*"} }, ""},
		{"same alias in two models", func(c *Config) { c.Models[3].Aliases = append(c.Models[3].Aliases, "claude-opus-4-8") },
			`models[3].aliases[3]: "claude-opus-4-8" is an alias of models[1] (opus) already: an alias names one model`},
		{"same glob in two models", func(c *Config) { c.Models[2].Aliases[0] = "claude-*" },
			`models[2].aliases[0]: "claude-*" is an alias of models[1] (opus) already: an alias names one model`},
		{"alias twice in a model", func(c *Config) { c.Models[1].Aliases = append(c.Models[1].Aliases, "claude-*") },
			`models[1].aliases[2]: "claude-*" is listed twice (aliases[0])`},
		{"alias is a model name", func(c *Config) { c.Models[1].Aliases[1] = "gpt" },
			`models[1].aliases[1]: "gpt" is the name of models[3]: a model's name always resolves to that model, so this alias would never apply`},
		{"empty alias", func(c *Config) { c.Models[1].Aliases[1] = "" }, "models[1].aliases[1]: empty alias"},
		{"question mark", func(c *Config) { c.Models[1].Aliases[0] = "claude-?" },
			`models[1].aliases[0]: "claude-?" has '?': only '*' is a wildcard (any run of characters), other glob syntax is not supported`},
		{"character class", func(c *Config) { c.Models[3].Aliases[1] = "o[134]*" },
			`models[3].aliases[1]: "o[134]*" has '[': only '*' is a wildcard (any run of characters), other glob syntax is not supported`},
		{"double star", func(c *Config) { c.Models[1].Aliases[0] = "claude-**" },
			`models[1].aliases[0]: "claude-**" has "**" (one '*' matches any run of characters, '/' included)`},
		{"space", func(c *Config) { c.Models[1].Aliases[0] = "claude *" }, `models[1].aliases[0]: "claude *" has a space or control character`},
		{"key names an alias", func(c *Config) { c.Keys[0].Models = []string{"claude-opus-4-8"} },
			`keys[0].models[0]: "claude-opus-4-8" is an alias of model "opus": name the model (a key allowed a model may use its aliases)`},
		{"every problem at once", func(c *Config) {
			c.Models[1].Aliases = []string{"", "a?"}
			c.Models[2].Aliases = []string{"gpt-*"}
		}, "models[1].aliases[0]: empty alias\n" +
			`models[1].aliases[1]: "a?" has '?': only '*' is a wildcard (any run of characters), other glob syntax is not supported` + "\n" +
			`models[3].aliases[0]: "gpt-*" is an alias of models[2] (haiku) already: an alias names one model`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := aliasConfig()
			tt.change(c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	c := aliasConfig()
	routes := c.Models[0].Routes
	c.Models = append(c.Models, Model{Name: "claude-sonnet-9", Routes: routes},
		Model{Name: "tie-a", Aliases: []string{"x*", "q*r*"}, Routes: routes},
		Model{Name: "tie-b", Aliases: []string{"*z", "*qr"}, Routes: routes},
		Model{Name: "any", Aliases: []string{"*"}, Routes: routes})
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, want string }{
		{"gpt-4.1", "gpt-4.1"},                 // a name
		{"claude-sonnet-9", "claude-sonnet-9"}, // a name wins over the glob claude-*
		{"claude-opus-4-8", "opus"},            // an exact alias
		{"claude-opus-5", "opus"},              // claude-*
		{"claude-haiku-4-5-20251001", "haiku"}, // claude-haiku-* (13 literal) over claude-* (7)
		{"claude-3-5-haiku", "opus"},           // claude-* (7) over *-haiku (6)
		{"mini-haiku", "haiku"},                // *-haiku
		{"gpt-6.2-sol", "gpt"},                 // gpt-*
		{"gpt-", "gpt"},                        // '*' matches the empty run
		{"o3-mini", "gpt"},                     // o*
		{"codex-mini-latest", "gpt"},           // codex-*
		{"claude-opus/x", "opus"},              // '*' matches '/'
		{"xz", "tie-a"},                        // x* and *z: 1 literal, 1 '*' each: the model listed first
		{"az", "tie-b"},                        // *z only
		{"qrqr", "tie-b"},                      // q*r* and *qr: 2 literal each, *qr has fewer '*'
		{"gemini-2.5-pro", "any"},              // the catch-all, least specific
		{"CLAUDE-opus-4-8", "any"},             // names are case-sensitive
		{"claude", "any"},                      // claude-* needs its dash
	}
	for _, tt := range tests {
		m, ok := c.Resolve(tt.name)
		if !ok || m.Name != tt.want {
			t.Errorf("Resolve(%q): got %v %v, want %s", tt.name, m, ok, tt.want)
		}
	}
	// Without the catch-all, a name nothing matches is unknown.
	c.Models = c.Models[:len(c.Models)-1]
	if m, ok := c.Resolve("gemini-2.5-pro"); ok {
		t.Errorf("Resolve(gemini-2.5-pro): got %s, want not found", m.Name)
	}
}

func TestParseAliases(t *testing.T) {
	yaml := `providers: [{name: sim, kind: sim}]
models:
  - name: opus
    aliases: ["claude-*", "claude-opus-4-8"]
    routes: [{provider: sim, model: sim-fast}]
  - name: haiku
    aliases: ["claude-haiku-*", "gpt?"]
    routes: [{provider: sim, model: sim-fast}]
`
	_, err := Parse("c.yaml", []byte(yaml), nil)
	want := `c.yaml:7: models[1].aliases[1]: "gpt?" has '?': only '*' is a wildcard (any run of characters), other glob syntax is not supported`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	c, err := Parse("c.yaml", []byte(strings.Replace(yaml, `"gpt?"`, `"gpt-*"`, 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"claude-haiku-4-5": "haiku", "claude-opus-4-8": "opus", "claude-x": "opus", "gpt-5": "haiku"} {
		if m, ok := c.Resolve(name); !ok || m.Name != want {
			t.Errorf("Resolve(%q): got %v %v, want %s", name, m, ok, want)
		}
	}
	if _, ok := c.Resolve("gemini-2.5-pro"); ok {
		t.Error("Resolve(gemini-2.5-pro): found, want not found")
	}
}

// TestDefaultAliases: the embedded default serves the agents' default
// models, each family on the simulated model of its provider's dialect.
func TestDefaultAliases(t *testing.T) {
	cfg, _, err := Default(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ asked, model, dialect string }{
		{"claude-opus-4-8", "sim-claude-sonnet-4.5", "anthropic"},           // Claude Code's default
		{"claude-haiku-4-5-20251001", "sim-claude-sonnet-4.5", "anthropic"}, // its small fast model
		{"gpt-6.2-sol", "sim-gpt-4.1", "openai"},                            // Codex's default
		{"gpt-5-codex", "sim-gpt-4.1", "openai"},
		{"codex-mini-latest", "sim-gpt-4.1", "openai"},
		{"o3", "sim-gpt-4.1", "openai"},
		{"o4-mini", "sim-gpt-4.1", "openai"},
		{"gemini-3-pro-preview", "sim-gemini-2.5-flash", "gemini"},
		{"sim-fast", "sim-fast", "openai"}, // names stay names
	} {
		m, ok := cfg.Resolve(tt.asked)
		if !ok || m.Name != tt.model {
			t.Errorf("Resolve(%q): got %v %v, want %s", tt.asked, m, ok, tt.model)
			continue
		}
		p, _ := cfg.Provider(m.Routes[0].Provider)
		if d := p.Dialect; d != tt.dialect && !(d == "" && tt.dialect == "openai") {
			t.Errorf("%s: routed to %s of dialect %q, want %s", tt.asked, p.Name, d, tt.dialect)
		}
	}
	if m, ok := cfg.Resolve("llama-3"); ok {
		t.Errorf("Resolve(llama-3): got %s, want unknown (no catch-all)", m.Name)
	}
}
