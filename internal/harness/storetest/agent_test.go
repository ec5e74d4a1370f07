package storetest_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/registry"
)

func TestAgentStoreOnMemstore(t *testing.T) {
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store { return openMemstore(t) }, memstoreOptions)
}

// TestSuiteCatchesBrokenStores checks the suite itself: for each planted
// bug, it runs the suite against a store with that bug (in a child
// process, since the suite is meant to fail) and expects the case that
// guards the broken rule to fail.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	bugs := map[string]string{
		"shared-values":     "ReturnsCopies",
		"lost-updates":      "ConcurrentUpdatesSameName",
		"unsorted-list":     "ListInNameOrder",
		"ignores-context":   "DoneContextFails",
		"wraps-fn-error":    "FnErrorWritesNothing",
		"writes-on-error":   "FnErrorWritesNothing",
		"plain-not-found":   "GetMissingIsNotFound",
		"close-ignored":     "CallsAfterCloseFail",
		"drops-nanoseconds": "EveryFieldRoundTrips",
		"drops-token":       "EveryFieldRoundTrips",
	}
	checkSuiteCatchesBugs(t, "TestBrokenStoreChild", bugs, false)
}

// TestBrokenStoreChild runs the suite against a store with the bug named by
// $STORETEST_BROKEN_STORE. It does nothing unless started by
// TestSuiteCatchesBrokenStores.
func TestBrokenStoreChild(t *testing.T) {
	bug := brokenChildBug(t, "TestSuiteCatchesBrokenStores")
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		return &brokenStore{brokenBase: brokenBase{bug: bug}, agents: map[string]*registry.Agent{}}
	}, brokenOptions)
}

// brokenStore is a simple map store that is correct except for the bug it
// is told to have.
type brokenStore struct {
	brokenBase
	agents map[string]*registry.Agent
}

func (s *brokenStore) out(a *registry.Agent) registry.Agent {
	if s.bug == "shared-values" {
		return *a
	}
	return a.Clone()
}

func (s *brokenStore) GetAgent(ctx context.Context, name string) (registry.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return registry.Agent{}, err
	}
	a, ok := s.agents[name]
	if !ok {
		return registry.Agent{}, s.notFound(registry.ErrNotFound)
	}
	return s.out(a), nil
}

func (s *brokenStore) ListAgents(ctx context.Context) ([]registry.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var list []registry.Agent
	for _, a := range s.agents {
		list = append(list, s.out(a))
	}
	if s.bug != "unsorted-list" {
		slices.SortFunc(list, func(a, b registry.Agent) int { return cmp.Compare(a.Name, b.Name) })
	}
	return list, nil
}

func (s *brokenStore) UpdateAgent(ctx context.Context, name string, fn func(*registry.Agent) (*registry.Agent, error)) error {
	s.mu.Lock()
	if err := s.check(ctx); err != nil {
		s.mu.Unlock()
		return err
	}
	var cur *registry.Agent
	if a, ok := s.agents[name]; ok {
		c := a.Clone()
		cur = &c
	}
	if s.bug == "lost-updates" {
		// fn runs unlocked, and the write does not check for a change.
		next, err := callUnlocked(&s.brokenBase, func() (*registry.Agent, error) { return fn(cur) })
		defer s.mu.Unlock()
		return s.write(name, next, err)
	}
	defer s.mu.Unlock()
	next, err := fn(cur)
	return s.write(name, next, err)
}

// write stores fn's result; s.mu is held.
func (s *brokenStore) write(name string, next *registry.Agent, err error) error {
	switch {
	case err != nil && s.bug == "wraps-fn-error":
		return fmt.Errorf("broken: %w", err)
	case err != nil && s.bug != "writes-on-error":
		return err
	case next == nil:
		delete(s.agents, name)
	default:
		c := *next
		if s.bug != "shared-values" {
			c = next.Clone()
		}
		if s.bug == "drops-nanoseconds" {
			c.RegisteredAt = c.RegisteredAt.Truncate(time.Second)
		}
		if s.bug == "drops-token" && c.Auth != nil {
			c.Auth.Token = ""
		}
		s.agents[name] = &c
	}
	return err
}
