package delegation_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// The tests of a synchronous delegation whose http agent answers 202: it
// was sent a callback URL, its record is accepted while Delegate waits,
// and Delegate returns what the callback (or the deadline) made of it.

// goDelegate runs a delegation with ctx on a goroutine of its own and
// hands over its record.
func goDelegate(e *env, req delegation.Request) <-chan delegation.Record {
	return goDelegateCtx(context.Background(), e, req)
}

func goDelegateCtx(ctx context.Context, e *env, req delegation.Request) <-chan delegation.Record {
	ch := make(chan delegation.Record, 1)
	go func() {
		rec, err := e.c.Delegate(ctx, req)
		assert.NoError(e.t, err)
		ch <- rec
	}()
	return ch
}

// receive returns the record Delegate returned, failing the test if it
// does not within 5 s.
func receive(t *testing.T, ch <-chan delegation.Record) delegation.Record {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Delegate did not return")
		return delegation.Record{}
	}
}

// requireWaiting checks that Delegate has not returned.
func requireWaiting(t *testing.T, ch <-chan delegation.Record) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Delegate returned %s before the callback", r.Status)
	case <-time.After(20 * time.Millisecond):
	}
}

// 202 then a completed callback: while Delegate waits the record is
// accepted, with the sync deadline, readable by id; Delegate then returns
// the completed record with the callback's result; OnRecord hears of each
// transition once.
func TestSyncAcceptedThenCompleted(t *testing.T) {
	var log recordLog
	e := newEnv(t, &delegation.Options{OnRecord: log.hook})
	got := asyncAgent(e, "slowpoke")
	done := goDelegate(e, delegation.Request{Target: "slowpoke", Task: "long job", Timeout: time.Minute})
	tr := <-got
	require.NotEmpty(t, tr.CallbackURL, "a sync delegation to an http agent carries a callback URL")

	acc := e.stored(tr.DelegationID, delegation.StatusAccepted)
	require.NotNil(t, acc.Deadline)
	assert.WithinDuration(t, acc.CreatedAt.Add(time.Minute), *acc.Deadline, time.Second,
		"an accepted sync delegation waits until its own deadline, not the async one")
	r, err := e.c.Get(context.Background(), tr.DelegationID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusAccepted, r.Status)
	assert.Empty(t, r.SecretHash, "read paths never return the secret hash")
	requireWaiting(t, done)

	code, body := callBack(t, tr.CallbackURL, `{"status":"completed","result":{"rows":3}}`)
	assert.Equal(t, http.StatusOK, code, body)
	rec := receive(t, done)
	assert.Equal(t, tr.DelegationID, rec.ID)
	assert.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
	assert.JSONEq(t, `{"rows":3}`, string(rec.Result))
	assert.False(t, rec.Async)
	assert.Equal(t, 1, rec.Attempts)
	assert.NotNil(t, rec.FinishedAt)
	assert.Empty(t, rec.SecretHash)
	assert.Equal(t, delegation.StatusCompleted, e.stored(rec.ID).Status)
	assert.Equal(t, []delegation.Status{delegation.StatusAccepted, delegation.StatusCompleted}, log.statuses())

	code, _ = callBack(t, tr.CallbackURL, `{"status":"completed"}`)
	assert.Equal(t, http.StatusConflict, code, "the secret is single-use")
}

// 202 then a failed callback: Delegate returns the failed record.
func TestSyncAcceptedThenFailed(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "a")
	done := goDelegate(e, delegation.Request{Target: "a", Task: "t"})
	tr := <-got
	e.stored(tr.DelegationID, delegation.StatusAccepted)
	code, body := callBack(t, tr.CallbackURL, `{"status":"failed","error":"disk full"}`)
	assert.Equal(t, http.StatusOK, code, body)
	rec := receive(t, done)
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentError, rec.Code)
	assert.Equal(t, "disk full", rec.Error)
}

// 202 and no callback: Delegate returns timeout at the delegation's
// deadline (Request.Timeout); a late callback then gets 409 and does not
// overturn it.
func TestSyncAcceptedTimeout(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "a")
	start := time.Now()
	done := goDelegate(e, delegation.Request{Target: "a", Task: "t", Timeout: 200 * time.Millisecond})
	tr := <-got
	rec := receive(t, done)
	assert.Equal(t, delegation.StatusTimeout, rec.Status)
	assert.Equal(t, delegation.CodeTimeout, rec.Code)
	assert.GreaterOrEqual(t, time.Since(start), 190*time.Millisecond, "it waited for the deadline")
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, delegation.StatusTimeout, e.stored(rec.ID).Status)

	code, body := callBack(t, tr.CallbackURL, `{"status":"completed","result":"too late"}`)
	assert.Equal(t, http.StatusConflict, code, body)
	r := e.stored(rec.ID)
	assert.Equal(t, delegation.StatusTimeout, r.Status)
	assert.Empty(t, r.Result)
}

