// Package client is a typed Go client of the HTTP API of a running
// agentmesh server (agentmesh serve, or a host built on httpserver): the
// agent registry, discovery, delegation, routing and sessions, in the
// types of the library packages, so that code written against a
// [registry.Registry], a [discovery.Engine] or a [delegation.Client] in
// process reads the same against a remote mesh.
//
//	c, err := client.New("http://localhost:8766", &client.Options{Token: os.Getenv("MESH_TOKEN")})
//	if err != nil { … }
//	_, _, err = c.Register(ctx, registry.Agent{Name: "finance", Description: "Budgets.", Capabilities: []string{"budget"}, Endpoint: url})
//	results, err := c.Search(ctx, "budget for engineering", nil)
//	rec, err := c.Delegate(ctx, delegation.Request{Target: "finance", Task: "Budget of Engineering?"})
//	// rec.Status: completed, failed, timeout or canceled (accepted if async)
//
// The same flow runs as the package Example, against a server it starts.
// [Client.Agents] and [Client.Delegations] walk every page of a list as a
// range-over-func iterator; [Client.List] reads one page.
// [Client.WaitDelegation] long-polls an async delegation until it is
// final.
//
// # Errors
//
// A reply with a non-2xx status is an *[Error] with the status, the
// server's code, message and details, and its Retry-After. Error()
// returns the server's message; [Error.ErrorCode] the code, unchanged.
// With [errors.Is] an *Error matches the sentinel that the same failure
// returns in process, chosen by its code and by the kind of route it came
// from:
//
//   - agent routes (/v1/agents…, import included): not_found →
//     registry.ErrNotFound, invalid_argument → registry.ErrInvalid,
//     endpoint_not_allowed → registry.ErrEndpointNotAllowed,
//     managed_by_file → registry.ErrManagedByFile, conflict →
//     registry.ErrDefaultConflict;
//   - /v1/discover: invalid_argument → discovery.ErrEmptyQuery when it
//     names the query field, else discovery.ErrInvalidQuery;
//   - POST /v1/delegate and /v1/delegations…: not_found →
//     delegation.ErrNotFound (an unknown target on /v1/delegate, an
//     unknown id on /v1/delegations/{id}; never registry.ErrNotFound),
//     invalid_argument → delegation.ErrInvalid, no_match →
//     delegation.ErrNoMatch, depth_exceeded → delegation.ErrDepthExceeded,
//     delegation_cycle → delegation.ErrCycle, resource_not_covered →
//     delegation.ErrResourceNotCovered, conflict → delegation.ErrFinal;
//   - POST /v1/request: invalid_argument → routing.ErrInvalidRequest,
//     no_default_agent → routing.ErrNoDefaultAgent, unavailable →
//     routing.ErrUnavailable;
//   - /v1/sessions/{id}…: not_found → session.ErrNotFound, conflict →
//     session.ErrNotActive, invalid_argument → session.ErrInvalid.
//
// On every route, HTTP 401 matches [ErrUnauthenticated], code
// permission_denied (HTTP 403) [ErrPermissionDenied] and HTTP 429
// [ErrRateLimited]. Only a reply that is the server's own JSON error
// selects library sentinels: a proxy's 404 page has code not_found but is
// not registry.ErrNotFound.
//
// A call that got no response at all — the connection refused or not
// made, reset or closed before a reply — returns an error wrapping
// [ErrUnreachable] and the cause. A call whose context ended returns an
// error wrapping the context's error. The token never appears in an
// error.
//
// # Retries
//
// Requests that are safe to repeat — reads, discovery, registrations and
// imports (upserts), deletes, heartbeats, cancels — are retried
// Options.MaxRetries times (2 by default) after a failure before any
// response and after HTTP 429, 502, 503 and 504, waiting for the reply's
// Retry-After when it fits in the context's deadline and in
// [MaxRetryWait], else after an exponential backoff with jitter from
// 100 ms. A 502 or 503 that is the server's answer to the request itself
// (card_fetch_failed, no_default_agent) is not retried. [Client.Delegate],
// [Client.Route] and [Client.ResumeSession] run something that must not
// run twice: they are retried only when the connection could not be
// made, so the server never saw the request.
//
// # Concurrency
//
// A [Client] is safe for concurrent use by multiple goroutines and holds
// no goroutines of its own; every call is bounded by its context, which
// also cancels the waits between retries and the long-polls of
// [Client.WaitDelegation]. The iterators make their requests as the loop
// asks for the next value, from the goroutine that ranges over them.
package client
