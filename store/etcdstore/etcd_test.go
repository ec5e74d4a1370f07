package etcdstore_test

// Tests of what is particular to etcd: optimistic transactions across
// clients, leases, watches, the key layout, and failure modes (closed,
// unreachable).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/harness/etcdtest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/etcdstore"
)

// rawClient returns a plain etcd client of the test server, to look at
// keys and leases behind the store.
func rawClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: server.Endpoints, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// replicas opens n stores over one prefix: n replicas of one mesh.
func replicas(t *testing.T, n int, opts *etcdstore.Options) []*etcdstore.Store {
	t.Helper()
	var o etcdstore.Options
	if opts != nil {
		o = *opts
	}
	o.Prefix = etcdtest.Prefix(t)
	out := make([]*etcdstore.Store, n)
	for i := range out {
		out[i] = open(t, &o)
	}
	return out
}

// counter returns agent name with label n = the counter value.
func counter(name string, n int) *registry.Agent {
	return &registry.Agent{Name: name, Endpoint: "https://" + name + ".example.com/task", Labels: map[string]string{"n": strconv.Itoa(n)}}
}

func counterOf(t *testing.T, a registry.Agent) int {
	t.Helper()
	n, err := strconv.Atoi(a.Labels["n"])
	require.NoError(t, err)
	return n
}

// increment is an update function adding one to the counter.
func increment(cur *registry.Agent) (*registry.Agent, error) {
	n, err := strconv.Atoi(cur.Labels["n"])
	if err != nil {
		return nil, err
	}
	return counter(cur.Name, n+1), nil
}

// TestUpdateAgentRetriesOnConflict: when another client writes the agent
// while fn runs, the compare-and-set on the key's mod revision fails and
// fn runs again on the other client's record: nothing is lost.
func TestUpdateAgentRetriesOnConflict(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	a, b := rs[0], rs[1]
	ctx := t.Context()
	require.NoError(t, a.UpdateAgent(ctx, "c", func(*registry.Agent) (*registry.Agent, error) { return counter("c", 0), nil }))

	var seen []int
	err := a.UpdateAgent(ctx, "c", func(cur *registry.Agent) (*registry.Agent, error) {
		seen = append(seen, counterOf(t, *cur))
		if len(seen) == 1 { // the other replica commits meanwhile
			require.NoError(t, b.UpdateAgent(ctx, "c", increment))
		}
		return increment(cur)
	})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, seen, "fn must run again on the record the other client wrote")
	got, err := b.GetAgent(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, 2, counterOf(t, got), "both increments must land")
}

// TestConcurrentUpdateAgentFromTwoClients: writers on two clients
// increment one counter at once; every increment lands.
func TestConcurrentUpdateAgentFromTwoClients(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	ctx := t.Context()
	require.NoError(t, rs[0].UpdateAgent(ctx, "c", func(*registry.Agent) (*registry.Agent, error) { return counter("c", 0), nil }))
	const perClient, each = 4, 15
	var calls atomic.Int64
	var wg sync.WaitGroup
	for _, s := range rs {
		for range perClient {
			wg.Go(func() {
				for range each {
					assert.NoError(t, s.UpdateAgent(ctx, "c", func(cur *registry.Agent) (*registry.Agent, error) {
						calls.Add(1)
						runtime.Gosched()
						return increment(cur)
					}))
				}
			})
		}
	}
	wg.Wait()
	got, err := rs[1].GetAgent(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, len(rs)*perClient*each, counterOf(t, got))
	t.Logf("%d updates took %d calls of fn (the rest were conflicts)", len(rs)*perClient*each, calls.Load())
}

// leaseOfKey returns the lease of key (0 for none) and its remaining TTL
// (-1 when the lease is gone).
func leaseOfKey(t *testing.T, cli *clientv3.Client, key string) (clientv3.LeaseID, int64) {
	t.Helper()
	resp, err := cli.Get(t.Context(), key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "key %s", key)
	id := clientv3.LeaseID(resp.Kvs[0].Lease)
	if id == 0 {
		return 0, 0
	}
	ttl, err := cli.TimeToLive(t.Context(), id)
	require.NoError(t, err)
	return id, ttl.TTL
}

