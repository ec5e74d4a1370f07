// Package boltstore is the durable [registry.Store] of agentmesh: one bbolt
// file, fsync'd on every commit, so a write that returned nil survives a
// crash of the process the moment after (kill -9) — SPEC section 2.1.
//
// [Open] creates or opens the file and returns a [Store]; [Store.Close]
// releases it. Agent records are stored as the JSON of [registry.Agent],
// auth token included: the store keeps secrets, the registry redacts them
// on read. Nothing of bbolt appears in the API.
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
// newer one with [ErrSchemaTooNew].
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
// with the writer. Writes go through a group commit: a committer goroutine
// owned by the Store takes every queued [Store.UpdateAgent], applies them
// all in one write transaction and commits it — one round of fsyncs (bbolt
// syncs the new pages, then the meta page) for the whole batch — then
// acknowledges each. Writes that arrive during the fsync queue for the
// next round. A lone writer commits at once, with no added delay; N
// concurrent writers share commits, so durable throughput grows with them
// instead of being capped at one commit per write. Each write is isolated:
// one whose function fails writes nothing and does not fail the others.
// The function passed to UpdateAgent runs on the committer goroutine inside
// the transaction, so it must be quick and must not call UpdateAgent.
//
// [Store.Close] stops the committer, waits for it, fails queued writes
// with [ErrClosed] and releases the file.
//
// # Errors
//
// Errors wrap the sentinels of this package, [registry.ErrNotFound] for a
// missing agent, or the operating system's error; match them with
// [errors.Is]. An error returned by an UpdateAgent function is returned
// unchanged. A done context fails a call with the context's error.
package boltstore
