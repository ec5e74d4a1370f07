package httpserver_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/routing"
)

// recRouter records the requests it routes and answers them.
type recRouter struct {
	mu   sync.Mutex
	reqs []routing.Request
}

func (r *recRouter) Handle(_ context.Context, req routing.Request) (routing.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return routing.Response{RequestID: "r1", Decision: routing.ActionRoute}, nil
}

// POST /v1/request takes slack_user_id, as a Slack front-end sends it.
func TestRouteRequestSlackUserID(t *testing.T) {
	rr := &recRouter{}
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) { o.Router = rr }})
	r := e.post("/v1/request", routeToken, map[string]any{"input": "budget?", "slack_user_id": "U024BE7LH", "user_id": "ada"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, rr.reqs, 1)
	assert.Equal(t, "U024BE7LH", rr.reqs[0].SlackUserID)
	assert.Equal(t, "ada", rr.reqs[0].UserID)

	// The router validates it: a real one refuses a malformed id.
	re := newRoutingEnv(t)
	er := expectError(t, re.post("/v1/request", routeToken, map[string]any{"input": "budget?", "slack_user_id": "not-slack"}), http.StatusBadRequest, "invalid_argument")
	assert.Contains(t, er.Error, "slack_user_id")
}
