package client_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

func routingRequest(input string) routing.Request { return routing.Request{Input: input} }

// TestRouteAndSessions: a message is routed and opens a session for the
// user; the session is read, closed, and resumed in a new one; each
// refusal matches the routing or session sentinel.
func TestRouteAndSessions(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	m.register(agentRecord("finance", syncAgent(t).url(), "budget"))

	_, err := m.c.Route(ctx, routingRequest("hello there"))
	assert.ErrorIs(t, err, routing.ErrNoDefaultAgent, "nothing confident and no default agent")

	help := agentRecord("helpdesk", syncAgent(t).url(), "help")
	help.IsDefault = true
	m.register(help)

	resp, err := m.c.Route(ctx, routing.Request{Input: "What is the budget?", UserID: "u1", Locale: "en", Metadata: map[string]any{"k": "v"}})
	require.NoError(t, err)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, routing.ActionRoute, resp.Decision)
	assert.Contains(t, resp.Response, "What is the budget?")
	require.NotEmpty(t, resp.SessionID)
	sid := resp.SessionID

	s, err := m.c.Session(ctx, sid)
	require.NoError(t, err)
	assert.Equal(t, sid, s.ID)
	assert.Equal(t, "u1", s.UserID)
	assert.Equal(t, session.StatusActive, s.Status)
	assert.Equal(t, "finance", s.ActiveAgent)
	assert.Len(t, s.TurnHistory, 2)
	assert.Equal(t, "v", s.Metadata["k"])

	closed, err := m.c.CloseSession(ctx, sid)
	require.NoError(t, err)
	assert.Equal(t, session.StatusAbandoned, closed.Status)
	_, err = m.c.CloseSession(ctx, sid)
	assert.ErrorIs(t, err, session.ErrNotActive)

	fresh, err := m.c.ResumeSession(ctx, sid)
	require.NoError(t, err)
	assert.NotEqual(t, sid, fresh.ID)
	assert.Equal(t, session.StatusActive, fresh.Status)
	assert.Equal(t, "u1", fresh.UserID)

	_, err = m.c.Session(ctx, "6f1c2a7e-0000-4000-8000-000000000000")
	assert.ErrorIs(t, err, session.ErrNotFound)
	_, err = m.c.ResumeSession(ctx, "6f1c2a7e-0000-4000-8000-000000000000")
	assert.ErrorIs(t, err, session.ErrNotFound)

	_, err = m.c.Route(ctx, routingRequest("   "))
	assert.ErrorIs(t, err, routing.ErrInvalidRequest)
	_, err = m.c.Route(ctx, routing.Request{Input: "x", SessionID: "not-a-uuid"})
	assert.ErrorIs(t, err, routing.ErrInvalidRequest)

	_, err = m.client(readToken, nil).Route(ctx, routingRequest("budget?"))
	assert.ErrorIs(t, err, client.ErrPermissionDenied)
}

// TestRouteUnavailable: when every agent, the default included, fails,
// Route is routing.ErrUnavailable with the server's Retry-After, and is
// not retried.
func TestRouteUnavailable(t *testing.T) {
	m := newMesh(t, meshConfig{})
	ctx := ctxT(t)
	broken := failingAgent(t)
	m.register(agentRecord("broken", broken.url(), "weather"))
	help := agentRecord("helpdesk", broken.url(), "help")
	help.IsDefault = true
	m.register(help)

	_, err := m.c.Route(ctx, routing.Request{Input: "it is broken", UserID: "u2"})
	require.ErrorIs(t, err, routing.ErrUnavailable)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 503, e.Status)
	assert.GreaterOrEqual(t, e.RetryAfter, time.Second)
	assert.Len(t, m.seen("POST /v1/request"), 1, "a 503 of POST /v1/request is not retried")
}
