package config

import "github.com/streamgate/streamgate/internal/usd"

// index maps names to positions in a Config's slices, built by prepare at
// the end of Load/Parse/Default so per-request lookups are O(1).
type index struct {
	models    map[string]int
	providers map[string]int
	keys      map[string]int
	aliases   *aliasIndex
}

// prepare builds c's lookup index. On duplicate names the first entry
// wins, like the linear search it replaces.
func (c *Config) prepare() {
	c.idx = &index{
		models:    indexNames(c.Models, modelName),
		providers: indexNames(c.Providers, providerName),
		keys:      indexNames(c.Keys, keyName),
		aliases:   buildAliases(c.Models),
	}
}

func modelName(m *Model) string       { return m.Name }
func providerName(p *Provider) string { return p.Name }
func keyName(k *Key) string           { return k.Name }

// indexNames maps each name in s to its first position.
func indexNames[T any](s []T, name func(*T) string) map[string]int {
	idx := make(map[string]int, len(s))
	for i := len(s) - 1; i >= 0; i-- {
		idx[name(&s[i])] = i
	}
	return idx
}

// lookup returns the entry of s called name. A hit in idx (nil for a
// Config without an index) is checked against the slice, and a miss falls
// back to a linear search, so a Config built or changed in code is still
// answered correctly.
func lookup[T any](idx map[string]int, s []T, name string, nameOf func(*T) string) (*T, bool) {
	if i, ok := idx[name]; ok && i < len(s) && nameOf(&s[i]) == name {
		return &s[i], true
	}
	for i := range s {
		if nameOf(&s[i]) == name {
			return &s[i], true
		}
	}
	return nil, false
}

// Model returns the model called name. The result points into c.Models.
// Lookups use the index built by Load, Parse and Default (O(1)), checked
// and backed by a linear search (see lookup). Safe for concurrent use
// while nobody modifies c.
func (c *Config) Model(name string) (*Model, bool) {
	var idx map[string]int
	if c.idx != nil {
		idx = c.idx.models
	}
	return lookup(idx, c.Models, name, modelName)
}

// Provider returns the provider called name, pointing into c.Providers;
// see Model for how lookups work.
func (c *Config) Provider(name string) (*Provider, bool) {
	var idx map[string]int
	if c.idx != nil {
		idx = c.idx.providers
	}
	return lookup(idx, c.Providers, name, providerName)
}

// Key returns the static key whose Name (not secret) is name, pointing into
// c.Keys; see Model for how lookups work. Matching a presented secret is
// the auth package's job (in constant time).
func (c *Config) Key(name string) (*Key, bool) {
	var idx map[string]int
	if c.idx != nil {
		idx = c.idx.keys
	}
	return lookup(idx, c.Keys, name, keyName)
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

// Tokens are one request's token counts as a Price applies to them.
// Input counts every prompt token, the cache reads and writes included
// (OpenAI's prompt_tokens); CacheRead and CacheWrite are the parts of it
// read from and written to the provider's prompt cache. Output counts the
// reasoning tokens too.
type Tokens struct {
	Input, CacheRead, CacheWrite, Output int64
}

// Cost returns the USD cost of t at p: the fresh input (Input less the
// cache reads and writes, 0 when they exceed it) at p.Input, the cache
// reads at p.CachedInput, the writes at p.CacheWrite (either at p.Input
// when not configured), the output at p.Output; in [0, usd.Max] ($1e9)
// whatever the counts and prices (see usd.Cost), so that no cost the
// ledger, the metrics or a budget counts is +Inf, NaN or negative.
func (p Price) Cost(t Tokens) float64 {
	read, write := p.Input, p.Input
	if p.CachedInput != nil {
		read = *p.CachedInput
	}
	if p.CacheWrite != nil {
		write = *p.CacheWrite
	}
	fresh := max(t.Input-t.CacheRead-t.CacheWrite, 0)
	return usd.Clamp((usd.At(fresh, p.Input) + usd.At(t.CacheRead, read) + usd.At(t.CacheWrite, write) + usd.At(t.Output, p.Output)) / 1e6)
}

// CacheSavings returns what the prompt cache saved on read cache-read
// and write cache-write tokens at p, in USD: the reads at p.Input less
// p.CachedInput, less the writes at p.CacheWrite less p.Input (net: below
// 0 when the writes' premium outweighs the reads' discount; 0 for a price
// without cache prices). Bounded to ±usd.Max.
func (p Price) CacheSavings(read, write int64) float64 {
	cached, written := p.Input, p.Input
	if p.CachedInput != nil {
		cached = *p.CachedInput
	}
	if p.CacheWrite != nil {
		written = *p.CacheWrite
	}
	s := (float64(max(read, 0))*(p.Input-cached) - float64(max(write, 0))*(written-p.Input)) / 1e6
	if s != s { // NaN: prices are validated finite, never so in practice
		return 0
	}
	return min(max(s, -usd.Max), usd.Max)
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

// Team returns the team of the config called name, pointing into c.Teams
// (a linear search: teams are few).
func (c *Config) Team(name string) (*Team, bool) {
	return lookup(nil, c.Teams, name, func(t *Team) string { return t.Name })
}
