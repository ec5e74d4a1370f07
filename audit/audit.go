package audit

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Outcome says how an audited action ended.
type Outcome string

// The outcomes of an [Entry].
const (
	// OutcomeSuccess: the action took place (an agent registered, a
	// delegation completed or was accepted, a routing decision made).
	OutcomeSuccess Outcome = "success"
	// OutcomeFailure: the action was attempted and failed (a delegation
	// that failed or timed out, a reload that was refused).
	OutcomeFailure Outcome = "failure"
	// OutcomeDenied: the action was refused before it took place: bad or
	// missing credentials, a missing scope, an endpoint the policy refuses,
	// an invalid request.
	OutcomeDenied Outcome = "denied"
)

// The actions agentmesh records (docs/OPERATIONS.md#audit-log).
// Entry.Action is free text; these are the values the mesh itself writes.
const (
	// ActionAuthFailure: a request to an authenticated route was refused
	// (401 or 403). Actor is the token's name for a missing scope, empty for
	// missing or invalid credentials; Details has the route and client IP.
	ActionAuthFailure = "auth.failure"
	// ActionAgentRegister: an agent was registered or replaced (or the
	// attempt was refused: Code says why, endpoint_not_allowed for a
	// refused endpoint). Target is the agent.
	ActionAgentRegister = "agent.register"
	// ActionAgentUnregister: an agent was unregistered.
	ActionAgentUnregister = "agent.unregister"
	// ActionAgentExpire: the mesh removed an agent whose TTL lapsed.
	ActionAgentExpire = "agent.expire"
	// ActionReload: the agent directory and tokens were reloaded.
	ActionReload = "reload"
	// ActionDelegation: a delegation was requested; Outcome and Code are
	// its result (accepted counts as success for an async one).
	ActionDelegation = "delegation"
	// ActionDelegationFinish: an accepted (async) delegation reached its
	// final status: its callback arrived, it timed out or was canceled.
	ActionDelegationFinish = "delegation.finish"
	// ActionRoutingDecision: the orchestrator handled a message
	// (docs/API.md#routing):
	// Details has the decision, reason, confidence and delegation id.
	ActionRoutingDecision = "routing.decision"
	// ActionBreakerTransition: an agent's circuit breaker changed state;
	// Details has from and to.
	ActionBreakerTransition = "breaker.transition"
)

// Entry is one audit record: who did what, to what, when, and how it
// ended. Its JSON form is the wire form of GET /v1/audit.
type Entry struct {
	// ID identifies the entry. IDs made by [NewID] sort bytewise in time
	// order; a [Recorder] sets it.
	ID string `json:"id"`
	// Time is when the action happened.
	Time time.Time `json:"time"`
	// Actor is who acted: the name of the API token (never the token
	// itself), "agent:<name>" for an agent acting through its callback,
	// or empty for the mesh itself and for callers that presented no
	// valid token.
	Actor string `json:"actor,omitempty"`
	// Principal is who the actor acts for (see package principal): the
	// token's principal, which several tokens may share. Empty when Actor
	// is.
	Principal string `json:"principal,omitempty"`
	// Action is what was done: one of the Action… constants for entries
	// the mesh writes.
	Action string `json:"action"`
	// Target is what it was done to: an agent name, most often.
	Target string `json:"target,omitempty"`
	// Outcome is how it ended.
	Outcome Outcome `json:"outcome"`
	// Code is the machine code of a failure or refusal (the HTTP API's
	// error codes, docs/API.md#errors, and delegation codes), or the
	// reason of a routing decision.
	Code string `json:"code,omitempty"`
	// Details are further facts, as strings: a delegation id, a status,
	// a route, a client IP. Never a secret or a task's text.
	Details map[string]string `json:"details,omitempty"`
}

// Clone returns a copy of e that shares nothing with it.
func (e Entry) Clone() Entry {
	if e.Details != nil {
		d := make(map[string]string, len(e.Details))
		for k, v := range e.Details {
			d[k] = v
		}
		e.Details = d
	}
	return e
}

