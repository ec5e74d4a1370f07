package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestDecodeError: the server's JSON errors keep their code, message and
// details; anything else gets a code from the status and a safe message.
func TestDecodeError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		code   string
		msg    string
		server bool
	}{
		{"server", 404, `{"error":"no agent is registered under this name","code":"not_found"}`, "not_found", "no agent is registered under this name", true},
		{"details", 400, `{"error":"invalid name","code":"invalid_argument","details":{"field":"name"}}`, "invalid_argument", "invalid name", true},
		{"no code", 409, `{"error":"conflict"}`, "conflict", "conflict", false},
		{"bad code", 404, `{"error":"x","code":"Not Found!"}`, "not_found", "x", false},
		{"code not a string", 400, `{"error":"x","code":7}`, "invalid_argument", "x", false},
		{"message not a string", 500, `{"error":{"a":1},"code":"internal"}`, "internal", "internal server error (HTTP 500)", true},
		{"plain text", 502, "upstream connect error\nreset reason: overflow", "unavailable", "upstream connect error", false},
		{"html", 404, "<html><h1>404</h1></html>", "not_found", "not found (HTTP 404)", false},
		{"empty", 401, "", "unauthenticated", "unauthorized (HTTP 401)", false},
		{"binary", 500, "\xff\xfe\x00", "internal", "internal server error (HTTP 500)", false},
		{"controls", 400, "{\"error\":\"a\\u0007b\\nc\",\"code\":\"invalid_argument\"}", "invalid_argument", "a b c", true},
		{"odd status", 599, "", "internal", "HTTP 599", false},
		{"429", 429, "slow down", "rate_limited", "slow down", false},
		{"504", 504, "", "unavailable", "gateway timeout (HTTP 504)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := decodeError(tc.status, http.Header{}, []byte(tc.body), now)
			assert.Equal(t, tc.status, e.Status)
			assert.Equal(t, tc.code, e.Code)
			assert.Equal(t, tc.msg, e.Message)
			assert.Equal(t, tc.msg, e.Error())
			assert.Equal(t, tc.server, e.server)
		})
	}
	e := decodeError(400, http.Header{}, []byte(`{"error":"`+strings.Repeat("é", 3000)+`","code":"invalid_argument"}`), now)
	assert.LessOrEqual(t, len(e.Message), maxMessageBytes+len("…"))
	assert.True(t, utf8.ValidString(e.Message))
}

