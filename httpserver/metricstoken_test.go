package httpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
)

const metricsToken = "scrape-secret-0123456789"

// TestMetricsToken: with Options.MetricsToken, /metrics needs it (or an
// admin token) on the server's port and on its own listener alike.
func TestMetricsToken(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(map[bool]string{false: "main port", true: "own listener"}[own], func(t *testing.T) {
			e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
				o.MetricsToken, o.NoMetricsRoute = metricsToken, own
			}})
			get := func(h map[string]string) *response {
				return e.do(req{Method: http.MethodGet, Path: "/metrics", Header: h})
			}
			if own {
				ts := httptest.NewServer(e.srv.MetricsHandler())
				t.Cleanup(ts.Close)
				get = func(h map[string]string) *response {
					hr, err := http.NewRequest(http.MethodGet, ts.URL+"/metrics", nil)
					require.NoError(t, err)
					for k, v := range h {
						hr.Header.Set(k, v)
					}
					resp, err := ts.Client().Do(hr)
					require.NoError(t, err)
					defer resp.Body.Close()
					body, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					return &response{Status: resp.StatusCode, Header: resp.Header, Body: body}
				}
			}
			bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

			r := get(nil)
			expectError(t, r, http.StatusUnauthorized, "unauthenticated")
			assert.Equal(t, `Bearer realm="agentmesh"`, r.Header.Get("WWW-Authenticate"))
			assert.NotContains(t, string(r.Body), "# TYPE")
			expectError(t, get(bearer("wrong-token")), http.StatusUnauthorized, "unauthenticated")
			expectError(t, get(bearer(metricsToken+"x")), http.StatusUnauthorized, "unauthenticated")
			expectError(t, get(map[string]string{"X-API-Key": metricsToken}), http.StatusUnauthorized, "unauthenticated")
			expectError(t, get(bearer(readToken)), http.StatusForbidden, "permission_denied")

			for _, tok := range []string{metricsToken, adminToken} {
				r := get(bearer(tok))
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				assert.Contains(t, string(r.Body), "# TYPE promhttp_metric_handler_errors_total counter", "the exposition")
			}
			// The metrics token grants nothing else.
			expectError(t, e.get("/v1/agents", metricsToken), http.StatusUnauthorized, "unauthenticated")
			assert.Equal(t, http.StatusOK, e.get("/health", "").Status)
		})
	}
}

func TestMetricsWithoutTokenAreOpen(t *testing.T) {
	e := newEnv(t, envConfig{})
	r := e.get("/metrics", "")
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Body), "# TYPE promhttp_metric_handler_errors_total counter")
}
