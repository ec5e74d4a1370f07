package httpserver_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// aggregateEnv is a server behind a trusted loopback proxy with an audit
// log and failed-authentication budgets too large to throttle anything.
func aggregateEnv(t *testing.T) (*env, *audit.Recorder) {
	t.Helper()
	rec, err := audit.NewRecorder(memstore.New(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rec.Close() })
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.AuthFailureLimit = httpserver.RateLimit{Requests: 100000, Per: time.Minute}
		o.AuthFailureGlobalLimit = httpserver.RateLimit{Requests: 100000, Per: time.Minute}
		o.TrustedProxies = loopbackProxy
		o.Audit = rec
	}})
	return e, rec
}

// authFailures returns the auth.failure entries, oldest first, and the sum
// of their counts.
func authFailures(t *testing.T, rec *audit.Recorder) ([]audit.Entry, int) {
	t.Helper()
	got := find(entries(t, rec), audit.ActionAuthFailure)
	sum := 0
	for _, en := range got {
		n, err := strconv.Atoi(en.Details["count"])
		require.NoError(t, err, "%+v", en)
		require.Positive(t, n)
		sum += n
	}
	return got, sum
}

func TestAuthFailuresAggregatedPerClientAndMinute(t *testing.T) {
	e, rec := aggregateEnv(t)
	for range 500 {
		expectError(t, e.getAs("guess", "X-Forwarded-For: 198.51.100.7"), http.StatusUnauthorized, "unauthenticated")
	}
	got, sum := authFailures(t, rec)
	require.Len(t, got, 1, "the first failure is recorded at once, the others counted")
	assert.Equal(t, 1, sum)
	assert.NotEmpty(t, got[0].Details["request_id"])

	require.NoError(t, e.srv.Close())
	got, sum = authFailures(t, rec)
	require.Len(t, got, 2)
	assert.Equal(t, 500, sum)
	for _, en := range got {
		assert.Equal(t, "198.51.100.7", en.Details["client_ip"])
		assert.Equal(t, "GET /v1/agents", en.Details["route"])
		assert.Equal(t, "invalid credentials", en.Details["reason"])
		assert.Equal(t, "unauthenticated", en.Code)
		assert.Equal(t, audit.OutcomeDenied, en.Outcome)
	}
	require.NoError(t, e.srv.Close(), "Close is idempotent")
	_, sum = authFailures(t, rec)
	assert.Equal(t, 500, sum, "nothing counted twice")
}

// TestAuthFailuresNextMinute: the failures counted in a minute are
// recorded by the first failure after it, without Close.
func TestAuthFailuresNextMinute(t *testing.T) {
	e, rec := aggregateEnv(t)
	for range 3 {
		expectError(t, e.getAs(""), http.StatusUnauthorized, "unauthenticated")
	}
	e.clock.Advance(time.Minute)
	expectError(t, e.getAs(""), http.StatusUnauthorized, "unauthenticated")
	got, sum := authFailures(t, rec)
	assert.Len(t, got, 3, "the first of the minute, the count of the two others, the first of the next minute")
	assert.Equal(t, 4, sum)
	for _, en := range got {
		assert.Equal(t, "missing credentials", en.Details["reason"])
	}
}

// TestAuthFailuresManyClientsBounded: clients beyond the tracked ones
// are counted together, so the entries stay bounded whatever the number
// of addresses.
func TestAuthFailuresManyClientsBounded(t *testing.T) {
	e, rec := aggregateEnv(t)
	const clients = 1000
	for i := range clients {
		for range 3 {
			expectError(t, e.getAs("guess", fmt.Sprintf("X-Forwarded-For: 10.%d.%d.1", i/250, i%250)), http.StatusUnauthorized, "unauthenticated")
		}
	}
	require.NoError(t, e.srv.Close())
	got, sum := authFailures(t, rec)
	assert.Equal(t, 3*clients, sum)
	assert.LessOrEqual(t, len(got), 2*256+1, "entries for %d clients", clients)
	var other int
	for _, en := range got {
		if en.Details["client_ip"] == httpserver.OtherClients {
			other++
			n, _ := strconv.Atoi(en.Details["count"])
			assert.Equal(t, 3*(clients-256), n)
			assert.Empty(t, en.Details["route"])
		}
	}
	assert.Equal(t, 1, other, "one entry for the clients beyond those tracked")
}

// TestPermissionDeniedAggregatedPerToken: a valid token lacking a scope
// is counted per token and route.
func TestPermissionDeniedAggregatedPerToken(t *testing.T) {
	e, rec := aggregateEnv(t)
	for range 100 {
		expectError(t, e.post("/v1/agents", readToken, agentJSON("a", "http://127.0.0.1:9/task")), http.StatusForbidden, "permission_denied")
	}
	expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/a", Token: readToken}), http.StatusForbidden, "permission_denied")
	require.NoError(t, e.srv.Close())
	got, sum := authFailures(t, rec)
	assert.Equal(t, 101, sum)
	routes := map[string]int{}
	for _, en := range got {
		assert.Equal(t, "reader", en.Actor)
		assert.Equal(t, "missing scope register", en.Details["reason"])
		n, _ := strconv.Atoi(en.Details["count"])
		routes[en.Details["route"]] += n
	}
	assert.Len(t, got, 3)
	assert.Equal(t, map[string]int{"POST /v1/agents": 100, "DELETE /v1/agents/{name}": 1}, routes)
}
