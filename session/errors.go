package session

import (
	"errors"

	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Sentinel errors. Match them with [errors.Is]; the errors returned wrap
// them with the operation and the session or user involved. All but
// ErrConflict, a bug, describe themselves ([apierr.Describe]): their code
// and their message without the "session: " prefix, with the detail of the
// argument at fault for ErrInvalid.
var (
	// ErrNotFound: no session with that id, or the user has no active
	// session. An expired session is reported with [ErrExpired], which
	// matches ErrNotFound too.
	ErrNotFound = apierr.New(pkg, apierr.CodeNotFound, "session not found")

	// ErrExpired: the session's expiry has passed; it is gone and the sweep
	// will delete it. errors.Is(err, ErrNotFound) holds for it as well, so
	// callers that only care whether a session is there need one check.
	ErrExpired error = expiredError{}

	// ErrNotActive: the session is closed (completed, abandoned or error),
	// so it takes no more turns, state or clarifications, and cannot be
	// closed again.
	ErrNotActive = apierr.New(pkg, apierr.CodeConflict, "not active")

	// ErrForbidden: the session belongs to another user (resume).
	ErrForbidden = apierr.New(pkg, apierr.CodePermissionDenied, "belongs to another user")

	// ErrInvalid: an argument is malformed: an empty or overlong user id,
	// an unknown role, a status that is not a closing status.
	ErrInvalid = apierr.New(pkg, apierr.CodeInvalidArgument, "invalid argument")

	// ErrConflict is returned by a [Store] for a write that would break
	// one of its invariants: a second active session for a user, a closed
	// session made active again, a changed id or user, a reused id. The
	// [Manager] never makes such writes; seeing this error means a bug in
	// a caller of the Store.
	ErrConflict = errors.New("session: write conflicts with the store's invariants")
)

// pkg is the package name the errors of this package carry.
const pkg = "session"

type expiredError struct{}

func (expiredError) Error() string { return "session: expired" }

// Is makes an expired session match [ErrNotFound] too.
func (expiredError) Is(target error) bool { return target == ErrNotFound }

// Describe describes an expired session as [ErrNotFound]: to the caller,
// it is gone.
func (expiredError) Describe() (code, message string) { return ErrNotFound.Describe() }
