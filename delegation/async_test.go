package delegation_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
)

// asyncAgent registers an agent that answers 202 and hands the callback
// URL it got to the test.
func asyncAgent(e *env, name string) <-chan taskRequest {
	got := make(chan taskRequest, 16)
	e.agentServer(name, func(w http.ResponseWriter, r *http.Request) {
		got <- readTask(e.t, r)
		w.WriteHeader(http.StatusAccepted)
	})
	return got
}

// Async agents (docs/AGENTS.md#async-agents-202-and-the-callback): 202 →
// accepted; the callback URL is under the public URL with a ≥128-bit
// single-use secret of which only the SHA-256 is stored; the accepted record
// is durable before Delegate returns; the callback completes it; Wait returns
// it.
func TestAsyncCallbackRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "slowpoke")
	rec := e.delegate(delegation.Request{Target: "slowpoke", Task: "long job", Async: true})
	require.Equal(t, delegation.StatusAccepted, rec.Status, rec.Error)
	assert.True(t, rec.Async)
	assert.Empty(t, rec.SecretHash, "read paths never return the secret hash")
	require.NotNil(t, rec.Deadline)
	assert.WithinDuration(t, time.Now().Add(delegation.DefaultAsyncTimeout), *rec.Deadline, 5*time.Second)

	// Durable before Delegate returned: no waiting here.
	stored, ok := e.store.get(rec.ID)
	require.True(t, ok, "the accepted record was not committed before accepted was returned")
	assert.Equal(t, delegation.StatusAccepted, stored.Status)

	tr := <-got
	u, err := url.Parse(tr.CallbackURL)
	require.NoError(t, err)
	assert.Equal(t, e.mesh.URL+"/v1/delegations/"+rec.ID+"/result", u.Scheme+"://"+u.Host+u.Path)
	token := u.Query().Get("token")
	assert.GreaterOrEqual(t, len(token)*5, 128, "secret %q has fewer than 128 bits", token)
	sum := sha256.Sum256([]byte(token))
	assert.Equal(t, sum[:], stored.SecretHash, "only the SHA-256 of the secret is stored")
	assert.NotContains(t, fmt.Sprint(stored), token)

	waited := make(chan delegation.Record, 1)
	go func() {
		r, err := e.c.Wait(context.Background(), rec.ID)
		assert.NoError(t, err)
		waited <- r
	}()
	code, body := callBack(t, tr.CallbackURL, `{"status":"completed","result":{"rows":3}}`)
	assert.Equal(t, http.StatusOK, code, body)
	assert.JSONEq(t, fmt.Sprintf(`{"id":%q,"status":"completed"}`, rec.ID), body)

	select {
	case r := <-waited:
		assert.Equal(t, delegation.StatusCompleted, r.Status)
		assert.JSONEq(t, `{"rows":3}`, string(r.Result))
		assert.NotNil(t, r.FinishedAt)
		assert.Empty(t, r.SecretHash)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait was not woken by the callback")
	}

	// Single use: the same callback again is 409 (already final).
	code, body = callBack(t, tr.CallbackURL, `{"status":"failed","error":"again"}`)
	assert.Equal(t, http.StatusConflict, code)
	assert.Contains(t, body, `"code":"conflict"`)
	assert.Equal(t, delegation.StatusCompleted, e.stored(rec.ID).Status)
}

