package etcdstore_test

// Tests of the delegation owners (delegation.OwnerStore): the liveness key
// and lease of HoldOwner, the reports of WatchOrphans, and the rule that
// a record with an owner never replaces a final one.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/store/etcdstore"
)

// ownerTTL is the owner lease of these tests: the shortest etcd grants.
const ownerTTL = time.Second

// holding runs s.HoldOwner(ctx, owner) on a goroutine, waits until it
// holds the owner, and returns a channel that gets its error.
func holding(t *testing.T, ctx context.Context, s *etcdstore.Store, owner string) <-chan error {
	t.Helper()
	held := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.HoldOwner(ctx, owner, func() { close(held) }) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("HoldOwner(%q) failed: %v", owner, err)
	case <-time.After(waitFor):
		t.Fatalf("HoldOwner(%q) did not hold the owner within the wait", owner)
	}
	return done
}

// ended waits for the error of a HoldOwner call started by holding.
func ended(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("HoldOwner did not return within %s", within)
		return nil
	}
}

// storePrefix returns the key prefix of s.
func storePrefix(t *testing.T, s *etcdstore.Store, cli *clientv3.Client) string {
	t.Helper()
	return strings.TrimSuffix(agentPrefix(t, s, cli), "agents/")
}

// exists reports whether key is in etcd.
func exists(t *testing.T, cli *clientv3.Client, key string) bool {
	t.Helper()
	resp, err := cli.Get(t.Context(), key, clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count > 0
}

// TestHoldOwner: the owner's key lives on a lease of OwnerTTL while
// HoldOwner runs; a second holder of the same id is refused; ending ctx
// revokes the lease at once; a lease that ends under it (revoked here, as
// etcd expires one that no keep-alive renewed) ends the call with
// ErrOwnerLost; closing the store leaves the lease to expire by itself.
func TestHoldOwner(t *testing.T) {
	t.Parallel()
	s := open(t, &etcdstore.Options{OwnerTTL: ownerTTL})
	cli := rawClient(t)

	prefix := storePrefix(t, s, cli)
	ctx, cancel := context.WithCancel(t.Context())
	done := holding(t, ctx, s, "o1")
	key := prefix + "delegations/owners/o1"
	lease, ttl := leaseOfKey(t, cli, key)
	require.NotZero(t, lease, "the owner key is on a lease")
	assert.LessOrEqual(t, ttl, int64(1))
	time.Sleep(3 * ownerTTL)
	assert.True(t, exists(t, cli, key), "keep-alives renew the lease past its TTL")

	err := s.HoldOwner(t.Context(), "o1", func() { t.Error("a second holder of o1 was told it holds it") })
	assert.ErrorContains(t, err, "already held")

	cancel()
	assert.ErrorIs(t, ended(t, done, waitFor), context.Canceled)
	assert.False(t, exists(t, cli, key), "ending the hold revokes the lease: the owner is dead at once")

	done = holding(t, t.Context(), s, "o2")
	lease, _ = leaseOfKey(t, cli, prefix+"delegations/owners/o2")
	_, err = cli.Revoke(t.Context(), lease)
	require.NoError(t, err)
	assert.ErrorIs(t, ended(t, done, waitFor), etcdstore.ErrOwnerLost)

	crashed := open(t, &etcdstore.Options{OwnerTTL: ownerTTL, Prefix: prefix})
	done = holding(t, t.Context(), crashed, "o3")
	key = prefix + "delegations/owners/o3"
	require.NoError(t, crashed.Close())
	assert.ErrorIs(t, ended(t, done, waitFor), etcdstore.ErrClosed)
	assert.True(t, exists(t, cli, key), "a closed store does not revoke: the lease lapses as if the process died")
	assert.Eventually(t, func() bool { return !exists(t, cli, key) }, waitFor, 50*time.Millisecond,
		"etcd expires the lease of a closed store")

	assert.Error(t, s.HoldOwner(t.Context(), "", func() { t.Error("held an empty owner") }))
}

// orphanLog collects the reports of a WatchOrphans call.
type orphanLog struct {
	mu    sync.Mutex
	ids   map[string]string // record id → owner reported
	n     map[string]int    // record id → times reported
	calls []int             // the number of ids of each call
}

func (l *orphanLog) report(owner string, ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, len(ids))
	for _, id := range ids {
		l.ids[id] = owner
		l.n[id]++
	}
}

func (l *orphanLog) reported(id string) (owner string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	owner, ok = l.ids[id]
	return owner, ok
}

