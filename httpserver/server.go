package httpserver

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/tracing"
	"github.com/agentmesh/agentmesh/registry"
)

// Registry is what the server needs from the agent registry:
// *registry.Registry implements it.
type Registry interface {
	Register(ctx context.Context, a registry.Agent) (registry.Agent, bool, error)
	Get(ctx context.Context, name string) (registry.Agent, error)
	List(ctx context.Context, opts registry.ListOptions) (registry.Page, error)
	Delete(ctx context.Context, name string) error
	Heartbeat(ctx context.Context, name string) (registry.Agent, error)
}

// BreakerStates reports the circuit breakers for GET /health/deep:
// *breaker.Set implements it.
type BreakerStates interface {
	States() map[string]breaker.Snapshot
}

// DefaultCORSOrigin is the only origin allowed by CORS when
// Options.CORSOrigins is empty.
const DefaultCORSOrigin = "http://localhost:8766"

// MaxWait is the longest long-poll of GET /v1/delegations/{id}?wait=; a
// longer wait is shortened to it.
const MaxWait = 60 * time.Second

// Options configures a [Server]. A nil *Options, like the zero value of
// every field, means the documented default; New copies the options.
type Options struct {
	// Token is the MESH_TOKEN: one token granting every scope, named
	// MeshTokenName. Empty means none.
	Token string

	// Tokens are the entries of the tokens file, each with its own name
	// and scopes; several may be valid at once (rotation).
	// [Server.SetTokens] replaces them while the server runs. New fails
	// when neither Token nor Tokens is set: the server is fail-closed, and
	// a host with no token should generate one ([GenerateToken]).
	Tokens []Token

	// RateLimit is the request budget of each token (by name), as a token
	// bucket. Responses to authenticated requests carry the RateLimit-*
	// and X-RateLimit-* headers; a request over budget gets 429
	// rate_limited with Retry-After. Zero means no limit.
	RateLimit RateLimit

	// AuthFailureLimit is the budget of failed authentication attempts
	// (wrong credentials) per client address (an IPv6 client by its /64).
	// Once spent, a wrong token from that client gets 429 rate_limited
	// instead of 401, and is not audited; a valid token is always served,
	// so nobody can lock other users out by failing in their name. Zero
	// means DefaultAuthFailures per DefaultAuthFailurePeriod (20 per
	// minute).
	AuthFailureLimit RateLimit

	// AuthFailureGlobalLimit is the budget of failed authentication
	// attempts across all clients, so that rotating through addresses does
	// not escape the per-client budget: once spent, every wrong token gets
	// 429 (valid tokens are still served). It also bounds how fast
	// clients enter the per-client throttle, and the audit entries of
	// failures. Zero means DefaultAuthFailuresGlobal per
	// DefaultAuthFailurePeriod (1000 per minute).
	AuthFailureGlobalLimit RateLimit

	// TrustedProxies are the reverse proxies whose forwarding headers are
	// believed (`--trusted-proxies`; [ParseTrustedProxies] reads the
	// list). The client address — the key of AuthFailureLimit, the
	// client_ip of audit entries and the client of request logs — is the
	// connection's peer, unless the peer is in TrustedProxies: then it is
	// the rightmost hop of X-Forwarded-For or Forwarded (RFC 7239 for=)
	// that is not in TrustedProxies. A malformed or unidentifiable chain,
	// or both headers disagreeing, means the peer. Empty means no proxy
	// is trusted and the headers are ignored.
	TrustedProxies []netip.Prefix

	// ClientIP, when set, replaces the client address derivation of
	// TrustedProxies (set at most one of them): it returns the address of
	// r's client, for the uses listed there.
	ClientIP func(r *http.Request) string

	// CertIdentity, when set, authenticates a request that presents no
	// token by its TLS client certificate, once verified by the
	// http.Server's tls.Config (ClientCAs): it returns the name of the
	// token (an entry of Tokens, or MeshTokenName) whose identity and
	// scopes the certificate stands for, and false for none. A request
	// with a token is authenticated by the token alone. Nil means client
	// certificates authenticate nothing.
	CertIdentity func(cert *x509.Certificate) (name string, ok bool)

	// CORSOrigins are the origins browsers may call the API from
	// (MESH_CORS_ORIGIN). Empty means DefaultCORSOrigin only. "*" is
	// refused: New fails.
	CORSOrigins []string

	// PublicURL is the server's public base URL (MESH_PUBLIC_URL), used
	// for absolute URLs in Link headers. Empty means relative links.
	PublicURL string

	// MaxBodyBytes caps request bodies: larger ones get 413
	// payload_too_large. Zero or less means DefaultMaxBodyBytes (1 MiB).
	// The async callback route keeps the delegation package's own limit
	// (a result may be up to 4 MiB).
	MaxBodyBytes int64

	// Logger receives one Info record per request (method, route pattern,
	// status, duration, request id, token name, client address — never a
	// token, a body or a query string), the causes of 5xx responses at
	// Error, and at Warn a client entering the failed-authentication
	// throttle or the failures going over the global budget. Nil means
	// discard.
	Logger *slog.Logger

	// Now is the clock of the rate limiters. Nil means time.Now.
	Now func() time.Time

	// Metrics is where the agentmesh_http_* metrics are registered and
	// what GET /metrics exposes. Nil means a private registry (with the
	// Go and process collectors). Collectors already registered by
	// another Server on the same registry are shared.
	Metrics *prometheus.Registry

	// MetricsToken, when set, is the bearer token GET /metrics requires
	// (--metrics-token), on this handler and on [Server.MetricsHandler]:
	// "Authorization: Bearer <MetricsToken>", or a valid API token with
	// the admin scope; anything else gets 401 (403 for a valid token
	// without admin). It is for a scraper and grants nothing else. Empty
	// means /metrics needs no token.
	MetricsToken string

	// NoMetricsRoute leaves GET /metrics off this handler, for a host that
	// serves [Server.MetricsHandler] on its own listener (--metrics-addr).
	NoMetricsRoute bool

	// StorePing checks that the store is reachable, for GET /health/deep
	// (a cheap read; it gets a 2 s deadline). Nil means not checked.
	StorePing func(ctx context.Context) error

	// Ready reports whether the mesh can answer every request, for GET
	// /health/ready (no token; for load balancers and readiness probes):
	// nil when it can, else an error whose text, safe to show, says what
	// it waits for (the router learning its first agents, say). Nil means
	// ready whenever the server runs.
	Ready func(ctx context.Context) error

	// Breakers reports the circuit breakers for GET /health/deep. Nil
	// means none are reported.
	Breakers BreakerStates

	// LastReloadError returns the error of the last agent/token reload if
	// it failed (the previous set stays in service), else nil; GET
	// /health/deep reports it. Nil means no reloads.
	LastReloadError func() error

	// Reload reloads the agent directory and the tokens (POST
	// /v1/admin/reload, scope admin) and returns a report, encoded as the
	// JSON reply. A non-nil error means the reload failed and nothing
	// changed: the reply is 422 reload_failed with the error's text (a
	// configuration problem, shown to the admin) and the report as
	// details. Nil means the route is not served.
	Reload func(ctx context.Context) (report any, err error)

	// Router serves POST /v1/request (scope route): *routing.Router. Nil
	// leaves the route out (404).
	Router Router

	// Sessions serves GET /v1/sessions/{id}, POST /v1/sessions/{id}/resume
	// and DELETE /v1/sessions/{id} (scope route): *session.Manager. A
	// session is visible only to the principal whose request created it
	// and to admins (see [Sessions]). Nil leaves the routes out (404).
	Sessions Sessions

	// CardClient fetches A2A Agent Cards for POST /v1/agents/import (scope
	// register): the SSRF-safe client of netguard.Policy.NewClient. Nil
	// leaves the route out (the path then answers like /v1/agents/{name}:
	// 405 to a POST).
	CardClient *http.Client

	// AgentCard is the mesh's own A2A Agent Card (a2acard.MeshCard),
	// served as JSON without authentication at GET
	// /.well-known/agent-card.json. Nil leaves the route out (404).
	AgentCard any

	// Audit receives the audit entries this server sees
	// (docs/OPERATIONS.md#audit-log) — refused authentication (401) and
	// authorisation (403), agent registrations (including refused ones and
	// imports), unregistrations and reloads, each with the token's name —
	// and serves GET /v1/audit (scope admin). Record must not block:
	// *audit.Recorder queues. Nil records nothing and leaves the route out
	// (404).
	Audit Audit

	// TracerProvider creates one server span per request
	// (docs/OPERATIONS.md#tracing), named by its method and route pattern
	// ("POST /v1/request") with the semantic conventions' http.* and
	// url.path attributes (never the query) and the request id; a 5xx
	// marks it failed. Handlers see it in
	// the request's context, so the routing and delegation spans are its
	// children. Nil means the global provider (otel.GetTracerProvider), a
	// no-op unless the host installs one.
	TracerProvider trace.TracerProvider

	// Events serves GET /v1/events (scope read): the mesh's changes as
	// Server-Sent Events ([Events]), which the host publishes. Nil leaves
	// the route out (404).
	Events *Events

	// Activity serves the dashboard's Routing page and charts: recent
	// routing decisions, delegations per minute, the active sessions
	// count (see [Activity]). Nil leaves those routes out (404).
	Activity *Activity

	// UI is the web dashboard (package ui), mounted at /ui/ without
	// authentication: the page is public, the data it reads needs a
	// token. Its responses keep the server's security headers except the
	// Content-Security-Policy, which the handler sets for its own assets.
	// Nil leaves /ui/ out (404).
	UI http.Handler

	// BreakerHistory serves GET /v1/agents/{name}/breaker (scope read):
	// an agent's breaker now and its recent transitions
	// (*activity.Breakers, fed by the breakers' OnStateChange). Nil leaves
	// the route out (404).
	BreakerHistory BreakerHistories

	// Propagator extracts the caller's trace context from each request's
	// headers (with propagation.TraceContext, the W3C traceparent), so the
	// server span joins the caller's trace. Nil means the global
	// propagator (otel.GetTextMapPropagator), a no-op unless the host
	// installs one.
	Propagator propagation.TextMapPropagator
}

