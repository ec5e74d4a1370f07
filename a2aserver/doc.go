// Package a2aserver is the A2A front-end of the mesh (docs/API.md#a2a): a
// [net/http.Handler] serving the A2A 1.0 JSON-RPC binding, built on the
// A2A Go SDK's request handler ([a2asrv]), so that an A2A client can use
// the whole mesh as one agent. The mesh's Agent Card
// ([a2acard.MeshCard]) declares it at [a2acard.MeshEndpointPath] with two
// skills, mesh.delegate and mesh.discover, which this package runs with
// the library: a [Delegations] client (*delegation.Client) and a
// [discovery.Searcher] (*discovery.Engine). It is a thin layer, as mcpserver is.
//
//	h, err := a2aserver.New(engine, delegations, &a2aserver.Options{
//		Authorize: func(ctx context.Context, op string) error { … }, // scope per operation
//		Caller:    func(ctx context.Context) string { … },           // owner of the tasks
//	})
//	mux.Handle("/a2a", h) // behind the host's authentication
//
// The package Example runs a delegation with a real A2A client.
//
// # Messages
//
// A message's text parts, joined with newlines, are the input; other part
// kinds are refused (the card's input mode is text/plain). The skill and
// its options are message metadata (or SendMessage request metadata; the
// message's win):
//
//	skill                  mesh.delegate (default) or mesh.discover
//	agentmesh/target       delegate to this agent (else: the best discovery match)
//	agentmesh/query        pick the target by this query instead of the text
//	agentmesh/sourceAgent  the delegating agent, if the caller is one
//	agentmesh/timeoutMs    the delegation's deadline (default 120000)
//	agentmesh/limit        the number of discovery results (default 10)
//	any other key          the delegation context, passed to the agent
//
// Other agentmesh/ keys are refused, so a typo is not taken for context.
//
// Delegation is the default: the text is the task, and it goes to the
// named target or to the best-matching agent, exactly as POST /v1/delegate
// with targetName or query (docs/API.md#delegations); a delegation record
// is written, and its id is the task's agentmesh/delegationId metadata. The context is the
// rest of the metadata because that is where the mesh's own A2A transport
// (delegation.A2ATransport) puts a delegation's context: its depth and
// chain count the hops, so a mesh registered as an a2a agent of another
// continues the count, and meshes that delegate to each other stop at the
// depth limit (depth_exceeded) instead of looping. Discovery treats the
// text as the query, as GET /v1/discover does (docs/API.md#discovery).
//
// # Tasks
//
// Every message creates a task, and SendMessage blocks until it is final
// (or input-required); with returnImmediately it answers with the
// submitted task and the client polls GetTask. Outcomes:
//
//   - delegation completed: state completed, with an artifact "result"
//     holding the agent's result — a text part for a JSON string, a data
//     part for any other JSON value (none for an empty result);
//   - the agent asked a question (an A2A agent in input-required,
//     docs/AGENTS.md#a2a-agents): state input-required, the question as
//     the status message. A message with that taskId answers it: its text goes, as a new
//     delegation, to the same agent, with the delegation id of the
//     question under the context key "inReplyTo";
//   - delegation refused or failed (no_match, not_found, depth_exceeded,
//     delegation_cycle, agent_unavailable, agent_error, timeout, …):
//     state failed, with a status message whose text is "<code>: <what
//     happened>" and the code under agentmesh/code in the message's and
//     the task's metadata; a canceled delegation ends canceled;
//   - discovery: state completed, with an artifact "agents" holding a text
//     part (a one-line summary) and a data part {"results": [...]} whose
//     items have the fields of GET /v1/discover (agent, score, coverage,
//     matchedTerms, matchedCapabilities, matchedResources).
//
// The task's metadata carries agentmesh/delegationId and
// agentmesh/targetAgent once a delegation ran. A blocking SendMessage
// whose client goes away cancels its delegation, as POST /v1/delegate
// does; CancelTask cancels a running task's delegation. Streaming, push
// notifications and the extended card are not offered (the card says
// so): those calls get "unsupported operation" or "push notification not
// supported".
//
// Tasks live in the memory of the process that ran them, for
// Options.TaskRetention after their last update and within
// Options.MaxTaskBytes; the durable trace of a delegation is its record,
// which GET /v1/delegations/{id} reads on any replica.
//
// # Authorisation
//
// The handler does not authenticate: the host mounts it behind its own
// authentication. Options.Authorize sees each call's operation — OpDelegate,
// OpDiscover, OpReadTasks (GetTask, ListTasks) or OpCancelTask — with the
// request's context, and [RequiredScope] maps them to the HTTP API's
// scopes (read for discovery and reading, delegate for delegating and
// cancelling). A task belongs to the caller that created it — the
// principal the context carries (package principal), or whoever
// Options.Caller names — and other callers get "task not found".
//
// # Errors
//
// A call that cannot start is a JSON-RPC error, and no task is created: a
// malformed message (no text part, empty text, another kind of part, bad
// metadata) is "invalid params" (-32602) whose message starts with
// "invalid_argument: " and says what to fix; a call Options.Authorize
// refuses is "permission denied" (-31403), "permission_denied: …". The
// JSON-RPC error's data carries {"code": …}. Everything that happens once
// the task exists — including the library's refusals — is a task state,
// as above. Errors no package claims (a store failure, a panic) fail the
// task with code internal and are logged, never shown.
//
// # Concurrency
//
// The handler is safe for concurrent use. Each running task has the SDK's
// goroutines, which end with the task; a task runs to its delegation's
// deadline at most.
package a2aserver
