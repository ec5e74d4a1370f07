package httpserver_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
)

// Routes whose body carries nothing take an empty body or {}; a field,
// known nowhere, is refused like any unknown field (400, nothing done),
// not ignored.
func TestBodylessRoutesRefuseFields(t *testing.T) {
	reloads := 0
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.Reload = func(context.Context) (any, error) { reloads++; return map[string]int{"agents": 0}, nil }
	}})
	e.register(agentJSON("alpha", "http://127.0.0.1:9/task"))
	before, err := e.reg.Get(t.Context(), "alpha")
	require.NoError(t, err)

	for _, body := range []any{map[string]any{"bogus": 1}, "[1]", "{"} {
		er := expectError(t, e.post("/v1/agents/alpha/heartbeat", registerToken, body), http.StatusBadRequest, "invalid_argument")
		assert.NotEmpty(t, er.Error)
		expectError(t, e.post("/v1/delegations/00000000-0000-4000-8000-000000000000/cancel", delegateToken, body), http.StatusBadRequest, "invalid_argument")
		expectError(t, e.post("/v1/admin/reload", adminToken, body), http.StatusBadRequest, "invalid_argument")
	}
	er := expectError(t, e.post("/v1/agents/alpha/heartbeat", registerToken, map[string]any{"ttlSeconds": 5}), http.StatusBadRequest, "invalid_argument")
	assert.Contains(t, er.Error, "ttlSeconds", "the message names the field")
	after, err := e.reg.Get(t.Context(), "alpha")
	require.NoError(t, err)
	assert.Equal(t, before.LastSeen, after.LastSeen, "a refused heartbeat does nothing")
	assert.Zero(t, reloads, "a refused reload does nothing")

	// An empty body and {} are fine.
	for _, body := range []any{nil, "{}", " {} \n"} {
		r := e.post("/v1/agents/alpha/heartbeat", registerToken, body)
		require.Equal(t, http.StatusOK, r.Status, "%v: %s", body, r.Body)
		var a registry.Agent
		r.JSON(t, &a)
		assert.Equal(t, "alpha", a.Name)
	}
}
