package config

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultFile is the name the embedded default goes by in messages.
const DefaultFile = "default.yaml (embedded)"

// DefaultYAML returns the embedded default configuration's YAML text.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default returns the configuration `streamgate serve` starts on without
// --config: the embedded default.yaml, loaded through Parse like any file
// (so STREAMGATE_LISTEN and STREAMGATE_DATABASE apply): one in-process
// provider {name: sim, kind: sim}, database sqlite://streamgate.db, the
// simulated demo models with published prices, and one key named "dev".
// Its secret is STREAMGATE_DEV_KEY when set; otherwise a fresh random
// "sg-dev-<32 hex>", returned as generated so the caller can print it once.
// generated is "" when the key came from the environment.
func Default(getenv func(string) string) (cfg *Config, generated string, err error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if getenv(EnvDevKey) == "" {
		generated = NewDevKey()
	}
	env := func(name string) string {
		if name == EnvDevKey && generated != "" {
			return generated
		}
		return getenv(name)
	}
	cfg, err = Parse(DefaultFile, defaultYAML, env)
	if err != nil {
		return nil, "", err
	}
	return cfg, generated, nil
}

// NewDevKey returns a fresh random development key, "sg-dev-" and 32 hex
// digits (128 bits from crypto/rand).
func NewDevKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return "sg-dev-" + hex.EncodeToString(b[:])
}
