package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestFromBuildInfo(t *testing.T) {
	commitTime := time.Date(2026, 12, 1, 21, 35, 0, 0, time.UTC)
	vcs := []debug.BuildSetting{
		{Key: "GOOS", Value: "linux"},
		{Key: "GOARCH", Value: "arm64"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "2a033ee0d2a6cf2b6f3c1c1d2e3f405162738495"},
		{Key: "vcs.time", Value: "2026-12-01T21:35:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name   string
		bi     *debug.BuildInfo
		linked string
		want   Info
	}{{
		name: "no build information",
		want: Info{Version: "dev", GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH},
	}, {
		name: "go build in a checkout",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201213500-2a033ee0d2a6+dirty"}, Settings: vcs},
		want: Info{Version: "v0.0.0-20261201213500-2a033ee0d2a6+dirty", Commit: "2a033ee0d2a6cf2b6f3c1c1d2e3f405162738495",
			CommitTime: commitTime, Modified: true, GoVersion: "go1.26.8", OS: "linux", Arch: "arm64"},
	}, {
		name: "go install module@version",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}},
		want: Info{Version: "v0.1.0", GoVersion: "go1.26.8", OS: runtime.GOOS, Arch: runtime.GOARCH},
	}, {
		name: "devel build without VCS",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
		want: Info{Version: "dev", GoVersion: "go1.26.8", OS: runtime.GOOS, Arch: runtime.GOARCH},
	}, {
		name:   "link-time version wins",
		bi:     &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-x"}, Settings: vcs},
		linked: "v0.1.0",
		want: Info{Version: "v0.1.0", Commit: "2a033ee0d2a6cf2b6f3c1c1d2e3f405162738495",
			CommitTime: commitTime, Modified: true, GoVersion: "go1.26.8", OS: "linux", Arch: "arm64"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(tc.bi, tc.linked); got != tc.want {
				t.Errorf("fromBuildInfo:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
