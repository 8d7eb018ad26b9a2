package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/streamgate/streamgate/internal/config"
)

// checkModels checks the model names a key is given (keys create --models)
// against the config the command reads: --config, else ./streamgate.yaml,
// else the embedded default when the database is the default one. An
// unknown name is bad usage naming the known ones, so a typo is found at
// once rather than as a 403 later. When no config says which models exist
// (the database chosen by --database or STREAMGATE_DATABASE alone), it
// warns on stderr that the names were not checked.
func checkModels(e *env, cfgPath string, db database, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var cfg *config.Config
	path := cfgPath
	if path == "" {
		if _, err := os.Stat(workingConfig); err == nil {
			path = workingConfig
		}
	}
	switch {
	case path != "":
		c, err := config.LoadWithoutSecrets(path, e.getenv)
		if err != nil {
			return configError{err}
		}
		cfg = c
	case db.from == "the default":
		c, _, err := config.Default(e.getenv)
		if err != nil {
			return err
		}
		cfg = c
	default:
		fmt.Fprintf(e.stderr, "streamgate: warning: --models %s not checked: no config says which models exist (pass --config FILE)\n", strings.Join(names, ","))
		return nil
	}
	known := make([]string, 0, len(cfg.Models))
	for _, m := range cfg.Models {
		known = append(known, m.Name)
	}
	var unknown []string
	for _, n := range names {
		if !slices.Contains(known, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		from := path
		if from == "" {
			from = "the embedded default"
		}
		return usagef("--models: unknown model %s (the models of %s: %s)", strings.Join(unknown, ", "), from, strings.Join(known, ", "))
	}
	return nil
}
