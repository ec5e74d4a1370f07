package httpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/registry"
)

// seedFileAgent stores an agent owned by the YAML directory.
func seedFileAgent(name string) func(s registry.Store) {
	return func(s registry.Store) {
		err := s.UpdateAgent(context.Background(), name, func(*registry.Agent) (*registry.Agent, error) {
			now := time.Now().UTC()
			return &registry.Agent{
				Name: name, DisplayName: name, Description: "from a file", Capabilities: []string{"files"},
				Endpoint: "http://127.0.0.1:9/task", Protocol: registry.ProtocolHTTP, Source: registry.SourceFile,
				RegisteredAt: now, UpdatedAt: now, LastSeen: now,
			}, nil
		})
		if err != nil {
			panic(err)
		}
	}
}

func forEachStore(t *testing.T, fn func(t *testing.T, cfg envConfig)) {
	t.Run("memstore", func(t *testing.T) { fn(t, envConfig{}) })
	t.Run("boltstore", func(t *testing.T) { fn(t, envConfig{bolt: true}) })
}

func TestRegisterAgent(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg envConfig) {
		cfg.seed = seedFileAgent("from-file")
		e := newEnv(t, cfg)

		body := agentJSON("finance", "http://127.0.0.1:9/task", "budget", "cost-center")
		body["auth"] = map[string]any{"type": "bearer", "token": "agent-secret"}
		body["labels"] = map[string]string{"team": "fin"}
		r := e.post("/v1/agents", registerToken, body)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		assert.Equal(t, "/v1/agents/finance", r.Header.Get("Location"))
		assert.NotContains(t, string(r.Body), "agent-secret", "the auth token is write-only")
		var created registry.Agent
		r.JSON(t, &created)
		assert.Equal(t, "finance", created.Name)
		assert.Equal(t, registry.ProtocolHTTP, created.Protocol)
		assert.Equal(t, registry.SourceAPI, created.Source)
		require.NotNil(t, created.Auth)
		assert.Equal(t, "bearer", created.Auth.Type)
		assert.Empty(t, created.Auth.Token)

		// Upsert: 200 with the new record, registeredAt kept.
		body["description"] = "Budgets, replaced."
		r = e.post("/v1/agents", registerToken, body)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var replaced registry.Agent
		r.JSON(t, &replaced)
		assert.Equal(t, "Budgets, replaced.", replaced.Description)
		assert.True(t, created.RegisteredAt.Equal(replaced.RegisteredAt))
		assert.Empty(t, r.Header.Get("Location"))

		// Reading it back: no token anywhere.
		r = e.get("/v1/agents/finance", readToken)
		require.Equal(t, http.StatusOK, r.Status)
		assert.NotContains(t, string(r.Body), "agent-secret")

		// Server-set fields of a record read back are ignored, not refused.
		var echo map[string]any
		r.JSON(t, &echo)
		echo["auth"] = body["auth"] // write-only: a client sends it again
		r = e.post("/v1/agents", registerToken, echo)
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

		t.Run("inprocess refused", func(t *testing.T) {
			b := agentJSON("local", "inprocess:local")
			b["protocol"] = "inprocess"
			er := expectError(t, e.post("/v1/agents", registerToken, b), http.StatusBadRequest, "invalid_argument")
			assert.Equal(t, map[string]any{"field": "protocol"}, er.Details)
		})
		t.Run("endpoint not allowed", func(t *testing.T) {
			er := expectError(t, e.post("/v1/agents", registerToken, agentJSON("meta", "http://169.254.169.254/latest")),
				http.StatusBadRequest, "endpoint_not_allowed")
			assert.Contains(t, er.Error, "endpoint")
		})
		t.Run("validation names every field", func(t *testing.T) {
			r := e.post("/v1/agents", registerToken, map[string]any{"name": "bad name", "endpoint": "ftp://x"})
			er := expectError(t, r, http.StatusBadRequest, "invalid_argument")
			details, ok := er.Details.(map[string]any)
			require.True(t, ok, "%s", r.Body)
			fields, _ := details["fields"].([]any)
			var names []string
			for _, f := range fields {
				names = append(names, f.(map[string]any)["field"].(string))
			}
			assert.Contains(t, names, "name")
			assert.Contains(t, names, "endpoint")
		})
		t.Run("managed by file", func(t *testing.T) {
			expectError(t, e.post("/v1/agents", registerToken, agentJSON("from-file", "http://127.0.0.1:9")), http.StatusConflict, "managed_by_file")
			expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/from-file", Token: registerToken}), http.StatusConflict, "managed_by_file")
		})
		t.Run("default conflict", func(t *testing.T) {
			b := agentJSON("default-one", "http://127.0.0.1:9")
			b["isDefault"] = true
			require.Equal(t, http.StatusCreated, e.post("/v1/agents", registerToken, b).Status)
			b = agentJSON("default-two", "http://127.0.0.1:9")
			b["isDefault"] = true
			expectError(t, e.post("/v1/agents", registerToken, b), http.StatusConflict, "conflict")
		})
		t.Run("nothing partial is stored", func(t *testing.T) {
			_, err := e.reg.Get(context.Background(), "default-two")
			require.ErrorIs(t, err, registry.ErrNotFound)
			_, err = e.reg.Get(context.Background(), "meta")
			require.ErrorIs(t, err, registry.ErrNotFound)
		})
	})
}

