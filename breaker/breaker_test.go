package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transition is one OnStateChange call.
type transition struct {
	name     string
	from, to State
}

// recorder collects OnStateChange calls.
type recorder struct {
	mu sync.Mutex
	ts []transition
}

func (r *recorder) record(name string, from, to State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ts = append(r.ts, transition{name, from, to})
}

func (r *recorder) all() []transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]transition(nil), r.ts...)
}

// newTest returns a breaker on a fake clock.
func newTest(opts Options) (*Breaker, *clock) {
	c := newClock()
	opts.Now = c.Now
	return New("agent", &opts), c
}

// toHalfOpen drives b from closed to half-open with the default threshold
// and reset timeout given, returning when it is half-open.
func toHalfOpen(t *testing.T, b *Breaker, c *clock) {
	t.Helper()
	require.Equal(t, StateClosed, b.State())
	fail(t, b, b.failureThreshold())
	require.Equal(t, StateOpen, b.State())
	c.Advance(b.openPeriod())
	require.Equal(t, StateHalfOpen, b.State())
}

func TestFailureThresholdIsExact(t *testing.T) {
	for _, tc := range []struct {
		option, want int
	}{
		{0, 5}, {-1, 5}, {1, 1}, {2, 2}, {5, 5}, {7, 7},
	} {
		t.Run(fmt.Sprint(tc.option), func(t *testing.T) {
			b, c := newTest(Options{FailureThreshold: tc.option})
			fail(t, b, tc.want-1)
			assert.Equal(t, StateClosed, b.State())
			assert.Equal(t, tc.want-1, b.Snapshot().Failures)
			fail(t, b, 1)
			requireOpen(t, b, c.Now().Add(DefaultResetTimeout))
		})
	}
}

func TestSuccessResetsConsecutiveFailures(t *testing.T) {
	// 4 failures, then one call with outcome, then one more failure.
	for _, tc := range []struct {
		name         string
		outcome      error
		afterOutcome State
		afterMore    State
	}{
		{"success resets", nil, StateClosed, StateClosed},
		{"failure counts", errBoom, StateOpen, StateOpen},
		{"canceled is not counted", context.Canceled, StateClosed, StateOpen},
		{"wrapped canceled is not counted", fmt.Errorf("post: %w", context.Canceled), StateClosed, StateOpen},
		{"deadline exceeded is a failure", context.DeadlineExceeded, StateOpen, StateOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newTest(Options{})
			fail(t, b, 4)
			done, err := b.Allow()
			require.NoError(t, err)
			done(tc.outcome)
			require.Equal(t, tc.afterOutcome, b.State())
			if tc.afterOutcome == StateClosed {
				fail(t, b, 1)
			}
			require.Equal(t, tc.afterMore, b.State())
		})
	}
}

func TestOpenPeriodsDoubleUpToCap(t *testing.T) {
	b, c := newTest(Options{})
	fail(t, b, 5)
	// Opening from closed: 30 s. Each re-open from half-open doubles it,
	// up to 32 × 30 s.
	want := []time.Duration{30, 60, 120, 240, 480, 960, 960, 960}
	for i, secs := range want {
		period := secs * time.Second
		opened := c.Now()
		snap := b.Snapshot()
		require.Equal(t, StateOpen, snap.State, "round %d", i)
		require.Equal(t, int(secs/30), snap.Multiplier, "round %d", i)
		require.True(t, opened.Equal(snap.Since))
		requireOpen(t, b, opened.Add(period))

		c.Advance(period - time.Nanosecond)
		requireOpen(t, b, opened.Add(period))
		c.Advance(time.Nanosecond)
		require.Equal(t, StateHalfOpen, b.State(), "round %d", i)
		fail(t, b, 1) // a failed probe re-opens
	}
}

