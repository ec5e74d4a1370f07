package main

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricValue returns the value of the sample line "name{labels} value" in
// a Prometheus text exposition, and whether there is one.
func metricValue(text, series string) (string, bool) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v, true
		}
	}
	return "", false
}

// auditEntries reads GET /v1/audit with query q (admin token).
func auditEntries(t *testing.T, c *apiClientT, q string) []map[string]any {
	t.Helper()
	r := c.do("GET", "/v1/audit"+q, nil)
	require.Equal(t, 200, r.status, "%s", r)
	return r.list(t)
}

// findEntry returns the first (newest) entry with action and target.
func findEntry(es []map[string]any, action, target string) map[string]any {
	for _, e := range es {
		if e["action"] == action && e["target"] == target {
			return e
		}
	}
	return nil
}

// TestE2EObservability runs `agentmesh serve` with a bolt file, registers
// real agents, delegates to one that succeeds, one that fails and one that
// answers later, then scrapes /metrics for every documented metric
// (docs/OPERATIONS.md#metrics) and
// reads the audit log — also after a restart, since it is persisted.
func TestE2EObservability(t *testing.T) {
	t.Parallel()
	ag := newAgents(t)
	db := filepath.Join(t.TempDir(), "mesh.db")
	tokens := writeTemp(t, "tokens.yaml", tokensFile(""))
	spec := serveSpec{db: db, token: e2eMeshToken, args: []string{"--allow-private-endpoints", "--tokens-file", tokens}}
	p := startServe(t, spec)
	api := p.client()

	for name, path := range map[string]string{"ok-agent": "/sync", "failing-agent": "/fail", "later-agent": "/async"} {
		r := api.do("POST", "/v1/agents", agentJSON(name, ag.url(path), "observability"))
		require.Equal(t, 201, r.status, "%s", r)
	}
	p.as("e2e-registrar-token-0123456789").do("POST", "/v1/agents", agentJSON("metadata", "http://169.254.169.254/task", "x")).
		requireError(t, 400, "endpoint_not_allowed")
	p.as("wrong-token").do("GET", "/v1/agents", nil).requireError(t, 401, "unauthenticated")
	require.Equal(t, 200, api.do("GET", "/v1/discover?query=observability", nil).status)

	ok := api.do("POST", "/v1/delegate", map[string]any{"targetName": "ok-agent", "task": "sum it"}).obj(t)
	require.Equal(t, "completed", ok["status"])
	failed := api.do("POST", "/v1/delegate", map[string]any{"targetName": "failing-agent", "task": "sum it"}).obj(t)
	require.Equal(t, "failed", failed["status"])
	later := api.do("POST", "/v1/delegate", map[string]any{"targetName": "later-agent", "task": "sum it", "async": true}).obj(t)
	// The agent calls back at once: its callback may land before the
	// acceptance is recorded, and the reply is then already completed.
	require.Contains(t, []any{"accepted", "completed"}, later["status"])
	accepted := later["status"] == "accepted"
	select {
	case code := <-ag.callbacks:
		require.Equal(t, 200, code, "the callback was accepted")
	case <-time.After(10 * time.Second):
		t.Fatal("the async agent did not call back")
	}
	final := api.do("GET", "/v1/delegations/"+later["id"].(string)+"?wait=10s", nil).obj(t)
	require.Equal(t, "completed", final["status"])

	// Metrics: every name docs/OPERATIONS.md#metrics lists, and values that
	// follow what happened.
	text := string(p.as("").do("GET", "/metrics", nil).body)
	for _, name := range []string{
		"agentmesh_http_requests_total", "agentmesh_http_request_duration_seconds",
		"agentmesh_discover_duration_seconds", "agentmesh_delegations_total",
		"agentmesh_dispatch_duration_seconds", "agentmesh_dispatch_errors_total",
		"agentmesh_breaker_state", "agentmesh_routing_decisions_total",
		"agentmesh_agents", "agentmesh_sessions_active", "agentmesh_audit_dropped_total",
	} {
		assert.Contains(t, text, "# TYPE "+name+" ", "metric %s", name)
	}
	for series, want := range map[string]string{
		`agentmesh_delegations_total{agent="ok-agent",status="completed"}`:   "1",
		`agentmesh_delegations_total{agent="failing-agent",status="failed"}`: "1",
		`agentmesh_dispatch_duration_seconds_count{agent="ok-agent"}`:        "1",
		`agentmesh_agents{source="api"}`:                                     "3",
		`agentmesh_breaker_state{agent="ok-agent"}`:                          "0",
		`agentmesh_discover_duration_seconds_count`:                          "1",
		`agentmesh_sessions_active`:                                          "0",
		`agentmesh_audit_dropped_total`:                                      "0",
	} {
		got, found := metricValue(text, series)
		if assert.True(t, found, "no series %s in:\n%s", series, text) {
			assert.Equal(t, want, got, series)
		}
	}
	_, found := metricValue(text, `agentmesh_dispatch_errors_total{agent="failing-agent",code="`+failed["code"].(string)+`"}`)
	assert.True(t, found, "the failure's code")
	_, found = metricValue(text, `agentmesh_delegations_total{agent="later-agent",status="completed"}`)
	assert.True(t, found, "the async delegation's final status")
	_, found = metricValue(text, `agentmesh_dispatch_duration_seconds_count{agent="later-agent"}`)
	assert.True(t, found, "the async dispatch")
	if accepted {
		got, _ := metricValue(text, `agentmesh_delegations_total{agent="later-agent",status="accepted"}`)
		assert.Equal(t, "1", got, "accepted, then completed")
	}

	// The audit log: admin only; who, what, outcome.
	p.as(readerToken).do("GET", "/v1/audit", nil).requireError(t, 403, "permission_denied")
	es := auditEntries(t, api, "")
	reg := findEntry(es, "agent.register", "ok-agent")
	require.NotNil(t, reg, "%v", es)
	assert.Equal(t, "mesh_token", reg["actor"])
	assert.Equal(t, "success", reg["outcome"])
	refused := findEntry(es, "agent.register", "metadata")
	require.NotNil(t, refused)
	assert.Equal(t, "registrar", refused["actor"])
	assert.Equal(t, "denied", refused["outcome"])
	assert.Equal(t, "endpoint_not_allowed", refused["code"])
	del := findEntry(es, "delegation", "failing-agent")
	require.NotNil(t, del)
	assert.Equal(t, "mesh_token", del["actor"])
	assert.Equal(t, "failure", del["outcome"])
	assert.Equal(t, failed["code"], del["code"])
	if accepted {
		fin := findEntry(es, "delegation.finish", "later-agent")
		require.NotNil(t, fin, "the async delegation's final status")
		assert.Equal(t, "success", fin["outcome"])
	}
	var authFailures int
	for _, e := range es {
		if e["action"] == "auth.failure" {
			authFailures++
		}
	}
	assert.GreaterOrEqual(t, authFailures, 2, "the wrong token and the reader's 403")

	// Paging and since through the real server.
	page := api.do("GET", "/v1/audit?limit=2", nil)
	require.Len(t, page.list(t), 2)
	link := page.header.Get("Link")
	require.Contains(t, link, `rel="next"`)
	u, err := url.Parse(link[1:strings.Index(link, ">")])
	require.NoError(t, err)
	second := auditEntries(t, api, "?"+u.RawQuery)
	require.Len(t, second, 2)
	assert.NotEqual(t, page.list(t)[1]["id"], second[0]["id"])
	assert.Empty(t, auditEntries(t, api, "?since=2999-01-01T00:00:00Z"))
	api.do("GET", "/v1/audit?since=yesterday", nil).requireError(t, 400, "invalid_argument")

	// The audit log is persisted: it survives a restart on the same file.
	p.stop()
	p2 := startServe(t, spec)
	again := auditEntries(t, p2.client(), "?limit=1000")
	assert.NotNil(t, findEntry(again, "agent.register", "ok-agent"), "entries survive a restart")
	assert.NotNil(t, findEntry(again, "delegation", "failing-agent"))
	p2.stop()
}
