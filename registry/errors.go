package registry

import (
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Error codes carried by this package's errors ([Code]). Front-ends put
// them in the "code" field of error responses. The codes several packages
// share are apierr's (invalid_argument among them, declared only there).
const (
	CodeEndpointNotAllowed = "endpoint_not_allowed"
	CodeManagedByFile      = "managed_by_file"
	CodeNotFound           = apierr.CodeNotFound
	CodeConflict           = apierr.CodeConflict
)

// Sentinel errors. Match them with [errors.Is]; read their code with
// [Code]. Each describes itself ([apierr.Describe]): its code and its
// message without the "registry: " prefix, as do the errors with detail
// made from them, whose messages are safe to show.
var (
	// ErrNotFound: no agent is registered under the name.
	ErrNotFound = apierr.New(pkg, apierr.CodeNotFound, "agent not found")
	// ErrInvalid: the agent record breaks a rule of the agent record
	// format. The error is a *[FieldError] naming the field and the rule.
	ErrInvalid = apierr.New(pkg, apierr.CodeInvalidArgument, "invalid agent")
	// ErrEndpointNotAllowed: the endpoint is refused by the endpoint policy.
	// The error is a *[FieldError] whose Rule says which rule refused it.
	ErrEndpointNotAllowed = apierr.New(pkg, CodeEndpointNotAllowed, "endpoint not allowed")
	// ErrManagedByFile: the agent belongs to the YAML agent directory and
	// the API may not replace or delete it.
	ErrManagedByFile = apierr.New(pkg, CodeManagedByFile, "agent is managed by the agent directory")
	// ErrPermissionDenied: the caller's principal does not own the agent
	// (see [Agent.Owner]) and is not an admin.
	ErrPermissionDenied = apierr.New(pkg, apierr.CodePermissionDenied, "the agent is owned by another principal")
	// ErrFull: the registry holds Options.MaxAgents agents, and a
	// registration would create one more.
	ErrFull = apierr.New(pkg, apierr.CodeConflict, "the registry is full")
	// ErrDefaultConflict: another agent is already the default agent.
	ErrDefaultConflict = apierr.New(pkg, apierr.CodeConflict, "another agent is already the default")
	// ErrBadCursor: a List cursor that this registry did not issue.
	ErrBadCursor = apierr.New(pkg, apierr.CodeInvalidArgument, "invalid cursor")
	// ErrClosed: the registry was closed.
	ErrClosed = apierr.New(pkg, apierr.CodeUnavailable, "closed")
)

// pkg is the package name the errors of this package carry.
const pkg = "registry"

// sentinels are the sentinel errors of this package.
var sentinels = []*apierr.Error{
	ErrNotFound, ErrInvalid, ErrEndpointNotAllowed, ErrManagedByFile, ErrPermissionDenied,
	ErrDefaultConflict, ErrBadCursor, ErrClosed,
}

// FieldError is a validation failure of one field of an agent record. It
// wraps [ErrInvalid] or [ErrEndpointNotAllowed].
type FieldError struct {
	// Field is the JSON path of the offending field, e.g. "capabilities[3]".
	Field string
	// Rule says what the value must be, in words a user can act on.
	Rule string

	kind *apierr.Error
}

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Rule: fmt.Sprintf(format, args...), kind: ErrInvalid}
}

func (e *FieldError) Error() string {
	if e.kind == ErrEndpointNotAllowed {
		return fmt.Sprintf("%s refused: %s", e.Field, e.Rule)
	}
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Rule)
}

// Unwrap returns [ErrInvalid] or [ErrEndpointNotAllowed].
func (e *FieldError) Unwrap() error { return e.kind }

// Code returns the error code: "invalid_argument" or
// "endpoint_not_allowed".
func (e *FieldError) Code() string { return e.kind.Code() }

// Describe returns the code and the error's text, which names the field
// and the rule: a FieldError describes itself ([apierr.Described]). The
// error of a record with several invalid fields describes itself with all
// of them, separated by "; ".
func (e *FieldError) Describe() (code, message string) { return e.Code(), e.Error() }

// FieldErrors returns every *[FieldError] in err's tree (through %w
// wrapping and [errors.Join]), in order; nil when there is none.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// Code returns the error code of an error returned by this package, or ""
// when the error is not one of this package's: the code of its first
// [FieldError], else of the sentinel it matches. Unlike
// [apierr.Describe], it reports nothing for another package's errors or a
// context's.
func Code(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Code()
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Code()
		}
	}
	return ""
}
