package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults used for zero (or negative) [Options] fields.
const (
	DefaultFailureThreshold = 5
	DefaultResetTimeout     = 30 * time.Second
	DefaultHalfOpenMaxCalls = 3
	DefaultHalfOpenTimeout  = 60 * time.Second
	DefaultStoreTimeout     = 5 * time.Second

	// MaxMultiplier caps the open-period multiplier: the longest open
	// period is ResetTimeout × MaxMultiplier (16 min with the defaults).
	MaxMultiplier = 32
)

// Options configures a [Breaker] or every breaker of a [Set]. The zero
// value of every field is its documented default, so a zero Options is the
// mesh's breaker (docs/API.md#circuit-breakers): open after 5 consecutive
// failures for 30 s, doubling up to 32×, then at most 3 concurrent probes.
// A nil *Options means the zero Options.
type Options struct {
	// FailureThreshold is the number of consecutive failures that opens a
	// closed breaker. ≤ 0 means 5.
	FailureThreshold int

	// ResetTimeout is the first open period. Each re-open from half-open
	// doubles the period, up to ResetTimeout × MaxMultiplier; closing resets
	// it. ≤ 0 means 30 s.
	ResetTimeout time.Duration

	// HalfOpenMaxCalls is both the number of probes a half-open breaker
	// admits at the same time (counted at admission, released when the probe
	// reports) and the number of successful probes that close it. ≤ 0
	// means 3.
	HalfOpenMaxCalls int

	// HalfOpenTimeout bounds how long a half-open probe may stay in flight:
	// a probe that has not reported within HalfOpenTimeout of its admission
	// counts as a failure, which re-opens the breaker. ≤ 0 means 60 s.
	HalfOpenTimeout time.Duration

	// IsExcluded reports whether a non-nil error returned by a protected
	// call counts as nothing at all: neither a success nor a failure (a
	// half-open probe's slot is released). It is checked before IsFailure.
	// Nil means errors.Is(err, context.Canceled): a caller that gave up
	// tells nothing about the target. context.DeadlineExceeded is not
	// excluded: a target too slow for the deadline is failing.
	IsExcluded func(err error) bool

	// IsFailure reports whether a non-nil, not excluded error counts as a
	// failure; when it returns false, the call counts as a success (the
	// target answered, with an error that is not its fault). Nil means
	// every such error is a failure. It is never called with a nil error.
	IsFailure func(err error) bool

	// OnStateChange, if set, is called after every state transition with
	// the breaker's name and the old and new state — every transition the
	// breaker makes or [Set.Restore] applies, but not those [Set.Follow]
	// applies from another replica (that replica reports them; they are
	// only logged here). It is called without
	// any lock of this package held, so it may call the breaker (or its
	// Set). Calls for one breaker are serialised and arrive in transition
	// order; they may run on any goroutine that uses the breaker, possibly
	// after the call that caused the transition has returned. It must not
	// panic and should be quick (update a gauge, append to an audit log).
	OnStateChange func(name string, from, to State)

	// Now is the clock. Nil means time.Now. Transitions that depend only on
	// time (open → half-open, a half-open probe timing out) are computed
	// from it lazily, when the breaker is next used.
	Now func() time.Time

	// Logger receives state transitions (Info) and persistence failures of
	// a Set (Warn). Nil means discard.
	Logger *slog.Logger

	// StoreTimeout bounds each Store call a Set makes to persist or delete
	// a breaker's state. ≤ 0 means 5 s. Unused by a lone Breaker.
	StoreTimeout time.Duration
}

// Breaker is one circuit breaker (docs/API.md#circuit-breakers): it counts
// the outcomes of the calls it protects and, after too many consecutive
// failures, refuses calls for an open period, then lets a few probes
// through to decide whether to close again. See the package documentation
// for the states and the rules between them.
//
// Protect a call with [Execute], or with [Breaker.Allow] and the done
// function it returns when the call cannot be wrapped in a closure.
//
// A Breaker is safe for concurrent use by multiple goroutines and starts
// no goroutines. The zero Breaker is ready to use: a closed breaker with
// an empty name and the default [Options]. A nil *Breaker is a pass-through
// that admits every call and counts nothing, so callers may make the
// breaker optional. A Breaker must not be copied after first use.
type Breaker struct {
	name    string
	opts    Options
	persist func() // set by Set before the breaker is shared; nil for none
	// quietHalfOpen: the time-driven open → half-open transition is not
	// persisted (set by a Set over a WatchableStore, where every replica
	// computes it from the shared OpenUntil).
	quietHalfOpen bool

	mu         sync.Mutex
	state      State
	gen        uint64      // incremented on every transition; stale reports are ignored
	failures   int         // consecutive failures (closed)
	successes  int         // successful probes (half-open)
	probes     []time.Time // admission times of the probes in flight (half-open)
	shift      uint8       // the multiplier is 1 << shift
	since      time.Time   // when the current state was entered
	openUntil  time.Time   // open: when the breaker half-opens
	events     []event     // transitions not yet delivered
	dirty      bool        // a transition not yet persisted (cleared by takeDirty)
	delivering bool        // a goroutine is delivering events
}

