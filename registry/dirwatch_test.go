package registry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// reloads records the reloads a DirWatcher makes on file changes.
type reloads struct {
	mu   sync.Mutex
	reps []registry.ReloadReport
	errs []error
}

func (r *reloads) record(rep registry.ReloadReport, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reps = append(r.reps, rep)
	r.errs = append(r.errs, err)
}

func (r *reloads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reps)
}

func (r *reloads) last() (registry.ReloadReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reps[len(r.reps)-1], r.errs[len(r.errs)-1]
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
}

// touch gives path a modification time of its own, so that a rewrite of
// the same size is seen whatever the file system's timestamp granularity.
func touch(t *testing.T, path string, i int) {
	t.Helper()
	mt := time.Date(2030, 1, 1, 0, 0, i, 0, time.UTC)
	require.NoError(t, os.Chtimes(path, mt, mt))
}

func newWatcher(t *testing.T, r *registry.Registry, dir string, rec *reloads) *registry.DirWatcher {
	t.Helper()
	w, err := registry.NewDirWatcher(context.Background(), r, dir, &registry.WatchOptions{
		LookupEnv:    noEnv,
		PollInterval: 100 * time.Millisecond,
		OnReload:     rec.record,
	})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

func TestDirWatcherCoalescesChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.yaml"), agentYAML("a"))
		r := newRegistry(t, nil, nil)
		var rec reloads
		newWatcher(t, r, dir, &rec)
		assert.Equal(t, []string{"a"}, names(listAll(t, r)), "loaded at start")

		// Four writes 150 ms apart (each within the 500 ms settle time of
		// the previous one) make one reload, once the directory is quiet.
		for i, name := range []string{"b", "c", "sub/d", "e"} {
			writeFile(t, filepath.Join(dir, filepath.FromSlash(name)+".yaml"), agentYAML(filepath.Base(name)))
			touch(t, filepath.Join(dir, filepath.FromSlash(name)+".yaml"), i)
			time.Sleep(150 * time.Millisecond)
			synctest.Wait()
			assert.Zero(t, rec.count(), "no reload while files keep changing")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 1, rec.count())
		rep, err := rec.last()
		require.NoError(t, err)
		assert.Equal(t, []string{"b", "c", "d", "e"}, rep.Added)
		assert.Equal(t, []string{"a", "b", "c", "d", "e"}, names(listAll(t, r)))

		// A change to one file, and a removal, make one more reload each.
		writeFile(t, filepath.Join(dir, "a.yaml"), agentYAML("a", "display_name: A"))
		touch(t, filepath.Join(dir, "a.yaml"), 10)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 2, rec.count())
		rep, _ = rec.last()
		assert.Equal(t, []string{"a"}, rep.Replaced)

		require.NoError(t, os.Remove(filepath.Join(dir, "e.yaml")))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 3, rec.count())
		rep, _ = rec.last()
		assert.Equal(t, []string{"e"}, rep.Removed)

		// Nothing changes: no reload.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, 3, rec.count())
	})
}

func TestDirWatcherKeepsPreviousSetOnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.yaml"), agentYAML("a"))
		writeFile(t, filepath.Join(dir, "b.yaml"), agentYAML("b"))
		r := newRegistry(t, nil, nil)
		var rec reloads
		w := newWatcher(t, r, dir, &rec)
		require.NoError(t, w.LastError())

		// b breaks and c appears: all or nothing, so neither applies.
		writeFile(t, filepath.Join(dir, "b.yaml"), agentYAML("b", "endpont: oops"))
		touch(t, filepath.Join(dir, "b.yaml"), 1)
		writeFile(t, filepath.Join(dir, "c.yaml"), agentYAML("c"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 1, rec.count())
		rep, err := rec.last()
		var de *registry.DirError
		require.ErrorAs(t, err, &de)
		require.Len(t, rep.Problems, 1)
		assert.Equal(t, filepath.Join(dir, "b.yaml"), rep.Problems[0].File)
		assert.Equal(t, 4, rep.Problems[0].Line)
		assert.Equal(t, []string{"a", "b"}, names(listAll(t, r)), "the previous set stays in service")
		assert.ErrorAs(t, w.LastError(), &de, "kept for /health/deep")

		// A broken directory is not reloaded again until it changes.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, rec.count())

		// Fixed: the reload applies and the error clears.
		writeFile(t, filepath.Join(dir, "b.yaml"), agentYAML("b", "display_name: fixed!"))
		touch(t, filepath.Join(dir, "b.yaml"), 2)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 2, rec.count())
		_, err = rec.last()
		require.NoError(t, err)
		assert.NoError(t, w.LastError())
		assert.Equal(t, []string{"a", "b", "c"}, names(listAll(t, r)))
	})
}

func TestDirWatcherReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), agentYAML("a"))
	r := newRegistry(t, nil, nil)
	w, err := registry.NewDirWatcher(ctx, r, dir, &registry.WatchOptions{LookupEnv: noEnv, PollInterval: -1})
	require.NoError(t, err)
	defer w.Close()

	writeFile(t, filepath.Join(dir, "b.yaml"), agentYAML("b"))
	rep, err := w.Reload(ctx)
	require.NoError(t, err)
	assert.Equal(t, registry.ReloadReport{Dir: dir, FileAgentsReport: registry.FileAgentsReport{
		Added: []string{"b"}, Unchanged: []string{"a"}}}, rep)

	// A failed reload reports every problem and changes nothing.
	writeFile(t, filepath.Join(dir, "c.yaml"), "agent_id: [c\n")
	writeFile(t, filepath.Join(dir, "d.yaml"), agentYAML("a"))
	rep, err = w.Reload(ctx)
	var de *registry.DirError
	require.ErrorAs(t, err, &de)
	require.Len(t, rep.Problems, 2)
	assert.Equal(t, filepath.Join(dir, "c.yaml")+":2: invalid YAML: did not find expected ',' or ']'", rep.Problems[0].String())
	assert.Contains(t, rep.Problems[1].String(), `d.yaml:1: agent_id "a" is already defined in`)
	assert.Equal(t, []string{"a", "b"}, names(listAll(t, r)))
	assert.Equal(t, err, w.LastError())

	// Reloads are serialised: concurrent ones all succeed and agree.
	require.NoError(t, os.Remove(filepath.Join(dir, "c.yaml")))
	require.NoError(t, os.Remove(filepath.Join(dir, "d.yaml")))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = w.Reload(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.NoError(t, w.LastError())

	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "Close is idempotent")
	_, err = w.Reload(ctx)
	assert.ErrorIs(t, err, registry.ErrClosed)
}

func TestDirWatcherStartupError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), agentYAML("a"))
	r := newRegistry(t, nil, nil)
	_, err := registry.NewDirWatcher(context.Background(), r, dir, &registry.WatchOptions{LookupEnv: noEnv, RequireDefault: true})
	var de *registry.DirError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Problems[0].Message, "no agent has is_default")
	assert.Zero(t, r.Len(), "nothing applied")

	_, err = registry.NewDirWatcher(context.Background(), nil, dir, nil)
	assert.Error(t, err)
}

// TestDirWatcherCloseStopsGoroutine relies on synctest: the bubble fails
// if any goroutine it started is still running when the function returns.
func TestDirWatcherCloseStopsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.yaml"), agentYAML("a"))
		r, err := registry.New(context.Background(), memstore.New(), &registry.Options{SweepInterval: -1})
		require.NoError(t, err)
		defer r.Close()
		var rec reloads
		w, err := registry.NewDirWatcher(context.Background(), r, dir, &registry.WatchOptions{
			LookupEnv: noEnv, PollInterval: 50 * time.Millisecond, OnReload: rec.record})
		require.NoError(t, err)
		time.Sleep(time.Second)

		// Close while a change is pending: the goroutine exits, and no
		// reload happens afterwards.
		writeFile(t, filepath.Join(dir, "b.yaml"), agentYAML("b"))
		time.Sleep(100 * time.Millisecond)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { assert.NoError(t, w.Close()) })
		}
		wg.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Zero(t, rec.count())
		assert.Equal(t, []string{"a"}, names(listAll(t, r)))
		_, err = w.Reload(context.Background())
		assert.True(t, errors.Is(err, registry.ErrClosed))
	})
}
