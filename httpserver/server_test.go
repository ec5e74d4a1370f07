package httpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/harness/logtest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

func assertSecurityHeaders(t *testing.T, h http.Header) {
	t.Helper()
	assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	assert.Equal(t, "DENY", h.Get("X-Frame-Options"))
	assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
	assert.Equal(t, "default-src 'none'; frame-ancestors 'none'", h.Get("Content-Security-Policy"))
	assert.Equal(t, "no-store", h.Get("Cache-Control"))
	assert.NotEmpty(t, h.Get("X-Request-Id"))
}

func TestHealth(t *testing.T) {
	e := newEnv(t, envConfig{})
	r := e.get("/health", "")
	require.Equal(t, http.StatusOK, r.Status)
	assert.JSONEq(t, `{"status":"ok"}`, string(r.Body))
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assertSecurityHeaders(t, r.Header)

	r = e.do(req{Method: http.MethodHead, Path: "/health"})
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Empty(t, r.Body)
}

// /health/ready needs no token and says 503 unavailable, with what the
// mesh waits for and a Retry-After, until Options.Ready says ready;
// /health stays 200 (liveness) meanwhile.
func TestHealthReady(t *testing.T) {
	r := newEnv(t, envConfig{}).get("/health/ready", "")
	require.Equal(t, http.StatusOK, r.Status, "no Ready hook: ready while serving")
	assert.JSONEq(t, `{"status":"ready"}`, string(r.Body))

	var learning atomic.Bool
	learning.Store(true)
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.Ready = func(context.Context) error {
			if learning.Load() {
				return errors.New("the router is still learning the agents")
			}
			return nil
		}
	}})
	r = e.get("/health/ready", "")
	er := expectError(t, r, http.StatusServiceUnavailable, "unavailable")
	assert.Equal(t, "not ready: the router is still learning the agents", er.Error)
	assert.Equal(t, "1", r.Header.Get("Retry-After"))
	assert.Equal(t, http.StatusOK, e.get("/health", "").Status, "liveness is not readiness")

	learning.Store(false)
	assert.Equal(t, http.StatusOK, e.get("/health/ready", "").Status)
}

func TestSecurityHeadersEverywhere(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, r := range []*response{
		e.get("/health", ""),
		e.get("/v1/agents", readToken),
		e.get("/v1/agents", ""),         // 401
		e.get("/v1/agents", routeToken), // 403
		e.get("/nowhere", ""),           // 404
		e.do(req{Method: http.MethodPut, Path: "/v1/agents", Token: readToken}),          // 405
		e.post("/v1/agents", registerToken, `{`),                                         // 400
		e.get("/metrics", ""),                                                            // text
		e.do(req{Method: http.MethodDelete, Path: "/v1/agents/x", Token: registerToken}), // 404 from a route
	} {
		assertSecurityHeaders(t, r.Header)
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.get("/health", "").Header.Get("X-Request-Id")
	b := e.get("/health", "").Header.Get("X-Request-Id")
	assert.NotEqual(t, a, b)
	r := e.do(req{Method: http.MethodGet, Path: "/health", Header: map[string]string{"X-Request-Id": "trace-42.a_b:c"}})
	assert.Equal(t, "trace-42.a_b:c", r.Header.Get("X-Request-Id"))
	r = e.do(req{Method: http.MethodGet, Path: "/health", Header: map[string]string{"X-Request-Id": "bad id\twith junk"}})
	assert.NotContains(t, r.Header.Get("X-Request-Id"), "junk")
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t, envConfig{})
	expectError(t, e.get("/nowhere", ""), http.StatusNotFound, "not_found")
	expectError(t, e.get("/v1/agents/a/b/c", readToken), http.StatusNotFound, "not_found")
	expectError(t, e.get("/v1/agents/", readToken), http.StatusNotFound, "not_found")

	r := e.do(req{Method: http.MethodPut, Path: "/v1/agents", Token: readToken})
	er := expectError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	assert.Equal(t, "GET, HEAD, POST", r.Header.Get("Allow"))
	assert.Contains(t, er.Error, "PUT")

	r = e.do(req{Method: http.MethodPatch, Path: "/v1/agents/alpha", Token: readToken})
	expectError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	assert.Equal(t, "DELETE, GET, HEAD", r.Header.Get("Allow"))

	r = e.post("/health", "", nil)
	expectError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	assert.Equal(t, "GET, HEAD", r.Header.Get("Allow"))

	// Without a token, /v1 answers 401 before saying what exists.
	r = e.do(req{Method: http.MethodPut, Path: "/v1/agents"})
	expectError(t, r, http.StatusUnauthorized, "unauthenticated")
	assert.Empty(t, r.Header.Get("Allow"))

	// Delegation routes are absent without a delegation client.
	n := newEnv(t, envConfig{noDelegation: true})
	expectError(t, n.post("/v1/delegate", adminToken, `{}`), http.StatusNotFound, "not_found")
}

