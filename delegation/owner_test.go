package delegation_test

// Tests of a client over an OwnerStore, against a fake one over memstore
// whose owner lives and dies when the test says (the etcd store's own
// tests run the real thing across replicas).

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// ownerStore is a delegation.OwnerStore over memstore: HoldOwner holds
// until the test kills the owner (or ctx ends), WatchOrphans reports what
// the test sends. PutDelegations keeps the OwnerStore rule (a record with
// an owner never replaces a final one).
type ownerStore struct {
	*memstore.Store
	holdErr error         // HoldOwner fails at once with it, if set
	held    chan string   // each owner held
	kill    chan struct{} // ends the life of the owner held
	orphans chan orphans
	mu      sync.Mutex
	events  []string // "put <status>" for each record written, "owner ended"
}

type orphans struct {
	owner string
	ids   []string
	done  chan struct{}
}

var _ delegation.OwnerStore = (*ownerStore)(nil)

func newOwnerStore() *ownerStore {
	return &ownerStore{Store: memstore.New(), held: make(chan string, 8), kill: make(chan struct{}), orphans: make(chan orphans)}
}

func (s *ownerStore) HoldOwner(ctx context.Context, owner string, held func()) error {
	if s.holdErr != nil {
		return s.holdErr
	}
	held()
	s.held <- owner
	select {
	case <-ctx.Done():
		s.mu.Lock()
		s.events = append(s.events, "owner ended")
		s.mu.Unlock()
		return ctx.Err()
	case <-s.kill:
		return errors.New("owner lost")
	}
}

