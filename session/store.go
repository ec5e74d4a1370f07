package session

import (
	"context"
	"time"
)

// Store persists sessions for a [Manager]. Implementations live outside
// this package (store/memstore, store/boltstore, store/etcdstore) and must
// pass the conformance suite in internal/harness/storetest.
//
// Every method must be safe for concurrent use. A method called after the
// store is closed returns an error wrapping the store's ErrClosed; a
// context that is already done fails a call with the context's error,
// with nothing written.
//
// # Invariants
//
// The store keeps, for each user, an active slot: the id of the user's one
// session with status active. It enforces that at most one session per
// user is active, atomically per user — this, not the Manager, is what
// makes concurrent first messages of one user end in one session:
//
//   - only [Store.UpdateActiveSession] creates sessions, and a session it
//     creates is active and takes the user's slot, which must be free (or
//     freed by the same call);
//   - a write that changes a session's status from active to a closed
//     status frees the slot in the same transaction; a closed session is
//     never made active again;
//   - a session's ID, UserID and Principal never change;
//   - deleting a session (the expiry sweep) frees its slot.
//
// A write that would break an invariant fails with an error wrapping
// [ErrConflict] and writes nothing. A slot that points to a missing
// session, or to one that is not active, counts as free: a store whose
// records vanish on their own (etcd leases) may leave such slots behind.
//
// The store never looks at the clock. ExpiresAt is data to it, except in
// [Store.DeleteExpiredSessions], which is given the time; deciding that an
// active session has expired is the Manager's, against its injected clock.
//
// # Atomicity per backend
//
//   - memstore: fn runs without any lock; the write commits under the
//     store's lock only if the session (and for UpdateActiveSession the
//     user's slot) did not change meanwhile, else fn runs again.
//   - boltstore: fn runs inside the one write transaction that reads and
//     writes the sessions bucket, its expiry index and the
//     sessions_by_user slot; bbolt has a single writer.
//   - store/etcdstore: the key <prefix>sessions/by_user/<user> holds the
//     slot. UpdateActiveSession reads the user key and the session it
//     names, runs fn, and commits with one transaction comparing both
//     keys' mod revisions (and the new session key's create revision = 0),
//     putting the records and the slot; on a failed comparison it reads
//     again and reruns fn. A session's keys, its slot included, share a
//     lease ending a grace period (1 h) after ExpiresAt, so sessions that
//     no one sweeps vanish by themselves, slot and all.
type Store interface {
	// GetSession returns the session with the given id, whatever its
	// status or expiry, or an error wrapping [ErrNotFound].
	GetSession(ctx context.Context, id string) (Session, error)

	// GetActiveSession returns the session in the active slot slot (a
	// user's, [SlotKey]), or an error wrapping [ErrNotFound] when the
	// slot is free. It returns the session even if its ExpiresAt has
	// passed.
	GetActiveSession(ctx context.Context, slot string) (Session, error)

	// UpdateSession atomically reads the session with the given id, passes
	// a copy to fn and stores what fn returns. A missing session gives an
	// error wrapping [ErrNotFound] without calling fn. If fn returns nil
	// and no error, nothing is written. If fn returns an error, nothing is
	// written and that error is returned unchanged.
	//
	// The result must keep cur's ID, UserID and Principal, and may not make a closed
	// session active ([ErrConflict]). Closing an active session frees the
	// user's slot in the same write.
	//
	// fn may be called more than once (optimistic stores retry it), so it
	// must have no side effects beyond its return values and variables it
	// overwrites; the last call's result is the one committed. It must not
	// call back into the store's write methods (an embedded store runs it
	// inside its write transaction). When UpdateSession returns nil, the
	// write is durable.
	UpdateSession(ctx context.Context, id string, fn func(cur *Session) (*Session, error)) error

	// UpdateActiveSession atomically reads the session in the active slot
	// slot (a user's, [SlotKey]; nil when the slot is free), passes a copy
	// to fn, and writes what fn returns, all in one transaction:
	//
	//   - upd, when not nil, is the new version of cur (same ID, UserID
	//     and Principal). Giving it a closed status frees the slot.
	//   - next, when not nil, is a new session that takes the slot. It must
	//     have status active, [Session.Slot] slot and an ID no stored
	//     session has, and the slot must end up free before it: cur is nil, or upd
	//     closes it.
	//
	// Both nil writes nothing (get-or-create found a live session). If fn
	// returns an error, nothing is written and that error is returned
	// unchanged. fn is subject to the same rules as UpdateSession's.
	UpdateActiveSession(ctx context.Context, slot string, fn func(cur *Session) (upd, next *Session, err error)) error

	// DeleteExpiredSessions deletes every session whose ExpiresAt is not
	// after now, whatever its status, freeing the slots of active ones, and
	// returns how many it deleted. A store may delete in several
	// transactions; on an error it returns the number deleted so far.
	//
	// visit, if not nil, is called with each deleted session that was
	// active (status active: its TTL passed with no one closing it), as it
	// was stored, once the transaction that deleted it is durable: on the
	// calling goroutine, before DeleteExpiredSessions returns, outside any
	// transaction and lock of the store (visit may call the store). It is
	// never called with a closed session, nor with one whose deletion
	// failed. Of concurrent sweeps, in one process or on replicas sharing
	// the store, exactly one deletes each session, and only that one
	// visits it. A nil visit lets the store delete without decoding.
	DeleteExpiredSessions(ctx context.Context, now time.Time, visit func(Session)) (int, error)
}

// ActiveCounter is an optional interface of a [Store]: the number of
// active sessions (occupied user slots), for the agentmesh_sessions_active
// metric. An active session whose ExpiresAt has passed counts until the
// sweep deletes it. It should be cheap — a count, not a scan of the
// records — as a metrics scrape calls it.
type ActiveCounter interface {
	CountActiveSessions(ctx context.Context) (int, error)
}