// TestSentinels: each code selects the sentinel of its route, and only
// for the server's own errors.
func TestSentinels(t *testing.T) {
	for _, tc := range []struct {
		route   route
		code    string
		details any
		want    error
		not     []error
	}{
		{routeAgents, "not_found", nil, registry.ErrNotFound, []error{delegation.ErrNotFound, session.ErrNotFound}},
		{routeAgents, "invalid_argument", nil, registry.ErrInvalid, []error{delegation.ErrInvalid}},
		{routeAgents, "endpoint_not_allowed", nil, registry.ErrEndpointNotAllowed, []error{registry.ErrInvalid}},
		{routeAgents, "managed_by_file", nil, registry.ErrManagedByFile, nil},
		{routeAgents, "conflict", nil, registry.ErrDefaultConflict, []error{delegation.ErrFinal}},
		{routeDiscover, "invalid_argument", map[string]any{"field": "query"}, discovery.ErrEmptyQuery, []error{discovery.ErrInvalidQuery}},
		{routeDiscover, "invalid_argument", nil, discovery.ErrInvalidQuery, []error{discovery.ErrEmptyQuery, registry.ErrInvalid}},
		{routeDelegate, "not_found", nil, delegation.ErrNotFound, []error{registry.ErrNotFound}},
		{routeDelegate, "no_match", nil, delegation.ErrNoMatch, nil},
		{routeDelegate, "invalid_argument", nil, delegation.ErrInvalid, nil},
		{routeDelegate, "depth_exceeded", nil, delegation.ErrDepthExceeded, nil},
		{routeDelegate, "delegation_cycle", nil, delegation.ErrCycle, nil},
		{routeDelegate, "resource_not_covered", nil, delegation.ErrResourceNotCovered, []error{ErrPermissionDenied}},
		{routeDelegations, "not_found", nil, delegation.ErrNotFound, []error{registry.ErrNotFound}},
		{routeDelegations, "conflict", nil, delegation.ErrFinal, []error{registry.ErrDefaultConflict}},
		{routeRequest, "invalid_argument", nil, routing.ErrInvalidRequest, nil},
		{routeRequest, "no_default_agent", nil, routing.ErrNoDefaultAgent, nil},
		{routeRequest, "unavailable", nil, routing.ErrUnavailable, nil},
		{routeSessions, "not_found", nil, session.ErrNotFound, []error{registry.ErrNotFound}},
		{routeSessions, "conflict", nil, session.ErrNotActive, nil},
		{routeSessions, "invalid_argument", nil, session.ErrInvalid, nil},
		{routeOther, "not_found", nil, nil, []error{registry.ErrNotFound, delegation.ErrNotFound}},
		{routeAgents, "unavailable", nil, nil, []error{routing.ErrUnavailable}},
	} {
		e := &Error{Status: 400, Code: tc.code, Details: tc.details, server: true, route: tc.route}
		if tc.want != nil {
			assert.ErrorIs(t, e, tc.want, "%d %s", tc.route, tc.code)
			page := *e
			page.server = false
			assert.NotErrorIs(t, &page, tc.want, "not for a proxy's page: %d %s", tc.route, tc.code)
		}
		for _, n := range tc.not {
			assert.NotErrorIs(t, e, n, "%d %s", tc.route, tc.code)
		}
		assert.False(t, e.Is(nil))
	}
	assert.ErrorIs(t, &Error{Status: 401, Code: "unauthenticated"}, ErrUnauthenticated)
	assert.ErrorIs(t, &Error{Status: 403, Code: "permission_denied", server: true}, ErrPermissionDenied)
	assert.ErrorIs(t, &Error{Status: 429, Code: "rate_limited"}, ErrRateLimited)
	assert.NotErrorIs(t, &Error{Status: 404, Code: "not_found"}, ErrUnauthenticated)
}

// TestRetryAfterHeader: delay-seconds and HTTP dates; junk and the past
// are 0; huge values are capped.
func TestRetryAfterHeader(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"":                        0,
		"0":                       0,
		"7":                       7 * time.Second,
		" 12 ":                    12 * time.Second,
		"-3":                      0,
		"1.5":                     0,
		"soon":                    0,
		"99999999999":             maxRetryAfter,
		"99999999999999999999999": maxRetryAfter,
		"999999":                  maxRetryAfter,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		assert.Equal(t, want, retryAfter(v, now), "%q", v)
	}
}

// TestNextLinkQuery: the rel="next" target among several links, absolute
// or relative.
func TestNextLinkQuery(t *testing.T) {
	for _, tc := range []struct {
		links []string
		want  string
	}{
		{nil, ""},
		{[]string{`</v1/agents?cursor=YWJj&limit=2>; rel="next"`}, "YWJj"},
		{[]string{`<https://mesh.example.com/v1/agents?cursor=eHl6>; rel=next`}, "eHl6"},
		{[]string{`</v1/agents?cursor=cHJldg>; rel="prev", </v1/agents?cursor=bmV4dA>; rel="next"`}, "bmV4dA"},
		{[]string{`</v1/agents?cursor=cHJldg>; rel="prev"`, `</v1/agents?cursor=bmV4dA>; title="x"; REL="Next"`}, "bmV4dA"},
		{[]string{`/v1/agents?cursor=bm8; rel="next"`}, ""},
		{[]string{`<%zz>; rel="next"`}, ""},
		{[]string{`garbage`}, ""},
	} {
		h := http.Header{}
		for _, l := range tc.links {
			h.Add("Link", l)
		}
		assert.Equal(t, tc.want, nextLinkQuery(h).Get("cursor"), "%q", tc.links)
	}
}

