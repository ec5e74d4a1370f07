package agentkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/agentkit"
	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// count answers with the task upper-cased and its word count, and the
// delegation id it was given: what only a run of the handler on that
// very task can know.
func count(_ context.Context, t agentkit.Task) (agentkit.Reply, error) {
	return agentkit.Reply{Result: map[string]any{
		"upper": strings.ToUpper(t.Task), "words": len(strings.Fields(t.Task)), "delegationId": t.DelegationID,
	}}, nil
}

// runAgent runs a under Run against the mesh at meshURL with rec, waits
// until the mesh has it, and returns a function that stops Run and
// returns its error.
func runAgent(t *testing.T, a *agentkit.Agent, mesh *client.Client, rec registry.Agent) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx, "127.0.0.1:0", mesh, rec) }()
	waitFor(t, 5*time.Second, rec.Name+" registered", func() bool {
		_, err := mesh.Agent(context.Background(), rec.Name)
		return err == nil
	})
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-ran:
			case <-time.After(10 * time.Second):
				err = errors.New("Run did not return within 10 s of its ctx ending")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestSyncAndAsyncThroughTheMesh(t *testing.T) {
	t.Parallel()
	mesh := meshClient(t, startMesh(t))
	for _, async := range []bool{false, true} {
		name := fmt.Sprintf("count-async-%v", async)
		a, err := agentkit.New(count, &agentkit.Options{Async: async, Token: "secret-" + name})
		require.NoError(t, err)
		runAgent(t, a, mesh, registry.Agent{Name: name, Description: "Counts words.", Capabilities: []string{"count"}})

		// A sync delegation: the reply (sync) or the callback it waits for (async).
		rec := delegate(t, mesh, delegation.Request{Target: name, Task: "three little words"})
		require.Equal(t, delegation.StatusCompleted, rec.Status, "%s: %+v", name, rec)
		assert.JSONEq(t, fmt.Sprintf(`{"upper": "THREE LITTLE WORDS", "words": 3, "delegationId": %q}`, rec.ID), string(rec.Result), name)

		// An async delegation, waited for.
		rec = delegate(t, mesh, delegation.Request{Target: name, Task: "a b c d", Async: true})
		if rec.Status == delegation.StatusAccepted { // the callback may come first
			rec, err = mesh.WaitDelegation(t.Context(), rec.ID)
			require.NoError(t, err)
		}
		require.Equal(t, delegation.StatusCompleted, rec.Status, "%s: %+v", name, rec)
		assert.JSONEq(t, fmt.Sprintf(`{"upper": "A B C D", "words": 4, "delegationId": %q}`, rec.ID), string(rec.Result), name)
	}
}

func TestHandlerErrorsFailTheDelegation(t *testing.T) {
	t.Parallel()
	mesh := meshClient(t, startMesh(t))
	h := func(_ context.Context, t agentkit.Task) (agentkit.Reply, error) {
		if t.Task == "panic" {
			panic("boom")
		}
		return agentkit.Reply{}, errors.New("cannot do " + t.Task)
	}
	for _, async := range []bool{false, true} {
		name := fmt.Sprintf("failing-async-%v", async)
		a, err := agentkit.New(h, &agentkit.Options{Async: async})
		require.NoError(t, err)
		runAgent(t, a, mesh, registry.Agent{Name: name, Description: "Fails.", Capabilities: []string{"fail"}})
		for task, want := range map[string]string{"laundry": "cannot do laundry", "panic": "the agent's handler panicked: boom"} {
			rec := delegate(t, mesh, delegation.Request{Target: name, Task: task})
			assert.Equal(t, delegation.StatusFailed, rec.Status, "%s %s", name, task)
			assert.Equal(t, delegation.CodeAgentError, rec.Code, "%s %s", name, task)
			assert.Contains(t, rec.Error, want, "%s %s", name, task)
		}
	}
}

