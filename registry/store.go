package registry

import "context"

// Store persists agent records. Implementations live outside this package
// (store/memstore, store/boltstore, store/etcdstore) and must pass the
// conformance suite in internal/storetest.
//
// Every method must be safe for concurrent use. A method called after the
// store is closed returns an error wrapping the store's ErrClosed.
//
// The interface is shaped for a distributed store as well as an embedded
// one: all writes go through [Store.UpdateAgent], a read-modify-write that an
// embedded store runs in one transaction and an etcd store runs as a
// compare-and-set on the key's revision, retrying on conflict.
type Store interface {
	// GetAgent returns the agent stored under name, or an error wrapping
	// [ErrNotFound].
	GetAgent(ctx context.Context, name string) (Agent, error)

	// ListAgents returns every stored agent in ascending name order.
	ListAgents(ctx context.Context) ([]Agent, error)

	// UpdateAgent atomically reads the agent stored under name, passes it to
	// fn (nil when there is none) and stores what fn returns: a non-nil agent
	// is written under name, nil deletes the record (a no-op when there was
	// none). If fn returns an error, nothing is written and UpdateAgent
	// returns that error unchanged.
	//
	// fn may be called more than once (batching and optimistic stores retry
	// it), so it must not have side effects beyond its return values; the
	// last call's result is the one committed. fn must not modify cur.
	// When UpdateAgent returns nil, the write is durable.
	UpdateAgent(ctx context.Context, name string, fn func(cur *Agent) (*Agent, error)) error
}
