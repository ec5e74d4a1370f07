// Package principal names who acts on a shared mesh, so that the core
// packages can tell whose agents, delegations and sessions are whose.
//
// A principal is a caller as the mesh's owners see it: a team, a service,
// a person. Front-ends authenticate a request (a token, a client
// certificate), look up its principal and attach it to the request's
// context with [NewContext]; the registry, the delegation client and the
// router read it with [FromContext] and apply the ownership rules of the
// mesh's security model (docs/SECURITY.md, "Principals and ownership"):
//
//   - an agent registered by a principal is owned by it; only its owner
//     or an admin may replace, delete or heartbeat it;
//   - a delegation record belongs to the principal that started it;
//     others are told it does not exist;
//   - a routing session belongs to the principal whose request created
//     it: the same user id sent by another principal is another user.
//
// A context without a principal is the mesh itself or a library caller
// that wires no authentication (an in-process handler, a test, the agent
// directory, the stdio MCP server of a single local user): it is not
// restricted. Records written without an owner belong to [Default], the
// principal of the single MESH_TOKEN, so that a mesh that starts naming
// principals keeps its existing records with the token that made them.
package principal
