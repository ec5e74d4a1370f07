// Package memstore is an in-memory implementation of [registry.Store],
// [delegation.Store], [breaker.Store], [session.Store] (with
// [session.ActiveCounter]) and [audit.Store] for tests, demos and examples.
// Nothing is persisted: the records live as long as the [Store] value.
//
// A [Store] keeps deep copies: records go in and come out cloned, so a
// caller can never change a stored record through a value it passed in or
// got back. (In the WorkflowState of a delegation record's Response, maps
// and slices are copied; values of other types are shared.) Its semantics
// are those of the durable store/boltstore (both pass the conformance
// suite in internal/harness/storetest), with differences that follow from keeping
// Go values instead of JSON: time values keep their location and monotonic
// clock reading, a nil slice or map stays distinct from an empty one, and
// a delegation's Result is kept byte for byte (boltstore re-encodes it as
// compact JSON and refuses one that is not valid JSON).
//
//	s := memstore.New()
//	defer s.Close()
//	err := s.UpdateAgent(ctx, "finance", func(cur *registry.Agent) (*registry.Agent, error) {
//		return &registry.Agent{Name: "finance", Endpoint: "https://finance.example.com/task"}, nil
//	})
//
// # Concurrency
//
// A Store is safe for concurrent use by multiple goroutines and starts no
// goroutines. [Store.UpdateAgent] and [Store.UpdateDelegation] are
// optimistic: they read the record, call fn without holding any lock, and
// commit only if the record did not change in the meantime, calling fn
// again otherwise. So fn may call back into the store, and it may run more
// than once, as the [registry.Store] and [delegation.Store] contracts
// allow. Listing delegation records walks them newest first, in memory,
// until the page is full.
//
// # Errors
//
// [Store.GetAgent] reports a missing record with an error wrapping
// [registry.ErrNotFound], [Store.GetDelegation] and
// [Store.UpdateDelegation] with one wrapping [delegation.ErrNotFound].
// After [Store.Close] every method returns an error wrapping [ErrClosed].
// A context that is already done makes a method return the context's error
// before doing anything. An error returned by the function passed to
// [Store.UpdateAgent] or [Store.UpdateDelegation] is returned unchanged,
// and nothing is written.
package memstore
