package metrics

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBuildOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want Build
	}{
		{"stamped", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			Build{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26.0"}},
		{"devel without vcs", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			Build{Version: "(devel)", Revision: "unknown", GoVersion: "go1.26.0"}},
		{"empty", debug.BuildInfo{}, Build{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildOf(&tc.bi); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// streamgate_build_info is registered by New: one series, value 1, the
// running binary's labels.
func TestBuildInfoRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := ReadBuild()
	for _, mf := range mfs {
		if mf.GetName() != "streamgate_build_info" {
			continue
		}
		if n := len(mf.GetMetric()); n != 1 {
			t.Fatalf("got %d series, want 1", n)
		}
		mt := mf.GetMetric()[0]
		got := map[string]string{}
		for _, l := range mt.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != want.Version || got["revision"] != want.Revision || got["goversion"] != want.GoVersion || len(got) != 3 {
			t.Errorf("got labels %v, want version=%q revision=%q goversion=%q", got, want.Version, want.Revision, want.GoVersion)
		}
		if v := mt.GetGauge().GetValue(); v != 1 {
			t.Errorf("got value %v, want 1", v)
		}
		return
	}
	t.Fatal("streamgate_build_info not registered")
}
