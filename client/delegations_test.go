package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// TestSearch: every option of discovery.Query reaches the engine, and the
// engine's refusals match its sentinels.
func TestSearch(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	fin := agentRecord("finance", "http://127.0.0.1:9/task", "budget", "cost centers")
	fin.Description = "Budgets and cost centers of every department."
	fin.Labels = map[string]string{"team": "fin"}
	fin.Resources = []registry.Resource{{URI: "db://ledger/*", Access: registry.AccessRead}}
	m.register(fin)
	hr := agentRecord("hr", "http://127.0.0.1:9/task", "people", "budget of headcount")
	hr.Description = "People, headcount and their budget."
	hr.Protocol = registry.ProtocolMCP
	m.register(hr)

	res, err := m.c.Search(ctx, "budget of the departments", nil)
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, "finance", res[0].Agent.Name)
	assert.Greater(t, res[0].Score, 0.0)
	assert.NotEmpty(t, res[0].MatchedTerms)

	for name, tc := range map[string]struct {
		q    discovery.Query
		want []string
	}{
		"limit":     {discovery.Query{Limit: 1}, []string{"finance"}},
		"labels":    {discovery.Query{Labels: map[string]string{"team": "fin"}}, []string{"finance"}},
		"protocol":  {discovery.Query{Protocol: registry.ProtocolMCP}, []string{"hr"}},
		"resources": {discovery.Query{RequiredResources: []string{"db://ledger/2026"}}, []string{"finance"}},
		"overlap":   {discovery.Query{Scorer: discovery.ScorerOverlap, Labels: map[string]string{"team": "fin"}}, []string{"finance"}},
		"minScore":  {discovery.Query{MinScore: 0.99}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := m.c.Search(ctx, "budget of the departments", &tc.q)
			require.NoError(t, err)
			var names []string
			for _, r := range res {
				names = append(names, r.Agent.Name)
			}
			assert.Equal(t, tc.want, names)
		})
	}
	res, err = m.c.Search(ctx, "budget", &discovery.Query{RequiredResources: []string{"db://ledger/2026"}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, []registry.Resource{{URI: "db://ledger/*", Access: registry.AccessRead}}, res[0].MatchedResources)

	res, err = m.c.Search(ctx, "quantum chromodynamics", nil)
	require.NoError(t, err)
	assert.NotNil(t, res)
	assert.Empty(t, res)

	_, err = m.c.Search(ctx, "?!", nil)
	assert.ErrorIs(t, err, discovery.ErrEmptyQuery)
	assert.NotErrorIs(t, err, discovery.ErrInvalidQuery)
	_, err = m.c.Search(ctx, "budget", &discovery.Query{Scorer: "nope"})
	assert.ErrorIs(t, err, discovery.ErrInvalidQuery)
	_, err = m.c.Search(ctx, "budget", &discovery.Query{MinScore: 2})
	assert.ErrorIs(t, err, discovery.ErrInvalidQuery)
	_, err = m.c.Search(ctx, "budget", &discovery.Query{Protocol: "smtp"})
	assert.ErrorIs(t, err, discovery.ErrInvalidQuery)
}

