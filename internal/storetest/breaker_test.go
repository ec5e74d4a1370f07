package storetest_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/internal/storetest"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func TestBreakerStoreOnMemstore(t *testing.T) {
	storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

// TestBreakerSuiteCatchesBrokenStores checks TestBreakerStore the same way.
func TestBreakerSuiteCatchesBrokenStores(t *testing.T) {
	const child = "TestBrokenBreakerStoreChild"
	bugs := map[string]string{
		"shared-map":         "LoadReturnsTheCallersMap",
		"merges-on-save":     "SaveReplaces",
		"delete-missing-err": "DeleteMissingIsNoOp",
		"case-insensitive":   "NamesAreExactAndCaseSensitive",
		"drops-nanoseconds":  "EveryStateRoundTrips",
		"ignores-context":    "DoneContextFails",
		"close-ignored":      "CallsAfterCloseFail",
	}
	for bug, failing := range bugs {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			out, err := runBrokenChild(child, failing, bug)
			require.Error(t, err, "the suite passed a store with bug %q:\n%s", bug, out)
			assert.Contains(t, string(out), "--- FAIL: "+child+"/"+failing+" ",
				"bug %q must fail case %s:\n%s", bug, failing, out)
		})
	}
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		out, err := runBrokenChild(child, "", "none")
		require.NoError(t, err, "the bug-free store must pass:\n%s", out)
	})
}

// TestBrokenBreakerStoreChild runs the breaker suite against a store with
// the bug named by $STORETEST_BROKEN_STORE. It does nothing unless started
// by TestBreakerSuiteCatchesBrokenStores.
func TestBrokenBreakerStoreChild(t *testing.T) {
	bug := os.Getenv(envBroken)
	if bug == "" {
		t.Skip("only runs as the child of TestBreakerSuiteCatchesBrokenStores")
	}
	storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store {
		return &brokenBreakerStore{bug: bug, m: map[string]breaker.Snapshot{}}
	}, &storetest.Options{ErrClosed: errBrokenClosed})
}

// brokenBreakerStore is a map store that is correct except for its bug.
type brokenBreakerStore struct {
	bug    string
	mu     sync.Mutex
	m      map[string]breaker.Snapshot
	closed bool
}

func (s *brokenBreakerStore) check(ctx context.Context) error {
	if s.closed && s.bug != "close-ignored" {
		return errBrokenClosed
	}
	if s.bug != "ignores-context" {
		return ctx.Err()
	}
	return nil
}

func (s *brokenBreakerStore) key(name string) string {
	if s.bug == "case-insensitive" {
		return strings.ToLower(name)
	}
	return name
}

func (s *brokenBreakerStore) LoadBreakers(ctx context.Context) (map[string]breaker.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if s.bug == "shared-map" {
		return s.m, nil
	}
	return maps.Clone(s.m), nil
}

func (s *brokenBreakerStore) SaveBreaker(ctx context.Context, name string, snap breaker.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if old, ok := s.m[s.key(name)]; ok && s.bug == "merges-on-save" && snap.OpenUntil.IsZero() {
		snap.OpenUntil = old.OpenUntil
	}
	if s.bug == "drops-nanoseconds" {
		snap.Since = snap.Since.Truncate(time.Second)
	}
	s.m[s.key(name)] = snap
	return nil
}

func (s *brokenBreakerStore) DeleteBreaker(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := s.m[s.key(name)]; !ok && s.bug == "delete-missing-err" {
		return errors.New("broken: not stored")
	}
	delete(s.m, s.key(name))
	return nil
}

func (s *brokenBreakerStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
