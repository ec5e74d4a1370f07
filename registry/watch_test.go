package registry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
)

// watchStore is a registry.WatchableStore in memory whose watch the test
// drives: every commit gets the next revision and is logged; the test
// hands reports to the registry's watch with push, in the order it wants,
// so it can deliver a change late (as a watch may).
type watchStore struct {
	mu   sync.Mutex
	rev  int64
	recs map[string]watchRec

	feed    chan registry.AgentChanges
	applied chan struct{} // one value each time the registry applied a report
	running chan struct{} // closed when WatchAgents starts
	stopped chan struct{} // closed when WatchAgents returns
	once    sync.Once
}

type watchRec struct {
	a   registry.Agent
	rev int64
}

func newWatchStore() *watchStore {
	return &watchStore{
		recs:    map[string]watchRec{},
		feed:    make(chan registry.AgentChanges),
		applied: make(chan struct{}),
		running: make(chan struct{}),
		stopped: make(chan struct{}),
	}
}

func (s *watchStore) GetAgent(_ context.Context, name string) (registry.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[name]
	if !ok {
		return registry.Agent{}, registry.ErrNotFound
	}
	return r.a.Clone(), nil
}

func (s *watchStore) ListAgents(context.Context) ([]registry.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []registry.Agent
	for _, r := range s.recs {
		out = append(out, r.a.Clone())
	}
	return out, nil
}

func (s *watchStore) UpdateAgent(ctx context.Context, name string, fn func(*registry.Agent) (*registry.Agent, error)) error {
	_, err := s.UpdateAgentRevision(ctx, name, fn)
	return err
}

func (s *watchStore) UpdateAgentRevision(_ context.Context, name string, fn func(*registry.Agent) (*registry.Agent, error)) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur *registry.Agent
	if r, ok := s.recs[name]; ok {
		c := r.a.Clone()
		cur = &c
	}
	next, err := fn(cur)
	if err != nil {
		return 0, err
	}
	if next == nil && cur == nil {
		return 0, nil
	}
	return s.commitLocked(name, next).Revision, nil
}

// commitLocked stores next (nil deletes) under name at the next revision.
func (s *watchStore) commitLocked(name string, next *registry.Agent) registry.AgentChange {
	s.rev++
	ch := registry.AgentChange{Name: name, Revision: s.rev}
	if next == nil {
		delete(s.recs, name)
		return ch
	}
	a := next.Clone()
	s.recs[name] = watchRec{a: a, rev: s.rev}
	c := a.Clone()
	ch.Agent = &c
	return ch
}

// remote commits a write by another replica and returns its change, for
// the test to push when it wants.
func (s *watchStore) remote(name string, next *registry.Agent) registry.AgentChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked(name, next)
}

// snapshot returns a report of every stored agent at the current revision.
func (s *watchStore) snapshot() registry.AgentChanges {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := registry.AgentChanges{Reset: true, Revision: s.rev}
	for name, r := range s.recs {
		a := r.a.Clone()
		b.Changes = append(b.Changes, registry.AgentChange{Name: name, Agent: &a, Revision: r.rev})
	}
	return b
}