func TestCloseResetsMultiplier(t *testing.T) {
	b, c := newTest(Options{})
	toHalfOpen(t, b, c)
	fail(t, b, 1) // re-open: 60 s
	c.Advance(60 * time.Second)
	fail(t, b, 1) // re-open: 120 s
	requireOpen(t, b, c.Now().Add(120*time.Second))
	c.Advance(120 * time.Second)
	succeed(t, b, 3)
	require.Equal(t, StateClosed, b.State())
	assert.Equal(t, 1, b.Snapshot().Multiplier)

	fail(t, b, 5)
	requireOpen(t, b, c.Now().Add(30*time.Second))
}

func TestHalfOpenProbeLimitCountedAtAdmission(t *testing.T) {
	for _, max := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			b, c := newTest(Options{HalfOpenMaxCalls: max})
			toHalfOpen(t, b, c)
			dones := make([]func(error), max)
			for i := range dones {
				var err error
				dones[i], err = b.Allow()
				require.NoError(t, err, "probe %d", i)
			}
			// Every slot is taken while the probes are in flight.
			for range 3 {
				done, err := b.Allow()
				require.Nil(t, done)
				require.ErrorIs(t, err, ErrTooManyRequests)
			}
			_, err := Execute(b, func() (int, error) {
				t.Fatal("fn called while every probe slot is taken")
				return 0, nil
			})
			require.ErrorIs(t, err, ErrTooManyRequests)
			require.Equal(t, StateHalfOpen, b.State())

			// A report releases its slot.
			if max > 1 {
				dones[0](nil)
				next, err := b.Allow()
				require.NoError(t, err)
				_, err = b.Allow()
				require.ErrorIs(t, err, ErrTooManyRequests)
				dones[0] = next
			}
			for _, done := range dones {
				done(nil)
			}
			require.Equal(t, StateClosed, b.State())
		})
	}
}

func TestHalfOpenSuccessesClose(t *testing.T) {
	for _, max := range []int{0, 1, 2, 3, 5} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			b, c := newTest(Options{HalfOpenMaxCalls: max})
			n := b.halfOpenMaxCalls()
			toHalfOpen(t, b, c)
			succeed(t, b, n-1)
			require.Equal(t, StateHalfOpen, b.State())
			succeed(t, b, 1)
			snap := b.Snapshot()
			require.Equal(t, StateClosed, snap.State)
			require.Equal(t, 0, snap.Failures)
			require.Equal(t, 1, snap.Multiplier)
			require.True(t, c.Now().Equal(snap.Since))
		})
	}
}

func TestHalfOpenAnyFailureReopens(t *testing.T) {
	for _, successesFirst := range []int{0, 1, 2} {
		t.Run(fmt.Sprint(successesFirst), func(t *testing.T) {
			b, c := newTest(Options{})
			toHalfOpen(t, b, c)
			succeed(t, b, successesFirst)
			// Another probe is still in flight when one fails.
			inFlight, err := b.Allow()
			require.NoError(t, err)
			fail(t, b, 1)
			requireOpen(t, b, c.Now().Add(60*time.Second))
			inFlight(nil) // stale: must not count
			requireOpen(t, b, c.Now().Add(60*time.Second))
			c.Advance(60 * time.Second)
			require.Equal(t, StateHalfOpen, b.State())
			succeed(t, b, 2)
			require.Equal(t, StateHalfOpen, b.State(), "the stale success must not count")
		})
	}
}

func TestHalfOpenProbeTimeoutReopens(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{"default", 0, 60 * time.Second},
		{"custom", 5 * time.Second, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, c := newTest(Options{HalfOpenTimeout: tc.timeout})
			toHalfOpen(t, b, c)
			admitted := c.Now()
			var dones []func(error)
			for range 3 {
				done, err := b.Allow()
				require.NoError(t, err)
				dones = append(dones, done)
				c.Advance(time.Second / 10) // later probes are younger
			}
			c.Advance(tc.want - 3*time.Second/10)
			// Exactly HalfOpenTimeout after admission: not over yet.
			_, err := b.Allow()
			require.ErrorIs(t, err, ErrTooManyRequests)
			c.Advance(time.Nanosecond)
			// The oldest probe is overdue: the breaker re-opened when it
			// became due, with the doubled period.
			requireOpen(t, b, admitted.Add(tc.want).Add(60*time.Second))
			// Late reports of the timed-out probes are ignored.
			for _, done := range dones {
				done(nil)
			}
			requireOpen(t, b, admitted.Add(tc.want).Add(60*time.Second))
		})
	}
}