// rawRequest sends a request line as written, bypassing the client's path
// cleaning.
func rawRequest(t *testing.T, e *env, method, target, token string) (int, httpserver.ErrorResponse) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.ts.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte(method + " " + target + " HTTP/1.1\r\nHost: mesh\r\nAuthorization: Bearer " + token + "\r\nConnection: close\r\n\r\n"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var er httpserver.ErrorResponse
	if resp.StatusCode >= 400 {
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s", method, target)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&er))
		require.NotEmpty(t, er.Code)
	}
	return resp.StatusCode, er
}

func TestPathTricks(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.register(agentJSON("alpha", "http://127.0.0.1:9"))
	cases := []struct {
		method, target string
		status         int
		code           string
	}{
		{"GET", "/v1/agents/..%2f", 400, "invalid_argument"},
		{"GET", "/v1/agents/..%2F..%2Fhealth", 400, "invalid_argument"},
		{"GET", "/v1/agents/%2e%2e", 400, "invalid_argument"},
		{"GET", "/v1/agents/alpha%2Fheartbeat", 400, "invalid_argument"},
		{"DELETE", "/v1/agents/..%2f", 400, "invalid_argument"},
		{"POST", "/v1/agents/..%2f/heartbeat", 400, "invalid_argument"},
		{"GET", "/v1/agents/a%00b", 400, "invalid_argument"},
		{"GET", "/v1/agents/%ff%fe", 400, "invalid_argument"},
		{"GET", "/v1/agents/" + strings.Repeat("a", 129), 400, "invalid_argument"},
		{"GET", "/v1/agents/-leading-dash", 400, "invalid_argument"},
		{"GET", "/v1/agents/../health", 404, "not_found"},
		{"GET", "/v1/agents/./alpha", 404, "not_found"},
		{"GET", "//v1/agents", 404, "not_found"},
		{"GET", "/v1//agents", 404, "not_found"},
		{"GET", "/v1/agents/alpha/", 404, "not_found"},
		{"GET", "/v1/delegations/..%2f", 404, "not_found"},
		{"GET", "/v1/delegations/" + strings.Repeat("f", 200), 404, "not_found"},
		{"POST", "/v1/delegations/%2e%2e/cancel", 404, "not_found"},
		{"GET", "/v1/agents/alpha", 200, ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.target[:min(len(c.target), 40)], func(t *testing.T) {
			status, er := rawRequest(t, e, c.method, c.target, adminToken)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.code, er.Code)
		})
	}
	// The server is still healthy.
	assert.Equal(t, http.StatusOK, e.get("/health", "").Status)
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.register(agentJSON("alpha", "http://127.0.0.1:9"))
	e.get("/v1/agents/alpha", readToken)
	e.get("/v1/agents/beta", readToken)
	e.get("/v1/agents/random-name-1", readToken)
	e.get("/definitely/not/a/route", "")
	e.get("/v1/agents", "")

	r := e.get("/metrics", "")
	require.Equal(t, http.StatusOK, r.Status)
	text := string(r.Body)
	assert.Contains(t, text, `agentmesh_http_requests_total{code="200",route="GET /v1/agents/{name}"} 1`)
	assert.Contains(t, text, `agentmesh_http_requests_total{code="404",route="GET /v1/agents/{name}"} 2`)
	assert.Contains(t, text, `agentmesh_http_requests_total{code="201",route="POST /v1/agents"} 1`)
	assert.Contains(t, text, `agentmesh_http_requests_total{code="401",route="GET /v1/agents"} 1`)
	assert.Contains(t, text, `agentmesh_http_requests_total{code="404",route="unmatched"} 1`)
	assert.Contains(t, text, `agentmesh_http_request_duration_seconds_bucket{route="GET /v1/agents/{name}",le="0.005"}`)
	assert.NotContains(t, text, "alpha")
	assert.NotContains(t, text, "random-name-1")
	assert.NotContains(t, text, "/definitely")

	// The host's registry holds the same metrics.
	mfs, err := e.metrics.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	assert.Contains(t, names, "agentmesh_http_requests_total")
	assert.Contains(t, names, "agentmesh_http_request_duration_seconds")

	// Two servers may share a registry.
	_, err = httpserver.New(e.reg, e.engine, nil, &httpserver.Options{Token: "t", Metrics: e.metrics})
	require.NoError(t, err)
}

