package breaker

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/logtest"
)

// newTestSet returns a set over store on a fake clock.
func newTestSet(store Store, opts Options) (*Set, *clock) {
	c := newClock()
	opts.Now = c.Now
	return NewSet(store, &opts), c
}

func TestSetGetCreatesOnDemand(t *testing.T) {
	s, _ := newTestSet(nil, Options{})
	a := s.Get("a")
	require.NotNil(t, a)
	assert.Same(t, a, s.Get("a"))
	assert.NotSame(t, a, s.Get("b"))
	assert.Equal(t, "a", a.Name())
	fail(t, a, 5)
	states := s.States()
	require.Len(t, states, 2)
	assert.Equal(t, StateOpen, states["a"].State)
	assert.Equal(t, StateClosed, states["b"].State)
}

func TestSetLookupCreatesNothing(t *testing.T) {
	s, c := newTestSet(nil, Options{})
	assert.Nil(t, s.Lookup("a"))
	assert.Equal(t, StateClosed, s.Lookup("a").State(), "no breaker reads as closed")
	assert.Empty(t, s.States(), "Lookup created nothing")

	a := s.Get("a")
	assert.Same(t, a, s.Lookup("a"))
	fail(t, a, 5)
	assert.Equal(t, StateOpen, s.Lookup("a").State())
	c.Advance(31 * time.Second)
	assert.Equal(t, StateHalfOpen, s.Lookup("a").State(), "time moves an open breaker on")

	var none *Set
	assert.Nil(t, none.Lookup("a"))
}

func TestSetSharesOptionsAndNamesCallbacks(t *testing.T) {
	var rec recorder
	s, _ := newTestSet(nil, Options{FailureThreshold: 2, OnStateChange: rec.record})
	fail(t, s.Get("x"), 2)
	fail(t, s.Get("y"), 1)
	fail(t, s.Get("z"), 2)
	assert.Equal(t, []transition{{"x", StateClosed, StateOpen}, {"z", StateClosed, StateOpen}}, rec.all())
}

func TestSetZeroAndNil(t *testing.T) {
	var zero Set
	b := zero.Get("a")
	fail(t, b, 5)
	assert.Equal(t, StateOpen, zero.States()["a"].State)
	require.NoError(t, zero.Restore(t.Context()))
	require.NoError(t, zero.Remove(t.Context(), "a"))
	assert.Empty(t, zero.States())

	var none *Set
	assert.Nil(t, none.Get("a"))
	assert.Nil(t, none.States())
	require.NoError(t, none.Restore(t.Context()))
	require.NoError(t, none.Remove(t.Context(), "a"))
	v, err := Execute(none.Get("a"), func() (int, error) { return 1, nil })
	require.NoError(t, err)
	assert.Equal(t, 1, v)
}

func TestSetPersistsOnTransitionsOnly(t *testing.T) {
	store := newMemStore()
	s, c := newTestSet(store, Options{})
	b := s.Get("finance")

	fail(t, b, 4)
	succeed(t, b, 10)
	fail(t, b, 4)
	saves, _ := store.counts()
	require.Zero(t, saves, "no save without a transition")
	_, ok := store.get("finance")
	require.False(t, ok)

	fail(t, b, 1) // closed → open
	saves, _ = store.counts()
	require.Equal(t, 1, saves)
	snap, ok := store.get("finance")
	require.True(t, ok)
	assert.Equal(t, Snapshot{State: StateOpen, Since: t0, OpenUntil: t0.Add(30 * time.Second), Multiplier: 1}, snap)

	for range 10 { // refusals are not transitions
		_, err := b.Allow()
		require.ErrorIs(t, err, ErrOpen)
	}
	saves, _ = store.counts()
	require.Equal(t, 1, saves)

	c.Advance(30 * time.Second)
	require.Equal(t, StateHalfOpen, b.State()) // noticed lazily, then saved
	snap, _ = store.get("finance")
	assert.Equal(t, Snapshot{State: StateHalfOpen, Since: t0.Add(30 * time.Second), Multiplier: 1}, snap)

	fail(t, b, 1) // half-open → open, doubled
	snap, _ = store.get("finance")
	assert.Equal(t, StateOpen, snap.State)
	assert.Equal(t, 2, snap.Multiplier)
	assert.True(t, c.Now().Add(60*time.Second).Equal(snap.OpenUntil))

	c.Advance(60 * time.Second)
	succeed(t, b, 3) // open → half-open → closed
	snap, _ = store.get("finance")
	assert.Equal(t, Snapshot{State: StateClosed, Since: c.Now(), Multiplier: 1}, snap)
	saves, _ = store.counts()
	assert.Equal(t, 5, saves)
}

