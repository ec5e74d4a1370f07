package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
)

// auditOf lists the mesh's audit log oldest first, by action.
func auditOf(t *testing.T, m *mesh) map[string][]audit.Entry {
	t.Helper()
	es, err := m.obs.audit.List(t.Context(), audit.Query{Limit: audit.MaxListLimit})
	require.NoError(t, err)
	out := map[string][]audit.Entry{}
	for i := len(es) - 1; i >= 0; i-- {
		out[es[i].Action] = append(out[es[i].Action], es[i])
	}
	return out
}

// TestObserverWiring builds the mesh as `serve` does (metrics and audit
// on) and checks what the hooks record: delegations with the caller's
// token, refusals, a breaker opening, routing decisions and MCP
// registrations.
func TestObserverWiring(t *testing.T) {
	ctx := context.Background()
	agents := newAgents(t)
	prom := prometheus.NewRegistry()
	m, err := openMesh(ctx, meshConfig{
		store: "memory", allowPrivate: true, publicURL: "http://localhost:1",
		log: slog.New(slog.DiscardHandler), withRouting: true, metrics: prom, audit: true,
	})
	require.NoError(t, err)
	defer m.close(ctx)
	require.NotNil(t, m.obs.audit)

	// The caller as the HTTP server hands it on (its /mcp included).
	caller := httpserver.WithIdentity(ctx, httpserver.NewIdentity("ci", httpserver.ScopeDelegate, httpserver.ScopeRegister))
	caller = audit.WithOrigin(caller, audit.Origin{Actor: "ci", RequestID: "r1", Via: "mcp"})
	reg := m.Registry()
	for _, a := range []registry.Agent{
		{Name: "good", Description: "Answers questions about budgets", Capabilities: []string{"budget"}, Endpoint: agents.url("/sync"), IsDefault: true},
		{Name: "bad", Description: "Always fails", Capabilities: []string{"payroll"}, Endpoint: agents.url("/fail")},
	} {
		_, _, err := reg.Register(caller, a)
		require.NoError(t, err)
	}
	_, _, err = reg.Register(caller, registry.Agent{Name: "meta", Description: "x", Capabilities: []string{"x"}, Endpoint: "http://169.254.169.254/"})
	require.Error(t, err)

	d := m.delegator()
	rec, err := d.Delegate(caller, delegation.Request{Target: "good", Task: "hello"})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusCompleted, rec.Status)
	for range 5 { // the default threshold opens the breaker
		rec, err = d.Delegate(caller, delegation.Request{Target: "bad", Task: "hello"})
		require.NoError(t, err)
		require.Equal(t, delegation.StatusFailed, rec.Status)
	}
	_, err = d.Delegate(caller, delegation.Request{Target: "nobody", Task: "hello"})
	require.Error(t, err)
	resp, err := m.Router().Handle(caller, routing.Request{Input: "what is my budget", UserID: "u1"})
	require.NoError(t, err)

	got := auditOf(t, m)
	regs := got[audit.ActionAgentRegister]
	require.Len(t, regs, 3)
	assert.Equal(t, "ci", regs[0].Actor)
	assert.Equal(t, "mcp", regs[0].Details["via"])
	assert.Equal(t, audit.OutcomeDenied, regs[2].Outcome)
	assert.Equal(t, registry.CodeEndpointNotAllowed, regs[2].Code)

	dels := got[audit.ActionDelegation]
	require.Len(t, dels, 8, "1 completed, 5 failed, 1 refused by name, 1 routed dispatch")
	assert.Equal(t, "ci", dels[0].Actor)
	assert.Equal(t, "good", dels[0].Target)
	assert.Equal(t, audit.OutcomeSuccess, dels[0].Outcome)
	assert.NotEmpty(t, dels[0].Details["delegation_id"])
	assert.Equal(t, audit.OutcomeFailure, dels[1].Outcome)
	assert.Equal(t, "bad", dels[1].Target)
	assert.NotEmpty(t, dels[1].Code)
	assert.Equal(t, "nobody", dels[6].Target)
	assert.Equal(t, audit.OutcomeDenied, dels[6].Outcome)
	assert.Equal(t, delegation.CodeNotFound, dels[6].Code)
	assert.Equal(t, resp.DelegationID, dels[7].Details["delegation_id"], "the router dispatches through the audited client")

	brk := got[audit.ActionBreakerTransition]
	require.Len(t, brk, 1)
	assert.Equal(t, "bad", brk[0].Target)
	assert.Equal(t, map[string]string{"from": "closed", "to": "open"}, brk[0].Details)

	routed := got[audit.ActionRoutingDecision]
	require.Len(t, routed, 1)
	assert.Equal(t, "ci", routed[0].Actor)
	assert.Equal(t, string(resp.Decision), routed[0].Details["decision"])
	assert.Equal(t, resp.AgentID, routed[0].Target)
	assert.Equal(t, resp.SessionID, routed[0].Details["session_id"])

	mfs, err := prom.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{
		"agentmesh_delegations_total", "agentmesh_dispatch_duration_seconds", "agentmesh_dispatch_errors_total",
		"agentmesh_breaker_state", "agentmesh_routing_decisions_total", "agentmesh_agents",
		"agentmesh_sessions_active", "agentmesh_discover_duration_seconds", "agentmesh_audit_dropped_total",
	} {
		assert.True(t, names[n], "metric %s", n)
	}
}

// A change of the agent directory is audited like any other registry
// change (through the registry's write hook, as done through "file"), and
// so is the reload it caused.
func TestFileReloadsAreAudited(t *testing.T) {
	ctx := context.Background()
	m, err := openMesh(ctx, meshConfig{
		store: "memory", allowPrivate: true, publicURL: "http://localhost:1",
		log: slog.New(slog.DiscardHandler), audit: true,
	})
	require.NoError(t, err)
	defer m.close(ctx)

	dir := t.TempDir()
	write := func(name, desc string) {
		t.Helper()
		yaml := "agent_id: " + name + "\ndescription: " + desc + "\nendpoint: http://127.0.0.1:9/task\ntype: http\ncapabilities: [x]\n"
		if name == "general" {
			yaml += "is_default: true\n"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(yaml), 0o600))
	}
	write("general", "Answers anything.")
	w, err := watchAgents(ctx, m, dir, func(string) string { return "" }, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer w.Close()

	write("billing", "Explains invoices.")
	require.Eventually(t, func() bool { return len(auditOf(t, m)[audit.ActionReload]) > 0 }, 15*time.Second, 50*time.Millisecond)
	got := auditOf(t, m)
	assert.Equal(t, map[string]string{"via": "file"}, got[audit.ActionReload][0].Details)
	assert.Equal(t, audit.OutcomeSuccess, got[audit.ActionReload][0].Outcome)
	regs := got[audit.ActionAgentRegister]
	require.Len(t, regs, 2, "the first load and the reload each added one agent")
	for i, name := range []string{"general", "billing"} {
		assert.Equal(t, name, regs[i].Target)
		assert.Equal(t, "file", regs[i].Details["via"])
		assert.Equal(t, "true", regs[i].Details["created"])
	}
}
