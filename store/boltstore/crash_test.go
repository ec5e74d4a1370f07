package boltstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// The crash test runs its writer in a child process: this test binary,
// re-executed with -test.run=^TestCrashChild$ and these variables set.
const (
	envCrashPath  = "BOLTSTORE_CRASH_CHILD_PATH"
	envCrashRound = "BOLTSTORE_CRASH_CHILD_ROUND"
)

// crashAgent is the record the child registers under name; the parent
// rebuilds it to check what it finds.
func crashAgent(name string) registry.Agent {
	return registry.Agent{
		Name:         name,
		Description:  "Crash test agent " + name + ".",
		Capabilities: []string{"crash", "durability"},
		Endpoint:     "https://" + name + ".example.com/task",
		Auth:         &registry.Auth{Type: registry.AuthBearer, Token: "secret-" + name},
		Labels:       map[string]string{"name": name},
	}
}

// TestCrashChild is the child side of TestCrashKeepsAcknowledgedWrites.
// It does nothing unless started by that test. Eight goroutines register
// agents through registry.Registry over a boltstore.Store and print
// "ack NAME" on stdout as soon as each Register returns nil, until the
// parent kills the process.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(envCrashPath)
	if path == "" {
		t.Skip("only runs as the child of TestCrashKeepsAcknowledgedWrites")
	}
	round := os.Getenv(envCrashRound)
	ctx := context.Background()
	store, err := boltstore.Open(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	reg, err := registry.New(ctx, store, &registry.Options{SweepInterval: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: registry:", err)
		os.Exit(2)
	}
	var out sync.Mutex
	for g := range 8 {
		go func() {
			for i := 0; ; i++ {
				name := fmt.Sprintf("r%s-g%d-%05d", round, g, i)
				if _, _, err := reg.Register(ctx, crashAgent(name)); err != nil {
					fmt.Fprintln(os.Stderr, "child: register:", err)
					os.Exit(2)
				}
				out.Lock()
				_, err := os.Stdout.WriteString("ack " + name + "\n") // one write(2): whole lines only
				out.Unlock()
				if err != nil {
					os.Exit(2)
				}
			}
		}()
	}
	time.Sleep(time.Minute) // the parent kills us long before
	fmt.Fprintln(os.Stderr, "child: not killed within a minute")
	os.Exit(3)
}

// TestCrashKeepsAcknowledgedWrites checks SPEC 2.1: an acknowledged
// registration survives kill -9 of the process the moment after. A child
// process registers agents from 8 goroutines and acknowledges each on
// stdout; the parent SIGKILLs it mid-stream, reopens the file and checks
// that every acknowledged agent is there, intact. Three rounds run on the
// same file, so later rounds also open a file left by a killed process.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs SIGKILL")
	}
	path := filepath.Join(t.TempDir(), "crash", "mesh.db")
	total := 0
	for round := range 3 {
		acked := runAndKill(t, path, round, 300+200*round)
		total += len(acked)

		store, err := boltstore.Open(path, nil)
		require.NoError(t, err, "round %d: the file left by the killed process must open", round)
		list, err := store.ListAgents(t.Context())
		require.NoError(t, err)
		stored := make(map[string]registry.Agent, len(list))
		for _, a := range list {
			stored[a.Name] = a
		}
		missing := 0
		for _, name := range acked {
			a, ok := stored[name]
			if !ok {
				missing++
				continue
			}
			want := crashAgent(name)
			assert.Equal(t, want.Description, a.Description, name)
			assert.Equal(t, want.Endpoint, a.Endpoint, name)
			assert.Equal(t, want.Capabilities, a.Capabilities, name)
			assert.Equal(t, want.Labels, a.Labels, name)
			if assert.NotNil(t, a.Auth, name) {
				assert.Equal(t, want.Auth.Token, a.Auth.Token, name)
			}
			assert.False(t, a.RegisteredAt.IsZero(), name)
		}
		assert.Zero(t, missing, "round %d: acknowledged registrations lost", round)
		assert.GreaterOrEqual(t, len(list), total, "round %d", round)
		t.Logf("round %d: %d acknowledged before SIGKILL, %d stored in all (%d acknowledged in all rounds)", round, len(acked), len(list), total)
		require.NoError(t, store.Close())
	}
}

// runAndKill runs the child writer on path, SIGKILLs it once it has
// acknowledged killAfter registrations, and returns every name it
// acknowledged, including those still in the pipe when it died.
func runAndKill(t *testing.T, path string, round, killAfter int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashPath+"="+path, fmt.Sprintf("%s=%d", envCrashRound, round))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var acked []string
	killed := false
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// io.EOF once the child is dead; a fragment without '\n' is not
			// an acknowledgement (it cannot happen: lines are single writes).
			require.ErrorIs(t, err, io.EOF)
			break
		}
		if name, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ack "); ok {
			acked = append(acked, name)
		}
		if !killed && len(acked) >= killAfter {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
			killed = true
		}
	}
	err = cmd.Wait()
	require.True(t, killed, "the child stopped before %d acknowledgements (%d): %v\n%s", killAfter, len(acked), err, stderr.String())
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "child: %v\n%s", err, stderr.String())
	require.Contains(t, exitErr.String(), "killed", "the child must die from SIGKILL: %s", stderr.String())
	return acked
}