// TestAgentLeases: an agent with a TTL carries a lease of its removal
// horizon (4 × TTL) and one without has none; a write that keeps the TTL
// keeps the lease, a heartbeat renews it, a TTL change moves the agent to
// a new lease (revoking the old one), clearing the TTL detaches it.
func TestAgentLeases(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	cli := rawClient(t)
	ctx := t.Context()
	prefix := agentPrefix(t, s, cli)
	put := func(a registry.Agent) {
		t.Helper()
		require.NoError(t, s.UpdateAgent(ctx, a.Name, func(*registry.Agent) (*registry.Agent, error) { return &a, nil }))
	}
	a := *counter("ttl", 0)
	a.TTLSeconds = 30
	a.LastSeen = time.Now()
	put(a)
	first, ttl := leaseOfKey(t, cli, prefix+"ttl")
	require.NotZero(t, first, "an agent with a TTL has a lease")
	assert.InDelta(t, 120, ttl, 2, "the lease is the removal horizon, 4 × TTL")

	put(*counter("plain", 0))
	id, _ := leaseOfKey(t, cli, prefix+"plain")
	assert.Zero(t, id, "an agent without a TTL has no lease")

	a.Description = "changed, same LastSeen"
	put(a)
	id, _ = leaseOfKey(t, cli, prefix+"ttl")
	assert.Equal(t, first, id, "a write that keeps the TTL keeps the lease")

	a.LastSeen = a.LastSeen.Add(time.Second) // a heartbeat
	put(a)
	id, _ = leaseOfKey(t, cli, prefix+"ttl")
	assert.Equal(t, first, id, "a heartbeat renews the lease in place")

	a.TTLSeconds = 10
	put(a)
	second, ttl := leaseOfKey(t, cli, prefix+"ttl")
	assert.NotEqual(t, first, second, "a TTL change moves the agent to a new lease")
	assert.InDelta(t, 40, ttl, 2)
	old, err := cli.TimeToLive(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), old.TTL, "the old lease is revoked")

	a.TTLSeconds = 0
	put(a)
	id, _ = leaseOfKey(t, cli, prefix+"ttl")
	assert.Zero(t, id, "clearing the TTL detaches the lease")
}

// agentPrefix returns the key prefix of s's agents, found by writing one.
func agentPrefix(t *testing.T, s *etcdstore.Store, cli *clientv3.Client) string {
	t.Helper()
	const probe = "prefix-probe"
	require.NoError(t, s.UpdateAgent(t.Context(), probe, func(*registry.Agent) (*registry.Agent, error) { return counter(probe, 0), nil }))
	resp, err := cli.Get(t.Context(), "/test/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); strings.HasSuffix(k, "/agents/"+probe) && strings.Contains(k, t.Name()) {
			require.NoError(t, s.UpdateAgent(t.Context(), probe, func(*registry.Agent) (*registry.Agent, error) { return nil, nil }))
			return strings.TrimSuffix(k, probe)
		}
	}
	t.Fatal("the probe agent's key was not found")
	return ""
}

// TestLeaseExpiryRemovesAgents: an agent no one heartbeats vanishes when
// its lease expires, while one that is heartbeated stays, and one whose
// TTL was cleared stays for good. Leases are shortened to one second.
func TestLeaseExpiryRemovesAgents(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	etcdstore.SetAgentLease(s, func(int) int64 { return 1 })
	ctx := t.Context()
	for _, name := range []string{"silent", "beating", "detached"} {
		a := counter(name, 0)
		a.TTLSeconds, a.LastSeen = 5, time.Now()
		require.NoError(t, s.UpdateAgent(ctx, name, func(*registry.Agent) (*registry.Agent, error) { return a, nil }))
	}
	require.NoError(t, s.UpdateAgent(ctx, "detached", func(cur *registry.Agent) (*registry.Agent, error) {
		next := cur.Clone()
		next.TTLSeconds = 0
		return &next, nil
	}))
	heartbeat := func() error {
		return s.UpdateAgent(ctx, "beating", func(cur *registry.Agent) (*registry.Agent, error) {
			if cur == nil {
				return nil, errors.New("the heartbeated agent expired")
			}
			next := cur.Clone()
			next.LastSeen = time.Now()
			return &next, nil
		})
	}
	missing := func(name string) bool {
		_, err := s.GetAgent(ctx, name)
		return errors.Is(err, registry.ErrNotFound)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !missing("silent") {
		require.True(t, time.Now().Before(deadline), "the silent agent's lease did not expire")
		require.NoError(t, heartbeat())
		time.Sleep(200 * time.Millisecond)
	}
	for range 8 { // two more lease periods
		require.NoError(t, heartbeat())
		time.Sleep(200 * time.Millisecond)
	}
	assert.False(t, missing("beating"), "heartbeats renew the lease")
	assert.Eventually(t, func() bool { return missing("beating") }, 10*time.Second, 100*time.Millisecond,
		"without heartbeats the lease expires")
	assert.False(t, missing("detached"), "an agent without a TTL has no lease to expire")
}

// report is what a watch reported, in a comparable form.
type report struct {
	reset   bool
	changes []string // "name@rev" for puts, "-name@rev" for deletes
}

func (r report) String() string { return fmt.Sprintf("reset=%v %v", r.reset, r.changes) }

// watch runs s.WatchAgents until the test ends, sending each report on
// the returned channel.
func watch(t *testing.T, s *etcdstore.Store) <-chan report {
	t.Helper()
	ch := make(chan report, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.WatchAgents(ctx, func(b registry.AgentChanges) {
			r := report{reset: b.Reset}
			for _, c := range b.Changes {
				if c.Agent == nil {
					r.changes = append(r.changes, fmt.Sprintf("-%s@%d", c.Name, c.Revision))
				} else {
					r.changes = append(r.changes, fmt.Sprintf("%s@%d", c.Name, c.Revision))
				}
			}
			ch <- r
		})
	}()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled, "WatchAgents returns ctx's error")
	})
	return ch
}

