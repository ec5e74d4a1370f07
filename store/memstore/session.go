package memstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/session"
)

var _ session.Store = (*Store)(nil)

// sessionTable holds the sessions of a Store: the records by ID and each
// user's active slot. s.mu guards it. Every write bumps s.rev and stamps
// the entries it writes, so an optimistic update can tell whether a
// session changed while its function ran.
type sessionTable struct {
	byID   map[string]*sessionEntry
	active map[string]string // user ID → ID of the user's active session
}

// sessionEntry is a stored session and the revision that wrote it.
type sessionEntry struct {
	s   session.Session
	rev uint64
}

// sessionKeys is what the invariants of a write are checked against: the
// fields of the session an update function was given, taken before the
// call (fn must not change cur, but the store does not rely on it).
type sessionKeys struct {
	id, user, principal string
	status              session.Status
}

func keysOfSession(s *session.Session) sessionKeys {
	return sessionKeys{id: s.ID, user: s.UserID, principal: s.Principal, status: s.Status}
}

// session returns the fields of k that [session.CheckUpdate] reads.
func (k sessionKeys) session() *session.Session {
	return &session.Session{ID: k.id, UserID: k.user, Principal: k.principal, Status: k.status}
}

// GetSession implements [session.Store.GetSession]: it returns a deep copy
// of the session with the given id, or an error wrapping
// [session.ErrNotFound].
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return session.Session{}, fmt.Errorf("memstore: get session %q: %w", id, ErrClosed)
	}
	e, ok := s.sessions.byID[id]
	if !ok {
		return session.Session{}, fmt.Errorf("memstore: session %q: %w", id, session.ErrNotFound)
	}
	return e.s.Clone(), nil
}

// GetActiveSession implements [session.Store.GetActiveSession]: it
// returns a deep copy of the session in userID's active slot, or an error
// wrapping [session.ErrNotFound].
func (s *Store) GetActiveSession(ctx context.Context, userID string) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return session.Session{}, fmt.Errorf("memstore: get active session: %w", ErrClosed)
	}
	e := s.activeLocked(userID)
	if e == nil {
		return session.Session{}, fmt.Errorf("memstore: active session: %w", session.ErrNotFound)
	}
	return e.s.Clone(), nil
}

// activeLocked returns the entry in user's slot when it is an active
// session of user, else nil. s.mu is held.
func (s *Store) activeLocked(user string) *sessionEntry {
	id, ok := s.sessions.active[user]
	if !ok {
		return nil
	}
	e := s.sessions.byID[id]
	if e == nil || e.s.Status != session.StatusActive || e.s.Slot() != user {
		return nil
	}
	return e
}

// UpdateSession implements [session.Store.UpdateSession]. fn gets a deep
// copy of the current session and is called without any lock held; if
// another write to the session commits while fn runs, fn is called again
// with the new session. What fn returns is copied before it is stored. A
// panic in fn propagates to the caller with nothing written.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(cur *session.Session) (*session.Session, error)) error {
	if fn == nil {
		return fmt.Errorf("memstore: update session %q: nil function", id)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur, rev, err := s.readSession(id)
		if err != nil {
			return err
		}
		k := keysOfSession(&cur)
		next, err := fn(&cur)
		if err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		if err := session.CheckUpdate(k.session(), next); err != nil {
			return fmt.Errorf("memstore: update session %q: %w", id, err)
		}
		done, err := s.commitSession(k, rev, next.Clone())
		if done || err != nil {
			return err
		}
	}
}

// readSession returns a copy of the session id and its revision.
func (s *Store) readSession(id string) (session.Session, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return session.Session{}, 0, fmt.Errorf("memstore: update session %q: %w", id, ErrClosed)
	}
	e, ok := s.sessions.byID[id]
	if !ok {
		return session.Session{}, 0, fmt.Errorf("memstore: session %q: %w", id, session.ErrNotFound)
	}
	return e.s.Clone(), e.rev, nil
}

// commitSession stores next, the new version of the session k read at
// revision rev, if it is still at rev, and reports whether it did.
func (s *Store) commitSession(k sessionKeys, rev uint64, next session.Session) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, fmt.Errorf("memstore: update session %q: %w", k.id, ErrClosed)
	}
	if e, ok := s.sessions.byID[k.id]; !ok || e.rev != rev {
		return false, nil // changed or deleted since read: read again
	}
	s.putSessionLocked(k.status, next)
	return true, nil
}

