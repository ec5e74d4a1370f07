package delegation_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
)

// Records (docs/API.md#delegations): a sync delegation's records go through a
// background group commit: the reply does not wait for the store, and the
// final record is durable soon after (the documented bound is 10 ms; the test
// allows for a loaded CI machine on the worst run, and checks the median).
func TestSyncRecordGroupCommit(t *testing.T) {
	s := newMemStore()
	var mu sync.Mutex
	landed := map[string]time.Time{}
	s.onPut = func(recs []delegation.Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if r.Status.Final() {
				landed[r.ID] = time.Now()
			}
		}
	}
	e := newEnvWith(t, config{store: s})
	e.agentServer("a", ok(`{"result":1}`))
	var delays []time.Duration
	for range 30 {
		rec := e.delegate(delegation.Request{Target: "a", Task: "t"})
		replied := time.Now()
		e.stored(rec.ID)
		mu.Lock()
		delays = append(delays, landed[rec.ID].Sub(replied))
		mu.Unlock()
	}
	slices.Sort(delays)
	assert.Less(t, delays[len(delays)/2], 10*time.Millisecond, "median delay to durable %v", delays[len(delays)/2])
	assert.Less(t, delays[len(delays)-1], 250*time.Millisecond)
}

// The store write is not on the critical path: a slow store does not slow
// sync replies, and concurrent delegations share commits.
func TestSyncRecordNotOnCriticalPath(t *testing.T) {
	s := newMemStore()
	s.putDelay = 200 * time.Millisecond
	e := newEnvWith(t, config{store: s})
	e.agentServer("a", ok(`{"result":1}`))
	start := time.Now()
	rec := e.delegate(delegation.Request{Target: "a", Task: "t"})
	assert.Less(t, time.Since(start), 200*time.Millisecond, "the reply waited for the store")
	got, err := e.c.Get(context.Background(), rec.ID)
	require.NoError(t, err, "a record not yet durable is readable from memory")
	assert.Equal(t, delegation.StatusCompleted, got.Status)
	e.stored(rec.ID)

	var wg sync.WaitGroup
	ids := make([]string, 64)
	before := s.puts.Load()
	for i := range ids {
		wg.Go(func() { ids[i] = e.delegate(delegation.Request{Target: "a", Task: "t"}).ID })
	}
	wg.Wait()
	for _, id := range ids {
		e.stored(id)
	}
	puts := s.puts.Load() - before
	assert.Less(t, puts, int64(64), "%d commits for 64 delegations (128 record versions): no batching", puts)
}

// While a sync delegation runs, its running record reaches the store (so
// a crash leaves a record that recovery marks interrupted), and Get reads
// it from memory.
func TestRunningRecordIsWritten(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
	})
	done := make(chan delegation.Record)
	go func() { done <- e.delegate(delegation.Request{Target: "slow", Task: "t"}) }()
	var id string
	require.Eventually(t, func() bool {
		recs, _ := e.store.ListDelegations(context.Background(), delegation.ListFilter{Status: delegation.StatusRunning})
		if len(recs) == 1 {
			id = recs[0].ID
		}
		return id != ""
	}, 5*time.Second, time.Millisecond)
	r, err := e.c.Get(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusRunning, r.Status)
	close(release)
	<-done
	assert.Equal(t, delegation.StatusCompleted, e.stored(id).Status)
}

