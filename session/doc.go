// Package session keeps the multi-turn conversations of the routing
// orchestrator (docs/API.md#sessions): one [Session] per conversation, at
// most one active session per user, a sliding TTL, a capped turn history,
// the agent's workflow state and a pending clarification
// (docs/API.md#clarification).
//
// [Manager] runs the lifecycle over a [Store]; store/memstore and
// store/boltstore implement the Store (and store/etcdstore will), all
// checked by one conformance suite. The router uses a Manager like this:
//
//	m, err := session.NewManager(store, &session.Options{SweepInterval: time.Minute})
//	if err != nil {
//		return err
//	}
//	defer m.Close()
//	s, created, err := m.GetOrCreate(ctx, session.Params{UserID: "alice", ActiveAgent: "finance"})
//	s, err = m.AppendTurns(ctx, s.ID, session.Turn{Role: session.RoleUser, Content: input})
//	// … dispatch to s.ActiveAgent …
//	s, err = m.AppendTurns(ctx, s.ID, session.Turn{Role: session.RoleAgent, Content: reply})
//	if complete {
//		s, err = m.CloseSession(ctx, s.ID, session.StatusCompleted)
//	}
//
// A [Session] marshals to the seed orchestrator's snake_case wire form,
// the body of GET /v1/sessions/{id}.
//
// # Concurrency
//
// A Manager is safe for concurrent use and keeps no session state of its
// own: each operation is one atomic store call (Resume is two), so the
// guarantees hold across goroutines, Managers and, with a shared store,
// replicas:
//
//   - One active session per user is enforced by the store, atomically per
//     user ([Store.UpdateActiveSession]): concurrent first messages of one
//     user all get the same session from [Manager.GetOrCreate], and exactly
//     one of them reports it created.
//   - The turns of a session are serialised by the store's atomic
//     read-modify-write ([Store.UpdateSession]): concurrent
//     [Manager.AppendTurns] calls all land, none lost, each call's turns
//     contiguous and in order.
//   - Closing a session frees the user's slot in the same write, so no
//     session is left dangling as active.
//
// The Manager sweeps expired sessions on a goroutine of its own every
// Options.SweepInterval (1 min by default; negative: never, the host calls
// [Manager.Sweep]); [Manager.Close] stops it. Functions passed to the store run
// inside its write transaction (boltstore) or may run more than once
// (memstore), so they are pure: they compute from the session they are
// given and the time read once per call.
//
// # Expiry
//
// Time comes from Options.Now, and every expiry is computed lazily, when a
// method runs: there is no timer per session. An active session expires
// Options.TTL (30 min) after its creation or its last turn — each
// [Manager.AppendTurns] slides ExpiresAt. A closed session is kept for
// Options.Retention (24 h), readable and resumable, then expires. Once its
// ExpiresAt has passed a session is gone whatever its status: [Manager.Get]
// and [Manager.Active] report [ErrExpired], GetOrCreate treats the user's
// expired active session as absent (closing it abandoned in the write that
// creates its successor), and updates refuse it. [Manager.Sweep], called by
// the host or by the owned sweeper, deletes expired sessions from the
// store, freeing their users' slots. A pending clarification lapses
// Options.ClarificationTTL (5 min) after it was set: reads leave it out and
// [Manager.TakeClarification] returns nil for it.
//
// # Events
//
// Options.OnClose hears of every session that ends, with a [CloseEvent]:
// its ids, agent, turn count, lifetime and how it ended — completed,
// abandoned, error, or [StatusExpired] for an active session whose TTL
// passed unclosed (found by a write that replaces it, or deleted by the
// sweep). It is called after the write is durable, never from a store
// function, at most once per session; see CloseEvent for each path and
// for what the guarantee leaves out.
//
// # Errors
//
// Errors wrap the sentinels of this package; match them with [errors.Is]:
//
//   - [ErrNotFound]: no such session, or the user has no active session.
//   - [ErrExpired]: the session expired; it also matches ErrNotFound.
//   - [ErrNotActive]: the session is closed and takes no more changes.
//   - [ErrForbidden]: resuming another user's session.
//   - [ErrInvalid]: a malformed argument (empty user id, bad role, a status
//     that does not close).
//   - [ErrConflict]: a Store refused a write that would break its
//     invariants; the Manager never causes it.
//
// Store errors (a closed store, a damaged file, a done context) are
// returned wrapped.
package session
