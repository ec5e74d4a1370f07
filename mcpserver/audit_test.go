package mcpserver_test

import (
	"context"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// The registry's write hook sees MCP registrations as done through MCP,
// refused ones included, with the origin the caller's context carried.
func TestToolWritesCarryTheirOrigin(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	var mu sync.Mutex
	var got []audit.Entry
	reg, engine, del := newCore(t, store, registry.Options{OnWrite: func(ctx context.Context, w registry.Write) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, audit.RegistryEntry(ctx, w))
	}}, delegation.Options{})
	srv, err := mcpserver.New(reg, engine, del, nil)
	require.NoError(t, err)
	cs := connect(t, srv)

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		return res
	}
	agent := map[string]any{"name": "finance", "description": "Budgets.", "capabilities": []string{"budget"}, "endpoint": "http://127.0.0.1:9/task"}
	require.False(t, call(mcpserver.ToolRegister, agent).IsError)
	require.True(t, call(mcpserver.ToolUnregister, map[string]any{"name": "nobody"}).IsError)
	require.False(t, call(mcpserver.ToolUnregister, map[string]any{"name": "finance"}).IsError)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 3)
	assert.Equal(t, audit.Entry{Action: audit.ActionAgentRegister, Target: "finance", Outcome: audit.OutcomeSuccess,
		Details: map[string]string{"via": "mcp", "created": "true"}}, got[0])
	assert.Equal(t, audit.OutcomeDenied, got[1].Outcome)
	assert.Equal(t, "not_found", got[1].Code)
	assert.Equal(t, "mcp", got[1].Details["via"])
	assert.Equal(t, audit.ActionAgentUnregister, got[2].Action)
	assert.Equal(t, audit.OutcomeSuccess, got[2].Outcome)
}
