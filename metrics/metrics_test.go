package metrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/metrics"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// sample returns the value of the series name{labels} in reg — a
// counter's or gauge's value, a histogram's sample count — and whether it
// exists.
func sample(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if len(got) != len(labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := sample(t, reg, name, labels)
	require.True(t, ok, "no series %s%v", name, labels)
	return v
}

// agentServer is an http agent answering every task with status and body.
func agentServer(t *testing.T, status int, body any) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/task"
}

// mesh is the library wired as cmd/agentmesh wires it, with the metric
// set fed by its hooks.
type mesh struct {
	prom     *prometheus.Registry
	store    *memstore.Store
	reg      *registry.Registry
	breakers *breaker.Set
	engine   *discovery.Engine
	del      *delegation.Client
	m        *metrics.Metrics
	rec      *audit.Recorder
}

func newMesh(t *testing.T) *mesh {
	ctx := t.Context()
	x := &mesh{prom: prometheus.NewRegistry(), store: memstore.New()}
	t.Cleanup(func() { _ = x.store.Close() })
	var err error
	x.reg, err = registry.New(ctx, x.store, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.reg.Close() })
	x.breakers = breaker.NewSet(x.store, &breaker.Options{FailureThreshold: 1})
	x.engine = discovery.New(nil)
	t.Cleanup(x.engine.Follow(x.reg))
	x.rec, err = audit.NewRecorder(x.store, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.rec.Close() })
	x.m, err = metrics.New(x.prom, &metrics.Options{
		Breakers:         x.breakers,
		Sessions:         x.store,
		SessionsCacheFor: time.Nanosecond,
		Audit:            x.rec,
	})
	require.NoError(t, err)
	t.Cleanup(x.m.Follow(x.reg))
	x.del, err = delegation.New(ctx, x.reg, x.store, &delegation.Options{
		Discovery: x.engine,
		Breakers:  x.breakers,
		OnRecord:  x.m.ObserveRecord,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.del.Close() })
	return x
}

func (x *mesh) register(t *testing.T, a registry.Agent) {
	t.Helper()
	if a.Description == "" {
		a.Description = "The " + a.Name + " agent handles " + strings.Join(a.Capabilities, " and ")
	}
	_, _, err := x.reg.Register(t.Context(), a)
	require.NoError(t, err)
}