// An agent that calls back before its reply is read, while the running
// record may still be queued for the group commit (slow writes here): the
// callback succeeds, Delegate returns its outcome whatever the reply
// then is (the first final status wins), and OnRecord hears of the record
// once.
func TestSyncCallbackBeforeReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(w http.ResponseWriter)
	}{
		{"202", func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) }},
		{"500", func(w http.ResponseWriter) { http.Error(w, "oops", http.StatusInternalServerError) }},
		{"200", func(w http.ResponseWriter) { _, _ = w.Write([]byte(`{"result":"from the reply"}`)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log recordLog
			store := newMemStore()
			store.putDelay = 30 * time.Millisecond
			e := newEnvWith(t, config{store: store, opts: &delegation.Options{OnRecord: log.hook}})
			e.agentServer("eager", func(w http.ResponseWriter, r *http.Request) {
				tr := readTask(t, r)
				code, body := callBack(t, tr.CallbackURL, `{"status":"completed","result":"instant"}`)
				assert.Equal(t, http.StatusOK, code, body)
				tc.reply(w)
			})
			rec := e.delegate(delegation.Request{Target: "eager", Task: "t"})
			assert.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
			assert.JSONEq(t, `"instant"`, string(rec.Result))
			stored := e.stored(rec.ID)
			assert.Equal(t, delegation.StatusCompleted, stored.Status)
			assert.JSONEq(t, `"instant"`, string(stored.Result))
			assert.Equal(t, []delegation.Status{delegation.StatusCompleted}, log.statuses())
		})
	}
}

// The callback lands on another process sharing the store (a second
// client over the same store): the waiting Delegate sees it through its
// poll and returns the completed record. Each client reports the
// transition it made, once.
func TestSyncAcceptedOtherReplica(t *testing.T) {
	var logA, logB recordLog
	e := newEnv(t, &delegation.Options{OnRecord: logA.hook, WaitPollInterval: 20 * time.Millisecond})
	other := newEnvWith(t, config{store: e.store, opts: &delegation.Options{OnRecord: logB.hook, SkipRecovery: true}})
	got := asyncAgent(e, "a")
	done := goDelegate(e, delegation.Request{Target: "a", Task: "t"})
	tr := <-got
	e.stored(tr.DelegationID, delegation.StatusAccepted)
	requireWaiting(t, done)

	cb := other.mesh.URL + strings.TrimPrefix(tr.CallbackURL, e.mesh.URL)
	code, body := callBack(t, cb, `{"status":"completed","result":"via B"}`)
	assert.Equal(t, http.StatusOK, code, body)
	rec := receive(t, done)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.JSONEq(t, `"via B"`, string(rec.Result))
	assert.Equal(t, []delegation.Status{delegation.StatusAccepted}, logA.statuses())
	assert.Equal(t, []delegation.Status{delegation.StatusCompleted}, logB.statuses())
}

// The wait ends like a delegation in flight: Cancel makes it canceled,
// the caller's ctx canceled (neither counts against the breaker), a
// Shutdown past its grace failed with code interrupted.
func TestSyncAcceptedCancel(t *testing.T) {
	set := breaker.NewSet(nil, &breaker.Options{FailureThreshold: 1})
	e := newEnv(t, &delegation.Options{Breakers: set})
	got := asyncAgent(e, "a")

	done := goDelegate(e, delegation.Request{Target: "a", Task: "t"})
	id := (<-got).DelegationID
	e.stored(id, delegation.StatusAccepted)
	c, err := e.c.Cancel(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, c.Status)
	rec := receive(t, done)
	assert.Equal(t, delegation.StatusCanceled, rec.Status)
	assert.Equal(t, "canceled by request", rec.Error)

	ctx, cancel := context.WithCancel(context.Background())
	done = goDelegateCtx(ctx, e, delegation.Request{Target: "a", Task: "t"})
	id = (<-got).DelegationID
	e.stored(id, delegation.StatusAccepted)
	cancel()
	rec = receive(t, done)
	assert.Equal(t, delegation.StatusCanceled, rec.Status)
	assert.Equal(t, delegation.CodeCanceled, rec.Code)
	assert.Equal(t, "the caller canceled the delegation", rec.Error)
	assert.Equal(t, delegation.StatusCanceled, e.stored(id).Status)
	assert.Equal(t, breaker.StateClosed, set.Get("a").State(), "a cancel tells nothing about the agent")

	done = goDelegate(e, delegation.Request{Target: "a", Task: "t"})
	id = (<-got).DelegationID
	e.stored(id, delegation.StatusAccepted)
	sctx, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	assert.ErrorIs(t, e.c.Shutdown(sctx), context.DeadlineExceeded)
	rec = receive(t, done)
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeInterrupted, rec.Code)
	assert.Equal(t, delegation.CodeInterrupted, e.stored(id).Code)
}

