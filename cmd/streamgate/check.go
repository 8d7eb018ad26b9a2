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
	cfg, path, err := checkingConfig(e, cfgPath, db)
	if err != nil {
		return err
	}
	if cfg == nil {
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
		return usagef("--models: unknown model %s (the models of %s: %s)", strings.Join(unknown, ", "), path, strings.Join(known, ", "))
	}
	return nil
}

// checkingConfig is the config a key command checks names against:
// --config, else ./streamgate.yaml, else the embedded default when the
// database is the default one; nil when none says (the database alone).
// path names it for messages.
func checkingConfig(e *env, cfgPath string, db database) (cfg *config.Config, path string, err error) {
	path = cfgPath
	if path == "" {
		if _, err := os.Stat(workingConfig); err == nil {
			path = workingConfig
		}
	}
	switch {
	case path != "":
		c, err := config.LoadWithoutSecrets(path, e.getenv)
		if err != nil {
			return nil, "", configError{err}
		}
		return c, path, nil
	case db.from == "the default":
		c, _, err := config.Default(e.getenv)
		if err != nil {
			return nil, "", err
		}
		return c, "the embedded default", nil
	}
	return nil, "", nil
}

// checkMCPTools checks the MCP tool globs a key is given (keys create
// --mcp-tools) as the config checks keys[].mcp_tools: a glob naming its
// server literally ("fs__*") must name a server of the config the command
// reads (see checkingConfig), else it would allow nothing. Without such a
// config it warns that the globs were not checked.
func checkMCPTools(e *env, cfgPath string, db database, globs []string) error {
	if len(globs) == 0 {
		return nil
	}
	cfg, path, err := checkingConfig(e, cfgPath, db)
	if err != nil {
		return err
	}
	if cfg == nil {
		fmt.Fprintf(e.stderr, "streamgate: warning: --mcp-tools %s not checked: no config says which MCP servers exist (pass --config FILE)\n", strings.Join(globs, ","))
		return nil
	}
	known := make([]string, 0, len(cfg.MCP.Servers))
	for _, s := range cfg.MCP.Servers {
		known = append(known, s.Name)
	}
	for _, g := range globs {
		server, _, ok := strings.Cut(g, "__")
		if !ok || strings.Contains(server, "*") || slices.Contains(known, server) {
			continue
		}
		if len(known) == 0 {
			return usagef("--mcp-tools: %q names MCP server %q, and %s has no mcp.servers: it would allow nothing", g, server, path)
		}
		return usagef("--mcp-tools: %q names MCP server %q, which %s does not configure (its servers: %s)", g, server, path, strings.Join(known, ", "))
	}
	return nil
}