// TestDelegateSync: a synchronous delegation returns the whole record
// (read back after the delegate reply), with every field of the request
// sent; a delegation that ran and failed is a record, not an error.
func TestDelegateSync(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	ag := syncAgent(t)
	fin := agentRecord("finance", ag.url(), "budget")
	fin.Resources = []registry.Resource{{URI: "db://ledger/*"}}
	m.register(fin)
	m.register(agentRecord("broken", failingAgent(t).url(), "explode"))

	rec, err := m.c.Delegate(ctx, delegation.Request{
		Target:      "finance",
		Task:        "Budget of Engineering?",
		Context:     map[string]any{"depth": 1, "chain": []string{"planner"}, "ticket": "T-1"},
		Resources:   []string{"db://ledger/2026"},
		SourceAgent: "planner",
		Timeout:     1500 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.JSONEq(t, `{"echo": "Budget of Engineering?"}`, string(rec.Result))
	assert.Equal(t, "finance", rec.TargetAgent)
	assert.Equal(t, "planner", rec.SourceAgent)
	assert.Equal(t, "Budget of Engineering?", rec.Task)
	assert.Equal(t, 2, rec.Depth, "the record read back carries the depth")
	assert.False(t, rec.CreatedAt.IsZero(), "and the timestamps")
	require.NotNil(t, rec.FinishedAt)
	assert.Len(t, m.seen("GET /v1/delegations/"+rec.ID), 1, "the record is read after the delegate reply")

	got := ag.got()
	require.Len(t, got, 1)
	assert.Equal(t, rec.ID, got[0].DelegationID)
	assert.Equal(t, "T-1", got[0].Context["ticket"])
	assert.EqualValues(t, 2, got[0].Context["depth"])
	assert.Contains(t, got[0].Context["chain"], "planner")

	rec, err = m.c.Delegate(ctx, delegation.Request{Query: "budget", Task: "by query"})
	require.NoError(t, err)
	assert.Equal(t, "finance", rec.TargetAgent)

	rec, err = m.c.Delegate(ctx, delegation.Request{Target: "broken", Task: "explode"})
	require.NoError(t, err, "a failed delegation is a record")
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentError, rec.Code)
	assert.Contains(t, rec.Error, "500")
}

// TestDelegateErrors: each refusal of POST /v1/delegate matches the
// delegation package's sentinel.
func TestDelegateErrors(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	m.register(agentRecord("finance", syncAgent(t).url(), "budget"))

	for name, tc := range map[string]struct {
		req  delegation.Request
		want error
	}{
		"unknown target":    {delegation.Request{Target: "nobody", Task: "t"}, delegation.ErrNotFound},
		"no match":          {delegation.Request{Query: "quantum chromodynamics", Task: "t"}, delegation.ErrNoMatch},
		"no task":           {delegation.Request{Target: "finance"}, delegation.ErrInvalid},
		"both":              {delegation.Request{Target: "finance", Query: "budget", Task: "t"}, delegation.ErrInvalid},
		"timeout too long":  {delegation.Request{Target: "finance", Task: "t", Timeout: 2 * delegation.MaxTimeout}, delegation.ErrInvalid},
		"negative timeout":  {delegation.Request{Target: "finance", Task: "t", Timeout: -time.Second}, delegation.ErrInvalid},
		"turn":              {delegation.Request{Target: "finance", Task: "t", Turn: &delegation.Turn{}}, delegation.ErrInvalid},
		"depth":             {delegation.Request{Target: "finance", Task: "t", Context: map[string]any{"depth": 5}}, delegation.ErrDepthExceeded},
		"cycle":             {delegation.Request{Target: "finance", Task: "t", Context: map[string]any{"chain": []string{"finance"}}}, delegation.ErrCycle},
		"resource":          {delegation.Request{Target: "finance", Task: "t", Resources: []string{"db://secret"}}, delegation.ErrResourceNotCovered},
		"async timeout bad": {delegation.Request{Target: "finance", Task: "t", Async: true, AsyncTimeout: 2 * delegation.MaxAsyncTimeout}, delegation.ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := m.c.Delegate(ctx, tc.req)
			require.ErrorIs(t, err, tc.want)
			assert.NotErrorIs(t, err, client.ErrUnreachable)
		})
	}
	_, err := m.c.Delegate(ctx, delegation.Request{Target: "nobody", Task: "t"})
	assert.NotErrorIs(t, err, registry.ErrNotFound, "registry.ErrNotFound is for agent routes only")
	_, err = m.c.Delegate(ctx, delegation.Request{Target: "finance", Task: "t", Resources: []string{"db://secret"}})
	assert.NotErrorIs(t, err, client.ErrPermissionDenied, "a 403 resource_not_covered is not a scope problem")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusForbidden, e.Status)
	assert.Equal(t, delegation.CodeResourceNotCovered, e.ErrorCode())
}