func TestBadBodies(t *testing.T) {
	e := newEnv(t, envConfig{})
	good := `{"name":"a","description":"d","capabilities":["x"],"endpoint":"http://127.0.0.1:9"}`
	cases := []struct {
		name  string
		body  string
		ctype string
		code  string
		field string
		msg   string
	}{
		{name: "unknown field", body: `{"name":"a","capabilitiez":["x"],"endpoint":"http://127.0.0.1:9"}`, code: "invalid_argument", field: "capabilitiez", msg: "capabilitiez"},
		{name: "nested unknown field", body: `{"name":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9","auth":{"type":"bearer","tokn":"x"}}`, code: "invalid_argument", field: "auth.tokn"},
		{name: "wrong-case field", body: `{"name":"a","capabilities":["x"],"Endpoint":"http://127.0.0.1:9"}`, code: "invalid_argument", field: "Endpoint"},
		{name: "wrong-case nested field", body: `{"name":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9","auth":{"Type":"none"}}`, code: "invalid_argument", field: "auth.Type"},
		{name: "duplicate field", body: `{"name":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9","endpoint":"http://127.0.0.1:10"}`, code: "invalid_argument", field: "endpoint"},
		{name: "duplicate label", body: `{"name":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9","labels":{"k":"1","k":"2"}}`, code: "invalid_argument", field: "labels.k"},
		{name: "unknown field in a list item", body: `{"name":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9","resources":[{"uri":"u","URI":"v"}]}`, code: "invalid_argument", field: "resources[0].URI"},
		{name: "wrong type", body: `{"name":"a","capabilities":"x","endpoint":"http://127.0.0.1:9"}`, code: "invalid_argument", field: "capabilities", msg: "array"},
		{name: "wrong nested type", body: `{"name":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9","ttlSeconds":"60"}`, code: "invalid_argument", field: "ttlSeconds", msg: "integer"},
		{name: "fraction for int", body: `{"name":"a","capabilities":["x"],"endpoint":"http://127.0.0.1:9","ttlSeconds":1.5}`, code: "invalid_argument", field: "ttlSeconds"},
		{name: "not an object", body: `["a"]`, code: "invalid_argument", msg: "object"},
		{name: "malformed", body: `{"name":`, code: "invalid_argument", msg: "malformed"},
		{name: "syntax error", body: `{"name" "a"}`, code: "invalid_argument", msg: "malformed"},
		{name: "trailing data", body: good + ` {"x":1}`, code: "invalid_argument", msg: "after the JSON"},
		{name: "trailing garbage", body: good + `garbage`, code: "invalid_argument", msg: "after the JSON"},
		{name: "bad utf-8", body: "{\"name\":\"a\xff\xfe\",\"capabilities\":[\"x\"],\"endpoint\":\"http://127.0.0.1:9\"}", code: "invalid_argument", msg: "UTF-8"},
		{name: "empty", body: ``, code: "invalid_argument", msg: "required"},
		{name: "text/plain", body: good, ctype: "text/plain", code: "unsupported_media_type"},
		{name: "form", body: "name=a", ctype: "application/x-www-form-urlencoded", code: "unsupported_media_type"},
		{name: "latin-1 charset", body: good, ctype: "application/json; charset=iso-8859-1", code: "unsupported_media_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctype := c.ctype
			if ctype == "" {
				ctype = "application/json"
			}
			r := e.do(req{Method: http.MethodPost, Path: "/v1/agents", Token: registerToken, Body: c.body, Header: map[string]string{"Content-Type": ctype}})
			status := http.StatusBadRequest
			if c.code == "unsupported_media_type" {
				status = http.StatusUnsupportedMediaType
			}
			er := expectError(t, r, status, c.code)
			if c.field != "" {
				assert.Equal(t, map[string]any{"field": c.field}, er.Details)
			}
			if c.msg != "" {
				assert.Contains(t, er.Error, c.msg)
			}
		})
	}
	t.Run("missing content type is accepted", func(t *testing.T) {
		r := e.do(req{Method: http.MethodPost, Path: "/v1/agents", Token: registerToken, Body: good, Header: map[string]string{"Content-Type": ""}})
		assert.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	})
	t.Run("json suffix and charset", func(t *testing.T) {
		r := e.do(req{Method: http.MethodPost, Path: "/v1/agents", Token: registerToken, Body: good, Header: map[string]string{"Content-Type": "application/merge-patch+json; charset=UTF-8"}})
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})
	t.Run("too large", func(t *testing.T) {
		big := `{"name":"a","description":"` + strings.Repeat("x", 1<<20) + `"}`
		r := e.post("/v1/agents", registerToken, big)
		expectError(t, r, http.StatusRequestEntityTooLarge, "payload_too_large")
	})
	t.Run("too large without content length", func(t *testing.T) {
		big := `{"name":"a","description":"` + strings.Repeat("x", 1<<20) + `"}`
		hr, err := http.NewRequest(http.MethodPost, e.ts.URL+"/v1/agents", struct{ *strings.Reader }{strings.NewReader(big)})
		require.NoError(t, err)
		hr.Header.Set("Authorization", "Bearer "+registerToken)
		hr.ContentLength = -1 // chunked
		resp, err := e.ts.Client().Do(hr)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})
	t.Run("nothing was stored", func(t *testing.T) {
		page, err := e.reg.List(context.Background(), registry.ListOptions{})
		require.NoError(t, err)
		require.Len(t, page.Agents, 1) // the one good registration
	})
}

