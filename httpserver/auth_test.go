package httpserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
)

func TestAuthentication(t *testing.T) {
	e := newEnv(t, envConfig{})

	t.Run("missing", func(t *testing.T) {
		r := e.get("/v1/agents", "")
		expectError(t, r, http.StatusUnauthorized, "unauthenticated")
		assert.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer")
	})
	t.Run("wrong token", func(t *testing.T) {
		r := e.get("/v1/agents", "not-a-token")
		er := expectError(t, r, http.StatusUnauthorized, "unauthenticated")
		assert.NotContains(t, er.Error, "not-a-token")
	})
	t.Run("other scheme", func(t *testing.T) {
		r := e.do(req{Method: http.MethodGet, Path: "/v1/agents", Header: map[string]string{"Authorization": "Basic " + adminToken}})
		expectError(t, r, http.StatusUnauthorized, "unauthenticated")
	})
	t.Run("bearer scheme is case-insensitive", func(t *testing.T) {
		r := e.do(req{Method: http.MethodGet, Path: "/v1/agents", Header: map[string]string{"Authorization": "bearer " + adminToken}})
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})
	t.Run("x-api-key", func(t *testing.T) {
		r := e.do(req{Method: http.MethodGet, Path: "/v1/agents", Header: map[string]string{"X-API-Key": readToken}})
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = e.do(req{Method: http.MethodGet, Path: "/v1/agents", Header: map[string]string{"x-api-key": "wrong"}})
		expectError(t, r, http.StatusUnauthorized, "unauthenticated")
	})
	t.Run("wrong scope", func(t *testing.T) {
		r := e.post("/v1/agents", readToken, agentJSON("a1", "http://127.0.0.1:9/task"))
		er := expectError(t, r, http.StatusForbidden, "permission_denied")
		assert.Contains(t, er.Error, "register")
		r = e.get("/v1/agents", routeToken)
		expectError(t, r, http.StatusForbidden, "permission_denied")
	})
	t.Run("token_sha256 entry", func(t *testing.T) {
		r := e.post("/v1/agents", registerToken, agentJSON("hashed", "http://127.0.0.1:9/task"))
		assert.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	})
	t.Run("unknown /v1 route needs a token first", func(t *testing.T) {
		expectError(t, e.get("/v1/nothing-here", ""), http.StatusUnauthorized, "unauthenticated")
		expectError(t, e.get("/v1/nothing-here", readToken), http.StatusNotFound, "not_found")
	})
	t.Run("public routes", func(t *testing.T) {
		assert.Equal(t, http.StatusOK, e.get("/health", "").Status)
		assert.Equal(t, http.StatusOK, e.get("/metrics", "").Status)
		expectError(t, e.get("/health/deep", ""), http.StatusUnauthorized, "unauthenticated")
	})
}

func TestTokenRotation(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.Token = ""
		o.Tokens = []httpserver.Token{
			{Name: "old", Token: "old-secret", Scopes: []httpserver.Scope{httpserver.ScopeRead}},
			{Name: "new", SHA256: httpserver.HashToken("new-secret"), Scopes: []httpserver.Scope{httpserver.ScopeRead}},
		}
	}})
	// Both valid at once.
	assert.Equal(t, http.StatusOK, e.get("/v1/agents", "old-secret").Status)
	assert.Equal(t, http.StatusOK, e.get("/v1/agents", "new-secret").Status)

	// Retire the old one.
	require.NoError(t, e.srv.SetTokens([]httpserver.Token{
		{Name: "new", SHA256: httpserver.HashToken("new-secret"), Scopes: []httpserver.Scope{httpserver.ScopeRead}},
	}))
	expectError(t, e.get("/v1/agents", "old-secret"), http.StatusUnauthorized, "unauthenticated")
	assert.Equal(t, http.StatusOK, e.get("/v1/agents", "new-secret").Status)

	// A bad list is refused and the previous tokens stay.
	require.Error(t, e.srv.SetTokens([]httpserver.Token{{Name: "x", Token: "a", SHA256: httpserver.HashToken("a"), Scopes: []httpserver.Scope{httpserver.ScopeRead}}}))
	assert.Equal(t, http.StatusOK, e.get("/v1/agents", "new-secret").Status)

	// An empty list fails closed.
	require.NoError(t, e.srv.SetTokens(nil))
	expectError(t, e.get("/v1/agents", "new-secret"), http.StatusUnauthorized, "unauthenticated")
}