// Server is the HTTP control plane (docs/API.md) as an [http.Handler]: routing,
// authentication and scopes, rate limits, CORS, security headers and error
// encoding around the registry, discovery and delegation libraries. It
// starts no listener. Repeated failed authentications are audited as one
// entry a minute, recorded by a timer at the minute's end; call
// [Server.Close] after the last request to record the current minute's.
//
// A Server is safe for concurrent use. Use [New]; the zero Server is not
// usable.
type Server struct {
	reg    Registry
	search discovery.Searcher
	del    Delegations

	mux *http.ServeMux

	meshToken string
	tokens    atomic.Pointer[tokenSet]

	rateLimit  RateLimit
	perToken   *limiters
	failLimit  RateLimit
	failures   *limiters // per client address
	failGlobal RateLimit
	allFails   *limiters // one bucket, failGlobalKey
	overGlobal atomic.Bool
	clientIP   func(*http.Request) string
	certName   func(*x509.Certificate) (string, bool)

	origins   map[string]bool
	publicURL string
	maxBody   int64
	log       *slog.Logger
	now       func() time.Time
	metrics   *httpMetrics

	storePing  func(context.Context) error
	ready      func(context.Context) error
	breakers   BreakerStates
	reloadErr  func() error
	reloadFunc func(context.Context) (any, error)
	router     Router
	sessions   Sessions
	cardClient *http.Client
	agentCard  any
	events     *Events
	ui         http.Handler
	audit      Audit
	authAudit  *authAuditor
	tracer     trace.Tracer
	prop       propagation.TextMapPropagator

	idPrefix string
	idSeq    atomic.Uint64

	patternsMu sync.Mutex
	patterns   []string // every pattern handle registered, in order
}

