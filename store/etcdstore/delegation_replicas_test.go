package etcdstore_test

// Tests of delegation clients on several replicas over one prefix: a
// running delegation belongs to the replica running it, and when that
// replica dies the others mark its record failed with code interrupted,
// once; a replica that lives on or restarts leaves the others' running
// delegations alone. The agents are real HTTP servers.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/etcdstore"
)

// slowAgents is an HTTP agent server: /slow signals started with the
// delegation id and answers once released (or when the request ends);
// /fast answers at once.
type slowAgents struct {
	srv     *httptest.Server
	started chan string
	release chan struct{}
	once    sync.Once
}

func newSlowAgents(t *testing.T) *slowAgents {
	t.Helper()
	a := &slowAgents{started: make(chan string, 16), release: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var task struct {
			DelegationID string `json:"delegationId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&task); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/slow" {
			a.started <- task.DelegationID
			select {
			case <-a.release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"result":"done"}`))
	}))
	t.Cleanup(a.srv.Close)
	t.Cleanup(a.free) // first: no request holds the server's Close
	return a
}

// free lets every /slow request answer, now and later.
func (a *slowAgents) free() { a.once.Do(func() { close(a.release) }) }

// next returns the delegation id of the next /slow request.
func (a *slowAgents) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-a.started:
		return id
	case <-time.After(waitFor):
		t.Fatal("the slow agent got no task within the wait")
		return ""
	}
}

// registerAgents registers the agents "slow" and "fast" through a
// registry over s, before the replicas start (their registries load them).
func registerAgents(t *testing.T, s *etcdstore.Store, a *slowAgents) {
	t.Helper()
	reg, err := registry.New(t.Context(), s, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	defer reg.Close()
	for _, name := range []string{"slow", "fast"} {
		_, _, err := reg.Register(t.Context(), registry.Agent{
			Name: name, Description: "A " + name + " agent", Endpoint: a.srv.URL + "/" + name,
		})
		require.NoError(t, err)
	}
}

// ownedReplicas opens n stores over one prefix with the owner TTL of
// these tests, and registers the agents of new slowAgents through the
// first.
func ownedReplicas(t *testing.T, n int) ([]*etcdstore.Store, *slowAgents) {
	t.Helper()
	rs := replicas(t, n, &etcdstore.Options{OwnerTTL: ownerTTL})
	agents := newSlowAgents(t)
	registerAgents(t, rs[0], agents)
	return rs, agents
}

// meshReplica is a replica's registry and delegation client over its own
// store, recording what its client reports through OnRecord.
type meshReplica struct {
	del *delegation.Client

	mu      sync.Mutex
	records []delegation.Record
}

func newMeshReplica(t *testing.T, s *etcdstore.Store, opts *delegation.Options) *meshReplica {
	t.Helper()
	reg, err := registry.New(t.Context(), s, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	r := &meshReplica{}
	var o delegation.Options
	if opts != nil {
		o = *opts
	}
	o.OnRecord = func(rec delegation.Record) {
		r.mu.Lock()
		r.records = append(r.records, rec)
		r.mu.Unlock()
	}
	r.del, err = delegation.New(t.Context(), reg, s, &o)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = r.del.Close()
		_ = reg.Close()
	})
	return r
}

// reported returns what the replica's OnRecord got for id.
func (r *meshReplica) reported(id string) []delegation.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delegation.Record
	for _, rec := range r.records {
		if rec.ID == id {
			out = append(out, rec)
		}
	}
	return out
}

// delegate starts a synchronous delegation to target on a goroutine and
// returns a channel that gets its record.
func (r *meshReplica) delegate(t *testing.T, target string) <-chan delegation.Record {
	t.Helper()
	ch := make(chan delegation.Record, 1)
	go func() {
		rec, err := r.del.Delegate(context.Background(), delegation.Request{Target: target, Task: "a task for " + target})
		assert.NoError(t, err)
		ch <- rec
	}()
	return ch
}

// stored returns record id as the store holds it.
func stored(t *testing.T, s *etcdstore.Store, id string) delegation.Record {
	t.Helper()
	rec, err := s.GetDelegation(t.Context(), id)
	require.NoError(t, err)
	return rec
}

// storedRunning waits until record id is in the store, running, and
// returns it.
func storedRunning(t *testing.T, s *etcdstore.Store, id string) delegation.Record {
	t.Helper()
	var rec delegation.Record
	require.Eventually(t, func() bool {
		var err error
		rec, err = s.GetDelegation(t.Context(), id)
		return err == nil && rec.Status == delegation.StatusRunning
	}, waitFor, 5*time.Millisecond, "delegation %s must be stored running", id)
	require.NotEmpty(t, rec.Owner, "a record over an owner store carries its owner")
	return rec
}

