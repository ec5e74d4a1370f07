package httpserver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
)

// Tokens of two teams and an operator, as a shared mesh's tokens file
// names them. team-a has two tokens (one being rotated out): they share
// the principal.
const (
	teamAToken    = "team-a-token-0123456789"
	teamANewToken = "team-a-next-token-0123456789"
	teamBToken    = "team-b-token-0123456789"
	opsToken      = "ops-admin-token-0123456789"
)

func teamTokens() []httpserver.Token {
	all := []httpserver.Scope{httpserver.ScopeRead, httpserver.ScopeRegister, httpserver.ScopeDelegate, httpserver.ScopeRoute}
	return []httpserver.Token{
		{Name: "team-a", Token: teamAToken, Scopes: all},
		{Name: "team-a-2026-12", Token: teamANewToken, Principal: "team-a", Scopes: all},
		{Name: "team-b", Token: teamBToken, Scopes: all},
		{Name: "ops", Token: opsToken, Scopes: []httpserver.Scope{httpserver.ScopeRead, httpserver.ScopeRegister, httpserver.ScopeDelegate, httpserver.ScopeAdmin}},
	}
}

func newTeamsEnv(t *testing.T, bolt bool) (*env, *audit.Recorder) {
	e, rec := newAuditEnv(t, bolt, nil)
	require.NoError(t, e.srv.SetTokens(teamTokens()))
	return e, rec
}

func TestAgentsBelongToTheirPrincipal(t *testing.T) {
	for _, bolt := range []bool{false, true} {
		t.Run(map[bool]string{false: "memstore", true: "boltstore"}[bolt], func(t *testing.T) {
			e, rec := newTeamsEnv(t, bolt)
			agent := agentServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"content":"ok"}`)) })
			r := e.post("/v1/agents", teamAToken, agentJSON("billing", agent.URL+"/task"))
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			var a registry.Agent
			r.JSON(t, &a)
			assert.Equal(t, "team-a", a.Owner)
			before := e.get("/v1/agents/billing", teamAToken).Body

			// team-b can neither replace, delete nor heartbeat it.
			forged := agentJSON("billing", "https://attacker.example.com/hijacked")
			forged["owner"] = "team-b"
			er := expectError(t, e.post("/v1/agents", teamBToken, forged), http.StatusForbidden, "permission_denied")
			assert.NotContains(t, er.Error, "team-a", "the owner is not named to others")
			expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/billing", Token: teamBToken}), http.StatusForbidden, "permission_denied")
			expectError(t, e.post("/v1/agents/billing/heartbeat", teamBToken, nil), http.StatusForbidden, "permission_denied")
			assert.JSONEq(t, string(before), string(e.get("/v1/agents/billing", teamAToken).Body), "the record is unchanged")

			// Every principal may read and use it.
			require.Equal(t, http.StatusOK, e.get("/v1/agents/billing", teamBToken).Status)

			// team-a's other token (a rotation) is the same principal.
			upd := agentJSON("billing", agent.URL+"/task", "budget", "invoices")
			upd["owner"] = "team-b" // ignored: the principal is the token's
			r = e.post("/v1/agents", teamANewToken, upd)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			r.JSON(t, &a)
			assert.Equal(t, "team-a", a.Owner)
			require.Equal(t, http.StatusOK, e.post("/v1/agents/billing/heartbeat", teamANewToken, nil).Status)

			// An admin may act on it; the owner stays.
			r = e.post("/v1/agents", opsToken, agentJSON("billing", agent.URL+"/task", "budget"))
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			r.JSON(t, &a)
			assert.Equal(t, "team-a", a.Owner)

			// team-b's own agent is team-b's.
			r = e.post("/v1/agents", teamBToken, agentJSON("payroll", agent.URL+"/task"))
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/payroll", Token: teamAToken}), http.StatusForbidden, "permission_denied")
			require.Equal(t, http.StatusNoContent, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/payroll", Token: teamBToken}).Status)
			require.Equal(t, http.StatusNoContent, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/billing", Token: opsToken}).Status)

			// The audit log names the principal of each action, the
			// refused ones included.
			var denied, rotated bool
			for _, en := range entries(t, rec) {
				switch {
				case en.Action == audit.ActionAgentRegister && en.Outcome == audit.OutcomeDenied && en.Actor == "team-b":
					assert.Equal(t, "team-b", en.Principal)
					assert.Equal(t, "permission_denied", en.Code)
					denied = true
				case en.Action == audit.ActionAgentRegister && en.Actor == "team-a-2026-12":
					assert.Equal(t, "team-a", en.Principal)
					rotated = true
				}
			}
			assert.True(t, denied, "the refused replacement is audited")
			assert.True(t, rotated, "the rotated token's registration is audited with its principal")
		})
	}
}

func TestDelegationsBelongToTheirPrincipal(t *testing.T) {
	e, _ := newTeamsEnv(t, true)
	sync := agentServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"content":"done"}`)) })
	accepting := agentServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	for name, srv := range map[string]string{"finance": sync.URL, "batch": accepting.URL} {
		r := e.post("/v1/agents", opsToken, agentJSON(name, srv+"/task"))
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	}

	delegate := func(token, target string, async bool) delegation.Record {
		t.Helper()
		r := e.post("/v1/delegate", token, map[string]any{"targetName": target, "task": "secret task of " + token, "async": async})
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, r.Status, "%s", r.Body)
		var rec delegation.Record
		r.JSON(t, &rec)
		return rec
	}
	done := delegate(teamAToken, "finance", false)
	pending := delegate(teamAToken, "batch", true)
	mine := delegate(teamBToken, "finance", false)

	for _, id := range []string{done.ID, pending.ID} {
		expectError(t, e.get("/v1/delegations/"+id, teamBToken), http.StatusNotFound, "not_found")
		expectError(t, e.get("/v1/delegations/"+id+"?wait=1", teamBToken), http.StatusNotFound, "not_found")
	}
	expectError(t, e.post("/v1/delegations/"+pending.ID+"/cancel", teamBToken, nil), http.StatusNotFound, "not_found")
	var rec delegation.Record
	r := e.get("/v1/delegations/"+pending.ID, teamAToken)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r.JSON(t, &rec)
	assert.Equal(t, delegation.StatusAccepted, rec.Status, "team-b's cancel changed nothing")
	assert.Equal(t, "team-a", rec.Principal)

	list := func(token, query string) []string {
		t.Helper()
		r := e.get("/v1/delegations"+query, token)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var page []delegation.Record
		r.JSON(t, &page)
		var ids []string
		for _, d := range page {
			ids = append(ids, d.ID)
		}
		return ids
	}
	assert.ElementsMatch(t, []string{mine.ID}, list(teamBToken, ""))
	assert.Empty(t, list(teamBToken, "?target=batch"), "filters never widen the view")
	assert.ElementsMatch(t, []string{done.ID, pending.ID}, list(teamAToken, ""))
	assert.ElementsMatch(t, []string{done.ID, pending.ID}, list(teamANewToken, ""), "the rotated token sees its principal's records")
	assert.ElementsMatch(t, []string{done.ID, pending.ID, mine.ID}, list(opsToken, ""))

	// The admin reads and cancels them.
	require.Equal(t, http.StatusOK, e.get("/v1/delegations/"+done.ID, opsToken).Status)
	r = e.post("/v1/delegations/"+pending.ID+"/cancel", opsToken, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r.JSON(t, &rec)
	assert.Equal(t, delegation.StatusCanceled, rec.Status)
}