func TestHalfOpenWithoutProbesInFlightDoesNotTimeOut(t *testing.T) {
	b, c := newTest(Options{})
	toHalfOpen(t, b, c)
	c.Advance(10 * time.Minute) // idle: no probe, no evidence
	require.Equal(t, StateHalfOpen, b.State())
	succeed(t, b, 1)
	c.Advance(10 * time.Minute) // sparse traffic: successes are kept
	succeed(t, b, 1)
	c.Advance(10 * time.Minute)
	require.Equal(t, StateHalfOpen, b.State())
	succeed(t, b, 1)
	require.Equal(t, StateClosed, b.State())
}

func TestLateOpenToHalfOpenUsesDueTime(t *testing.T) {
	b, c := newTest(Options{})
	fail(t, b, 5)
	opened := c.Now()
	c.Advance(time.Hour) // nobody looked for an hour
	snap := b.Snapshot()
	require.Equal(t, StateHalfOpen, snap.State)
	assert.True(t, opened.Add(30*time.Second).Equal(snap.Since), "half-open since %v", snap.Since)
}

func TestStaleReportsAreIgnored(t *testing.T) {
	b, c := newTest(Options{})
	slowFail, err := b.Allow()
	require.NoError(t, err)
	slowOK, err := b.Allow()
	require.NoError(t, err)
	fail(t, b, 5)
	until := c.Now().Add(30 * time.Second)
	c.Advance(10 * time.Second)
	slowFail(errBoom) // admitted while closed: must not extend or double
	slowOK(nil)       // nor close
	requireOpen(t, b, until)
	c.Advance(20 * time.Second)
	require.Equal(t, StateHalfOpen, b.State())
}

func TestStaleReportsInLaterGenerationsAreIgnored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		admit func(t *testing.T, b *Breaker, c *clock) // get b to where the stale call is admitted
		later func(t *testing.T, b *Breaker, c *clock) // move b on to a later generation
		late  error
		check func(t *testing.T, b *Breaker)
	}{
		{
			name:  "closed call, success in half-open",
			admit: func(*testing.T, *Breaker, *clock) {},
			later: toHalfOpen,
			late:  nil,
			check: func(t *testing.T, b *Breaker) {
				succeed(t, b, 2)
				require.Equal(t, StateHalfOpen, b.State(), "the stale success counted")
			},
		},
		{
			name:  "closed call, failure in half-open",
			admit: func(*testing.T, *Breaker, *clock) {},
			later: toHalfOpen,
			late:  errBoom,
			check: func(t *testing.T, b *Breaker) { require.Equal(t, StateHalfOpen, b.State()) },
		},
		{
			name:  "closed call, failure after re-closing",
			admit: func(t *testing.T, b *Breaker, c *clock) { fail(t, b, 4) },
			later: func(t *testing.T, b *Breaker, c *clock) {
				fail(t, b, 1)
				c.Advance(30 * time.Second)
				succeed(t, b, 3)
				fail(t, b, 4)
			},
			late:  errBoom,
			check: func(t *testing.T, b *Breaker) { require.Equal(t, 4, b.Snapshot().Failures) },
		},
		{
			name:  "probe, success in the next half-open",
			admit: toHalfOpen,
			later: func(t *testing.T, b *Breaker, c *clock) {
				fail(t, b, 1)
				c.Advance(60 * time.Second)
				succeed(t, b, 2)
			},
			late:  nil,
			check: func(t *testing.T, b *Breaker) { require.Equal(t, StateHalfOpen, b.State()) },
		},
		{
			name:  "probe, failure in the next half-open",
			admit: toHalfOpen,
			later: func(t *testing.T, b *Breaker, c *clock) {
				fail(t, b, 1)
				c.Advance(60 * time.Second)
			},
			late: errBoom,
			check: func(t *testing.T, b *Breaker) {
				require.Equal(t, StateHalfOpen, b.State())
				succeed(t, b, 3)
				require.Equal(t, StateClosed, b.State())
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, c := newTest(Options{})
			tc.admit(t, b, c)
			stale, err := b.Allow()
			require.NoError(t, err)
			tc.later(t, b, c)
			stale(tc.late)
			tc.check(t, b)
		})
	}
}

