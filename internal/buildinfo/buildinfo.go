// Package buildinfo reports what an agentmesh binary is: its version, the
// commit it was built from, and the toolchain and platform, for the version
// command and the User-Agent of outbound requests.
//
// Everything comes from the build information the Go linker embeds
// ([debug.ReadBuildInfo]), so a binary made by `go build` in a git checkout
// and one made by `go install module@version` both describe themselves
// with no extra flags. A link-time version
// (-ldflags "-X github.com/agentmesh/agentmesh/internal/buildinfo.version=v1.2.3")
// wins over the module version.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// version is set at link time with
// -ldflags "-X github.com/agentmesh/agentmesh/internal/buildinfo.version=v1.2.3".
var version string

// Info describes one build. Fields the build did not record are zero:
// a binary built with -buildvcs=false, or by `go install module@version`
// (which builds from the module zip, not a checkout), has no Commit.
type Info struct {
	// Version is the link-time version, else the main module's version
	// (a release tag from `go install module@v0.1.0`, or the pseudo-version
	// `go build` derives from the checkout, "+dirty" when modified), else
	// "dev".
	Version string `json:"version"`
	// Commit is the full VCS revision the binary was built from.
	Commit string `json:"commit,omitempty"`
	// CommitTime is the time of that commit, in UTC.
	CommitTime time.Time `json:"commitTime,omitzero"`
	// Modified reports whether the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary, e.g. "go1.26.8".
	GoVersion string `json:"goVersion"`
	// OS and Arch are the platform the binary runs on (GOOS, GOARCH).
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// Read returns the build information of the running binary. It is safe
// for concurrent use and cheap after the first call.
func Read() Info { return read() }

var read = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version)
})

// fromBuildInfo is Read for a given build record (nil when the binary has
// none) and link-time version.
func fromBuildInfo(bi *debug.BuildInfo, linked string) Info {
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	info := Info{Version: linked, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339Nano, s.Value); err == nil {
				info.CommitTime = t.UTC()
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "GOOS":
			info.OS = s.Value
		case "GOARCH":
			info.Arch = s.Value
		}
	}
	return info
}

// Version returns the version of [Read]: the link-time version, else the
// module version, else "dev".
func Version() string { return Read().Version }
