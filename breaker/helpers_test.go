package breaker

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
)

// t0 is the fake clock's starting time.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// clock is a fake clock that moves only when told to.
type clock = clocktest.Clock

func newClock() *clock { return clocktest.New(t0) }

var errBoom = errors.New("boom")

// fail reports n failed calls to b, each admitted first.
func fail(t *testing.T, b *Breaker, n int) {
	t.Helper()
	for range n {
		done, err := b.Allow()
		require.NoError(t, err)
		done(errBoom)
	}
}

// succeed reports n successful calls to b, each admitted first.
func succeed(t *testing.T, b *Breaker, n int) {
	t.Helper()
	for range n {
		done, err := b.Allow()
		require.NoError(t, err)
		done(nil)
	}
}

// requireOpen checks that b refuses a call with an *OpenError whose Until is
// until.
func requireOpen(t *testing.T, b *Breaker, until time.Time) {
	t.Helper()
	done, err := b.Allow()
	require.Nil(t, done)
	require.ErrorIs(t, err, ErrOpen)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, b.Name(), oe.Name)
	require.True(t, until.Equal(oe.Until), "open until %v, want %v", oe.Until, until)
	require.Equal(t, StateOpen, b.State())
}

// memStore is an in-memory Store for tests. It stores JSON-free copies
// (Snapshot has no reference fields) and counts calls.
type memStore struct {
	mu      sync.Mutex
	m       map[string]Snapshot
	saves   int
	deletes int
	failErr error // when set, every call fails with it
}

func newMemStore() *memStore { return &memStore{m: map[string]Snapshot{}} }

func (s *memStore) LoadBreakers(ctx context.Context) (map[string]Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failErr != nil {
		return nil, s.failErr
	}
	return maps.Clone(s.m), nil
}

func (s *memStore) SaveBreaker(ctx context.Context, name string, snap Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	if s.failErr != nil {
		return s.failErr
	}
	s.m[name] = snap
	return nil
}

func (s *memStore) DeleteBreaker(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes++
	if s.failErr != nil {
		return s.failErr
	}
	delete(s.m, name)
	return nil
}

func (s *memStore) get(name string) (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.m[name]
	return snap, ok
}

func (s *memStore) counts() (saves, deletes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves, s.deletes
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failErr = err
}

var _ Store = (*memStore)(nil)