// UpdateActiveSession implements [session.Store.UpdateActiveSession]. fn
// gets a deep copy of the session in userID's slot (nil when it is free)
// and is called without any lock held; if the slot or that session changes
// while fn runs, fn is called again. What fn returns is copied before it
// is stored. A panic in fn propagates to the caller with nothing written.
func (s *Store) UpdateActiveSession(ctx context.Context, userID string, fn func(cur *session.Session) (upd, next *session.Session, err error)) error {
	switch {
	case fn == nil:
		return errors.New("memstore: update active session: nil function")
	case userID == "":
		return errors.New("memstore: update active session: empty user id")
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		slot, cur, rev, err := s.readActive(userID)
		if err != nil {
			return err
		}
		var k *sessionKeys
		if cur != nil {
			kk := keysOfSession(cur)
			k = &kk
		}
		upd, next, err := fn(cur)
		if err != nil {
			return err
		}
		if upd == nil && next == nil {
			return nil
		}
		var ks *session.Session
		if k != nil {
			ks = k.session()
		}
		if err := session.CheckActiveUpdate(userID, ks, upd, next); err != nil {
			return fmt.Errorf("memstore: update active session: %w", err)
		}
		var updc, nextc *session.Session
		if upd != nil {
			c := upd.Clone()
			updc = &c
		}
		if next != nil {
			c := next.Clone()
			nextc = &c
		}
		done, err := s.commitActive(userID, slot, k, rev, updc, nextc)
		if done || err != nil {
			return err
		}
	}
}

// slotState is a user's slot as read: the ID it held and whether it held
// one.
type slotState struct {
	id string
	ok bool
}

// readActive returns userID's slot, a copy of the active session in it
// (nil when none) and that session's revision.
func (s *Store) readActive(userID string) (slotState, *session.Session, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return slotState{}, nil, 0, fmt.Errorf("memstore: update active session: %w", ErrClosed)
	}
	var slot slotState
	slot.id, slot.ok = s.sessions.active[userID]
	e := s.activeLocked(userID)
	if e == nil {
		return slot, nil, 0, nil
	}
	c := e.s.Clone()
	return slot, &c, e.rev, nil
}

// commitActive writes upd and next for userID if neither the slot nor the
// session in it changed since they were read, and reports whether it did.
func (s *Store) commitActive(userID string, slot slotState, k *sessionKeys, rev uint64, upd, next *session.Session) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, fmt.Errorf("memstore: update active session: %w", ErrClosed)
	}
	if id, ok := s.sessions.active[userID]; id != slot.id || ok != slot.ok {
		return false, nil
	}
	if k != nil {
		if e, ok := s.sessions.byID[k.id]; !ok || e.rev != rev {
			return false, nil
		}
	}
	if next != nil {
		if _, taken := s.sessions.byID[next.ID]; taken {
			return false, fmt.Errorf("memstore: update active session: %w: a session with id %q exists", session.ErrConflict, next.ID)
		}
	}
	if upd != nil {
		s.putSessionLocked(k.status, *upd)
	}
	if next != nil {
		s.putSessionLocked("", *next)
	}
	return true, nil
}

// putSessionLocked stores sess, which the store owns; was is the status of
// the version it replaces ("" for a new session). It keeps the user's slot
// in step: an active session takes it, a session leaving active frees it.
// s.mu is held for writing.
func (s *Store) putSessionLocked(was session.Status, sess session.Session) {
	t := &s.sessions
	if t.byID == nil {
		t.byID = make(map[string]*sessionEntry)
	}
	if t.active == nil {
		t.active = make(map[string]string)
	}
	s.rev++
	t.byID[sess.ID] = &sessionEntry{s: sess, rev: s.rev}
	switch {
	case sess.Status == session.StatusActive:
		t.active[sess.Slot()] = sess.ID
	case was == session.StatusActive && t.active[sess.Slot()] == sess.ID:
		delete(t.active, sess.Slot())
	}
}

// DeleteExpiredSessions implements [session.Store.DeleteExpiredSessions]:
// it deletes, under the lock, every session whose ExpiresAt is not after
// now, freeing the slots of active ones, and returns how many it deleted.
// It scans every session. visit is called with copies of the active ones
// once the lock is released.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, visit func(session.Session)) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, active, err := s.deleteExpiredSessions(now, visit != nil)
	for _, sess := range active {
		visit(sess)
	}
	return n, err
}

// deleteExpiredSessions deletes the expired sessions under the lock and
// returns how many it deleted and, with keepActive, copies of the active
// ones.
func (s *Store) deleteExpiredSessions(now time.Time, keepActive bool) (int, []session.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, nil, fmt.Errorf("memstore: delete expired sessions: %w", ErrClosed)
	}
	t := &s.sessions
	n := 0
	var active []session.Session
	for id, e := range t.byID {
		if e.s.ExpiresAt.After(now) {
			continue
		}
		delete(t.byID, id)
		if t.active[e.s.Slot()] == id {
			delete(t.active, e.s.Slot())
		}
		if keepActive && e.s.Status == session.StatusActive {
			active = append(active, e.s.Clone())
		}
		n++
	}
	if n > 0 {
		s.rev++
	}
	return n, active, nil
}

var _ session.ActiveCounter = (*Store)(nil)

// CountActiveSessions implements [session.ActiveCounter]: the number of
// users whose slot holds an active session.
func (s *Store) CountActiveSessions(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, fmt.Errorf("memstore: count active sessions: %w", ErrClosed)
	}
	n := 0
	for user := range s.sessions.active {
		if s.activeLocked(user) != nil {
			n++
		}
	}
	return n, nil
}