// Route labels of requests that matched no route pattern.
const (
	routeUnmatched = "unmatched"
	routePreflight = "preflight"
)

// New returns a server for the registry reg and the discovery engine
// search (both required) and the delegation client del (nil leaves the
// delegation routes out: they answer 404), configured by opts.
func New(reg Registry, search discovery.Searcher, del Delegations, opts *Options) (*Server, error) {
	if reg == nil || search == nil {
		return nil, errors.New("httpserver: New needs a Registry and a Searcher")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Server{
		reg:        reg,
		search:     search,
		del:        del,
		mux:        http.NewServeMux(),
		meshToken:  o.Token,
		rateLimit:  o.RateLimit,
		failLimit:  o.AuthFailureLimit,
		failGlobal: o.AuthFailureGlobalLimit,
		clientIP:   o.ClientIP,
		certName:   o.CertIdentity,
		publicURL:  strings.TrimRight(o.PublicURL, "/"),
		maxBody:    o.MaxBodyBytes,
		log:        o.Logger,
		now:        o.Now,
		storePing:  o.StorePing,
		ready:      o.Ready,
		breakers:   o.Breakers,
		reloadErr:  o.LastReloadError,
		reloadFunc: o.Reload,
		router:     o.Router,
		sessions:   o.Sessions,
		cardClient: o.CardClient,
		agentCard:  o.AgentCard,
		events:     o.Events,
		ui:         o.UI,
		audit:      o.Audit,
		tracer:     tracing.Tracer(o.TracerProvider, tracerName),
		prop:       tracing.Propagator(o.Propagator),
	}
	if o.Token == "" && len(o.Tokens) == 0 {
		return nil, errors.New("httpserver: no token configured (set Options.Token or Options.Tokens; GenerateToken makes one)")
	}
	set, err := buildTokens(o.Token, o.Tokens)
	if err != nil {
		return nil, err
	}
	s.tokens.Store(set)
	if s.publicURL != "" {
		u, err := url.Parse(s.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("httpserver: PublicURL %q must be an absolute http or https URL without userinfo, query or fragment", o.PublicURL)
		}
	}
	s.origins = make(map[string]bool)
	origins := o.CORSOrigins
	if len(origins) == 0 {
		origins = []string{DefaultCORSOrigin}
	}
	for _, origin := range origins {
		origin = strings.TrimRight(strings.TrimSpace(origin), "/")
		u, err := url.Parse(origin)
		if origin == "*" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.User != nil {
			return nil, fmt.Errorf("httpserver: CORS origin %q must be scheme://host[:port] (never *)", origin)
		}
		s.origins[origin] = true
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.authAudit = newAuthAuditor(s.now, s.record)
	if s.clientIP != nil && len(o.TrustedProxies) > 0 {
		return nil, errors.New("httpserver: set at most one of Options.ClientIP and Options.TrustedProxies")
	}
	if s.clientIP == nil {
		s.clientIP = proxies(slices.Clone(o.TrustedProxies)).clientAddr
	}
	if s.failLimit.IsZero() {
		s.failLimit = RateLimit{Requests: DefaultAuthFailures, Per: DefaultAuthFailurePeriod}
	}
	if s.failGlobal.IsZero() {
		s.failGlobal = RateLimit{Requests: DefaultAuthFailuresGlobal, Per: DefaultAuthFailurePeriod}
	}
	s.perToken = newLimiters(s.rateLimit, maxTokenBuckets)
	s.failures = newLimiters(s.failLimit, maxClientBuckets)
	s.allFails = newLimiters(s.failGlobal, 1)
	if s.metrics, err = newHTTPMetrics(o.Metrics); err != nil {
		return nil, err
	}
	s.metrics.handler = s.guardMetrics(o.MetricsToken, s.metrics.handler)
	var b [4]byte
	_, _ = rand.Read(b[:])
	s.idPrefix = hex.EncodeToString(b[:]) + "-"

	s.routes(!o.NoMetricsRoute)
	s.handle("GET /openapi.json", authNone, "", s.openAPI)
	if s.events != nil {
		s.handle("GET /v1/events", authScope, ScopeRead, s.serveEvents)
	}
	s.activityRoutes(o.Activity)
	if o.BreakerHistory != nil {
		s.breakerHistoryRoute(o.BreakerHistory)
	}
	if s.ui != nil {
		s.handle("GET /ui/", authNone, "", func(w *recorder, r *http.Request) { s.ui.ServeHTTP(w, r) })
		s.handle("GET /ui", authNone, "", func(w *recorder, r *http.Request) {
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		})
	}
	return s, nil
}

// SetTokens atomically replaces the tokens of the tokens file
// (Options.Tokens) while the server runs; Options.Token stays valid.
// Requests already authenticated are not affected. On error the previous
// tokens stay in service. With no Options.Token, an empty list makes every
// authenticated route answer 401 (fail-closed).
func (s *Server) SetTokens(tokens []Token) error {
	set, err := buildTokens(s.meshToken, tokens)
	if err != nil {
		return err
	}
	s.tokens.Store(set)
	return nil
}

// Handle mounts h at pattern (a [http.ServeMux] pattern such as "/mcp")
// behind the server's authentication, rate limit, CORS, security headers,
// body limit, metrics and logs: a request reaches h only with a valid
// token holding scope (any scope when scope is ""). h can read the caller
// with [IdentityFrom]. A plain-text error response of h (http.Error) is
// answered as a JSON error like the server's own, {error, code}
// (docs/API.md#errors), with h's text as the message of a 4xx and never
// in a 5xx. Call Handle before serving;
// an invalid pattern or one that conflicts with a route of the server is
// an error.
func (s *Server) Handle(pattern string, h http.Handler, scope Scope) (err error) {
	if h == nil {
		return errors.New("httpserver: Handle needs a handler")
	}
	if scope != "" && scopeBit(scope) == 0 {
		return fmt.Errorf("httpserver: unknown scope %q", scope)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("httpserver: cannot mount %q: %v", pattern, p)
		}
	}()
	s.handle(pattern, authScope, scope, func(w *recorder, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		w.holdText = true
		h.ServeHTTP(w, r)
		s.answerHeld(w)
	})
	return nil
}

// answerHeld answers the plain-text error a mounted handler wrote, if any,
// as a JSON error.
func (s *Server) answerHeld(w *recorder) {
	status := w.heldStatus
	if status == 0 {
		return
	}
	w.holdText, w.heldStatus = false, 0
	text := strings.TrimSpace(string(w.heldText))
	if status >= 500 || text == "" {
		e := errorf(status, CodeForStatus(status), "%s", strings.ToLower(http.StatusText(status)))
		if text != "" {
			e.cause = errors.New(text)
		}
		s.fail(w, e)
		return
	}
	s.fail(w, errorf(status, CodeForStatus(status), "%s", text))
}

// MetricsHandler returns the Prometheus exposition of the server's metrics
// registry, for a host that serves it on its own listener.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler }

// authMode says how a route authenticates.
type authMode int

const (
	authNone     authMode = iota // public
	authScope                    // a valid token with the route's scope
	authCallback                 // the callback secret, or optionally a token
)

// handle registers a route: h runs once the request is routed and
// authorised.
func (s *Server) handle(pattern string, mode authMode, scope Scope, h func(w *recorder, r *http.Request)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec, ok := w.(*recorder)
		if !ok { // only the server calls the mux, always with a recorder
			s.ServeHTTP(w, r)
			return
		}
		rec.routed = true
		rec.route = pattern
		switch mode {
		case authScope:
			if !s.authorize(rec, r, scope) {
				return
			}
			// What the request changes is audited with its caller and
			// id, wherever the change is made (the registry's write
			// hook). Routes without a token change nothing audited.
			// The core packages apply the ownership rules to the
			// caller's principal.
			r = r.WithContext(WithIdentity(audit.WithOrigin(r.Context(),
				audit.Origin{Actor: rec.identity.Name, Principal: rec.identity.Principal, RequestID: rec.id}), rec.identity))
		case authCallback:
			if _, present := credentials(r); present {
				if id, ok := s.lookup(r); ok {
					rec.identity, rec.authed = id, true
					r = r.WithContext(WithIdentity(r.Context(), id))
				}
			}
		}
		h(rec, r)
	})
	s.addPattern(pattern) // once the mux took it: HandleFunc panics on a bad or conflicting pattern
}

