package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EThrottleNeverRefusesValidTokens: 200 failed attempts from one
// address (each claiming another client in X-Forwarded-For, which serve
// ignores without --trusted-proxies) throttle that address's wrong tokens
// with 429, never its valid token.
func TestE2EThrottleNeverRefusesValidTokens(t *testing.T) {
	t.Parallel()
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{"--store", "memory"}})
	wrong, api := p.as("wrong-token"), p.client()
	limited := 0
	for i := range 200 {
		r := wrong.do("GET", "/v1/agents", nil, fmt.Sprintf("X-Forwarded-For: 198.51.100.%d", i))
		switch r.status {
		case 401:
			r.requireError(t, 401, "unauthenticated")
		case 429:
			r.requireError(t, 429, "rate_limited")
			limited++
		default:
			t.Fatalf("attempt %d: %s", i, r)
		}
		if i%20 == 19 {
			require.Equal(t, 200, api.do("GET", "/v1/agents", nil).status, "the valid token after %d failures", i+1)
		}
	}
	assert.GreaterOrEqual(t, limited, 150, "the spoofed X-Forwarded-For did not spread the failures over 200 clients")
	assert.Equal(t, 200, api.do("GET", "/v1/agents", nil, "X-Forwarded-For: 198.51.100.1").status)
	p.stop()
}

// TestE2ETrustedProxies: behind --trusted-proxies 127.0.0.1/32, one
// X-Forwarded-For client's failures throttle that client only; another
// client, and the throttled client's own valid token, are served.
func TestE2ETrustedProxies(t *testing.T) {
	t.Parallel()
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{"--store", "memory", "--trusted-proxies", "127.0.0.1/32"}})
	wrong, api := p.as("wrong-token"), p.client()
	a, b := "X-Forwarded-For: 198.51.100.7", "X-Forwarded-For: 203.0.113.5, 198.51.100.8"
	failures := 0
	for {
		r := wrong.do("GET", "/v1/agents", nil, a)
		if r.status == 429 {
			r.requireError(t, 429, "rate_limited")
			break
		}
		r.requireError(t, 401, "unauthenticated")
		failures++
		require.Less(t, failures, 40, "failed authentications are not rate limited")
	}
	assert.GreaterOrEqual(t, failures, 20, "the budget is 20 failures per minute")

	wrong.do("GET", "/v1/agents", nil, b).requireError(t, 401, "unauthenticated")
	wrong.do("GET", "/v1/agents", nil).requireError(t, 401, "unauthenticated") // the proxy itself
	assert.Equal(t, 200, api.do("GET", "/v1/agents", nil, a).status, "the throttled client's valid token")
	assert.Equal(t, 200, api.do("GET", "/v1/agents", nil, b).status)
	wrong.do("GET", "/v1/agents", nil, a).requireError(t, 429, "rate_limited")

	// The audit log names the forwarded clients.
	r := api.do("GET", "/v1/audit?limit=1000", nil)
	require.Equal(t, 200, r.status, "%s", r)
	// A client's repeated failures are one entry a minute with their
	// count; the first is recorded at once.
	ips := map[string]int{}
	for _, e := range r.list(t) {
		if e["action"] == "auth.failure" {
			d, _ := e["details"].(map[string]any)
			ips[fmt.Sprint(d["client_ip"])]++
		}
	}
	assert.Equal(t, 1, ips["198.51.100.7"], "%v", ips)
	assert.Equal(t, 1, ips["198.51.100.8"], "%v", ips)
	assert.Equal(t, 1, ips["127.0.0.1"], "%v", ips)

	// A malformed value is refused at start.
	bad := runCLI(t, []string{"MESH_TOKEN=" + e2eMeshToken}, "", "serve", "--addr", "127.0.0.1:0", "--store", "memory", "--trusted-proxies", "10.0.0.0/33")
	assert.Equal(t, 1, bad.code, "%s", bad)
	assert.Contains(t, bad.stderr, "--trusted-proxies", "%s", bad)
	p.stop()
}
