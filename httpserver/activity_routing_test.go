package httpserver_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/activity"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// activityEnv is a routing mesh whose router records its decisions in an
// activity.Routing, served with the stats routes.
type activityEnv struct {
	*env
	decisions *activity.Routing
	timeline  *activity.Timeline
	sstore    *memstore.Store
}

func newActivityEnv(t *testing.T, counter session.ActiveCounter) *activityEnv {
	t.Helper()
	sstore, sessions := newSessions(t)
	if counter == nil {
		counter = sstore
	}
	decisions := activity.NewRouting(nil)
	timeline := activity.NewTimeline(nil)
	lr := &lateRouter{}
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.Router = lr
		o.Sessions = sessions
		o.Activity = &httpserver.Activity{Decisions: decisions, Delegations: timeline, Sessions: counter}
	}})
	router, err := routing.New(kwClassifier{rules: map[string]string{"budget": "finance"}, def: "helpdesk"},
		e.reg, e.del, sessions, &routing.RouterOptions{Breakers: e.breakers, OnDecision: decisions.Observe})
	require.NoError(t, err)
	t.Cleanup(func() { _ = router.Close() })
	lr.r.Store(router)
	e.register(agentJSON("finance", okAgent(t, "finance says hi").URL+"/task", "budget"))
	help := agentJSON("helpdesk", okAgent(t, "helpdesk says hi").URL+"/task", "help")
	help["isDefault"] = true
	e.register(help)
	return &activityEnv{env: e, decisions: decisions, timeline: timeline, sstore: sstore}
}

func decisionsOf(t *testing.T, e *activityEnv, token string) []activity.Decision {
	t.Helper()
	r := e.get("/v1/routing/decisions", token)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var out []activity.Decision
	r.JSON(t, &out)
	return out
}

