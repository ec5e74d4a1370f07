package httpserver_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
)

// A discovery query longer than discovery.MaxQueryRunes characters is
// refused with 400 invalid_argument on every route that searches: GET and
// POST /v1/discover, and POST /v1/delegate by query (nothing is sent).
// One at the limit is searched.
func TestDiscoveryQueryLengthLimit(t *testing.T) {
	var calls atomic.Int32
	e := newEnv(t, envConfig{})
	agent := agentServer(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte(`{"result":"ok"}`))
	})
	e.register(agentJSON("finance", agent.URL+"/task", "budget"))

	atLimit := "budget" + strings.Repeat(" ", discovery.MaxQueryRunes-len("budget"))
	over := atLimit + "x"

	var res []discovery.Result
	r := e.post("/v1/discover", readToken, map[string]any{"query": atLimit})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r.JSON(t, &res)
	require.Len(t, res, 1)
	assert.Equal(t, "finance", res[0].Agent.Name)

	for name, r := range map[string]*response{
		"GET /v1/discover":  e.get("/v1/discover?query="+url.QueryEscape(over), readToken),
		"POST /v1/discover": e.post("/v1/discover", readToken, map[string]any{"query": over}),
		"POST /v1/delegate": e.post("/v1/delegate", delegateToken, map[string]any{"query": over, "task": "t"}),
	} {
		t.Run(name, func(t *testing.T) {
			er := expectError(t, r, http.StatusBadRequest, "invalid_argument")
			assert.Contains(t, er.Error, "longer than 10000 characters")
		})
	}
	assert.Zero(t, calls.Load(), "a refused query sends nothing")
}