func TestMetricsOwnListener(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) { o.NoMetricsRoute = true; o.Metrics = nil }})
	expectError(t, e.get("/metrics", ""), http.StatusNotFound, "not_found")
	rec := httptest.NewRecorder()
	e.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "go_goroutines") // the private registry's collectors
	assert.Contains(t, rec.Body.String(), `agentmesh_http_requests_total{code="404",route="unmatched"} 1`)
}

func TestRequestLog(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.post("/v1/agents", registerToken, agentJSON("logged", "http://127.0.0.1:9", "secret-capability-text"))
	e.get("/v1/agents", "wrong-token-value")

	var records []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(e.logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		records = append(records, m)
	}
	require.Len(t, records, 2)
	first := records[0]
	assert.Equal(t, "INFO", first["level"])
	assert.Equal(t, "POST", first["method"])
	assert.Equal(t, "POST /v1/agents", first["route"])
	assert.EqualValues(t, 201, first["status"])
	assert.Equal(t, "registrar", first["token"])
	assert.NotEmpty(t, first["request_id"])
	assert.Contains(t, first, "duration")
	assert.NotContains(t, records[1], "token")
	logs := e.logs.String()
	for _, secret := range []string{registerToken, "wrong-token-value", "secret-capability-text"} {
		assert.NotContains(t, logs, secret)
	}
}

func TestPanicIs500WithoutDetails(t *testing.T) {
	e := newEnv(t, envConfig{})
	require.NoError(t, e.srv.Handle("GET /boom", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(errors.New("database password is hunter2"))
	}), ""))
	r := e.get("/boom", readToken)
	er := expectError(t, r, http.StatusInternalServerError, "internal")
	assert.NotContains(t, string(r.Body), "hunter2")
	assert.Equal(t, map[string]any{"requestId": r.Header.Get("X-Request-Id")}, er.Details)
	assertSecurityHeaders(t, r.Header)
	assert.Contains(t, e.logs.String(), r.Header.Get("X-Request-Id"))
	assert.Contains(t, e.logs.String(), "handler panic")
	assert.Equal(t, http.StatusOK, e.get("/health", "").Status)
}

// failingStore is a registry store whose writes fail: a 500 must not show
// the store's error.
type failingStore struct{ *memstore.Store }

func (failingStore) UpdateAgent(context.Context, string, func(*registry.Agent) (*registry.Agent, error)) error {
	return errors.New("disk /var/lib/secret-path is full")
}

func TestInternalErrorsHideText(t *testing.T) {
	reg := newRegistry(t, failingStore{memstore.New()})
	logs := &logtest.Buffer{}
	srv, err := httpserver.New(reg, discovery.New(nil), nil, &httpserver.Options{Token: adminToken, Logger: slogJSON(logs)})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	e := &env{t: t, ts: ts}
	r := e.post("/v1/agents", adminToken, agentJSON("a", "http://127.0.0.1:9"))
	expectError(t, r, http.StatusInternalServerError, "internal")
	assert.NotContains(t, string(r.Body), "secret-path")
	assert.Contains(t, logs.String(), "secret-path")
	assert.Contains(t, logs.String(), r.Header.Get("X-Request-Id"))
}

