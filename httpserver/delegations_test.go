package httpserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
)

func postJSON(t *testing.T, target, token, body string) *response {
	t.Helper()
	hr, err := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
	require.NoError(t, err)
	hr.Header.Set("Content-Type", "application/json")
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

func TestDelegateSync(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg envConfig) {
		e := newEnv(t, cfg)
		var (
			mu       sync.Mutex
			lastBody []byte
		)
		finance := agentServer(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			lastBody = b
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"result":{"budget":1200000}}`))
		})
		broken := agentServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		})
		fin := agentJSON("finance", finance.URL+"/task", "budget", "cost-center")
		fin["resources"] = []map[string]string{{"uri": "https://erp.example.com/finance/*"}}
		e.register(fin)
		e.register(agentJSON("broken", broken.URL+"/task", "weather"))

		r := e.post("/v1/delegate", delegateToken, map[string]any{
			"targetName": "finance", "task": "Budget for Engineering?", "sourceAgent": "hr-agent",
			"context": map[string]any{"accountId": json.Number("12345678901234567890"), "depth": 1},
		})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var d httpserver.DelegateResponse
		r.JSON(t, &d)
		assert.True(t, d.Success)
		assert.Equal(t, delegation.StatusCompleted, d.Status)
		assert.Equal(t, "finance", d.TargetAgent)
		assert.JSONEq(t, `{"budget":1200000}`, string(d.Result))
		assert.NotEmpty(t, d.ID)
		assert.Empty(t, d.Code)
		mu.Lock()
		assert.Contains(t, string(lastBody), `"accountId":12345678901234567890`, "big numbers keep their digits")
		mu.Unlock()

		// By query.
		r = e.post("/v1/delegate", delegateToken, map[string]any{"query": "cost center budget", "task": "x"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &d)
		assert.Equal(t, "finance", d.TargetAgent)

		// A delegation that ran and failed is still 200.
		r = e.post("/v1/delegate", delegateToken, map[string]any{"targetName": "broken", "task": "x"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &d)
		assert.False(t, d.Success)
		assert.Equal(t, delegation.StatusFailed, d.Status)
		assert.Equal(t, "agent_error", d.Code)
		assert.Contains(t, d.Error, "500")

		// The record is readable.
		r = e.get("/v1/delegations/"+d.ID, readToken)
		require.Equal(t, http.StatusOK, r.Status)
		var rec delegation.Record
		r.JSON(t, &rec)
		assert.Equal(t, delegation.StatusFailed, rec.Status)
		assert.Empty(t, rec.SecretHash)

		refusals := []struct {
			name   string
			body   any
			status int
			code   string
		}{
			{"unknown target", map[string]any{"targetName": "nobody", "task": "x"}, 404, "not_found"},
			{"no match", map[string]any{"query": "quantum spaceship repair", "task": "x"}, 404, "no_match"},
			{"resource not covered", map[string]any{"targetName": "finance", "task": "x", "resources": []map[string]string{{"uri": "https://erp.example.com/hr/salaries"}}}, 403, "resource_not_covered"},
			{"depth exceeded", map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"depth": 5}}, 422, "depth_exceeded"},
			{"cycle", map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"chain": []string{"finance"}}}, 422, "delegation_cycle"},
			{"self", map[string]any{"targetName": "finance", "task": "x", "sourceAgent": "finance"}, 422, "delegation_cycle"},
			{"no task", map[string]any{"targetName": "finance"}, 400, "invalid_argument"},
			{"both target and query", map[string]any{"targetName": "finance", "query": "budget", "task": "x"}, 400, "invalid_argument"},
			{"neither", map[string]any{"task": "x"}, 400, "invalid_argument"},
			{"negative timeout", map[string]any{"targetName": "finance", "task": "x", "timeoutMs": -1}, 400, "invalid_argument"},
			{"huge timeout", map[string]any{"targetName": "finance", "task": "x", "timeoutMs": int64(1) << 62}, 400, "invalid_argument"},
			{"context not an object", map[string]any{"targetName": "finance", "task": "x", "context": "depth=1"}, 400, "invalid_argument"},
			{"bad depth", map[string]any{"targetName": "finance", "task": "x", "context": map[string]any{"depth": "one"}}, 400, "invalid_argument"},
			{"unknown field", map[string]any{"target": "finance", "task": "x"}, 400, "invalid_argument"},
			{"bad source", map[string]any{"targetName": "finance", "task": "x", "sourceAgent": "no spaces"}, 400, "invalid_argument"},
		}
		for _, c := range refusals {
			t.Run(c.name, func(t *testing.T) {
				expectError(t, e.post("/v1/delegate", delegateToken, c.body), c.status, c.code)
			})
		}
		er := expectError(t, e.post("/v1/delegate", delegateToken, map[string]any{"target": "finance", "task": "x"}), 400, "invalid_argument")
		assert.Equal(t, map[string]any{"field": "target"}, er.Details)

		expectError(t, e.post("/v1/delegate", readToken, map[string]any{"targetName": "finance", "task": "x"}), http.StatusForbidden, "permission_denied")
		expectError(t, e.post("/v1/delegate", "", map[string]any{"targetName": "finance", "task": "x"}), http.StatusUnauthorized, "unauthenticated")
	})
}

func TestDelegateAsyncCallback(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg envConfig) {
		e := newEnv(t, cfg)
		urls := make(chan string, 16)
		reports := asyncAgent(t, urls)
		e.register(agentJSON("reports", reports.URL+"/task", "reports"))

		start := func() (httpserver.DelegateResponse, string) {
			t.Helper()
			r := e.post("/v1/delegate", delegateToken, map[string]any{"targetName": "reports", "task": "Q3 report", "async": true})
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			var d httpserver.DelegateResponse
			r.JSON(t, &d)
			require.Equal(t, delegation.StatusAccepted, d.Status)
			require.True(t, d.Success)
			require.NotNil(t, d.Deadline)
			cb := <-urls
			require.True(t, strings.HasPrefix(cb, e.ts.URL+"/v1/delegations/"+d.ID+"/result?token="), cb)
			return d, cb
		}

		// Round trip: the agent calls back with its secret; a waiting GET sees it.
		d, cb := start()
		waited := make(chan *response, 1)
		go func() {
			waited <- e.get("/v1/delegations/"+d.ID+"?wait=10s", readToken)
		}()
		time.Sleep(50 * time.Millisecond)
		u, err := url.Parse(cb)
		require.NoError(t, err)
		wrong := *u
		wrong.RawQuery = "token=not-the-secret"
		expectError(t, postJSON(t, wrong.String(), "", `{"status":"completed","result":1}`), http.StatusUnauthorized, "unauthenticated")
		noToken := *u
		noToken.RawQuery = ""
		expectError(t, postJSON(t, noToken.String(), "", `{"status":"completed"}`), http.StatusUnauthorized, "unauthenticated")
		expectError(t, postJSON(t, cb, "", `{"status":"done"}`), http.StatusBadRequest, "invalid_argument")
		r := postJSON(t, cb, "", `{"status":"completed","result":"Q3 report: 14 pages"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assertSecurityHeaders(t, r.Header)
		expectError(t, postJSON(t, cb, "", `{"status":"completed","result":"again"}`), http.StatusConflict, "conflict")

		select {
		case r := <-waited:
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			var rec delegation.Record
			r.JSON(t, &rec)
			assert.Equal(t, delegation.StatusCompleted, rec.Status)
			assert.JSONEq(t, `"Q3 report: 14 pages"`, string(rec.Result))
		case <-time.After(5 * time.Second):
			t.Fatal("the long-poll did not return")
		}

		// No bearer token reports instead of the secret, whatever its
		// scopes: a caller could forge another caller's outcome.
		d, cb = start()
		u, _ = url.Parse(cb)
		u.RawQuery = ""
		expectError(t, postJSON(t, u.String(), readToken, `{"status":"failed","error":"no data"}`), http.StatusUnauthorized, "unauthenticated")
		expectError(t, postJSON(t, u.String(), delegateToken, `{"status":"failed","error":"no data"}`), http.StatusUnauthorized, "unauthenticated")
		r = postJSON(t, cb, "", `{"status":"failed","error":"no data"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = e.get("/v1/delegations/"+d.ID, readToken)
		var rec delegation.Record
		r.JSON(t, &rec)
		assert.Equal(t, delegation.StatusFailed, rec.Status)
		assert.Equal(t, "no data", rec.Error)

		// Unknown id.
		expectError(t, postJSON(t, e.ts.URL+"/v1/delegations/00000000-0000-4000-8000-000000000000/result?token=x", "", `{"status":"completed"}`), http.StatusNotFound, "not_found")

		// A short wait on an accepted record returns it as it is.
		d, _ = start()
		began := time.Now()
		r = e.get("/v1/delegations/"+d.ID+"?wait=150ms", readToken)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &rec)
		assert.Equal(t, delegation.StatusAccepted, rec.Status)
		assert.GreaterOrEqual(t, time.Since(began), 140*time.Millisecond)
		expectError(t, e.get("/v1/delegations/"+d.ID+"?wait=soon", readToken), http.StatusBadRequest, "invalid_argument")
		expectError(t, e.get("/v1/delegations/"+d.ID+"?wait=-1s", readToken), http.StatusBadRequest, "invalid_argument")
		expectError(t, e.get("/v1/delegations/"+d.ID+"?wiat=1s", readToken), http.StatusBadRequest, "invalid_argument")

		// Cancel it; a second cancel conflicts; the late callback too.
		expectError(t, e.post("/v1/delegations/"+d.ID+"/cancel", readToken, nil), http.StatusForbidden, "permission_denied")
		r = e.post("/v1/delegations/"+d.ID+"/cancel", delegateToken, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &rec)
		assert.Equal(t, delegation.StatusCanceled, rec.Status)
		expectError(t, e.post("/v1/delegations/"+d.ID+"/cancel", delegateToken, nil), http.StatusConflict, "conflict")
		expectError(t, e.post("/v1/delegations/00000000-0000-4000-8000-000000000000/cancel", delegateToken, nil), http.StatusNotFound, "not_found")
		expectError(t, e.get("/v1/delegations/00000000-0000-4000-8000-000000000000", readToken), http.StatusNotFound, "not_found")
		expectError(t, e.get("/v1/delegations/00000000-0000-4000-8000-000000000000?wait=1s", readToken), http.StatusNotFound, "not_found")
	})
}

func TestListDelegations(t *testing.T) {
	e := newEnv(t, envConfig{})
	ok := okAgent(t, "fine")
	e.register(agentJSON("a", ok.URL+"/task", "alpha"))
	e.register(agentJSON("b", ok.URL+"/task", "beta"))
	ids := map[string]bool{}
	for i := range 7 {
		target := "a"
		if i%3 == 0 {
			target = "b"
		}
		r := e.post("/v1/delegate", delegateToken, map[string]any{"targetName": target, "task": fmt.Sprintf("task %d", i)})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var d httpserver.DelegateResponse
		r.JSON(t, &d)
		ids[d.ID] = true
	}
	// Records of sync delegations reach the store through a group commit.
	require.Eventually(t, func() bool {
		var recs []delegation.Record
		e.get("/v1/delegations?limit=100", readToken).JSON(t, &recs)
		return len(recs) == 7
	}, 5*time.Second, 10*time.Millisecond)

	seen := map[string]bool{}
	next := "/v1/delegations?limit=3"
	pages := 0
	for next != "" {
		var recs []delegation.Record
		recs, next = listPage[delegation.Record](t, e, next, readToken)
		for _, rec := range recs {
			assert.False(t, seen[rec.ID], "listed twice")
			seen[rec.ID] = true
		}
		pages++
		require.Less(t, pages, 10)
	}
	assert.Equal(t, ids, seen)

	var recs []delegation.Record
	e.get("/v1/delegations?target=b", readToken).JSON(t, &recs)
	assert.Len(t, recs, 3)
	e.get("/v1/delegations?status=completed&limit=2", readToken).JSON(t, &recs)
	assert.Len(t, recs, 2)
	r := e.get("/v1/delegations?status=failed", readToken)
	assert.Equal(t, "[]\n", string(r.Body))

	expectError(t, e.get("/v1/delegations?status=done", readToken), http.StatusBadRequest, "invalid_argument")
	expectError(t, e.get("/v1/delegations?offset=-1", readToken), http.StatusBadRequest, "invalid_argument")
	expectError(t, e.get("/v1/delegations?page=2", readToken), http.StatusBadRequest, "invalid_argument")
	expectError(t, e.get("/v1/delegations", routeToken), http.StatusForbidden, "permission_denied")
}