// A callback ends a routed conversation, or sets its state, with the
// fields a 200 reply uses next to its result.
func TestAsyncCallbackWorkflowFields(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "slowpoke")
	rec := e.delegate(delegation.Request{Target: "slowpoke", Task: "long job", Async: true})
	require.Equal(t, delegation.StatusAccepted, rec.Status, rec.Error)
	tr := <-got
	code, body := callBack(t, tr.CallbackURL, `{"status":"completed","result":"Refund issued.","workflowComplete":true,"workflowState":{"refundId":"r-17"}}`)
	require.Equal(t, http.StatusOK, code, body)
	r := e.stored(rec.ID)
	require.NotNil(t, r.Response, "the workflow fields are kept as the agent's response")
	assert.Equal(t, "Refund issued.", r.Response.Content)
	assert.True(t, r.Response.WorkflowComplete)
	assert.Equal(t, map[string]any{"refundId": "r-17"}, r.Response.WorkflowState)

	rec = e.delegate(delegation.Request{Target: "slowpoke", Task: "plain", Async: true})
	tr = <-got
	code, body = callBack(t, tr.CallbackURL, `{"status":"completed","result":{"rows":3}}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Nil(t, e.stored(rec.ID).Response, "no workflow fields: no response")
}

// Async agents (docs/AGENTS.md#async-agents-202-and-the-callback): callback
// errors: 401 wrong/missing secret, 404 unknown id, 400 bad status or body
// (after authentication), 409 already final.
func TestAsyncCallbackErrors(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true})
	cb := (<-got).CallbackURL
	u, _ := url.Parse(cb)
	noToken := e.mesh.URL + u.Path
	wrong := noToken + "?token=AAAAAAAAAAAAAAAAAAAAAAAAAA"
	unknown := e.mesh.URL + "/v1/delegations/00000000-0000-4000-8000-000000000000/result?" + u.RawQuery

	for _, tc := range []struct {
		url, body string
		status    int
		code      string
	}{
		{noToken, `{"status":"completed"}`, 401, "unauthenticated"},
		{wrong, `{"status":"completed"}`, 401, "unauthenticated"},
		{wrong, `not json`, 401, "unauthenticated"},
		{unknown, `{"status":"completed"}`, 404, "not_found"},
		{cb, `{"status":"done"}`, 400, "invalid_argument"},
		{cb, `{"result":1}`, 400, "invalid_argument"},
		{cb, `[1]`, 400, "invalid_argument"},
		{cb, `{"status":"completed"`, 400, "invalid_argument"},
		{cb, ``, 400, "invalid_argument"},
	} {
		code, body := callBack(t, tc.url, tc.body)
		assert.Equal(t, tc.status, code, "%s %s: %s", tc.url, tc.body, body)
		var eb struct{ Error, Code string }
		require.NoError(t, json.Unmarshal([]byte(body), &eb), body)
		assert.Equal(t, tc.code, eb.Code, body)
		assert.NotEmpty(t, eb.Error)
	}
	r, _ := e.store.get(rec.ID)
	assert.Equal(t, delegation.StatusAccepted, r.Status, "a refused callback changed the record")

	resp, err := http.Get(cb)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	code, _ := callBack(t, cb, `{"status":"failed","error":"disk full"}`)
	assert.Equal(t, http.StatusOK, code)
	final := e.stored(rec.ID)
	assert.Equal(t, delegation.StatusFailed, final.Status)
	assert.Equal(t, delegation.CodeAgentError, final.Code)
	assert.Equal(t, "disk full", final.Error)
	code, _ = callBack(t, cb, `{"status":"completed"}`)
	assert.Equal(t, http.StatusConflict, code)
}

// Async agents (docs/AGENTS.md#async-agents-202-and-the-callback): a callback
// whose body is over the result cap → 413, and the delegation fails with
// response_too_large.
func TestAsyncCallbackTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true})
	big := `{"status":"completed","result":"` + strings.Repeat("x", 5<<20) + `"}`
	code, body := callBack(t, (<-got).CallbackURL, big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, body)
	r := e.stored(rec.ID)
	assert.Equal(t, delegation.StatusFailed, r.Status)
	assert.Equal(t, delegation.CodeResponseTooLarge, r.Code)
}

// Async agents (docs/AGENTS.md#async-agents-202-and-the-callback): an async
// delegation with no callback by its deadline becomes timeout; a late
// callback then gets 409 and never overturns it.
func TestAsyncDeadlineThenLateCallback(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true, AsyncTimeout: 100 * time.Millisecond})
	require.Equal(t, delegation.StatusAccepted, rec.Status)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	r, err := e.c.Wait(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusTimeout, r.Status)
	assert.Equal(t, delegation.CodeTimeout, r.Code)
	assert.Less(t, time.Since(start), 3*time.Second)

	code, body := callBack(t, (<-got).CallbackURL, `{"status":"completed","result":"too late"}`)
	assert.Equal(t, http.StatusConflict, code, body)
	r = e.stored(rec.ID)
	assert.Equal(t, delegation.StatusTimeout, r.Status)
	assert.Empty(t, r.Result)
}

// A callback that arrives after the deadline but before the sweeper made
// the record timeout also gets 409, and makes it timeout.
func TestAsyncLateCallbackBeforeSweep(t *testing.T) {
	clock := time.Now()
	var shift atomic.Int64
	now := func() time.Time { return clock.Add(time.Duration(shift.Load())) }
	e := newEnvWith(t, config{now: now})
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true, AsyncTimeout: time.Hour})
	cb := (<-got).CallbackURL
	// Jump the record clock past the deadline (the sweeper's timer, on
	// real time, is an hour away).
	shift.Store(int64(2 * time.Hour))
	rec2, err := e.c.Callback(context.Background(), rec.ID, tokenOf(t, cb), delegation.Outcome{Status: delegation.StatusCompleted})
	assert.ErrorIs(t, err, delegation.ErrFinal)
	assert.Equal(t, delegation.StatusTimeout, rec2.Status)
	assert.Equal(t, delegation.StatusTimeout, e.stored(rec.ID).Status)
}

func tokenOf(t *testing.T, cb string) string {
	u, err := url.Parse(cb)
	require.NoError(t, err)
	return u.Query().Get("token")
}

// Cancel (docs/API.md#delegations): cancel an accepted delegation → canceled;
// its callback → 409.
func TestAsyncCancel(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true})
	waited := make(chan delegation.Record, 1)
	go func() {
		r, _ := e.c.Wait(context.Background(), rec.ID)
		waited <- r
	}()
	c, err := e.c.Cancel(context.Background(), rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, c.Status)
	assert.Equal(t, delegation.CodeCanceled, c.Code)
	select {
	case r := <-waited:
		assert.Equal(t, delegation.StatusCanceled, r.Status)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait was not woken by Cancel")
	}
	code, _ := callBack(t, (<-got).CallbackURL, `{"status":"completed"}`)
	assert.Equal(t, http.StatusConflict, code)

	_, err = e.c.Cancel(context.Background(), rec.ID)
	assert.ErrorIs(t, err, delegation.ErrFinal)
	assert.Equal(t, "conflict", delegation.Code(err))
	_, err = e.c.Cancel(context.Background(), "00000000-0000-4000-8000-000000000000")
	assert.ErrorIs(t, err, delegation.ErrNotFound)
}

// Cancel (docs/API.md#delegations): cancel a running (sync) delegation: its
// request is aborted and the record is canceled.
func TestCancelRunning(t *testing.T) {
	e := newEnv(t, nil)
	started := make(chan string, 1)
	aborted := make(chan struct{}, 1)
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		started <- r.Header.Get("X-Mesh-Delegation-Id")
		select {
		case <-r.Context().Done():
			aborted <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	})
	done := make(chan delegation.Record, 1)
	go func() {
		r, err := e.c.Delegate(context.Background(), delegation.Request{Target: "slow", Task: "t"})
		assert.NoError(t, err)
		done <- r
	}()
	id := <-started
	running, err := e.c.Get(context.Background(), id)
	require.NoError(t, err, "an in-flight record is readable by id")
	assert.Equal(t, delegation.StatusRunning, running.Status)
	assert.Equal(t, 1, running.Attempts)

	c, err := e.c.Cancel(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, c.Status)
	r := <-done
	assert.Equal(t, delegation.StatusCanceled, r.Status)
	assert.Equal(t, "canceled by request", r.Error)
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's request was not aborted")
	}
	assert.Equal(t, delegation.StatusCanceled, e.stored(id).Status)
}

// An agent that calls back before it answers 202: Delegate returns the
// final record, the late 202 does not move it back to accepted, and
// OnRecord hears of the record once (metrics and audit count it once).
func TestAsyncCallbackBeforeAccepted(t *testing.T) {
	var log recordLog
	e := newEnv(t, &delegation.Options{OnRecord: log.hook})
	e.agentServer("eager", func(w http.ResponseWriter, r *http.Request) {
		tr := readTask(t, r)
		code, body := callBack(t, tr.CallbackURL, `{"status":"completed","result":"instant"}`)
		assert.Equal(t, http.StatusOK, code, body)
		w.WriteHeader(http.StatusAccepted)
	})
	rec := e.delegate(delegation.Request{Target: "eager", Task: "t", Async: true})
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.JSONEq(t, `"instant"`, string(rec.Result))
	assert.Equal(t, delegation.StatusCompleted, e.stored(rec.ID).Status)
	assert.Equal(t, []delegation.Status{delegation.StatusCompleted}, log.statuses())
}

// An async delegation to an agent that answers 200 at once is completed;
// one that fails is failed; both are in the store when Delegate returns.
func TestAsyncAgentAnswersAtOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("quick", ok(`{"result":"now"}`))
	e.agentServer("sick", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) })
	rec := e.delegate(delegation.Request{Target: "quick", Task: "t", Async: true})
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	r, ok := e.store.get(rec.ID)
	require.True(t, ok)
	assert.Equal(t, delegation.StatusCompleted, r.Status)
	rec = e.delegate(delegation.Request{Target: "sick", Task: "t", Async: true})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	r, _ = e.store.get(rec.ID)
	assert.Equal(t, delegation.StatusFailed, r.Status)
}

// Records (docs/API.md#delegations): the record of an async delegation must
// be durable before the task is sent: if the store refuses it, nothing is
// sent.
func TestAsyncStoreDownSendsNothing(t *testing.T) {
	e := newEnv(t, nil)
	var calls counter
	e.agentServer("a", calls.wrap(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) }))
	e.store.failPuts(errStoreDown)
	_, err := e.c.Delegate(context.Background(), delegation.Request{Target: "a", Task: "t", Async: true})
	assert.ErrorIs(t, err, errStoreDown)
	assert.Zero(t, calls.get())
	e.store.failPuts(nil)
}

// A 202 to a synchronous request: while Delegate waits, the record is
// accepted (with the delegation's deadline); the agent may complete it
// through the callback endpoint with the mesh's token (the trusted hook)
// instead of its secret, and Delegate returns the completed record.
func TestSyncRequestAccepted(t *testing.T) {
	e := newEnvWith(t, config{trusted: func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer mesh-token"
	}})
	got := asyncAgent(e, "a")
	done := goDelegate(e, delegation.Request{Target: "a", Task: "t"})
	id := (<-got).DelegationID
	acc := e.stored(id, delegation.StatusAccepted)
	require.NotNil(t, acc.Deadline)

	url := e.mesh.URL + "/v1/delegations/" + id + "/result"
	code, _ := callBack(t, url, `{"status":"completed","result":1}`)
	assert.Equal(t, http.StatusUnauthorized, code)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"status":"completed","result":1}`))
	req.Header.Set("Authorization", "Bearer mesh-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	r := <-done
	assert.Equal(t, delegation.StatusCompleted, r.Status)
	assert.JSONEq(t, `1`, string(r.Result))
}