// watchOrphans runs s.WatchOrphans until the test ends and returns what it
// reports.
func watchOrphans(t *testing.T, s *etcdstore.Store) *orphanLog {
	t.Helper()
	l := &orphanLog{ids: map[string]string{}, n: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.WatchOrphans(ctx, l.report) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
	return l
}

// running returns a running record of owner ("" for none).
func running(id, owner string) delegation.Record {
	now := time.Now()
	return delegation.Record{ID: id, TargetAgent: "finance", Task: "t " + id, Status: delegation.StatusRunning, CreatedAt: now, UpdatedAt: now, Owner: owner}
}

// interrupt finalizes a record the way a delegation client does.
func interrupt(t *testing.T, s *etcdstore.Store, id string) {
	t.Helper()
	require.NoError(t, s.UpdateDelegation(t.Context(), id, func(cur *delegation.Record) (*delegation.Record, error) {
		next := *cur
		now := time.Now()
		next.Status, next.Code, next.FinishedAt, next.UpdatedAt = delegation.StatusFailed, delegation.CodeInterrupted, &now, now
		return &next, nil
	}))
}

// TestWatchOrphans: a watcher reports, at start, the running records of
// owners that are not alive; then the running records of an owner whose
// store closed (a crash: the lease expires), and those of an owner whose
// hold ended cleanly; by its periodic check, a record written under a dead
// owner after its death. It never reports records of live owners,
// records without an owner, or final records.
func TestWatchOrphans(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 3, &etcdstore.Options{OwnerTTL: ownerTTL})
	a, crashed, b := rs[0], rs[1], rs[2]
	etcdstore.SetOrphanCheck(b, 200*time.Millisecond)
	ctx := t.Context()

	holding(t, ctx, a, "alive")
	holding(t, ctx, crashed, "crashed")
	cleanCtx, endClean := context.WithCancel(ctx)
	clean := holding(t, cleanCtx, a, "clean")
	done := running("done", "dead")
	putRecords(t, a,
		running("of-alive", "alive"),
		running("of-dead", "dead"), // never held: found missing at start
		running("of-dead-2", "dead"),
		running("no-owner", ""),
		done,
		running("of-crashed", "crashed"),
		running("of-clean", "clean"),
	)
	interrupt(t, a, "done")

	l := watchOrphans(t, b)
	for _, id := range []string{"of-dead", "of-dead-2"} {
		require.Eventually(t, func() bool { _, ok := l.reported(id); return ok }, waitFor, 10*time.Millisecond, "%s found at start", id)
		owner, _ := l.reported(id)
		assert.Equal(t, "dead", owner)
	}
	interrupt(t, b, "of-dead")
	interrupt(t, b, "of-dead-2")

	start := time.Now()
	require.NoError(t, crashed.Close())
	require.Eventually(t, func() bool { _, ok := l.reported("of-crashed"); return ok }, ownerTTL+waitFor, 10*time.Millisecond,
		"the records of a crashed owner are reported once its lease expires")
	t.Logf("crashed owner reported %s after its store closed (TTL %s)", time.Since(start).Round(time.Millisecond), ownerTTL)

	endClean()
	assert.ErrorIs(t, ended(t, clean, waitFor), context.Canceled)
	require.Eventually(t, func() bool { _, ok := l.reported("of-clean"); return ok }, waitFor, 10*time.Millisecond,
		"a clean end of the hold is a death too (its records should be final by then)")

	// A record written under the dead owner after its death: no deletion
	// event tells of it, the periodic check does.
	putRecords(t, a, running("late", "dead"))
	require.Eventually(t, func() bool { _, ok := l.reported("late"); return ok }, waitFor, 10*time.Millisecond)

	time.Sleep(500 * time.Millisecond) // a few periodic checks more
	for _, id := range []string{"of-alive", "no-owner", "done"} {
		_, ok := l.reported(id)
		assert.False(t, ok, "%s must not be reported", id)
	}
	l.mu.Lock()
	assert.Equal(t, 1, l.n["of-dead"], "an interrupted record leaves the index: not reported again")
	l.mu.Unlock()
}

// TestWatchOrphansChunks: WatchOrphans reports at most 500 ids a call.
func TestWatchOrphansChunks(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	recs := make([]delegation.Record, 501)
	for i := range recs {
		recs[i] = running(fmt.Sprintf("r%03d", i), "dead")
	}
	putRecords(t, s, recs...)
	l := watchOrphans(t, s)
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.n) == len(recs)
	}, waitFor, 10*time.Millisecond, "every record of the dead owner is reported")
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, []int{500, 1}, l.calls)
}

// TestWatchOrphansEndsOnClose: closing the store ends a watch with
// ErrClosed.
func TestWatchOrphansEndsOnClose(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	done := make(chan error, 1)
	go func() { done <- s.WatchOrphans(context.Background(), func(string, []string) {}) }()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, s.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, etcdstore.ErrClosed)
	case <-time.After(waitFor):
		t.Fatal("WatchOrphans did not end when the store closed")
	}
}

// TestOwnedRecordNeverReplacesFinal: PutDelegations of a record with an
// owner leaves a stored final record as it is (a replica declared dead
// writing its delegation's end, or its running record once more), in a
// batch with records it does write; the owner index follows the stored
// record. A record without an owner still replaces a final one.
func TestOwnedRecordNeverReplacesFinal(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	cli := rawClient(t)
	ctx := t.Context()
	putRecords(t, s, running("d1", "a"))
	interrupt(t, s, "d1")

	late := running("d1", "a")
	now := time.Now()
	late.Status, late.Result, late.FinishedAt = delegation.StatusCompleted, []byte(`"late"`), &now
	putRecords(t, s, late, running("d2", "a"))
	putRecords(t, s, running("d1", "a"))
	got, err := s.GetDelegation(ctx, "d1")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusFailed, got.Status, "final is final")
	assert.Equal(t, delegation.CodeInterrupted, got.Code)
	assert.Empty(t, got.Result)
	got, err = s.GetDelegation(ctx, "d2")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusRunning, got.Status, "the rest of the batch is written")

	recs, err := s.ListDelegations(ctx, delegation.ListFilter{Status: delegation.StatusRunning})
	require.NoError(t, err)
	assert.Equal(t, []string{"d2"}, ids(recs))
	prefix := storePrefix(t, s, cli)
	resp, err := cli.Get(ctx, prefix+"delegations/by_owner/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, prefix+"delegations/by_owner/a/d2", string(resp.Kvs[0].Key))

	anon := running("d1", "")
	putRecords(t, s, anon)
	got, err = s.GetDelegation(ctx, "d1")
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusRunning, got.Status, "a record without an owner replaces any (the delegation.Store contract)")
}

func ids(recs []delegation.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	slices.Sort(out)
	return out
}

// putRecords stores recs in one call, failing the test on error.
func putRecords(t *testing.T, s *etcdstore.Store, recs ...delegation.Record) {
	t.Helper()
	require.NoError(t, s.PutDelegations(t.Context(), recs))
}
