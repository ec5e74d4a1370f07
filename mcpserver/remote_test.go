package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
)

// remoteMesh stands for a mesh the tools reach over the network: its
// search takes a context, and its failures carry the other side's code.
type remoteMesh struct {
	gotCtx chan context.Context
	err    error
}

type codedErr struct{ code, msg string }

func (e *codedErr) Error() string                { return e.msg }
func (e *codedErr) Describe() (code, msg string) { return e.code, e.msg }

func (m *remoteMesh) Search(string, *discovery.Query) ([]discovery.Result, error) {
	panic("a ContextSearcher is called through SearchContext")
}

func (m *remoteMesh) SearchContext(ctx context.Context, query string, q *discovery.Query) ([]discovery.Result, error) {
	m.gotCtx <- ctx
	return nil, m.err
}

func (m *remoteMesh) Register(context.Context, registry.Agent) (registry.Agent, bool, error) {
	return registry.Agent{}, false, m.err
}

func (m *remoteMesh) List(context.Context, registry.ListOptions) (registry.Page, error) {
	return registry.Page{}, m.err
}

func (m *remoteMesh) Delete(context.Context, string) error { return m.err }

func (m *remoteMesh) Delegate(context.Context, delegation.Request) (delegation.Record, error) {
	return delegation.Record{}, m.err
}

func (m *remoteMesh) Get(context.Context, string) (delegation.Record, error) {
	return delegation.Record{}, m.err
}

func (m *remoteMesh) Wait(context.Context, string) (delegation.Record, error) {
	return delegation.Record{}, m.err
}

// TestContextSearcher: a searcher that does I/O gets the tool call's
// context.
func TestContextSearcher(t *testing.T) {
	m := &remoteMesh{gotCtx: make(chan context.Context, 1)}
	srv, err := mcpserver.New(m, m, m, nil)
	require.NoError(t, err)
	cs := connect(t, srv)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mesh_discover", Arguments: map[string]any{"query": "budget"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	seen := <-m.gotCtx
	assert.NotEqual(t, context.Background(), seen, "the call's own context, not a background one")
}

// TestCodedErrorsKeepTheirCode: an error carrying its own code (another
// mesh's reply) becomes an isError result with that code and message,
// even when no package of this mesh knows the code.
func TestCodedErrorsKeepTheirCode(t *testing.T) {
	m := &remoteMesh{gotCtx: make(chan context.Context, 1), err: &codedErr{code: "rate_limited", msg: "over the token's budget; retry in 3s"}}
	srv, err := mcpserver.New(m, m, m, nil)
	require.NoError(t, err)
	cs := connect(t, srv)
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"mesh_discover", map[string]any{"query": "budget"}},
		{"mesh_list_agents", map[string]any{}},
		{"mesh_unregister", map[string]any{"name": "x"}},
		{"mesh_delegate", map[string]any{"targetName": "x", "task": "t"}},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: call.tool, Arguments: call.args})
		require.NoError(t, err, call.tool)
		require.True(t, res.IsError, call.tool)
		text := res.Content[0].(*mcp.TextContent).Text
		assert.True(t, strings.HasPrefix(text, "rate_limited: over the token's budget; retry in 3s"), "%s: %s", call.tool, text)
	}
}
