package session

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/internal/jsonvalue"
	"github.com/agentmesh/agentmesh/principal"
)

// Status is the lifecycle state of a [Session].
type Status string

// The statuses of a session (docs/API.md#sessions). A session is created
// active; every other status is final: a closed session never becomes
// active again.
const (
	StatusActive    Status = "active"
	StatusCompleted Status = "completed" // the workflow completed, or the session was resumed
	StatusAbandoned Status = "abandoned" // the user or the mesh left it (DELETE, agent gone, expired, replaced)
	StatusError     Status = "error"     // dispatch failed with no fallback
)

// Closed reports whether st is one of the final statuses a session can be
// closed with: completed, abandoned or error.
func (st Status) Closed() bool {
	return st == StatusCompleted || st == StatusAbandoned || st == StatusError
}

// Role says who spoke a [Turn].
type Role string

// The roles of a turn.
const (
	RoleUser  Role = "user"
	RoleAgent Role = "agent"
)

// Turn is one entry of a session's history.
type Turn struct {
	Role      Role      `json:"role"`
	Content   string    `json:"content"`
	Timestamp time.Time `json:"timestamp"`
	// IntentSummary is the classifier's summary of a user turn, if any.
	IntentSummary string `json:"intent_summary,omitempty"`
	// Agent is the agent that answered, for an agent turn.
	Agent string `json:"agent,omitempty"`
}

// Clarification is a pending clarification question
// (docs/API.md#clarification): the user was asked whether they meant
// SuggestedAgent, and their next message is classified together with
// OriginalInput. It lapses at Expires.
type Clarification struct {
	SuggestedAgent string    `json:"suggested_agent"`
	OriginalInput  string    `json:"original_input"`
	Expires        time.Time `json:"expires"`
}

// Session is the session record (docs/API.md#sessions). Its JSON form, with
// the seed orchestrator's snake_case names, is the wire form of
// GET /v1/sessions/{id}; turn_history and workflow_state are never null.
//
// Every session has an expiry. An active session's ExpiresAt slides to now
// + TTL on every turn; a closed one keeps the record readable (and
// resumable) until ExpiresAt = closing time + retention. Once ExpiresAt has
// passed the session is gone, whatever its status: reads report
// [ErrExpired] and the sweep deletes it.
type Session struct {
	ID          string `json:"session_id"`
	UserID      string `json:"user_id"`
	EmployeeID  string `json:"employee_id"`
	Status      Status `json:"status"`
	ActiveAgent string `json:"active_agent"`
	// TurnHistory holds at most Options.MaxTurns turns, oldest first.
	TurnHistory []Turn `json:"turn_history"`
	// WorkflowState is the last state an agent returned; each new state
	// replaces it whole.
	WorkflowState        map[string]any `json:"workflow_state"`
	PendingClarification *Clarification `json:"pending_clarification,omitempty"`
	Metadata             map[string]any `json:"metadata,omitempty"`
	CreatedAt            time.Time      `json:"created_at"`
	UpdatedAt            time.Time      `json:"updated_at"`
	ExpiresAt            time.Time      `json:"expires_at"`
	// Principal is the principal whose request created the session (see
	// package principal); empty is principal.Default. The same user id
	// sent by another principal is another user, with a session of its
	// own, and only this principal (or an admin) reads or changes it.
	Principal string `json:"principal,omitempty"`
}

// Slot returns the key of the user's active slot the session takes when
// it is active: [SlotKey] of its principal and user id.
func (s *Session) Slot() string { return SlotKey(s.Principal, s.UserID) }

// SlotKey returns the key of the active slot of user userID of
// principal p: the user id itself for principal.Default (and an empty
// p), so that sessions stored before sessions had principals keep their
// slots; else p, a NUL byte and the user id (user ids hold no NUL).
func SlotKey(p, userID string) string {
	if principal.Of(p) == principal.Default {
		return userID
	}
	return p + "\x00" + userID
}

// MarshalJSON encodes s in its wire form, with an empty turn_history and
// workflow_state rather than null.
func (s Session) MarshalJSON() ([]byte, error) {
	type wire Session // without the method
	w := wire(s)
	if w.TurnHistory == nil {
		w.TurnHistory = []Turn{}
	}
	if w.WorkflowState == nil {
		w.WorkflowState = map[string]any{}
	}
	return json.Marshal(w)
}

// ExpiredAt reports whether s is gone at now: its ExpiresAt is not after
// now. A zero ExpiresAt counts as expired.
func (s Session) ExpiredAt(now time.Time) bool {
	return !s.ExpiresAt.After(now)
}

// Clone returns a deep copy of s. The maps and slices of WorkflowState and
// Metadata are copied at every depth; other values in them (strings,
// numbers) are immutable or shared.
func (s Session) Clone() Session {
	s.TurnHistory = slices.Clone(s.TurnHistory)
	s.WorkflowState = jsonvalue.CloneMap(s.WorkflowState)
	s.Metadata = jsonvalue.CloneMap(s.Metadata)
	if s.PendingClarification != nil {
		c := *s.PendingClarification
		s.PendingClarification = &c
	}
	return s
}
