package session

import "errors"

// Sentinel errors. Match them with [errors.Is]; the errors returned wrap
// them with the operation and the session or user involved.
var (
	// ErrNotFound: no session with that id, or the user has no active
	// session. An expired session is reported with [ErrExpired], which
	// matches ErrNotFound too.
	ErrNotFound = errors.New("session: not found")

	// ErrExpired: the session's expiry has passed; it is gone and the sweep
	// will delete it. errors.Is(err, ErrNotFound) holds for it as well, so
	// callers that only care whether a session is there need one check.
	ErrExpired error = expiredError{}

	// ErrNotActive: the session is closed (completed, abandoned or error),
	// so it takes no more turns, state or clarifications, and cannot be
	// closed again.
	ErrNotActive = errors.New("session: not active")

	// ErrForbidden: the session belongs to another user (resume).
	ErrForbidden = errors.New("session: belongs to another user")

	// ErrInvalid: an argument is malformed: an empty or overlong user id,
	// an unknown role, a status that is not a closing status.
	ErrInvalid = errors.New("session: invalid argument")

	// ErrConflict is returned by a [Store] for a write that would break
	// one of its invariants: a second active session for a user, a closed
	// session made active again, a changed id or user, a reused id. The
	// [Manager] never makes such writes; seeing this error means a bug in
	// a caller of the Store.
	ErrConflict = errors.New("session: write conflicts with the store's invariants")
)

type expiredError struct{}

func (expiredError) Error() string { return "session: expired" }

// Is makes an expired session match [ErrNotFound] too.
func (expiredError) Is(target error) bool { return target == ErrNotFound }
