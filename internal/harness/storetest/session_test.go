package storetest_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/session"
)

func TestSessionStoreOnMemstore(t *testing.T) {
	storetest.TestSessionStore(t, func(t *testing.T) session.Store { return openMemstore(t) }, memstoreOptions)
}

// TestSessionSuiteCatchesBrokenStores checks TestSessionStore the way
// TestSuiteCatchesBrokenStores checks TestAgentStore: each planted bug
// must fail the case that guards the broken rule.
func TestSessionSuiteCatchesBrokenStores(t *testing.T) {
	const child = "TestBrokenSessionStoreChild"
	bugs := map[string]string{
		"check-then-act":     "OneActivePerUserUnderConcurrentCreators",
		"lost-updates":       "ConcurrentUpdatesLoseNothing",
		"close-keeps-slot":   "ClosingFreesTheSlot",
		"slot-by-user":       "PrincipalsHaveSlotsOfTheirOwn",
		"principal-changes":  "PrincipalsHaveSlotsOfTheirOwn",
		"sweep-skips-active": "SweepDeletesExpired",
		"sweep-strict":       "SweepDeletesExpired",
		"visits-closed":      "SweepVisitsExpiredActive",
		"visits-nothing":     "SweepVisitsExpiredActive",
		"visits-under-lock":  "SweepVisitsExpiredActive",
		"visits-partial":     "SweepVisitsExpiredActive",
		"second-active":      "RefusesWritesBreakingInvariants",
		"reactivates":        "RefusesWritesBreakingInvariants",
		"hides-expired":      "StoreIgnoresTheClock",
		"shared-values":      "ReturnsCopies",
		"drops-nanoseconds":  "EveryFieldRoundTrips",
		"drops-intent":       "EveryFieldRoundTrips",
		"wraps-fn-error":     "FnErrorWritesNothing",
		"plain-not-found":    "GetMissingIsNotFound",
		"ignores-context":    "DoneContextFails",
		"close-ignored":      "CallsAfterCloseFail",
		"count-all":          "CountsActiveSessions",
	}
	checkSuiteCatchesBugs(t, child, bugs, true)
}

// TestBrokenSessionStoreChild runs the session suite against a store with
// the bug named by $STORETEST_BROKEN_STORE. It does nothing unless started
// by TestSessionSuiteCatchesBrokenStores.
func TestBrokenSessionStoreChild(t *testing.T) {
	bug := brokenChildBug(t, "TestSessionSuiteCatchesBrokenStores")
	storetest.TestSessionStore(t, func(t *testing.T) session.Store {
		return &brokenSessionStore{brokenBase: brokenBase{bug: bug}, byID: map[string]session.Session{}, active: map[string]string{}}
	}, brokenOptions)
}

// brokenSessionStore is a map store, with every function run under its
// one lock, that is correct except for the bug it is told to have.
type brokenSessionStore struct {
	brokenBase
	byID   map[string]session.Session
	active map[string]string
}

func (s *brokenSessionStore) out(v session.Session) session.Session {
	if s.bug == "shared-values" {
		return v
	}
	return v.Clone()
}

func (s *brokenSessionStore) GetSession(ctx context.Context, id string) (session.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return session.Session{}, err
	}
	v, ok := s.byID[id]
	if !ok {
		return session.Session{}, s.notFound(session.ErrNotFound)
	}
	return s.out(v), nil
}

func (s *brokenSessionStore) GetActiveSession(ctx context.Context, user string) (session.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return session.Session{}, err
	}
	cur := s.activeLocked(user)
	if cur == nil {
		return session.Session{}, s.notFound(session.ErrNotFound)
	}
	return s.out(*cur), nil
}

func (s *brokenSessionStore) activeLocked(user string) *session.Session {
	v, ok := s.byID[s.active[user]]
	if !ok || v.Status != session.StatusActive && s.bug != "close-keeps-slot" {
		return nil
	}
	if s.bug == "hides-expired" && v.ExpiredAt(time.Now()) {
		return nil
	}
	return &v
}