func (s *watchStore) WatchAgents(ctx context.Context, fn func(registry.AgentChanges)) error {
	s.once.Do(func() { close(s.running) })
	defer close(s.stopped)
	for {
		select {
		case b := <-s.feed:
			fn(b)
			s.applied <- struct{}{}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// push hands b to the registry's watch and waits until it is applied.
func (s *watchStore) push(t *testing.T, b registry.AgentChanges) {
	t.Helper()
	select {
	case s.feed <- b:
	case <-time.After(5 * time.Second):
		t.Fatal("the registry is not watching the store")
	}
	<-s.applied
}

// pushChanges pushes changes as one report up to the last one's revision.
func (s *watchStore) pushChanges(t *testing.T, chs ...registry.AgentChange) {
	t.Helper()
	s.push(t, registry.AgentChanges{Revision: chs[len(chs)-1].Revision, Changes: chs})
}

// eventLog collects the events of a subscription.
type eventLog struct {
	mu  sync.Mutex
	evs []registry.Event
}

func (l *eventLog) add(ev registry.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

// take returns the events so far, as "type name[ created][ expired]", and
// forgets them.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.evs {
		s := fmt.Sprintf("%s %s", ev.Type, ev.Agent.Name)
		if ev.Created {
			s += " created"
		}
		if ev.Expired {
			s += " expired"
		}
		out = append(out, s)
	}
	l.evs = nil
	return out
}

func watchedRegistry(t *testing.T, s *watchStore, opts *registry.Options) (*registry.Registry, *eventLog) {
	t.Helper()
	r := newRegistry(t, s, opts)
	log := &eventLog{}
	_, cancel := r.Subscribe(log.add)
	t.Cleanup(cancel)
	select {
	case <-s.running:
	case <-time.After(5 * time.Second):
		t.Fatal("New did not start watching a WatchableStore")
	}
	return r, log
}

// TestWatchedChangesReachTheView: changes another replica commits reach
// Get, List and the subscribers: creation, a heartbeat (only LastSeen
// moved), a replacement, a deletion. A snapshot equal to the view
// delivers nothing.
func TestWatchedChangesReachTheView(t *testing.T) {
	s := newWatchStore()
	s.remote("pre", new(agent("pre")))
	r, log := watchedRegistry(t, s, nil)
	s.push(t, s.snapshot())
	assert.Empty(t, log.take(), "the first snapshot equals what New loaded")

	a := agent("a")
	a.LastSeen = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.pushChanges(t, s.remote("a", &a))
	got, err := r.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.Equal(t, a.Endpoint, got.Endpoint)
	page, err := r.List(t.Context(), registry.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, page.Agents, 2)

	beat := a.Clone()
	beat.LastSeen = beat.LastSeen.Add(time.Minute)
	s.pushChanges(t, s.remote("a", &beat))
	changed := beat.Clone()
	changed.Description = "changed elsewhere"
	s.pushChanges(t, s.remote("a", &changed))
	got, err = r.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.Equal(t, "changed elsewhere", got.Description)

	s.pushChanges(t, s.remote("a", nil))
	_, err = r.Get(t.Context(), "a")
	require.ErrorIs(t, err, registry.ErrNotFound)
	assert.Equal(t, []string{"put a created", "heartbeat a", "put a", "delete a"}, log.take())
}

// TestWatchedOwnWritesAreNotRepeated: the echo of the registry's own
// writes is not applied again, and a change committed before an own write
// but watched after it does not overwrite it.
func TestWatchedOwnWritesAreNotRepeated(t *testing.T) {
	s := newWatchStore()
	r, log := watchedRegistry(t, s, nil)

	older := agent("a")
	older.Description = "older, from another replica"
	late := s.remote("a", &older) // committed first, watched late
	_, _, err := r.Register(t.Context(), agent("a"))
	require.NoError(t, err)
	assert.Equal(t, []string{"put a"}, log.take(), "the own write replaced the record the store held")
	s.mu.Lock()
	echoRev := s.rev
	echo := s.recs["a"].a.Clone()
	s.mu.Unlock()

	s.pushChanges(t, late, registry.AgentChange{Name: "a", Agent: &echo, Revision: echoRev})
	got, err := r.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.Equal(t, agent("a").Description, got.Description, "an older watched change must not overwrite the own write")
	assert.Empty(t, log.take(), "neither the late change nor the echo is delivered")

	// An own delete: an older put watched after it does not bring the
	// agent back.
	stale := s.remote("a", new(agent("a")))
	require.NoError(t, r.Delete(t.Context(), "a"))
	s.pushChanges(t, stale)
	_, err = r.Get(t.Context(), "a")
	require.ErrorIs(t, err, registry.ErrNotFound)
	assert.Equal(t, []string{"delete a"}, log.take())
}

// TestWatchedSnapshotDeletesOnlyWhatItCovers: a snapshot (after a
// reconnect) deletes the agents missing from it that the registry knew at
// or before its revision, not one the registry wrote after it.
func TestWatchedSnapshotDeletesOnlyWhatItCovers(t *testing.T) {
	s := newWatchStore()
	s.remote("old", new(agent("old")))
	r, log := watchedRegistry(t, s, nil)
	s.push(t, s.snapshot())

	s.remote("old", nil) // deleted elsewhere; the watch missed it
	snap := s.snapshot()
	_, _, err := r.Register(t.Context(), agent("new")) // after the snapshot
	require.NoError(t, err)
	log.take()
	s.push(t, snap)

	_, err = r.Get(t.Context(), "old")
	require.ErrorIs(t, err, registry.ErrNotFound)
	_, err = r.Get(t.Context(), "new")
	require.NoError(t, err, "an agent written after the snapshot must survive it")
	assert.Equal(t, []string{"delete old"}, log.take())
}

// TestWatchedDeleteOfStaleAgentIsExpiry: an agent the store removed while
// it was stale (a lease expiry, another replica's sweep) is reported as
// expired.
func TestWatchedDeleteOfStaleAgentIsExpiry(t *testing.T) {
	clk := newClock()
	s := newWatchStore()
	r, log := watchedRegistry(t, s, &registry.Options{Now: clk.Now})
	a := agent("a")
	a.TTLSeconds = 5
	_, _, err := r.Register(t.Context(), a)
	require.NoError(t, err)
	_, _, err = r.Register(t.Context(), agent("b"))
	require.NoError(t, err)
	log.take()
	clk.Advance(21 * time.Second)
	s.pushChanges(t, s.remote("a", nil), s.remote("b", nil))
	assert.Equal(t, []string{"delete a expired", "delete b"}, log.take())
	assert.Zero(t, r.Len())
}

// TestWatchStopsOnClose: Close stops the watch.
func TestWatchStopsOnClose(t *testing.T) {
	s := newWatchStore()
	r, _ := watchedRegistry(t, s, nil)
	require.NoError(t, r.Close())
	select {
	case <-s.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("WatchAgents still running after Close")
	}
}