func TestAuthFailureThrottle(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.AuthFailureLimit = httpserver.RateLimit{Requests: 3, Per: time.Minute}
	}})
	// A request without credentials is not a guess and is not counted.
	for range 5 {
		expectError(t, e.get("/v1/agents", ""), http.StatusUnauthorized, "unauthenticated")
	}
	for range 3 {
		expectError(t, e.get("/v1/agents", "guess"), http.StatusUnauthorized, "unauthenticated")
	}
	// The budget is spent: wrong tokens get 429, the right one is served.
	for range 2 {
		r := e.get("/v1/agents", "guess")
		expectError(t, r, http.StatusTooManyRequests, "rate_limited")
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		require.NoError(t, err)
		assert.Positive(t, ra)
		assert.LessOrEqual(t, ra, 20)
		assert.Equal(t, http.StatusOK, e.get("/v1/agents", adminToken).Status, "a valid token from a throttled client is served")
	}
	// Public routes are not affected.
	assert.Equal(t, http.StatusOK, e.get("/health", "").Status)

	// One attempt back after 20 s.
	e.clock.Advance(21 * time.Second)
	expectError(t, e.get("/v1/agents", "guess"), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.get("/v1/agents", "guess"), http.StatusTooManyRequests, "rate_limited")
	assert.Equal(t, http.StatusOK, e.get("/v1/agents", adminToken).Status)
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.RateLimit = httpserver.RateLimit{Requests: 3, Per: time.Minute}
	}})
	now := e.clock.Now()
	for i := range 3 {
		r := e.get("/v1/agents", readToken)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "3", r.Header.Get("RateLimit-Limit"))
		assert.Equal(t, strconv.Itoa(2-i), r.Header.Get("RateLimit-Remaining"))
		assert.Equal(t, strconv.Itoa(20*(i+1)), r.Header.Get("RateLimit-Reset"))
		assert.Equal(t, "3;w=60", r.Header.Get("RateLimit-Policy"))
		assert.Equal(t, "3", r.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, strconv.Itoa(2-i), r.Header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, strconv.FormatInt(now.Unix()+int64(20*(i+1)), 10), r.Header.Get("X-RateLimit-Reset"))
		assert.Empty(t, r.Header.Get("Retry-After"))
	}
	r := e.get("/v1/agents", readToken)
	er := expectError(t, r, http.StatusTooManyRequests, "rate_limited")
	assert.Contains(t, er.Error, "3/1m")
	assert.Equal(t, "20", r.Header.Get("Retry-After"))
	assert.Equal(t, "0", r.Header.Get("RateLimit-Remaining"))

	// Budgets are per token name.
	assert.Equal(t, http.StatusOK, e.get("/v1/agents", adminToken).Status)
	// A wrong scope still spends the budget of the token that asked.
	expectError(t, e.post("/v1/agents", readToken, agentJSON("x", "http://127.0.0.1:9")), http.StatusTooManyRequests, "rate_limited")

	e.clock.Advance(20 * time.Second)
	r = e.get("/v1/agents", readToken)
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "0", r.Header.Get("RateLimit-Remaining"))

	// Public routes carry no rate limit headers and are never limited.
	assert.Empty(t, e.get("/health", "").Header.Get("RateLimit-Limit"))
}

func TestNoRateLimitByDefault(t *testing.T) {
	e := newEnv(t, envConfig{})
	r := e.get("/v1/agents", readToken)
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Empty(t, r.Header.Get("RateLimit-Limit"))
}

func TestMountedHandler(t *testing.T) {
	e := newEnv(t, envConfig{})
	var seen httpserver.Identity
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := httpserver.IdentityFrom(r.Context())
		require.True(t, ok)
		seen = id
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	require.NoError(t, e.srv.Handle("/mcp", h, httpserver.ScopeRoute))
	require.Error(t, e.srv.Handle("/mcp", h, httpserver.ScopeRoute), "conflicting pattern")
	require.Error(t, e.srv.Handle("GET /v1/agents", h, ""), "conflicting pattern")
	require.Error(t, e.srv.Handle("/x", h, "superuser"))
	require.Error(t, e.srv.Handle("not a pattern", h, ""))

	expectError(t, e.post("/mcp", "", `{}`), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.post("/mcp", readToken, `{}`), http.StatusForbidden, "permission_denied")
	r := e.post("/mcp", routeToken, `{}`)
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "router", seen.Name)
	assert.Equal(t, []httpserver.Scope{httpserver.ScopeRoute}, seen.Scopes())
	assert.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))

	// The body limit applies to mounted handlers too.
	var readErr error
	require.NoError(t, e.srv.Handle("POST /upload", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = readAll(r)
		w.WriteHeader(http.StatusNoContent)
	}), ""))
	e.post("/upload", adminToken, strings.Repeat("x", httpserver.DefaultMaxBodyBytes+1))
	require.Error(t, readErr)
}

