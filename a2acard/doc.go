// Package a2acard maps A2A 1.0 Agent Cards to agent records and back: it
// fetches a card ([Fetch]), turns it into a [registry.Agent] with protocol
// a2a ([ToAgent]), and builds the mesh's own card ([MeshCard]) whose skills
// are the mesh's discovery and delegation.
//
// The card type is the A2A Go SDK's [a2a.AgentCard]. Fetch also reads
// A2A 0.3 cards (a top-level url and preferredTransport).
//
//	card, err := a2acard.Fetch(ctx, policy.NewClient(nil), "https://agent.example/.well-known/agent-card.json")
//	if err != nil { … }
//	agent, err := a2acard.ToAgent(card, cardURL)
//	if err != nil { … }
//	stored, created, err := reg.Register(ctx, agent)
//
// # Security
//
// Fetch sends one GET through the client it is given, which should be the
// SSRF-safe client of [netguard.Policy.NewClient]: it refuses addresses the
// endpoint policy refuses and never follows redirects (a 3xx is an error
// here). The endpoint ToAgent derives from a card is checked by the
// registry's policy when the agent is registered.
//
// # Errors
//
// Fetch returns errors matching [ErrFetch] (the card could not be fetched:
// network failure, refusal by the endpoint policy — which also matches
// [netguard.ErrNotAllowed] — or a status other than 200) or [ErrInvalidCard]
// (the body is over [MaxCardBytes] or not a card). ToAgent returns errors
// matching [ErrInvalidCard] that name the problem.
//
// # Concurrency
//
// The package has no state; every function is safe for concurrent use.
package a2acard