// interruptedWithin waits up to within for record id to be stored failed
// with code interrupted, and returns how long it took.
func interruptedWithin(t *testing.T, s *etcdstore.Store, id string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool {
		rec, err := s.GetDelegation(t.Context(), id)
		return err == nil && rec.Status == delegation.StatusFailed
	}, within, 5*time.Millisecond, "delegation %s must be interrupted", id)
	took := time.Since(start)
	rec := stored(t, s, id)
	assert.Equal(t, delegation.CodeInterrupted, rec.Code)
	assert.NotEmpty(t, rec.Error)
	assert.NotNil(t, rec.FinishedAt)
	return took
}

// TestDelegationsOfADeadReplicaAreInterrupted: replica A crashes (its
// store closes under it: its owner lease is no longer kept alive) during a
// synchronous delegation. Replicas B and C race to interrupt A's record;
// it is failed/interrupted within the owner TTL and a margin, once (one
// OnRecord across B and C). B's own running delegation is left alone and
// completes; A's delegation, ending in A's memory after the crash, does
// not change the record.
func TestDelegationsOfADeadReplicaAreInterrupted(t *testing.T) {
	t.Parallel()
	rs, agents := ownedReplicas(t, 3)
	a, b, c := newMeshReplica(t, rs[0], nil), newMeshReplica(t, rs[1], nil), newMeshReplica(t, rs[2], nil)

	bDone := b.delegate(t, "slow")
	bID := agents.next(t)
	aDone := a.delegate(t, "slow")
	aID := agents.next(t)
	aRec, bRec := storedRunning(t, rs[2], aID), storedRunning(t, rs[2], bID)
	require.NotEqual(t, aRec.Owner, bRec.Owner, "each replica has an owner of its own")

	require.NoError(t, rs[0].Close()) // A crashes
	took := interruptedWithin(t, rs[2], aID, ownerTTL+waitFor)
	t.Logf("A's record interrupted %s after A's crash (owner TTL %s)", took.Round(time.Millisecond), ownerTTL)

	time.Sleep(500 * time.Millisecond) // any late racer has had its go
	ends := append(b.reported(aID), c.reported(aID)...)
	require.Len(t, ends, 1, "one replica interrupts the record, once")
	assert.Equal(t, delegation.StatusFailed, ends[0].Status)
	assert.Equal(t, delegation.CodeInterrupted, ends[0].Code)
	assert.Equal(t, delegation.StatusRunning, stored(t, rs[2], bID).Status, "B's delegation is B's: left alone")

	agents.free()
	assert.Equal(t, delegation.StatusCompleted, (<-bDone).Status)
	<-aDone // ends in A's memory; A cannot write any more
	require.Eventually(t, func() bool { return stored(t, rs[2], bID).Status == delegation.StatusCompleted }, waitFor, 5*time.Millisecond)
	assert.Equal(t, delegation.StatusFailed, stored(t, rs[2], aID).Status)
	assert.Empty(t, c.reported(bID), "C reports no change to B's record")
}

// TestLateWriteOfADeadOwnerCannotReviveItsRecord: replica A's owner lease
// ends while A lives on (revoked here, as etcd expires the lease of a
// replica cut off for a TTL). B interrupts A's running record. A's
// delegation then completes and A writes its completed record: the store
// keeps the interrupted one. A holds a new owner id for its next
// delegations. A runs with SkipRecovery, so that it does not interrupt
// (and end) its own delegation first and its late write is the completed
// record.
func TestLateWriteOfADeadOwnerCannotReviveItsRecord(t *testing.T) {
	t.Parallel()
	rs, agents := ownedReplicas(t, 2)
	cli := rawClient(t)
	a := newMeshReplica(t, rs[0], &delegation.Options{SkipRecovery: true})
	b := newMeshReplica(t, rs[1], nil)

	aDone := a.delegate(t, "slow")
	id := agents.next(t)
	owner := storedRunning(t, rs[1], id).Owner
	lease, _ := leaseOfKey(t, cli, storePrefix(t, rs[0], cli)+"delegations/owners/"+owner)
	_, err := cli.Revoke(t.Context(), lease)
	require.NoError(t, err)
	interruptedWithin(t, rs[1], id, waitFor)

	agents.free()
	assert.Equal(t, delegation.StatusCompleted, (<-aDone).Status, "A's caller got the agent's answer")
	_, err = a.del.List(t.Context(), delegation.ListFilter{}) // waits for A's group commit
	require.NoError(t, err)
	rec := stored(t, rs[1], id)
	assert.Equal(t, delegation.StatusFailed, rec.Status, "A's late write cannot revive the record")
	assert.Empty(t, rec.Result)
	require.Eventually(t, func() bool {
		rec, err := a.del.Get(t.Context(), id)
		return err == nil && rec.Status == delegation.StatusFailed
	}, waitFor, 5*time.Millisecond, "A's own view follows the store once its write is done")
	assert.Len(t, b.reported(id), 1)

	require.Eventually(t, func() bool {
		rec := <-a.delegate(t, "fast")
		return rec.Owner != "" && rec.Owner != owner
	}, waitFor, 50*time.Millisecond, "A holds a new owner id for its new delegations")
}

