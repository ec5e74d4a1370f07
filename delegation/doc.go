// Package delegation hands tasks to agents. A [Client] resolves the
// target (by name from the registry, or the best discovery match for a
// query), enforces the delegation limits, sends the task over the agent's
// protocol inside the agent's circuit breaker, retries only where that is
// safe, and keeps a [Record] of every delegation in a
// [Store]. Agents that answer later report back through the callback
// endpoint the client serves ([Client.CallbackHandler]); callers wait for
// a result with [Client.Wait].
//
//	client, err := delegation.New(ctx, reg, store, &delegation.Options{
//		Discovery: engine,          // for Request.Query; nil: by name only
//		Breakers:  breakers,        // shared with the router
//		Policy:    policy,          // the endpoint policy at dial time
//		PublicURL: "https://mesh.example.com",
//	})
//	defer client.Close()
//	mux.Handle("POST /v1/delegations/{id}/result", client.CallbackHandler(nil))
//
//	rec, err := client.Delegate(ctx, delegation.Request{Target: "finance", Task: "Budget for Engineering?"})
//	// err: refused before sending (not found, depth, cycle, …)
//	// rec.Status: completed, failed, timeout or canceled (accepted if async)
//
// The same flow runs as the package Example, with two httptest agents.
//
// # Transports
//
// A [Transport] sends one [Message] to one agent and returns its [Reply].
// The client picks it by the agent's protocol: [HTTPTransport] for "http"
// (the agentkit-mesh POST /task contract), [MCPTransport] for "mcp" (the
// agent's handle_message tool), [A2ATransport] for "a2a" (A2A 1.0 agents
// over JSON-RPC: an input-required task completes the delegation with the
// agent's question and Record.NeedsInput set), and the Go
// [Handler]s registered with [Client.Handle] for "inprocess" agents,
// which a host puts on the mesh like any other agent (same records,
// limits, deadlines and breakers; a panic fails the delegation).
// Options.Transports adds or replaces transports. Every outbound request
// goes through the endpoint policy's client ([netguard.Policy.NewClient])
// and never follows a redirect.
//
// # Limits and retries
//
// A request whose context.depth is MaxDepth (5) or more, or whose target
// is already on context.chain, is refused before anything is sent; the
// mesh sends depth+1 and the chain with the source agent appended. A
// delegation has a deadline (Request.Timeout, default 120 s, at most 1 h)
// that bounds all its attempts, and a result cap of [MaxResultBytes]
// (4 MiB). An attempt is retried — at most [MaxRetries] (2) times, with
// the same delegation id, after an exponential backoff with jitter from
// 200 ms, or after the agent's Retry-After when it fits in the deadline —
// only when it certainly did not reach the agent (connection refused, DNS
// failure) or the agent asked for it (HTTP 429, 502, 503, 504). The
// target's breaker wraps all the attempts of a delegation as one outcome;
// an open breaker fails the delegation at once with code
// agent_unavailable and the time it will half-open, without calling the
// agent. Stale agents (TTL lapsed) are not called either.
//
// # Async delegations and callbacks
//
// Every delegation to an http agent, and every async one, gets a
// callbackUrl, <PublicURL>/v1/delegations/<id>/result?token=<secret>
// (PublicURL empty: DefaultPublicURL), whose single-use secret (130
// random bits) is stored only as its SHA-256 and never returned by read
// paths. An agent that answers 202 leaves the record accepted until it
// posts {"status", "result", "error"} there; the handler answers 401
// (wrong or missing secret), 404 (unknown id), 409 (already final: a late
// callback never overturns timeout or canceled) or 400 (a status other
// than completed or failed). A callback may also come before the
// 202 is read, and through any replica sharing the store. With
// Request.Async, Delegate returns once the agent accepted the task, and
// an accepted delegation with no callback by its deadline
// (Request.AsyncTimeout, default 1 h) becomes timeout. Without it,
// Delegate waits for the callback until the delegation's own deadline
// (Request.Timeout, default 120 s), through the path of [Client.Wait],
// and returns the final record: completed or failed as reported, timeout
// at the deadline, canceled if ctx is cancelled (as for any synchronous
// delegation). The breaker then counts the callback's outcome, once,
// not the 202. [Client.Cancel] cancels a running or accepted delegation.
//
// # Durability
//
// Records are those of the /v1/delegations API. An async delegation's record is committed to
// the store before the task is sent, and its accepted record before
// Delegate returns, so a callback finds it after any crash. The records of
// a synchronous delegation (running, then final) go through a group
// commit: one goroutine writes whatever is queued in one
// Store.PutDelegations call, so the caller never waits for an fsync, a
// record is durable within milliseconds of the reply, and concurrent
// delegations share commits. Until then, and while it runs, a record is
// served from memory by [Client.Get]. A failed write is retried; Shutdown
// flushes what is queued. On start, [New] marks records left running by a
// previous process failed with code interrupted (unless
// Options.SkipRecovery) and resumes the deadlines of accepted ones. Over
// a store several replicas share, an [OwnerStore], a running record
// belongs to the client running it instead ([Record.Owner], an id the
// client holds alive in the store while it runs): when a client dies, the
// others mark its running records failed with code interrupted, once,
// and a final record is never overwritten by its late writes. Final
// records older than Options.Retention (7 days) or beyond
// Options.MaxRecords (100,000, oldest finished first) are pruned every
// Options.PruneInterval (5 s), so the store stays within the records of
// one interval of its bound.
//
// # Concurrency
//
// A [Client] is safe for concurrent use. It owns two goroutines — the
// group committer and the maintainer, which times out accepted
// delegations (one timer on the earliest deadline, no polling) and prunes
// records — and, for async in-process delegations, one goroutine per
// handler running; [Client.Shutdown] drains delegations in flight within
// its context, cancels the rest (failed, interrupted), flushes records and
// stops them all. [Client.Wait] is woken by the client's own changes and
// re-reads the store only every Options.WaitPollInterval (1 s), to see
// callbacks that landed on another replica. Options.OnRecord and the
// handlers are never called with a lock held. The transports, and the
// store, must be safe for concurrent use.
//
// # Errors
//
// [Client.Delegate] returns an error only when it refuses a request before
// sending anything; the error wraps one of [ErrInvalid], [ErrNotFound],
// [ErrNoMatch], [ErrDepthExceeded], [ErrCycle] or
// [ErrResourceNotCovered], and [Code] maps it to its error code
// (invalid_argument, not_found, no_match, depth_exceeded,
// delegation_cycle, resource_not_covered). A delegation that ran and
// failed is a record with a Status and a Code (agent_error,
// agent_unreachable, agent_unavailable, bad_response, response_too_large,
// endpoint_not_allowed, timeout, canceled, interrupted) and an Error text
// safe to show. Transports report failures as *[TransportError], which
// says whether a retry is safe. Every error of the package describes
// itself (a code and a message safe to show, see apierr.Describe): the
// sentinels and the errors with detail made from them, and
// *TransportError. After Shutdown, and on a zero Client, every method
// returns [ErrClosed].
//
// Task text is never logged: the Debug line of a finished delegation
// carries its length and a hash.
package delegation