// event is a transition waiting to be delivered to OnStateChange and the
// logger.
type event struct {
	from, to State
	until    time.Time // to == StateOpen: when it half-opens
	remote   bool      // applied from another replica (Set.Follow): logged only
}

// New returns a closed breaker called name (the name is passed to
// OnStateChange and appears in errors and logs). A nil opts means the zero
// [Options]; opts is copied.
func New(name string, opts *Options) *Breaker {
	b := &Breaker{name: name}
	if opts != nil {
		b.opts = *opts
	}
	return b
}

// Name returns the breaker's name.
func (b *Breaker) Name() string {
	if b == nil {
		return ""
	}
	return b.name
}

// State returns the breaker's current state.
func (b *Breaker) State() State { return b.Snapshot().State }

// Snapshot returns the breaker's current state and counters.
func (b *Breaker) Snapshot() Snapshot {
	if b == nil {
		return Snapshot{Multiplier: 1}
	}
	now := b.now()
	b.mu.Lock()
	b.advance(now)
	s := b.snapshotLocked()
	flush := b.flushNeeded()
	b.mu.Unlock()
	if flush {
		b.deliver()
	}
	return s
}

// Allow asks the breaker to admit one call. If the call is admitted, err is
// nil and the caller must call done exactly once with the call's outcome
// (nil for success; any other error is classified by Options.IsExcluded
// and Options.IsFailure). done is safe to call from any goroutine. Calling
// it again has no effect, and so does calling it after the breaker has
// changed state since the call was admitted (a late report never extends,
// re-opens or closes a breaker).
//
// If the call is refused, done is nil and err is an *[OpenError] (wrapping
// [ErrOpen]) or [ErrTooManyRequests]. A refused call is not counted.
func (b *Breaker) Allow() (done func(err error), err error) {
	if b == nil {
		return noop, nil
	}
	c, err := b.allow()
	if err != nil {
		return nil, err
	}
	return b.doneFunc(c), nil
}

func noop(error) {}

// Execute runs fn if b admits a call and reports its outcome to b: a nil
// error is a success; any other error is classified by Options.IsExcluded
// and Options.IsFailure. If b refuses the call, Execute returns the zero T
// and an *[OpenError] or [ErrTooManyRequests] without calling fn. A panic
// in fn counts as a failure and is not recovered: it continues to unwind
// with its original stack. A nil b runs fn unprotected.
func Execute[T any](b *Breaker, fn func() (T, error)) (T, error) {
	if b == nil {
		return fn()
	}
	c, err := b.allow()
	if err != nil {
		var zero T
		return zero, err
	}
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			b.report(c, outcomeFailure)
		}
	}()
	v, err := fn()
	returned = true
	b.report(c, b.classify(err))
	return v, err
}

// call identifies one admitted call: the generation it was admitted in and,
// for a half-open probe, its admission time.
type call struct {
	gen      uint64
	admitted time.Time
	probe    bool
}

// doneFunc returns the done function of c, which reports at most once.
func (b *Breaker) doneFunc(c call) func(error) {
	var reported atomic.Bool
	return func(err error) {
		if reported.Swap(true) {
			return
		}
		b.report(c, b.classify(err))
	}
}

type outcome uint8

const (
	outcomeSuccess outcome = iota
	outcomeFailure
	outcomeExcluded
)

// classify maps a call's error to its outcome. It runs the user's hooks,
// so it is called without b.mu held.
func (b *Breaker) classify(err error) outcome {
	if err == nil {
		return outcomeSuccess
	}
	if f := b.opts.IsExcluded; f != nil {
		if f(err) {
			return outcomeExcluded
		}
	} else if errors.Is(err, context.Canceled) {
		return outcomeExcluded
	}
	if f := b.opts.IsFailure; f != nil && !f(err) {
		return outcomeSuccess
	}
	return outcomeFailure
}

// allow admits or refuses one call.
func (b *Breaker) allow() (call, error) {
	// Fast path: nothing in the closed state depends on time, so a closed
	// breaker admits without reading the clock (about half the cost).
	b.mu.Lock()
	if b.state == StateClosed && !b.flushNeeded() {
		c := call{gen: b.gen}
		b.mu.Unlock()
		return c, nil
	}
	b.mu.Unlock()

	now := b.now() // read without b.mu held: Options.Now is the user's
	b.mu.Lock()
	now = b.advance(now)
	var (
		c   call
		err error
	)
	switch b.state {
	case StateClosed:
		c = call{gen: b.gen}
	case StateOpen:
		err = &OpenError{Name: b.name, Until: b.openUntil}
	case StateHalfOpen:
		if len(b.probes) >= b.halfOpenMaxCalls() {
			err = ErrTooManyRequests
		} else {
			b.probes = append(b.probes, now)
			c = call{gen: b.gen, admitted: now, probe: true}
		}
	}
	flush := b.flushNeeded()
	b.mu.Unlock()
	if flush {
		b.deliver()
	}
	return c, err
}

