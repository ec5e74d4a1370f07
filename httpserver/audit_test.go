package httpserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// newAuditEnv is a mesh whose server records into an audit log over a
// real store (a bolt file when bolt is set), with a reload that fails when
// *reloadErr is set.
func newAuditEnv(t *testing.T, bolt bool, reloadErr *error) (*env, *audit.Recorder) {
	t.Helper()
	var st audit.Store
	if bolt {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "audit.db"), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		st = s
	} else {
		st = memstore.New()
	}
	rec, err := audit.NewRecorder(st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rec.Close() })
	e := newEnv(t, envConfig{bolt: bolt, onRegistryWrite: rec.RegistryWrote, opts: func(o *httpserver.Options) {
		o.Audit = rec
		o.CardClient = http.DefaultClient // POST /v1/agents/import; only refused URLs are used
		o.Reload = func(context.Context) (any, error) {
			if reloadErr != nil && *reloadErr != nil {
				return map[string]string{"status": "failed"}, *reloadErr
			}
			return map[string]int{"agents": 0}, nil
		}
	}})
	return e, rec
}

// entries lists the audit log, newest first.
func entries(t *testing.T, rec *audit.Recorder) []audit.Entry {
	t.Helper()
	got, err := rec.List(t.Context(), audit.Query{Limit: audit.MaxListLimit})
	require.NoError(t, err)
	return got
}

// find returns the entries of action, oldest first.
func find(es []audit.Entry, action string) []audit.Entry {
	var out []audit.Entry
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Action == action {
			out = append(out, es[i])
		}
	}
	return out
}

func TestAuditAuthFailures(t *testing.T) {
	e, rec := newAuditEnv(t, false, nil)
	expectError(t, e.get("/v1/agents", "wrong-token"), http.StatusUnauthorized, apierr.CodeUnauthenticated)
	expectError(t, e.get("/v1/agents", ""), http.StatusUnauthorized, apierr.CodeUnauthenticated)
	expectError(t, e.post("/v1/agents", readToken, agentJSON("a", "http://127.0.0.1:9/task")), http.StatusForbidden, httpserver.CodePermissionDenied)
	expectError(t, e.get("/v1/nope", "wrong-token"), http.StatusUnauthorized, apierr.CodeUnauthenticated)

	got := find(entries(t, rec), audit.ActionAuthFailure)
	require.Len(t, got, 4)
	bad, missing, scope, unrouted := got[0], got[1], got[2], got[3]
	assert.Empty(t, bad.Actor, "an invalid token has no name")
	assert.Equal(t, audit.OutcomeDenied, bad.Outcome)
	assert.Equal(t, apierr.CodeUnauthenticated, bad.Code)
	assert.Equal(t, "GET /v1/agents", bad.Details["route"])
	assert.Equal(t, "invalid credentials", bad.Details["reason"])
	assert.Equal(t, "127.0.0.1", bad.Details["client_ip"])
	assert.NotEmpty(t, bad.Details["request_id"])
	assert.Equal(t, "missing credentials", missing.Details["reason"])

	assert.Equal(t, "reader", scope.Actor, "a valid token lacking the scope is named")
	assert.Equal(t, httpserver.CodePermissionDenied, scope.Code)
	assert.Equal(t, "POST /v1/agents", scope.Details["route"])
	assert.Equal(t, "missing scope register", scope.Details["reason"])

	assert.Equal(t, "GET /v1/nope", unrouted.Details["route"], "a /v1 path that matches no route")
	for _, en := range got {
		assert.NotContains(t, en.Details, "token")
		for _, v := range en.Details {
			assert.NotContains(t, v, "wrong-token", "a presented token is never recorded")
		}
	}
}

