package boltstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// holdCommitter queues a write whose fn blocks until the returned release
// is called, so that writes queued meanwhile form the next batch. It waits
// until the committer is inside fn. The held write's error is sent on the
// returned channel.
func holdCommitter(t *testing.T, s *Store) (release func(), held <-chan error) {
	t.Helper()
	inside, gate := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.UpdateAgent(context.Background(), "held", func(*registry.Agent) (*registry.Agent, error) {
			close(inside)
			<-gate
			a := testAgent("held")
			return &a, nil
		})
	}()
	<-inside
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }, errc
}

// waitQueued waits until n writes are queued for the committer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending) == n
	}, 10*time.Second, time.Millisecond)
}

// commitAsOneBatch queues calls for the committer behind a held write, one
// after the other in the order given, then releases the held write and
// returns each call's error once all have returned. It asserts that the
// whole batch took one commit after the held write's.
func commitAsOneBatch(t *testing.T, s *Store, calls []func() error) []error {
	t.Helper()
	release, held := holdCommitter(t, s)
	before := s.commits.Load()
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { errs[i] = call() })
		waitQueued(t, s, i+1) // queue in this order
	}
	release()
	wg.Wait()
	require.NoError(t, <-held)
	assert.Equal(t, before+2, s.commits.Load(), "the held write and then one commit for the whole batch")
	return errs
}

func TestGroupCommitIsolatesRequests(t *testing.T) {
	s := openTemp(t)
	putAgent(t, s, testAgent("existing"))
	release, held := holdCommitter(t, s)
	before := s.commits.Load()

	errBoom := errors.New("boom")
	fns := map[string]func(cur *registry.Agent) (*registry.Agent, error){
		"ok-1": func(*registry.Agent) (*registry.Agent, error) { a := testAgent("ok-1"); return &a, nil },
		"fails": func(*registry.Agent) (*registry.Agent, error) {
			a := testAgent("fails")
			return &a, errBoom
		},
		"panics": func(*registry.Agent) (*registry.Agent, error) { panic("kaboom") },
		"existing": func(cur *registry.Agent) (*registry.Agent, error) {
			return nil, errBoom // must not delete it
		},
		"ok-2": func(*registry.Agent) (*registry.Agent, error) { a := testAgent("ok-2"); return &a, nil },
	}
	errs := make(map[string]error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, fn := range fns {
		wg.Go(func() {
			err := s.UpdateAgent(t.Context(), name, fn)
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	waitQueued(t, s, len(fns))
	release()
	wg.Wait()
	require.NoError(t, <-held)

	assert.Equal(t, before+2, s.commits.Load(), "the held write and then one commit for the whole batch")
	assert.NoError(t, errs["ok-1"])
	assert.NoError(t, errs["ok-2"])
	assert.Same(t, errBoom, errs["fails"]) //nolint:testifylint // returned unchanged
	assert.Same(t, errBoom, errs["existing"])
	require.Error(t, errs["panics"])
	assert.Contains(t, errs["panics"].Error(), "kaboom")

	for _, name := range []string{"ok-1", "ok-2", "existing", "held"} {
		_, err := s.GetAgent(t.Context(), name)
		assert.NoError(t, err, name)
	}
	for _, name := range []string{"fails", "panics"} {
		_, err := s.GetAgent(t.Context(), name)
		assert.ErrorIs(t, err, registry.ErrNotFound, name)
	}
}

func TestGroupCommitSameNameInOneBatch(t *testing.T) {
	s := openTemp(t)
	release, held := holdCommitter(t, s)
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			assert.NoError(t, s.UpdateAgent(t.Context(), "counter", func(cur *registry.Agent) (*registry.Agent, error) {
				a := testAgent("counter")
				if cur != nil {
					a.TTLSeconds = cur.TTLSeconds + 1
				}
				return &a, nil
			}))
		})
	}
	waitQueued(t, s, n)
	release()
	wg.Wait()
	require.NoError(t, <-held)
	a, err := s.GetAgent(t.Context(), "counter")
	require.NoError(t, err)
	assert.Equal(t, n-1, a.TTLSeconds, "each fn in a batch must see the write before it")
}

func TestSingleWriterCommitsAlone(t *testing.T) {
	s := openTemp(t)
	before := s.commits.Load()
	const n = 50
	start := time.Now()
	for i := range n {
		putAgent(t, s, testAgent(fmt.Sprintf("agent-%02d", i)))
	}
	elapsed := time.Since(start)
	assert.Equal(t, before+n, s.commits.Load(), "one commit per sequential write")
	// bbolt's Batch waits MaxBatchDelay (10 ms) for company before each
	// lone commit: the same writes through it, on the same file in the
	// same run, take n × 10 ms longer. A committer that waited like it
	// would be no faster, whatever the disk's speed today.
	start = time.Now()
	for i := range n {
		require.NoError(t, s.db.Batch(func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketAgents).Put(fmt.Appendf(nil, "batch-%02d", i), []byte(`{}`))
		}))
	}
	batched := time.Since(start)
	assert.Less(t, elapsed, batched, "a lone writer must not wait for a batch to fill (bbolt's Batch: %v)", batched)
}