func TestRoutingDecisionsRoute(t *testing.T) {
	e := newActivityEnv(t, nil)
	const secret = "What is the budget of project Nightingale?"
	r := e.post("/v1/request", routeToken, map[string]any{"input": secret, "user_id": "u1"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = e.post("/v1/request", routeToken, map[string]any{"input": "hello there"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// A read token sees the decisions, newest first, without the text.
	got := decisionsOf(t, e, readToken)
	require.Len(t, got, 2)
	assert.Equal(t, routing.ActionRoute, got[0].Decision)
	assert.Equal(t, routing.ReasonDefaultAgent, got[0].Reason)
	assert.Equal(t, "helpdesk", got[0].Agent)
	first := got[1]
	assert.Equal(t, routing.ActionRoute, first.Decision)
	assert.Equal(t, routing.ReasonConfidence, first.Reason)
	assert.Equal(t, "finance", first.Agent)
	assert.InDelta(t, 0.9, first.Confidence, 1e-9)
	assert.Equal(t, len(secret), first.InputLen)
	assert.Equal(t, activity.InputHash(secret), first.InputHash)
	assert.Equal(t, testPrincipal, first.Principal)
	assert.NotEmpty(t, first.SessionID)
	assert.Empty(t, first.Text)
	raw := e.get("/v1/routing/decisions", readToken)
	assert.NotContains(t, string(raw.Body), "Nightingale")
	assert.NotContains(t, string(raw.Body), `"text"`)

	// The admin scope sees the text.
	admin := decisionsOf(t, e, adminToken)
	require.Len(t, admin, 2)
	assert.Equal(t, secret, admin[1].Text)
	assert.Equal(t, "hello there", admin[0].Text)

	// limit, and refused parameters.
	r = e.get("/v1/routing/decisions?limit=1", readToken)
	require.Equal(t, http.StatusOK, r.Status)
	var one []activity.Decision
	r.JSON(t, &one)
	require.Len(t, one, 1)
	assert.Equal(t, got[0].RequestID, one[0].RequestID)
	expectError(t, e.get("/v1/routing/decisions?limit=-1", readToken), http.StatusBadRequest, "invalid_argument")
	expectError(t, e.get("/v1/routing/decisions?limit=x", readToken), http.StatusBadRequest, "invalid_argument")
	expectError(t, e.get("/v1/routing/decisions?bogus=1", readToken), http.StatusBadRequest, "invalid_argument")

	// Scopes: a token is needed; route alone is not read.
	expectError(t, e.get("/v1/routing/decisions", ""), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.get("/v1/routing/decisions", "wrong-token"), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.get("/v1/routing/decisions", routeToken), http.StatusForbidden, "permission_denied")
	expectError(t, e.post("/v1/routing/decisions", readToken, nil), http.StatusMethodNotAllowed, "method_not_allowed")

	// Another principal's reader sees none of them.
	other := "other-reader-token-xyz"
	require.NoError(t, e.srv.SetTokens(append(testTokens(), httpserver.Token{Name: "other", Token: other, Principal: "elsewhere", Scopes: []httpserver.Scope{httpserver.ScopeRead}})))
	assert.Empty(t, decisionsOf(t, e, other))
}

func TestStatsSessionsRoute(t *testing.T) {
	e := newActivityEnv(t, nil)
	count := func() int {
		r := e.get("/v1/stats/sessions", readToken)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var s httpserver.SessionStats
		r.JSON(t, &s)
		return s.Active
	}
	assert.Equal(t, 0, count())
	for _, u := range []string{"u1", "u2"} {
		r := e.post("/v1/request", routeToken, map[string]any{"input": "budget please", "user_id": u})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	e.post("/v1/request", routeToken, map[string]any{"input": "anonymous: no session"})
	assert.Equal(t, 2, count())
	expectError(t, e.get("/v1/stats/sessions", routeToken), http.StatusForbidden, "permission_denied")
	expectError(t, e.get("/v1/stats/sessions", ""), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.get("/v1/stats/sessions?x=1", readToken), http.StatusBadRequest, "invalid_argument")

	// The admin reads one session's turns on the session route.
	sid := decisionsOf(t, e, adminToken)[1].SessionID
	r := e.get("/v1/sessions/"+sid, adminToken)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var s session.Session
	r.JSON(t, &s)
	require.Len(t, s.TurnHistory, 2)
	assert.Equal(t, "budget please", s.TurnHistory[0].Content)
}

type failingCounter struct{}

func (failingCounter) CountActiveSessions(context.Context) (int, error) {
	return 0, errors.New("store at 10.0.0.7 is down")
}

// A store that cannot count is 503, without its error's text.
func TestStatsSessionsStoreDown(t *testing.T) {
	e := newActivityEnv(t, failingCounter{})
	r := e.get("/v1/stats/sessions", readToken)
	er := expectError(t, r, http.StatusServiceUnavailable, "unavailable")
	assert.NotContains(t, er.Error, "10.0.0.7")
	assert.Equal(t, "5", r.Header.Get("Retry-After"))
	assert.Contains(t, e.logs.String(), "10.0.0.7", "the cause is logged")
}

func TestStatsDelegationsRoute(t *testing.T) {
	e := newActivityEnv(t, nil)
	now := time.Now()
	for _, rec := range []delegation.Record{
		{Status: delegation.StatusCompleted, LatencyMs: 20, FinishedAt: &now},
		{Status: delegation.StatusCompleted, LatencyMs: 40, FinishedAt: &now},
		{Status: delegation.StatusFailed, LatencyMs: 900, FinishedAt: &now},
	} {
		e.timeline.Observe(rec)
	}
	r := e.get("/v1/stats/delegations", readToken)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var st httpserver.DelegationStats
	r.JSON(t, &st)
	assert.Equal(t, 60, st.BucketSeconds)
	require.Len(t, st.Minutes, activity.TimelineMinutes)
	last := st.Minutes[len(st.Minutes)-1]
	if last.Total == 0 { // the minute turned between Observe and the request
		last = st.Minutes[len(st.Minutes)-2]
	}
	assert.Equal(t, 2, last.Completed)
	assert.Equal(t, 1, last.Failed)
	assert.Equal(t, 3, last.Total)
	assert.Equal(t, int64(900), last.P99Ms)
	for i := 1; i < len(st.Minutes); i++ {
		assert.Equal(t, time.Minute, st.Minutes[i].Start.Sub(st.Minutes[i-1].Start))
	}
	expectError(t, e.get("/v1/stats/delegations", routeToken), http.StatusForbidden, "permission_denied")
	expectError(t, e.get("/v1/stats/delegations", ""), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.get("/v1/stats/delegations?window=2h", readToken), http.StatusBadRequest, "invalid_argument")
}

// Without Activity the routes are not there.
func TestActivityRoutesAbsent(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, p := range []string{"/v1/routing/decisions", "/v1/stats/delegations", "/v1/stats/sessions"} {
		expectError(t, e.get(p, readToken), http.StatusNotFound, "not_found")
	}
}
