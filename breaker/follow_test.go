package breaker

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchStore is a WatchableStore for tests: one store shared by the Sets
// of several "replicas", with a revision counter and watches fed in
// revision order. Its saves can be held at a gate to test a save in
// flight.
type watchStore struct {
	mu       sync.Mutex
	rev      int64
	m        map[string]revSnapshot
	watchers map[chan SnapshotChanges]bool
	saves    int
	gate     chan struct{} // when set, a save waits for it before committing
}

type revSnapshot struct {
	s   Snapshot
	rev int64
}

func newWatchStore() *watchStore {
	return &watchStore{m: map[string]revSnapshot{}, watchers: map[chan SnapshotChanges]bool{}}
}

func (w *watchStore) LoadBreakers(context.Context) (map[string]Snapshot, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]Snapshot, len(w.m))
	for name, rs := range w.m {
		out[name] = rs.s
	}
	return out, nil
}

func (w *watchStore) SaveBreaker(ctx context.Context, name string, s Snapshot) error {
	_, err := w.SaveBreakerRevision(ctx, name, s)
	return err
}

func (w *watchStore) SaveBreakerRevision(_ context.Context, name string, s Snapshot) (int64, error) {
	w.mu.Lock()
	gate := w.gate
	w.mu.Unlock()
	if gate != nil {
		<-gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.saves++
	return w.commitLocked(name, &s), nil
}

func (w *watchStore) DeleteBreaker(_ context.Context, name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.m[name]; ok {
		w.commitLocked(name, nil)
	}
	return nil
}

// put commits s under name as another replica would, without a watch of
// its own, and returns the revision.
func (w *watchStore) put(name string, s Snapshot) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.commitLocked(name, &s)
}

// commitLocked writes s (nil: deletes) under name at the next revision and
// reports it to every watch. w.mu is held.
func (w *watchStore) commitLocked(name string, s *Snapshot) int64 {
	w.rev++
	if s != nil {
		w.m[name] = revSnapshot{*s, w.rev}
	} else {
		delete(w.m, name)
	}
	r := SnapshotChanges{Revision: w.rev, Changes: []SnapshotChange{{Name: name, Snapshot: s, Revision: w.rev}}}
	for ch := range w.watchers {
		ch <- r // buffered far beyond what a test writes
	}
	return w.rev
}

func (w *watchStore) WatchBreakers(ctx context.Context, fn func(SnapshotChanges)) error {
	ch := make(chan SnapshotChanges, 1024)
	w.mu.Lock()
	snap := SnapshotChanges{Reset: true, Revision: w.rev}
	for _, name := range slices.Sorted(maps.Keys(w.m)) {
		rs := w.m[name]
		snap.Changes = append(snap.Changes, SnapshotChange{Name: name, Snapshot: &rs.s, Revision: rs.rev})
	}
	w.watchers[ch] = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.watchers, ch)
		w.mu.Unlock()
	}()
	fn(snap)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-ch:
			fn(r)
		}
	}
}

// stored returns what the store holds under name.
func (w *watchStore) stored(name string) revSnapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[name]
}

func (w *watchStore) saveCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.saves
}

var _ WatchableStore = (*watchStore)(nil)

// change is a report of one put (s non-nil) or deletion at rev.
func change(name string, s *Snapshot, rev int64) SnapshotChanges {
	return SnapshotChanges{Revision: rev, Changes: []SnapshotChange{{Name: name, Snapshot: s, Revision: rev}}}
}

func openSnap(since time.Time, period time.Duration, multiplier int) *Snapshot {
	return &Snapshot{State: StateOpen, Since: since, OpenUntil: since.Add(period), Multiplier: multiplier}
}

func closedSnap(since time.Time) *Snapshot {
	return &Snapshot{State: StateClosed, Since: since, Multiplier: 1}
}

// TestFollowAppliesNewerChangesOnly: a remote open makes the breaker refuse
// calls until the snapshot's OpenUntil; a change older than what the
// breaker holds is ignored; a newer close admits again. Applied changes are
// neither saved again nor reported to OnStateChange.
func TestFollowAppliesNewerChangesOnly(t *testing.T) {
	store := newWatchStore()
	var rec recorder
	s, c := newTestSet(store, Options{OnStateChange: rec.record})

	s.applyChanges(change("finance", openSnap(t0, 30*time.Second, 1), 5))
	requireOpen(t, s.Get("finance"), t0.Add(30*time.Second))
	assert.Equal(t, StateOpen, s.Lookup("finance").State(), "what discovery's availability filter reads")

	s.applyChanges(change("finance", closedSnap(t0), 4))
	requireOpen(t, s.Get("finance"), t0.Add(30*time.Second)) // stale: ignored
	s.applyChanges(change("finance", closedSnap(t0), 5))
	requireOpen(t, s.Get("finance"), t0.Add(30*time.Second)) // same revision: ignored

	c.Advance(5 * time.Second)
	s.applyChanges(change("finance", openSnap(t0.Add(5*time.Second), 60*time.Second, 2), 7))
	requireOpen(t, s.Get("finance"), t0.Add(65*time.Second)) // open → open moves OpenUntil
	assert.Equal(t, 2, s.Get("finance").Snapshot().Multiplier)

	s.applyChanges(change("finance", closedSnap(c.Now()), 9))
	assert.Equal(t, StateClosed, s.Get("finance").State())
	succeed(t, s.Get("finance"), 1)

	assert.Zero(t, store.saveCount(), "applied changes are not saved again")
	assert.Empty(t, rec.all(), "applied changes are not reported to OnStateChange")
}

