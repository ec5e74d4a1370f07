// Package httpserver is the HTTP control plane of agentmesh as an
// [http.Handler]: the REST routes for agents, discovery, delegation and
// delegation records, health and metrics, with authentication and scopes,
// rate limits, CORS, security headers and JSON errors around them.
//
// It is a thin front-end: it decodes and checks requests, calls the
// registry ([Registry]), the discovery engine ([discovery.Searcher]) and the
// delegation client ([Delegations]), and encodes their answers. It starts no
// listener and no goroutine; the host (cmd/agentmesh, a test, a program
// embedding the mesh) owns the [http.Server].
//
//	srv, err := httpserver.New(reg, engine, delegations, &httpserver.Options{
//		Token:     os.Getenv("MESH_TOKEN"),
//		RateLimit: httpserver.RateLimit{Requests: 100, Per: 15 * time.Minute},
//	})
//	if err != nil {
//		return err
//	}
//	_ = srv.Handle("/mcp", mcpHandler, "") // behind the same auth
//	return http.ListenAndServe(":8766", srv)
//
// # Routes
//
// docs/API.md is the reference of these routes for users, with a curl
// example of each; docs/openapi.yaml (served at GET /openapi.json) is the
// contract.
//
//	GET    /health                          none      {"status":"ok"}
//	GET    /health/ready                    none      200 {"status":"ready"} / 503 unavailable + Retry-After (Options.Ready)
//	GET    /health/deep                     read      200 ok / 503 degraded ([DeepHealth])
//	GET    /metrics                         none      Prometheus text (unless Options.NoMetricsRoute; Options.MetricsToken or admin when set)
//	GET    /openapi.json                    none      the OpenAPI document
//	GET    /.well-known/agent-card.json     none      the mesh's A2A Agent Card (when Options.AgentCard is set)
//	POST   /v1/agents                       register  201 created / 200 replaced, the stored record
//	GET    /v1/agents                       read      ?limit&cursor&label=k=v, bare array + Link
//	GET    /v1/agents/{name}                read      200 / 404
//	GET    /v1/agents/{name}/breaker        read      200 the breaker now and its recent transitions / 404 (when Options.BreakerHistory is set)
//	DELETE /v1/agents/{name}                register  204 / 404 / 403 another owner / 409 managed_by_file
//	POST   /v1/agents/{name}/heartbeat      register  200 the record / 404 / 403 another owner
//	POST   /v1/agents/import                register  {"cardUrl"}: 201 / 200 the record / 502 card_fetch_failed (when Options.CardClient is set)
//	GET    /v1/discover                     read      ?query&limit&minScore&scorer&label&protocol&resources&includeUnavailable
//	POST   /v1/discover                     read      the same as a JSON body
//	POST   /v1/delegate                     delegate  200 [DelegateResponse] (also for a failed delegation)
//	GET    /v1/delegations                  read      ?limit&offset&status&target, bare array + Link
//	GET    /v1/delegations/{id}             read      ?wait=30s long-poll (at most [MaxWait])
//	POST   /v1/delegations/{id}/cancel      delegate  200 the canceled record / 404 / 409
//	POST   /v1/delegations/{id}/result      callback  the delegation's secret in ?token= (never a bearer token)
//	POST   /v1/request                      route     200 routing.Response (when Options.Router is set)
//	GET    /v1/sessions/{id}                route     200 the session / 404 (not the caller's, or expired)
//	POST   /v1/sessions/{id}/resume         route     200 a new active session continuing it / 404
//	DELETE /v1/sessions/{id}                route     200 the session closed abandoned / 404 / 409 not active
//	POST   /v1/admin/reload                 admin     when Options.Reload is set; 422 reload_failed
//	GET    /v1/audit                        admin     ?limit&since&cursor, bare array + Link (when Options.Audit is set)
//	GET    /v1/events                       read      Server-Sent Events of the mesh's changes, Last-Event-ID resumes (when Options.Events is set)
//	GET    /v1/routing/decisions            read      ?limit, the router's recent decisions, newest first (Options.Activity.Decisions)
//	GET    /v1/stats/delegations            read      the last hour of ended delegations, a bucket a minute (Options.Activity.Delegations)
//	GET    /v1/stats/sessions               read      {"active": N} (Options.Activity.Sessions)
//	GET    /ui/                             none      the web dashboard (when Options.UI is set; package ui)
//	GET    /ui                              none      301 to /ui/ (with Options.UI)
//
// The delegation routes exist when a [Delegations] is given to [New], the
// session routes when Options.Sessions is set. [Server.Handle] mounts more
// handlers behind the same authentication, limits and headers: agentmesh
// serve mounts MCP at /mcp and the mesh's A2A JSON-RPC endpoint at /a2a
// (any valid token; each A2A operation checks its scope).
//
// # Authentication
//
// Every /v1 route but the callback needs "Authorization: Bearer <token>" or
// "X-API-Key: <token>". Tokens are Options.Token (every scope) and
// Options.Tokens (named, with scopes; [ParseTokens] reads the tokens file),
// compared as SHA-256 digests in constant time against every configured
// token. [Server.SetTokens] swaps the named tokens atomically (rotation: old
// and new may be valid together). A missing or wrong token gets 401
// unauthenticated, a token without the route's scope 403 permission_denied.
// Unknown /v1 paths answer 401 to strangers and 404 only to token holders.
//
// # Errors
//
// Every error is JSON: {"error": "<message>", "code": "<code>",
// "details"?: …} ([ErrorResponse]), also for unknown routes (404
// not_found) and wrong methods (405 method_not_allowed, with Allow). Request
// bodies are strict: unknown fields, wrong types, malformed or trailing data
// and invalid UTF-8 are 400 invalid_argument naming the field in
// details.field where it is known; validation failures list every field in
// details.fields. A body over Options.MaxBodyBytes (1 MiB) is 413
// payload_too_large; a Content-Type other than JSON is 415
// unsupported_media_type (a missing one is accepted). A 5xx never carries
// internal error text: its details hold the request id, under which the
// cause is logged.
//
// Codes by status: 400 invalid_argument, endpoint_not_allowed; 401
// unauthenticated; 403 permission_denied, resource_not_covered; 404
// not_found, no_match; 405 method_not_allowed; 409 conflict,
// managed_by_file; 413 payload_too_large; 415 unsupported_media_type; 422
// depth_exceeded, delegation_cycle, reload_failed; 429 rate_limited; 500
// internal; 502 card_fetch_failed; 503 unavailable, no_default_agent.
//
// # Limits and headers
//
// Options.RateLimit is a token bucket per token name ([ParseRateLimit]
// reads the "100/15m" form); responses carry RateLimit-Limit,
// RateLimit-Remaining, RateLimit-Reset (seconds until the bucket is full),
// RateLimit-Policy and X-RateLimit-Limit, X-RateLimit-Remaining,
// X-RateLimit-Reset (a Unix time); over budget is 429 rate_limited with
// Retry-After. Failed authentication attempts are budgeted per client
// address (Options.AuthFailureLimit, an IPv6 client by its /64) and across
// all clients (Options.AuthFailureGlobalLimit); once either is spent, wrong
// tokens get 429 instead of 401, while a valid token is always served.
// The client address is the connection's peer, or what a trusted proxy
// forwards (Options.TrustedProxies). Every limiter holds a bounded number
// of keys, dropping idle ones and then the least recently used.
//
// Every response carries X-Request-Id, X-Content-Type-Options: nosniff,
// X-Frame-Options: DENY, Referrer-Policy: no-referrer,
// Content-Security-Policy: default-src 'none'; frame-ancestors 'none' and
// Cache-Control: no-store; Options.UI replaces only the
// Content-Security-Policy, with one allowing its own assets. CORS allows
// only Options.CORSOrigins (default http://localhost:8766, never "*"); a
// preflight from another origin gets 403.
//
// # Observability
//
// agentmesh_http_requests_total{route,code} and
// agentmesh_http_request_duration_seconds{route} are labelled with the route
// pattern ("GET /v1/agents/{name}"), "unmatched" or "preflight", never the
// raw path. Each request is logged at Info with method, route, status,
// duration, request id and token name — never a token, a body or a query
// string (the callback secret travels in one).
//
// With Options.Audit, the server records audit entries (package audit):
// every 401 and 403 of its authentication (actor: the token's name for a
// missing scope; the client IP and route in the details), every
// registration through POST /v1/agents and /v1/agents/import — refused
// ones included, with their code (endpoint_not_allowed for a refused
// endpoint, and its host) — every unregistration and every reload, each
// with the calling token's name. GET /v1/audit lists the log newest
// first: limit defaults to 100 and is capped at 1000, since (RFC 3339)
// keeps the entries at or after it, and the Link header's cursor continues.
// The contexts the server passes to Delegations.Delegate and Router.Handle
// carry the caller's [Identity], so hooks of those libraries can name the
// caller too.
//
// # Events
//
// GET /v1/events streams the [Events] the host publishes (agent, breaker
// and delegation changes in agentmesh serve) as text/event-stream: each
// event has an id, an idle stream gets a comment line every 15 s, and
// Last-Event-ID resumes after the events a client missed while they are
// in the bounded history (else a "reset" event comes first). Each client
// has a bounded queue: one that falls behind is disconnected, never
// buffered for. [Events.Close] ends the streams at shutdown.
//
// # Concurrency
//
// A [Server] is safe for concurrent use; [Server.SetTokens] may be called
// while it serves.
package httpserver
