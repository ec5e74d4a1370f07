package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/retryafter"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/session"
)

// Sentinel errors. Match them with [errors.Is].
var (
	// ErrNoServer: the Client was not made by [New] (the zero Client or a
	// nil *Client).
	ErrNoServer = errors.New("client: no server (make the Client with client.New)")
	// ErrUnreachable: no response was received — the connection was
	// refused, could not be made, or was reset or closed before a
	// response. The error wraps the cause too.
	ErrUnreachable = errors.New("client: server unreachable")
	// ErrUnauthenticated: HTTP 401, the token is missing or wrong.
	ErrUnauthenticated = errors.New("client: unauthenticated")
	// ErrPermissionDenied: HTTP 403 permission_denied, the token lacks
	// the route's scope.
	ErrPermissionDenied = errors.New("client: permission denied")
	// ErrRateLimited: HTTP 429, over the token's request budget (see
	// [Error.RetryAfter]).
	ErrRateLimited = errors.New("client: rate limited")
)

// route is the kind of API route a reply came from: the same code means
// different things on different routes (not_found is an agent on
// /v1/agents/{name} and a delegation on /v1/delegations/{id}).
type route int

const (
	routeOther       route = iota
	routeAgents            // /v1/agents…, import included
	routeDiscover          // /v1/discover
	routeDelegate          // POST /v1/delegate
	routeDelegations       // /v1/delegations…
	routeRequest           // POST /v1/request
	routeSessions          // /v1/sessions/{id}…
)

// Error is a non-2xx reply of the server.
//
// It matches, with [errors.Is], the sentinels of the library packages
// that the same failure returns in process, chosen by the reply's code
// and by the route it came from (see the package documentation), and the
// sentinels [ErrUnauthenticated], [ErrPermissionDenied] and
// [ErrRateLimited] of this package.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the machine-readable code of the reply ("not_found",
	// "invalid_argument", …). For a reply that is not an error of the
	// server (a proxy's page), it is derived from Status.
	Code string
	// Message is the server's human-readable message.
	Message string
	// Details are the reply's details, decoded from JSON (for validation
	// errors, {"fields": [{"field", "rule", "code"}]}); nil when absent.
	Details any
	// RetryAfter is the reply's Retry-After; 0 when absent.
	RetryAfter time.Duration

	// server is true when the body was the server's JSON error with a
	// code: only then does Code select library sentinels.
	server bool
	route  route
}

// Error returns the server's message.
func (e *Error) Error() string { return e.Message }

// ErrorCode returns Code, for a front-end that presents the server's code
// as it is.
func (e *Error) ErrorCode() string { return e.Code }

// Describe returns Code and Message: a reply describes itself
// ([apierr.Described]) as the server did, so a front-end over a remote
// mesh presents the remote code and message as they are.
func (e *Error) Describe() (code, message string) { return e.Code, e.Message }

// Is reports whether e matches target: one of this package's sentinels,
// or a library sentinel the code means on the route the reply came from.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthenticated:
		return e.Status == http.StatusUnauthorized || e.Code == apierr.CodeUnauthenticated
	case ErrPermissionDenied:
		return e.Code == apierr.CodePermissionDenied
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests || e.Code == httpserver.CodeRateLimited
	}
	if !e.server || target == nil {
		return false
	}
	return e.sentinel() == target
}

// routeSentinels are the library sentinels a reply's code can mean, by
// route: each describes itself with its code ([apierr.Code]), so the
// code picks the sentinel.
var routeSentinels = map[route][]error{
	routeAgents:      {registry.ErrNotFound, registry.ErrInvalid, registry.ErrEndpointNotAllowed, registry.ErrManagedByFile, registry.ErrDefaultConflict},
	routeDelegate:    delegationSentinels,
	routeDelegations: delegationSentinels,
	routeRequest:     {routing.ErrInvalidRequest, routing.ErrNoDefaultAgent, routing.ErrUnavailable},
	routeSessions:    {session.ErrNotFound, session.ErrNotActive, session.ErrInvalid},
}

var delegationSentinels = []error{
	delegation.ErrNotFound, delegation.ErrInvalid, delegation.ErrNoMatch, delegation.ErrDepthExceeded,
	delegation.ErrCycle, delegation.ErrResourceNotCovered, delegation.ErrFinal,
}

