package registry

import (
	"errors"
	"fmt"
)

// Error codes of SPEC.md that this package's errors carry. Front-ends put
// them in the "code" field of error responses.
const (
	CodeInvalidArgument    = "invalid_argument"
	CodeEndpointNotAllowed = "endpoint_not_allowed"
	CodeNotFound           = "not_found"
	CodeManagedByFile      = "managed_by_file"
	CodeConflict           = "conflict"
)

// Sentinel errors. Match them with [errors.Is].
var (
	// ErrNotFound: no agent is registered under the name.
	ErrNotFound = errors.New("registry: agent not found")
	// ErrInvalid: the agent record breaks a rule of SPEC section 1. The
	// error is a *[FieldError] naming the field and the rule.
	ErrInvalid = errors.New("registry: invalid agent")
	// ErrEndpointNotAllowed: the endpoint is refused by the endpoint policy.
	// The error is a *[FieldError] whose Rule says which rule refused it.
	ErrEndpointNotAllowed = errors.New("registry: endpoint not allowed")
	// ErrManagedByFile: the agent belongs to the YAML agent directory and
	// the API may not replace or delete it.
	ErrManagedByFile = errors.New("registry: agent is managed by the agent directory")
	// ErrDefaultConflict: another agent is already the default agent.
	ErrDefaultConflict = errors.New("registry: another agent is already the default")
	// ErrClosed: the registry was closed.
	ErrClosed = errors.New("registry: closed")
)

// FieldError is a validation failure of one field of an agent record. It
// wraps [ErrInvalid] or [ErrEndpointNotAllowed].
type FieldError struct {
	// Field is the JSON path of the offending field, e.g. "capabilities[3]".
	Field string
	// Rule says what the value must be, in words a user can act on.
	Rule string

	kind error
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

// Code returns the SPEC error code: "invalid_argument" or
// "endpoint_not_allowed".
func (e *FieldError) Code() string {
	if e.kind == ErrEndpointNotAllowed {
		return CodeEndpointNotAllowed
	}
	return CodeInvalidArgument
}

// Code maps an error returned by this package to its SPEC error code, or ""
// when the error is not one of this package's.
func Code(err error) string {
	var fe *FieldError
	switch {
	case errors.As(err, &fe):
		return fe.Code()
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrManagedByFile):
		return CodeManagedByFile
	case errors.Is(err, ErrDefaultConflict):
		return CodeConflict
	}
	return ""
}
