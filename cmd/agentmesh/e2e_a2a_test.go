package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
)

// TestE2EAgentsImport registers an A2A agent from its Agent Card through
// `agentmesh agents import` against a running server: the card's URL is
// fetched and its agent registered with protocol a2a
// (docs/AGENTS.md#a2a-agents, docs/API.md#agents).
func TestE2EAgentsImport(t *testing.T) {
	t.Parallel()
	card := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/card.json" {
			http.NotFound(w, r)
			return
		}
		c := a2acard.MeshCard("http://"+r.Host, "1.0.0")
		c.Name = "Remote Planner"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	}))
	defer card.Close()
	cardURL := card.URL + "/card.json"

	p := startServe(t, serveSpec{token: "import-token", args: []string{"--allow-private-endpoints"}})
	env := []string{"MESH_URL=" + p.url, "MESH_TOKEN=import-token"}

	r := runCLI(t, env, "", "agents", "import", cardURL)
	require.Equal(t, 0, r.code, "%s", r)
	var a map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &a), r.stdout)
	assert.Equal(t, "remote-planner", a["name"])
	assert.Equal(t, "a2a", a["protocol"])
	assert.NotEmpty(t, a["capabilities"])

	r = runCLI(t, env, "", "agents", "import", card.URL+"/missing")
	assert.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "card_fetch_failed")
	r = runCLI(t, env, "", "agents", "import")
	assert.Equal(t, 2, r.code, "%s", r)

	got := p.client().do(http.MethodGet, "/v1/agents/remote-planner", nil)
	require.Equal(t, http.StatusOK, got.status, "%s", got)
}