func TestDoneTwiceCountsOnce(t *testing.T) {
	b, c := newTest(Options{FailureThreshold: 2})
	done, err := b.Allow()
	require.NoError(t, err)
	done(errBoom)
	done(errBoom)
	done(errBoom)
	require.Equal(t, StateClosed, b.State())
	require.Equal(t, 1, b.Snapshot().Failures)

	// In half-open, a probe's second report releases no second slot and
	// counts no second success.
	fail(t, b, 1)
	c.Advance(30 * time.Second)
	probe, err := b.Allow()
	require.NoError(t, err)
	_, err = b.Allow()
	require.NoError(t, err)
	_, err = b.Allow()
	require.NoError(t, err)
	probe(nil)
	probe(nil)
	probe(nil)
	require.Equal(t, StateHalfOpen, b.State())
	_, err = b.Allow() // one slot was freed, once
	require.NoError(t, err)
	_, err = b.Allow()
	require.ErrorIs(t, err, ErrTooManyRequests)
}

func TestConcurrentDoneCountsOnce(t *testing.T) {
	b, _ := newTest(Options{FailureThreshold: 2})
	done, err := b.Allow()
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { done(errBoom) })
	}
	wg.Wait()
	require.Equal(t, StateClosed, b.State())
}

func TestClassificationHooks(t *testing.T) {
	errBusiness := errors.New("agent returned 404")
	errIgnored := errors.New("ignored")
	opts := Options{
		FailureThreshold: 2,
		IsFailure:        func(err error) bool { return !errors.Is(err, errBusiness) },
		IsExcluded:       func(err error) bool { return errors.Is(err, errIgnored) },
	}
	for _, tc := range []struct {
		name string
		errs []error
		want State
	}{
		{"failures open", []error{errBoom, errBoom}, StateOpen},
		{"IsFailure false is a success", []error{errBoom, errBusiness, errBoom}, StateClosed},
		{"IsExcluded is nothing", []error{errBoom, errIgnored, errBoom}, StateOpen},
		{"custom IsExcluded replaces the canceled default", []error{errBoom, context.Canceled}, StateOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newTest(opts)
			for _, e := range tc.errs {
				done, err := b.Allow()
				require.NoError(t, err)
				done(e)
			}
			assert.Equal(t, tc.want, b.State())
		})
	}
}

func TestExcludedProbeReleasesSlotWithoutCounting(t *testing.T) {
	b, c := newTest(Options{HalfOpenMaxCalls: 1})
	toHalfOpen(t, b, c)
	done, err := b.Allow()
	require.NoError(t, err)
	_, err = b.Allow()
	require.ErrorIs(t, err, ErrTooManyRequests)
	done(context.Canceled)
	require.Equal(t, StateHalfOpen, b.State())
	succeed(t, b, 1)
	require.Equal(t, StateClosed, b.State())
}

func TestExecute(t *testing.T) {
	b, c := newTest(Options{FailureThreshold: 2})
	v, err := Execute(b, func() (string, error) { return "ok", nil })
	require.NoError(t, err)
	require.Equal(t, "ok", v)

	v, err = Execute(b, func() (string, error) { return "partial", errBoom })
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, "partial", v, "fn's value is returned with its error")

	// A panic counts as a failure and keeps unwinding.
	func() {
		defer func() { require.Equal(t, "kaboom", recover()) }()
		_, _ = Execute(b, func() (int, error) { panic("kaboom") })
	}()
	requireOpen(t, b, c.Now().Add(30*time.Second))

	v, err = Execute(b, func() (string, error) {
		t.Fatal("fn called while open")
		return "", nil
	})
	require.ErrorIs(t, err, ErrOpen)
	require.Empty(t, v)
}

