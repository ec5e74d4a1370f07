// Package etcdstore is the store of agentmesh for several replicas: every
// record lives in an etcd cluster, under one key prefix, so that mesh
// replicas sharing the prefix share the registry, the delegation records, the
// routing sessions and the circuit breaker state
// (docs/DEPLOYMENT.md#several-replicas-on-etcd). A [Store] implements
// [registry.Store] (and [registry.WatchableStore]), [delegation.Store],
// [breaker.Store] (and [breaker.WatchableStore]), [session.Store] (and
// [session.ActiveCounter]) and [audit.Store], with the semantics of
// store/boltstore: all three backends pass the conformance suite in
// internal/harness/storetest, run here against a real (embedded) etcd.
//
// [Open] connects and returns a Store; [Store.Close] releases it. Nothing
// of etcd appears in the API.
//
//	s, err := etcdstore.Open(ctx, &etcdstore.Options{
//		Endpoints: []string{"http://etcd-0:2379", "http://etcd-1:2379", "http://etcd-2:2379"},
//	})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	reg, err := registry.New(ctx, s, nil) // follows the other replicas' changes
//
// # Key layout
//
// Every key starts with [Options.Prefix] ("/agentmesh/" by default); each
// record is one JSON value (the JSON of [registry.Agent], of
// [delegation.Record], of [breaker.Snapshot], of [session.Session], of
// [audit.Entry], tokens and secret hashes included):
//
//	meta/schema_version                         → "1" (SchemaVersion)
//	agents/<name>                               → agent (with a lease when it has a TTL)
//	breakers/<name>                             → breaker snapshot
//	delegations/records/<id>                    → delegation record
//	delegations/by_created/<newest>             → header  (index: all records, newest first)
//	delegations/by_status/<status>/<newest>     → header  (index: by status, newest first)
//	delegations/by_finished/<finished><id>      → header  (index: final records, oldest first)
//	delegations/by_owner/<owner>/<id>           → header  (index: running records, by owner)
//	delegations/owners/<owner>                  → time taken (one per live owner, on its lease)
//	sessions/records/<id>                       → session           ┐
//	sessions/by_expiry/<expires><id>            → user ID or ""     ├ one lease per session
//	sessions/by_user/<user>                     → id of the active session ┘ (while active)
//	audit/<descending id>                       → audit entry (newest first)
//
// Names, ids and user IDs are used as they are (etcd keys are bytes, and
// range order is byte order, which is the order ListAgents promises).
// <newest> and <descending id> are order keys whose ascending order is
// newest first (see delegation.go): etcd limits a range cheaply only in
// ascending key order.
// Times in keys are 24 hex digits that sort in time order. A header is the
// small JSON of a record's creation and finish times, status and target.
//
// # Leases
//
//   - An agent with a TTL carries an etcd lease of its removal horizon,
//     TTL + 3 × TTL (docs/AGENTS.md#lifetime-ttl-and-heartbeats), so etcd
//     deletes an agent no replica heard from even if no replica sweeps. A heartbeat (a write that changes
//     LastSeen) renews the lease with one keep-alive; a TTL change moves the
//     agent to a new lease and revokes the old one. The registry's own
//     sweep removes expired agents too; both end in the same deletion.
//   - A session's record, expiry entry and (while active) its user's slot
//     share one lease ending [Options.SessionLeaseGrace] (1 h) after its
//     ExpiresAt: the session Manager decides expiry on its own clock and
//     sweeps with [Store.DeleteExpiredSessions]; the lease only makes sure
//     that sessions go even when no replica sweeps. A write that moves
//     ExpiresAt (every turn) grants a new lease and revokes the old one.
//   - A delegation owner — the id a replica's delegation client holds
//     while it runs ([Store.HoldOwner]) — has a key on a lease of
//     [Options.OwnerTTL] (5 s), kept alive by a keep-alive every third of
//     it. When the replica dies the lease expires and etcd deletes the
//     key; every replica's [Store.WatchOrphans] sees the deletion and its
//     delegation client marks the dead owner's running records failed
//     with code interrupted, in a transaction on each record's mod
//     revision, so that one replica does it, once. A clean shutdown
//     revokes the lease once the replica's records are written. A record
//     with an owner never overwrites a final one ([Store.PutDelegations]),
//     so a replica declared dead cannot revive its records.
//   - Delegation records, audit entries and breaker state carry no lease:
//     records and entries are pruned by [Store.PruneDelegations] and
//     [Store.PruneAudit] (retention), breaker state is deleted with its
//     agent.
//
// # Transactions
//
// Every read-modify-write ([Store.UpdateAgent], [Store.UpdateDelegation],
// [Store.UpdateSession], [Store.UpdateActiveSession]) reads the keys it
// depends on, calls the update function with a fresh copy, and commits in
// one transaction that compares the mod revisions of those keys with the
// ones read; when another replica wrote meanwhile the comparison fails
// and it reads again and calls the function again. One active session per
// user holds across replicas because creating a session compares the
// user's slot key (and the key of the session it names, and that the new
// session's key does not exist) in the same transaction that writes them.
// Within one Store, writes to one key are also serialised locally, so that
// the writers of one process do not conflict with each other.
//
// # Watches
//
// [Store.WatchAgents] streams a snapshot of the agents and then every
// change from the next revision on (lease expiries arrive as deletions),
// starting again from a new snapshot when the watch breaks or its revision
// was compacted. A [registry.Registry] over the Store runs it, so every
// replica's registry view, events, discovery index and classifiers follow
// the changes the others make. [Store.WatchBreakers] does the same for the
// breaker keys: a [breaker.Set] over the Store that runs [breaker.Set.Follow]
// applies the transitions the other replicas save, in revision order,
// recognising the echoes of its own saves by the revisions
// [Store.SaveBreakerRevision] returns.
//
// # Costs
//
// Reads are linearizable range requests. A write costs one transaction,
// plus a lease grant when it needs a new lease (a new agent with a TTL, a
// session whose expiry moved) and a keep-alive for an agent heartbeat.
// [Store.PutDelegations] writes up to 17 records (about 1 MiB) per
// transaction, trying first as new records. [Store.ListDelegations] reads
// the index entries up to the end of the page plus the page's records;
// filtering by target scans the creation index, so it also reads the
// entries of newer records of other targets. Pruning and the session
// sweep cost the records they delete. An audit page is one limited range;
// pruning the audit log is one range deletion by age, and by count a
// keys-only read of the entries kept. Etcd keeps old revisions until
// compaction: run etcd with auto-compaction (docs/DEPLOYMENT.md).
//
// Etcd must accept requests large enough for a delegation record with a
// 4 MiB result: run it with --max-request-bytes of 8 MiB or more.
//
// # Concurrency
//
// A Store is safe for concurrent use by multiple goroutines and starts no
// goroutines (its etcd client does; the watches run on their callers'). [Store.Close] cancels the calls in
// flight, waits for them and closes the client.
//
// # Errors
//
// Errors wrap the sentinels of this package ([ErrClosed],
// [ErrUnavailable] when etcd did not answer within the timeout,
// [ErrCorrupt], [ErrSchemaTooNew]), the consumer packages' not-found and
// conflict sentinels ([registry.ErrNotFound], [delegation.ErrNotFound],
// [session.ErrNotFound], [session.ErrConflict]), or etcd's error. An error
// returned by an update function is returned unchanged, with nothing
// written. A done context fails a call with the context's error.
package etcdstore
