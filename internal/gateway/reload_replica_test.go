package gateway

import (
	"slices"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
)

// TestReloadKeepsReplicaName: serve names the replica at start
// (STREAMGATE_REPLICA, else host:port) when the file names none; a reload
// of that file keeps the name and does not report it as a field waiting
// for a restart, while a file that names another replica does.
func TestReloadKeepsReplicaName(t *testing.T) {
	g := &Gateway{}
	cfg := &config.Config{}
	if kept := g.keepRunning(&config.Config{Replica: "vm:8080"}, cfg); slices.Contains(kept, "replica") || cfg.Replica != "vm:8080" {
		t.Errorf("file without replica: got kept %q and replica %q, want nothing kept and vm:8080", kept, cfg.Replica)
	}
	cfg = &config.Config{Replica: "gw-2"}
	if kept := g.keepRunning(&config.Config{Replica: "vm:8080"}, cfg); !slices.Contains(kept, "replica") || cfg.Replica != "vm:8080" {
		t.Errorf("file naming another replica: got kept %q and replica %q, want replica kept as vm:8080", kept, cfg.Replica)
	}
}