func TestExecutePanicInHalfOpenReopens(t *testing.T) {
	b, c := newTest(Options{})
	toHalfOpen(t, b, c)
	func() {
		defer func() { _ = recover() }()
		_, _ = Execute(b, func() (int, error) { panic(errBoom) })
	}()
	requireOpen(t, b, c.Now().Add(60*time.Second))
}

func TestOnStateChangeOrderAndReentrancy(t *testing.T) {
	var rec recorder
	var b *Breaker
	var c *clock
	b, c = newTest(Options{
		OnStateChange: func(name string, from, to State) {
			rec.record(name, from, to)
			// Calling back into the breaker must not deadlock: no lock of
			// the breaker is held here.
			_ = b.State()
			_ = b.Snapshot()
			if done, err := b.Allow(); err == nil {
				done(context.Canceled) // counted as nothing
			}
		},
	})
	fail(t, b, 5)               // closed → open
	c.Advance(30 * time.Second) // open → half-open (seen by the next call)
	fail(t, b, 1)               // half-open → open (60 s)
	c.Advance(60 * time.Second) //
	succeed(t, b, 3)            // open → half-open → closed
	fail(t, b, 5)               // closed → open
	c.Advance(30 * time.Second) //
	_, err := b.Allow()         // open → half-open, probe in flight
	require.NoError(t, err)     //
	c.Advance(61 * time.Second) // the probe times out
	require.Equal(t, StateOpen, b.State())

	want := []transition{
		{"agent", StateClosed, StateOpen},
		{"agent", StateOpen, StateHalfOpen},
		{"agent", StateHalfOpen, StateOpen},
		{"agent", StateOpen, StateHalfOpen},
		{"agent", StateHalfOpen, StateClosed},
		{"agent", StateClosed, StateOpen},
		{"agent", StateOpen, StateHalfOpen},
		{"agent", StateHalfOpen, StateOpen},
	}
	assert.Equal(t, want, rec.all())
}

func TestOnStateChangeCausingTransition(t *testing.T) {
	// A callback whose own report causes a transition: the nested
	// transition is delivered after the current callback returns, in order.
	var rec recorder
	var b *Breaker
	var c *clock
	b, c = newTest(Options{
		FailureThreshold: 1,
		HalfOpenMaxCalls: 1,
		ResetTimeout:     time.Nanosecond,
		OnStateChange: func(name string, from, to State) {
			rec.record(name, from, to)
			if to == StateHalfOpen {
				succeed(t, b, 1) // half-open → closed, from inside the callback
			}
		},
	})
	fail(t, b, 1)
	c.Advance(time.Nanosecond)
	_ = b.State() // notices the half-open
	assert.Equal(t, []transition{
		{"agent", StateClosed, StateOpen},
		{"agent", StateOpen, StateHalfOpen},
		{"agent", StateHalfOpen, StateClosed},
	}, rec.all())
	assert.Equal(t, StateClosed, b.State())
}

func TestOnStateChangePanicDoesNotWedgeDelivery(t *testing.T) {
	var rec recorder
	panicked := false
	b, c := newTest(Options{
		OnStateChange: func(name string, from, to State) {
			if !panicked {
				panicked = true
				panic("callback bug")
			}
			rec.record(name, from, to)
		},
	})
	func() {
		defer func() { require.Equal(t, "callback bug", recover()) }()
		fail(t, b, 5)
	}()
	require.Equal(t, StateOpen, b.State())
	c.Advance(30 * time.Second)
	require.Equal(t, StateHalfOpen, b.State())
	assert.Equal(t, []transition{{"agent", StateOpen, StateHalfOpen}}, rec.all())
}