// TestFollowIgnoresOwnEchoes: the watch reports the set's own saves after
// the set moved on (opened, half-opened, closed by probes); neither echo
// changes the breaker, and nothing is saved again.
func TestFollowIgnoresOwnEchoes(t *testing.T) {
	store := newWatchStore()
	s, c := newTestSet(store, Options{})
	b := s.Get("finance")
	fail(t, b, 5) // closed → open: saved at revision 1
	opened := store.stored("finance")
	c.Advance(30 * time.Second)
	succeed(t, b, 3) // open → half-open (not saved) → closed: saved at revision 2
	closed := store.stored("finance")
	require.Equal(t, []int64{1, 2}, []int64{opened.rev, closed.rev})

	s.applyChanges(change("finance", &opened.s, opened.rev))
	assert.Equal(t, StateClosed, b.State(), "the echo of an older own save does not reopen")
	s.applyChanges(change("finance", &closed.s, closed.rev))
	assert.Equal(t, StateClosed, b.State())
	assert.Equal(t, 2, store.saveCount(), "no save after the echoes")
}

// TestFollowKeepsHalfOpenProbes: changes that bring what the breaker
// already has (a half-open state, an open period that has ended) keep the
// probes in flight, so half-open probing works on every replica.
func TestFollowKeepsHalfOpenProbes(t *testing.T) {
	store := newWatchStore()
	s, c := newTestSet(store, Options{})
	b := s.Get("finance")
	s.applyChanges(change("finance", openSnap(t0, 30*time.Second, 1), 1))
	c.Advance(30 * time.Second)
	require.Equal(t, StateHalfOpen, b.State())
	d1, err := b.Allow()
	require.NoError(t, err)
	d2, err := b.Allow()
	require.NoError(t, err)

	// Another replica saved the same open period (it opened too), and a
	// half-open state.
	s.applyChanges(change("finance", openSnap(t0, 30*time.Second, 1), 2))
	s.applyChanges(change("finance", &Snapshot{State: StateHalfOpen, Since: t0.Add(30 * time.Second), Multiplier: 1}, 3))
	d3, err := b.Allow()
	require.NoError(t, err)
	_, err = b.Allow()
	require.ErrorIs(t, err, ErrTooManyRequests, "the two probes in flight are still counted")
	d1(nil)
	d2(nil)
	d3(nil)
	assert.Equal(t, StateClosed, b.State(), "the probes' successes close the breaker")
}

// TestFollowRemoteCloseEndsProbing: a remote close closes a half-open
// breaker at once; its probes then report to no effect.
func TestFollowRemoteCloseEndsProbing(t *testing.T) {
	store := newWatchStore()
	s, c := newTestSet(store, Options{})
	b := s.Get("finance")
	toHalfOpen(t, b, c)
	done, err := b.Allow()
	require.NoError(t, err)
	s.applyChanges(change("finance", closedSnap(c.Now()), 100))
	assert.Equal(t, StateClosed, b.State())
	done(errBoom)
	assert.Equal(t, StateClosed, b.State(), "a probe admitted before the close reports to no effect")
	assert.Equal(t, 0, b.Snapshot().Failures)
}

