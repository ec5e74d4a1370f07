package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
)

const versionSynopsis = `agentmesh version [--json]

Prints the version of this binary, the commit it was built from, the
commit's time and whether the work tree had uncommitted changes, the Go
toolchain and the platform. A binary built without VCS information (go
install module@version, -buildvcs=false) has no commit.`

// runVersion runs `agentmesh version`.
func runVersion(args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	f := newFlags("version", versionSynopsis, stderr)
	f.Bool(&asJSON, "json", "", false, "print one JSON object: version, commit, commitTime, modified, goVersion, os, arch")
	if err := f.parse(args, func(string) string { return "" }); err != nil {
		return usageError(stderr, err)
	}
	if f.fs.NArg() > 0 {
		return usageError(stderr, fmt.Errorf("version takes no arguments, got %q", f.fs.Args()))
	}
	info := buildinfo.Read()
	if asJSON {
		b, err := json.Marshal(info)
		if err != nil {
			fmt.Fprintln(stderr, "agentmesh:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	writeVersion(stdout, info)
	return 0
}

// writeVersion prints info for people: the version on the first line, as
// `agentmesh --version` always did, then one field per line.
func writeVersion(w io.Writer, info buildinfo.Info) {
	fmt.Fprintf(w, "agentmesh %s\n", info.Version)
	commit, when := info.Commit, "unknown"
	if commit == "" {
		commit = "unknown (built without VCS information)"
	}
	if !info.CommitTime.IsZero() {
		when = info.CommitTime.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "  commit:      %s\n", commit)
	fmt.Fprintf(w, "  commit time: %s\n", when)
	if info.Commit != "" {
		fmt.Fprintf(w, "  modified:    %t\n", info.Modified)
	}
	fmt.Fprintf(w, "  go:          %s\n", info.GoVersion)
	fmt.Fprintf(w, "  platform:    %s/%s\n", info.OS, info.Arch)
}
