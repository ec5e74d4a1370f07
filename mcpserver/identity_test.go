package mcpserver_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/mcpserver"
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
	return routing.Response{RequestID: "r1", Decision: routing.ActionRoute, Response: "ok"}, nil
}

// mesh_route and handle_message pass slack_user_id to the router.
func TestRoutingToolsSlackUserID(t *testing.T) {
	ctx := context.Background()
	rr := &recRouter{}
	e := newEnv(t, &mcpserver.Options{Router: rr})
	for tool, args := range map[string]map[string]any{
		mcpserver.ToolRoute:         {"input": "budget?", "slack_user_id": "U024BE7LH"},
		mcpserver.ToolHandleMessage: {"raw_input": "budget?", "slack_user_id": "U024BE7LH", "employee_id": "E1"},
	} {
		res, err := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err, tool)
		require.False(t, res.IsError, "%s: %v", tool, res.Content)
	}
	require.Len(t, rr.reqs, 2)
	for _, req := range rr.reqs {
		assert.Equal(t, "U024BE7LH", req.SlackUserID)
	}

	// The schema bounds it.
	long := "U" + strings.Repeat("A", routing.MaxSlackUserIDLen)
	res, err := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRoute, Arguments: map[string]any{"input": "x", "slack_user_id": long}})
	require.True(t, err != nil || res.IsError, "an over-long slack_user_id is refused")
	assert.Len(t, rr.reqs, 2, "before the router")
}
