// Package audit is the mesh's audit log (docs/OPERATIONS.md#audit-log): a
// persisted record of who (an API token's name) did what (registered an
// agent, delegated a task, failed to authenticate…), to what, when, and
// with what outcome.
//
// An [Entry] is one record. A [Store] persists entries (store/memstore and
// store/boltstore implement it; every backend passes the conformance suite
// in internal/harness/storetest). A [Recorder] is what the mesh writes through: its
// [Recorder.Record] never blocks and never fails — entries go on a bounded
// queue that one goroutine appends to the store in batches; on overflow
// the entry is dropped and counted, so an audit backlog can never slow or
// fail a request.
//
//	rec, err := audit.NewRecorder(store, nil)
//	if err != nil {
//		return err
//	}
//	defer rec.Close() // writes what is queued
//	rec.Record(audit.Entry{Actor: "ci", Action: audit.ActionAgentRegister,
//		Target: "billing", Outcome: audit.OutcomeSuccess})
//
// # Order and paging
//
// Entry IDs made by [NewID] start with the entry's time, so stores keep
// entries in time order by sorting IDs bytewise. [Store.ListAudit] lists
// newest first; [Query.Since] bounds a listing by time and [Query.Before]
// (the ID of the last entry of a page) continues it.
//
// # Retention
//
// The Recorder prunes, at start and every Options.PruneInterval (10
// minutes), entries older than Options.MaxAge (30 days) and the oldest
// beyond Options.MaxEntries (100,000): whichever bound is reached first.
// It also prunes as it writes, after every MaxEntries/100 entries (at
// most 1000), so the log stays within about 1 % of MaxEntries at any
// write rate, and a store whose freed space is reused (bbolt) stops
// growing once the log is full (docs/OPERATIONS.md#retention).
//
// # Concurrency
//
// A Recorder is safe for concurrent use; it owns one goroutine, stopped by
// [Recorder.Close]. Store implementations must be safe for concurrent use.
package audit
