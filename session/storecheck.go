package session

import (
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/principal"
)

// The two functions below are the write rules of the [Store] invariants,
// shared by the store implementations (store/memstore, store/boltstore):
// a store calls them on what fn returned, before writing anything, and
// fails the write with their error, which wraps [ErrConflict]. Of cur they
// read only ID, UserID, Principal and Status, so a store may pass a snapshot holding
// just those fields. Whether a new session's ID is already taken is left
// to the store, which alone can look it up.

// CheckUpdate checks next, what an update function returned for the stored
// session cur, against the [Store] invariants: next keeps cur's ID,
// UserID and Principal, and a session that is not active is never made active again.
func CheckUpdate(cur, next *Session) error {
	switch {
	case next.ID != cur.ID:
		return fmt.Errorf("%w: the update function changed the id to %q", ErrConflict, next.ID)
	case next.UserID != cur.UserID:
		return fmt.Errorf("%w: the update function changed the user id", ErrConflict)
	case principal.Of(next.Principal) != principal.Of(cur.Principal):
		return fmt.Errorf("%w: the update function changed the principal", ErrConflict)
	case cur.Status != StatusActive && next.Status == StatusActive:
		return fmt.Errorf("%w: a %s session cannot become active again", ErrConflict, cur.Status)
	}
	return nil
}

// CheckActiveUpdate checks what an [Store.UpdateActiveSession] function for
// slot returned — upd, the new version of the session cur in the active
// slot (nil cur for a free slot), and next, a new active session —
// against the [Store] invariants: upd follows [CheckUpdate]; next is
// active, takes slot ([Session.Slot]), has a non-empty ID other than
// cur's, and the slot is free or upd frees it.
func CheckActiveUpdate(slot string, cur, upd, next *Session) error {
	if upd != nil {
		if cur == nil {
			return fmt.Errorf("%w: the update function returned an update but the slot is free", ErrConflict)
		}
		if err := CheckUpdate(cur, upd); err != nil {
			return err
		}
	}
	if next == nil {
		return nil
	}
	switch {
	case next.ID == "":
		return fmt.Errorf("%w: new session with an empty id", ErrConflict)
	case next.Status != StatusActive:
		return fmt.Errorf("%w: new session with status %q, not active", ErrConflict, next.Status)
	case next.Slot() != slot:
		return fmt.Errorf("%w: new session of another user", ErrConflict)
	case cur != nil && next.ID == cur.ID:
		return fmt.Errorf("%w: new session with the id of the current one", ErrConflict)
	case cur != nil && (upd == nil || upd.Status == StatusActive):
		return fmt.Errorf("%w: the user already has an active session, which the update function did not close", ErrConflict)
	}
	return nil
}

// Stored is what a store keeps, during a write, of the version of a
// session it read: the fields the write rules check and the ones its
// indexes are keyed by. It is a copy taken before the update function
// runs: that function must not change cur, but stores do not rely on it.
type Stored struct {
	ID, UserID, Principal string
	Status                Status
	ExpiresAt             time.Time
}

// StoredOf returns the Stored fields of s.
func StoredOf(s *Session) Stored {
	return Stored{ID: s.ID, UserID: s.UserID, Principal: s.Principal, Status: s.Status, ExpiresAt: s.ExpiresAt}
}

// Keys returns a Session holding the fields of s that [CheckUpdate] and
// [CheckActiveUpdate] read.
func (s Stored) Keys() *Session {
	return &Session{ID: s.ID, UserID: s.UserID, Principal: s.Principal, Status: s.Status}
}

// Slot returns the key of the active slot of the session s was read
// from ([Session.Slot]).
func (s Stored) Slot() string { return SlotKey(s.Principal, s.UserID) }