// Waiting (docs/API.md#delegations): Wait returns when the record is final,
// woken locally (no polling: the poll interval is an hour here); with a done
// ctx it returns the record as it is, with ctx's error.
func TestWait(t *testing.T) {
	e := newEnv(t, &delegation.Options{WaitPollInterval: time.Hour})
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r, err := e.c.Wait(ctx, rec.ID)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, delegation.StatusAccepted, r.Status, "the long-poll returns the record as it is")

	cb := (<-got).CallbackURL
	time.AfterFunc(50*time.Millisecond, func() { callBack(t, cb, `{"status":"completed"}`) })
	start := time.Now()
	r, err = e.c.Wait(context.Background(), rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, r.Status)
	assert.Less(t, time.Since(start), 5*time.Second)

	_, err = e.c.Wait(context.Background(), "nope")
	assert.ErrorIs(t, err, delegation.ErrNotFound)

	// A sync delegation in flight: Wait returns when it finishes.
	release := make(chan struct{})
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
		_, _ = w.Write([]byte(`{"result":"late"}`))
	})
	ids := make(chan string, 1)
	go func() {
		r := e.delegate(delegation.Request{Target: "slow", Task: "t"})
		ids <- r.ID
	}()
	var id string
	require.Eventually(t, func() bool {
		recs, _ := e.c.List(context.Background(), delegation.ListFilter{Target: "slow"})
		if len(recs) == 1 {
			id = recs[0].ID
		}
		return id != ""
	}, 5*time.Second, time.Millisecond)
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	r, err = e.c.Wait(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, r.Status)
	assert.Equal(t, id, <-ids)
}