func TestDelegationAndBreakerMetrics(t *testing.T) {
	x := newMesh(t)
	ctx := t.Context()
	x.register(t, registry.Agent{Name: "good", Capabilities: []string{"budget"}, Endpoint: agentServer(t, 200, map[string]any{"result": "done"})})
	x.register(t, registry.Agent{Name: "bad", Capabilities: []string{"payroll"}, Endpoint: agentServer(t, 500, map[string]any{"error": "boom"})})

	rec, err := x.del.Delegate(ctx, delegation.Request{Target: "good", Task: "t"})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusCompleted, rec.Status)
	rec, err = x.del.Delegate(ctx, delegation.Request{Target: "bad", Task: "t"})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusFailed, rec.Status)
	failCode := rec.Code
	require.NotEmpty(t, failCode)
	// The failure opened the breaker (threshold 1): the next one is
	// refused without a call.
	rec, err = x.del.Delegate(ctx, delegation.Request{Target: "bad", Task: "t"})
	require.NoError(t, err)
	require.Equal(t, delegation.CodeAgentUnavailable, rec.Code)
	require.Zero(t, rec.Attempts)

	p := x.prom
	assert.Equal(t, 1.0, value(t, p, "agentmesh_delegations_total", map[string]string{"agent": "good", "status": "completed"}))
	assert.Equal(t, 2.0, value(t, p, "agentmesh_delegations_total", map[string]string{"agent": "bad", "status": "failed"}))
	assert.Equal(t, 1.0, value(t, p, "agentmesh_dispatch_duration_seconds", map[string]string{"agent": "good"}))
	assert.Equal(t, 1.0, value(t, p, "agentmesh_dispatch_duration_seconds", map[string]string{"agent": "bad"}),
		"the refusal made no call: not a dispatch")
	assert.Equal(t, 1.0, value(t, p, "agentmesh_dispatch_errors_total", map[string]string{"agent": "bad", "code": failCode}))
	assert.Equal(t, 1.0, value(t, p, "agentmesh_dispatch_errors_total", map[string]string{"agent": "bad", "code": delegation.CodeAgentUnavailable}))
	_, ok := sample(t, p, "agentmesh_dispatch_errors_total", map[string]string{"agent": "good", "code": ""})
	assert.False(t, ok, "a completed delegation is no error")

	assert.Equal(t, 1.0, value(t, p, "agentmesh_breaker_state", map[string]string{"agent": "bad"}), "open")
	assert.Equal(t, 0.0, value(t, p, "agentmesh_breaker_state", map[string]string{"agent": "good"}), "closed")
	assert.Equal(t, 2.0, value(t, p, "agentmesh_agents", map[string]string{"source": "api"}))

	// Unregistering an agent deletes its series, the breaker's included
	// (the breaker set still holds it).
	require.NoError(t, x.reg.Delete(ctx, "bad"))
	for _, name := range []string{"agentmesh_delegations_total", "agentmesh_dispatch_duration_seconds", "agentmesh_dispatch_errors_total", "agentmesh_breaker_state"} {
		mfs, err := p.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					assert.False(t, lp.GetName() == "agent" && lp.GetValue() == "bad", "%s still has a series of the removed agent", name)
				}
			}
		}
	}
	assert.Equal(t, 1.0, value(t, p, "agentmesh_agents", map[string]string{"source": "api"}))
	assert.Equal(t, 0.0, value(t, p, "agentmesh_agents", map[string]string{"source": "file"}))
	assert.Equal(t, 1.0, value(t, p, "agentmesh_delegations_total", map[string]string{"agent": "good", "status": "completed"}), "other agents keep theirs")
}

func TestAgentsFollowsSnapshotAndSources(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	reg, err := registry.New(ctx, st, &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	defer reg.Close()
	for _, n := range []string{"a", "b", "c"} {
		_, _, err := reg.Register(ctx, registry.Agent{Name: n, Description: "agent " + n, Capabilities: []string{"x"}, Endpoint: "http://127.0.0.1:9/task"})
		require.NoError(t, err)
	}
	// A file agent, as the agent directory loads it.
	_, err = reg.ReplaceFileAgents(ctx, []registry.Agent{{Name: "f", Description: "file agent", Capabilities: []string{"y"}, Endpoint: "http://127.0.0.1:9/task"}})
	require.NoError(t, err)
	prom := prometheus.NewRegistry()
	m, err := metrics.New(prom, nil)
	require.NoError(t, err)
	stop := m.Follow(reg) // the snapshot counts what was there before
	defer stop()
	assert.Equal(t, 3.0, value(t, prom, "agentmesh_agents", map[string]string{"source": "api"}))
	assert.Equal(t, 1.0, value(t, prom, "agentmesh_agents", map[string]string{"source": "file"}))
	_, _, err = reg.Register(ctx, registry.Agent{Name: "a", Description: "agent a again", Capabilities: []string{"x"}, Endpoint: "http://127.0.0.1:9/task"})
	require.NoError(t, err)
	assert.Equal(t, 3.0, value(t, prom, "agentmesh_agents", map[string]string{"source": "api"}), "a replacement is not a new agent")
	require.NoError(t, reg.Delete(ctx, "b"))
	assert.Equal(t, 2.0, value(t, prom, "agentmesh_agents", map[string]string{"source": "api"}))
	_, err = metrics.New(prom, nil)
	assert.Error(t, err, "the same names twice on one registry")
}

func TestDiscoverDurationKeepsTheFastPath(t *testing.T) {
	x := newMesh(t)
	x.register(t, registry.Agent{Name: "good", Capabilities: []string{"budget"}, Endpoint: "http://127.0.0.1:9/task"})
	s := x.m.Searcher(x.engine)
	js, ok := s.(discovery.JSONSearcher)
	require.True(t, ok, "the engine's AppendSearchJSON survives the wrapper")
	_, err := s.Search("budget", &discovery.Query{})
	require.NoError(t, err)
	_, err = js.AppendSearchJSON(nil, "budget", &discovery.Query{})
	require.NoError(t, err)
	assert.Equal(t, 2.0, value(t, x.prom, "agentmesh_discover_duration_seconds", nil))

	type onlySearch struct{ discovery.Searcher }
	_, ok = x.m.Searcher(onlySearch{x.engine}).(discovery.JSONSearcher)
	assert.False(t, ok, "a plain Searcher does not grow AppendSearchJSON")

	// Through the HTTP API, which takes the fast path.
	srv, err := httpserver.New(x.reg, s, nil, &httpserver.Options{Token: "tok", Metrics: x.prom})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	r, err := http.NewRequest(http.MethodGet, ts.URL+"/v1/discover?query=budget", nil)
	require.NoError(t, err)
	r.Header.Set("Authorization", "Bearer tok")
	resp, err := ts.Client().Do(r)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 3.0, value(t, x.prom, "agentmesh_discover_duration_seconds", nil))
}

