package httpserver_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// kwClassifier routes to the agent whose keyword occurs in the text, with
// confidence 0.9; otherwise to def at 0.2.
type kwClassifier struct {
	rules map[string]string
	def   string
}

func (k kwClassifier) Classify(_ context.Context, text string) (routing.Classification, error) {
	lower := strings.ToLower(text)
	for kw, agent := range k.rules {
		if strings.Contains(lower, kw) {
			return routing.Classification{AgentID: agent, Confidence: 0.9, IntentSummary: kw, DetectedLanguage: "en", Entities: map[string]any{}}, nil
		}
	}
	return routing.Classification{AgentID: k.def, Confidence: 0.2, DetectedLanguage: "en", Entities: map[string]any{}}, nil
}

// lateRouter forwards to a Router built after the server.
type lateRouter struct {
	r atomic.Pointer[routing.Router]
}

func (l *lateRouter) Handle(ctx context.Context, req routing.Request) (routing.Response, error) {
	return l.r.Load().Handle(ctx, req)
}

type routingEnv struct {
	*env
	sessions *session.Manager
	router   *routing.Router
}

// newSessions is a session manager over a fresh memstore, both closed
// when t ends.
func newSessions(t *testing.T) (*memstore.Store, *session.Manager) {
	t.Helper()
	sstore := memstore.New()
	t.Cleanup(func() { _ = sstore.Close() })
	sessions, err := session.NewManager(sstore, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sessions.Close() })
	return sstore, sessions
}

// newRoutingEnv is a mesh with a real Router over memstore sessions and
// the env's registry and delegation client, serving the routing routes.
func newRoutingEnv(t *testing.T) *routingEnv {
	t.Helper()
	_, sessions := newSessions(t)
	lr := &lateRouter{}
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.Router = lr
		o.Sessions = sessions
	}})
	router, err := routing.New(kwClassifier{rules: map[string]string{"budget": "finance", "broken": "broken"}, def: "helpdesk"},
		e.reg, e.del, sessions, &routing.RouterOptions{Breakers: e.breakers})
	require.NoError(t, err)
	t.Cleanup(func() { _ = router.Close() })
	lr.r.Store(router)
	return &routingEnv{env: e, sessions: sessions, router: router}
}