// TestFollowLocalSaveWins: a change committed before one of the set's own
// saves but watched while that save is in flight (or not yet started) is
// ignored: the store ends with the set's save, and so does the breaker.
func TestFollowLocalSaveWins(t *testing.T) {
	store := newWatchStore()
	s, _ := newTestSet(store, Options{})
	b := s.Get("finance")
	gate := make(chan struct{})
	store.mu.Lock()
	store.gate = gate
	store.mu.Unlock()

	tripped := make(chan struct{})
	go func() {
		defer close(tripped)
		for range 5 {
			done, err := b.Allow()
			if err != nil {
				return
			}
			done(errBoom) // the fifth opens it and blocks in the save
		}
	}()
	require.Eventually(t, func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		e := s.m["finance"]
		if e.mu.TryLock() {
			e.mu.Unlock()
			return false
		}
		return true
	}, 5*time.Second, time.Millisecond, "the save holds the entry")

	// Another replica closes it (revision 1) before the save commits.
	rev := store.put("finance", *closedSnap(t0))
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		s.applyChanges(change("finance", closedSnap(t0), rev))
	}()
	select {
	case <-applied:
		t.Fatal("a change was applied while a save of the breaker was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(gate)
	<-tripped
	<-applied
	assert.Equal(t, StateOpen, b.State(), "the later save wins")
	assert.Equal(t, StateOpen, store.stored("finance").s.State)
	assert.Equal(t, int64(2), store.stored("finance").rev)

	// A transition not yet taken for saving wins too.
	b2 := s.Get("hr")
	b2.mu.Lock()
	b2.dirty = true // as between a transition and its delivery
	b2.mu.Unlock()
	s.applyChanges(change("hr", openSnap(t0, 30*time.Second, 1), 50))
	b2.mu.Lock()
	state := b2.state
	b2.dirty = false
	b2.mu.Unlock()
	assert.Equal(t, StateClosed, state)
}

// TestFollowDeletions: a remote deletion forgets a breaker known to be
// stored; a snapshot forgets those missing from it, but not a breaker this
// replica never saw stored, nor one saved after the snapshot.
func TestFollowDeletions(t *testing.T) {
	store := newWatchStore()
	s, _ := newTestSet(store, Options{})
	s.applyChanges(change("a", openSnap(t0, 30*time.Second, 1), 3))
	s.applyChanges(change("b", openSnap(t0, 30*time.Second, 1), 4))
	local := s.Get("local") // closed, never saved
	fail(t, local, 2)
	s.applyChanges(change("a", nil, 2))
	assert.Contains(t, s.States(), "a", "a deletion older than the breaker's state is ignored")
	s.applyChanges(change("a", nil, 5))
	assert.NotContains(t, s.States(), "a")
	assert.Equal(t, StateClosed, s.Lookup("a").State())

	fail(t, s.Get("c"), 5) // saved at the store's revision 1
	s.applyChanges(SnapshotChanges{Reset: true, Revision: 6})
	assert.NotContains(t, s.States(), "b", "missing from the snapshot: deleted")
	assert.Contains(t, s.States(), "local", "never stored: kept")
	assert.Equal(t, 2, s.Get("local").Snapshot().Failures)
	assert.NotContains(t, s.States(), "c", "saved at revision 1, missing at 6: deleted")

	fail(t, s.Get("d"), 5) // saved at revision 2, after a snapshot at 1
	s.applyChanges(SnapshotChanges{Reset: true, Revision: 1})
	assert.Contains(t, s.States(), "d")
}

// TestFollowSkipsInvalidSnapshots: a stored value that cannot be applied
// changes nothing.
func TestFollowSkipsInvalidSnapshots(t *testing.T) {
	s, _ := newTestSet(newWatchStore(), Options{})
	s.applyChanges(change("a", &Snapshot{State: StateOpen, Multiplier: 1}, 1)) // no OpenUntil
	s.applyChanges(change("b", &Snapshot{State: State(9)}, 2))
	assert.Empty(t, s.States())
}

// TestFollowReplicas: two sets following one store, as two replicas. The
// breaker opened by failures on A refuses calls on B; closed by A's
// probes, it admits on B. Nothing is saved but A's transitions (no echo
// ping-pong), and each transition is reported once, by A.
func TestFollowReplicas(t *testing.T) {
	store := newWatchStore()
	c := newClock()
	var recA, recB recorder
	a := NewSet(store, &Options{Now: c.Now, OnStateChange: recA.record})
	b := NewSet(store, &Options{Now: c.Now, OnStateChange: recB.record})
	for _, s := range []*Set{a, b} {
		require.NoError(t, s.Restore(t.Context()))
		stop := s.Follow()
		t.Cleanup(stop)
	}
	state := func(s *Set) State { return s.Lookup("finance").State() }

	fail(t, a.Get("finance"), 5)
	require.Eventually(t, func() bool { return state(b) == StateOpen }, 5*time.Second, time.Millisecond)
	requireOpen(t, b.Get("finance"), t0.Add(30*time.Second))

	c.Advance(30 * time.Second)
	succeed(t, a.Get("finance"), 3)
	require.Equal(t, StateClosed, state(a))
	require.Eventually(t, func() bool { return state(b) == StateClosed }, 5*time.Second, time.Millisecond)
	succeed(t, b.Get("finance"), 1)

	time.Sleep(20 * time.Millisecond) // let any echo arrive
	assert.Equal(t, 2, store.saveCount(), "A's open and close only")
	assert.Equal(t, StateClosed, state(a), "A's own echoes changed nothing")
	assert.Equal(t, []transition{
		{"finance", StateClosed, StateOpen}, {"finance", StateOpen, StateHalfOpen}, {"finance", StateHalfOpen, StateClosed},
	}, recA.all())
	for _, tr := range recB.all() {
		assert.Equal(t, transition{"finance", StateOpen, StateHalfOpen}, tr,
			"B reports only what it computes itself (the end of the open period, if it looked then)")
	}
}

// TestFollowNeedsWatchableStore: without a WatchableStore, or without a
// Set, Follow starts nothing and stop is a no-op.
func TestFollowNeedsWatchableStore(t *testing.T) {
	for _, s := range []*Set{nil, {}, NewSet(newMemStore(), nil)} {
		stop := s.Follow()
		stop()
		stop()
	}
	stop := NewSet(newWatchStore(), nil).Follow()
	stop()
	stop() // idempotent
}