// sentinel is the library sentinel e's code means on its route, or nil.
func (e *Error) sentinel() error {
	if e.route == routeDiscover && e.Code == apierr.CodeInvalidArgument {
		// Both discovery sentinels are invalid_argument: the field tells.
		if detailField(e.Details) == "query" {
			return discovery.ErrEmptyQuery
		}
		return discovery.ErrInvalidQuery
	}
	for _, s := range routeSentinels[e.route] {
		if apierr.Code(s) == e.Code {
			return s
		}
	}
	return nil
}

// detailField returns details.field, the field a 400 names, or "".
func detailField(details any) string {
	m, ok := details.(map[string]any)
	if !ok {
		return ""
	}
	f, _ := m["field"].(string)
	return f
}

// retryable reports whether the reply asks for the request to be sent
// again: 429, or a gateway failure (502, 503, 504) of a proxy or of a
// server that is unavailable. A 502 or 503 of the server with a code of
// its own (card_fetch_failed, no_default_agent) is the request's answer.
func (e *Error) retryable() bool {
	switch e.Status {
	case http.StatusTooManyRequests:
		return true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return !e.server || e.Code == apierr.CodeUnavailable
	}
	return false
}

// redact replaces token in the message with a mask, should a server ever
// echo it.
func (e *Error) redact(token string) {
	if token != "" {
		e.Message = strings.ReplaceAll(e.Message, token, "[redacted]")
	}
}

// maxMessageBytes caps the message kept from a reply.
const maxMessageBytes = 2048

// decodeError turns a non-2xx reply into an *Error: the server's JSON
// {"error", "code", "details"} when the body is one, else a code derived
// from status and a message from a short plain-text body or the status
// text. now is the time a Retry-After date is measured from. The message
// is valid UTF-8 without control characters, at most maxMessageBytes,
// and never empty; so is the code.
func decodeError(status int, h http.Header, body []byte, now time.Time) *Error {
	e := &Error{Status: status, RetryAfter: retryAfter(h.Get("Retry-After"), now)}
	var wire struct {
		Error   any `json:"error"`
		Code    any `json:"code"`
		Details any `json:"details"`
	}
	if json.Unmarshal(body, &wire) == nil {
		code, _ := wire.Code.(string)
		msg, _ := wire.Error.(string)
		if code = cleanCode(code); code != "" {
			e.server, e.Code, e.Details = true, code, wire.Details
		}
		e.Message = cleanText(msg)
	} else if text := plainText(body); text != "" {
		e.Message = text
	}
	if e.Code == "" {
		e.Code = httpserver.CodeForStatus(status)
	}
	if e.Message == "" {
		e.Message = statusText(status)
	}
	return e
}

// cleanCode returns code when it looks like a machine code (lower-case
// letters, digits, '_', '.' and '-', at most 64 bytes), else "".
func cleanCode(code string) string {
	if code == "" || len(code) > 64 {
		return ""
	}
	for _, r := range code {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return ""
		}
	}
	return code
}

// plainText returns the first line of a short text body (a proxy's "502
// Bad Gateway"), or "" for anything that looks like markup or binary.
func plainText(body []byte) string {
	s := strings.TrimSpace(string(body))
	if line, _, ok := strings.Cut(s, "\n"); ok {
		s = strings.TrimSpace(line)
	}
	if s == "" || strings.HasPrefix(s, "<") || !utf8.ValidString(s) {
		return ""
	}
	return cleanText(s)
}

// cleanText makes s safe to show: valid UTF-8, control characters
// replaced by spaces, trimmed, at most maxMessageBytes.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxMessageBytes {
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// statusText is the message of a reply that carries none.
func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return strings.ToLower(t) + " (HTTP " + strconv.Itoa(status) + ")"
	}
	return "HTTP " + strconv.Itoa(status)
}

// maxRetryAfter caps a parsed Retry-After.
const maxRetryAfter = 24 * time.Hour

// retryAfter parses a Retry-After header (measured from now), capped at
// maxRetryAfter; see [retryafter.Parse].
func retryAfter(v string, now time.Time) time.Duration {
	return retryafter.Parse(v, now, maxRetryAfter)
}