// ServeHTTP serves one request: security headers and a request id on every
// response, CORS, path checks, routing, and JSON errors for everything the
// mux would answer in plain text (404, 405).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r, span := s.startSpan(r)
	rec := &recorder{ResponseWriter: w, s: s, r: r, start: start, span: span}
	rec.id = s.requestID(r)
	h := w.Header()
	h.Set("X-Request-Id", rec.id)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
	defer s.finish(rec)

	if origin := r.Header.Get("Origin"); origin != "" && s.cors(rec, r, origin) {
		return
	}
	// Paths the mux would redirect (dot segments, double slashes) are
	// refused rather than redirected: an API client never needs it.
	if p := r.URL.EscapedPath(); p == "" || p[0] != '/' || p != cleanPath(p) {
		rec.routed, rec.route = true, routeUnmatched
		writeError(rec, errorf(http.StatusNotFound, CodeNotFound, "no such route (the path is not canonical)"))
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// cors applies the CORS allow-list and answers preflight requests. It
// reports whether the request was answered.
func (s *Server) cors(rec *recorder, r *http.Request, origin string) bool {
	h := rec.Header()
	h.Add("Vary", "Origin")
	allowed := s.origins[origin]
	if allowed {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers",
			"Link, Location, Retry-After, X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy, "+
				"X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Mcp-Session-Id")
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	rec.routed, rec.route = true, routePreflight
	if !allowed {
		writeError(rec, errorf(http.StatusForbidden, CodePermissionDenied, "CORS: the origin is not allowed"))
		return true
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	h.Set("Access-Control-Allow-Headers",
		"Authorization, Content-Type, X-API-Key, X-Request-Id, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID")
	h.Set("Access-Control-Max-Age", "600")
	rec.WriteHeader(http.StatusNoContent)
	return true
}

// unrouted answers a request the mux found no route for, in place of the
// mux's plain-text 404 or 405 (or a redirect, which the path check makes
// unreachable): /v1 paths need a valid token first, so the API's shape is
// not shown to strangers.
func (s *Server) unrouted(rec *recorder, status int) {
	rec.routed, rec.route = true, routeUnmatched
	r := rec.r
	h := rec.Header()
	allow := h.Get("Allow")
	h.Del("Location")
	h.Del("Allow")
	if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
		if _, ok := s.authenticate(rec, r); !ok {
			return
		}
	}
	if status == http.StatusMethodNotAllowed {
		h.Set("Allow", allow)
		writeError(rec, errorf(status, CodeMethodNotAllowed, "method %s is not allowed on this route (allowed: %s)", r.Method, allow))
		return
	}
	writeError(rec, errorf(http.StatusNotFound, CodeNotFound, "no such route"))
}

// authorize authenticates the request, spends its token's rate budget and
// checks scope. On failure it has written the response.
func (s *Server) authorize(rec *recorder, r *http.Request, scope Scope) bool {
	id, ok := s.authenticate(rec, r)
	if !ok {
		return false
	}
	if s.perToken != nil {
		now := s.now()
		q := s.perToken.take(id.Name, now)
		setRateHeaders(rec.Header(), s.rateLimit, q, now)
		if !q.allowed {
			writeError(rec, errorf(http.StatusTooManyRequests, CodeRateLimited,
				"rate limit of %s exceeded; retry after %s s", s.rateLimit, rec.Header().Get("Retry-After")))
			return false
		}
	}
	if scope != "" && !id.Has(scope) {
		s.auditAuthFailure(rec, r, id, CodePermissionDenied, "missing scope "+string(scope))
		writeError(rec, errorf(http.StatusForbidden, CodePermissionDenied,
			"the token %q lacks the scope %q this route needs", id.Name, scope))
		return false
	}
	return true
}

// authenticate checks the request's credentials. A valid token is always
// accepted. A wrong one spends from its client's budget of failed
// attempts and from the global one; once either is spent, wrong tokens
// get 429 instead of 401 (and are not audited). On failure it has written
// the response.
func (s *Server) authenticate(rec *recorder, r *http.Request) (Identity, bool) {
	if id, ok := s.lookup(r); ok {
		rec.identity, rec.authed = id, true
		return id, true
	}
	_, present := credentials(r)
	msg := "missing credentials: send Authorization: Bearer <token> or X-API-Key: <token>"
	if present {
		msg = "invalid credentials"
		if !s.failedAttempt(rec, r) {
			return Identity{}, false
		}
	}
	reason, _, _ := strings.Cut(msg, ":")
	s.auditAuthFailure(rec, r, Identity{}, apierr.CodeUnauthenticated, reason)
	rec.Header().Set("WWW-Authenticate", `Bearer realm="agentmesh"`)
	writeError(rec, errorf(http.StatusUnauthorized, apierr.CodeUnauthenticated, "%s", msg))
	return Identity{}, false
}

// failGlobalKey is the key of the one bucket of Server.allFails.
const failGlobalKey = "*"

// failedAttempt counts a wrong token against its client's budget and the
// global one. When either is spent it answers 429 and returns false. The
// global budget is spent only by clients within their own, so that new
// clients enter the per-client map no faster than it allows.
func (s *Server) failedAttempt(rec *recorder, r *http.Request) bool {
	now := s.now()
	key := throttleKey(rec.clientAddr(r))
	limit, q := s.failLimit, s.failures.peek(key, now)
	if q.allowed {
		limit, q = s.failGlobal, s.allFails.take(failGlobalKey, now)
		if !q.allowed {
			if !s.overGlobal.Swap(true) {
				s.log.LogAttrs(r.Context(), slog.LevelWarn, "failed authentication attempts over the global budget: wrong tokens get 429 until it refills (valid tokens are served)",
					slog.String("budget", s.failGlobal.String()), slog.String("request_id", rec.id))
			}
		} else {
			s.overGlobal.Store(false)
			limit, q = s.failLimit, s.failures.take(key, now)
			if q.allowed && q.remaining == 0 {
				s.log.LogAttrs(r.Context(), slog.LevelWarn, "client throttled after failed authentication attempts: its wrong tokens get 429 until its budget refills (valid tokens are served)",
					slog.String("client", key), slog.String("budget", s.failLimit.String()), slog.String("request_id", rec.id))
			}
		}
	}
	if q.allowed {
		return true
	}
	setRateHeaders(rec.Header(), limit, q, now)
	writeError(rec, errorf(http.StatusTooManyRequests, CodeRateLimited,
		"too many failed authentication attempts; retry after %s s", rec.Header().Get("Retry-After")))
	return false
}

// lookup returns the identity of the request's token, if it is valid.
func (s *Server) lookup(r *http.Request) (Identity, bool) {
	tok, present := credentials(r)
	if !present {
		return s.certLookup(r)
	}
	if tok == "" || len(tok) > 4096 {
		return Identity{}, false
	}
	e, ok := s.tokens.Load().lookup(tok)
	if !ok {
		return Identity{}, false
	}
	return e.identity(), true
}

// fail writes e; the cause of a 5xx is logged with the request id.
func (s *Server) fail(rec *recorder, e *apiError) {
	if e.status >= 500 {
		cause := e.cause
		if cause == nil {
			cause = errors.New(e.msg)
		}
		level := slog.LevelError
		if e.status != http.StatusInternalServerError {
			level = slog.LevelWarn // shutting down, or the client went away
		}
		s.log.LogAttrs(rec.r.Context(), level, "request failed",
			slog.String("request_id", rec.id), slog.String("route", rec.route), slog.String("err", cause.Error()))
	}
	writeError(rec, e)
}

// finish recovers a panicking handler, then records the request's metrics
// and log line.
func (s *Server) finish(rec *recorder) {
	p := recover()
	if p != nil {
		if p == http.ErrAbortHandler {
			panic(p)
		}
		s.log.LogAttrs(rec.r.Context(), slog.LevelError, "handler panic",
			slog.String("request_id", rec.id), slog.String("route", rec.route), slog.Any("panic", p))
		if !rec.wroteHeader {
			rec.routed, rec.swallow = true, false
			writeError(rec, internal(nil))
			p = nil
		}
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	route := rec.route
	if route == "" {
		route = routeUnmatched
	}
	d := time.Since(rec.start)
	s.metrics.observe(route, status, d)
	endSpan(rec, route, status)
	ctx := rec.r.Context()
	if s.log.Enabled(ctx, slog.LevelInfo) {
		attrs := []slog.Attr{
			slog.String("method", rec.r.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Duration("duration", d),
			slog.String("request_id", rec.id),
			slog.Int64("bytes", rec.size),
		}
		if rec.authed {
			attrs = append(attrs, slog.String("token", rec.identity.Name))
		}
		attrs = append(attrs, slog.String("client", rec.clientAddr(rec.r)))
		s.log.LogAttrs(ctx, slog.LevelInfo, "http request", attrs...)
	}
	if p != nil {
		// The response was under way: abort it so the client sees a broken
		// reply, not a truncated one that looks whole.
		panic(http.ErrAbortHandler)
	}
}

// requestID returns the request's X-Request-Id when it is a sane one (1–64
// characters of [A-Za-z0-9._:-]), else a new one.
func (s *Server) requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 && !strings.ContainsFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-')
	}) {
		return id
	}
	return s.idPrefix + strconv.FormatUint(s.idSeq.Add(1), 36)
}