func TestAgentRoutes(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg envConfig) {
		e := newEnv(t, cfg)
		e.register(agentJSON("alpha", "http://127.0.0.1:9/task"))

		r := e.get("/v1/agents/alpha", readToken)
		require.Equal(t, http.StatusOK, r.Status)
		var a registry.Agent
		r.JSON(t, &a)
		assert.Equal(t, "alpha", a.Name)
		expectError(t, e.get("/v1/agents/nobody", readToken), http.StatusNotFound, "not_found")

		before := a.LastSeen
		time.Sleep(2 * time.Millisecond)
		r = e.post("/v1/agents/alpha/heartbeat", registerToken, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &a)
		assert.True(t, a.LastSeen.After(before))
		expectError(t, e.post("/v1/agents/nobody/heartbeat", registerToken, nil), http.StatusNotFound, "not_found")
		expectError(t, e.post("/v1/agents/alpha/heartbeat", readToken, nil), http.StatusForbidden, "permission_denied")

		expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/alpha", Token: readToken}), http.StatusForbidden, "permission_denied")
		r = e.do(req{Method: http.MethodDelete, Path: "/v1/agents/alpha", Token: registerToken})
		assert.Equal(t, http.StatusNoContent, r.Status)
		assert.Empty(t, r.Body)
		expectError(t, e.do(req{Method: http.MethodDelete, Path: "/v1/agents/alpha", Token: registerToken}), http.StatusNotFound, "not_found")
		expectError(t, e.get("/v1/agents/alpha", readToken), http.StatusNotFound, "not_found")
	})
}