// TestDelegateAsyncWait: an async delegation is accepted; WaitDelegation
// long-polls with ?wait= (few requests), gives back the last record with
// the context's error when the context ends first, and the final record
// once the agent's callback arrived.
func TestDelegateAsyncWait(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	release := make(chan struct{})
	m.register(agentRecord("reports", asyncAgent(t, release).url(), "report"))

	rec, err := m.c.Delegate(ctx, delegation.Request{Target: "reports", Task: "Quarterly report", Async: true, AsyncTimeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusAccepted, rec.Status)
	assert.True(t, rec.Async)
	require.NotNil(t, rec.Deadline)
	assert.WithinDuration(t, time.Now().Add(time.Minute), *rec.Deadline, 10*time.Second, "asyncTimeoutMs reached the server")

	got, err := m.c.Delegation(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusAccepted, got.Status)

	// The context ends before the callback: the record as last seen.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	got, err = m.c.WaitDelegation(short, rec.ID)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, client.ErrUnreachable)
	assert.Equal(t, rec.ID, got.ID)
	assert.Equal(t, delegation.StatusAccepted, got.Status)
	assert.Less(t, time.Since(start), 2*time.Second)

	polls := len(m.seen("GET /v1/delegations/" + rec.ID))
	go func() {
		time.Sleep(200 * time.Millisecond)
		close(release)
	}()
	got, err = m.c.WaitDelegation(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, got.Status)
	assert.JSONEq(t, `{"echo": "Quarterly report"}`, string(got.Result))
	// (A read of the first wait may arrive late, after its context ended.)
	var waits []string
	for _, r := range m.seen("GET /v1/delegations/" + rec.ID)[polls:] {
		if strings.Contains(r, "?wait=") {
			waits = append(waits, r)
		}
	}
	require.NotEmpty(t, waits, "a long-poll")
	assert.LessOrEqual(t, len(waits), 2, "one long-poll, not a tight loop: %v", waits)

	// Waiting for a final record returns at once.
	got, err = m.c.WaitDelegation(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, got.Status)

	_, err = m.c.WaitDelegation(ctx, "no-such-id")
	assert.ErrorIs(t, err, delegation.ErrNotFound)
}

// TestCancel: an accepted delegation is cancelled; a final one is
// delegation.ErrFinal; an unknown id is delegation.ErrNotFound, not
// registry.ErrNotFound.
func TestCancel(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	m.register(agentRecord("reports", asyncAgent(t, make(chan struct{})).url(), "report"))
	rec, err := m.c.Delegate(ctx, delegation.Request{Target: "reports", Task: "never answered", Async: true})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusAccepted, rec.Status)

	got, err := m.c.Cancel(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, got.Status)
	_, err = m.c.Cancel(ctx, rec.ID)
	assert.ErrorIs(t, err, delegation.ErrFinal)
	assert.NotErrorIs(t, err, registry.ErrDefaultConflict, "conflict on a delegation route is the delegation's")

	_, err = m.c.Cancel(ctx, "no-such-id")
	assert.ErrorIs(t, err, delegation.ErrNotFound)
	_, err = m.c.Delegation(ctx, "no-such-id")
	assert.ErrorIs(t, err, delegation.ErrNotFound)
	assert.NotErrorIs(t, err, registry.ErrNotFound)
	_, err = m.c.Delegation(ctx, strings.Repeat("x", 200))
	assert.ErrorIs(t, err, delegation.ErrNotFound)
}

