package httpserver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/ui"
)

// Options.UI is served at /ui/ without a token, with its own
// Content-Security-Policy and the server's other headers; the API behind
// it still needs one.
func TestUIMounted(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) { o.UI = ui.Handler() }})
	assert.Contains(t, e.srv.Routes(), "GET /ui/")

	r := e.get("/ui/", "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Contains(t, r.Header.Get("Content-Type"), "text/html")
	assert.Equal(t, ui.ContentSecurityPolicy, r.Header.Get("Content-Security-Policy"))
	assert.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, "DENY", r.Header.Get("X-Frame-Options"))
	assert.NotEmpty(t, r.Header.Get("X-Request-Id"))
	assert.Equal(t, http.StatusOK, e.get("/ui/app.js", "").Status)

	client := *e.ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(e.ts.URL + "/ui")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	assert.Equal(t, "/ui/", resp.Header.Get("Location"))

	assert.Equal(t, http.StatusUnauthorized, e.get("/v1/agents", "").Status)

	// Without Options.UI there is no /ui/.
	plain := newEnv(t, envConfig{})
	assert.Equal(t, http.StatusNotFound, plain.get("/ui/", "").Status)
}
