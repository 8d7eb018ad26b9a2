package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// D returns d as a time.Duration. The zero Duration is 0, which for a
// timeout means "off".
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration ("5s", "250ms", "0s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes d as a string such as "5s", so a marshalled config
// loads back unchanged.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string with a unit ("5s", "250ms", "0s").
// A plain number is an error: "5" could mean seconds or nanoseconds. A null
// value leaves d unchanged (yaml does not call this method for null).
// Load reports these problems with the field's path before it decodes;
// this method guards direct yaml.Unmarshal use and names only the line.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// parseDuration checks one YAML scalar meant as a Duration. Its messages
// quote the value, so callers must not use them for values taken from the
// environment (see parser.scalarValue).
func parseDuration(n *yaml.Node) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want a duration such as \"5s\", got %s", kindName(n))
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return 0, fmt.Errorf("%s has no unit; write a duration such as \"5s\" or \"250ms\"", n.Value)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (want e.g. \"5s\", \"250ms\", \"0s\")", n.Value)
	}
	return v, nil
}

// kindName names a YAML node kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}