func TestSetRestoreRoundTrip(t *testing.T) {
	store := newMemStore()
	s1, c := newTestSet(store, Options{})

	// "half": half-open with two successes and a probe in flight.
	half := s1.Get("half")
	fail(t, half, 5)
	c.Advance(30 * time.Second)
	succeed(t, half, 2)
	_, err := half.Allow()
	require.NoError(t, err)
	require.Equal(t, StateHalfOpen, half.State())

	// "closed": closed after a recovery; never persisted while closed from
	// the start.
	closed := s1.Get("closed")
	fail(t, closed, 5)
	c.Advance(30 * time.Second)
	succeed(t, closed, 3)
	s1.Get("untouched")

	// "open": opened twice (multiplier 2), 20 s into its 60 s period.
	open := s1.Get("open")
	toHalfOpen(t, open, c)
	fail(t, open, 1)
	openUntil := c.Now().Add(60 * time.Second)

	c.Advance(20 * time.Second) // "restart" 20 s later
	var rec recorder
	s2 := NewSet(store, &Options{Now: c.Now, OnStateChange: rec.record})
	require.NoError(t, s2.Restore(t.Context()))

	// The open breaker stays open until its stored time.
	requireOpen(t, s2.Get("open"), openUntil)
	assert.Equal(t, 2, s2.Get("open").Snapshot().Multiplier)
	c.Advance(openUntil.Sub(c.Now()))
	assert.Equal(t, StateHalfOpen, s2.Get("open").State())
	fail(t, s2.Get("open"), 1)
	requireOpen(t, s2.Get("open"), c.Now().Add(120*time.Second)) // the multiplier survived

	// The half-open one restarted its window: no probes in flight, no
	// successes kept.
	h := s2.Get("half")
	assert.Equal(t, StateHalfOpen, h.State())
	succeed(t, h, 2)
	assert.Equal(t, StateHalfOpen, h.State())
	succeed(t, h, 1)
	assert.Equal(t, StateClosed, h.State())

	assert.Equal(t, StateClosed, s2.Get("closed").State())
	assert.NotContains(t, s2.States(), "untouched")

	// Restoring reported the states that differ from closed, so a gauge
	// follows.
	got := rec.all()
	assert.Contains(t, got, transition{"open", StateClosed, StateOpen})
	assert.Contains(t, got, transition{"half", StateClosed, StateHalfOpen})
	assert.NotContains(t, got, transition{"closed", StateClosed, StateClosed})
}

func TestSetRestoreOpenExpiredWhileDown(t *testing.T) {
	store := newMemStore()
	require.NoError(t, store.SaveBreaker(t.Context(), "a", Snapshot{
		State: StateOpen, Since: t0.Add(-time.Hour), OpenUntil: t0.Add(-time.Hour + 30*time.Second), Multiplier: 1,
	}))
	s, _ := newTestSet(store, Options{})
	require.NoError(t, s.Restore(t.Context()))
	snap := s.Get("a").Snapshot()
	assert.Equal(t, StateHalfOpen, snap.State)
	saved, _ := store.get("a")
	assert.Equal(t, StateHalfOpen, saved.State, "the lazy transition after restore is persisted")
}

func TestSetRestoreClampsOpenUntil(t *testing.T) {
	store := newMemStore()
	require.NoError(t, store.SaveBreaker(t.Context(), "a", Snapshot{
		State: StateOpen, Since: t0, OpenUntil: t0.Add(365 * 24 * time.Hour), Multiplier: 4,
	}))
	s, _ := newTestSet(store, Options{})
	require.NoError(t, s.Restore(t.Context()))
	requireOpen(t, s.Get("a"), t0.Add(4*30*time.Second))
}