func TestTokenIsRequired(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	a, err := agentkit.New(func(ctx context.Context, t agentkit.Task) (agentkit.Reply, error) {
		calls.Add(1)
		return count(ctx, t)
	}, &agentkit.Options{Token: "s3cret"})
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	defer srv.Close()
	post := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/task", strings.NewReader(`{"delegationId": "d1", "task": "hi"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, post(""))
	assert.Equal(t, http.StatusUnauthorized, post("Bearer wrong"))
	assert.Equal(t, http.StatusUnauthorized, post("Basic s3cret"))
	assert.Equal(t, http.StatusUnauthorized, post("Bearer  s3cret"))
	assert.Equal(t, http.StatusUnauthorized, post("s3cret"))
	assert.Equal(t, int32(0), calls.Load(), "the handler ran for an unauthenticated request")
	assert.Equal(t, http.StatusOK, post("Bearer s3cret"))
	assert.Equal(t, int32(1), calls.Load())

	// Registering puts the token in the record, so that the mesh sends it;
	// a record with another credential is refused before any call.
	mesh := meshClient(t, startMesh(t))
	_, err = a.Register(t.Context(), mesh, registry.Agent{Name: "x", Description: "x", Endpoint: srv.URL + "/task",
		Auth: &registry.Auth{Type: registry.AuthBearer, Token: "other"}})
	require.Error(t, err)
	reg, err := a.Register(t.Context(), mesh, registry.Agent{Name: "x", Description: "x", Endpoint: srv.URL + "/task"})
	require.NoError(t, err)
	defer reg.Close(context.Background())
	rec := delegate(t, mesh, delegation.Request{Target: "x", Task: "via the mesh"})
	assert.Equal(t, delegation.StatusCompleted, rec.Status, "%+v", rec)
	assert.Equal(t, int32(2), calls.Load())
}

func TestRequests(t *testing.T) {
	t.Parallel()
	var got agentkit.Task
	a, err := agentkit.New(func(_ context.Context, t agentkit.Task) (agentkit.Reply, error) {
		got = t
		return agentkit.Reply{Result: "done", WorkflowComplete: true, WorkflowState: map[string]any{"step": 2}}, nil
	}, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	defer srv.Close()
	do := func(method, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+"/anywhere", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := do(http.MethodPost, `{"delegationId": "d1", "task": "it was on the 3rd",
		"context": {"depth": 2, "chain": ["front"], "tenant": "acme"},
		"callbackUrl": "http://mesh/v1/delegations/d1/result?token=x",
		"session": {"id": "s1", "turns": [{"role": "user", "content": "refund", "time": "2025-06-03T09:14:07Z"},
			{"role": "agent", "content": "which day?", "agent": "billing"}], "workflowState": {"step": 1}},
		"user": {"id": "ann", "employeeId": "e7", "displayName": "Ann"}, "locale": "fr-CA", "entryPoint": "slack",
		"metadata": {"channel": "c1"}, "aFieldOfLater": true}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.JSONEq(t, `{"result": "done", "workflowComplete": true, "workflowState": {"step": 2}}`, body)
	assert.Equal(t, "it was on the 3rd", got.Task)
	assert.Equal(t, 2, got.Depth())
	assert.Equal(t, []string{"front"}, got.Chain())
	assert.Equal(t, "acme", got.Context["tenant"])
	require.NotNil(t, got.Session)
	assert.Equal(t, "s1", got.Session.ID)
	assert.Equal(t, []agentkit.Turn{{Role: "user", Content: "refund", Time: "2025-06-03T09:14:07Z"},
		{Role: "agent", Content: "which day?", Agent: "billing"}}, got.Session.Turns)
	assert.Equal(t, map[string]any{"step": float64(1)}, got.Session.WorkflowState)
	assert.Equal(t, &agentkit.User{ID: "ann", EmployeeID: "e7", DisplayName: "Ann"}, got.User)
	assert.Equal(t, "fr-CA", got.Locale)
	assert.Equal(t, "slack", got.EntryPoint)

	code, _ = do(http.MethodGet, "")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	code, _ = do(http.MethodPost, "not json")
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = do(http.MethodPost, `{"task": "`+strings.Repeat("x", 9<<20)+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)

	_, err = agentkit.New(nil, nil)
	assert.Error(t, err)
	var zero *agentkit.Agent
	rr := httptest.NewRecorder()
	zero.ServeHTTP(rr, httptest.NewRequest(http.MethodPost, "/task", strings.NewReader(`{}`)))
	assert.Equal(t, http.StatusServiceUnavailable, rr.Code)
}

// callbacks is a fake mesh callback endpoint: it answers with the next
// status of statuses (200 once they run out) and records the bodies.
type callbacks struct {
	mu       sync.Mutex
	statuses []int
	bodies   []map[string]any
	srv      *httptest.Server
}

func newCallbacks(t *testing.T, statuses ...int) *callbacks {
	c := &callbacks{statuses: statuses}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		status := http.StatusOK
		if len(c.statuses) > 0 {
			status, c.statuses = c.statuses[0], c.statuses[1:]
		}
		c.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *callbacks) got() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.bodies...)
}

// postTask POSTs a task with a callback URL to the agent at url.
func postTask(t *testing.T, url, id, task, callbackURL string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"delegationId": id, "task": task, "callbackUrl": callbackURL})
	resp, err := http.Post(url, "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestAsyncCallbacks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var runs atomic.Int32
	a, err := agentkit.New(func(ctx context.Context, t agentkit.Task) (agentkit.Reply, error) {
		runs.Add(1)
		<-release
		return agentkit.Reply{Result: strings.ToUpper(t.Task), WorkflowComplete: true}, nil
	}, &agentkit.Options{Async: true})
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	defer srv.Close()

	// The mesh answers 503, then 502, then takes it: the same body is sent
	// again until then. The same delegation sent twice runs once.
	cb := newCallbacks(t, http.StatusServiceUnavailable, http.StatusBadGateway)
	require.Equal(t, http.StatusAccepted, postTask(t, srv.URL, "d1", "later", cb.srv.URL+"/cb?token=x"))
	require.Equal(t, http.StatusAccepted, postTask(t, srv.URL, "d1", "later", cb.srv.URL+"/cb?token=x"))
	close(release)
	waitFor(t, 10*time.Second, "three callbacks", func() bool { return len(cb.got()) == 3 })
	want := map[string]any{"status": "completed", "result": "LATER", "workflowComplete": true}
	for _, b := range cb.got() {
		assert.Equal(t, want, b)
	}
	assert.Equal(t, int32(1), runs.Load())

	// A 409 is final: not sent again.
	conflict := newCallbacks(t, http.StatusConflict, http.StatusConflict)
	require.Equal(t, http.StatusAccepted, postTask(t, srv.URL, "d2", "x", conflict.srv.URL))
	require.NoError(t, a.Shutdown(t.Context()))
	assert.Len(t, conflict.got(), 1)

	// Without a callback URL, an async agent answers in the reply.
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"delegationId": "d3", "task": "now"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "after Shutdown")
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 2)
	a, err := agentkit.New(func(ctx context.Context, t agentkit.Task) (agentkit.Reply, error) {
		started <- struct{}{}
		if t.Task == "quick" {
			time.Sleep(100 * time.Millisecond)
			return agentkit.Reply{Result: "quick done"}, nil
		}
		<-ctx.Done()
		return agentkit.Reply{}, ctx.Err()
	}, &agentkit.Options{Async: true})
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	defer srv.Close()
	cb := newCallbacks(t)

	// Shutdown waits for the task in flight and its callback.
	require.Equal(t, http.StatusAccepted, postTask(t, srv.URL, "q", "quick", cb.srv.URL))
	<-started
	require.NoError(t, a.Shutdown(t.Context()))
	require.Len(t, cb.got(), 1)
	assert.Equal(t, "quick done", cb.got()[0]["result"])

	// Once shut down, tasks get 503 (the mesh retries them).
	assert.Equal(t, http.StatusServiceUnavailable, postTask(t, srv.URL, "late", "quick", cb.srv.URL))

	// A Shutdown whose ctx ends cancels the handlers it waited for.
	b, err := agentkit.New(func(ctx context.Context, t agentkit.Task) (agentkit.Reply, error) {
		started <- struct{}{}
		<-ctx.Done()
		return agentkit.Reply{}, ctx.Err()
	}, &agentkit.Options{Async: true})
	require.NoError(t, err)
	srvB := httptest.NewServer(b)
	defer srvB.Close()
	require.Equal(t, http.StatusAccepted, postTask(t, srvB.URL, "s", "slow", cb.srv.URL))
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, b.Shutdown(ctx), context.DeadlineExceeded)
	require.NoError(t, b.Shutdown(t.Context()), "the cancelled handler returned")
}