func TestDeepHealth(t *testing.T) {
	var pingErr error
	reloadErr := errors.New("agents/pw.yaml:3: unknown key \"endpont\"")
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.StorePing = func(ctx context.Context) error { return pingErr }
		o.LastReloadError = func() error { return reloadErr }
	}})
	e.register(agentJSON("alpha", "http://127.0.0.1:9"))
	e.breakers.Get("alpha") // a closed breaker

	expectError(t, e.get("/health/deep", ""), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.get("/health/deep", routeToken), http.StatusForbidden, "permission_denied")

	r := e.get("/health/deep", readToken)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var h httpserver.DeepHealth
	r.JSON(t, &h)
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, "ok", h.Store)
	assert.Equal(t, "ok", h.Registry)
	assert.Equal(t, 1, h.Agents)
	require.Contains(t, h.Breakers, "alpha")
	assert.Equal(t, "closed", h.Breakers["alpha"].State.String())
	assert.Equal(t, reloadErr.Error(), h.LastReloadError)

	pingErr = errors.New("bolt: database not open at /secret/path")
	r = e.get("/health/deep", readToken)
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	r.JSON(t, &h)
	assert.Equal(t, "degraded", h.Status)
	assert.Equal(t, "unreachable", h.Store)
	assert.NotContains(t, string(r.Body), "/secret/path")

	// PingStore over the real store: reachable, then closed.
	s := newEnv(t, envConfig{bolt: true})
	ping := httpserver.PingStore(s.store.(registry.Store))
	require.NoError(t, ping(context.Background()))
	require.NoError(t, s.store.(interface{ Close() error }).Close())
	require.Error(t, ping(context.Background()))

	// A closed registry degrades too.
	pingErr = nil
	require.NoError(t, e.reg.Close())
	r = e.get("/health/deep", readToken)
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	r.JSON(t, &h)
	assert.Equal(t, "unavailable", h.Registry)
}

func TestAdminReload(t *testing.T) {
	fail := false
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.Reload = func(ctx context.Context) (any, error) {
			if fail {
				return map[string]any{"errors": []string{"tokens.yaml:4: unknown scope \"sudo\""}}, errors.New("reload failed: 1 error")
			}
			return map[string]any{"tokens": 3}, nil
		}
	}})
	expectError(t, e.post("/v1/admin/reload", readToken, nil), http.StatusForbidden, "permission_denied")
	r := e.post("/v1/admin/reload", adminToken, nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.JSONEq(t, `{"tokens":3}`, string(r.Body))

	fail = true
	r = e.post("/v1/admin/reload", adminToken, nil)
	er := expectError(t, r, http.StatusUnprocessableEntity, "reload_failed")
	assert.Contains(t, string(r.Body), "unknown scope")
	assert.Equal(t, "reload failed: 1 error", er.Error)

	// Without a Reload hook the route is absent.
	n := newEnv(t, envConfig{})
	expectError(t, n.post("/v1/admin/reload", adminToken, nil), http.StatusNotFound, "not_found")
}

