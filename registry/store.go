package registry

import "context"

// Store persists agent records. Implementations live outside this package
// (store/memstore, store/boltstore, store/etcdstore) and must pass the
// conformance suite in internal/harness/storetest.
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

// WatchableStore is an optional interface of a [Store] whose records can
// change without this process writing them: a store shared by several
// mesh replicas (store/etcdstore), where other replicas register, update
// and remove agents, and where records can expire by themselves (etcd
// leases). A [Registry] over a WatchableStore follows it — see
// [Registry] — so that its view, its events and everything that
// subscribes to them (the discovery index, the classifiers) stay current
// with the changes made elsewhere. Stores used by one process only
// (store/memstore, store/boltstore) do not implement it.
//
// Changes are ordered by a store revision: a number that grows with every
// commit to the store, across all agents (etcd's revision).
type WatchableStore interface {
	Store

	// UpdateAgentRevision is [Store.UpdateAgent] that also returns the
	// revision of the commit it made: 0 when it wrote nothing (fn
	// deleted a missing record) or failed. The registry orders its own
	// writes against the changes it watches with it.
	UpdateAgentRevision(ctx context.Context, name string, fn func(cur *Agent) (*Agent, error)) (int64, error)

	// WatchAgents reports the stored agents, and then every change to
	// them, to fn until ctx is done. Its first report is a snapshot
	// (AgentChanges.Reset); every later one holds changes committed after
	// the previous report, in revision order. When the store cannot
	// continue the stream where it left off (the revisions it needs were
	// compacted away, or the connection broke), it reports a new snapshot
	// and goes on from there, so a follower never misses a change for
	// long. fn is called from WatchAgents's goroutine, one report at a
	// time; a slow fn delays the stream, not the store's writers.
	//
	// WatchAgents retries failures (an unreachable store, say) itself,
	// and returns only once ctx is done (ctx's error) or the store is
	// closed (an error).
	WatchAgents(ctx context.Context, fn func(AgentChanges)) error
}

// AgentChanges is one report of [WatchableStore.WatchAgents].
type AgentChanges struct {
	// Reset is true when Changes is a snapshot: every stored agent at
	// Revision, one put each, in name order. An agent the reader knows of
	// that is missing from it was deleted (at a revision ≤ Revision).
	Reset bool
	// Revision is the store revision the report brings the reader to:
	// every change up to it has been reported.
	Revision int64
	// Changes are the changes, in revision order.
	Changes []AgentChange
}

// AgentChange is a change to one stored agent.
type AgentChange struct {
	// Name is the agent's name (its key).
	Name string
	// Agent is the stored record after the change, token included; nil
	// when the change deleted it.
	Agent *Agent
	// Revision is the store revision of the commit that made the change
	// (in a snapshot, of the commit that last wrote the record).
	Revision int64
}
