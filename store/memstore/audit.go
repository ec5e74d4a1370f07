package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/audit"
)

var _ audit.Store = (*Store)(nil)

// AppendAudit implements [audit.Store.AppendAudit]: it stores copies of
// entries, in ID order; an entry with a stored ID replaces it. An entry
// with an empty or oversized ID fails the call (wrapping
// [audit.ErrInvalid]) with nothing written.
func (s *Store) AppendAudit(ctx context.Context, entries []audit.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range entries {
		if err := audit.CheckEntry(&entries[i]); err != nil {
			return fmt.Errorf("memstore: append audit: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memstore: append audit: %w", ErrClosed)
	}
	for _, e := range entries {
		e = e.Clone()
		n := len(s.audit)
		if n == 0 || s.audit[n-1].ID < e.ID { // the usual case: newer than all
			s.audit = append(s.audit, e)
			continue
		}
		i, found := slices.BinarySearchFunc(s.audit, e.ID, byID)
		if found {
			s.audit[i] = e
		} else {
			s.audit = slices.Insert(s.audit, i, e)
		}
	}
	return nil
}

func byID(e audit.Entry, id string) int { return strings.Compare(e.ID, id) }

// ListAudit implements [audit.Store.ListAudit]: copies of the entries
// newest first, filtered and paged by q.
func (s *Store) ListAudit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := q.PageLimit()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("memstore: list audit: %w", ErrClosed)
	}
	end := len(s.audit)
	if q.Before != "" {
		end, _ = slices.BinarySearchFunc(s.audit, q.Before, byID)
	}
	start := 0
	if !q.Since.IsZero() {
		start, _ = slices.BinarySearchFunc(s.audit, audit.MinID(q.Since), byID)
	}
	out := []audit.Entry{}
	for i := end - 1; i >= start && len(out) < limit; i-- {
		out = append(out, s.audit[i].Clone())
	}
	return out, nil
}

// PruneAudit implements [audit.Store.PruneAudit].
func (s *Store) PruneAudit(ctx context.Context, olderThan time.Time, keep int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("memstore: prune audit: %w", ErrClosed)
	}
	n := 0
	if !olderThan.IsZero() {
		n, _ = slices.BinarySearchFunc(s.audit, audit.MinID(olderThan), byID)
	}
	if keep > 0 && len(s.audit)-n > keep {
		n = len(s.audit) - keep
	}
	if n > 0 {
		s.audit = slices.Delete(s.audit, 0, n)
	}
	return n, nil
}