func TestListPagination(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg envConfig) {
		e := newEnv(t, cfg)
		for i := range 25 {
			b := agentJSON(fmt.Sprintf("agent-%02d", i), "http://127.0.0.1:9/task")
			if i%2 == 0 {
				b["labels"] = map[string]string{"team": "even"}
			}
			e.register(b)
		}
		walk := func(first string) (names []string, pages int) {
			for next := first; next != ""; {
				var page []registry.Agent
				page, next = listPage[registry.Agent](t, e, next, readToken)
				for _, a := range page {
					names = append(names, a.Name)
				}
				pages++
				require.Less(t, pages, 10)
			}
			return names, pages
		}
		names, pages := walk("/v1/agents?limit=10")
		assert.Equal(t, 3, pages)
		require.Len(t, names, 25)
		for i, n := range names {
			assert.Equal(t, fmt.Sprintf("agent-%02d", i), n)
		}

		names, pages = walk("/v1/agents?limit=5&label=team=even")
		assert.Len(t, names, 13)
		assert.Equal(t, 3, pages)

		// The default page holds everything here: no Link.
		r := e.get("/v1/agents", readToken)
		assert.Empty(t, r.Header.Get("Link"))
		assert.Equal(t, byte('['), r.Body[0], "lists are bare arrays")

		// An empty list is [], not null.
		r = e.get("/v1/agents?label=team=none", readToken)
		assert.Equal(t, "[]\n", string(r.Body))

		expectError(t, e.get("/v1/agents?cursor=not-ours!", readToken), http.StatusBadRequest, "invalid_argument")
		expectError(t, e.get("/v1/agents?limit=-1", readToken), http.StatusBadRequest, "invalid_argument")
		expectError(t, e.get("/v1/agents?limit=ten", readToken), http.StatusBadRequest, "invalid_argument")
		expectError(t, e.get("/v1/agents?label=novalue", readToken), http.StatusBadRequest, "invalid_argument")
		er := expectError(t, e.get("/v1/agents?lmit=10", readToken), http.StatusBadRequest, "invalid_argument")
		assert.Equal(t, map[string]any{"field": "lmit"}, er.Details)
		expectError(t, e.get("/v1/agents?limit=1&limit=2", readToken), http.StatusBadRequest, "invalid_argument")
		expectError(t, e.get("/v1/agents?%zz", readToken), http.StatusBadRequest, "invalid_argument")
	})
}

func TestLinkUsesPublicURL(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) { o.PublicURL = "https://mesh.example.com/" }})
	e.register(agentJSON("a", "http://127.0.0.1:9"))
	e.register(agentJSON("b", "http://127.0.0.1:9"))
	r := e.get("/v1/agents?limit=1", readToken)
	m := linkRE.FindStringSubmatch(r.Header.Get("Link"))
	require.NotNil(t, m)
	u, err := url.Parse(m[1])
	require.NoError(t, err)
	assert.Equal(t, "https", u.Scheme)
	assert.Equal(t, "mesh.example.com", u.Host)
	assert.Equal(t, "/v1/agents", u.Path)
	assert.Equal(t, "1", u.Query().Get("limit"))
}