// next returns the next report, failing the test after 5 s.
func next(t *testing.T, ch <-chan report) report {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no watch report within 5s")
		return report{}
	}
}

// TestWatchAgents: a watch reports a snapshot, then every change another
// client commits, with the revisions UpdateAgentRevision returned; a
// lease expiry is reported as a deletion.
func TestWatchAgents(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, nil)
	writer, watcher := rs[0], rs[1]
	etcdstore.SetAgentLease(writer, func(int) int64 { return 1 })
	ctx := t.Context()
	set := func(name string, a *registry.Agent) int64 {
		t.Helper()
		rev, err := writer.UpdateAgentRevision(ctx, name, func(*registry.Agent) (*registry.Agent, error) { return a, nil })
		require.NoError(t, err)
		return rev
	}
	r0 := set("before", counter("before", 0))
	ch := watch(t, watcher)
	snap := next(t, ch)
	assert.Equal(t, report{reset: true, changes: []string{fmt.Sprintf("before@%d", r0)}}, snap)

	r1 := set("a", counter("a", 1))
	assert.Equal(t, report{changes: []string{fmt.Sprintf("a@%d", r1)}}, next(t, ch))
	r2 := set("a", counter("a", 2))
	assert.Equal(t, report{changes: []string{fmt.Sprintf("a@%d", r2)}}, next(t, ch))
	r3 := set("a", nil)
	assert.Equal(t, report{changes: []string{fmt.Sprintf("-a@%d", r3)}}, next(t, ch))
	rev, err := writer.UpdateAgentRevision(ctx, "a", func(*registry.Agent) (*registry.Agent, error) { return nil, nil })
	require.NoError(t, err)
	assert.Zero(t, rev, "deleting a missing agent writes nothing")

	mortal := counter("mortal", 0)
	mortal.TTLSeconds = 5
	r4 := set("mortal", mortal)
	assert.Equal(t, report{changes: []string{fmt.Sprintf("mortal@%d", r4)}}, next(t, ch))
	expiry := next(t, ch)
	require.Len(t, expiry.changes, 1, "%s", expiry)
	assert.True(t, strings.HasPrefix(expiry.changes[0], "-mortal@"), "a lease expiry is a deletion: %s", expiry)
}

// TestWatchAgentsEndsOnClose: closing the store ends a watch at once,
// with ErrClosed.
func TestWatchAgentsEndsOnClose(t *testing.T) {
	t.Parallel()
	s, err := etcdstore.Open(t.Context(), &etcdstore.Options{Endpoints: server.Endpoints, Prefix: etcdtest.Prefix(t)})
	require.NoError(t, err)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		done <- s.WatchAgents(context.Background(), func(registry.AgentChanges) { once.Do(func() { close(started) }) })
	}()
	<-started
	require.NoError(t, s.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, etcdstore.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("WatchAgents still running after Close")
	}
	err = s.WatchAgents(t.Context(), func(registry.AgentChanges) {})
	assert.ErrorIs(t, err, etcdstore.ErrClosed)
}

