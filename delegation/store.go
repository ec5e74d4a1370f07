package delegation

import (
	"context"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/principal"
)

// Store persists delegation records. Implementations live in
// store/memstore, store/boltstore (and store/etcdstore) and pass the
// conformance suite in internal/harness/storetest.
//
// Every method must be safe for concurrent use. A method called after the
// store is closed returns an error wrapping the store's ErrClosed.
type Store interface {
	// PutDelegations writes (creates or replaces) every record in one
	// durable commit. When it returns nil, all of them are durable.
	PutDelegations(ctx context.Context, recs []Record) error

	// UpdateDelegation atomically reads the record with the given id,
	// passes it to fn and stores fn's result. A missing record gives an
	// error wrapping [ErrNotFound] without calling fn. If fn returns an
	// error, nothing is written and that error is returned unchanged. fn
	// may be called more than once and must not modify cur.
	UpdateDelegation(ctx context.Context, id string, fn func(cur *Record) (*Record, error)) error

	// GetDelegation returns the record with the given id, or an error
	// wrapping [ErrNotFound].
	GetDelegation(ctx context.Context, id string) (Record, error)

	// ListDelegations returns records newest first (by CreatedAt, then
	// ID descending), filtered and paged by f.
	ListDelegations(ctx context.Context, f ListFilter) ([]Record, error)

	// PruneDelegations deletes final records that finished before
	// olderThan, then the oldest final records beyond keep (by FinishedAt),
	// and returns how many it deleted. Records that are not final are never
	// pruned.
	PruneDelegations(ctx context.Context, olderThan time.Time, keep int) (int, error)
}

// OwnerStore is a [Store] that several processes share and that knows
// which of them are alive; store/etcdstore implements it. A running
// delegation belongs to the client running it. Over an OwnerStore, a
// [Client] holds an owner id for as long as it runs, stamps it on the
// records it creates ([Record.Owner]) and, instead of interrupting every
// record it finds running at start, interrupts the running records of
// owners that are no longer alive, whichever client left them. A store
// that one process holds alone (a bbolt file, memory) need not implement
// it: the records it holds running at start are that process's own.
//
// Besides its methods, an OwnerStore keeps one rule in PutDelegations: a
// record with an Owner never replaces a stored record whose status is
// final (the stored one stays as it is, and the call does not fail), so
// that the late write of an owner declared dead cannot overturn the
// interruption. Every method must be safe for concurrent use.
type OwnerStore interface {
	Store

	// HoldOwner makes owner alive, calls held once it is, and blocks
	// while it stays alive. When ctx is done it ends the owner's life at
	// once and returns ctx's error. It returns another error when the
	// owner's life could not begin or ended without that: it could not
	// be renewed in time (for the others, its process died), or the store
	// was closed. An owner id is held once: pass a new one each time.
	HoldOwner(ctx context.Context, owner string, held func()) error

	// WatchOrphans calls fn with the ids of running records whose owner
	// is not alive: first those found when it starts, then those of each
	// owner whose life ends, and, by a periodic check, any written under
	// an owner after its end. A record may be reported more than once;
	// fn must check it (its status and owner) before changing it. fn runs
	// on the caller's goroutine, one call at a time. WatchOrphans returns
	// ctx's error once ctx is done, or an error when the store is closed.
	WatchOrphans(ctx context.Context, fn func(owner string, ids []string)) error
}

// ListFilter selects records for [Store.ListDelegations]. The zero value
// lists the newest DefaultListLimit records.
type ListFilter struct {
	// Status keeps only records with this status; empty keeps all.
	Status Status
	// Statuses keeps only records with one of these statuses (combined
	// with Status when both are set); empty keeps all.
	Statuses []Status
	// Target keeps only records whose TargetAgent is this; empty keeps all.
	Target string
	// Principal keeps only records started by this principal (a record
	// whose Principal is empty is principal.Default's); empty keeps all.
	// [Client.List] sets it to the caller's principal, unless the
	// caller is an admin.
	Principal string
	// Limit is the page size: 0 means DefaultListLimit; the store caps it
	// at MaxListLimit.
	Limit int
	// Offset skips this many matching records.
	Offset int
}

// KeepsPrincipal reports whether the filter's Principal keeps rec.
func (f ListFilter) KeepsPrincipal(rec *Record) bool {
	return f.Principal == "" || principal.Of(rec.Principal) == f.Principal
}

// Page returns the filter's limit and offset as a store applies them:
// the limit defaulted to DefaultListLimit and capped at MaxListLimit, a
// negative offset taken as 0.
func (f ListFilter) Page() (limit, offset int) {
	limit = f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return min(limit, MaxListLimit), max(f.Offset, 0)
}

// StatusSet returns the statuses the filter keeps, sorted and without
// duplicates: nil for every status, and none when no status can pass
// (Status is not one of Statuses).
func (f ListFilter) StatusSet() (statuses []Status, none bool) {
	switch {
	case f.Status != "" && len(f.Statuses) > 0:
		if !slices.Contains(f.Statuses, f.Status) {
			return nil, true
		}
		return []Status{f.Status}, false
	case f.Status != "":
		return []Status{f.Status}, false
	case len(f.Statuses) > 0:
		st := slices.Clone(f.Statuses)
		slices.Sort(st)
		return slices.Compact(st), false
	}
	return nil, false
}

// Page sizes of record listings (docs/API.md#pagination): a Limit of zero or
// less means DefaultListLimit, and one above MaxListLimit is capped to it.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)
