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

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// The crash test runs its writer in a child process: this test binary,
// re-executed with -test.run=^TestCrashChild$ and these variables set.
const (
	envCrashPath  = "BOLTSTORE_CRASH_CHILD_PATH"
	envCrashRound = "BOLTSTORE_CRASH_CHILD_ROUND"
	envCrashKind  = "BOLTSTORE_CRASH_CHILD_KIND" // "delegations", else agents
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
	if os.Getenv(envCrashKind) == "delegations" {
		crashChildDelegations(ctx, store, round)
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

// TestCrashKeepsAcknowledgedWrites checks the durability rule of
// docs/DESIGN.md#stores: an acknowledged registration survives kill -9 of the
// process the moment after. A child process registers agents from 8
// goroutines and acknowledges each on stdout; the parent SIGKILLs it
// mid-stream, reopens the file and checks that every acknowledged agent is
// there, intact. Three rounds run on the same file, so later rounds also open
// a file left by a killed process.
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

// crashRecord is the delegation record the child writes under id.
func crashRecord(id string) delegation.Record {
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	return delegation.Record{
		ID:          id,
		TargetAgent: "agent-" + id[len(id)-1:],
		Task:        "Crash test task " + id + ".",
		Status:      delegation.StatusAccepted,
		Async:       true,
		CreatedAt:   created,
		UpdatedAt:   created,
		SecretHash:  []byte("0123456789abcdef0123456789abcdef"),
	}
}

// crashChildDelegations is TestCrashChild for delegation records: eight
// goroutines write records, one per PutDelegations call (the async path)
// or four at a time (the background writer), and print "ack ID" for each
// once the call returned nil; every third record is then finished through
// UpdateDelegation, unacknowledged. It never returns.
func crashChildDelegations(ctx context.Context, store *boltstore.Store, round string) {
	var out sync.Mutex
	for g := range 8 {
		go func() {
			for i := 0; ; i++ {
				n := 1
				if g%2 == 1 {
					n = 4
				}
				recs := make([]delegation.Record, n)
				for j := range recs {
					recs[j] = crashRecord(fmt.Sprintf("r%s-g%d-%05d-%d", round, g, i, j))
				}
				if err := store.PutDelegations(ctx, recs); err != nil {
					fmt.Fprintln(os.Stderr, "child: put:", err)
					os.Exit(2)
				}
				var lines strings.Builder
				for _, r := range recs {
					lines.WriteString("ack " + r.ID + "\n")
				}
				out.Lock()
				_, err := os.Stdout.WriteString(lines.String()) // one write(2): whole lines only
				out.Unlock()
				if err != nil {
					os.Exit(2)
				}
				if i%3 == 0 {
					err := store.UpdateDelegation(ctx, recs[0].ID, func(cur *delegation.Record) (*delegation.Record, error) {
						next := *cur
						next.Status = delegation.StatusCompleted
						return &next, nil
					})
					if err != nil {
						fmt.Fprintln(os.Stderr, "child: update:", err)
						os.Exit(2)
					}
				}
			}
		}()
	}
	time.Sleep(time.Minute) // the parent kills us long before
	fmt.Fprintln(os.Stderr, "child: not killed within a minute")
	os.Exit(3)
}

// TestCrashKeepsAcknowledgedDelegations checks the durability of delegation
// records (docs/API.md#delegations): a delegation record whose PutDelegations
// returned survives kill -9 the moment after (an async delegation's callback
// must find it), and the status and target indexes agree with the records
// after the crash.
func TestCrashKeepsAcknowledgedDelegations(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs SIGKILL")
	}
	path := filepath.Join(t.TempDir(), "crash", "mesh.db")
	for round := range 3 {
		acked := runAndKill(t, path, round, 400+200*round, envCrashKind+"=delegations")

		store, err := boltstore.Open(path, nil)
		require.NoError(t, err, "round %d: the file left by the killed process must open", round)
		all := listAll(t, store, delegation.ListFilter{})
		missing := 0
		for _, id := range acked {
			rec, ok := all[id]
			if !ok {
				missing++
				continue
			}
			want := crashRecord(id)
			assert.Equal(t, want.Task, rec.Task, id)
			assert.Equal(t, want.TargetAgent, rec.TargetAgent, id)
			assert.Equal(t, want.SecretHash, rec.SecretHash, id)
		}
		assert.Zero(t, missing, "round %d: acknowledged delegation records lost", round)

		// Every record is in exactly one status listing and one target
		// listing: the indexes were committed with the records.
		seen := map[string]int{}
		for _, st := range []delegation.Status{delegation.StatusAccepted, delegation.StatusCompleted} {
			for id, rec := range listAll(t, store, delegation.ListFilter{Status: st}) {
				assert.Equal(t, st, rec.Status, id)
				seen[id]++
			}
		}
		for _, target := range []string{"agent-0", "agent-1", "agent-2", "agent-3"} {
			for id := range listAll(t, store, delegation.ListFilter{Target: target}) {
				seen[id] += 10
			}
		}
		for id := range all {
			assert.Equal(t, 11, seen[id], "%s: in the status and target listings once each", id)
		}
		assert.Len(t, seen, len(all))
		t.Logf("round %d: %d acknowledged before SIGKILL, %d stored in all", round, len(acked), len(all))
		require.NoError(t, store.Close())
	}
}

// listAll returns every record f selects, by ID.
func listAll(t *testing.T, s *boltstore.Store, f delegation.ListFilter) map[string]delegation.Record {
	t.Helper()
	out := map[string]delegation.Record{}
	f.Limit = delegation.MaxListLimit
	for {
		page, err := s.ListDelegations(t.Context(), f)
		require.NoError(t, err)
		for _, r := range page {
			out[r.ID] = r
		}
		if len(page) < f.Limit {
			return out
		}
		f.Offset += f.Limit
	}
}

// runAndKill runs the child writer on path, SIGKILLs it once it has
// acknowledged killAfter registrations, and returns every name it
// acknowledged, including those still in the pipe when it died.
func runAndKill(t *testing.T, path string, round, killAfter int, env ...string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashPath+"="+path, fmt.Sprintf("%s=%d", envCrashRound, round))
	cmd.Env = append(cmd.Env, env...)
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