func TestCancelWhileQueued(t *testing.T) {
	s := openTemp(t)
	release, held := holdCommitter(t, s)
	defer release()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	called := make(chan struct{}, 1)
	go func() {
		errc <- s.UpdateAgent(ctx, "cancelled", func(*registry.Agent) (*registry.Agent, error) {
			called <- struct{}{}
			a := testAgent("cancelled")
			return &a, nil
		})
	}()
	waitQueued(t, s, 1)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	release()
	require.NoError(t, <-held)
	putAgent(t, s, testAgent("after")) // the committer has moved past the cancelled write
	_, err := s.GetAgent(t.Context(), "cancelled")
	assert.ErrorIs(t, err, registry.ErrNotFound)
	assert.Empty(t, called, "a withdrawn write's fn must not run")
}

func TestCloseFailsQueuedWrites(t *testing.T) {
	path := t.TempDir() + "/mesh.db"
	s, err := Open(path, nil)
	require.NoError(t, err)
	release, held := holdCommitter(t, s)
	const n = 5
	errc := make(chan error, n)
	for i := range n {
		go func() {
			errc <- s.UpdateAgent(t.Context(), fmt.Sprintf("queued-%d", i), func(*registry.Agent) (*registry.Agent, error) {
				a := testAgent("queued")
				return &a, nil
			})
		}()
	}
	waitQueued(t, s, n)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	require.Eventually(t, s.closed.Load, 5*time.Second, time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned while a commit was in progress")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	require.NoError(t, <-held, "the write being committed when Close ran completes")
	require.NoError(t, <-closed)
	for range n {
		assert.ErrorIs(t, <-errc, ErrClosed)
	}

	s, err = Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "held", list[0].Name)
}

func TestZeroStoreIsInert(t *testing.T) {
	var s Store
	_, err := s.GetAgent(t.Context(), "x")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.ListAgents(t.Context())
	assert.ErrorIs(t, err, ErrClosed)
	err = s.UpdateAgent(t.Context(), "x", func(*registry.Agent) (*registry.Agent, error) { return nil, nil })
	assert.ErrorIs(t, err, ErrClosed)

	assert.ErrorIs(t, s.PutDelegations(t.Context(), []delegation.Record{{ID: "x"}}), ErrClosed)
	assert.ErrorIs(t, s.PutDelegations(t.Context(), nil), ErrClosed)
	err = s.UpdateDelegation(t.Context(), "x", func(cur *delegation.Record) (*delegation.Record, error) { return cur, nil })
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.GetDelegation(t.Context(), "x")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.ListDelegations(t.Context(), delegation.ListFilter{})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.PruneDelegations(t.Context(), time.Now(), 0)
	assert.ErrorIs(t, err, ErrClosed)

	_, err = s.LoadBreakers(t.Context())
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, s.SaveBreaker(t.Context(), "x", breaker.Snapshot{Multiplier: 1}), ErrClosed)
	assert.ErrorIs(t, s.DeleteBreaker(t.Context(), "x"), ErrClosed)
	assert.NoError(t, s.Close())
}

func TestUpdateAgentRejectsBadArguments(t *testing.T) {
	s := openTemp(t)
	assert.Error(t, s.UpdateAgent(t.Context(), "x", nil))
	assert.Error(t, s.UpdateAgent(t.Context(), "", func(*registry.Agent) (*registry.Agent, error) { return nil, nil }))
	long := make([]byte, 40000)
	for i := range long {
		long[i] = 'a'
	}
	assert.Error(t, s.UpdateAgent(t.Context(), string(long), func(*registry.Agent) (*registry.Agent, error) { return nil, nil }))
}
