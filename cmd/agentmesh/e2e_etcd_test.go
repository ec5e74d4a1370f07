package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/etcdtest"
)

// TestE2EEtcdReplicas: two `serve` processes over one etcd (an embedded
// server here; docs/DEPLOYMENT.md#several-replicas-on-etcd): an agent registered on one replica is found by
// discovery on the other; unregistered there, it is gone from the first.
// Both stop cleanly.
func TestE2EEtcdReplicas(t *testing.T) {
	t.Parallel()
	spec := serveSpec{token: "t", args: []string{"--store", "etcd", "--etcd-endpoints", startEtcd(t)}}
	a, b := startServe(t, spec), startServe(t, spec)
	a.stderr.wait(t, time.Second, "the etcd store", func(l string) bool {
		return strings.Contains(l, `"msg":"store opened"`) && strings.Contains(l, `"store":"etcd"`)
	})

	r := a.client().do("POST", "/v1/agents", agentJSON("travel-agent", "https://travel.example.com/task", "flights", "hotels"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)

	discovered := func(p *meshProc) bool {
		r := p.client().do("GET", "/v1/discover?query=book+flights+and+hotels", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r)
		for _, res := range r.list(t) {
			if res["agent"].(map[string]any)["name"] == "travel-agent" {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return discovered(b) }, 10*time.Second, 50*time.Millisecond,
		"the other replica must discover the agent")
	r = b.client().do("GET", "/v1/agents/travel-agent", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Equal(t, "api", r.obj(t)["source"])

	r = b.client().do("DELETE", "/v1/agents/travel-agent", nil)
	require.Less(t, r.status, 300, "%s", r)
	require.Eventually(t, func() bool {
		return a.client().do("GET", "/v1/agents/travel-agent", nil).status == http.StatusNotFound && !discovered(a)
	}, 10*time.Second, 50*time.Millisecond, "the first replica must drop the agent unregistered on the other")

	a.stop()
	b.stop()
}

// TestE2EStdioEtcd: the stdio MCP server runs on the etcd store with
// --store etcd --etcd-endpoints (or MESH_STORE and MESH_ETCD_ENDPOINTS):
// an agent registered through it is discovered by a `serve` replica on the
// same etcd, and one registered on the replica is listed by a stdio server
// configured through the environment.
func TestE2EStdioEtcd(t *testing.T) {
	t.Parallel()
	endpoints := startEtcd(t)
	p := startServe(t, serveSpec{token: "t", args: []string{"--store", "etcd", "--etcd-endpoints", endpoints}})

	s := startStdio(t, nil, "--store", "etcd", "--etcd-endpoints", endpoints)
	out := callTool(t, s.cs, "mesh_register", map[string]any{
		"name": "budget-agent", "description": "Returns budgets and cost centers of departments.",
		"capabilities": []string{"budget", "cost-center"}, "endpoint": "https://budget.example.com/task",
	})
	assert.Equal(t, true, out["created"])
	require.Eventually(t, func() bool {
		r := p.client().do("GET", "/v1/discover?query=budget+of+engineering", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r)
		for _, res := range r.list(t) {
			if res["agent"].(map[string]any)["name"] == "budget-agent" {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the serve replica must discover the agent registered over stdio")
	s.close(t)

	r := p.client().do("POST", "/v1/agents", agentJSON("travel-agent", "https://travel.example.com/task", "flights", "hotels"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	s = startStdio(t, []string{"MESH_STORE=etcd", "MESH_ETCD_ENDPOINTS=" + endpoints})
	out = callTool(t, s.cs, "mesh_list_agents", map[string]any{})
	var names []string
	for _, a := range out["agents"].([]any) {
		names = append(names, a.(map[string]any)["name"].(string))
	}
	assert.ElementsMatch(t, []string{"budget-agent", "travel-agent"}, names)
	s.close(t)
	p.stop()
}

// startEtcd starts an embedded etcd for the test and returns its client
// endpoints as --etcd-endpoints takes them. It stops after the test's
// processes (cleanups run last first).
func startEtcd(t *testing.T) string {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return strings.Join(srv.Endpoints, ",")
}
