package etcdstore_test

// Tests of several replicas over one prefix: registries that follow each
// other's changes (and their discovery indexes), sessions with one active
// per user across clients, session leases, breaker state shared and
// followed.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/etcdstore"
)

// waitFor is how long a change may take to reach another replica.
const waitFor = 5 * time.Second

func breakerSnapshot() breaker.Snapshot {
	return breaker.Snapshot{State: breaker.StateOpen, Since: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), OpenUntil: time.Date(2025, 6, 1, 12, 0, 30, 0, time.UTC), Multiplier: 1}
}

// replica is one mesh replica: a registry over its own store and a
// discovery engine following the registry.
type replica struct {
	store  *etcdstore.Store
	reg    *registry.Registry
	engine *discovery.Engine
	events chan registry.Event
}

func newReplica(t *testing.T, s *etcdstore.Store, opts *registry.Options) *replica {
	t.Helper()
	o := registry.Options{SweepInterval: -1} // removals below come from other replicas or leases
	if opts != nil {
		o = *opts
	}
	reg, err := registry.New(t.Context(), s, &o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	r := &replica{store: s, reg: reg, engine: discovery.New(nil), events: make(chan registry.Event, 64)}
	t.Cleanup(r.engine.Follow(reg))
	_, cancel := reg.Subscribe(func(ev registry.Event) { r.events <- ev })
	t.Cleanup(cancel)
	return r
}

// found reports whether a discovery search for query finds name.
func (r *replica) found(t *testing.T, query, name string) bool {
	t.Helper()
	res, err := r.engine.Search(query, nil)
	require.NoError(t, err)
	for _, x := range res {
		if x.Agent.Name == name {
			return true
		}
	}
	return false
}

// event returns the replica's next registry event.
func (r *replica) event(t *testing.T) registry.Event {
	t.Helper()
	select {
	case ev := <-r.events:
		return ev
	case <-time.After(waitFor):
		t.Fatal("no registry event within the wait")
		return registry.Event{}
	}
}

func travelAgent() registry.Agent {
	return registry.Agent{
		Name:         "travel",
		Description:  "Books flights and hotels for business trips",
		Capabilities: []string{"flights", "hotels"},
		Endpoint:     "https://travel.example.com/task",
		Auth:         &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"},
	}
}

// TestRegistriesFollowEachOther: an agent registered on replica A appears
// in replica B's registry (Get, List), events and discovery index within
// a bounded wait; a heartbeat, a replacement and an unregistration on A
// follow the same way.
func TestRegistriesFollowEachOther(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	a, b := newReplica(t, rs[0], nil), newReplica(t, rs[1], nil)
	ctx := t.Context()

	_, created, err := a.reg.Register(ctx, travelAgent())
	require.NoError(t, err)
	require.True(t, created)
	ev := b.event(t)
	assert.Equal(t, registry.EventPut, ev.Type)
	assert.True(t, ev.Created)
	assert.Equal(t, "s3cret", ev.Agent.Auth.Token, "subscribers get the stored record, token included")
	got, err := b.reg.Get(ctx, "travel")
	require.NoError(t, err)
	assert.Equal(t, travelAgent().Description, got.Description)
	assert.Empty(t, got.Auth.Token, "reads are redacted as for local writes")
	page, err := b.reg.List(ctx, registry.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Agents, 1)
	assert.True(t, b.found(t, "book a flight", "travel"), "B's discovery index follows A's registration")

	_, err = a.reg.Heartbeat(ctx, "travel")
	require.NoError(t, err)
	assert.Equal(t, registry.EventHeartbeat, b.event(t).Type)

	changed := travelAgent()
	changed.Description = "Plans conference travel and visas"
	_, _, err = a.reg.Register(ctx, changed)
	require.NoError(t, err)
	ev = b.event(t)
	assert.Equal(t, registry.EventPut, ev.Type)
	assert.False(t, ev.Created)
	assert.True(t, b.found(t, "conference visas", "travel"), "B's index holds the new description")

	require.NoError(t, a.reg.Delete(ctx, "travel"))
	ev = b.event(t)
	assert.Equal(t, registry.EventDelete, ev.Type)
	assert.False(t, ev.Expired)
	_, err = b.reg.Get(ctx, "travel")
	require.ErrorIs(t, err, registry.ErrNotFound)
	assert.False(t, b.found(t, "conference visas", "travel"), "B's index drops the agent")

	// A's own events were not repeated by the echo of its writes.
	var own []registry.EventType
	for len(a.events) > 0 {
		own = append(own, (<-a.events).Type)
	}
	assert.Equal(t, []registry.EventType{registry.EventPut, registry.EventHeartbeat, registry.EventPut, registry.EventDelete}, own)
}

// TestRegistryLeaseExpiry: an agent whose replica stopped heartbeating is
// removed by its etcd lease, with no replica sweeping: every replica's
// registry and discovery index drop it, reporting the removal as an
// expiry. Leases are shortened to one second; the registries' clock jumps
// a minute ahead after the registration, so the agent is stale to them
// when it goes.
func TestRegistryLeaseExpiry(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	etcdstore.SetAgentLease(rs[0], func(int) int64 { return 1 })
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	a := newReplica(t, rs[0], &registry.Options{SweepInterval: -1, Now: now})
	// B's write hook (the audit of registry changes) is told of the
	// expiry the store made, with no caller.
	expired := make(chan registry.Write, 4)
	b := newReplica(t, rs[1], &registry.Options{SweepInterval: -1, Now: now, OnWrite: func(ctx context.Context, w registry.Write) {
		if w.Op == registry.OpExpire {
			expired <- w
		}
	}})
	agent := travelAgent()
	agent.TTLSeconds = 5
	_, _, err := a.reg.Register(t.Context(), agent)
	skew.Store(int64(time.Minute)) // at once: the lease lasts a second
	require.NoError(t, err)
	assert.Equal(t, registry.EventPut, b.event(t).Type)

	for _, r := range []*replica{a, b} {
		ev := r.event(t)
		for ev.Type == registry.EventPut { // A's own event
			ev = r.event(t)
		}
		assert.Equal(t, registry.EventDelete, ev.Type)
		assert.True(t, ev.Expired, "a removal of a stale agent is an expiry")
		assert.Zero(t, r.reg.Len())
		assert.Zero(t, r.engine.Len())
	}
	select {
	case w := <-expired:
		assert.Equal(t, "travel", w.Agent.Name)
		assert.Equal(t, 5, w.Agent.TTLSeconds)
	case <-time.After(5 * time.Second):
		t.Fatal("the store's expiry did not reach OnWrite")
	}
}

// TestRegistryStartsFromTheStore: a replica that starts after another
// wrote loads its agents, and the first snapshot of its watch, equal to
// what it loaded, delivers no event.
func TestRegistryStartsFromTheStore(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	a := newReplica(t, rs[0], nil)
	_, _, err := a.reg.Register(t.Context(), travelAgent())
	require.NoError(t, err)
	b := newReplica(t, rs[1], nil)
	_, err = b.reg.Get(t.Context(), "travel")
	require.NoError(t, err)
	assert.True(t, b.found(t, "hotels", "travel"))
	select {
	case ev := <-b.events:
		t.Fatalf("the first snapshot of the watch repeated a loaded agent: %+v", ev)
	case <-time.After(200 * time.Millisecond):
	}
}

// getOrCreate stores candidate as its user's active session unless the
// user has one, and returns the id of the user's session.
func getOrCreate(ctx context.Context, s session.Store, candidate session.Session) (string, error) {
	var id string
	err := s.UpdateActiveSession(ctx, candidate.UserID, func(cur *session.Session) (*session.Session, *session.Session, error) {
		if cur != nil {
			id = cur.ID
			return nil, nil, nil
		}
		next := candidate.Clone()
		id = next.ID
		return nil, &next, nil
	})
	return id, err
}

func newSession(id, user string, expires time.Time) session.Session {
	now := time.Now()
	return session.Session{ID: id, UserID: user, Status: session.StatusActive, CreatedAt: now, UpdatedAt: now, ExpiresAt: expires}
}

// TestOneActiveSessionAcrossReplicas: first messages of one user arriving
// at several replicas at once end in one session (the transaction on the
// user's slot), and a replica closing it frees the slot for all.
func TestOneActiveSessionAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 3, nil)
	ctx := t.Context()
	const perReplica = 6
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	n := 0
	for _, s := range rs {
		for range perReplica {
			n++
			candidate := newSession("s-"+string(rune('a'+n)), "alice", time.Now().Add(time.Hour))
			wg.Go(func() {
				id, err := getOrCreate(ctx, s, candidate)
				if assert.NoError(t, err) {
					mu.Lock()
					ids[id] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	require.Len(t, ids, 1, "every replica must end with the same session")
	var winner string
	for id := range ids {
		winner = id
	}
	for _, s := range rs {
		got, err := s.GetActiveSession(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, winner, got.ID)
	}

	require.NoError(t, rs[1].UpdateSession(ctx, winner, func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		next.Status = session.StatusCompleted
		return &next, nil
	}))
	_, err := rs[2].GetActiveSession(ctx, "alice")
	require.ErrorIs(t, err, session.ErrNotFound, "closing on one replica frees the slot for all")
	id, err := getOrCreate(ctx, rs[0], newSession("s-next", "alice", time.Now().Add(time.Hour)))
	require.NoError(t, err)
	assert.Equal(t, "s-next", id)
}

// TestSessionLeases: a session's keys carry a lease ending
// SessionLeaseGrace after its ExpiresAt, so a session nobody sweeps
// vanishes with its expiry entry and its user's slot, which then takes a
// new session; a session that slides forward moves to a later lease.
func TestSessionLeases(t *testing.T) {
	t.Parallel()
	s := open(t, &etcdstore.Options{SessionLeaseGrace: time.Second})
	ctx := t.Context()
	now := time.Now()
	_, err := getOrCreate(ctx, s, newSession("short", "alice", now))
	require.NoError(t, err)
	_, err = getOrCreate(ctx, s, newSession("slid", "bob", now))
	require.NoError(t, err)
	require.NoError(t, s.UpdateSession(ctx, "slid", func(cur *session.Session) (*session.Session, error) {
		next := cur.Clone()
		next.ExpiresAt = now.Add(time.Hour) // a turn slides the expiry
		return &next, nil
	}))

	require.Eventually(t, func() bool {
		_, err := s.GetSession(ctx, "short")
		return errors.Is(err, session.ErrNotFound)
	}, waitFor, 100*time.Millisecond, "the session's lease must expire")
	_, err = s.GetActiveSession(ctx, "alice")
	require.ErrorIs(t, err, session.ErrNotFound, "the slot went with the session")
	n, err := s.DeleteExpiredSessions(ctx, now.Add(time.Minute), nil)
	require.NoError(t, err)
	assert.Zero(t, n, "the expiry entry went with the session")
	id, err := getOrCreate(ctx, s, newSession("again", "alice", now.Add(time.Hour)))
	require.NoError(t, err)
	assert.Equal(t, "again", id)

	got, err := s.GetActiveSession(ctx, "bob")
	require.NoError(t, err, "a slid session moved to a later lease")
	assert.Equal(t, "slid", got.ID)
}

// TestBreakerStateIsShared: breaker state saved by one replica is loaded
// by another (breaker.Set.Restore at its start).
func TestBreakerStateIsShared(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	require.NoError(t, rs[0].SaveBreaker(t.Context(), "travel", breakerSnapshot()))
	got, err := rs[1].LoadBreakers(t.Context())
	require.NoError(t, err)
	require.Contains(t, got, "travel")
	assert.Equal(t, breaker.StateOpen, got["travel"].State)
}

// countingStore counts the breaker saves of a Store.
type countingStore struct {
	*etcdstore.Store
	saves atomic.Int64
}

func (c *countingStore) SaveBreakerRevision(ctx context.Context, name string, s breaker.Snapshot) (int64, error) {
	c.saves.Add(1)
	return c.Store.SaveBreakerRevision(ctx, name, s)
}

// TestBreakersFollowEachOther: breaker sets of two replicas follow each
// other through the store's watch (breaker.Set.Follow). The breaker opened
// by failures on A is open on B within a bounded wait and refuses calls
// there until A's open period ends; closed by A's probes, it closes on B.
// Only A saves (the echoes of its saves change nothing and are not
// written back), and A's probing is not disturbed by them. The replicas
// share a fake clock, as the real ones share the wall clock.
func TestBreakersFollowEachOther(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	stores := make([]*countingStore, 2)
	sets := make([]*breaker.Set, 2)
	for i, s := range rs {
		stores[i] = &countingStore{Store: s}
		sets[i] = breaker.NewSet(stores[i], &breaker.Options{Now: clock})
		require.NoError(t, sets[i].Restore(t.Context()))
		t.Cleanup(sets[i].Follow()) // before the store closes: cleanups run last first
	}
	a, b := sets[0], sets[1]
	state := func(s *breaker.Set) breaker.State { return s.Lookup("travel").State() }

	for range 5 {
		done, err := a.Get("travel").Allow()
		require.NoError(t, err)
		done(errors.New("agent down"))
	}
	require.Equal(t, breaker.StateOpen, state(a))
	until := clock().Add(breaker.DefaultResetTimeout)
	require.Eventually(t, func() bool { return state(b) == breaker.StateOpen }, waitFor, 5*time.Millisecond,
		"B's breaker opens when A's does")
	_, err := b.Get("travel").Allow()
	var open *breaker.OpenError
	require.ErrorAs(t, err, &open, "B refuses calls to the agent")
	assert.True(t, until.Equal(open.Until), "B is open until A's time: %v, want %v", open.Until, until)

	advance(breaker.DefaultResetTimeout)
	for range breaker.DefaultHalfOpenMaxCalls {
		done, err := a.Get("travel").Allow()
		require.NoError(t, err, "A's probes are admitted")
		done(nil)
	}
	require.Equal(t, breaker.StateClosed, state(a))
	require.Eventually(t, func() bool { return state(b) == breaker.StateClosed }, waitFor, 5*time.Millisecond,
		"B's breaker closes when A's does")
	done, err := b.Get("travel").Allow()
	require.NoError(t, err, "B admits calls again")
	done(nil)

	time.Sleep(100 * time.Millisecond) // let the last echoes arrive
	assert.Equal(t, breaker.StateClosed, state(a), "A's echoes did not reopen it")
	assert.Equal(t, int64(2), stores[0].saves.Load(), "A saved its open and its close")
	assert.Zero(t, stores[1].saves.Load(), "B wrote nothing back")
}

// TestWatchBreakers: a breaker watch reports a snapshot, then every save
// and deletion another client commits, with the revisions
// SaveBreakerRevision returned.
func TestWatchBreakers(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	writer, watcher := rs[0], rs[1]
	ctx := t.Context()
	r0, err := writer.SaveBreakerRevision(ctx, "before", breakerSnapshot())
	require.NoError(t, err)

	ch := make(chan breaker.SnapshotChanges, 16)
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watcher.WatchBreakers(wctx, func(r breaker.SnapshotChanges) { ch <- r }) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
	next := func() breaker.SnapshotChanges {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(waitFor):
			t.Fatal("no breaker watch report within the wait")
			return breaker.SnapshotChanges{}
		}
	}

	snap := next()
	assert.True(t, snap.Reset)
	require.Len(t, snap.Changes, 1)
	assert.Equal(t, "before", snap.Changes[0].Name)
	assert.Equal(t, r0, snap.Changes[0].Revision)
	require.NotNil(t, snap.Changes[0].Snapshot)
	assert.Equal(t, breaker.StateOpen, snap.Changes[0].Snapshot.State)

	closed := breaker.Snapshot{State: breaker.StateClosed, Since: time.Now(), Multiplier: 1}
	r1, err := writer.SaveBreakerRevision(ctx, "before", closed)
	require.NoError(t, err)
	assert.Greater(t, r1, r0)
	got := next()
	assert.False(t, got.Reset)
	assert.Equal(t, r1, got.Revision)
	require.Len(t, got.Changes, 1)
	assert.Equal(t, r1, got.Changes[0].Revision)
	require.NotNil(t, got.Changes[0].Snapshot)
	assert.Equal(t, breaker.StateClosed, got.Changes[0].Snapshot.State)

	require.NoError(t, writer.DeleteBreaker(ctx, "before"))
	got = next()
	require.Len(t, got.Changes, 1)
	assert.Equal(t, "before", got.Changes[0].Name)
	assert.Nil(t, got.Changes[0].Snapshot, "a deletion")
	assert.Greater(t, got.Changes[0].Revision, r1)
}
