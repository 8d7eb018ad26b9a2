package metrics

import (
	"cmp"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Build is what streamgate_build_info says of the running binary: one value
// per label per binary, so the series count stays one.
type Build struct {
	Version   string // main module version ("(devel)" for a plain go build of a checkout), "unknown" when absent
	Revision  string // vcs.revision, "unknown" when built without VCS stamping (-buildvcs=false, no .git)
	GoVersion string // the Go toolchain that built it
}

// version is the release the binary was built as, set at link time with
// -ldflags "-X github.com/streamgate/streamgate/internal/metrics.version=v1.2.3"
// (deploy/Dockerfile does); "" means the main module's version.
var version string

// ReadBuild is this binary's Build, from runtime/debug.ReadBuildInfo; its
// Version is the link-time release when one was set.
// Without build info (a binary built without module support) every field
// but GoVersion is "unknown".
func ReadBuild() Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	}
	b := buildOf(bi)
	b.Version = cmp.Or(version, b.Version)
	return b
}

func buildOf(bi *debug.BuildInfo) Build {
	b := Build{Version: cmp.Or(bi.Main.Version, "unknown"), Revision: "unknown", GoVersion: cmp.Or(bi.GoVersion, runtime.Version())}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			b.Revision = s.Value
		}
	}
	return b
}

// newBuildInfo is streamgate_build_info{version,revision,goversion}, always
// 1: dashboards join on it or show it to tell which build each replica runs.
func newBuildInfo(b Build) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "streamgate_build_info",
		Help:        "Always 1; the labels name the running build: main module version, VCS revision, Go version.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
}
