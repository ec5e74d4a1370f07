package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EMetricsToken: with MESH_METRICS_TOKEN, /metrics on the main port
// and on --metrics-addr needs it (or an admin token).
func TestE2EMetricsToken(t *testing.T) {
	t.Parallel()
	const scrape = "e2e-scrape-token-0123456789"
	for _, own := range []bool{false, true} {
		args := []string{"--store", "memory"}
		if own {
			args = append(args, "--metrics-addr", "127.0.0.1:0")
		}
		p := startServe(t, serveSpec{token: e2eMeshToken, args: args, env: []string{"MESH_METRICS_TOKEN=" + scrape}})
		url := p.url + "/metrics"
		if own {
			line := p.stderr.wait(t, 10*time.Second, `"metrics listening"`, func(l string) bool {
				return strings.Contains(l, `"msg":"metrics listening"`)
			})
			var rec struct{ Addr string }
			require.NoError(t, json.Unmarshal([]byte(line), &rec))
			url = "http://" + rec.Addr + "/metrics"
			r := p.client().do("GET", "/metrics", nil)
			assert.Equal(t, 404, r.status, "not on the main port with --metrics-addr")
		}
		get := func(auth string) (int, string) {
			req, err := http.NewRequest("GET", url, nil)
			require.NoError(t, err)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(b)
		}
		status, body := get("")
		assert.Equal(t, 401, status, "own listener %v: %s", own, body)
		assert.Contains(t, body, `"code":"unauthenticated"`)
		status, _ = get("not-the-token")
		assert.Equal(t, 401, status)
		for _, tok := range []string{scrape, e2eMeshToken} {
			status, body = get(tok)
			assert.Equal(t, 200, status, "own listener %v", own)
			assert.Contains(t, body, "agentmesh_http_connections ", "own listener %v", own)
		}
		p.as(scrape).do("GET", "/v1/agents", nil).requireError(t, 401, "unauthenticated")
		p.stop()
	}
}