// report records the outcome of an admitted call.
func (b *Breaker) report(c call, o outcome) {
	// A success of a call admitted while closed needs no clock: if its
	// generation is still current, the breaker is still closed, and nothing
	// in the closed state depends on time.
	var now time.Time
	needNow := c.probe || o == outcomeFailure
	if needNow {
		now = b.now()
	}
	b.mu.Lock()
	if needNow {
		now = b.advance(now)
	}
	if c.gen == b.gen {
		switch b.state {
		case StateClosed:
			switch o {
			case outcomeSuccess:
				b.failures = 0
			case outcomeFailure:
				b.failures++
				if b.failures >= b.failureThreshold() {
					b.toOpen(now)
				}
			}
		case StateHalfOpen:
			if i := slices.Index(b.probes, c.admitted); i >= 0 {
				b.probes = slices.Delete(b.probes, i, i+1)
			}
			switch o {
			case outcomeSuccess:
				b.successes++
				if b.successes >= b.halfOpenMaxCalls() {
					b.toClosed(now)
				}
			case outcomeFailure:
				b.toOpen(now)
			}
		}
	}
	flush := b.flushNeeded()
	b.mu.Unlock()
	if flush {
		b.deliver()
	}
}

// advance applies the transitions that are due at now and returns now,
// raised if needed so that time never runs backwards for this breaker (now
// may have been read before another goroutine took the lock). b.mu is held.
func (b *Breaker) advance(now time.Time) time.Time {
	if now.Before(b.since) {
		now = b.since
	}
	for {
		switch b.state {
		case StateOpen:
			if now.Before(b.openUntil) {
				return now
			}
			b.toHalfOpen(b.openUntil)
		case StateHalfOpen:
			if len(b.probes) == 0 {
				return now
			}
			due := slices.MinFunc(b.probes, time.Time.Compare).Add(b.halfOpenTimeout())
			if !now.After(due) {
				return now
			}
			b.toOpen(due)
		default:
			return now
		}
	}
}

// toOpen opens the breaker at at. Re-opening from half-open doubles the
// multiplier (up to MaxMultiplier); opening from closed keeps it (it is 1,
// as closing resets it). b.mu is held.
func (b *Breaker) toOpen(at time.Time) {
	from := b.state
	if from == StateHalfOpen && b.shift < maxShift {
		b.shift++
	}
	b.state = StateOpen
	b.since = at
	b.openUntil = at.Add(b.openPeriod())
	b.failures, b.successes = 0, 0
	b.probes = b.probes[:0]
	b.gen++
	b.record(from, true)
}

// toHalfOpen half-opens the breaker at at. b.mu is held.
func (b *Breaker) toHalfOpen(at time.Time) {
	from := b.state
	b.state = StateHalfOpen
	b.since = at
	b.openUntil = time.Time{}
	b.failures, b.successes = 0, 0
	b.probes = b.probes[:0]
	b.gen++
	b.record(from, !b.quietHalfOpen)
}

// toClosed closes the breaker at at and resets the multiplier. b.mu is held.
func (b *Breaker) toClosed(at time.Time) {
	from := b.state
	b.state = StateClosed
	b.since = at
	b.openUntil = time.Time{}
	b.failures, b.successes = 0, 0
	b.probes = b.probes[:0]
	b.shift = 0
	b.gen++
	b.record(from, true)
}

// record queues the transition from → b.state for delivery and, if persist
// is true and the breaker belongs to a Set with a store, marks the state
// for saving. b.mu is held.
func (b *Breaker) record(from State, persist bool) {
	if b.opts.OnStateChange != nil || b.opts.Logger != nil {
		b.events = append(b.events, event{from: from, to: b.state, until: b.openUntil})
	}
	if persist && b.persist != nil {
		b.dirty = true
	}
}

// flushNeeded reports whether the caller must call deliver after unlocking.
// b.mu is held.
func (b *Breaker) flushNeeded() bool {
	return (len(b.events) > 0 || b.dirty) && !b.delivering
}

// deliver hands queued transitions to the logger and OnStateChange and
// saves the latest state, without b.mu held. One goroutine at a time
// delivers for a breaker; a goroutine that finds another delivering leaves
// its events to it, so events arrive in order and a callback that causes a
// transition does not deadlock.
func (b *Breaker) deliver() {
	b.mu.Lock()
	if b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	for len(b.events) > 0 || b.dirty {
		evs := b.events
		b.events = nil
		save := b.dirty
		b.mu.Unlock()
		b.publish(evs, save)
		b.mu.Lock()
	}
	b.delivering = false
	b.mu.Unlock()
}

