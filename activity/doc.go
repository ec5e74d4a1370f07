// Package activity keeps what a mesh did recently, in memory and bounded,
// for the dashboard and the API routes that serve it: routing decisions,
// delegations per minute with their latencies, breaker transitions.
//
// Nothing here is durable or shared between replicas: each process keeps
// what it saw itself, and forgets it on restart. Every collection has a
// fixed bound, so a busy mesh costs the same memory as a quiet one.
package activity