// TestMountedHandlerPlainTextErrors: errors a mounted handler writes with
// http.Error (the MCP SDK does, for a wrong method, media type or an
// oversized body) are JSON errors like the server's own, {error, code}
// (docs/API.md#errors), and a 5xx carries no internal text.
func TestMountedHandlerPlainTextErrors(t *testing.T) {
	e := newEnv(t, envConfig{})
	require.NoError(t, e.srv.Handle("/plain", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("fail") {
		case "method":
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		case "media":
			http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		case "body":
			_, err := readAll(r)
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		case "internal":
			http.Error(w, "storing stream: dial tcp 10.0.0.7:2379: secret detail", http.StatusInternalServerError)
		case "json":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}`))
		default:
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("ok"))
		}
	}), ""))

	er := expectError(t, e.post("/plain?fail=method", adminToken, `{}`), http.StatusMethodNotAllowed, "method_not_allowed")
	assert.Equal(t, "Method Not Allowed", er.Error)
	r := e.post("/plain?fail=method", adminToken, `{}`)
	assert.Equal(t, "POST", r.Header.Get("Allow"))
	assert.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
	expectError(t, e.post("/plain?fail=media", adminToken, `{}`), http.StatusUnsupportedMediaType, "unsupported_media_type")
	er = expectError(t, e.post("/plain?fail=body", adminToken, strings.Repeat("x", httpserver.DefaultMaxBodyBytes+1)),
		http.StatusRequestEntityTooLarge, "payload_too_large")
	assert.NotEmpty(t, er.Error)
	r = e.post("/plain?fail=internal", adminToken, `{}`)
	expectError(t, r, http.StatusInternalServerError, "internal")
	assert.NotContains(t, string(r.Body), "secret detail")
	assert.NotContains(t, string(r.Body), "10.0.0.7")

	// JSON error bodies and successes pass through unchanged.
	r = e.post("/plain?fail=json", adminToken, `{}`)
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}`, string(r.Body))
	r = e.post("/plain", adminToken, `{}`)
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "ok", string(r.Body))
}

func TestCORS(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.CORSOrigins = []string{"https://console.example.com"}
	}})
	preflight := func(origin string) *response {
		return e.do(req{Method: http.MethodOptions, Path: "/v1/agents", Header: map[string]string{
			"Origin":                         origin,
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "authorization, content-type",
		}})
	}
	r := preflight("https://console.example.com")
	assert.Equal(t, http.StatusNoContent, r.Status)
	assert.Equal(t, "https://console.example.com", r.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, r.Header.Get("Access-Control-Allow-Methods"), "POST")
	assert.Contains(t, r.Header.Get("Access-Control-Allow-Headers"), "Authorization")
	assert.NotEmpty(t, r.Header.Get("Access-Control-Max-Age"))
	assert.Contains(t, r.Header.Values("Vary"), "Origin")

	r = preflight("https://evil.example.com")
	expectError(t, r, http.StatusForbidden, "permission_denied")
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))

	// Actual requests: the allowed origin is echoed, never "*".
	r = e.do(req{Method: http.MethodGet, Path: "/v1/agents", Token: readToken, Header: map[string]string{"Origin": "https://console.example.com"}})
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "https://console.example.com", r.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, r.Header.Get("Access-Control-Expose-Headers"), "Link")
	r = e.do(req{Method: http.MethodGet, Path: "/v1/agents", Token: readToken, Header: map[string]string{"Origin": "https://evil.example.com"}})
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))

	// The default origin.
	d := newEnv(t, envConfig{})
	r = d.do(req{Method: http.MethodOptions, Path: "/v1/discover", Header: map[string]string{"Origin": httpserver.DefaultCORSOrigin, "Access-Control-Request-Method": "GET"}})
	assert.Equal(t, http.StatusNoContent, r.Status)
	assert.Equal(t, httpserver.DefaultCORSOrigin, r.Header.Get("Access-Control-Allow-Origin"))
}