func TestNewValidatesOptions(t *testing.T) {
	reg, err := registry.New(context.Background(), memstore.New(), &registry.Options{SweepInterval: -1})
	require.NoError(t, err)
	defer reg.Close()
	eng := discovery.New(nil)
	for name, o := range map[string]*httpserver.Options{
		"no token":       nil,
		"star origin":    {Token: "t", CORSOrigins: []string{"*"}},
		"origin w/ path": {Token: "t", CORSOrigins: []string{"https://x.example.com/app"}},
		"bad public url": {Token: "t", PublicURL: "mesh.example.com"},
		"dup token name": {Tokens: []httpserver.Token{{Name: "a", Token: "x", Scopes: []httpserver.Scope{"read"}}, {Name: "a", Token: "y", Scopes: []httpserver.Scope{"read"}}}},
		"dup secret":     {Tokens: []httpserver.Token{{Name: "a", Token: "x", Scopes: []httpserver.Scope{"read"}}, {Name: "b", SHA256: httpserver.HashToken("x"), Scopes: []httpserver.Scope{"read"}}}},
		"no scopes":      {Tokens: []httpserver.Token{{Name: "a", Token: "x"}}},
		"bad scope":      {Tokens: []httpserver.Token{{Name: "a", Token: "x", Scopes: []httpserver.Scope{"root"}}}},
		"bad sha":        {Tokens: []httpserver.Token{{Name: "a", SHA256: "abc", Scopes: []httpserver.Scope{"read"}}}},
		"mesh name used": {Token: "t", Tokens: []httpserver.Token{{Name: httpserver.MeshTokenName, Token: "x", Scopes: []httpserver.Scope{"read"}}}},
	} {
		_, err := httpserver.New(reg, eng, nil, o)
		assert.Error(t, err, name)
	}
	_, err = httpserver.New(nil, eng, nil, &httpserver.Options{Token: "t"})
	assert.Error(t, err)
	_, err = httpserver.New(reg, eng, nil, &httpserver.Options{Token: "t", Metrics: prometheus.NewRegistry()})
	assert.NoError(t, err)
}

func TestParseRateLimit(t *testing.T) {
	for in, want := range map[string]httpserver.RateLimit{
		"100/15m":  {Requests: 100, Per: 15 * time.Minute},
		" 10/s ":   {Requests: 10, Per: time.Second},
		"5/minute": {Requests: 5, Per: time.Minute},
		"1000/1h":  {Requests: 1000, Per: time.Hour},
		"7/2d":     {Requests: 7, Per: 48 * time.Hour},
		"3/1h30m":  {Requests: 3, Per: 90 * time.Minute},
		"off":      {},
		"0":        {},
	} {
		got, err := httpserver.ParseRateLimit(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "100", "x/15m", "-1/m", "0/m", "100/", "100/fortnight", "100/0s", "100/-1m", "1/1ns"} {
		_, err := httpserver.ParseRateLimit(in)
		assert.Error(t, err, in)
	}
	assert.Equal(t, "100/15m", httpserver.RateLimit{Requests: 100, Per: 15 * time.Minute}.String())
	assert.Equal(t, "5/1d", httpserver.RateLimit{Requests: 5, Per: 24 * time.Hour}.String())
	assert.Equal(t, "off", httpserver.RateLimit{}.String())
}

func TestParseTokens(t *testing.T) {
	tokens, err := httpserver.ParseTokens([]byte(`
- name: ci
  token_sha256: ` + httpserver.HashToken("ci-secret") + `
  scopes: [read, delegate]
- name: admin
  token: admin-secret
  scopes: [admin]
`))
	require.NoError(t, err)
	require.Len(t, tokens, 2)
	assert.Equal(t, "ci", tokens[0].Name)
	assert.Equal(t, []httpserver.Scope{"read", "delegate"}, tokens[1-1].Scopes)

	empty, err := httpserver.ParseTokens([]byte("# nothing yet\n"))
	require.NoError(t, err)
	assert.Empty(t, empty)

	for name, doc := range map[string]string{
		"unknown key":  "- name: a\n  token: x\n  scopes: [read]\n  role: root\n",
		"both secrets": "- name: a\n  token: x\n  token_sha256: " + httpserver.HashToken("x") + "\n  scopes: [read]\n",
		"no name":      "- token: x\n  scopes: [read]\n",
		"bad scope":    "- name: a\n  token: x\n  scopes: [sudo]\n",
		"not a list":   "name: a\n",
		"duplicate":    "- {name: a, token: x, scopes: [read]}\n- {name: a, token: y, scopes: [read]}\n",
	} {
		_, err := httpserver.ParseTokens([]byte(doc))
		assert.Error(t, err, name)
	}
	_, err = httpserver.ParseTokens([]byte("- name: a\n  token: x\n  scopes: [read]\n  role: root\n"))
	assert.ErrorContains(t, err, "line 4")

	assert.Len(t, httpserver.GenerateToken(), 26)
	assert.NotEqual(t, httpserver.GenerateToken(), httpserver.GenerateToken())
}
