package breaker

import (
	"errors"
	"strconv"
	"time"
)

// Sentinel errors returned by [Breaker.Allow] and [Execute] when a call is
// refused. Match them with [errors.Is]. A refused call is not counted: it
// is neither a success nor a failure.
var (
	// ErrOpen: the breaker is open. The error returned is an *[OpenError],
	// which says when the breaker will half-open, and wraps ErrOpen.
	ErrOpen = errors.New("breaker: open")

	// ErrTooManyRequests: the breaker is half-open and already has
	// Options.HalfOpenMaxCalls probes in flight. It is returned as is.
	ErrTooManyRequests = errors.New("breaker: too many half-open probes in flight")
)

// OpenError is the error for a call refused by an open breaker. It wraps
// [ErrOpen], so errors.Is(err, ErrOpen) holds; use [errors.As] to read
// Until (for a Retry-After header, say).
type OpenError struct {
	// Name is the breaker's name.
	Name string
	// Until is when the breaker will half-open and admit a probe.
	Until time.Time
}

func (e *OpenError) Error() string {
	until := e.Until.Format(time.RFC3339Nano)
	if e.Name == "" {
		return "breaker: open until " + until
	}
	return "breaker: " + strconv.Quote(e.Name) + " is open until " + until
}

// Unwrap returns [ErrOpen].
func (e *OpenError) Unwrap() error { return ErrOpen }
