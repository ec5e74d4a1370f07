package delegation_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
)

// TestFastDelegationWritesOnlyItsFinalRecord: a synchronous delegation
// that finishes while its running record is held in the group commit
// writes its final record alone, one store write instead of two. The
// hold is made a minute long so that a loaded machine cannot stall a
// delegation past it.
func TestFastDelegationWritesOnlyItsFinalRecord(t *testing.T) {
	st := newMemStore()
	var mu sync.Mutex
	written := map[string][]delegation.Status{}
	st.onPut = func(recs []delegation.Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			written[r.ID] = append(written[r.ID], r.Status)
		}
	}
	e := newEnvWith(t, config{store: st})
	e.c.SetRunningHold(time.Minute)
	e.agentServer("fast", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"result":"done"}`)
	})
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		rec := e.delegate(delegation.Request{Target: "fast", Task: "t"})
		require.Equal(t, delegation.StatusCompleted, rec.Status, "%+v", rec)
		ids[i] = rec.ID
	}
	running := 0
	for _, id := range ids {
		assert.Equal(t, delegation.StatusCompleted, e.stored(id).Status)
		mu.Lock()
		for _, s := range written[id] {
			if s == delegation.StatusRunning {
				running++
			}
		}
		mu.Unlock()
	}
	assert.Zero(t, running, "running versions written for %d delegations that finished within the hold", n)
}

// TestHeldRunningRecordIsWrittenAfterTheHold: the running record of a
// delegation still in flight reaches the store shortly after the hold,
// long before the agent answers, so that a crash leaves it to be marked
// interrupted.
func TestHeldRunningRecordIsWrittenAfterTheHold(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	called := make(chan string, 1)
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		called <- r.Header.Get("X-Mesh-Delegation-Id")
		<-release
	})
	done := make(chan delegation.Record, 1)
	go func() { done <- e.delegate(delegation.Request{Target: "slow", Task: "t"}) }()
	id := <-called
	start := time.Now()
	rec := e.stored(id, delegation.StatusRunning)
	took := time.Since(start)
	assert.Equal(t, delegation.StatusRunning, rec.Status)
	assert.Less(t, took, 2*time.Second, "the running record waited %s for the store", took)
	close(release)
	got := <-done
	assert.Equal(t, delegation.StatusCompleted, e.stored(got.ID).Status)
}

// TestRecordsShareACommit: the final records of delegations that finish
// within the group commit's linger are written together, in one store
// write, and each is readable from the client before it is durable. The
// linger is made an hour long: Close writes them.
func TestRecordsShareACommit(t *testing.T) {
	st := newMemStore()
	e := newEnvWith(t, config{store: st})
	e.c.SetRunningHold(time.Hour)
	e.c.SetCommitLinger(time.Hour)
	e.agentServer("fast", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"result":"done"}`)
	})
	before := st.puts.Load()
	const n = 10
	ids := make([]string, n)
	for i := range ids {
		rec := e.delegate(delegation.Request{Target: "fast", Task: "t"})
		require.Equal(t, delegation.StatusCompleted, rec.Status, "%+v", rec)
		got, err := e.c.Get(context.Background(), rec.ID)
		require.NoError(t, err, "a completed delegation is readable before its record is durable")
		assert.Equal(t, delegation.StatusCompleted, got.Status)
		ids[i] = rec.ID
	}
	assert.Equal(t, before, st.puts.Load(), "no write before the linger ends")
	require.NoError(t, e.c.Close())
	assert.Equal(t, before+1, st.puts.Load(), "the %d records share one write", n)
	for _, id := range ids {
		r, ok := st.get(id)
		require.True(t, ok, "record %s lost", id)
		assert.Equal(t, delegation.StatusCompleted, r.Status)
	}
}

// TestFlushSkipsTheHoldAndTheLinger: a synchronous delegation its agent
// accepts (202) moves to the store through a flush, which writes its held
// running record at once: with an hour's hold and linger, the accepted
// record is still in the store while the delegation waits for its
// callback, and the callback completes it.
func TestFlushSkipsTheHoldAndTheLinger(t *testing.T) {
	e := newEnv(t, nil)
	e.c.SetRunningHold(time.Hour)
	e.c.SetCommitLinger(time.Hour)
	got := asyncAgent(e, "slowpoke")
	done := goDelegate(e, delegation.Request{Target: "slowpoke", Task: "long job", Timeout: time.Minute})
	tr := <-got
	acc := e.stored(tr.DelegationID, delegation.StatusAccepted)
	assert.Equal(t, delegation.StatusAccepted, acc.Status)
	code, body := callBack(t, tr.CallbackURL, `{"status":"completed","result":{"rows":3}}`)
	assert.Equal(t, http.StatusOK, code, body)
	rec := receive(t, done)
	assert.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
	assert.Equal(t, delegation.StatusCompleted, e.stored(rec.ID).Status)
}
