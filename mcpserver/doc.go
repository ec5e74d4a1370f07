// Package mcpserver is the MCP front-end of the mesh: an [mcp.Server] of
// the official Go SDK whose tools let a model register agents, discover
// them, delegate tasks to them, follow those tasks and route messages.
// The user documentation of every tool (parameters, results, errors) and
// of the host configuration is docs/MCP.md.
// It is a thin layer: each tool decodes its arguments, calls the registry,
// the discovery engine or the delegation client, and encodes the answer.
//
//	// stdio (the agentmesh binary with no sub-command):
//	srv, transport, err := mcpserver.NewStdio(reg, engine, delegations, nil, os.Stdin, os.Stdout)
//	err = srv.Run(ctx, transport)
//	// or Streamable HTTP, behind the HTTP API's authentication:
//	srv, err := mcpserver.New(reg, engine, delegations, nil)
//	h, err := mcpserver.HTTPHandler(srv, nil)
//	mux.Handle("/mcp", h)
//
// The package Example runs the same flow with an in-memory client.
//
// # Tools
//
//	tool                 arguments (required first)                     annotations
//	mesh_register        name, description, capabilities, endpoint;     idempotent, not destructive, closed world
//	                     displayName, protocol, examples, resources,
//	                     labels, auth, ttlSeconds
//	mesh_discover        query; limit, labels, requiredResources        read-only, closed world
//	mesh_unregister      name                                           destructive, idempotent, closed world
//	mesh_delegate        task; targetName or query, context, async,     open world, not idempotent
//	                     timeoutMs, requiredResources, sourceAgent
//	mesh_get_delegation  id; waitSeconds (≤ 60: long-poll)              read-only, closed world
//	mesh_list_agents     label (key=value), limit, cursor               read-only, closed world
//	mesh_route           input; user_id, slack_user_id, session_id,     open world, not idempotent
//	                     locale (with Options.Router)
//	handle_message       raw_input; employee_id, session_id, …          open world, not idempotent
//	                     (with Options.Router; unknown keys accepted)
//
// Each tool has an input and an output schema (JSON Schema 2020-12,
// inferred from the argument and result types of this package — [RegisterArgs],
// [DiscoverResult], … — and tightened with the library's limits). Results
// are objects (lists are wrapped: {results}, {agents, nextCursor}), carried
// as structured content and, as JSON text, in the content for clients that
// read only text. Unknown arguments are refused (but by handle_message,
// whose callers may send more than it documents).
//
// # Errors
//
// A tool that fails for a reason the caller can act on answers with an
// isError result whose text starts with an error code of the HTTP API
// (docs/API.md#errors, docs/MCP.md#errors): "not_found: no agent
// named \"x\"". That covers arguments the schema refuses (missing, wrong
// type, unknown, out of range: invalid_argument, with the argument's path),
// the library's refusals (invalid_argument naming each bad field,
// endpoint_not_allowed, not_found, no_match, managed_by_file, conflict,
// depth_exceeded, delegation_cycle, resource_not_covered), a refusal by
// Options.Authorize (permission_denied), and a delegation that ran and did
// not complete: its text is "<code>: delegation <id> to \"<agent>\"
// <status>: <error>" followed by the record as JSON, and the record is the
// structured content too (it validates against the output schema).
// mesh_get_delegation, by contrast, reports a failed delegation in a
// successful result: reading the record worked. Errors no package claims
// (a store failure) become "internal: internal error (logged by the
// server)", with the cause logged to Options.Logger and never shown.
// JSON-RPC errors are left to protocol problems: an unknown tool, a
// malformed request.
//
// # Performance
//
// A mesh_discover call costs about what GET /v1/discover does: when the
// searcher encodes its own results ([discovery.JSONSearcher], as
// *discovery.Engine), the tool answers those bytes; a call whose
// arguments are plainly valid (known keys, the right types, within the
// schema's bounds) is decoded in one pass instead of by the SDK's
// per-call schema machinery, and any other goes to the SDK, so refusals
// keep its text; and [NewStdio]'s transport answers such calls itself,
// encoding the result's JSON once where the SDK's response path encodes it
// three times. Replies are the SDK's byte for byte (TestWireUnchanged);
// results are not validated against the output schemas at run time (the
// tests do it). docs/MCP.md#performance has the figures.
//
// # Concurrency
//
// The server keeps no state besides the SDK's and starts no goroutines
// (NewStdio's transport starts one, reading stdin, per connection); it is
// as safe for concurrent use as the registry, searcher and delegation
// client it wraps. [HTTPHandler] runs in stateless mode, so any replica
// can serve any request.
package mcpserver