// Records (docs/API.md#delegations): after a restart, records found running
// become failed with code interrupted; accepted ones keep their deadlines.
func TestRecoveryOnStart(t *testing.T) {
	s := newMemStore()
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	require.NoError(t, s.PutDelegations(context.Background(), []delegation.Record{
		{ID: "run", TargetAgent: "a", Task: "t", Status: delegation.StatusRunning, CreatedAt: now.Add(-time.Hour)},
		{ID: "acc-late", TargetAgent: "a", Task: "t", Status: delegation.StatusAccepted, Async: true, CreatedAt: now, Deadline: &past},
		{ID: "acc-ok", TargetAgent: "a", Task: "t", Status: delegation.StatusAccepted, Async: true, CreatedAt: now, Deadline: &future},
		{ID: "done", TargetAgent: "a", Task: "t", Status: delegation.StatusCompleted, CreatedAt: now, FinishedAt: &now},
	}))
	e := newEnvWith(t, config{store: s})
	r, _ := s.get("run")
	assert.Equal(t, delegation.StatusFailed, r.Status, "recovery runs before New returns")
	assert.Equal(t, delegation.CodeInterrupted, r.Code)
	require.NotNil(t, r.FinishedAt)
	assert.Equal(t, delegation.StatusTimeout, e.stored("acc-late").Status)
	r, _ = s.get("acc-ok")
	assert.Equal(t, delegation.StatusAccepted, r.Status)
	r, _ = s.get("done")
	assert.Equal(t, delegation.StatusCompleted, r.Status)

	// With SkipRecovery (replicas sharing a store) running records stay.
	s2 := newMemStore()
	require.NoError(t, s2.PutDelegations(context.Background(), []delegation.Record{
		{ID: "run", TargetAgent: "a", Task: "t", Status: delegation.StatusRunning, CreatedAt: now}}))
	newEnvWith(t, config{store: s2, opts: &delegation.Options{SkipRecovery: true}})
	r, _ = s2.get("run")
	assert.Equal(t, delegation.StatusRunning, r.Status)
}

// Accepted records created by another replica are found by the rescan and
// timed out too.
func TestRescanFindsOtherReplicas(t *testing.T) {
	e := newEnv(t, &delegation.Options{RescanInterval: 20 * time.Millisecond})
	past := time.Now().Add(-time.Second)
	require.NoError(t, e.store.PutDelegations(context.Background(), []delegation.Record{
		{ID: "other", TargetAgent: "a", Task: "t", Status: delegation.StatusAccepted, Async: true, CreatedAt: past, Deadline: &past}}))
	assert.Equal(t, delegation.StatusTimeout, e.stored("other").Status)
}

// Records (docs/API.md#delegations): retention by age (7 days) and count
// (100,000) through PruneDelegations, at start and periodically.
func TestRetention(t *testing.T) {
	s := newMemStore()
	now := time.Now()
	old := now.Add(-8 * 24 * time.Hour)
	var recs []delegation.Record
	for i := range 6 {
		fin := now.Add(time.Duration(i-10) * time.Minute)
		recs = append(recs, delegation.Record{ID: fmt.Sprint("new", i), Status: delegation.StatusCompleted,
			CreatedAt: fin, FinishedAt: &fin})
	}
	recs = append(recs,
		delegation.Record{ID: "old", Status: delegation.StatusFailed, CreatedAt: old, FinishedAt: &old},
		delegation.Record{ID: "oldrunning", Status: delegation.StatusAccepted, CreatedAt: old, Deadline: ptr(now.Add(time.Hour))})
	require.NoError(t, s.PutDelegations(context.Background(), recs))

	newEnvWith(t, config{store: s, opts: &delegation.Options{MaxRecords: 4, PruneInterval: 20 * time.Millisecond}})
	require.Eventually(t, func() bool { return s.len() == 4 }, 5*time.Second, time.Millisecond)
	_, ok := s.get("old")
	assert.False(t, ok, "a record older than the retention was kept")
	_, ok = s.get("oldrunning")
	assert.True(t, ok, "a record that is not final was pruned")
	_, ok = s.get("new0")
	assert.False(t, ok, "the oldest finished records go first")
	_, ok = s.get("new5")
	assert.True(t, ok)
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.pruneCalls) >= 2 },
		5*time.Second, time.Millisecond, "pruning is periodic")
	s.mu.Lock()
	call := s.pruneCalls[0]
	s.mu.Unlock()
	assert.Equal(t, 4, call.keep)
	assert.WithinDuration(t, now.Add(-delegation.DefaultRetention), call.olderThan, time.Minute)
}

func ptr[T any](v T) *T { return &v }