// TestCleanShutdownReleasesTheOwner: a replica that shuts down keeps its
// owner alive while it drains its delegations, writes their records, and
// only then ends its owner (at once, not after the TTL): the other replica
// has nothing to interrupt. A shutdown that gives up draining interrupts
// the delegations itself.
func TestCleanShutdownReleasesTheOwner(t *testing.T) {
	t.Parallel()
	rs, agents := ownedReplicas(t, 2)
	cli := rawClient(t)
	prefix := storePrefix(t, rs[0], cli)
	a := newMeshReplica(t, rs[0], nil)
	b := newMeshReplica(t, rs[1], nil)

	aDone := a.delegate(t, "slow")
	id := agents.next(t)
	owner := storedRunning(t, rs[1], id).Owner
	shut := make(chan error, 1)
	go func() { shut <- a.del.Shutdown(context.Background()) }()
	time.Sleep(3 * ownerTTL)
	assert.True(t, exists(t, cli, prefix+"delegations/owners/"+owner), "the owner lives while its delegations drain")
	assert.Equal(t, delegation.StatusRunning, stored(t, rs[1], id).Status)
	agents.free()
	assert.Equal(t, delegation.StatusCompleted, (<-aDone).Status)
	require.NoError(t, <-shut)
	assert.False(t, exists(t, cli, prefix+"delegations/owners/"+owner), "Shutdown ends the owner at once")
	assert.Equal(t, delegation.StatusCompleted, stored(t, rs[1], id).Status, "written before the owner ended")

	// Giving up: the delegation is cancelled and its record interrupted
	// by the replica itself.
	agents2 := newSlowAgents(t)
	registerAgents(t, rs[0], agents2)
	a2 := newMeshReplica(t, rs[0], nil)
	a2Done := a2.delegate(t, "slow")
	id2 := agents2.next(t)
	owner2 := storedRunning(t, rs[1], id2).Owner
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, a2.del.Shutdown(ctx), context.Canceled)
	rec := <-a2Done
	assert.Equal(t, delegation.CodeInterrupted, rec.Code)
	assert.Equal(t, delegation.CodeInterrupted, stored(t, rs[1], id2).Code)
	assert.False(t, exists(t, cli, prefix+"delegations/owners/"+owner2))
	assert.Len(t, a2.reported(id2), 1)

	time.Sleep(500 * time.Millisecond)
	assert.Empty(t, b.reported(id), "B had nothing to interrupt")
	assert.Empty(t, b.reported(id2))
}

// TestRestartingReplicaLeavesOthersAlone: a replica that starts while
// another runs a delegation does not interrupt it (what a single-process
// store's recovery at start would do), however long it runs.
func TestRestartingReplicaLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	rs, agents := ownedReplicas(t, 2)
	a := newMeshReplica(t, rs[0], nil)
	aDone := a.delegate(t, "slow")
	id := agents.next(t)
	storedRunning(t, rs[1], id)

	b := newMeshReplica(t, rs[1], nil)
	time.Sleep(3 * ownerTTL)
	assert.Equal(t, delegation.StatusRunning, stored(t, rs[1], id).Status)
	agents.free()
	assert.Equal(t, delegation.StatusCompleted, (<-aDone).Status)
	assert.Empty(t, b.reported(id))
}

// TestReplicaStartingAfterACrashInterrupts: the only replica crashes
// during a delegation; one that starts after its owner died finds the
// record left running and interrupts it at once.
func TestReplicaStartingAfterACrashInterrupts(t *testing.T) {
	t.Parallel()
	rs, agents := ownedReplicas(t, 2)
	cli := rawClient(t)
	prefix := storePrefix(t, rs[1], cli)
	a := newMeshReplica(t, rs[0], nil)
	a.delegate(t, "slow")
	id := agents.next(t)
	owner := storedRunning(t, rs[1], id).Owner
	require.NoError(t, rs[0].Close()) // A crashes
	require.Eventually(t, func() bool { return !exists(t, cli, prefix+"delegations/owners/"+owner) }, ownerTTL+waitFor, 10*time.Millisecond)
	assert.Equal(t, delegation.StatusRunning, stored(t, rs[1], id).Status, "no replica left to notice")

	b := newMeshReplica(t, rs[1], nil)
	took := interruptedWithin(t, rs[1], id, waitFor)
	t.Logf("interrupted %s after the new replica started", took.Round(time.Millisecond))
	assert.Len(t, b.reported(id), 1)
}
