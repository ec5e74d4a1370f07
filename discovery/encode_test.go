package discovery_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/registry"
)

// trickyAgents have every kind of string encoding/json escapes, labels,
// resources, examples and optional fields.
func trickyAgents() []registry.Agent {
	threshold := 0.25
	at := time.Now().UTC().Add(-time.Minute) // fresh: the TTL below has not lapsed
	return []registry.Agent{
		{
			Name: "html-agent", DisplayName: "<b>Invoices</b> & \"quotes\"",
			Description:  "Approves invoices \u2028 for <script> teams \\ with\ttabs\nand lines \x01 and \u2029 ☃ 日本語",
			Capabilities: []string{"invoice-approval", "a&b<c>"}, Examples: []string{"approve invoice 42"},
			Resources: []registry.Resource{{URI: "file:///invoices/", Description: "all <invoices>"}},
			Endpoint:  "https://html.example.com/task?a=1&b=2", Protocol: registry.ProtocolHTTP,
			ConfidenceThreshold: &threshold, Labels: map[string]string{"team": "finance", "z": "<>", "a": "1"},
			TTLSeconds: 3600, RegisteredAt: at, UpdatedAt: at.Add(time.Second), LastSeen: at.Add(2 * time.Second),
			Auth: &registry.Auth{Type: "bearer", Token: "secret-token"},
		},
		{
			Name: "bad-utf8-agent", Description: "invoice \xff\xfe totals",
			Capabilities: []string{"invoice-totals"}, Endpoint: "https://bad.example.com/task",
		},
		{
			Name: "mcp-invoice", Description: "Invoice questions over MCP", Capabilities: []string{"invoice"},
			Endpoint: "https://mcp.example.com/mcp", Protocol: registry.ProtocolMCP, IsDefault: true,
			ClarificationRequired: true, ClarificationContext: "which invoice?",
		},
	}
}

// TestAppendSearchJSONMatchesMarshal checks that the fast encoding is
// byte for byte what json.Marshal makes of Search's results, for both
// scorers, filters, resources, limits and unavailable agents.
func TestAppendSearchJSONMatchesMarshal(t *testing.T) {
	unavailable := map[string]bool{}
	agents := append(benchCorpus(2000), trickyAgents()...)
	for i, a := range agents {
		if i%7 == 0 {
			unavailable[a.Name] = true
		}
	}
	e := discovery.New(&discovery.Options{Available: func(name string) bool { return !unavailable[name] }})
	e.Reset(agents)

	queries := append(benchQueries(200, 1, 4), "invoice", "approve <invoices> & totals", "invoice ☃")
	options := []*discovery.Query{
		nil,
		{Scorer: discovery.ScorerOverlap},
		{Limit: 3},
		{Limit: discovery.MaxLimit, MinScore: 0.1},
		{IncludeUnavailable: true},
		{RequiredResources: []string{"file:///invoices/2026/"}},
		{Labels: map[string]string{"team": "finance"}},
		{Protocol: registry.ProtocolMCP},
	}
	nonEmpty := 0
	for _, query := range queries {
		for i, q := range options {
			t.Run(fmt.Sprintf("%s/%d", query, i), func(t *testing.T) {
				res, err := e.Search(query, q)
				require.NoError(t, err)
				want, err := json.Marshal(res)
				require.NoError(t, err)
				got, err := e.AppendSearchJSON([]byte("prefix:"), query, q)
				require.NoError(t, err)
				assert.Equal(t, "prefix:"+string(want), string(got))

				// The text copy: the same JSON, as encoding/json writes it
				// inside a string.
				quoted, err := json.Marshal(string(want))
				require.NoError(t, err)
				got, text, err := e.AppendSearchJSONText([]byte("prefix:"), []byte("text:"), query, q)
				require.NoError(t, err)
				assert.Equal(t, "prefix:"+string(want), string(got))
				assert.Equal(t, "text:"+string(quoted[1:len(quoted)-1]), string(text))
				if len(res) > 0 {
					nonEmpty++
				}
			})
		}
	}
	require.Greater(t, nonEmpty, len(queries)*len(options)/2, "most searches return results")

	got, err := e.AppendSearchJSON(nil, "approve invoices", &discovery.Query{RequiredResources: []string{"file:///invoices/2026/"}})
	require.NoError(t, err)
	assert.Contains(t, string(got), `"matchedResources":[{"uri":"file:///invoices/"`)
	assert.NotContains(t, string(got), "secret-token", "auth tokens are never encoded")
}

// TestAppendSearchJSONFollowsUpdates checks that a changed record is
// encoded again, including a heartbeat that changes only lastSeen.
func TestAppendSearchJSONFollowsUpdates(t *testing.T) {
	a := trickyAgents()[2]
	e := discovery.New(nil)
	e.Put(a)
	first, err := e.AppendSearchJSON(nil, "invoice", nil)
	require.NoError(t, err)

	a.LastSeen = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) // same indexed content
	e.Put(a)
	second, err := e.AppendSearchJSON(nil, "invoice", nil)
	require.NoError(t, err)
	assert.NotEqual(t, string(first), string(second))
	assert.Contains(t, string(second), `"lastSeen":"2027-01-01T00:00:00Z"`)
	_, text, err := e.AppendSearchJSONText(nil, nil, "invoice", nil)
	require.NoError(t, err)
	assert.Contains(t, string(text), `\"lastSeen\":\"2027-01-01T00:00:00Z\"`, "the escaped copy follows the record")

	a.Description = "Invoice questions and refunds over MCP" // re-indexed
	e.Put(a)
	third, err := e.AppendSearchJSON(nil, "refunds", nil)
	require.NoError(t, err)
	assert.Contains(t, string(third), "and refunds")

	require.True(t, e.Remove(a.Name))
	empty, err := e.AppendSearchJSON(nil, "invoice", nil)
	require.NoError(t, err)
	assert.Equal(t, "[]", string(empty))
}

func TestAppendSearchJSONErrors(t *testing.T) {
	e := newEngine(t, nil, seedAgents()...)
	got, err := e.AppendSearchJSON([]byte("x"), " !!! ", nil)
	require.ErrorIs(t, err, discovery.ErrEmptyQuery)
	assert.Equal(t, "x", string(got), "nothing appended on error")
	got, text, err := e.AppendSearchJSONText([]byte("x"), []byte("y"), " !!! ", nil)
	require.ErrorIs(t, err, discovery.ErrEmptyQuery)
	assert.Equal(t, "x", string(got))
	assert.Equal(t, "y", string(text))
	_, err = e.AppendSearchJSON(nil, "search", &discovery.Query{MinScore: 2})
	require.ErrorIs(t, err, discovery.ErrInvalidQuery)

	got, err = discovery.New(nil).AppendSearchJSON(nil, "search", nil)
	require.NoError(t, err)
	assert.Equal(t, "[]", string(got), "an empty engine gives an empty array")
}
