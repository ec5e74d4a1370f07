package breaker

import (
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// State is the state of a breaker. The numeric values are those of the
// agentmesh_breaker_state gauge: 0 closed, 1 open, 2 half-open. A State
// encodes as text (JSON) as "closed", "open" or "half-open".
type State int

// The breaker states.
const (
	// StateClosed: calls pass; consecutive failures are counted.
	StateClosed State = iota
	// StateOpen: calls are refused with an *[OpenError] until the open
	// period ends.
	StateOpen
	// StateHalfOpen: a limited number of concurrent probes pass; their
	// outcome closes or re-opens the breaker.
	StateHalfOpen
)

// String returns "closed", "open" or "half-open", or "State(n)" for a value
// that is not a State.
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half-open"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Valid reports whether s is one of the three states.
func (s State) Valid() bool { return s >= StateClosed && s <= StateHalfOpen }

// MarshalText encodes s as its String form. It fails for an invalid State.
func (s State) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("breaker: cannot encode invalid state %d", int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText decodes "closed", "open" or "half-open".
func (s *State) UnmarshalText(text []byte) error {
	switch string(text) {
	case "closed":
		*s = StateClosed
	case "open":
		*s = StateOpen
	case "half-open":
		*s = StateHalfOpen
	default:
		return fmt.Errorf("breaker: unknown state %q", text)
	}
	return nil
}

// Snapshot is the state of one breaker at a moment: what [Breaker.Snapshot]
// and [Set.States] report and what a [Store] persists. It encodes as JSON
// with camelCase field names; times are absolute (wall clock), so a
// snapshot stays meaningful across restarts and replicas.
type Snapshot struct {
	// State is the breaker's state.
	State State `json:"state"`

	// Since is when the breaker entered State.
	Since time.Time `json:"since,omitzero"`

	// OpenUntil is when an open breaker will half-open; zero in the other
	// states.
	OpenUntil time.Time `json:"openUntil,omitzero"`

	// Multiplier is the backoff multiplier (1, 2, 4 … 32) of the current
	// open period when open, of the last one when half-open, and 1 when
	// closed. The open period is Options.ResetTimeout × Multiplier.
	Multiplier int `json:"multiplier"`

	// Failures is the number of consecutive failures counted while closed;
	// zero in the other states.
	Failures int `json:"failures,omitempty"`
}

// maxShift is log2(MaxMultiplier).
const maxShift = 5

// The multiplier must be 1 << maxShift.
var _ = [1]struct{}{}[MaxMultiplier-1<<maxShift]

// shiftOf returns the backoff exponent for a multiplier, rounding down to a
// power of two and clamping to [1, MaxMultiplier].
func shiftOf(m int) uint8 {
	if m <= 1 {
		return 0
	}
	return uint8(min(bits.Len(uint(m))-1, maxShift))
}
