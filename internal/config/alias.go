package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// aliasIndex resolves models[].aliases: exact aliases by map, globs in
// the order they are tried (most specific first).
type aliasIndex struct {
	exact map[string]int // alias → model index
	globs []glob
}

// glob is one alias with a '*', of model index model.
type glob struct {
	pattern string
	parts   []string // the literal parts between the '*'s
	literal int      // bytes of literal text: its specificity
	stars   int
	model   int
	order   int // position among every alias of the config: the last tie-break
}

// IsGlob reports whether an alias is a glob (has a '*').
func IsGlob(alias string) bool { return strings.Contains(alias, "*") }

// checkAlias returns what is wrong with an alias, "" when nothing: it is
// not empty, has no space or control character, none of the characters
// other glob syntaxes give a meaning to ('?', '[', ']', '\'), and no "**".
func checkAlias(a string) string {
	switch {
	case a == "":
		return "empty alias"
	case strings.Contains(a, "**"):
		return fmt.Sprintf("%q has \"**\" (one '*' matches any run of characters, '/' included)", a)
	}
	for _, r := range a {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Sprintf("%q has a space or control character", a)
		case strings.ContainsRune(`?[]\`, r):
			return fmt.Sprintf("%q has %q: only '*' is a wildcard (any run of characters), other glob syntax is not supported", a, r)
		}
	}
	return ""
}

// newGlob compiles pattern, an alias with a '*'.
func newGlob(pattern string, model, order int) glob {
	parts := strings.Split(pattern, "*")
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return glob{pattern: pattern, parts: parts, literal: n, stars: len(parts) - 1, model: model, order: order}
}

// match reports whether name matches g: its first part a prefix, its last a
// suffix, the others found in order between them.
func (g *glob) match(name string) bool {
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if len(name) < g.literal || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	rest := name[len(first) : len(name)-len(last)]
	for _, p := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// moreSpecific orders globs as Resolve tries them: more literal text
// first, then fewer '*', then config order (the model listed first, then
// its aliases in order).
func moreSpecific(a, b glob) int {
	if c := cmp.Compare(b.literal, a.literal); c != 0 {
		return c
	}
	if c := cmp.Compare(a.stars, b.stars); c != 0 {
		return c
	}
	return cmp.Compare(a.order, b.order)
}

// buildAliases indexes the aliases of models; on a duplicate alias the
// first model wins (Validate reports it).
func buildAliases(models []Model) *aliasIndex {
	ix := &aliasIndex{exact: map[string]int{}}
	order := 0
	for i := range models {
		for _, a := range models[i].Aliases {
			order++
			if checkAlias(a) != "" {
				continue
			}
			if !IsGlob(a) {
				if _, dup := ix.exact[a]; !dup {
					ix.exact[a] = i
				}
				continue
			}
			ix.globs = append(ix.globs, newGlob(a, i, order))
		}
	}
	slices.SortStableFunc(ix.globs, moreSpecific)
	return ix
}

// resolve is the model index name resolves to through aliases.
func (ix *aliasIndex) resolve(name string) (int, bool) {
	if i, ok := ix.exact[name]; ok {
		return i, true
	}
	for k := range ix.globs {
		if ix.globs[k].match(name) {
			return ix.globs[k].model, true
		}
	}
	return 0, false
}

// Resolve returns the model a request's model name stands for: the model
// of that exact name, else the model with that exact alias, else the model
// with the most specific glob alias matching it: the glob with the most
// literal (non-'*') characters; on a tie the one with fewer '*'; then the
// one listed first in the config (models in order, each model's aliases in
// order). Deterministic, never an error: "claude-*" and "*-4-8" both match
// "claude-opus-4-8" with 7 and 4 literal characters, and "claude-*" wins.
// The result points into c.Models. Safe for concurrent use while nobody
// modifies c; a Config built in code (no index) is resolved by building
// the alias index on each call.
func (c *Config) Resolve(name string) (*Model, bool) {
	if m, ok := c.Model(name); ok {
		return m, true
	}
	ix := (*aliasIndex)(nil)
	if c.idx != nil {
		ix = c.idx.aliases
	}
	if ix == nil {
		ix = buildAliases(c.Models)
	}
	if i, ok := ix.resolve(name); ok && i < len(c.Models) {
		return &c.Models[i], true
	}
	return nil, false
}

// aliases checks every model's aliases: each valid, none a model's name,
// none given twice (in one model or two).
func (v *problems) aliases(models []Model, names map[string]int) {
	type at struct{ model, alias int }
	seen := map[string]at{}
	for i, m := range models {
		for j, a := range m.Aliases {
			path := fmt.Sprintf("models[%d].aliases[%d]", i, j)
			if msg := checkAlias(a); msg != "" {
				v.add(path, "%s", msg)
				continue
			}
			if k, ok := names[a]; ok {
				v.add(path, "%q is the name of models[%d]: a model's name always resolves to that model, so this alias would never apply", a, k)
				continue
			}
			if first, dup := seen[a]; dup {
				if first.model == i {
					v.add(path, "%q is listed twice (aliases[%d])", a, first.alias)
				} else {
					v.add(path, "%q is an alias of models[%d] (%s) already: an alias names one model", a, first.model, models[first.model].Name)
				}
				continue
			}
			seen[a] = at{i, j}
		}
	}
}