func TestSetRestoreSkipsInvalidSnapshots(t *testing.T) {
	store := newMemStore()
	ctx := t.Context()
	require.NoError(t, store.SaveBreaker(ctx, "bad-state", Snapshot{State: State(7)}))
	require.NoError(t, store.SaveBreaker(ctx, "open-no-until", Snapshot{State: StateOpen, Multiplier: 1}))
	require.NoError(t, store.SaveBreaker(ctx, "odd-multiplier", Snapshot{
		State: StateOpen, Since: t0, OpenUntil: t0.Add(10 * time.Minute), Multiplier: 100,
	}))
	require.NoError(t, store.SaveBreaker(ctx, "closed", Snapshot{State: StateClosed, Failures: 99}))
	s, _ := newTestSet(store, Options{})
	err := s.Restore(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"bad-state"`)
	assert.Contains(t, err.Error(), `"open-no-until"`)
	assert.NotContains(t, err.Error(), "odd-multiplier")

	// A multiplier out of range is clamped to 32.
	requireOpen(t, s.Get("odd-multiplier"), t0.Add(10*time.Minute))
	assert.Equal(t, 32, s.Get("odd-multiplier").Snapshot().Multiplier)
	// A failure count is kept below the threshold.
	c := s.Get("closed")
	assert.Equal(t, 4, c.Snapshot().Failures)
	fail(t, c, 1)
	assert.Equal(t, StateOpen, c.State())
}

func TestSetRestoreLoadError(t *testing.T) {
	store := newMemStore()
	store.setFail(errBoom)
	s, _ := newTestSet(store, Options{})
	err := s.Restore(t.Context())
	require.ErrorIs(t, err, errBoom)
	// The set still works.
	fail(t, s.Get("a"), 5)
	assert.Equal(t, StateOpen, s.Get("a").State())
}

func TestSetPersistenceFailureDoesNotBreakBreaker(t *testing.T) {
	store := newMemStore()
	store.setFail(errors.New("disk full"))
	var logs logtest.Buffer
	s, c := newTestSet(store, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	b := s.Get("finance")
	fail(t, b, 5)
	requireOpen(t, b, c.Now().Add(30*time.Second))
	c.Advance(30 * time.Second)
	succeed(t, b, 3)
	assert.Equal(t, StateClosed, b.State())

	out := logs.String()
	assert.Contains(t, out, `level=WARN msg="breaker state not persisted" breaker=finance state=open err="disk full"`)
	assert.Contains(t, out, `level=INFO msg="breaker state changed" breaker=finance from=closed to=open until=`)
	assert.Contains(t, out, `from=half-open to=closed`)

	// Once the store recovers, the next transition is written.
	store.setFail(nil)
	fail(t, b, 5)
	snap, ok := store.get("finance")
	require.True(t, ok)
	assert.Equal(t, StateOpen, snap.State)
}

func TestSetSaveUsesStoreTimeout(t *testing.T) {
	var deadline time.Duration
	store := &funcStore{save: func(ctx context.Context, _ string, _ Snapshot) error {
		d, ok := ctx.Deadline()
		require.True(t, ok)
		deadline = time.Until(d)
		return nil
	}}
	s, _ := newTestSet(store, Options{StoreTimeout: time.Hour})
	fail(t, s.Get("a"), 5)
	assert.Greater(t, deadline, 59*time.Minute)
}

func TestSetRemove(t *testing.T) {
	store := newMemStore()
	s, c := newTestSet(store, Options{})
	old := s.Get("gone")
	fail(t, old, 5)
	_, ok := store.get("gone")
	require.True(t, ok)

	require.NoError(t, s.Remove(t.Context(), "gone"))
	_, ok = store.get("gone")
	assert.False(t, ok)
	assert.NotContains(t, s.States(), "gone")

	// The old breaker still works but is not persisted any more.
	savesBefore, _ := store.counts()
	c.Advance(30 * time.Second)
	succeed(t, old, 3)
	assert.Equal(t, StateClosed, old.State())
	saves, _ := store.counts()
	assert.Equal(t, savesBefore, saves)
	_, ok = store.get("gone")
	assert.False(t, ok)

	// A new breaker of the same name starts closed.
	fresh := s.Get("gone")
	assert.NotSame(t, old, fresh)
	assert.Equal(t, StateClosed, fresh.State())

	// Removing a name only in the store deletes it there.
	require.NoError(t, store.SaveBreaker(t.Context(), "stored-only", Snapshot{State: StateClosed, Multiplier: 1}))
	require.NoError(t, s.Remove(t.Context(), "stored-only"))
	_, ok = store.get("stored-only")
	assert.False(t, ok)

	// A store error is returned, and the breaker is forgotten anyway.
	store.setFail(errBoom)
	s.Get("x")
	err := s.Remove(t.Context(), "x")
	require.ErrorIs(t, err, errBoom)
	assert.Contains(t, err.Error(), `"x"`)
	assert.NotContains(t, s.States(), "x")
}

func TestSetRemoveRacingTransitions(t *testing.T) {
	// Remove while another goroutine keeps tripping the breaker: once
	// Remove returns, no save for the removed breaker may reach the store.
	store := newMemStore()
	s, c := newTestSet(store, Options{FailureThreshold: 1, ResetTimeout: time.Nanosecond, HalfOpenMaxCalls: 1})
	b := s.Get("a")
	stop := make(chan struct{})
	var rounds atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if done, err := b.Allow(); err == nil {
				done(errBoom)
			}
			c.Advance(time.Nanosecond)
			rounds.Add(1)
		}
	})
	waitRounds := func(n int64) {
		for target := rounds.Load() + n; rounds.Load() < target; {
			runtime.Gosched()
		}
	}
	waitRounds(100)
	require.NoError(t, s.Remove(t.Context(), "a"))
	_, ok := store.get("a")
	require.False(t, ok)
	waitRounds(100) // transitions keep happening after Remove
	close(stop)
	wg.Wait()
	_, ok = store.get("a")
	require.False(t, ok, "a removed breaker was saved after Remove returned")
}

// funcStore is a Store built from functions, for one-off behaviours.
type funcStore struct {
	save func(ctx context.Context, name string, s Snapshot) error
}

func (f *funcStore) LoadBreakers(context.Context) (map[string]Snapshot, error) { return nil, nil }
func (f *funcStore) SaveBreaker(ctx context.Context, name string, s Snapshot) error {
	return f.save(ctx, name, s)
}
func (f *funcStore) DeleteBreaker(context.Context, string) error { return nil }
