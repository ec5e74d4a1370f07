package ui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/ui"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Result()
}

func TestHandlerServesAssets(t *testing.T) {
	h := ui.Handler()
	for path, ctype := range map[string]string{
		"/ui/":            "text/html",
		"/ui/app.js":      "text/javascript",
		"/ui/api.js":      "text/javascript",
		"/ui/app.css":     "text/css",
		"/ui/favicon.svg": "image/svg+xml",
	} {
		resp := get(t, h, http.MethodGet, path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), ctype), "%s: %s", path, resp.Header.Get("Content-Type"))
		assert.Equal(t, ui.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"), path)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), path)
		assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"), path)
		assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"), path)
	}
	assert.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/ui/nope.js").StatusCode)
	resp := get(t, h, http.MethodPost, "/ui/")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
}

// The policy allows only this origin's files: no inline script or style,
// no eval, nothing from elsewhere.
func TestContentSecurityPolicy(t *testing.T) {
	csp := ui.ContentSecurityPolicy
	assert.Contains(t, csp, "default-src 'self'")
	assert.Contains(t, csp, "script-src 'self';")
	assert.Contains(t, csp, "frame-ancestors 'none'")
	assert.Contains(t, csp, "object-src 'none'")
	assert.NotContains(t, csp, "unsafe-")
	assert.NotContains(t, csp, "*")
	assert.NotContains(t, csp, "http")
	assert.NotContains(t, csp, "data:")
}

// The page has no inline script, event handler attribute or style
// attribute (the policy would refuse them), and loads nothing from
// another origin.
func TestNoInlineCode(t *testing.T) {
	resp := get(t, ui.Handler(), http.MethodGet, "/ui/")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	page := string(body)
	scripts := regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, scripts)
	for _, s := range scripts {
		assert.Contains(t, s[1], `src="`, "a script without src: %s", s[0])
		assert.Empty(t, strings.TrimSpace(s[2]), "an inline script: %s", s[0])
	}
	assert.NotRegexp(t, `(?i)\son[a-z]+\s*=`, page, "an event handler attribute")
	assert.NotRegexp(t, `(?i)\sstyle\s*=`, page, "a style attribute")
	assert.NotRegexp(t, `(?i)<style\b`, page, "an inline stylesheet")
	assert.NotRegexp(t, `(?i)(src|href)="(https?:)?//`, page, "an asset of another origin")
	assert.Contains(t, page, `type="password"`)
	assert.Contains(t, page, `type="search"`)
}

// The scripts keep the token in sessionStorage only, and never build
// HTML from strings (what the API returns is shown as text).
func TestScriptsKeepTheTokenInTheTab(t *testing.T) {
	h := ui.Handler()
	var all strings.Builder
	for _, f := range []string{"/ui/app.js", "/ui/api.js"} {
		b, err := io.ReadAll(get(t, h, http.MethodGet, f).Body)
		require.NoError(t, err)
		all.Write(b)
	}
	js := all.String()
	assert.Contains(t, js, "sessionStorage")
	for _, banned := range []string{"localStorage", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "EventSource"} {
		assert.False(t, strings.Contains(js, banned), "the scripts use %s", banned)
	}
}

// Every embedded file is one the page uses: nothing stray is served.
func TestAssetsList(t *testing.T) {
	var names []string
	require.NoError(t, fs.WalkDir(ui.Assets(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, path)
		}
		return err
	}))
	assert.ElementsMatch(t, []string{"index.html", "app.js", "api.js", "app.css", "favicon.svg", "agent.js", "delegation.js", "routing.js", "charts.js"}, names)
}