// TestKeyLayout: every key lives under the prefix, one JSON value per
// record, in the layout doc.go documents; another prefix sees nothing.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	prefix := etcdtest.Prefix(t)
	s := open(t, &etcdstore.Options{Prefix: strings.TrimSuffix(prefix, "/")}) // a "/" is appended
	other := open(t, nil)
	cli := rawClient(t)
	ctx := t.Context()
	require.NoError(t, s.UpdateAgent(ctx, "finance", func(*registry.Agent) (*registry.Agent, error) { return counter("finance", 0), nil }))
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	finished := created.Add(time.Second)
	require.NoError(t, s.PutDelegations(ctx, []delegation.Record{{
		ID: "d1", TargetAgent: "finance", Task: "t", Status: delegation.StatusCompleted,
		CreatedAt: created, UpdatedAt: finished, FinishedAt: &finished,
	}}))
	require.NoError(t, s.SaveBreaker(ctx, "finance", breakerSnapshot()))
	sess := session.Session{ID: "s1", UserID: "alice", Status: session.StatusActive, CreatedAt: created, UpdatedAt: created, ExpiresAt: created.Add(time.Hour)}
	require.NoError(t, s.UpdateActiveSession(ctx, "alice", func(*session.Session) (*session.Session, *session.Session, error) { return nil, &sess, nil }))

	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	var keys []string
	for _, kv := range resp.Kvs {
		k := strings.TrimPrefix(string(kv.Key), prefix)
		// Index keys end in order keys; keep their shape only.
		if i := strings.LastIndex(k, "/"); strings.HasPrefix(k, "delegations/by_") || strings.HasPrefix(k, "sessions/by_expiry/") {
			k = k[:i+1] + "…"
		}
		keys = append(keys, k)
	}
	assert.Equal(t, []string{
		"agents/finance",
		"breakers/finance",
		"delegations/by_created/…",
		"delegations/by_finished/…",
		"delegations/by_status/completed/…",
		"delegations/records/d1",
		"meta/schema_version",
		"sessions/by_expiry/…",
		"sessions/by_user/alice",
		"sessions/records/s1",
	}, keys)

	list, err := other.ListAgents(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "a store over another prefix sees nothing of this one")
}

// TestSchemaVersion: Open refuses a prefix written by a newer store, or
// holding something else under the schema version key.
func TestSchemaVersion(t *testing.T) {
	t.Parallel()
	cli := rawClient(t)
	for _, c := range []struct {
		value string
		want  error
	}{{"99", etcdstore.ErrSchemaTooNew}, {"not a number", etcdstore.ErrCorrupt}} {
		prefix := etcdtest.Prefix(t)
		_, err := cli.Put(t.Context(), prefix+"meta/schema_version", c.value)
		require.NoError(t, err)
		_, err = etcdstore.Open(t.Context(), &etcdstore.Options{Endpoints: server.Endpoints, Prefix: prefix})
		assert.ErrorIs(t, err, c.want, "schema version %q", c.value)
	}
	prefix := etcdtest.Prefix(t)
	open(t, &etcdstore.Options{Prefix: prefix})
	resp, err := cli.Get(t.Context(), prefix+"meta/schema_version")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, strconv.Itoa(etcdstore.SchemaVersion), string(resp.Kvs[0].Value), "a new store records its schema version")
}

// TestUnreachable: Open against an address where nothing listens, and a
// call to a cluster that went away, fail with ErrUnavailable within their
// timeouts instead of hanging; a caller's shorter deadline wins.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := etcdstore.Open(t.Context(), &etcdstore.Options{
		Endpoints:   []string{"127.0.0.1:1"},
		DialTimeout: 300 * time.Millisecond,
	})
	require.ErrorIs(t, err, etcdstore.ErrUnavailable)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, err.Error(), "127.0.0.1:1", "the error names the endpoints")

	gone, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	s, err := etcdstore.Open(t.Context(), &etcdstore.Options{Endpoints: gone.Endpoints, RequestTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	gone.Close()

	start = time.Now()
	_, err = s.GetAgent(t.Context(), "finance")
	require.ErrorIs(t, err, etcdstore.ErrUnavailable)
	assert.Less(t, time.Since(start), 5*time.Second)
	start = time.Now()
	err = s.UpdateAgent(t.Context(), "finance", func(*registry.Agent) (*registry.Agent, error) { return counter("finance", 0), nil })
	require.ErrorIs(t, err, etcdstore.ErrUnavailable)
	assert.Less(t, time.Since(start), 5*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = s.ListAgents(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline, not the store's")
	assert.NotErrorIs(t, err, etcdstore.ErrUnavailable)
}

// TestOpenNeedsEndpoints: Open without endpoints is an error, not a hang.
func TestOpenNeedsEndpoints(t *testing.T) {
	t.Parallel()
	_, err := etcdstore.Open(t.Context(), nil)
	require.Error(t, err)
	_, err = etcdstore.Open(t.Context(), &etcdstore.Options{})
	require.Error(t, err)
}

// TestZeroStoreIsInert: the zero Store fails every call with ErrClosed.
func TestZeroStoreIsInert(t *testing.T) {
	t.Parallel()
	var s etcdstore.Store
	_, err := s.GetAgent(t.Context(), "a")
	assert.ErrorIs(t, err, etcdstore.ErrClosed)
	_, err = s.ListDelegations(t.Context(), delegation.ListFilter{})
	assert.ErrorIs(t, err, etcdstore.ErrClosed)
	assert.NoError(t, s.Close())
}