// The caller's deadline, before the delegation's own, ends the wait as
// it ends a delegation in flight: timeout, in the store too, and one
// failure for the breaker (a slow agent, unlike a cancel).
func TestSyncAcceptedCallerDeadline(t *testing.T) {
	var log recordLog
	set := breaker.NewSet(nil, &breaker.Options{FailureThreshold: 10})
	e := newEnv(t, &delegation.Options{Breakers: set, OnRecord: log.hook})
	got := asyncAgent(e, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := goDelegateCtx(ctx, e, delegation.Request{Target: "a", Task: "t", Timeout: time.Minute})
	id := (<-got).DelegationID
	rec := receive(t, done)
	assert.Equal(t, id, rec.ID)
	assert.Equal(t, delegation.StatusTimeout, rec.Status)
	assert.Equal(t, delegation.CodeTimeout, rec.Code)
	assert.Equal(t, "no reply before the caller's deadline", rec.Error)
	assert.Equal(t, delegation.StatusTimeout, e.stored(id).Status)
	assert.Equal(t, []delegation.Status{delegation.StatusAccepted, delegation.StatusTimeout}, log.statuses(),
		"it was accepted, waiting, when the caller's deadline came")
	assert.Equal(t, 1, set.Get("a").Snapshot().Failures)
}

// The breaker hears one outcome per delegation, when the callback (or the
// deadline) ends it, not at the 202: a failed callback is one failure, a
// timeout one more, a completed callback a success (the failures reset).
func TestSyncAcceptedBreaker(t *testing.T) {
	set := breaker.NewSet(nil, &breaker.Options{FailureThreshold: 10})
	e := newEnv(t, &delegation.Options{Breakers: set})
	got := asyncAgent(e, "a")
	failures := func() int { return set.Get("a").Snapshot().Failures }

	done := goDelegate(e, delegation.Request{Target: "a", Task: "t"})
	tr := <-got
	e.stored(tr.DelegationID, delegation.StatusAccepted)
	assert.Zero(t, failures())
	callBack(t, tr.CallbackURL, `{"status":"failed","error":"no"}`)
	assert.Equal(t, delegation.StatusFailed, receive(t, done).Status)
	assert.Equal(t, 1, failures(), "a failed callback is one failure")

	done = goDelegate(e, delegation.Request{Target: "a", Task: "t", Timeout: 100 * time.Millisecond})
	<-got
	assert.Equal(t, delegation.StatusTimeout, receive(t, done).Status)
	assert.Equal(t, 2, failures(), "a timeout is one failure")

	done = goDelegate(e, delegation.Request{Target: "a", Task: "t"})
	tr = <-got
	e.stored(tr.DelegationID, delegation.StatusAccepted)
	callBack(t, tr.CallbackURL, `{"status":"completed"}`)
	assert.Equal(t, delegation.StatusCompleted, receive(t, done).Status)
	assert.Zero(t, failures(), "a completed callback is one success")
	assert.Equal(t, breaker.StateClosed, set.Get("a").State())
}

// Only http agents get a callback URL (and a secret) with a synchronous
// delegation: the mcp and a2a transports see none, their records keep no
// secret hash.
func TestSyncCallbackURLOnlyForHTTP(t *testing.T) {
	msgs := make(chan delegation.Message, 2)
	capture := delegation.TransportFunc(func(ctx context.Context, a registry.Agent, msg delegation.Message) (delegation.Reply, error) {
		msgs <- msg
		return delegation.Reply{Result: []byte(`"ok"`)}, nil
	})
	e := newEnv(t, &delegation.Options{Transports: map[registry.Protocol]delegation.Transport{
		registry.ProtocolMCP: capture,
		registry.ProtocolA2A: capture,
	}})
	for _, p := range []registry.Protocol{registry.ProtocolMCP, registry.ProtocolA2A} {
		e.register(registry.Agent{Name: "agent-" + string(p), Endpoint: "http://127.0.0.1:1/" + string(p), Protocol: p})
		rec := e.delegate(delegation.Request{Target: "agent-" + string(p), Task: "t"})
		require.Equal(t, delegation.StatusCompleted, rec.Status, rec.Error)
		assert.Empty(t, (<-msgs).CallbackURL, p)
		assert.Empty(t, e.stored(rec.ID).SecretHash, p)
	}
}
