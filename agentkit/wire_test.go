package agentkit_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/agentkit"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// TestTheMeshsTask sends a routed message with the mesh's own http
// transport, so that Task, Session, Turn and User are checked against the
// body the mesh encodes (delegation's types of it), not against a copy
// of it: a field the mesh renames or drops fails here.
func TestTheMeshsTask(t *testing.T) {
	t.Parallel()
	got := make(chan agentkit.Task, 1)
	a, err := agentkit.New(func(_ context.Context, t agentkit.Task) (agentkit.Reply, error) {
		got <- t
		return agentkit.Reply{Result: "done", WorkflowComplete: true, WorkflowState: map[string]any{"step": "two"}}, nil
	}, &agentkit.Options{Token: "agent-token"})
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	defer srv.Close()

	msg := delegation.Message{
		DelegationID: "d1", SourceAgent: "front", Task: "it was on the 3rd",
		Context:     map[string]any{"depth": 2, "chain": []string{"front"}, "tenant": "acme"},
		CallbackURL: "http://mesh/v1/delegations/d1/result?token=x",
		Turn: &delegation.Turn{
			UserID: "ann", EmployeeID: "e7", DisplayName: "Ann", Locale: "fr-CA", EntryPoint: "slack",
			SessionID: "s1", WorkflowState: map[string]any{"step": "one"}, Metadata: map[string]any{"channel": "c1"},
			History: []delegation.TurnEntry{
				{Role: "user", Content: "refund", Timestamp: "2025-06-03T09:14:07Z"},
				{Role: "agent", Content: "which day?", Timestamp: "2025-06-03T09:14:09Z", Agent: "billing"},
			},
		},
	}
	rec := registry.Agent{Name: "x", Endpoint: srv.URL + "/task", Protocol: registry.ProtocolHTTP,
		Auth: &registry.Auth{Type: registry.AuthBearer, Token: "agent-token"}}
	reply, err := delegation.NewHTTPTransport(nil).Send(t.Context(), rec, msg)
	require.NoError(t, err)

	task := <-got
	assert.Equal(t, agentkit.Task{
		DelegationID: "d1", Task: "it was on the 3rd",
		Context:     map[string]any{"depth": float64(2), "chain": []any{"front"}, "tenant": "acme"},
		CallbackURL: "http://mesh/v1/delegations/d1/result?token=x",
		Session: &agentkit.Session{ID: "s1", WorkflowState: map[string]any{"step": "one"}, Turns: []agentkit.Turn{
			{Role: "user", Content: "refund", Time: "2025-06-03T09:14:07Z"},
			{Role: "agent", Content: "which day?", Time: "2025-06-03T09:14:09Z", Agent: "billing"},
		}},
		User:   &agentkit.User{ID: "ann", EmployeeID: "e7", DisplayName: "Ann"},
		Locale: "fr-CA", EntryPoint: "slack", Metadata: map[string]any{"channel": "c1"},
	}, task)
	assert.Equal(t, 2, task.Depth())
	assert.Equal(t, []string{"front"}, task.Chain())

	// The reply's fields are the ones the mesh reads.
	assert.JSONEq(t, `"done"`, string(reply.Result))
	require.NotNil(t, reply.Response)
	assert.True(t, reply.Response.WorkflowComplete)
	assert.Equal(t, map[string]any{"step": "two"}, reply.Response.WorkflowState)
}