func TestZeroAndNilBreaker(t *testing.T) {
	t.Run("zero is a default breaker", func(t *testing.T) {
		var b Breaker
		before := time.Now()
		fail(t, &b, 4)
		require.Equal(t, StateClosed, b.State())
		fail(t, &b, 1)
		_, err := b.Allow()
		var oe *OpenError
		require.ErrorAs(t, err, &oe)
		require.Empty(t, oe.Name)
		require.False(t, oe.Until.Before(before.Add(30*time.Second)))
		require.False(t, oe.Until.After(time.Now().Add(30*time.Second)))
	})
	t.Run("nil passes every call through", func(t *testing.T) {
		var b *Breaker
		for range 10 {
			done, err := b.Allow()
			require.NoError(t, err)
			done(errBoom)
		}
		v, err := Execute(b, func() (int, error) { return 7, nil })
		require.NoError(t, err)
		require.Equal(t, 7, v)
		require.Equal(t, StateClosed, b.State())
		require.Equal(t, Snapshot{Multiplier: 1}, b.Snapshot())
		require.Empty(t, b.Name())
	})
}

func TestOpenError(t *testing.T) {
	until := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	err := error(&OpenError{Name: "finance", Until: until})
	assert.ErrorIs(t, err, ErrOpen)
	assert.NotErrorIs(t, err, ErrTooManyRequests)
	assert.Equal(t, `breaker: "finance" is open until 2025-01-02T03:04:05Z`, err.Error())
	assert.Equal(t, `breaker: open until 2025-01-02T03:04:05Z`, (&OpenError{Until: until}).Error())
	wrapped := fmt.Errorf("delegate: %w", err)
	var oe *OpenError
	require.ErrorAs(t, wrapped, &oe)
	assert.True(t, until.Equal(oe.Until))
}

func TestStateText(t *testing.T) {
	for _, s := range []State{StateClosed, StateOpen, StateHalfOpen} {
		text, err := s.MarshalText()
		require.NoError(t, err)
		var got State
		require.NoError(t, got.UnmarshalText(text))
		assert.Equal(t, s, got)
	}
	assert.Equal(t, "State(9)", State(9).String())
	_, err := State(9).MarshalText()
	assert.Error(t, err)
	var s State
	assert.Error(t, s.UnmarshalText([]byte("HALF_OPEN")))
	assert.Equal(t, []int{0, 1, 2}, []int{int(StateClosed), int(StateOpen), int(StateHalfOpen)},
		"values are those of the agentmesh_breaker_state gauge")
}

func TestSnapshotJSON(t *testing.T) {
	snap := Snapshot{
		State:      StateOpen,
		Since:      t0,
		OpenUntil:  t0.Add(time.Minute),
		Multiplier: 2,
	}
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	assert.JSONEq(t, `{"state":"open","since":"2025-03-14T15:09:26Z",
		"openUntil":"2025-03-14T15:10:26Z","multiplier":2}`, string(data))
	var got Snapshot
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, snap, got)

	data, err = json.Marshal(Snapshot{State: StateClosed, Multiplier: 1, Failures: 3})
	require.NoError(t, err)
	assert.JSONEq(t, `{"state":"closed","multiplier":1,"failures":3}`, string(data))
}

func TestClockGoingBackwardsIsHarmless(t *testing.T) {
	b, c := newTest(Options{})
	fail(t, b, 5)
	until := c.Now().Add(30 * time.Second)
	c.Advance(-time.Hour) // a clock step backwards
	requireOpen(t, b, until)
	c.Advance(time.Hour + 30*time.Second)
	require.Equal(t, StateHalfOpen, b.State())
}

func TestOpenPeriodSaturates(t *testing.T) {
	b := New("x", &Options{ResetTimeout: 1 << 61})
	assert.Equal(t, time.Duration(1<<61), b.openPeriod())
	b.shift = maxShift
	assert.Equal(t, time.Duration(math.MaxInt64), b.openPeriod())
}
