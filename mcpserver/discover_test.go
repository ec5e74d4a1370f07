package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
)

// plainSearcher hides the engine's own encoder, so that mesh_discover
// builds its result from discovery.Result values.
type plainSearcher struct{ e *discovery.Engine }

func (p plainSearcher) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	return p.e.Search(query, q)
}

// jsonSearcher encodes its results but writes no text copy of them, as a
// wrapper that forwards only AppendSearchJSON.
type jsonSearcher struct{ plainSearcher }

func (j jsonSearcher) AppendSearchJSON(dst []byte, query string, q *discovery.Query) ([]byte, error) {
	return j.e.AppendSearchJSON(dst, query, q)
}

// mesh_discover answers the same structured content whether the engine
// encodes it (its fast path) or the tool builds it from the results, for
// records with every field set, and the text content is that JSON.
func TestDiscoverFastPathMatches(t *testing.T) {
	e := newEnv(t, nil)
	threshold := 0.55
	_, _, err := e.reg.Register(context.Background(), registry.Agent{
		Name: "full", DisplayName: "Full <Agent> & co", Description: "Budgets, \"quoted\" and unicode: é ✓.",
		Capabilities: []string{"budget", "forecast"}, Examples: []string{"what is the budget?"},
		Resources: []registry.Resource{{URI: "https://erp.example.com/finance/*", Description: "ERP", Access: "read"}},
		Endpoint:  "http://127.0.0.1:9/task", Protocol: registry.ProtocolMCP,
		Auth:                &registry.Auth{Type: registry.AuthBearer, Token: "agent-secret"},
		ConfidenceThreshold: &threshold, ClarificationRequired: true, ClarificationContext: "which team?",
		Labels: map[string]string{"team": "fin", "tier": "gold"}, TTLSeconds: 300,
	})
	require.NoError(t, err)
	e.register("plain", "Budget numbers.", "budget")

	plain, err := mcpserver.New(e.reg, plainSearcher{e.engine}, e.del, nil)
	require.NoError(t, err)
	slow := connect(t, plain)

	for _, args := range []map[string]any{
		{"query": "budget"},
		{"query": "budget forecast", "limit": 1},
		{"query": "budget", "requiredResources": []string{"https://erp.example.com/finance/q3"}},
		{"query": "budget", "labels": map[string]string{"team": "fin"}},
		{"query": "nothing matches this"},
	} {
		fast, built := e.call(mcpserver.ToolDiscover, args), call(t, slow, mcpserver.ToolDiscover, args)
		require.False(t, fast.IsError, text(fast))
		require.False(t, built.IsError, text(built))
		a, err := json.Marshal(fast.StructuredContent)
		require.NoError(t, err)
		b, err := json.Marshal(built.StructuredContent)
		require.NoError(t, err)
		assert.JSONEq(t, string(b), string(a), "%v", args)
		assert.JSONEq(t, string(a), text(fast), "the text is the same JSON")
		assert.NotContains(t, string(a), "agent-secret")
	}
	var out mcpserver.DiscoverResult
	ok(t, e.call(mcpserver.ToolDiscover, map[string]any{"query": "budget"}), &out)
	require.Len(t, out.Results, 2)
	names := []string{out.Results[0].Agent.Name, out.Results[1].Agent.Name}
	assert.ElementsMatch(t, []string{"full", "plain"}, names)
	for _, m := range out.Results {
		if m.Agent.Name == "full" {
			assert.Equal(t, "bearer", m.Agent.Auth.Type, "the auth type, without its token")
			assert.Equal(t, "fin", m.Agent.Labels["team"])
		}
	}
}
