package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// TestE2EPrincipals drives a built `agentmesh serve` shared by two teams
// and an operator, as the security model describes it: team-b cannot
// replace, delete or heartbeat team-a's agent (403, the record
// unchanged), nor read, wait on, list or cancel team-a's delegations
// (404, absent); the admin can; team-a's second token (a rotation)
// keeps team-a's ownership; a routed request by team-b for team-a's
// user is another user's conversation. An agent stored before owners
// existed belongs to MESH_TOKEN's principal, default.
func TestE2EPrincipals(t *testing.T) {
	t.Parallel()
	ag := newAgents(t)
	db := filepath.Join(t.TempDir(), "mesh.db")

	// An agent stored by an older version: no owner.
	st, err := boltstore.Open(db, nil)
	require.NoError(t, err)
	legacy := registry.Agent{Name: "legacy", Description: "Answers legacy questions.", Capabilities: []string{"legacy"},
		Endpoint: ag.url("/sync"), Source: registry.SourceAPI, RegisteredAt: time.Now(), UpdatedAt: time.Now(), LastSeen: time.Now()}
	require.NoError(t, st.UpdateAgent(t.Context(), "legacy", func(*registry.Agent) (*registry.Agent, error) { return &legacy, nil }))
	require.NoError(t, st.Close())

	tokens := writeTemp(t, "tokens.yaml", `
- name: team-a
  token: team-a-token-0123456789
  scopes: [read, register, delegate, route]
- name: team-a-2026-12
  principal: team-a
  token: team-a-next-token-0123456789
  scopes: [read, register, delegate, route]
- name: team-b
  token: team-b-token-0123456789
  scopes: [read, register, delegate, route]
- name: ops
  token: ops-token-0123456789
  scopes: [read, register, delegate, admin]
`)
	p := startServe(t, serveSpec{db: db, token: e2eMeshToken, args: []string{"--allow-private-endpoints", "--tokens-file", tokens}})
	a, a2, b, ops := p.as("team-a-token-0123456789"), p.as("team-a-next-token-0123456789"), p.as("team-b-token-0123456789"), p.as("ops-token-0123456789")

	r := a.do(http.MethodPost, "/v1/agents", agentJSON("billing", ag.url("/sync"), "invoices"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	assert.Equal(t, "team-a", r.obj(t)["owner"])
	before := a.do(http.MethodGet, "/v1/agents/billing", nil).obj(t)

	b.do(http.MethodPost, "/v1/agents", agentJSON("billing", ag.url("/fail"), "hijacked")).requireError(t, http.StatusForbidden, "permission_denied")
	b.do(http.MethodDelete, "/v1/agents/billing", nil).requireError(t, http.StatusForbidden, "permission_denied")
	b.do(http.MethodPost, "/v1/agents/billing/heartbeat", nil).requireError(t, http.StatusForbidden, "permission_denied")
	assert.Equal(t, before, a.do(http.MethodGet, "/v1/agents/billing", nil).obj(t), "the record is unchanged")
	r = a2.do(http.MethodPost, "/v1/agents/billing/heartbeat", nil)
	require.Equal(t, http.StatusOK, r.status, "the rotated token is team-a: %s", r)

	// The legacy agent is default's: MESH_TOKEN may change it, team-b not.
	b.do(http.MethodDelete, "/v1/agents/legacy", nil).requireError(t, http.StatusForbidden, "permission_denied")
	assert.Equal(t, "default", p.client().do(http.MethodGet, "/v1/agents/legacy", nil).obj(t)["owner"])
	r = p.client().do(http.MethodPost, "/v1/agents/legacy/heartbeat", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)

	// Delegations.
	r = a.do(http.MethodPost, "/v1/delegate", map[string]any{"targetName": "billing", "task": "team a's invoice run"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	id := r.obj(t)["id"].(string)
	r = a.do(http.MethodPost, "/v1/delegate", map[string]any{"targetName": "billing", "task": "team a's batch", "async": true})
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, r.status, "%s", r)
	r = b.do(http.MethodPost, "/v1/delegate", map[string]any{"targetName": "billing", "task": "team b's invoice"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	bID := r.obj(t)["id"].(string)

	b.do(http.MethodGet, "/v1/delegations/"+id, nil).requireError(t, http.StatusNotFound, "not_found")
	b.do(http.MethodGet, "/v1/delegations/"+id+"?wait=1", nil).requireError(t, http.StatusNotFound, "not_found")
	b.do(http.MethodPost, "/v1/delegations/"+id+"/cancel", nil).requireError(t, http.StatusNotFound, "not_found")
	ids := func(c *apiClientT) []string {
		var out []string
		for _, d := range c.do(http.MethodGet, "/v1/delegations", nil).list(t) {
			out = append(out, d["id"].(string))
		}
		return out
	}
	assert.Equal(t, []string{bID}, ids(b), "team-b lists its own only")
	assert.Len(t, ids(a), 2)
	assert.Len(t, ids(a2), 2, "the rotated token lists team-a's")
	assert.Len(t, ids(ops), 3, "the admin lists everything")
	r = ops.do(http.MethodGet, "/v1/delegations/"+id, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Equal(t, "team-a", r.obj(t)["principal"])

	// The same rules over MCP (Streamable HTTP, team-b's token).
	cs := connectHTTPMCP(t, p.url+"/mcp", "team-b-token-0123456789")
	callToolError(t, cs, "mesh_unregister", map[string]any{"name": "billing"}, "permission_denied")
	callToolError(t, cs, "mesh_get_delegation", map[string]any{"id": id}, "not_found")
	require.Equal(t, http.StatusOK, a.do(http.MethodGet, "/v1/agents/billing", nil).status, "billing is still registered")

	// The audit log names the principal of each action, refused ones too.
	r = a2.do(http.MethodPost, "/v1/agents", agentJSON("billing", ag.url("/sync"), "invoices", "receipts"))
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Equal(t, "team-a", r.obj(t)["owner"])
	var rotated, denied bool
	for _, en := range auditEntries(t, p.client(), "?limit=500") {
		if en["action"] != "agent.register" {
			continue
		}
		switch {
		case en["actor"] == "team-a-2026-12":
			assert.Equal(t, "team-a", en["principal"], "%v", en)
			rotated = true
		case en["actor"] == "team-b":
			assert.Equal(t, "team-b", en["principal"], "%v", en)
			assert.Equal(t, "permission_denied", en["code"], "%v", en)
			denied = true
		}
	}
	assert.True(t, rotated && denied, "the audit log has both principals' registrations")
}