// cleanPath is net/http's canonical form of a path: what the mux would
// redirect to.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			np = p
		} else {
			np += "/"
		}
	}
	return np
}

// recorder wraps the ResponseWriter of one request: it records the status
// and size for metrics and logs, carries the request's state (route,
// identity, id), and turns the mux's own plain-text errors into JSON.
type recorder struct {
	http.ResponseWriter
	s     *Server
	r     *http.Request
	start time.Time

	id       string
	route    string
	routed   bool // a route (or the server itself) owns the response
	identity Identity
	authed   bool
	span     trace.Span // the request's server span
	client   string     // the client address, once known (clientAddr)

	status      int
	wroteHeader bool
	swallow     bool // the body being written is the mux's, replaced by JSON
	size        int64

	// A mounted handler's plain-text error is held back (its status and
	// the head of its text) and answered as JSON once it returns.
	holdText   bool
	heldStatus int
	heldText   []byte
}

// clientAddr returns the address of the request's client
// (Options.TrustedProxies), derived once per request.
func (w *recorder) clientAddr(r *http.Request) string {
	if w.client == "" {
		w.client = w.s.clientIP(r)
	}
	return w.client
}

// maxHeldText bounds the text kept of a mounted handler's error.
const maxHeldText = 1024

func (w *recorder) WriteHeader(code int) {
	if w.wroteHeader || w.heldStatus != 0 {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if !w.routed {
		w.s.unrouted(w, code)
		w.swallow = true
		return
	}
	if w.holdText && code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.heldStatus = code
		return
	}
	w.status, w.wroteHeader = code, true
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
		if w.swallow {
			return len(b), nil
		}
		if w.heldStatus != 0 {
			w.heldText = append(w.heldText, b[:min(len(b), maxHeldText-len(w.heldText))]...)
			return len(b), nil
		}
	}
	n, err := w.ResponseWriter.Write(b)
	w.size += int64(n)
	return n, err
}

// Flush lets streaming handlers (MCP's server-sent events) flush.
func (w *recorder) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
		if w.heldStatus != 0 {
			return
		}
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
