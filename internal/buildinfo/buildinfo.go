// Package buildinfo reports the version of the agentmesh build, for the
// version command and the User-Agent of outbound requests.
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// version is set at link time with
// -ldflags "-X github.com/agentmesh/agentmesh/internal/buildinfo.version=v1.2.3".
var version string

var fromModule = sync.OnceValue(func() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
})

// Version returns the link-time version, else the module version recorded
// by `go install module@version`, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	return fromModule()
}
