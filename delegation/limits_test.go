package delegation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// refused asserts that req is refused with want (and its code), that the
// agent was not called and that no record was written.
func refused(t *testing.T, e *env, calls *counter, req delegation.Request, want error, code string) {
	t.Helper()
	rec, err := e.c.Delegate(context.Background(), req)
	require.ErrorIs(t, err, want)
	assert.Equal(t, code, delegation.Code(err))
	assert.Empty(t, rec.ID)
	assert.Zero(t, calls.get(), "the agent was called")
	time.Sleep(5 * time.Millisecond) // let a stray group commit land
	assert.Zero(t, e.store.len(), "a refused request left a record")
}

// Delegation limits (docs/API.md#delegations): depth ≥ MaxDepth (5) is
// refused before sending; the mesh sends depth+1.
func TestLimitDepth(t *testing.T) {
	e := newEnv(t, nil)
	var calls counter
	got := make(chan taskRequest, 1)
	e.agentServer("deep", calls.wrap(func(w http.ResponseWriter, r *http.Request) {
		got <- readTask(t, r)
		_, _ = w.Write([]byte(`{}`))
	}))
	for _, depth := range []any{5, 5.0, 7, json.Number("5"), int64(99)} {
		refused(t, e, &calls, delegation.Request{Target: "deep", Task: "t",
			Context: map[string]any{"depth": depth}}, delegation.ErrDepthExceeded, "depth_exceeded")
	}
	rec := e.delegate(delegation.Request{Target: "deep", Task: "t", Context: map[string]any{"depth": 4.0}})
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.Equal(t, 5, rec.Depth)
	assert.Equal(t, 5.0, (<-got).Context["depth"])

	// Malformed depth or chain: invalid_argument.
	for _, ctx := range []map[string]any{
		{"depth": -1}, {"depth": 1.5}, {"depth": "2"}, {"chain": "a"}, {"chain": []any{1}},
	} {
		_, err := e.c.Delegate(context.Background(), delegation.Request{Target: "deep", Task: "t", Context: ctx})
		assert.ErrorIs(t, err, delegation.ErrInvalid, "%v", ctx)
	}
}

func TestLimitMaxDepthOption(t *testing.T) {
	e := newEnv(t, &delegation.Options{MaxDepth: 2})
	var calls counter
	e.agentServer("a", calls.wrap(ok(`{}`)))
	refused(t, e, &calls, delegation.Request{Target: "a", Task: "t", Context: map[string]any{"depth": 2}},
		delegation.ErrDepthExceeded, "depth_exceeded")
	assert.Equal(t, delegation.StatusCompleted, e.delegate(delegation.Request{Target: "a", Task: "t",
		Context: map[string]any{"depth": 1}}).Status)
}

// Delegation limits (docs/API.md#delegations): delegating to an agent already
// on context.chain is refused (delegation_cycle) before sending; so is
// delegating to oneself. The mesh appends the source agent to the chain.
func TestLimitCycle(t *testing.T) {
	e := newEnv(t, nil)
	var calls counter
	e.agentServer("hr-agent", calls.wrap(ok(`{}`)))
	refused(t, e, &calls, delegation.Request{Target: "hr-agent", Task: "t", SourceAgent: "finance",
		Context: map[string]any{"depth": 1, "chain": []any{"hr-agent"}}}, delegation.ErrCycle, "delegation_cycle")
	refused(t, e, &calls, delegation.Request{Target: "hr-agent", Task: "t", SourceAgent: "hr-agent"},
		delegation.ErrCycle, "delegation_cycle")
	refused(t, e, &calls, delegation.Request{Target: "hr-agent", Task: "t",
		Context: map[string]any{"chain": []string{"x", "hr-agent"}}}, delegation.ErrCycle, "delegation_cycle")

	got := make(chan taskRequest, 1)
	e.agentServer("payroll", func(w http.ResponseWriter, r *http.Request) {
		got <- readTask(t, r)
		_, _ = w.Write([]byte(`{}`))
	})
	e.delegate(delegation.Request{Target: "payroll", Task: "t", SourceAgent: "finance",
		Context: map[string]any{"depth": 1, "chain": []any{"hr-agent"}, "k": "v"}})
	tr := <-got
	assert.Equal(t, []any{"hr-agent", "finance"}, tr.Context["chain"])
	assert.Equal(t, 2.0, tr.Context["depth"])
	assert.Equal(t, "v", tr.Context["k"])
}