// TestRetryable: which replies and failures a call of each mode retries.
func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		safe bool
	}{
		{&Error{Status: 503}, true},
		{&Error{Status: 502}, true},
		{&Error{Status: 504}, true},
		{&Error{Status: 429, RetryAfter: time.Second}, true},
		{&Error{Status: 503, Code: "unavailable", server: true}, true},
		{&Error{Status: 503, Code: "no_default_agent", server: true}, false},
		{&Error{Status: 502, Code: "card_fetch_failed", server: true}, false},
		{&Error{Status: 500}, false},
		{&Error{Status: 404}, false},
	} {
		wait, again := retryable(retrySafe, tc.e)
		assert.Equal(t, tc.safe, again, "%+v", tc.e)
		assert.Equal(t, tc.e.RetryAfter, wait)
		_, again = retryable(retryDial, tc.e)
		assert.False(t, again, "a call that must not run twice: %+v", tc.e)
	}
	_, again := retryable(retryDial, &unreachableError{err: errors.New("EOF")})
	assert.False(t, again)
	_, again = retryable(retrySafe, &unreachableError{err: errors.New("EOF")})
	assert.True(t, again)
	_, again = retryable(retrySafe, context.Canceled)
	assert.False(t, again)
}

// TestBackoff: exponential, jittered, capped.
func TestBackoff(t *testing.T) {
	for n := 1; n < 40; n++ {
		d := backoff(n)
		ceiling := min(100*time.Millisecond<<min(n-1, 5), 2*time.Second)
		assert.GreaterOrEqual(t, d, ceiling/2, "retry %d", n)
		assert.LessOrEqual(t, d, ceiling, "retry %d", n)
	}
}

// TestPollWait: a long-poll fits in the context's deadline and the HTTP
// client's timeout.
func TestPollWait(t *testing.T) {
	c, err := New("http://localhost:8766", nil)
	require.NoError(t, err)
	assert.Equal(t, MaxWait, c.pollWait(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := c.pollWait(ctx)
	assert.Greater(t, w, 8*time.Second)
	assert.Less(t, w, 9*time.Second+time.Millisecond)
	c.hc = &http.Client{Timeout: 30 * time.Second}
	assert.Equal(t, 28*time.Second, c.pollWait(context.Background()))
}

// FuzzDecodeError: any reply decodes without panicking into an error
// with a status, a machine code and a safe, non-empty message.
func FuzzDecodeError(f *testing.F) {
	f.Add(404, `{"error":"no agent is registered under this name","code":"not_found"}`, "")
	f.Add(400, `{"error":"invalid name","code":"invalid_argument","details":{"fields":[{"field":"name"}]}}`, "")
	f.Add(429, `{"error":"slow down","code":"rate_limited"}`, "30")
	f.Add(503, "no healthy upstream", "Sun, 01 Mar 2026 12:01:00 GMT")
	f.Add(502, "<html>bad gateway</html>", "")
	f.Add(500, "\x00\xff", "-1")
	f.Add(418, `{"error":null,"code":["x"],"details":1e999}`, "1e9")
	f.Add(409, `{"error":"\u0000\u202e","code":"conflict"}{"x":1}`, "")
	f.Fuzz(func(t *testing.T, status int, body, ra string) {
		h := http.Header{}
		h.Set("Retry-After", ra)
		e := decodeError(status, h, []byte(body), now)
		if e.Status != status {
			t.Fatalf("status %d, want %d", e.Status, status)
		}
		if e.Code == "" || cleanCode(e.Code) != e.Code {
			t.Fatalf("code %q", e.Code)
		}
		if e.Message == "" || !utf8.ValidString(e.Message) || len(e.Message) > maxMessageBytes+len("…") {
			t.Fatalf("message %q", e.Message)
		}
		for _, r := range e.Message {
			if unicode.IsControl(r) {
				t.Fatalf("control character in message %q", e.Message)
			}
		}
		if e.Error() != e.Message || e.ErrorCode() != e.Code {
			t.Fatal("Error and ErrorCode must return Message and Code")
		}
		if e.RetryAfter < 0 || e.RetryAfter > maxRetryAfter {
			t.Fatalf("RetryAfter %v", e.RetryAfter)
		}
		_ = errors.Is(e, registry.ErrNotFound) // must not panic
	})
}

// Every sentinel of a route describes itself with its own code, so a
// reply's code picks exactly one.
func TestRouteSentinelsHaveDistinctCodes(t *testing.T) {
	for r, sentinels := range routeSentinels {
		seen := map[string]error{}
		for _, s := range sentinels {
			code := apierr.Code(s)
			require.NotEmpty(t, code, "%v on route %v has no code", s, r)
			require.NotContains(t, seen, code, "route %v: %v and %v share code %s", r, seen[code], s, code)
			seen[code] = s
		}
	}
}