func TestHeartbeatsAndUnregister(t *testing.T) {
	t.Parallel()
	mesh := meshClient(t, startMesh(t))
	a, err := agentkit.New(count, &agentkit.Options{Token: "hb-secret"})
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	defer srv.Close()
	rec := registry.Agent{Name: "beating", Description: "Beats.", Capabilities: []string{"beat"},
		Endpoint: srv.URL + "/task", TTLSeconds: 5}
	reg, err := a.Register(t.Context(), mesh, rec)
	require.NoError(t, err)
	first := reg.Agent().LastSeen
	require.False(t, first.IsZero())

	// Heartbeats every TTL/3 (1.67 s) move lastSeen on, at the mesh too.
	waitFor(t, 4*time.Second, "a heartbeat", func() bool { return reg.Agent().LastSeen.After(first) })
	stored, err := mesh.Agent(t.Context(), "beating")
	require.NoError(t, err)
	assert.True(t, stored.LastSeen.After(first), "the mesh's lastSeen %v, registered at %v", stored.LastSeen, first)

	// The mesh loses the agent: the next heartbeat registers it again.
	require.NoError(t, mesh.Delete(t.Context(), "beating"))
	waitFor(t, 4*time.Second, "registered again", func() bool {
		_, err := mesh.Agent(t.Context(), "beating")
		return err == nil
	})
	got := delegate(t, mesh, delegation.Request{Target: "beating", Task: "still here"})
	assert.Equal(t, delegation.StatusCompleted, got.Status, "the registration again keeps the token: %+v", got)

	// Close unregisters, and no heartbeat brings the agent back.
	require.NoError(t, reg.Close(t.Context()))
	require.NoError(t, reg.Close(t.Context()), "Close again")
	_, err = mesh.Agent(t.Context(), "beating")
	require.ErrorIs(t, err, registry.ErrNotFound)
	time.Sleep(2 * time.Second)
	_, err = mesh.Agent(t.Context(), "beating")
	require.ErrorIs(t, err, registry.ErrNotFound, "an agent came back after Close")
}