// A callback that lands on another replica is seen by Wait through its
// slow fallback poll.
func TestWaitSeesOtherReplica(t *testing.T) {
	e := newEnv(t, &delegation.Options{WaitPollInterval: 20 * time.Millisecond})
	asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true})
	time.AfterFunc(30*time.Millisecond, func() {
		_ = e.store.UpdateDelegation(context.Background(), rec.ID, func(cur *delegation.Record) (*delegation.Record, error) {
			next := *cur
			now := time.Now()
			next.Status, next.FinishedAt = delegation.StatusCompleted, &now
			return &next, nil
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := e.c.Wait(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, r.Status)
}

func TestCallbackMethod(t *testing.T) {
	e := newEnv(t, nil)
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true})
	token := tokenOf(t, (<-got).CallbackURL)
	_, err := e.c.Callback(context.Background(), rec.ID, "", delegation.Outcome{Status: delegation.StatusCompleted})
	assert.ErrorIs(t, err, delegation.ErrUnauthenticated)
	_, err = e.c.Callback(context.Background(), rec.ID, token, delegation.Outcome{Status: "weird"})
	assert.ErrorIs(t, err, delegation.ErrInvalid)
	r, err := e.c.Callback(context.Background(), rec.ID, token, delegation.Outcome{
		Status: delegation.StatusCompleted, Result: json.RawMessage(`{"a":1}`)})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, r.Status)
	assert.Equal(t, 1, r.Attempts)
	assert.GreaterOrEqual(t, r.LatencyMs, int64(0))
}

