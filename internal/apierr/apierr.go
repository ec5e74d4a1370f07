// Package apierr is how an error of the mesh describes itself to whoever
// made the request: a code from the documented catalogue and a message
// safe to show. The core packages declare their errors with it; the
// front-ends (HTTP, MCP, A2A) call [Describe] and choose only the status.
//
// An error is described by the first error in its chain that implements
// [Described] — an [*Error] made with [New] or [Errorf], or a package's own
// type such as a field validation error. Anything else is internal: a store
// failure or a bug, logged by the front-end and never shown.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Codes shared by several packages. A package's own codes (not_found,
// agent_error, ...) are declared by that package.
const (
	CodeInvalidArgument  = "invalid_argument"
	CodeUnauthenticated  = "unauthenticated"
	CodePermissionDenied = "permission_denied"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeUnavailable      = "unavailable"
	CodeCanceled         = "canceled"
	CodeTimeout          = "timeout"
	CodeInternal         = "internal"
)

// Described is an error that carries its code and a message safe to show.
// The message says what went wrong in words the caller can act on, without
// the "<package>: " prefix Error adds for logs.
type Described interface {
	error
	Describe() (code, message string)
}

// Error is an error with a code and a safe message. Packages declare their
// sentinel errors with [New] and add detail with [Errorf]; errors.Is
// matches an Errorf error against its sentinel.
type Error struct {
	code    string
	pkg     string
	message string
	// sentinel is the error Errorf added detail to; nil for a sentinel.
	sentinel *Error
}

// New returns a sentinel error of package pkg with code and message. Its
// Error text is "<pkg>: <message>".
func New(pkg, code, message string) *Error {
	return &Error{code: code, pkg: pkg, message: message}
}

// Errorf returns an error that is sentinel with detail: its message is the
// sentinel's followed by ": " and the formatted detail, and errors.Is
// reports it as sentinel.
func Errorf(sentinel *Error, format string, args ...any) *Error {
	base := sentinel
	if base.sentinel != nil {
		base = base.sentinel
	}
	return &Error{
		code:     sentinel.code,
		pkg:      sentinel.pkg,
		message:  sentinel.message + ": " + fmt.Sprintf(format, args...),
		sentinel: base,
	}
}

// Reword is [Errorf] for a detail that says everything the sentinel's
// message would: the message is the formatted text alone ("no agent named
// \"x\" is registered", not "not found: no agent named …"), with the
// sentinel's code, and errors.Is reports it as sentinel.
func Reword(sentinel *Error, format string, args ...any) *Error {
	e := Errorf(sentinel, format, args...)
	e.message = fmt.Sprintf(format, args...)
	return e
}

// Wrap is [Errorf] for an error that has a cause of its own: the detail
// is the formatted text, then ": " and cause's text (cause's text alone
// when format is ""), and the error wraps cause too, so errors.Is and
// errors.As still find another package's error in it. Describe it as the
// sentinel with that detail; show cause's text only when it is safe to.
func Wrap(sentinel *Error, cause error, format string, args ...any) error {
	detail := cause.Error()
	if format != "" {
		detail = fmt.Sprintf(format, args...) + ": " + detail
	}
	return &causedError{detail: Errorf(sentinel, "%s", detail), cause: cause}
}

// WrapHidden is [Wrap] for a cause whose text must not be shown (it names
// addresses of the mesh's network, say): the detail is the formatted text
// alone, and the error still wraps cause, so errors.Is and errors.As find
// it.
func WrapHidden(sentinel *Error, cause error, format string, args ...any) error {
	return &causedError{detail: Errorf(sentinel, format, args...), cause: cause}
}

// causedError is the error of Wrap and WrapHidden.
type causedError struct {
	detail *Error
	cause  error
}

func (e *causedError) Error() string { return e.detail.Error() }

// Describe returns the code and message of the error with detail.
func (e *causedError) Describe() (code, message string) { return e.detail.Describe() }

// Unwrap returns the error with detail, then its cause.
func (e *causedError) Unwrap() []error { return []error{e.detail, e.cause} }

// Error returns "<pkg>: <message>".
func (e *Error) Error() string { return e.pkg + ": " + e.message }

// Describe returns the code and the message without the package prefix.
func (e *Error) Describe() (code, message string) { return e.code, e.message }

// Code returns the error's code.
func (e *Error) Code() string { return e.code }

// Is reports whether target is e or the sentinel e was made from.
func (e *Error) Is(target error) bool {
	return e.sentinel != nil && target == error(e.sentinel)
}

// Describe returns the code and safe message of err: those of the first
// error in its chain that is [Described] (unless it reports no code);
// canceled or timeout for a context's error; otherwise ok is false and err
// is internal, to be logged and never shown.
func Describe(err error) (code, message string, ok bool) {
	var d Described
	if errors.As(err, &d) {
		if code, message = d.Describe(); code != "" {
			return code, message, true
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return CodeCanceled, "the request was canceled", true
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout, "the request timed out", true
	}
	return "", "", false
}

// Code returns the code of err as [Describe] finds it, or "" for an
// internal error.
func Code(err error) string {
	code, _, _ := Describe(err)
	return code
}

// Join returns errs joined, nil ones dropped, as [errors.Join] does (and
// with its Error text); one error is returned as it is, none as nil. When
// every joined error is described, the join describes itself with the
// code of the first and the messages of all, separated by "; ", so a
// request reports all its problems at once; otherwise it is internal.
func Join(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return &joinError{errs: kept}
}

type joinError struct{ errs []error }

func (e *joinError) Error() string { return errors.Join(e.errs...).Error() }

func (e *joinError) Unwrap() []error { return e.errs }

// Describe returns the code of the first error and the messages of all,
// or no code when one of them is internal.
func (e *joinError) Describe() (code, message string) {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		c, m, ok := Describe(err)
		if !ok {
			return "", ""
		}
		if i == 0 {
			code = c
		}
		msgs[i] = m
	}
	return code, strings.Join(msgs, "; ")
}