func (s *ownerStore) WatchOrphans(ctx context.Context, fn func(owner string, ids []string)) error {
	for {
		select {
		case o := <-s.orphans:
			fn(o.owner, o.ids)
			close(o.done)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *ownerStore) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	s.mu.Lock() // one writer at a time: the read and the write below act as one
	defer s.mu.Unlock()
	var keep []delegation.Record
	for _, r := range recs {
		cur, err := s.GetDelegation(ctx, r.ID)
		if r.Owner != "" && err == nil && cur.Status.Final() {
			continue
		}
		keep = append(keep, r)
		s.events = append(s.events, "put "+string(r.Status))
	}
	return s.Store.PutDelegations(ctx, keep)
}

// report makes the store's watch report ids of owner and waits until the
// client handled them.
func (s *ownerStore) report(t *testing.T, owner string, ids ...string) {
	t.Helper()
	o := orphans{owner: owner, ids: ids, done: make(chan struct{})}
	select {
	case s.orphans <- o:
	case <-time.After(5 * time.Second):
		t.Fatal("the client does not watch for orphans")
	}
	<-o.done
}

// nextOwner returns the next owner the client holds.
func (s *ownerStore) nextOwner(t *testing.T) string {
	t.Helper()
	select {
	case o := <-s.held:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("the client held no owner")
		return ""
	}
}

// ownerClient is a client over s with one http agent "slow", which
// answers once release is closed (or its request ends), and an OnRecord
// log.
type ownerClient struct {
	c       *delegation.Client
	started chan string
	release chan struct{}
	free    func() // closes release, once
	log     recordLog
}

func newOwnerClient(t *testing.T, s *ownerStore) (*ownerClient, error) {
	t.Helper()
	oc := &ownerClient{started: make(chan string, 4), release: make(chan struct{})}
	oc.free = sync.OnceFunc(func() { close(oc.release) })
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		oc.started <- r.Header.Get("X-Mesh-Delegation-Id")
		select {
		case <-oc.release:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"result":"done"}`))
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(agent.Close)
	reg, err := registryForTest(t)
	require.NoError(t, err)
	_, _, err = reg.Register(t.Context(), registry.Agent{Name: "slow", Description: "slow", Endpoint: agent.URL})
	require.NoError(t, err)
	oc.c, err = delegation.New(t.Context(), reg, s, &delegation.Options{OnRecord: oc.log.hook})
	if err == nil {
		t.Cleanup(func() { _ = oc.c.Close() })
		t.Cleanup(oc.free) // first
	}
	return oc, err
}

// running starts a delegation to "slow" and returns its id, once its
// running record is in the store, and a channel with its outcome.
func (oc *ownerClient) running(t *testing.T, s *ownerStore) (string, <-chan delegation.Record) {
	t.Helper()
	done := make(chan delegation.Record, 1)
	go func() {
		rec, err := oc.c.Delegate(context.Background(), delegation.Request{Target: "slow", Task: "slow task"})
		assert.NoError(t, err)
		done <- rec
	}()
	var id string
	select {
	case id = <-oc.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent got no task")
	}
	require.Eventually(t, func() bool {
		rec, err := s.GetDelegation(t.Context(), id)
		return err == nil && rec.Status == delegation.StatusRunning
	}, 5*time.Second, time.Millisecond)
	return id, done
}

// TestOwnerStoreHoldFailsNew: a client that cannot hold an owner id is
// not made (its records would belong to no one).
func TestOwnerStoreHoldFailsNew(t *testing.T) {
	s := newOwnerStore()
	s.holdErr = errors.New("etcd says no")
	_, err := newOwnerClient(t, s)
	require.ErrorIs(t, err, s.holdErr)
}

// TestOwnerStoreNoRecoveryAtStart: over an OwnerStore, New leaves the
// running records it finds alone (another replica may run them); records
// it creates carry the owner it holds.
func TestOwnerStoreNoRecoveryAtStart(t *testing.T) {
	s := newOwnerStore()
	now := time.Now()
	other := delegation.Record{ID: "other", TargetAgent: "slow", Task: "t", Status: delegation.StatusRunning, CreatedAt: now, UpdatedAt: now, Owner: "someone-else"}
	require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{other}))
	oc, err := newOwnerClient(t, s)
	require.NoError(t, err)
	owner := s.nextOwner(t)
	rec, err := s.GetDelegation(t.Context(), "other")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusRunning, rec.Status)

	id, _ := oc.running(t, s)
	rec, err = s.GetDelegation(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, owner, rec.Owner)
}

// TestOwnerStoreInterruptsOrphans: a reported record of a dead owner
// becomes failed/interrupted, once however often it is reported, and
// OnRecord sees it once; one of another owner, or no longer running, is
// left alone.
func TestOwnerStoreInterruptsOrphans(t *testing.T) {
	s := newOwnerStore()
	now := time.Now()
	rec := func(id, owner string, st delegation.Status) delegation.Record {
		return delegation.Record{ID: id, TargetAgent: "slow", Task: "t", Status: st, CreatedAt: now, UpdatedAt: now, Owner: owner}
	}
	require.NoError(t, s.PutDelegations(t.Context(), []delegation.Record{
		rec("orphan", "dead", delegation.StatusRunning),
		rec("moved", "alive", delegation.StatusRunning),
		rec("accepted", "dead", delegation.StatusAccepted),
	}))
	oc, err := newOwnerClient(t, s)
	require.NoError(t, err)
	s.report(t, "dead", "orphan", "moved", "accepted", "missing")
	s.report(t, "dead", "orphan")

	got, err := s.GetDelegation(t.Context(), "orphan")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusFailed, got.Status)
	assert.Equal(t, delegation.CodeInterrupted, got.Code)
	assert.NotNil(t, got.FinishedAt)
	assert.Len(t, oc.log.of("orphan"), 1)
	for _, id := range []string{"moved", "accepted"} {
		got, err := s.GetDelegation(t.Context(), id)
		require.NoError(t, err)
		assert.False(t, got.Status.Final(), id)
		assert.Empty(t, oc.log.of(id), id)
	}
}

// TestOwnerStoreLostOwner: when the store ends the life of the client's
// owner while the client runs a delegation, the client holds a new owner
// for new records; the record of the old one, reported as an orphan, is
// interrupted and the delegation ends here too, interrupted, reported
// once. Its end does not overwrite the stored record.
func TestOwnerStoreLostOwner(t *testing.T) {
	s := newOwnerStore()
	oc, err := newOwnerClient(t, s)
	require.NoError(t, err)
	first := s.nextOwner(t)
	id, done := oc.running(t, s)

	s.kill <- struct{}{} // the owner's lease ends under the client
	second := s.nextOwner(t)
	assert.NotEqual(t, first, second, "a new owner id, never the dead one again")

	s.report(t, first, id)
	ended := <-done
	assert.Equal(t, delegation.StatusFailed, ended.Status, "the delegation ends as the store says")
	assert.Equal(t, delegation.CodeInterrupted, ended.Code)
	assert.Len(t, oc.log.of(id), 1)
	_, err = oc.c.List(t.Context(), delegation.ListFilter{}) // its end is written (and kept out)
	require.NoError(t, err)
	stored, err := s.GetDelegation(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, "the mesh replica running the delegation stopped", stored.Error, "the interruption stays")

	id2, _ := oc.running(t, s)
	rec, err := s.GetDelegation(t.Context(), id2)
	require.NoError(t, err)
	assert.Equal(t, second, rec.Owner)
}

// TestOwnerStoreShutdownEndsOwnerLast: Shutdown ends the owner only after
// the delegation in flight finished and its record is stored.
func TestOwnerStoreShutdownEndsOwnerLast(t *testing.T) {
	s := newOwnerStore()
	oc, err := newOwnerClient(t, s)
	require.NoError(t, err)
	s.nextOwner(t)
	_, done := oc.running(t, s)
	shut := make(chan error, 1)
	go func() { shut <- oc.c.Shutdown(context.Background()) }()
	select {
	case <-shut:
		t.Fatal("Shutdown returned with a delegation in flight")
	case <-time.After(100 * time.Millisecond):
	}
	oc.free()
	require.NoError(t, <-shut)
	assert.Equal(t, delegation.StatusCompleted, (<-done).Status)
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Equal(t, []string{"put running", "put completed", "owner ended"}, s.events)
}
