package main

import (
	"net/http"
	"testing"

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
