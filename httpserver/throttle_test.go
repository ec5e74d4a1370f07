package httpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// The test servers listen on loopback, so their peer is 127.0.0.1.
var (
	loopbackProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	otherProxy    = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
)

// throttleEnv is a server whose failed-authentication budget is 3 per
// minute per client, behind the given trusted proxies, with an audit log.
func throttleEnv(t *testing.T, trusted []netip.Prefix, global httpserver.RateLimit) (*env, *audit.Recorder) {
	t.Helper()
	rec, err := audit.NewRecorder(memstore.New(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rec.Close() })
	e := newEnv(t, envConfig{opts: func(o *httpserver.Options) {
		o.AuthFailureLimit = httpserver.RateLimit{Requests: 3, Per: time.Minute}
		o.AuthFailureGlobalLimit = global
		o.TrustedProxies = trusted
		o.Audit = rec
	}})
	return e, rec
}

// getAs sends GET /v1/agents with token and the extra headers
// ("Name: value").
func (e *env) getAs(token string, hdr ...string) *response {
	e.t.Helper()
	h := map[string]string{}
	for _, kv := range hdr {
		k, v, _ := strings.Cut(kv, ": ")
		h[k] = v
	}
	return e.do(req{Method: http.MethodGet, Path: "/v1/agents", Token: token, Header: h})
}

func TestThrottledClientWithValidTokenIsServed(t *testing.T) {
	e, _ := throttleEnv(t, nil, httpserver.RateLimit{})
	for range 3 {
		expectError(t, e.getAs("guess"), http.StatusUnauthorized, "unauthenticated")
	}
	for range 5 {
		expectError(t, e.getAs("guess"), http.StatusTooManyRequests, "rate_limited")
		r := e.getAs(readToken)
		require.Equal(t, http.StatusOK, r.Status, "a valid token from a throttled address: %s", r.Body)
		assert.Empty(t, r.Header.Get("Retry-After"))
	}
	// A mounted handler and an unknown /v1 route too.
	assert.Equal(t, http.StatusNotFound, e.get("/v1/nothing-here", readToken).Status)
	assert.Contains(t, e.logs.String(), "client throttled after failed authentication attempts")
}

func TestForwardedForFromTrustedProxy(t *testing.T) {
	e, rec := throttleEnv(t, loopbackProxy, httpserver.RateLimit{})
	a := "X-Forwarded-For: 198.51.100.7"
	b := "X-Forwarded-For: 198.51.100.8"
	for range 3 {
		expectError(t, e.getAs("guess", a), http.StatusUnauthorized, "unauthenticated")
	}
	expectError(t, e.getAs("guess", a), http.StatusTooManyRequests, "rate_limited")

	// One forwarded client's failures throttle that client only.
	expectError(t, e.getAs("guess", b), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.getAs("guess", "Forwarded: for=198.51.100.9"), http.StatusUnauthorized, "unauthenticated")
	expectError(t, e.getAs("guess"), http.StatusUnauthorized, "unauthenticated") // the proxy itself
	assert.Equal(t, http.StatusOK, e.getAs(readToken, a).Status, "the throttled client's valid token is served")

	// The same client through a chain of proxies, and by RFC 7239.
	expectError(t, e.getAs("guess", "X-Forwarded-For: 203.0.113.5, 198.51.100.7, 127.0.0.1"), http.StatusTooManyRequests, "rate_limited")
	expectError(t, e.getAs("guess", `Forwarded: for="198.51.100.7:4711";proto=https`), http.StatusTooManyRequests, "rate_limited")

	// The audit entries and the request logs name the forwarded client
	// (a client's repeated failures counted in one entry, flushed by Close).
	require.NoError(t, e.srv.Close())
	ips := map[string]int{}
	for _, en := range find(entries(t, rec), audit.ActionAuthFailure) {
		n, err := strconv.Atoi(en.Details["count"])
		require.NoError(t, err)
		ips[en.Details["client_ip"]] += n
	}
	assert.Equal(t, map[string]int{"198.51.100.7": 3, "198.51.100.8": 1, "198.51.100.9": 1, "127.0.0.1": 1}, ips,
		"throttled attempts are not audited")
	clients := map[string]bool{}
	for line := range strings.SplitSeq(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "http request" {
			clients[fmt.Sprint(m["client"])] = true
		}
	}
	assert.Equal(t, map[string]bool{"198.51.100.7": true, "198.51.100.8": true, "198.51.100.9": true, "127.0.0.1": true}, clients)
}