// Query selects entries for [Store.ListAudit]. The zero value lists the
// newest DefaultListLimit entries.
type Query struct {
	// Since keeps only entries whose Time is at or after Since. Zero keeps
	// every entry.
	Since time.Time
	// Before keeps only entries older than the entry with this ID (it sorts
	// before it): the cursor of the next page, the ID of the last entry of
	// the previous one. Empty starts from the newest entry.
	Before string
	// Limit is the page size: ≤ 0 means DefaultListLimit; a store caps it
	// at MaxListLimit.
	Limit int
}

// PageLimit returns q's page size as a store applies it: Limit, with
// DefaultListLimit for ≤ 0 and capped at MaxListLimit.
func (q Query) PageLimit() int {
	if q.Limit <= 0 {
		return DefaultListLimit
	}
	return min(q.Limit, MaxListLimit)
}

// Page sizes of audit listings (GET /v1/audit).
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Store persists audit entries. Implementations live in store/memstore,
// store/boltstore (and store/etcdstore) and pass the conformance suite in
// internal/harness/storetest.
//
// Entries are ordered by ID (bytewise); IDs made by [NewID] start with
// their entry's time, so that order is time order and [MinID] finds a
// time. Every method must be safe for concurrent use. A method called
// after the store is closed returns an error wrapping the store's
// ErrClosed; a context already done fails a call with its error, with
// nothing written.
type Store interface {
	// AppendAudit writes entries in one durable commit. Each must have a
	// non-empty ID of at most 64 bytes; an entry with the ID of a stored
	// one replaces it. When it returns nil, every entry is durable.
	AppendAudit(ctx context.Context, entries []Entry) error

	// ListAudit returns entries newest first (by ID descending), filtered
	// and paged by q.
	ListAudit(ctx context.Context, q Query) ([]Entry, error)

	// PruneAudit deletes the entries older than olderThan (by ID against
	// MinID(olderThan); a zero olderThan deletes none by age), then the
	// oldest entries beyond keep (keep ≤ 0: no limit), and returns how
	// many it deleted.
	PruneAudit(ctx context.Context, olderThan time.Time, keep int) (int, error)
}

// ErrInvalid is wrapped by the errors of a [Store] for an entry it cannot
// store (an empty or oversized ID).
var ErrInvalid = errors.New("audit: invalid entry")

// MaxIDLen is the longest entry ID a store must accept.
const MaxIDLen = 64

// CheckEntry reports whether a store can hold e: its ID must be non-empty
// and at most MaxIDLen bytes. Stores call it on AppendAudit.
func CheckEntry(e *Entry) error {
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalid)
	case len(e.ID) > MaxIDLen:
		return fmt.Errorf("%w: ID of %d bytes, more than %d", ErrInvalid, len(e.ID), MaxIDLen)
	}
	return nil
}

// timeKeyLen is the length of the time part of an ID, in bytes before
// hex encoding: 8 bytes of Unix seconds with the sign bit flipped, then 4
// of nanoseconds, big-endian, so that byte order is time order for every
// time.Time.
const timeKeyLen = 12

// MinID returns the smallest ID [NewID] can make for a time at or after
// t: the ID of every entry with Time ≥ t sorts at or after it, that of
// every older entry before it.
func MinID(t time.Time) string {
	var k [timeKeyLen]byte
	binary.BigEndian.PutUint64(k[:8], uint64(t.Unix())^1<<63)
	binary.BigEndian.PutUint32(k[8:], uint32(t.Nanosecond()))
	return hex.EncodeToString(k[:])
}

// NewID returns a new entry ID for an entry at time t: MinID(t) followed
// by 8 random hex digits (32 characters in all), so IDs sort in time order
// and two IDs for the same instant differ.
func NewID(t time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return MinID(t) + hex.EncodeToString(r[:])
}
