package main

import (
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvReplica names this replica, over the config's replica:.
const EnvReplica = "STREAMGATE_REPLICA"

// replicaName is this replica's name: STREAMGATE_REPLICA, else the config's
// replica:, else the host name and the port it listens on ("vm:8080"), so
// that two replicas on one host, which share a config, differ.
func replicaName(env, configured string, addr net.Addr) string {
	if env != "" {
		return env
	}
	if configured != "" {
		return configured
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return host + ":" + strconv.Itoa(tcp.Port)
	}
	return host
}

// warnEmptyAdminKey logs once when the config file writes admin_key: but
// it expanded empty (an unset ${STREAMGATE_ADMIN_KEY}): the admin API and
// the dashboard's login are then off, which the file says is not meant.
// It is a warning, not a refusal, and none for a value with a default
// (${VAR:-}), the way to say the admin API is optional.
func warnEmptyAdminKey(logger *slog.Logger, path, adminKey string) {
	if path == "" || adminKey != "" {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var raw map[string]any
	if yaml.Unmarshal(b, &raw) != nil {
		return
	}
	written, ok := raw["admin_key"].(string)
	if !ok || written == "" || strings.Contains(written, ":-") {
		return
	}
	logger.Warn("admin_key is empty once expanded: the admin API (/admin/*) and the dashboard's admin login are off; set the variable it names, or remove admin_key: from the config to mean it",
		slog.String("config", path), slog.String("admin_key", written))
}
