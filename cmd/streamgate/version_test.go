package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	checkout := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "3e61bde0a1b2c3d4e5f60718293a4b5c6d7e8f90"},
		{Key: "vcs.time", Value: "2026-12-02T13:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name          string
		bi            *debug.BuildInfo
		ldV, ldC, ldD string
		want, wantNot string
	}{
		{name: "go build in a git checkout", bi: checkout,
			want: "streamgate dev (commit 3e61bde0a1b2 of 2026-12-02T13:00:00Z, with uncommitted changes, go", wantNot: "unknown"},
		{name: "ldflags override the stamp", bi: checkout, ldV: "v1.2.3", ldC: "abcdef0123456789", ldD: "2026-12-01T00:00:00Z",
			want: "streamgate v1.2.3 (commit abcdef012345 of 2026-12-01T00:00:00Z, go", wantNot: "uncommitted"},
		{name: "go install of a tag", bi: &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}},
			want: "streamgate v1.4.0 (go", wantNot: "commit"},
		{name: "go install of a pseudo-version", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202130000-3e61bde0a1b2"}},
			want: "streamgate v0.0.0-20261202130000-3e61bde0a1b2 (commit 3e61bde0a1b2, go"},
		{name: "go run: nothing recorded", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			want: "streamgate dev (no commit recorded: built with go run or -buildvcs=false", wantNot: "unknown"},
		{name: "no build info", bi: nil, want: "streamgate dev (no commit recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := versionLine(tc.bi, tc.ldV, tc.ldC, tc.ldD)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start with %q", got, tc.want)
			}
			if tc.wantNot != "" && strings.Contains(got, tc.wantNot) {
				t.Errorf("got %q, want no %q in it", got, tc.wantNot)
			}
		})
	}
}