// Listing (docs/API.md#delegations, docs/API.md#pagination): listing is
// newest first with limit, offset, status and target.
func TestList(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("good", ok(`{}`))
	e.agentServer("bad", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "x", 500) })
	var ids []string
	for i := range 6 {
		target := "good"
		if i%2 == 1 {
			target = "bad"
		}
		ids = append(ids, e.delegate(delegation.Request{Target: target, Task: "t"}).ID)
		time.Sleep(time.Millisecond) // distinct CreatedAt
	}
	for _, id := range ids {
		e.stored(id)
	}
	ctx := context.Background()
	all, err := e.c.List(ctx, delegation.ListFilter{})
	require.NoError(t, err)
	require.Len(t, all, 6)
	for i, r := range all {
		assert.Equal(t, ids[5-i], r.ID, "newest first")
		assert.Empty(t, r.SecretHash)
	}
	page, err := e.c.List(ctx, delegation.ListFilter{Limit: 2, Offset: 1})
	require.NoError(t, err)
	assert.Equal(t, []string{ids[4], ids[3]}, []string{page[0].ID, page[1].ID})
	failed, err := e.c.List(ctx, delegation.ListFilter{Status: delegation.StatusFailed})
	require.NoError(t, err)
	assert.Len(t, failed, 3)
	good, err := e.c.List(ctx, delegation.ListFilter{Target: "good"})
	require.NoError(t, err)
	assert.Len(t, good, 3)
	capped, err := e.c.List(ctx, delegation.ListFilter{Limit: 100000})
	require.NoError(t, err)
	assert.Len(t, capped, 6)
	for _, f := range []delegation.ListFilter{{Limit: -1}, {Offset: -1}, {Status: "nope"}} {
		_, err := e.c.List(ctx, f)
		assert.ErrorIs(t, err, delegation.ErrInvalid)
	}
}

// A store that fails keeps sync records in memory (readable) and retries
// until it recovers.
func TestStoreFailureRetried(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("a", ok(`{"result":1}`))
	e.store.failPuts(errStoreDown)
	rec := e.delegate(delegation.Request{Target: "a", Task: "t"})
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	time.Sleep(20 * time.Millisecond)
	_, ok := e.store.get(rec.ID)
	assert.False(t, ok)
	got, err := e.c.Get(context.Background(), rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, got.Status)
	e.store.failPuts(nil)
	assert.Equal(t, delegation.StatusCompleted, e.stored(rec.ID).Status)
}

