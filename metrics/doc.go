// Package metrics is the Prometheus metric set of the mesh libraries (the
// HTTP metrics are httpserver's own; docs/OPERATIONS.md#metrics lists all):
//
//	agentmesh_discover_duration_seconds            histogram  time to rank agents for a query
//	agentmesh_delegations_total{agent,status}      counter    delegations reaching accepted or a final status
//	agentmesh_dispatch_duration_seconds{agent}     histogram  start of a delegation to the agent's answer (or acceptance)
//	agentmesh_dispatch_errors_total{agent,code}    counter    delegations ending failed or timeout, by code
//	agentmesh_breaker_state{agent}                 gauge      0 closed, 1 open, 2 half-open (read at scrape)
//	agentmesh_routing_decisions_total{decision}    counter    route, clarify, fallback, or error
//	agentmesh_agents{source}                       gauge      registered agents: api or file
//	agentmesh_sessions_active                      gauge      active routing sessions (counted by the store)
//	agentmesh_audit_dropped_total                  counter    audit entries dropped on a full queue (with Options.Audit)
//	agentmesh_audit_write_failures_total           counter    audit entries the store refused (with Options.Audit)
//
// It is a public package so that a program embedding the mesh (with its
// own http.Server, say) gets the same metrics as `agentmesh serve`. A
// [Metrics] is fed only through the hooks the library packages already
// have — no package here imports it:
//
//	m, err := metrics.New(promRegistry, &metrics.Options{Breakers: breakers, Sessions: store})
//	if err != nil {
//		return err
//	}
//	defer m.Follow(reg)()                                    // agents by source, series cleanup
//	client, err := delegation.New(ctx, reg, store, &delegation.Options{
//		Breakers: breakers,
//		OnRecord: m.ObserveRecord,                           // delegations, dispatches, errors
//	})
//	router, err := routing.New(cls, reg, client, sessions, &routing.RouterOptions{
//		OnDecision: m.ObserveDecision,                       // routing decisions
//	})
//	srv, err := httpserver.New(reg, m.Searcher(engine), client, &httpserver.Options{Metrics: promRegistry})
//
// # Cardinality
//
// The agent label only takes names of registered agents, which the
// registry bounds; when an agent is unregistered its series are deleted
// (and the breaker gauge reports only registered agents). Agent counts are
// kept from registry events, never by listing the registry at scrape time;
// the session count is asked of the store at most once per
// Options.SessionsCacheFor.
//
// # Concurrency
//
// A [Metrics] is safe for concurrent use and starts no goroutine.
package metrics
