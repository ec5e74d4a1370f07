// Package boltstore is the durable store of agentmesh: one bbolt file,
// fsync'd on every commit, so a write that returned nil survives a crash of
// the process the moment after (kill -9); see docs/DESIGN.md#stores. A
// [Store] implements [registry.Store] (agents), [delegation.Store]
// (delegation records), [breaker.Store] (circuit breaker state) and
// [session.Store] (routing sessions, one active per user, with
// [session.ActiveCounter]) and [audit.Store] (the audit log).
//
// [Open] creates or opens the file and returns a [Store]; [Store.Close]
// releases it. Agent records are stored as the JSON of [registry.Agent],
// auth token included: the store keeps secrets, the registry redacts them
// on read. Delegation records are stored as the JSON of
// [delegation.Record], SecretHash included, and breaker snapshots as the
// JSON of [breaker.Snapshot]. Nothing of bbolt appears in the API.
//
//	s, err := boltstore.Open(filepath.Join(dir, "mesh.db"), nil)
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	reg, err := registry.New(ctx, s, nil)
//
// # File layout
//
// The file holds the buckets agents, delegations, sessions,
// sessions_by_user, breakers, audit and meta, all created when the file is
// created so the layout is stable as later features fill them. The meta
// bucket records the schema version ([SchemaVersion]). Open migrates a
// store with an older version forward, in one transaction, and refuses a
// newer one with [ErrSchemaTooNew]. Buckets nested in a top-level bucket
// can be added without a new version: Open creates the missing ones.
//
// agents maps a name to its record; breakers maps a breaker name to its
// snapshot; audit holds the audit log: a nested bucket entries (entry ID →
// JSON of [audit.Entry]; IDs start with the entry's time, so the bucket is
// in time order and listings and prunes walk it from one end) and the
// entry count. Files written before the audit log have an empty audit
// bucket; Open adds the nested bucket, with no schema change. delegations holds five nested buckets and a record count:
//
//	records      id                             → header · JSON record
//	by_created   created · id                   → (empty)
//	by_status    len16 · status · created · id  → (empty)
//	by_target    len16 · target · created · id  → status
//	by_finished  finished · id                  → (empty), final records only
//
// Times in keys are 12 bytes that sort in time order (Unix seconds with
// the sign bit flipped, then nanoseconds, big-endian). A listing walks one
// index backwards — by target when the filter names one (checking the
// status stored in the entry), else by status (merging the statuses asked
// for), else by creation time — skipping its offset without decoding
// anything, and decodes only the records it returns: at 100,000 records a
// page of 50 costs the same whatever the filter. Pruning walks by_finished
// from its start. The header of a stored record (its creation and finish
// times, status and target) lets a replace or a prune remove the old index
// entries without decoding the JSON, which may carry a 4 MiB result.
//
// A new file is built under a temporary name and linked into place, so a
// crash never leaves a half-made store at the path. An existing file is
// checked at Open: a damaged, truncated or foreign file is refused with a
// clear error ([ErrCorrupt], [ErrNotStore]), never reset and never a panic.
// The check reads every page, so Open takes time proportional to the size
// of the file.
//
// # Concurrency
//
// A Store is safe for concurrent use by multiple goroutines, and one file
// can be open in one Store at a time: the file is locked, and a second Open
// (from this process or another) waits up to [Options.Timeout] and fails
// with [ErrLocked].
//
// Reads run in read-only transactions, concurrently with each other and
// with the writer. Writes — [Store.UpdateAgent], [Store.PutDelegations],
// [Store.UpdateDelegation], [Store.SaveBreaker], [Store.DeleteBreaker] —
// go through a group commit: a committer goroutine owned by the Store
// takes every queued write, applies them all in one write transaction and
// commits it — one round of fsyncs (bbolt syncs the new pages, then the
// meta page) for the whole batch — then acknowledges each. Writes that
// arrive during the fsync queue for the next round. A lone writer commits
// at once, with no added delay; N concurrent writers share commits, so
// durable throughput grows with them instead of being capped at one commit
// per write. Each write is isolated: one whose function fails writes
// nothing and does not fail the others. The functions passed to
// UpdateAgent and UpdateDelegation run on the committer goroutine inside
// the transaction, so they must be quick and must not call the store's
// write methods. [Store.PruneDelegations] runs in transactions of its own,
// of at most 1000 deletions each, outside the group commit.
//
// [Store.Close] stops the committer, waits for it, fails queued writes
// with [ErrClosed] and releases the file.
//
// # Errors
//
// Errors wrap the sentinels of this package, [registry.ErrNotFound] for a
// missing agent, [delegation.ErrNotFound] for a missing delegation record,
// or the operating system's error; match them with [errors.Is]. An error
// returned by an UpdateAgent or UpdateDelegation function is returned
// unchanged. A done context fails a call with the context's error.
package boltstore