// publish runs the side effects of one batch of transitions; with save, it
// calls the persist hook, which takes the state to write with takeDirty (so
// that the Set takes it under its own lock). If a callback panics, it
// clears b.delivering so that later transitions are still delivered, and
// lets the panic continue.
func (b *Breaker) publish(evs []event, save bool) {
	ok := false
	defer func() {
		if !ok {
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for _, ev := range evs {
		if lg := b.opts.Logger; lg != nil {
			attrs := []any{"breaker", b.name, "from", ev.from.String(), "to", ev.to.String()}
			if ev.to == StateOpen {
				attrs = append(attrs, "until", ev.until)
			}
			if ev.remote {
				attrs = append(attrs, "remote", true)
			}
			lg.Info("breaker state changed", attrs...)
		}
		if f := b.opts.OnStateChange; f != nil && !ev.remote {
			f(b.name, ev.from, ev.to)
		}
	}
	if save {
		b.persist()
	}
	ok = true
}

// takeDirty returns the state to persist and clears the mark, or ok false
// when there is nothing to persist (another delivery took it).
func (b *Breaker) takeDirty() (s Snapshot, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.dirty {
		return Snapshot{}, false
	}
	b.dirty = false
	return b.snapshotLocked(), true
}

// snapshotLocked returns the current state as a Snapshot. b.mu is held.
func (b *Breaker) snapshotLocked() Snapshot {
	s := Snapshot{State: b.state, Since: b.since, Multiplier: 1 << b.shift}
	switch b.state {
	case StateClosed:
		s.Failures = b.failures
	case StateOpen:
		s.OpenUntil = b.openUntil
	}
	return s
}

// restore replaces the breaker's state with s, as read from a store: an
// open breaker stays open until s.OpenUntil (but no longer than one open
// period from now), a half-open one restarts its half-open window with no
// probes in flight, a closed one keeps its failure count. Calls admitted
// before are forgotten. The change is reported to OnStateChange but not
// persisted again.
func (b *Breaker) restore(s Snapshot) {
	now := b.now()
	b.mu.Lock()
	from := b.state
	b.gen++
	b.state = s.State
	b.failures, b.successes = 0, 0
	b.probes = b.probes[:0]
	b.openUntil = time.Time{}
	b.shift = shiftOf(s.Multiplier)
	since := s.Since
	if since.IsZero() || since.After(now) {
		since = now
	}
	switch s.State {
	case StateClosed:
		b.shift = 0
		b.failures = min(max(s.Failures, 0), b.failureThreshold()-1)
	case StateOpen:
		b.openUntil = s.OpenUntil
		if limit := now.Add(b.openPeriod()); b.openUntil.After(limit) {
			b.openUntil = limit
		}
		if since.After(b.openUntil) {
			since = b.openUntil
		}
	case StateHalfOpen:
		since = now
	}
	b.since = since
	if from != b.state {
		b.record(from, false)
	}
	b.advance(now)
	flush := b.flushNeeded()
	b.mu.Unlock()
	if flush {
		b.deliver()
	}
}

// validate reports whether s can be restored.
func (s Snapshot) validate() error {
	if !s.State.Valid() {
		return errors.New("invalid state " + s.State.String())
	}
	if s.State == StateOpen && s.OpenUntil.IsZero() {
		return errors.New("open state without openUntil")
	}
	return nil
}

func (b *Breaker) now() time.Time {
	if f := b.opts.Now; f != nil {
		return f()
	}
	return time.Now()
}

func (b *Breaker) failureThreshold() int {
	if n := b.opts.FailureThreshold; n > 0 {
		return n
	}
	return DefaultFailureThreshold
}

func (b *Breaker) halfOpenMaxCalls() int {
	if n := b.opts.HalfOpenMaxCalls; n > 0 {
		return n
	}
	return DefaultHalfOpenMaxCalls
}

func (b *Breaker) halfOpenTimeout() time.Duration {
	if d := b.opts.HalfOpenTimeout; d > 0 {
		return d
	}
	return DefaultHalfOpenTimeout
}

// openPeriod returns ResetTimeout × multiplier, saturating instead of
// overflowing for absurd ResetTimeouts.
func (b *Breaker) openPeriod() time.Duration { return b.periodOf(b.shift) }

// periodOf returns the open period of multiplier 1 << shift.
func (b *Breaker) periodOf(shift uint8) time.Duration {
	d := b.opts.ResetTimeout
	if d <= 0 {
		d = DefaultResetTimeout
	}
	if d > math.MaxInt64>>shift {
		return math.MaxInt64
	}
	return d << shift
}
