package config

// index maps names to positions in a Config's slices, built by prepare at
// the end of Load/Parse/Default so per-request lookups are O(1).
type index struct {
	models    map[string]int
	providers map[string]int
	keys      map[string]int
}

// prepare builds c's lookup index. On duplicate names the first entry
// wins, like the linear search it replaces.
func (c *Config) prepare() {
	idx := &index{
		models:    make(map[string]int, len(c.Models)),
		providers: make(map[string]int, len(c.Providers)),
		keys:      make(map[string]int, len(c.Keys)),
	}
	for i := len(c.Models) - 1; i >= 0; i-- {
		idx.models[c.Models[i].Name] = i
	}
	for i := len(c.Providers) - 1; i >= 0; i-- {
		idx.providers[c.Providers[i].Name] = i
	}
	for i := len(c.Keys) - 1; i >= 0; i-- {
		idx.keys[c.Keys[i].Name] = i
	}
	c.idx = idx
}

// Model returns the model called name. The result points into c.Models.
// Lookups use the index built by Load, Parse and Default (O(1)); a hit is
// checked against the slice, and a miss falls back to a linear search, so a
// Config built or changed in code is still answered correctly. Safe for
// concurrent use while nobody modifies c.
func (c *Config) Model(name string) (*Model, bool) {
	if c.idx != nil {
		if i, ok := c.idx.models[name]; ok && i < len(c.Models) && c.Models[i].Name == name {
			return &c.Models[i], true
		}
	}
	for i := range c.Models {
		if c.Models[i].Name == name {
			return &c.Models[i], true
		}
	}
	return nil, false
}

// Provider returns the provider called name, pointing into c.Providers;
// see Model for how lookups work.
func (c *Config) Provider(name string) (*Provider, bool) {
	if c.idx != nil {
		if i, ok := c.idx.providers[name]; ok && i < len(c.Providers) && c.Providers[i].Name == name {
			return &c.Providers[i], true
		}
	}
	for i := range c.Providers {
		if c.Providers[i].Name == name {
			return &c.Providers[i], true
		}
	}
	return nil, false
}

// Key returns the static key whose Name (not secret) is name, pointing into
// c.Keys; see Model for how lookups work. Matching a presented secret is
// the auth package's job (in constant time).
func (c *Config) Key(name string) (*Key, bool) {
	if c.idx != nil {
		if i, ok := c.idx.keys[name]; ok && i < len(c.Keys) && c.Keys[i].Name == name {
			return &c.Keys[i], true
		}
	}
	for i := range c.Keys {
		if c.Keys[i].Name == name {
			return &c.Keys[i], true
		}
	}
	return nil, false
}

// Price returns the price of the model called name (the client-facing
// name, not a route's upstream model), in USD per 1M tokens. ok is false
// for an unknown model; a known model without a price has the zero Price.
func (c *Config) Price(model string) (p Price, ok bool) {
	m, ok := c.Model(model)
	if !ok {
		return Price{}, false
	}
	return m.Price, true
}

// Cost returns the USD cost of input and output tokens at p.
func (p Price) Cost(inputTokens, outputTokens int64) float64 {
	return (float64(inputTokens)*p.Input + float64(outputTokens)*p.Output) / 1e6
}

// Allows reports whether k may use the model called model: a key with no
// Models may use every model.
func (k *Key) Allows(model string) bool {
	if len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == model {
			return true
		}
	}
	return false
}
