package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/httpserver"
)

// breakerEnv is a server with a breaker history, and an agent "flaky"
// whose endpoint is down (its breaker opens after five delegations) and
// whose credential is a token.
func breakerEnv(t *testing.T) (*env, *activity.Breakers) {
	t.Helper()
	hist := activity.NewBreakers(nil)
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) { o.BreakerHistory = hist }})
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens there any more
	flaky := agentJSON("flaky", down.URL+"/task")
	flaky["auth"] = map[string]any{"type": "bearer", "token": "flaky-agent-credential-93b1"}
	e.register(flaky)
	e.register(agentJSON("steady", "http://127.0.0.1:1/task"))
	return e, hist
}

func TestBreakerHistory(t *testing.T) {
	e, hist := breakerEnv(t)

	// No call yet: closed, no transition.
	r := e.get("/v1/agents/steady/breaker", readToken)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.JSONEq(t, `{"name":"steady","current":{"state":"closed","multiplier":1},"transitions":[],"dropped":0}`, string(r.Body))

	// Five failed delegations open flaky's breaker; the history holds
	// what the breakers reported (the mesh wires OnStateChange to it).
	for range breaker.DefaultFailureThreshold {
		d := e.post("/v1/delegate", delegateToken, map[string]any{"targetName": "flaky", "task": "x"})
		require.Equal(t, http.StatusOK, d.Status, "%s", d.Body)
	}
	require.Equal(t, breaker.StateOpen, e.breakers.Get("flaky").Snapshot().State)
	hist.Record("flaky", breaker.StateClosed, breaker.StateOpen)
	hist.Record("flaky", breaker.StateOpen, breaker.StateHalfOpen)
	hist.Record("flaky", breaker.StateHalfOpen, breaker.StateOpen)

	r = e.get("/v1/agents/flaky/breaker", readToken)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var got httpserver.BreakerHistoryResponse
	r.JSON(t, &got)
	assert.Equal(t, "flaky", got.Name)
	assert.Equal(t, breaker.StateOpen, got.Current.State)
	assert.True(t, got.Current.OpenUntil.After(time.Now()), "open until %s", got.Current.OpenUntil)
	require.Len(t, got.Transitions, 3)
	assert.Equal(t, []breaker.State{breaker.StateOpen, breaker.StateHalfOpen, breaker.StateOpen},
		[]breaker.State{got.Transitions[0].To, got.Transitions[1].To, got.Transitions[2].To}, "newest first")
	assert.Equal(t, breaker.StateHalfOpen, got.Transitions[0].From)
	assert.False(t, got.Transitions[0].At.Before(got.Transitions[2].At))
	assert.Zero(t, got.Dropped)

	// Never the agent's credential, whoever asks.
	for _, tok := range []string{readToken, adminToken} {
		r := e.get("/v1/agents/flaky/breaker", tok)
		require.Equal(t, http.StatusOK, r.Status)
		assert.NotContains(t, string(r.Body), "flaky-agent-credential-93b1")
		assert.NotContains(t, string(r.Body), "auth")
	}
}

func TestBreakerHistoryErrors(t *testing.T) {
	e, hist := breakerEnv(t)
	hist.Record("ghost", breaker.StateClosed, breaker.StateOpen) // not registered

	r := e.get("/v1/agents/flaky/breaker", "")
	expectError(t, r, http.StatusUnauthorized, "unauthenticated")
	assert.Equal(t, `Bearer realm="agentmesh"`, r.Header.Get("WWW-Authenticate"))
	expectError(t, e.get("/v1/agents/flaky/breaker", "not-a-token"), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.get("/v1/agents/flaky/breaker", routeToken), http.StatusForbidden, "permission_denied")

	// An agent that is not registered is 404, even with a history kept.
	nf := expectError(t, e.get("/v1/agents/ghost/breaker", readToken), http.StatusNotFound, "not_found")
	assert.Equal(t, "no agent is registered under this name", nf.Error)
	expectError(t, e.get("/v1/agents/nobody/breaker", readToken), http.StatusNotFound, "not_found")
	bad := expectError(t, e.get("/v1/agents/-bad/breaker", readToken), http.StatusBadRequest, "invalid_argument")
	assert.Contains(t, bad.Error, "invalid name")

	r = e.post("/v1/agents/flaky/breaker", adminToken, map[string]any{})
	expectError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")

	// Without a history the route is not served.
	plain := newEnv(t, envConfig{})
	plain.register(agentJSON("flaky", "http://127.0.0.1:1/task"))
	expectError(t, plain.get("/v1/agents/flaky/breaker", readToken), http.StatusNotFound, "not_found")
	assert.NotContains(t, plain.srv.Routes(), "GET /v1/agents/{name}/breaker")
	assert.Contains(t, e.srv.Routes(), "GET /v1/agents/{name}/breaker")
}