// TestDelegateWithoutReadScope: with a token that may delegate but not
// read, or when the context ends before the read, Delegate returns the
// record the delegate reply describes.
func TestDelegateWithoutReadScope(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	m.register(agentRecord("finance", syncAgent(t).url(), "budget"))
	c := m.client(delegateToken, nil)
	rec, err := c.Delegate(ctx, delegation.Request{Target: "finance", Task: "Budget?"})
	require.NoError(t, err)
	assert.NotEmpty(t, rec.ID)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.Equal(t, "finance", rec.TargetAgent)
	assert.Equal(t, "Budget?", rec.Task)
	assert.JSONEq(t, `{"echo": "Budget?"}`, string(rec.Result))
	assert.True(t, rec.CreatedAt.IsZero(), "the reply does not carry the timestamps")

	_, err = c.Delegation(ctx, rec.ID)
	assert.ErrorIs(t, err, client.ErrPermissionDenied)

	// The context ends after the delegate reply, before the read: the
	// delegation ran, so that is no error either.
	short, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newFront(t, m, func(w http.ResponseWriter, r *http.Request, i int) bool {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/delegations/") {
			cancel()
			<-r.Context().Done() // the client gives up on the read
			return true
		}
		return false
	})
	rec, err = newClient(t, f.ts.URL, adminToken, nil).Delegate(short, delegation.Request{Target: "finance", Task: "Budget?"})
	require.NoError(t, err)
	assert.NotEmpty(t, rec.ID)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.JSONEq(t, `{"echo": "Budget?"}`, string(rec.Result))
	assert.True(t, rec.CreatedAt.IsZero(), "not read back")
	assert.Equal(t, int32(2), f.hits.Load(), "the delegate, then the read that was cut short")
}

// TestDelegationsPages: the iterator walks every page (Link rel=next),
// newest first, with the target and status filters, several statuses
// filtered here, and an offset.
func TestDelegationsPages(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	m.register(agentRecord("finance", syncAgent(t).url(), "budget"))
	m.register(agentRecord("broken", failingAgent(t).url(), "explode"))
	var ids []string // newest first
	for i := range 5 {
		rec, err := m.c.Delegate(ctx, delegation.Request{Target: "finance", Task: fmt.Sprintf("task %d", i)})
		require.NoError(t, err)
		ids = append([]string{rec.ID}, ids...)
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	rec, err := m.c.Delegate(ctx, delegation.Request{Target: "broken", Task: "explode"})
	require.NoError(t, err)
	failed := rec.ID

	collect := func(f delegation.ListFilter) []string {
		t.Helper()
		var out []string
		for r, err := range m.c.Delegations(ctx, f) {
			require.NoError(t, err)
			out = append(out, r.ID)
		}
		return out
	}
	before := len(m.seen("GET /v1/delegations?"))
	assert.Equal(t, ids, collect(delegation.ListFilter{Target: "finance", Limit: 2}))
	assert.GreaterOrEqual(t, len(m.seen("GET /v1/delegations?"))-before, 3, "three pages of two")
	assert.Equal(t, append([]string{failed}, ids...), collect(delegation.ListFilter{}))
	assert.Equal(t, []string{failed}, collect(delegation.ListFilter{Status: delegation.StatusFailed}))
	assert.Equal(t, []string{failed}, collect(delegation.ListFilter{Statuses: []delegation.Status{delegation.StatusFailed}}))
	assert.Equal(t, append([]string{failed}, ids...),
		collect(delegation.ListFilter{Statuses: []delegation.Status{delegation.StatusFailed, delegation.StatusCompleted}, Limit: 2}))
	assert.Equal(t, ids[1:],
		collect(delegation.ListFilter{Statuses: []delegation.Status{delegation.StatusFailed, delegation.StatusCompleted}, Offset: 2, Limit: 2}))
	assert.Equal(t, ids[3:], collect(delegation.ListFilter{Target: "finance", Offset: 3, Limit: 2}))
	assert.Empty(t, collect(delegation.ListFilter{Status: delegation.StatusFailed, Statuses: []delegation.Status{delegation.StatusCompleted}}))

	for _, f := range []delegation.ListFilter{{Status: "bogus"}, {Statuses: []delegation.Status{"done", "bogus"}}, {Limit: -1}} {
		n := 0
		for r, err := range m.c.Delegations(ctx, f) {
			n++
			assert.ErrorIs(t, err, delegation.ErrInvalid, "%+v", f)
			assert.Empty(t, r.ID)
		}
		assert.Equal(t, 1, n, "one failure ends the sequence")
	}
	n, before := 0, len(m.seen("GET /v1/delegations?"))
	for range m.c.Delegations(ctx, delegation.ListFilter{Limit: 1}) {
		if n++; n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n)
	assert.Len(t, m.seen("GET /v1/delegations?"), before+2, "a page is read when the loop asks for its first record")
}

// TestDelegateAsyncSnapshot: an async delegation whose agent calls back
// at once is returned as the delegate call reported it (accepted, or
// already final), not as read back later, with the fields fixed at
// creation read back.
func TestDelegateAsyncSnapshot(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	release := make(chan struct{})
	close(release)
	m.register(agentRecord("reports", asyncAgent(t, release).url(), "report"))
	for range 5 {
		rec, err := m.c.Delegate(ctx, delegation.Request{Target: "reports", Task: "at once", Async: true, Context: map[string]any{"depth": 2}})
		require.NoError(t, err)
		// The server itself may answer with the final record when the
		// callback beat its reply; either way the record is consistent.
		switch rec.Status {
		case delegation.StatusAccepted:
			assert.Nil(t, rec.FinishedAt)
			assert.Empty(t, rec.Result)
		case delegation.StatusCompleted:
			assert.NotNil(t, rec.FinishedAt)
			assert.JSONEq(t, `{"echo": "at once"}`, string(rec.Result))
		default:
			t.Fatalf("status %s", rec.Status)
		}
		assert.Equal(t, 3, rec.Depth)
		assert.False(t, rec.CreatedAt.IsZero())
		assert.Equal(t, "at once", rec.Task)
		got, err := m.c.WaitDelegation(ctx, rec.ID)
		require.NoError(t, err)
		assert.Equal(t, delegation.StatusCompleted, got.Status)
	}

	// Deterministically: the callback lands between the delegate reply and
	// the read that follows it.
	later := make(chan struct{})
	m.register(agentRecord("later", asyncAgent(t, later).url(), "report"))
	var once sync.Once
	f := newFront(t, m, func(w http.ResponseWriter, r *http.Request, i int) bool {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/delegations/") {
			id := strings.TrimPrefix(r.URL.Path, "/v1/delegations/")
			once.Do(func() {
				close(later)
				_, _ = m.del.Wait(ctx, id)
			})
		}
		return false
	})
	rec, err := newClient(t, f.ts.URL, adminToken, nil).Delegate(ctx, delegation.Request{Target: "later", Task: "called back", Async: true})
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusAccepted, rec.Status, "as replied")
	assert.Nil(t, rec.FinishedAt)
	assert.Empty(t, rec.Result)
	assert.False(t, rec.CreatedAt.IsZero(), "read back")
	assert.True(t, rec.UpdatedAt.IsZero())
	got, err := m.c.Delegation(ctx, rec.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, got.Status, "the record moved on")
}