func TestAuditRegistrations(t *testing.T) {
	for _, bolt := range []bool{false, true} {
		t.Run(map[bool]string{false: "memstore", true: "boltstore"}[bolt], func(t *testing.T) {
			var reloadErr error
			e, rec := newAuditEnv(t, bolt, &reloadErr)
			r := e.post("/v1/agents", registerToken, agentJSON("billing", "http://127.0.0.1:9/task"))
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			r = e.post("/v1/agents", registerToken, agentJSON("billing", "http://127.0.0.1:9/task"))
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			// The metadata address is refused whatever the policy.
			expectError(t, e.post("/v1/agents", registerToken, agentJSON("meta", "http://169.254.169.254/task?key=secret")),
				http.StatusBadRequest, "endpoint_not_allowed")
			expectError(t, e.post("/v1/agents", registerToken, map[string]any{"name": "bad name"}),
				http.StatusBadRequest, "invalid_argument")
			expectError(t, e.post("/v1/agents/import", registerToken, map[string]any{"cardUrl": "http://169.254.169.254/.well-known/agent-card.json"}),
				http.StatusBadRequest, "endpoint_not_allowed")
			r = e.do(req{Method: http.MethodDelete, Path: "/v1/agents/billing", Token: registerToken})
			require.Equal(t, http.StatusNoContent, r.Status)
			expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/billing", Token: registerToken}),
				http.StatusNotFound, httpserver.CodeNotFound)
			require.Equal(t, http.StatusOK, e.post("/v1/admin/reload", adminToken, nil).Status)
			reloadErr = errors.New("agents/x.yaml: bad endpoint")
			expectError(t, e.post("/v1/admin/reload", adminToken, nil), http.StatusUnprocessableEntity, httpserver.CodeReloadFailed)

			all := entries(t, rec)
			regs := find(all, audit.ActionAgentRegister)
			require.Len(t, regs, 5)
			for _, en := range regs {
				assert.Equal(t, "registrar", en.Actor, "the token's name, never the token")
			}
			assert.Equal(t, "billing", regs[0].Target)
			assert.Equal(t, audit.OutcomeSuccess, regs[0].Outcome)
			assert.Equal(t, "true", regs[0].Details["created"])
			assert.Equal(t, "false", regs[1].Details["created"])
			assert.NotEmpty(t, regs[0].Details["request_id"], "the registry's hook gets the request's id from its context")
			assert.NotEqual(t, regs[0].Details["request_id"], regs[1].Details["request_id"])
			assert.Equal(t, "meta", regs[2].Target)
			assert.Equal(t, audit.OutcomeDenied, regs[2].Outcome)
			assert.Equal(t, "endpoint_not_allowed", regs[2].Code, "a refused endpoint")
			assert.Equal(t, "169.254.169.254", regs[2].Details["endpoint_host"], "the host only: the query may hold a secret")
			assert.Equal(t, "invalid_argument", regs[3].Code)
			assert.Equal(t, "endpoint_not_allowed", regs[4].Code, "a refused card URL")
			assert.Equal(t, map[string]string{"via": "import", "card_host": "169.254.169.254", "request_id": regs[4].Details["request_id"]}, regs[4].Details)

			unregs := find(all, audit.ActionAgentUnregister)
			require.Len(t, unregs, 2)
			assert.Equal(t, audit.OutcomeSuccess, unregs[0].Outcome)
			assert.Equal(t, "billing", unregs[0].Target)
			assert.Equal(t, audit.OutcomeDenied, unregs[1].Outcome)
			assert.Equal(t, httpserver.CodeNotFound, unregs[1].Code)

			reloads := find(all, audit.ActionReload)
			require.Len(t, reloads, 2)
			assert.Equal(t, httpserver.MeshTokenName, reloads[0].Actor)
			assert.Equal(t, audit.OutcomeSuccess, reloads[0].Outcome)
			assert.Equal(t, audit.OutcomeFailure, reloads[1].Outcome)
			assert.Equal(t, httpserver.CodeReloadFailed, reloads[1].Code)
			assert.Equal(t, "agents/x.yaml: bad endpoint", reloads[1].Details["error"])
		})
	}
}

