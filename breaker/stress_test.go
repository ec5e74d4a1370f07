package breaker

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStress hammers one breaker from many goroutines with random outcomes
// and a clock that jumps forward, then checks the invariants. Run it with
// -race. Half the goroutines use the internal allow/doneFunc pair (which
// is exactly Allow) so that they can see which calls were half-open probes;
// the other half use Execute.
func TestStress(t *testing.T) {
	const goroutines = 16
	calls := 10_000
	if testing.Short() {
		calls = 1_000
	}
	const maxProbes = 3

	var clockNS atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(clockNS.Load())) }

	var (
		evMu   sync.Mutex
		events []transition
	)
	var b *Breaker
	b = New("stress", &Options{
		HalfOpenMaxCalls: maxProbes,
		Now:              now,
		OnStateChange: func(name string, from, to State) {
			evMu.Lock()
			events = append(events, transition{name, from, to})
			evMu.Unlock()
			_ = b.Snapshot() // re-entrant use under load
		},
	})

	var (
		probeMu  sync.Mutex
		inFlight = map[uint64]int{} // probes in flight seen by the test, per generation
		maxSeen  int
	)
	var admitted, refusedOpen, refusedBusy, panics atomic.Int64

	// outcome draws a call's result; the failure rate changes by phase so
	// that the breaker visits every state many times.
	outcome := func(r *rand.Rand, i int) error {
		pFail := [...]int{5, 90, 30, 0}[(i/250)%4]
		switch x := r.IntN(100); {
		case x < 2:
			return context.Canceled
		case x < 2+pFail:
			return errBoom
		}
		return nil
	}
	// work advances the clock as a call would take time; rarely by more
	// than HalfOpenTimeout, so that probes time out.
	work := func(r *rand.Rand) {
		if r.IntN(500) == 0 {
			clockNS.Add(int64(61 * time.Second))
		} else {
			clockNS.Add(r.Int64N(int64(5 * time.Millisecond)))
		}
		if r.IntN(8) == 0 {
			runtime.Gosched()
		}
	}
	refused := func(r *rand.Rand, err error) {
		switch {
		case errors.Is(err, ErrOpen):
			refusedOpen.Add(1)
			clockNS.Add(r.Int64N(int64(2 * time.Second))) // let open periods end
		case errors.Is(err, ErrTooManyRequests):
			refusedBusy.Add(1)
		default:
			t.Errorf("unexpected refusal: %v", err)
		}
	}

	var wg sync.WaitGroup
	for g := range goroutines {
		r := rand.New(rand.NewPCG(uint64(g), 42))
		if g%2 == 0 {
			wg.Go(func() {
				for i := range calls {
					c, err := b.allow()
					if err != nil {
						refused(r, err)
						continue
					}
					admitted.Add(1)
					if c.probe {
						probeMu.Lock()
						inFlight[c.gen]++
						maxSeen = max(maxSeen, inFlight[c.gen])
						probeMu.Unlock()
					}
					b.mu.Lock()
					n := len(b.probes)
					b.mu.Unlock()
					if n > maxProbes {
						t.Errorf("%d probes in flight", n)
					}
					work(r)
					err = outcome(r, i)
					if c.probe {
						probeMu.Lock()
						inFlight[c.gen]--
						probeMu.Unlock()
					}
					done := b.doneFunc(c)
					done(err)
					if r.IntN(20) == 0 {
						done(errBoom) // a second report must be ignored
					}
				}
			})
			continue
		}
		wg.Go(func() {
			for i := range calls {
				func() {
					defer func() {
						if recover() != nil {
							panics.Add(1)
						}
					}()
					_, err := Execute(b, func() (int, error) {
						work(r)
						if r.IntN(200) == 0 {
							panic("fn panicked")
						}
						return i, outcome(r, i)
					})
					var oe *OpenError
					if errors.Is(err, ErrTooManyRequests) || errors.As(err, &oe) {
						refused(r, err)
						return
					}
					admitted.Add(1)
				}()
			}
		})
	}
	wg.Wait()

	total := int64(goroutines * calls)
	assert.Equal(t, total, admitted.Load()+refusedOpen.Load()+refusedBusy.Load()+panics.Load(),
		"every call is admitted or refused exactly once")
	assert.LessOrEqual(t, maxSeen, maxProbes, "concurrent half-open probes")

	// The state and counters are consistent. Read them without advancing
	// the clock, so no new transition happens here.
	b.mu.Lock()
	state, gen, failures, successes, probes, shift := b.state, b.gen, b.failures, b.successes, len(b.probes), b.shift
	since, openUntil, delivering, pending := b.since, b.openUntil, b.delivering, len(b.events)
	b.mu.Unlock()
	require.True(t, state.Valid())
	assert.LessOrEqual(t, shift, uint8(maxShift))
	assert.Zero(t, probes, "every admitted probe reported")
	assert.False(t, delivering)
	assert.Zero(t, pending, "every transition delivered")
	switch state {
	case StateClosed:
		assert.Less(t, failures, DefaultFailureThreshold)
		assert.Zero(t, successes)
	case StateOpen:
		assert.Zero(t, failures)
		assert.Zero(t, successes)
		assert.True(t, openUntil.After(since))
	case StateHalfOpen:
		assert.Zero(t, failures)
		assert.Less(t, successes, maxProbes)
	}

	// The transitions form one valid chain, delivered in order, one per
	// generation.
	evMu.Lock()
	defer evMu.Unlock()
	require.NotEmpty(t, events)
	assert.Equal(t, gen, uint64(len(events)), "one transition per generation")
	valid := map[[2]State]bool{
		{StateClosed, StateOpen}:     true,
		{StateOpen, StateHalfOpen}:   true,
		{StateHalfOpen, StateClosed}: true,
		{StateHalfOpen, StateOpen}:   true,
	}
	seen := map[[2]State]int{}
	prev := StateClosed
	for i, ev := range events {
		require.Equal(t, prev, ev.from, "transition %d does not follow the previous one", i)
		require.True(t, valid[[2]State{ev.from, ev.to}], "invalid transition %d: %v → %v", i, ev.from, ev.to)
		seen[[2]State{ev.from, ev.to}]++
		prev = ev.to
	}
	assert.Equal(t, state, prev, "the last transition leads to the current state")
	for pair := range valid {
		assert.Positive(t, seen[pair], "transition %v → %v never happened", pair[0], pair[1])
	}
	t.Logf("calls %d: admitted %d, refused open %d, refused busy %d, panics %d; transitions %v",
		total, admitted.Load(), refusedOpen.Load(), refusedBusy.Load(), panics.Load(), seen)
}