func TestForwardedForFromUntrustedPeerIsIgnored(t *testing.T) {
	e, rec := throttleEnv(t, otherProxy, httpserver.RateLimit{})
	// Each attempt claims another address: all are the peer's.
	for i := range 3 {
		expectError(t, e.getAs("guess", fmt.Sprintf("X-Forwarded-For: 198.51.100.%d", i)), http.StatusUnauthorized, "unauthenticated")
	}
	expectError(t, e.getAs("guess", "X-Forwarded-For: 198.51.100.200"), http.StatusTooManyRequests, "rate_limited")
	expectError(t, e.getAs("guess", "Forwarded: for=198.51.100.201"), http.StatusTooManyRequests, "rate_limited")
	expectError(t, e.getAs("guess"), http.StatusTooManyRequests, "rate_limited")
	assert.Equal(t, http.StatusOK, e.getAs(readToken, "X-Forwarded-For: 198.51.100.0").Status)
	for _, en := range find(entries(t, rec), audit.ActionAuthFailure) {
		assert.Equal(t, "127.0.0.1", en.Details["client_ip"], "a spoofed header is not recorded as the client")
	}
}

func TestMalformedForwardedForMeansThePeer(t *testing.T) {
	e, _ := throttleEnv(t, loopbackProxy, httpserver.RateLimit{})
	for _, h := range []string{
		"X-Forwarded-For: not-an-address",
		"X-Forwarded-For: 198.51.100.7, ",
		`Forwarded: for="198.51.100.7`,
	} {
		expectError(t, e.getAs("guess", h), http.StatusUnauthorized, "unauthenticated")
	}
	// All three were the proxy's, whose budget is now spent.
	expectError(t, e.getAs("guess"), http.StatusTooManyRequests, "rate_limited")
	expectError(t, e.getAs("guess", "X-Forwarded-For: 198.51.100.7"), http.StatusUnauthorized, "unauthenticated")
}

// TestAuthFailureGlobalBound: rotating through addresses (each within its
// own budget) meets the global budget; valid tokens are still served.
func TestAuthFailureGlobalBound(t *testing.T) {
	e, rec := throttleEnv(t, loopbackProxy, httpserver.RateLimit{Requests: 50, Per: time.Minute})
	var unauthorized, limited int
	for i := range 200 {
		xff := fmt.Sprintf("X-Forwarded-For: 2001:db8:%x::1", i) // a new /64 each time
		switch r := e.getAs("guess", xff); r.Status {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			limited++
			assert.Equal(t, "50;w=60", r.Header.Get("RateLimit-Policy"), "the global budget's headers")
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
		default:
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		require.Equal(t, http.StatusOK, e.getAs(readToken, xff).Status)
	}
	assert.Equal(t, 50, unauthorized)
	assert.Equal(t, 150, limited)
	assert.Len(t, find(entries(t, rec), audit.ActionAuthFailure), 50, "failures over the budget are not audited")
	assert.Contains(t, e.logs.String(), "over the global budget")

	// The global budget refills: 5 more failures after 6 s.
	e.clock.Advance(6 * time.Second)
	for i := range 6 {
		want := http.StatusUnauthorized
		if i == 5 {
			want = http.StatusTooManyRequests
		}
		assert.Equal(t, want, e.getAs("guess", fmt.Sprintf("X-Forwarded-For: 192.0.2.%d", i)).Status, "attempt %d", i)
	}
}

// TestIPv6ClientsAreThrottledByTheir64: addresses of one /64 share a
// budget, as one holder controls them all.
func TestIPv6ClientsAreThrottledByTheir64(t *testing.T) {
	e, _ := throttleEnv(t, loopbackProxy, httpserver.RateLimit{})
	for i := range 3 {
		expectError(t, e.getAs("guess", fmt.Sprintf("X-Forwarded-For: 2001:db8:1:2::%x", i+1)), http.StatusUnauthorized, "unauthenticated")
	}
	expectError(t, e.getAs("guess", "X-Forwarded-For: 2001:db8:1:2:ffff::9"), http.StatusTooManyRequests, "rate_limited")
	expectError(t, e.getAs("guess", "X-Forwarded-For: 2001:db8:1:3::1"), http.StatusUnauthorized, "unauthenticated")
}

func TestClientIPAndTrustedProxiesExclusive(t *testing.T) {
	e := newEnv(t, envConfig{})
	_, err := httpserver.New(e.reg, e.engine, nil, &httpserver.Options{
		Token:          adminToken,
		TrustedProxies: loopbackProxy,
		ClientIP:       func(*http.Request) string { return "x" },
	})
	require.Error(t, err)
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := httpserver.ParseTrustedProxies(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8,2001:db8::1,, ::ffff:10.1.0.0/112")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("2001:db8::1/128"),
		netip.MustParsePrefix("10.1.0.0/16"),
	}, got)
	got, err = httpserver.ParseTrustedProxies("")
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{"10.0.0.0/33", "proxy.example.com", "fe80::1%eth0", "10.0.0.0/8,x"} {
		_, err := httpserver.ParseTrustedProxies(bad)
		assert.Error(t, err, bad)
	}
}