// Shutdown lets in-flight delegations finish within its context, then
// cancels them (failed, interrupted), flushes their records and stops.
func TestShutdown(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-release:
			_, _ = w.Write([]byte(`{"result":"finished"}`))
		case <-r.Context().Done():
		}
	})
	got := asyncAgent(e, "async")
	acc := e.delegate(delegation.Request{Target: "async", Task: "t", Async: true})
	cb := (<-got).CallbackURL

	results := make(chan delegation.Record, 2)
	for range 2 {
		go func() { results <- e.delegate(delegation.Request{Target: "slow", Task: "t"}) }()
	}
	require.Eventually(t, func() bool {
		recs, _ := e.store.ListDelegations(context.Background(), delegation.ListFilter{Status: delegation.StatusRunning})
		return len(recs) == 2
	}, 5*time.Second, time.Millisecond)

	// Graceful: the delegations finish within the grace period.
	time.AfterFunc(30*time.Millisecond, func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, e.c.Shutdown(ctx))
	for range 2 {
		r := <-results
		assert.Equal(t, delegation.StatusCompleted, r.Status)
		stored, ok := e.store.get(r.ID)
		require.True(t, ok, "Shutdown did not flush the record")
		assert.Equal(t, delegation.StatusCompleted, stored.Status)
	}
	_, err := e.c.Delegate(context.Background(), delegation.Request{Target: "slow", Task: "t"})
	assert.ErrorIs(t, err, delegation.ErrClosed)
	assert.Equal(t, "unavailable", delegation.Code(err))
	code, _ := callBack(t, cb, `{"status":"completed"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	_, err = e.c.Get(context.Background(), acc.ID)
	assert.ErrorIs(t, err, delegation.ErrClosed)
	require.NoError(t, e.c.Close(), "Close after Shutdown")
	require.NoError(t, e.c.Shutdown(context.Background()))
}

func TestShutdownCancelsAfterGrace(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	})
	e.inprocess("bg", func(ctx context.Context, task delegation.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	bg := e.delegate(delegation.Request{Target: "bg", Task: "t", Async: true})
	result := make(chan delegation.Record, 1)
	go func() { result <- e.delegate(delegation.Request{Target: "slow", Task: "t"}) }()
	require.Eventually(t, func() bool {
		recs, _ := e.store.ListDelegations(context.Background(), delegation.ListFilter{Target: "slow"})
		return len(recs) == 1
	}, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, e.c.Shutdown(ctx), context.DeadlineExceeded)
	r := <-result
	assert.Equal(t, delegation.StatusFailed, r.Status)
	assert.Equal(t, delegation.CodeInterrupted, r.Code)
	stored, ok := e.store.get(r.ID)
	require.True(t, ok)
	assert.Equal(t, delegation.CodeInterrupted, stored.Code, "the interrupted record was flushed")
	stored, _ = e.store.get(bg.ID)
	assert.Equal(t, delegation.CodeInterrupted, stored.Code, "the background handler was interrupted")
}

// Many delegations of every kind at once, under -race: every record ends
// final in the store, nothing panics.
func TestConcurrentMix(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("fast", ok(`{"result":1}`))
	e.agentServer("sick", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "x", 500) })
	e.agentServer("async", func(w http.ResponseWriter, r *http.Request) {
		tr := readTask(t, r)
		w.WriteHeader(http.StatusAccepted)
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			callBack(t, tr.CallbackURL, `{"status":"completed","result":2}`)
		}()
	})
	e.inprocess("local", func(ctx context.Context, task delegation.Task) (any, error) { return 3, nil })
	var wg sync.WaitGroup
	ids := make(chan string, 400)
	for i := range 400 {
		wg.Go(func() {
			req := delegation.Request{Task: "t"}
			switch i % 5 {
			case 0:
				req.Target = "fast"
			case 1:
				req.Target = "sick"
			case 2:
				req.Target, req.Async = "async", true
			case 3:
				req.Target = "local"
			case 4:
				req.Target, req.Async = "local", true
			}
			rec, err := e.c.Delegate(context.Background(), req)
			if !assert.NoError(t, err) {
				return
			}
			if i%7 == 0 {
				_, _ = e.c.Cancel(context.Background(), rec.ID)
			}
			ids <- rec.ID
		})
	}
	wg.Wait()
	close(ids)
	for id := range ids {
		r, err := e.c.Wait(context.Background(), id)
		require.NoError(t, err)
		assert.True(t, r.Status.Final())
		e.stored(id)
	}
}

// Close stops every goroutine the client started.
func TestCloseStopsGoroutines(t *testing.T) {
	reg, err := registryForTest(t)
	require.NoError(t, err)
	c, err := delegation.New(context.Background(), reg, newMemStore(), &delegation.Options{
		PruneInterval: time.Millisecond, RescanInterval: time.Millisecond})
	require.NoError(t, err)
	c.Handle("x", func(context.Context, delegation.Task) (any, error) { return 1, nil })
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(stacks, "agentmesh/delegation.(*committer)") &&
			!strings.Contains(stacks, "agentmesh/delegation.(*maintainer)")
	}, 5*time.Second, 10*time.Millisecond, "a client goroutine survived Close")
}

// TestListSeesReturnedDelegations proves read-your-writes for listings: a
// sync delegation that has returned is listed with its final status at
// once, although its record reaches the store through the background
// group commit.
func TestListSeesReturnedDelegations(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("good", ok(`{}`))
	ctx := context.Background()
	for i := range 20 {
		rec := e.delegate(delegation.Request{Target: "good", Task: "t"})
		list, err := e.c.List(ctx, delegation.ListFilter{Limit: 1})
		require.NoError(t, err)
		require.Len(t, list, 1, "round %d", i)
		assert.Equal(t, rec.ID, list[0].ID)
		assert.Equal(t, delegation.StatusCompleted, list[0].Status)
	}
}

func TestRecordFailure(t *testing.T) {
	for _, tc := range []struct {
		rec       delegation.Record
		code, msg string
	}{
		{delegation.Record{Status: delegation.StatusFailed, Code: "agent_error", Error: " agent returned 500 "}, "agent_error", "agent returned 500"},
		{delegation.Record{Status: delegation.StatusCanceled}, "canceled", "the delegation ended canceled"},
		{delegation.Record{Status: delegation.StatusTimeout, Code: "timeout"}, "timeout", "the delegation ended timeout"},
	} {
		code, msg := tc.rec.Failure()
		assert.Equal(t, tc.code, code)
		assert.Equal(t, tc.msg, msg)
	}
}

func TestListFilterPageAndStatusSet(t *testing.T) {
	limit, offset := delegation.ListFilter{}.Page()
	assert.Equal(t, []int{delegation.DefaultListLimit, 0}, []int{limit, offset})
	limit, offset = delegation.ListFilter{Limit: 10_000, Offset: -3}.Page()
	assert.Equal(t, []int{delegation.MaxListLimit, 0}, []int{limit, offset})
	limit, offset = delegation.ListFilter{Limit: 7, Offset: 2}.Page()
	assert.Equal(t, []int{7, 2}, []int{limit, offset})

	done, running, failed := delegation.StatusCompleted, delegation.StatusRunning, delegation.StatusFailed
	for _, tc := range []struct {
		f    delegation.ListFilter
		want []delegation.Status
		none bool
	}{
		{delegation.ListFilter{}, nil, false},
		{delegation.ListFilter{Status: done}, []delegation.Status{done}, false},
		{delegation.ListFilter{Statuses: []delegation.Status{running, done, running, failed}}, []delegation.Status{done, failed, running}, false},
		{delegation.ListFilter{Status: done, Statuses: []delegation.Status{failed, done}}, []delegation.Status{done}, false},
		{delegation.ListFilter{Status: done, Statuses: []delegation.Status{failed}}, nil, true},
	} {
		got, none := tc.f.StatusSet()
		assert.Equal(t, tc.want, got, "%+v", tc.f)
		assert.Equal(t, tc.none, none, "%+v", tc.f)
	}
}

func TestRecordClone(t *testing.T) {
	done := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	orig := delegation.Record{
		ID: "d1", Result: []byte(`"ok"`), SecretHash: []byte{1, 2},
		Response:   &delegation.AgentResponse{Content: "ok", WorkflowState: map[string]any{"step": []any{"a"}}},
		FinishedAt: &done, Deadline: &done,
	}
	c := orig.Clone()
	assert.Equal(t, orig, c)
	c.Result[0] = 'x'
	c.SecretHash[0] = 9
	c.Response.Content = "changed"
	c.Response.WorkflowState["step"].([]any)[0] = "b"
	*c.FinishedAt = done.Add(time.Hour)
	*c.Deadline = done.Add(time.Hour)
	assert.Equal(t, `"ok"`, string(orig.Result))
	assert.Equal(t, []byte{1, 2}, orig.SecretHash)
	assert.Equal(t, "ok", orig.Response.Content)
	assert.Equal(t, "a", orig.Response.WorkflowState["step"].([]any)[0])
	assert.Equal(t, done, *orig.FinishedAt)
	assert.Equal(t, done, *orig.Deadline)
	assert.Nil(t, delegation.Record{}.Clone().Result, "nil stays nil")
}

// Delegation ids are version 7 UUIDs: they sort in the order the
// delegations were made (which lets a store keyed by id append new
// records), and each is new.
func TestRecordIDsSortInCreationOrder(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("finance", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"result":"ok"}`)
	})
	var ids []string
	for range 50 {
		rec := e.delegate(delegation.Request{Target: "finance", Task: "Q3 budget"})
		require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
		ids = append(ids, rec.ID)
	}
	assert.True(t, slices.IsSorted(ids), "ids out of creation order: %v", ids)
	assert.Len(t, slices.Compact(slices.Clone(ids)), len(ids), "an id repeated")
}