func TestRunFailsToRegister(t *testing.T) {
	t.Parallel()
	meshURL := startMesh(t)
	wrong, err := client.New(meshURL, &client.Options{Token: "not-the-mesh-token"})
	require.NoError(t, err)
	a, err := agentkit.New(count, nil)
	require.NoError(t, err)
	err = a.Run(t.Context(), "127.0.0.1:0", wrong, registry.Agent{Name: "n", Description: "d"})
	require.ErrorIs(t, err, client.ErrUnauthenticated)
	require.ErrorIs(t, a.Run(t.Context(), "127.0.0.1:0", nil, registry.Agent{}), agentkit.ErrShutdown)
}

// TestRunStoppedWhileRegistering stops Run after the mesh stored the
// agent but before its reply reached Run: Run returns nil (a shutdown is
// not a failure) and the agent is not left registered.
func TestRunStoppedWhileRegistering(t *testing.T) {
	t.Parallel()
	meshURL := startMesh(t)
	upstream, err := url.Parse(meshURL)
	require.NoError(t, err)
	stored := make(chan struct{})
	var once sync.Once
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPost && resp.Request.URL.Path == "/v1/agents" {
			once.Do(func() { close(stored) })
			<-resp.Request.Context().Done() // hold the reply until Run gives up on it
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	a, err := agentkit.New(count, nil)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() {
		ran <- a.Run(ctx, "127.0.0.1:0", meshClient(t, front.URL),
			registry.Agent{Name: "interrupted", Description: "Stopped on its way in.", TTLSeconds: 60})
	}()
	<-stored
	_, err = meshClient(t, meshURL).Agent(t.Context(), "interrupted")
	require.NoError(t, err, "the mesh stored the agent")
	stop()
	require.NoError(t, <-ran)
	_, err = meshClient(t, meshURL).Agent(t.Context(), "interrupted")
	require.ErrorIs(t, err, registry.ErrNotFound, "Run left the agent registered")
}

// TestErrorText checks the error text the mesh gets from a failed
// handler: at most 1 KiB, valid UTF-8 (cut on a character), never empty;
// and that Options.AsyncTimeout ends an async handler's ctx, failing the
// task through the callback.
func TestErrorText(t *testing.T) {
	t.Parallel()
	long := "\xff" + strings.Repeat("é", 1000) // 2001 bytes, an invalid one first
	a, err := agentkit.New(func(_ context.Context, t agentkit.Task) (agentkit.Reply, error) {
		if t.Task == "empty" {
			return agentkit.Reply{}, errors.New("")
		}
		return agentkit.Reply{}, errors.New(long)
	}, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	defer srv.Close()
	post := func(task string) string {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"task": "`+task+`"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return strings.TrimSuffix(string(b), "\n")
	}
	text := post("long")
	assert.True(t, utf8.ValidString(text), "%q", text)
	assert.LessOrEqual(t, len(text), 1<<10)
	assert.Greater(t, len(text), 1<<10-utf8.UTFMax, "cut at the last whole character")
	assert.Equal(t, "\uFFFD"+strings.Repeat("é", (len(text)-3)/2), text)
	assert.Equal(t, "the agent failed", post("empty"))

	slow, err := agentkit.New(func(ctx context.Context, _ agentkit.Task) (agentkit.Reply, error) {
		<-ctx.Done()
		return agentkit.Reply{}, ctx.Err()
	}, &agentkit.Options{Async: true, AsyncTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	slowSrv := httptest.NewServer(slow)
	defer slowSrv.Close()
	cb := newCallbacks(t)
	require.Equal(t, http.StatusAccepted, postTask(t, slowSrv.URL, "d1", "slow", cb.srv.URL))
	waitFor(t, 5*time.Second, "the callback", func() bool { return len(cb.got()) == 1 })
	assert.Equal(t, map[string]any{"status": "failed", "error": context.DeadlineExceeded.Error()}, cb.got()[0])
}