func TestDiscover(t *testing.T) {
	forEachStore(t, func(t *testing.T, cfg envConfig) {
		e := newEnv(t, cfg)
		fin := agentJSON("finance", "http://127.0.0.1:9/task", "budget", "cost-center")
		fin["resources"] = []map[string]string{{"uri": "https://erp.example.com/finance/*"}}
		fin["labels"] = map[string]string{"team": "fin"}
		e.register(fin)
		hr := agentJSON("hr", "http://127.0.0.1:9/task", "payroll", "vacation")
		hr["description"] = "Payroll and vacation requests, and the budget of headcount."
		e.register(hr)

		var res []discovery.Result
		r := e.get("/v1/discover?query="+url.QueryEscape("budget for engineering"), readToken)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &res)
		require.NotEmpty(t, res)
		assert.Equal(t, "finance", res[0].Agent.Name)
		assert.Contains(t, res[0].MatchedTerms, "budget")

		r = e.get("/v1/discover?query=budget&limit=1", readToken)
		r.JSON(t, &res)
		assert.Len(t, res, 1)

		// Seed form of resources: a JSON array of {uri} (with the seed's type).
		rs := url.QueryEscape(`[{"type":"api","uri":"https://erp.example.com/finance/q3"}]`)
		r = e.get("/v1/discover?query=budget&resources="+rs, readToken)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &res)
		require.Len(t, res, 1)
		assert.Equal(t, "finance", res[0].Agent.Name)
		require.Len(t, res[0].MatchedResources, 1)

		r = e.get("/v1/discover?query=budget&label=team=fin&scorer=overlap&minScore=0.1&includeUnavailable=true&protocol=http", readToken)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &res)
		require.Len(t, res, 1)

		r = e.get("/v1/discover?query=spaceships", readToken)
		assert.Equal(t, "[]\n", string(r.Body))

		// POST with the seed's field names.
		r = e.post("/v1/discover", readToken, map[string]any{
			"query": "budget", "limit": 5, "labels": map[string]string{"team": "fin"},
			"requiredResources": []map[string]string{{"uri": "https://erp.example.com/finance/x"}},
		})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &res)
		require.Len(t, res, 1)
		r = e.post("/v1/discover", readToken, map[string]any{"query": "budget", "resources": []string{"https://erp.example.com/hr/x"}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &res)
		assert.Empty(t, res)

		bad := []struct {
			name string
			r    *response
			fld  string
		}{
			{"missing query", e.get("/v1/discover", readToken), "query"},
			{"empty query", e.get("/v1/discover?query=+-+", readToken), "query"},
			{"bad limit", e.get("/v1/discover?query=x&limit=many", readToken), "limit"},
			{"bad minScore", e.get("/v1/discover?query=x&minScore=NaN", readToken), "minScore"},
			{"minScore out of range", e.get("/v1/discover?query=x&minScore=2", readToken), ""},
			{"bad scorer", e.get("/v1/discover?query=x&scorer=magic", readToken), ""},
			{"bad protocol", e.get("/v1/discover?query=x&protocol=smtp", readToken), "protocol"},
			{"bad bool", e.get("/v1/discover?query=x&includeUnavailable=maybe", readToken), "includeUnavailable"},
			{"resources not JSON", e.get("/v1/discover?query=x&resources=nope", readToken), "resources"},
			{"resources without uri", e.get("/v1/discover?query=x&resources="+url.QueryEscape(`[{"type":"fs"}]`), readToken), "resources[0].uri"},
			{"resources unknown key", e.get("/v1/discover?query=x&resources="+url.QueryEscape(`[{"uri":"a","urn":"b"}]`), readToken), "resources[0]"},
			{"unknown param", e.get("/v1/discover?query=x&q=y", readToken), "q"},
			{"post unknown field", e.post("/v1/discover", readToken, `{"query":"x","limits":3}`), "limits"},
			{"post wrong type", e.post("/v1/discover", readToken, `{"query":"x","limit":"3"}`), "limit"},
			{"post negative limit", e.post("/v1/discover", readToken, `{"query":"x","limit":-3}`), "limit"},
			{"post bad resources", e.post("/v1/discover", readToken, `{"query":"x","requiredResources":[1]}`), "requiredResources[0]"},
			{"post empty query", e.post("/v1/discover", readToken, `{"query":""}`), "query"},
		}
		for _, b := range bad {
			t.Run(b.name, func(t *testing.T) {
				er := expectError(t, b.r, http.StatusBadRequest, "invalid_argument")
				if b.fld != "" {
					assert.Equal(t, map[string]any{"field": b.fld}, er.Details)
				}
			})
		}
		expectError(t, e.get("/v1/discover?query=budget", ""), http.StatusUnauthorized, "unauthenticated")
		expectError(t, e.get("/v1/discover?query=budget", routeToken), http.StatusForbidden, "permission_denied")
	})
}

// searchOnly hides the engine's own JSON encoding, so the server falls back
// to json.Marshal of the results.
type searchOnly struct{ e *discovery.Engine }

func (s searchOnly) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	return s.e.Search(query, q)
}

// TestDiscoverEncodings checks that the engine's fast encoding of
// discovery replies gives the bytes of the generic path, errors included.
func TestDiscoverEncodings(t *testing.T) {
	e := newEnv(t, envConfig{})
	fin := agentJSON("finance", "http://127.0.0.1:9/task", "budget", "cost-center")
	fin["resources"] = []map[string]string{{"uri": "https://erp.example.com/finance/*"}}
	fin["labels"] = map[string]string{"team": "fin", "tier": "<gold>"}
	fin["description"] = "Budgets & forecasts for \"engineering\" — Q3 <draft>"
	e.register(fin)
	e.register(agentJSON("hr", "http://127.0.0.1:9/task", "payroll", "budget"))

	generic, err := httpserver.New(e.reg, searchOnly{e.engine}, nil, &httpserver.Options{Token: adminToken, Metrics: prometheus.NewRegistry()})
	require.NoError(t, err)
	for _, path := range []string{
		"/v1/discover?query=" + url.QueryEscape("budget for engineering"),
		"/v1/discover?query=budget&limit=1&scorer=overlap",
		"/v1/discover?query=budget&resources=" + url.QueryEscape(`[{"uri":"https://erp.example.com/finance/q3"}]`),
		"/v1/discover?query=spaceships",
		"/v1/discover?query=+-+",
		"/v1/discover?query=x&minScore=2",
	} {
		fast := e.get(path, adminToken)
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		generic.ServeHTTP(rec, req)
		assert.Equal(t, rec.Code, fast.Status, path)
		assert.Equal(t, rec.Body.String(), string(fast.Body), path)
		assert.Equal(t, rec.Header().Get("Content-Length"), fast.Header.Get("Content-Length"), path)
	}
}
