package delegation

import (
	"errors"
	"fmt"
	"time"
)

// Error codes of SPEC.md carried by delegation failures (on the record's
// Code and by the errors of this package).
const (
	CodeNotFound           = "not_found"
	CodeNoMatch            = "no_match"
	CodeInvalidArgument    = "invalid_argument"
	CodeDepthExceeded      = "depth_exceeded"
	CodeDelegationCycle    = "delegation_cycle"
	CodeResourceNotCovered = "resource_not_covered"
	CodeAgentUnavailable   = "agent_unavailable"
	CodeAgentError         = "agent_error"
	CodeAgentUnreachable   = "agent_unreachable"
	CodeBadResponse        = "bad_response"
	CodeResponseTooLarge   = "response_too_large"
	CodeEndpointNotAllowed = "endpoint_not_allowed"
	CodeTimeout            = "timeout"
	CodeCanceled           = "canceled"
	CodeInterrupted        = "interrupted"
	CodeUnauthenticated    = "unauthenticated"
	CodeConflict           = "conflict"
	CodeUnavailable        = "unavailable"
)

// Sentinel errors. Match them with [errors.Is]; map them to SPEC codes
// with [Code].
//
// The refusals of [Client.Delegate] (ErrNotFound, ErrNoMatch, ErrInvalid,
// ErrDepthExceeded, ErrCycle, ErrResourceNotCovered) mean nothing was sent
// and no record was written. A delegation that ran and failed is not an
// error: it is a record with Status failed (or timeout, canceled) and a
// Code.
var (
	// ErrNotFound: no record with that id, or no agent with that name.
	ErrNotFound = errors.New("delegation: not found")
	// ErrNoMatch: no registered agent matches the discovery query.
	ErrNoMatch = errors.New("delegation: no agent matches the query")
	// ErrInvalid: the request is malformed (no task, a bad timeout, a
	// context whose depth or chain has the wrong type, a bad query).
	ErrInvalid = errors.New("delegation: invalid request")
	// ErrDepthExceeded: context.depth is at or over the client's MaxDepth.
	ErrDepthExceeded = errors.New("delegation: maximum delegation depth reached")
	// ErrCycle: the target is already on context.chain (or is the source
	// agent itself).
	ErrCycle = errors.New("delegation: delegation cycle")
	// ErrResourceNotCovered: the target does not cover a required
	// resource.
	ErrResourceNotCovered = errors.New("delegation: required resource not covered")
	// ErrUnauthenticated: a callback carried a wrong or no secret.
	ErrUnauthenticated = errors.New("delegation: wrong or missing callback secret")
	// ErrFinal: the record is already final (completed, failed, timeout or
	// canceled) and cannot change.
	ErrFinal = errors.New("delegation: already final")
	// ErrConflict: the record cannot be changed from this replica (a
	// synchronous delegation running on another one).
	ErrConflict = errors.New("delegation: conflict")
	// ErrClosed: the client or store was closed.
	ErrClosed = errors.New("delegation: closed")
)

// Code maps an error returned by this package to its SPEC error code, or ""
// when the error is not one of this package's. Front-ends put it in the
// "code" field of their error responses.
func Code(err error) string {
	var te *TransportError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrNoMatch):
		return CodeNoMatch
	case errors.Is(err, ErrInvalid):
		return CodeInvalidArgument
	case errors.Is(err, ErrDepthExceeded):
		return CodeDepthExceeded
	case errors.Is(err, ErrCycle):
		return CodeDelegationCycle
	case errors.Is(err, ErrResourceNotCovered):
		return CodeResourceNotCovered
	case errors.Is(err, ErrUnauthenticated):
		return CodeUnauthenticated
	case errors.Is(err, ErrFinal), errors.Is(err, ErrConflict):
		return CodeConflict
	case errors.Is(err, ErrClosed):
		return CodeUnavailable
	case errors.As(err, &te):
		return te.Code
	}
	return ""
}

// TransportError is a failed attempt to reach an agent or a reply the mesh
// could not accept. Transports return it; the client decides from it
// whether to retry and what to record.
type TransportError struct {
	// Code is the SPEC error code (agent_error, agent_unreachable,
	// bad_response, response_too_large, endpoint_not_allowed, timeout).
	Code string
	// Status is the agent's HTTP status, when it answered.
	Status int
	// Retryable is true when the request certainly did not reach the
	// agent's handler or the agent asked for a retry: connection refused,
	// DNS failure, HTTP 502/503/504 and 429.
	Retryable bool
	// RetryAfter is the agent's Retry-After, when it sent one.
	RetryAfter time.Duration
	// Message is a human-readable description, safe to store and show: it
	// becomes the record's Error.
	Message string
	// Err is the underlying error, if any. It is not shown to callers.
	Err error
}

// Error returns Message, followed by the HTTP status when Message does not
// already carry it.
func (e *TransportError) Error() string {
	if e.Status != 0 && !hasStatus(e.Message, e.Status) {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	}
	return e.Message
}

// hasStatus reports whether msg is the "agent returned <status>: …" text
// of the http transport.
func hasStatus(msg string, status int) bool {
	prefix := fmt.Sprintf("agent returned %d", status)
	return len(msg) >= len(prefix) && msg[:len(prefix)] == prefix
}

// Unwrap returns the underlying error.
func (e *TransportError) Unwrap() error { return e.Err }
