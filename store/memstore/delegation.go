package memstore

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
)

var _ delegation.Store = (*Store)(nil)

// record is a stored delegation record and the revision that wrote it.
// The revision lets UpdateDelegation tell whether the record changed
// while fn ran. Records are held by pointer so that s.order and
// s.delegations share them.
type record struct {
	rec delegation.Record
	rev uint64
}

// compareCreated orders records by CreatedAt, then ID (byte-wise).
func compareCreated(a, b *record) int {
	if c := a.rec.CreatedAt.Compare(b.rec.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.rec.ID, b.rec.ID)
}

// PutDelegations implements [delegation.Store.PutDelegations]: it stores a
// deep copy of every record of recs, creating or replacing the record with
// its ID, all at once; records with the same ID are written in order, so
// the last one stays. A record with an empty ID fails the call with
// nothing written. A nil or empty recs writes nothing.
func (s *Store) PutDelegations(ctx context.Context, recs []delegation.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range recs {
		if recs[i].ID == "" {
			return errors.New("memstore: put delegation: empty id")
		}
	}
	copies := make([]delegation.Record, len(recs))
	for i := range recs {
		copies[i] = recs[i].Clone()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memstore: put delegations: %w", ErrClosed)
	}
	for _, rec := range copies {
		s.putLocked(rec)
	}
	return nil
}

// putLocked stores rec, which the store owns. s.mu is held for writing.
func (s *Store) putLocked(rec delegation.Record) {
	if s.delegations == nil {
		s.delegations = make(map[string]*record)
	}
	s.rev++
	r, ok := s.delegations[rec.ID]
	if ok && r.rec.CreatedAt.Equal(rec.CreatedAt) {
		r.rec, r.rev = rec, s.rev // same place in s.order
		return
	}
	if ok {
		i := s.position(r)
		s.order = slices.Delete(s.order, i, i+1)
	}
	r = &record{rec: rec, rev: s.rev}
	s.delegations[rec.ID] = r
	i, _ := slices.BinarySearchFunc(s.order, r, compareCreated)
	s.order = slices.Insert(s.order, i, r)
}

// position returns the index of r, which is stored, in s.order.
func (s *Store) position(r *record) int {
	if i, found := slices.BinarySearchFunc(s.order, r, compareCreated); found && s.order[i] == r {
		return i
	}
	return slices.Index(s.order, r) // unreachable while s.order is sorted
}

// UpdateDelegation implements [delegation.Store.UpdateDelegation]. fn
// gets a deep copy of the current record and is called without any lock
// held; if another write to the record commits while fn runs, fn is called
// again with the new record. What fn returns is copied before it is
// stored. If fn returns nil and no error, nothing is written; a record
// with another ID is refused with an error, and nothing is written. A
// panic in fn propagates to the caller with nothing written.
func (s *Store) UpdateDelegation(ctx context.Context, id string, fn func(cur *delegation.Record) (*delegation.Record, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur, rev, err := s.readDelegation(id)
		if err != nil {
			return err
		}
		next, err := fn(&cur)
		if err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		if next.ID != id {
			return fmt.Errorf("memstore: update delegation %q: the update function changed the id to %q", id, next.ID)
		}
		done, err := s.commitDelegation(rev, next.Clone())
		if done || err != nil {
			return err
		}
	}
}

// readDelegation returns a copy of the record id and its revision.
func (s *Store) readDelegation(id string) (delegation.Record, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return delegation.Record{}, 0, fmt.Errorf("memstore: update delegation %q: %w", id, ErrClosed)
	}
	r, ok := s.delegations[id]
	if !ok {
		return delegation.Record{}, 0, fmt.Errorf("memstore: delegation %q: %w", id, delegation.ErrNotFound)
	}
	return r.rec.Clone(), r.rev, nil
}

// commitDelegation stores next if its record still has revision rev, and
// reports whether it did.
func (s *Store) commitDelegation(rev uint64, next delegation.Record) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, fmt.Errorf("memstore: update delegation %q: %w", next.ID, ErrClosed)
	}
	r, ok := s.delegations[next.ID]
	if !ok {
		// Pruned while fn ran: the next read reports it missing.
		return false, nil
	}
	if r.rev != rev {
		return false, nil // changed since read: call fn again
	}
	s.putLocked(next)
	return true, nil
}

