package delegation

import (
	"errors"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Error codes carried by delegation failures: on a record's Code, and by
// the errors of this package through [Code]. The codes several packages
// share are those of apierr (invalid_argument among them, declared only
// there).
const (
	CodeNotFound           = apierr.CodeNotFound
	CodeNoMatch            = "no_match"
	CodeDepthExceeded      = "depth_exceeded"
	CodeDelegationCycle    = "delegation_cycle"
	CodeResourceNotCovered = "resource_not_covered"
	CodeAgentUnavailable   = "agent_unavailable"
	CodeAgentError         = "agent_error"
	CodeAgentUnreachable   = "agent_unreachable"
	CodeBadResponse        = "bad_response"
	CodeResponseTooLarge   = "response_too_large"
	CodeEndpointNotAllowed = "endpoint_not_allowed"
	CodeTimeout            = apierr.CodeTimeout
	CodeCanceled           = apierr.CodeCanceled
	CodeInterrupted        = "interrupted"
	CodeUnauthenticated    = apierr.CodeUnauthenticated
	CodeConflict           = apierr.CodeConflict
	CodeUnavailable        = apierr.CodeUnavailable
)

// Sentinel errors. Match them with [errors.Is]; read their code with
// [Code]. Each describes itself ([apierr.Describe]): its code and its
// message without the "delegation: " prefix, as do the errors with detail
// made from them, whose messages are safe to show.
//
// The refusals of [Client.Delegate] (ErrNotFound, ErrNoMatch, ErrInvalid,
// ErrDepthExceeded, ErrCycle, ErrResourceNotCovered) mean nothing was sent
// and no record was written. A delegation that ran and failed is not an
// error: it is a record with Status failed (or timeout, canceled) and a
// Code.
var (
	// ErrNotFound: no record with that id, or no agent with that name.
	ErrNotFound = apierr.New(pkg, CodeNotFound, "not found")
	// ErrNoMatch: no registered agent matches the discovery query.
	ErrNoMatch = apierr.New(pkg, CodeNoMatch, "no agent matches the query")
	// ErrInvalid: the request is malformed (no task, a bad timeout, a
	// context whose depth or chain has the wrong type, a bad query).
	ErrInvalid = apierr.New(pkg, apierr.CodeInvalidArgument, "invalid request")
	// ErrDepthExceeded: context.depth is at or over the client's MaxDepth.
	ErrDepthExceeded = apierr.New(pkg, CodeDepthExceeded, "maximum delegation depth reached")
	// ErrCycle: the target is already on context.chain (or is the source
	// agent itself).
	ErrCycle = apierr.New(pkg, CodeDelegationCycle, "delegation cycle")
	// ErrResourceNotCovered: the target does not cover a required
	// resource.
	ErrResourceNotCovered = apierr.New(pkg, CodeResourceNotCovered, "required resource not covered")
	// ErrUnauthenticated: a callback carried a wrong or no secret.
	ErrUnauthenticated = apierr.New(pkg, CodeUnauthenticated, "wrong or missing callback secret")
	// ErrFinal: the record is already final (completed, failed, timeout or
	// canceled) and cannot change.
	ErrFinal = apierr.New(pkg, CodeConflict, "already final")
	// ErrConflict: the record cannot be changed from this replica (a
	// synchronous delegation running on another one).
	ErrConflict = apierr.New(pkg, CodeConflict, "conflict")
	// ErrClosed: the client or store was closed (or the Client is a zero
	// one, not made by New).
	ErrClosed = apierr.New(pkg, CodeUnavailable, "closed")
)

// pkg is the package name the errors of this package carry.
const pkg = "delegation"

// sentinels are the sentinel errors of this package.
var sentinels = []*apierr.Error{
	ErrNotFound, ErrNoMatch, ErrInvalid, ErrDepthExceeded, ErrCycle,
	ErrResourceNotCovered, ErrUnauthenticated, ErrFinal, ErrConflict, ErrClosed,
}

// Code returns the error code of an error returned by this package, or ""
// when the error is not one of this package's. Front-ends put it in the
// "code" field of their error responses.
//
// It is the code [apierr.Describe] reports for the first sentinel of this
// package (or error with detail made from one) in err's chain, else the
// Code of a *[TransportError] in it. Unlike apierr.Describe, it reports
// nothing for another package's errors or a context's.
func Code(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) && own(e) {
		code, _ := e.Describe()
		return code
	}
	var te *TransportError
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

// own reports whether e is a sentinel of this package or was made from
// one.
func own(e *apierr.Error) bool {
	for _, s := range sentinels {
		if errors.Is(e, s) {
			return true
		}
	}
	return false
}

// TransportError is a failed attempt to reach an agent or a reply the mesh
// could not accept. Transports return it; the client decides from it
// whether to retry and what to record.
type TransportError struct {
	// Code is the error code (agent_error, agent_unreachable,
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

	// statusShown is set when Message names Status (see statusError).
	statusShown bool
}

// Error returns Message, followed by " (HTTP <status>)" when there is a
// Status that Message does not name (Message names it when it comes from
// the transports' mapping of an HTTP status: "agent returned <status>…").
func (e *TransportError) Error() string {
	if e.Status == 0 || e.statusShown {
		return e.Message
	}
	return e.Message + " (HTTP " + strconv.Itoa(e.Status) + ")"
}

// Describe returns Code and Message: a TransportError describes itself
// ([apierr.Described]) with what its record would carry.
func (e *TransportError) Describe() (code, message string) { return e.Code, e.Message }

// Unwrap returns the underlying error.
func (e *TransportError) Unwrap() error { return e.Err }