func TestAuditRoute(t *testing.T) {
	e, rec := newAuditEnv(t, true, nil)
	start := time.Now()
	for i := range 25 {
		rec.Record(audit.Entry{Actor: "ci", Action: "test", Target: string(rune('a' + i)), Outcome: audit.OutcomeSuccess})
	}

	t.Run("NeedsAdmin", func(t *testing.T) {
		for _, tok := range []string{readToken, registerToken, delegateToken, routeToken} {
			expectError(t, e.get("/v1/audit", tok), http.StatusForbidden, httpserver.CodePermissionDenied)
		}
		expectError(t, e.get("/v1/audit", ""), http.StatusUnauthorized, apierr.CodeUnauthenticated)
	})

	t.Run("Paging", func(t *testing.T) {
		var seen []string
		path := "/v1/audit?limit=10"
		for range 10 {
			page, next := listPage[audit.Entry](t, e, path, adminToken)
			for _, en := range page {
				if en.Action == "test" {
					seen = append(seen, en.Target)
				}
			}
			if next == "" {
				break
			}
			u, err := url.Parse(next)
			require.NoError(t, err)
			assert.Equal(t, "10", u.Query().Get("limit"))
			path = u.RequestURI()
		}
		require.Len(t, seen, 25, "every entry once")
		assert.Equal(t, "y", seen[0], "newest first")
		assert.Equal(t, "a", seen[24])
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		page, next := listPage[audit.Entry](t, e, "/v1/audit", adminToken)
		assert.GreaterOrEqual(t, len(page), 25)
		assert.Less(t, len(page), audit.DefaultListLimit)
		assert.Empty(t, next, "no next page when the page is not full")
	})

	t.Run("Since", func(t *testing.T) {
		mid := time.Now()
		time.Sleep(2 * time.Millisecond)
		rec.Record(audit.Entry{Actor: "ci", Action: "later", Outcome: audit.OutcomeSuccess})
		page, _ := listPage[audit.Entry](t, e, "/v1/audit?since="+url.QueryEscape(mid.Format(time.RFC3339Nano)), adminToken)
		var actions []string
		for _, en := range page {
			actions = append(actions, en.Action)
			assert.False(t, en.Time.Before(mid), "every entry is at or after since")
		}
		assert.Contains(t, actions, "later")
		assert.NotContains(t, actions, "test")
		page, _ = listPage[audit.Entry](t, e, "/v1/audit?since="+start.Add(-time.Hour).UTC().Format(time.RFC3339), adminToken)
		assert.GreaterOrEqual(t, len(page), 26)
		page, _ = listPage[audit.Entry](t, e, "/v1/audit?since=2999-01-01T00:00:00Z", adminToken)
		assert.Empty(t, page)
	})

	t.Run("BadParameters", func(t *testing.T) {
		for q, field := range map[string]string{
			"limit=-1":                          "limit",
			"limit=ten":                         "limit",
			"since=yesterday":                   "since",
			"since=2025-01-02":                  "since",
			"cursor=":                           "cursor",
			"cursor=" + strings.Repeat("f", 65): "cursor",
			"limit=1&limit=2":                   "limit",
			"before=x":                          "before",
		} {
			r := e.get("/v1/audit?"+q, adminToken)
			er := expectError(t, r, http.StatusBadRequest, apierr.CodeInvalidArgument)
			assert.Equal(t, map[string]any{"field": field}, er.Details, "%s", q)
		}
	})

	t.Run("LimitIsCapped", func(t *testing.T) {
		page, _ := listPage[audit.Entry](t, e, "/v1/audit?limit=5000", adminToken)
		assert.NotEmpty(t, page)
	})
}

func TestAuditRouteAbsentWithoutAudit(t *testing.T) {
	e := newEnv(t, envConfig{})
	expectError(t, e.get("/v1/audit", adminToken), http.StatusNotFound, httpserver.CodeNotFound)
}