// A synchronous delegation's callback URL is single-use like an async
// one's: a wrong secret is 401, and the right one once the agent answered
// 200 is 409 (already final).
func TestCallbackSyncRecord(t *testing.T) {
	e := newEnv(t, nil)
	urls := make(chan string, 1)
	e.agentServer("a", func(w http.ResponseWriter, r *http.Request) {
		urls <- readTask(t, r).CallbackURL
		_, _ = io.WriteString(w, `{}`)
	})
	rec := e.delegate(delegation.Request{Target: "a", Task: "t"})
	cb := <-urls
	code, _ := callBack(t, e.mesh.URL+"/v1/delegations/"+rec.ID+"/result?token=x", `{"status":"completed"}`)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = callBack(t, cb, `{"status":"failed"}`)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, delegation.StatusCompleted, e.stored(rec.ID).Status)
}

func TestPublicURL(t *testing.T) {
	reg, err := registryForTest(t)
	require.NoError(t, err)
	for _, bad := range []string{"ftp://x", "localhost:8766", "http://u:p@host", "http://host/?q=1", "/relative"} {
		_, err := delegation.New(context.Background(), reg, newMemStore(), &delegation.Options{PublicURL: bad})
		assert.Error(t, err, bad)
	}
	e := newEnv(t, &delegation.Options{PublicURL: "https://mesh.example.com/prefix/"})
	got := asyncAgent(e, "a")
	rec := e.delegate(delegation.Request{Target: "a", Task: "t", Async: true})
	assert.True(t, strings.HasPrefix((<-got).CallbackURL,
		"https://mesh.example.com/prefix/v1/delegations/"+rec.ID+"/result?token="))

	c, err := delegation.New(context.Background(), reg, newMemStore(), nil)
	require.NoError(t, err)
	defer c.Close()
	_, err = delegation.New(context.Background(), nil, newMemStore(), nil)
	assert.Error(t, err)
	_, err = delegation.New(context.Background(), reg, nil, nil)
	assert.Error(t, err)
}
