package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2ERouting: serve --agents examples/agents with the example agents'
// endpoints pointing at test agents; POST /v1/request routes a message,
// the user's second message bypasses classification through the session,
// and GET /v1/sessions/{id} shows the conversation.
func TestE2ERouting(t *testing.T) {
	a := newAgents(t)
	p := startServe(t, serveSpec{
		token: e2eMeshToken,
		args:  []string{"--agents", "../../examples/agents", "--allow-private-endpoints", "--store", "memory"},
		env: []string{
			"BILLING_AGENT_ENDPOINT=" + a.url("/sync"),
			"GENERAL_AGENT_ENDPOINT=" + a.url("/sync"),
			"PASSWORD_RESET_AGENT_ENDPOINT=" + a.url("/sync"),
		},
	})
	c := p.client()
	// The first request, right after start: the router has learned the
	// agent directory (it waits for its first model), so this is a real
	// classification, never classifier_error; /health/ready agrees.
	r := c.do(http.MethodPost, "/v1/request", map[string]any{"input": "I need a refund for last month", "user_id": "ann"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	first := r.obj(t)
	assert.NotEqual(t, "classifier_error", first["reason"], "%s", r)
	ready := p.as("").do(http.MethodGet, "/health/ready", nil)
	assert.Equal(t, http.StatusOK, ready.status, "%s", ready)
	assert.Equal(t, "ready", ready.obj(t)["status"], "%s", ready)
	agent, _ := first["agent_id"].(string)
	require.NotEmpty(t, agent, "%s", r)
	assert.Contains(t, []any{"route", "fallback"}, first["decision"], "%s", r)
	sid, _ := first["session_id"].(string)
	require.NotEmpty(t, sid, "%s", r)
	assert.Contains(t, first["response"], "I need a refund for last month", "the agent's answer: %s", r)
	require.Len(t, a.requests(), 1)

	r = c.do(http.MethodPost, "/v1/request", map[string]any{"input": "it was on the 3rd", "user_id": "ann"})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	second := r.obj(t)
	assert.Equal(t, "session", second["reason"], "%s", r)
	assert.Equal(t, "route", second["decision"], "%s", r)
	assert.Equal(t, agent, second["agent_id"], "%s", r)
	assert.Equal(t, sid, second["session_id"], "%s", r)

	r = c.do(http.MethodGet, "/v1/sessions/"+sid, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	s := r.obj(t)
	assert.Equal(t, "active", s["status"])
	assert.Equal(t, agent, s["active_agent"])
	assert.Equal(t, "ann", s["user_id"])
	turns, _ := s["turn_history"].([]any)
	assert.Len(t, turns, 4)

	// Bad input and unknown sessions.
	c.do(http.MethodPost, "/v1/request", map[string]any{"input": ""}).requireError(t, http.StatusBadRequest, "invalid_argument")
	c.do(http.MethodGet, "/v1/sessions/00000000-0000-4000-8000-000000000000", nil).requireError(t, http.StatusNotFound, "not_found")

	// DELETE closes it abandoned.
	r = c.do(http.MethodDelete, "/v1/sessions/"+sid, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Equal(t, "abandoned", r.obj(t)["status"])
	p.stop()
}

// TestE2ERoutingAPIAgents: a serve with no agent directory routes among
// agents registered with POST /v1/agents, from the first request after the
// registrations; the second turn's POST /task carries the conversation and
// the user; an agent registered later is routed to within seconds while
// requests keep being answered.
func TestE2ERoutingAPIAgents(t *testing.T) {
	t.Parallel()
	a := newAgents(t)
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{"--allow-private-endpoints"}})
	c := p.client()
	ready := p.as("").do(http.MethodGet, "/health/ready", nil)
	assert.Equal(t, http.StatusOK, ready.status, "an empty mesh is ready: %s", ready)
	for _, ag := range []map[string]any{
		{"name": "general", "description": "Answers anything else.", "capabilities": []string{"general"}, "isDefault": true,
			"examples": []string{"hello there", "tell me a joke", "what can you do"}},
		{"name": "billing", "description": "Explains invoices and refunds.", "capabilities": []string{"billing"},
			"examples": []string{"I need a refund for last month", "why was I charged twice", "send me my invoice"}},
		{"name": "password", "description": "Resets passwords.", "capabilities": []string{"password-reset"},
			"examples": []string{"I forgot my password", "reset my password please", "my account is locked"}},
	} {
		ag["endpoint"] = a.url("/sync")
		r := c.do(http.MethodPost, "/v1/agents", ag)
		require.Equal(t, http.StatusCreated, r.status, "%s", r)
	}
	ready = p.as("").do(http.MethodGet, "/health/ready", nil)
	assert.Equal(t, http.StatusOK, ready.status, "registrations do not make it unready: %s", ready)

	user := map[string]any{"user_id": "ann", "employee_id": "E1001", "display_name": "Ann Lee"}
	ask := func(input string, who map[string]any) map[string]any {
		t.Helper()
		body := map[string]any{"input": input}
		for k, v := range who {
			body[k] = v
		}
		r := c.do(http.MethodPost, "/v1/request", body)
		require.Equal(t, http.StatusOK, r.status, "%s", r)
		return r.obj(t)
	}
	first := ask("I need a refund for last month", user)
	assert.Equal(t, "billing", first["agent_id"], "%v", first)
	assert.Equal(t, "route", first["decision"], "%v", first)
	sid, _ := first["session_id"].(string)
	require.NotEmpty(t, sid)
	second := ask("it was on the 3rd", user)
	assert.Equal(t, "session", second["reason"], "%v", second)
	assert.Equal(t, "billing", second["agent_id"], "%v", second)

	got := a.requests()
	require.Len(t, got, 2)
	tr := got[1]
	assert.Equal(t, "it was on the 3rd", tr.Task)
	require.NotNil(t, tr.Session, "the routed POST /task carries the session")
	assert.Equal(t, sid, tr.Session["id"])
	turns, _ := tr.Session["turns"].([]any)
	require.GreaterOrEqual(t, len(turns), 2, "%v", tr.Session)
	firstTurn, _ := turns[0].(map[string]any)
	assert.Equal(t, "user", firstTurn["role"], "%v", turns)
	assert.Equal(t, "I need a refund for last month", firstTurn["content"], "%v", turns)
	assert.Equal(t, map[string]any{"id": "ann", "employeeId": "E1001", "displayName": "Ann Lee"}, tr.User)

	// A new agent: routed to within 5 s; meanwhile every request is
	// answered, never with classifier_error.
	r := c.do(http.MethodPost, "/v1/agents", map[string]any{
		"name": "travel", "description": "Books trips.", "capabilities": []string{"travel"}, "endpoint": a.url("/sync"),
		"examples": []string{"book a flight to Berlin", "I need a hotel in Rome", "find me a train to Lyon"},
	})
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	start := time.Now()
	for {
		out := ask("book a flight to Paris", nil)
		assert.NotEqual(t, "classifier_error", out["reason"], "%v", out)
		if out["agent_id"] == "travel" {
			break
		}
		require.Less(t, time.Since(start), 5*time.Second, "the new agent is not routed to yet: %v", out)
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the new agent was routed to %v after its registration", time.Since(start))
	p.stop()
}