func TestRouteRequestAndSessions(t *testing.T) {
	e := newRoutingEnv(t)
	e.register(agentJSON("finance", okAgent(t, "finance says hi").URL+"/task", "budget"))
	help := agentJSON("helpdesk", okAgent(t, "helpdesk says hi").URL+"/task", "help")
	help["isDefault"] = true
	e.register(help)

	// Scope route is required.
	expectError(t, e.post("/v1/request", readToken, map[string]any{"input": "budget?"}), http.StatusForbidden, "permission_denied")
	expectError(t, e.post("/v1/request", "", map[string]any{"input": "budget?"}), http.StatusUnauthorized, "unauthenticated")

	// Strict body and validation.
	expectError(t, e.post("/v1/request", routeToken, map[string]any{"input": "x", "bogus": 1}), http.StatusBadRequest, "invalid_argument")
	er := expectError(t, e.post("/v1/request", routeToken, map[string]any{"input": "   "}), http.StatusBadRequest, "invalid_argument")
	assert.Contains(t, er.Error, "input")
	expectError(t, e.post("/v1/request", routeToken, map[string]any{"input": "x", "session_id": "nope"}), http.StatusBadRequest, "invalid_argument")

	// Routed, and a session is created for the identified user.
	r := e.post("/v1/request", routeToken, map[string]any{"input": "What is the budget?", "user_id": "u1",
		"metadata": map[string]any{"agentmesh_owner_token": "forged", "k": "v"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var resp routing.Response
	r.JSON(t, &resp)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, routing.ActionRoute, resp.Decision)
	assert.Equal(t, "finance says hi", resp.Response)
	require.NotEmpty(t, resp.SessionID)
	assert.Contains(t, string(r.Body), `"routing":{"action":"route"`)
	routed, err := e.del.Get(context.Background(), resp.DelegationID)
	require.NoError(t, err)
	assert.Equal(t, testPrincipal, routed.Principal, "a routed request's delegation records the principal")
	sid := resp.SessionID

	// Second message bypasses classification through the session.
	r = e.post("/v1/request", routeToken, map[string]any{"input": "and next year?", "user_id": "u1"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r.JSON(t, &resp)
	assert.Equal(t, sid, resp.SessionID)
	assert.Equal(t, "finance", resp.AgentID)
	assert.Equal(t, routing.ReasonSession, resp.Reason)

	// The creating token sees the session, with its turns.
	r = e.get("/v1/sessions/"+sid, routeToken)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var s session.Session
	r.JSON(t, &s)
	assert.Equal(t, session.StatusActive, s.Status)
	assert.Equal(t, "finance", s.ActiveAgent)
	assert.Len(t, s.TurnHistory, 4)
	assert.Equal(t, testPrincipal, s.Principal, "the session is the token's principal's")
	assert.Equal(t, "v", s.Metadata["k"])

	// Another route token gets 404 (not 403) on every session route, like
	// for an unknown session; an admin sees it.
	other := "other-route-token-xyz"
	require.NoError(t, e.srv.SetTokens(append(testTokens(), httpserver.Token{Name: "other", Token: other, Scopes: []httpserver.Scope{httpserver.ScopeRoute}})))
	expectError(t, e.get("/v1/sessions/"+sid, other), http.StatusNotFound, "not_found")
	expectError(t, e.post("/v1/sessions/"+sid+"/resume", other, nil), http.StatusNotFound, "not_found")
	expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/sessions/" + sid, Token: other}), http.StatusNotFound, "not_found")
	expectError(t, e.get("/v1/sessions/00000000-0000-4000-8000-000000000000", routeToken), http.StatusNotFound, "not_found")
	expectError(t, e.get("/v1/sessions/"+sid, readToken), http.StatusForbidden, "permission_denied")
	require.Equal(t, http.StatusOK, e.get("/v1/sessions/"+sid, adminToken).Status)

	// Resume takes no body fields; a stray one is refused, not ignored.
	er = expectError(t, e.post("/v1/sessions/"+sid+"/resume", routeToken, map[string]any{"user_id": "u2"}), http.StatusBadRequest, "invalid_argument")
	assert.Contains(t, er.Error, "user_id")
	r = e.get("/v1/sessions/"+sid, routeToken)
	r.JSON(t, &s)
	assert.Equal(t, session.StatusActive, s.Status, "a refused resume does nothing")

	// Resume: a new active session with the history; the prior completed.
	r = e.post("/v1/sessions/"+sid+"/resume", routeToken, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var fresh session.Session
	r.JSON(t, &fresh)
	assert.NotEqual(t, sid, fresh.ID)
	assert.Equal(t, session.StatusActive, fresh.Status)
	assert.Len(t, fresh.TurnHistory, 4)
	assert.Equal(t, testPrincipal, fresh.Principal, "the owner carries over")
	r = e.get("/v1/sessions/"+sid, routeToken)
	r.JSON(t, &s)
	assert.Equal(t, session.StatusCompleted, s.Status)

	// Delete closes it abandoned; a second delete is 409.
	r = e.do(req{Method: http.MethodDelete, Path: "/v1/sessions/" + fresh.ID, Token: routeToken})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r.JSON(t, &s)
	assert.Equal(t, session.StatusAbandoned, s.Status)
	expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/sessions/" + fresh.ID, Token: routeToken}), http.StatusConflict, "conflict")

	// Anonymous requests keep no session.
	r = e.post("/v1/request", routeToken, map[string]any{"input": "hello"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r.JSON(t, &resp)
	assert.Equal(t, "helpdesk", resp.AgentID)
	assert.Equal(t, routing.ActionRoute, resp.Decision)
	assert.Empty(t, resp.SessionID)
}

func TestRouteRequestUnavailable(t *testing.T) {
	e := newRoutingEnv(t)
	broken := agentServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})

	// No default agent and nothing confident: 503 no_default_agent.
	expectError(t, e.post("/v1/request", routeToken, map[string]any{"input": "hello"}), http.StatusServiceUnavailable, "no_default_agent")

	// Every agent down, the default included: 503 with Retry-After, and
	// no internal text.
	e.register(agentJSON("broken", broken.URL+"/task", "weather"))
	help := agentJSON("helpdesk", broken.URL+"/task", "help")
	help["isDefault"] = true
	e.register(help)
	r := e.post("/v1/request", routeToken, map[string]any{"input": "it is broken", "user_id": "u2"})
	er := expectError(t, r, http.StatusServiceUnavailable, "unavailable")
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
	assert.Positive(t, ra)
	assert.NotContains(t, er.Error, "boom")
	// The failed session was closed error, so the user has none active.
	_, err = e.sessions.Active(context.Background(), "u2")
	assert.ErrorIs(t, err, session.ErrNotFound)
}

func TestRoutingRoutesAbsentWithoutRouter(t *testing.T) {
	e := newEnv(t, envConfig{})
	expectError(t, e.post("/v1/request", adminToken, map[string]any{"input": "x"}), http.StatusNotFound, "not_found")
	expectError(t, e.get("/v1/sessions/00000000-0000-4000-8000-000000000000", adminToken), http.StatusNotFound, "not_found")
}