// POST /v1/delegate (docs/API.md#delegations, codes in docs/API.md#errors):
// unknown name → not_found; no match → no_match; a required resource not
// covered → resource_not_covered.
func TestResolve(t *testing.T) {
	eng := discovery.New(nil)
	e := newEnv(t, &delegation.Options{Discovery: eng})
	stop := eng.Follow(e.reg)
	defer stop()

	var calls counter
	budget := agentURL(t, calls.wrap(ok(`{"result":"budget"}`)))
	e.register(registry.Agent{Name: "finance", Description: "Budgets and cost centers for every department",
		Capabilities: []string{"budget", "cost-center"}, Endpoint: budget,
		Resources: []registry.Resource{{URI: "https://erp.example.com/finance/*"}}})
	e.register(registry.Agent{Name: "hr", Description: "Employees, leave and payroll",
		Capabilities: []string{"employees", "payroll"}, Endpoint: budget})

	refused(t, e, &calls, delegation.Request{Target: "nobody", Task: "t"}, delegation.ErrNotFound, "not_found")
	refused(t, e, &calls, delegation.Request{Query: "quantum chromodynamics", Task: "t"}, delegation.ErrNoMatch, "no_match")
	refused(t, e, &calls, delegation.Request{Target: "hr", Task: "t", Resources: []string{"https://erp.example.com/finance/q3"}},
		delegation.ErrResourceNotCovered, "resource_not_covered")
	refused(t, e, &calls, delegation.Request{Query: "payroll for employees", Task: "t",
		Resources: []string{"https://erp.example.com/hr/x"}}, delegation.ErrResourceNotCovered, "resource_not_covered")
	refused(t, e, &calls, delegation.Request{Query: "budget", Task: "t", SourceAgent: "finance"},
		delegation.ErrCycle, "delegation_cycle")

	rec := e.delegate(delegation.Request{Query: "cost center budget", Task: "t"})
	assert.Equal(t, "finance", rec.TargetAgent)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	rec = e.delegate(delegation.Request{Target: "finance", Task: "t", Resources: []string{"https://erp.example.com/finance/q3"}})
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	rec = e.delegate(delegation.Request{Query: "budget payroll", Task: "t", Resources: []string{"https://erp.example.com/finance/q3"}})
	assert.Equal(t, "finance", rec.TargetAgent, "resources filter the query's matches")
	// A query whose best match is on the chain goes to the next best.
	rec = e.delegate(delegation.Request{Query: "budget payroll employees", Task: "t", Context: map[string]any{"chain": []any{"hr"}}})
	assert.Equal(t, "finance", rec.TargetAgent)
}

// agentURL starts an agent answering with h and returns its endpoint.
func agentURL(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/task"
}

func TestRequestValidation(t *testing.T) {
	e := newEnv(t, nil)
	var calls counter
	e.agentServer("a", calls.wrap(ok(`{}`)))
	for _, req := range []delegation.Request{
		{Target: "a"},
		{Target: "a", Task: strings.Repeat("x", delegation.MaxTaskBytes+1)},
		{Target: "a", Task: "\xff"},
		{Target: "a", Query: "both", Task: "t"},
		{Task: "neither"},
		{Target: "a", Task: "t", Timeout: time.Hour + time.Millisecond},
		{Target: "a", Task: "t", Timeout: -1},
		{Target: "a", Task: "t", AsyncTimeout: 25 * time.Hour},
		{Target: "a", Task: "t", SourceAgent: "not a name"},
		{Target: "a", Task: "t", Context: map[string]any{"f": func() {}}},
		{Query: "anything", Task: "t"}, // no discovery engine
	} {
		refused(t, e, &calls, req, delegation.ErrInvalid, "invalid_argument")
	}
	assert.Equal(t, delegation.StatusCompleted, e.delegate(delegation.Request{Target: "a", Task: "t", Timeout: time.Hour}).Status)
}

// Stale agents (TTL lapsed) are not delegated to: failed agent_unavailable,
// agent not called.
func TestStaleAgent(t *testing.T) {
	t0 := time.Now()
	clock := t0.Add(time.Minute)
	e := newEnvWith(t, config{regNow: func() time.Time { return t0 }, now: func() time.Time { return clock }})
	var calls counter
	url := agentURL(t, calls.wrap(ok(`{}`)))
	e.register(registry.Agent{Name: "ttl", Endpoint: url, TTLSeconds: 30})
	e.register(registry.Agent{Name: "fresh", Endpoint: url, TTLSeconds: 300})

	rec := e.delegate(delegation.Request{Target: "ttl", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentUnavailable, rec.Code)
	assert.Contains(t, rec.Error, "stale")
	assert.Zero(t, rec.Attempts)
	assert.Zero(t, calls.get())
	assert.Equal(t, delegation.StatusCompleted, e.delegate(delegation.Request{Target: "fresh", Task: "t"}).Status)
}

// Registry changes reach the client: a deleted agent is not found, an
// updated endpoint is used at once.
func TestFollowsRegistry(t *testing.T) {
	e := newEnv(t, nil)
	e.register(registry.Agent{Name: "a", Endpoint: agentURL(t, ok(`{"result":1}`))})
	assert.JSONEq(t, `1`, string(e.delegate(delegation.Request{Target: "a", Task: "t"}).Result))
	e.register(registry.Agent{Name: "a", Endpoint: agentURL(t, ok(`{"result":2}`))})
	assert.JSONEq(t, `2`, string(e.delegate(delegation.Request{Target: "a", Task: "t"}).Result))
	require.NoError(t, e.reg.Delete(context.Background(), "a"))
	_, err := e.c.Delegate(context.Background(), delegation.Request{Target: "a", Task: "t"})
	assert.ErrorIs(t, err, delegation.ErrNotFound)
}

// An agent whose protocol has no transport fails without a call.
func TestNoTransport(t *testing.T) {
	e := newEnv(t, &delegation.Options{Transports: map[registry.Protocol]delegation.Transport{registry.ProtocolHTTP: nil}})
	e.register(registry.Agent{Name: "a", Endpoint: "http://127.0.0.1:1/task"})
	rec := e.delegate(delegation.Request{Target: "a", Task: "t"})
	assert.Equal(t, delegation.StatusFailed, rec.Status)
	assert.Equal(t, delegation.CodeAgentUnreachable, rec.Code)
	assert.Contains(t, rec.Error, `protocol "http"`)
}