// GetDelegation implements [delegation.Store.GetDelegation]: it returns a
// deep copy of the record with the given id, SecretHash included, or an
// error wrapping [delegation.ErrNotFound].
func (s *Store) GetDelegation(ctx context.Context, id string) (delegation.Record, error) {
	if err := ctx.Err(); err != nil {
		return delegation.Record{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return delegation.Record{}, fmt.Errorf("memstore: get delegation %q: %w", id, ErrClosed)
	}
	r, ok := s.delegations[id]
	if !ok {
		return delegation.Record{}, fmt.Errorf("memstore: delegation %q: %w", id, delegation.ErrNotFound)
	}
	return r.rec.Clone(), nil
}

// ListDelegations implements [delegation.Store.ListDelegations]: deep
// copies of the records, newest first (CreatedAt, then ID, descending;
// IDs byte-wise), filtered by f. Status and Statuses both filter (a record
// must pass both when both are set). A Limit ≤ 0 means
// [delegation.DefaultListLimit]; a Limit over [delegation.MaxListLimit]
// is capped; a negative Offset counts as 0.
func (s *Store) ListDelegations(ctx context.Context, f delegation.ListFilter) ([]delegation.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, offset := f.Page()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("memstore: list delegations: %w", ErrClosed)
	}
	out := []delegation.Record{}
	for i := len(s.order) - 1; i >= 0 && len(out) < limit; i-- {
		rec := &s.order[i].rec
		switch {
		case f.Status != "" && rec.Status != f.Status,
			len(f.Statuses) > 0 && !slices.Contains(f.Statuses, rec.Status),
			f.Target != "" && rec.TargetAgent != f.Target,
			!f.KeepsPrincipal(rec):
			continue
		case offset > 0:
			offset--
			continue
		}
		out = append(out, rec.Clone())
	}
	return out, nil
}

// PruneDelegations implements [delegation.Store.PruneDelegations]: it
// deletes the final records that finished before olderThan, then, while
// more than keep records remain, the final records that finished first
// (by FinishedAt, or UpdatedAt when FinishedAt is nil; ties by ID), and
// returns how many it deleted. Records that are not final are never
// deleted. keep ≤ 0 means no limit on the count.
func (s *Store) PruneDelegations(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("memstore: prune delegations: %w", ErrClosed)
	}
	excess := len(s.delegations) - keep
	if keep <= 0 {
		excess = 0
	}
	// The victims are the first max(old, excess) final records in finish
	// order, old being those that finished before olderThan. The client
	// prunes every few seconds, so they are selected with a heap of that
	// size in one pass (a full sort of 100,000 records took 0.46 s under
	// the store's lock), and below the bounds the pass ends the prune.
	old := 0
	for _, r := range s.delegations {
		if r.rec.Status.Final() && finishTime(&r.rec).Before(olderThan) {
			old++
		}
	}
	want := max(old, excess)
	if want <= 0 {
		return 0, nil
	}
	h := make(pruneHeap, 0, min(want, len(s.delegations)))
	for _, r := range s.delegations {
		switch {
		case !r.rec.Status.Final():
		case len(h) < want:
			heap.Push(&h, r)
		case compareFinished(r, h[0]) < 0:
			h[0] = r
			heap.Fix(&h, 0)
		}
	}
	for _, r := range h {
		delete(s.delegations, r.rec.ID)
	}
	n := len(h)
	if n > 0 {
		s.order = slices.DeleteFunc(s.order, func(r *record) bool { return s.delegations[r.rec.ID] != r })
	}
	return n, nil
}

// compareFinished orders final records by finish time, then ID.
func compareFinished(a, b *record) int {
	return cmp.Or(finishTime(&a.rec).Compare(finishTime(&b.rec)), strings.Compare(a.rec.ID, b.rec.ID))
}

// pruneHeap is a max-heap of records by compareFinished: the latest to
// finish on top, so that it keeps the earliest.
type pruneHeap []*record

func (h pruneHeap) Len() int           { return len(h) }
func (h pruneHeap) Less(i, j int) bool { return compareFinished(h[i], h[j]) > 0 }
func (h pruneHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pruneHeap) Push(x any)        { *h = append(*h, x.(*record)) }
func (h *pruneHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

// finishTime is when a final record finished, for pruning.
func finishTime(rec *delegation.Record) time.Time {
	if rec.FinishedAt != nil {
		return *rec.FinishedAt
	}
	return rec.UpdatedAt
}
