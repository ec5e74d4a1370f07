package storetest_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/internal/harness/storetest"
)

func TestBreakerStoreOnMemstore(t *testing.T) {
	storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store { return openMemstore(t) }, memstoreOptions)
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
	checkSuiteCatchesBugs(t, child, bugs, true)
}

// TestBrokenBreakerStoreChild runs the breaker suite against a store with
// the bug named by $STORETEST_BROKEN_STORE. It does nothing unless started
// by TestBreakerSuiteCatchesBrokenStores.
func TestBrokenBreakerStoreChild(t *testing.T) {
	bug := brokenChildBug(t, "TestBreakerSuiteCatchesBrokenStores")
	storetest.TestBreakerStore(t, func(t *testing.T) breaker.Store {
		return &brokenBreakerStore{brokenBase: brokenBase{bug: bug}, m: map[string]breaker.Snapshot{}}
	}, brokenOptions)
}

// brokenBreakerStore is a map store that is correct except for its bug.
type brokenBreakerStore struct {
	brokenBase
	m map[string]breaker.Snapshot
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
