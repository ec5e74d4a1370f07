// Package agentmesh is a library and server that lets AI agents find each
// other and hand work to each other.
//
// Agents register what they can do; other agents discover them by a text
// query and delegate tasks to them over HTTP (POST /task), MCP or A2A; an
// orchestrator routes a user's message to the right agent. The mesh is a Go
// library first — import the packages into an agent host, embed the
// discovery engine in tests, or wire a custom server — with an MCP server
// and an HTTP control plane as thin front-ends (cmd/agentmesh). Every
// agentmesh process started on one store file is the same mesh: one holds
// the file and serves the others over a same-user Unix socket.
//
// # Packages
//
//   - [github.com/agentmesh/agentmesh/registry]: the agent record, its
//     validation, and the registry over a durable store, with TTLs and
//     change events.
//   - [github.com/agentmesh/agentmesh/discovery]: ranks agents for a text
//     query (BM25F over an inverted index kept current from registry
//     events); works standalone too.
//   - [github.com/agentmesh/agentmesh/delegation]: hands tasks to agents
//     over HTTP (POST /task, sync or async), MCP, A2A or in-process Go
//     handlers, with retries, per-agent circuit breakers
//     ([github.com/agentmesh/agentmesh/breaker]) and durable records.
//   - [github.com/agentmesh/agentmesh/routing]: the orchestrator —
//     classifiers (lexical, LLM), the confidence gate, clarification and
//     the Router pipeline, with [github.com/agentmesh/agentmesh/session]
//     for multi-turn sessions.
//   - [github.com/agentmesh/agentmesh/httpserver] and
//     [github.com/agentmesh/agentmesh/mcpserver]: the HTTP control plane
//     and the MCP tools, as thin front-ends (cmd/agentmesh wires them);
//     [github.com/agentmesh/agentmesh/a2aserver] serves the whole mesh as
//     one A2A agent, whose card [github.com/agentmesh/agentmesh/a2acard]
//     builds.
//   - [github.com/agentmesh/agentmesh/client]: a typed client of a running
//     server's HTTP API, for hosts that use a remote mesh (and for the
//     stdio server's remote mode and local sharing).
//   - [github.com/agentmesh/agentmesh/netguard]: the endpoint policy and
//     the SSRF-safe HTTP client every outbound call uses.
//   - [github.com/agentmesh/agentmesh/store/boltstore]: the default store,
//     one bbolt file; [github.com/agentmesh/agentmesh/store/memstore] for
//     tests and demos; [github.com/agentmesh/agentmesh/store/etcdstore]
//     for several replicas sharing state.
//   - [github.com/agentmesh/agentmesh/metrics] and
//     [github.com/agentmesh/agentmesh/audit]: the Prometheus metrics and
//     the persisted audit log, fed by the hooks of the packages above.
//
// # Getting started
//
// [Open] builds a whole mesh — store, registry, discovery, breakers,
// delegation and, if asked, routing — as agentmesh serve does:
//
//	mesh, err := agentmesh.Open(ctx, &agentmesh.Options{Path: "mesh.db"})
//	...
//	defer mesh.Close()
//	mesh.Registry().Register(ctx, registry.Agent{
//		Name:         "finance",
//		Description:  "Department budgets and cost centers.",
//		Capabilities: []string{"budget", "cost-center"},
//		Endpoint:     "https://finance.example.com/task",
//	})
//	results, err := mesh.Engine().Search("engineering budget", nil)
//
// The parts also compose by hand: a registry over a store
// (registry.New), a discovery engine following it (Engine.Follow), a
// delegation client over both (delegation.New).
//
// [ExampleOpen] runs the first flow, the package example the second.
package agentmesh