// TestDelegateMillis: Timeout and AsyncTimeout travel in whole
// milliseconds, rounded up, so that a positive timeout never becomes 0
// (the server's default).
func TestDelegateMillis(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	m.register(agentRecord("reports", asyncAgent(t, make(chan struct{})).url(), "report"))
	var (
		mu     sync.Mutex
		bodies []map[string]any
	)
	f := newFront(t, m, func(w http.ResponseWriter, r *http.Request, i int) bool {
		if r.URL.Path == "/v1/delegate" {
			data, err := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(data))
			var b map[string]any
			if err == nil {
				err = json.Unmarshal(data, &b)
			}
			assert.NoError(t, err) // not require: this is the front's goroutine
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
		}
		return false
	})
	c := newClient(t, f.ts.URL, adminToken, nil)
	_, err := c.Delegate(ctx, delegation.Request{Target: "reports", Task: "t", Async: true,
		Timeout: 1500 * time.Microsecond, AsyncTimeout: time.Minute + time.Nanosecond})
	require.NoError(t, err)
	_, err = c.Delegate(ctx, delegation.Request{Target: "reports", Task: "t", Async: true,
		Timeout: time.Nanosecond, AsyncTimeout: 2 * time.Second})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 2)
	assert.EqualValues(t, 2, bodies[0]["timeoutMs"])
	assert.EqualValues(t, 60001, bodies[0]["asyncTimeoutMs"])
	assert.EqualValues(t, 1, bodies[1]["timeoutMs"])
	assert.EqualValues(t, 2000, bodies[1]["asyncTimeoutMs"])
}