func TestRoutingDecisionsAndSessions(t *testing.T) {
	x := newMesh(t)
	ctx := t.Context()
	x.register(t, registry.Agent{Name: "helpdesk", IsDefault: true, Capabilities: []string{"help"}, Endpoint: agentServer(t, 200, map[string]any{"result": "hello"})})
	sessions, err := session.NewManager(x.store, nil)
	require.NoError(t, err)
	defer sessions.Close()
	lex := routing.NewLexical(nil)
	defer lex.Close()
	defer lex.Follow(x.reg)()
	router, err := routing.New(lex, x.reg, x.del, sessions, &routing.RouterOptions{OnDecision: x.m.ObserveDecision})
	require.NoError(t, err)
	defer router.Close()

	assert.Equal(t, 0.0, value(t, x.prom, "agentmesh_sessions_active", nil))
	resp, err := router.Handle(ctx, routing.Request{Input: "I need some help please", UserID: "u1"})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Decision)
	assert.Equal(t, 1.0, value(t, x.prom, "agentmesh_routing_decisions_total", map[string]string{"decision": string(resp.Decision)}))
	assert.Equal(t, 1.0, value(t, x.prom, "agentmesh_sessions_active", nil), "the user's session")

	// A request no agent can take counts as an error.
	require.NoError(t, x.reg.Delete(ctx, "helpdesk"))
	_, err = router.Handle(ctx, routing.Request{Input: "anything at all", UserID: "u2"})
	require.Error(t, err)
	assert.Equal(t, 1.0, value(t, x.prom, "agentmesh_routing_decisions_total", map[string]string{"decision": metrics.DecisionError}))
	_, err = router.Handle(ctx, routing.Request{Input: ""})
	require.Error(t, err, "an invalid request")
	assert.Equal(t, 1.0, value(t, x.prom, "agentmesh_routing_decisions_total", map[string]string{"decision": metrics.DecisionError}),
		"an invalid request is no decision")
}

func TestAuditMetrics(t *testing.T) {
	x := newMesh(t)
	x.rec.Record(audit.Entry{Action: "x"})
	require.NoError(t, x.rec.Flush(context.Background()))
	assert.Equal(t, 0.0, value(t, x.prom, "agentmesh_audit_dropped_total", nil))
	assert.Equal(t, 0.0, value(t, x.prom, "agentmesh_audit_write_failures_total", nil))
}
