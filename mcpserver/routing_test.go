package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// kwClassifier routes to the agent whose keyword occurs in the text at
// 0.9, else to def at 0.2.
type kwClassifier struct {
	rules map[string]string
	def   string
}

func (k kwClassifier) Classify(_ context.Context, text string) (routing.Classification, error) {
	for kw, agent := range k.rules {
		if strings.Contains(strings.ToLower(text), kw) {
			return routing.Classification{AgentID: agent, Confidence: 0.9, IntentSummary: kw, DetectedLanguage: "en", Entities: map[string]any{"topic": kw}}, nil
		}
	}
	return routing.Classification{AgentID: k.def, Confidence: 0.2, DetectedLanguage: "en", Entities: map[string]any{}}, nil
}

// recAgent is an http agent answering "<name>: <task>", recording tasks.
type recAgent struct {
	name  string
	srv   *httptest.Server
	mu    sync.Mutex
	tasks []string
}

func newRecAgent(t *testing.T, name string) *recAgent {
	a := &recAgent{name: name}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Task string `json:"task"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.tasks = append(a.tasks, body.Task)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": a.name + ": " + body.Task})
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *recAgent) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.tasks...)
}

// mesh is a registry, discovery engine and delegation client over
// memstore; with a router, also sessions and the MCP server over
// Streamable HTTP (the routing tools included).
type mesh struct {
	reg      *registry.Registry
	del      *delegation.Client
	sessions *session.Manager
	router   *routing.Router
	mcp      *httptest.Server
}

func newMesh(t *testing.T, withRouter bool, agents ...registry.Agent) *mesh {
	t.Helper()
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	reg, engine, del := newCore(t, store, registry.Options{}, delegation.Options{})
	for _, a := range agents {
		_, _, err := reg.Register(ctx, a)
		require.NoError(t, err)
	}
	m := &mesh{reg: reg, del: del}
	if !withRouter {
		return m
	}
	var err error
	m.sessions, err = session.NewManager(store, nil)
	require.NoError(t, err)
	m.router, err = routing.New(kwClassifier{rules: map[string]string{"budget": "finance"}, def: "helpdesk"}, reg, del, m.sessions, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.router.Close() })
	srv, err := mcpserver.New(reg, engine, del, &mcpserver.Options{
		Router:        m.router,
		RouteMetadata: func(context.Context) map[string]any { return map[string]any{"owner": "test"} },
	})
	require.NoError(t, err)
	h, err := mcpserver.HTTPHandler(srv, nil)
	require.NoError(t, err)
	m.mcp = httptest.NewServer(h)
	t.Cleanup(m.mcp.Close)
	return m
}

// TestTwoMeshes: mesh A registers mesh B as an mcp agent and delegates to
// it; B routes the task through its own router to its http agent, whose
// answer comes back to A as B's handle_message AgentResponse.
func TestTwoMeshes(t *testing.T) {
	ctx := context.Background()
	finance, helpdesk := newRecAgent(t, "finance"), newRecAgent(t, "helpdesk")
	b := newMesh(t, true,
		registry.Agent{Name: "finance", Description: "Budgets.", Capabilities: []string{"budget"}, Endpoint: finance.srv.URL + "/task"},
		registry.Agent{Name: "helpdesk", Description: "Anything else.", Capabilities: []string{"help"}, Endpoint: helpdesk.srv.URL + "/task", IsDefault: true},
	)
	a := newMesh(t, false, registry.Agent{Name: "mesh-b", Description: "Another mesh.", Capabilities: []string{"everything"},
		Endpoint: b.mcp.URL, Protocol: registry.ProtocolMCP})

	// A plain delegation: anonymous in B, routed on the task.
	rec, err := a.del.Delegate(ctx, delegation.Request{Target: "mesh-b", Task: "What is the budget?"})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusCompleted, rec.Status, "%s %s", rec.Code, rec.Error)
	require.NotNil(t, rec.Response)
	assert.Equal(t, "finance: What is the budget?", rec.Response.Content)
	assert.False(t, rec.Response.WorkflowComplete)
	assert.JSONEq(t, `"finance: What is the budget?"`, string(rec.Result))
	assert.Equal(t, []string{"What is the budget?"}, finance.got())

	// A routed turn with a user: B keeps its own session for the
	// employee, so the next message bypasses classification there.
	turn := &delegation.Turn{EmployeeID: "emp-7", DisplayName: "Ann", DetectedLanguage: "en",
		SessionID: "00000000-0000-4000-8000-000000000001", Metadata: map[string]any{"from": "mesh-a"}}
	rec, err = a.del.Delegate(ctx, delegation.Request{Target: "mesh-b", Task: "budget for 2027", Turn: turn})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusCompleted, rec.Status, "%s %s", rec.Code, rec.Error)
	assert.Equal(t, "finance: budget for 2027", rec.Response.Content)
	rec, err = a.del.Delegate(ctx, delegation.Request{Target: "mesh-b", Task: "and for 2028?", Turn: turn})
	require.NoError(t, err)
	require.Equal(t, delegation.StatusCompleted, rec.Status, "%s %s", rec.Code, rec.Error)
	assert.Equal(t, "finance: and for 2028?", rec.Response.Content, "session bypass in B")
	s, err := b.sessions.Active(ctx, "emp-7")
	require.NoError(t, err)
	assert.Equal(t, "finance", s.ActiveAgent)
	assert.Len(t, s.TurnHistory, 4)
	assert.Equal(t, "mesh-a", s.Metadata["from"])
	assert.Equal(t, "test", s.Metadata["owner"], "RouteMetadata is merged in")
	assert.Empty(t, helpdesk.got())
}

func TestRoutingTools(t *testing.T) {
	ctx := context.Background()
	finance := newRecAgent(t, "finance")
	b := newMesh(t, true, registry.Agent{Name: "finance", Description: "Budgets.", Capabilities: []string{"budget"}, Endpoint: finance.srv.URL + "/task"})
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.mcp.URL}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	for _, name := range []string{mcpserver.ToolRoute, mcpserver.ToolHandleMessage} {
		tl := byName[name]
		require.NotNil(t, tl, name)
		require.NotNil(t, tl.OutputSchema, name)
		assert.True(t, *tl.Annotations.OpenWorldHint, name)
		assert.False(t, tl.Annotations.ReadOnlyHint, name)
	}

	// mesh_route returns the routing Response.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRoute, Arguments: map[string]any{"input": "budget?", "user_id": "u1"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	var resp routing.Response
	b2, _ := json.Marshal(res.StructuredContent)
	require.NoError(t, json.Unmarshal(b2, &resp))
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, routing.ActionRoute, resp.Decision)
	assert.Equal(t, "finance: budget?", resp.Response)
	assert.NotEmpty(t, resp.SessionID)

	// No default agent and nothing confident: a coded tool error.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRoute, Arguments: map[string]any{"input": "hello"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "no_default_agent: "), "%v", res.Content[0])

	// Bad arguments.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRoute, Arguments: map[string]any{"input": "x", "session_id": "not-a-uuid"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "invalid_argument: "), "%v", res.Content[0])

	// handle_message: the AgentResponse as structured content and as a
	// JSON text block; unknown extra keys are accepted.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolHandleMessage, Arguments: map[string]any{
		"raw_input": "budget again", "employee_id": "u1", "session_id": "x", "request_id": "r1",
		"entities": map[string]any{}, "turn_history": []any{}, "workflow_state": map[string]any{}, "metadata": map[string]any{}, "extra": 1,
	}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	var ar mcpserver.AgentResponse
	b2, _ = json.Marshal(res.StructuredContent)
	require.NoError(t, json.Unmarshal(b2, &ar))
	assert.Equal(t, mcpserver.AgentResponse{Content: "finance: budget again"}, ar)
	require.Len(t, res.Content, 1)
	assert.JSONEq(t, `{"content":"finance: budget again","workflow_complete":false}`, res.Content[0].(*mcp.TextContent).Text)
}

func TestRoutingToolsAbsentWithoutRouter(t *testing.T) {
	e := newEnv(t, nil)
	tools, err := e.cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tl := range tools.Tools {
		assert.NotContains(t, []string{mcpserver.ToolRoute, mcpserver.ToolHandleMessage}, tl.Name)
	}
}