func (s *brokenSessionStore) UpdateSession(ctx context.Context, id string, fn func(*session.Session) (*session.Session, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	v, ok := s.byID[id]
	if !ok {
		return s.notFound(session.ErrNotFound)
	}
	cur := v.Clone()
	if s.bug == "lost-updates" {
		next, err := callUnlocked(&s.brokenBase, func() (*session.Session, error) { return fn(&cur) })
		return s.writeUpdate(v, next, err)
	}
	next, err := fn(&cur)
	return s.writeUpdate(v, next, err)
}

func (s *brokenSessionStore) writeUpdate(old session.Session, next *session.Session, err error) error {
	switch {
	case err != nil && s.bug == "wraps-fn-error":
		return fmt.Errorf("broken: %w", err)
	case err != nil:
		return err
	case next == nil:
		return nil
	case next.ID != old.ID || next.UserID != old.UserID || next.Principal != old.Principal && s.bug != "principal-changes":
		return fmt.Errorf("broken: %w", session.ErrConflict)
	case old.Status != session.StatusActive && next.Status == session.StatusActive && s.bug != "reactivates":
		return fmt.Errorf("broken: %w", session.ErrConflict)
	}
	s.put(old.Status, *next)
	return nil
}

func (s *brokenSessionStore) put(was session.Status, v session.Session) {
	if s.bug != "shared-values" {
		v = v.Clone()
	}
	if s.bug == "drops-nanoseconds" {
		v.CreatedAt = v.CreatedAt.Truncate(time.Second)
	}
	if s.bug == "drops-intent" && len(v.TurnHistory) > 0 {
		v.TurnHistory[0].IntentSummary = ""
	}
	s.byID[v.ID] = v
	switch {
	case v.Status == session.StatusActive:
		s.active[s.slot(&v)] = v.ID
	case was == session.StatusActive && s.active[s.slot(&v)] == v.ID && s.bug != "close-keeps-slot":
		delete(s.active, s.slot(&v))
	}
}

// slot is v's active slot; with the bug "slot-by-user" the principal
// is left out of it.
func (s *brokenSessionStore) slot(v *session.Session) string {
	if s.bug == "slot-by-user" {
		return v.UserID
	}
	return v.Slot()
}

func (s *brokenSessionStore) UpdateActiveSession(ctx context.Context, user string, fn func(*session.Session) (*session.Session, *session.Session, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	var cur *session.Session
	if v := s.activeLocked(user); v != nil {
		c := v.Clone()
		cur = &c
	}
	var old *session.Session
	if cur != nil {
		c := cur.Clone()
		old = &c
	}
	if s.bug == "check-then-act" {
		s.mu.Unlock()
		runtime.Gosched()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	}
	upd, next, err := fn(cur)
	switch {
	case err != nil && s.bug == "wraps-fn-error":
		return fmt.Errorf("broken: %w", err)
	case err != nil:
		return err
	}
	if upd != nil {
		if old == nil || upd.ID != old.ID || upd.UserID != old.UserID || upd.Principal != old.Principal {
			return fmt.Errorf("broken: %w", session.ErrConflict)
		}
	}
	if next != nil {
		_, taken := s.byID[next.ID]
		switch {
		case next.ID == "" || taken || next.Status != session.StatusActive || s.slot(next) != user:
			return fmt.Errorf("broken: %w", session.ErrConflict)
		case old != nil && (upd == nil || upd.Status == session.StatusActive) && s.bug != "second-active" && s.bug != "check-then-act":
			return fmt.Errorf("broken: %w", session.ErrConflict)
		}
	}
	if upd != nil {
		s.put(session.StatusActive, *upd)
	}
	if next != nil {
		s.put("", *next)
	}
	return nil
}

func (s *brokenSessionStore) DeleteExpiredSessions(ctx context.Context, now time.Time, visit func(session.Session)) (int, error) {
	s.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	var deleted []session.Session
	for id, v := range s.byID {
		expired := !v.ExpiresAt.After(now)
		if s.bug == "sweep-strict" {
			expired = v.ExpiresAt.Before(now)
		}
		if !expired || v.Status == session.StatusActive && s.bug == "sweep-skips-active" {
			continue
		}
		delete(s.byID, id)
		if s.active[s.slot(&v)] == id {
			delete(s.active, s.slot(&v))
		}
		n++
		if v.Status == session.StatusActive || s.bug == "visits-closed" {
			deleted = append(deleted, v)
		}
	}
	if s.bug != "visits-under-lock" {
		s.mu.Unlock()
		locked = false
	}
	if visit == nil || s.bug == "visits-nothing" {
		return n, nil
	}
	for _, v := range deleted {
		if s.bug != "visits-partial" {
			v = v.Clone()
		} else {
			v.TurnHistory = nil // a record that lost its history
		}
		visit(v)
	}
	return n, nil
}

// CountActiveSessions makes brokenSessionStore a session.ActiveCounter;
// with the bug "count-all" it counts every stored session.
func (s *brokenSessionStore) CountActiveSessions(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if s.bug == "count-all" {
		return len(s.byID), nil
	}
	n := 0
	for user, id := range s.active {
		if v, ok := s.byID[id]; ok && v.Status == session.StatusActive && s.slot(&v) == user {
			n++
		}
	}
	return n, nil
}
