package session

import (
	"context"
	"fmt"
	"time"
)

// StatusExpired is the Status of a [CloseEvent] for an active session
// whose TTL passed without anyone closing it. It is never the status of a
// stored session: the Manager records such a session as abandoned (when
// it replaces it) or deletes it (the sweep).
const StatusExpired Status = "expired"

// CloseEvent describes a session that ended, for [Options.OnClose]. Its
// JSON form has the snake_case names of the [Session] wire form.
//
// The Manager reports one CloseEvent for each way a session ends:
//
//   - [Manager.CloseSession] with its status (completed, abandoned or
//     error);
//   - [Manager.Resume]: the prior session, completed, if it was active (a
//     prior already closed was reported when it closed); the user's other
//     active session, abandoned;
//   - [Manager.GetOrCreate] and [Manager.Resume] replacing the user's
//     active session whose TTL passed: expired;
//   - [Manager.Sweep] deleting an active session whose TTL passed:
//     expired.
//
// # Guarantee
//
// At most once per session, across every Manager sharing the store: an
// event reports a store write that moved the session out of active, or
// the sweep's deletion of an active session, and the store lets exactly
// one writer do either (one transaction wins; the others see the session
// closed or gone). It is reported after that write is durable.
//
// Not at least once: an event is lost if the process stops between the
// write and the hook; an etcd session whose lease ran out before any
// sweep deleted it (store/etcdstore keeps sessions an hour past their
// expiry, so only when no Manager swept for that long) vanishes
// unreported; a session closed by writing the Store directly, not through
// a Manager, is not reported.
type CloseEvent struct {
	SessionID  string `json:"session_id"`
	UserID     string `json:"user_id"`
	EmployeeID string `json:"employee_id"`
	// ActiveAgent is the agent the session was routed to when it ended.
	ActiveAgent string `json:"active_agent"`
	// Status is how it ended: completed, abandoned, error, or
	// [StatusExpired].
	Status Status `json:"status"`
	// Turns is the number of turns in its history: at most
	// Options.MaxTurns, and for a resumed session, counting the turns it
	// carried over.
	Turns     int       `json:"turns"`
	CreatedAt time.Time `json:"created_at"`
	// ClosedAt is when it was closed; for an expired session, when its
	// TTL passed (its ExpiresAt), not when the Manager noticed.
	ClosedAt time.Time `json:"closed_at"`
}

// Duration is how long the session lived: from CreatedAt to ClosedAt.
func (e CloseEvent) Duration() time.Duration { return e.ClosedAt.Sub(e.CreatedAt) }

// closeEventOf returns the event of s closing with status at.
func closeEventOf(s *Session, status Status, at time.Time) CloseEvent {
	return CloseEvent{
		SessionID:   s.ID,
		UserID:      s.UserID,
		EmployeeID:  s.EmployeeID,
		ActiveAgent: s.ActiveAgent,
		Status:      status,
		Turns:       len(s.TurnHistory),
		CreatedAt:   s.CreatedAt,
		ClosedAt:    at,
	}
}

// closed reports e to Options.OnClose, if set. Call it only once the
// write that closed the session returned nil, never from a store
// function. The hook gets ctx without its cancellation: what it reports
// has happened, and it may be called as the sweeper stops.
func (m *Manager) closed(ctx context.Context, e CloseEvent) {
	m.log.Debug("session: closed", "session_id", e.SessionID, "status", string(e.Status))
	if m.onClose == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			m.log.Error("session: OnClose panicked", "session_id", e.SessionID, "status", string(e.Status), "panic", fmt.Sprint(p))
		}
	}()
	m.onClose(context.WithoutCancel(ctx), e)
}
