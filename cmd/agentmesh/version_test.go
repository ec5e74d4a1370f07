package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
)

// TestVersionNamesTheCommit builds the binary as a user would in a git
// checkout (go build, with VCS stamping forced on: CI turns it off for the
// rest of the suite) and checks that `agentmesh version` names the commit
// git names, its time and whether the tree was modified. A test binary has
// no VCS information of its own, hence the build.
func TestVersionNamesTheCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not in a git checkout:", err)
	}
	commit := strings.TrimSpace(string(head))
	out, err := exec.Command("git", "show", "-s", "--format=%cI", "HEAD").Output()
	require.NoError(t, err)
	commitTime, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
	require.NoError(t, err)
	status, err := exec.Command("git", "status", "--porcelain").Output()
	require.NoError(t, err)
	dirty := len(bytes.TrimSpace(status)) > 0

	bin := filepath.Join(t.TempDir(), "agentmesh")
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if raceEnabled {
		args = append(args, "-race") // the race-built packages are cached
	}
	build := exec.Command("go", append(args, ".")...)
	b, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", b)

	out, err = exec.Command(bin, "version", "--json").Output()
	require.NoError(t, err)
	var info buildinfo.Info
	require.NoError(t, json.Unmarshal(out, &info), "%s", out)
	assert.Equal(t, commit, info.Commit, "the commit of git rev-parse HEAD")
	assert.True(t, commitTime.Equal(info.CommitTime), "commit time %v, git says %v", info.CommitTime, commitTime)
	assert.Equal(t, dirty, info.Modified, "modified: git status --porcelain is %q", status)
	assert.Equal(t, runtime.Version(), info.GoVersion)
	assert.Equal(t, runtime.GOOS, info.OS)
	assert.Equal(t, runtime.GOARCH, info.Arch)
	// go build stamps the tag of the commit (if clean), else a
	// pseudo-version naming the commit's first 12 digits.
	if tags, _ := exec.Command("git", "tag", "--points-at", "HEAD").Output(); dirty || len(bytes.TrimSpace(tags)) == 0 {
		assert.Contains(t, info.Version, commit[:12], "the pseudo-version go build derives from the checkout")
	}
	var raw map[string]any
	require.NoError(t, json.Unmarshal(out, &raw))
	assert.ElementsMatch(t, []string{"version", "commit", "commitTime", "modified", "goVersion", "os", "arch"}, keys(raw))

	out, err = exec.Command(bin, "version").Output()
	require.NoError(t, err)
	text := string(out)
	assert.True(t, strings.HasPrefix(text, "agentmesh "+info.Version+"\n"), "%s", text)
	assert.Contains(t, text, "commit:      "+commit+"\n")
	assert.Contains(t, text, "commit time: "+commitTime.UTC().Format(time.RFC3339)+"\n")
	assert.Contains(t, text, "platform:    "+runtime.GOOS+"/"+runtime.GOARCH+"\n")

	out, err = exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, text, string(out), "--version is version")
}

// TestVersionWithoutVCS: a build without VCS information (go install
// module@version builds from the module zip) says so instead of printing
// an empty commit; bad arguments are usage errors.
func TestVersionWithoutVCS(t *testing.T) {
	var out bytes.Buffer
	writeVersion(&out, buildinfo.Info{Version: "v0.1.0", GoVersion: "go1.26.8", OS: "linux", Arch: "amd64"})
	assert.Equal(t, "agentmesh v0.1.0\n"+
		"  commit:      unknown (built without VCS information)\n"+
		"  commit time: unknown\n"+
		"  go:          go1.26.8\n"+
		"  platform:    linux/amd64\n", out.String())

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, runVersion([]string{"extra"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "version takes no arguments")
	assert.Equal(t, 2, runVersion([]string{"--jsn"}, &stdout, &stderr))
	assert.Empty(t, stdout.String())
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
